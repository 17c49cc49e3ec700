"""The group's committed offsets as the worker starts its inputs from them: an offset
the broker could not answer must never pass for "nothing committed" (the worker would
evaluate the partition again from the log's start), and a transaction still pending on
an offset is waited out, and one that no transaction will ever end is ended by the
caller's own producer."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, NamedTuple

import pytest
from confluent_kafka import KafkaError, KafkaException

from juggler.kafka.offsets import group_offsets, stable_offsets


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
        return self.answer(request, self.answers.pop(0))

    @staticmethod
    def answer(request: Any, answer: dict[int, int | KafkaError]) -> dict[str, Any]:

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


class HungCommit(Group):
    """A group whose partition 0 has an offset commit pending that no transaction will
    end: unstable to a stable read until `end` is called; 42 is its last committed."""

    def __init__(self) -> None:
        super().__init__()
        self.pending = True

    def list_consumer_group_offsets(self, requests: list[Any], *, require_stable: bool,
                                    **_: Any) -> dict[str, Any]:
        hung = require_stable and self.pending
        return self.answer(requests[0], {0: KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT)
                                         if hung else 42})

    def end(self, last: dict[tuple[str, int], int | None]) -> None:
        self.ended = last
        self.pending = False


def test_a_commit_pending_for_good_is_ended_by_the_caller_then_read_stable() -> None:
    admin = HungCommit()
    assert stable_offsets(admin, "app", [("t", 0)], admin.end, wait=0.3) == {("t", 0): 42}
    assert admin.ended == {("t", 0): 42}


def test_a_commit_that_becomes_stable_in_time_is_not_ended() -> None:
    admin = Group({0: KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT)}, {0: 7})
    ended: list[Any] = []
    assert stable_offsets(admin, "app", [("t", 0)], ended.append, wait=5.0) == {("t", 0): 7}
    assert ended == []


def test_another_failure_raises_without_ending_anything() -> None:
    admin = Group({0: KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)})
    ended: list[Any] = []
    with pytest.raises(KafkaException):
        stable_offsets(admin, "app", [("t", 0)], ended.append, wait=5.0)
    assert ended == []
