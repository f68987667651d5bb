package io.txhub.example;

import io.txhub.Dedup;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The downstream side: reads the forward topic and inserts a shipment per order, each once,
 * with {@link Dedup} in the same transaction as the shipment; offsets are committed after the
 * database.
 *
 * <pre>ShippingConsumer TOPIC GROUP IDLE_SECONDS</pre>
 * Settings: TXHUB_BROKERS, ORDERS_JDBC_URL, ORDERS_JDBC_USER.
 */
public final class ShippingConsumer {
	/** How many records were claimed and how many were duplicates. */
	public record Counts(int claimed, int duplicates) {
	}

	private ShippingConsumer() {
	}

	public static void main(String[] args) throws Exception {
		Properties db = new Properties();
		db.setProperty("user", System.getenv().getOrDefault("ORDERS_JDBC_USER", "orders"));
		Counts c = consume(System.getenv().getOrDefault("TXHUB_BROKERS", "localhost:9092"), args[0], args[1],
			System.getenv("ORDERS_JDBC_URL"), db, Duration.ofSeconds(Long.parseLong(args[2])));
		System.out.println(c.claimed() + " claimed, " + c.duplicates() + " duplicates");
	}

	/** Consumes {@code topic} until {@code idle} passes with nothing new. */
	public static Counts consume(String brokers, String topic, String group, String jdbcUrl, Properties db, Duration idle)
		throws SQLException {
		Dedup dedup = new Dedup();
		int claimed = 0, duplicates = 0;
		Map<String, Object> conf = Map.of(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, brokers, ConsumerConfig.GROUP_ID_CONFIG, group,
			ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false, ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
		try (Connection conn = DriverManager.getConnection(jdbcUrl, db);
			KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(conf, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
			dedup.createTable(conn);
			try (Statement st = conn.createStatement()) {
				st.execute("CREATE TABLE IF NOT EXISTS shipments (id bigserial PRIMARY KEY, order_id text NOT NULL, event text NOT NULL)");
			}
			conn.setAutoCommit(false); // each record: the claim and the shipment in one transaction
			consumer.subscribe(List.of(topic));
			long last = System.nanoTime();
			while (System.nanoTime() - last < idle.toNanos()) {
				ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(200));
				for (ConsumerRecord<byte[], byte[]> r : batch) {
					last = System.nanoTime();
					Dedup.Claim claim = dedup.claimRecord(conn, r.headers());
					if (claim.result() == Dedup.Result.CLAIMED) {
						try (PreparedStatement st = conn.prepareStatement("INSERT INTO shipments (order_id, event) VALUES (?, ?)")) {
							st.setString(1, claim.messageKey());
							st.setString(2, new String(r.value(), java.nio.charset.StandardCharsets.UTF_8));
							st.executeUpdate();
						}
						dedup.done(conn, claim);
						claimed++;
					} else {
						duplicates++;
					}
					conn.commit();
				}
				if (!batch.isEmpty())
					consumer.commitSync();
			}
		}
		return new Counts(claimed, duplicates);
	}
}
