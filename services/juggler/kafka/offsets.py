"""Where a partition's log ends, and where a consumer group stands in it.

"The log end" here is always the last stable offset as a read_committed consumer sees
it, asked from the broker: librdkafka's cached high watermark is the high watermark,
which an open transaction keeps above anything a read_committed reader can fetch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

TP = tuple[str, int]


def log_ends(admin: AdminClient, tps: Iterable[TP], timeout: float = 30.0, *,
             start: bool = False) -> dict[TP, int]:
    """The last stable offset of each topic-partition (with `start`, the first offset
    still in the log), in one request per broker."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    spec = OffsetSpec.earliest() if start else OffsetSpec.latest()
    wanted = {TopicPartition(t, p): spec for t, p in tps}
    if not wanted:
        return {}
    futures = admin.list_offsets(wanted, isolation_level=IsolationLevel.READ_COMMITTED,
                                 request_timeout=timeout)
    return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}


def group_offsets(admin: AdminClient, group: str, tps: Iterable[TP],
                  timeout: float = 30.0) -> dict[TP, int | None]:
    """The group's committed offset per topic-partition (None where it has none)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    wanted = [TopicPartition(t, p) for t, p in tps]
    request = [ConsumerGroupTopicPartitions(group, wanted)]
    result = admin.list_consumer_group_offsets(request, request_timeout=timeout,
                                               require_stable=True)[group].result()
    return {(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None)
            for tp in result.topic_partitions}
