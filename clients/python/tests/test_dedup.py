"""Downstream deduplication on PostgreSQL: both ways of claiming, racing
consumers (threads and processes), a consumer killed while processing, a
business write that fails, and bad input."""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

import psycopg
import pytest

from conftest import Env
from txhub.dedup import TABLE_SQL, Claim, Dedup, Result
from txhub.errors import ClaimLost, DatabaseError, InvalidInput

MESSAGES = 30


def make_table(env: Env) -> Dedup:
    d = Dedup()
    with psycopg.connect(env.conninfo, autocommit=True) as c:
        d.create_table(c)
        d.create_table(c)  # twice: nothing happens
        c.execute("CREATE TABLE applied (biz_id text, message_key text, worker text)")
    return d


def connect(env: Env, autocommit: bool = True) -> psycopg.Connection:
    return psycopg.connect(env.conninfo, autocommit=autocommit)


def test_own_transactions_claim_busy_done_duplicate(env: Env) -> None:
    d = make_table(env)
    with connect(env) as a, connect(env) as b:
        c = d.claim(a, "shop", "o-1")
        assert c.result == Result.CLAIMED and not c.in_caller_tx and len(c.holder) == 32
        busy = d.claim(b, "shop", "o-1")
        assert busy.result == Result.BUSY and 50000 < busy.busy_ms <= 60000
        d.done(a, c)
        d.done(a, c)  # twice: fine
        assert d.claim(b, "shop", "o-1").result == Result.DUPLICATE
        d.release(a, c)  # after done: never un-processes
        assert d.claim(b, b"shop", b"o-1").result == Result.DUPLICATE
        c2 = d.claim(b, "shop2", "o-1")
        assert c2.result == Result.CLAIMED
        d.release(b, c2)
        assert d.claim(a, "shop2", "o-1").result == Result.CLAIMED
        assert d.purge(a, 0) == 1


def test_autocommit_off_connections_work_in_their_own_transactions(env: Env) -> None:
    d = make_table(env)
    with connect(env, autocommit=False) as a:
        c = d.claim(a, "shop", "o-1")  # idle: its own transaction, committed
        assert not c.in_caller_tx
        assert env.query("SELECT state FROM txhub_dedup") == "processing"
        d.done(a, c)
        assert env.query("SELECT state FROM txhub_dedup") == "processed"


def test_an_expired_claim_is_taken_over(env: Env) -> None:
    d = make_table(env)
    short = Dedup(lease_ms=300)
    with connect(env) as a:
        first = short.claim(a, "shop", "o-1")
        assert short.claim(a, "shop", "o-1").result == Result.BUSY
        time.sleep(0.4)
        second = short.claim(a, "shop", "o-1")
        assert second.result == Result.CLAIMED and second.holder != first.holder
        with pytest.raises(ClaimLost):
            d.done(a, first)
        d.release(a, first)  # stale: takes nothing
        d.done(a, second)


def _hold_forever(conninfo: str, ready: "multiprocessing.synchronize.Event") -> None:
    with psycopg.connect(conninfo, autocommit=True) as c:
        assert Dedup(lease_ms=1000).claim(c, "shop", "o-9").result == Result.CLAIMED
        ready.set()
        time.sleep(3600)


def test_a_consumer_killed_while_processing_is_taken_over_after_expiry(env: Env) -> None:
    d = make_table(env)
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=_hold_forever, args=(env.conninfo, ready))
    proc.start()
    assert ready.wait(20)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    with connect(env) as a:
        busy = d.claim(a, "shop", "o-9")
        assert busy.result == Result.BUSY and busy.busy_ms <= 1000
        time.sleep(busy.busy_ms / 1000 + 0.1)
        c = d.claim(a, "shop", "o-9")
        assert c.result == Result.CLAIMED
        d.done(a, c)


def test_in_the_callers_transaction_the_mark_commits_with_the_business_write(env: Env) -> None:
    d = make_table(env)
    with connect(env) as a, connect(env) as b:
        with a.transaction():
            c = d.claim(a, "shop", "o-1")
            assert c.result == Result.CLAIMED and c.in_caller_tx
            a.execute("INSERT INTO applied VALUES ('shop', 'o-1', 'a')")
            assert d.claim(a, "shop", "o-1").result == Result.DUPLICATE  # same transaction
            d.done(a, c)
            assert env.query("SELECT count(*) FROM txhub_dedup") == 0  # not visible yet
        assert d.claim(b, "shop", "o-1").result == Result.DUPLICATE
        # a business write that fails: no mark
        with pytest.raises(psycopg.errors.DivisionByZero):
            with a.transaction():
                assert d.claim(a, "shop", "o-2").result == Result.CLAIMED
                a.execute("INSERT INTO applied VALUES ('shop', 'o-2', (1 / 0)::text)")
        assert env.query("SELECT count(*) FROM txhub_dedup WHERE message_key = 'o-2'") == 0
        assert d.claim(b, "shop", "o-2").result == Result.CLAIMED
    with connect(env, autocommit=False) as a:
        try:
            a.execute("SELECT 1 / 0")
        except psycopg.errors.DivisionByZero:
            pass
        with pytest.raises(InvalidInput, match="roll it back"):
            d.claim(a, "shop", "o-3")
        a.rollback()


