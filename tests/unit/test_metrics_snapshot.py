"""The worker's /metrics text is rendered once per published snapshot, yet a scrape
never misses what changed: a round committed since (the commit thread's counts), a new
snapshot (the loop's next round), or a deregistered query's series, which leaves at the
next scrape as it does without the cache."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from juggler.runtime import pages
from juggler.runtime.loop_clock import LoopClock
from juggler.runtime.metrics import WorkerMetrics
from juggler.runtime.task import RoundCounts


def task(*queries: str, held: int = 0) -> SimpleNamespace:
    manager = SimpleNamespace(comparisons=Counter(), reorders=0, selectivity={}, order="AJW")
    engine = SimpleNamespace(manager=manager, held_events=lambda: {"B": held}, lineage=())
    return SimpleNamespace(texts=dict.fromkeys(queries, "SELECT ..."), partition=0, seq=0,
                           order=SimpleNamespace(inputs={}), engine=engine)


class Worker:
    """Publishes a snapshot of its tasks when told, as the worker's loop does at the end
    of each round; the metrics read only that."""

    def __init__(self, *queries: str) -> None:
        self.catalog = ["B"]
        self.clock = LoopClock()
        self.tasks = {0: task(*queries)}
        self.published = pages.scrape(self)

    def restored_tasks(self) -> list[SimpleNamespace]:
        return list(self.tasks.values())

    def scrape(self) -> pages.Scrape:
        return self.published

    def round_ends(self) -> None:
        self.published = pages.scrape(self)


def values(metrics: WorkerMetrics) -> dict[str, float]:
    return {sample.name + str(sorted(sample.labels.values())): sample.value
            for family in text_string_to_metric_families(metrics.expose().decode())
            for sample in family.samples}


def test_a_scrape_between_two_rounds_is_the_text_already_rendered() -> None:
    metrics = WorkerMetrics(Worker("q1"))
    first = metrics.expose()
    assert metrics.cached() is first and metrics.expose() is first


def test_a_round_committed_since_the_last_scrape_is_in_the_next() -> None:
    metrics = WorkerMetrics(Worker("q1"))
    assert values(metrics)["juggler_events_in_total['B']"] == 0
    metrics.count(RoundCounts(events_in=Counter(B=5), results_out=Counter(q1=2)))
    assert metrics.cached() is None
    after = values(metrics)
    assert after["juggler_events_in_total['B']"] == 5
    assert after["juggler_results_out_total['q1']"] == 2


def test_a_new_snapshot_is_in_the_next_scrape() -> None:
    worker = Worker("q1")
    metrics = WorkerMetrics(worker)
    assert values(metrics)["juggler_held_events['B']"] == 0
    worker.tasks = {0: task("q1", held=7)}
    assert values(metrics)["juggler_held_events['B']"] == 0  # not published yet
    worker.round_ends()
    assert values(metrics)["juggler_held_events['B']"] == 7


def test_a_deregistered_query_is_reported_once_more_then_dropped() -> None:
    worker = Worker("q1", "q2")
    metrics = WorkerMetrics(worker)
    metrics.count(RoundCounts(results_out=Counter(q1=3)))
    worker.tasks = {0: task("q2")}
    worker.round_ends()
    assert values(metrics)["juggler_results_out_total['q1']"] == 3
    assert "juggler_results_out_total['q1']" not in values(metrics)
    assert "juggler_results_out_total['q1']" not in values(metrics)
