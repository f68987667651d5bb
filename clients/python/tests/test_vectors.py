"""The package's envelope encoder and check-back code against the shared
vectors (tests/vectors), and the vectors against the JSON Schema."""
from __future__ import annotations

import base64
import json

import jsonschema
import pytest

from conftest import ROOT, load_vectors
from txhub import checkback
from txhub.envelope import Message, encode, minify
from txhub.errors import InvalidInput, TxhubError

ENVELOPES = load_vectors("envelopes.json")
CHECKBACK = load_vectors("checkback.json")
SCHEMA = json.loads((ROOT / "schema" / "envelope-v1.schema.json").read_text())


def _text(d: dict, name: str):
    """A string field, or its *_base64 twin (bytes that need not be UTF-8,
    handed over as the str a decoder would make of them)."""
    if name in d:
        return d[name]
    if name + "_base64" in d:
        return base64.b64decode(d[name + "_base64"]).decode("utf-8", "surrogateescape")
    return None


def message(inp: dict) -> Message:
    fw = inp.get("forward") or {}
    cb = inp.get("checkback") or {}
    tr = inp.get("trace") or {}
    payload = None
    if "payload_bytes_base64" in inp:
        payload = base64.b64decode(inp["payload_bytes_base64"])
    elif "payload_string" in inp or "payload_string_base64" in inp:
        payload = _text(inp, "payload_string")
    return Message(
        biz_id=_text(inp, "biz_id"), message_key=_text(inp, "message_key"), payload=payload,
        payload_json=inp.get("payload_json"), forward_topic=fw.get("topic"),
        forward_key=_text(fw, "key"),
        forward_headers=[tuple(h) for h in fw["headers"]] if "headers" in fw else None,
        checkback_url=cb.get("url"), first_after_ms=cb.get("first_after_ms"),
        traceparent=tr.get("traceparent"), tracestate=tr.get("tracestate"),
        forward_not_before=fw.get("not_before"), delay_ms=fw.get("delay_ms"))


@pytest.mark.parametrize("vec", ENVELOPES["envelopes"], ids=lambda v: v["name"])
def test_every_vector_encodes_to_its_exact_bytes(vec: dict) -> None:
    got = encode(vec["type"], message(vec["input"]))
    assert got == base64.b64decode(vec["encoded_base64"])
    assert got.decode("utf-8") == vec["encoded"]


JSON_VECTORS = [v for v in ENVELOPES["envelopes"] if "payload_json" in v["input"]]


@pytest.mark.parametrize("vec", JSON_VECTORS, ids=lambda v: v["name"])
def test_every_json_vector_forwards_its_compact_text(vec: dict) -> None:
    """What the vector says the consumer gets is the compact text of the
    caller's JSON, and parses back to the same value (a string too)."""
    text = vec["input"]["payload_json"]
    got = base64.b64decode(vec["hub"]["forwarded_base64"]).decode("utf-8")
    assert got == minify(text)
    assert json.loads(got) == json.loads(text)


def test_there_are_json_vectors_of_every_kind() -> None:
    kinds = {type(json.loads(v["input"]["payload_json"])).__name__ for v in JSON_VECTORS}
    assert kinds >= {"dict", "list", "str", "float", "bool", "NoneType"}


@pytest.mark.parametrize("vec", ENVELOPES["invalid_inputs"], ids=lambda v: v["name"])
def test_every_invalid_input_is_refused(vec: dict) -> None:
    with pytest.raises(InvalidInput) as e:
        encode(vec["type"], message(vec["input"]), vec["input"].get("max_bytes", 1048576))
    assert e.value.status == vec["status"]
    assert len(str(e.value)) > 5


def test_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("vec", ENVELOPES["envelopes"], ids=lambda v: v["name"])
def test_every_vector_envelope_passes_the_schema(vec: dict) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(vec["encoded"]))


@pytest.mark.parametrize("vec", ENVELOPES["invalid_envelopes"], ids=lambda v: v["name"])
def test_every_negative_envelope_fails_the_schema(vec: dict) -> None:
    assert not jsonschema.Draft202012Validator(SCHEMA).is_valid(json.loads(vec["envelope"]))


@pytest.mark.parametrize("vec", CHECKBACK["signatures"], ids=lambda v: v["name"])
def test_every_signature_vector(vec: dict) -> None:
    sig = checkback.signature(vec["secret"], vec["timestamp"], vec["biz_id"], vec["message_key"])
    assert sig == vec["header"]
    req = checkback.CheckbackRequest(vec["biz_id"], vec["message_key"], 1, vec["timestamp"], sig[3:])
    checkback.verify(req, vec["secret"], now=vec["timestamp"] + 300)
    with pytest.raises(TxhubError):
        checkback.verify(req, vec["secret"], now=vec["timestamp"] + 301)


@pytest.mark.parametrize("vec", CHECKBACK["queries"], ids=lambda v: v["name"])
def test_every_query_vector(vec: dict) -> None:
    if vec.get("error"):
        with pytest.raises(InvalidInput):
            checkback.parse_request(vec["query"], {"X-Txhub-Attempt": "1"})
        return
    req = checkback.parse_request(vec["query"], {"X-Txhub-Attempt": "1"})
    assert (req.biz_id, req.message_key, req.attempt) == (vec["biz_id"], vec["message_key"], 1)
