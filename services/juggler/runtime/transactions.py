"""One Kafka transaction per round of the worker's loop: every record the round produces
(results, dead letters, statuses, fanout copies, state records) and the input offsets
of every task it advanced are committed together, or not at all.

One transactional producer per worker, fenced by the consumer group's generation
(KIP-447, `send_offsets_to_transaction` with the consumer's group metadata): a worker
whose partitions moved on can no longer commit for them. Its transactional id is the
worker's `instance_id`; a restarted worker with the same id fences its previous
incarnation at once, and an open transaction of a worker that never comes back is
aborted by the broker after `transaction.timeout.ms`.

Any failure to commit leaves the engines ahead of what was committed: the worker then
closes its tasks dirty and restores them from the committed offsets and state, like a
Kafka Streams task closed dirty (`CommitFailed`, `recovery`), and `abandon`s this
producer; the next one, with the same transactional id, fences it.

A round's transaction runs in a thread of its own (`submit`) while the worker fetches,
decodes and evaluates the next rounds: its broker round trips (add partitions, send
offsets, end transaction) then overlap that work instead of stalling it, and librdkafka
releases the GIL while it waits. One transaction is in flight at a time. What rounds
submit while it is in flight is queued, merged into one outbox (in submission order),
and committed by the same thread the moment the one in flight is done: the loop never
waits for a commit to hand over its round, so a record waits for at most the rest of
the transaction in flight, then its own, instead of also the loop's next round. Nothing
is lost by going on before it commits: the engines are ahead of the committed state
within a round anyway, and after a failure the tasks go back to the last commit.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from time import monotonic, perf_counter
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

log = logging.getLogger(__name__)

TRANSACTION_TIMEOUT_MS = 10_000
"""How long an abandoned transaction blocks read_committed readers of the outputs and
the group's committed offsets (a SIGKILLed worker started under a new id)."""


STALLED_AFTER = 3 * TRANSACTION_TIMEOUT_MS / 1000
"""Seconds after which a transaction still in flight fails the worker's waits for it
(`wait`, `submit`) as a timed-out commit. It can no longer commit by then (the
coordinator aborts a transaction older than its timeout), yet librdkafka's
`send_offsets_to_transaction` can block past its own timeout when the group
coordinator went away with a broker (confluentinc/librdkafka#5456): a worker waiting
for it without a bound, as a rebalance during an outage does, stood still for good
with `/health` at 200. The stuck call is left to its thread; the next producer
fences it."""


RETRY_BACKOFF_MS = 5
"""librdkafka's first retry backoff (100 ms by default, doubling up to
`retry.backoff.max.ms`). A transaction begun right after the previous commit meets
CONCURRENT_TRANSACTIONS from the coordinator until that one's markers are written, and
`send_offsets_to_transaction` retries after the backoff: with the default, that wait
was most of a live worker's commit time and delayed every round (docs/worker.md,
"Exactly once"; confluent-kafka-python issue 967; the Java client lowered the same
backoff in KAFKA-5477)."""


HUNG_KEY = b"juggler.hung"
"""The key of the records `end_hung` writes (and aborts): keyed, as the compacted state
topic requires, by a key no query, entity or state record uses."""


QUEUE_MAX = 20_000
"""Messages queued behind the transaction in flight before `submit` waits for it: at a
backlog the loop would otherwise run ahead of the commits without bound."""


class CommitFailed(RuntimeError):
    """The round's transaction did not commit; nothing of it is visible."""

    def __init__(self, message: str, error: KafkaError | None = None,
                 age: float | None = None) -> None:
        super().__init__(message)
        self.error = error
        """The client's `KafkaError`, if the client failed it (else `__cause__` says)."""
        self.age = age
        """Seconds from the transaction's begin to its failure."""


Headers = list[tuple[str, bytes]]
Outgoing = tuple[str, bytes | None, bytes | None, int, Headers | None]
"""One message to produce: (topic, value, key, partition, headers), the first
arguments of `Producer.produce` in its order; partition -1 leaves the choice to the
partitioner, headers None sends none. A tuple, not a dataclass: a round sends about
two per input record, and the commit thread hands them to the producer as they are."""


