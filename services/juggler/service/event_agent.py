"""The events agent: stream topics and the fanout topic in, results and dead letters out.

One agent subscribes to every `juggler.stream.<S>` topic and to `juggler.control.fanout`
so Faust co-partitions them: partition p of each is owned by the same worker and fed to
engine[p] (`partition_engines`). Events are taken many at a time; a batch is split by
partition, and each partition's part is one transaction (`transactions`): its results,
dead letters, the changed keys' held state, the partition's registered queries and the
consumer offsets are committed together.

A fanout record in partition p is p's copy of an accepted command, so it registers or
deregisters in engine[p] exactly between the events of p consumed before and after it;
a registration with history emits its results over p's held events right there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from juggler.codec.avro import COMMAND, RESULT, CodecError, SchemaViolation, result_record
from juggler.engine.events import LateEvent, RegistrationError, Result
from juggler.service.input_positions import (
    as_faust_tps,
    committed_offsets,
    nothing_between,
)
from juggler.service.partition_engines import PartitionEngine, encode_snapshot, held_key
from juggler.service.transactions import Outbox, PartitionLost

log = logging.getLogger(__name__)

CONTROL_OFFSET_HEADER = "juggler-control-offset"
REFETCH_TIMEOUT = 20.0
"""Seconds a seek back over skipped records may take before the worker stops itself."""


class InputGap(RuntimeError):
    """The consumer skipped committed records of a stream topic and seeking back did not
    bring them. The worker stops (status 70); its restart resumes from the committed
    offsets and state."""


@dataclass
class BatchEffects:
    """What one partition's batch produces and counts; sent and counted only once the
    batch's transaction commits."""

    outbox: Outbox = field(default_factory=Outbox)
    dirty: set[str] = field(default_factory=set)
    """Keys whose held state changed: their snapshots go to the changelog."""
    events_in: Counter[str] = field(default_factory=Counter)
    late: Counter[str] = field(default_factory=Counter)
    results_out: Counter[str] = field(default_factory=Counter)
    produced_at: list[tuple[float, int]] = field(default_factory=list)
    """(Kafka timestamp, results) per event that made results."""


