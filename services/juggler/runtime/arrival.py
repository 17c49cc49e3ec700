"""The order in which a task takes its records (semantics section 4a). Pure: no Kafka.

A task owns partition p of every stream topic. It takes, among the next unprocessed
record of each stream partition, the one with the smallest event `ts` (ties: the
streams' fixed order); within one stream partition offset order is kept. It never takes
a record while another stream partition has records in the log that it has not fetched
(position below the log-end offset): so a backlog of any size comes out in exactly one
order, whatever the fetch timing. A stream partition that is caught up and has nothing
buffered is idle; the task waits for it at most `max_idle_ms`, measured from when it was
first seen idle while another partition had a record waiting (Kafka Streams'
`max.task.idle.ms`), and once past that goes on without it until it gets a record again
or the task runs dry: a new burst after a quiet moment waits again for every partition
that had a record within `DORMANT_AFTER` seconds (a stream that has been silent longer,
or never spoke, is not waited for again and again).
Before taking a record past an idle partition, that partition's log end must have been
asked after the deadline and after the record was fetched: a record already in the log
when the taken one arrived is never overtaken, however long the partition was idle.

With an `IdleEstimate` the deadline comes sooner for a partition whose producer is
live: the wait is for records that could still come with an earlier `ts` than the one
waiting, and a partition whose records have been fetched at most D after their `ts`
(D: the largest such delay in the last minute, plus a margin; with append times on
the records, the producer's side alone, `Bucket`) cannot deliver one once
its log end, asked at wall-clock time e, shows nothing new and e - D >= that `ts`
(minus `allowed_lateness`, which accepts what comes that much behind): whatever it gets
later is appended after e, so its `ts` is above e - D. The deadline for a head of `ts`
t is therefore the earlier of the `max_idle_ms` one and t + D - L on the wall clock,
and the log end must be asked after it, as after the `max_idle_ms` one. Only the
producer's side has to stay within D: a record the worker is slow to fetch is in the log, and the log-end rule
waits for it. A partition without an estimate (never spoke, or silent for a minute) and
one replaying old events (D above the cap) are waited for `max_idle_ms`; so is every
partition by a record that is itself more than `max_idle_ms` old (a replay, an upload,
a backlog the worker catches up on): the estimates describe live producers, and a
replay on one stream may come with one on another, whose producer lagged until now.
And so is a partition silent for longer than its longest gap between two fetches in
the last minute (plus the margin): its producer may have stalled, and what it made
meanwhile comes as late as the stall lasts, beyond any delay measured.

Commands are barriers: a barrier carries, per stream, the log-end offset the stream's
partition had when the command was accepted. Records below it are taken before the
command, the others after (each side by `ts`).

Records are only taken once *cleared* (`cleared_epoch`): the worker clears the records
fetched before a moment at which it knew every command accepted so far (see
`clearance.Clearance.clear`), so no barrier can later turn out to lie below a record
already taken. A record that did not decode has no `ts` and changes no state: it is
taken (dead-lettered) as soon as it is at the head of its partition.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DORMANT_AFTER = 60.0
"""Seconds after its last record when an idle partition stops being waited for anew at
each burst: one producer writing several topics sends each topic's records in its own
batches, so a burst after a pause may reach one topic a moment before another."""
DELAY_BUCKET = 10.0
DELAY_BUCKETS = 6
"""A partition's delay is the largest in the last `DELAY_BUCKETS` buckets of
`DELAY_BUCKET` seconds (a minute): long enough to include a producer's periodic hiccups
(a GC pause, a batch sent late), short enough that the delays of a backlog read after a
restart stop holding its partners to `max_idle_ms` within a minute of catching up."""
DELAY_SAMPLES = 3
"""Fetches within the window before a partition's delay is trusted: one record's delay
says little about the next."""


@dataclass(frozen=True, slots=True)
class IdleEstimate:
    """How an idle partition's deadline follows from its measured delay (see the
    module's docstring)."""

    margin_ms: int
    """Added to the largest delay seen: what a producer may lag beyond it."""
    lateness_ms: int = 0
    """The engine's `allowed_lateness`: an event that far behind is accepted anyway."""
    wall_offset: float = 0.0
    """Wall-clock (epoch) seconds minus the `now` clock the order is driven with, fixed
    when the order is made so that the wall clock stepping (NTP) moves no deadline."""


