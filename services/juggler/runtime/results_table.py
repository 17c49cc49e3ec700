"""The results index's SQLite table: its schema, the indexer's append, and the reads a
results page makes (`results_store` runs the indexer and watches it).

Apart from `results_store` because a page is read in two processes: the worker's own
server (the Faust runtime's too) and the worker's HTTP port process
(`juggler.serving.page_process`), which starts beside a restoring worker and imports
only what a page needs: this module and the standard library.
"""

from __future__ import annotations

import sqlite3
from array import array
from bisect import bisect_left
from collections.abc import Mapping

TP = tuple[str, int]
Row = tuple[str, str, int, int, str]
"""A result as the indexer reads it: (query, topic, partition, offset, JSON text)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    query TEXT NOT NULL, topic TEXT NOT NULL, partition INTEGER NOT NULL,
    first INTEGER NOT NULL, last INTEGER NOT NULL, offsets BLOB NOT NULL,
    records TEXT NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS results_at ON results (query, topic, partition, first);
CREATE TABLE IF NOT EXISTS ends (
    topic TEXT NOT NULL, partition INTEGER NOT NULL, offset INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)) WITHOUT ROWID;
"""
"""`results`: a run, one row per query and topic partition of each append: the offsets
`first` to `last` of its results (`offsets`, int64s in machine order) and their JSON
texts (`records`, one line each: JSON never holds a raw newline). `ends`: per topic
partition, the offset up to which `results` holds every result.

Why runs, not a row per result: results of many queries arrive interleaved, and each
row costs an entry in the index a page reads through; an append of a few thousand
results of a hundred queries writes a few hundred runs, so the index is a small part
of the indexer's time, and a page reads a few runs instead of its rows
(docs/benchmarks.md, "Results API and index"). Why
appended runs with an index, not a table keyed by (query, topic, partition, first):
in such a table every insert landed somewhere else in the tree with its whole text."""

RUNS_FROM = (
    "SELECT offsets, records FROM results "
    "WHERE query = ?1 AND topic = ?2 AND partition = ?3 AND first < ?5 AND first >= "
    "COALESCE((SELECT MAX(first) FROM results WHERE query = ?1 AND topic = ?2 "
    "AND partition = ?3 AND first <= ?4), -1) ORDER BY first")
"""A partition's runs of a query that may hold offsets in [?4, ?5): from the run the
start falls in (the last one starting at or below it), in order; two seeks of the
index, however many runs lie below."""


def connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=True)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    return conn


def append(conn: sqlite3.Connection, rows: list[Row], ends: dict[TP, int]) -> None:
    """Add rows as runs and move the indexed ends, in one transaction: a reader never
    sees an end before the rows below it. Each partition's rows come in offset order,
    after those of earlier appends, as a consumer reads them: a query's runs of a
    partition then never overlap, which `page` and `trim` rely on."""
    runs: dict[tuple[str, str, int], tuple[array[int], list[str]]] = {}
    for query, topic, partition, offset, text in rows:
        run = runs.get((query, topic, partition))
        if run is None:
            run = runs[(query, topic, partition)] = (array("q"), [])
        run[0].append(offset)
        run[1].append(text)
    with conn:
        if runs:
            conn.executemany(
                "INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(*key, offsets[0], offsets[-1], offsets.tobytes(), "\n".join(texts))
                 for key, (offsets, texts) in runs.items()])
        conn.executemany("INSERT OR REPLACE INTO ends VALUES (?, ?, ?)",
                         [(t, p, o) for (t, p), o in ends.items()])


def run_offsets(blob: bytes) -> array[int]:
    """A run's `offsets` column as the int64s it holds."""
    offsets = array("q")
    offsets.frombytes(blob)
    return offsets


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
        start, end = positions[p], indexed[p]
        taken: list[str] = []
        last = -1
        for blob, records in conn.execute(RUNS_FROM, (query_id, topic, p, start, end)):
            offsets = run_offsets(blob)
            lo, hi = bisect_left(offsets, start), bisect_left(offsets, end)
            hi = min(hi, lo + left - len(taken))
            if lo < hi:
                taken += records.split("\n")[lo:hi]
                last = offsets[hi - 1]
            if len(taken) == left:
                break
        results += taken
        positions[p] = last + 1 if len(taken) == left else max(start, end)
    return results, positions


def known(conn: sqlite3.Connection, query_id: str, topic: str) -> bool:
    """Whether any result of `query_id` on `topic` is indexed."""
    return conn.execute("SELECT 1 FROM results WHERE query = ? AND topic = ? LIMIT 1",
                        (query_id, topic)).fetchone() is not None


def behind(running: bool, lag: Mapping[str, int], topic: str) -> bool:
    """Whether a page of `topic` may miss results the topic holds: the indexer is failed
    or restarting (not `running`), its `lag` is not measured yet, or it was not zero."""
    return not running or lag.get(topic, 1) > 0
