package io.txhub;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.regex.Pattern;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.Headers;

/**
 * Processes each forwarded record once, downstream (docs/producers.md, "Consuming without
 * duplicates"), on JDBC with PostgreSQL: the same table and rules as the C library's
 * {@code txhub/dedup.h} and the Python package's {@code txhub.dedup}.
 *
 * <p>The consumer keeps a table in its own database ({@link #tableSql()} or
 * {@link #createTable}) and claims each record before acting on it. Which way is decided by the
 * connection's state when {@link #claim} is called:
 * <ul>
 * <li><b>In the caller's transaction</b> (auto-commit off; the business write goes through the
 * same connection). The claim writes the row as {@code processed} at once, inside that
 * transaction: it becomes visible only when the caller commits, together with the business write,
 * and vanishes if the caller rolls back. A concurrent claim of the same message waits on the row
 * lock until the first transaction ends, then sees {@code DUPLICATE} (it committed) or claims it
 * (it rolled back). Nothing needs to expire.
 * <li><b>In its own transactions</b> (auto-commit on; the business write goes elsewhere). The
 * claim commits a {@code processing} row with a random holder token and
 * {@code expires_at = now + lease}; other claims see {@code BUSY} until it expires and take it over
 * after that. {@link #done} marks it {@code processed} (throwing {@code LOST} if it was taken over
 * meanwhile), or {@link #release} deletes it so the message can be claimed again at once.
 * </ul>
 * Times come from PostgreSQL's clock only. All SQL has parameters; the table name is checked and
 * quoted. Holds no connection: a connection is used by one thread at a time, JDBC's rule.
 */
public final class Dedup {
	/** The default table name. */
	public static final String TABLE_DEFAULT = "txhub_dedup";
	/** The default lease of a claim in its own transaction, in milliseconds. */
	public static final long LEASE_MS_DEFAULT = 60_000;

	private static final String TABLE = "CREATE TABLE IF NOT EXISTS %s (\n"
		+ "    biz_id       text        NOT NULL,\n"
		+ "    message_key  text        NOT NULL,\n"
		+ "    state        text        NOT NULL CHECK (state IN ('processing', 'processed')),\n"
		+ "    holder       text        NOT NULL,\n"
		+ "    expires_at   timestamptz CHECK (state = 'processed' OR expires_at IS NOT NULL),\n"
		+ "    processed_at timestamptz CHECK (state = 'processing' OR processed_at IS NOT NULL),\n"
		+ "    PRIMARY KEY (biz_id, message_key)\n"
		+ ")";
	private static final Pattern PART = Pattern.compile("[a-z_][a-z0-9_]{0,62}");
	private static final SecureRandom RANDOM = new SecureRandom();

	/** What a claim found. */
	public enum Result {
		/** yours: do the business write, then {@link Dedup#done} */
		CLAIMED,
		/** processed already: skip the record */
		DUPLICATE,
		/** another live holder: try again later */
		BUSY
	}

	/**
	 * A claim, as {@link #claim} returns it.
	 *
	 * @param result what the claim found
	 * @param bizId the message's biz_id
	 * @param messageKey the message's message_key
	 * @param holder this claim's random token
	 * @param inCallerTx whether it was made inside the caller's transaction
	 * @param busyMs for {@code BUSY}: milliseconds until the holder's lease ends
	 */
	public record Claim(Result result, String bizId, String messageKey, String holder, boolean inCallerTx, long busyMs) {
	}

	private final String table;
	private final String quoted;
	private final long leaseMs;

	/** Claims in {@code txhub_dedup} with a 60 s lease. */
	public Dedup() {
		this(TABLE_DEFAULT, LEASE_MS_DEFAULT);
	}

	/**
	 * @param table {@code [schema.]name} of a-z, 0-9 and _, not starting with a digit
	 * @param leaseMs how long a claim in its own transaction holds (positive)
	 */
	public Dedup(String table, long leaseMs) {
		this.quoted = ident(table);
		this.table = table;
		if (leaseMs <= 0)
			throw new InvalidInputException("lease_ms must be a positive integer");
		this.leaseMs = leaseMs;
	}

	/** @return the CREATE TABLE statement for the default table, for your own migrations (the C and Python libraries' text) */
	public static String tableSql() {
		return String.format(TABLE, TABLE_DEFAULT);
	}

