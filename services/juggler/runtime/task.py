"""Task p: partition p of every stream topic and of the fanout topic, one engine.

Like a Kafka Streams task, it owns its input partitions, its engine and its partition
of the state topic. The worker hands it fetched records (`add_many`, a stream
partition's group at a time); `run` takes them in the arrival order of
`arrival.ArrivalOrder` and writes what they cause (results, dead letters, state
records, LIVE statuses, input offsets) into the round's `Outbox`.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from juggler.codec.avro import CodecError, result_record
from juggler.codec.bounded import ROW_OMITTED_HEADER
from juggler.engine.events import (EngineConfig, Event, KeySnapshot, LateEvent,
                                   RegistrationError, Result)
from juggler.engine.rust_core import DecodedEvent
from juggler.engine.native_engine import COPY_SHARE, NativeEngine
from juggler.wire.names import QUERY_HEADER
from juggler.language import QueryError
from juggler.language.model import Query
from juggler.runtime import held_state
from juggler.runtime.arrival import Barrier, Pending, Take, Wait
from juggler.runtime.job import TaskContext
from juggler.runtime.query_records import QueryRecords, StoredQuery
from juggler.runtime.transactions import Outbox
from juggler.wire.commands import (LIVE, Command, CommandStatus, DeregisterCommand,
                                   RegisterCommand, barrier_of, control_offset_of)

log = logging.getLogger(__name__)

LATE_LOG_EVERY = 10.0
"""Seconds between two log lines about late events of one task (they are all counted)."""


@dataclass(slots=True)
class Record:
    """A fetched input record, as the consumer gave it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    """The Kafka timestamp (ms), for the latency metric."""
    headers: list[tuple[str, bytes]] | None = None
    appended: bool = False
    """Whether `timestamp` is the broker's append time (the topic's
    `message.timestamp.type` is `LogAppendTime`): the arrival order then measures a
    partition's delay without the worker's own fetch lag (`arrival.Bucket`)."""


@dataclass
class RoundCounts:
    """What one round counted; added to the metrics once its transaction commits."""

    events_in: Counter[str] = field(default_factory=Counter)
    late: Counter[str] = field(default_factory=Counter)
    results_out: Counter[str] = field(default_factory=Counter)
    dead_letters: Counter[str] = field(default_factory=Counter)
    produced_at: list[tuple[int, int]] = field(default_factory=list)


