"""The loop's lock hands itself to a waiting page between two tasks' batches, not only
at the end of a round."""

from __future__ import annotations

import threading
import time

from juggler.service.round_lock import RoundLock


def test_a_reader_gets_the_lock_at_the_loops_next_pause() -> None:
    lock = RoundLock()
    order: list[str] = []
    holding, read = threading.Event(), threading.Event()

    def round_() -> None:
        with lock:
            order.append("task 1")
            holding.set()
            deadline = time.monotonic() + 30
            while not read.is_set() and time.monotonic() < deadline:
                lock.pause()  # at once while nobody waits
            order.append("task 2")

    def page() -> None:
        holding.wait()
        with lock.reading():
            order.append("read")
        read.set()

    threads = [threading.Thread(target=round_), threading.Thread(target=page)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert order == ["task 1", "read", "task 2"]


def test_released_lets_a_reader_in_while_the_loop_waits() -> None:
    lock = RoundLock()
    inside = threading.Event()
    with lock:
        with lock.released():
            with lock.reading():  # would never return if the loop still held it
                inside.set()
    assert inside.is_set()
