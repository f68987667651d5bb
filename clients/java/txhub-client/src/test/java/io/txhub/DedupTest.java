package io.txhub;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.junit.jupiter.api.Test;

/** Dedup's two ways on a real PostgreSQL, as the C and Python tests hold theirs. */
class DedupTest {
	@Test
	void inTheCallersTransactionTheClaimCommitsOrVanishesWithIt() throws Exception {
		try (Services s = Services.create("dedup_caller_tx"); Connection a = s.connect(); Connection b = s.connect()) {
			Dedup d = new Dedup();
			d.createTable(a);
			d.createTable(a); // twice is fine
			a.setAutoCommit(false);
			assertEquals(Dedup.Result.CLAIMED, d.claim(a, "shop", "o-1").result());
			a.rollback();
			assertEquals(Dedup.Result.CLAIMED, d.claim(a, "shop", "o-1").result(), "a rolled-back claim leaves nothing");
			// a concurrent claim waits on the row, then sees the first one's outcome
			b.setAutoCommit(false);
			CompletableFuture<Dedup.Result> second = CompletableFuture.supplyAsync(() -> d.claim(b, "shop", "o-1").result());
			Thread.sleep(200); // give it time to block; the assertion does not depend on it
			a.commit();
			assertEquals(Dedup.Result.DUPLICATE, second.get(30, TimeUnit.SECONDS));
			b.rollback();
			assertEquals(1L, ((Number) s.query("SELECT count(*) FROM txhub_dedup WHERE state = 'processed'")).longValue());
		}
	}

	@Test
	void inItsOwnTransactionsAClaimIsLeasedDoneReleasedOrLost() throws Exception {
		try (Services s = Services.create("dedup_own_tx"); Connection c = s.connect()) {
			Dedup d = new Dedup("public.txhub_dedup", 60_000);
			d.createTable(c);
			Dedup.Claim mine = d.claim(c, "shop", "o-1");
			assertEquals(Dedup.Result.CLAIMED, mine.result());
			Dedup.Claim other = d.claim(c, "shop", "o-1");
			assertEquals(Dedup.Result.BUSY, other.result());
			assertTrue(other.busyMs() > 0 && other.busyMs() <= 60_000, Long.toString(other.busyMs()));
			d.release(c, mine);
			Dedup.Claim again = d.claim(c, "shop", "o-1");
			assertEquals(Dedup.Result.CLAIMED, again.result());
			d.done(c, again);
			assertEquals(Dedup.Result.DUPLICATE, d.claim(c, "shop", "o-1").result());
			// an expired lease is taken over, and its first holder learns it
			Dedup shortLease = new Dedup(Dedup.TABLE_DEFAULT, 1);
			Dedup.Claim first = shortLease.claim(c, "shop", "o-2");
			assertEquals(Dedup.Result.CLAIMED, first.result());
			assertEquals(Dedup.Result.CLAIMED, Services.waitUntil(() -> d.claim(c, "shop", "o-2").result(), Dedup.Result.CLAIMED,
				java.time.Duration.ofSeconds(10)));
			TxhubException lost = assertThrows(TxhubException.class, () -> d.done(c, first));
			assertEquals(TxhubException.Status.LOST, lost.status());
			assertEquals(0, d.purge(c, 3_600_000));
			assertTrue(d.purge(c, 0) >= 1);
		}
	}

	@Test
	void aRecordIsClaimedByItsTxhubHeadersAndBadInputIsRefused() throws Exception {
		try (Services s = Services.create("dedup_headers"); Connection c = s.connect()) {
			Dedup d = new Dedup();
			d.createTable(c);
			RecordHeaders h = new RecordHeaders();
			h.add("txhub-biz-id", "shop".getBytes(StandardCharsets.UTF_8));
			h.add("txhub-message-key", "o-1".getBytes(StandardCharsets.UTF_8));
			assertEquals(Dedup.Result.CLAIMED, d.claimRecord(c, h).result());
			assertThrows(InvalidInputException.class, () -> d.claimRecord(c, new RecordHeaders()));
			RecordHeaders bad = new RecordHeaders();
			bad.add("txhub-biz-id", new byte[] {(byte) 0xff});
			bad.add("txhub-message-key", "o-1".getBytes(StandardCharsets.UTF_8));
			assertThrows(InvalidInputException.class, () -> d.claimRecord(c, bad));
			assertThrows(InvalidInputException.class, () -> d.claim(c, "shop", null));
			assertThrows(InvalidInputException.class, () -> d.claim(c, "", "o-1"));
			assertThrows(InvalidInputException.class, () -> new Dedup("bad-name; drop table x", 1000));
			assertThrows(InvalidInputException.class, () -> d.done(c, d.claim(c, "shop", "o-1")));
		}
	}

	@Test
	void theTableIsThePythonPackagesTable() throws Exception {
		String py = java.nio.file.Files.readString(Vectors.root().resolve("clients/python/src/txhub/dedup.py"));
		java.util.regex.Matcher m = java.util.regex.Pattern.compile("_TABLE = \"\"\"(.*?)\"\"\"", java.util.regex.Pattern.DOTALL).matcher(py);
		assertTrue(m.find());
		assertEquals(m.group(1).replace("{}", Dedup.TABLE_DEFAULT), Dedup.tableSql());
	}
}
