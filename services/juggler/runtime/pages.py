"""What the worker's small HTTP pages (`/queries`, `/progress`, `/metrics`) read of its
tasks: a snapshot the loop takes at the end of each round and publishes by swapping
one reference (`JugglerWorker.pages`), which the HTTP thread reads as it stands.

Why not read the live tasks: only the loop's thread may touch them mid-round, so a
page would wait for the loop, and on a busy worker for the interpreter it holds; a
page may be a round stale instead (a round is a batch per task). The snapshot holds only what the pages show, so taking it costs
the loop little (docs/benchmarks.md, "Probes").

What the pages, the metrics and the HTTP port read of a runtime is typed here too, as
read-only views (`TaskView`, `JobView` for either runtime, `WorkerView` for the
worker's own port): the worker and the Faust runtime each pass themselves, and a page
or a collector depends on those few reads, not on the runtime that serves it.

The registered queries are the exception to taking everything every round: listing
them costs as much as there are, and during a burst of registrations they change every
round, so taking them every round made registration cost grow with the square of the
queries. They are taken again when they changed, at once while there are few
(`FRESH_UP_TO`), else once `RETAKE` times as long as taking them last cost has passed:
with many queries, a page may show them some rounds stale, and listing them takes at
most about a `RETAKE`th of the loop.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

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


@dataclass(frozen=True)
class Scrape:
    """What the scrape-time metrics read of a runtime's tasks (`metrics`)."""

    engines: tuple[Engine, ...]
    tasks: tuple[object, ...]
    """Every task, restored or not (identities only)."""
    lags: tuple[tuple[str, int, int], ...]
    """(topic, partition, records not yet processed) per restored stream partition whose
    position and log end are known."""
    registered: frozenset[str]


@dataclass(frozen=True)
class Pages:
    progress: Mapping[str, Any]
    """`WorkerView.progress()`: the log ends as last asked (`/progress` asks them
    again). Shared by every reader: not to be changed."""
    queries: tuple[Mapping[str, str], ...]
    scrape: Scrape


EMPTY = Pages(progress=MappingProxyType({"partitions": {}, "restoring": [], "control": False}),
              queries=(), scrape=Scrape((), (), (), frozenset()))
"""Before the loop's first round."""


class TaskView(Protocol):
    """What the readers use of a partition task (`task.PartitionTask`)."""

    @property
    def partition(self) -> int: ...

    @property
    def texts(self) -> Mapping[str, str]:
        """The registered queries: id -> text."""

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
    def admin(self) -> Any:
        """The admin client `/progress` asks the log ends with."""

    @property
    def ready(self) -> bool: ...

    @property
    def pages(self) -> Pages: ...

    @property
    def metrics(self) -> Exposition: ...

    def unavailable(self) -> str | None: ...

    def progress(self) -> dict[str, Any]: ...

    def registered_queries(self) -> list[dict[str, str]]: ...


FRESH_UP_TO = 10_000
"""Up to this many registrations over the restored tasks, the registered queries are
taken again whenever they changed."""

RETAKE = 10
"""Beyond `FRESH_UP_TO`, the registered queries are taken again once this many times
as long as taking them last cost has passed."""


class Registered:
    """The registered queries as the pages last took them (see the module's docstring)."""

    def __init__(self) -> None:
        self.queries: tuple[Mapping[str, str], ...] = ()
        self.ids: frozenset[str] = frozenset()
        self._seen: object = ()
        self._due = 0.0

    def take(self, worker: WorkerView) -> None:
        """Take them again from `worker`'s tasks if they changed and it is due."""
        tasks = worker.restored_tasks()
        # what a registration or deregistration changes (`NativeEngine.lineage`), and
        # the texts a query that failed to register still adds
        seen = tuple((id(t), len(t.texts), t.engine.lineage) for t in tasks)
        started = time.monotonic()
        if seen == self._seen or (started < self._due
                                  and sum(len(t.texts) for t in tasks) > FRESH_UP_TO):
            return
        self.queries = tuple(worker.registered_queries())
        self.ids = frozenset(q["id"] for q in self.queries)
        self._seen = seen
        now = time.monotonic()
        self._due = now + RETAKE * (now - started)


def take(worker: WorkerView, registered: Registered) -> Pages:
    """The pages' view of the worker's tasks now; called on the loop's thread."""
    registered.take(worker)
    return Pages(progress=worker.progress(), queries=registered.queries,
                 scrape=scrape(worker, registered.ids))


def scrape(job: JobView, registered: frozenset[str] | None = None) -> Scrape:
    """The metrics' view of `job`'s tasks now, for either runtime; `registered`, the ids
    of the registered queries if already taken (`Registered`)."""
    restored = job.restored_tasks()
    lags = []
    for task in restored:
        p = task.partition
        for stream, inp in task.order.inputs.items():
            topic = job.names.stream(stream)
            offset = inp.next_offset()
            high = job.high_watermark(topic, p)
            if offset is not None and high is not None and high >= 0:
                lags.append((topic, p, max(0, high - offset)))
    return Scrape(engines=tuple(Engine(t, t.engine.manager, t.engine.held_events(), len(t.texts))
                                for t in restored),
                  tasks=tuple(job.tasks.values()), lags=tuple(lags),
                  registered=frozenset(q for task in restored for q in task.texts)
                  if registered is None else registered)
