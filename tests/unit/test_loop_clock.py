"""The worker's loop time by phase (`juggler_loop_seconds_total`): every moment goes to
exactly one phase, the one the loop was in."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from juggler.runtime.loop_clock import PHASES, LoopClock


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(sorted(PHASES)), max_size=20))
def test_phases_share_out_the_elapsed_time_without_gaps_or_overlaps(phases: list[str]) -> None:
    clock = LoopClock()
    start, cpu_start = clock.since, clock.cpu_since
    for phase in phases:
        clock.enter(phase)
    clock.enter("other")
    assert abs(sum(clock.seconds.values()) - (clock.since - start)) < 1e-9
    assert all(seconds >= 0 for seconds in clock.seconds.values())
    assert abs(sum(clock.cpu.values()) - (clock.cpu_since - cpu_start)) < 1e-9
    assert all(seconds >= 0 for seconds in clock.cpu.values())


def test_the_time_spent_in_a_phase_is_counted_to_that_phase() -> None:
    clock = LoopClock()
    clock.enter("evaluate")
    time.sleep(0.02)
    clock.enter("publish")
    clock.enter("other")
    assert clock.seconds["evaluate"] >= 0.02  # not handed on to the phase after it


def test_a_wait_takes_wall_time_and_work_takes_cpu_time() -> None:
    """What tells a worker short of a core (or of the broker's answers) from one
    short of speed: sleeping counts in the wall time only, computing in both."""
    clock = LoopClock()
    clock.enter("poll")
    time.sleep(0.05)
    clock.enter("evaluate")
    deadline = time.thread_time() + 0.05
    while time.thread_time() < deadline:
        pass
    clock.enter("other")
    assert clock.cpu["poll"] < clock.seconds["poll"] / 2
    assert clock.cpu["evaluate"] >= 0.05
