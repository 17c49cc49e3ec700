"""The results index's SQLite table: its schema, the indexer's append, and the reads a
results page makes (`results_store` runs the indexer and watches it).

Apart from `results_store` because a page is read in two processes: the worker's own
server (the Faust runtime's too) and the worker's HTTP port process
(`juggler.serving.page_process`), which starts beside a restoring worker and imports
only what a page needs: this module and the standard library.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

TP = tuple[str, int]
Row = tuple[str, str, int, int, str]

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    query TEXT NOT NULL, topic TEXT NOT NULL, partition INTEGER NOT NULL,
    offset INTEGER NOT NULL, record TEXT NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS results_at ON results (query, topic, partition, offset);
CREATE TABLE IF NOT EXISTS ends (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)) WITHOUT ROWID;
"""
"""`ends`: per topic partition, the offset up to which `results` holds every result.

Why rows in arrival order with an index, not a table keyed by (query, topic, partition,
offset): results of many queries arrive interleaved, and in a table clustered on that
key every insert landed somewhere else in the tree with its whole JSON text, most of
the index's time; appended rows plus a small index entry cost a fraction of that,
and a page reading its rows through the index costs little more (docs/benchmarks.md,
"Results API and index")."""


def connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=True)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    return conn


def append(conn: sqlite3.Connection, rows: list[Row], ends: dict[TP, int]) -> None:
    """Add (query, topic, partition, offset, JSON text) rows and move the indexed ends,
    in one transaction: a reader never sees an end before the rows below it."""
    with conn:
        if rows:
            conn.executemany("INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?, ?)", rows)
        conn.executemany("INSERT OR REPLACE INTO ends VALUES (?, ?, ?)",
                         [(t, p, o) for (t, p), o in ends.items()])


def page(conn: sqlite3.Connection, query_id: str, topic: str, after: dict[int, int],
         limit: int) -> tuple[list[str], dict[int, int]]:
    """Up to `limit` results of `query_id` on `topic` after the cursor, partition by
    partition, as the JSON texts the index keeps (a page is their concatenation), and
    the cursor after them (a partition read to its indexed end moves to it)."""
    indexed = dict(conn.execute("SELECT partition, offset FROM ends WHERE topic = ?",
                                (topic,)).fetchall())
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


def known(conn: sqlite3.Connection, query_id: str, topic: str) -> bool:
    """Whether any result of `query_id` on `topic` is indexed."""
    return conn.execute("SELECT 1 FROM results WHERE query = ? AND topic = ? LIMIT 1",
                        (query_id, topic)).fetchone() is not None


def behind(running: bool, lag: Mapping[str, int], topic: str) -> bool:
    """Whether a page of `topic` may miss results the topic holds: the indexer is failed
    or restarting (not `running`), its `lag` is not measured yet, or it was not zero."""
    return not running or lag.get(topic, 1) > 0
