#!/usr/bin/env python3
r"""A producer's check-back endpoint for txhub, to copy and adapt.

txhub asks it, for a prepare that got no commit or rollback in time:
    GET /txhub/check?biz_id=shop&message_key=o-1&bizID=shop&messageKey=o-1
    X-Txhub-Attempt: 1
    X-Txhub-Timestamp: 1795000000            (when a secret is set)
    X-Txhub-Signature: v2=<hex HMAC-SHA256(secret, "<ts>\n<biz_id>\n<message_key>")>
and it answers {"status": "committed"} or {"status": "rolled_back"}.

How it answers truthfully: the business transaction writes a row into
txhub_barrier (message_key, 'committed') in the same local transaction as
the business data. The check-back *inserts* (message_key, 'rolled_back')
and keeps whichever row got there first:
  - the business transaction committed first: its row wins -> "committed";
  - it is still running: the insert waits for it (a unique key), then as above;
  - it rolled back or never ran: our row wins, and if the business code
    tries later, its insert fails and its transaction aborts -> "rolled_back".
So the answer is final and never a guess, and "unknown" is not needed. If
the database cannot be reached, answer with an error status (503): txhub
asks again later; never answer "rolled_back" on an error.

This example keeps the barrier in SQLite so that it runs anywhere; with
PostgreSQL the check-back is one statement:
    INSERT INTO txhub_barrier (message_key, outcome) VALUES ($1, 'rolled_back')
        ON CONFLICT (message_key) DO NOTHING;
    SELECT outcome FROM txhub_barrier WHERE message_key = $1;

Run:   checkback_endpoint.py serve --db shop.sqlite --port 8080 [--secret S]
Demo:  checkback_endpoint.py commit --db shop.sqlite o-1   (a business transaction)
The secret can also come from TXHUB_CHECKBACK_SECRET.
"""
import argparse
import hashlib
import hmac
import json
import os
import sqlite3
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

MAX_CLOCK_SKEW = 300  # seconds a signed request may be old (or early)

SCHEMA = """
CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS txhub_barrier (
    message_key TEXT PRIMARY KEY,
    outcome     TEXT NOT NULL CHECK (outcome IN ('committed', 'rolled_back'))
);
"""


def connect(path):
    db = sqlite3.connect(path, timeout=30, isolation_level=None)
    db.executescript(SCHEMA)
    return db


def business_transaction(path, message_key):
    """What the producer does: business data and the barrier row, one transaction.
    (It publishes the prepare envelope before and the commit envelope after.)"""
    db = connect(path)
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("INSERT INTO orders (id, amount) VALUES (?, ?)", (message_key, "12.50"))
        db.execute("INSERT INTO txhub_barrier (message_key, outcome) VALUES (?, 'committed')",
                   (message_key,))
        db.execute("COMMIT")
    except sqlite3.IntegrityError:
        db.execute("ROLLBACK")  # a check-back already declared it rolled back
        raise SystemExit(f"{message_key}: already rolled back by a check-back; not committed")


def check(path, message_key):
    db = connect(path)
    db.execute("BEGIN IMMEDIATE")  # waits for a business transaction in progress
    db.execute("INSERT OR IGNORE INTO txhub_barrier (message_key, outcome) VALUES (?, 'rolled_back')",
               (message_key,))
    (outcome,) = db.execute("SELECT outcome FROM txhub_barrier WHERE message_key = ?",
                            (message_key,)).fetchone()
    db.execute("COMMIT")
    db.close()
    return outcome


def signature_ok(secret, headers, biz_id, message_key):
    """Signature v2: the three parts joined by newlines, which no id holds,
    so one message's signature can never be replayed as another's."""
    ts, sig = headers.get("X-Txhub-Timestamp", ""), headers.get("X-Txhub-Signature", "")
    if not ts.isdigit() or abs(time.time() - int(ts)) > MAX_CLOCK_SKEW:
        return False
    if "\n" in biz_id or "\n" in message_key:
        return False
    text = f"{ts}\n{biz_id}\n{message_key}".encode()
    want = "v2=" + hmac.new(secret.encode(), text, hashlib.sha256).hexdigest()
    return hmac.compare_digest(want.encode(), sig.encode())


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: txhub reuses connections

    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlsplit(self.path)
        q = parse_qs(url.query)
        biz_id, message_key = q.get("biz_id", [""])[0], q.get("message_key", [""])[0]
        if url.path != "/txhub/check" or not biz_id or not message_key:
            return self.answer(404, {"error": "not a check-back"})
        if self.server.secret and not signature_ok(self.server.secret, self.headers, biz_id,
                                                   message_key):
            return self.answer(401, {"error": "bad signature"})
        try:
            outcome = check(self.server.db_path, message_key)
        except sqlite3.Error as e:  # not a decision: txhub asks again later
            return self.answer(503, {"error": str(e)})
        self.answer(200, {"status": outcome})

    def log_message(self, fmt, *args):
        sys.stderr.write("checkback: " + (fmt % args) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--db", required=True)
    s.add_argument("--port", type=int, default=8080)
    s.add_argument("--secret", default=os.environ.get("TXHUB_CHECKBACK_SECRET", ""))
    c = sub.add_parser("commit")
    c.add_argument("--db", required=True)
    c.add_argument("message_key")
    a = p.parse_args()
    if a.cmd == "commit":
        return business_transaction(a.db, a.message_key)
    connect(a.db).close()
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.db_path, srv.secret = a.db, a.secret
    print(f"listening on {srv.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
