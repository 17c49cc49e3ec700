"""An index of the shared results topic, so `GET /queries/<id>/results` answers from a
local table instead of a consumer per request.

The topic stays the store of record (retained, read_committed, positions that never
change); this is a cache of it: a thread of the worker reads every partition of
`juggler.results` from the beginning and appends each committed result to an SQLite
table keyed by (query, partition, offset). A page is one indexed range scan per
partition, so a read costs the same whether the topic holds ten results or ten million,
and many readers do not slow the worker (SQLite in WAL mode: readers never wait for
the writer). Cursors are the same as before: per partition, the next offset to read.

Why SQLite: it is in the standard library, indexes and pages exactly as needed, and
needs no server. The table lives in a temporary file and is rebuilt from the topic at
every start (the topic is what is durable).
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
    query TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL,
    record TEXT NOT NULL, PRIMARY KEY (query, partition, offset)) WITHOUT ROWID;
"""


class ResultsStore:
    def __init__(self, client_config: dict[str, Any], topic: str, codec: Any) -> None:
        self.client_config = client_config
        self.topic = topic
        self.codec = codec
        self.path = os.path.join(tempfile.mkdtemp(prefix="juggler-results-"), "results.db")
        self._local = threading.local()
        writer = self._connection()
        writer.executescript(SCHEMA)
        self.indexed: dict[int, int] = {}
        """Per partition, the offset up to which the table holds every result."""
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._index, name="juggler-results-index",
                                       daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()

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
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer({**self.client_config, "group.id": "juggler-results-index",
                             "enable.auto.commit": False, "isolation.level": "read_committed",
                             "log_level": 3})
        try:
            partitions = sorted(consumer.list_topics(self.topic, timeout=30)
                                .topics[self.topic].partitions)
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in partitions])
            conn = self._connection()
            while not self._stop.is_set():
                rows = []
                for m in consumer.consume(5000, timeout=0.2):
                    if m.error() is not None:
                        continue
                    row = self._row(m)
                    if row is not None:
                        rows.append(row)
                if rows:
                    conn.executemany("INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?)", rows)
                    conn.commit()
                for tp in consumer.position([TopicPartition(self.topic, p) for p in partitions]):
                    if tp.offset >= 0:
                        self.indexed[tp.partition] = tp.offset
        except Exception:  # the index is a cache: a failure must not stop the worker
            log.exception("the results index stopped; /queries/<id>/results reads the topic")
        finally:
            consumer.close()

    def _row(self, m: Any) -> tuple[str, int, int, str] | None:
        query = dict(m.headers() or ()).get(QUERY_HEADER)
        try:
            record = self.codec.decode(RESULT, m.value())
        except CodecError as exc:
            record = {"error": exc.reason}
        qid = query.decode("utf-8", "replace") if query is not None else record.get("query")
        if qid is None:
            return None
        record["position"] = {"topic": self.topic, "partition": m.partition(),
                              "offset": m.offset()}
        return qid, m.partition(), m.offset(), json.dumps(record)

    # reading: the HTTP threads ----------------------------------------------------

    def page(self, query_id: str, after: dict[int, int], limit: int
             ) -> tuple[list[str], dict[int, int]]:
        """Up to `limit` results of `query_id` after the cursor, partition by partition,
        as the JSON texts the index keeps (a page is their concatenation: nothing is
        decoded or encoded per request), and the cursor after them (a partition read to
        its indexed end moves to it)."""
        conn = self._connection()
        indexed = dict(self.indexed)
        positions = {**after, **{p: max(after.get(p, 0), 0) for p in indexed}}
        results: list[str] = []
        for p in sorted(indexed):
            left = limit - len(results)
            if left <= 0:
                break
            rows = conn.execute(
                "SELECT offset, record FROM results WHERE query = ? AND partition = ? "
                "AND offset >= ? AND offset < ? ORDER BY offset LIMIT ?",
                (query_id, p, positions[p], indexed[p], left)).fetchall()
            results.extend(record for _, record in rows)
            positions[p] = rows[-1][0] + 1 if len(rows) == left else max(positions[p], indexed[p])
        return results, positions

    def known(self, query_id: str) -> bool:
        """Whether any result of `query_id` is indexed."""
        return self._connection().execute(
            "SELECT 1 FROM results WHERE query = ? LIMIT 1", (query_id,)).fetchone() is not None
