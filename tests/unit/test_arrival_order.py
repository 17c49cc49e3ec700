"""The order a task takes its records in (semantics 4a), on `arrival.ArrivalOrder` alone.

What a user relies on: a backlog comes out in exactly one order (each segment between
commands merged by `ts`, ties in the streams' order), whatever the fetch timing; a
record already in the log is never overtaken; an idle partition is waited for at most
`max_idle_ms`; the committed offsets say exactly what was processed.

The tests drive the order the way the worker does: fetched records are `add`ed, the
worker sets each input's `position` (next offset to deliver), `end`/`end_at` (log end as
asked, and when) and `cleared_epoch`, then calls `next(now)`; Take/Apply are `pop`ped,
a Wait is answered by refreshing the ends it names and/or waiting until `until`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from juggler.runtime.arrival import Apply, ArrivalOrder, Barrier, Pending, Take, Wait

# helpers -------------------------------------------------------------------------------


def fetch(order: ArrivalOrder, stream: str, records: list[tuple[int, int | None]],
          epoch: int = 0, position: int | None = None) -> None:
    """The consumer delivered `records` [(offset, ts)]; position past the last one."""
    if records:
        order.extend(stream, [Pending(offset, ts, epoch, (stream, offset)) for offset, ts in records])
    inp = order.inputs[stream]
    if position is None:
        position = records[-1][0] + 1 if records else inp.position
    inp.position = position


def caught_up(order: ArrivalOrder, stream: str, end: int, at: float = 0.0,
              epoch: int = 10**9) -> None:
    """`stream` is fetched up to `end`, its log end as asked at `at` (in fetch `epoch`:
    by default after every fetch of the test)."""
    inp = order.inputs[stream]
    inp.position = end
    inp.end, inp.end_at, inp.end_epoch = end, at, epoch


def take_all(order: ArrivalOrder, now: float = 0.0) -> tuple[list[object], Wait]:
    """Take and apply what can be taken now; what was taken, and the Wait that stopped it."""
    out: list[object] = []
    while True:
        step = order.next(now)
        if isinstance(step, Wait):
            return out, step
        order.pop(step)
        out.append(step.record.item if isinstance(step, Take) else step.barrier.item)


# 1. a backlog comes out in exactly one order -------------------------------------------

STREAMS = ["B", "H", "T", "X"]
Item = tuple[str, int]
"""What was taken: (stream, offset) for a record, ("barrier", k) for the k-th barrier."""
Fetch = tuple[str, int, int, int]


@dataclass
class Backlog:
    streams: list[str]
    records: dict[str, list[tuple[int, int | None]]]
    """Stream -> [(offset, ts)] in offset order (offsets may skip transaction markers);
    ts None: a record that does not decode."""
    ends: dict[str, int]
    barriers: list[dict[str, int]]
    """Per barrier (in fanout order): stream -> log-end offset when accepted."""
    chunks: list[Fetch] = field(default_factory=list)
    """Fetches: (stream, first index, past-last index, position after it)."""


@st.composite
def backlogs(draw: st.DrawFn) -> Backlog:
    streams = STREAMS[:draw(st.integers(2, 4))]
    records: dict[str, list[tuple[int, int | None]]] = {}
    ends: dict[str, int] = {}
    chunks: list[Fetch] = []
    for s in streams:
        n = draw(st.integers(0, 10))
        # non-decreasing ts from a small range: many ties, within and across streams
        steps = draw(st.lists(st.sampled_from([0, 0, 1, 2]), min_size=n, max_size=n))
        start = draw(st.integers(0, 3))
        ts = [start + sum(steps[:i + 1]) for i in range(n)]
        # a gap before a record: a transaction marker the consumer skips
        gaps = draw(st.lists(st.sampled_from([0, 0, 0, 1]), min_size=n + 1, max_size=n + 1))
        offsets, at = [], 0
        for i in range(n):
            at += gaps[i]
            offsets.append(at)
            at += 1
        ends[s] = at + gaps[n]
        bad = draw(st.lists(st.sampled_from([False] * 7 + [True]), min_size=n, max_size=n))
        records[s] = [(o, None if x else t) for o, t, x in zip(offsets, ts, bad, strict=True)]
        # the fetches: consecutive chunks of random sizes
        i = 0
        while i < n:
            j = i + draw(st.integers(1, n - i))
            if j == n:
                position = ends[s]
            else:  # past the last record, or already past the markers behind it
                position = draw(st.sampled_from([offsets[j - 1] + 1, offsets[j]]))
            chunks.append((s, i, j, position))
            i = j
        if n == 0 and ends[s] > 0:  # only markers: a fetch that delivers nothing
            chunks.append((s, 0, 0, ends[s]))
    barriers: list[dict[str, int]] = []
    for _ in range(draw(st.integers(0, 3))):
        barriers.append({s: draw(st.integers(0, ends[s])) for s in streams})
    for s in streams:  # offsets non-decreasing across barriers
        for b, offset in zip(barriers, sorted(b[s] for b in barriers), strict=True):
            b[s] = offset
    return Backlog(streams, records, ends, barriers, chunks)


def reference(b: Backlog) -> list[Item]:
    """Per segment between barriers: repeatedly the head with the smallest (ts, rank)
    among the records below the barrier's offsets; then the barrier. Records that do not
    decode are left out: they must not change the order of the others."""
    out: list[Item] = []
    records = {s: [(o, t) for o, t in b.records[s] if t is not None] for s in b.streams}
    heads = {s: 0 for s in b.streams}
    for k in range(len(b.barriers) + 1):
        limit = b.barriers[k] if k < len(b.barriers) else None
        while True:
            ready = [(records[s][heads[s]][1], rank, s) for rank, s in enumerate(b.streams)
                     if heads[s] < len(records[s])
                     and (limit is None or records[s][heads[s]][0] < limit[s])]
            if not ready:
                break
            _, _, s = min(ready)
            out.append((s, records[s][heads[s]][0]))
            heads[s] += 1
        if limit is not None:
            out.append(("barrier", k))
    return out


def segment_ts(b: Backlog, taken: list[Item]) -> list[list[int]]:
    """The ts of the (decodable) records taken, per segment between barriers."""
    out: list[list[int]] = [[]]
    ts = {(s, o): t for s in b.streams for o, t in b.records[s]}
    for item in taken:
        t = ts.get(item)
        if item[0] == "barrier":
            out.append([])
        elif t is not None:
            out[-1].append(t)
    return out


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(b=backlogs(), data=st.data())
def test_backlog_comes_out_in_one_order_whatever_the_fetches(b: Backlog, data: st.DataObject
                                                              ) -> None:
    max_idle = data.draw(st.sampled_from([0, 500]), label="max_idle_ms")
    order = ArrivalOrder(b.streams, max_idle)
    order.barrier_position = 0
    for s in b.streams:  # restored at offset 0; the log ends are known (a backlog)
        inp = order.inputs[s]
        inp.position, inp.end = 0, b.ends[s]
    barrier_items = [Barrier(offsets, k, ("barrier", k)) for k, offsets in enumerate(b.barriers)]

    # a random interleaving of the streams' fetches and the barriers' arrivals
    queues: dict[str, list[Fetch | Barrier]] = {
        s: [c for c in b.chunks if c[0] == s] for s in b.streams}
    queues["barriers"] = list(barrier_items)
    actions: list[Fetch | Barrier] = []
    while any(queues.values()):
        q = data.draw(st.sampled_from(sorted(k for k, v in queues.items() if v)))
        actions.append(queues[q].pop(0))

    now = 0.0
    epoch_of: dict[tuple[str, int], int] = {}
    added = 0
    taken: list[Item] = []

    def safe(epoch: int) -> bool:
        """Every barrier lying at or below a record of this epoch is known."""
        return all(sum(1 for bo in b.barriers if bo[s] <= offset) <= added
                   for (s, offset), e in epoch_of.items() if e <= epoch)

    def drain(final: bool) -> None:
        nonlocal now
        for _ in range(1000):
            step = order.next(now)
            if isinstance(step, Wait):
                if step.refresh:  # ask the log ends: unchanged, it is a backlog
                    for inp in step.refresh:
                        inp.end, inp.end_at = b.ends[inp.stream], now
                        inp.end_epoch = max(epoch_of.values(), default=0)
                    continue
                if step.until is not None and (final or data.draw(st.booleans(), label="wait")):
                    assert step.until > now
                    now = step.until
                    continue
                return
            order.pop(step)
            taken.append(step.record.item if isinstance(step, Take) else step.barrier.item)
        raise AssertionError("the order neither takes nor waits for anything new")

    def check_commits() -> None:
        """The committed offsets say exactly what was processed."""
        done = set(taken)
        for s, offset in order.commit_offsets().items():
            for o, _ in b.records[s]:
                assert ((s, o) in done) == (o < offset), (s, o, offset)
        fanout = order.barrier_commit_offset()
        for k in range(len(b.barriers)):
            assert (("barrier", k) in done) == (fanout is not None and k < fanout)

    for epoch, action in enumerate(actions, start=1):
        if isinstance(action, Barrier):
            order.add_barrier(action)
            order.barrier_position = action.offset + 1
            added += 1
        else:
            s, i, j, position = action
            fetch(order, s, b.records[s][i:j], epoch, position)
            epoch_of.update({(s, o): epoch for o, _ in b.records[s][i:j]})
        # the worker clears what it fetched once it knows every barrier (maybe later)
        if data.draw(st.booleans(), label="clear now"):
            order.cleared_epoch = max([order.cleared_epoch]
                                      + [e for e in range(epoch + 1) if safe(e)])
        now += data.draw(st.sampled_from([0.0, 0.1, 1.0]), label="time passes")
        drain(final=False)
        check_commits()
    order.cleared_epoch = len(actions)
    drain(final=True)
    check_commits()

    bad = {(s, o) for s in b.streams for o, t in b.records[s] if t is None}
    assert [x for x in taken if x not in bad] == reference(b)
    # a record that does not decode is dead-lettered in its partition's offset order,
    # never after a command that its offset is below
    for s in b.streams:
        assert [x for x in taken if x[0] == s] == [(s, o) for o, _ in b.records[s]]
    for k, offsets in enumerate(b.barriers):
        at = taken.index(("barrier", k))
        assert all(taken.index(x) < at for x in bad if x[1] < offsets[x[0]])
    assert order.buffered() == 0 and not order.barriers
    assert order.commit_offsets() == b.ends
    # each segment between barriers in ts order: no record ahead of an earlier one
    for segment in segment_ts(b, taken):
        assert segment == sorted(segment)


def test_barrier_splits_the_merge_at_its_offsets() -> None:
    order = ArrivalOrder(["B", "H"], 0)
    order.cleared_epoch = 0
    fetch(order, "B", [(0, 5), (1, 6), (2, 7)])
    fetch(order, "H", [(0, 1), (1, 2), (2, 3)])
    for s in ("B", "H"):
        caught_up(order, s, 3)
    order.add_barrier(Barrier({"B": 2, "H": 1}, 0, "cmd"))
    taken, wait = take_all(order)
    # before: B 0,1 and H 0 by ts; then the command; after: H 1,2 and B 2 by ts
    assert taken == [("H", 0), ("B", 0), ("B", 1), "cmd", ("H", 1), ("H", 2), ("B", 2)]
    assert wait == Wait()


def test_barrier_above_a_stale_end_asks_the_end_again() -> None:
    """The barrier says records below it are in the log: the end asked before is stale."""
    order = ArrivalOrder(["B", "H"], 0)
    order.cleared_epoch = 0
    fetch(order, "B", [(0, 1)])
    caught_up(order, "B", 1)
    caught_up(order, "H", 0)
    order.add_barrier(Barrier({"B": 1, "H": 2}, 0, "cmd"))
    step = order.next(0.0)
    assert step == Wait(refresh=(order.inputs["H"],))
    order.inputs["H"].end, order.inputs["H"].end_at = 2, 0.0
    assert order.next(0.0) == Wait()  # H's two records are in the log, not fetched yet
    fetch(order, "H", [(0, 0), (1, 9)])
    taken, _ = take_all(order)
    assert taken == [("H", 0), ("B", 0), ("H", 1), "cmd"]


# 2. undecodable records -----------------------------------------------------------------


def test_undecodable_record_is_taken_at_the_head_of_its_partition_at_once() -> None:
    order = ArrivalOrder(["B", "H"], 0)
    order.cleared_epoch = 0
    order.inputs["H"].position, order.inputs["H"].end = 0, 5  # H: nothing fetched yet
    fetch(order, "B", [(0, None), (1, 4), (2, None)])
    caught_up(order, "B", 3)
    taken, wait = take_all(order)
    assert taken == [("B", 0)]  # B 1 must wait for H; B 2 stays behind it (offset order)
    assert wait == Wait()
    fetch(order, "H", [(0, 3), (1, 4), (2, 5), (3, 6), (4, 7)])
    caught_up(order, "H", 5)
    taken, _ = take_all(order)
    # H 0 (ts 3) before B 1 (ts 4); then B 2 is at its head and goes at once
    assert taken[:3] == [("H", 0), ("B", 1), ("B", 2)]


def test_undecodable_record_needs_no_clearance() -> None:
    """It changes no state, so no command can come between: dead-lettered at once."""
    order = ArrivalOrder(["B", "H"], 0)
    fetch(order, "B", [(0, None), (1, 1)], epoch=7)
    caught_up(order, "B", 2)
    caught_up(order, "H", 0)
    taken, wait = take_all(order)
    assert taken == [("B", 0)] and wait == Wait()
    assert order.commit_offsets() == {"B": 1, "H": 0}


# 3. records in the log not fetched yet are never overtaken ------------------------------


@settings(max_examples=50, deadline=None, derandomize=True, database=None)
@given(ts=st.integers(-5, 100), unfetched=st.integers(1, 5))
def test_unfetched_records_of_another_partition_block_the_task(ts: int, unfetched: int
                                                                ) -> None:
    order = ArrivalOrder(["B", "H", "T"], 0)
    order.cleared_epoch = 0
    fetch(order, "B", [(0, ts)])
    caught_up(order, "B", 1)
    fetch(order, "H", [(0, ts)])
    caught_up(order, "H", 1)
    order.inputs["T"].position, order.inputs["T"].end = 0, unfetched
    assert order.next(1e9) == Wait()  # however small the ts, however long it waited
    fetch(order, "T", [(o, 50) for o in range(unfetched)])
    caught_up(order, "T", unfetched)
    taken, _ = take_all(order)
    expected_first = [("B", 0), ("H", 0)] if ts <= 50 else [("T", 0)]
    assert taken[:len(expected_first)] == expected_first
    assert len(taken) == 2 + unfetched


def test_unknown_position_or_end_asks_for_the_end() -> None:
    order = ArrivalOrder(["B", "H"], 500)
    order.cleared_epoch = 0
    fetch(order, "B", [(0, 1)])
    caught_up(order, "B", 1)
    assert order.next(0.0) == Wait(refresh=(order.inputs["H"],))
    caught_up(order, "H", 0)
    assert order.next(0.0) == Wait(until=0.5)


# 4. idle partitions ----------------------------------------------------------------------


def idle_setup(max_idle_ms: int) -> ArrivalOrder:
    """B has a record waiting; H is caught up and empty (its end asked at time 0)."""
    order = ArrivalOrder(["B", "H"], max_idle_ms)
    order.cleared_epoch = 0
    fetch(order, "B", [(0, 1)])
    caught_up(order, "B", 1)
    caught_up(order, "H", 0, at=0.0)
    return order


def test_idle_partition_is_waited_for_then_its_end_asked_again_then_gone_on_without() -> None:
    order = idle_setup(500)
    h = order.inputs["H"]
    assert order.next(10.0) == Wait(until=10.5)
    assert order.next(10.2) == Wait(until=10.5)  # the deadline does not move
    assert order.next(10.5) == Wait(refresh=(h,))  # its end was asked before the deadline
    h.end, h.end_at = 0, 10.5  # still caught up
    taken, wait = take_all(order, 10.5)
    assert taken == [("B", 0)] and wait == Wait()
    # while H stays empty, B's next records go without a second wait
    fetch(order, "B", [(1, 2), (2, 3)])
    caught_up(order, "B", 3)
    taken, _ = take_all(order, 11.0)
    assert taken == [("B", 1), ("B", 2)]
    # H gets a record: its deadline resets, and the next time it is idle it is waited for
    fetch(order, "H", [(0, 4)])
    caught_up(order, "H", 1, at=11.0)
    fetch(order, "B", [(3, 5)])
    caught_up(order, "B", 4)
    taken, wait = take_all(order, 12.0)
    assert taken == [("H", 0)] and wait == Wait(until=12.5)


def test_idle_refresh_showing_new_records_waits_for_them() -> None:
    """A record already in the log is never overtaken, even past the deadline."""
    order = idle_setup(500)
    h = order.inputs["H"]
    assert order.next(0.0) == Wait(until=0.5)
    assert order.next(0.5) == Wait(refresh=(h,))
    h.end, h.end_at = 1, 0.5  # H got a record meanwhile
    assert order.next(0.5) == Wait()
    fetch(order, "H", [(0, 0)])
    taken, wait = take_all(order, 0.6)
    # H 0 first; then H is idle again, and having had a record it is waited for anew
    assert taken == [("H", 0)] and wait == Wait(until=1.1)


def test_idle_end_asked_after_the_deadline_needs_no_second_ask() -> None:
    order = idle_setup(500)
    h = order.inputs["H"]
    assert order.next(0.0) == Wait(until=0.5)
    h.end_at = 0.7  # the worker asked H's end after the deadline anyway
    taken, _ = take_all(order, 0.7)
    assert taken == [("B", 0)]


def test_zero_max_idle_only_asks_the_end_again() -> None:
    order = idle_setup(0)
    h = order.inputs["H"]
    assert order.next(5.0) == Wait(refresh=(h,))
    h.end, h.end_at = 0, 5.0
    taken, wait = take_all(order, 5.0)
    assert taken == [("B", 0)] and wait == Wait()


def test_several_idle_partitions_are_all_asked_again() -> None:
    order = ArrivalOrder(["B", "H", "T"], 500)
    order.cleared_epoch = 0
    fetch(order, "B", [(0, 1)])
    caught_up(order, "B", 1)
    caught_up(order, "H", 0)
    order.inputs["T"].position, order.inputs["T"].end = 0, 1
    assert order.next(1.0) == Wait()  # T has a record in the log: B waits for it,
    caught_up(order, "T", 1)  # and H's idle clock runs (T's was a transaction marker)
    assert order.next(1.2) == Wait(until=1.5)
    h, t = order.inputs["H"], order.inputs["T"]
    assert order.next(1.5) == Wait(refresh=(h,), until=1.7)
    h.end_at = 1.5
    assert order.next(1.7) == Wait(refresh=(t,))
    t.end_at = 1.7
    assert take_all(order, 1.7)[0] == [("B", 0)]


def test_the_idle_wait_overlaps_the_fetch_of_a_backlog() -> None:
    """A backlog comes one partition after another: B is fetched while H's records are
    still in the log and K never had any. K's max_idle_ms runs from B's first record,
    not from when H is fetched too, so a backlog fetched in longer than max_idle_ms
    does not wait for K once more after its fetch; and H's record, in the log before
    B's was taken, still comes first."""
    order = ArrivalOrder(["B", "H", "K"], 500)
    order.cleared_epoch = 0
    fetch(order, "B", [(0, 2)])
    caught_up(order, "B", 1)
    caught_up(order, "K", 0, at=0.0)
    order.inputs["H"].position, order.inputs["H"].end = 0, 1
    assert order.next(0.1) == Wait()  # H not fetched yet
    fetch(order, "H", [(0, 1)])
    caught_up(order, "H", 1)
    k = order.inputs["K"]
    assert order.next(0.7) == Wait(refresh=(k,))  # past K's deadline: only its end asked
    k.end_at = 0.7
    taken, wait = take_all(order, 0.7)
    assert taken == [("H", 0)]  # (H, now empty, had a record: B waits for it anew)
    assert wait == Wait(until=1.2)


