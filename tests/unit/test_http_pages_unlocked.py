"""The worker's small pages answer from the snapshot the loop published (`pages`), never
from the live tasks, which only the loop's thread may touch mid-round: a probe or a
scrape never waits for a round, nor reads a task half-way through one."""

from __future__ import annotations

import json
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from fake_port import port_reads, serve_fake
from juggler.runtime.loop_clock import LoopClock
from juggler.runtime.metrics import WorkerMetrics
from juggler.runtime.pages import Engine, Pages, Scrape

QUERY = {"id": "q1", "text": "SELECT * FROM B"}


def published() -> Pages:
    """A round's snapshot: one restored partition, caught up, with one query."""
    task = object()
    manager = SimpleNamespace(comparisons=Counter({"A": 7}), reorders=0, selectivity={},
                              order="AJW")
    return Pages(progress={"partitions": {"0": {"restored": True, "inputs": {},
                                                "pending_commands": 0}},
                           "restoring": [], "control": True},
                 queries={QUERY["id"]: QUERY["text"]},
                 scrape=Scrape(engines=(Engine(task, manager, {"B": 3}, 1, (0, (), 1)),),
                               tasks=(task,),
                               lags=(("juggler.stream.B", 0, 5),),
                               registered=frozenset({"q1"})))


class LiveTasks(dict):  # type: ignore[type-arg]
    """The loop's tasks, mid-round: a page that reads them fails the test."""

    def __getitem__(self, key: object) -> None:
        raise AssertionError("a page read the live tasks")

    def values(self) -> None:  # type: ignore[override]
        raise AssertionError("a page read the live tasks")

    def items(self) -> None:  # type: ignore[override]
        raise AssertionError("a page read the live tasks")


def busy_worker(index: Path) -> SimpleNamespace:
    """A worker mid-round: its tasks must not be read, its snapshot is published."""
    worker = SimpleNamespace(ready=True, tasks=LiveTasks({0: None}),
                             unavailable=lambda: None, catalog=["B"], clock=LoopClock(),
                             pages=published(), **port_reads(index))
    worker.restored_tasks = lambda: list(worker.tasks.values())
    worker.scrape = lambda: worker.pages.scrape
    worker.metrics = WorkerMetrics(worker)
    return worker


@pytest.fixture(scope="module")
def busy_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    yield serve_fake(busy_worker(tmp_path_factory.mktemp("index") / "results.db")).port


def get(port: int, path: str) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=60) as response:
        return bytes(response.read())


def test_queries_answer_during_a_round(busy_port: int) -> None:
    assert json.loads(get(busy_port, "/queries")) == {"queries": [QUERY]}


def test_queries_show_a_registration_in_the_next_snapshot(tmp_path: Path) -> None:
    worker = busy_worker(tmp_path / "results.db")
    port = serve_fake(worker).port
    assert json.loads(get(port, "/queries")) == {"queries": [QUERY]}
    other = {"id": "q2", "text": "SELECT * FROM H"}
    worker.pages = replace(published(), queries={q["id"]: q["text"] for q in (QUERY, other)})
    worker.registered.taken += 1  # as the loop publishes it
    worker.registered.published.value = worker.registered.taken
    assert json.loads(get(port, "/queries")) == {"queries": [QUERY, other]}


def test_progress_answers_during_a_round(busy_port: int) -> None:
    report = json.loads(get(busy_port, "/progress"))
    assert report["caught_up"] is True
    assert report["partitions"]["0"]["caught_up"] is True


def test_metrics_answer_during_a_round_with_the_published_counts(busy_port: int) -> None:
    text = get(busy_port, "/metrics").decode()
    assert "juggler_registered_queries 1.0" in text
    assert 'juggler_held_events{stream="B"} 3.0' in text
    assert 'juggler_comparisons_total{type="A"} 7.0' in text
    assert 'juggler_consumer_lag{partition="0",topic="juggler.stream.B"} 5.0' in text
