"""The worker's loop time by phase (`juggler_loop_seconds_total`): every moment goes to
exactly one phase, the one the loop was in."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from juggler.service.loop_clock import PHASES, LoopClock


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(sorted(PHASES)), max_size=20))
def test_phases_share_out_the_elapsed_time_without_gaps_or_overlaps(phases: list[str]) -> None:
    clock = LoopClock()
    start = clock.since
    for phase in phases:
        clock.enter(phase)
    clock.enter("other")
    assert abs(sum(clock.seconds.values()) - (clock.since - start)) < 1e-9
    assert all(seconds >= 0 for seconds in clock.seconds.values())


def test_the_time_spent_in_a_phase_is_counted_to_that_phase() -> None:
    clock = LoopClock()
    clock.enter("evaluate")
    time.sleep(0.02)
    clock.enter("publish")
    clock.enter("other")
    assert clock.seconds["evaluate"] >= 0.02
    assert clock.seconds["publish"] < clock.seconds["evaluate"]
