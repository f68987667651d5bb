package io.txhub.spring;

import java.util.HashMap;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;

/** The {@code txhub.*} properties (docs/producers.md, "From Spring Boot"). */
@ConfigurationProperties("txhub")
public class TxhubProperties {
	/** Kafka's bootstrap servers. */
	private String brokers = "localhost:9092";
	/** The hub's control topic. */
	private String controlTopic = "txhub.control";
	/** The biz_id of messages sent without one. */
	private String bizId;
	/** The largest envelope, as the hub's envelope.max_bytes. */
	private int maxBytes = 1_048_576;
	/** How long Kafka may take to confirm an envelope, in milliseconds. */
	private int timeoutMs = 30_000;
	/** Kafka producer properties, passed through (enable.idempotence and acks cannot be weakened). */
	private Map<String, String> kafka = new HashMap<>();
	private final Checkback checkback = new Checkback();

	/** The check-back endpoint. */
	public static class Checkback {
		/** Whether to map the endpoint (it is mapped only when a TxhubCheckbackResolver bean exists). */
		private boolean enabled = true;
		/** The endpoint's path. */
		private String path = "/txhub/check";
		/** The URL the hub reaches the endpoint at, put in every prepare that names none. */
		private String url;
		/** The hub's checkback.secret; empty answers unsigned requests (only for a hub without one). */
		private String secret;
		/** Seconds a signed request's timestamp may be off the local clock. */
		private int window = 300;
		/** Overrides the hub's checkback.first_after_ms in each prepare. */
		private Long firstAfterMs;

		public boolean isEnabled() {
			return enabled;
		}

		public void setEnabled(boolean enabled) {
			this.enabled = enabled;
		}

		public String getPath() {
			return path;
		}

		public void setPath(String path) {
			this.path = path;
		}

		public String getUrl() {
			return url;
		}

		public void setUrl(String url) {
			this.url = url;
		}

		public String getSecret() {
			return secret;
		}

		public void setSecret(String secret) {
			this.secret = secret;
		}

		public int getWindow() {
			return window;
		}

		public void setWindow(int window) {
			this.window = window;
		}

		public Long getFirstAfterMs() {
			return firstAfterMs;
		}

		public void setFirstAfterMs(Long firstAfterMs) {
			this.firstAfterMs = firstAfterMs;
		}
	}

	public String getBrokers() {
		return brokers;
	}

	public void setBrokers(String brokers) {
		this.brokers = brokers;
	}

	public String getControlTopic() {
		return controlTopic;
	}

	public void setControlTopic(String controlTopic) {
		this.controlTopic = controlTopic;
	}

	public String getBizId() {
		return bizId;
	}

	public void setBizId(String bizId) {
		this.bizId = bizId;
	}

	public int getMaxBytes() {
		return maxBytes;
	}

	public void setMaxBytes(int maxBytes) {
		this.maxBytes = maxBytes;
	}

	public int getTimeoutMs() {
		return timeoutMs;
	}

	public void setTimeoutMs(int timeoutMs) {
		this.timeoutMs = timeoutMs;
	}

	public Map<String, String> getKafka() {
		return kafka;
	}

	public void setKafka(Map<String, String> kafka) {
		this.kafka = kafka;
	}

	public Checkback getCheckback() {
		return checkback;
	}
}