def test_a_long_idle_partition_is_asked_again_before_a_later_record_overtakes_it() -> None:
    """Regression: K was idle once and went without; ten seconds later K's next record
    is in the log but not delivered yet, while B's later record is. Its log end as asked
    back then must not let B overtake it."""
    order = ArrivalOrder(["B", "K"], 500)
    order.cleared_epoch = 10
    caught_up(order, "K", 0, at=0.0, epoch=0)
    order.inputs["B"].position = 0
    fetch(order, "B", [(0, 1000)], epoch=0)
    assert order.next(0.0) == Wait(until=0.5)
    k = order.inputs["K"]
    assert order.next(0.6) == Wait(refresh=(k,))
    k.end_at = 0.6
    assert take_all(order, 0.6)[0] == [("B", 0)]
    fetch(order, "B", [(1, 3000)], epoch=5)  # K 0 (ts 2000) is in the log, not delivered
    assert order.next(10.0) == Wait(refresh=(k,))
    k.end, k.end_at, k.end_epoch = 1, 10.0, 5
    assert order.next(10.0) == Wait()  # K has a record to fetch: wait for it
    fetch(order, "K", [(0, 2000)], epoch=6)
    taken, wait = take_all(order, 10.0)
    assert taken == [("K", 0)] and wait == Wait(until=10.5)  # K had a record: waited for anew


