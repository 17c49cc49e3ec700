"""The Faust runtime's reorder buffer (docs/faust.md), on `juggler.faust.reorder` alone.

What a user relies on: records of different topics that arrive within `reorder_ms` of
each other come out merged by `ts` (offset order kept within a topic), exactly as
`juggler eval` takes the same events in `ts` order, whatever order they arrived in; a
silent stream holds a record back at most `reorder_ms`; a command applies after
everything that arrived before it and before everything after it.
"""

from __future__ import annotations

import heapq

from hypothesis import given
from hypothesis import strategies as st

from juggler.faust.reorder import ReorderBuffer
from juggler.runtime.arrival import Apply, Barrier, Pending, Take, Wait
from test_arrival_order import take_all

STREAMS = ["B", "H", "T"]


def arrive(order: ReorderBuffer, stream: str, offset: int, ts: int | None, epoch: int,
           now: float = 0.0) -> None:
    order.extend(stream, [Pending(offset, ts, epoch, (stream, offset))], now)


def drain_all(order: ReorderBuffer, now: float) -> list[object]:
    """Everything buffered, the clock moved on to each deadline the buffer names."""
    out: list[object] = []
    while True:
        taken, wait = take_all(order, now)
        out += taken
        if wait.until is None:
            assert order.buffered() == 0
            return out
        now = wait.until


@st.composite
def interleavings(draw: st.DrawFn) -> tuple[dict[str, list[int]], list[str]]:
    """Per stream, ascending `ts`s (a topic partition in `ts` order), and an arrival
    order of the streams' records (any interleaving)."""
    per_stream = {s: sorted(draw(st.lists(st.integers(0, 50), max_size=8))) for s in STREAMS}
    arrivals = [s for s, tss in per_stream.items() for _ in tss]
    return per_stream, draw(st.permutations(arrivals))


@given(interleavings())
def test_records_arriving_together_come_out_merged_by_ts(case) -> None:
    per_stream, arrivals = case
    order = ReorderBuffer(STREAMS, reorder_ms=1000)
    seen = dict.fromkeys(STREAMS, 0)
    taken: list[object] = []
    for epoch, stream in enumerate(arrivals):
        i = seen[stream]
        seen[stream] += 1
        arrive(order, stream, i, per_stream[stream][i], epoch, now=0.0)
        taken += take_all(order, now=0.5)[0]  # all arrive within reorder_ms of each other
    taken += drain_all(order, now=0.5)  # the streams fell silent: waited for, then passed
    merged = heapq.merge(*[[(ts, rank, s, i) for i, ts in enumerate(per_stream[s])]
                           for rank, s in enumerate(STREAMS)])
    assert taken == [(s, i) for _, _, s, i in merged]


def test_a_silent_stream_holds_a_record_back_reorder_ms_then_not_again() -> None:
    """A stream that has not spoken, or fell silent, is waited for `reorder_ms` from
    when a record first waited for it; once passed it is not waited for at each record."""
    order = ReorderBuffer(STREAMS, reorder_ms=300)
    arrive(order, "B", 0, 10, 0, now=1.0)
    taken, wait = take_all(order, now=1.0)
    assert taken == [] and wait.until == 1.3
    assert take_all(order, now=1.3)[0] == [("B", 0)]
    arrive(order, "B", 1, 20, 1, now=100.0)  # H and T never spoke: dormant, not waited for
    assert take_all(order, now=100.0)[0] == [("B", 1)]


def test_a_later_record_with_a_smaller_ts_is_taken_where_it_arrives() -> None:
    """Beyond `reorder_ms` the buffer does not reorder: the late one comes after."""
    order = ReorderBuffer(["B", "H"], reorder_ms=100)
    arrive(order, "B", 0, 50, 0, now=0.0)
    assert drain_all(order, now=0.0) == [("B", 0)]
    arrive(order, "H", 0, 10, 1, now=0.3)
    assert drain_all(order, now=0.3) == [("H", 0)]


def test_a_command_applies_after_what_arrived_before_it() -> None:
    order = ReorderBuffer(["B", "H"], reorder_ms=1000)
    arrive(order, "B", 0, 30, 0)
    arrive(order, "H", 0, 40, 1)
    order.add_barrier(Barrier({"B": 999, "H": 999}, 7, "command"))  # its offsets are ignored
    arrive(order, "B", 1, 10, 2)
    arrive(order, "H", 1, 20, 3)
    assert drain_all(order, now=0.0) == [("B", 0), ("H", 0), "command", ("B", 1), ("H", 1)]
    assert order.barrier_commit_offset() == 8
    assert order.commit_offsets() == {"B": 2, "H": 2}


def test_an_undecodable_record_is_taken_at_once() -> None:
    order = ReorderBuffer(["B", "H"], reorder_ms=1000)
    arrive(order, "B", 0, None, 0)
    assert take_all(order, now=0.0)[0] == [("B", 0)]


def test_a_restored_position_is_where_commit_offsets_start() -> None:
    order = ReorderBuffer(["B", "H"], reorder_ms=1000)
    order.inputs["B"].position = order.inputs["B"].end = 40
    assert order.commit_offsets() == {"B": 40, "H": 0}
    step = order.next(0.0)
    assert isinstance(step, Wait) and not step.refresh
    assert not isinstance(step, (Take, Apply))


def test_a_partition_behind_its_log_end_at_assignment_is_waited_for_however_long() -> None:
    """A restart's backlog: B's records up to its log end at assignment are in the log,
    so H's record waits for them past `reorder_ms`, and they come first by `ts`."""
    order = ReorderBuffer(["B", "H"], reorder_ms=100)
    order.catch_up({"B": 3, "H": 0})  # B: two records and a transaction's marker
    arrive(order, "H", 0, 50, 0, now=0.0)
    taken, wait = take_all(order, now=60.0)
    assert taken == [] and wait.until is None
    arrive(order, "B", 0, 10, 1, now=60.0)
    arrive(order, "B", 1, 20, 2, now=60.0)
    assert drain_all(order, now=60.0) == [("B", 0), ("B", 1), ("H", 0)]
