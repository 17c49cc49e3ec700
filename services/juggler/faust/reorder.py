"""The Faust runtime's order of taking records: a reorder buffer by `ts` (docs/faust.md).

Faust hands an agent its records in fetch order and knows no partition's log end, so
the worker's rule (never overtake a record still in the log, `ArrivalOrder`) cannot be
kept. What is kept is the rest of `ArrivalOrder`: per partition, the head with the
smallest `ts` among the stream partitions is taken (offset order within each); while
some stream partition has nothing buffered, a waiting record waits for it at most
`reorder_ms` (a silent stream is then passed, and not waited for anew once dormant).
So records of different topics that arrive less than `reorder_ms` apart are merged
exactly by `ts`, as `juggler eval` takes them; a record that arrives later than that
behind its partners is processed where it arrives, and is late if its key moved on.

A command (a fanout record) applies where the agent sees it: after every record that
arrived before it, before every later one.

One thing is known of the log: its end when a partition is assigned (`catch_up`). Until
a stream partition's records up to there have arrived it is not idle, and is waited
for as the worker waits for a partition behind its log end: a backlog, and what a
restart must take again, are merged exactly by `ts` however late Faust fetches a topic.
"""

from __future__ import annotations

from collections.abc import Sequence

from juggler.runtime.arrival import ArrivalOrder, Barrier, Pending, Step, Wait


class ReorderBuffer(ArrivalOrder):
    """`ArrivalOrder` with every log end taken to be what has arrived: an empty input is
    always idle, and each record is cleared as it arrives (no command can turn out to
    stand below it later: commands apply where they arrive)."""

    def __init__(self, streams: Sequence[str], reorder_ms: int) -> None:
        super().__init__(streams, reorder_ms)
        for inp in self.inputs.values():
            inp.position = inp.end = 0

    def extend(self, stream: str, records: list[Pending], now: float = 0.0,
               appended: list[int] | None = None) -> None:
        super().extend(stream, records, now, appended)
        self.inputs[stream].position = records[-1].offset + 1
        self.cleared_epoch = self.newest_epoch

    def catch_up(self, ends: dict[str, int]) -> None:
        """Per stream, the log end when the partition was assigned. The last offset
        below it may be a transaction's marker, which no record fills, so an input is
        waited for up to the offset before it."""
        for stream, end in ends.items():
            inp = self.inputs[stream]
            inp.end = max(inp.position or 0, end - 1)

    def add_barrier(self, barrier: Barrier) -> None:
        """The command applies after what arrived before it, whatever offsets the
        record carries (they are the worker's barrier, asked of the broker)."""
        here = {s: inp.position or 0 for s, inp in self.inputs.items()}
        super().add_barrier(Barrier(here, barrier.offset, barrier.item))
        self.barrier_position = barrier.offset + 1

    def next(self, now: float) -> Step:
        """`ArrivalOrder.next`, with each log end it asks for answered at once: as far
        as this runtime can know, an input holds nothing beyond what arrived."""
        for _ in range(len(self.inputs) + 1):
            step = super().next(now)
            if not isinstance(step, Wait) or not step.refresh:
                return step
            for inp in step.refresh:
                inp.end = inp.position
                inp.end_at = now
                inp.end_epoch = self.newest_epoch
        raise AssertionError("an answered log end was asked again")
