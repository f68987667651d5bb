package io.txhub;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/** The encoder and the check-back code against tests/vectors, byte for byte. */
class VectorsTest {
	static final JsonNode ENVELOPES = Vectors.load("envelopes.json");
	static final JsonNode CHECKBACK = Vectors.load("checkback.json");

	static Stream<JsonNode> all(JsonNode n) {
		List<JsonNode> out = new ArrayList<>();
		n.forEach(out::add);
		return out.stream();
	}

	@TestFactory
	Stream<DynamicTest> everyVectorEncodesToItsExactBytes() {
		return all(ENVELOPES.get("envelopes")).map(v -> DynamicTest.dynamicTest(v.get("name").asText(), () -> {
			byte[] got = Envelope.encode(Vectors.type(v), Vectors.message(v.get("input")));
			assertArrayEquals(Base64.getDecoder().decode(v.get("encoded_base64").asText()), got);
			assertEquals(v.get("encoded").asText(), new String(got, StandardCharsets.UTF_8));
		}));
	}

	@TestFactory
	Stream<DynamicTest> everyJsonVectorForwardsItsCompactText() {
		return all(ENVELOPES.get("envelopes")).filter(v -> v.get("input").has("payload_json"))
			.map(v -> DynamicTest.dynamicTest(v.get("name").asText(), () -> {
				String text = v.get("input").get("payload_json").asText();
				String got = new String(Base64.getDecoder().decode(v.get("hub").get("forwarded_base64").asText()),
					StandardCharsets.UTF_8);
				assertEquals(Envelope.minify(text), got);
				assertEquals(Vectors.MAPPER.readTree(text), Vectors.MAPPER.readTree(got));
			}));
	}

	@Test
	void thereAreVectorsOfEveryKind() throws Exception {
		Set<String> kinds = new HashSet<>();
		for (JsonNode v : ENVELOPES.get("envelopes"))
			if (v.get("input").has("payload_json"))
				kinds.add(Vectors.MAPPER.readTree(v.get("input").get("payload_json").asText()).getNodeType().name());
		assertTrue(kinds.containsAll(Set.of("OBJECT", "ARRAY", "STRING", "NUMBER", "BOOLEAN", "NULL")), kinds.toString());
		assertTrue(ENVELOPES.get("invalid_inputs").size() > 40);
	}

	@TestFactory
	Stream<DynamicTest> everyInvalidInputIsRefused() {
		return all(ENVELOPES.get("invalid_inputs")).map(v -> DynamicTest.dynamicTest(v.get("name").asText(), () -> {
			JsonNode in = v.get("input");
			int max = in.has("max_bytes") ? in.get("max_bytes").asInt() : Envelope.MAX_BYTES_DEFAULT;
			InvalidInputException e = assertThrows(InvalidInputException.class,
				() -> Envelope.encode(Vectors.type(v), Vectors.message(in), max));
			assertEquals(v.get("status").asText(), e.status().wireName(), e.getMessage());
			assertTrue(e.getMessage().length() > 5);
		}));
	}

	@TestFactory
	Stream<DynamicTest> everySignatureVector() {
		return all(CHECKBACK.get("signatures")).map(v -> DynamicTest.dynamicTest(v.get("name").asText(), () -> {
			String secret = v.get("secret").asText();
			long ts = v.get("timestamp").asLong();
			String sig = Checkback.signature(secret, ts, v.get("biz_id").asText(), v.get("message_key").asText());
			assertEquals(v.get("header").asText(), sig);
			Checkback.Request req = new Checkback.Request(v.get("biz_id").asText(), v.get("message_key").asText(),
				1, ts, sig.substring(3));
			Checkback.verify(req, secret, ts + 300, Checkback.WINDOW_DEFAULT);
			Checkback.verify(req, secret, ts - 300, Checkback.WINDOW_DEFAULT);
			TxhubException e = assertThrows(TxhubException.class,
				() -> Checkback.verify(req, secret, ts + 301, Checkback.WINDOW_DEFAULT));
			assertEquals(TxhubException.Status.UNAUTHORIZED, e.status());
		}));
	}

	@TestFactory
	Stream<DynamicTest> everyQueryVector() {
		return all(CHECKBACK.get("queries")).map(v -> DynamicTest.dynamicTest(v.get("name").asText(), () -> {
			String q = v.get("query").asText();
			if (v.path("error").asBoolean(false)) {
				assertThrows(InvalidInputException.class, () -> Checkback.parseRequest(q, h -> h.equals("X-Txhub-Attempt") ? "1" : null));
				return;
			}
			Checkback.Request r = Checkback.parseRequest(q, h -> h.equals("X-Txhub-Attempt") ? "1" : null);
			assertEquals(v.get("biz_id").asText(), r.bizId());
			assertEquals(v.get("message_key").asText(), r.messageKey());
			assertEquals(1, r.attempt());
		}));
	}
}
