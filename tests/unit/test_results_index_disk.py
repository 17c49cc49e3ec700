"""What the results index leaves on disk, without Kafka: its directory goes when the
store stops, when the interpreter exits without a stop, and when the worker's process
dies without any clean-up; and its rows go where the topics' retention deleted them.

Every worker start used to leave a `juggler-results-*` directory behind (7.2 GB of them
in one /tmp), and the table kept every result forever while Kafka kept seven days."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from test_results_pages import OWN, SHARED, pages, row

from juggler.serving.results_api import encode_cursor
from juggler.runtime.results_store import ResultsStore
from juggler.runtime.results_table import (COUNT_BELOW, DELETE_BELOW, NEXT_KEY, RUNS_FROM,
                                           STRADDLING, Row, run_results, trim)

UNREACHABLE = {"bootstrap.servers": "127.0.0.1:9", "log_level": 0}
SERVICES = Path(__file__).resolve().parents[2] / "services"


def wait_until(condition: Callable[[], bool], timeout: float = 60.0) -> bool:
    """Poll `condition` until true or `timeout` (a spawned interpreter importing on a
    busy machine takes seconds)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_stop_removes_the_directory_though_another_thread_reads_it() -> None:
    """The HTTP thread's connection is open when the worker stops: on Linux it does not
    hold the removal up, and a page read on it in the meantime still answers."""
    store = ResultsStore({}, SHARED)
    store.append([row("q1", SHARED, 0, 5)], {(SHARED, 0): 6})
    directory = os.path.dirname(store.path)
    with ThreadPoolExecutor(1) as http_thread:  # one thread: its connection stays open
        assert http_thread.submit(store.page, "q1", SHARED, {}, 10).result()[1] == {0: 6}
        store.stop()
        assert not os.path.exists(directory)
        assert len(http_thread.submit(store.page, "q1", SHARED, {}, 10).result()[0]) == 1
    store.stop()  # a second stop is harmless
    assert not os.path.exists(directory)


def test_stop_removes_the_directory_after_the_indexing_process_ends() -> None:
    store = ResultsStore(UNREACHABLE, SHARED)
    store.start()
    store.stop()
    assert not store.process.is_alive()
    assert not os.path.exists(os.path.dirname(store.path))


def run_python(code: str) -> list[str]:
    """Run `code` in an interpreter of its own; its output lines."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(SERVICES), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_store_never_stopped_is_removed_at_the_interpreters_exit() -> None:
    """Started or not: a worker that failed before its shutdown path (its HTTP port
    taken) exits normally without calling `stop`."""
    paths = run_python(f"""
        from juggler.runtime.results_store import ResultsStore
        idle = ResultsStore({{}}, "t")
        running = ResultsStore({UNREACHABLE!r}, "t")
        running.start()
        print(idle.path, running.path)
        """)
    assert len(paths) == 2
    for path in paths:
        assert not os.path.exists(os.path.dirname(path))


def test_the_indexing_process_removes_the_directory_when_the_worker_dies() -> None:
    """A SIGKILL, or `os._exit` on a failure, runs no clean-up in the worker's process:
    the indexing process, which outlives it a moment, removes the directory."""
    path, = run_python("""
        import os, sys
        from juggler.runtime.results_store import ResultsStore
        store = ResultsStore({}, "t")
        store.start()
        print(store.path)
        sys.stdout.flush()
        os._exit(0)
        """)
    assert wait_until(lambda: not os.path.exists(os.path.dirname(path)))


def test_trim_deletes_exactly_the_rows_below_each_partitions_log_start() -> None:
    """For every query: below the start of its partition gone, the rest kept, partitions
    without a start untouched; a page from an old cursor continues at the first kept."""
    store = ResultsStore({}, SHARED)
    store.follow(OWN)
    rows = [row(q, SHARED, p, o) for q in ("q1", "q2", "q3") for p in range(3)
            for o in range(p, 60, 4)]
    rows += [row("q1", OWN, p, o) for p in range(2) for o in range(30)]
    # appended in pieces, as the indexer does a fetch at a time: a key's results lie in
    # several runs, and a start falls inside one, between two, or past them all
    for low in range(0, 60, 20):
        store.append([r for r in rows if low <= r[3] < low + 20], {})
    store.append([], {(SHARED, p): 60 for p in range(3)} | {(OWN, p): 30 for p in range(2)})
    starts = {(SHARED, 0): 17, (SHARED, 1): 60, (OWN, 1): 12}  # (SHARED, 2) not asked
    kept = [r for r in rows if r[3] >= starts.get((r[1], r[2]), 0)]

    indexer = sqlite3.connect(store.path)  # the indexing process's own connection
    assert trim(indexer, starts) == len(rows) - len(kept)
    assert sorted(stored(indexer)) == sorted(kept)
    assert trim(indexer, starts) == 0  # a second pass finds nothing more

    old = {0: 1, 1: 2, 2: 0}  # below every start that moved
    for query, topic in (("q1", SHARED), ("q2", SHARED), ("q1", OWN)):
        for cursor in ({}, old):
            seen, _ = pages(store, query, topic, 5, encode_cursor(cursor) if cursor else None)
            assert [(r["position"]["partition"], r["position"]["offset"]) for r in seen] == \
                [(r[2], r[3]) for r in kept if r[:2] == (query, topic)
                 and r[3] >= cursor.get(r[2], 0)]
    store.stop()


def test_trim_and_pages_search_the_index_and_never_scan_the_table() -> None:
    """Inserts stay appends (the table's layout is what makes them cheap), so a pass
    and a page must find their runs through `results_at`: a scan would read every
    result kept."""
    store = ResultsStore({}, SHARED)
    conn = sqlite3.connect(store.path)
    below = ("q", SHARED, 0, 5)
    for statement, parameters in ((NEXT_KEY, ("", "", -1)), (COUNT_BELOW, below),
                                  (DELETE_BELOW, below), (STRADDLING, below),
                                  (RUNS_FROM, ("q", SHARED, 0, 5, 9))):
        plan = [step[3] for step in conn.execute("EXPLAIN QUERY PLAN " + statement, parameters)
                if not step[3].startswith("SCALAR SUBQUERY")]
        assert plan and all(s.startswith("SEARCH results USING") and "INDEX results_at" in s
                            for s in plan), plan
    store.stop()


def stored(conn: sqlite3.Connection) -> list[Row]:
    """Every result the table holds, a row each, as `append` took them."""
    return [(query, topic, partition, offset, text)
            for query, topic, partition, blob, records in conn.execute(
                "SELECT query, topic, partition, offsets, records FROM results")
            for offset, text in zip(*run_results(blob, records), strict=True)]


def test_an_old_cursor_on_a_fully_trimmed_partition_moves_to_the_indexed_end() -> None:
    store = ResultsStore({}, SHARED)
    store.append([row("q1", SHARED, 0, o) for o in range(10)], {(SHARED, 0): 10})
    trim(sqlite3.connect(store.path), {(SHARED, 0): 10})
    assert not store.known("q1", SHARED)
    results, positions = store.page("q1", SHARED, {0: 3}, 5)
    assert (results, positions) == ([], {0: 10})
    store.stop()