# 5. committed offsets ---------------------------------------------------------------------


def test_commit_offsets_are_the_next_records_to_take() -> None:
    order = ArrivalOrder(["B", "H", "T"], 0)
    order.cleared_epoch = 0
    assert order.commit_offsets() == {} and order.barrier_commit_offset() is None
    fetch(order, "B", [(3, 1), (4, 9)], position=6)  # a marker at 5
    caught_up(order, "B", 6)
    h = order.inputs["H"]
    h.position, h.end, h.end_at, h.end_epoch = 7, 9, 0.0, 0  # H: 7, 8 not fetched
    order.barrier_position = 2
    assert order.commit_offsets() == {"B": 3, "H": 7}  # T's position is not known yet
    assert order.barrier_commit_offset() == 2
    order.add_barrier(Barrier({"B": 4, "H": 8, "T": 0}, 2, "cmd"))
    order.barrier_position = 3
    assert order.barrier_commit_offset() == 2  # the command is not applied yet
    caught_up(order, "T", 0)
    fetch(order, "H", [(7, 2), (8, 3)])
    taken, _ = take_all(order)
    assert taken == [("B", 3), ("H", 7), "cmd", ("H", 8), ("B", 4)]
    assert order.commit_offsets() == {"B": 6, "H": 9, "T": 0}
    assert order.barrier_commit_offset() == 3


