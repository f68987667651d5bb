"""The Python producer against a running hub: every kind of envelope is
accepted and ends in its state, bad input sends nothing, and a producer
killed between prepare and commit is resolved by a check-back answered
through txhub.checkback."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import Env, load_vectors, row
from test_vectors import message
from txhub import Message, Producer
from txhub.checkback import CheckbackRequest, CheckbackServer, Outcome
from txhub.errors import InvalidInput, KafkaError, TooLarge, TxhubError

SRC = str(Path(__file__).resolve().parents[1] / "src")


def test_every_envelope_is_accepted_and_ends_in_its_state(env: Env) -> None:
    fwd = env.forward
    with Producer(env.brokers, control_topic=env.topic) as p:
        p.prepare(Message("shop", "p-1", payload_json='{ "order_id": 1, "total": 12.50 }',
                          forward_topic=fwd, forward_key="p-1",
                          forward_headers={"source": "shop", "trace": 't-"1"'}))
        p.commit("shop", "p-1")
        p.prepare(Message("shop", "p-2", payload="text é", forward_topic=fwd))
        p.rollback("shop", "p-2")
        p.one_shot(Message("shop", "p-3", payload=b"\x00\x01\x02\xff", forward_topic=fwd))
        p.prepare(Message("shop", "p-4", payload="never decided", forward_topic=fwd))
        # JSON strings: the consumer gets their compact JSON text, quotes and all
        p.one_shot(Message("shop", "p-5", payload_json='"hello"', forward_topic=fwd))
        p.one_shot(Message("shop", "p-6", payload_json=' "q\\" \\u00e9 é" ', forward_topic=fwd))
        results: list = []
        lock = threading.Lock()

        def done(err: object) -> None:
            with lock:
                results.append(err)

        for i in range(20):
            p.send("prepare", Message("shop", f"a-{i}", payload=f"a-{i}", forward_topic=fwd), done)
            p.send("rollback" if i % 2 else "commit", Message("shop", f"a-{i}"), done)
        p.flush()
        assert results == [None] * 40
    hub = env.hub()
    assert env.wait("SELECT count(*) FROM txhub.messages", 26) == 26
    assert env.wait("SELECT status || '/' || coalesce(send_status, '-') FROM txhub.messages "
                    "WHERE message_key = 'p-1'", "committed/sent") == "committed/sent"
    assert env.wait("SELECT status FROM txhub.messages WHERE message_key = 'p-2'", "rolled_back") == "rolled_back"
    assert env.wait("SELECT send_status FROM txhub.messages WHERE message_key = 'p-3'", "sent") == "sent"
    assert row(env, "status", "p-4") == "prepared"
    assert env.wait("SELECT count(*) FROM txhub.messages WHERE send_status = 'sent'", 14) == 14
    assert env.query("SELECT count(*) FROM txhub.messages WHERE message_key LIKE 'a-%%' "
                     "AND status = 'rolled_back'") == 10
    assert env.query("SELECT count(*) FROM txhub.rejected") == 0
    recs = {dict(m.headers())["txhub-message-key"].decode(): m for m in env.read_topic(fwd)}
    assert len(recs) == 14
    assert recs["p-1"].value() == b'{"order_id":1,"total":12.50}'
    assert recs["p-1"].key() == b"p-1"
    assert dict(recs["p-1"].headers())["trace"] == b't-"1"'
    assert recs["p-3"].value() == b"\x00\x01\x02\xff" and recs["p-3"].key() is None
    assert recs["p-5"].value() == b'"hello"'
    assert recs["p-6"].value() == '"q\\" \\u00e9 é"'.encode()
    assert json.loads(recs["p-6"].value()) == 'q" é é'
    # every envelope was keyed by its message_key
    ctl = env.read_topic(env.topic)
    assert len(ctl) == 48
    assert all(m.key().decode() in m.value().decode() for m in ctl)
    assert env.stop(hub) == 0


def test_bad_input_is_refused_before_anything_is_sent(env: Env) -> None:
    with Producer(env.brokers, control_topic=env.topic) as p:
        n = 0
        for vec in load_vectors("envelopes.json")["invalid_inputs"]:
            if "max_bytes" in vec["input"]:
                continue  # the producer's own limit is tried below
            m = message(vec["input"])
            calls = {"prepare": [p.prepare, lambda m: p.send("prepare", m, print)],
                     "commit": [p.one_shot if (m.payload is not None or m.payload_json is not None
                                               or m.forward_topic) else
                                lambda m: p.commit(m.biz_id, m.message_key)],
                     "rollback": [lambda m: p.rollback(m.biz_id, m.message_key)]}[vec["type"]]
            for call in calls:
                with pytest.raises(InvalidInput, match=r".{6}"):
                    call(m)
            n += 1
        assert n >= 30
        with pytest.raises(InvalidInput, match="control topic"):
            p.one_shot(Message("b", "k", payload="x", forward_topic=env.topic))
    with Producer(env.brokers, control_topic=env.topic, max_bytes=200) as p:
        with pytest.raises(TooLarge, match=r"max_bytes \(200\)"):
            p.prepare(Message("b", "k", payload=b"x" * 300, forward_topic="t"))
        p.one_shot(Message("b", "the-only-one", payload="x", forward_topic="t"))
    got = env.read_topic(env.topic)
    assert [m.key() for m in got] == [b"the-only-one"]


@pytest.mark.parametrize("kwargs", [
    {"brokers": ""}, {"brokers": "x:1", "control_topic": "a b"}, {"brokers": "x:1", "max_bytes": 10},
    {"brokers": "x:1", "kafka": {"acks": "1"}}, {"brokers": "x:1", "kafka": {"enable.idempotence": "false"}},
    {"brokers": "x:1", "kafka": {"no.such.property": "1"}},
])
def test_bad_configuration(kwargs: dict) -> None:
    with pytest.raises(InvalidInput):
        Producer(**kwargs)


def test_an_unreachable_broker_is_a_retriable_error() -> None:
    with Producer("127.0.0.1:1", timeout_ms=1500) as p:
        with pytest.raises(KafkaError, match="not confirmed") as e:
            p.commit("b", "k")
        assert e.value.retriable


CRASH = """
import os, signal, sys
from txhub import Message, Producer
brokers, topic, key, url, fwd = sys.argv[1:6]
p = Producer(brokers, control_topic=topic)
p.prepare(Message("shop", key, payload=key, forward_topic=fwd, checkback_url=url, first_after_ms=500))
os.kill(os.getpid(), signal.SIGKILL)  # before the commit: the outcome is in the producer's database
"""


def prepare_and_die(env: Env, key: str, url: str) -> None:
    r = subprocess.run([sys.executable, "-c", CRASH, env.brokers, env.topic, key, url, env.forward],
                       env={**os.environ, "PYTHONPATH": SRC}, capture_output=True)
    assert r.returncode == -9, r.stderr.decode()


def test_a_producer_killed_after_prepare_is_resolved_by_its_checkback(env: Env) -> None:
    def decide(req: CheckbackRequest) -> Outcome:  # crash-1 committed locally, crash-2 did not
        return Outcome.COMMITTED if req.message_key == "crash-1" else Outcome.ROLLED_BACK

    srv = CheckbackServer(("127.0.0.1", 0), decide, secret="s3cret")
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/txhub/check"
    try:
        hub = env.hub("checkback.secret=s3cret", "checkback.backoff_ms=200")
        prepare_and_die(env, "crash-1", url)
        prepare_and_die(env, "crash-2", url)
        q = ("SELECT status || '/' || coalesce(send_status, '-') || '/' || check_attempts "
             "FROM txhub.messages WHERE message_key = %s")
        assert env.wait(q, "committed/sent/1", 60, "crash-1") == "committed/sent/1"
        assert env.wait(q, "rolled_back/-/1", 60, "crash-2") == "rolled_back/-/1"
        assert env.stop(hub) == 0
        # the wrong secret: refused with 401, never decided
        hub = env.hub("checkback.secret=not-it", "checkback.backoff_ms=200", "checkback.max_attempts=2")
        prepare_and_die(env, "crash-3", url)
        assert env.wait("SELECT status FROM txhub.messages WHERE message_key = 'crash-3'",
                        "check_failed") == "check_failed"
        assert "HTTP 401" in row(env, "last_error", "crash-3")
        assert env.stop(hub) == 0
    finally:
        srv.shutdown()
        srv.server_close()


def test_errors_carry_status_and_retriable() -> None:
    assert InvalidInput("x").status == "invalid" and not InvalidInput("x").retriable
    assert issubclass(TooLarge, InvalidInput) and issubclass(KafkaError, TxhubError)
