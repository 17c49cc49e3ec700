"""What the worker's small HTTP pages (`/queries`, `/progress`, `/metrics`) read of its
tasks: a snapshot the loop takes at the end of each round and publishes by swapping
one reference (`JugglerWorker.pages`), which the HTTP thread reads as it stands.

Why not read the live tasks: only the loop's thread may touch them mid-round, so a
page would wait for the loop, and on a busy worker for the interpreter it holds; a
page may be a round stale instead (a round is a batch per task). The snapshot holds
only what the pages show, so taking it costs the loop little (docs/benchmarks.md,
"Probes").

What the pages, the metrics and the HTTP port read of a runtime is typed here too, as
read-only views (`TaskView`, `JobView` for either runtime, `WorkerView` for the
worker's own port): the worker and the Faust runtime each pass themselves, and a page
or a collector depends on those few reads, not on the runtime that serves it.

An engine's counters are taken again only when its task evaluated or registered
something since (`Engine.changes`): asking a quiet engine gives what the last snapshot
holds.

The registered queries are not taken every round either: listing them costs as much
as there are, and during a burst of registrations they change every round, so taking
them every round made registration cost grow with the square of the queries. They
are taken again when they changed, at once while there are few (`FRESH_UP_TO`), else
once `RETAKE` times as long as taking them last cost has passed: with many queries, a
page may show them some rounds stale, and listing them takes at most about a
`RETAKE`th of the loop.
"""

from __future__ import annotations

import ctypes
import json
import multiprocessing
import time
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # typing only: the HTTP port's process imports this module to render
    # `/queries`, and must not load the engine (`queries_body`)
    from confluent_kafka.admin import AdminClient

    from juggler.engine.native_engine import NativeEngine, TypeCounters
    from juggler.runtime.arrival import ArrivalOrder
    from juggler.runtime.loop_clock import LoopClock
    from juggler.runtime.results_store import ResultsStore
    from juggler.runtime.settings import Settings
    from juggler.runtime.topic_names import TopicNames


@dataclass(frozen=True)
class Engine:
    """What the metrics read of one restored task's engine."""

    task: object = field(repr=False, compare=False)
    """The task itself, for its identity only: the metrics keep a task's counters once
    it is gone (`metrics._EngineCollector`). Its live state is not read from it."""
    manager: TypeCounters
    """Its predicate type manager's counters."""
    held: Mapping[str, int]
    queries: int
    changes: tuple[int, object, int] = field(repr=False, compare=False)
    """What moves whenever the counters above may have (`_changes`): while it stands,
    the next snapshot keeps this one instead of asking the engine again."""


@dataclass(frozen=True)
class Scrape:
    """What the scrape-time metrics read of a runtime's tasks (`metrics`)."""

    engines: tuple[Engine, ...]
    tasks: tuple[object, ...]
    """Every task, restored or not (identities only)."""
    lags: tuple[tuple[str, int, int], ...]
    """(topic, partition, records not yet processed) per restored stream partition whose
    position and log end are known."""
    registered: Set[str]


@dataclass(frozen=True)
class Pages:
    progress: Mapping[str, Any]
    """`WorkerView.progress()`: the log ends as last asked (`/progress` asks them
    again). Shared by every reader: not to be changed."""
    queries: Mapping[str, str]
    """The registered queries, id -> text; not to be changed either."""
    scrape: Scrape
    own_topic: Set[str] = frozenset()
    """Those of `queries` registered with their own results topic."""


EMPTY = Pages(progress=MappingProxyType({"partitions": {}, "restoring": [], "control": False}),
              queries=MappingProxyType({}), scrape=Scrape((), (), (), frozenset()))
"""Before the loop's first round."""


class TaskView(Protocol):
    """What the readers use of a partition task (`task.PartitionTask`)."""

    @property
    def partition(self) -> int: ...

    @property
    def texts(self) -> Mapping[str, str]:
        """The registered queries: id -> text."""

    @property
    def topic_of(self) -> Mapping[str, str]:
        """Stream -> its topic."""

    @property
    def seq(self) -> int:
        """Counts the events its engine accepted (`PartitionTask.seq`)."""

    @property
    def own_topic(self) -> Set[str]:
        """The queries registered with their own results topic."""

    @property
    def order(self) -> ArrivalOrder: ...

    @property
    def engine(self) -> NativeEngine: ...


class JobView(Protocol):
    """What the metrics (`metrics.WorkerMetrics`), the scrape (`pages.scrape`) and a
    results page (`http_api.results_handler`) read of either runtime."""

    @property
    def names(self) -> TopicNames: ...

    @property
    def catalog(self) -> Mapping[str, Any]:
        """The codec's streams (their names label the per-stream counters)."""

    @property
    def clock(self) -> LoopClock: ...

    @property
    def tasks(self) -> Mapping[int, TaskView]:
        """Every task, restored or not, by partition."""

    @property
    def results_store(self) -> ResultsStore | None:
        """The results index, once the runtime started it."""

    def restored_tasks(self) -> Sequence[TaskView]: ...

    def high_watermark(self, topic: str, partition: int) -> int | None: ...

    def own_topic(self, query_id: str) -> bool: ...

    def scrape(self) -> Scrape: ...


class Exposition(Protocol):
    def cached(self) -> bytes | None:
        """The text already rendered for the current snapshot, if any
        (`metrics.WorkerMetrics.cached`)."""

    def expose(self) -> bytes:
        """The Prometheus text of a scrape (`metrics.WorkerMetrics.expose`)."""


