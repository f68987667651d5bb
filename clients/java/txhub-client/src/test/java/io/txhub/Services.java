package io.txhub;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.IOException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * What tests/with-services.sh provides (TXHUB_PG, TXHUB_BROKERS, TXHUB_BIN), for the tests that
 * need a real PostgreSQL, Kafka and hub; they are skipped without it. Each test gets its own
 * database, control topic and consumer group, as the C and Python harnesses do.
 */
public final class Services implements AutoCloseable {
	public final String name;
	public final String brokers;
	public final String bin;
	public final String conninfo;
	public final String topic;
	public final String forward;
	private final List<Process> hubs = new ArrayList<>();

	private Services(String name) {
		this.name = name;
		this.brokers = System.getenv("TXHUB_BROKERS");
		this.bin = System.getenv("TXHUB_BIN");
		this.conninfo = System.getenv("TXHUB_PG") + " dbname=" + name;
		this.topic = "ctl." + name;
		this.forward = "fw." + name;
	}

	/** @return the repository's root (for deploy/ and tests/) */
	public static java.nio.file.Path root() {
		java.nio.file.Path p = java.nio.file.Paths.get(System.getProperty("user.dir")).toAbsolutePath();
		for (; p != null; p = p.getParent())
			if (java.nio.file.Files.isDirectory(p.resolve("tests/vectors")))
				return p;
		throw new IllegalStateException("the repository's root is not above " + System.getProperty("user.dir"));
	}

	/** Skips the calling test unless the services are there. */
	public static void require() {
		for (String v : new String[] {"TXHUB_PG", "TXHUB_BROKERS", "TXHUB_BIN"})
			assumeTrue(System.getenv(v) != null && !System.getenv(v).isEmpty(),
				v + " is not set: run through tests/with-services.sh");
	}

	/** A fresh database (migrated by the hub), topic names and group for {@code test}. */
	public static Services create(String test) throws Exception {
		require();
		String base = "j_" + test.toLowerCase().replaceAll("[^a-z0-9]", "");
		String name = base.substring(0, Math.min(40, base.length())) + "_" + ProcessHandle.current().pid();
		try (Connection c = DriverManager.getConnection(jdbcUrl(System.getenv("TXHUB_PG")), props(System.getenv("TXHUB_PG")));
			Statement st = c.createStatement()) {
			st.execute("DROP DATABASE IF EXISTS " + name);
			st.execute("CREATE DATABASE " + name);
		}
		Services s = new Services(name);
		s.txhub("migrate");
		return s;
	}

	/** libpq's conninfo keywords (key=value, space separated, as with-services.sh writes them). */
	static Map<String, String> keywords(String conninfo) {
		Map<String, String> kw = new HashMap<>();
		for (String part : conninfo.trim().split("\\s+")) {
			int eq = part.indexOf('=');
			if (eq > 0)
				kw.put(part.substring(0, eq), part.substring(eq + 1));
		}
		return kw;
	}

	/**
	 * A JDBC URL for a conninfo; a host that is a directory is PostgreSQL's Unix socket there,
	 * reached with junixsocket's socket factory.
	 */
	public static String jdbcUrl(String conninfo) {
		Map<String, String> kw = keywords(conninfo);
		String host = kw.getOrDefault("host", "localhost"), port = kw.getOrDefault("port", "5432");
		String db = kw.getOrDefault("dbname", "postgres");
		if (host.startsWith("/"))
			return "jdbc:postgresql://localhost:" + port + "/" + db
				+ "?socketFactory=org.newsclub.net.unix.AFUNIXSocketFactory$FactoryArg&socketFactoryArg="
				+ host + "/.s.PGSQL." + port;
		return "jdbc:postgresql://" + host + ":" + port + "/" + db;
	}

	static Properties props(String conninfo) {
		Properties p = new Properties();
		Map<String, String> kw = keywords(conninfo);
		p.setProperty("user", kw.getOrDefault("user", System.getProperty("user.name")));
		if (kw.containsKey("password"))
			p.setProperty("password", kw.get("password"));
		return p;
	}

	public String jdbcUrl() {
		return jdbcUrl(conninfo);
	}

	public String user() {
		return props(conninfo).getProperty("user");
	}

	public Connection connect() throws SQLException {
		return DriverManager.getConnection(jdbcUrl(), props(conninfo));
	}

