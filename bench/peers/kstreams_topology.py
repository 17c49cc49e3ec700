"""Compiled Juggler queries as the Kafka Streams topology a careful user would write.

Why generated Java and not a query description that the Java side interprets: a user
writes each rule's filters and joins by hand, as lambdas the JIT compiles to straight
code; an interpreter of predicate lists would add a layer no such application has (and
put our design, not Kafka Streams', on the measured path). So `source` writes
`Queries.java`, compiled beside `KStreamsPeer.java` (which holds the serdes, the Avro
decoding and the settings), one static method per query:

    // j2: FROM B, H, T, MAXWINDOW 2000 ms; (B, H) joined first, then T
    KStream<String, Ev> s0 = src.get("B").filter((k, e) -> e.v[0] <= 1.2999999999999998, ...);
    KStream<String, Ev> s1 = src.get("H").filter((k, e) -> e.v[0] <= 1.2599999999999998, ...);
    KStream<String, Ev> s2 = src.get("T");
    KStream<String, Row> r1 = s0.join(s1, (a, b) -> Row.of(3, 0, a, 1, b),
        JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis(2000)),
        StreamJoined.with(Serdes.String(), EV, EV).withName("j2-1").withStoreName("j2-1"));
    KStream<String, Row> r2 = r1.join(s2, (r, c) -> r.with(2, c), ...)
        .filter((k, r) -> r.e[1].v[1] > 2.5 * r.e[2].v[2] + 70.24 && r.e[0].ts < r.e[2].ts + 440
                          && Math.abs(r.e[0].ts - r.e[2].ts) <= 2000 && ...);
    r2.mapValues(r -> r.result("j2")).to(results, ...);

- One source stream per topic, shared by every query; attribute (and same-stream)
  predicates filter it per query before any join, so a store only holds the events
  that can still match (Kafka Streams shares no filter or store between queries).
- Joins on the record key (the entity key, co-partitioned: no repartition topic),
  with `JoinWindows` of the query's MAXWINDOW (inclusive bounds, as MAXWINDOW's), no
  grace: the records are merged by event time, so none is behind the window's end.
- Join and window predicates filter right after the join that first holds both of
  their streams. A join result's timestamp is its newer event's, so for a third
  stream the window bounds only that one; MAXWINDOW's other pairs are checked
  explicitly.
- Three streams join as (x JOIN y) JOIN z, with the pair (x, y) that gives the fewest
  intermediate results (`join_orders`, measured on the events).
- Predicates are written with `bench.peers.predicates`, as for Esper and Flink: exact
  double thresholds for attribute predicates, integer offsets for `ts`.
- Each event carries its source position (partition, offset), so results compare
  with Juggler's by (query, sources).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from itertools import combinations
from pathlib import Path
from typing import Any, Iterable

from bench.peers.predicates import Dialect, pair, split
from juggler.language import TIMESTAMP, AttributePredicate, ColumnRef, Query

CLASS = "Queries"


def stream_columns(schemas: Path, streams: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Each stream's columns in the order of its Avro schema, `ts` left out: the index
    of a column in `Ev.v` (KStreamsPeer decodes in this order)."""
    out = {}
    for stream in streams:
        fields = json.loads((schemas / f"{stream}.avsc").read_text())["fields"]
        for f in fields:
            if f["type"] not in ("double", "float", "int", "long", "boolean"):
                raise ValueError(f"stream {stream}: column {f['name']} of type {f['type']}: "
                                 f"the Kafka Streams peer takes numbers and booleans only")
        out[stream] = tuple(f["name"] for f in fields if f["name"] != TIMESTAMP)
    return out


def join_orders(queries: list[Query], events: list[Any]) -> dict[str, tuple[str, ...]]:
    """For each query of three streams, its streams in join order: the pair first whose
    join (with the predicates over those two streams and MAXWINDOW) has the fewest
    results on `events`, counted by Juggler's engine on each pair as a query of its own.
    Queries of two streams keep their FROM order."""
    from juggler.engine.events import EngineConfig, LateEvent, process_batch
    from juggler.engine.native_engine import NativeEngine

    engine = NativeEngine(EngineConfig())
    pairs: dict[str, list[tuple[str, ...]]] = {}
    for q in queries:
        if len(q.streams) < 3:
            continue
        if len(q.streams) > 3:
            raise ValueError(f"query {q.id}: the Kafka Streams peer joins at most 3 streams")
        for a, b in combinations(q.streams, 2):
            preds = tuple(p for p in q.predicates if p.streams <= {a, b})
            engine.register(replace(q, id=f"{q.id}|{a}|{b}", streams=(a, b),
                                    predicates=preds, select=None))
            pairs.setdefault(q.id, []).append((a, b))
    counts: Counter[str] = Counter()
    for at in range(0, len(events), 1024):
        for outcome in process_batch(engine, events[at:at + 1024]):
            if not isinstance(outcome, LateEvent):
                counts.update(r.query for r in outcome)
    orders = {}
    for q in queries:
        if q.id not in pairs:
            orders[q.id] = q.streams
            continue
        a, b = min(pairs[q.id], key=lambda ab: counts[f"{q.id}|{ab[0]}|{ab[1]}"])
        orders[q.id] = (a, b, next(s for s in q.streams if s not in (a, b)))
    return orders