	private static String ident(String table) {
		if (table == null)
			throw new InvalidInputException("table is null");
		String[] parts = table.split("\\.", -1);
		StringBuilder q = new StringBuilder();
		for (String p : parts) {
			if (parts.length > 2 || !PART.matcher(p).matches())
				throw new InvalidInputException("table must be [schema.]name of a-z, 0-9 and _, not starting with a digit");
			q.append(q.length() > 0 ? "." : "").append('"').append(p).append('"');
		}
		return q.toString();
	}

	@FunctionalInterface
	private interface Work<T> {
		T run() throws SQLException;
	}

	private static TxhubException dbError(SQLException e) {
		String state = e.getSQLState() == null ? "" : e.getSQLState();
		boolean retry = state.equals("40001") || state.equals("40P01") || state.equals("55P03") || state.equals("57014")
			|| state.startsWith("08");
		return new TxhubException(retry ? TxhubException.Status.DB_RETRY : TxhubException.Status.DB,
			(state.isEmpty() ? "" : state + ": ") + e.getMessage(), e);
	}

	/**
	 * Runs {@code w} in the caller's transaction (auto-commit off: nothing of our own, not even a
	 * savepoint, as in the C library) or in one of our own (auto-commit on).
	 */
	private static <T> T tx(Connection conn, Work<T> w) {
		try {
			if (conn.isClosed())
				throw new InvalidInputException("the connection is closed");
			if (!conn.getAutoCommit())
				return w.run();
			conn.setAutoCommit(false);
			try {
				T out = w.run();
				conn.commit();
				return out;
			} catch (SQLException | RuntimeException e) {
				try {
					conn.rollback();
				} catch (SQLException again) {
					e.addSuppressed(again);
				}
				throw e;
			} finally {
				conn.setAutoCommit(true);
			}
		} catch (SQLException e) {
			throw dbError(e);
		}
	}

	private static boolean inTx(Connection conn) {
		try {
			return !conn.getAutoCommit();
		} catch (SQLException e) {
			throw dbError(e);
		}
	}

	/**
	 * Creates the table if it does not exist.
	 *
	 * @param conn a connection
	 */
	public void createTable(Connection conn) {
		tx(conn, () -> {
			try (PreparedStatement st = conn.prepareStatement("SELECT to_regclass(?) IS NOT NULL")) {
				st.setString(1, table);
				try (ResultSet rs = st.executeQuery()) {
					if (rs.next() && rs.getBoolean(1))
						return null;
				}
			}
			try (PreparedStatement st = conn.prepareStatement(String.format(TABLE, quoted))) {
				st.execute();
			}
			return null;
		});
	}

	/**
	 * Claims a forwarded record by its {@code txhub-biz-id} and {@code txhub-message-key} headers.
	 *
	 * @param conn a connection @param headers the record's headers @return the claim
	 */
	public Claim claimRecord(Connection conn, Headers headers) {
		Header biz = headers == null ? null : headers.lastHeader("txhub-biz-id");
		Header key = headers == null ? null : headers.lastHeader("txhub-message-key");
		if (biz == null || key == null || biz.value() == null || key.value() == null)
			throw new InvalidInputException("the record has no txhub-biz-id or txhub-message-key header");
		return claim(conn, utf8("txhub-biz-id", biz.value()), utf8("txhub-message-key", key.value()));
	}

