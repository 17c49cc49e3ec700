"""The Faust runtime's job: the worker's tasks, driven by Faust agents instead of a loop.

The agents (`juggler.faust.app`) hand each record to `FaustJob`: a stream or fanout
record to the task of its partition (`PartitionTask`, the worker's own, with a
`ReorderBuffer` as its arrival order), a control record to the control task
(`ControlTask`, the worker's own). One coroutine, `pump`, runs what the tasks may take
and commits each task's batch in the order at-least-once needs (docs/faust.md):

1. `<p>/w` in the state table: the input offsets the batch covers (a crash after this
   point may publish its results again; a restore counts them);
2. the batch's results, dead letters and statuses, awaited until the broker has them;
3. its state records and mark (`state_table.batch_records`), awaited;
4. its tombstones; then its input records are acknowledged, so Faust commits their
   offsets only once everything they caused is in Kafka.

A crash anywhere loses nothing: what was not marked is processed again from the state
as of the last mark; results published after that mark are published again (counted in
`juggler_results_maybe_repeated_total` and sent with the `juggler-may-repeat` header).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client import Counter

from juggler.faust import state_table
from juggler.faust.reorder import ReorderBuffer
from juggler.wire.names import QUERY_HEADER
from juggler.kafka.offsets import group_offsets, log_ends
from juggler.runtime import held_state
from juggler.runtime.control_plane import ControlTask
from juggler.runtime.job import Job
from juggler.runtime.metrics import WorkerMetrics
from juggler.runtime.readback import read_originals
from juggler.runtime.settings import Settings
from juggler.runtime.task import PartitionTask, Record, RoundCounts, restored_queries
from juggler.runtime.transactions import Outbox

log = logging.getLogger(__name__)

NEXT = b""
"""The key, in the table of accepted queries, of the control offset decided up to (no
query id is empty): a command Faust delivers again after a crash is not decided twice."""

MAY_REPEAT_HEADER = "juggler-may-repeat"
"""On a result published while a partition replays what it may have published before
a crash: a consumer that must see each result once drops it if it saw its identity."""


class FaustJob(Job):
    """The tasks of this Faust worker, and how their batches reach Kafka."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.tasks: dict[int, PartitionTask] = {}
        self.control: ControlTask | None = None
        self.highwater: Callable[[str, int], int | None] = lambda topic, partition: None
        """A stream partition's high watermark as Faust's consumer last fetched it (set
        by the app)."""
        self.metrics = WorkerMetrics(self)
        self.maybe_repeated = Counter(
            "juggler_results_maybe_repeated",
            "Results published while a partition replayed records whose results may "
            "have been published before a crash (an upper bound on repeats)",
            registry=self.metrics.registry)
        self.assigned = False
        """Whether the group assigned this worker its partitions (any, or none) once."""
        self.lock = asyncio.Lock()
        """Held while a batch or a command is processed and committed, and while a
        rebalance drops tasks: each task's state and its commits stay in order."""
        self.wake = asyncio.Event()
        self.producer: Any = None
        """Faust's producer (`app.producer`), set when the app starts."""
        self.state: Any = None
        self.registered: Any = None
        """The Faust tables: task state per partition; the control task's accepted set."""
        self.owned: set[int] = set()
        """Partitions the group assigned this worker (their tasks may be restoring)."""
        self.arrived: set[tuple[str, int]] = set()
        """Input partitions a record arrived from since the last rebalance."""
        self._control_next = 0
        """The control partition's next offset to decide."""
        self._unacked: dict[int, dict[str, deque[Any]]] = {}
        self._marks: dict[int, state_table.Mark] = {}
        self._replay: dict[int, dict[str, int]] = {}
        self._epoch = 0
        self._stream_of = {self.names.stream(s): s for s in self.streams}

    def never_committed(self, tps: Iterable[Any]) -> list[Any]:
        """Of the assigned input partitions `tps` (Faust's TPs), those whose group has
        no offset committed above 0: to be sought to their start once Faust resumed them.

        Why: while Faust recovers the tables, its consumer may fetch records of stream
        partitions it holds paused, and drops them; the seek to the committed offsets
        that follows brings them back, except where the committed offset is none or 0,
        which aiokafka's `seek_to_committed` skips. A backlog produced before the first
        start then lost its first fetch until the next restart. A record that arrives
        twice after such a seek is dropped by its offset (`stream_record`)."""
        tps = list(tps)
        committed = group_offsets(self.admin, self.settings.app_id,
                                  [(tp.topic, tp.partition) for tp in tps]) if tps else {}
        return [tp for tp in tps if not committed.get((tp.topic, tp.partition))]

    # what tasks and the HTTP pages call -------------------------------------------------

    def arrival_order(self) -> ReorderBuffer:
        return ReorderBuffer(self.streams, self.settings.reorder_ms)

    def restored_tasks(self) -> list[PartitionTask]:
        return list(self.tasks.values())

    def high_watermark(self, topic: str, partition: int) -> int | None:
        return self.highwater(topic, partition)

    # records in -------------------------------------------------------------------------

    async def stream_record(self, event: Any) -> None:
        """A record of a stream topic or of the fanout topic, from the agent: into its
        task's order, without the lock (the pump takes records only in `task.run`,
        which does not wait, so adding while a batch commits is safe, and the agent
        need not wait for the commit)."""
        message = event.message
        p = message.partition
        task = self.tasks.get(p)
        while task is None and p in self.owned:
            # assigned, and its restore under way: Faust may hand over records before
            # the rebalance's end, where the task is restored
            await asyncio.sleep(0.01)
            task = self.tasks.get(p)
        if task is None:
            return  # not this worker's (any more): Faust delivers it around a rebalance
        self.arrived.add((message.topic, p))
        stream = self._stream_of.get(message.topic)
        seen = task.order.barrier_position if stream is None \
            else task.order.inputs[stream].position
        if message.offset < (seen or 0):
            # in the state already (Faust delivers it again after a crash), or in the
            # order already (after `rewind`)
            event.ack()
            return
        record = _record(message)
        self._unacked[p].setdefault(message.topic, deque()).append(event)
        self._epoch += 1
        if stream is None:
            task.add_barrier(record)
        else:
            task.add_many(stream, [record], self._epoch, time.monotonic())
        self.wake.set()
        while task.order.buffered() >= self.settings.buffer_max and p in self.tasks:
            await asyncio.sleep(0.01)  # the pump is behind: hold the agent back

    async def control_records(self, events: Sequence[Any]) -> None:
        """Records of the control topic, from the agent (a burst at a time): decided
        together, with one publish and one write of the accepted set, as the worker
        decides a round's commands."""
        async with self.lock:
            if self.control is None:
                self.control = ControlTask(self)
                self.control.accepted = {k.decode(): int(v) for k, v in self.registered.data.items()
                                         if k != NEXT}
                self.control.restored = True
                self._control_next = int(self.registered.data.get(NEXT, b"0"))
            fresh = []
            for event in events:
                self.arrived.add((event.message.topic, 0))
                if event.message.offset < self._control_next:
                    event.ack()  # decided already (after `rewind`)
                    continue
                self._control_next = event.message.offset + 1
                fresh.append(event)
            if not fresh:
                return
            # a command can change only its own id, which is its key (the control task
            # rejects any other): comparing those entries, not a copy of the whole
            # accepted set, keeps a burst of commands from costing the square of them
            before = {event.message.key: self.control.accepted.get(
                          event.message.key.decode("utf-8", "replace"))
                      for event in fresh if isinstance(event.message.key, bytes)}
            for event in fresh:
                self.control.add(_record(event.message))
            outbox, counts = Outbox(), RoundCounts()
            self.control.run(outbox, counts)
            await self._publish(outbox.messages)
            changes: list[tuple[bytes, bytes | None]] = []
            for key, was in before.items():
                now = self.control.accepted.get(key.decode("utf-8", "replace"))
                if now != was:
                    changes.append((key, None if now is None else str(now).encode()))
            changes.append((NEXT, str(self._control_next).encode()))
            await self._write(self.registered, 0, changes)
            for event in fresh:
                event.ack()
            self._done(outbox, counts)

    # the pump ---------------------------------------------------------------------------

    async def pump(self) -> None:
        """Run every task as far as its order allows, commit, and sleep until a record
        arrives or a task's reorder wait ends."""
        while True:
            until = None
            async with self.lock:
                for p, task in list(self.tasks.items()):
                    wait_until = await self._run(p, task)
                    if wait_until is not None:
                        until = wait_until if until is None else min(until, wait_until)
            timeout = None if until is None else max(0.0, until - time.monotonic())
            self.clock.enter("poll")  # waiting for records, or for a reorder deadline
            try:
                await asyncio.wait_for(self.wake.wait(), timeout)
            except TimeoutError:
                pass
            self.wake.clear()
            self.clock.enter("other")

    async def _run(self, p: int, task: PartitionTask) -> float | None:
        """One batch of task p; when to run it again if it must wait for a deadline
        (now, if its batch was full)."""
        outbox, counts = Outbox(), RoundCounts()
        wait = task.run(outbox, counts, self.settings.batch_max, time.monotonic())
        marked = self._marks[p].offsets
        if outbox.messages or outbox.latest or any(
                offset > marked.get(topic, 0) for (topic, _), offset in outbox.offsets.items()):
            await self._commit(p, task, outbox, counts)
        if wait is None:
            return time.monotonic()
        return wait.until

    async def _commit(self, p: int, task: PartitionTask, outbox: Outbox,
                      counts: RoundCounts) -> None:
        mark = self._marks[p]
        offsets = {**mark.offsets}
        for (topic, partition), offset in outbox.offsets.items():
            if partition == p:
                offsets[topic] = max(offset, offsets.get(topic, 0))
        task.w.clock.enter("commit")
        if outbox.messages:
            await self._write(self.state, p, [(state_table.PUBLISHING.encode(),
                                               _json(offsets))])
            self._flag_repeats(p, offsets, outbox, counts)
            self.metrics.handed_over(counts)
            await self._publish(outbox.messages)
        batch = state_table.Mark(mark.batch + 1, offsets)
        values, tombstones = state_table.batch_records(
            p, batch.batch, [(key, out[1]) for (_, _, key), out in outbox.latest.items()],
            batch, self.state.data)
        await self._send_table(self.state, p, values, wait=True)
        await self._send_table(self.state, p, [(key, None) for key in tombstones], wait=False)
        self._marks[p] = batch
        for topic, queue in self._unacked[p].items():
            end = offsets.get(topic, 0)
            while queue and queue[0].message.offset < end:
                queue.popleft().ack()
        self._done(outbox, counts)
        task.w.clock.enter("other")

    def _flag_repeats(self, p: int, offsets: dict[str, int], outbox: Outbox,
                      counts: RoundCounts) -> None:
        """While p replays offsets a batch was publishing at a crash, its results may
        be repeats: counted, and marked with `MAY_REPEAT_HEADER`."""
        replay = self._replay.get(p)
        if not replay:
            return
        flagged = 0
        for i, (topic, value, key, partition, headers) in enumerate(outbox.messages):
            if headers and headers[0][0] == QUERY_HEADER:  # a result (`PartitionTask`)
                outbox.messages[i] = (topic, value, key, partition,
                                      [*(headers or ()), (MAY_REPEAT_HEADER, b"1")])
                flagged += 1
        self.maybe_repeated.inc(flagged)
        if all(offsets.get(topic, 0) >= end for topic, end in replay.items()):
            del self._replay[p]

    def _done(self, outbox: Outbox, counts: RoundCounts) -> None:
        self.metrics.count(counts)
        for callback in outbox.after_commit:
            callback()

    # Kafka --------------------------------------------------------------------------------

    async def _publish(self, messages: Iterable[tuple[Any, ...]]) -> None:
        """Send and wait until the broker has every message (acks=all)."""
        pending = [await self.producer.send(topic, key, value,
                                            None if partition < 0 else partition, None,
                                            headers)
                   for topic, value, key, partition, headers in messages]
        if pending:
            await asyncio.gather(*pending)

    async def _write(self, table: Any, partition: int,
                     changes: list[tuple[bytes, bytes | None]]) -> None:
        """Records of `table` under partition p's prefix (`state_table.table_key`), or
        for the accepted set as they are, written to the changelog and awaited."""
        if table is self.state:
            changes = [(state_table.table_key(partition, k), v) for k, v in changes]
        await self._send_table(table, partition, changes, wait=True)

    async def _send_table(self, table: Any, partition: int,
                          changes: Sequence[tuple[bytes, bytes | None]], wait: bool) -> None:
        """Write `changes` to the table's store and its changelog partition (where Faust's
        recovery reads them back), in order."""
        topic = table.changelog_topic.get_topic_name()
        pending = []
        for key, value in changes:
            if value is None:
                table.data.pop(key, None)
            else:
                table.data[key] = value
            pending.append(await self.producer.send(topic, key, value, partition, None, None))
        if wait and pending:
            await asyncio.gather(*pending)

    # partitions ---------------------------------------------------------------------------

    async def _restore(self, p: int) -> PartitionTask:
        """Task p from the state table as Faust recovered it (called once Faust's
        recovery of the assignment is complete): the last marked batch's state, its
        held events read back from the stream topics."""
        restored = state_table.restore(p, self.state.data)
        await self._send_table(self.state, p, restored.repairs, wait=True)
        task = PartitionTask(self, p)
        held = restored.state.held()
        wanted = held_state.originals(held, p)
        originals = await asyncio.to_thread(read_originals, self, wanted) if wanted else {}
        queries = restored_queries(self, restored.state.queries)
        missing = task.restore(restored.state, queries, held, originals)
        self.metrics.restore_missing.inc(missing)
        offsets = restored.mark.offsets
        for stream, inp in task.order.inputs.items():
            inp.position = inp.end = offsets.get(self.names.stream(stream), 0)
        task.order.barrier_position = offsets.get(self.names.fanout)
        topics = {self.names.stream(s): s for s in self.streams}
        ends = await asyncio.to_thread(log_ends, self.admin, [(t, p) for t in topics])
        order = task.order
        assert isinstance(order, ReorderBuffer), "this runtime's `arrival_order`"
        order.catch_up({topics[t]: end for (t, _), end in ends.items()})
        self._marks[p] = restored.mark
        self._unacked[p] = {}
        replay = {t: end for t, end in restored.publishing.items() if end > offsets.get(t, 0)}
        if replay:
            self._replay[p] = replay
        self.tasks[p] = task
        log.info("partition %d: restored at batch %d (%d queries, %d held events)", p,
                 restored.mark.batch, len(task.texts), task.held_refs.held())
        return task

    async def restore(self, partitions: set[int]) -> None:
        """Restore the tasks of newly assigned partitions (after Faust's recovery)."""
        async with self.lock:
            for p in sorted(partitions - set(self.tasks)):
                await self._restore(p)

    async def revoked(self, partitions: set[int], control: bool) -> None:
        """Forget revoked partitions: their records not acknowledged are delivered again
        to their next owner, which restores from the table."""
        self.owned -= partitions
        async with self.lock:
            for p in partitions:
                self.tasks.pop(p, None)
                self._unacked.pop(p, None)
                self._marks.pop(p, None)
                self._replay.pop(p, None)
            if control:
                self.control = None


def _record(message: Any) -> Record:
    return Record(message.topic, message.partition, message.offset, message.key,
                  message.value, int((message.timestamp or 0) * 1000),
                  [(k, bytes(v)) for k, v in (message.headers or ())])


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
