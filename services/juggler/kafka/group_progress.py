"""How far a consumer group's committed offsets are behind what was produced.

The worker commits its input offsets in the same transaction as the results they
caused, so "the group has committed past every produced record" means "every result of
those records is committed": the demo, the load benchmark and the tests wait on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Self

from juggler.kafka.client_config import client_config

Last = Mapping[tuple[str, int], int]
"""(topic, partition) -> offset of the last record that must be consumed."""


class GroupProgress:
    def __init__(self, bootstrap: str, group: str) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer(client_config(bootstrap, {
            "group.id": group, "enable.auto.commit": False, "log_level": 0}))

    def behind(self, last: Last) -> int:
        """Records up to `last` the group has not committed yet."""
        from confluent_kafka import TopicPartition

        committed = self.consumer.committed([TopicPartition(t, p) for t, p in last],
                                            timeout=10)
        return sum(max(0, last[(tp.topic, tp.partition)] + 1 - max(tp.offset, 0))
                   for tp in committed)

    def wait(self, last: Last, timeout: float, interval: float = 0.3,
             on_wait: Callable[[int], None] | None = None) -> bool:
        """Until nothing is behind (True) or `timeout` seconds passed (False);
        `on_wait(behind)` runs between checks."""
        deadline = time.monotonic() + timeout
        while True:
            behind = self.behind(last)
            if behind == 0:
                return True
            if time.monotonic() >= deadline:
                return False
            if on_wait is not None:
                on_wait(behind)
            time.sleep(interval)

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class PartitionProgress:
    topic: str
    partition: int
    committed: int | None
    """The group's next offset to process (None: it has committed nothing there)."""
    end: int
    """The partition's log end (last stable offset) when asked."""

    @property
    def lag(self) -> int:
        return max(0, self.end - (self.committed or 0))


def progress(bootstrap: str, group: str, topics: list[str],
             ends: Mapping[tuple[str, int], int] | None = None) -> list[PartitionProgress]:
    """Per partition of `topics`: the group's committed offset against the log end (or
    against `ends`, e.g. the ends at an earlier moment, to wait for what was produced
    by then). Committed offsets move with the worker's transactions, so a partition
    whose committed offset reached the end has all its results committed."""
    from confluent_kafka.admin import AdminClient

    from juggler.kafka.offsets import group_offsets, log_ends

    admin = AdminClient(client_config(bootstrap, {"log_level": 0}))
    metadata = admin.list_topics(timeout=30)
    tps = [(t, p) for t in topics if t in metadata.topics
           for p in sorted(metadata.topics[t].partitions)]
    if ends is None:
        ends = log_ends(admin, tps)
    committed = group_offsets(admin, group, tps)
    return [PartitionProgress(t, p, committed.get((t, p)), ends[(t, p)]) for t, p in tps]
