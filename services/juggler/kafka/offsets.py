"""Where a partition's log ends, and where a consumer group stands in it.

"The log end" here is always the last stable offset as a read_committed consumer sees
it, asked from the broker: librdkafka's cached high watermark is the high watermark,
which an open transaction keeps above anything a read_committed reader can fetch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

TP = tuple[str, int]
T = TypeVar("T")

UNSTABLE_WAIT = 20.0
"""Seconds `stable_offsets` waits for the group's committed offsets to be stable before
it has what its caller may have left pending on them ended: another worker's open
transaction holds them at most the transaction timeout (10 s) plus the coordinator's
check for timed-out transactions (every 10 s by default)."""

ANSWER_GRACE = 5.0
"""Seconds an admin request's answer may come after its own request timeout before
`answered` gives up on it."""


def answered(future: Future[T], timeout: float, what: str) -> T:
    """The result of an admin request's future, or a `KafkaException` (`_TIMED_OUT`)
    once `timeout` plus `ANSWER_GRACE` seconds have passed without one.

    Why not `future.result()`: librdkafka answers every request by its timeout, except
    when a broker restart leaves the request with no one to answer it (an admin client
    that lost its group coordinator during an outage). A caller waiting without a bound
    then waits forever, and a worker whose clearance waits so stops taking records while
    it looks healthy. As a Kafka failure, the worker recovers from it like from any
    other (`recovery`)."""
    from confluent_kafka import KafkaError, KafkaException

    try:
        return future.result(timeout=timeout + ANSWER_GRACE)
    except FutureTimeout:
        raise KafkaException(KafkaError(
            KafkaError._TIMED_OUT,
            f"{what}: no answer within {timeout + ANSWER_GRACE:.0f} s")) from None


def log_ends(admin: AdminClient, tps: Iterable[TP], timeout: float = 30.0, *,
             start: bool = False, stable: bool = True) -> dict[TP, int]:
    """The last stable offset of each topic-partition (with `start`, the first offset
    still in the log; with `stable=False`, the high watermark), in one request per
    broker.

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
        left = max(deadline - time.monotonic(), 1.0)
        futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in waiting},
                                     isolation_level=IsolationLevel.READ_COMMITTED
                                     if stable else IsolationLevel.READ_UNCOMMITTED,
                                     request_timeout=left)
        for tp, future in futures.items():
            try:
                ends[(tp.topic, tp.partition)] = answered(future, left, "list offsets").offset
            except KafkaException as exc:
                error = exc.args[0]
                if not retriable(error) or time.monotonic() > deadline:
                    raise
            else:
                waiting.discard((tp.topic, tp.partition))
        if waiting:
            time.sleep(0.1)
    return ends


def retriable(error: KafkaError) -> bool:
    """Whether asking again can succeed. librdkafka flags only some of these retriable
    on an admin answer, so the leader-movement and coordinator codes are named here."""
    from confluent_kafka import KafkaError

    return error.retriable() or error.code() in (
        KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT,
        KafkaError.UNSTABLE_OFFSET_COMMIT, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR)


def group_offsets(admin: AdminClient, group: str, tps: Iterable[TP],
                  timeout: float = 30.0, *, stable: bool = True) -> dict[TP, int | None]:
    """The group's committed offset per topic-partition (None where it has none), as
    stable offsets: no transaction of the group's is pending on them (with
    `stable=False`, the last committed ones, whatever is pending).

    A partition the broker answers with an error raises (after asking again until
    `timeout` while the error is one asking again can cure: a transaction still
    pending on the offset, a coordinator still loading after a restart), rather than
    pass for "none committed": a worker that took it so would start that input from
    the log's start, and evaluate again what its restored state already holds."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

    waiting = {(t, p) for t, p in tps}
    offsets: dict[TP, int | None] = {}
    deadline = time.monotonic() + timeout
    while waiting:
        left = max(deadline - time.monotonic(), 1.0)
        request = [ConsumerGroupTopicPartitions(group, [TopicPartition(t, p)
                                                        for t, p in waiting])]
        future = admin.list_consumer_group_offsets(request, request_timeout=left,
                                                   require_stable=stable)[group]
        try:
            result = answered(future, left, f"the offsets of group {group!r}")
        except KafkaException as exc:
            if not retriable(exc.args[0]) or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
            continue
        for tp in result.topic_partitions:
            if tp.error is not None:
                if not retriable(tp.error) or time.monotonic() > deadline:
                    raise KafkaException(tp.error)
                continue
            offsets[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else None
            waiting.discard((tp.topic, tp.partition))
        if waiting:
            time.sleep(0.1)
    return offsets


def open_transactions(admin: AdminClient, tps: Iterable[TP]) -> dict[TP, int]:
    """The topic-partitions of `tps` on which a transaction is open, each with its last
    stable offset (where the oldest transaction open there began): below its high
    watermark."""
    tps = list(tps)
    stable, high = log_ends(admin, tps), log_ends(admin, tps, stable=False)
    return {tp: stable[tp] for tp in tps if stable[tp] < high[tp]}


def still_open(admin: AdminClient, opened: dict[TP, int], timeout: float) -> list[TP]:
    """Those of `opened` (`open_transactions`) whose last stable offset has not moved
    after waiting up to `timeout` seconds for it to: the transaction open there has
    not ended. (A transaction's markers are written after its end returns to its
    producer; a partition written continuously has one open at most moments, but a
    new one each time.)"""
    waiting = dict(opened)
    deadline = time.monotonic() + timeout
    while waiting:
        now = log_ends(admin, waiting)
        waiting = {tp: at for tp, at in waiting.items() if now[tp] <= at}
        if not waiting or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return sorted(waiting)


def stable_offsets(admin: AdminClient, group: str, tps: Iterable[TP],
                   end_pending: Callable[[dict[TP, int | None]], None],
                   wait: float = UNSTABLE_WAIT) -> dict[TP, int | None]:
    """`group_offsets`; if they stay unstable for `wait` seconds, `end_pending(the
    offsets last committed)`, then `group_offsets` once more.

    Why: a transactional offset commit can stay pending for good, with no transaction
    left to end it (seen after two quick broker outages in a row: the worker's every
    assignment then waited in vain, and it never resumed). Only a marker of the same
    producer id ends it, so the caller, which owns that producer
    (`Transactions.end_hung`), is asked to write one."""
    from confluent_kafka import KafkaError, KafkaException

    tps = list(tps)
    try:
        return group_offsets(admin, group, tps, wait)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.UNSTABLE_OFFSET_COMMIT:
            raise
    end_pending(group_offsets(admin, group, tps, stable=False))
    return group_offsets(admin, group, tps)
