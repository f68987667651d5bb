package io.txhub;

/** The step an envelope carries (the field {@code type}). */
public enum Type {
	/** Store the message, publish nothing yet. */
	PREPARE("prepare"),
	/** Publish the prepared message (or, with payload and forward topic, a one-shot commit). */
	COMMIT("commit"),
	/** Drop the prepared message. */
	ROLLBACK("rollback");

	private final String wireName;

	Type(String wireName) {
		this.wireName = wireName;
	}

	/** @return the name on the wire, e.g. {@code "prepare"} */
	public String wireName() {
		return wireName;
	}
}
