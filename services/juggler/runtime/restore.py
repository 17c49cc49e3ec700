"""Rebuilding tasks when partitions are assigned, before any of their records is taken.

A task's engine comes back from its partition of the state topic (`held_state`), read
with read_committed up to its end, so it matches the group's committed offsets, and
from its held events' input records, read back from the stream topics the state
records point to (`readback.read_originals`); its inputs start at the committed offsets. The
control task's accepted set comes back from the status topic, read in a child
process beside the tasks' restore (`accepted_read`). Nothing is evaluated and
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
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Protocol

from juggler.kafka.offsets import TP, log_ends
from juggler.runtime.accepted_read import accepted_read
from juggler.runtime.control_plane import ControlTask
from juggler.runtime.held_state import TaskState, originals
from juggler.runtime.job import TaskContext
from juggler.runtime.query_records import StoredQuery
from juggler.runtime.readback import Reader, read_originals, read_partitions
from juggler.runtime.task import PartitionTask, RestoredQueries, restored_queries

log = logging.getLogger(__name__)


class RestoreContext(TaskContext, Reader, Protocol):
    """What a restore uses of the worker besides what its tasks use: what its reads
    need, and its tasks, where a task that moved and came back is replaced by a new
    one."""

    @property
    def tasks(self) -> dict[int, PartitionTask]: ...

def assigned(worker: RestoreContext, fresh: list[PartitionTask], control: ControlTask | None,
             committed: Mapping[TP, int | None]) -> None:
    """`_assigned`, with Python's cyclic garbage collector kept off what it restores
    (`collector_paused`)."""
    with collector_paused():
        _assigned(worker, fresh, control, committed)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Collect once, pause the cyclic collector, and on the way out freeze everything
    alive (`gc.freeze`): modules, codecs, compiled queries, the restored state.

    Paused: a restore allocates millions of objects that live until it ends, and the
    collector's passes over them, which free none of them, took a large share of the
    restore. Frozen: later full collections walked all of them on the loop's thread, in
    the middle of a round (docs/worker.md, "State and restore"). Collected before, not
    after: what became garbage since the last freeze (tasks a rebalance revoked, cycles
    of earlier restores) is unfrozen and collected while the heap is what the process
    had, at a process's first restore its modules alone; collected after, the pass
    walked everything the restore made. A frozen
    object that becomes garbage is still freed by its reference count; reference
    cycles made during a restore (a few thousand objects: parser tables, HTTP
    connections) wait for the next one."""
    gc.unfreeze()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def _assigned(worker: RestoreContext, fresh: list[PartitionTask], control: ControlTask | None,
              committed: Mapping[TP, int | None]) -> None:
    """Restore the newly assigned tasks and, if given, the control task: the state
    partitions of the tasks that must be rebuilt, read together by one consumer, and
    meanwhile the status topic's accepted set in a child process (`accepted_read`).
    `committed` is the group's committed offset of each assigned partition, as the
    consumer was started at them.

    Why the state partitions together: each partition read alone costs a consumer's
    start and a last fetch that waits for more, and they added up one after the other
    (docs/worker.md, "State and restore"); read together, the broker serves them in the
    same fetches. Each distinct set of queries is compiled once for all the tasks that
    hold it (`restored_queries`)."""
    names = worker.names
    inputs = [(topic, t.partition) for t in fresh for topic in t.topic_of.values()]
    inputs += [(names.fanout, t.partition) for t in fresh]
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
    with accepted_read(worker, names.status) if control else nullcontext() as pending:
        _restore_tasks(worker, rebuild, _read_states(worker, rebuild))
        if control is not None and pending is not None:
            read = pending.result()
            for reason in read.skipped:
                log.warning("status topic: skipping a record that is not a status: %s", reason)
            control.restore(read.accepted)
            log.info("control task restored: %d queries accepted", len(control.accepted))
    for task in current:
        task.committed = None
        for stream, inp in task.order.inputs.items():
            tp = (task.topic_of[stream], task.partition)
            inp.position = _start(committed[tp], starts[tp])
        fanout = (names.fanout, task.partition)
        task.order.barrier_position = _start(committed[fanout], starts[fanout])


def _read_states(worker: RestoreContext, rebuild: list[PartitionTask]) -> dict[int, TaskState]:
    """The state partitions of the tasks to rebuild, read together by one consumer."""
    read: dict[bytes, dict[str, StoredQuery]] = {}
    states = {task.partition: TaskState(read=read) for task in rebuild}
    for (_, partition), key, value, headers in read_partitions(
            worker, [(worker.names.state, p) for p in states]):
        states[partition].apply(key, value, headers)
    return states


def _restore_tasks(worker: RestoreContext, rebuild: list[PartitionTask],
                   states: dict[int, TaskState]) -> None:
    """Rebuild each task's engine from its state and its held events' input records."""
    names = worker.names
    streams = {names.stream(s) for s in worker.streams}
    held = {p: state.held() for p, state in states.items()}
    inputs_held = {tp: offsets for p, events in held.items()
                   for tp, offsets in originals(events, p).items() if tp[0] in streams}
    values = read_originals(worker, inputs_held)
    compiled: list[tuple[dict[str, StoredQuery], RestoredQueries]] = []
    missing = 0
    for task in rebuild:
        state = states[task.partition]
        queries = next((done for those, done in compiled if those == state.queries), None)
        if queries is None:
            queries = restored_queries(worker, state.queries)
            compiled.append((state.queries, queries))
        missing += task.restore(state, queries, held[task.partition], values)
    if missing:
        worker.metrics.restore_missing.inc(missing)


def _start(committed: int | None, log_start: int) -> int:
    return log_start if committed is None else max(committed, log_start)
