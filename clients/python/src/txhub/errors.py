"""Exceptions raised by the txhub package.

Every error is a :class:`TxhubError` with a ``status`` (the same names as
the C library's ``txhub_status_name``) and ``retriable`` (trying the same
call again later may succeed).
"""
from __future__ import annotations


class TxhubError(Exception):
    """Base class of every error the package raises."""

    status = "error"
    retriable = False


class InvalidInput(TxhubError, ValueError):
    """Bad input from the caller: nothing was sent or written."""

    status = "invalid"


class TooLarge(InvalidInput):
    """The envelope would exceed ``max_bytes``: nothing was sent."""

    status = "too_large"


class KafkaError(TxhubError):
    """Kafka did not confirm the envelope. Sending the same envelope again
    is always safe: the hub applies it once."""

    status = "kafka"
    retriable = True


class FatalError(TxhubError):
    """The idempotent producer hit a fatal error: close it, make a new one."""

    status = "fatal"


class DatabaseError(TxhubError):
    """A PostgreSQL error; ``retriable`` for serialization failures,
    deadlocks, lock time-outs and lost connections (run the transaction
    again)."""

    status = "db"

    def __init__(self, message: str, retriable: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.status = "db_retry" if retriable else "db"


class Unauthorized(TxhubError):
    """A check-back request whose signature or timestamp does not verify."""

    status = "unauthorized"


class ClaimLost(TxhubError):
    """A dedup claim expired and another consumer took it over."""

    status = "lost"
