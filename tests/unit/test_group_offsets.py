"""The group's committed offsets as the worker starts its inputs from them: an offset
the broker could not answer must never pass for "nothing committed" (the worker would
evaluate the partition again from the log's start), and a transaction still pending on
an offset is waited out."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, NamedTuple

import pytest
from confluent_kafka import KafkaError, KafkaException

from juggler.kafka.offsets import group_offsets


class Answered(NamedTuple):
    """A partition of the answer, as the client library gives it."""

    topic: str
    partition: int
    offset: int
    error: KafkaError | None = None


class Group:
    """An admin client answering ListConsumerGroupOffsets from a script of answers:
    per call, {partition: offset or KafkaError}."""

    def __init__(self, *answers: dict[int, int | KafkaError]) -> None:
        self.answers = list(answers)
        self.asked: list[list[int]] = []

    def list_consumer_group_offsets(self, requests: list[Any], **_: Any) -> dict[str, Any]:
        request = requests[0]
        self.asked.append(sorted(tp.partition for tp in request.topic_partitions))
        answer = self.answers.pop(0)

        class Result:
            topic_partitions = []

        for tp in request.topic_partitions:
            got = answer[tp.partition]
            Result.topic_partitions.append(
                Answered(tp.topic, tp.partition, -1001, got) if isinstance(got, KafkaError)
                else Answered(tp.topic, tp.partition, got))
        future: Future[Any] = Future()
        future.set_result(Result)
        return {request.group_id: future}


def test_offsets_and_none_where_nothing_is_committed() -> None:
    admin = Group({0: 42, 1: -1001})
    assert group_offsets(admin, "app", [("t", 0), ("t", 1)]) == {("t", 0): 42, ("t", 1): None}


def test_a_pending_transaction_is_waited_out_for_that_partition_only() -> None:
    admin = Group({0: 42, 1: KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT)}, {1: 7})
    assert group_offsets(admin, "app", [("t", 0), ("t", 1)]) == {("t", 0): 42, ("t", 1): 7}
    assert admin.asked == [[0, 1], [1]]


def test_a_partition_the_broker_failed_raises_instead_of_reading_as_none() -> None:
    admin = Group({0: 42, 1: KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)})
    with pytest.raises(KafkaException) as raised:
        group_offsets(admin, "app", [("t", 0), ("t", 1)])
    assert raised.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
