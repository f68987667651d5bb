"""Process each forwarded record once, downstream (docs/consumers.md: What gets forwarded), with
psycopg 3. The same table and rules as the C library's txhub/dedup.h.

The consumer keeps a table in its own PostgreSQL database (:data:`TABLE_SQL`
or :meth:`Dedup.create_table`) and claims each record before acting on it.
Which way is decided by the connection's state when :meth:`Dedup.claim` is
called:

*In the caller's transaction* (the connection is inside a transaction; the
business write goes through it). The claim writes the row as ``processed``
at once, inside that transaction: it becomes visible only when the caller
commits, together with the business write, and vanishes if the caller
rolls back. A concurrent claim of the same message waits on the row lock
until the first transaction ends, then sees ``DUPLICATE`` (it committed) or
claims it (it rolled back). A holder that dies is rolled back by PostgreSQL,
so nothing needs to expire.

*In its own transactions* (the connection is idle; the business write goes
elsewhere). The claim commits a ``processing`` row with a random holder
token and ``expires_at = now + lease``; other claims see ``BUSY`` until it
expires and take it over after that. :meth:`Dedup.done` marks it
``processed`` (raising :class:`~txhub.errors.ClaimLost` if it was taken
over meanwhile), or :meth:`Dedup.release` deletes it so the message can be
claimed again at once.

Times come from PostgreSQL's clock only. All SQL is parameterized; the
table name is checked and quoted.
"""
from __future__ import annotations

import contextlib
import enum
import re
import secrets
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple, Union

import psycopg
from psycopg import errors as pgerrors
from psycopg import pq, sql

from .envelope import BIZ_ID_MAX, MESSAGE_KEY_MAX, check_id
from .errors import ClaimLost, DatabaseError, InvalidInput

TABLE_DEFAULT = "txhub_dedup"
LEASE_MS_DEFAULT = 60000

_TABLE = """CREATE TABLE IF NOT EXISTS {} (
    biz_id       text        NOT NULL,
    message_key  text        NOT NULL,
    state        text        NOT NULL CHECK (state IN ('processing', 'processed')),
    holder       text        NOT NULL,
    expires_at   timestamptz CHECK (state = 'processed' OR expires_at IS NOT NULL),
    processed_at timestamptz CHECK (state = 'processing' OR processed_at IS NOT NULL),
    PRIMARY KEY (biz_id, message_key)
)"""

#: The CREATE TABLE statement for the default table name, for your own
#: migrations (the same text as the C library's txhub_dedup_table_sql()).
TABLE_SQL = _TABLE.format(TABLE_DEFAULT)

_PART = re.compile(r"[a-z_][a-z0-9_]{0,62}\Z")

_RETRY = (pgerrors.SerializationFailure, pgerrors.DeadlockDetected, pgerrors.LockNotAvailable,
          pgerrors.QueryCanceled, psycopg.OperationalError)


class Result(str, enum.Enum):
    """What a claim found."""

    CLAIMED = "claimed"      # yours: do the business write, then done()
    DUPLICATE = "duplicate"  # processed already: skip the record
    BUSY = "busy"            # another live holder: try again later


@dataclass(frozen=True)
class Claim:
    """A claim, as :meth:`Dedup.claim` returns it."""

    result: Result
    biz_id: str
    message_key: str
    holder: str
    in_caller_tx: bool
    busy_ms: int = 0  # BUSY: ms until the holder's lease ends


def _ident(table: str) -> sql.Composable:
    parts = table.split(".")
    if len(parts) > 2 or not all(_PART.match(p) for p in parts):
        raise InvalidInput("table must be [schema.]name of a-z, 0-9 and _, not starting with a digit")
    return sql.Identifier(*parts)


def _header(headers: Optional[Sequence[Tuple[str, Any]]], name: str) -> Union[str, bytes, None]:
    for k, v in headers or ():
        if k == name and isinstance(v, (str, bytes)):
            return v
    return None


