"""txhub: send transactional envelopes, answer check-backs, consume
forwarded records without duplicates.

- :class:`Producer` (``txhub.producer``, on confluent-kafka): prepare,
  commit, rollback, one_shot, and an asynchronous send.
- ``txhub.checkback``: parse and verify the hub's check-back requests and
  answer them (:func:`txhub.checkback.handle`, :class:`CheckbackServer`).
- :class:`Dedup` (``txhub.dedup``, on psycopg 3): claim each forwarded
  record once in the consumer's own PostgreSQL database.
- ``txhub.envelope``: the deterministic envelope encoder the producer uses.

``Producer`` and ``Dedup`` are imported on first use, so a program that
only answers check-backs needs neither Kafka nor PostgreSQL drivers.
"""
from __future__ import annotations

import logging
from typing import Any

from .checkback import CheckbackRequest, CheckbackServer, Outcome
from .envelope import Message, encode
from .errors import (ClaimLost, DatabaseError, FatalError, InvalidInput, KafkaError, TooLarge,
                     TxhubError, Unauthorized)

__version__ = "0.4.0"

# a library's loggers stay silent until the program configures logging
logging.getLogger("txhub").addHandler(logging.NullHandler())

__all__ = ["CheckbackRequest", "CheckbackServer", "ClaimLost", "DatabaseError", "Dedup",
           "FatalError", "InvalidInput", "KafkaError", "Message", "Outcome", "Producer",
           "TooLarge", "TxhubError", "Unauthorized", "encode"]


def __getattr__(name: str) -> Any:
    if name == "Producer":
        from .producer import Producer
        return Producer
    if name in ("Dedup", "Claim", "Result"):
        from . import dedup
        return getattr(dedup, name)
    raise AttributeError(f"module 'txhub' has no attribute {name!r}")
