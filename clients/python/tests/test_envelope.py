"""payload_json: the consumer gets the value's compact JSON text, which
parses back to the value. By CONTRACT §2 the hub forwards a JSON string
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