def test_commit_offsets_stop_at_a_record_not_taken() -> None:
    order = ArrivalOrder(["B", "H"], 0)
    order.cleared_epoch = 0
    fetch(order, "B", [(0, 1), (1, 5)])
    caught_up(order, "B", 2)
    fetch(order, "H", [(0, 3)])
    order.inputs["H"].end = 2  # H 1 is in the log, not fetched yet
    taken, _ = take_all(order)
    assert taken == [("B", 0), ("H", 0)]  # B 1 (ts 5) may not overtake H 1
    assert order.commit_offsets() == {"B": 1, "H": 1}


# 6. clearance -----------------------------------------------------------------------------


def test_uncleared_records_wait_for_their_epoch() -> None:
    order = ArrivalOrder(["B", "H"], 0)
    order.cleared_epoch = 2
    fetch(order, "B", [(0, 1), (1, 2)], epoch=3)
    caught_up(order, "B", 2)
    caught_up(order, "H", 0)
    assert order.next(0.0) == Wait()
    order.cleared_epoch = 3
    taken, _ = take_all(order)
    assert taken == [("B", 0), ("B", 1)]


def test_uncleared_record_with_a_smaller_ts_holds_back_the_others() -> None:
    """It might lie behind a command not known yet: nothing may overtake it."""
    order = ArrivalOrder(["B", "H"], 0)
    order.cleared_epoch = 0
    fetch(order, "B", [(0, 5)], epoch=0)
    caught_up(order, "B", 1)
    fetch(order, "H", [(0, 1)], epoch=1)
    caught_up(order, "H", 1)
    assert order.next(0.0) == Wait()
    order.add_barrier(Barrier({"B": 1, "H": 0}, 0, "cmd"))  # it did lie behind one
    order.cleared_epoch = 1
    taken, _ = take_all(order)
    assert taken == [("B", 0), "cmd", ("H", 0)]


