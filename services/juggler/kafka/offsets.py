"""Where a partition's log ends, and where a consumer group stands in it.

"The log end" here is always the last stable offset as a read_committed consumer sees
it, asked from the broker: librdkafka's cached high watermark is the high watermark,
which an open transaction keeps above anything a read_committed reader can fetch.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

TP = tuple[str, int]


def log_ends(admin: AdminClient, tps: Iterable[TP], timeout: float = 30.0, *,
             start: bool = False) -> dict[TP, int]:
    """The last stable offset of each topic-partition (with `start`, the first offset
    still in the log), in one request per broker.

    Partitions whose broker answers with a retriable error (NOT_LEADER_FOR_PARTITION
    while a new topic's leader is still being installed, or after a leader moved) are
    asked again until `timeout` (UNKNOWN_LEADER_EPOCH too: the client already knows a
    newer leader epoch than the broker has installed): the metadata a client sees runs ahead of the leader
    actually serving the partition, and neither a worker nor a CLI command should fail
    on that."""
    from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    spec = OffsetSpec.earliest() if start else OffsetSpec.latest()
    waiting = {(t, p) for t, p in tps}
    ends: dict[TP, int] = {}
    deadline = time.monotonic() + timeout
    while waiting:
        futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in waiting},
                                     isolation_level=IsolationLevel.READ_COMMITTED,
                                     request_timeout=max(deadline - time.monotonic(), 1.0))
        for tp, future in futures.items():
            try:
                ends[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException as exc:
                error = exc.args[0]
                if not _retriable(error) or time.monotonic() > deadline:
                    raise
            else:
                waiting.discard((tp.topic, tp.partition))
        if waiting:
            time.sleep(0.1)
    return ends


def _retriable(error: KafkaError) -> bool:
    """Whether asking again can succeed. librdkafka flags only some of these retriable
    on a ListOffsets answer, so the leader-movement codes are named here."""
    from confluent_kafka import KafkaError

    return error.retriable() or error.code() in (
        KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT)


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
