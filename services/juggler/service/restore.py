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


def tasks(worker: Any, fresh: list[Any]) -> None:
    names = worker.names
    inputs = [(names.stream(s), t.partition) for t in fresh for s in worker.streams]
    inputs += [(names.fanout, t.partition) for t in fresh]
    committed = group_offsets(worker.admin, worker.settings.app_id, inputs)
    starts = log_ends(worker.admin, inputs, start=True)
    for task in fresh:
        t0 = time.monotonic()
        if task.committed is not None and all(
                committed[tp] == offset for tp, offset in task.committed.items()):
            task.restored = True  # came back unchanged: its engine is the committed state
        else:
            if task.committed is not None:  # moved and came back: start afresh
                with worker.lock:
                    task = worker.tasks[task.partition] = type(task)(worker, task.partition)
            state = TaskState()
            for key, value, headers in read_partition(worker, names.state, task.partition):
                state.apply(key, value, headers)
            task.restore(state, lambda topic, p, offset: fetch_value(worker, topic, p, offset))
        task.committed = None
        for stream, inp in task.order.inputs.items():
            tp = (names.stream(stream), task.partition)
            inp.position = _start(committed[tp], starts[tp])
        fanout = (names.fanout, task.partition)
        task.order.barrier_position = _start(committed[fanout], starts[fanout])
        log.debug("partition %d restored in %.2fs", task.partition, time.monotonic() - t0)


def control(worker: Any, task: Any) -> None:
    statuses = []
    for _, value, _ in read_partition(worker, worker.names.status, 0):
        try:
            statuses.append(worker.codec.decode(COMMAND_STATUS, value))
        except CodecError as exc:
            log.warning("status topic: skipping a record that is not a status: %s", exc.reason)
    task.restore(statuses)
    log.info("control task restored: %d queries accepted", len(task.accepted))


def _start(committed: int | None, log_start: int) -> int:
    return log_start if committed is None else max(committed, log_start)


def read_partition(worker: Any, topic: str, partition: int) -> Iterator[tuple[Any, Any, Any]]:
    """(key, value, headers) of every committed record of one partition, up to the log
    end as it was when asked."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    end = log_ends(worker.admin, [(topic, partition)])[(topic, partition)]
    if end == 0:
        return
    consumer = Consumer({**worker.client_config, "group.id": f"{worker.settings.app_id}-restore",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "log_level": 3})
    tp = TopicPartition(topic, partition, OFFSET_BEGINNING)
    try:
        consumer.assign([tp])
        while True:
            for m in consumer.consume(10_000, timeout=0.5):
                if m.error() is None:
                    yield m.key(), m.value(), m.headers()
            position = consumer.position([TopicPartition(topic, partition)])[0].offset
            if position >= end:
                return
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
