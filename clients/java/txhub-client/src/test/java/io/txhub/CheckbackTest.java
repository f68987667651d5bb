package io.txhub;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/** Check-back requests as the hub sends them, good and bad, and one hub settling messages through the JDK server. */
class CheckbackTest {
	static final long NOW = 1_700_000_000L;
	static final Checkback.Resolver COMMITTED = r -> Checkback.Outcome.COMMITTED;

	static Function<String, String> headers(Map<String, String> h) {
		Map<String, String> m = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
		m.putAll(h);
		return m::get;
	}

	static Function<String, String> signed(long ts, String biz, String key) {
		return headers(Map.of("X-Txhub-Attempt", "1", "X-Txhub-Timestamp", Long.toString(ts),
			"x-txhub-signature", Checkback.signature("s3cret", ts, biz, key)));
	}

	final Checkback cb = new Checkback(COMMITTED, "s3cret", 300, () -> NOW);

	@Test
	void aSignedRequestGetsTheResolversAnswer() {
		Checkback.Response r = cb.handle("biz_id=shop&message_key=o-1&bizID=shop&messageKey=o-1", signed(NOW, "shop", "o-1"));
		assertEquals(200, r.status());
		assertEquals("{\"status\":\"committed\"}", r.bodyText());
		Checkback rb = new Checkback(q -> q.messageKey().equals("o-2") ? Checkback.Outcome.ROLLED_BACK : Checkback.Outcome.UNKNOWN,
			"s3cret", 300, () -> NOW);
		assertEquals("{\"status\":\"rolled_back\"}", rb.handle("biz_id=shop&message_key=o-2", signed(NOW, "shop", "o-2")).bodyText());
		assertEquals("{\"status\":\"unknown\"}", rb.handle("biz_id=shop&message_key=o-3", signed(NOW, "shop", "o-3")).bodyText());
	}

	@Test
	void aTamperedSignatureIsRefused() {
		String good = Checkback.signature("s3cret", NOW, "shop", "o-1");
		String bad = good.substring(0, 66) + (good.charAt(66) == '0' ? '1' : '0');
		Checkback.Response r = cb.handle("biz_id=shop&message_key=o-1",
			headers(Map.of("X-Txhub-Timestamp", Long.toString(NOW), "X-Txhub-Signature", bad)));
		assertEquals(401, r.status());
		assertTrue(r.bodyText().contains("wrong signature"), r.bodyText());
		// another secret's signature
		r = cb.handle("biz_id=shop&message_key=o-1", headers(Map.of("X-Txhub-Timestamp", Long.toString(NOW),
			"X-Txhub-Signature", Checkback.signature("other", NOW, "shop", "o-1"))));
		assertEquals(401, r.status());
	}

	@Test
	void aReplayedRequestIsRefused() {
		// the same request, later than the window
		Checkback later = new Checkback(COMMITTED, "s3cret", 300, () -> NOW + 301);
		Checkback.Response r = later.handle("biz_id=shop&message_key=o-1", signed(NOW, "shop", "o-1"));
		assertEquals(401, r.status());
		assertTrue(r.bodyText().contains("window"), r.bodyText());
		// the same signature, for another message
		r = cb.handle("biz_id=shop&message_key=o-2", signed(NOW, "shop", "o-1"));
		assertEquals(401, r.status());
		// moved to another timestamp
		r = cb.handle("biz_id=shop&message_key=o-1", headers(Map.of("X-Txhub-Timestamp", Long.toString(NOW + 1),
			"X-Txhub-Signature", Checkback.signature("s3cret", NOW, "shop", "o-1"))));
		assertEquals(401, r.status());
	}

	@Test
	void anUnsignedRequestIsRefusedWhenASecretIsSet() {
		Checkback.Response r = cb.handle("biz_id=shop&message_key=o-1", headers(Map.of("X-Txhub-Attempt", "1")));
		assertEquals(401, r.status());
		Checkback open = new Checkback(COMMITTED, null, 300, () -> NOW);
		assertEquals(200, open.handle("biz_id=shop&message_key=o-1", headers(Map.of())).status());
	}

