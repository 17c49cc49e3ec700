"""`juggler_results_out_total{query}` follows the queries registered in the worker: a
series from a query's registration on, and gone once it is deregistered and a scrape
has exported its final count."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from juggler.runtime.loop_clock import LoopClock
from juggler.runtime.metrics import WorkerMetrics
from juggler.runtime import pages
from juggler.runtime.task import RoundCounts


def task(*queries: str) -> SimpleNamespace:
    """What the scrape reads of a partition task: its queries, and an engine and
    arrival order with nothing to report."""
    manager = SimpleNamespace(comparisons=Counter(), reorders=0, selectivity={}, order="AJW")
    engine = SimpleNamespace(manager=manager, held_events=dict, lineage=())
    return SimpleNamespace(texts=dict.fromkeys(queries, "SELECT ..."), partition=0, seq=0,
                           order=SimpleNamespace(inputs={}), engine=engine)


class Worker:
    def __init__(self) -> None:
        self.catalog = ["B"]
        self.clock = LoopClock()
        self.tasks: dict[int, SimpleNamespace] = {}

    def restored_tasks(self) -> list[SimpleNamespace]:
        return list(self.tasks.values())

    def scrape(self) -> pages.Scrape:
        return pages.scrape(self)


def scrape(metrics: WorkerMetrics) -> dict[str, float]:
    """The results counted per query, as a scraper reads /metrics."""
    return {sample.labels["query"]: sample.value
            for family in text_string_to_metric_families(metrics.expose().decode())
            if family.name == "juggler_results_out"
            for sample in family.samples if sample.name == "juggler_results_out_total"}


def committed(metrics: WorkerMetrics, **results: int) -> None:
    metrics.count(RoundCounts(results_out=Counter(results)))


def test_a_deregistered_query_is_reported_once_more_then_dropped() -> None:
    worker = Worker()
    metrics = WorkerMetrics(worker)
    worker.tasks = {0: task("q1", "q2"), 1: task("q1", "q2")}
    assert scrape(metrics) == {"q1": 0, "q2": 0}  # from registration on
    committed(metrics, q1=3, q2=1)
    worker.tasks = {0: task("q2"), 1: task("q2")}  # q1 deregistered
    committed(metrics, q1=2)  # its last round commits after the command
    assert scrape(metrics) == {"q1": 5, "q2": 1}
    assert scrape(metrics) == {"q2": 1}
    assert scrape(metrics) == {"q2": 1}


def test_a_round_committed_between_two_scrapes_is_exported_before_the_series_goes() -> None:
    worker = Worker()
    metrics = WorkerMetrics(worker)
    worker.tasks = {0: task("q1")}
    committed(metrics, q1=3)
    worker.tasks = {0: task()}  # q1 deregistered; a round before the command still commits
    assert scrape(metrics) == {"q1": 3}
    committed(metrics, q1=2)
    assert scrape(metrics) == {"q1": 5}
    assert scrape(metrics) == {}


def test_results_committed_after_the_series_was_dropped_are_reported_once() -> None:
    worker = Worker()
    metrics = WorkerMetrics(worker)
    committed(metrics, q1=1)  # a partition moved away with q1 on it
    assert scrape(metrics) == {"q1": 1}
    assert scrape(metrics) == {}
    committed(metrics, q1=4)  # a round of it still in flight then
    assert scrape(metrics) == {"q1": 4}
    assert scrape(metrics) == {}


def test_a_query_registered_again_keeps_its_series() -> None:
    worker = Worker()
    metrics = WorkerMetrics(worker)
    worker.tasks = {0: task("q1")}
    committed(metrics, q1=2)
    assert scrape(metrics) == {"q1": 2}
    worker.tasks = {0: task()}
    assert scrape(metrics) == {"q1": 2}
    worker.tasks = {0: task("q1")}
    committed(metrics, q1=1)
    assert scrape(metrics) == {"q1": 3}
    assert scrape(metrics) == {"q1": 3}