@dataclass(slots=True)
class Bucket:
    """What a partition's fetches of one `DELAY_BUCKET` say of its delay. A record's
    delay is at most the wall clock at its fetch minus its `ts`; when the topic stamps
    records with the broker's append time (`LogAppendTime`), it is known exactly in the
    broker's clock (append minus `ts`, the producer's side alone), and the worker's clock
    is at most the smallest fetch-minus-append behind the broker's: so the largest
    append-minus-`ts` plus the smallest fetch-minus-append bounds it without the
    worker's own fetch lag, whatever the two clocks say."""

    index: float
    fetched: float
    """The largest wall clock at a fetch minus the fetched records' smallest `ts` (s)."""
    fetches: int
    gap: float
    """The longest time between two fetches of the partition (s)."""
    appended: float = float("-inf")
    """The largest append time minus `ts` (s), if every fetch carried append times."""
    lag: float = float("inf")
    """The smallest wall clock at a fetch minus an append time (s)."""
    append_times: bool = True


@dataclass(slots=True)
class Pending:
    """A fetched record waiting to be taken."""

    offset: int
    ts: int | None
    """The event time; None for a record that did not decode."""
    epoch: int
    """The worker's fetch epoch when it arrived (see `ArrivalOrder.cleared_epoch`)."""
    item: Any


@dataclass(slots=True)
class Barrier:
    offsets: Mapping[str, int]
    """Stream -> log-end offset of this task's partition when the command was accepted."""
    offset: int
    """Where the barrier itself stands in its own (fanout) partition."""
    item: Any


@dataclass
class Input:
    """One stream partition of a task."""

    stream: str
    rank: int
    buffer: deque[Pending] = field(default_factory=deque)
    position: int | None = None
    """The next offset the consumer will deliver (past transaction markers)."""
    end: int | None = None
    """The log-end offset (last stable offset) as last asked, and when (`end_at`)."""
    end_at: float = float("-inf")
    end_epoch: int = -1
    """The worker's fetch epoch when the log end was asked (records of a later epoch
    arrived after it)."""
    idle_deadline: float | None = None
    last_record_at: float = float("-inf")
    delays: deque[Bucket] = field(default_factory=deque)
    """The window's buckets with a fetch, oldest first."""
    delay: float | None = None
    """The delay (seconds) the window says a record of this partition may trail its
    `ts` by when appended (`Bucket`), or None while fewer than `DELAY_SAMPLES` fetches
    are in it."""
    pass_after: float | None = None
    """With `delay`: a head of `ts` t may go past this partition, idle, at
    `t / 1000 + pass_after` on the `now` clock (the estimate's deadline) ..."""
    quiet_for: float = 0.0
    """... while it has been silent for at most this long: its longest gap between
    two fetches in the window, plus the margin. Silent for longer, its producer may
    be stalled, its next records late by the stall: it is waited for `max_idle_ms`."""

    def next_offset(self) -> int | None:
        """The offset of the next record to take: everything below it is processed."""
        return self.buffer[0].offset if self.buffer else self.position


@dataclass(frozen=True, slots=True)
class Take:
    input: Input
    record: Pending


