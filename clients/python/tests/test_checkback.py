"""Check-back requests: refused when they should be, answered by
handle() and by CheckbackServer over HTTP."""
from __future__ import annotations

import threading
import urllib.error
import urllib.request

import pytest

from txhub import checkback
from txhub.checkback import CheckbackRequest, CheckbackServer, Outcome
from txhub.errors import InvalidInput, Unauthorized

NOW = 1795000000
QUERY = "biz_id=shop&message_key=order-1&bizID=shop&messageKey=order-1"


def signed(secret: str = "s3cret", ts: int = NOW) -> dict:
    return {"X-Txhub-Attempt": "1", "X-Txhub-Timestamp": str(ts),
            "X-Txhub-Signature": checkback.signature(secret, ts, "shop", "order-1")}


def verify(query: str, headers: dict, secret: str = "s3cret", now: int = NOW) -> None:
    checkback.verify(checkback.parse_request(query, headers), secret, now=now)


def test_a_good_request_verifies() -> None:
    verify(QUERY, signed())
    verify(QUERY, signed(ts=NOW - 300))
    verify(QUERY, signed(ts=NOW + 300))


@pytest.mark.parametrize("query,headers,secret,now", [
    (QUERY, signed(), "wrong", NOW),                               # wrong secret
    (QUERY, signed(ts=NOW - 301), "s3cret", NOW),                  # old
    (QUERY, signed(ts=NOW + 301), "s3cret", NOW),                  # future
    (QUERY, signed(), "s3cret", None),                             # the real clock: years away
    ("biz_id=shop&message_key=order-2", signed(), "s3cret", NOW),  # changed key
    ("biz_id=shop.&message_key=order-1", signed(), "s3cret", NOW),  # changed biz_id
    (QUERY, {**signed(), "X-Txhub-Timestamp": str(NOW + 1)}, "s3cret", NOW),  # changed ts
    (QUERY, {"X-Txhub-Attempt": "1"}, "s3cret", NOW),              # unsigned
], ids=["wrong_secret", "old", "future", "real_clock", "changed_key", "changed_biz_id",
        "changed_timestamp", "unsigned"])
def test_refused(query: str, headers: dict, secret: str, now: int) -> None:
    with pytest.raises(Unauthorized):
        verify(query, headers, secret, now)


@pytest.mark.parametrize("header,value", [
    ("X-Txhub-Signature", "v1=00"), ("X-Txhub-Signature", ""), ("X-Txhub-Signature", "v2="),
    ("X-Txhub-Signature", "v2=" + "A" * 64), ("X-Txhub-Signature", "V2=" + "0" * 64),
    ("X-Txhub-Timestamp", "-5"), ("X-Txhub-Timestamp", "12a"), ("X-Txhub-Timestamp", ""),
    ("X-Txhub-Attempt", "0"), ("X-Txhub-Attempt", "x"),
])
def test_malformed_headers_are_invalid(header: str, value: str) -> None:
    with pytest.raises(InvalidInput):
        checkback.parse_request(QUERY, {**signed(), header: value})


def test_timestamp_without_signature_is_invalid() -> None:
    with pytest.raises(InvalidInput):
        checkback.parse_request(QUERY, {"X-Txhub-Timestamp": str(NOW)})


def test_header_names_are_case_insensitive() -> None:
    req = checkback.parse_request(QUERY, {k.lower(): v for k, v in signed().items()})
    assert req.attempt == 1 and req.timestamp == NOW


def test_empty_secret_is_refused() -> None:
    req = checkback.parse_request(QUERY, signed())
    with pytest.raises(InvalidInput):
        checkback.verify(req, "", now=NOW)


def decide(req: CheckbackRequest) -> Outcome:
    if req.biz_id != "shop":
        raise RuntimeError("database is down")
    return Outcome.COMMITTED if req.message_key == "order-1" else Outcome.ROLLED_BACK


def test_handle_answers_every_case() -> None:
    assert checkback.handle(QUERY, signed(), decide, secret="s3cret", now=NOW) == \
        (200, b'{"status":"committed"}')
    status, body = checkback.handle(QUERY, signed("other"), decide, secret="s3cret", now=NOW)
    assert status == 401 and b"wrong signature" in body
    assert checkback.handle("biz_id=shop", signed(), decide, secret="s3cret", now=NOW)[0] == 400
    assert checkback.handle("biz_id=x&message_key=y", {}, decide)[0] == 503
    assert checkback.handle("biz_id=shop&message_key=o-9", {}, decide) == \
        (200, b'{"status":"rolled_back"}')
    assert checkback.answer_body(Outcome.UNKNOWN) == b'{"status":"unknown"}'


def test_the_server_answers_over_http() -> None:
    srv = CheckbackServer(("127.0.0.1", 0), decide, secret="s3cret")
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        base = f"http://127.0.0.1:{srv.server_address[1]}"
        import time
        now = int(time.time())
        req = urllib.request.Request(f"{base}/txhub/check?{QUERY}", headers=signed(ts=now))
        with urllib.request.urlopen(req, timeout=5) as r:
            assert r.status == 200 and r.read() == b'{"status":"committed"}'
        for path, headers, code in [(f"/txhub/check?{QUERY}", {}, 401),
                                    ("/txhub/check?biz_id=shop", signed(ts=now), 400),
                                    (f"/other?{QUERY}", signed(ts=now), 404)]:
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(urllib.request.Request(base + path, headers=headers), timeout=5)
            assert e.value.code == code
    finally:
        srv.shutdown()
        srv.server_close()
