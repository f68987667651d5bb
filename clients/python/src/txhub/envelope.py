"""The envelope a producer sends (docs/producers.md: Envelope fields), and its encoder.

The encoding is deterministic and byte-identical to the C library's
``txhub_envelope_encode`` (tests/vectors/envelopes.json holds both to it):

- fields in this order, each only when present: ``"v":1``, ``type``,
  ``biz_id``, ``message_key``, ``payload`` or ``payload_base64``,
  ``forward`` (``topic``, ``key``, ``headers`` in the caller's order,
  ``not_before``, ``delay_ms``),
  ``checkback`` (``url``, ``first_after_ms``), ``trace`` (``traceparent``,
  ``tracestate``);
- compact: no white space outside strings;
- strings: UTF-8 as given; ``"`` and ``\\`` escaped with a backslash;
  U+0008, U+0009, U+000A, U+000C, U+000D as ``\\b \\t \\n \\f \\r``; other
  characters below U+0020 as ``\\u00xx`` (lowercase hex); nothing else;
- a bytes payload as standard base64 with padding;
- a JSON payload (``payload_json``) as the caller's JSON text with the white
  space outside strings removed, everything else as written; when that
  value is a string, its compact text goes as a JSON string (quoted as
  above), since the hub forwards a string payload as its bytes:
  ``"hello"`` as ``"\\"hello\\""``.
"""
from __future__ import annotations

import base64
import datetime as _dt
import json
import re
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import InvalidInput, TooLarge

BIZ_ID_MAX = 64
MESSAGE_KEY_MAX = 255
TOPIC_MAX = 249
HEADERS_MAX = 64
HEADER_NAME_MAX = 255
URL_MAX = 2048
FIRST_AFTER_MS_MAX = 2_592_000_000
DELAY_MS_MAX = 3_153_600_000_000  # 100 years; the hub's forward.max_delay bounds it further
JSON_DEPTH_MAX = 512
MAX_BYTES_DEFAULT = 1_048_576

TYPES = ("prepare", "commit", "rollback")

