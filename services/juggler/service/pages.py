"""What the worker's small HTTP pages (`/queries`, `/progress`, `/metrics`) read of its
tasks: a snapshot the loop takes at the end of each round and publishes by swapping
one reference (`JugglerWorker.pages`), which the HTTP thread reads as it stands.

Why not read the live tasks: only the loop's thread may touch them mid-round, so a
page would wait for the loop, and on a busy worker for the interpreter it holds; a
page may be a round stale instead (a round is a batch per task). The snapshot holds only what the pages show, so taking it costs
the loop little (docs/benchmarks.md, "Probes").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class Engine:
    """What the metrics read of one restored task's engine."""

    task: object = field(repr=False, compare=False)
    """The task itself, for its identity only: the metrics keep a task's counters once
    it is gone (`metrics._EngineCollector`). Its live state is not read from it."""
    manager: Any
    """Its predicate type manager's counters (`native_engine.TypeCounters`)."""
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
    """`JugglerWorker.progress()`: the log ends as last asked (`/progress` asks them
    again). Shared by every reader: not to be changed."""
    queries: tuple[Mapping[str, str], ...]
    scrape: Scrape


EMPTY = Pages(progress=MappingProxyType({"partitions": {}, "restoring": [], "control": False}),
              queries=(), scrape=Scrape((), (), (), frozenset()))
"""Before the loop's first round."""


def take(worker: Any) -> Pages:
    """The pages' view of the worker's tasks now; called on the loop's thread."""
    return Pages(progress=worker.progress(), queries=tuple(worker.registered_queries()),
                 scrape=scrape(worker))


def scrape(job: Any) -> Scrape:
    """The metrics' view of `job`'s tasks now, for either runtime."""
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
                  registered=frozenset(q for task in restored for q in task.texts))