def test_record_of_a_cleared_epoch_in_a_mixed_buffer() -> None:
    """Clearance is per record: the cleared head goes, the uncleared one behind waits."""
    order = ArrivalOrder(["B", "H"], 0)
    order.cleared_epoch = 1
    fetch(order, "B", [(0, 1)], epoch=1)
    fetch(order, "B", [(1, 2)], epoch=2)
    caught_up(order, "B", 2)
    caught_up(order, "H", 0, at=10.0)
    taken, wait = take_all(order, 10.0)
    assert taken == [("B", 0)] and wait == Wait()
    order.cleared_epoch = 2
    taken, _ = take_all(order, 10.0)
    assert taken == [("B", 1)]


def test_a_new_burst_waits_again_for_recently_active_partitions_only() -> None:
    """One producer writing two topics after a pause: B's records may be fetched a
    moment before K's. K was active a moment ago, so the burst waits for it again;
    T has been silent for longer than DORMANT_AFTER, so it is not waited for again."""
    from juggler.runtime.arrival import DORMANT_AFTER

    order = ArrivalOrder(["B", "K", "T"], 500)
    order.cleared_epoch = 10
    caught_up(order, "T", 0)
    order.inputs["B"].position = order.inputs["K"].position = 0
    order.extend("K", [Pending(0, 900, 0, ("K", 0))], now=0.0)
    order.extend("B", [Pending(0, 1000, 0, ("B", 0))], now=0.0)
    fetch(order, "K", [], position=1)
    fetch(order, "B", [], position=1)
    for s in "BK":
        caught_up(order, s, 1, at=0.0)
        order.inputs[s].position = 1
    assert take_all(order, 0.0)[1] == Wait(until=0.5)  # T: a first wait
    caught_up(order, "T", 0, at=0.6)  # asked again after the deadline: still nothing
    assert take_all(order, 0.6) == ([("K", 0)], Wait(until=1.1))  # K waited for once
    caught_up(order, "K", 1, at=1.2)
    assert take_all(order, 1.2) == ([("B", 0)], Wait())  # dry
    now = DORMANT_AFTER / 2  # K spoke a moment ago; T long ago (never)
    order.extend("B", [Pending(1, 2000, 5, ("B", 1))], now=now)
    fetch(order, "B", [], position=2)
    assert order.next(now) == Wait(until=now + 0.5)
    assert order.inputs["K"].idle_deadline == now + 0.5  # waited for anew
    assert order.inputs["T"].idle_deadline == 0.5  # dormant: its old deadline stands


