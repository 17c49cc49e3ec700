"""A compiled Juggler query as one Esper EPL statement.

The shape is what an Esper user would write for the same rule, so the comparison is
fair to Esper:

    @name('j0') select s0.`__pos` as p0, s1.`__pos` as p1
    from B(`temp` >= 61.5)#time(5001 milliseconds) as s0,
         H(`vib` <= 20.25)#time(5001 milliseconds) as s1
    where s0.`__key` = s1.`__key` and s0.`ts` - s1.`ts` <= 5000 and s1.`ts` - s0.`ts` <= 5000
      and s0.`pressure` > 2.0 * s1.`vib` + 3.5 and s0.`ts` > s1.`ts` - 500

- Attribute (and same-stream) predicates are stream filters, so Esper's filter index
  shares them between statements, as Juggler's predicate lists do.
- Every stream keeps a time window one millisecond longer than MAXWINDOW. With the
  external clock at the arriving event's `ts`, an event `ts = t - d` is still held at
  `t` (it leaves at `t - d + d + 1`), and everything Esper holds beyond MAXWINDOW is cut
  by the explicit `|s_i.ts - s_j.ts| <= d` terms, so the window's edge convention
  cannot change a result.
- Esper joins only on a new event, against what the other windows hold, and emits the
  insert stream: each combination once, when its last event arrives (semantics section 3).
- Same key: an equality on the key between every pair of streams (hash-indexed by the
  join planner).
- The selected columns are the source positions, in the order of the query's FROM, so
  results compare with Juggler's by (query, sources).
"""

from __future__ import annotations

from itertools import combinations

from bench.peers.predicates import Dialect, pair, split
from juggler.language import TIMESTAMP, ColumnRef, Query

KEY = "__key"
POSITION = "__pos"
"""Property names of the event key and position beside the stream's columns
(`bench.peers.files` refuses a stream that has columns of these names)."""


def _quoted(name: str) -> str:
    return f"`{name}`"


def _dialect(alias: dict[str, str] | None) -> Dialect:
    """In a stream filter properties are unqualified; in the where clause, `alias.prop`."""
    def column(ref: ColumnRef) -> str:
        name = _quoted(ref.column)
        return name if alias is None else f"{alias[ref.stream]}.{name}"
    return Dialect(column=column, double=lambda digits: digits, not_equal="!=",
                   true="true", false="false")


def _name(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def statement(query: Query) -> str:
    """The EPL statement of `query`, named by its id."""
    aliases = {stream: f"s{i}" for i, stream in enumerate(query.streams)}
    plain, qualified = _dialect(None), _dialect(aliases)
    filters, others = split(query, plain)
    where = [pair(p, qualified) for p in others]
    joined = len(query.streams) > 1
    sources = []
    for stream in query.streams:
        source = stream + (f"({' and '.join(filters[stream])})" if filters[stream] else "")
        if joined:
            source += f"#time({query.window + 1} milliseconds)"
        sources.append(f"{source} as {aliases[stream]}")
    bounds = []
    for a, b in combinations(query.streams, 2):
        x, y = aliases[a], aliases[b]
        bounds.append(f"{x}.{_quoted(KEY)} = {y}.{_quoted(KEY)}")
        ts_x, ts_y = f"{x}.{_quoted(TIMESTAMP)}", f"{y}.{_quoted(TIMESTAMP)}"
        bounds += [f"{ts_x} - {ts_y} <= {query.window}", f"{ts_y} - {ts_x} <= {query.window}"]
    select = ", ".join(f"{aliases[s]}.{_quoted(POSITION)} as p{i}"
                       for i, s in enumerate(query.streams))
    text = f"@name({_name(query.id)}) select {select} from {', '.join(sources)}"
    if bounds or where:
        text += " where " + " and ".join(bounds + where)
    return text
