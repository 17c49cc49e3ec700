"""Rebuilding tasks when partitions are assigned, before any of their records is taken.

A task's engine comes back from its partition of the state topic (`held_state`), read
with read_committed up to its end, so it matches the group's committed offsets; its
inputs start at those offsets. The control task's accepted set comes back from the
status topic. Nothing is evaluated and nothing is emitted: the results of everything
restored were committed before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from juggler.codec.avro import COMMAND_STATUS, CodecError
from juggler.kafka.offsets import group_offsets, log_ends
from juggler.service.held_state import TaskState

log = logging.getLogger(__name__)

READ_WAIT = 0.05
"""Seconds one fetch of the restore read waits for more records: what is left after the
last records of a partition arrive is waiting, so it is kept short."""


def assigned(worker: Any, fresh: list[Any], control: Any | None) -> None:
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
                with worker.lock:
                    task = worker.tasks[task.partition] = type(task)(worker, task.partition)
            rebuild.append(task)
        current.append(task)
    states = {task.partition: TaskState() for task in rebuild}
    statuses: list[dict[str, Any]] = []
    wanted = [(names.state, p) for p in states] + ([(names.status, 0)] if control else [])
    for (topic, partition), key, value, headers in read_partitions(worker, wanted):
        if topic == names.state:
            states[partition].apply(key, value, headers)
            continue
        try:
            statuses.append(worker.codec.decode(COMMAND_STATUS, value))
        except CodecError as exc:
            log.warning("status topic: skipping a record that is not a status: %s", exc.reason)
    for task in rebuild:
        task.restore(states[task.partition],
                     lambda topic, p, offset: fetch_value(worker, topic, p, offset))
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


def fetch_value(worker: Any, topic: str, partition: int, offset: int) -> bytes | None:
    """The value of one record, for a held event too large to copy into the state."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**worker.client_config, "group.id": f"{worker.settings.app_id}-restore",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "fetch.message.max.bytes": worker.max_record_bytes * 2,
                         "log_level": 3})
    deadline = time.monotonic() + 60
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        while time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is not None and m.error() is None and m.offset() == offset:
                return m.value()
        raise RuntimeError(f"cannot read the held event at {topic}[{partition}]@{offset}: "
                           f"gone from the log?")
    finally:
        consumer.close()