@dataclass(frozen=True, slots=True)
class Apply:
    barrier: Barrier


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing can be taken now. `refresh`: inputs whose log end must be asked again
    before the task can decide (idle ones past their deadline, or not known yet);
    `until`: the earliest idle deadline, when asking again may let the task go on."""

    refresh: tuple[Input, ...] = ()
    until: float | None = None


Step = Take | Apply | Wait


class ArrivalOrder:
    def __init__(self, streams: Sequence[str], max_idle_ms: int,
                 estimate: IdleEstimate | None = None) -> None:
        self.inputs = {s: Input(s, rank) for rank, s in enumerate(streams)}
        self.max_idle = max_idle_ms / 1000.0
        self.estimate = estimate
        self.fresh_for = None if estimate is None else self.max_idle - estimate.wall_offset
        """A head of `ts` t is live (the estimates apply to it) while `now` is at most
        `t / 1000 + fresh_for`: made at most `max_idle_ms` ago."""
        self.now = 0.0
        """The `now` of the last `next`, which `take_run` goes on with."""
        self.barriers: deque[Barrier] = deque()
        self.barrier_position: int | None = None
        """The fanout partition's next offset to deliver (past markers)."""
        self.cleared_epoch = -1
        self.newest_epoch = -1
        """The fetch epoch of the newest record added: nothing needs clearing while it
        is not above `cleared_epoch`."""

    def extend(self, stream: str, records: list[Pending], now: float = 0.0,
               appended: list[int] | None = None) -> None:
        """Append a stream partition's fetched records (at least one, in offset order):
        once per fetched group, not per record. Records come in fetch-epoch order, so
        the last is the newest. `appended`: the records' append times (ms), when their
        topic stamps them with the broker's (`Bucket`)."""
        inp = self.inputs[stream]
        inp.buffer.extend(records)
        if records[-1].epoch > self.newest_epoch:
            self.newest_epoch = records[-1].epoch
        inp.idle_deadline = None
        if self.estimate is not None:
            self._sample(self.estimate, inp, records, now, now - inp.last_record_at,
                         appended)
        inp.last_record_at = now

    @staticmethod
    def _sample(estimate: IdleEstimate, inp: Input, records: list[Pending], now: float,
                gap: float, appended: list[int] | None) -> None:
        """What the group says of the partition's delay (`Bucket`), and the gap since
        its previous fetch."""
        first = min((r.ts for r in records if r.ts is not None), default=None)
        if first is None:
            return
        wall = now + estimate.wall_offset
        fetched = wall - first / 1000
        if appended is not None:
            stamped = [(a, r.ts) for a, r in zip(appended, records) if r.ts is not None]
            behind = max(a - ts for a, ts in stamped) / 1000
            lag = wall - max(a for a, _ in stamped) / 1000
        if gap == float("inf"):
            gap = 0.0
        index = now // DELAY_BUCKET
        delays = inp.delays
        if delays and delays[-1].index == index:
            last = delays[-1]
            last.fetches += 1
            if fetched > last.fetched:
                last.fetched = fetched
            if gap > last.gap:
                last.gap = gap
        else:
            last = Bucket(index, fetched, 1, gap)
            delays.append(last)
            while delays[0].index <= index - DELAY_BUCKETS:
                delays.popleft()
        if appended is None:
            last.append_times = False
        else:
            if behind > last.appended:
                last.appended = behind
            if lag < last.lag:
                last.lag = lag
        if sum(b.fetches for b in delays) < DELAY_SAMPLES:
            inp.delay = inp.pass_after = None
            return
        if all(b.append_times for b in delays):  # (+1 ms: append times are whole ms)
            inp.delay = max(b.appended for b in delays) + min(b.lag for b in delays) + 0.001
        else:
            inp.delay = max(b.fetched for b in delays)
        margin = estimate.margin_ms / 1000
        inp.pass_after = (inp.delay + margin - estimate.lateness_ms / 1000
                          - estimate.wall_offset)
        inp.quiet_for = max(b.gap for b in delays) + margin

    def add_barrier(self, barrier: Barrier) -> None:
        self.barriers.append(barrier)

    def buffered(self) -> int:
        return sum(len(i.buffer) for i in self.inputs.values())

    def next(self, now: float) -> Step:
        self.now = now
        barrier = self.barriers[0] if self.barriers else None
        best: Input | None = None
        best_ts = 0  # the event time of best's head
        waiting = blocked = False
        refresh: list[Input] = []
        idle: list[Input] = []
        for inp in self.inputs.values():
            limit = barrier.offsets.get(inp.stream) if barrier is not None else None
            if inp.buffer:
                head = inp.buffer[0]
                if limit is not None and head.offset >= limit:
                    continue  # done with this segment
                if head.ts is None:
                    return Take(inp, head)
                waiting = True
                if head.epoch > self.cleared_epoch:
                    blocked = True
                    continue
                if best is None or (head.ts, inp.rank) < (best_ts, best.rank):
                    best, best_ts = inp, head.ts
                continue
            if limit is not None and inp.position is not None and inp.position >= limit:
                continue  # everything below the barrier was taken
            if inp.position is None or inp.end is None:
                blocked = True
                refresh.append(inp)
            elif inp.position < inp.end:
                blocked = True  # records in the log not fetched yet
            elif limit is not None:
                blocked = True  # the end was asked before the barrier's records came
                refresh.append(inp)
            else:
                idle.append(inp)
        deadlines: list[tuple[Input, float]] = []
        if waiting:
            # the idle clock runs from when a record first waited for the partition,
            # also while others block it (not fetched yet, or not cleared): a backlog
            # fetched one partition after another waited max_idle_ms after its fetch
            for inp in idle:
                if inp.idle_deadline is None:
                    inp.idle_deadline = now + self.max_idle
                deadlines.append((inp, inp.idle_deadline))
        if blocked:
            return Wait(tuple(refresh))
        if best is None:
            if barrier is not None:
                return Apply(barrier)
            for inp in idle:  # dry: the next burst waits for the recently active anew
                if now - inp.last_record_at <= DORMANT_AFTER:
                    inp.idle_deadline = None
            return Wait()
        until = None
        head_ts = best_ts
        live = self.fresh_for is not None and now <= head_ts / 1000 + self.fresh_for
        for inp, deadline in deadlines:
            if live and inp.pass_after is not None and \
                    now - inp.last_record_at <= inp.quiet_for:  # only while it may lag
                soon = head_ts / 1000 + inp.pass_after
                if soon < deadline:
                    deadline = soon
            if now < deadline:
                until = deadline if until is None else min(until, deadline)
            elif inp.end_at < deadline or inp.end_epoch < best.buffer[0].epoch:
                refresh.append(inp)  # ask the log end again before going on without it
        if until is not None or refresh:
            return Wait(tuple(refresh), until)
        return Take(best, best.buffer[0])

    def pop(self, step: Take | Apply) -> None:
        if isinstance(step, Take):
            step.input.buffer.popleft()
        else:
            self.barriers.popleft()

    def apply_run(self, step: Apply, limit: int) -> list[Barrier]:
        """Pop `step`, just returned by `next(now)`, and after it the barriers `next(now)`
        would return one after another, up to `limit` in all: the same barriers, the
        same state after, as `next`/`pop` in a loop. `next` applies a barrier only when
        no input holds a record below it and none blocks, and applying one changes no
        input; so the barrier after it applies next exactly when its offsets are the
        same (a round's accepted commands share one barrier per partition, so a burst
        of commands comes as such a run)."""
        barriers = self.barriers
        run = [barriers.popleft()]
        while barriers and len(run) < limit and barriers[0].offsets == step.barrier.offsets:
            run.append(barriers.popleft())
        return run

    def take_run(self, step: Take, limit: int) -> list[Pending]:
        """Pop `step`, just returned by `next(now)` (nothing changed since), and after it
        the records of the same input that `next(now)` would return one after another
        with the same `now`, up to `limit` records in all: the same records, the same
        state after, as `next`/`pop` in a loop, but the other inputs are looked at once
        per run instead of once per record (a task whose records all come from one
        stream partition takes them in one run).

        During the run only this input's head moves: the other inputs, the barrier, the
        ends, deadlines and `cleared_epoch` stay as `next` saw them. So a further head h
        is what `next` returns exactly when it is below the barrier's offset for this
        stream, and either
        - h does not decode (ts None): `next` returns it as soon as it reaches this input,
          and no earlier input has such a head (the first step shows it); or
        - the first step was a decoded record (so `next` went the whole way: no input
          blocks, no other input has an undecodable head, every idle input has its
          deadline set and passed and its end asked after it) and h is cleared
          (epoch <= cleared_epoch), comes before every other candidate head by
          (ts, rank), no idle input's end was asked in an epoch before h's
          (`end_epoch < h.epoch` would make `next` ask it again), and every idle input
          that the first head passed by its estimate's deadline only (not by its
          `max_idle_ms` one) is passed by h's too: that deadline grows with the head's
          `ts`, so a later head may have to wait.
        A run stops when the buffer empties: the input may then be idle or block."""
        inp = step.input
        buffer = inp.buffer
        first = buffer.popleft()
        run = [first]
        if not buffer or limit <= 1:
            return run
        barrier = self.barriers[0] if self.barriers else None
        stop = barrier.offsets.get(inp.stream) if barrier is not None else None
        decoded = first.ts is not None
        max_epoch = self.cleared_epoch
        now = self.now
        # what the other inputs say, the same for every head of the run (`_others`):
        # looked at once, when a second decoded head may follow
        others: tuple[int | None, int, int, list[Input]] | None = None
        while True:
            head = buffer[0]
            if stop is not None and head.offset >= stop:
                break
            ts = head.ts
            if ts is not None:
                if not decoded or head.epoch > max_epoch:
                    break
                if others is None:
                    others = self._others(inp, barrier, ts, max_epoch)
                    if others is None:  # another head comes before this one
                        break
                    max_epoch = others[2]
                    if head.epoch > max_epoch:
                        break
                elif others[0] is not None and (ts, inp.rank) > (others[0], others[1]):
                    break
                if others[3] and not self._passes(others[3], ts, now):
                    break
            run.append(buffer.popleft())
            if not buffer or len(run) >= limit:
                break
        return run

    def _others(self, inp: Input, barrier: Barrier | None, ts: int, max_epoch: int
                ) -> tuple[int | None, int, int, list[Input]] | None:
        """For `take_run`, past its first record: None if another input's head comes
        before a head of `inp` at `ts`; else the best other candidate head's (ts, rank)
        (ts None if there is none), `max_epoch` lowered to the oldest epoch an idle
        input's end was asked in (a later head has `next` ask it again), and the idle
        inputs not past their `max_idle_ms` deadline (with their end asked after it):
        the first head went past them by their estimates (so each was silent no longer
        than its `quiet_for`, as it still is), and each head must (`_passes`). `next` went past every other
        head, so each one below its barrier is decoded and cleared."""
        best_ts: int | None = None
        best_rank = 0
        now = self.now
        estimated: list[Input] = []
        for o in self.inputs.values():
            if o is inp:
                continue
            o_stop = barrier.offsets.get(o.stream) if barrier is not None else None
            if o.buffer:
                o_head = o.buffer[0]
                if o_stop is not None and o_head.offset >= o_stop:
                    continue
                key = (o_head.ts, o.rank)
                if key < (ts, inp.rank):
                    return None
                if best_ts is None or key < (best_ts, best_rank):
                    best_ts, best_rank = key
            elif (o_stop is None and o.position is not None and o.end is not None
                  and o.position >= o.end):
                if o.end_epoch < max_epoch:
                    max_epoch = o.end_epoch
                deadline = o.idle_deadline
                if self.fresh_for is not None and o.pass_after is not None and (
                        deadline is None or now < deadline or o.end_at < deadline):
                    estimated.append(o)
        return best_ts, best_rank, max_epoch, estimated

    def _passes(self, idle: list[Input], ts: int, now: float) -> bool:
        """Whether a head of `ts` may go past each of these idle inputs, not past their
        `max_idle_ms` deadline, at `now`: `next`'s test, by the estimate's deadline if
        the head is live."""
        if now > ts / 1000 + self.fresh_for:  # type: ignore[operator]
            return False
        for o in idle:
            deadline = ts / 1000 + o.pass_after  # type: ignore[operator]
            if o.idle_deadline is not None and o.idle_deadline < deadline:
                deadline = o.idle_deadline
            if now < deadline or o.end_at < deadline:
                return False
        return True

    def delays_ms(self) -> dict[str, float | None]:
        """Stream -> its partition's estimated delay in ms (None: not estimated)."""
        return {s: None if i.delay is None else round(i.delay * 1000, 1)
                for s, i in self.inputs.items()}

    def commit_offsets(self) -> dict[str, int]:
        """Stream -> the offset to commit: the next record to take (all below it are
        processed); streams whose position is not known yet are left out."""
        out = {}
        for stream, inp in self.inputs.items():
            offset = inp.next_offset()
            if offset is not None:
                out[stream] = offset
        return out

    def barrier_commit_offset(self) -> int | None:
        return self.barriers[0].offset if self.barriers else self.barrier_position
