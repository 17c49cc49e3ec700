"""Which Kafka failures the worker recovers from by itself, and how long it waits
between two attempts.

A round whose transaction does not commit leaves the engines ahead of what Kafka holds,
and so does a question to the cluster that fails mid-round. Kafka Streams, in the same
place, closes the task dirty and revives it from its changelog and committed offsets,
with a new producer if its own was fenced; its instance stays up. The worker does the
same (`JugglerWorker._supervise`): it abandons the round's transaction, drops its
tasks, waits until the cluster answers, and runs its loop again, whose new producer
fences the old one's epoch and whose assignment restores every task from the
committed state and offsets, as a restart would. Nothing of the failed rounds is
visible (read_committed), nothing committed is lost.

What that cannot get past stops the process with status 70 (`Unrecoverable`): a bug
(any exception not from a Kafka client), a producer fenced by another live worker with
the same instance id, and a cluster that refuses the worker's configuration or
credentials. librdkafka's classes of a transactional error, each checked here: a
retriable or abortable error, or a timeout, leaves the producer usable; a fatal one
does not, but a new producer is a fresh start, so only the fatal errors named above
stop the worker.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, KafkaException

from juggler.runtime.transactions import TRANSACTION_TIMEOUT_MS, CommitFailed

BACKOFF_FIRST = 0.5
BACKOFF_MAX = 10.0
"""Seconds between two attempts to reach the cluster: from `BACKOFF_FIRST`, doubling up
to `BACKOFF_MAX`, so an outage of hours costs a question every 10 s, and the worker is
back within about 10 s of the cluster (librdkafka's own reconnection backoff is capped
at 10 s too)."""


class Unrecoverable(RuntimeError):
    """A failure the worker cannot get past in-process: it stops with status 70."""


def _codes(*names: str) -> frozenset[int]:
    return frozenset(getattr(KafkaError, name) for name in names if hasattr(KafkaError, name))


def diagnose(exc: BaseException) -> str:
    """What stopped the loop, as the log and `/health` say it, if running the loop again
    can succeed once the cluster answers; raises `Unrecoverable` otherwise."""
    error, age = _kafka_error(exc)
    if error is None:
        raise Unrecoverable(f"not a Kafka failure (a bug): {exc!r}") from exc
    code = error.code()
    if code in _codes("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"):
        if age is None or age * 1000 < TRANSACTION_TIMEOUT_MS:
            # the coordinator bumps an epoch by itself only for a transaction older
            # than its timeout: a younger one was fenced by another producer's
            # init_transactions with this worker's transactional id
            raise Unrecoverable(
                f"fenced: another live worker runs with this worker's instance id "
                f"(transactional id), and it took over: {error.str()}") from exc
        return f"transaction timed out and fenced: {error.str()}"
    if code in _codes("_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED",
                      "TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED",
                      "CLUSTER_AUTHORIZATION_FAILED", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
        raise Unrecoverable(f"the cluster refuses this worker: {error.str()}") from exc
    if code in _codes("_INVALID_ARG", "_NOT_CONFIGURED", "INVALID_TRANSACTION_TIMEOUT",
                      "_UNSUPPORTED_FEATURE", "UNSUPPORTED_VERSION", "INVALID_CONFIG"):
        raise Unrecoverable(f"a configuration the cluster or client rejects: "
                            f"{error.str()}") from exc
    if error.fatal():
        raise Unrecoverable(f"fatal Kafka client error: {error.str()}") from exc
    return error.str()


def _kafka_error(exc: BaseException) -> tuple[Any, float | None]:
    """(the `KafkaError` behind `exc`, or None; the age of the transaction it failed)."""
    if isinstance(exc, CommitFailed):
        if exc.error is not None:
            return exc.error, exc.age
        cause = exc.__cause__
        return (_kafka_error(cause)[0], None) if cause is not None else (None, None)
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0], None
    return None, None


class Backoff:
    """The waits between attempts: doubling from `first` up to `most`, until `reset`."""

    def __init__(self, first: float = BACKOFF_FIRST, most: float = BACKOFF_MAX) -> None:
        self.first, self.most = first, most
        self._next = first

    def next(self) -> float:
        wait, self._next = self._next, min(self._next * 2, self.most)
        return wait

    def reset(self) -> None:
        self._next = self.first