# W3C Trace Context level 1, as the hub checks it (hub/proto/trace.c)
TRACE_STATE_MAX = 512
TRACE_STATE_MEMBERS_MAX = 32
# a later version may go on after its flags with printable ASCII (it goes
# into HTTP and Kafka headers as it is), not ending with a space
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[\x20-\x7e]*)?")
_STATE_KEY = re.compile(r"[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13}")
_STATE_VALUE = re.compile(r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")

Headers = Union[Mapping[str, str], Sequence[Tuple[str, str]]]


@dataclass(frozen=True)
class Message:
    """One message as the producer describes it.

    Give at most one of ``payload`` (``bytes``: sent as ``payload_base64``
    and forwarded as they are; ``str``: sent as a JSON string, forwarded as
    its UTF-8 bytes) and ``payload_json`` (one JSON value as text: the
    consumer receives its compact text, which parses back to the same
    value, a JSON string with its quotes). A commit or rollback needs only
    the ids.
    """

    biz_id: str
    message_key: str
    payload: Union[bytes, str, None] = None
    payload_json: Optional[str] = None
    forward_topic: Optional[str] = None
    forward_key: Optional[str] = None
    forward_headers: Optional[Headers] = None
    checkback_url: Optional[str] = None
    first_after_ms: Optional[int] = None
    traceparent: Optional[str] = None
    tracestate: Optional[str] = None
    #: Delayed delivery (docs/consumers.md: Delayed delivery), at most one of the two, with a
    #: forward_topic: forwarded no earlier than ``forward_not_before`` (an RFC
    #: 3339 time with a zone, ``str``, or an aware ``datetime``), or than
    #: ``delay_ms`` after the commit. The hub rejects more than its
    #: ``forward.max_delay`` (default 30 days) ahead.
    forward_not_before: Union[str, _dt.datetime, None] = None
    delay_ms: Optional[int] = None


def _utf8(what: str, s: Any) -> bytes:
    if not isinstance(s, str):
        raise InvalidInput(f"{what} must be a str, not {type(s).__name__}")
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid UTF-8 (a lone surrogate)") from None


def _is_control(ch: str) -> bool:
    o = ord(ch)
    return o < 0x20 or 0x7F <= o <= 0x9F


def check_id(what: str, s: Any, limit: int) -> None:
    """Raise :class:`InvalidInput` unless ``s`` is 1..``limit`` UTF-8 bytes
    without control characters (C0, DEL, C1)."""
    raw = _utf8(what, s)
    if not raw:
        raise InvalidInput(f"{what} is empty")
    if len(raw) > limit:
        raise InvalidInput(f"{what} is {len(raw)} bytes, longer than {limit}")
    if "\x00" in s:
        raise InvalidInput(f"{what} contains a NUL byte")
    if any(_is_control(c) for c in s):
        raise InvalidInput(f"{what} contains a control character")


def valid_topic(s: Any) -> bool:
    """Kafka's topic name rules: 1..249 of a-z A-Z 0-9 . _ -, not . or .."""
    if not isinstance(s, str) or not 0 < len(s) <= TOPIC_MAX or s in (".", ".."):
        return False
    return all(c.isascii() and (c.isalnum() or c in "._-") for c in s)


def _valid_url(s: str) -> bool:
    low = s[:8].lower()
    skip = 7 if low.startswith("http://") else 8 if low.startswith("https://") else 0
    if not skip or len(s) > URL_MAX or len(s) == skip or s[skip] in "/?":
        return False
    return all(0x20 < ord(c) < 0x7F for c in s)


def quote(s: str) -> str:
    """A JSON string with the library's escaping (see the module's text)."""
    out = ['"']
    for c in s:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c < " ":
            short = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
            out.append(short.get(c, "\\u%04x" % ord(c)))
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _Obj(List[Tuple[str, Any]]):
    """A parsed JSON object kept as its (name, value) pairs."""


def _check_json_value(v: Any) -> None:
    """Strings (and names) without U+0000 or lone surrogates; depth limited.
    Iterative, so a deep value cannot exhaust the stack."""
    stack = [(v, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, list):
            if depth > JSON_DEPTH_MAX:
                raise InvalidInput("payload JSON: JSON nested too deeply")
            children = [x for kv in item for x in kv] if isinstance(item, _Obj) else item
            stack.extend((c, depth + 1) for c in children)
        elif isinstance(item, str):
            if "\x00" in item:
                raise InvalidInput("payload JSON: a string contains \\u0000, which txhub does not accept")
            _utf8("payload JSON", item)


def check_json(text: str) -> None:
    """Raise :class:`InvalidInput` unless ``text`` is one JSON value by RFC
    8259 that txhub accepts (no ``\\u0000``, no lone surrogate, at most
    512 levels deep) -- the same rules as the C library."""
    _utf8("payload JSON", text)
    try:
        value = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_Obj)
    except RecursionError:
        raise InvalidInput("payload JSON: JSON nested too deeply") from None
    except ValueError as e:
        raise InvalidInput(f"payload JSON: invalid JSON ({e})") from None
    _check_json_value(value)


def minify(text: str) -> str:
    """Drop the white space outside strings of valid JSON text."""
    out = []
    in_str = False
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\":
                i += 1
                out.append(text[i])
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif c not in " \t\n\r":
            out.append(c)
        i += 1
    return "".join(out)


def _header_pairs(h: Optional[Headers]) -> List[Tuple[str, str]]:
    if h is None:
        return []
    items = list(h.items()) if isinstance(h, Mapping) else list(h)
    if len(items) > HEADERS_MAX:
        raise InvalidInput(f"{len(items)} forward headers, more than {HEADERS_MAX}")
    seen = set()
    for item in items:
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise InvalidInput("forward_headers must be (name, value) pairs or a mapping")
        name, value = item
        check_id("a forward header name", name, HEADER_NAME_MAX)
        if name[:6].lower() == "txhub-":
            raise InvalidInput(f'forward header "{name}" uses the reserved prefix txhub-')
        _utf8(f'forward header "{name}"', value)
        if name in seen:
            raise InvalidInput(f'forward header "{name}" appears more than once')
        seen.add(name)
    return items


def _check_payload(m: Message) -> None:
    if m.payload is not None and m.payload_json is not None:
        raise InvalidInput("give payload or payload_json, not both")
    if isinstance(m.payload, str):
        _utf8("payload string", m.payload)
        if "\x00" in m.payload:
            raise InvalidInput("payload string contains a NUL byte")
    elif m.payload is not None and not isinstance(m.payload, (bytes, bytearray, memoryview)):
        raise InvalidInput("payload must be bytes or str")
    if m.payload_json is not None:
        if not isinstance(m.payload_json, str):
            raise InvalidInput("payload_json must be JSON text (a str)")
        check_json(m.payload_json)


def _check_forward(m: Message) -> None:
    if m.forward_topic is None:
        if m.forward_key is not None or m.forward_headers:
            raise InvalidInput("forward_key or forward_headers without forward_topic")
        return
    if not valid_topic(m.forward_topic):
        raise InvalidInput("forward_topic must be a valid Kafka topic name (1..249 of a-z A-Z 0-9 . _ -)")
    if m.forward_topic.startswith("__"):
        raise InvalidInput("forward_topic names a topic Kafka reserves for itself "
                           "(names beginning with __, such as __consumer_offsets)")
    if m.forward_key is not None:
        _utf8("forward_key", m.forward_key)
    _header_pairs(m.forward_headers)


_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?"
                      r"(?:([Zz])|([+-])(\d{2}):(\d{2}))", re.ASCII)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_END_S = 253_402_300_800  # 10000-01-01T00:00:00Z, in seconds since the epoch


