"""Send envelopes to the control topic (docs/producers.md: Envelope fields) with confluent-kafka.

Each envelope's record key is its ``message_key``, so a message's prepare
and decision land in one partition, in order. The producer is idempotent
with ``acks=all``, and every synchronous call returns only when the broker
has confirmed the envelope: after :meth:`Producer.prepare` returns, the
prepare is stored by Kafka and the local transaction may commit. Input is
validated first; bad input raises :class:`~txhub.errors.InvalidInput` and
sends nothing.

A producer may be shared by threads. Callbacks of :meth:`Producer.send`
run on the producer's delivery thread. librdkafka's log lines go to the
``txhub.kafka`` logger (silent unless you configure logging).
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional

import confluent_kafka

from .envelope import MAX_BYTES_DEFAULT, Message, encode, valid_topic
from .errors import FatalError, InvalidInput, KafkaError, TxhubError

Callback = Callable[[Optional[TxhubError]], None]

_log = logging.getLogger("txhub.kafka")


class Producer:
    """An idempotent Kafka producer of txhub envelopes.

    ``kafka`` passes librdkafka properties through unchanged; they override
    the defaults except that ``enable.idempotence`` and ``acks`` cannot be
    weakened. Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, brokers: str, *, control_topic: str = "txhub.control",
                 max_bytes: int = MAX_BYTES_DEFAULT, timeout_ms: int = 30000,
                 kafka: Optional[Mapping[str, str]] = None) -> None:
        if not brokers or not isinstance(brokers, str):
            raise InvalidInput("brokers is required")
        if not valid_topic(control_topic):
            raise InvalidInput("control_topic is not a valid Kafka topic name")
        if not 64 <= max_bytes <= 104857600:
            raise InvalidInput("max_bytes must be from 64 to 104857600, as the hub's envelope.max_bytes")
        if not 1 <= timeout_ms <= 3600000:
            raise InvalidInput("timeout_ms must be from 1 to 3600000")
        self.control_topic = control_topic
        self.max_bytes = max_bytes
        self._fatal: Optional[str] = None
        self._last_error = ""
        conf = self._config(brokers, max_bytes, timeout_ms, kafka or {})
        try:
            self._p = confluent_kafka.Producer(conf)
        except confluent_kafka.KafkaException as e:
            raise InvalidInput(f"cannot create the Kafka producer: {e}") from None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="txhub-delivery", daemon=True)
        self._thread.start()

    def _config(self, brokers: str, max_bytes: int, timeout_ms: int, kafka: Mapping[str, str]) -> Dict[str, Any]:
        for name, value in kafka.items():
            if name == "enable.idempotence" and str(value).lower() != "true":
                raise InvalidInput(f"kafka {name}={value}: the producer must stay idempotent")
            if name == "acks" and str(value) not in ("all", "-1"):
                raise InvalidInput(f"kafka {name}={value}: envelopes need acks=all")
            if name in ("bootstrap.servers", "message.timeout.ms"):
                raise InvalidInput(f"kafka {name}: set it with brokers / timeout_ms")
        conf = {"bootstrap.servers": brokers, "enable.idempotence": True, "acks": "all",
                "linger.ms": 0, "message.timeout.ms": timeout_ms,
                "message.max.bytes": max(1000000, max_bytes + 4096),
                "client.id": "txhub-producer", "logger": _log, "error_cb": self._on_error}
        conf.update(kafka)
        return conf

    def _on_error(self, err: confluent_kafka.KafkaError) -> None:
        self._last_error = err.str()
        if err.fatal():
            self._fatal = err.str()

    def _serve(self) -> None:
        while not self._stop.is_set():
            self._p.poll(0.1)

    def _outcome(self, err: Optional[confluent_kafka.KafkaError]) -> Optional[TxhubError]:
        if err is None:
            return None
        if err.fatal() or self._fatal:
            return FatalError(f"fatal producer error, create a new producer: {self._fatal or err.str()}")
        extra = f" (last broker error: {self._last_error})" if self._last_error else ""
        return KafkaError(f"not confirmed by Kafka: {err.str()}{extra}")

    def _enqueue(self, type: str, m: Message, done: Callback, wait_when_full: bool) -> None:
        value = encode(type, m, self.max_bytes)
        if type != "rollback" and m.forward_topic == self.control_topic:
            raise InvalidInput("forward_topic is the control topic: the hub would read its own output")
        if self._fatal:
            raise FatalError(f"fatal producer error, create a new producer: {self._fatal}")

        def on_delivery(err: Optional[confluent_kafka.KafkaError], msg: object) -> None:
            done(self._outcome(err))

        while True:
            try:
                self._p.produce(self.control_topic, value=value, key=m.message_key.encode("utf-8"),
                                on_delivery=on_delivery)
                return
            except BufferError:
                if not wait_when_full:
                    raise KafkaError("cannot queue the envelope: the local queue is full") from None
                self._stop.wait(0.01)  # the delivery thread makes room
            except confluent_kafka.KafkaException as e:
                raise KafkaError(f"cannot queue the envelope: {e}") from None

    def _send_sync(self, type: str, m: Message) -> None:
        result: List[Optional[TxhubError]] = []
        arrived = threading.Event()

        def done(err: Optional[TxhubError]) -> None:
            result.append(err)
            arrived.set()

        self._enqueue(type, m, done, True)
        arrived.wait()  # librdkafka reports every message within message.timeout.ms
        if result[0] is not None:
            raise result[0]

    def prepare(self, m: Message) -> None:
        """Send a prepare (``m`` needs a payload and ``forward_topic``) and
        wait for the broker. Raises :class:`~txhub.errors.TxhubError`."""
        self._send_sync("prepare", m)

    def commit(self, biz_id: str, message_key: str) -> None:
        """Send the commit of a prepared message and wait for the broker."""
        self._send_sync("commit", Message(biz_id, message_key))

    def rollback(self, biz_id: str, message_key: str) -> None:
        """Send the rollback of a prepared message and wait for the broker."""
        self._send_sync("rollback", Message(biz_id, message_key))

    def one_shot(self, m: Message) -> None:
        """A commit carrying payload and forward: stored and forwarded as if
        prepare and commit had both arrived."""
        if m.payload is None and m.payload_json is None:
            raise InvalidInput("a one-shot commit needs a payload and forward_topic")
        self._send_sync("commit", m)

    def send(self, type: str, m: Message, callback: Callback) -> None:
        """Asynchronous send: validate and queue, then return. ``callback``
        is called once, on the delivery thread, with ``None`` when the broker
        confirmed the envelope or the error. Raises (and never calls back)
        when nothing was queued."""
        self._enqueue(type, m, callback, False)

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until everything queued is confirmed or failed; raise
        :class:`~txhub.errors.KafkaError` on time-out."""
        if self._p.flush(timeout) > 0:
            raise KafkaError(f"envelopes still unconfirmed after {timeout} s")

    def close(self, timeout: float = 5.0) -> None:
        """Flush (up to ``timeout`` seconds) and stop the delivery thread."""
        try:
            self._p.flush(timeout)
        finally:
            self._stop.set()
            self._thread.join()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
