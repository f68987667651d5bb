package io.txhub.example;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.txhub.spring.TxhubTemplate;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/** Places orders: the local transaction and the event, together. */
@Service
public class OrderService {
	/** Where the demo stops, to show what the check-back settles. */
	public enum Crash {
		/** no crash */
		NONE,
		/** the business fails after the prepare: the transaction rolls back, and so does the message */
		FAIL,
		/** the service dies after the prepare, before its local transaction commits: the check-back finds no commit */
		AFTER_PREPARE,
		/** the service dies after the local commit, before the commit envelope: the check-back finds the commit */
		BEFORE_COMMIT
	}

	private static final JsonFactory JSON = new JsonFactory();

	private final JdbcTemplate jdbc;
	private final TxhubTemplate txhub;
	private final String forwardTopic;
	private final boolean crashes;

	public OrderService(JdbcTemplate jdbc, TxhubTemplate txhub, @Value("${orders.forward-topic:orders.created}") String forwardTopic,
		@Value("${orders.crashes-allowed:false}") boolean crashes) {
		this.jdbc = jdbc;
		this.txhub = txhub;
		this.forwardTopic = forwardTopic;
		this.crashes = crashes;
	}

	@Transactional
	public void place(String id, BigDecimal amount, Crash crash) {
		jdbc.update("INSERT INTO orders (id, amount) VALUES (?, ?)", id, amount);
		// fails with a unique violation when a check-back has declared this order rolled back
		jdbc.update("INSERT INTO txhub_barrier (message_key, outcome) VALUES (?, 'committed')", id);
		txhub.send(txhub.message(id, forwardTopic, event(id, amount)).forwardKey(id).build());
		if (crash == Crash.NONE)
			return;
		if (!crashes)
			throw new IllegalArgumentException("crashes are off (orders.crashes-allowed)");
		switch (crash) {
		case FAIL:
			throw new IllegalStateException("order " + id + " failed after its prepare");
		case AFTER_PREPARE:
			die(); // no commit, no rollback
			break;
		case BEFORE_COMMIT:
			TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
				@Override
				public void afterCommit() {
					die(); // committed locally, no decision sent
				}
			});
			break;
		default:
			break;
		}
	}

	/** kill -9 of this JVM: nothing of it runs after (no shutdown hooks, no finally). */
	private static void die() {
		try {
			new ProcessBuilder("kill", "-KILL", Long.toString(ProcessHandle.current().pid())).inheritIO().start().waitFor();
		} catch (Exception e) {
			// no kill(1): halting is the same for this process
		}
		Runtime.getRuntime().halt(137);
	}

	static String event(String id, BigDecimal amount) {
		StringWriter out = new StringWriter();
		try (JsonGenerator g = JSON.createGenerator(out)) {
			g.writeStartObject();
			g.writeStringField("order_id", id);
			g.writeNumberField("amount", amount);
			g.writeEndObject();
		} catch (IOException e) {
			throw new UncheckedIOException(e);
		}
		return out.toString();
	}
}
