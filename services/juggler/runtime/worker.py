"""The worker: one consumer-group member running tasks like a Kafka Streams instance.

    JugglerWorker(Settings.from_env()).run(serve_apart)  # blocks; what `juggler worker` does

One loop, one thread: fetch a batch of records and route it to the tasks (task p owns
partition p of every stream topic and of the fanout topic; the range assignor gives
them to one member) and to the control task (the control topic's only partition); let
the control task decide its commands; clear what may be taken; let every task take
what its arrival order allows; commit everything the round produced, with the input
offsets, in one transaction, which runs in the background while the next round fetches
and evaluates (`Transactions.submit`). When Kafka fails under the loop (a broker outage,
a transaction that does not commit), the worker closes its tasks dirty and, once the
cluster answers, runs the loop again from the last committed round (`_supervise`,
`recovery`); only what it cannot get past stops the process (status 70).

Why not Faust: the contract's arrival order needs, per task, the log-end offset of each
input partition, pausing single partitions, and offsets committed exactly where the
order stands. Faust's consumer offers none of these, and its exactly-once path needed
six patches of its internals that still lost records (docs/worker.md, "Why not Faust").
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import threading
import time
from importlib.metadata import PackageNotFoundError, version
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from confluent_kafka import (OFFSET_BEGINNING, TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaError,
                             KafkaException, Message, TopicPartition)

from juggler.kafka.delivery import ControlError
from juggler.kafka.client_log import client_log, stamp
from juggler.kafka.offsets import (TP, UNSTABLE_WAIT, log_ends, open_transactions,
                                   stable_offsets, still_open)
from juggler.runtime import restore, settings_log
from juggler.runtime.arrival import Input
from juggler.runtime.clearance import Clearance
from juggler.runtime.control_plane import ControlTask
from juggler.runtime.job import FAILURE_EXIT, Job
from juggler.runtime.metrics import WorkerMetrics
from juggler.runtime.pages import EMPTY, Pages, Registered, Scrape, TaskView
from juggler.runtime.pages import take as take_pages
from juggler.runtime.recovery import Backoff, Unrecoverable, diagnose
from juggler.runtime.results_store import TRIM_INTERVAL, CodecOptions, ResultsStore
from juggler.runtime.settings import Settings
from juggler.runtime.task import PartitionTask, Record, RoundCounts
from juggler.runtime.transactions import Outbox, Transactions

log = logging.getLogger(__name__)

REFRESH_EVERY = 0.005
"""Seconds between two questions for the same partition's log end."""
ANSWER_POLL = 0.001
"""The poll's timeout while a clearance is under way: nothing wakes the consumer's poll
when the answer arrives, and the records waiting for it should not wait for the next
fetch too."""
HIGHS_EVERY = 1.0
"""Seconds between two copies of the consumer's high watermarks for the lag metric,
which Prometheus scrapes every few seconds at most."""
FETCH_WAIT_MS = 5
FETCH_MIN_BYTES = 65_536
"""The consumer's fetch requests: the broker answers once it holds this many bytes for
them or after `FETCH_WAIT_MS`. With librdkafka's 1 byte, live records arriving every
few milliseconds each completed a fetch of their own, and each fetch a round of the
loop (clearance, transaction) on a few records; batched, live latency falls
(docs/worker.md, "The loop"). A record at a trickle waits up to `FETCH_WAIT_MS` more;
a backlog is unaffected (the bytes are there)."""
GC_YOUNG_THRESHOLD = 10_000
"""Allocations between two collections of the cyclic collector's youngest generation
(CPython's default: 700). A round allocates tens of objects per record (decoded events,
results, outgoing messages), nearly all freed by their reference counts within the
round; at 700 the collector ran every few records, and the older generations' passes
it triggers walked everything the buffers and the held-event tracker keep alive
(docs/worker.md, "State and restore", gives the loop's share they took)."""


class Listening(Protocol):
    """A started HTTP port."""

    @property
    def port(self) -> int: ...


Serve = Callable[["JugglerWorker", str, int, "str | None"], Listening]
"""Starts the HTTP port on a worker: (worker, host, port, bearer token) -> the port."""


