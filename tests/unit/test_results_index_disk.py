"""What the results index leaves on disk, without Kafka: its directory goes when the
store stops, when the interpreter exits without a stop, and when the worker's process
dies without any clean-up.

Every worker start used to leave a `juggler-results-*` directory behind (7.2 GB of them
in one /tmp)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from test_results_pages import SHARED, row

from juggler.service.results_store import ResultsStore

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
        from juggler.service.results_store import ResultsStore
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
        from juggler.service.results_store import ResultsStore
        store = ResultsStore({}, "t")
        store.start()
        print(store.path)
        sys.stdout.flush()
        os._exit(0)
        """)
    assert wait_until(lambda: not os.path.exists(os.path.dirname(path)))
