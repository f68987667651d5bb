"""Answer the hub's check-back requests (docs/producers.md: Check-back).

Framework-agnostic: :func:`handle` takes the request's query string and
headers and returns the status and body to send. :class:`CheckbackServer`
wraps it in the standard library's HTTP server for producers that have no
web framework at hand.

Signed requests (the hub's ``checkback.secret`` is set) carry
``X-Txhub-Timestamp`` and ``X-Txhub-Signature: v2=<hex HMAC-SHA256(secret,
"<timestamp>\\n<biz_id>\\n<message_key>")>``. A request is accepted only with
a valid signature whose timestamp is within ``window`` seconds (300 by
default) of the local clock, either way, so a captured request cannot be
replayed later, nor for another message. Signatures are compared in
constant time.
"""
from __future__ import annotations

import enum
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Optional, Tuple, Union

Headers = Any  # a Mapping[str, str], or http.server's message object
from urllib.parse import urlsplit

from .envelope import BIZ_ID_MAX, MESSAGE_KEY_MAX, check_id
from .errors import InvalidInput, TxhubError, Unauthorized

WINDOW_DEFAULT = 300


class Outcome(str, enum.Enum):
    """What the producer's own database says about the transaction."""

    COMMITTED = "committed"
    ROLLED_BACK = "rolled_back"
    UNKNOWN = "unknown"  # not decided yet: the hub asks again later


@dataclass(frozen=True)
class CheckbackRequest:
    """A parsed check-back request."""

    biz_id: str
    message_key: str
    attempt: Optional[int] = None
    timestamp: Optional[int] = None
    signature: Optional[str] = None  # the hex after "v2="


def signature(secret: Union[str, bytes], timestamp: int, biz_id: str, message_key: str) -> str:
    """The ``X-Txhub-Signature`` header value: ``"v2="`` and 64 lowercase
    hex digits."""
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    text = f"{timestamp}\n{biz_id}\n{message_key}".encode("utf-8")
    return "v2=" + hmac.new(key, text, hashlib.sha256).hexdigest()


def _decode(raw: str, what: str, limit: int) -> str:
    """Percent-escapes and '+' (a space), strictly: a bad escape or bytes
    that are not UTF-8 are an error, never replaced."""
    out = bytearray()
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "+":
            out += b" "
        elif c == "%":
            h = raw[i + 1:i + 3]
            if len(h) != 2 or any(x not in "0123456789abcdefABCDEF" for x in h):
                raise InvalidInput(f"query parameter {what} is malformed or longer than {limit} bytes")
            out.append(int(h, 16))
            i += 2
        else:
            # a server hands the raw query over as Latin-1 text (http.server
            # does): each character is then one byte of the request
            out += c.encode("latin-1") if ord(c) < 256 else c.encode("utf-8", "surrogatepass")
        i += 1
        if len(out) > limit:
            raise InvalidInput(f"query parameter {what} is malformed or longer than {limit} bytes")
    try:
        value = out.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{what} is not valid UTF-8") from None
    check_id(what, value, limit)
    return value


def _ids(query: str) -> Tuple[str, str]:
    names = {"biz_id": "biz_id", "bizID": "biz_id", "message_key": "message_key", "messageKey": "message_key"}
    limits = {"biz_id": BIZ_ID_MAX, "message_key": MESSAGE_KEY_MAX}
    found: Dict[str, str] = {}
    for part in (query or "").split("&"):
        name, eq, raw = part.partition("=")
        what = names.get(name)
        if not eq or what is None:
            continue
        value = _decode(raw, what, limits[what])
        if found.setdefault(what, value) != value:
            raise InvalidInput(f"query parameter {what} is given twice with different values")
    for what in ("biz_id", "message_key"):
        if what not in found:
            raise InvalidInput(f"not a check-back: the query has no {what}")
    return found["biz_id"], found["message_key"]


def _header(headers: Any, name: str) -> Optional[str]:
    """A header value, names compared without regard to case (works with a
    dict and with http.server's message object)."""
    if headers is None:
        return None
    if hasattr(headers, "get_all"):
        v = headers.get(name)
        return None if v is None else str(v)
    for k, v in headers.items():
        if k.lower() == name.lower():
            return str(v)
    return None


def _number(s: str, digits: int, minimum: int) -> Optional[int]:
    if not s or len(s) > digits or not all("0" <= c <= "9" for c in s):
        return None
    v = int(s)
    return v if v >= minimum else None