	@Test
	void whatIsNotACheckbackIsA400() {
		for (String q : new String[] {"", "biz_id=shop", "message_key=o-1", "biz_id=&message_key=o-1",
			"biz_id=shop&message_key=a%0Ab", "biz_id=shop&message_key=%zz", "biz_id=a&bizID=b&message_key=o-1",
			"biz_id=shop&message_key=%ff"})
			assertEquals(400, cb.handle(q, signed(NOW, "shop", "o-1")).status(), q);
		assertEquals(400, cb.handle("biz_id=shop&message_key=o-1", headers(Map.of("X-Txhub-Timestamp", "now",
			"X-Txhub-Signature", Checkback.signature("s3cret", NOW, "shop", "o-1")))).status());
		assertEquals(400, cb.handle("biz_id=shop&message_key=o-1", headers(Map.of("X-Txhub-Attempt", "0"))).status());
	}

	@Test
	void aResolverThatFailsIsA503NeverAnAnswer() {
		Checkback failing = new Checkback(r -> {
			throw new java.sql.SQLException("connection refused");
		}, "s3cret", 300, () -> NOW);
		Checkback.Response r = failing.handle("biz_id=shop&message_key=o-1", signed(NOW, "shop", "o-1"));
		assertEquals(503, r.status());
		assertTrue(r.bodyText().contains("SQLException"), r.bodyText());
	}

	@Test
	void theJdkServerServesThePathOnly() throws Exception {
		Checkback live = new Checkback(COMMITTED, "s3cret", 300);
		try (CheckbackHttpServer srv = new CheckbackHttpServer(new InetSocketAddress("127.0.0.1", 0), "/txhub/check", live)) {
			HttpClient http = HttpClient.newHttpClient();
			long ts = System.currentTimeMillis() / 1000;
			HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + srv.port()
				+ "/txhub/check?biz_id=shop&message_key=o%2D1")).header("X-Txhub-Timestamp", Long.toString(ts))
				.header("X-Txhub-Signature", Checkback.signature("s3cret", ts, "shop", "o-1")).build(), HttpResponse.BodyHandlers.ofString());
			assertEquals(200, r.statusCode());
			assertEquals("{\"status\":\"committed\"}", r.body());
			r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + srv.port() + "/other?biz_id=shop&message_key=o-1"))
				.build(), HttpResponse.BodyHandlers.ofString());
			assertEquals(404, r.statusCode());
		}
	}

	@Test
	void theHubSettlesPreparedMessagesByAskingTheServer() throws Exception {
		Map<String, Integer> asked = new ConcurrentHashMap<>();
		Checkback live = new Checkback(r -> {
			asked.merge(r.messageKey(), 1, Integer::sum);
			return r.messageKey().equals("c-1") ? Checkback.Outcome.COMMITTED : Checkback.Outcome.ROLLED_BACK;
		}, "s3cret", 300);
		try (Services s = Services.create("checkback_hub");
			CheckbackHttpServer srv = new CheckbackHttpServer(new InetSocketAddress("127.0.0.1", 0), "/txhub/check", live);
			Producer p = Producer.builder(s.brokers).controlTopic(s.topic).build()) {
			s.hub("checkback.secret=s3cret", "checkback.first_after_ms=300", "checkback.backoff_ms=200");
			String url = "http://127.0.0.1:" + srv.port() + "/txhub/check";
			for (String k : new String[] {"c-1", "c-2"})
				p.prepare(Message.builder("shop", k).payloadString(k).forwardTopic(s.forward).checkbackUrl(url).build());
			assertEquals("committed/sent", s.waitFor(ProducerTest.Q, "committed/sent", Duration.ofSeconds(60), "c-1"));
			assertEquals("rolled_back/-", s.waitFor(ProducerTest.Q, "rolled_back/-", Duration.ofSeconds(60), "c-2"));
			assertEquals(Map.of("c-1", 1, "c-2", 1), asked);
		}
	}
}
