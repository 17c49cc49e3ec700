"""The worker's HTTP port served by a process of its own (`serving.page_process`): a
probe is answered from what the worker last pushed, even while the worker cannot
answer at all, until it has been silent too long; a scrape and a results page still
reach the worker's state; the process is started again when it dies, and goes when the
worker's process goes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fake_port import port_reads, serve_fake
from juggler.runtime.pages import EMPTY
from juggler.serving.page_feed import Server
from juggler.serving.page_process import METRICS_FRESH
from juggler.serving.results_api import encode_cursor

TOKEN = "s3cret"


def fake_worker(index: str) -> SimpleNamespace:
    """A restored worker with one query whose results index (at `index`) holds one
    result."""
    scrapes = iter(range(1, 1_000_000))
    return SimpleNamespace(
        ready=True, tasks={0: None}, unavailable=lambda: None,
        pages=replace(EMPTY, queries={"q1": "SELECT * FROM B"}),
        metrics=SimpleNamespace(cached=lambda: None,
                                expose=lambda: f"juggler_scrapes {next(scrapes)}\n".encode()),
        **port_reads(Path(index)))


def publish(worker: SimpleNamespace, queries: dict[str, str]) -> None:
    """What the worker's loop does when a round changed the registered queries."""
    worker.pages = replace(worker.pages, queries=queries)
    worker.registered.taken += 1
    worker.registered.published.value = worker.registered.taken


def get(port: int, path: str, token: str | None = TOKEN) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def until(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.05)
    return value


def healthy(port: int) -> bool:
    try:
        return get(port, "/health")[0] == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimpleNamespace, Server]]:
    worker = fake_worker(str(tmp_path_factory.mktemp("index") / "results.db"))
    yield worker, serve_fake(worker, TOKEN)


@pytest.fixture
def served(server: tuple[SimpleNamespace, Server]) -> tuple[SimpleNamespace, int]:
    return server[0], server[1].port


@contextmanager
def stuck(worker: SimpleNamespace) -> Iterator[None]:
    """The worker's side of its port stuck (its feed blocked reading the worker's
    health), from when it is until the block ends."""
    inside, release = threading.Event(), threading.Event()

    def blocked() -> None:
        inside.set()
        release.wait()

    worker.unavailable = blocked
    try:
        until(inside.is_set, "the worker's side is stuck reading its health")
        yield
    finally:
        worker.unavailable = lambda: None
        release.set()


def test_a_probe_is_answered_while_the_worker_cannot_answer(
        served: tuple[SimpleNamespace, int]) -> None:
    worker, port = served
    queries = get(port, "/queries")[1]
    with stuck(worker):
        status, body = get(port, "/health")
        assert status == 200 and json.loads(body)["status"] == "ok"
        assert get(port, "/queries")[1] == queries


def test_health_says_503_once_the_worker_is_silent(tmp_path: Path) -> None:
    worker = fake_worker(str(tmp_path / "results.db"))
    port = serve_fake(worker, silent_after=1.0).port
    with stuck(worker):
        status, body = until(lambda: (answer := get(port, "/health"))[0] == 503 and answer,
                             "/health says 503")
        assert "has not answered" in json.loads(body)["reason"]
    until(lambda: healthy(port), "/health back to 200")


def test_health_follows_the_worker(served: tuple[SimpleNamespace, int]) -> None:
    worker, port = served
    worker.unavailable = lambda: "cannot commit since now"
    try:
        status, body = until(lambda: (answer := get(port, "/health"))[0] == 503 and answer,
                             "/health says 503")
        assert json.loads(body)["reason"] == "cannot commit since now"
    finally:
        worker.unavailable = lambda: None
    until(lambda: healthy(port), "/health back to 200")


def test_queries_published_are_listed_at_once(served: tuple[SimpleNamespace, int]) -> None:
    worker, port = served
    publish(worker, {"q1": "SELECT * FROM B", "q2": "SELECT * FROM H"})
    assert [q["id"] for q in json.loads(get(port, "/queries")[1])["queries"]] == ["q1", "q2"]
    publish(worker, {"q2": "SELECT * FROM H"})
    assert [q["id"] for q in json.loads(get(port, "/queries")[1])["queries"]] == ["q2"]


def test_a_scrape_shows_metrics_rendered_at_most_half_a_second_before(
        served: tuple[SimpleNamespace, int]) -> None:
    _, port = served

    def scraped() -> int:
        return int(get(port, "/metrics", None)[1].split()[1])

    first = scraped()
    assert scraped() >= first
    time.sleep(METRICS_FRESH + 0.1)
    assert scraped() > first


def test_a_results_page_reaches_the_index_behind_the_token(
        served: tuple[SimpleNamespace, int]) -> None:
    _, port = served
    status, body = get(port, "/queries/q1/results?limit=5")
    assert status == 200
    assert json.loads(body) == {"results": [{"query": "q1", "n": 1}],
                                "next": encode_cursor({0: 1}), "behind": False}
    assert get(port, "/queries/q1/results", token=None)[0] == 401
    status, body = get(port, "/queries/q1/results?after=%25%25")
    assert status == 400 and "not a cursor" in json.loads(body)["error"]


def test_an_empty_page_is_404_only_for_a_query_the_worker_does_not_have(
        served: tuple[SimpleNamespace, int]) -> None:
    worker, port = served
    status, body = get(port, "/queries/q1/results?after=" + encode_cursor({0: 1}))
    assert (status, json.loads(body)["results"]) == (200, [])
    assert get(port, "/queries/q9/results")[0] == 404
    worker.restored_tasks = lambda: [SimpleNamespace(texts={"q1": "...", "q9": "..."})]
    status, body = get(port, "/queries/q9/results")
    assert (status, json.loads(body)["results"]) == (200, [])


def test_a_killed_port_process_is_started_again(
        server: tuple[SimpleNamespace, Server]) -> None:
    feed, port = server[1].feed, server[1].port
    killed = feed.process
    os.kill(killed.pid, signal.SIGKILL)
    until(lambda: feed.process is not killed and feed.process.is_alive(), "a new HTTP process")
    until(lambda: healthy(port), "/health answers again")


WORKER = textwrap.dedent("""
    import sys, time
    sys.path[:0] = {path!r}
    from test_page_process import fake_worker
    from juggler.serving.page_feed import serve_apart
    server = serve_apart(fake_worker({index!r}), "127.0.0.1", 0)
    while server.feed.process is None or server.feed.process.pid is None:
        time.sleep(0.05)
    print(server.port, server.feed.process.pid, flush=True)
    time.sleep(600)
""")


def test_the_port_process_goes_with_a_killed_worker(tmp_path: Path) -> None:
    here = os.path.dirname(__file__)
    script = WORKER.format(path=[here], index=str(tmp_path / "results.db"))
    worker = subprocess.Popen([sys.executable, "-c", script],
                              stdout=subprocess.PIPE, text=True)
    try:
        port, pid = map(int, worker.stdout.readline().split())  # type: ignore[union-attr]
        until(lambda: healthy(port), "/health answers")
    finally:
        worker.kill()
        worker.wait()

    def gone() -> bool:  # exited: no such process, or one nobody reaped yet
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except FileNotFoundError:
            return True
    until(gone, "the HTTP process exited")
