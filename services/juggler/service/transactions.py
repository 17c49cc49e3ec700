"""One Kafka transaction per round of the worker's loop: every record the round produces
(results, dead letters, statuses, fanout copies, state records) and the input offsets
of every task it advanced are committed together, or not at all.

One transactional producer per worker, fenced by the consumer group's generation
(KIP-447, `send_offsets_to_transaction` with the consumer's group metadata): a worker
whose partitions moved on can no longer commit for them. Its transactional id is the
worker's `instance_id`; a restarted worker with the same id fences its previous
incarnation at once, and an open transaction of a worker that never comes back is
aborted by the broker after `transaction.timeout.ms`.

Any failure to commit leaves the engines ahead of what was committed, so the worker
stops (`CommitFailed`, exit status 70) and its restart resumes from the committed
offsets and state, like a Kafka Streams task closed dirty.

A round's transaction runs in a thread of its own (`submit`) while the worker fetches,
decodes and evaluates the next round: its broker round trips (add partitions, send
offsets, end transaction) then overlap that work instead of stalling it, and librdkafka
releases the GIL while it waits. One transaction is in flight at a time (`wait` before
the next). Nothing is lost by going on before it commits: the engines are ahead of the
committed state within a round anyway, and a failure still stops the process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

TRANSACTION_TIMEOUT_MS = 10_000
"""How long an abandoned transaction blocks read_committed readers of the outputs and
the group's committed offsets (a SIGKILLed worker started under a new id)."""


RETRY_BACKOFF_MS = 5
"""librdkafka's first retry backoff (100 ms by default, doubling up to
`retry.backoff.max.ms`). A transaction begun right after the previous commit meets
CONCURRENT_TRANSACTIONS from the coordinator until that one's markers are written, and
`send_offsets_to_transaction` retries after the backoff: with the default it was 89% of
a live worker's commit time, ~100 ms added to every round (confluent-kafka-python
issue 967; the Java client lowered the same backoff in KAFKA-5477)."""


class CommitFailed(RuntimeError):
    """The round's transaction did not commit; nothing of it is visible."""


@dataclass(slots=True)
class Outgoing:
    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None = None
    headers: list[tuple[str, bytes]] | None = None


@dataclass
class Outbox:
    """What one round produces, sent at commit time."""

    messages: list[Outgoing] = field(default_factory=list)
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    """Input topic-partition -> next offset to read, committed with the messages."""
    after_commit: list[Callable[[], None]] = field(default_factory=list)

    def send(self, topic: str, key: bytes | None, value: bytes | None,
             partition: int | None = None, headers: list[tuple[str, bytes]] | None = None) -> None:
        self.messages.append(Outgoing(topic, key, value, partition, headers))

    def then(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the round is committed (metrics, latency)."""
        self.after_commit.append(callback)

    def empty(self) -> bool:
        return not self.messages and not self.offsets


class Transactions:
    def __init__(self, client_config: dict[str, Any], instance_id: str, max_record_bytes: int) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({
            **client_config,
            "transactional.id": instance_id,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            "message.max.bytes": max_record_bytes,
            "enable.idempotence": True,
            "linger.ms": 2,
            "retry.backoff.ms": RETRY_BACKOFF_MS,
            "log_level": 3,
        })
        self.producer.init_transactions(60)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="juggler-commit")
        self._in_flight: tuple[Future[None], Outbox] | None = None

    def submit(self, outbox: Outbox, group_metadata: Any) -> None:
        """Start committing `outbox` in the background, after the transaction in flight
        (raises `CommitFailed` if that one failed)."""
        self.wait()
        if not outbox.empty():
            self._in_flight = (self._thread.submit(self._commit, outbox, group_metadata),
                               outbox)

    def wait(self) -> None:
        """Until the transaction in flight, if any, committed; its `then` callbacks run
        here, in the caller's thread. Raises `CommitFailed`."""
        if self._in_flight is None:
            return
        future, outbox = self._in_flight
        self._in_flight = None
        future.result()
        for callback in outbox.after_commit:
            callback()

    def _commit(self, outbox: Outbox, group_metadata: Any) -> None:
        """Produce `outbox`'s messages and commit its offsets in one transaction."""
        from confluent_kafka import KafkaException, TopicPartition

        producer = self.producer
        try:
            producer.begin_transaction()
            for m in outbox.messages:
                self._produce(m)
            if outbox.offsets:
                producer.send_offsets_to_transaction(
                    [TopicPartition(t, p, o) for (t, p), o in outbox.offsets.items()],
                    group_metadata, 60)
            producer.commit_transaction(60)
        except KafkaException as exc:
            error = exc.args[0]
            if getattr(error, "txn_requires_abort", lambda: False)():
                try:
                    producer.abort_transaction(30)
                except KafkaException:
                    pass
            raise CommitFailed(f"transaction failed: {error}") from None

    def _produce(self, m: Outgoing) -> None:
        kwargs: dict[str, Any] = {"key": m.key, "value": m.value}
        if m.partition is not None:
            kwargs["partition"] = m.partition
        if m.headers:
            kwargs["headers"] = m.headers
        while True:
            try:
                self.producer.produce(m.topic, **kwargs)
                return
            except BufferError:  # the local queue is full: let deliveries drain it
                self.producer.poll(0.05)

    def close(self) -> None:
        """Wait for the transaction in flight (raises `CommitFailed`), then flush."""
        try:
            self.wait()
        finally:
            self._thread.shutdown()
            self.producer.flush(10)
