"""Compiled Juggler queries as Flink SQL: one source table per stream, one INSERT per query.

What a Flink SQL user would write for the same rules, run as one statement set (one
job, the planner free to share sources between the INSERTs):

    INSERT INTO `results`
    SELECT 'j0', CONCAT_WS(',', CAST(s0.`__pos` AS STRING), CAST(s1.`__pos` AS STRING))
    FROM `B` AS s0, `H` AS s1
    WHERE s0.`__key` = s1.`__key`
      AND s0.`__rt` BETWEEN s1.`__rt` - INTERVAL '5' SECOND AND s1.`__rt` + INTERVAL '5' SECOND
      AND s0.`temp` >= 61.5E0 AND s0.`pressure` > 2.0E0 * s1.`vib` + 3.5E0 AND s0.`ts` > s1.`ts` - 500

- Event time: `__rt` is the event's `ts` as a rowtime with a watermark; the BETWEEN
  bounds of every pair of streams make each join an event-time interval join, whose
  state Flink drops once the watermark passes the bound. `max(ts) - min(ts) <= d` is the
  same as every pair being within d of each other, so the bounds are MAXWINDOW exactly.
- An interval join emits a combination when its last row arrives, once (semantics
  section 3); the sink receives an append-only stream.
- The other predicates are plain conditions on the columns and the BIGINT `ts`
  (`bench.peers.predicates`); literals are DOUBLE (`1.5E0`), not DECIMAL.
- Results carry the source positions in FROM order, as the other engines' do.
"""

from __future__ import annotations

from itertools import combinations

from bench.peers.epl import KEY, POSITION
from bench.peers.predicates import Dialect, attribute, pair
from juggler.language import TIMESTAMP, AttributePredicate, ColumnRef, Query

ROWTIME = "__rt"
WATERMARK_DELAY_MS = 1000
"""How far the watermark trails the largest `ts` read. The files are in `ts` order per
stream, so no row is ever late; the delay only keeps rows with equal `ts` from sitting on
the watermark's edge."""


def _quoted(name: str) -> str:
    return f"`{name}`"


def _interval(ms: int) -> str:
    """A DAY TO SECOND literal: Flink's interval types allow at most 99 days."""
    seconds, millis = divmod(ms, 1000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days > 99:
        raise ValueError(f"a MAXWINDOW of {ms} ms is beyond Flink's intervals (99 days)")
    return f"INTERVAL '{days} {hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}' DAY TO SECOND"


def source_table(stream: str, columns: tuple[str, ...], path: str) -> str:
    """DDL of one stream's CSV file (`bench.peers.files`) as an event-time table."""
    fields = [f"{_quoted(KEY)} STRING", f"{_quoted(TIMESTAMP)} BIGINT",
              f"{_quoted(POSITION)} BIGINT", *(f"{_quoted(c)} DOUBLE" for c in columns),
              f"{_quoted(ROWTIME)} AS TO_TIMESTAMP_LTZ({_quoted(TIMESTAMP)}, 3)",
              f"WATERMARK FOR {_quoted(ROWTIME)} AS {_quoted(ROWTIME)} - "
              f"{_interval(WATERMARK_DELAY_MS)}"]
    return (f"CREATE TABLE {_quoted(stream)} ({', '.join(fields)}) WITH ("
            f"'connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')")


def results_table(path: str) -> str:
    """DDL of the sink every INSERT writes to: query id and positions, as CSV files."""
    return (f"CREATE TABLE `results` (`query` STRING, `sources` STRING) WITH ("
            f"'connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')")


def discard_table() -> str:
    """DDL of a sink that drops its rows, for the read-only job (`scan`)."""
    return "CREATE TABLE `discard` (`pos` BIGINT) WITH ('connector' = 'blackhole')"


def scan(stream: str) -> str:
    """An INSERT that reads every row of `stream` and keeps none (a filter the planner
    cannot fold away): Flink's cost of a job over the files with no query work."""
    return (f"INSERT INTO `discard` SELECT {_quoted(POSITION)} FROM {_quoted(stream)} "
            f"WHERE {_quoted(POSITION)} < 0")


def insert(query: Query) -> str:
    """The INSERT of `query` into `results`."""
    aliases = {stream: f"s{i}" for i, stream in enumerate(query.streams)}

    def column(ref: ColumnRef) -> str:
        return f"{aliases[ref.stream]}.{_quoted(ref.column)}"

    dialect = Dialect(column=column, double=lambda digits: f"{digits}E0", not_equal="<>",
                      true="TRUE", false="FALSE")
    where = []
    for a, b in combinations(query.streams, 2):
        x, y = aliases[a], aliases[b]
        rt_x, rt_y, d = f"{x}.{_quoted(ROWTIME)}", f"{y}.{_quoted(ROWTIME)}", _interval(query.window)
        where += [f"{x}.{_quoted(KEY)} = {y}.{_quoted(KEY)}",
                  f"{rt_x} BETWEEN {rt_y} - {d} AND {rt_y} + {d}"]
    where += [attribute(p, dialect) if isinstance(p, AttributePredicate) else pair(p, dialect)
              for p in query.predicates]
    positions = ", ".join(f"CAST({aliases[s]}.{_quoted(POSITION)} AS STRING)"
                          for s in query.streams)
    sources = ", ".join(f"{_quoted(s)} AS {aliases[s]}" for s in query.streams)
    name = query.id.replace("'", "''")
    text = (f"INSERT INTO `results` SELECT '{name}', CONCAT_WS(',', {positions}) "
            f"FROM {sources}")
    return text + (" WHERE " + " AND ".join(where) if where else "")
