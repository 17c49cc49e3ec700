"""The native operator evaluates a batch without holding the interpreter's lock, so the
worker's other threads (its HTTP pages: a Kubernetes probe, a Prometheus scrape) answer
while the loop evaluates, instead of waiting for the whole batch."""

from __future__ import annotations

import sys
import threading
import time

from juggler.engine.events import EngineConfig, Event
from juggler.engine.native_engine import NativeEngine
from juggler.language import ColumnType, compile_query

CATALOG = {"B": {"x": ColumnType.NUMBER}, "H": {"y": ColumnType.NUMBER}}
BATCHES = 200
"""Batches evaluated at most before concluding that no other thread ran during one."""


def batch_events(first: int) -> list[Event]:
    """2,000 events of 50 keys, B and H in turn, at times and offsets from `first` on."""
    return [Event("B", f"k{i % 50}", first + i, {"x": i}, ("t", 0, first + i)) if i % 2 else
            Event("H", f"k{i % 50}", first + i, {"y": i}, ("t", 0, first + i)) for i in range(2_000)]


def test_another_thread_runs_while_a_batch_is_evaluated() -> None:
    engine = NativeEngine(EngineConfig(allowed_lateness=0))
    engine.register(compile_query("q", "SELECT * FROM B, H MAXWINDOW 10 s WHERE B.x > H.y", CATALOG))
    inside = threading.Event()
    seen = threading.Event()
    stop = threading.Event()

    def watch() -> None:
        # sleeping lets go of the lock; waking, this thread gets it back only when the
        # main thread lets go of it too (the switch interval below never forces it)
        while not stop.is_set():
            time.sleep(0.0001)
            if inside.is_set():
                seen.set()

    # a first call sets up the binding's types, which may let go of the lock by itself
    engine.process_batch_encoded([Event("B", "k", 0, {"x": 0}, ("t", 0, 0))], 1 << 62)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for batch in range(BATCHES):
            events = batch_events(1 + batch * 10_000)
            inside.set()
            engine.process_batch_encoded(events, 1 << 62)
            inside.clear()
            if seen.is_set():
                break
    finally:
        stop.set()
        sys.setswitchinterval(interval)
        watcher.join()
    assert seen.is_set()
