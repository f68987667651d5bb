package io.txhub.spring;

import io.txhub.InvalidInputException;
import io.txhub.Message;
import io.txhub.Producer;
import io.txhub.TxhubException;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Sends txhub messages from inside Spring transactions (docs/producers.md, "From Spring Boot").
 *
 * <p>{@link #send} in a {@code @Transactional} method sends the prepare at once, and returns
 * when Kafka has it, so before the method's transaction commits; when the transaction ends, the
 * commit or rollback envelope follows from its outcome, with no code in the service for either.
 * If the decision cannot be sent (the service dies, or Kafka is down past {@code txhub.timeout-ms}),
 * the hub's check-back settles the message by asking the {@link TxhubCheckbackResolver}: that is
 * why the resolver must read the same database the transaction wrote.
 */
public class TxhubTemplate {
	private static final Logger LOG = LoggerFactory.getLogger(TxhubTemplate.class);

	private final Producer producer;
	private final TxhubProperties props;

	/** @param producer the producer @param props the txhub.* properties */
	public TxhubTemplate(Producer producer, TxhubProperties props) {
		this.producer = Objects.requireNonNull(producer, "producer");
		this.props = Objects.requireNonNull(props, "props");
	}

	/** @return the producer underneath */
	public Producer producer() {
		return producer;
	}

	/**
	 * A message of the configured {@code txhub.biz-id} with a JSON payload.
	 *
	 * @param messageKey the business unique id @param forwardTopic where the hub forwards it
	 * @param json the payload, one JSON value as text @return a builder to add to, then give to {@link #send(Message)}
	 */
	public Message.Builder message(String messageKey, String forwardTopic, String json) {
		if (props.getBizId() == null)
			throw new InvalidInputException("txhub.biz-id is not set: give the biz_id with Message.builder");
		return Message.builder(props.getBizId(), messageKey).payloadJson(json).forwardTopic(forwardTopic);
	}

	/**
	 * Prepares {@code m} inside the current transaction; the decision follows the transaction's
	 * outcome.
	 *
	 * @param m the message (the configured check-back URL and first_after_ms are added when it names none)
	 * @throws IllegalStateException outside a transaction (use {@link #sendOneShot} for a message
	 *         with no transaction of its own)
	 * @throws TxhubException when the prepare is refused or Kafka does not confirm it: the
	 *         exception rolls the transaction back, and the rollback envelope follows
	 */
	public void send(Message m) {
		if (!TransactionSynchronizationManager.isSynchronizationActive()
			|| !TransactionSynchronizationManager.isActualTransactionActive())
			throw new IllegalStateException("TxhubTemplate.send needs a transaction: call it inside a @Transactional method "
				+ "(or use sendOneShot for a message that needs none)");
		Message full = withDefaults(m);
		producer.prepare(full);
		// registered only once the prepare is in Kafka: a failed prepare has nothing to decide
		TransactionSynchronizationManager.registerSynchronization(new Decision(full.bizId(), full.messageKey()));
	}

	/**
	 * Sends {@code m} as a one-shot commit (stored and forwarded at once), with no transaction;
	 * returns when Kafka has it.
	 *
	 * @param m the message
	 */
	public void sendOneShot(Message m) {
		producer.oneShot(withDefaults(m));
	}

	private Message withDefaults(Message m) {
		Objects.requireNonNull(m, "message");
		Message.Builder b = m.toBuilder();
		if (!hasCheckbackUrl(m) && props.getCheckback().getUrl() != null)
			b.checkbackUrl(props.getCheckback().getUrl());
		if (props.getCheckback().getFirstAfterMs() != null && !hasFirstAfter(m))
			b.firstAfterMs(props.getCheckback().getFirstAfterMs());
		return b.build();
	}

	private static boolean hasCheckbackUrl(Message m) {
		return m.checkbackUrl() != null;
	}

	private static boolean hasFirstAfter(Message m) {
		return m.firstAfterMs() != null;
	}

	/** Sends the decision once the transaction has ended. */
	private final class Decision implements TransactionSynchronization {
		private final String bizId;
		private final String messageKey;

		Decision(String bizId, String messageKey) {
			this.bizId = bizId;
			this.messageKey = messageKey;
		}

		@Override
		public void afterCompletion(int status) {
			if (status == STATUS_UNKNOWN) {
				LOG.warn("txhub {}/{}: the transaction's outcome is unknown; the hub's check-back will settle it", bizId, messageKey);
				return;
			}
			boolean commit = status == STATUS_COMMITTED;
			try {
				(commit ? producer.commitAsync(bizId, messageKey) : producer.rollbackAsync(bizId, messageKey))
					.get(props.getTimeoutMs() + 5_000L, TimeUnit.MILLISECONDS);
			} catch (InterruptedException e) {
				Thread.currentThread().interrupt();
				LOG.warn("txhub {}/{}: interrupted sending the {}; the hub's check-back will settle it", bizId, messageKey,
					commit ? "commit" : "rollback");
			} catch (Exception e) {
				LOG.warn("txhub {}/{}: the {} did not reach Kafka ({}); the hub's check-back will settle it", bizId, messageKey,
					commit ? "commit" : "rollback", e.getCause() != null ? e.getCause().getMessage() : e.getMessage());
			}
		}
	}
}