class Dedup:
    """Claims in one table. Holds no connection: pass one to each call (a
    connection is used by one thread at a time, psycopg's rule)."""

    def __init__(self, table: str = TABLE_DEFAULT, lease_ms: int = LEASE_MS_DEFAULT) -> None:
        self._table = _ident(table)
        self._name = table
        if isinstance(lease_ms, bool) or not isinstance(lease_ms, int) or lease_ms <= 0:
            raise InvalidInput("lease_ms must be a positive integer")
        self.lease_ms = lease_ms

    def _run(self, conn: "psycopg.Connection[Any]", query: Union[sql.SQL, sql.Composed], params: Sequence[Any]) -> "psycopg.Cursor[Any]":
        try:
            return conn.execute(query, params)
        except psycopg.Error as e:
            state = getattr(e, "sqlstate", None) or ""
            retry = isinstance(e, _RETRY) or state.startswith("08")
            raise DatabaseError(f"{state}: {e}".strip(": "), retriable=retry) from e

    def _in_tx(self, conn: "psycopg.Connection[Any]") -> bool:
        st = conn.info.transaction_status
        if st == pq.TransactionStatus.IDLE:
            return False
        if st == pq.TransactionStatus.INTRANS:
            return True
        if st == pq.TransactionStatus.INERROR:
            raise InvalidInput("the connection's transaction has failed: roll it back first")
        raise InvalidInput("the connection is busy or broken")

    def _tx(self, conn: "psycopg.Connection[Any]") -> Any:
        """Our own transaction when the connection is idle; inside the
        caller's, nothing of our own (not even a savepoint: an error leaves
        the caller's transaction failed, as in the C library)."""
        return contextlib.nullcontext() if self._in_tx(conn) else conn.transaction()

    def create_table(self, conn: "psycopg.Connection[Any]") -> None:
        """Create the table if it does not exist (in its own transaction
        when the connection is idle)."""
        with self._tx(conn):
            row = self._run(conn, sql.SQL("SELECT to_regclass(%s) IS NOT NULL"), [self._name]).fetchone()
            if row and row[0]:
                return
            self._run(conn, sql.SQL(_TABLE).format(self._table), [])

    def claim_record(self, conn: "psycopg.Connection[Any]",
                     headers: Optional[Sequence[Tuple[str, Any]]]) -> Claim:
        """Claim a forwarded record by its ``txhub-biz-id`` and
        ``txhub-message-key`` headers (confluent-kafka's ``msg.headers()``)."""
        biz, key = _header(headers, "txhub-biz-id"), _header(headers, "txhub-message-key")
        if biz is None or key is None:
            raise InvalidInput("the record has no txhub-biz-id or txhub-message-key header")
        return self.claim(conn, biz, key)

    def claim(self, conn: "psycopg.Connection[Any]", biz_id: Union[str, bytes],
              message_key: Union[str, bytes]) -> Claim:
        """Claim a message; see the module's text for the two ways."""
        biz, key = self._ids(biz_id, message_key)
        in_tx = self._in_tx(conn)
        holder = secrets.token_hex(16)
        for _ in range(3):  # a row released between our statements: try again
            with self._tx(conn):
                claim = self._try(conn, biz, key, holder, in_tx)
            if claim is not None:
                return claim
        raise DatabaseError("the claim row kept changing; try again", retriable=True)

    @staticmethod
    def _ids(biz_id: Union[str, bytes], message_key: Union[str, bytes]) -> Tuple[str, str]:
        out = []
        for what, v, limit in (("txhub-biz-id", biz_id, BIZ_ID_MAX),
                               ("txhub-message-key", message_key, MESSAGE_KEY_MAX)):
            if isinstance(v, (bytes, bytearray)):
                try:
                    v = bytes(v).decode("utf-8")
                except UnicodeDecodeError:
                    raise InvalidInput(f"{what} is not valid UTF-8") from None
            check_id(what, v, limit)
            out.append(v)
        return out[0], out[1]

    def _try(self, conn: "psycopg.Connection[Any]", biz: str, key: str, holder: str,
             in_tx: bool) -> Optional[Claim]:
        state = "processed" if in_tx else "processing"
        won = self._run(conn, sql.SQL(
            "INSERT INTO {} AS d (biz_id, message_key, state, holder, expires_at, processed_at) "
            "VALUES (%s, %s, %s::text, %s, CASE WHEN %s::text = 'processing' THEN "
            "clock_timestamp() + %s::bigint * interval '1 millisecond' END, "
            "CASE WHEN %s::text = 'processed' THEN clock_timestamp() END) "
            "ON CONFLICT (biz_id, message_key) DO UPDATE SET state = excluded.state, "
            "holder = excluded.holder, expires_at = excluded.expires_at, "
            "processed_at = excluded.processed_at "
            "WHERE d.state = 'processing' AND d.expires_at < clock_timestamp() RETURNING 1"
        ).format(self._table), [biz, key, state, holder, state, self.lease_ms, state]).fetchone()
        if won:
            return Claim(Result.CLAIMED, biz, key, holder, in_tx)
        row = self._run(conn, sql.SQL(
            "SELECT state, greatest(0, ceil(extract(epoch FROM expires_at - clock_timestamp()) "
            "* 1000))::bigint FROM {} WHERE biz_id = %s AND message_key = %s"
        ).format(self._table), [biz, key]).fetchone()
        if row is None:
            return None
        if row[0] == "processed":
            return Claim(Result.DUPLICATE, biz, key, holder, in_tx)
        return Claim(Result.BUSY, biz, key, holder, in_tx, int(row[1] or 0))

    def done(self, conn: "psycopg.Connection[Any]", claim: Claim) -> None:
        """The business write is done: mark the claim ``processed``. Raises
        :class:`~txhub.errors.ClaimLost` when it expired and was taken over
        (the business write may then have happened twice)."""
        self._own(claim)
        with self._tx(conn):
            n = self._run(conn, sql.SQL(
                "UPDATE {} SET state = 'processed', expires_at = NULL, "
                "processed_at = coalesce(processed_at, clock_timestamp()) "
                "WHERE biz_id = %s AND message_key = %s AND holder = %s"
            ).format(self._table), [claim.biz_id, claim.message_key, claim.holder]).rowcount
        if n != 1:
            raise ClaimLost("the claim expired and another consumer took it over")

    def release(self, conn: "psycopg.Connection[Any]", claim: Claim) -> None:
        """The business write failed: give the claim up (a processed row
        outside the caller's transaction is never deleted)."""
        self._own(claim)
        with self._tx(conn):
            self._run(conn, sql.SQL(
                "DELETE FROM {} WHERE biz_id = %s AND message_key = %s AND holder = %s "
                "AND (state = 'processing' OR %s::boolean)"
            ).format(self._table), [claim.biz_id, claim.message_key, claim.holder, claim.in_caller_tx])

    def purge(self, conn: "psycopg.Connection[Any]", older_than_ms: int) -> int:
        """Delete ``processed`` rows older than ``older_than_ms``; returns how
        many. A very late duplicate of a purged message is processed again."""
        if not isinstance(older_than_ms, int) or older_than_ms < 0:
            raise InvalidInput("older_than_ms must be a non-negative integer")
        with self._tx(conn):
            return self._run(conn, sql.SQL(
                "DELETE FROM {} WHERE state = 'processed' "
                "AND processed_at < clock_timestamp() - %s::bigint * interval '1 millisecond'"
            ).format(self._table), [older_than_ms]).rowcount

    @staticmethod
    def _own(claim: Claim) -> None:
        if not isinstance(claim, Claim) or claim.result != Result.CLAIMED:
            raise InvalidInput("done() and release() take a claim whose result is CLAIMED")
