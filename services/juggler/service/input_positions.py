"""Where the worker's input stands in Kafka, asked with clients of its own.

faust-streaming 0.15's consumer was seen to deliver records twice and to skip records
(mostly right after a restart, and at a rebalance). The agents therefore check each
record's offset against the next one they expect (starting from the group's committed
offsets) and need two answers from the broker that do not depend on Faust's consumer:
the committed offsets, and whether a range of offsets holds committed records at all
(a read_committed consumer also skips transaction markers and aborted records, which is
not a loss). Both calls block; the agents run them in a thread.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any


def committed_offsets(bootstrap: str, group: str, tps: Iterable[tuple[str, int]],
                      timeout: float = 30.0) -> dict[tuple[str, int], int]:
    """Where the group resumes: its stable committed offsets (librdkafka waits for
    pending transactional commits to resolve), or the log start offset of a partition
    with no committed offset (the worker consumes from the earliest record then)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "log_level": 0})
    try:
        found = consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=timeout)
        out = {}
        for tp in found:
            if tp.offset >= 0:
                out[(tp.topic, tp.partition)] = tp.offset
            else:
                low, _ = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition),
                                                        timeout=timeout)
                out[(tp.topic, tp.partition)] = low
        return out
    finally:
        consumer.close()


def nothing_between(bootstrap: str, group: str, topic: str, partition: int, start: int,
                    end: int, timeout: float = 30.0) -> bool:
    """True when offsets start..end-1 of the partition hold no committed record."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{group}-gap-check",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True, "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return True
                raise RuntimeError(str(message.error()))
            return message.offset() >= end
        raise RuntimeError(f"could not read {topic}[{partition}] from offset {start}")
    finally:
        consumer.close()


def as_faust_tps(offsets: dict[tuple[str, int], int]) -> dict[Any, int]:
    from faust.types import TP

    return {TP(t, p): o for (t, p), o in offsets.items()}
