package io.txhub;

import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.AbstractMap;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * One message as the producer describes it; immutable, built with {@link #builder}.
 *
 * <p>At most one payload: {@link Builder#payload(byte[]) bytes} (sent as {@code payload_base64},
 * forwarded as they are), {@link Builder#payloadString text} (sent as a JSON string, forwarded as
 * its UTF-8 bytes) or {@link Builder#payloadJson JSON text} (the consumer receives its compact
 * text, which parses back to the same value; a JSON string with its quotes). A commit or rollback
 * needs only the ids. Nothing is checked here: {@link Envelope#encode} and the {@link Producer}
 * check everything and name the field that is wrong.
 */
public final class Message {
	/** How the payload is given. */
	public enum PayloadKind {
		/** no payload (a decision) */
		NONE,
		/** arbitrary bytes */
		BYTES,
		/** UTF-8 text */
		STRING,
		/** one JSON value as text */
		JSON
	}

	private static final DateTimeFormatter MICROS = DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSSSSSxxx");

	final String bizId;
	final String messageKey;
	final PayloadKind payloadKind;
	final byte[] payloadBytes;
	final String payloadText;
	final int payloadsGiven;
	final String forwardTopic;
	final String forwardKey;
	final List<Map.Entry<String, String>> headers;
	final String checkbackUrl;
	final Long firstAfterMs;
	final String traceparent;
	final String tracestate;
	final String notBefore;
	final Long delayMs;

	private Message(Builder b) {
		bizId = b.bizId;
		messageKey = b.messageKey;
		payloadKind = b.payloadKind;
		payloadBytes = b.payloadBytes == null ? null : b.payloadBytes.clone();
		payloadText = b.payloadText;
		payloadsGiven = b.payloadsGiven;
		forwardTopic = b.forwardTopic;
		forwardKey = b.forwardKey;
		headers = b.headers == null ? null : Collections.unmodifiableList(new ArrayList<>(b.headers));
		checkbackUrl = b.checkbackUrl;
		firstAfterMs = b.firstAfterMs;
		traceparent = b.traceparent;
		tracestate = b.tracestate;
		notBefore = b.notBefore;
		delayMs = b.delayMs;
	}

	/**
	 * @param bizId business line: 1..64 UTF-8 bytes, no control characters
	 * @param messageKey the business unique id: 1..255 UTF-8 bytes, no control characters
	 * @return a builder
	 */
	public static Builder builder(String bizId, String messageKey) {
		return new Builder(bizId, messageKey);
	}

	/** @return a builder holding this message's fields */
	public Builder toBuilder() {
		Builder b = new Builder(bizId, messageKey);
		b.payloadKind = payloadKind;
		b.payloadBytes = payloadBytes;
		b.payloadText = payloadText;
		b.payloadsGiven = payloadsGiven;
		b.forwardTopic = forwardTopic;
		b.forwardKey = forwardKey;
		b.headers = headers == null ? null : new ArrayList<>(headers);
		b.checkbackUrl = checkbackUrl;
		b.firstAfterMs = firstAfterMs;
		b.traceparent = traceparent;
		b.tracestate = tracestate;
		b.notBefore = notBefore;
		b.delayMs = delayMs;
		return b;
	}

	/** @return the business line */
	public String bizId() {
		return bizId;
	}

	/** @return the business unique id */
	public String messageKey() {
		return messageKey;
	}

	/** @return how the payload is given */
	public PayloadKind payloadKind() {
		return payloadKind;
	}

	/** @return the forward topic, or null */
	public String forwardTopic() {
		return forwardTopic;
	}

	/** @return the check-back URL, or null */
	public String checkbackUrl() {
		return checkbackUrl;
	}

	/** @return the first_after_ms override, or null */
	public Long firstAfterMs() {
		return firstAfterMs;
	}

	/** @return the traceparent, or null */
	public String traceparent() {
		return traceparent;
	}

	/** Builds a {@link Message}. */
	public static final class Builder {
		private final String bizId;
		private final String messageKey;
		private PayloadKind payloadKind = PayloadKind.NONE;
		private byte[] payloadBytes;
		private String payloadText;
		private int payloadsGiven;
		private String forwardTopic;
		private String forwardKey;
		private List<Map.Entry<String, String>> headers;
		private String checkbackUrl;
		private Long firstAfterMs;
		private String traceparent;
		private String tracestate;
		private String notBefore;
		private Long delayMs;

		private Builder(String bizId, String messageKey) {
			this.bizId = bizId;
			this.messageKey = messageKey;
		}

		private Builder payload(PayloadKind kind, byte[] bytes, String text) {
			payloadKind = kind;
			payloadBytes = bytes == null ? null : bytes.clone();
			payloadText = text;
			payloadsGiven++;
			return this;
		}

		/** @param bytes a binary payload, forwarded as it is @return this */
		public Builder payload(byte[] bytes) {
			return payload(PayloadKind.BYTES, bytes, null);
		}

		/** @param text a text payload (no NUL), forwarded as its UTF-8 bytes @return this */
		public Builder payloadString(String text) {
			return payload(PayloadKind.STRING, null, text);
		}

		/** @param json one JSON value as text (RFC 8259, no &#92;u0000, no lone surrogate, at most 512 levels deep) @return this */
		public Builder payloadJson(String json) {
			return payload(PayloadKind.JSON, null, json);
		}

		/** @param topic the topic the hub forwards the message to @return this */
		public Builder forwardTopic(String topic) {
			forwardTopic = topic;
			return this;
		}

		/** @param key the forwarded record's key (absent: a null key) @return this */
		public Builder forwardKey(String key) {
			forwardKey = key;
			return this;
		}

		/**
		 * Adds a header to the forwarded record (kept in the order added; names must not begin
		 * with {@code txhub-}).
		 *
		 * @param name header name @param value header value @return this
		 */
		public Builder header(String name, String value) {
			if (headers == null)
				headers = new ArrayList<>();
			headers.add(new AbstractMap.SimpleImmutableEntry<>(name, value));
			return this;
		}

		/** @param url where the hub asks whether the transaction committed (http or https) @return this */
		public Builder checkbackUrl(String url) {
			checkbackUrl = url;
			return this;
		}

		/** @param ms overrides the hub's {@code checkback.first_after_ms} (0 to 30 days) @return this */
		public Builder firstAfterMs(long ms) {
			firstAfterMs = ms;
			return this;
		}

		/**
		 * W3C trace context. Without one, the {@link Producer} takes the current OpenTelemetry
		 * span's when the OpenTelemetry API is on the class path.
		 *
		 * @param traceparent the traceparent @param tracestate the tracestate, or null @return this
		 */
		public Builder trace(String traceparent, String tracestate) {
			this.traceparent = traceparent;
			this.tracestate = tracestate;
			return this;
		}

		/** @param rfc3339 forwarded no earlier than this RFC 3339 time with a zone, sent as given @return this */
		public Builder notBefore(String rfc3339) {
			notBefore = rfc3339;
			return this;
		}

		/** @param time forwarded no earlier than this (sent to the microsecond) @return this */
		public Builder notBefore(OffsetDateTime time) {
			notBefore = time == null ? null : MICROS.format(time);
			return this;
		}

		/** @param time forwarded no earlier than this (sent in UTC, to the microsecond) @return this */
		public Builder notBefore(Instant time) {
			return notBefore(time == null ? null : time.atOffset(ZoneOffset.UTC));
		}

		/** @param ms forwarded no earlier than this many milliseconds after the commit is applied @return this */
		public Builder delayMs(long ms) {
			delayMs = ms;
			return this;
		}

		/** @return the message */
		public Message build() {
			return new Message(this);
		}
	}
}
