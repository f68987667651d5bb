package io.txhub;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.ClusterAuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * An idempotent Kafka producer of txhub envelopes (docs/producers.md, "Producing from Java").
 *
 * <p>Each envelope's record key is its {@code message_key}, so a message's prepare and decision
 * land in one partition, in order. The producer is idempotent with {@code acks=all}, and every
 * synchronous call returns only when the broker has confirmed the envelope: after
 * {@link #prepare} returns, the prepare is stored by Kafka and the local transaction may commit.
 * The {@code *Async} forms return a {@link CompletableFuture} completed on the Kafka client's I/O
 * thread (do not block in its callbacks). Input is validated first: bad input throws
 * {@link InvalidInputException} naming the field, and sends nothing.
 *
 * <p>Thread-safe; one per application is the norm. Close it when done.
 */
public final class Producer implements AutoCloseable {
	/** The default control topic. */
	public static final String CONTROL_TOPIC_DEFAULT = "txhub.control";

	private static final boolean OTEL = present("io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator");

	private final KafkaProducer<byte[], byte[]> kafka;
	private final String controlTopic;
	private final int maxBytes;
	private final boolean traceFromOtel;

	private Producer(Builder b) {
		if (b.brokers == null || b.brokers.isBlank())
			throw new InvalidInputException("brokers is required");
		if (!Envelope.validTopic(b.controlTopic))
			throw new InvalidInputException("control_topic is not a valid Kafka topic name");
		if (b.maxBytes < 64 || b.maxBytes > 104_857_600)
			throw new InvalidInputException("max_bytes must be from 64 to 104857600, as the hub's envelope.max_bytes");
		if (b.timeoutMs < 1 || b.timeoutMs > 3_600_000)
			throw new InvalidInputException("timeout_ms must be from 1 to 3600000");
		controlTopic = b.controlTopic;
		maxBytes = b.maxBytes;
		traceFromOtel = b.traceFromOpenTelemetry && OTEL;
		Map<String, Object> conf = config(b);
		try {
			kafka = new KafkaProducer<>(conf, new ByteArraySerializer(), new ByteArraySerializer());
		} catch (KafkaException e) {
			throw new InvalidInputException("cannot create the Kafka producer: " + e.getMessage());
		}
	}

	private static Map<String, Object> config(Builder b) {
		for (Map.Entry<String, Object> e : b.kafka.entrySet()) {
			String name = e.getKey(), value = String.valueOf(e.getValue());
			if (name.equals(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG) && !value.equalsIgnoreCase("true"))
				throw new InvalidInputException("kafka " + name + "=" + value + ": the producer must stay idempotent");
			if (name.equals(ProducerConfig.ACKS_CONFIG) && !value.equals("all") && !value.equals("-1"))
				throw new InvalidInputException("kafka " + name + "=" + value + ": envelopes need acks=all");
			if (name.equals(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG) || name.equals(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG))
				throw new InvalidInputException("kafka " + name + ": set it with brokers / timeoutMs");
			if (name.equals(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG) || name.equals(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG)
				|| name.equals(ProducerConfig.TRANSACTIONAL_ID_CONFIG))
				throw new InvalidInputException("kafka " + name + ": the producer sets it");
		}
		Map<String, Object> conf = new HashMap<>();
		conf.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, b.brokers);
		conf.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
		conf.put(ProducerConfig.ACKS_CONFIG, "all");
		conf.put(ProducerConfig.LINGER_MS_CONFIG, 0);
		conf.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, b.timeoutMs);
		// delivery.timeout.ms must cover one request
		conf.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, Math.min(30_000, b.timeoutMs));
		conf.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, (long) b.timeoutMs);
		conf.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, Math.max(1_048_576, b.maxBytes + 4096));
		conf.put(ProducerConfig.CLIENT_ID_CONFIG, "txhub-producer");
		conf.putAll(b.kafka);
		return conf;
	}

	private static boolean present(String cls) {
		try {
			Class.forName(cls, false, Producer.class.getClassLoader());
			return true;
		} catch (ClassNotFoundException | LinkageError e) {
			return false;
		}
	}

	/**
	 * @param brokers Kafka's bootstrap servers, e.g. {@code localhost:9092}
	 * @return a builder
	 */
	public static Builder builder(String brokers) {
		return new Builder(brokers);
	}

	/** @return the control topic envelopes go to */
	public String controlTopic() {
		return controlTopic;
	}

	/**
	 * Validates, encodes and queues an envelope.
	 *
	 * @param type the step
	 * @param m the message (a decision needs only the ids)
	 * @return completed when Kafka confirmed the envelope, or exceptionally with a
	 *         {@link TxhubException} ({@code KAFKA}: sending the same envelope again is safe)
	 * @throws InvalidInputException for bad input; nothing was sent
	 */
	public CompletableFuture<Void> sendAsync(Type type, Message m) {
		if (type == null || m == null)
			throw new InvalidInputException(type == null ? "type is null" : "the message is null");
		Message withTrace = type == Type.ROLLBACK ? m : withTrace(m);
		byte[] value = Envelope.encode(type, withTrace, maxBytes);
		if (type != Type.ROLLBACK && controlTopic.equals(m.forwardTopic))
			throw new InvalidInputException("forward_topic is the control topic: the hub would read its own output");
		CompletableFuture<Void> done = new CompletableFuture<>();
		ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(controlTopic, m.messageKey.getBytes(StandardCharsets.UTF_8), value);
		try {
			kafka.send(rec, (md, err) -> {
				if (err == null)
					done.complete(null);
				else
					done.completeExceptionally(outcome(err));
			});
		} catch (RuntimeException e) {
			done.completeExceptionally(outcome(e));
		}
		return done;
	}

	/** The current OpenTelemetry span's context, when the API is there and the message has none. */
	private Message withTrace(Message m) {
		if (!traceFromOtel || m.traceparent != null || m.payloadKind == Message.PayloadKind.NONE)
			return m;
		String[] tc = OtelTrace.current();
		if (tc == null || !Envelope.validTraceparent(tc[0]))
			return m;
		String state = tc[1] != null && !tc[1].isEmpty() && Envelope.validTracestate(tc[1]) ? tc[1] : null;
		return m.toBuilder().trace(tc[0], state).build();
	}

	static TxhubException outcome(Throwable err) {
		if (err instanceof CompletionException || err instanceof ExecutionException)
			err = err.getCause();
		if (err instanceof TxhubException)
			return (TxhubException) err;
		if (err instanceof ProducerFencedException || err instanceof OutOfOrderSequenceException
			|| err instanceof UnsupportedVersionException || err instanceof AuthenticationException
			|| err instanceof ClusterAuthorizationException || err instanceof IllegalStateException)
			return new TxhubException(TxhubException.Status.FATAL,
				"fatal producer error, create a new producer: " + err, err);
		return new TxhubException(TxhubException.Status.KAFKA, "not confirmed by Kafka: " + err, err);
	}

	private static void await(CompletableFuture<Void> f) {
		try {
			f.join();
		} catch (CompletionException e) {
			throw outcome(e);
		}
	}

	/**
	 * Sends a prepare ({@code m} needs a payload and a forward topic) and waits for the broker.
	 *
	 * @param m the message
	 * @throws TxhubException {@code INVALID}/{@code TOO_LARGE} (nothing sent), {@code KAFKA}, {@code FATAL}
	 */
	public void prepare(Message m) {
		await(sendAsync(Type.PREPARE, m));
	}

	/** @param m the message @return see {@link #sendAsync} */
	public CompletableFuture<Void> prepareAsync(Message m) {
		return sendAsync(Type.PREPARE, m);
	}

	/**
	 * Sends the commit of a prepared message and waits for the broker.
	 *
	 * @param bizId biz_id @param messageKey message_key
	 */
	public void commit(String bizId, String messageKey) {
		await(commitAsync(bizId, messageKey));
	}

	/** @param bizId biz_id @param messageKey message_key @return see {@link #sendAsync} */
	public CompletableFuture<Void> commitAsync(String bizId, String messageKey) {
		return sendAsync(Type.COMMIT, Message.builder(bizId, messageKey).build());
	}

	/**
	 * Sends the rollback of a prepared message and waits for the broker.
	 *
	 * @param bizId biz_id @param messageKey message_key
	 */
	public void rollback(String bizId, String messageKey) {
		await(rollbackAsync(bizId, messageKey));
	}

	/** @param bizId biz_id @param messageKey message_key @return see {@link #sendAsync} */
	public CompletableFuture<Void> rollbackAsync(String bizId, String messageKey) {
		return sendAsync(Type.ROLLBACK, Message.builder(bizId, messageKey).build());
	}

	/**
	 * A commit carrying payload and forward topic: stored and forwarded as if prepare and commit
	 * had both arrived. Waits for the broker.
	 *
	 * @param m the message
	 */
	public void oneShot(Message m) {
		await(oneShotAsync(m));
	}

	/** @param m the message @return see {@link #sendAsync} */
	public CompletableFuture<Void> oneShotAsync(Message m) {
		if (m == null || m.payloadKind == Message.PayloadKind.NONE)
			throw new InvalidInputException("a one-shot commit needs a payload and forward_topic");
		return sendAsync(Type.COMMIT, m);
	}

	/** Waits until everything queued is confirmed or failed. */
	public void flush() {
		kafka.flush();
	}

	/** Flushes (up to the delivery time-out) and closes the Kafka producer. */
	@Override
	public void close() {
		kafka.close(Duration.ofSeconds(30));
	}

	/** Configures a {@link Producer}. */
	public static final class Builder {
		private final String brokers;
		private String controlTopic = CONTROL_TOPIC_DEFAULT;
		private int maxBytes = Envelope.MAX_BYTES_DEFAULT;
		private int timeoutMs = 30_000;
		private boolean traceFromOpenTelemetry = true;
		private final Map<String, Object> kafka = new HashMap<>();

		private Builder(String brokers) {
			this.brokers = brokers;
		}

		/** @param topic the control topic (default {@code txhub.control}) @return this */
		public Builder controlTopic(String topic) {
			controlTopic = topic;
			return this;
		}

		/** @param bytes the largest envelope, as the hub's envelope.max_bytes (default 1048576) @return this */
		public Builder maxBytes(int bytes) {
			maxBytes = bytes;
			return this;
		}

		/** @param ms how long Kafka may take to confirm an envelope (default 30000) @return this */
		public Builder timeoutMs(int ms) {
			timeoutMs = ms;
			return this;
		}

		/** @param on take the current OpenTelemetry span's trace context (default true; a no-op without the API) @return this */
		public Builder traceFromOpenTelemetry(boolean on) {
			traceFromOpenTelemetry = on;
			return this;
		}

		/**
		 * Kafka producer properties, passed through; {@code enable.idempotence} and {@code acks}
		 * cannot be weakened.
		 *
		 * @param props properties @return this
		 */
		public Builder kafka(Map<String, ?> props) {
			kafka.putAll(props);
			return this;
		}

		/** @return the producer @throws InvalidInputException for a bad setting */
		public Producer build() {
			return new Producer(this);
		}
	}
}