@dataclass
class Outbox:
    """What one round produces, sent at commit time."""

    messages: list[Outgoing] = field(default_factory=list)
    latest: dict[tuple[str, int, bytes], Outgoing] = field(default_factory=dict)
    """Records of a compacted topic (the state topic) by (topic, partition, key): only
    a key's last record in a transaction counts, so one sent again replaces the earlier
    (`put`). Live, a round takes a few records and writes its keys' bounds each time;
    merged into one transaction, a key's bounds are written once."""
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    """Input topic-partition -> next offset to read, committed with the messages."""
    after_commit: list[Callable[[], None]] = field(default_factory=list)
    submitted: float | None = None
    """When it was handed to the commit thread (`perf_counter`); an outbox that later
    rounds are merged into keeps its own, the earliest."""

    def send(self, topic: str, key: bytes | None, value: bytes | None,
             partition: int = -1, headers: Headers | None = None) -> None:
        self.messages.append((topic, value, key, partition, headers))

    def put(self, topic: str, key: bytes, value: bytes | None, partition: int,
            headers: Headers | None = None) -> None:
        """`send` a record of a compacted topic, replacing the key's earlier record of
        this transaction: what a reader of the topic keeps is the same."""
        self.latest[(topic, partition, key)] = (topic, value, key, partition, headers)

    def then(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the round is committed (metrics, latency)."""
        self.after_commit.append(callback)

    def empty(self) -> bool:
        return not self.messages and not self.latest and not self.offsets

    def merge(self, later: Outbox) -> None:
        """Append a later round's outbox: its messages after these, its compacted
        records over these, its offsets over these (they only move forward), its
        callbacks after these."""
        self.messages.extend(later.messages)
        self.latest.update(later.latest)
        self.offsets.update(later.offsets)
        self.after_commit.extend(later.after_commit)


class Transactions:
    def __init__(self, client_config: dict[str, Any], instance_id: str, max_record_bytes: int,
                 timed: Callable[[float, float], None] | None = None) -> None:
        """`timed(queued, took)` is called in the commit thread after each commit: how
        long its outbox waited for the transaction in flight, and how long its own took
        (the worker's `juggler_commit_queue_seconds` and `juggler_transaction_seconds`)."""
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
        self._timed = timed
        self._cond = threading.Condition()
        self._busy = False
        """A transaction is in flight (the commit thread runs)."""
        self._queued: tuple[Outbox, Any] | None = None
        """What was submitted since, merged, for the next transaction."""
        self._committed: list[Callable[[], None]] = []
        """Callbacks of committed transactions, to run in the caller's thread."""
        self._failed: BaseException | None = None
        self._began: float | None = None
        """When the transaction in flight began (`time.monotonic()`), None between."""
        self._start: tuple[Outbox, Any] | None = None
        """An outbox submitted while none was in flight, for the commit thread to begin."""
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="juggler-commit", daemon=True)
        self._thread.start()

    def submit(self, outbox: Outbox, group_metadata: Any) -> None:
        """Commit `outbox` in the background: at once if no transaction is in flight,
        else together with everything else submitted meanwhile, as soon as that one is
        done. Raises `CommitFailed` if an earlier transaction failed; runs the
        callbacks of those committed since the last call."""
        self._callbacks()
        if outbox.empty():
            return
        self.wait_for_room()
        outbox.submitted = perf_counter()
        with self._cond:
            if self._failed is None:
                self._stalled()
            if self._failed is not None:
                raise _again(self._failed)
            if self._busy:
                if self._queued is None:
                    self._queued = (outbox, group_metadata)
                else:
                    self._queued[0].merge(outbox)
                    self._queued = (self._queued[0], group_metadata)
                return
            self._busy = True
            self._start = (outbox, group_metadata)
            self._cond.notify_all()

    def wait_for_room(self) -> None:
        """Until fewer than `QUEUE_MAX` messages wait behind the transaction in flight
        (at once if so): the loop is far ahead of the commits, so let them catch up
        (`submit` waits here)."""
        with self._cond:
            while self._busy and self._queued is not None \
                    and len(self._queued[0].messages) >= QUEUE_MAX and self._failed is None:
                self._wait_in_flight()

    def wait(self) -> None:
        """Until everything submitted is committed; the `then` callbacks run here, in
        the caller's thread. Raises `CommitFailed`, also for a transaction in flight
        for longer than `STALLED_AFTER`."""
        with self._cond:
            while self._busy and self._failed is None:
                self._wait_in_flight()
        self._callbacks()

    def _wait_in_flight(self) -> None:
        """Wait (holding `_cond`) for the commit thread to move on, unless the
        transaction in flight has stalled."""
        if not self._stalled():
            self._cond.wait(1.0)

    def _stalled(self) -> bool:
        """Whether the transaction in flight began more than `STALLED_AFTER` seconds
        ago (holding `_cond`); if so, it and everything submitted after it fail."""
        began = self._began
        if began is None or monotonic() - began <= STALLED_AFTER:
            return False
        self._failed = CommitFailed(
            f"transaction failed: neither committed nor aborted {STALLED_AFTER:.0f} s "
            f"after it began", KafkaError(KafkaError._TIMED_OUT, "transaction stalled"),
            monotonic() - began)
        self._cond.notify_all()
        return True

    def _callbacks(self) -> None:
        with self._cond:
            if self._failed is not None:
                raise _again(self._failed)
            done, self._committed = self._committed, []
        for callback in done:
            callback()

    def _serve(self) -> None:
        """The commit thread, one for the producer's life. Why not a thread per
        transaction begun while none was in flight: `Thread.start` waits until the new
        thread runs, and on a busy machine the loop stood still for the scheduler and
        the GIL handover (docs/worker.md, "The loop")."""
        while True:
            with self._cond:
                while self._start is None and not self._closed:
                    self._cond.wait()
                if self._start is None:
                    return
                (outbox, group_metadata), self._start = self._start, None
            self._run(outbox, group_metadata)

    def _run(self, outbox: Outbox, group_metadata: Any) -> None:
        """One busy stretch of the commit thread: the outbox, then whatever was queued
        meanwhile, until nothing is left (or a transaction fails: the worker stops)."""
        while True:
            with self._cond:
                self._began = monotonic()
            try:
                self._commit(outbox, group_metadata)
            except BaseException as exc:  # noqa: BLE001 - handed to the worker's thread
                with self._cond:
                    if self._failed is None:
                        self._failed = exc
                    self._busy, self._queued, self._began = False, None, None
                    self._cond.notify_all()
                return
            with self._cond:
                if self._failed is not None:  # stalled meanwhile: the worker gave it up
                    self._busy, self._queued, self._began = False, None, None
                    return
                self._committed.extend(outbox.after_commit)
                if self._queued is None:
                    self._busy, self._began = False, None
                    self._cond.notify_all()
                    return
                (outbox, group_metadata), self._queued = self._queued, None
                self._cond.notify_all()

    def _commit(self, outbox: Outbox, group_metadata: Any) -> None:
        """Produce `outbox`'s messages and commit its offsets in one transaction."""
        producer = self.producer
        begun = perf_counter()
        try:
            producer.begin_transaction()
            self._produce(outbox.messages)
            self._produce(outbox.latest.values())
            if outbox.offsets:
                producer.send_offsets_to_transaction(
                    [TopicPartition(t, p, o) for (t, p), o in outbox.offsets.items()],
                    group_metadata, 60)
            producer.commit_transaction(60)
            if self._timed is not None and outbox.submitted is not None:
                self._timed(begun - outbox.submitted, perf_counter() - begun)
        except KafkaException as exc:
            error = exc.args[0]
            if getattr(error, "txn_requires_abort", lambda: False)():
                try:  # the next producer's init_transactions aborts it if this cannot
                    producer.abort_transaction(30)
                except KafkaException:
                    pass
            raise CommitFailed(f"transaction failed: {error.str()}", error,
                               perf_counter() - begun) from None

    def _produce(self, messages: Iterable[Outgoing]) -> None:
        # typed loosely: the stubs take headers as an invariant list of a wider element
        # type than the outbox's (name, bytes) pairs, which the producer copies as they are
        produce: Callable[..., None] = self.producer.produce
        for topic, value, key, partition, headers in messages:
            while True:
                try:
                    produce(topic, value, key, partition, headers=headers)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    self.producer.poll(0.05)

    def end_hung(self, partitions: Iterable[tuple[str, int]],
                 offsets: Sequence[TopicPartition] = (), group_metadata: Any = None) -> None:
        """Abort one transaction over `partitions` (a keyed null record to each, never
        visible to a read_committed reader) and, with the consumer's group metadata,
        over `offsets` for the group, once everything submitted is committed (raises
        `CommitFailed` as `wait` does). Its abort markers end whatever this producer id
        left open on those partitions (`hung`): a transaction is ended on a partition
        only by a marker of its producer id there."""
        self.wait()
        producer = self.producer
        producer.begin_transaction()
        try:
            self._produce((topic, None, HUNG_KEY, p, None) for topic, p in partitions)
            if offsets:
                producer.send_offsets_to_transaction(list(offsets), group_metadata, 30)
            # delivered, so each partition is in the transaction: an abort purges
            # what is still queued, and a purged record adds no partition
            if producer.flush(30):
                raise CommitFailed("records ending hung transactions were not delivered",
                                   KafkaError(KafkaError._TIMED_OUT, "flush timed out"))
        finally:
            producer.abort_transaction(30)

    def abandon(self) -> None:
        """Give up what is submitted and not committed, for a worker closing its tasks
        dirty: nothing more begins, and `submit` and `wait` raise. A call in flight on
        the commit thread is left to end by itself (a librdkafka call cannot be
        interrupted): the worker's next producer, with the same transactional id,
        fences this one, and its `init_transactions` returns only once this one's open
        transaction is committed or aborted, for good."""
        with self._cond:
            self._closed = True
            self._start = self._queued = None
            if self._failed is None:
                self._failed = CommitFailed("abandoned: the worker's tasks were closed dirty")
            self._cond.notify_all()

    def close(self) -> None:
        """Wait for the transactions submitted (raises `CommitFailed`), stop the commit
        thread, then flush."""
        try:
            self.wait()
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
            self._thread.join()
            self.producer.flush(10)


def _again(failed: BaseException) -> CommitFailed:
    """The commit thread's failure, as the worker's thread raises it."""
    if isinstance(failed, CommitFailed):
        return failed
    again = CommitFailed(f"transaction failed: {failed!r}")
    again.__cause__ = failed
    return again
