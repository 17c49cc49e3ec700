"""Where the worker's main loop spends its time, by phase.

The loop runs one thing at a time, so its wall time splits into phases without
overlap: the loop says which phase it enters, and the time since the last switch goes
to the phase it leaves. Exported as `juggler_loop_seconds_total{phase}`: the rate of
each phase is the share of the loop it takes, on a dashboard as in a benchmark, with no
profiler attached. The loop thread's CPU time is split the same way
(`juggler_loop_cpu_seconds_total{phase}`): wall time beyond it is time the loop
waited (for the broker, for a core, for the GIL). A switch reads both clocks, cheap
but not free, so it is made per fetched batch and per evaluated batch, not per record
(docs/worker.md, "The loop").
"""

from __future__ import annotations

from time import perf_counter, thread_time

PHASES = {
    "poll": "waiting for and taking records from the consumer",
    "decode": "routing fetched records to their tasks and decoding them",
    "order": "taking records in arrival order (semantics 4a)",
    "evaluate": "the operator (one native call per batch of events)",
    "publish": "results, dead letters and held-event references into the round's "
               "transaction",
    "state": "the round's state records and input offsets",
    "commit": "handing rounds to the commit thread, and waiting for it",
    "other": "commands, clearance questions, positions, restores and flow control",
}


class LoopClock:
    """Wall and CPU seconds per phase of the loop; written by the loop's thread only,
    read at scrape time (a float in a dict is replaced whole, so a reader never sees
    half of it). Made in the loop's thread: the CPU clock is that thread's."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.cpu = dict.fromkeys(PHASES, 0.0)
        self.phase = "other"
        self.since = perf_counter()
        self.cpu_since = thread_time()

    def enter(self, phase: str) -> None:
        """The loop goes on with `phase`: the time since the last switch was the last
        phase's. Entering the phase the loop is in changes nothing, and reads no clock."""
        if phase == self.phase:
            return
        now, cpu = perf_counter(), thread_time()
        self.seconds[self.phase] += now - self.since
        self.cpu[self.phase] += cpu - self.cpu_since
        self.phase, self.since, self.cpu_since = phase, now, cpu
