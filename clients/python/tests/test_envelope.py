"""payload_json: the consumer gets the value's compact JSON text, which
parses back to the value. By docs/producers.md: Envelope fields the hub forwards a JSON string
payload as its UTF-8 bytes and any other payload as its compact text."""
from __future__ import annotations

import json

import pytest

from txhub.envelope import Message, encode

CASES = [  # (the caller's JSON text, the compact text the consumer gets)
    ('"hello"', '"hello"'),
    (' "" ', '""'),
    ('"q\\" b\\\\ s\\/ \\n\\u00e9 é \\ud83d\\ude00"\n', '"q\\" b\\\\ s\\/ \\n\\u00e9 é \\ud83d\\ude00"'),
    (" -12.50e-1 ", "-12.50e-1"),
    ("true", "true"), ("false", "false"), (" null", "null"),
    ('[ 1 , "a \\" b" , {} ]', '[1,"a \\" b",{}]'),
    ('{ "k" : { "s" : " x " } }', '{"k":{"s":" x "}}'),
]


@pytest.mark.parametrize("text,compact", CASES)
def test_json_payload_reaches_the_consumer_as_its_compact_text(text: str, compact: str) -> None:
    out = encode("prepare", Message("b", "k", payload_json=text, forward_topic="t")).decode("utf-8")
    payload = json.loads(out)["payload"]
    if isinstance(payload, str):  # forwarded as the string's bytes
        assert payload == compact
    else:  # forwarded as the envelope's text of it, which is compact
        assert f'"payload":{compact},"forward"' in out
    assert json.loads(compact) == json.loads(text)


# Delayed delivery (docs/consumers.md: Delayed delivery): an aware datetime goes as RFC 3339; a
# naive one, a str the hub would refuse, both fields, or either without a
# forward topic are refused before anything is sent.
def test_not_before_from_an_aware_datetime() -> None:
    import datetime as dt
    t = dt.datetime(2026, 12, 1, 9, 0, 0, 500000, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    out = encode("prepare", Message("b", "k", payload="x", forward_topic="t", forward_not_before=t))
    assert json.loads(out)["forward"]["not_before"] == "2026-12-01T09:00:00.500000+01:00"


@pytest.mark.parametrize("fields", [
    {"forward_not_before": __import__("datetime").datetime(2026, 12, 1)},
    {"forward_not_before": "2026-12-01 09:00:00Z"},
    {"forward_not_before": "2026-12-01T09:00:00"},
    {"forward_not_before": "2026-04-31T09:00:00Z"},
    {"forward_not_before": 1796112000},
    {"delay_ms": -1},
    {"delay_ms": 1.5},
    {"delay_ms": True},
    {"delay_ms": 5, "forward_not_before": "2026-12-01T09:00:00Z"},
])
def test_bad_delays_are_refused(fields: dict) -> None:
    from txhub.errors import InvalidInput
    with pytest.raises(InvalidInput):
        encode("prepare", Message("b", "k", payload="x", forward_topic="t", **fields))
    with pytest.raises(InvalidInput):  # and without a forward at all
        encode("commit", Message("b", "k", **fields))