class PartitionTask:
    def __init__(self, worker: TaskContext, partition: int) -> None:
        self.w = worker
        self.partition = partition
        settings = worker.settings
        self.config = EngineConfig(allowed_lateness=settings.allowed_lateness,
                                   retention=settings.retention, order=settings.order)
        self.engine = NativeEngine(self.config, worker.registries)
        self.streams = worker.streams
        self.order = worker.arrival_order()
        self.texts: dict[str, str] = {}
        self.own_topic: set[str] = set()
        """Queries registered with their own results topic."""
        self._routes: dict[str, tuple[str, bytes, list[tuple[str, bytes]]]] = {}
        """Per query: its results topic, that topic's framing header and the record
        headers of its results (shared by all of them: the producer copies headers at
        `produce`), worked out at its first result instead of at every one (about 1.6
        results per event on K). Dropped when the query's topic may change."""
        self.seq = 0
        self.held_refs = held_state.HeldRefs(worker.max_record_bytes)
        self.query_records = QueryRecords(worker.max_record_bytes)
        self.topic_of = {s: worker.names.stream(s) for s in self.streams}
        self.live: tuple[Command, Record] | None = None
        """The last command this round applied and its fanout record, for the round's
        one LIVE status (made only for that one: a burst applies hundreds a round)."""
        self.restored = False
        self.committed: dict[tuple[str, int], int] | None = None
        """A revoked task's committed input offsets: if the group's are the same when it
        comes back, nobody processed its partition meanwhile and it is reused as is."""
        self._late_logged = 0.0
        self._late_since_log = 0
        self._registering: list[Query] = []
        """Queries whose REGISTER commands were applied, not yet in the engine. They go
        in with one `register_many` (`_register_pending`) before the next event is
        evaluated or another command needs the engine, or once they are a
        `COPY_SHARE`th of the queries registered with them: a burst of registrations
        with no event between goes in a few large batches instead of one per round
        (one per round, each engine inserted every query into its lists one at a
        time). Every partition applies the same commands, so each batch ends at the
        same command in every partition, and the engines after the first to register
        it copy its registry (`shared_registry`) instead of building it again. A
        query waiting here is live all the same: nothing is evaluated before it goes
        in."""
        self._registering_window = 0
        """The widest MAXWINDOW in `_registering`."""

    # inputs -------------------------------------------------------------------------

    def add_many(self, stream: str, records: list[Record], epoch: int, now: float) -> None:
        """A fetched group of one stream partition's records, in offset order, decoded
        now in one native call (`Codec.stream_events`): each one's `ts` decides its place
        in the order, and a record that did not decode (no `ts`) is dead-lettered when
        taken."""
        events = self.w.codec.stream_events(stream, self.topic_of[stream], self.partition,
                                            records)
        self.order.extend(stream, [
            Pending(record.offset, None if isinstance(event, CodecError) else event.ts, epoch,
                    (record, event))
            for record, event in zip(records, events)], now,
            [r.timestamp for r in records]
            if records[0].appended and all(r.appended for r in records) else None)

    def add_barrier(self, record: Record) -> None:
        """p's copy of an accepted command, with the log-end offsets it applies at. A
        record the control task did not write (no barrier) applies at once, and is
        dead-lettered when applied."""
        offsets = barrier_of(record.headers, self.streams)
        self.order.add_barrier(Barrier(offsets or dict.fromkeys(self.streams, 0),
                                       record.offset, (record, offsets is not None)))

    def revoked(self, committed: dict[tuple[str, int], int]) -> PartitionTask:
        """Forget what was fetched but not taken (the consumer fetches it again from the
        committed offsets if the partition comes back) and remember those offsets."""
        topics = {*self.topic_of.values(), self.w.names.fanout}
        self.committed = {tp: o for tp, o in committed.items()
                          if tp[1] == self.partition and tp[0] in topics}
        self.order = self.w.arrival_order()
        self.restored = False
        return self

    # the round ----------------------------------------------------------------------

    def run(self, outbox: Outbox, counts: RoundCounts, budget: int, now: float) -> Wait | None:
        """Take up to `budget` records; the Wait that stopped it, or None if the budget
        ran out."""
        order = self.order
        clock = self.w.clock
        clock.enter("order")
        # the keys taken, in the order first taken: their bounds are written in that
        # order, the same in every run (a set's follows the process's string hashing)
        dirty: dict[str, None] = {}
        batch: list[tuple[str, Record, Event | CodecError]] = []
        left = budget
        while left > 0:
            step = order.next(now)
            if isinstance(step, Wait):
                self._events(batch, outbox, counts, dirty)
                self._finish(outbox, dirty)
                return step
            if isinstance(step, Take):
                # the records `next` would return one after another from the same
                # partition: the other inputs are looked at once per run, not per record
                stream = step.input.stream
                run = order.take_run(step, left)
                left -= len(run)
                if len(run) == 1:  # the most common run on interleaved streams
                    batch.append((stream, *step.record.item))
                else:
                    batch.extend([(stream, *pending.item) for pending in run])
            else:
                self._events(batch, outbox, counts, dirty)
                clock.enter("other")
                applied = order.apply_run(step, left)
                left -= len(applied)
                for barrier in applied:
                    self._command(barrier, outbox, counts)
                clock.enter("order")
        self._events(batch, outbox, counts, dirty)
        self._finish(outbox, dirty)
        return None

    def _finish(self, outbox: Outbox, dirty: dict[str, None]) -> None:
        self.w.clock.enter("state")
        state = self.w.names.state
        if self.live is not None:  # one LIVE per round: every command up to it is live here
            w = self.w
            command, record = self.live
            live = CommandStatus(command.id, command.action, LIVE, "",
                                 control_offset_of(record.headers), self.partition, w.partitions)
            outbox.send(w.names.status, command.id.encode(),
                        live.encode(w.codec, topic=w.names.status))
            self.live = None
        for key, value in self.query_records.flush(self.texts, self.own_topic):
            outbox.put(state, key, value, self.partition)
        gone, written = self.held_refs.flush()
        for key in gone:
            outbox.put(state, key, None, self.partition)
        for key, value in written:
            outbox.put(state, key, value, self.partition)
        for entity in dirty:
            bounds = self.engine.key_bounds(entity)
            if bounds is not None:
                outbox.put(state, (held_state.KEY + entity).encode(),
                           held_state.key_meta(*bounds), self.partition)
        for stream, offset in self.order.commit_offsets().items():
            outbox.offsets[(self.topic_of[stream], self.partition)] = offset
        fanout = self.order.barrier_commit_offset()
        if fanout is not None:
            outbox.offsets[(self.w.names.fanout, self.partition)] = fanout

    def _events(self, batch: list[tuple[str, Record, Event | CodecError]], outbox: Outbox,
                counts: RoundCounts, dirty: dict[str, None]) -> None:
        """The events taken since the last command, evaluated in one batch (one
        crossing into the native operator, which writes the results' Avro bodies),
        then each one's outputs in order, then the held events the batch released
        (`_release`)."""
        if not batch:
            return
        self._register_pending()
        clock = self.w.clock
        clock.enter("evaluate")
        events: list[Event | DecodedEvent] = [
            event for _, _, event in batch if not isinstance(event, CodecError)]
        outcomes = iter(self.engine.process_batch_encoded(events, self.w.result_budget))
        clock.enter("publish")
        keys: dict[str, None] = {}
        for stream, record, event in batch:
            counts.events_in[stream] += 1
            if isinstance(event, CodecError):
                self.w.dead_letters.send(outbox, counts, record, event.kind, event.reason)
                continue
            outcome = next(outcomes)
            if isinstance(outcome, LateEvent):
                counts.late[stream] += 1
                self.w.dead_letters.send(outbox, counts, record, "late", outcome.reason)
                self._log_late(outcome.reason)
                continue
            self._held(event, record)
            keys[event.key] = None
            if outcome:
                self._publish_encoded(event.key.encode(), outcome, outbox, counts)
                counts.produced_at.append((record.timestamp, len(outcome)))
        self._release(keys, dirty)
        batch.clear()
        clock.enter("order")

    def _held(self, event: Event, record: Record) -> None:
        """The accepted event is held: its reference goes into the round's `r/` record
        unless its key's floor passes it first."""
        self.held_refs.add((record.topic, record.offset, self.seq, event.ts, event.key))
        self.seq += 1

    def _release(self, keys: Iterable[str], dirty: dict[str, None]) -> None:
        """Release the held events of `keys` (those of a batch) that their floors have
        passed. Once per key and batch, not per event: the floor is read after the
        whole batch was evaluated either way."""
        for key in keys:
            dirty[key] = None
            bounds = self.engine.key_bounds(key)  # known: the batch evaluated an event of it
            self.held_refs.release(key, bounds[1] if bounds is not None else None)

    def _log_late(self, reason: str) -> None:
        self._late_since_log += 1
        now = time.monotonic()
        if now - self._late_logged >= LATE_LOG_EVERY:
            log.warning("partition %d: %d late event(s) dead-lettered since the last report; "
                        "latest: %s", self.partition, self._late_since_log, reason)
            self._late_logged = now
            self._late_since_log = 0

    def _publish_encoded(self, key: bytes, results: Sequence[tuple[str, bytes] | Result],
                         outbox: Outbox, counts: RoundCounts) -> None:
        """An event's results from `process_batch_encoded`: a body is framed for its
        topic and sent as `_publish` would send it; a `Result` the native writer left
        to Python (too large, or not writable as `result_body` writes) goes through
        `_publish`."""
        routes = self._routes
        for item in results:
            if isinstance(item, Result):
                self._publish((item,), outbox, counts)
                continue
            qid, body = item
            route = routes.get(qid)
            if route is None:
                topic = self._topic(qid)
                route = routes[qid] = (topic, self.w.result_header(topic),
                                       [(QUERY_HEADER, qid.encode())])
            topic, header, headers = route
            outbox.send(topic, key, header + body, headers=headers)
            counts.results_out[qid] += 1

    def _publish(self, results: Sequence[Result], outbox: Outbox, counts: RoundCounts) -> None:
        """Results built as `Result` objects (a registration's history results, and the
        few `_publish_encoded` hands on), encoded here within the size limit."""
        w = self.w
        for result in results:
            qid = result.query
            topic = self._topic(qid)
            key = result.key.encode()
            value, omitted = w.encode_result(result_record(result), topic=topic, key=key)
            headers = [(QUERY_HEADER, qid.encode())]
            if omitted:
                headers.append((ROW_OMITTED_HEADER, b"too large for one record; read the sources"))
            outbox.send(topic, key, value, headers=headers)
            counts.results_out[result.query] += 1

    def _topic(self, query_id: str) -> str:
        """Where a query's results go: the shared results topic, or its own."""
        if query_id in self.own_topic:
            return self.w.names.results(query_id)
        return self.w.names.all_results

    def _command(self, barrier: Barrier, outbox: Outbox, counts: RoundCounts) -> None:
        """Apply p's copy of an accepted command at its barrier, and say it is live."""
        record, has_barrier = barrier.item
        w = self.w
        try:
            command = w.fanout_command(record.value)
            if not has_barrier:
                raise CodecError("a fanout record without a valid barrier header: not "
                                 "written by the control task", "bad_command")
        except CodecError as exc:
            log.warning("partition %d: fanout offset %d is not an accepted command: %s",
                        self.partition, record.offset, exc.reason)
            w.dead_letters.send(outbox, counts, record, "bad_command", exc.reason)
            return
        qid = command.id
        self._routes.pop(qid, None)
        if isinstance(command, RegisterCommand) and command.text is not None \
                and qid not in self.texts:
            try:
                query = w.compiled(qid, command.text)
                # a registration widens the horizon to its window (the engine's asked
                # only when the window is wider than those waiting: rarely, in a burst)
                window = query.window
                widens = window > self._registering_window and window > self.engine.horizon
                if command.history:  # its results come now, from what the engine holds now
                    self._register_pending()
                    results = self.engine.register(query, history=True)
                else:
                    self._registering.append(query)
                    self._registering_window = max(self._registering_window, query.window)
                    results = []
                if command.own_topic:
                    self.own_topic.add(qid)
                    w.own_results_topic(qid)
            except (QueryError, RegistrationError) as exc:
                log.error("partition %d: cannot register %r: %s", self.partition, qid, exc)
                return
            self.texts[qid] = command.text
            if len(self._registering) * COPY_SHARE >= len(self.texts):
                self._register_pending()
            self.query_records.add(qid)
            if widens:
                outbox.put(w.names.state, held_state.HORIZON.encode(),
                           held_state.horizon_record(window), self.partition)
            if results:
                self._publish(results, outbox, counts)
            log.debug("partition %d: registered %r (%d history results)", self.partition, qid,
                      len(results))
        elif isinstance(command, DeregisterCommand):
            if qid in self.texts:
                self._register_pending()
                self.engine.deregister(qid)
                del self.texts[qid]
                self.own_topic.discard(qid)
                log.debug("partition %d: deregistered %r", self.partition, qid)
            self.query_records.remove(qid)  # a restored one left out of the engine too
        self.live = command, record

    def _register_pending(self) -> None:
        """Put the queries of the REGISTER commands applied since the last call into
        the engine, all at once (see `_registering`)."""
        if not self._registering:
            return
        queries, self._registering, self._registering_window = self._registering, [], 0
        try:
            self.engine.register_many(queries)
        except RegistrationError:  # not expected (`texts` keeps ids unique): one by one
            for query in queries:
                try:
                    self.engine.register(query)
                except RegistrationError as exc:
                    log.error("partition %d: cannot register %r: %s", self.partition,
                              query.id, exc)

    # restore ------------------------------------------------------------------------

    def restore(self, state: held_state.TaskState, queries: RestoredQueries,
                held: held_state.Held,
                originals: dict[tuple[str, int], dict[int, bytes]]) -> int:
        """Rebuild the engine from the state topic (`state`, its queries compiled:
        `queries`), its held events (`held`, from `state.held()`) and their input
        records (`originals`: per topic-partition, offset -> value), without evaluating
        anything: the events were processed, and their results committed, before.
        The number of held events whose original is gone (see `restore.py`)."""
        self._restore_queries(state, queries)
        per_key: dict[str, list[tuple[int, Event | DecodedEvent]]] = {}
        stream_of = {topic: s for s, topic in self.topic_of.items()}
        missing = 0
        for state_key, size, events in held:
            refs: list[held_state.Ref] = []
            for stored in events:
                value = originals.get((stored.topic, self.partition), {}).get(stored.offset)
                stream = stream_of.get(stored.topic)
                if stream is not None and value is None:
                    missing += 1
                    continue
                try:
                    if stream is None:
                        raise KeyError("not a stream topic")
                    event = self.w.codec.stream_event(stream, stored.key, value, stored.topic,
                                                      self.partition, stored.offset)
                except (CodecError, KeyError) as exc:  # the worker did not write this record
                    log.warning("partition %d: skipping state record %s/%d: %s", self.partition,
                                stored.topic, stored.offset, exc)
                    continue
                per_key.setdefault(event.key, []).append((stored.seq, event))
                refs.append((stored.topic, stored.offset, stored.seq, event.ts, event.key))
            self.held_refs.restored(state_key, size, len(events), refs)
        for key, (maxts, floor) in state.keys.items():
            in_order = [e for _, e in sorted(per_key.pop(key, []), key=lambda se: se[0])]
            self.engine.restore(key, KeySnapshot(maxts, floor, in_order))
        self.seq = state.next_seq()
        self.restored = True
        log.debug("partition %d: restored %d queries, %d keys, %d held events", self.partition,
                  len(self.texts), len(state.keys), self.held_refs.held())
        return missing

    def _restore_queries(self, state: held_state.TaskState, queries: RestoredQueries) -> None:
        self.texts = dict(queries.texts)
        self.own_topic = set(queries.own)
        for qid in queries.own:
            self.w.own_results_topic(qid)
        # in registration order, in one batch: the lists are built once, not per query
        self.engine.register_many(queries.compiled)
        self.engine.horizon = max(self.engine.horizon, state.horizon)
        self.query_records.restored(state.query_records, state.legacy, state.queries,
                                    self.texts)


class RestoredQueries(NamedTuple):
    """A partition's registered queries as its state topic holds them, compiled:
    what restoring its task registers (`restored_queries`)."""

    compiled: list[Query]
    """In registration order."""
    texts: dict[str, str]
    own: frozenset[str]
    """The ids of those publishing to a results topic of their own."""


def restored_queries(worker: TaskContext, queries: dict[str, StoredQuery]
                     ) -> RestoredQueries:
    """`queries` (a `TaskState.queries`) compiled, in registration order. A restore
    makes one for each distinct set its partitions hold (every partition holds every
    query, so usually one for all), not one per partition: sorting, looking up and
    copying every query once per partition added up (docs/benchmarks.md,
    "Registration"). A query that no longer compiles is logged and left out."""
    compiled: list[Query] = []
    texts: dict[str, str] = {}
    own: list[str] = []
    for qid, (_, text, own_topic) in sorted(queries.items(), key=lambda kv: kv[1][0]):
        try:
            compiled.append(worker.compiled(qid, text))
        except QueryError as exc:  # the schemas changed under a registered query
            log.error("cannot restore query %r: %s", qid, exc)
            continue
        texts[qid] = text
        if own_topic:
            own.append(qid)
    return RestoredQueries(compiled, texts, frozenset(own))
