package io.txhub.spring.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.txhub.Services;
import io.txhub.example.ShippingConsumer;
import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;
import org.springframework.boot.SpringBootVersion;

/**
 * The sample order service as its own JVM against a real hub: 200 orders, some rolled back by
 * the business, some killed (kill -9) between the prepare and the commit, before or after the
 * local commit, and restarted; every committed order is forwarded once, no rolled-back one,
 * the killed ones settled by the hub's check-back answered by the restarted service; the
 * shipping consumer, on Dedup, processes each once, a duplicate record too. Run on Spring Boot
 * 4 only (the starter's tests run on both; the service's start-ups are most of this test's time).
 */
class OrderServiceEndToEndTest {
	static final int ORDERS = 200;
	static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

	enum Kind {
		OK, FAIL, AFTER_PREPARE, BEFORE_COMMIT
	}

	static Kind kind(int i) {
		if (i % 20 == 3)
			return Kind.FAIL;
		if (i % 50 == 11)
			return Kind.AFTER_PREPARE;
		if (i % 50 == 36)
			return Kind.BEFORE_COMMIT;
		return Kind.OK;
	}

	static String key(int i) {
		return String.format("o-%03d", i);
	}

	Services s;
	int port;
	int starts;

	Process startService() throws Exception {
		List<String> cmd = new ArrayList<>(List.of(new File(System.getProperty("java.home"), "bin/java").getPath(),
			"-XX:TieredStopAtLevel=1", "-cp", System.getProperty("java.class.path"), "io.txhub.example.OrderServiceApplication",
			"--server.port=" + port, "--spring.datasource.url=" + s.jdbcUrl(), "--spring.datasource.username=" + s.user(),
			"--txhub.brokers=" + s.brokers, "--txhub.control-topic=" + s.topic, "--txhub.checkback.secret=s3cret",
			"--orders.forward-topic=" + s.forward, "--orders.crashes-allowed=true", "--spring.main.banner-mode=off"));
		File log = new File("/tmp/txhub-" + s.name + "-service-" + (++starts) + ".log");
		Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log).start();
		long deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
		while (System.nanoTime() < deadline) {
			if (!p.isAlive())
				fail("the order service exited with " + p.exitValue() + ": see " + log);
			try {
				// up when the check-back endpoint answers (400: not a check-back)
				if (HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/txhub/check")).build(),
					HttpResponse.BodyHandlers.discarding()).statusCode() == 400)
					return p;
			} catch (IOException e) {
				// not listening yet
			}
			Thread.sleep(100);
		}
		p.destroyForcibly();
		throw new AssertionError("the order service did not start: see " + log);
	}

	int post(String query) throws Exception {
		return HTTP.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/orders?" + query))
			.POST(HttpRequest.BodyPublishers.noBody()).timeout(Duration.ofSeconds(60)).build(), HttpResponse.BodyHandlers.discarding())
			.statusCode();
	}

	@Test
	void twoHundredOrdersSomeRolledBackSomeKilledEachCommittedOneForwardedAndShippedOnce() throws Exception {
		Services.require();
		assumeTrue(SpringBootVersion.getVersion().startsWith("4"), "the end-to-end test runs on Spring Boot 4 only");
		s = Services.create("order_service_e2e");
		try (ServerSocket free = new ServerSocket(0)) {
			port = free.getLocalPort();
		}
		Process service = null;
		try {
			// a restart may take long on a busy machine: the hub keeps asking (at most every 2 s)
			// rather than give a message up as check_failed while the service is down
			s.hub("checkback.secret=s3cret", "checkback.first_after_ms=1000", "checkback.backoff_ms=300", "checkback.backoff_max_ms=2000",
				"checkback.max_attempts=1000");
			service = startService();
			Map<String, Kind> kinds = new TreeMap<>();
			for (int i = 0; i < ORDERS; i++) {
				Kind k = kind(i);
				kinds.put(key(i), k);
				String q = "id=" + key(i) + "&amount=" + (i + 1) + ".25";
				switch (k) {
				case OK:
					assertEquals(201, post(q), key(i));
					break;
				case FAIL:
					assertEquals(400, post(q + "&crash=fail"), key(i));
					break;
				default:
					try {
						post(q + "&crash=" + k.name().toLowerCase().replace('_', '-'));
						fail(key(i) + ": the service answered instead of dying");
					} catch (IOException expected) {
						// the connection died with the service
					}
					assertEquals(137, service.waitFor(), "killed by SIGKILL");
					service = startService();
				}
			}
			long committed = kinds.values().stream().filter(k -> k == Kind.OK || k == Kind.BEFORE_COMMIT).count();
			assertEquals(186, committed);
			assertEquals((long) ORDERS, s.waitFor("SELECT count(*) FROM txhub.messages WHERE status = 'rolled_back' "
				+ "OR (status = 'committed' AND send_status = 'sent')", ORDERS, Duration.ofSeconds(300)));

			Map<String, String> state = new HashMap<>();
			Map<String, Integer> checks = new HashMap<>();
			try (Connection c = s.connect(); Statement st = c.createStatement();
				ResultSet rs = st.executeQuery("SELECT message_key, status || '/' || coalesce(send_status, '-'), check_attempts FROM txhub.messages")) {
				while (rs.next()) {
					state.put(rs.getString(1), rs.getString(2));
					checks.put(rs.getString(1), rs.getInt(3));
				}
			}
			assertEquals(ORDERS, state.size());
			for (Map.Entry<String, Kind> e : kinds.entrySet()) {
				boolean commits = e.getValue() == Kind.OK || e.getValue() == Kind.BEFORE_COMMIT;
				assertEquals(commits ? "committed/sent" : "rolled_back/-", state.get(e.getKey()), e.getKey() + " " + e.getValue());
				boolean killed = e.getValue() == Kind.AFTER_PREPARE || e.getValue() == Kind.BEFORE_COMMIT;
				if (killed)
					assertTrue(checks.get(e.getKey()) >= 1, e.getKey() + " was settled by a check-back");
			}
			assertEquals(0L, ((Number) s.query("SELECT count(*) FROM txhub.rejected")).longValue());
			assertEquals(0L, ((Number) s.query("SELECT count(*) FROM orders WHERE id IN (SELECT message_key FROM txhub.messages "
				+ "WHERE status = 'rolled_back')")).longValue());

			// every committed order forwarded once, no rolled-back one
			Map<String, Integer> forwarded = new HashMap<>();
			ConsumerRecord<byte[], byte[]> first = null;
			for (ConsumerRecord<byte[], byte[]> r : s.readTopic(s.forward, 2000)) {
				forwarded.merge(new String(r.headers().lastHeader("txhub-message-key").value(), StandardCharsets.UTF_8), 1, Integer::sum);
				first = first == null ? r : first;
			}
			assertEquals(committed, forwarded.size());
			for (Map.Entry<String, Integer> e : forwarded.entrySet()) {
				assertEquals(1, e.getValue(), e.getKey());
				Kind k = kinds.get(e.getKey());
				assertTrue(k == Kind.OK || k == Kind.BEFORE_COMMIT, e.getKey() + " " + k);
			}

			// a killed order's late retry is fenced off by the check-back's answer
			assertEquals(409, post("id=" + key(11)));

			// downstream: each order shipped once, a duplicate record too
			Properties db = new Properties();
			db.setProperty("user", s.user());
			String group = "shipping-" + s.name;
			ShippingConsumer.Counts got = ShippingConsumer.consume(s.brokers, s.forward, group, s.jdbcUrl(), db, Duration.ofSeconds(3));
			assertEquals(new ShippingConsumer.Counts((int) committed, 0), got);
			Map<String, Object> conf = Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, s.brokers);
			try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(conf, new ByteArraySerializer(), new ByteArraySerializer())) {
				p.send(new ProducerRecord<>(s.forward, null, first.key(), first.value(), first.headers())).get();
			}
			got = ShippingConsumer.consume(s.brokers, s.forward, group, s.jdbcUrl(), db, Duration.ofSeconds(3));
			assertEquals(new ShippingConsumer.Counts(0, 1), got);
			assertEquals(committed, ((Number) s.query("SELECT count(DISTINCT order_id) FROM shipments")).longValue());
			assertEquals(committed, ((Number) s.query("SELECT count(*) FROM shipments")).longValue());
		} finally {
			if (service != null && service.isAlive()) {
				service.destroy();
				service.waitFor();
			}
			s.close();
		}
	}
}
