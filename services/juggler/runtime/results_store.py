"""An index of the results topics, so `GET /queries/<id>/results` answers from a local
table instead of a consumer per request.

The topics stay the store of record (retained, read_committed, positions that never
change); this is a cache of them: a process of its own reads every partition of the
shared `juggler.results`, and of each query's own results topic once a query registered
here has one (`follow`), from the beginning, and appends each committed result to an
SQLite table keyed by (query, topic, partition, offset), with the offsets indexed so
far in the same transaction. A page is one indexed range scan per partition, so a read
costs the same whether a topic holds ten results or ten million, and many readers do
not slow the worker (SQLite in WAL mode: readers never wait for the writer). Cursors
hold, per partition of the query's topic, the next offset to read.

Each result is kept as the JSON text the API sends, so a page is a concatenation of
rows (`results_api.page_body`), with nothing decoded or encoded per request. A
worker's result is written as that text in Rust (`index_row`), under a tenth of the cost of
decoding it and calling `json.dumps`, which every other message still takes.

Why a process and not a thread: decoding every result, writing its JSON and inserting
it took a quarter of the worker's interpreter on K (100 join queries, 1.5 results per
event), time its processing loop spent waiting for the GIL. The indexer shares nothing
with the worker but the SQLite file, a queue of topics to follow and a stop event; it
stops on that event, and by itself when the worker's process is gone (a SIGKILL or
`os._exit` runs no clean-up).

Why SQLite: it is in the standard library, indexes and pages exactly as needed, and
needs no server. The table lives in a temporary directory and is rebuilt from the topics
at every start (the topics are what is durable).

The indexing process can fail on its own (a full disk: `database or disk is full`), and
a cache that stops silently makes the API serve a fraction of the results as if that
were all. So the store watches it (`_watch`, a thread of the worker's process): a
failed indexer is counted, said on `/health` and in every page (`behind`), and started
again with back-off; the new one resumes from the `ends` table rather than rebuilding,
because a transaction that failed left nothing half-written, what is indexed stays
correct, and a rebuild would need again the space a full disk just lacked. The watch
also measures the index's lag (records of its topics' committed log ends not yet
indexed), so a page says when the index is behind the topic.

The index follows the topics' retention, or it would grow without bound and serve
results Kafka has deleted: every `TRIM_INTERVAL` the indexing process asks each indexed
partition's log start and deletes the results below it (`results_table.trim`); a
cursor from before simply continues from the first result kept. And it leaves nothing behind: `stop`
removes its directory, so does the interpreter's exit when nobody stopped it, and so
does the indexing process when the worker's process died without any clean-up (every
restart left a directory of its own: 7.2 GB of them in one /tmp).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import queue
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient

from juggler.codec.avro import RESULT, Codec, CodecError
from juggler.engine.rust_core import result_json
from juggler.kafka.client_log import client_log, unwatched, watched
from juggler.kafka.offsets import log_ends
from juggler.logs import log_to_stderr
from juggler.runtime import results_table
from juggler.runtime.recovery import Backoff
from juggler.runtime.results_table import TP, Row
from juggler.wire.names import QUERY_HEADER

if TYPE_CHECKING:
    from multiprocessing.context import SpawnProcess
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Event

log = logging.getLogger(__name__)

INDEX_NICENESS = 10
"""How much the indexing process lowers its own CPU priority (`os.nice`). The index is a
cache that may lag; the worker's loop, the commit thread and (on a small machine) the
broker are the path of every result. On a small machine the index, which can take
more CPU than the worker's own process, preempted its loop; lowered, it gets a small
share of a contended core and catches up whenever the loop waits
(docs/benchmarks.md, "Results API and index")."""

INDEX_FETCH = {"fetch.wait.max.ms": 100, "fetch.min.bytes": 1 << 20}
"""The index's fetches wait for a megabyte or 100 ms: a cache may lag that much, and
fetching each transaction's results as they are committed took broker and index CPU
from the worker's path (docs/worker.md, "The loop")."""

