package io.txhub;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import java.util.function.LongSupplier;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Answers the hub's check-back requests (docs/producers.md, "Check-back").
 *
 * <p>Framework-agnostic: {@link #handle} takes the request's raw query string and a header
 * lookup and returns the status and body to send; {@link CheckbackHttpServer} (the JDK's
 * {@code HttpServer}) and {@link CheckbackServlet} (Jakarta Servlet) wrap it.
 *
 * <p>Signed requests (the hub's {@code checkback.secret} is set) carry {@code X-Txhub-Timestamp}
 * and {@code X-Txhub-Signature: v2=<hex HMAC-SHA256(secret, "<timestamp>\n<biz_id>\n<message_key>")>}.
 * A request is accepted only with a valid signature whose timestamp is within the window (300 s by
 * default) of the local clock, either way, so a captured request cannot be replayed later, nor for
 * another message. Signatures are compared in constant time. Answers: 200 with
 * {@code {"status":"committed"}} (or {@code rolled_back}, {@code unknown}); 400 for a request that
 * is not a check-back; 401 for a missing, wrong or stale signature; 503 when the resolver fails
 * (the hub asks again later: a failed lookup is never an answer).
 */
public final class Checkback {
	/** The default timestamp window, in seconds. */
	public static final int WINDOW_DEFAULT = 300;

	private static final JsonFactory JSON = new JsonFactory();

	/** What the producer's own database says about the transaction. */
	public enum Outcome {
		/** the local transaction committed: the hub forwards the message */
		COMMITTED("committed"),
		/** it rolled back, or never happened and never can: the hub drops the message */
		ROLLED_BACK("rolled_back"),
		/** not decided yet: the hub asks again later */
		UNKNOWN("unknown");

		private final String wireName;

		Outcome(String wireName) {
			this.wireName = wireName;
		}

		/** @return the answer's status text */
		public String wireName() {
			return wireName;
		}
	}

	/**
	 * A parsed check-back request.
	 *
	 * @param bizId the message's biz_id
	 * @param messageKey the message's message_key
	 * @param attempt X-Txhub-Attempt (1-based), or null
	 * @param timestamp X-Txhub-Timestamp, or null when unsigned
	 * @param signature the 64 hex digits after {@code v2=}, or null when unsigned
	 */
	public record Request(String bizId, String messageKey, Integer attempt, Long timestamp, String signature) {
	}

	/**
	 * What to send back.
	 *
	 * @param status the HTTP status
	 * @param body the body ({@code application/json})
	 */
	public record Response(int status, byte[] body) {
		/** @return the body as text */
		public String bodyText() {
			return new String(body, StandardCharsets.UTF_8);
		}
	}

	/** The application's answer, from its own database. */
	@FunctionalInterface
	public interface Resolver {
		/**
		 * Tells what became of the transaction that prepared this message. Called only for
		 * verified requests. Throw (the request is answered 503, and asked again later) rather
		 * than guess when the database cannot tell now.
		 *
		 * @param request the verified request
		 * @return the outcome
		 * @throws Exception when the outcome cannot be told now
		 */
		Outcome resolve(Request request) throws Exception;
	}

	private final Resolver resolver;
	private final byte[] secret;
	private final int window;
	private final LongSupplier clock;

	/**
	 * @param resolver answers verified requests
	 * @param secret the hub's checkback.secret; null or empty answers unsigned requests, only
	 *        for a hub that has no secret
	 * @param window seconds a timestamp may be off the local clock, either way
	 */
	public Checkback(Resolver resolver, String secret, int window) {
		this(resolver, secret, window, () -> System.currentTimeMillis() / 1000);
	}

	/**
	 * @param resolver answers verified requests
	 * @param secret the hub's checkback.secret, or null
	 * @param window seconds a timestamp may be off the clock
	 * @param clock the current Unix time in seconds
	 */
	public Checkback(Resolver resolver, String secret, int window, LongSupplier clock) {
		this.resolver = Objects.requireNonNull(resolver, "resolver");
		this.secret = secret == null || secret.isEmpty() ? null : secret.getBytes(StandardCharsets.UTF_8);
		if (window < 0)
			throw new InvalidInputException("window must not be negative");
		this.window = window;
		this.clock = Objects.requireNonNull(clock, "clock");
	}

	/**
	 * The {@code X-Txhub-Signature} value: {@code "v2="} and 64 lowercase hex digits.
	 *
	 * @param secret the shared secret @param timestamp Unix seconds @param bizId biz_id
	 * @param messageKey message_key @return the header value
	 */
	public static String signature(String secret, long timestamp, String bizId, String messageKey) {
		return "v2=" + hex(hmac(secret.getBytes(StandardCharsets.UTF_8), timestamp, bizId, messageKey));
	}

	private static byte[] hmac(byte[] key, long timestamp, String bizId, String messageKey) {
		try {
			Mac mac = Mac.getInstance("HmacSHA256");
			mac.init(new SecretKeySpec(key, "HmacSHA256"));
			return mac.doFinal((timestamp + "\n" + bizId + "\n" + messageKey).getBytes(StandardCharsets.UTF_8));
		} catch (GeneralSecurityException e) {
			throw new IllegalStateException("HmacSHA256 is missing from this JDK", e);
		}
	}

	private static String hex(byte[] b) {
		StringBuilder s = new StringBuilder(b.length * 2);
		for (byte x : b)
			s.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
		return s.toString();
	}

	/**
	 * Parses a request's raw query string (after {@code ?}, not decoded) and headers. The ids come
	 * from {@code biz_id}/{@code message_key} or {@code bizID}/{@code messageKey}. Does not verify
	 * the signature.
	 *
	 * @param query the raw query; a server's characters below U+0100 are taken as the request's bytes
	 * @param header a header's value by name (names compared without regard to case), or null
	 * @return the request
	 * @throws InvalidInputException for a missing or invalid id, a parameter given twice with
	 *         different values, or a malformed header
	 */
	public static Request parseRequest(String query, Function<String, String> header) {
		String[] ids = ids(query == null ? "" : query);
		String attemptH = header == null ? null : header.apply("X-Txhub-Attempt");
		String tsH = header == null ? null : header.apply("X-Txhub-Timestamp");
		String sigH = header == null ? null : header.apply("X-Txhub-Signature");
		Integer attempt = null;
		Long ts = null;
		String sig = null;
		if (attemptH != null) {
			Long a = number(attemptH, 9, 1);
			if (a == null)
				throw new InvalidInputException("X-Txhub-Attempt is not a positive integer");
			attempt = a.intValue();
		}
		if (tsH != null && (ts = number(tsH, 15, 0)) == null)
			throw new InvalidInputException("X-Txhub-Timestamp is not a Unix time in seconds");
		if (sigH != null) {
			if (sigH.length() != 67 || !sigH.startsWith("v2=") || !sigH.substring(3).chars().allMatch(
				c -> (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
				throw new InvalidInputException("X-Txhub-Signature is not \"v2=\" and 64 lowercase hex digits");
			sig = sigH.substring(3);
		}
		if ((tsH == null) != (sigH == null))
			throw new InvalidInputException("X-Txhub-Timestamp and X-Txhub-Signature come together or not at all");
		return new Request(ids[0], ids[1], attempt, ts, sig);
	}

	private static Long number(String s, int digits, long minimum) {
		if (s.isEmpty() || s.length() > digits || !s.chars().allMatch(c -> c >= '0' && c <= '9'))
			return null;
		long v = Long.parseLong(s);
		return v >= minimum ? v : null;
	}

	private static String[] ids(String query) {
		Map<String, String> found = new HashMap<>();
		for (String part : query.split("&", -1)) {
			int eq = part.indexOf('=');
			if (eq < 0)
				continue;
			String name = part.substring(0, eq);
			String what = name.equals("biz_id") || name.equals("bizID") ? "biz_id"
				: name.equals("message_key") || name.equals("messageKey") ? "message_key" : null;
			if (what == null)
				continue;
			int limit = what.equals("biz_id") ? Envelope.BIZ_ID_MAX : Envelope.MESSAGE_KEY_MAX;
			String value = decode(part.substring(eq + 1), what, limit);
			String before = found.putIfAbsent(what, value);
			if (before != null && !before.equals(value))
				throw new InvalidInputException("query parameter " + what + " is given twice with different values");
		}
		for (String what : new String[] {"biz_id", "message_key"})
			if (!found.containsKey(what))
				throw new InvalidInputException("not a check-back: the query has no " + what);
		return new String[] {found.get("biz_id"), found.get("message_key")};
	}

	/** Percent-escapes and '+' (a space), strictly: a bad escape or bytes that are not UTF-8 are an error. */
	private static String decode(String raw, String what, int limit) {
		ByteArrayOutputStream out = new ByteArrayOutputStream(raw.length());
		String bad = "query parameter " + what + " is malformed or longer than " + limit + " bytes";
		for (int i = 0; i < raw.length(); i++) {
			char c = raw.charAt(i);
			if (c == '+') {
				out.write(' ');
			} else if (c == '%') {
				if (i + 2 >= raw.length())
					throw new InvalidInputException(bad);
				int hi = Character.digit(raw.charAt(i + 1), 16), lo = Character.digit(raw.charAt(i + 2), 16);
				if (hi < 0 || lo < 0 || raw.charAt(i + 1) > 0x7f || raw.charAt(i + 2) > 0x7f)
					throw new InvalidInputException(bad);
				out.write(hi << 4 | lo);
				i += 2;
			} else if (c < 0x100) {
				out.write(c); // a server hands the raw query over one character per byte
			} else {
				byte[] b = String.valueOf(c).getBytes(StandardCharsets.UTF_8);
				out.write(b, 0, b.length);
			}
			if (out.size() > limit)
				throw new InvalidInputException(bad);
		}
		String value;
		try {
			value = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
				.onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(out.toByteArray())).toString();
		} catch (CharacterCodingException e) {
			throw new InvalidInputException(what + " is not valid UTF-8");
		}
		Envelope.checkId(what, value, limit);
		return value;
	}

	/**
	 * Checks that {@code req} is signed with {@code secret} and its timestamp is within
	 * {@code window} seconds of {@code now}.
	 *
	 * @param req the request @param secret the shared secret @param now Unix seconds
	 * @param window seconds either way
	 * @throws TxhubException with status {@code UNAUTHORIZED} if not
	 */
	public static void verify(Request req, String secret, long now, int window) {
		if (secret == null || secret.isEmpty())
			throw new InvalidInputException("a non-empty secret is required");
		verify(req, secret.getBytes(StandardCharsets.UTF_8), now, window);
	}

	private static void verify(Request req, byte[] secret, long now, int window) {
		if (req.signature() == null || req.timestamp() == null)
			throw new TxhubException(TxhubException.Status.UNAUTHORIZED, "the request is not signed");
		long skew = now - req.timestamp();
		if (Math.abs(skew) > window)
			throw new TxhubException(TxhubException.Status.UNAUTHORIZED,
				"the timestamp is " + skew + " s from now, outside the " + window + " s window");
		byte[] want = hex(hmac(secret, req.timestamp(), req.bizId(), req.messageKey())).getBytes(StandardCharsets.US_ASCII);
		if (!MessageDigest.isEqual(want, req.signature().getBytes(StandardCharsets.US_ASCII)))
			throw new TxhubException(TxhubException.Status.UNAUTHORIZED, "wrong signature");
	}

	/**
	 * {@code {"status":"committed"}} and the like, as the other clients write it.
	 *
	 * @param outcome the outcome @return the body
	 */
	public static byte[] answerBody(Outcome outcome) {
		return ("{\"status\":\"" + outcome.wireName() + "\"}").getBytes(StandardCharsets.US_ASCII);
	}

	private static Response error(int status, String reason) {
		ByteArrayOutputStream out = new ByteArrayOutputStream();
		try (JsonGenerator g = JSON.createGenerator(out)) {
			g.writeStartObject();
			g.writeStringField("error", reason);
			g.writeEndObject();
		} catch (IOException e) {
			throw new UncheckedIOException(e);
		}
		return new Response(status, out.toByteArray());
	}

	/**
	 * Everything in one call: parse, verify (when a secret is set), ask the resolver.
	 *
	 * @param rawQuery the request's query string as sent (not decoded), or null
	 * @param header a header's value by name, names compared without regard to case
	 * @return the status and body to send
	 */
	public Response handle(String rawQuery, Function<String, String> header) {
		Request req;
		try {
			req = parseRequest(rawQuery, header);
		} catch (InvalidInputException e) {
			return error(400, e.getMessage());
		}
		if (secret != null) {
			try {
				verify(req, secret, clock.getAsLong(), window);
			} catch (TxhubException e) {
				return error(401, e.getMessage());
			}
		}
		Outcome outcome;
		try {
			outcome = resolver.resolve(req);
		} catch (Exception e) { // the database is down, or the like: not a decision
			return error(503, "the outcome cannot be told now; ask again later (" + e.getClass().getSimpleName() + ")");
		}
		if (outcome == null)
			return error(503, "the outcome cannot be told now; ask again later (no answer)");
		return new Response(200, answerBody(outcome));
	}
}
