package io.txhub;

/** Bad input from the caller ({@link Status#INVALID} or {@link Status#TOO_LARGE}): nothing was sent or written. */
public class InvalidInputException extends TxhubException {
	private static final long serialVersionUID = 1L;

	/** @param message a sentence naming the field */
	public InvalidInputException(String message) {
		super(Status.INVALID, message);
	}

	InvalidInputException(Status status, String message) {
		super(status, message);
	}

	static InvalidInputException tooLarge(String message) {
		return new InvalidInputException(Status.TOO_LARGE, message);
	}
}