def not_before_text(v: Union[str, _dt.datetime]) -> str:
    """``forward_not_before`` as it is sent: a ``str`` as given (checked as the
    hub reads it: RFC 3339 with a zone, years 1970 to 9999 in UTC), an aware
    ``datetime`` as RFC 3339 to the microsecond."""
    if isinstance(v, _dt.datetime):
        if v.tzinfo is None or v.utcoffset() is None:
            raise InvalidInput("forward_not_before: a datetime needs a time zone")
        v = v.isoformat(timespec="microseconds")
    if not isinstance(v, str):
        raise InvalidInput("forward_not_before must be a str or a datetime")
    m = _RFC3339.fullmatch(v)
    if not m:
        raise InvalidInput("forward_not_before is not an RFC 3339 time with a zone "
                           "(YYYY-MM-DDTHH:MM:SS[.fraction] then Z or +HH:MM / -HH:MM)")
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    oh, om = (int(m.group(10)), int(m.group(11))) if m.group(9) else (0, 0)
    if h > 23 or mi > 59 or s > 60 or oh > 23 or om > 59:
        raise InvalidInput("forward_not_before: no such time of day or zone offset")
    try:
        t = _dt.datetime(max(y, 1), mo, d, h, mi, min(s, 59), tzinfo=_dt.timezone.utc)
    except ValueError:
        raise InvalidInput("forward_not_before: no such date") from None
    sign = -1 if m.group(9) == "-" else 1
    secs = (t - _EPOCH) // _dt.timedelta(seconds=1) + (s == 60) - sign * (oh * 3600 + om * 60)
    if y == 0 or not 0 <= secs <= _END_S:
        raise InvalidInput("forward_not_before is out of range (years 1970 to 9999 in UTC)")
    return v


def _check_delay(m: Message) -> None:
    if m.forward_not_before is None and m.delay_ms is None:
        return
    if m.forward_topic is None:
        raise InvalidInput("forward_not_before or delay_ms without forward_topic")
    if m.forward_not_before is not None and m.delay_ms is not None:
        raise InvalidInput("give forward_not_before or delay_ms, not both")
    dl = m.delay_ms
    if dl is not None and (isinstance(dl, bool) or not isinstance(dl, int) or not 0 <= dl <= DELAY_MS_MAX):
        raise InvalidInput(f"delay_ms must be from 0 to {DELAY_MS_MAX}")
    if m.forward_not_before is not None:
        not_before_text(m.forward_not_before)


def check(type: str, m: Message) -> None:
    """Validate ``m`` for an envelope of ``type``; raise :class:`InvalidInput`."""
    if type not in TYPES:
        raise InvalidInput(f"unknown envelope type {type!r}")
    check_id("biz_id", m.biz_id, BIZ_ID_MAX)
    check_id("message_key", m.message_key, MESSAGE_KEY_MAX)
    if type == "rollback":
        return  # payload and forward are left out of a rollback
    has_payload = m.payload is not None or m.payload_json is not None
    if type == "prepare" and (not has_payload or m.forward_topic is None):
        raise InvalidInput("a prepare needs a payload and forward_topic")
    if type == "commit" and has_payload != (m.forward_topic is not None):
        raise InvalidInput("a one-shot commit needs both a payload and forward_topic")
    _check_payload(m)
    _check_forward(m)
    if m.checkback_url is not None and (not isinstance(m.checkback_url, str) or not _valid_url(m.checkback_url)):
        raise InvalidInput(f"checkback_url must be an http:// or https:// URL of at most {URL_MAX} printable ASCII characters")
    fa = m.first_after_ms
    if fa is not None and (isinstance(fa, bool) or not isinstance(fa, int) or not 0 <= fa <= FIRST_AFTER_MS_MAX):
        raise InvalidInput(f"first_after_ms must be from 0 to {FIRST_AFTER_MS_MAX}")
    _check_delay(m)
    _check_trace(m)