TRIM_INTERVAL = 60.0
"""Seconds between the indexing process's passes that drop what retention deleted
(`trim`). Retention deletes whole log segments, so a partition's log start moves seldom
and in steps, and serving a result a minute past its deletion on a 7-day retention
harms nobody; a pass costs a ListOffsets request per broker, too much for every round
of 0.2 s, nothing once a minute. Tests shorten it (`Settings.results_trim_interval`)."""

RESTART_FIRST, RESTART_MOST = 0.5, 30.0
"""Back-off between restarts of a failed indexing process: doubling from 0.5 s to 30 s,
and back to 0.5 once a restarted one has caught up. A full disk stays full for a while;
an indexer retrying every half second would fill the log with the same error."""

WATCH_INTERVAL = 1.0
"""Seconds between the watch's looks at the indexing process and its lag: a log-end
request per broker a second is little, and a page's `behind` is at most that stale."""

FAULT_ENV = "JUGGLER_RESULTS_INDEX_FAULT"
"""A test's fault injection: while the file this names exists, the indexing process's
writes fail as on a full disk (the same exception, raised where `append` would run),
so the failure, the restarts and the catching up go through the real code path."""

@dataclass(frozen=True)
class CodecOptions:
    """What the indexing process needs to build the worker's codec (a codec itself
    holds a registry client and caches, which are not sent to another process)."""

    schemas_dir: Path | None = None
    registry_url: str | None = None

    def codec(self) -> Codec:
        return Codec(self.schemas_dir, registry_url=self.registry_url)


