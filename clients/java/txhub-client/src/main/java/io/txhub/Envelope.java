package io.txhub;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.DateTimeException;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.Base64;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The envelope a producer sends to the control topic, and its encoder (docs/producers.md,
 * "Envelope").
 *
 * <p>The encoding is deterministic and byte-identical to the C library's and the Python
 * package's (tests/vectors/envelopes.json holds all three to it):
 * <ul>
 * <li>fields in this order, each only when present: {@code "v":1}, {@code type}, {@code biz_id},
 * {@code message_key}, {@code payload} or {@code payload_base64}, {@code forward} ({@code topic},
 * {@code key}, {@code headers} in the caller's order, {@code not_before}, {@code delay_ms}),
 * {@code checkback} ({@code url}, {@code first_after_ms}), {@code trace} ({@code traceparent},
 * {@code tracestate});
 * <li>compact: no white space outside strings;
 * <li>strings: UTF-8 as given; {@code "} and {@code \} escaped with a backslash; U+0008, U+0009,
 * U+000A, U+000C, U+000D as {@code \b \t \n \f \r}; other characters below U+0020 as
 * <code>&#92;u00xx</code> (lowercase hex); nothing else;
 * <li>a bytes payload as standard base64 with padding;
 * <li>a JSON payload as the caller's text with the white space outside strings removed and
 * everything else as written (numbers keep their digits); when that value is a string, its compact
 * text goes as a JSON string, since the hub forwards a string payload as its bytes.
 * </ul>
 * Pure: no I/O, any thread.
 */
public final class Envelope {
	/** Longest biz_id, in UTF-8 bytes. */
	public static final int BIZ_ID_MAX = 64;
	/** Longest message_key, in UTF-8 bytes. */
	public static final int MESSAGE_KEY_MAX = 255;
	/** Longest Kafka topic name. */
	public static final int TOPIC_MAX = 249;
	/** Most forward headers. */
	public static final int HEADERS_MAX = 64;
	/** Longest header name, in UTF-8 bytes. */
	public static final int HEADER_NAME_MAX = 255;
	/** Longest check-back URL. */
	public static final int URL_MAX = 2048;
	/** Largest first_after_ms (30 days). */
	public static final long FIRST_AFTER_MS_MAX = 2_592_000_000L;
	/** Largest delay_ms (100 years; the hub's forward.max_delay bounds it further). */
	public static final long DELAY_MS_MAX = 3_153_600_000_000L;
	/** Deepest nesting of arrays and objects in a JSON payload. */
	public static final int JSON_DEPTH_MAX = 512;
	/** The hub's default envelope.max_bytes, and the producer's. */
	public static final int MAX_BYTES_DEFAULT = 1_048_576;

	private static final int TRACE_STATE_MAX = 512;
	private static final int TRACE_STATE_MEMBERS_MAX = 32;
	// W3C Trace Context level 1, as the hub checks it: a later version may go on after its flags
	// with printable ASCII (it goes into HTTP and Kafka headers as it is), not ending with a space
	private static final Pattern TRACEPARENT = Pattern.compile(
		"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[\\x20-\\x7e]*)?");
	private static final Pattern STATE_KEY = Pattern.compile(
		"[a-z][a-z0-9_\\-*/]{0,255}|[a-z0-9][a-z0-9_\\-*/]{0,240}@[a-z][a-z0-9_\\-*/]{0,13}");
	private static final Pattern STATE_VALUE = Pattern.compile(
		"[\\x20-\\x2b\\x2d-\\x3c\\x3e-\\x7e]{0,255}[\\x21-\\x2b\\x2d-\\x3c\\x3e-\\x7e]");
	private static final Pattern RFC3339 = Pattern.compile(
		"(\\d{4})-(\\d{2})-(\\d{2})[Tt](\\d{2}):(\\d{2}):(\\d{2})(\\.\\d{1,9})?(?:([Zz])|([+-])(\\d{2}):(\\d{2}))");
	private static final long END_S = 253_402_300_800L; // 10000-01-01T00:00:00Z

	// Jackson reads the caller's JSON: strict RFC 8259 (its defaults: no NaN, comments, leading
	// zeros, trailing commas or raw control characters), and no limits of its own below ours.
	private static final JsonFactory JSON = JsonFactory.builder()
		.streamReadConstraints(StreamReadConstraints.builder()
			.maxNestingDepth(JSON_DEPTH_MAX + 1)
			.maxNumberLength(Integer.MAX_VALUE)
			.maxStringLength(Integer.MAX_VALUE)
			.build())
		.build();

	private Envelope() {
	}

	/**
	 * Validates {@code m} and encodes it as an envelope of {@code type} (a commit with a payload is
	 * a one-shot commit).
	 *
	 * @param type the step
	 * @param m the message
	 * @param maxBytes the largest envelope, as the hub's envelope.max_bytes
	 * @return the record value
	 * @throws InvalidInputException naming the field that is wrong, or with status
	 *         {@code TOO_LARGE} when the envelope would exceed {@code maxBytes}
	 */
	public static byte[] encode(Type type, Message m, int maxBytes) {
		check(type, m);
		StringBuilder s = new StringBuilder(128);
		s.append("{\"v\":1,\"type\":\"").append(type.wireName()).append("\",\"biz_id\":");
		quote(s, m.bizId).append(",\"message_key\":");
		quote(s, m.messageKey);
		if (type != Type.ROLLBACK) {
			payloadPart(s, m);
			forwardPart(s, m);
			checkbackPart(s, m);
			tracePart(s, m);
		}
		byte[] out = s.append('}').toString().getBytes(StandardCharsets.UTF_8);
		if (out.length > maxBytes)
			throw InvalidInputException.tooLarge(
				"the envelope would be " + out.length + " bytes, over max_bytes (" + maxBytes + ")");
		return out;
	}

	/** {@link #encode(Type, Message, int)} with {@link #MAX_BYTES_DEFAULT}. @param type the step @param m the message @return the record value */
	public static byte[] encode(Type type, Message m) {
		return encode(type, m, MAX_BYTES_DEFAULT);
	}

	/**
	 * Validates {@code m} for an envelope of {@code type}.
	 *
	 * @param type the step @param m the message
	 * @throws InvalidInputException naming the field that is wrong
	 */
	public static void check(Type type, Message m) {
		if (type == null)
			throw new InvalidInputException("type is null");
		if (m == null)
			throw new InvalidInputException("the message is null");
		checkId("biz_id", m.bizId, BIZ_ID_MAX);
		checkId("message_key", m.messageKey, MESSAGE_KEY_MAX);
		if (type == Type.ROLLBACK)
			return; // payload and forward are left out of a rollback
		boolean hasPayload = m.payloadKind != Message.PayloadKind.NONE;
		if (type == Type.PREPARE && (!hasPayload || m.forwardTopic == null))
			throw new InvalidInputException("a prepare needs a payload and forward_topic");
		if (type == Type.COMMIT && hasPayload != (m.forwardTopic != null))
			throw new InvalidInputException("a one-shot commit needs both a payload and forward_topic");
		checkPayload(m);
		checkForward(m);
		if (m.checkbackUrl != null && !validUrl(m.checkbackUrl))
			throw new InvalidInputException("checkback_url must be an http:// or https:// URL of at most "
				+ URL_MAX + " printable ASCII characters");
		if (m.firstAfterMs != null && (m.firstAfterMs < 0 || m.firstAfterMs > FIRST_AFTER_MS_MAX))
			throw new InvalidInputException("first_after_ms must be from 0 to " + FIRST_AFTER_MS_MAX);
		checkDelay(m);
		checkTrace(m);
	}

	/**
	 * Checks an id: 1..{@code limit} UTF-8 bytes without control characters (C0, DEL, C1).
	 *
	 * @param what the field's name, for the message @param s the id @param limit most bytes
	 * @throws InvalidInputException if it is not
	 */
	public static void checkId(String what, String s, int limit) {
		int n = utf8Length(what, s);
		if (n == 0)
			throw new InvalidInputException(what + " is empty");
		if (n > limit)
			throw new InvalidInputException(what + " is " + n + " bytes, longer than " + limit);
		if (s.indexOf('\0') >= 0)
			throw new InvalidInputException(what + " contains a NUL byte");
		for (int i = 0; i < s.length(); i++) {
			char c = s.charAt(i);
			if (c < 0x20 || (c >= 0x7f && c <= 0x9f))
				throw new InvalidInputException(what + " contains a control character");
		}
	}

	/** The length of {@code s} in UTF-8 bytes; refuses null and lone surrogates. */
	static int utf8Length(String what, String s) {
		if (s == null)
			throw new InvalidInputException(what + " is null");
		int n = 0;
		for (int i = 0; i < s.length(); i++) {
			char c = s.charAt(i);
			if (c < 0x80)
				n += 1;
			else if (c < 0x800)
				n += 2;
			else if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
				n += 4;
				i++;
			} else if (Character.isSurrogate(c))
				throw new InvalidInputException(what + " is not valid UTF-8 (a lone surrogate)");
			else
				n += 3;
		}
		return n;
	}

	/**
	 * Kafka's topic name rules: 1..249 of a-z A-Z 0-9 . _ -, not {@code .} or {@code ..}.
	 *
	 * @param s a name @return whether it is a valid topic name
	 */
	public static boolean validTopic(String s) {
		if (s == null || s.isEmpty() || s.length() > TOPIC_MAX || s.equals(".") || s.equals(".."))
			return false;
		for (int i = 0; i < s.length(); i++) {
			char c = s.charAt(i);
			boolean ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
				|| c == '.' || c == '_' || c == '-';
			if (!ok)
				return false;
		}
		return true;
	}

	static boolean validUrl(String s) {
		String low = s.substring(0, Math.min(8, s.length())).toLowerCase(Locale.ROOT);
		int skip = low.startsWith("http://") ? 7 : low.startsWith("https://") ? 8 : 0;
		if (skip == 0 || s.length() > URL_MAX || s.length() == skip || s.charAt(skip) == '/' || s.charAt(skip) == '?')
			return false;
		for (int i = 0; i < s.length(); i++) {
			char c = s.charAt(i);
			if (c <= 0x20 || c >= 0x7f)
				return false;
		}
		return true;
	}

	/** A JSON string with the library's escaping (see the class's text). @param s text @return the JSON string */
	public static String quote(String s) {
		return quote(new StringBuilder(s.length() + 2), s).toString();
	}

	private static StringBuilder quote(StringBuilder out, String s) {
		out.append('"');
		for (int i = 0; i < s.length(); i++) {
			char c = s.charAt(i);
			switch (c) {
			case '"': out.append("\\\""); break;
			case '\\': out.append("\\\\"); break;
			case '\b': out.append("\\b"); break;
			case '\t': out.append("\\t"); break;
			case '\n': out.append("\\n"); break;
			case '\f': out.append("\\f"); break;
			case '\r': out.append("\\r"); break;
			default:
				if (c < 0x20)
					out.append(String.format("\\u%04x", (int) c));
				else
					out.append(c);
			}
		}
		return out.append('"');
	}

	/**
	 * Checks that {@code text} is one JSON value by RFC 8259 that txhub accepts: no
	 * <code>&#92;u0000</code>, no lone surrogate, at most 512 levels deep (the C library's rules).
	 *
	 * @param text JSON text
	 * @throws InvalidInputException if it is not
	 */
	public static void checkJson(String text) {
		utf8Length("payload JSON", text);
		if (text.startsWith("\uFEFF"))
			throw new InvalidInputException("payload JSON: invalid JSON (a byte order mark)");
		try (JsonParser p = JSON.createParser(text)) {
			int depth = 0;
			JsonToken t = p.nextToken();
			if (t == null)
				throw new InvalidInputException("payload JSON: invalid JSON (no value)");
			while (t != null) {
				switch (t) {
				case START_ARRAY:
				case START_OBJECT:
					if (++depth > JSON_DEPTH_MAX)
						throw new InvalidInputException("payload JSON: JSON nested too deeply");
					break;
				case END_ARRAY:
				case END_OBJECT:
					depth--;
					break;
				case FIELD_NAME:
				case VALUE_STRING:
					checkJsonString(p.getText());
					break;
				default:
					break;
				}
				if (depth == 0)
					break;
				t = p.nextToken();
			}
			if (p.nextToken() != null)
				throw new InvalidInputException("payload JSON: invalid JSON (more than one value)");
		} catch (JsonProcessingException e) {
			throw new InvalidInputException("payload JSON: invalid JSON (" + e.getOriginalMessage() + ")");
		} catch (IOException e) {
			throw new InvalidInputException("payload JSON: invalid JSON (" + e.getMessage() + ")");
		}
	}

	private static void checkJsonString(String s) {
		if (s.indexOf('\0') >= 0)
			throw new InvalidInputException("payload JSON: a string contains \\u0000, which txhub does not accept");
		utf8Length("payload JSON", s);
	}

	/**
	 * Drops the white space outside strings of valid JSON text (checked by {@link #checkJson}
	 * first: this only removes characters, it reads nothing).
	 *
	 * @param text valid JSON text @return its compact text
	 */
	public static String minify(String text) {
		StringBuilder out = new StringBuilder(text.length());
		boolean inString = false;
		for (int i = 0; i < text.length(); i++) {
			char c = text.charAt(i);
			if (inString) {
				out.append(c);
				if (c == '\\')
					out.append(text.charAt(++i));
				else if (c == '"')
					inString = false;
			} else if (c == '"') {
				inString = true;
				out.append(c);
			} else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
				out.append(c);
			}
		}
		return out.toString();
	}

	private static void checkPayload(Message m) {
		if (m.payloadsGiven > 1)
			throw new InvalidInputException("give one payload: bytes, a string or JSON, not several");
		switch (m.payloadKind) {
		case BYTES:
			if (m.payloadBytes == null)
				throw new InvalidInputException("payload is null");
			break;
		case STRING:
			utf8Length("payload string", m.payloadText);
			if (m.payloadText.indexOf('\0') >= 0)
				throw new InvalidInputException("payload string contains a NUL byte");
			break;
		case JSON:
			if (m.payloadText == null)
				throw new InvalidInputException("payload JSON is null");
			checkJson(m.payloadText);
			break;
		default:
			break;
		}
	}

	private static void checkForward(Message m) {
		if (m.forwardTopic == null) {
			if (m.forwardKey != null || (m.headers != null && !m.headers.isEmpty()))
				throw new InvalidInputException("forward_key or forward_headers without forward_topic");
			return;
		}
		if (!validTopic(m.forwardTopic))
			throw new InvalidInputException("forward_topic must be a valid Kafka topic name (1..249 of a-z A-Z 0-9 . _ -)");
		if (m.forwardTopic.startsWith("__"))
			throw new InvalidInputException("forward_topic names a topic Kafka reserves for itself "
				+ "(names beginning with __, such as __consumer_offsets)");
		if (m.forwardKey != null)
			utf8Length("forward_key", m.forwardKey);
		checkHeaders(m.headers);
	}

	private static void checkHeaders(List<Map.Entry<String, String>> headers) {
		if (headers == null)
			return;
		if (headers.size() > HEADERS_MAX)
			throw new InvalidInputException(headers.size() + " forward headers, more than " + HEADERS_MAX);
		Set<String> seen = new HashSet<>();
		for (Map.Entry<String, String> h : headers) {
			String name = h.getKey();
			checkId("a forward header name", name, HEADER_NAME_MAX);
			if (name.length() >= 6 && name.substring(0, 6).toLowerCase(Locale.ROOT).equals("txhub-"))
				throw new InvalidInputException("forward header \"" + name + "\" uses the reserved prefix txhub-");
			utf8Length("forward header \"" + name + "\"", h.getValue());
			if (!seen.add(name))
				throw new InvalidInputException("forward header \"" + name + "\" appears more than once");
		}
	}

	/**
	 * Checks a {@code not_before} time as the hub reads it: RFC 3339 with a zone, years 1970 to
	 * 9999 in UTC.
	 *
	 * @param v the time's text
	 * @throws InvalidInputException if it is not one
	 */
	public static void checkNotBefore(String v) {
		Matcher g = RFC3339.matcher(v);
		if (!g.matches())
			throw new InvalidInputException("forward_not_before is not an RFC 3339 time with a zone "
				+ "(YYYY-MM-DDTHH:MM:SS[.fraction] then Z or +HH:MM / -HH:MM)");
		int y = Integer.parseInt(g.group(1)), mo = Integer.parseInt(g.group(2)), d = Integer.parseInt(g.group(3));
		int h = Integer.parseInt(g.group(4)), mi = Integer.parseInt(g.group(5)), sec = Integer.parseInt(g.group(6));
		int oh = g.group(9) != null ? Integer.parseInt(g.group(10)) : 0;
		int om = g.group(9) != null ? Integer.parseInt(g.group(11)) : 0;
		if (h > 23 || mi > 59 || sec > 60 || oh > 23 || om > 59)
			throw new InvalidInputException("forward_not_before: no such time of day or zone offset");
		long secs;
		try {
			secs = LocalDateTime.of(Math.max(y, 1), mo, d, h, mi, Math.min(sec, 59)).toEpochSecond(ZoneOffset.UTC);
		} catch (DateTimeException e) {
			throw new InvalidInputException("forward_not_before: no such date");
		}
		int sign = "-".equals(g.group(9)) ? -1 : 1;
		secs += (sec == 60 ? 1 : 0) - sign * (oh * 3600L + om * 60L);
		if (y == 0 || secs < 0 || secs > END_S)
			throw new InvalidInputException("forward_not_before is out of range (years 1970 to 9999 in UTC)");
	}

	private static void checkDelay(Message m) {
		if (m.notBefore == null && m.delayMs == null)
			return;
		if (m.forwardTopic == null)
			throw new InvalidInputException("forward_not_before or delay_ms without forward_topic");
		if (m.notBefore != null && m.delayMs != null)
			throw new InvalidInputException("give forward_not_before or delay_ms, not both");
		if (m.delayMs != null && (m.delayMs < 0 || m.delayMs > DELAY_MS_MAX))
			throw new InvalidInputException("delay_ms must be from 0 to " + DELAY_MS_MAX);
		if (m.notBefore != null)
			checkNotBefore(m.notBefore);
	}

	/** The trace context: what the hub would drop is refused. */
	private static void checkTrace(Message m) {
		String tp = m.traceparent, ts = m.tracestate;
		if (ts != null && tp == null)
			throw new InvalidInputException("a tracestate needs a traceparent");
		if (tp != null && !validTraceparent(tp))
			throw new InvalidInputException("traceparent is not a valid W3C traceparent");
		if (ts != null && !validTracestate(ts))
			throw new InvalidInputException("tracestate is not a valid W3C tracestate (at most 512 characters, "
				+ "32 well-formed members, no key twice)");
	}

	/** @param tp a traceparent @return whether the hub keeps it */
	static boolean validTraceparent(String tp) {
		if (tp.length() > 512 || tp.endsWith(" "))
			return false;
		Matcher g = TRACEPARENT.matcher(tp);
		if (!g.matches())
			return false;
		return !g.group(1).equals("ff") && !g.group(2).matches("0+") && !g.group(3).matches("0+")
			&& !(g.group(1).equals("00") && g.group(5) != null);
	}

	/** @param ts a tracestate @return whether the hub keeps it */
	static boolean validTracestate(String ts) {
		if (ts.length() > TRACE_STATE_MAX)
			return false;
		Set<String> keys = new HashSet<>();
		int members = 0;
		for (String member : ts.split(",", -1)) {
			member = stripSpaceTab(member);
			if (member.isEmpty())
				continue;
			int eq = member.indexOf('=');
			if (eq < 0)
				return false;
			String key = member.substring(0, eq), value = member.substring(eq + 1);
			if (!STATE_KEY.matcher(key).matches() || !STATE_VALUE.matcher(value).matches())
				return false;
			members++;
			keys.add(key);
		}
		return members <= TRACE_STATE_MEMBERS_MAX && keys.size() == members;
	}

	private static String stripSpaceTab(String s) {
		int a = 0, b = s.length();
		while (a < b && (s.charAt(a) == ' ' || s.charAt(a) == '\t'))
			a++;
		while (b > a && (s.charAt(b - 1) == ' ' || s.charAt(b - 1) == '\t'))
			b--;
		return s.substring(a, b);
	}

	private static void payloadPart(StringBuilder s, Message m) {
		switch (m.payloadKind) {
		case BYTES:
			s.append(",\"payload_base64\":\"").append(Base64.getEncoder().encodeToString(m.payloadBytes)).append('"');
			break;
		case STRING:
			quote(s.append(",\"payload\":"), m.payloadText);
			break;
		case JSON:
			// The hub forwards a JSON string payload as the string's bytes, so a JSON value that
			// is a string goes as a JSON string whose content is its compact text.
			String text = minify(m.payloadText);
			s.append(",\"payload\":");
			if (text.startsWith("\""))
				quote(s, text);
			else
				s.append(text);
			break;
		default:
			break;
		}
	}

	private static void forwardPart(StringBuilder s, Message m) {
		if (m.forwardTopic == null)
			return;
		quote(s.append(",\"forward\":{\"topic\":"), m.forwardTopic);
		if (m.forwardKey != null)
			quote(s.append(",\"key\":"), m.forwardKey);
		if (m.headers != null && !m.headers.isEmpty()) {
			s.append(",\"headers\":{");
			boolean first = true;
			for (Map.Entry<String, String> h : m.headers) {
				if (!first)
					s.append(',');
				first = false;
				quote(s, h.getKey()).append(':');
				quote(s, h.getValue());
			}
			s.append('}');
		}
		if (m.notBefore != null)
			quote(s.append(",\"not_before\":"), m.notBefore);
		if (m.delayMs != null)
			s.append(",\"delay_ms\":").append(m.delayMs.longValue());
		s.append('}');
	}

	private static void checkbackPart(StringBuilder s, Message m) {
		if (m.checkbackUrl == null && m.firstAfterMs == null)
			return;
		s.append(",\"checkback\":{");
		if (m.checkbackUrl != null)
			quote(s.append("\"url\":"), m.checkbackUrl);
		if (m.firstAfterMs != null)
			s.append(m.checkbackUrl != null ? "," : "").append("\"first_after_ms\":").append(m.firstAfterMs.longValue());
		s.append('}');
	}

	private static void tracePart(StringBuilder s, Message m) {
		if (m.traceparent == null)
			return;
		quote(s.append(",\"trace\":{\"traceparent\":"), m.traceparent);
		if (m.tracestate != null)
			quote(s.append(",\"tracestate\":"), m.tracestate);
		s.append('}');
	}
}