# 7. runs: take_run takes what next/pop would, one after another ---------------------------

EPOCHS = [3, 4, 5, 5, 5, 6]
"""Fetch epochs around the cleared one (5)."""
TIMES = [float("-inf"), 0.0, 1.0, 2.0, 3.0]


@st.composite
def orders(draw: st.DrawFn) -> ArrivalOrder:
    """Any state the worker may leave an order in: records of random ts (some that do
    not decode) and epochs (some not cleared); inputs with records, idle (deadline
    passed or not, end asked before or after it, in an epoch before or after the
    records', an estimated delay or none), blocked (records not fetched, position or
    end unknown) or anything; barriers below, among or above the buffered records."""
    streams = STREAMS[:draw(st.integers(2, 4))]
    order = ArrivalOrder(streams, draw(st.sampled_from([0, 0, 500, 2000])))
    order.cleared_epoch = 5
    # with delays estimated: a head of ts t (0-4 ms) is live while now <= t/1000 +
    # fresh_for (never, around `now`, or always)
    order.fresh_for = draw(st.sampled_from([None, -1.0, 1.9985, 2.0, 10.0]))
    ts = st.sampled_from([None, 0, 1, 2, 3, 4] if draw(st.booleans()) else [0, 1, 2, 3, 4])
    pasts = {}
    for s in streams:
        inp = order.inputs[s]
        kind = draw(st.sampled_from(["records"] * 3 + ["idle"] * 3 + ["blocked", "any"]))
        start = draw(st.integers(0, 2))
        n = (draw(st.sampled_from([1, 2, 3, 5, 8])) if kind == "records"
             else 0 if kind in ("idle", "blocked") else draw(st.integers(0, 5)))
        epochs = draw(st.lists(st.sampled_from(EPOCHS), min_size=n, max_size=n))
        if draw(st.booleans()):
            epochs.sort()  # as fetched
        for offset, epoch in zip(range(start, start + n), epochs, strict=True):
            inp.buffer.append(Pending(offset, draw(ts), epoch, (s, offset)))
        past = pasts[s] = start + n
        if kind == "blocked":
            inp.position, inp.end = draw(st.sampled_from(
                [(None, None), (None, past), (past, None), (past, past + 1)]))
        elif kind == "any":
            inp.position = draw(st.sampled_from([None, past, past + 1]))
            base = past if inp.position is None else inp.position
            inp.end = draw(st.sampled_from([None, base - 1, base, base + 1]))
        else:  # caught up
            inp.position = past
            inp.end = draw(st.sampled_from([past, past, past - 1]))
        if kind == "idle" and draw(st.booleans()):  # its end asked a moment ago
            inp.end_at, inp.end_epoch = 2.0, draw(st.sampled_from([4, 5, 6]))
        else:
            inp.end_at = draw(st.sampled_from(TIMES))
            inp.end_epoch = draw(st.sampled_from([-1, *EPOCHS]))
        inp.idle_deadline = draw(st.sampled_from([None, *TIMES[1:]]))
        inp.last_record_at = draw(st.sampled_from([-100.0, 0.0]))
        # an estimated delay: a live head of ts t passes it, idle, at t/1000 +
        # pass_after, before, around or after `now` and the ends asked
        inp.pass_after = draw(st.sampled_from([None, None, -1.0, 1.998, 1.9985, 2.0, 2.5]))
        # ... while silent for at most quiet_for (its last record at -100 or 0)
        inp.quiet_for = draw(st.sampled_from([0.0, 2.0, 3.0, 1000.0]))
    offsets: dict[str, int] = {}
    for k in range(draw(st.sampled_from([0, 0, 1, 1, 2, 4]))):
        if not k or draw(st.booleans()):  # else the one before's (one round's commands)
            offsets = {s: draw(st.integers(0, pasts[s] + 1)) for s in streams
                       if draw(st.sampled_from([True, True, True, False]))}
        order.add_barrier(Barrier(dict(offsets), k, ("barrier", k)))
    return order


