#!/usr/bin/env python3
"""A downstream consumer of orders.created, in Python, that processes each
order once although txhub delivers at least once.

Each record is claimed by its txhub-biz-id and txhub-message-key headers in
the same PostgreSQL transaction as the business write (a shipment row), so
the two commit together: a duplicate finds the claim and is skipped, a
failed write leaves no claim, and the record is processed again. Offsets
are committed to Kafka after the database.

  consumer.py [--topic orders.created] [--group shipping] [--idle SECONDS]
Connection settings: --pg (TXHUB_PG), --brokers (TXHUB_BROKERS).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import confluent_kafka
import psycopg

from txhub import Dedup
from txhub.dedup import Result
from txhub.errors import DatabaseError, InvalidInput


def ship(db: psycopg.Connection, dedup: Dedup, msg: confluent_kafka.Message) -> str:
    """Process one record; returns what happened."""
    while True:
        try:
            with db.transaction():
                claim = dedup.claim_record(db, msg.headers())
                if claim.result == Result.CLAIMED:
                    order = json.loads(msg.value())
                    db.execute("INSERT INTO shipments (order_id, amount) VALUES (%s, %s)",
                               (order["order_id"], order["amount"]))
                    dedup.done(db, claim)
            if claim.result != Result.BUSY:
                return claim.result.value
        except DatabaseError as e:
            if not e.retriable:
                raise
        time.sleep(1)  # busy elsewhere, or a retriable error: the same record again


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pg", default=os.environ.get("TXHUB_PG", ""))
    p.add_argument("--brokers", default=os.environ.get("TXHUB_BROKERS", "localhost:9092"))
    p.add_argument("--topic", default="orders.created")
    p.add_argument("--group", default="shipping")
    p.add_argument("--idle", type=float, default=0,
                   help="stop this many seconds after the last record (30 s after the start when "
                        "none came); 0: never")
    a = p.parse_args()
    dedup = Dedup()
    with psycopg.connect(a.pg, autocommit=True) as db:
        dedup.create_table(db)
        db.execute("CREATE TABLE IF NOT EXISTS shipments (order_id text NOT NULL, amount numeric NOT NULL)")
        c = confluent_kafka.Consumer({"bootstrap.servers": a.brokers, "group.id": a.group,
                                      "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        c.subscribe([a.topic])
        start, last = time.monotonic(), 0.0
        try:
            while not a.idle or (time.monotonic() - last < a.idle if last else time.monotonic() - start < 30):
                msg = c.poll(0.5)
                if msg is None or msg.error():
                    continue
                last = time.monotonic()
                try:
                    what = ship(db, dedup, msg)
                except InvalidInput as e:  # not a txhub record: nothing to deduplicate on
                    what = f"skipped ({e})"
                print(f"{msg.topic()}/{msg.partition()}@{msg.offset()}: {what}", flush=True)
                c.commit(msg, asynchronous=False)
        finally:
            c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