	public List<String> settings() {
		List<String> out = new ArrayList<>();
		for (String s : new String[] {"pg=" + conninfo, "control_topic=" + topic, "group=" + name, "brokers=" + brokers,
			"kafka.session.timeout.ms=6000", "kafka.heartbeat.interval.ms=500"}) {
			out.add("-X");
			out.add(s);
		}
		return out;
	}

	public void txhub(String... args) throws IOException, InterruptedException {
		List<String> cmd = new ArrayList<>(List.of(bin));
		cmd.addAll(List.of(args));
		cmd.addAll(settings());
		Process p = new ProcessBuilder(cmd).redirectErrorStream(true)
			.redirectOutput(new File("/tmp/txhub-" + name + "-" + args[0] + ".log")).start();
		if (p.waitFor() != 0)
			throw new IllegalStateException("txhub " + String.join(" ", args) + " failed: see /tmp/txhub-" + name + "-" + args[0] + ".log");
	}

	/** Starts {@code txhub run} with extra settings. */
	public Process hub(String... extra) throws IOException {
		List<String> cmd = new ArrayList<>(List.of(bin, "run"));
		cmd.addAll(settings());
		for (String s : extra) {
			cmd.add("-X");
			cmd.add(s);
		}
		File log = new File("/tmp/txhub-" + name + "-" + (hubs.size() + 1) + ".log");
		Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log).start();
		hubs.add(p);
		return p;
	}

	/** SIGTERM, then the exit status. */
	public int stop(Process p) throws InterruptedException {
		p.destroy();
		if (!p.waitFor(60, TimeUnit.SECONDS))
			p.destroyForcibly();
		return p.waitFor();
	}

	public Object query(String sql, Object... params) throws SQLException {
		try (Connection c = connect(); PreparedStatement st = c.prepareStatement(sql)) {
			for (int i = 0; i < params.length; i++)
				st.setObject(i + 1, params[i]);
			try (ResultSet rs = st.executeQuery()) {
				return rs.next() ? rs.getObject(1) : null;
			}
		}
	}

	/** Polls {@code sql} until it returns {@code expect} or {@code timeout} passes; returns the last value. */
	public Object waitFor(String sql, Object expect, Duration timeout, Object... params) throws Exception {
		return waitUntil(() -> {
			try {
				return query(sql, params);
			} catch (SQLException e) {
				throw new IllegalStateException(e);
			}
		}, expect, timeout);
	}

	public static <T> T waitUntil(Supplier<T> probe, Object expect, Duration timeout) throws InterruptedException {
		long deadline = System.nanoTime() + timeout.toNanos();
		while (true) {
			T got = probe.get();
			if (Objects.equals(normal(got), normal(expect)) || System.nanoTime() > deadline)
				return got;
			Thread.sleep(100);
		}
	}

	private static Object normal(Object o) {
		return o instanceof Number && !(o instanceof Double) ? ((Number) o).longValue() : o;
	}

	/** Every record on {@code topic}, read from the beginning until {@code idleMs} pass with nothing new. */
	public List<ConsumerRecord<byte[], byte[]>> readTopic(String topic, long idleMs) throws InterruptedException {
		Map<String, Object> conf = new HashMap<>();
		conf.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
		conf.put(ConsumerConfig.GROUP_ID_CONFIG, "junit-reader-" + UUID.randomUUID());
		conf.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
		try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(conf, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
			List<PartitionInfo> parts = null;
			for (int i = 0; i < 100 && (parts == null || parts.isEmpty()); i++) {
				parts = c.partitionsFor(topic, Duration.ofSeconds(5));
				if (parts == null || parts.isEmpty())
					Thread.sleep(100);
			}
			List<TopicPartition> tps = new ArrayList<>();
			for (PartitionInfo p : parts)
				tps.add(new TopicPartition(topic, p.partition()));
			c.assign(tps);
			c.seekToBeginning(tps);
			List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
			// first everything the topic holds now, then until idleMs pass with nothing new
			Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(30));
			long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
			while (end.entrySet().stream().anyMatch(e -> c.position(e.getKey()) < e.getValue()) && System.nanoTime() < deadline)
				for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100)))
					out.add(r);
			long last = System.nanoTime();
			while (System.nanoTime() - last < idleMs * 1_000_000) {
				for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100))) {
					out.add(r);
					last = System.nanoTime();
				}
			}
			return out;
		}
	}

	@Override
	public void close() {
		for (Process p : hubs)
			if (p.isAlive()) {
				p.destroyForcibly();
				try {
					p.waitFor();
				} catch (InterruptedException e) {
					Thread.currentThread().interrupt();
				}
			}
	}
}