def drain_round(order: ArrivalOrder, now: float, budget: int, runs: bool
          ) -> tuple[list[object], tuple[list[str], float | None] | None]:
    """What `PartitionTask.run` takes with `budget`: one record or barrier at a time with
    next/pop, or in runs with take_run and apply_run; and the Wait that stopped it (its
    inputs' streams)."""
    out: list[object] = []
    while len(out) < budget:
        step = order.next(now)
        if isinstance(step, Wait):
            return out, ([i.stream for i in step.refresh], step.until)
        if isinstance(step, Take) and runs:
            out.extend(p.item for p in order.take_run(step, budget - len(out)))
            continue
        if isinstance(step, Apply) and runs:
            out.extend(b.item for b in order.apply_run(step, budget - len(out)))
            continue
        order.pop(step)
        out.append(step.record.item if isinstance(step, Take) else step.barrier.item)
    return out, None


def state(order: ArrivalOrder) -> list[object]:
    return [[(i.stream, [p.offset for p in i.buffer], i.idle_deadline)
             for i in order.inputs.values()], [b.item for b in order.barriers]]


@settings(max_examples=1500, deadline=None, derandomize=True, database=None)
@given(order=orders(), data=st.data())
def test_a_run_takes_what_next_and_pop_take_one_by_one(order: ArrivalOrder,
                                                       data: st.DataObject) -> None:
    """Whatever the state, draining with next + take_run and apply_run takes the same
    records and barriers in the same order as next/pop one at a time with the same
    `now` and budget, stops at the same Wait and leaves the same state (idle deadlines
    included); over a few rounds, the ends a Wait names asked again in between."""
    import copy

    one, runs = order, copy.deepcopy(order)
    now = 2.0  # past some deadlines, not all
    for _ in range(data.draw(st.integers(1, 4), label="rounds")):
        budget = data.draw(st.sampled_from([1, 2, 3, 5, 50]), label="budget")
        expected = drain_round(one, now, budget, runs=False)
        assert drain_round(runs, now, budget, runs=True) == expected
        assert state(runs) == state(one)
        if expected[1] is not None:  # the worker asks the ends again
            epoch = data.draw(st.sampled_from(EPOCHS), label="end epoch")
            for o in (one, runs):
                for s in expected[1][0]:
                    o.inputs[s].end_at, o.inputs[s].end_epoch = now, epoch
        now += data.draw(st.sampled_from([0.0, 0.5, 1.0, 2.0]), label="time passes")