class WorkerView(JobView, Protocol):
    """What the worker's HTTP port (`http_api.serve`) and its published pages
    (`pages.take`) read of it besides."""

    @property
    def settings(self) -> Settings: ...

    @property
    def admin(self) -> AdminClient:
        """The admin client `/progress` asks the log ends with."""

    @property
    def client_config(self) -> Mapping[str, Any]:
        """The librdkafka config its clients are made with (the HTTP port's process
        asks the log ends with its own)."""

    @property
    def ready(self) -> bool: ...

    @property
    def pages(self) -> Pages: ...

    @property
    def metrics(self) -> Exposition: ...

    @property
    def registered(self) -> Registered:
        """The registered queries the pages show (`queries` of the published snapshot,
        with their `published` count)."""

    def unavailable(self) -> str | None: ...

    def progress(self, restored: Sequence[TaskView]) -> dict[str, Any]:
        """What `/progress` shows of the `restored` tasks, without the log ends asked
        now (`Pages.progress`)."""


FRESH_UP_TO = 10_000
"""Up to this many registrations over the restored tasks, the registered queries are
taken again whenever they changed."""

RETAKE = 10
"""Beyond `FRESH_UP_TO`, the registered queries are taken again once this many times
as long as taking them last cost has passed."""


class Registered:
    """The registered queries as the pages last took them (see the module's docstring)."""

    def __init__(self) -> None:
        self.queries: Mapping[str, str] = MappingProxyType({})
        self.own_topic: Set[str] = frozenset()
        self.taken = 0
        """Times they were taken anew."""
        self.published = multiprocessing.RawValue(ctypes.c_uint64, 0)
        """`taken` as of the snapshot the worker published last, in memory shared with
        other processes: the HTTP port's process reads it to know, without asking the
        worker, whether the queries it holds are still those published
        (`page_process`)."""
        self._seen: object = ()
        self._due = 0.0

    def take(self, tasks: Sequence[TaskView]) -> None:
        """Take them again from the restored `tasks` if they changed and it is due."""
        # what a registration or deregistration changes (`NativeEngine.lineage`), and
        # the texts a query that failed to register still adds
        seen = tuple((id(t), len(t.texts), t.engine.lineage) for t in tasks)
        started = time.monotonic()
        if seen == self._seen or (started < self._due
                                  and sum(len(t.texts) for t in tasks) > FRESH_UP_TO):
            return
        self.queries = queries_of(tasks)
        self.own_topic = frozenset().union(*(t.own_topic for t in tasks))
        self.taken += 1
        self._seen = seen
        now = time.monotonic()
        self._due = now + RETAKE * (now - started)


def queries_of(tasks: Sequence[TaskView]) -> dict[str, str]:
    """The queries registered in `tasks`, each once: id -> text. As a dict rather than
    the list `/queries` shows, which is built from it only when rendered: with many
    queries, listing them is most of what taking the pages costs the loop."""
    seen: dict[str, str] = {}
    for task in tasks:
        seen.update(task.texts)
    return seen


def listed(queries: Mapping[str, str]) -> list[dict[str, str]]:
    """The queries as `/queries` lists them."""
    return [{"id": qid, "text": text} for qid, text in queries.items()]


def queries_body(queries: Mapping[str, str]) -> bytes:
    """`/queries`' body."""
    return json.dumps({"queries": listed(queries)}).encode()


def take(worker: WorkerView, registered: Registered) -> Pages:
    """The pages' view of the worker's tasks now; called on the loop's thread. Each
    engine's counters are asked again only where they may have changed since the
    snapshot the worker published last (`Engine.changes`)."""
    restored = worker.restored_tasks()
    registered.take(restored)
    return Pages(progress=worker.progress(restored), queries=registered.queries,
                 scrape=_scrape(worker, restored, registered.queries.keys(),
                                 worker.pages.scrape.engines),
                 own_topic=registered.own_topic)


def scrape(job: JobView) -> Scrape:
    """The metrics' view of `job`'s tasks now, for either runtime, all of it taken."""
    restored = job.restored_tasks()
    return _scrape(job, restored, frozenset(q for task in restored for q in task.texts), ())


def _scrape(job: JobView, restored: Sequence[TaskView], registered: Set[str],
            taken: Sequence[Engine]) -> Scrape:
    """`scrape` of the `restored` tasks, `registered` the ids of their queries, keeping
    each engine of `taken` whose task's `_changes` stand."""
    lags = []
    for task in restored:
        p = task.partition
        for stream, inp in task.order.inputs.items():
            topic = task.topic_of[stream]
            offset = inp.next_offset()
            high = job.high_watermark(topic, p)
            if offset is not None and high is not None and high >= 0:
                lags.append((topic, p, max(0, high - offset)))
    kept = {id(e.task): e for e in taken}
    engines = []
    for task in restored:
        changes = _changes(task)
        engine = kept.get(id(task))  # `taken` holds its tasks: no other has their ids
        if engine is None or engine.changes != changes:
            engine = Engine(task, task.engine.manager, task.engine.held_events(),
                            len(task.texts), changes)
        engines.append(engine)
    return Scrape(engines=tuple(engines), tasks=tuple(job.tasks.values()), lags=tuple(lags),
                  registered=registered)


def _changes(task: TaskView) -> tuple[int, object, int]:
    """What moves whenever the task's engine counters or held events may have: only
    evaluating an event changes them (the engine's comparisons, order and selectivity,
    and the held events, which an event adds and whose key's floor it moves), and every
    event evaluated and not late is held (`seq`); registering or deregistering a query
    changes them too (its history evaluated, its lists) and moves the lineage, and a
    query that failed to register still adds its text."""
    return task.seq, task.engine.lineage, len(task.texts)
