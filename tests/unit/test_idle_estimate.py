"""How long a task waits for an idle stream partition whose delay it has measured
(`arrival.IdleEstimate`), on `arrival.ArrivalOrder` alone, with a fake clock.

What a user notices: a record waiting for a live partition (its records fetched a few
ms after their `ts`) waits only until that partition could no longer deliver an
earlier event, not `max_idle_ms`; a partition replaying old events, one that never
spoke, or one whose delay is not known yet is waited for up to `max_idle_ms`, and so
is any partition by a record that is itself old (a replay, an upload); a record
already in the log is still never overtaken; an allowed lateness shortens the wait by
what it accepts anyway; and live producers whose delays stay within what was measured
lose no event to lateness, whatever the fetch timing.

The clock: `now` is the wall clock in seconds (the estimate's `wall_offset` is 0), and
event times are in ms: `at(ms)` is the moment `ms` after the waiting record's `ts`, T0.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st
from pytest import approx

from juggler.runtime.arrival import (DELAY_BUCKET, DELAY_BUCKETS, DELAY_SAMPLES,
                                     ArrivalOrder, IdleEstimate, Pending, Take, Wait)
from test_arrival_order import take_all as take

MAX_IDLE_MS = 500
MARGIN_MS = 20
T0 = 1_000_000
"""The ts (ms) of the record that waits in most tests."""


def at(ms: float) -> float:
    """The wall clock (s) `ms` after T0."""
    return (T0 + ms) / 1000


def until(wait: object) -> float:
    """When a Wait that asks for no log end says to look again."""
    assert isinstance(wait, Wait) and wait.refresh == () and wait.until is not None, wait
    return approx(wait.until, abs=1e-6)


def order(streams: str = "BH", lateness: int = 0, estimate: bool = True) -> ArrivalOrder:
    o = ArrivalOrder(list(streams), MAX_IDLE_MS,
                     IdleEstimate(MARGIN_MS, lateness) if estimate else None)
    o.cleared_epoch = 10**9  # no commands: every record is cleared
    for s in streams:
        inp = o.inputs[s]
        inp.position = inp.end = 0
        inp.end_at, inp.end_epoch = 0.0, 0
    return o


def fetch(o: ArrivalOrder, stream: str, ts: list[int], now: float, epoch: int = 0,
          appended: list[int] | None = None) -> None:
    """The consumer delivers records of these `ts` at `now` (with the broker's append
    times, if given); the partition is then caught up, its end asked at that moment."""
    inp = o.inputs[stream]
    first = inp.position or 0
    o.extend(stream, [Pending(first + i, t, epoch, (stream, t)) for i, t in enumerate(ts)],
             now, appended)
    inp.position = inp.end = first + len(ts)
    inp.end_at, inp.end_epoch = now, epoch


def live(o: ArrivalOrder, stream: str, delay_ms: float, until_ms: int = T0 - 20,
         every_ms: int = 125, appended: tuple[float, float] | None = None) -> None:
    """`stream`'s producer has been live: a record every `every_ms` up to `until_ms`
    (by default a moment before T0), each fetched `delay_ms` after its ts, and taken.
    `appended`: each was stamped by the broker (its clock off the worker's by the
    second) that long after its ts."""
    for ts in range(until_ms - 10 * every_ms, until_ms + 1, every_ms):
        stamps = None if appended is None else [int(ts + appended[0] + appended[1])]
        fetch(o, stream, [ts], (ts + delay_ms) / 1000, appended=stamps)
        o.inputs[stream].buffer.clear()


def ask_end(o: ArrivalOrder, stream: str, now: float, end: int | None = None,
            epoch: int = 10**6) -> None:
    inp = o.inputs[stream]
    inp.end = inp.position if end is None else end
    inp.end_at, inp.end_epoch = now, epoch


# a live partition is waited for briefly ------------------------------------------------


def test_a_live_partition_is_waited_for_its_delay_and_margin_not_max_idle() -> None:
    """B's records have come 8 ms after their ts. H's record (ts T0) waits for B only
    until T0 + 8 + 20 ms (B's delay and the margin): any record B gets after that was
    made after T0. Then B's end is asked once more, and H's record goes."""
    o = order()
    live(o, "B", delay_ms=8)
    assert o.delays_ms()["B"] == 8.0
    fetch(o, "H", [T0], now=at(5))
    b = o.inputs["B"]
    assert until(o.next(at(5))) == at(28)
    assert o.next(at(28)) == Wait(refresh=(b,))  # its end was asked before
    ask_end(o, "B", at(28))
    assert take(o, at(28)) == ([("H", T0)], Wait())


def test_the_wait_follows_the_largest_delay_of_the_last_minute() -> None:
    """One record of B came 60 ms after its ts among 8 ms ones: the wait covers 60."""
    o = order()
    live(o, "B", delay_ms=8, until_ms=T0 - 30_000)
    fetch(o, "B", [T0 - 20_000], now=at(-20_000 + 60))
    o.inputs["B"].buffer.clear()
    live(o, "B", delay_ms=8)
    fetch(o, "H", [T0], now=at(5))
    assert until(o.next(at(5))) == at(80)


def test_a_delay_is_forgotten_a_minute_later() -> None:
    """A backlog read after a restart came minutes after its ts: B is waited for up to
    max_idle_ms while that is within the last minute; after it, B's live delay alone
    decides again."""
    o = order()
    fetch(o, "B", list(range(T0 - 300_000, T0 - 299_000, 100)), now=at(-90_000))
    o.inputs["B"].buffer.clear()
    live(o, "B", delay_ms=8, until_ms=T0 - 60_000)
    assert o.delays_ms()["B"] > 200_000
    live(o, "B", delay_ms=8)
    assert o.delays_ms()["B"] == 8.0


def test_a_producer_whose_clock_is_behind_is_waited_for_as_long_as_it_lags() -> None:
    """B's producer clock is 50 ms behind the worker's: its records look 58 ms late,
    and an H record waits 58 + 20 ms after its ts for them. One 30 ms ahead looks
    -22 ms late: H's record, made now, waits for nothing but B's end."""
    behind, ahead = order(), order()
    live(behind, "B", delay_ms=58)
    live(ahead, "B", delay_ms=-22)
    for o in (behind, ahead):
        fetch(o, "H", [T0], now=at(5))
    assert until(behind.next(at(5))) == at(78)
    assert ahead.next(at(5)) == Wait(refresh=(ahead.inputs["B"],))  # -22 + 20: past
    ask_end(ahead, "B", at(5))
    assert take(ahead, at(5))[0] == [("H", T0)]


def test_with_append_times_the_worker_s_own_lag_is_not_waited_for() -> None:
    """B's topic stamps records with the broker's append time, 8 ms after their ts;
    the worker fetched them 10 ms after their ts, once 110 ms (it was busy): without
    append times B's delay is 110 ms, with them 8 ms plus the worker's smallest lag
    behind the broker (2 ms), whatever the broker's clock says."""
    for skew in (None, 0, 1_000, -1_000):  # None: CreateTime, no append times
        o = order()
        appended = None if skew is None else (8, skew)
        live(o, "B", delay_ms=10, until_ms=T0 - 500, appended=appended)
        fetch(o, "B", [T0 - 400], now=at(-400 + 110),
              appended=None if skew is None else [T0 - 400 + 8 + skew])
        o.inputs["B"].buffer.clear()
        live(o, "B", delay_ms=10, appended=appended)
        fetch(o, "H", [T0], now=at(5))
        delay = 110 if skew is None else 11  # (8 + 2, and 1 for whole-ms stamps)
        assert o.delays_ms()["B"] == delay
        assert until(o.next(at(5))) == at(delay + MARGIN_MS)


def test_a_fetch_without_append_times_in_the_window_measures_by_fetch() -> None:
    """The topic's timestamps changed kind within the minute: the fetch times decide."""
    o = order()
    live(o, "B", delay_ms=30, until_ms=T0 - 500)
    live(o, "B", delay_ms=10, appended=(8, 0))
    assert o.delays_ms()["B"] == 30.0


def test_allowed_lateness_shortens_the_wait_by_what_it_accepts() -> None:
    """With 10 ms allowed, B's event up to 10 ms behind H's is not late: the wait ends
    10 ms sooner; with 50 ms, not at all: B's end, asked when its last record came
    (T0 - 12), says that nothing it gets later can be 50 ms behind T0."""
    some, more = order(lateness=10), order(lateness=50)
    for o in (some, more):
        live(o, "B", delay_ms=8)
        fetch(o, "H", [T0], now=at(5))
    assert until(some.next(at(5))) == at(18)
    assert take(more, at(5))[0] == [("H", T0)]


# up to the cap ------------------------------------------------------------------------


def test_a_replaying_partition_is_waited_for_up_to_max_idle() -> None:
    """B replays events of an hour ago: an earlier event may come any moment, so H's
    record waits the full max_idle_ms for it."""
    o = order()
    live(o, "B", delay_ms=3_600_000)
    fetch(o, "H", [T0], now=at(5))
    assert until(o.next(at(5))) == at(505)


def test_a_record_older_than_max_idle_waits_for_a_live_partition_up_to_max_idle() -> None:
    """H uploads what a device recorded a minute ago: B is live (8 ms), but B's own
    device may upload next, so H's old record waits for B as long as before."""
    o = order()
    live(o, "B", delay_ms=8)
    fetch(o, "H", [T0 - 60_000], now=at(5))
    assert until(o.next(at(5))) == at(505)


def test_a_partition_silent_for_longer_than_ever_is_waited_for_up_to_max_idle() -> None:
    """B has had a record every 125 ms, 8 ms after its ts; now it has been silent for
    300 ms: its producer may be stalled, its next records as late as the stall, so H's
    record waits for B up to max_idle_ms. At a silence within its gaps, the estimate."""
    stalled, quiet = order(), order()
    live(stalled, "B", delay_ms=8, until_ms=T0 - 300)
    live(quiet, "B", delay_ms=8, until_ms=T0 - 120)
    for o in (stalled, quiet):
        fetch(o, "H", [T0], now=at(5))
    assert until(stalled.next(at(5))) == at(505)
    assert until(quiet.next(at(5))) == at(28)


def test_a_partition_that_never_spoke_is_waited_for_up_to_max_idle() -> None:
    o = order()
    fetch(o, "H", [T0], now=at(5))
    assert o.delays_ms()["B"] is None
    assert until(o.next(at(5))) == at(505)


def test_a_few_fetches_are_not_an_estimate() -> None:
    o = order()
    for i in range(DELAY_SAMPLES - 1):
        fetch(o, "B", [T0 - 1_000 + i], now=at(-1_000 + i + 8))
        o.inputs["B"].buffer.clear()
    fetch(o, "H", [T0], now=at(5))
    assert o.delays_ms()["B"] is None
    assert until(o.next(at(5))) == at(505)


def test_without_the_estimate_the_wait_is_max_idle() -> None:
    """`--no-idle-estimate`: Kafka Streams' max.task.idle.ms, whatever the delays."""
    o = order(estimate=False)
    live(o, "B", delay_ms=8)
    fetch(o, "H", [T0], now=at(5))
    assert o.delays_ms()["B"] is None
    assert until(o.next(at(5))) == at(505)


def test_a_partition_silent_past_max_idle_is_not_waited_for_again_while_records_flow() -> None:
    """The cap stays what it was: once B was waited for max_idle_ms, records go past it
    (its end asked after they were fetched) until B speaks or the task runs dry."""
    o = order()
    live(o, "B", delay_ms=8)
    fetch(o, "H", [T0], now=at(0))
    fetch(o, "H", [T0 + 10_000], now=at(10_000))  # not taken yet: the task is not dry
    o.inputs["B"].idle_deadline = at(-500)
    ask_end(o, "B", at(10_000))
    assert take(o, at(10_000))[0] == [("H", T0), ("H", T0 + 10_000)]


# what the log holds is never overtaken ---------------------------------------------------


def test_a_record_in_the_log_at_the_deadline_is_waited_for_and_comes_first() -> None:
    """At the estimate's deadline B's end shows a record not fetched yet (ts T0 - 3,
    made before H's): H's record waits for it, and it is taken first. It came 33 ms
    after its ts: B's delay is now 33 ms, and H's record waits until T0 + 53."""
    o = order()
    live(o, "B", delay_ms=8)
    fetch(o, "H", [T0], now=at(5))
    assert o.next(at(28)) == Wait(refresh=(o.inputs["B"],))
    ask_end(o, "B", at(28), end=o.inputs["B"].position + 1)
    assert o.next(at(28)) == Wait()  # B is behind its log end: no deadline lets H go
    fetch(o, "B", [T0 - 3], now=at(30))
    taken, wait = take(o, at(30))
    assert taken == [("B", T0 - 3)] and until(wait) == at(53)
    ask_end(o, "B", at(53))
    assert take(o, at(53))[0] == [("H", T0)]


def test_an_end_asked_before_the_deadline_does_not_let_a_record_go() -> None:
    o = order()
    live(o, "B", delay_ms=8)
    fetch(o, "H", [T0], now=at(5))
    ask_end(o, "B", at(20))  # asked before T0 + 28: B may still get an event of T0 - 1
    assert o.next(at(30)) == Wait(refresh=(o.inputs["B"],))


def test_each_waiting_record_has_its_own_deadline() -> None:
    """H's records of T0 and T0 + 50 wait for B until their own ts + 28 ms: at T0 + 60
    the first may go (B's end asked then), the second not before T0 + 78."""
    second_waits_until(T0 + 50, at(78))


def test_an_old_record_behind_a_live_one_waits_up_to_max_idle() -> None:
    """H's producer sends a record made now, then one a minute old (out of order in its
    own topic): the first goes at B's estimate, the second waits for B up to
    max_idle_ms."""
    second_waits_until(T0 - 60_000, at(560))


def second_waits_until(ts: int, deadline: float) -> None:
    """H's records of T0 and `ts`, fetched at T0 + 60 with B's end asked then: the
    first is taken, the second waits until `deadline`, in one run or one at a time."""
    for runs in (False, True):
        o = order()
        live(o, "B", delay_ms=8)
        fetch(o, "H", [T0, ts], now=at(60))
        ask_end(o, "B", at(60))
        step = o.next(at(60))
        assert isinstance(step, Take)
        if runs:
            assert [p.ts for p in o.take_run(step, 10)] == [T0]
        else:
            o.pop(step)
        assert until(o.next(at(60))) == deadline


# live producers whose delays stay within the estimate lose nothing ---------------------


@dataclass
class Feed:
    streams: str
    records: dict[str, list[tuple[int, float]]]
    """Stream -> [(ts ms, appended at s)] in offset order."""
    steps: list[tuple[float, dict[str, int]]]
    """The worker's fetches, over and over: (time passing, stream -> how many of what
    is in the log and not fetched yet it delivers, at most)."""
    lateness: int
    broker_clock: int | None
    """With append times on the records: the broker's clock minus the worker's (ms)."""


@st.composite
def feeds(draw: st.DrawFn) -> Feed:
    """A producer per stream, in ts order, each lagging its own way (a clock offset and
    a linger: delays anywhere up to its largest, which its first records show), and a
    worker fetching each partition at its own times; the topics stamped with the
    broker's append time (its clock off the worker's) or not."""
    streams = "BHT"[:draw(st.integers(2, 3))]
    records: dict[str, list[tuple[int, float]]] = {}
    for s in streams:
        worst = draw(st.integers(-30, 200))  # ms: a clock ahead, or linger and a hiccup
        ts = T0 - 2_000 + draw(st.integers(0, 100))
        out: list[tuple[int, float]] = []
        for i in range(draw(st.integers(DELAY_SAMPLES, 25))):
            ts += draw(st.integers(1, 150))
            delay = worst if i < DELAY_SAMPLES else draw(st.integers(min(worst, -30), worst))
            appended = max((ts + delay) / 1000, out[-1][1] if out else 0.0)
            out.append((ts, appended))
        records[s] = out
    steps = [(draw(st.sampled_from([0.001, 0.001, 0.003, 0.01, 0.04])),
              {s: draw(st.sampled_from([0, 1, 50, 50, 50])) for s in streams})
             for _ in range(draw(st.integers(5, 30)))]
    return Feed(streams, records, steps, draw(st.sampled_from([0, 0, 20])),
                draw(st.sampled_from([None, None, 0, 400, -400])))


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(feed=feeds())
def test_live_producers_within_their_measured_delay_lose_nothing_to_lateness(feed: Feed
                                                                           ) -> None:
    """The worker's loop over a fake broker: at each step what each partition's log
    holds grows, the worker fetches some of it, and takes what the order allows,
    asking the log ends the order names. Whatever the fetch timing, no event is taken
    more than the allowed lateness behind one taken before it (one key: the strictest
    case), and once the producers stop every event is taken."""
    o = ArrivalOrder(list(feed.streams), 2_000, IdleEstimate(MARGIN_MS, feed.lateness))
    fetched = dict.fromkeys(feed.streams, 0)
    now = at(-2_100)
    epoch, taken, maxts = 0, 0, None
    last = max(r[-1][1] for r in feed.records.values())
    everything = dict.fromkeys(feed.streams, 10**6)

    def in_log(s: str) -> int:
        return sum(1 for _, appended in feed.records[s] if appended <= now)

    for dt, counts in itertools.cycle(feed.steps):
        if now > last + 8.0:  # past every wait, one cap per stream at most
            break
        if now > last:  # the producers stopped: the worker fetches what is left
            counts = everything
        now += dt
        epoch += 1
        for s in feed.streams:
            n = min(in_log(s), fetched[s] + counts[s])
            if n > fetched[s]:
                o.extend(s, [Pending(i, feed.records[s][i][0], epoch, (s, i))
                             for i in range(fetched[s], n)], now,
                         None if feed.broker_clock is None else
                         [round(feed.records[s][i][1] * 1000) + feed.broker_clock
                          for i in range(fetched[s], n)])
            fetched[s] = o.inputs[s].position = n
        o.cleared_epoch = epoch
        asked = 0
        while True:
            step = o.next(now)
            if isinstance(step, Wait):
                if not step.refresh or asked > 2:
                    break
                asked += 1
                for inp in step.refresh:  # asked now: what the log holds now
                    inp.end, inp.end_at, inp.end_epoch = in_log(inp.stream), now, epoch
                continue
            o.pop(step)
            ts = step.record.ts
            assert maxts is None or ts >= maxts - feed.lateness, (step.record.item, maxts)
            maxts = ts if maxts is None else max(maxts, ts)
            taken += 1
    assert taken == sum(len(r) for r in feed.records.values())


def test_a_producer_lagging_beyond_its_measured_delay_can_be_late() -> None:
    """What the estimate does not cover: B's records came 8 ms after their ts, then
    one comes 90 ms after (a producer stall longer than any in the last minute, and
    than the margin): H's record, made after it, went first, so it is taken behind
    H's and the engine finds it late."""
    o = order()
    live(o, "B", delay_ms=8)
    live(o, "H", delay_ms=5)
    fetch(o, "H", [T0], now=at(5))
    ask_end(o, "B", at(30))  # B's event of T0 - 10 is not in the log yet
    assert take(o, at(30))[0] == [("H", T0)]
    fetch(o, "B", [T0 - 10], now=at(80))
    ask_end(o, "H", at(80))
    assert take(o, at(80))[0] == [("B", T0 - 10)]


def test_buckets_span_a_minute() -> None:
    assert DELAY_BUCKET * DELAY_BUCKETS == 60.0


def test_a_task_measures_by_append_time_when_its_records_carry_it() -> None:
    """Through the worker's task: records fetched 60 ms after their ts (once 98), which
    the broker says it appended 8 ms after, give B a delay of 8 ms plus the smallest
    fetch lag behind the broker (52) and 1, while every record carries its append
    time; a record without one puts the window back on fetch times."""
    from test_task_results import FakeWorker

    from juggler.runtime.task import PartitionTask, Record

    worker = FakeWorker()
    task = PartitionTask(worker, 0)
    assert task.order.estimate is not None  # the worker's default
    now = time.monotonic()
    wall_ms = int((task.order.estimate.wall_offset + now) * 1000)

    def record(offset: int, ts: int, appended: int | None) -> Record:
        value = worker.codec.encode("B", {"ts": ts, "pressure": 1.0, "temp": 37.0,
                                          "alert": False})
        return Record("juggler.stream.B", 0, offset, b"k", value,
                      appended or 0, None, appended is not None)

    for offset, lag in enumerate((52, 52, 52, 90)):
        ts = wall_ms - 8 - lag
        task.add_many("B", [record(offset, ts, ts + 8)], 0, now)
    assert task.order.delays_ms()["B"] == approx(8 + 52 + 1, abs=1)
    task.add_many("B", [record(9, wall_ms - 60, None)], 0, now)
    assert task.order.delays_ms()["B"] == approx(98, abs=1)