def _check_trace(m: Message) -> None:
    """The trace context (docs/consumers.md: Trace context): what the hub would drop is refused."""
    tp, ts = m.traceparent, m.tracestate
    if ts is not None and tp is None:
        raise InvalidInput("a tracestate needs a traceparent")
    if tp is not None:
        g = _TRACEPARENT.fullmatch(tp) if isinstance(tp, str) and len(tp) <= 512 else None
        if (g is None or g.group(1) == "ff" or set(g.group(2)) == {"0"} or set(g.group(3)) == {"0"}
                or (g.group(1) == "00" and g.group(5) is not None) or tp.endswith(" ")):
            raise InvalidInput("traceparent is not a valid W3C traceparent")
    if ts is not None:
        if not isinstance(ts, str) or len(ts) > TRACE_STATE_MAX:
            raise InvalidInput("tracestate must be a str of at most 512 characters")
        keys = []
        for member in ts.split(","):
            member = member.strip(" \t")
            if not member:
                continue
            key, eq, value = member.partition("=")
            if not eq or not _STATE_KEY.fullmatch(key) or not _STATE_VALUE.fullmatch(value):
                raise InvalidInput("tracestate has a malformed member")
            keys.append(key)
        if len(keys) > TRACE_STATE_MEMBERS_MAX or len(set(keys)) != len(keys):
            raise InvalidInput("tracestate has more than 32 members or a key twice")


def _payload_part(m: Message) -> str:
    if isinstance(m.payload, (bytes, bytearray, memoryview)):
        return ',"payload_base64":"' + base64.b64encode(bytes(m.payload)).decode("ascii") + '"'
    if isinstance(m.payload, str):
        return ',"payload":' + quote(m.payload)
    if m.payload_json is not None:
        # The hub forwards a JSON string payload as the string's bytes, so a
        # JSON value that is a string goes as a JSON string whose content is
        # its compact text: the consumer gets "hello" with its quotes.
        text = minify(m.payload_json)
        return ',"payload":' + (quote(text) if text.startswith('"') else text)
    return ""


def _forward_part(m: Message) -> str:
    if m.forward_topic is None:
        return ""
    s = ',"forward":{"topic":' + quote(m.forward_topic)
    if m.forward_key is not None:
        s += ',"key":' + quote(m.forward_key)
    pairs = _header_pairs(m.forward_headers)
    if pairs:
        s += ',"headers":{' + ",".join(quote(k) + ":" + quote(v) for k, v in pairs) + "}"
    if m.forward_not_before is not None:
        s += ',"not_before":' + quote(not_before_text(m.forward_not_before))
    if m.delay_ms is not None:
        s += ',"delay_ms":%d' % m.delay_ms
    return s + "}"


def _checkback_part(m: Message) -> str:
    parts = []
    if m.checkback_url is not None:
        parts.append('"url":' + quote(m.checkback_url))
    if m.first_after_ms is not None:
        parts.append('"first_after_ms":%d' % m.first_after_ms)
    return ',"checkback":{' + ",".join(parts) + "}" if parts else ""


def _trace_part(m: Message) -> str:
    if m.traceparent is None:
        return ""
    s = ',"trace":{"traceparent":' + quote(m.traceparent)
    if m.tracestate is not None:
        s += ',"tracestate":' + quote(m.tracestate)
    return s + "}"


def encode(type: str, m: Message, max_bytes: int = MAX_BYTES_DEFAULT) -> bytes:
    """Validate ``m`` and encode it as an envelope of ``type`` ("prepare",
    "commit" -- one-shot when ``m`` has a payload -- or "rollback").

    Raises :class:`InvalidInput`, or :class:`TooLarge` when the result would
    exceed ``max_bytes``.
    """
    check(type, m)
    s = '{"v":1,"type":"' + type + '","biz_id":' + quote(m.biz_id)
    s += ',"message_key":' + quote(m.message_key)
    if type != "rollback":
        s += _payload_part(m) + _forward_part(m) + _checkback_part(m) + _trace_part(m)
    out = (s + "}").encode("utf-8")
    if len(out) > max_bytes:
        raise TooLarge(f"the envelope would be {len(out)} bytes, over max_bytes ({max_bytes})")
    return out