def _java_string(text: str) -> str:
    return json.dumps(text)  # a JSON string of printable ASCII is a Java string literal


def _dialect(columns: dict[str, tuple[str, ...]], ref_of) -> Dialect:
    def column(ref: ColumnRef) -> str:
        base = ref_of(ref.stream)
        if ref.column == TIMESTAMP:
            return f"{base}.ts"
        return f"{base}.v[{columns[ref.stream].index(ref.column)}]"
    return Dialect(column=column, double=lambda digits: digits, not_equal="!=",
                   true="1.0", false="0.0")


def _conjunction(terms: list[str]) -> str:
    return " && ".join(f"({t})" for t in terms)


def _method(index: int, query: Query, order: tuple[str, ...],
            columns: dict[str, tuple[str, ...]]) -> str:
    for p in query.predicates:
        if isinstance(p, AttributePredicate) and isinstance(p.constant, str):
            raise ValueError(f"query {query.id}: string predicates are not supported here")
    slot = {s: i for i, s in enumerate(query.streams)}  # FROM order: the Row's layout
    width = len(query.streams)
    qid = query.id
    lines = [f"    // {qid}: FROM {', '.join(query.streams)}, MAXWINDOW {query.window} ms"
             + (f"; ({order[0]}, {order[1]}) joined first, then {order[2]}"
                if len(order) == 3 else ""),
             f"    static void q{index}(Map<String, KStream<String, Ev>> src, String results) {{"]
    single = _dialect(columns, lambda stream: "e")
    in_row = _dialect(columns, lambda stream: f"r.e[{slot[stream]}]")
    filters, joined = split(query, single)
    for i, stream in enumerate(order):
        source = f"src.get({_java_string(stream)})"
        if filters[stream]:
            source += (f".filter((k, e) -> {_conjunction(filters[stream])}, "
                       f"Named.as({_java_string(f'{qid}-{stream}')}))")
        lines.append(f"        KStream<String, Ev> s{i} = {source};")
    if width == 1:
        lines.append(f"        KStream<String, Row> out = s0.mapValues(e -> new Row(new Ev[] {{e}}), "
                     f"Named.as({_java_string(f'{qid}-row')}));")
    else:
        window = (f"JoinWindows.ofTimeDifferenceWithNoGrace(Duration.ofMillis({query.window}L))")
        have = {order[0]}
        previous = "s0"
        for step in range(1, width):
            stream = order[step]
            have.add(stream)
            name = _java_string(f"{qid}-{step}")
            if step == 1:
                joiner = (f"(a, b) -> Row.of({width}, {slot[order[0]]}, a, "
                          f"{slot[stream]}, b)")
                serdes = "EV, EV"
            else:
                joiner = f"(r, c) -> r.with({slot[stream]}, c)"
                serdes = "ROW, EV"
            terms = [pair(p, in_row) for p in joined  # where both streams first meet
                     if p.streams <= have and not p.streams <= set(order[:step])]
            if step == width - 1 and width > 2:  # MAXWINDOW between the earlier streams
                terms += [f"Math.abs(r.e[{slot[a]}].ts - r.e[{slot[stream]}].ts) <= "
                          f"{query.window}L" for a in order[:step]]
            expression = (f"{previous}.join(s{step}, {joiner}, {window}, "
                          f"StreamJoined.with(Serdes.String(), {serdes}).withName({name})"
                          f".withStoreName({name}))")
            if terms:
                expression += (f"\n            .filter((k, r) -> {_conjunction(terms)}, "
                               f"Named.as({_java_string(f'{qid}-{step}-where')}))")
            lines.append(f"        KStream<String, Row> r{step} = {expression};")
            previous = f"r{step}"
        lines.append(f"        KStream<String, Row> out = {previous};")
    lines += [f"        out.mapValues(r -> r.result({_java_string(qid)}), "
              f"Named.as({_java_string(f'{qid}-result')}))",
              f"            .to(results, Produced.with(Serdes.String(), Serdes.String())"
              f".withName({_java_string(f'{qid}-out')}));",
              "    }"]
    return "\n".join(lines)


def source(queries: list[Query], orders: dict[str, tuple[str, ...]],
           columns: dict[str, tuple[str, ...]]) -> str:
    """`Queries.java`: the streams read (those the queries use, in `columns`' order),
    their columns, and `build`, which adds every query to the topology."""
    streams = [s for s in columns if any(s in q.streams for q in queries)]
    methods = [_method(i, q, orders[q.id], columns) for i, q in enumerate(queries)]
    calls = "\n".join(f"        q{i}(src, results);" for i in range(len(queries)))
    return f"""// Generated by bench/peers/kstreams_topology.py: the queries of one benchmark run.
import java.time.Duration;
import java.util.Map;

import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;

final class {CLASS} {{
    static final String[] STREAMS = {{{', '.join(_java_string(s) for s in streams)}}};
    static final String[][] COLUMNS = {{
{chr(10).join('        {' + ', '.join(_java_string(c) for c in columns[s]) + '},' for s in streams)}
    }};

    static final Serde<Ev> EV = KStreamsPeer.EV;
    static final Serde<Row> ROW = KStreamsPeer.ROW;

    static void build(Map<String, KStream<String, Ev>> src, String results) {{
{calls}
    }}

{chr(10).join(methods)}

    private {CLASS}() {{
    }}
}}
"""