class ResultsStore:
    def __init__(self, client_config: dict[str, Any], topic: str,
                 codec: CodecOptions = CodecOptions(), loglevel: str = "info",
                 trim_interval: float = TRIM_INTERVAL) -> None:
        """`topic`: the shared results topic, always indexed. The directory is removed
        by `stop`, or at the interpreter's exit by `TemporaryDirectory`'s finalizer if
        the store was never stopped (a worker whose HTTP port was taken)."""
        self._dir = tempfile.TemporaryDirectory(prefix="juggler-results-")
        self.path = os.path.join(self._dir.name, "results.db")
        self._local = threading.local()
        self._connection().executescript(results_table.SCHEMA)
        self._context = multiprocessing.get_context("spawn")  # no fork of librdkafka's threads
        self._follow: Queue[str] = self._context.Queue()
        self._follow.cancel_join_thread()  # an exit never waits on a dead indexer's pipe
        self._errors: Queue[str] = self._context.Queue()
        self._errors.cancel_join_thread()
        self._stop = self._context.Event()
        self._client_config = client_config
        self._args = (self.path, unwatched(client_config), codec, loglevel, self._follow,
                      self._stop, trim_interval, self._errors)
        self._topics: set[str] = set()
        self._guard = threading.Lock()  # a restart against `stop`
        self.failures = 0
        """Times the indexing process failed (`juggler_results_index_failures_total`)."""
        self.failure: str | None = None
        """Why the last indexing process failed, until a restarted one caught up."""
        self.lag: dict[str, int] = {}
        """Per indexed topic, its records committed but not yet indexed, as last asked
        (a topic is missing until its lag was first measured)."""
        # the watch's own (`_watch`)
        self._backoff = Backoff(RESTART_FIRST, RESTART_MOST)
        self._restart_at: float | None = None
        self._target: dict[TP, int] | None = None  # what a restarted indexer must reach
        self._admin: AdminClient | None = None
        self.follow(topic)
        self.process = self._new_process()

    def _new_process(self) -> SpawnProcess:
        return self._context.Process(target=_index, name="juggler-results-index",
                                     daemon=True, args=self._args)

    def start(self) -> None:
        self.process.start()
        threading.Thread(target=self._watch, name="juggler-results-watch",
                         daemon=True).start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the indexing process, then remove the index's directory (once the writer
        is gone, so nothing recreates a file in it). Idempotent, and fine before `start`.
        Connections still open in other threads (the HTTP thread's) do not hold the
        removal up on Linux, where an open file can be unlinked; they go on reading the
        unlinked files until the process exits."""
        with self._guard:
            self._stop.set()  # also ends the watch, which restarts nothing from now on
            if self.process.pid is not None:
                self.process.join(timeout)
                if self.process.is_alive():
                    self.process.kill()
                    self.process.join()
        self._dir.cleanup()

    # watching the indexing process ------------------------------------------------

    def running(self) -> bool:
        return self.failure is None and self.process.is_alive()

    def behind(self, topic: str) -> bool:
        return results_table.behind(self.running(), self.lag, topic)

    def health(self) -> dict[str, Any]:
        """The index's part of `/health`: `ok`, `behind` (records not indexed yet, as
        every live index is for a moment) or `failed` (with why, until a restarted
        indexer caught up)."""
        lag = sum(self.lag.values()) if self._topics <= self.lag.keys() else None
        status = "failed" if not self.running() else "ok" if lag == 0 else "behind"
        return {"status": status, "lag": lag, "failures": self.failures,
                **({"reason": self.failure} if self.failure is not None else {})}

    def _watch(self) -> None:
        """Restart a failed indexing process with back-off, and measure the lag, until
        `stop`. A restarted indexer has caught up once its ends reach the log ends
        measured after its start: under steady traffic a live index is rarely at lag 0
        at the moment it is asked, so waiting for 0 could keep it "failed" for good.
        An error of the watch itself is logged and the watch goes on: a watch that died
        silently would leave the index unwatched again."""
        while not self._stop.wait(WATCH_INTERVAL if self._restart_at is None else max(
                0.0, min(WATCH_INTERVAL, self._restart_at - time.monotonic()))):
            try:
                self._look()
            except Exception:
                log.exception("the results index's watch failed; it looks again in %.0f s",
                              WATCH_INTERVAL)

    def _look(self) -> None:
        if self._restart_at is None and not self.process.is_alive():
            self.failures += 1
            self.failure = self._reason()
            wait = self._backoff.next()
            log.error("the results index failed (%s); pages say they are behind, and "
                      "it is started again in %.1f s", self.failure, wait)
            self._restart_at = time.monotonic() + wait
        if self._restart_at is not None and time.monotonic() >= self._restart_at:
            with self._guard:
                if self._stop.is_set():
                    return
                for topic in list(self._topics):  # the failed one drained the queue
                    self._follow.put(topic)
                self.process = self._new_process()
                self.process.start()
            self._restart_at, self._target = None, None
        if self._admin is None:
            self._admin = AdminClient({**self._client_config, "log_level": 3})
            client_log().serve(self._admin)
        measured = self._measure(self._admin)
        if measured is None:  # a new one next time: librdkafka's admin client can come
            client_log().forget(self._admin)  # out of an outage unable to reach the
            self._admin = None                # cluster (`Job.renew_admin`)
        elif self.failure is not None and self._restart_at is None \
                and self.process.is_alive():
            indexed, ends = measured
            if self._target is None:
                self._target = ends
            if all(indexed.get(tp, 0) >= end for tp, end in self._target.items()):
                log.info("the results index caught up again after %d failures",
                         self.failures)
                self.failure = None
                self._backoff.reset()

    def _reason(self) -> str:
        reasons = []
        while True:
            try:
                reasons.append(self._errors.get_nowait())
            except queue.Empty:
                break
        return reasons[-1] if reasons else f"exit status {self.process.exitcode}"

    def _measure(self, admin: AdminClient) -> tuple[dict[TP, int], dict[TP, int]] | None:
        """`lag` from the `ends` table against the topics' committed log ends, and both
        of them; `lag` is left as it was, and None returned, while the cluster does not
        answer."""
        indexed = {(t, p): o for t, p, o in self._connection().execute(
            "SELECT topic, partition, offset FROM ends")}
        tps = set(indexed)
        try:
            for topic in self._topics - {t for t, _ in indexed}:  # nothing indexed yet
                meta = admin.list_topics(topic, timeout=5).topics.get(topic)
                if meta is not None and meta.error is None:
                    tps |= {(topic, p) for p in meta.partitions}
            ends = log_ends(admin, sorted(tps), 5.0) if tps else {}
        except KafkaException as exc:
            log.debug("the results index's lag is not measured now: %s", exc)
            return None
        # a topic the cluster does not know (not created yet, or deleted) has nothing
        # to index: counted as 0, or a restarted indexer would never be caught up
        lag = dict.fromkeys(self._topics | {topic for topic, _ in ends}, 0)
        for tp, end in ends.items():
            lag[tp[0]] += max(0, end - indexed.get(tp, 0))
        self.lag = lag
        return indexed, ends

    def follow(self, topic: str) -> None:
        """Index `topic` too (a query's own results topic), from its beginning; called
        when a query with its own topic is registered or restored here. Idempotent."""
        self._topics.add(topic)
        self._follow.put(topic)

    def _connection(self) -> sqlite3.Connection:
        """One connection per thread (sqlite3 objects are not shared across threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = results_table.connect(self.path)
        return conn

    def append(self, rows: list[Row], ends: dict[TP, int]) -> None:
        """`results_table.append` on this thread's connection."""
        results_table.append(self._connection(), rows, ends)

    # reading: the HTTP thread (`results_table`) --------------------------------------

    def page(self, query_id: str, topic: str, after: dict[int, int], limit: int
             ) -> tuple[list[str], dict[int, int]]:
        return results_table.page(self._connection(), query_id, topic, after, limit)

    def known(self, query_id: str, topic: str) -> bool:
        return results_table.known(self._connection(), query_id, topic)


# the indexing process -----------------------------------------------------------------


def _trim_to_log_starts(conn: sqlite3.Connection, admin: AdminClient, tps: list[TP],
                        trimmed: dict[TP, int]) -> None:
    """One pass of `results_table.trim` for the partitions whose log start moved since the last
    (`trimmed`, updated); a broker that does not answer within 10 s leaves it to the
    next pass rather than hold the indexing up."""
    try:
        starts = log_ends(admin, tps, 10.0, start=True)
    except KafkaException as exc:
        log.warning("the results index could not ask the log starts (%s); trimming "
                    "at the next pass", exc)
        return
    moved = {tp: start for tp, start in starts.items() if trimmed.get(tp) != start}
    if moved:
        deleted = results_table.trim(conn, moved)
        trimmed.update(moved)
        log.info("the results index dropped %d results below the log starts", deleted)


def _index(path: str, client_config: dict[str, Any], options: CodecOptions, loglevel: str,
           follow: Queue[str], stop: Event, trim_interval: float, errors: Queue[str]
           ) -> None:
    """The indexing process: read the wanted topics from where the `ends` table says the
    index got to (their beginnings in a new index) and append each committed result, and
    every `trim_interval` drop what retention deleted, until `stop` is set or the worker
    is gone. A failure is put on `errors` and ends the process with status 1, for the
    worker's watch to restart it."""
    log_to_stderr(loglevel)
    os.nice(INDEX_NICENESS)
    conn = results_table.connect(path)
    codec = options.codec()
    header = codec.single_object_header(RESULT)
    parent = multiprocessing.parent_process()
    fault = os.environ.get(FAULT_ENV)
    client_config = watched(client_config)
    consumer = Consumer({**client_config, **INDEX_FETCH, "group.id": "juggler-results-index",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "log_level": 3})
    admin = AdminClient({**client_config, "log_level": 3})
    client_log().serve(admin)
    wanted: set[str] = set()
    read: set[str] = set()
    assigned: list[TopicPartition] = []
    written: dict[TP, int] = {(t, p): o for t, p, o in conn.execute(
        "SELECT topic, partition, offset FROM ends")}
    resume = dict(written)
    trimmed: dict[TP, int] = {}
    next_trim = time.monotonic() + trim_interval  # read from the log starts: nothing below
    failed = False
    try:
        while not stop.is_set() and (parent is None or parent.is_alive()):
            wanted |= _drain(follow)
            if len(read) < len(wanted):
                assigned += _assign_new(consumer, wanted - read, read, resume)
            rows = []
            for m in consumer.consume(5000, timeout=0.2):
                if m.error() is None and (row := index_row(m, codec, header)) is not None:
                    rows.append(row)
            positions = consumer.position([TopicPartition(t.topic, t.partition)
                                           for t in assigned]) if assigned else []
            moved = {(tp.topic, tp.partition): tp.offset for tp in positions
                     if tp.offset >= 0 and written.get((tp.topic, tp.partition)) != tp.offset}
            if rows or moved:  # an idle index writes nothing five times a second
                if fault is not None and os.path.exists(fault):
                    raise sqlite3.OperationalError(f"database or disk is full ({fault} exists)")
                results_table.append(conn, rows, moved)
                written.update(moved)
            if assigned and time.monotonic() >= next_trim:
                _trim_to_log_starts(conn, admin, [(t.topic, t.partition) for t in assigned],
                                    trimmed)
                next_trim = time.monotonic() + trim_interval
    except Exception as exc:  # the index is a cache: a failure must not stop the worker
        log.exception("the results index failed; the worker starts it again")
        errors.put(f"{type(exc).__name__}: {exc}")
        failed = True
    finally:
        consumer.close()
        if parent is not None and not parent.is_alive():
            # the worker's process died without its clean-up (SIGKILL, or `os._exit`
            # on a failure): nobody else will remove the directory
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    if failed:
        sys.exit(1)


def _drain(follow: Queue[str]) -> set[str]:
    topics = set()
    while True:
        try:
            topics.add(follow.get_nowait())
        except queue.Empty:
            return topics


def _assign_new(consumer: Consumer, topics: set[str], read: set[str],
                resume: dict[TP, int]) -> list[TopicPartition]:
    """Start reading every one of `topics` the broker already knows (a topic created a
    moment ago, or asked while the cluster does not answer, is tried again at the next
    round), each partition from its offset in `resume` (what a failed indexer before
    this one indexed) or its beginning."""
    new = []
    for topic in sorted(topics):
        try:
            meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        except KafkaException:
            break
        if meta is None or meta.error is not None or not meta.partitions:
            continue
        new += [TopicPartition(topic, p, resume.get((topic, p), OFFSET_BEGINNING))
                for p in sorted(meta.partitions)]
        read.add(topic)
    if new:
        consumer.incremental_assign(new)
    return new


def index_row(m: Message, codec: Codec, header: bytes) -> Row | None:
    """A result as its row of the index. A worker's result (a query header, our own
    Result schema's single-object header, a plain body) is written as JSON in Rust
    (`juggler_native.result_json`, the same text in a fraction of the time); any other
    message takes the Python path below, which the Rust one matches byte for byte.

    There it is decoded as trusted (a worker wrote it, so it is not encoded again to
    prove it minimal); a number that is not finite, which only another producer could
    have written, still never reaches a page as invalid JSON."""
    topic, partition, offset = m.topic(), m.partition(), m.offset()
    # set on every record the consumer hands over without an error (those are skipped)
    assert topic is not None and partition is not None and offset is not None
    query = dict(m.headers() or ()).get(QUERY_HEADER)
    qid = query.decode("utf-8", "replace") if isinstance(query, bytes) else query
    value = m.value()
    if qid is not None and isinstance(value, bytes):
        text = result_json(value, header, topic, partition, offset)
        if text is not None:
            return qid, topic, partition, offset, text
    try:
        record = codec.decode(RESULT, value, trusted=True)
    except CodecError as exc:
        record = {"error": exc.reason}
    if qid is None:
        qid = record.get("query")
    if qid is None:
        return None
    position = {"topic": topic, "partition": partition, "offset": offset}
    try:
        text = json.dumps(record | {"position": position}, allow_nan=False)
    except ValueError:
        text = json.dumps({"error": "the result holds a number that is not finite",
                           "position": position})
    return qid, topic, partition, offset, text