	private static String utf8(String what, byte[] b) {
		try {
			return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
				.onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(b)).toString();
		} catch (CharacterCodingException e) {
			throw new InvalidInputException(what + " is not valid UTF-8");
		}
	}

	/**
	 * Claims a message; see the class's text for the two ways.
	 *
	 * @param conn a connection @param bizId biz_id @param messageKey message_key @return the claim
	 */
	public Claim claim(Connection conn, String bizId, String messageKey) {
		Envelope.checkId("txhub-biz-id", bizId, Envelope.BIZ_ID_MAX);
		Envelope.checkId("txhub-message-key", messageKey, Envelope.MESSAGE_KEY_MAX);
		boolean inTx = inTx(conn);
		byte[] token = new byte[16];
		RANDOM.nextBytes(token);
		StringBuilder holder = new StringBuilder();
		for (byte x : token)
			holder.append(String.format("%02x", x));
		for (int i = 0; i < 3; i++) { // a row released between our statements: try again
			Claim c = tx(conn, () -> attempt(conn, bizId, messageKey, holder.toString(), inTx));
			if (c != null)
				return c;
		}
		throw new TxhubException(TxhubException.Status.DB_RETRY, "the claim row kept changing; try again");
	}

	private Claim attempt(Connection conn, String biz, String key, String holder, boolean inTx) throws SQLException {
		String state = inTx ? "processed" : "processing";
		try (PreparedStatement st = conn.prepareStatement("INSERT INTO " + quoted
			+ " AS d (biz_id, message_key, state, holder, expires_at, processed_at) "
			+ "VALUES (?, ?, ?::text, ?, CASE WHEN ?::text = 'processing' THEN "
			+ "clock_timestamp() + ?::bigint * interval '1 millisecond' END, "
			+ "CASE WHEN ?::text = 'processed' THEN clock_timestamp() END) "
			+ "ON CONFLICT (biz_id, message_key) DO UPDATE SET state = excluded.state, "
			+ "holder = excluded.holder, expires_at = excluded.expires_at, "
			+ "processed_at = excluded.processed_at "
			+ "WHERE d.state = 'processing' AND d.expires_at < clock_timestamp() RETURNING 1")) {
			st.setString(1, biz);
			st.setString(2, key);
			st.setString(3, state);
			st.setString(4, holder);
			st.setString(5, state);
			st.setLong(6, leaseMs);
			st.setString(7, state);
			try (ResultSet rs = st.executeQuery()) {
				if (rs.next())
					return new Claim(Result.CLAIMED, biz, key, holder, inTx, 0);
			}
		}
		try (PreparedStatement st = conn.prepareStatement("SELECT state, greatest(0, ceil(extract(epoch FROM "
			+ "expires_at - clock_timestamp()) * 1000))::bigint FROM " + quoted + " WHERE biz_id = ? AND message_key = ?")) {
			st.setString(1, biz);
			st.setString(2, key);
			try (ResultSet rs = st.executeQuery()) {
				if (!rs.next())
					return null;
				if (rs.getString(1).equals("processed"))
					return new Claim(Result.DUPLICATE, biz, key, holder, inTx, 0);
				return new Claim(Result.BUSY, biz, key, holder, inTx, rs.getLong(2));
			}
		}
	}

	/**
	 * The business write is done: marks the claim {@code processed}.
	 *
	 * @param conn a connection @param claim a {@code CLAIMED} claim
	 * @throws TxhubException {@code LOST} when it expired and was taken over (the business write
	 *         may then have happened twice)
	 */
	public void done(Connection conn, Claim claim) {
		own(claim);
		int n = tx(conn, () -> {
			try (PreparedStatement st = conn.prepareStatement("UPDATE " + quoted + " SET state = 'processed', "
				+ "expires_at = NULL, processed_at = coalesce(processed_at, clock_timestamp()) "
				+ "WHERE biz_id = ? AND message_key = ? AND holder = ?")) {
				st.setString(1, claim.bizId());
				st.setString(2, claim.messageKey());
				st.setString(3, claim.holder());
				return st.executeUpdate();
			}
		});
		if (n != 1)
			throw new TxhubException(TxhubException.Status.LOST, "the claim expired and another consumer took it over");
	}

	/**
	 * The business write failed: gives the claim up (a processed row outside the caller's
	 * transaction is never deleted).
	 *
	 * @param conn a connection @param claim a {@code CLAIMED} claim
	 */
	public void release(Connection conn, Claim claim) {
		own(claim);
		tx(conn, () -> {
			try (PreparedStatement st = conn.prepareStatement("DELETE FROM " + quoted + " WHERE biz_id = ? "
				+ "AND message_key = ? AND holder = ? AND (state = 'processing' OR ?::boolean)")) {
				st.setString(1, claim.bizId());
				st.setString(2, claim.messageKey());
				st.setString(3, claim.holder());
				st.setBoolean(4, claim.inCallerTx());
				return st.executeUpdate();
			}
		});
	}

	/**
	 * Deletes {@code processed} rows older than {@code olderThanMs}. A very late duplicate of a
	 * purged message is processed again.
	 *
	 * @param conn a connection @param olderThanMs age in milliseconds (not negative)
	 * @return how many rows were deleted
	 */
	public int purge(Connection conn, long olderThanMs) {
		if (olderThanMs < 0)
			throw new InvalidInputException("older_than_ms must be a non-negative integer");
		return tx(conn, () -> {
			try (PreparedStatement st = conn.prepareStatement("DELETE FROM " + quoted + " WHERE state = 'processed' "
				+ "AND processed_at < clock_timestamp() - ?::bigint * interval '1 millisecond'")) {
				st.setLong(1, olderThanMs);
				return st.executeUpdate();
			}
		});
	}

	private static void own(Claim claim) {
		if (claim == null || claim.result() != Result.CLAIMED)
			throw new InvalidInputException("done() and release() take a claim whose result is CLAIMED");
	}
}
