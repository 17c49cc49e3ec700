"""Progress lines and pacing for jobs that write in steps.

Why: a Spark batch job says nothing until it ends, and `--rate` / `--speed` need the
writes spread over wall time. Jobs therefore write in steps (chunks of events, or
slices of event time); `Pacer` holds each step back until its scheduled start, and
`Progress` prints one line per step to stderr.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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


class StageProgress:
    """A line per finished Spark stage, and the Spark UI's address, while a job runs.

    Why: a backfill is a few long stages (read and shuffle, the engines, the output);
    without these lines a user sees nothing for minutes. A thread polls Spark's status
    tracker (the driver's view of stages), so nothing in the job has to report."""

    def __init__(self, spark: SparkSession, progress: Progress, every: float = 0.5) -> None:
        self.context = spark.sparkContext
        self.progress, self.every = progress, every
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="stage-progress", daemon=True)
        self.reported: set[int] = set()

    def __enter__(self) -> StageProgress:
        url = self.context.uiWebUrl
        self.progress.note(f"Spark UI at {url}" if url else "Spark UI off (spark.ui.enabled)")
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self._poll()

    def _watch(self) -> None:
        while not self.stop.wait(self.every):
            self._poll()

    def _poll(self) -> None:
        """Report every stage of the application's jobs whose tasks all completed: the
        driver keeps finished stages' info, so a stage that began and ended between two
        polls is reported too (a stage skipped because its output was reused never
        completes a task, and is left out)."""
        tracker = self.context.statusTracker()
        for job in sorted(tracker.getJobIdsForGroup()):
            info = tracker.getJobInfo(job)
            for stage in sorted(info.stageIds) if info is not None else ():
                if stage in self.reported:
                    continue
                stage_info = tracker.getStageInfo(stage)
                if stage_info is None or stage_info.numTasks == 0 \
                        or stage_info.numCompletedTasks < stage_info.numTasks:
                    continue
                self.reported.add(stage)
                call = stage_info.name.split(" at ")[0]  # the action, or a closure's name
                label = "shuffle" if call.startswith("$") else call
                self.progress.note(f"stage {stage} done ({stage_info.numTasks} tasks): {label}")
