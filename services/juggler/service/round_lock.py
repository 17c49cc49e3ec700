"""The lock the worker's loop holds while a round changes its tasks, and the HTTP pages
take to read them.

Why more than a `threading.Lock`: on a backlog a round takes a batch per task, a
hundred milliseconds and more, and the loop takes the lock again the moment it lets go
of it (it holds the GIL; a waiting thread is only woken), so a page read under a plain
lock waited for whole rounds, several in a row (`/metrics` p99 0.4 s on a busy worker).
Here a reader says it is waiting, and the loop, at the points of a round where the
tasks are consistent (`pause`: between two tasks, and inside a task's run after every
`task.HANDOVER_EVENTS` events), hands the lock over and takes it back once the readers
are done: a reader waits for at most one such batch.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

HANDOVER_WAIT = 0.05
"""Seconds the loop waits at most, at a pause, for the readers waiting to take the lock
(a reader that died on the way must not stall the loop)."""


class RoundLock:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._waiting = 0

    # the loop ---------------------------------------------------------------------------

    def __enter__(self) -> RoundLock:
        self._lock.acquire()
        return self

    def __exit__(self, *_: object) -> None:
        self._lock.release()

    def pause(self) -> None:
        """Hand the lock to the readers waiting for it, if any, and take it back once
        they are through; at once otherwise. The caller holds the lock."""
        if not self._waiting:
            return
        with self.released():
            with self._cond:
                self._cond.wait_for(lambda: not self._waiting, HANDOVER_WAIT)

    @contextmanager
    def released(self) -> Iterator[None]:
        """Without the lock for a while (the caller holds it, and has it again after)."""
        self._lock.release()
        try:
            yield
        finally:
            self._lock.acquire()

    # the readers ------------------------------------------------------------------------

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the lock to read, asking the loop to hand it over at its next pause."""
        with self._cond:
            self._waiting += 1
        try:
            self._lock.acquire()
        finally:
            with self._cond:
                self._waiting -= 1
                self._cond.notify_all()
        try:
            yield
        finally:
            self._lock.release()
