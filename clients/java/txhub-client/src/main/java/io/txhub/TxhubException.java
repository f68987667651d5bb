package io.txhub;

/**
 * Every error the library raises. {@link #status()} has the names of the C library's
 * {@code txhub_status_name} and the Python package's {@code status}; {@link #retriable()} says
 * whether the same call may succeed later.
 */
public class TxhubException extends RuntimeException {
	private static final long serialVersionUID = 1L;

	/** What went wrong, by the names the other txhub clients use. */
	public enum Status {
		/** Bad input from the caller: nothing was sent or written. */
		INVALID("invalid", false),
		/** The envelope would exceed {@code maxBytes}: nothing was sent. */
		TOO_LARGE("too_large", false),
		/** Kafka did not confirm the envelope; sending it again is always safe (the hub applies it once). */
		KAFKA("kafka", true),
		/** The idempotent producer hit a fatal error: close it and make a new one. */
		FATAL("fatal", false),
		/** A PostgreSQL error that another try will not fix. */
		DB("db", false),
		/** A PostgreSQL error worth a new try: serialization failure, deadlock, lock time-out, lost connection. */
		DB_RETRY("db_retry", true),
		/** A check-back request whose signature or timestamp does not verify. */
		UNAUTHORIZED("unauthorized", false),
		/** A dedup claim expired and another consumer took it over. */
		LOST("lost", false);

		private final String wireName;
		private final boolean retriable;

		Status(String wireName, boolean retriable) {
			this.wireName = wireName;
			this.retriable = retriable;
		}

		/** The status name, e.g. {@code "too_large"}. */
		public String wireName() {
			return wireName;
		}
	}

	private final Status status;

	/**
	 * @param status what went wrong
	 * @param message a sentence naming the field or the cause
	 */
	public TxhubException(Status status, String message) {
		this(status, message, null);
	}

	/**
	 * @param status what went wrong
	 * @param message a sentence naming the field or the cause
	 * @param cause the underlying exception, or null
	 */
	public TxhubException(Status status, String message, Throwable cause) {
		super(message, cause);
		this.status = status;
	}

	/** @return what went wrong */
	public Status status() {
		return status;
	}

	/** @return whether trying the same call again later may succeed */
	public boolean retriable() {
		return status.retriable;
	}
}