def parse_request(query: str, headers: Optional[Headers] = None) -> CheckbackRequest:
    """Parse a request's query string (after '?') and headers.

    The ids come from ``biz_id``/``message_key`` or ``bizID``/``messageKey``.
    Raises :class:`InvalidInput` for a missing or invalid id, a parameter
    given twice with different values, or a malformed header. Does not
    verify the signature.
    """
    biz_id, message_key = _ids(query)
    attempt_h = _header(headers, "X-Txhub-Attempt")
    ts_h = _header(headers, "X-Txhub-Timestamp")
    sig_h = _header(headers, "X-Txhub-Signature")
    attempt = ts = sig = None
    if attempt_h is not None and (attempt := _number(attempt_h, 9, 1)) is None:
        raise InvalidInput("X-Txhub-Attempt is not a positive integer")
    if ts_h is not None and (ts := _number(ts_h, 15, 0)) is None:
        raise InvalidInput("X-Txhub-Timestamp is not a Unix time in seconds")
    if sig_h is not None:
        hexpart = sig_h[3:]
        if len(sig_h) != 67 or not sig_h.startswith("v2=") or any(c not in "0123456789abcdef" for c in hexpart):
            raise InvalidInput('X-Txhub-Signature is not "v2=" and 64 lowercase hex digits')
        sig = hexpart
    if (ts_h is None) != (sig_h is None):
        raise InvalidInput("X-Txhub-Timestamp and X-Txhub-Signature come together or not at all")
    return CheckbackRequest(biz_id, message_key, attempt, ts, sig)


def verify(req: CheckbackRequest, secret: Union[str, bytes], *, now: Optional[float] = None,
           window: int = WINDOW_DEFAULT) -> None:
    """Raise :class:`Unauthorized` unless ``req`` is signed with ``secret``
    and its timestamp is within ``window`` seconds of ``now`` (default: the
    current time)."""
    if not secret:
        raise InvalidInput("a non-empty secret is required")
    if req.signature is None or req.timestamp is None:
        raise Unauthorized("the request is not signed")
    skew = int(time.time() if now is None else now) - req.timestamp
    if abs(skew) > window:
        raise Unauthorized(f"the timestamp is {skew} s from now, outside the {window} s window")
    want = signature(secret, req.timestamp, req.biz_id, req.message_key)[3:]
    if not hmac.compare_digest(want, req.signature):
        raise Unauthorized("wrong signature")


def answer_body(outcome: Outcome) -> bytes:
    """``{"status":"committed"}`` and the like, as the C library writes it."""
    return b'{"status":"' + Outcome(outcome).value.encode() + b'"}'


Decide = Callable[[CheckbackRequest], Outcome]


def _error(status: int, reason: str) -> Tuple[int, bytes]:
    return status, json.dumps({"error": reason}, separators=(",", ":")).encode()


def handle(query: str, headers: Optional[Headers], decide: Decide, *,
           secret: Union[str, bytes, None] = None, window: int = WINDOW_DEFAULT,
           now: Optional[float] = None) -> Tuple[int, bytes]:
    """Everything in one call: parse, verify (when ``secret`` is set), ask
    ``decide`` and return ``(http_status, body)``: 200 with the answer, 400
    for something that is not a check-back, 401 for a bad signature, 503
    when ``decide`` raised (the hub asks again later; never answer
    ``ROLLED_BACK`` because a lookup failed). Without a secret unsigned
    requests are answered: only when the hub has no checkback.secret."""
    try:
        req = parse_request(query, headers)
    except InvalidInput as e:
        return _error(400, str(e))
    if secret:
        try:
            verify(req, secret, now=now, window=window)
        except TxhubError as e:
            return _error(401, str(e))
    try:
        outcome = Outcome(decide(req))
    except Exception as e:  # the database is down, or the like: not a decision
        return _error(503, f"the outcome cannot be told now; ask again later ({type(e).__name__})")
    return 200, answer_body(outcome)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the hub reuses connections
    server: "CheckbackServer"

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urlsplit(self.path)
        if url.path != self.server.path:
            status, body = _error(404, "not a check-back path")
        else:
            status, body = handle(url.query, self.headers, self.server.decide,
                                  secret=self.server.secret, window=self.server.window)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # the library never logs; wrap decide() to see requests


class CheckbackServer(ThreadingHTTPServer):
    """A check-back endpoint on the standard library's HTTP server.

    ``decide`` is called on a server thread for each verified request.
    Run it with ``serve_forever()`` (in a thread of its own if need be);
    ``server_address[1]`` is the port (0 picks a free one).
    """

    daemon_threads = True
    # socketserver's default listen backlog is 5: a hub asking about many
    # messages at once (up to checkback.per_host connections per replica)
    # would overflow it and see its requests time out.
    request_queue_size = 64

    def __init__(self, address: Tuple[str, int], decide: Decide, *,
                 secret: Union[str, bytes, None] = None, path: str = "/txhub/check",
                 window: int = WINDOW_DEFAULT) -> None:
        super().__init__(address, _Handler)
        self.decide = decide
        self.secret = secret
        self.path = path
        self.window = window
