"""The examples (examples/python, examples/c) against a running hub: an
order placed normally, one whose service died before its commit and one
that died before its local transaction, both settled by the example's
check-back endpoint; a late transaction refused; and the consumer applying
each order once although the forward topic holds a duplicate."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List

import pytest

from conftest import ROOT, Env

SRC = str(Path(__file__).resolve().parents[1] / "src")
C_BIN = os.environ.get("TXHUB_EXAMPLES_BIN", "")


class Example:
    """Runs one language's order service and consumer for env."""

    def __init__(self, lang: str, env: Env) -> None:
        self.lang, self.env = lang, env
        self.run_env = {**os.environ, "PYTHONPATH": SRC, "TXHUB_PG": env.conninfo,
                        "TXHUB_BROKERS": env.brokers, "ORDERS_CONTROL_TOPIC": env.topic,
                        "ORDERS_FORWARD_TOPIC": env.forward}
        self.url = ""

    def cmd(self, prog: str, *args: str) -> List[str]:
        if self.lang == "c":
            return [os.path.join(C_BIN, prog), *args]
        common = ["--control-topic", self.env.topic, "--forward-topic", self.env.forward,
                  "--checkback-url", self.url] if prog == "order_service" else []
        return [sys.executable, str(ROOT / "examples" / "python" / f"{prog}.py"), *common, *args]

    def serve(self, secret: str) -> subprocess.Popen:
        args = ["serve", "0", secret] if self.lang == "c" else ["serve", "--port", "0", "--secret", secret]
        p = subprocess.Popen(self.cmd("order_service", *args), env=self.run_env, stdout=subprocess.PIPE)
        line = p.stdout.readline().decode()
        assert line.startswith("listening on "), line
        self.url = f"http://127.0.0.1:{int(line.split()[-1])}/txhub/check"
        self.run_env["ORDERS_CHECKBACK_URL"] = self.url
        return p

    def order(self, key: str, crash: str = "") -> int:
        args = ["order", key] + (["--crash", crash] if crash else [])
        return subprocess.run(self.cmd("order_service", *args), env=self.run_env,
                              capture_output=True, timeout=60).returncode

    def consume(self) -> str:
        group = "shipping-" + self.env.name
        args = [self.env.forward, group, "3"] if self.lang == "c" else \
            ["--topic", self.env.forward, "--group", group, "--idle", "3"]
        r = subprocess.run(self.cmd("consumer", *args), env=self.run_env, capture_output=True, timeout=120)
        assert r.returncode == 0, r.stderr.decode()
        return r.stdout.decode() + r.stderr.decode()


@pytest.fixture(params=["python", "c"])
def example(request: pytest.FixtureRequest, env: Env) -> Iterator[Example]:
    if request.param == "c" and not C_BIN:
        pytest.skip("TXHUB_EXAMPLES_BIN (the built C examples) is not set")
    yield Example(request.param, env)


def test_the_examples_end_to_end(example: Example, env: Env) -> None:
    server = example.serve("s3cret")
    try:
        hub = env.hub("checkback.secret=s3cret", "checkback.first_after_ms=500",
                      "checkback.backoff_ms=200")
        q = ("SELECT status || '/' || coalesce(send_status, '-') FROM txhub.messages "
             "WHERE message_key = %s")
        assert example.order("o-1") == 0
        assert example.order("o-2", "before-commit") == 3
        assert example.order("o-3", "after-prepare") == 3
        assert env.wait(q, "committed/sent", 60, "o-1") == "committed/sent"
        assert env.wait(q, "committed/sent", 60, "o-2") == "committed/sent"
        assert env.wait(q, "rolled_back/-", 60, "o-3") == "rolled_back/-"
        # the check-back fenced o-3 off: its late local transaction is refused
        assert example.order("o-3") == 1
        assert env.query("SELECT count(*) FROM orders") == 2
        assert env.query("SELECT count(*) FROM txhub.rejected") == 0
        assert env.stop(hub) == 0
    finally:
        server.kill()
        server.wait()
    # a duplicate of o-1's forward, as a hub crash could cause
    from confluent_kafka import Producer
    first = [m for m in env.read_topic(env.forward)
             if dict(m.headers())["txhub-message-key"] == b"o-1"][0]
    p = Producer({"bootstrap.servers": env.brokers})
    p.produce(env.forward, value=first.value(), key=first.key(), headers=first.headers())
    p.flush(10)
    out = example.consume()
    assert out.count(": claimed") == 2 and out.count(": duplicate") == 1, out
    assert env.query("SELECT count(*) FROM shipments") == 2
    assert env.query("SELECT count(DISTINCT order_id) FROM shipments") == 2
