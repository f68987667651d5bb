#!/usr/bin/env python3
"""An order service on txhub, in Python: the producer's side to copy.

Placing an order is txhub's three steps around the service's own
PostgreSQL transaction:
  1. prepare: the order.created event goes to txhub, which stores it but
     publishes nothing yet (Producer.prepare returns once Kafka has it);
  2. the local transaction: the order row, and a row in txhub_barrier
     saying "committed", commit together;
  3. commit: txhub publishes the event.
If the service dies between 1 and 3, txhub asks its check-back endpoint
(`serve`), which answers from the database and never guesses: it inserts
(message_key, 'rolled_back') into txhub_barrier unless the local
transaction's 'committed' row is there, so a transaction that has not
committed by then never can (its own barrier insert fails).

  order_service.py order ORDER-ID [--amount 12.50] [--crash after-prepare|before-commit]
  order_service.py serve [--port 8080] [--secret S]
Connection settings: --pg (TXHUB_PG), --brokers (TXHUB_BROKERS),
--control-topic, --forward-topic, --checkback-url; the secret also from
TXHUB_CHECKBACK_SECRET.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import psycopg

from txhub import Message, Producer
from txhub.checkback import CheckbackRequest, CheckbackServer, Outcome

BIZ_ID = "shop"

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, amount numeric NOT NULL);
CREATE TABLE IF NOT EXISTS txhub_barrier (
    message_key text PRIMARY KEY,
    outcome     text NOT NULL CHECK (outcome IN ('committed', 'rolled_back'))
);
"""


def place_order(a: argparse.Namespace) -> int:
    key = a.order_id
    event = Message(BIZ_ID, key, payload_json=json.dumps({"order_id": key, "amount": a.amount}),
                    forward_topic=a.forward_topic, forward_key=key, checkback_url=a.checkback_url)
    with Producer(a.brokers, control_topic=a.control_topic) as producer, \
            psycopg.connect(a.pg) as db:
        producer.prepare(event)
        if a.crash == "after-prepare":
            os._exit(3)  # the demo's crash: no local transaction, no decision
        try:
            with db.transaction():
                db.execute("INSERT INTO orders (id, amount) VALUES (%s, %s)", (key, a.amount))
                db.execute("INSERT INTO txhub_barrier (message_key, outcome) VALUES (%s, 'committed')",
                           (key,))
        except psycopg.errors.UniqueViolation:
            # the order exists already, or a check-back declared it rolled back
            producer.rollback(BIZ_ID, key)
            print(f"{key}: not placed (a duplicate, or rolled back by a check-back)", file=sys.stderr)
            return 1
        except BaseException:
            producer.rollback(BIZ_ID, key)
            raise
        if a.crash == "before-commit":
            os._exit(3)  # committed locally, no decision sent: the check-back finds it
        producer.commit(BIZ_ID, key)
    print(f"{key}: placed")
    return 0


def decide_from(pg: str):
    def decide(req: CheckbackRequest) -> Outcome:
        if req.biz_id != BIZ_ID:
            raise LookupError(f"not our business line: {req.biz_id}")  # answered 503
        with psycopg.connect(pg, autocommit=True) as db:  # a pool in a real service
            # waits for a local transaction in flight on the same key
            db.execute("INSERT INTO txhub_barrier (message_key, outcome) VALUES (%s, 'rolled_back') "
                       "ON CONFLICT (message_key) DO NOTHING", (req.message_key,))
            row = db.execute("SELECT outcome FROM txhub_barrier WHERE message_key = %s",
                             (req.message_key,)).fetchone()
        return Outcome(row[0])
    return decide


def serve(a: argparse.Namespace) -> int:
    srv = CheckbackServer(("127.0.0.1", a.port), decide_from(a.pg), secret=a.secret or None)
    print(f"listening on {srv.server_address[1]}", flush=True)
    srv.serve_forever()
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pg", default=os.environ.get("TXHUB_PG", ""))
    p.add_argument("--brokers", default=os.environ.get("TXHUB_BROKERS", "localhost:9092"))
    p.add_argument("--control-topic", default="txhub.control")
    p.add_argument("--forward-topic", default="orders.created")
    p.add_argument("--checkback-url", default="http://127.0.0.1:8080/txhub/check")
    sub = p.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("order")
    o.add_argument("order_id")
    o.add_argument("--amount", default="12.50")
    o.add_argument("--crash", choices=["after-prepare", "before-commit"])
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, default=8080)
    s.add_argument("--secret", default=os.environ.get("TXHUB_CHECKBACK_SECRET", ""))
    a = p.parse_args()
    with psycopg.connect(a.pg, autocommit=True) as db:
        db.execute(SCHEMA)
    return place_order(a) if a.cmd == "order" else serve(a)


if __name__ == "__main__":
    sys.exit(main())
