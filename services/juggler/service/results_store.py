"""An index of the results topics, so `GET /queries/<id>/results` answers from a local
table instead of a consumer per request.

The topics stay the store of record (retained, read_committed, positions that never
change); this is a cache of them: a thread of the worker reads every partition of the
shared `juggler.results`, and of each query's own results topic once a query registered
here has one (`follow`), from the beginning, and appends each committed result to an
SQLite table keyed by (query, topic, partition, offset). A page is one indexed range
scan per partition, so a read costs the same whether a topic holds ten results or ten
million, and many readers do not slow the worker (SQLite in WAL mode: readers never
wait for the writer). Cursors are the same as before: per partition of the query's
topic, the next offset to read.

Each result is kept as the JSON text the API sends, so a page is a concatenation of
rows (`results_api.page_body`), with nothing decoded or encoded per request.

Why SQLite: it is in the standard library, indexes and pages exactly as needed, and
needs no server. The table lives in a temporary file and is rebuilt from the topics at
every start (the topics are what is durable).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import tempfile
import threading
from typing import Any

from juggler.codec.avro import RESULT, CodecError
from juggler.kafka.names import QUERY_HEADER

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    query TEXT NOT NULL, topic TEXT NOT NULL, partition INTEGER NOT NULL,
    offset INTEGER NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (query, topic, partition, offset)) WITHOUT ROWID;
"""

TP = tuple[str, int]


class ResultsStore:
    def __init__(self, client_config: dict[str, Any], topic: str, codec: Any) -> None:
        """`topic`: the shared results topic, always indexed."""
        self.client_config = client_config
        self.codec = codec
        self.path = os.path.join(tempfile.mkdtemp(prefix="juggler-results-"), "results.db")
        self._local = threading.local()
        writer = self._connection()
        writer.executescript(SCHEMA)
        self.indexed: dict[TP, int] = {}
        """Per topic partition, the offset up to which the table holds every result."""
        self._wanted: set[str] = {topic}
        """The topics to index; the indexing thread assigns those it does not read yet."""
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._index, name="juggler-results-index",
                                       daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()

    def follow(self, topic: str) -> None:
        """Index `topic` too (a query's own results topic), from its beginning; called
        when a query with its own topic is registered or restored here. Idempotent."""
        self._wanted.add(topic)

    def _connection(self) -> sqlite3.Connection:
        """One connection per thread (sqlite3 objects are not shared across threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = sqlite3.connect(self.path, check_same_thread=True)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=OFF")
        return conn

    # writing: the indexing thread -------------------------------------------------

    def _index(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({**self.client_config, "group.id": "juggler-results-index",
                             "enable.auto.commit": False, "isolation.level": "read_committed",
                             "log_level": 3})
        read: set[str] = set()
        assigned: list[Any] = []
        try:
            while not self._stop.is_set():
                if len(read) < len(self._wanted):
                    assigned += self._assign_new(consumer, read)
                rows = []
                for m in consumer.consume(5000, timeout=0.2):
                    if m.error() is not None:
                        continue
                    row = self._row(m)
                    if row is not None:
                        rows.append(row)
                positions = consumer.position([TopicPartition(t.topic, t.partition)
                                               for t in assigned]) if assigned else []
                self.append(rows, {(tp.topic, tp.partition): tp.offset
                                   for tp in positions if tp.offset >= 0})
        except Exception:  # the index is a cache: a failure must not stop the worker
            log.exception("the results index stopped; /queries/<id>/results serves what "
                          "it indexed so far")
        finally:
            consumer.close()

    def append(self, rows: list[tuple[str, str, int, int, str]], ends: dict[TP, int]) -> None:
        """Add (query, topic, partition, offset, JSON text) rows, then move the indexed
        ends: in this order, so a reader never sees an end before the rows below it."""
        if rows:
            conn = self._connection()
            conn.executemany("INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?, ?)", rows)
            conn.commit()
        self.indexed.update(ends)

    def _assign_new(self, consumer: Any, read: set[str]) -> list[Any]:
        """Start reading, from the beginning, every wanted topic the broker already
        knows (a topic created a moment ago is tried again at the next round)."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        new = []
        for topic in sorted(self._wanted - read):
            meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
            if meta is None or meta.error is not None or not meta.partitions:
                continue
            new += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(meta.partitions)]
            read.add(topic)
        if new:
            consumer.incremental_assign(new)
        return new

    def _row(self, m: Any) -> tuple[str, str, int, int, str] | None:
        """A result as its row of the index. Decoded as trusted (a worker wrote it, so it
        is not encoded again to prove it minimal: that was most of what this thread
        spent of the worker's GIL); a number that is not finite, which only another
        producer could have written, still never reaches a page as invalid JSON."""
        query = dict(m.headers() or ()).get(QUERY_HEADER)
        try:
            record = self.codec.decode(RESULT, m.value(), trusted=True)
        except CodecError as exc:
            record = {"error": exc.reason}
        qid = query.decode("utf-8", "replace") if query is not None else record.get("query")
        if qid is None:
            return None
        position = {"topic": m.topic(), "partition": m.partition(), "offset": m.offset()}
        try:
            text = json.dumps(record | {"position": position}, allow_nan=False)
        except ValueError:
            text = json.dumps({"error": "the result holds a number that is not finite",
                               "position": position})
        return qid, m.topic(), m.partition(), m.offset(), text

    # reading: the HTTP thread -----------------------------------------------------

    def page(self, query_id: str, topic: str, after: dict[int, int], limit: int
             ) -> tuple[list[str], dict[int, int]]:
        """Up to `limit` results of `query_id` on `topic` after the cursor, partition by
        partition, as the JSON texts the index keeps (a page is their concatenation),
        and the cursor after them (a partition read to its indexed end moves to it)."""
        conn = self._connection()
        indexed = {p: end for (t, p), end in list(self.indexed.items()) if t == topic}
        positions = {**after, **{p: max(after.get(p, 0), 0) for p in indexed}}
        results: list[str] = []
        for p in sorted(indexed):
            left = limit - len(results)
            if left <= 0:
                break
            rows = conn.execute(
                "SELECT offset, record FROM results WHERE query = ? AND topic = ? "
                "AND partition = ? AND offset >= ? AND offset < ? ORDER BY offset LIMIT ?",
                (query_id, topic, p, positions[p], indexed[p], left)).fetchall()
            results.extend(record for _, record in rows)
            positions[p] = rows[-1][0] + 1 if len(rows) == left else max(positions[p], indexed[p])
        return results, positions

    def known(self, query_id: str, topic: str) -> bool:
        """Whether any result of `query_id` on `topic` is indexed."""
        return self._connection().execute(
            "SELECT 1 FROM results WHERE query = ? AND topic = ? LIMIT 1",
            (query_id, topic)).fetchone() is not None
