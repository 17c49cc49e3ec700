"""What both runtimes of the job share: the worker (`juggler worker`) and the Faust app
(`juggler faust-worker`) are two ways of driving the same tasks, so the parts a task and
the control task call on live here once.

`Job` holds the settings, the topic names, the codec and its catalog, the compiled
queries, the framing and size bound of results, the dead-letter writer and the loop
clock; a runtime adds how records arrive (`arrival_order`) and how a round's outbox
reaches Kafka. `TaskContext` is what a task may use of it, typed, so a task never
reaches into a runtime.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka.admin import AdminClient

from juggler.bounded_cache import BoundedCache
from juggler.codec.avro import RESULT, Codec
from juggler.codec.bounded import encode_result_bounded, result_budget
from juggler.engine.native_engine import NativeEngine
from juggler.engine.shared_registry import SharedRegistries
from juggler.kafka.client_config import client_config
from juggler.kafka.client_log import client_log, stamp, watched
from juggler.kafka.offsets import log_ends
from juggler.language import QueryCompiler
from juggler.language.model import Query
from juggler.runtime.arrival import ArrivalOrder, IdleEstimate
from juggler.runtime.deadletters import DeadLetters
from juggler.runtime.group_settings import GroupSettings
from juggler.runtime.loop_clock import LoopClock
from juggler.runtime.metrics import WorkerMetrics
from juggler.runtime.pages import Scrape, TaskView, listed, queries_of
from juggler.runtime.pages import scrape as scrape_tasks
from juggler.runtime.readback import read_originals
from juggler.runtime.results_store import ResultsStore
from juggler.runtime.settings import Settings
from juggler.runtime.topic_names import TopicNames
from juggler.runtime.topic_setup import ensure_results_topic, ensure_worker_topics, partitions
from juggler.wire.commands import Command, decode_command, encode_command

FAILURE_EXIT = 70
"""Exit status when processing fails, in either runtime: state may be ahead of what was
committed, and a restart resumes from what was."""
COMPILED_CACHE = 500_000
"""Compiled queries kept per process (least recently used dropped first). Beyond the queries
registered at once: the control task compiles a burst of commands first and every
partition task then asks for the same queries in the same order, so a cache smaller
than the burst dropped each one before the tasks came to it (100,000 rules were
compiled five times over with 4 partitions). A registered query's object is the
engines' own, so the cache costs only the dict's entries for those."""
FANOUT_CACHE = 262_144
"""Decoded fanout commands kept per process, each until every task of the process has
read its copy (`Job.fanout_command`), and at most this many (least recently used dropped
first, decoded again when read): in a burst of registrations the partitions' tasks fall
tens of thousands of commands behind the control task, and at 16,384 a twentieth of the
burst went to decoding copies again."""


@dataclass(slots=True)
class _Decoded:
    """A fanout copy's command, and how many of the process's tasks have still to read it."""

    command: Command
    readers: int


class TaskContext(Protocol):
    """What a partition task and the control task use of their runtime."""

    settings: Settings
    names: TopicNames
    codec: Codec
    streams: tuple[str, ...]
    partitions: int
    max_record_bytes: int
    result_budget: int
    clock: LoopClock
    dead_letters: DeadLetters
    metrics: WorkerMetrics
    registries: SharedRegistries[NativeEngine]

    def arrival_order(self) -> ArrivalOrder: ...

    def result_header(self, topic: str) -> bytes: ...

    def encode_result(self, record: dict[str, Any], *, topic: str, key: bytes
                      ) -> tuple[bytes, bool]: ...

    def compiled(self, query_id: str, text: str) -> Query: ...

    def fanout_command(self, value: bytes | None) -> Command: ...

    def fanout_value(self, command: Command) -> bytes: ...

    def ensure_results_topic(self, query_id: str) -> None: ...

    def own_results_topic(self, query_id: str) -> None: ...

    def stream_log_ends(self) -> dict[int, dict[str, int]]: ...

    def control_value_at(self, offset: int) -> bytes | None: ...


class Job:
    """The shared half of a runtime (see the module's docstring)."""

    results_store: ResultsStore | None = None
    """The results index, once the runtime started it."""
    tasks: Mapping[int, TaskView]
    """The runtime's partition tasks (`task.PartitionTask`), restored or not, by
    partition: the runtime sets them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.names = TopicNames(settings.topic_prefix)
        self.codec = Codec(settings.schemas_dir, registry_url=settings.registry_url)
        self.catalog = self.codec.catalog()
        self.streams = tuple(self.codec.stream_names())
        if settings.create_topics:
            ensure_worker_topics(settings, self.streams)
        self.partitions = partitions(settings) or settings.partitions or 1
        self.client_config = watched(client_config(settings.bootstrap))
        """What every Kafka client of the runtime is made with: the cluster's address and
        security, and this process's `ClientLog` for its log lines and errors."""
        self.admin = self._admin_client()
        self.max_record_bytes = settings.max_record_bytes
        self.result_budget = result_budget(self.codec, self.max_record_bytes)
        """What a result's Kafka key and Avro body may take (`process_batch_encoded`)."""
        self.clock = LoopClock()
        self.dead_letters = DeadLetters(self)
        self._result_headers: dict[str, bytes] = {}
        self._compiler = QueryCompiler(self.catalog)
        self._compiled: BoundedCache[tuple[str, str], Query] = BoundedCache(COMPILED_CACHE)
        self._fanout: BoundedCache[bytes | None, _Decoded] = BoundedCache(FANOUT_CACHE)
        self.registries: SharedRegistries[NativeEngine] = SharedRegistries()
        """The tasks' engines, which copy each other's registries (`shared_registry`)."""

    @property
    def instance(self) -> str:
        """This process's name in the group (`Settings.instance_id`, else host-pid)."""
        return self.settings.instance_id or f"{socket.gethostname()}-{os.getpid()}"

    def group_settings(self) -> GroupSettings:
        """What this runtime's results depend on, to compare with its group's."""
        return GroupSettings.of(self.settings, self.partitions, self.codec)

    def arrival_order(self) -> ArrivalOrder:
        """A task's order of taking records: the worker's, which never overtakes a record
        still in the log (docs/worker.md)."""
        settings = self.settings
        # the wall clock read once, as an offset to the loop's monotonic clock: the
        # order compares event times with it, and NTP stepping it moves no deadline
        estimate = IdleEstimate(settings.idle_margin_ms, settings.allowed_lateness,
                                time.time() - time.monotonic()) \
            if settings.idle_estimate else None
        return ArrivalOrder(self.streams, settings.max_idle_ms, estimate)

    def encode_result(self, record: dict[str, Any], *, topic: str, key: bytes) -> tuple[bytes, bool]:
        return encode_result_bounded(self.codec, record, topic=topic, key=key,
                                     max_bytes=self.max_record_bytes, trusted=True)

    def result_header(self, topic: str) -> bytes:
        """The framing of a result body sent to `topic`: asked of the codec (and, with a
        Schema Registry, of the registry) once per topic."""
        header = self._result_headers.get(topic)
        if header is None:
            header = self._result_headers[topic] = self.codec.header(RESULT, topic)
        return header

    def compiled(self, query_id: str, text: str) -> Query:
        """The query compiled once per process: the control task and every task register
        the same text, and compiling is most of a registration's cost; a text of a shape
        compiled before is compiled by its plan (`juggler.language.plans`). Raises
        `QueryError`."""
        key = (query_id, text)
        query = self._compiled.get(key)
        if query is None:
            query = self._compiled.put(key, self._compiler.compile(query_id, text))
        return query

    def fanout_command(self, value: bytes | None) -> Command:
        """A fanout record's command, decoded once per process: every partition's copy
        of an accepted command has the same value, so a burst of commands is decoded
        once, not once per partition, and kept until each of the process's tasks has
        read it. Raises `CodecError`."""
        entry = self._fanout.get(value)
        if entry is None:
            command = decode_command(self.codec, value, trusted=True)
            if len(self.tasks) > 1:
                self._fanout.put(value, _Decoded(command, len(self.tasks) - 1))
            return command
        entry.readers -= 1
        if entry.readers <= 0:
            self._fanout.pop(value)
        return entry.command

    def fanout_value(self, command: Command) -> bytes:
        """An accepted command's fanout copy, remembered as decoded: the control task
        writes it, and this process's partition tasks read it back (`fanout_command`)
        without decoding it again (a decode per command was a twentieth of a burst of
        registrations)."""
        value = encode_command(self.codec, command, topic=self.names.fanout, trusted=True)
        if self.tasks:
            self._fanout.put(value, _Decoded(command, len(self.tasks)))
        return value

    def ensure_results_topic(self, query_id: str) -> None:
        ensure_results_topic(self.settings, self.partitions, query_id)

    def own_results_topic(self, query_id: str) -> None:
        """A query registered or restored here publishes to its own results topic: the
        results index follows that topic too, so the API serves it as any other."""
        if self.results_store is not None:
            self.results_store.follow(self.names.results(query_id))

    def restored_tasks(self) -> Sequence[TaskView]:
        """The tasks whose engines may be read (by the HTTP pages and the metrics)."""
        raise NotImplementedError

    def scrape(self) -> Scrape:
        """What the scrape-time metrics read of the tasks: here taken now, by the
        runtime's own thread."""
        return scrape_tasks(self)

    def high_watermark(self, topic: str, partition: int) -> int | None:
        """An assigned partition's log end as the consumer last learned it, or None.
        Read by the metrics from the HTTP thread, so it must not call the consumer:
        confluent-kafka serialises the calls on one consumer, and a call from another
        thread waits until the loop's poll returns (up to its whole timeout)."""
        raise NotImplementedError

    def own_topic(self, query_id: str) -> bool:
        """Whether a query registered here publishes to its own results topic."""
        return any(query_id in t.own_topic for t in self.restored_tasks())

    def registered_queries(self) -> list[dict[str, str]]:
        return listed(queries_of(self.restored_tasks()))

    def control_value_at(self, offset: int) -> bytes | None:
        """The value of the control topic's record at `offset`, read committed; None
        when it is no longer in the log."""
        tp = (self.names.control, 0)
        return read_originals(self, {tp: [offset]})[tp].get(offset)

    def _admin_client(self) -> AdminClient:
        admin = AdminClient({**self.client_config, "log_level": 3})
        client_log().serve(admin)
        return admin

    def renew_admin(self) -> None:
        """Replace the admin client with a new one, after the cluster was unreachable.
        librdkafka's admin client can come out of a broker's restart unable to reach the
        group coordinator: its ListConsumerGroupOffsets (a clearance's, a restore's)
        then time out every time, and may abort the process on an assertion
        (rd_kafka_enq_once_del_source_return, confluentinc/librdkafka#3663 and #4605,
        reproduced with 2.16 here); a client made after the restart is not affected. A
        request under way on the old one ends with it."""
        old, self.admin = self.admin, self._admin_client()
        client_log().forget(old)

    def unavailable(self) -> str | None:
        """Why the runtime cannot commit now, as `/health` says it, or None."""
        down = client_log().unreachable()
        if down is None:
            return None
        since, what = down
        return f"cannot commit: broker unreachable since {stamp(since)} ({what})"

    def stream_log_ends(self) -> dict[int, dict[str, int]]:
        """Per partition, each stream partition's log end now (a barrier)."""
        ends = log_ends(self.admin, [(self.names.stream(s), p) for s in self.streams
                                     for p in range(self.partitions)])
        return {p: {s: ends[(self.names.stream(s), p)] for s in self.streams}
                for p in range(self.partitions)}
