"""Progress lines and pacing for jobs that write in steps.

Why: a Spark batch job says nothing until it ends, and `--rate` / `--speed` need the
writes spread over wall time. Jobs therefore write in steps (chunks of events, or
slices of event time); `Pacer` holds each step back until its scheduled start, and
`Progress` prints one line per step to stderr.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, job: str, total: int | None, unit: str = "events",
                 out: TextIO | None = None) -> None:
        self.job, self.total, self.unit = job, total, unit
        self.out = out or sys.stderr
        self.done = 0
        self.started = time.monotonic()

    @property
    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    def advance(self, count: int) -> None:
        self.done += count
        share = f"/{self.total:,} ({100 * self.done / self.total:.0f}%)" if self.total else ""
        print(f"{self.job}: {self.done:,}{share} {self.unit}, {self.rate:,.0f} {self.unit}/s",
              file=self.out, flush=True)

    def note(self, text: str) -> None:
        print(f"{self.job}: {text}", file=self.out, flush=True)

    def finish(self, note: str = "") -> None:
        elapsed = time.monotonic() - self.started
        print(f"{self.job}: done, {self.done:,} {self.unit} in {elapsed:.1f}s "
              f"({self.rate:,.0f} {self.unit}/s){note}", file=self.out, flush=True)


class Pacer:
    """Step i may start `i * seconds_per_step` after the first; None: no waiting."""

    def __init__(self, seconds_per_step: float | None) -> None:
        self.seconds_per_step = seconds_per_step
        self.started = time.monotonic()

    def wait(self, step: float) -> None:
        if self.seconds_per_step is None:
            return
        delay = self.started + step * self.seconds_per_step - time.monotonic()
        if delay > 0:
            time.sleep(delay)
