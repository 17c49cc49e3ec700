"""Three changes to faust-streaming (0.15.x) that exactly-once processing depends on.

1. Offsets are committed by the worker's own batch transactions only.

Faust's consumer commits the offsets of acked events on a timer, in a transaction of its
own. Those offsets are computed when the commit starts, and the commit then waits for
the partition's producer lock, which a batch transaction may hold: the batch commits
offset N+k with its results, then Faust's commit writes the older offset N over it. The
SIGKILL test caught exactly that: after a restart the events N..N+k-1 were processed a
second time, duplicating their results. Every consumed record is processed by one of
the worker's agents, which commits its offsets inside the batch's transaction before
acking it, so Faust's own offset commit is turned into a no-op for apps that set
`juggler_commits_offsets` (with at_least_once, Faust's commit is kept: offsets are
then committed after the batch's sends completed, which is at-least-once).

2. Table recovery starts by asking for each changelog partition's highwater. With
`processing_guarantee="exactly_once"`, Faust's aiokafka driver answers with
`AIOKafkaConsumer.last_stable_offset(tp)`, which is only known once a fetch for that
partition has returned, so right after an assignment it is None, Faust reads it as -1
("empty changelog") and skips recovery: a restarted worker then starts from empty
tables while its consumer offsets say the events were processed. Found by the SIGKILL
test (tests/integration/test_worker_recovery.py), where it lost every held event.

The fix asks the broker instead: `end_offsets` of a read_committed consumer is the
last stable offset (aiokafka sends its isolation level with ListOffsets), which is
what recovery must read up to.

3. Faust's read-offset filter is switched off (see `_NoReadOffsetFilter`).

`apply()` is idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_APPLIED = False


def apply() -> None:
    global _APPLIED
    if _APPLIED:
        return
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

    async def _highwaters(self: Any, partitions: list[Any]) -> Mapping[Any, int]:
        consumer = self._ensure_consumer()
        return await consumer.end_offsets(partitions)

    AIOKafkaConsumerThread._highwaters = _highwaters

    from faust.transport.consumer import TransactionManager

    original_commit = TransactionManager.commit

    async def commit(self: Any, offsets: Mapping[Any, int],
                     start_new_transaction: bool = True) -> bool:
        if getattr(self.app, "juggler_commits_offsets", False):
            return True
        return await original_commit(self, offsets, start_new_transaction)

    TransactionManager.commit = commit

    from faust.transport.consumer import Consumer

    original_init = Consumer.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self._read_offset = _NoReadOffsetFilter()

    Consumer.__init__ = __init__
    _APPLIED = True


class _NoReadOffsetFilter(dict):
    """Faust's consumer drops every fetched record below `_read_offset[tp]`, and its
    fetch loop keeps setting `_read_offset[tp]` while it delivers a batch fetched before
    a seek (the seek to the committed offsets at the end of recovery, for one). The
    records the seek fetches again are then all below it and dropped: the input gaps
    the SIGKILL test kept finding after every restart with a backlog. Reading always
    gives None ("no filter"); the agents skip records delivered twice themselves
    (`PartitionEngine.admit`)."""

    def __getitem__(self, key: Any) -> None:
        return None