class JugglerWorker(Job):
    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.tasks: dict[int, PartitionTask] = {}
        self.control: ControlTask | None = None
        self.metrics = WorkerMetrics(self)
        self.pages: Pages = EMPTY
        """What the HTTP pages read of the tasks, as of the end of the last round
        (`pages`): replaced whole, never changed, so the HTTP thread reads it without
        waiting for the loop, which alone touches the tasks."""
        self.registered = Registered()
        """The registered queries as `pages` last took them."""
        self.ready = False
        """True once the group assigned this worker its partitions (possibly none) and
        they are restored: `/health` answers 200 from then on, until the next rebalance."""
        self.consumer: Consumer | None = None
        self.transactions: Transactions | None = None
        self.clearance: Clearance | None = None
        """The loop's clients and the clearance protocol's state, for one run of the
        loop (`_loop`): a failure under it drops them with the tasks (`_close_dirty`)."""
        self._fault: tuple[float, str] | None = None
        """(since when, what) of the Kafka failure the worker is recovering from, until
        its tasks are restored again."""
        self._refused: str | None = None
        """Why this worker stays out of its group (`_await_agreement`), until it joins."""
        self._backoff = Backoff()
        self._outages = 0
        """`ClientLog.outages` when the admin client was last made (`renew_admin`)."""
        self._assigned = False
        self._stop = threading.Event()
        self._committed: dict[tuple[str, int], int] = {}
        self._starts: dict[TP, int | None] = {}
        """The group's committed offset of each assigned partition (None: none yet), read
        at the assignment: where the consumer starts it (`_on_assign`), and what the
        restore rebuilds the tasks to, so the two cannot disagree."""
        self._revoked: dict[int, PartitionTask] = {}
        """Tasks revoked by the rebalance under way: kept until the assignment shows
        whether they come back (then `restore.assigned` reuses them)."""
        self._epoch = 0
        self._generation = 0
        """Counts assignments and revocations: a clearance answer asked before one is
        dropped (`Clearance.clear`), and the group metadata is asked again."""
        self._group_meta: tuple[int, Any] | None = None
        self._paused: set[tuple[str, int]] = set()
        self._highs: dict[tuple[str, int], int] = {}
        self._highs_at = float("-inf")
        self.stream_of_topic = {self.names.stream(s): s for s in self.streams}

    # what the HTTP port and the metrics read ------------------------------------------

    def restored_tasks(self) -> list[PartitionTask]:
        """The tasks whose engines may be read (by `pages.take`, on the loop's thread)."""
        return [t for t in list(self.tasks.values()) if t.restored]

    def high_watermark(self, topic: str, partition: int) -> int | None:
        return self._highs.get((topic, partition))

    def scrape(self) -> Scrape:
        return self.pages.scrape

    def _publish_pages(self) -> None:
        """Replace what the pages read (`pages`) with the tasks as they are now: at the
        end of each round, and where a rebalance or a fault changes which tasks there
        are (the restore that follows takes a while, and a page must not show a
        partition gone, or miss one being restored, meanwhile)."""
        self.pages = take_pages(self, self.registered)
        self.registered.published.value = self.registered.taken  # after: see `Registered`

    # the loop -------------------------------------------------------------------------

    def run(self, serve: Serve) -> None:
        """Consume, process and commit until SIGTERM/SIGINT; exit 70 on a failure the
        worker cannot recover from by itself (`recovery`). `serve` starts the HTTP port
        on this worker (`juggler.serving.page_feed.serve_apart`): the serving layer
        reads the runtime, so the runtime is handed it rather than importing it."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self._stop.set())
        _, *older = gc.get_threshold()
        gc.set_threshold(GC_YOUNG_THRESHOLD, *older)
        self.results_store = ResultsStore(
            self.client_config, self.names.all_results,
            CodecOptions(self.settings.schemas_dir, self.settings.registry_url),
            self.settings.loglevel, self.settings.results_trim_interval or TRIM_INTERVAL)
        self.results_store.start()
        server = serve(self, self.settings.web_host, self.settings.web_port,
                       self.settings.web_token)
        log.info("juggler worker %s: bootstrap %s (%s), HTTP on http://%s:%d%s, "
                 "%d partitions, app id %r", _version(), self.settings.bootstrap,
                 self.client_config["security.protocol"], self.settings.web_host,
                 server.port, " (bearer token required)" if self.settings.web_token else "",
                 self.partitions, self.settings.app_id)
        try:
            if self._await_agreement():
                self._supervise()
        except Exception as exc:
            log.critical("worker failed: %s; exiting with status %d", exc, FAILURE_EXIT,
                         exc_info=True)
            for handler in logging.getLogger().handlers:
                handler.flush()
            sys.stderr.flush()
            os._exit(FAILURE_EXIT)
        self.results_store.stop()
        log.info("worker stopped")

    def _await_agreement(self) -> bool:
        """Join the group only with its settings (`settings_log`): until this worker's
        are the group's, it takes no partition, says why in its log and on `/health`,
        and reads the group's again every `RECHECK_EVERY` seconds (an operator may reset
        them meanwhile). True once they agree; False if stopped first."""
        mine = self.group_settings()
        while not self._stop.is_set():
            try:
                reason, level = settings_log.agree(self, mine, self.instance), logging.ERROR
            except (KafkaException, ControlError) as exc:
                reason = f"cannot read the group's settings from {self.names.settings}: " \
                         f"{exc}; asking again"
                level = logging.WARNING
            if reason is None:
                self._refused = None
                return True
            if reason != self._refused:
                log.log(level, "%s", reason)
            self._refused = reason
            self._stop.wait(settings_log.RECHECK_EVERY)
        return False

    def _supervise(self) -> None:
        """Run the loop until stopped. When Kafka fails under it in a way the worker can
        recover from (`recovery.diagnose`), close the tasks dirty, wait (backing off)
        until the cluster answers, and run it again: its new producer fences the old
        one's epoch, and its assignment restores every task from the committed state
        and offsets, as a restart would, while the HTTP server, the metrics and the
        results index stay up. Raises what it cannot recover from."""
        while not self._stop.is_set():
            try:
                self._loop()
                return
            except Exception as exc:
                try:
                    what = diagnose(exc)
                except Unrecoverable as unrecoverable:
                    raise unrecoverable from exc
                if self._fault is None:
                    self._fault = (time.time(), what)
                self.metrics.recoveries.inc()
                log.warning("Kafka failed under the loop (%s): the tasks are closed dirty "
                            "and resume from the last committed round once the cluster "
                            "answers", what)
                consumer = self._close_dirty()
                answers = self._await_cluster()
                _close_quietly(consumer)  # now its leaving the group reaches the broker
                if not answers:
                    return
                self._outages = client_log().outages
                self.renew_admin()

    def _close_dirty(self) -> Consumer | None:
        """Abandon the transactions not committed and drop every task, as if the process
        had died; returns the consumer, to close once the cluster answers (its leaving
        the group must reach the broker, or the next rebalance waits for it)."""
        self.ready = False
        if self.clearance is not None:
            self.clearance.close()
        if self.transactions is not None:
            self.transactions.abandon()
        consumer, self.consumer = self.consumer, None
        self.tasks, self.control, self._revoked, self.clearance = {}, None, {}, None
        self._committed, self._paused, self._starts = {}, set(), {}
        self._assigned, self._group_meta, self._highs = False, None, {}
        self._generation += 1
        self._publish_pages()
        return consumer

    def _await_cluster(self) -> bool:
        """Back off until the cluster answers (False if the worker is stopped meanwhile);
        raises `Unrecoverable` if it refuses this worker's credentials meanwhile."""
        began = time.time()
        while not self._stop.wait(self._backoff.next()):
            refused = client_log().refused_since(began)
            if refused is not None:
                raise Unrecoverable(f"the cluster refuses this worker: {refused}")
            try:
                self.admin.list_topics(self.names.control, timeout=5)
            except KafkaException as exc:
                log.debug("the cluster does not answer yet: %s", exc)
                continue
            log.info("the cluster answers after %.0f s; the tasks restore from the last "
                     "committed round", time.time() - began)
            return True
        return False

    def unavailable(self) -> str | None:
        """Why the worker cannot commit or restore now, as `/health` says it, or None."""
        if self._refused is not None:
            return self._refused
        down = super().unavailable()
        if down is not None or self._fault is None:
            return down
        since, what = self._fault
        return f"cannot commit since {stamp(since)} ({what}); resuming from the last " \
               f"committed round"

    def _loop(self) -> None:
        settings = self.settings
        transactions = self.transactions = Transactions(
            self.client_config, f"{settings.app_id}-{self.instance}", self.max_record_bytes,
            self.metrics.transaction_done)
        self._end_hung(transactions)
        clearance = self.clearance = Clearance(self.admin, settings.app_id, self.names,
                                               self.stream_of_topic,
                                               self.metrics.clearance.observe)
        consumer = self.consumer = Consumer({
            **self.client_config,
            "group.id": settings.app_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "range",
            "session.timeout.ms": int((settings.session_timeout or 45.0) * 1000),
            "heartbeat.interval.ms": int(max(0.2, (settings.session_timeout or 45.0) / 10) * 1000),
            "max.poll.interval.ms": 900_000,
            "fetch.wait.max.ms": FETCH_WAIT_MS,
            "fetch.min.bytes": FETCH_MIN_BYTES,
            "log_level": 3,
        })
        topics = [*self.stream_of_topic, self.names.fanout, self.names.control]
        consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                           on_lost=self._on_revoke)
        timeout = 0.1
        clock = self.clock
        while not self._stop.is_set():
            clock.enter("poll")
            messages = self._fetch(consumer, timeout)
            self._epoch += 1
            if client_log().outages != self._outages:  # the loop rode one out
                self._outages = client_log().outages
                self.renew_admin()
                clearance.renew_admin(self.admin)
            self._note_high_watermarks(consumer)
            if messages:
                self.metrics.batches.observe(len(messages))
            elif timeout > 0 and not clearance.busy:
                clock.enter("commit")
                # idle: nothing to overlap, so let the transaction in flight finish
                # and its round's counts reach the metrics now, not a round later.
                # Not when the last round left records it could take at once (a
                # backlog fetched to its end): waiting there put every transaction
                # back on the loop's path (docs/worker.md, "The loop")
                transactions.wait()
            clock.enter("other")
            self._restore_new(transactions)
            clock.enter("decode")
            self._route(messages)
            clock.enter("other")
            timeout = self._round(consumer, transactions, clearance)
            self._publish_pages()
        # stopped: close in order (after a failure `_supervise` closes what is left)
        clearance.close()
        try:
            transactions.close()
        finally:
            consumer.close()

    def _fetch(self, consumer: Consumer, timeout: float) -> list[Message]:
        """What the consumer holds, up to `batch_max` records, waiting up to `timeout`
        only while it holds nothing. Not `consume(batch_max, timeout)`: that waits for a
        full batch or the timeout, so at a trickle every record waited the timeout."""
        first = consumer.poll(timeout)
        if first is None:
            return []
        return [first, *consumer.consume(self.settings.batch_max - 1, timeout=0)]

    def _note_high_watermarks(self, consumer: Consumer) -> None:
        """Copy the consumer's cached high watermarks of the owned stream partitions
        for `high_watermark`, from the loop's own thread, at most every
        `HIGHS_EVERY` seconds (a dictionary lookup per partition)."""
        now = time.monotonic()
        if now - self._highs_at < HIGHS_EVERY:
            return
        self._highs_at = now
        self._highs = {(topic, p): consumer.get_watermark_offsets(
                           TopicPartition(topic, p), cached=True)[1]
                       for topic in self.stream_of_topic for p in list(self.tasks)}

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if consumer is not self.consumer:
            return  # a consumer closed after a failure: its tasks are gone already
        assert self.clearance is not None  # made with the consumer (`_loop`)
        self._generation += 1
        self._start_at_committed(consumer, partitions)
        for tp in partitions:
            if tp.topic == self.names.control:
                self.control = ControlTask(self)
                self.clearance.control_moved()
            elif tp.partition not in self.tasks:
                task = self._revoked.pop(tp.partition, None)
                self.tasks[tp.partition] = task or PartitionTask(self, tp.partition)
        self._revoked.clear()
        self._assigned, self.ready = True, False
        self._publish_pages()
        log.info("assigned partitions %s%s", sorted(self.tasks),
                 " and the control partition" if self.control else "")

    def _start_at_committed(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Assign `partitions` at the group's committed offsets as the worker reads them
        (`kafka.offsets.group_offsets`), instead of letting the consumer look them up.

        Why: after a broker restart librdkafka's own lookup can fail for a partition,
        and the consumer then falls back on `auto.offset.reset` without a word; the
        worker, its tasks restored to the committed state, evaluated the partition
        again from the log's start (late events and duplicated results, seen once in
        12 runs of two quick outages). Read here, a failed lookup raises and the worker
        recovers (`recovery`); what the consumer starts from and what the restore
        rebuilds to are the same read."""
        committed = stable_offsets(self.admin, self.settings.app_id,
                                   [(tp.topic, tp.partition) for tp in partitions],
                                   lambda last: self._end_pending(consumer, last))
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING if offset is None else offset)
                         for (topic, p), offset in committed.items()])
        self._starts = committed

    def _end_hung(self, transactions: Transactions) -> None:
        """End the transactions this worker's transactional id left open on the topics
        it writes (`Transactions.end_hung`), before anything reads them.

        Why: a single broker stopped while its transaction coordinator writes a
        transaction's markers finds no leader for the partitions (its own are being
        taken from it), and skips them for good ("Couldn't find leader endpoint ...
        can be skipped"): the transaction stays open on every one of them, so nothing
        after it is ever read_committed (restore, results, the group's offsets). The
        new producer's `init_transactions` ended whatever the coordinator knows of, so
        what it left open on a partition now is such a leftover, and only this
        producer id can end it. Aborted, it is as if that round never committed
        anywhere, and the tasks redo it from the offsets committed before it."""
        names = self.names
        fixed = {names.control, names.status, names.fanout, names.deadletter, names.state,
                 names.all_results}
        topics = self.admin.list_topics(timeout=10).topics
        hung = open_transactions(self.admin, [
            (topic, p) for topic, meta in topics.items()
            if topic in fixed or topic.startswith(names.own_results_prefix)
            for p in meta.partitions])
        if hung:  # or another worker's transactions in flight: the abort leaves those be
            log.info("a transaction is open on %d partitions this worker writes (%s): "
                     "ending what its own transactional id left there", len(hung),
                     ", ".join(f"{t}-{p}" for t, p in sorted(hung)))
            transactions.end_hung(list(hung))
            left = still_open(self.admin, hung, UNSTABLE_WAIT)
            if left:
                log.error("transactions of another transactional id stay open on %s: "
                          "nothing after them is read_committed until they end (Kafka's "
                          "kafka-transactions.sh find-hanging, abort)",
                          ", ".join(f"{t}-{p}" for t, p in sorted(left)))

    def _end_pending(self, consumer: Consumer, last: dict[TP, int | None]) -> None:
        """End what this worker's transactional id may have left pending on the group's
        offsets (`Transactions.end_hung`; `last`: the offsets last committed), as
        `_end_hung` does on the topics it writes."""
        assert self.transactions is not None  # made with the consumer (`_loop`)
        log.warning("the group's committed offsets stay unstable for %.0f s (a transaction "
                    "pending on them); ending what this worker's transactional id left "
                    "pending there", UNSTABLE_WAIT)
        self.transactions.end_hung(
            (), [TopicPartition(t, p, 0 if offset is None else offset)
                 for (t, p), offset in last.items()], consumer.consumer_group_metadata())

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if consumer is not self.consumer:
            return  # a consumer closed after a failure: its tasks are gone already
        assert self.transactions is not None and self.clearance is not None  # (`_loop`)
        self.transactions.wait()  # a revoked task keeps the offsets committed for it
        self._generation += 1
        for tp in partitions:
            if tp.topic == self.names.control:
                self.control = None
                self.clearance.control_moved()
                self._assigned = self.ready = False
            elif tp.partition in self.tasks:
                self._assigned = self.ready = False
                self._revoked[tp.partition] = self.tasks.pop(tp.partition).revoked(
                    self._committed)
                self.clearance.forget(tp.partition)
            self._committed.pop((tp.topic, tp.partition), None)
            self._paused.discard((tp.topic, tp.partition))
        self._publish_pages()
        log.info("partitions revoked; now %s", sorted(self.tasks))

    def _restore_new(self, transactions: Transactions) -> None:
        fresh = [t for t in self.tasks.values() if not t.restored]
        control = self.control if self.control is not None and not self.control.restored \
            else None
        if fresh or control is not None:
            transactions.wait()  # restore reads the state topic up to its end
            t0 = time.monotonic()
            restore.assigned(self, fresh, control, self._starts)
            if fresh:
                log.info("restored partitions %s in %.1fs: %d queries, %d events held",
                         sorted(t.partition for t in fresh), time.monotonic() - t0,
                         max((len(t.texts) for t in self.tasks.values()), default=0),
                         sum(sum(t.engine.held_events().values())
                             for t in self.tasks.values()))
            # the pages see the restored tasks before `/health` says ready, so a client
            # that waited for it never reads the queries or progress of before
            self._publish_pages()
        self.ready = self._assigned
        if self.ready and self._fault is not None:
            log.info("resumed from the last committed round, %.0f s after Kafka failed "
                     "(%s)", time.time() - self._fault[0], self._fault[1])
            self._fault = None
            self._backoff.reset()

    def _route(self, messages: list[Message]) -> None:
        """Hand a fetched batch to the tasks and the control task. Stream records go as
        one group per (topic, partition), in the batch's order (Kafka's offset order
        within a partition, though partitions may interleave), so a task decodes and
        orders each group in one call rather than one call per record."""
        now = time.monotonic()
        groups: dict[tuple[str, int], list[Record]] = {}
        stream_of_topic = self.stream_of_topic
        fanout = self.names.fanout
        # read untyped: confluent-kafka's stubs make a message's topic, partition,
        # offset and headers optional, which they are only on an error (skipped here),
        # and a check per record would cost the loop for nothing
        fetched: list[Any] = messages
        for m in fetched:
            error = m.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                if error.fatal():
                    raise KafkaException(error)
                log.warning("consumer: %s (librdkafka retries)", error)
                continue
            topic, partition = m.topic(), m.partition()
            kind, stamp = m.timestamp()
            record = Record(topic, partition, m.offset(), m.key(), m.value(), stamp,
                            m.headers(), kind == TIMESTAMP_LOG_APPEND_TIME)
            if topic in stream_of_topic:
                group = groups.get((topic, partition))
                if group is None:
                    groups[(topic, partition)] = [record]
                else:
                    group.append(record)
            elif topic == fanout:
                task = self.tasks.get(partition)
                if task is not None:
                    task.add_barrier(record)
            elif self.control is not None:
                self.control.add(record)
        for (topic, partition), records in groups.items():
            task = self.tasks.get(partition)
            if task is not None:
                task.add_many(stream_of_topic[topic], records, self._epoch, now)

    def _round(self, consumer: Consumer, transactions: Transactions,
               clearance: Clearance) -> float:
        """One round: control, clearance, tasks, commit; the next poll's timeout."""
        control = self.control
        if control is not None and (control.pending or self._control_behind(control)):
            outbox, counts = Outbox(), RoundCounts()
            control.run(outbox, counts)
            self._commit(consumer, transactions, outbox, counts)
            transactions.wait()  # clearance below needs the control offset committed
            # and asks it of the group once more: commit_transaction returns before the
            # broker has written the markers that make the fanout copies readable, and
            # the group answers a stable offset only once its own marker is written
            clearance.control_moved()
        self._update_positions(consumer)
        clearance.clear(self.tasks, self.control is not None, self._epoch, self._generation)
        outbox, counts = Outbox(), RoundCounts()
        now = time.monotonic()
        refresh: list[tuple[PartitionTask, Input]] = []
        until: float | None = None
        busy = False
        for task in list(self.tasks.values()):
            wait = task.run(outbox, counts, self.settings.batch_max, now)
            if wait is None:
                busy = True
                continue
            refresh.extend((task, inp) for inp in wait.refresh)
            if wait.until is not None:
                until = wait.until if until is None else min(until, wait.until)
        self.clock.enter("commit")
        self._commit(consumer, transactions, outbox, counts)
        self.clock.enter("other")
        if refresh:
            self._refresh_ends(refresh)
            return 0.0
        self._flow_control(consumer)
        if busy:
            return 0.0
        timeout = 0.1 if until is None else max(0.0, min(0.1, until - time.monotonic()))
        return min(timeout, ANSWER_POLL) if clearance.busy else timeout

    def _commit(self, consumer: Consumer, transactions: Transactions, outbox: Outbox,
                counts: RoundCounts) -> None:
        """Submit the round's transaction; it commits while the next round runs.
        `_committed` counts it as committed at once: if it fails, every task is closed
        dirty and `_committed` with them."""
        for tp, offset in list(outbox.offsets.items()):
            if self._committed.get(tp) == offset:
                del outbox.offsets[tp]
        if outbox.empty():
            return
        self.metrics.handed_over(counts)
        outbox.then(lambda: self.metrics.count(counts))
        transactions.submit(outbox, self._group_metadata(consumer))
        self._committed.update(outbox.offsets)

    def _group_metadata(self, consumer: Consumer) -> Any:
        """The consumer's group metadata for `send_offsets_to_transaction` (KIP-447:
        the generation fences a worker whose partitions moved on), asked once per
        assignment: librdkafka answers it from its main thread, a thread round trip too
        costly to make every round (docs/worker.md, "Exactly once"). A rebalance calls
        `_on_assign`/`_on_revoke`, which move `_generation` on; a stale metadata could
        only make a commit fail (fenced), which closes the tasks dirty."""
        if self._group_meta is None or self._group_meta[0] != self._generation:
            self._group_meta = (self._generation, consumer.consumer_group_metadata())
        return self._group_meta[1]

    def _control_behind(self, control: ControlTask) -> bool:
        """Whether the control partition's position passed what was committed there
        with nothing left to decide (a marker after the task's own copies)."""
        position = control.position
        return position is not None and position > self._committed.get((self.names.control, 0), -1)

    def _update_positions(self, consumer: Consumer) -> None:
        """Each input's position (next offset to deliver, past transaction markers)."""
        tps = [TopicPartition(topic, p) for p, task in self.tasks.items()
               for topic in task.topic_of.values()]
        tps += [TopicPartition(self.names.fanout, p) for p in self.tasks]
        control = self.control
        if control is not None:
            tps.append(TopicPartition(self.names.control, 0))
        for tp in consumer.position(tps):
            if tp.offset < 0:
                continue
            if control is not None and tp.topic == self.names.control:
                control.position = tp.offset
                continue
            task = self.tasks[tp.partition]
            if tp.topic == self.names.fanout:
                task.order.barrier_position = max(task.order.barrier_position or 0, tp.offset)
            else:
                inp = task.order.inputs[self.stream_of_topic[tp.topic]]
                inp.position = max(inp.position or 0, tp.offset)

    def _refresh_ends(self, refresh: list[tuple[PartitionTask, Input]]) -> None:
        now = time.monotonic()
        wanted = {(task.topic_of[inp.stream], task.partition): inp
                  for task, inp in refresh if now - inp.end_at >= REFRESH_EVERY}
        if not wanted:
            time.sleep(REFRESH_EVERY)
            return
        asked, epoch = time.monotonic(), self._epoch
        ends = log_ends(self.admin, wanted)
        for tp, end in ends.items():
            wanted[tp].end, wanted[tp].end_at, wanted[tp].end_epoch = end, asked, epoch

    def _flow_control(self, consumer: Consumer) -> None:
        """Pause a stream partition whose buffer is full, resume it once half empty."""
        limit = self.settings.buffer_max
        pause, resume = [], []
        for p, task in self.tasks.items():
            for stream, inp in task.order.inputs.items():
                tp = (task.topic_of[stream], p)
                if len(inp.buffer) >= limit and tp not in self._paused:
                    pause.append(tp)
                elif len(inp.buffer) <= limit // 2 and tp in self._paused:
                    resume.append(tp)
        if pause:
            consumer.pause([TopicPartition(t, p) for t, p in pause])
            self._paused.update(pause)
        if resume:
            consumer.resume([TopicPartition(t, p) for t, p in resume])
            self._paused.difference_update(resume)

    # progress -------------------------------------------------------------------------

    def progress(self, restored: Sequence[TaskView]) -> dict[str, Any]:
        """Per owned partition and input of the `restored` tasks: the next offset to
        process against the log end as last asked."""
        parts = {}
        for task in sorted(restored, key=lambda t: t.partition):
            p = task.partition
            inputs = {}
            delays = task.order.delays_ms()
            for stream, inp in task.order.inputs.items():
                inputs[task.topic_of[stream]] = {
                    "processed": inp.next_offset(), "log_end": inp.end,
                    "buffered": len(inp.buffer), "delay_ms": delays[stream]}
            parts[str(p)] = {"restored": True, "inputs": inputs,
                             "pending_commands": len(task.order.barriers)}
        return {"partitions": parts, "restoring": sorted(set(self.tasks) - {int(p) for p in parts}),
                "control": self.control is not None}


def _close_quietly(consumer: Consumer | None) -> None:
    """Close a consumer left by a failure; one that fails to close is left to the
    group's session timeout."""
    if consumer is None:
        return
    try:
        consumer.close()
    except Exception as exc:  # noqa: BLE001 - the consumer is dropped either way
        log.warning("closing the consumer after a failure: %s", exc)


def _version() -> str:
    try:
        return version("juggler")
    except PackageNotFoundError:
        return "dev"