class EventProcessor:
    def __init__(self, worker: Any) -> None:
        self.w = worker
        self.codec = worker.codec
        self.names = worker.names
        self.engines = worker.engines
        self.tables = worker.tables
        self.metrics = worker.metrics
        self.fanout = worker.names.fanout
        self.stream_of_topic = {worker.names.stream(s): s for s in worker.codec.stream_names()}

    async def process_batch(self, events: Sequence[Any]) -> None:
        by_partition: dict[int, list[Any]] = {}
        for event in events:
            by_partition.setdefault(event.message.partition, []).append(event)
        self.metrics.batches.observe(len(events))
        for partition, part in by_partition.items():
            await self.process_partition(partition, part)

    async def process_partition(self, partition: int, events: Sequence[Any]) -> None:
        if partition not in self.engines:
            topics = [*self.stream_of_topic, self.fanout]
            committed = await asyncio.to_thread(
                committed_offsets, self.w.settings.bootstrap, self.w.settings.app_id,
                [(t, partition) for t in topics])
            self.engines.get(partition).next_offsets.update(as_faust_tps(committed))
        pe = self.engines.get(partition)
        fx = BatchEffects()
        offsets: dict[Any, int] = {}
        queries_changed = False
        redelivered = 0
        refetch: dict[Any, int] = {}
        now = time.monotonic()
        for event in events:
            message = event.message
            verdict = pe.admit(message.tp, message.offset, message.topic == self.fanout, now)
            if verdict == "again":
                redelivered += 1
                continue
            if verdict == "stale":
                continue
            if verdict == "gap":
                expected = pe.next_offsets[message.tp]
                if not await asyncio.to_thread(
                        nothing_between, self.w.settings.bootstrap, self.w.settings.app_id,
                        message.topic, message.partition, expected, message.offset):
                    log.warning("partition %d: the consumer delivered %s offset %d but "
                                "skipped committed records from offset %d; seeking back",
                                partition, message.topic, message.offset, expected)
                    pe.refetch(message.tp, message.offset, now)
                    refetch[message.tp] = expected
                    continue
                pe.take(message.tp, message.offset)
            offsets[message.tp] = message.offset + 1
            if message.topic == self.fanout:
                queries_changed |= self._command(pe, message, fx.outbox, fx.results_out)
            else:
                self._event(pe, message, fx)
        if redelivered:
            log.warning("partition %d: skipped %d records delivered a second time",
                        partition, redelivered)
            self.metrics.redelivered.inc(redelivered)
        if refetch:
            self.metrics.refetches.inc(len(refetch))
            await self.w.app.consumer.seek_wait(refetch)
        stuck = pe.stuck(now, REFETCH_TIMEOUT)
        if stuck:
            raise InputGap(f"partition {partition}: records of {stuck} skipped by the consumer "
                           f"did not come back within {REFETCH_TIMEOUT}s of seeking back")
        if not offsets:
            return
        outbox = fx.outbox
        for key in fx.dirty:
            snapshot = pe.engine.snapshot(key)
            if snapshot is not None:
                self.tables.write(outbox, self.tables.held, partition, held_key(partition, key),
                                  encode_snapshot(snapshot))
        if queries_changed:
            self.tables.write(outbox, self.tables.queries, partition, str(partition),
                              pe.queries_record())
        outbox.then(lambda: self._count(fx))
        try:
            await self.w.transactions.commit(events[0].message.topic, partition, offsets, outbox)
        except PartitionLost:
            # Revoked mid-batch: the new owner redoes the batch from the committed offsets.
            self.engines.drop(partition)
            raise

    def _event(self, pe: PartitionEngine, message: Any, fx: BatchEffects) -> None:
        """Decode one stream record and feed it to the engine; bad or late input goes
        to the dead letters. Records are taken in arrival order: which events are late
        depends on that order (DESIGN section 3)."""
        stream = self.stream_of_topic[message.topic]
        fx.events_in[stream] += 1
        try:
            item = self.codec.event_from(stream, message.key, message.value,
                                         (message.topic, message.partition, message.offset))
        except CodecError as exc:
            kind = "schema" if isinstance(exc, SchemaViolation) else "undecodable"
            if message.key is None:
                kind = "no_key"
            self.w.dead_letters.send(fx.outbox, message, kind, exc.reason)
            return
        try:
            results = pe.engine.process(item)
        except LateEvent as exc:
            fx.late[stream] += 1
            self.w.dead_letters.send(fx.outbox, message, "late", exc.reason)
            return  # a late event changes nothing
        fx.dirty.add(item.key)
        if results:
            self._publish(results, fx.outbox, fx.results_out)
            fx.produced_at.append((message.timestamp, len(results)))

    def _publish(self, results: list[Result], outbox: Outbox, counts: Counter[str]) -> None:
        encode = self.codec.encode
        for result in results:
            topic = self.names.results(result.query)
            outbox.send(topic, result.key.encode(),
                        encode(RESULT, result_record(result), topic=topic))
            counts[result.query] += 1

    def _command(self, pe: PartitionEngine, message: Any, outbox: Outbox,
                 results_out: Counter[str]) -> bool:
        """Apply p's copy of an accepted command; True when p's query set changed."""
        from juggler.language import QueryError, compile_query

        try:
            command = self.codec.decode(COMMAND, message.value)
        except CodecError as exc:  # the control agent wrote it: should never happen
            log.error("partition %d: undecodable fanout record at offset %d: %s",
                      message.partition, message.offset, exc.reason)
            return False
        query_id, action = command["id"], command["action"]
        if action == "REGISTER":
            if query_id in pe.texts:
                return False
            try:
                query = compile_query(query_id, command["text"], self.w.catalog)
                results = pe.engine.register(query, history=bool(command.get("history")))
            except (QueryError, RegistrationError) as exc:
                log.error("partition %d: cannot register %r: %s", message.partition,
                          query_id, exc)
                return False
            pe.texts[query_id] = command["text"]
            self._publish(results, outbox, results_out)
            log.info("partition %d: registered %r (%d history results)", message.partition,
                     query_id, len(results))
            return True
        if query_id not in pe.texts:
            return False
        pe.engine.deregister(query_id)
        del pe.texts[query_id]
        log.info("partition %d: deregistered %r", message.partition, query_id)
        return True

    def _count(self, fx: BatchEffects) -> None:
        m = self.metrics
        for stream, n in fx.events_in.items():
            m.events_in.labels(stream).inc(n)
        for stream, n in fx.late.items():
            m.late_events.labels(stream).inc(n)
        for query, n in fx.results_out.items():
            m.results_out.labels(query).inc(n)
        now = time.time()
        for timestamp, n in fx.produced_at:
            if timestamp:
                for _ in range(n):
                    m.latency.observe(max(0.0, now - timestamp))


async def batches(stream: Any, batch_max: int) -> AsyncIterator[list[Any]]:
    """The stream's events, many at a time: a batch closes when it has `batch_max`
    events or when no further event is waiting in the stream's buffer, so a busy stream
    is processed in large batches and a quiet one without delay.

    Why not Faust's `Stream.take_events`: in faust-streaming 0.15 its background buffer
    pairs values with `Stream.current_event`, which under load (a backlog after a
    restart) yielded the same event twice and skipped others; the SIGKILL test lost
    and duplicated results through it. Iterating `Stream.events()` is Faust's basic
    path, and the buffer it reads from is cleared when a rebalance seeks the consumer.
    """
    queue = stream.channel.queue
    batch: list[Any] = []
    async for event in stream.events():
        batch.append(event)
        if len(batch) >= batch_max or queue.empty():
            yield batch
            for taken in batch:
                taken.ack()  # after the batch's transaction; Faust commits nothing itself
            batch = []


def install(worker: Any) -> Any:
    """Declare the events agent on the worker's Faust app."""
    app, settings = worker.app, worker.settings
    processor = EventProcessor(worker)
    topics = [worker.names.stream(s) for s in worker.codec.stream_names()]
    channel = app.topic(*topics, worker.names.fanout, key_serializer="raw",
                        value_serializer="raw")
    batch_agent(worker, channel, "juggler.events", processor, settings.batch_max)
    return processor


def batch_agent(worker: Any, channel: Any, name: str, processor: Any, batch_max: int) -> None:
    """Declare an agent that hands batches to `processor.process_batch` and stops the
    worker on any failure: the engines may be ahead of what was committed, and only a
    restart from the committed state (tables and offsets) is safe."""

    async def agent(stream: Any) -> None:
        async for batch in batches(stream, batch_max):
            try:
                await processor.process_batch(batch)
            except Exception as exc:
                log.exception("%s agent failed; stopping the worker", name)
                await worker.fail(exc)
                raise

    worker.app.agent(channel, name=name)(agent)