def _apply(d: Dedup, conn: psycopg.Connection, key: str, worker: str, own_tx: bool) -> bool:
    """Process one message; False when it must be tried again later."""
    if own_tx:
        c = d.claim(conn, "shop", key)
        if c.result == Result.CLAIMED:
            conn.execute("INSERT INTO applied VALUES ('shop', %s, %s)", (key, worker))
            d.done(conn, c)
        return c.result != Result.BUSY
    try:
        with conn.transaction():
            c = d.claim(conn, "shop", key)
            if c.result == Result.CLAIMED:
                conn.execute("INSERT INTO applied VALUES ('shop', %s, %s)", (key, worker))
                d.done(conn, c)
        return c.result != Result.BUSY
    except DatabaseError as e:
        assert e.retriable
        return False


def race(conninfo: str, worker: str, own_tx: bool) -> None:
    d = Dedup()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        pending = [f"m-{i}" for i in range(MESSAGES)]
        for _ in range(100):
            pending = [k for k in pending if not _apply(d, conn, k, worker, own_tx)]
            if not pending:
                return
            time.sleep(0.02)
        raise AssertionError(f"{worker}: {pending} still busy")


def check_once(env: Env) -> None:
    assert env.query("SELECT count(*) FROM applied") == MESSAGES
    assert env.query("SELECT count(DISTINCT message_key) FROM applied") == MESSAGES
    assert env.query("SELECT count(*) FROM txhub_dedup WHERE state = 'processed'") == MESSAGES


@pytest.mark.parametrize("own_tx", [False, True], ids=["callers_tx", "own_tx"])
def test_racing_threads_apply_once(env: Env, own_tx: bool) -> None:
    make_table(env)
    errors: list = []

    def run(w: str) -> None:
        try:
            race(env.conninfo, w, own_tx)
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    check_once(env)


def test_racing_processes_apply_once(env: Env) -> None:
    make_table(env)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=race, args=(env.conninfo, f"p{i}", i % 2 == 0)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    check_once(env)


@pytest.mark.parametrize("biz,key", [
    ("", "k"), ("b", ""), ("b", "k" * 256), ("b" * 65, "k"), ("b", b"k\xff"), ("b", "k\x01"),
    ("b", "k\x00x"), ("b\n", "k"), ("b", "a\u0085"), (5, "k"),
])
def test_bad_ids_are_refused_before_any_sql(env: Env, biz: object, key: object) -> None:
    d = make_table(env)
    with connect(env) as a:
        with pytest.raises(InvalidInput):
            d.claim(a, biz, key)  # type: ignore[arg-type]
    assert env.query("SELECT count(*) FROM txhub_dedup") == 0


@pytest.mark.parametrize("table", ["a;drop table x", "A", "1x", "a.b.c", "", "a-b", ".a"])
def test_bad_table_names(table: str) -> None:
    with pytest.raises(InvalidInput):
        Dedup(table=table)


def test_claim_record_schema_table_and_errors(env: Env) -> None:
    make_table(env)
    with connect(env) as a:
        a.execute("CREATE SCHEMA app")
        own = Dedup(table="app.seen")
        own.create_table(a)
        c = own.claim_record(a, [("x", b"1"), ("txhub-biz-id", b"shop"), ("txhub-message-key", b"o-1")])
        assert c.result == Result.CLAIMED
        with pytest.raises(InvalidInput):
            own.claim_record(a, [("txhub-biz-id", b"shop")])
        with pytest.raises(InvalidInput):
            own.done(a, Claim(Result.DUPLICATE, "shop", "o-1", c.holder, False))
        with pytest.raises(DatabaseError, match="42P01") as e:
            Dedup(table="nowhere").claim(a, "b", "k")
        assert not e.value.retriable
    assert TABLE_SQL.startswith("CREATE TABLE IF NOT EXISTS txhub_dedup (")
    with pytest.raises(InvalidInput):
        Dedup(lease_ms=0)
