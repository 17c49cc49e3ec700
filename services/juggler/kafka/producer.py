"""Producing events to the stream topics the way the worker expects them.

Why one producer for the demo, the load benchmark and the tests: the records must be
Avro in the codec's framing, keyed by the entity key, and partitioned with murmur2 like
the Java client and aiokafka, so that a key lands on the same partition of every stream
topic (co-partitioning: a join only sees events of one partition's engine). librdkafka's
default partitioner (CRC32) would silently split a key's streams across engines.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from juggler.kafka.client_config import client_config
from juggler.wire.names import stream_topic

Position = tuple[str, int, int]
"""(topic, partition, offset) of a produced record."""


class EventEncoder(Protocol):
    """What the producer uses of the codec (`juggler.codec.avro.Codec`): a stream's
    event in the worker's framing. A parameter, not an import, because the codec is
    built on this package (the topic names), not the other way round."""

    def encode(self, name: str, record: Mapping[str, Any]) -> bytes: ...


class EventProducer:
    def __init__(self, bootstrap: str, codec: EventEncoder, prefix: str = "",
                 **config: Any) -> None:
        """`config`: extra librdkafka settings (e.g. `linger.ms`)."""
        from confluent_kafka import Producer

        self.codec = codec
        self.prefix = prefix
        self.errors: list[str] = []
        self.last_offsets: dict[tuple[str, int], int] = {}
        """(topic, partition) -> offset of the last record delivered there."""
        self.producer = Producer(client_config(bootstrap, {
            "partitioner": "murmur2_random", "enable.idempotence": True, "linger.ms": 5,
            "log_level": 0, **config}))

    def topic(self, stream: str) -> str:
        return self.prefix + stream_topic(stream)

    def frame(self, stream: str, key: str, ts: int, data: dict[str, Any]
              ) -> tuple[str, bytes, bytes]:
        """One event as the (topic, key, value) record `send` queues, for a sender that
        encodes ahead and queues later with `send_raw` (a load generator whose encoding
        must not run while it measures)."""
        return self.topic(stream), key.encode(), self.codec.encode(stream, {"ts": ts, **data})

    def send(self, stream: str, key: str, ts: int, data: dict[str, Any],
             on_delivery: Callable[[Position], None] | None = None) -> bytes:
        """Encode and queue one event; returns the encoded value. Delivery failures
        raise from `flush` (nothing is lost silently)."""
        topic, raw_key, value = self.frame(stream, key, ts, data)
        self.send_raw(topic, raw_key, value, on_delivery)
        return value

    def send_raw(self, topic: str, key: bytes | None, value: bytes | None,
                 on_delivery: Callable[[Position], None] | None = None) -> None:
        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                self.errors.append(f"{msg.topic()}: {err}")
                return
            where = (msg.topic(), msg.partition())
            self.last_offsets[where] = max(msg.offset(), self.last_offsets.get(where, -1))
            if on_delivery is not None:
                on_delivery((msg.topic(), msg.partition(), msg.offset()))

        while True:
            try:
                self.producer.produce(topic, key=key, value=value, on_delivery=delivered)
                break
            except BufferError:  # local queue full: let librdkafka send, then retry
                self.producer.poll(0.1)
        self.producer.poll(0)

    def flush(self, timeout: float = 60.0) -> None:
        """Wait for every queued record; raise if any could not be delivered."""
        left = self.producer.flush(timeout)
        if left:
            raise RuntimeError(f"{left} records not delivered within {timeout}s")
        if self.errors:
            raise RuntimeError(f"{len(self.errors)} records failed: {self.errors[:3]}")
