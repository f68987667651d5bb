"""Fixtures for the package's tests. The pure tests need nothing; the
others need what tests/with-services.sh provides (TXHUB_PG, TXHUB_BROKERS,
TXHUB_BIN) and are skipped without it. Each such test gets its own
database, control topic and consumer group, as the C harness does."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[3]
VECTORS = ROOT / "tests" / "vectors"


def load_vectors(name: str) -> Any:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


class Env:
    """A test's own database, control topic and group, and its hubs."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.brokers = os.environ["TXHUB_BROKERS"]
        self.bin = os.environ["TXHUB_BIN"]
        self.conninfo = f"{os.environ['TXHUB_PG']} dbname={name}"
        self.topic = f"ctl.{name}"
        self.forward = f"fw.{name}"
        self.hubs: List[subprocess.Popen] = []

    def settings(self) -> List[str]:
        base = [f"pg={self.conninfo}", f"control_topic={self.topic}", f"group={self.name}",
                f"brokers={self.brokers}", "kafka.session.timeout.ms=6000",
                "kafka.heartbeat.interval.ms=500"]
        return [a for s in base for a in ("-X", s)]

    def txhub(self, *args: str) -> None:
        subprocess.run([self.bin, *args, *self.settings()], check=True, capture_output=True)

    def hub(self, *settings: str) -> subprocess.Popen:
        extra = [a for s in settings for a in ("-X", s)]
        log = open(f"/tmp/txhub-{self.name}-{len(self.hubs) + 1}.log", "wb")
        p = subprocess.Popen([self.bin, "run", *self.settings(), *extra], stdout=log, stderr=log)
        self.hubs.append(p)
        return p

    def stop(self, p: subprocess.Popen) -> int:
        p.send_signal(signal.SIGTERM)
        return p.wait(60)

    def query(self, sql: str, *params: Any) -> Any:
        import psycopg
        with psycopg.connect(self.conninfo, autocommit=True) as c:
            row = c.execute(sql, params).fetchone()
            return None if row is None else row[0]

    def wait(self, sql: str, expect: Any, timeout: float = 60.0, *params: Any) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            got = self.query(sql, *params)
            if got == expect or time.monotonic() > deadline:
                return got
            time.sleep(0.1)

    def read_topic(self, topic: str, idle: float = 1.5) -> list:
        """Every record on topic, read until idle seconds pass with nothing new."""
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": self.brokers, "group.id": "pytest-reader",
                      "enable.auto.commit": False})
        try:
            md = None
            for _ in range(50):
                md = c.list_topics(topic, timeout=5).topics.get(topic)
                if md is not None and md.error is None and md.partitions:
                    break
                time.sleep(0.1)
            c.assign([TopicPartition(topic, p, -2) for p in md.partitions])  # -2: beginning
            out, last = [], time.monotonic()
            while time.monotonic() - last < idle:
                m = c.poll(0.1)
                if m is None or m.error():
                    continue
                out.append(m)
                last = time.monotonic()
            return out
        finally:
            c.close()


@pytest.fixture
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    for var in ("TXHUB_PG", "TXHUB_BROKERS", "TXHUB_BIN"):
        if not os.environ.get(var):
            pytest.skip(f"{var} is not set: run through tests/with-services.sh")
    import psycopg
    name = "py_" + re.sub(r"[^a-z0-9]", "", request.node.name.lower())[:40] + f"_{os.getpid()}"
    with psycopg.connect(os.environ["TXHUB_PG"], autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    e = Env(name)
    e.txhub("migrate")
    yield e
    for p in e.hubs:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.fixture
def db(env: Env) -> Iterator[Any]:
    import psycopg
    with psycopg.connect(env.conninfo) as conn:
        yield conn


def row(env: Env, what: str, key: str) -> Optional[str]:
    return env.query(f"SELECT {what} FROM txhub.messages WHERE message_key = %s", key)
