"""`juggler results` and `juggler deadletters`: a topic's Avro records as JSON lines,
like ksqlDB's `PRINT` or `kcat`, read read_committed (only what the worker committed).

Without `--from-beginning` the reader starts at the end and shows what comes next;
without `--follow` it stops at the end the topic had when it started.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any

from juggler.codec.avro import DEAD_LETTER, RESULT, Codec, CodecError
from juggler.kafka.client_config import client_config
from juggler.wire.names import QUERY_HEADER


def records(bootstrap: str, topics: list[str], *, from_beginning: bool, follow: bool,
            keep: Callable[[Any], bool] = lambda m: True,
            stop: Callable[[], bool] = lambda: False) -> Iterator[Any]:
    """Messages of `topics` (those that exist), every partition, in arrival order."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

    consumer = Consumer(client_config(bootstrap, {
        "group.id": "juggler-cli-tail", "enable.auto.commit": False,
        "isolation.level": "read_committed", "log_level": 0}))
    try:
        metadata = consumer.list_topics(timeout=30)
        tps = []
        ends: dict[tuple[str, int], int] = {}
        for tp in (TopicPartition(t, p) for t in topics if t in metadata.topics
                   for p in metadata.topics[t].partitions):
            low, high = consumer.get_watermark_offsets(tp, timeout=30)
            if high > low or follow:  # a partition with nothing to read is not waited on
                tps.append(tp)
                ends[(tp.topic, tp.partition)] = high
        start = OFFSET_BEGINNING if from_beginning else OFFSET_END
        consumer.assign([TopicPartition(tp.topic, tp.partition, start) for tp in tps])
        while not stop():
            for m in consumer.consume(500, timeout=0.2):
                if m.error() is None and keep(m):
                    yield m
            if not follow:
                positions = consumer.position(tps) if tps else []
                if all(tp.offset < 0 and not from_beginning or
                       tp.offset >= ends[(tp.topic, tp.partition)] for tp in positions):
                    return
    finally:
        consumer.close()


def result_line(codec: Codec, m: Any) -> dict[str, Any]:
    try:
        record = codec.decode(RESULT, m.value())
    except CodecError as exc:
        record = {"error": exc.reason}
    record["position"] = {"topic": m.topic(), "partition": m.partition(), "offset": m.offset()}
    return record


def dead_letter_line(codec: Codec, m: Any) -> dict[str, Any]:
    try:
        record = codec.decode(DEAD_LETTER, m.value())
    except CodecError as exc:
        return {"error": exc.reason}
    record["key"], record["value"] = _text(record["key"]), _text(record["value"])
    return record


def _text(data: bytes | None) -> Any:
    """Bytes as text when they are UTF-8, else as base64 (JSON has no bytes)."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def of_query(query_id: str) -> Callable[[Any], bool]:
    wanted = query_id.encode()
    return lambda m: dict(m.headers() or ()).get(QUERY_HEADER) == wanted

