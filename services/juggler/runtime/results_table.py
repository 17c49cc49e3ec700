"""The results index's SQLite table: its schema, the indexer's append and trim, and the
reads a results page makes (`results_store` runs the indexer and watches it).

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
                [(*key, *run_columns(offsets, texts)) for key, (offsets, texts) in runs.items()])
        conn.executemany("INSERT OR REPLACE INTO ends VALUES (?, ?, ?)",
                         [(t, p, o) for (t, p), o in ends.items()])


def run_columns(offsets: array[int], texts: list[str]) -> tuple[int, int, bytes, str]:
    """A run's `first`, `last`, `offsets` and `records` columns (`run_results` reads
    the last two back)."""
    return offsets[0], offsets[-1], offsets.tobytes(), "\n".join(texts)


def run_results(blob: bytes, records: str) -> tuple[array[int], list[str]]:
    """A run's offsets and their JSON texts, in order, from its `offsets` and `records`
    columns."""
    offsets = array("q")
    offsets.frombytes(blob)
    return offsets, records.split("\n")


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
            offsets, texts = run_results(blob, records)
            lo, hi = bisect_left(offsets, start), bisect_left(offsets, end)
            hi = min(hi, lo + left - len(taken))
            if lo < hi:
                taken += texts[lo:hi]
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


NEXT_KEY = ("SELECT query, topic, partition FROM results "
            "WHERE (query, topic, partition, first) > (?, ?, ?, 9223372036854775807) "
            "ORDER BY query, topic, partition, first LIMIT 1")
"""The (query, topic, partition) after a given one: one seek past the given one's
last possible run (first offset 2^63 - 1). Compared on the three columns alone, SQLite
stepped through every row of the given key instead: 60 times slower (1M rows)."""
_BELOW = "FROM results WHERE query = ?1 AND topic = ?2 AND partition = ?3 AND first < ?4"
COUNT_BELOW = "SELECT COALESCE(SUM(length(offsets)), 0) / 8 " + _BELOW + " AND last < ?4"
"""How many results the runs wholly below a start hold (8 bytes an offset)."""
DELETE_BELOW = "DELETE " + _BELOW + " AND last < ?4"
STRADDLING = "SELECT rowid, offsets, records " + _BELOW + " AND last >= ?4"
"""The one run, if any, that holds offsets on both sides of a start."""


def trim(conn: sqlite3.Connection, starts: dict[TP, int]) -> int:
    """Delete every result below its partition's start in `starts` (the first offset
    still in the log), for every query, in one transaction; returns how many.

    Every statement is a search of `results_at`, never a scan of the table: the
    (query, topic, partition) keys held are found one index seek each (a loose index
    scan, so the indexing process keeps no set of them), and each one's runs below the
    start are one range: those wholly below go, the one the start falls in keeps its
    results from the start on. The table's layout and the insert path stay as they are
    (`SCHEMA`). A `DELETE ... WHERE topic = ? AND partition = ?` would scan the table
    instead, far slower on a large table (docs/benchmarks.md, "Results API and
    index")."""
    deleted = 0
    with conn:
        key: tuple[str, str, int] = ("", "", -1)  # below every key: no topic name is empty
        while (found := conn.execute(NEXT_KEY, key).fetchone()) is not None:
            key = found
            start = starts.get((key[1], key[2]))
            if start is None:
                continue
            deleted += conn.execute(COUNT_BELOW, (*key, start)).fetchone()[0]
            conn.execute(DELETE_BELOW, (*key, start))
            for rowid, blob, records in conn.execute(STRADDLING, (*key, start)).fetchall():
                offsets, texts = run_results(blob, records)
                keep = bisect_left(offsets, start)
                conn.execute(
                    "UPDATE results SET first = ?, last = ?, offsets = ?, records = ? "
                    "WHERE rowid = ?", (*run_columns(offsets[keep:], texts[keep:]), rowid))
                deleted += keep
    return deleted


def behind(running: bool, lag: Mapping[str, int], topic: str) -> bool:
    """Whether a page of `topic` may miss results the topic holds: the indexer is failed
    or restarting (not `running`), its `lag` is not measured yet, or it was not zero."""
    return not running or lag.get(topic, 1) > 0
