"""Rebuilding tasks when partitions are assigned, before any of their records is taken.

A task's engine comes back from its partition of the state topic (`held_state`), read
with read_committed up to its end, so it matches the group's committed offsets, and
from its held events' input records, read back from the stream topics the state
records point to (`read_originals`); its inputs start at the committed offsets. The
control task's accepted set comes back from the status topic. Nothing is evaluated and
nothing is emitted: the results of everything restored were committed before.

A held event whose input record is gone (the stream topic's retention deleted it, or
someone deleted records) cannot come back. The restore goes on without it, logs an
error naming the records and counts it in `juggler_restore_missing_events_total`:
stopping the worker would not bring the record back, and only results joining that
event with later events of its key can be missing. Stream topics must therefore keep a
record longer than the horizon plus the longest time a worker may be down or behind
(docs/worker.md, "State and restore").
"""

from __future__ import annotations

import gc
import logging
from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

from juggler.codec.avro import CodecError
from juggler.kafka.offsets import group_offsets, log_ends
from juggler.service.held_state import TaskState, originals
from juggler.wire.commands import CommandStatus

log = logging.getLogger(__name__)

READ_WAIT = 0.05
"""Seconds one fetch of the restore read waits for more records: what is left after the
last records of a partition arrive is waiting, so it is kept short."""


def assigned(worker: Any, fresh: list[Any], control: Any | None) -> None:
    """`_assigned` with Python's cyclic garbage collector paused: a restore allocates
    millions of objects that live until it ends (state records, held events' values
    and events), and the collector's passes over them took 45% of the restore of
    1,000,000 held events (49.2 s with it, 27.4 s without, same hour); what the restore
    leaves for it is collected once it is enabled again."""
    gc.disable()
    try:
        _assigned(worker, fresh, control)
    finally:
        gc.enable()


def _assigned(worker: Any, fresh: list[Any], control: Any | None) -> None:
    """Restore the newly assigned tasks and, if given, the control task, from one read of
    all their partitions: the state partitions of the tasks that must be rebuilt and the
    status topic, fetched together by one consumer.

    Why together: each partition read alone costs a consumer's start and a last fetch
    that waits for more, and they added up one after the other (1.4 s per partition
    with 10,000 queries); read together, the broker serves them in the same fetches.
    Each distinct query is compiled once for all the tasks (`worker.compiled`)."""
    names = worker.names
    inputs = [(names.stream(s), t.partition) for t in fresh for s in worker.streams]
    inputs += [(names.fanout, t.partition) for t in fresh]
    committed = group_offsets(worker.admin, worker.settings.app_id, inputs) if inputs else {}
    starts = log_ends(worker.admin, inputs, start=True) if inputs else {}
    current, rebuild = [], []
    for task in fresh:
        if task.committed is not None and all(
                committed[tp] == offset for tp, offset in task.committed.items()):
            task.restored = True  # came back unchanged: its engine is the committed state
        else:
            if task.committed is not None:  # moved and came back: start afresh
                task = worker.tasks[task.partition] = type(task)(worker, task.partition)
            rebuild.append(task)
        current.append(task)
    states = {task.partition: TaskState() for task in rebuild}
    statuses: list[CommandStatus] = []
    wanted = [(names.state, p) for p in states] + ([(names.status, 0)] if control else [])
    for (topic, partition), key, value, headers in read_partitions(worker, wanted):
        if topic == names.state:
            states[partition].apply(key, value, headers)
            continue
        try:
            statuses.append(CommandStatus.decode(worker.codec, value))
        except CodecError as exc:
            log.warning("status topic: skipping a record that is not a status: %s", exc.reason)
    streams = {names.stream(s) for s in worker.streams}
    held = {p: state.held() for p, state in states.items()}
    wanted = {tp: offsets for p, events in held.items()
              for tp, offsets in originals(events, p).items() if tp[0] in streams}
    values = read_originals(worker, wanted)
    missing = sum(task.restore(states[task.partition], held[task.partition], values)
                  for task in rebuild)
    if missing:
        worker.metrics.restore_missing.inc(missing)
    for task in current:
        task.committed = None
        for stream, inp in task.order.inputs.items():
            tp = (names.stream(stream), task.partition)
            inp.position = _start(committed[tp], starts[tp])
        fanout = (names.fanout, task.partition)
        task.order.barrier_position = _start(committed[fanout], starts[fanout])
    if control is not None:
        control.restore(statuses)
        log.info("control task restored: %d queries accepted", len(control.accepted))


def _start(committed: int | None, log_start: int) -> int:
    return log_start if committed is None else max(committed, log_start)


def read_partitions(worker: Any, tps: list[tuple[str, int]]
                    ) -> Iterator[tuple[tuple[str, int], Any, Any, Any]]:
    """((topic, partition), key, value, headers) of every committed record of the
    partitions, each in log order, up to each log end as it was when asked."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    ends = log_ends(worker.admin, tps) if tps else {}
    left = {tp for tp, end in ends.items() if end > 0}
    if not left:
        return
    consumer = Consumer({**worker.client_config, "group.id": f"{worker.settings.app_id}-restore",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "log_level": 3})
    try:
        # the leaders known before the assignment: librdkafka asks where a partition
        # begins only once it knows the leader, else it retries after 500 ms
        for topic in {t for t, _ in left}:
            consumer.list_topics(topic, timeout=30)
        consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in left])
        while left:
            for m in consumer.consume(10_000, timeout=READ_WAIT):
                tp = (m.topic(), m.partition())
                if m.error() is None and m.offset() < ends[tp]:
                    yield tp, m.key(), m.value(), m.headers()
            for position in consumer.position([TopicPartition(t, p) for t, p in left]):
                if position.offset >= ends[(position.topic, position.partition)]:
                    left.discard((position.topic, position.partition))
    finally:
        consumer.close()


SKIP = 10_000
"""A gap of more offsets than this between two wanted records of a partition is
skipped with a seek rather than read through (reading a record costs a few
microseconds, a seek one fetch round trip)."""


def read_originals(worker: Any, wanted: dict[tuple[str, int], list[int]], skip: int = SKIP
                   ) -> dict[tuple[str, int], dict[int, bytes]]:
    """The values of the records at `wanted` (per topic-partition, sorted offsets),
    read committed, in bulk: one consumer for every partition, each read sequentially
    from its first wanted offset to its last (a gap longer than `skip` is skipped with a
    seek), never one fetch per record. A wanted record that is gone is left out and
    logged."""
    from confluent_kafka import Consumer, TopicPartition

    found: dict[tuple[str, int], dict[int, bytes]] = {tp: {} for tp in wanted}
    tps = [tp for tp, offsets in wanted.items() if offsets]
    if not tps:
        return found
    starts = log_ends(worker.admin, tps, start=True)
    ends = log_ends(worker.admin, tps)
    left = {}
    for tp in tps:
        offsets = wanted[tp]
        first, end = bisect_left(offsets, starts[tp]), bisect_left(offsets, ends[tp])
        kept = offsets[first:end]
        _gone(tp, offsets[:first], f"below the log start {starts[tp]}")
        _gone(tp, offsets[end:], f"at or past the log end {ends[tp]}")  # never sought
        if kept:
            left[tp] = _Cursor(kept)
    consumer = Consumer({**worker.client_config, "group.id": f"{worker.settings.app_id}-restore",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "log_level": 3})
    try:
        consumer.assign([TopicPartition(t, p, c.wanted[0]) for (t, p), c in left.items()])
        while left:
            for m in consumer.consume(10_000, timeout=READ_WAIT):
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
