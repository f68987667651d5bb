package io.txhub;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.Base64;

/** The shared test vectors (tests/vectors), read from the repository this build is in. */
final class Vectors {
	static final ObjectMapper MAPPER = new ObjectMapper();

	private Vectors() {
	}

	/** The repository's root: the nearest directory above this module that has tests/vectors. */
	static Path root() {
		return Services.root();
	}

	static JsonNode load(String name) {
		try {
			return MAPPER.readTree(root().resolve("tests/vectors").resolve(name).toFile());
		} catch (IOException e) {
			throw new UncheckedIOException(e);
		}
	}

	/**
	 * A string field, or its {@code _base64} twin: bytes that need not be UTF-8, decoded as
	 * Python's surrogateescape does (each byte that is not part of valid UTF-8 becomes the lone
	 * surrogate U+DC80..U+DCFF), the nearest a Java caller can come to handing over such bytes.
	 */
	static String text(JsonNode d, String name) {
		if (d == null)
			return null;
		if (d.has(name))
			return d.get(name).isNull() ? null : d.get(name).asText();
		if (d.has(name + "_base64"))
			return surrogateEscape(Base64.getDecoder().decode(d.get(name + "_base64").asText()));
		return null;
	}

	static String surrogateEscape(byte[] b) {
		StringBuilder out = new StringBuilder();
		ByteBuffer in = ByteBuffer.wrap(b);
		var dec = java.nio.charset.StandardCharsets.UTF_8.newDecoder();
		java.nio.CharBuffer cb = java.nio.CharBuffer.allocate(b.length * 2 + 4);
		while (true) {
			var r = dec.decode(in, cb, true);
			if (r.isError()) {
				for (int i = 0; i < r.length(); i++)
					cb.put((char) (0xDC00 | (in.get() & 0xFF)));
				continue;
			}
			break;
		}
		cb.flip();
		return out.append(cb).toString();
	}

	/** The message a vector's {@code input} describes. */
	static Message message(JsonNode in) {
		Message.Builder b = Message.builder(text(in, "biz_id"), text(in, "message_key"));
		if (in.has("payload_bytes_base64"))
			b.payload(Base64.getDecoder().decode(in.get("payload_bytes_base64").asText()));
		else if (in.has("payload_string") || in.has("payload_string_base64"))
			b.payloadString(text(in, "payload_string"));
		if (in.has("payload_json"))
			b.payloadJson(in.get("payload_json").asText());
		JsonNode fw = in.get("forward");
		if (fw != null) {
			b.forwardTopic(text(fw, "topic")).forwardKey(text(fw, "key"));
			if (fw.has("headers"))
				for (JsonNode h : fw.get("headers"))
					b.header(h.get(0).asText(), h.get(1).asText());
			if (fw.has("not_before"))
				b.notBefore(fw.get("not_before").asText());
			if (fw.has("delay_ms"))
				b.delayMs(fw.get("delay_ms").asLong());
		}
		JsonNode cb = in.get("checkback");
		if (cb != null) {
			b.checkbackUrl(text(cb, "url"));
			if (cb.has("first_after_ms"))
				b.firstAfterMs(cb.get("first_after_ms").asLong());
		}
		JsonNode tr = in.get("trace");
		if (tr != null)
			b.trace(text(tr, "traceparent"), text(tr, "tracestate"));
		return b.build();
	}

	static Type type(JsonNode vec) {
		return Type.valueOf(vec.get("type").asText().toUpperCase(java.util.Locale.ROOT));
	}
}
