package io.txhub.spring.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.txhub.Checkback;
import io.txhub.Message;
import io.txhub.Producer;
import io.txhub.Services;
import io.txhub.example.OrderServiceApplication;
import io.txhub.spring.TxhubAutoConfiguration;
import io.txhub.spring.TxhubCheckbackEndpoint;
import io.txhub.spring.TxhubProperties;
import io.txhub.spring.TxhubTemplate;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.springframework.boot.SpringBootVersion;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The starter in the sample order service, in this JVM, on the Spring Boot of this module
 * (starter-tests-boot3 or -boot4), against a real hub, PostgreSQL and Kafka.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class StarterTest {
	static final String Q = "SELECT status || '/' || coalesce(send_status, '-') FROM txhub.messages WHERE message_key = ?";
	static final Duration MINUTE = Duration.ofSeconds(60);

	static Services s;
	static ConfigurableApplicationContext app;
	static String base;
	static final HttpClient HTTP = HttpClient.newHttpClient();

	@BeforeAll
	static void start() throws Exception {
		Services.require();
		s = Services.create("starter_boot" + SpringBootVersion.getVersion().charAt(0));
		s.hub("checkback.secret=s3cret", "checkback.first_after_ms=500", "checkback.backoff_ms=200", "checkback.backoff_max_ms=2000",
			"forward.backoff_max_ms=2000");
		// as command-line arguments, which win over the example's application.properties
		app = new SpringApplicationBuilder(OrderServiceApplication.class).run(
			"--server.port=0", "--spring.datasource.url=" + s.jdbcUrl(), "--spring.datasource.username=" + s.user(),
			"--txhub.brokers=" + s.brokers, "--txhub.control-topic=" + s.topic, "--txhub.checkback.secret=s3cret",
			"--txhub.checkback.url=http://127.0.0.1:1/unset", "--orders.forward-topic=" + s.forward, "--orders.crashes-allowed=true",
			"--txhub.timeout-ms=5000", "--spring.main.banner-mode=off");
		base = "http://127.0.0.1:" + app.getEnvironment().getProperty("local.server.port");
		app.getBean(TxhubProperties.class).getCheckback().setUrl(base + "/txhub/check");
	}

	@AfterAll
	static void stop() {
		if (app != null)
			app.close();
		if (s != null)
			s.close();
	}

	static int post(String query) throws Exception {
		return HTTP.send(HttpRequest.newBuilder(URI.create(base + "/orders?" + query)).POST(HttpRequest.BodyPublishers.noBody()).build(),
			HttpResponse.BodyHandlers.discarding()).statusCode();
	}

	static HttpResponse<String> check(String biz, String key, long ts, String sig) throws Exception {
		return HTTP.send(HttpRequest.newBuilder(URI.create(base + "/txhub/check?biz_id=" + biz + "&message_key=" + key + "&bizID="
			+ biz + "&messageKey=" + key)).header("X-Txhub-Attempt", "1").header("X-Txhub-Timestamp", Long.toString(ts))
			.header("X-Txhub-Signature", sig).build(), HttpResponse.BodyHandlers.ofString());
	}

	static long now() {
		return System.currentTimeMillis() / 1000;
	}

	@Test
	void theDecisionFollowsTheTransactionsOutcome() throws Exception {
		assertEquals(201, post("id=t-ok&amount=3.20"));
		assertEquals(400, post("id=t-fail&crash=fail"));
		assertEquals("committed/sent", s.waitFor(Q, "committed/sent", MINUTE, "t-ok"));
		assertEquals("rolled_back/-", s.waitFor(Q, "rolled_back/-", MINUTE, "t-fail"));
		assertEquals(0L, ((Number) s.query("SELECT count(*) FROM orders WHERE id = 't-fail'")).longValue());
		assertEquals(0L, ((Number) s.query("SELECT check_attempts FROM txhub.messages WHERE message_key = 't-ok'")).longValue());
		List<ConsumerRecord<byte[], byte[]>> got = s.readTopic(s.forward, 1000).stream()
			.filter(r -> new String(r.headers().lastHeader("txhub-message-key").value(), StandardCharsets.UTF_8).startsWith("t-"))
			.collect(Collectors.toList());
		assertEquals(1, got.size());
		assertEquals("{\"order_id\":\"t-ok\",\"amount\":3.20}", new String(got.get(0).value(), StandardCharsets.UTF_8));
		assertEquals("t-ok", new String(got.get(0).key(), StandardCharsets.UTF_8));
	}

	@Test
	void sendOutsideATransactionIsAnErrorAndSendsNothing() throws Exception {
		TxhubTemplate t = app.getBean(TxhubTemplate.class);
		IllegalStateException e = assertThrows(IllegalStateException.class,
			() -> t.send(t.message("n-1", s.forward, "{}").build()));
		assertTrue(e.getMessage().contains("@Transactional"), e.getMessage());
		// a one-shot, asked for explicitly, needs none; once it is in, n-1 would be too
		t.sendOneShot(t.message("n-2", s.forward, "{\"one\":\"shot\"}").build());
		assertEquals("committed/sent", s.waitFor(Q, "committed/sent", MINUTE, "n-2"));
		assertNull(s.query(Q, "n-1"));
	}

	@Test
	void theEndpointAnswersFromTheResolverAndRefusesWhatIsNotTheHub() throws Exception {
		assertEquals(201, post("id=e-1"));
		long ts = now();
		HttpResponse<String> r = check("shop", "e-1", ts, Checkback.signature("s3cret", ts, "shop", "e-1"));
		assertEquals(200, r.statusCode());
		assertEquals("{\"status\":\"committed\"}", r.body());
		// a message this service never prepared: rolled back, and fenced off for good
		r = check("shop", "never", ts, Checkback.signature("s3cret", ts, "shop", "never"));
		assertEquals("{\"status\":\"rolled_back\"}", r.body());
		assertEquals(409, post("id=never"));
		// tampered, replayed later, replayed for another message, wrong secret
		String sig = Checkback.signature("s3cret", ts, "shop", "e-1");
		assertEquals(401, check("shop", "e-1", ts, sig.substring(0, 66) + (sig.endsWith("0") ? "1" : "0")).statusCode());
		long old = ts - 301;
		assertEquals(401, check("shop", "e-1", old, Checkback.signature("s3cret", old, "shop", "e-1")).statusCode());
		assertEquals(401, check("shop", "e-2", ts, sig).statusCode());
		assertEquals(401, check("shop", "e-1", ts, Checkback.signature("other", ts, "shop", "e-1")).statusCode());
		// another business line's message: no answer the hub could take (503: it asks again)
		assertEquals(503, check("bank", "e-1", ts, Checkback.signature("s3cret", ts, "bank", "e-1")).statusCode());
		assertEquals(400, HTTP.send(HttpRequest.newBuilder(URI.create(base + "/txhub/check?biz_id=shop")).build(),
			HttpResponse.BodyHandlers.ofString()).statusCode());
	}

	@Test
	void theHubsCheckbackIsAnsweredByTheEndpoint() throws Exception {
		// as a service that died after its local commit (h-1) and one that died before it (h-2)
		JdbcTemplate jdbc = app.getBean(JdbcTemplate.class);
		jdbc.update("INSERT INTO orders (id, amount) VALUES ('h-1', 1)");
		jdbc.update("INSERT INTO txhub_barrier (message_key, outcome) VALUES ('h-1', 'committed')");
		Producer p = app.getBean(Producer.class);
		for (String k : new String[] {"h-1", "h-2"})
			p.prepare(Message.builder("shop", k).payloadJson("{}").forwardTopic(s.forward).checkbackUrl(base + "/txhub/check").build());
		assertEquals("committed/sent", s.waitFor(Q, "committed/sent", MINUTE, "h-1"));
		assertEquals("rolled_back/-", s.waitFor(Q, "rolled_back/-", MINUTE, "h-2"));
		assertEquals(409, post("id=h-2"));
	}

	@Configuration(proxyBeanMethods = false)
	@ImportAutoConfiguration(TxhubAutoConfiguration.class)
	static class OwnProducer {
		static final Producer MINE = Producer.builder("127.0.0.1:1").build();

		@Bean
		Producer myProducer() {
			return MINE;
		}
	}

	@Test
	void theApplicationsOwnBeansWinAndNoResolverMeansNoEndpoint() {
		try (ConfigurableApplicationContext ctx = new SpringApplicationBuilder(OwnProducer.class).web(WebApplicationType.NONE)
			.properties("spring.main.banner-mode=off").run()) {
			assertSame(OwnProducer.MINE, ctx.getBean(TxhubTemplate.class).producer());
			assertEquals(1, ctx.getBeansOfType(Producer.class).size());
			assertTrue(ctx.getBeansOfType(TxhubCheckbackEndpoint.class).isEmpty());
		} finally {
			OwnProducer.MINE.close();
		}
		assertEquals(1, app.getBeansOfType(TxhubCheckbackEndpoint.class).size());
	}

	/** SIGSTOP or SIGCONT to the broker of {@code dir} (deploy/kafka.sh's pid file). */
	static void signal(String sig, String dir) throws Exception {
		String pid = java.nio.file.Files.readString(java.nio.file.Paths.get(dir, "pid")).trim();
		assertEquals(0, new ProcessBuilder("kill", "-" + sig, pid).inheritIO().start().waitFor(), "kill -" + sig);
	}

	/**
	 * The broker stops answering (SIGSTOP) after the prepare, before the transaction commits: the
	 * commit envelope cannot reach Kafka within txhub.timeout-ms (the template logs it, and the
	 * transaction stays committed), and the hub's check-back settles the message once the broker
	 * answers again (SIGCONT). Needs a broker this test may stop (TXHUB_JAVA_KAFKA_DIR, set by
	 * tests/clients/java_test.sh when it starts one); Boot 4 only.
	 */
	@Test
	@Order(Integer.MAX_VALUE)
	void aBrokerDownWhenTheTransactionCommitsIsSettledByTheCheckback() throws Exception {
		String dir = System.getenv("TXHUB_JAVA_KAFKA_DIR");
		org.junit.jupiter.api.Assumptions.assumeTrue(dir != null && !dir.isEmpty(), "TXHUB_JAVA_KAFKA_DIR is not set: no broker to stop");
		org.junit.jupiter.api.Assumptions.assumeTrue(SpringBootVersion.getVersion().startsWith("4"), "runs on Spring Boot 4 only");
		JdbcTemplate jdbc = app.getBean(JdbcTemplate.class);
		TxhubTemplate t = app.getBean(TxhubTemplate.class);
		try {
			new TransactionTemplate(app.getBean(PlatformTransactionManager.class)).executeWithoutResult(st -> {
				jdbc.update("INSERT INTO orders (id, amount) VALUES ('d-1', 1)");
				jdbc.update("INSERT INTO txhub_barrier (message_key, outcome) VALUES ('d-1', 'committed')");
				t.send(t.message("d-1", s.forward, "{\"down\":true}").build());
				try {
					signal("STOP", dir);
				} catch (Exception e) {
					throw new IllegalStateException(e);
				}
			});
			// the transaction committed although its commit envelope could not be sent
			assertEquals(1L, ((Number) s.query("SELECT count(*) FROM orders WHERE id = 'd-1'")).longValue());
		} finally {
			signal("CONT", dir);
		}
		assertEquals("committed/sent", s.waitFor(Q, "committed/sent", Duration.ofSeconds(120), "d-1"));
		assertTrue(((Number) s.query("SELECT check_attempts FROM txhub.messages WHERE message_key = 'd-1'")).longValue() >= 1,
			"settled by a check-back");
	}
}
