"""Reading committed records back from Kafka in bulk: whole partitions up to their ends
(`read_partitions`: the state topic, the status topic, the settings topic) and the
records at given offsets (`read_originals`: held events' input records, a command's
original). Each read is one consumer for every partition it needs, reading committed
(read_committed), so it sees what the group committed and nothing else.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Iterator
from typing import Any, Protocol

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from juggler.kafka.offsets import TP, log_ends
from juggler.runtime.settings import Settings

log = logging.getLogger(__name__)

READ_WAIT = 0.05
"""Seconds one fetch of a read waits for more records: what is left after the last
records of a partition arrive is waiting, so it is kept short."""


class Reader(Protocol):
    """What a read uses of its runtime (`job.Job`): its admin client and client
    configuration, and its application id for the reading consumer's group name."""

    @property
    def admin(self) -> AdminClient: ...

    @property
    def client_config(self) -> dict[str, Any]: ...

    @property
    def settings(self) -> Settings: ...


FETCH_AHEAD = {"fetch.queue.backoff.ms": 10, "max.partition.fetch.bytes": 16 << 20}
"""A read back fetches ahead of what it takes as fast as the broker serves it.
librdkafka stops fetching a partition whose local queue holds more than
`queued.min.messages` (100,000) and looks again only `fetch.queue.backoff.ms` later,
a second by default: a restore takes records more slowly than they arrive, so it
filled the queue and then waited (docs/benchmarks.md, "Reading ahead"). Larger
fetches per partition: fewer round trips."""


def _consumer(reader: Reader) -> Consumer:
    """A read_committed consumer for reading back, outside the worker's group."""
    return Consumer({**reader.client_config, "group.id": f"{reader.settings.app_id}-restore",
                     "enable.auto.commit": False, "isolation.level": "read_committed",
                     "log_level": 3, **FETCH_AHEAD})


def read_partitions(reader: Reader, tps: list[TP]) -> Iterator[
        tuple[TP, bytes | None, bytes | None, list[tuple[str, bytes]] | None]]:
    """((topic, partition), key, value, headers) of every committed record of the
    partitions, each in log order, up to each log end as it was when asked."""
    ends = log_ends(reader.admin, tps) if tps else {}
    left = {tp for tp, end in ends.items() if end > 0}
    if not left:
        return
    consumer = _consumer(reader)
    try:
        # the leaders known before the assignment: librdkafka asks where a partition
        # begins only once it knows the leader, else it retries after 500 ms
        for topic in {t for t, _ in left}:
            consumer.list_topics(topic, timeout=30)
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in left])
        while left:
            for m in _fetch(consumer):
                tp = (m.topic(), m.partition())
                if m.error() is None and m.offset() < ends[tp]:
                    yield tp, m.key(), m.value(), m.headers()
            for position in consumer.position([TopicPartition(t, p) for t, p in left]):
                if position.offset >= ends[(position.topic, position.partition)]:
                    left.discard((position.topic, position.partition))
    finally:
        consumer.close()


def _fetch(consumer: Consumer) -> list[Any]:
    """A fetch's records, untyped: confluent-kafka's stubs make a message's topic,
    partition, offset and value optional, which they are only on an error (the reads
    skip those), and a check per record would cost a restore of millions for nothing."""
    return consumer.consume(10_000, timeout=READ_WAIT)


SKIP = 10_000
"""A gap of more offsets than this between two wanted records of a partition is
skipped with a seek rather than read through (reading a record costs a few
microseconds, a seek one fetch round trip)."""


def read_originals(reader: Reader, wanted: dict[TP, list[int]], skip: int = SKIP
                   ) -> dict[TP, dict[int, bytes]]:
    """The values of the records at `wanted` (per topic-partition, sorted offsets),
    read committed, in bulk: one consumer for every partition, each read sequentially
    from its first wanted offset to its last (a gap longer than `skip` is skipped with a
    seek), never one fetch per record. A wanted record that is gone is left out and
    logged."""
    found: dict[tuple[str, int], dict[int, bytes]] = {tp: {} for tp in wanted}
    tps = [tp for tp, offsets in wanted.items() if offsets]
    if not tps:
        return found
    starts = log_ends(reader.admin, tps, start=True)
    ends = log_ends(reader.admin, tps)
    left = {}
    for tp in tps:
        offsets = wanted[tp]
        first, end = bisect_left(offsets, starts[tp]), bisect_left(offsets, ends[tp])
        kept = offsets[first:end]
        _gone(tp, offsets[:first], f"below the log start {starts[tp]}")
        _gone(tp, offsets[end:], f"at or past the log end {ends[tp]}")  # never sought
        if kept:
            left[tp] = _Cursor(kept)
    consumer = _consumer(reader)
    try:
        consumer.assign([TopicPartition(t, p, c.wanted[0]) for (t, p), c in left.items()])
        while left:
            for m in _fetch(consumer):
                tp = (m.topic(), m.partition())
                cursor = left.get(tp)
                if m.error() is not None or cursor is None:
                    continue
                if cursor.take(m.offset(), m.value(), found[tp]):
                    _gone(tp, cursor.gone, "not in the log")
                    del left[tp]
                    consumer.pause([TopicPartition(*tp)])
                elif cursor.next - m.offset() > skip:
                    consumer.seek(TopicPartition(*tp, cursor.next))
            for position in consumer.position([TopicPartition(t, p) for t, p in left]):
                tp = (position.topic, position.partition)
                if position.offset >= ends[tp]:  # the rest is not there (deleted meanwhile)
                    _gone(tp, left.pop(tp).rest(), "not in the log")
    finally:
        consumer.close()
    return found


class _Cursor:
    """Where the sequential read of one partition stands among its wanted offsets."""

    def __init__(self, wanted: list[int]) -> None:
        self.wanted = wanted
        self.i = 0
        self.gone: list[int] = []

    @property
    def next(self) -> int:
        return self.wanted[self.i]

    def take(self, offset: int, value: bytes, into: dict[int, bytes]) -> bool:
        """Keep the record if wanted; True when nothing more is wanted. A wanted offset
        the read passes without meeting it is not in the log (the records come in
        offset order; an earlier one is a fetch from before a seek)."""
        while self.i < len(self.wanted) and self.wanted[self.i] < offset:
            self.gone.append(self.wanted[self.i])
            self.i += 1
        if self.i < len(self.wanted) and self.wanted[self.i] == offset:
            into[offset] = value
            self.i += 1
        return self.i == len(self.wanted)

    def rest(self) -> list[int]:
        return self.gone + self.wanted[self.i:]


def _gone(tp: tuple[str, int], offsets: list[int], why: str) -> None:
    if offsets:
        log.error("restore: %d held event(s) of %s[%d] cannot be read back (%s; offsets "
                  "%d..%d): restored without them. The stream topic's retention must "
                  "exceed the horizon (docs/worker.md, \"State and restore\")",
                  len(offsets), tp[0], tp[1], why, offsets[0], offsets[-1])