def test_a_run_after_an_undecodable_record_stops_at_a_decoded_one() -> None:
    """An undecodable head is taken at once, without looking at the other inputs: the
    decoded record after it is left to `next`, which must first start H's idle wait."""
    order = ArrivalOrder(["B", "H"], 500)
    order.cleared_epoch = 0
    fetch(order, "B", [(0, None), (1, None), (2, 5)])
    caught_up(order, "B", 3)
    caught_up(order, "H", 0)
    step = order.next(0.0)
    assert isinstance(step, Take)
    assert [p.offset for p in order.take_run(step, 10)] == [0, 1]
    assert order.next(0.0) == Wait(until=0.5)


def test_a_run_stops_at_a_record_fetched_after_an_idle_partitions_end_was_asked() -> None:
    """H is idle past its deadline, its end asked in epoch 1: B's record of epoch 1 may
    go on without it, B's next record (epoch 2) not before H's end is asked again."""
    order = ArrivalOrder(["B", "H"], 0)
    order.cleared_epoch = 2
    fetch(order, "B", [(0, 1)], epoch=1)
    fetch(order, "B", [(1, 2)], epoch=2)
    caught_up(order, "B", 2)
    caught_up(order, "H", 0, at=0.0, epoch=1)
    step = order.next(0.0)
    assert isinstance(step, Take)
    assert [p.offset for p in order.take_run(step, 10)] == [0]
    assert order.next(0.0) == Wait(refresh=(order.inputs["H"],))
