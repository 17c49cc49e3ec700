"""One Kafka transaction per source partition per batch: every record a batch produces
(results, dead letters, statuses, fanout copies, state changelog records) and the
batch's consumer offsets are committed together, or not at all.

Why not Faust's own exactly-once path: faust-streaming 0.15 picks a send's transactional
producer from the *destination* topic's partition (a KeyError for topics no agent
consumes, such as results topics), writes table changelogs through a background buffer
that is not flushed before a commit, and commits on a timer that can fall in the middle
of an agent's batch. Any of these can split one event's effects over two transactions,
which a crash turns into a lost or duplicated result. So the worker keeps Faust's
machinery (the consumer group, co-partitioned assignment, one transactional producer per
partition group created on assignment, which fences a previous owner, read_committed
consumption, table recovery) and drives the transaction of its own batches itself:

    lock the partition's transactional producer (the lock Faust's commit also takes)
    send every outgoing record; wait for all acknowledgements
    send_offsets_to_transaction(last offset + 1 of each source topic-partition)
    commit_transaction; begin_transaction (Faust expects one to be open)

Faust's periodic commit afterwards only re-commits the same offsets (the events are
acked after this returns), in a transaction of its own with nothing else in it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from faust.types import TP


class PartitionLost(Exception):
    """The partition's transactional producer is gone: the partition was revoked (or the
    producer fenced) while the batch was processed. Nothing of the batch is committed."""


@dataclass(slots=True)
class Outgoing:
    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None = None
    headers: list[tuple[str, bytes]] | None = None


@dataclass
class Outbox:
    """What one batch of one source partition produces, sent at commit time."""

    messages: list[Outgoing] = field(default_factory=list)
    after_commit: list[Callable[[], None]] = field(default_factory=list)

    def send(self, topic: str, key: bytes | None, value: bytes | None,
             partition: int | None = None, headers: list[tuple[str, bytes]] | None = None) -> None:
        self.messages.append(Outgoing(topic, key, value, partition, headers))

    def then(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the batch is committed (metrics, latency)."""
        self.after_commit.append(callback)


class Transactions:
    """Commits batches with the guarantee the worker was configured with."""

    def __init__(self, app: Any, exactly_once: bool) -> None:
        self.app = app
        self.exactly_once = exactly_once

    def transactional_id(self, topic: str, partition: int) -> str:
        """Faust's id for the producer of a source partition (`TransactionManager`)."""
        group = self.app.assignor.group_for_topic(topic)
        return f"{self.app.conf.id}-{group}-{partition}"

    async def commit(self, source_topic: str, partition: int, offsets: dict[TP, int],
                     outbox: Outbox) -> None:
        """Produce `outbox` and commit `offsets` (next offset to read per source TP)."""
        if self.exactly_once:
            await self._commit_transaction(source_topic, partition, offsets, outbox)
        else:
            await self._send_all(outbox)  # Faust commits the acked offsets later
        for callback in outbox.after_commit:
            callback()

    async def _commit_transaction(self, source_topic: str, partition: int,
                                  offsets: dict[TP, int], outbox: Outbox) -> None:
        from aiokafka.structs import TopicPartition

        producer = self.app.producer
        tid = self.transactional_id(source_topic, partition)
        txp = producer._transaction_producers.get(tid)
        lock = producer._trn_locks.get(tid)
        if txp is None or lock is None:
            raise PartitionLost(f"no transactional producer {tid!r}: partition revoked or fenced")
        async with lock:
            if not txp._txn_manager.is_in_transaction():
                await txp.begin_transaction()
            pending = [await txp.send(m.topic, m.value, key=m.key, partition=m.partition,
                                      headers=m.headers)
                       for m in outbox.messages]
            if pending:
                await asyncio.gather(*pending)
            await txp.send_offsets_to_transaction(
                {TopicPartition(tp.topic, tp.partition): offset for tp, offset in offsets.items()},
                self.app.conf.id)
            await txp.commit_transaction()
            await txp.begin_transaction()

    async def _send_all(self, outbox: Outbox) -> None:
        producer = self.app.producer
        pending = [await producer.send(m.topic, m.key, m.value, m.partition, None, m.headers)
                   for m in outbox.messages]
        if pending:
            await asyncio.gather(*pending)
