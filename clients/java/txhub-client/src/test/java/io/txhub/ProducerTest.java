package io.txhub;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;

/** The producer against a real hub (tests/with-services.sh), and its refusals, which need none. */
class ProducerTest {
	static final String Q = "SELECT status || '/' || coalesce(send_status, '-') FROM txhub.messages WHERE message_key = ?";

	@Test
	void preparedCommittedRolledBackAndOneShotMessagesReachTheHub() throws Exception {
		try (Services s = Services.create("producer_roundtrip");
			Producer p = Producer.builder(s.brokers).controlTopic(s.topic).build()) {
			s.hub();
			Message m1 = Message.builder("shop", "p-1").payloadJson("{\"n\": 1}").forwardTopic(s.forward).forwardKey("p-1")
				.header("source", "junit").build();
			p.prepare(m1);
			p.commit("shop", "p-1");
			p.prepareAsync(Message.builder("shop", "p-2").payloadString("two").forwardTopic(s.forward).build()).join();
			p.rollbackAsync("shop", "p-2").join();
			p.oneShot(Message.builder("shop", "p-3").payload(new byte[] {0, 1, 2}).forwardTopic(s.forward).build());
			assertEquals("committed/sent", s.waitFor(Q, "committed/sent", Duration.ofSeconds(60), "p-1"));
			assertEquals("rolled_back/-", s.waitFor(Q, "rolled_back/-", Duration.ofSeconds(60), "p-2"));
			assertEquals("committed/sent", s.waitFor(Q, "committed/sent", Duration.ofSeconds(60), "p-3"));
			List<ConsumerRecord<byte[], byte[]>> got = s.readTopic(s.forward, 1500);
			assertEquals(2, got.size());
			ConsumerRecord<byte[], byte[]> r1 = got.stream().filter(r -> new String(r.headers().lastHeader("txhub-message-key").value(),
				StandardCharsets.UTF_8).equals("p-1")).findFirst().orElseThrow();
			assertEquals("{\"n\":1}", new String(r1.value(), StandardCharsets.UTF_8));
			assertEquals("junit", new String(r1.headers().lastHeader("source").value(), StandardCharsets.UTF_8));
			assertEquals(0L, ((Number) s.query("SELECT count(*) FROM txhub.rejected")).longValue());
		}
	}

	@Test
	@SuppressWarnings("try") // the scope is used by being open
	void theCurrentOpenTelemetrySpanGoesWithThePrepareAndAnExplicitTraceWins() throws Exception {
		String traceId = "4bf92f3577b34da6a3ce929d0e0e4736", other = "0af7651916cd43dd8448eb211c80319c";
		try (Services s = Services.create("producer_otel");
			Producer p = Producer.builder(s.brokers).controlTopic(s.topic).build()) {
			s.hub();
			io.opentelemetry.api.trace.Span span = io.opentelemetry.api.trace.Span.wrap(io.opentelemetry.api.trace.SpanContext.create(
				traceId, "00f067aa0ba902b7", io.opentelemetry.api.trace.TraceFlags.getSampled(),
				io.opentelemetry.api.trace.TraceState.getDefault()));
			try (io.opentelemetry.context.Scope scope = span.makeCurrent()) {
				p.prepare(Message.builder("shop", "t-1").payloadString("x").forwardTopic(s.forward).build());
				p.prepare(Message.builder("shop", "t-2").payloadString("x").forwardTopic(s.forward)
					.trace("00-" + other + "-00f067aa0ba902b7-01", null).build());
				p.commit("shop", "t-1");
				p.commit("shop", "t-2");
			}
			p.oneShot(Message.builder("shop", "t-3").payloadString("x").forwardTopic(s.forward).build()); // no span: no trace
			assertEquals("committed/sent", s.waitFor(Q, "committed/sent", Duration.ofSeconds(60), "t-3"));
			assertEquals(traceId, s.query("SELECT trace_id FROM txhub.messages WHERE message_key = 't-1'"));
			assertEquals(other, s.query("SELECT trace_id FROM txhub.messages WHERE message_key = 't-2'"));
			assertEquals(null, s.query("SELECT trace_id FROM txhub.messages WHERE message_key = 't-3'"));
		}
	}

	@Test
	void badInputIsRefusedNamingTheFieldAndNothingIsSent() throws Exception {
		// no broker at this address: a refusal must come before any send
		try (Producer p = Producer.builder("127.0.0.1:1").timeoutMs(2000).build()) {
			InvalidInputException e = assertThrows(InvalidInputException.class,
				() -> p.prepare(Message.builder(null, "k").payloadString("x").forwardTopic("t").build()));
			assertTrue(e.getMessage().contains("biz_id"), e.getMessage());
			e = assertThrows(InvalidInputException.class, () -> p.prepare(null));
			assertTrue(e.getMessage().contains("message"), e.getMessage());
			e = assertThrows(InvalidInputException.class, () -> p.commit("shop", null));
			assertTrue(e.getMessage().contains("message_key"), e.getMessage());
			e = assertThrows(InvalidInputException.class,
				() -> p.prepare(Message.builder("shop", "k").payloadString("x").forwardTopic("__consumer_offsets").build()));
			assertTrue(e.getMessage().contains("forward_topic"), e.getMessage());
			e = assertThrows(InvalidInputException.class,
				() -> p.prepare(Message.builder("shop", "k").payload(new byte[1 << 20]).forwardTopic("t").build()));
			assertEquals(TxhubException.Status.TOO_LARGE, e.status());
			e = assertThrows(InvalidInputException.class,
				() -> p.prepare(Message.builder("shop", "k").payloadString("x").forwardTopic(Producer.CONTROL_TOPIC_DEFAULT).build()));
			assertTrue(e.getMessage().contains("control topic"), e.getMessage());
			e = assertThrows(InvalidInputException.class, () -> p.oneShot(Message.builder("shop", "k").forwardTopic("t").build()));
			assertTrue(e.getMessage().contains("one-shot"), e.getMessage());
		}
		assertThrows(InvalidInputException.class, () -> Producer.builder("localhost:9092").kafka(Map.of("acks", "1")).build());
		assertThrows(InvalidInputException.class,
			() -> Producer.builder("localhost:9092").kafka(Map.of("enable.idempotence", "false")).build());
		assertThrows(InvalidInputException.class, () -> Producer.builder("").build());
		assertThrows(InvalidInputException.class, () -> Producer.builder("localhost:9092").controlTopic("a b").build());
	}

	@Test
	void aBrokerThatIsDownFailsTheSendWithARetriableError() {
		try (Producer p = Producer.builder("127.0.0.1:1").timeoutMs(1500).build()) {
			TxhubException e = assertThrows(TxhubException.class,
				() -> p.prepare(Message.builder("shop", "k").payloadString("x").forwardTopic("t").build()));
			assertEquals(TxhubException.Status.KAFKA, e.status());
			assertTrue(e.retriable());
		}
	}
}
