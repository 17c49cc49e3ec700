"""The Kafka Streams peer's topology generator (bench/peers/kstreams_topology.py), without
a JVM: where each predicate lands, the join order it is given, and the results' text."""

from __future__ import annotations

from juggler.codec.avro import Codec, default_schemas_dir
from juggler.engine.events import Event
from juggler.language import compile_query

from bench.peers import kstreams_topology as kt
from bench.peers.kstreams_load import kstreams_sources

QUERY = ("q", "SELECT * FROM B, H, T WINDOW B.ts <= T.ts WHERE B.temp > 50 AND "
              "H.vib < T.fluct AND B.pressure > H.beatrate MAXWINDOW 2 sec")


def _compiled(*queries: tuple[str, str]):
    catalog = Codec().catalog()
    return [compile_query(q, text, catalog) for q, text in queries]


def _method(source: str, index: int) -> str:
    start = source.index(f"static void q{index}(")
    return source[start:source.index("\n    }\n", start)]


def test_predicates_filter_where_their_streams_first_meet() -> None:
    query, = _compiled(QUERY)
    columns = kt.stream_columns(default_schemas_dir(), ["B", "H", "T"])
    method = _method(kt.source([query], {"q": ("B", "H", "T")}, columns), 0)
    lines = method.splitlines()
    source_b = next(line for line in lines if "s0 = " in line)
    first = method[method.index("r1 = "):method.index("r2 = ")]
    second = method[method.index("r2 = "):]
    assert 'src.get("B").filter' in source_b and "e.v[1] >= " in source_b  # B.temp > 50
    assert 'src.get("H");' in method and 'src.get("T");' in method  # nothing to filter
    assert "r.e[0].v[0] > r.e[1].v[0]" in first  # B.pressure > H.beatrate: after B JOIN H
    assert "r.e[1].v[1] < r.e[2].v[0]" in second and "r.e[0].ts <= r.e[2].ts" in second
    assert "Math.abs(r.e[0].ts - r.e[2].ts) <= 2000L" in second  # MAXWINDOW, other pairs
    assert "ofTimeDifferenceWithNoGrace(Duration.ofMillis(2000L))" in first


def test_a_two_stream_query_joins_once_with_no_span_check() -> None:
    query, = _compiled(("p", "SELECT * FROM B, H WHERE B.temp > H.vib MAXWINDOW 1 sec"))
    columns = kt.stream_columns(default_schemas_dir(), ["B", "H"])
    method = _method(kt.source([query], {"p": ("B", "H")}, columns), 0)
    assert "r2" not in method and "Math.abs" not in method
    assert "r.e[0].v[1] > r.e[1].v[1]" in method
    assert '.to(results' in method and 'r.result("p")' in method


def test_join_order_takes_the_pair_with_fewest_results() -> None:
    # every B and T within the window pair up; H passes its filter once in 50 events,
    # so a pair with H has a fiftieth of the intermediate results of (B, T)
    query, = _compiled(("o", "SELECT * FROM B, H, T WHERE H.vib > 99 MAXWINDOW 1 sec"))
    events = []
    for i in range(300):
        ts = i * 10
        events += [Event("B", "k", ts, {"pressure": 1.0, "temp": 1.0, "alert": False}, 3 * i),
                   Event("H", "k", ts, {"beatrate": 1.0, "vib": 100.0 if i % 50 == 0 else 1.0,
                                        "alert": False}, 3 * i + 1),
                   Event("T", "k", ts, {"fluct": 1.0, "degree": 1.0, "incr": 1.0}, 3 * i + 2)]
    order = kt.join_orders([query], events)["o"]
    assert set(order[:2]) != {"B", "T"} and sorted(order) == ["B", "H", "T"]


def test_result_sources_name_the_producers_positions() -> None:
    parse = kstreams_sources("p.")
    assert parse(b"j1\t5000\tB:2:17,T:2:40") == [("p.juggler.stream.B", 2, 17),
                                                 ("p.juggler.stream.T", 2, 40)]
