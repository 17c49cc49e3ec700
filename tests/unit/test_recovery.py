"""Which failures the worker recovers from by itself (`recovery.diagnose`), and its
back-off between attempts to reach the cluster."""

from __future__ import annotations

import pytest

from juggler.runtime.recovery import Backoff, Unrecoverable, diagnose
from juggler.runtime.transactions import CommitFailed

kafka = pytest.importorskip("confluent_kafka")
KafkaError, KafkaException = kafka.KafkaError, kafka.KafkaException


def failed(code: int, age: float | None = 0.2, **flags: bool) -> CommitFailed:
    error = KafkaError(code, "what the client said", **flags)
    return CommitFailed("transaction failed", error, age)


@pytest.mark.parametrize("exc", [
    KafkaException(KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True)),
    KafkaException(KafkaError(KafkaError._TRANSPORT, "connection refused")),
    failed(KafkaError._INCONSISTENT, txn_requires_abort=True),  # messages timed out
    failed(KafkaError.NOT_COORDINATOR, txn_requires_abort=True),
    failed(KafkaError.COORDINATOR_LOAD_IN_PROGRESS, retriable=True),
    failed(KafkaError._FENCED, age=31.0, fatal=True),  # the broker timed it out
], ids=lambda e: repr(e)[:60])
def test_kafka_failures_an_outage_causes_are_recovered(exc: BaseException) -> None:
    assert diagnose(exc)


@pytest.mark.parametrize("exc, says", [
    (ValueError("a bug"), "a bug"),
    (failed(KafkaError._FENCED, age=0.05, fatal=True), "another live worker"),
    (failed(KafkaError.PRODUCER_FENCED, age=None), "another live worker"),
    (KafkaException(KafkaError(KafkaError.SASL_AUTHENTICATION_FAILED, "bad password")),
     "refuses"),
    (failed(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), "refuses"),
    (KafkaException(KafkaError(KafkaError.INVALID_TRANSACTION_TIMEOUT, "too long")),
     "configuration"),
    (KafkaException(KafkaError(KafkaError._GAPLESS_GUARANTEE, "gap", fatal=True)), "fatal"),
    (CommitFailed("transaction failed: KeyError('x')"), "a bug"),
], ids=lambda e: repr(e)[:60])
def test_what_cannot_be_recovered_in_process_stops_the_worker(exc: BaseException,
                                                                says: str) -> None:
    with pytest.raises(Unrecoverable, match=says):
        diagnose(exc)


def test_a_bug_in_the_commit_thread_is_a_bug() -> None:
    failure = CommitFailed("transaction failed")
    failure.__cause__ = TypeError("in the commit thread")
    with pytest.raises(Unrecoverable, match="a bug"):
        diagnose(failure)


def test_backoff_doubles_up_to_its_cap_until_reset() -> None:
    backoff = Backoff(0.5, 10.0)
    assert [backoff.next() for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    backoff.reset()
    assert backoff.next() == 0.5
