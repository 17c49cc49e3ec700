"""The naive reference engine against hand-computed cases of semantics sections 3 and 4.

Queries are built by hand (no parser), so these tests pin the semantics, not the syntax.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juggler.engine.events import EngineConfig, Event, LateEvent, RegistrationError
from juggler.engine.naive import NaiveEngine
from juggler.language.model import (AttributePredicate, ColumnRef, Op, PairPredicate,
                                    PredicateKind, Query)


def col(text: str) -> ColumnRef:
    stream, column = text.split(".")
    return ColumnRef(stream, column)


def attr(column: str, op: Op, constant) -> AttributePredicate:
    if isinstance(constant, (int, float)) and not isinstance(constant, bool):
        constant = Fraction(constant)
    return AttributePredicate(col(column), op, constant)


def pair(left: str, op: Op, right: str, factor=1, offset=0) -> PairPredicate:
    """`left op factor * right + offset`; kind from the columns (ts-ts is WINDOW)."""
    lc, rc = col(left), col(right)
    if lc.stream == rc.stream:
        kind = PredicateKind.SELF
    elif lc.column == rc.column == "ts":
        kind = PredicateKind.WINDOW
    else:
        kind = PredicateKind.JOIN
    return PairPredicate(kind, lc, op, Fraction(factor), rc, Fraction(offset))


def query(qid: str, streams: str, *predicates, window: int | None = None,
          select: str | None = None) -> Query:
    refs = None if select is None else tuple(col(s) for s in select.split(","))
    return Query(qid, f"<{qid}>", tuple(streams.split(",")), refs, tuple(predicates), window)


class Feed:
    """Numbers events by their order of arrival, like line numbers of an events file."""

    def __init__(self, engine: NaiveEngine) -> None:
        self.engine = engine
        self.position = 0

    def __call__(self, stream: str, ts: int, key: str = "p1", **data):
        event = Event(stream, key, ts, data, self.position)
        self.position += 1
        return [r.to_json() for r in self.engine.process(event)]


def engine_with(*queries: Query, **config) -> tuple[NaiveEngine, Feed]:
    engine = NaiveEngine(EngineConfig(**config))
    for q in queries:
        assert engine.register(q) == []
    return engine, Feed(engine)


JOIN_BH = query("q1", "B,H", pair("B.temp", Op.GT, "H.vib"), window=1000,
                select="H.vib,B.ts")


def test_two_stream_join_results_positions_and_rows():
    _, feed = engine_with(JOIN_BH)
    assert feed("B", 0, temp=100) == []
    assert feed("H", 500, vib=90) == [
        {"query": "q1", "key": "p1", "ts": 500, "sources": {"B": 0, "H": 1},
         "row": {"H.vib": 90, "B.ts": 0}}]
    assert feed("H", 1500, vib=50) == []            # B@0 is 1500 ms away > MAXWINDOW
    assert feed("H", 600, key="p2", vib=1) == []    # other key: never joined
    assert feed("B", 1600, temp=60) == [             # H@500 too far; H@1500 joins
        {"query": "q1", "key": "p1", "ts": 1600, "sources": {"B": 4, "H": 2},
         "row": {"H.vib": 50, "B.ts": 1600}}]


def test_window_bound_is_inclusive_and_uses_max_minus_min():
    _, feed = engine_with(JOIN_BH)
    feed("B", 0, temp=100)
    assert len(feed("H", 1000, vib=0)) == 1
    assert feed("H", 1001, vib=0) == []


def test_each_result_emitted_once_at_its_last_event():
    q = query("q", "B,H,T", window=10_000)
    _, feed = engine_with(q)
    emitted = []
    for stream, ts in [("B", 0), ("H", 1), ("T", 2), ("B", 3), ("H", 4), ("T", 5)]:
        out = feed(stream, ts, x=ts)
        position = feed.position - 1
        for result in out:
            assert max(result["sources"].values()) == position  # last event is this one
        emitted += out
    # All 2*2*2 combinations, each exactly once.
    combos = [tuple(r["sources"].values()) for r in emitted]
    assert len(combos) == len(set(combos)) == 8


def test_results_of_one_call_ordered_by_query_then_positions():
    q_a = query("a", "B,H", window=100)
    q_b = query("b", "H", select="H.vib")
    _, feed = engine_with(q_b, q_a)
    feed("B", 0, temp=1)
    feed("B", 1, temp=2)
    out = feed("H", 2, vib=3)
    assert [(r["query"], tuple(r["sources"].values())) for r in out] == [
        ("b", (2,)), ("a", (0, 2)), ("a", (1, 2))]


def test_select_star_lists_data_columns_in_from_and_data_order_without_ts():
    q = query("q", "H,B", window=100)
    _, feed = engine_with(q)
    feed("B", 0, temp=101, pressure=150)
    [result] = feed("H", 10, vib=7, alert=True, beatrate=52)
    assert list(result["row"].items()) == [
        ("H.vib", 7), ("H.alert", True), ("H.beatrate", 52),
        ("B.temp", 101), ("B.pressure", 150)]
    assert list(result["sources"]) == ["H", "B"]
    assert result["ts"] == 10


def test_predicates_are_evaluated_exactly():
    # B.pressure - 50 = 45 normalizes to B.pressure = 95; T.fluct * 3 = 0.3 to
    # T.fluct = 0.3/3, which the double 0.1 does not satisfy in exact arithmetic.
    q1 = query("q1", "B", attr("B.pressure", Op.EQ, 95), select="B.pressure")
    q2 = query("q2", "T", attr("T.fluct", Op.EQ, Fraction(0.3) / 3), select="T.fluct")
    q3 = query("q3", "B,T", pair("T.fluct", Op.LT, "B.pressure", factor=Fraction(1, 2)),
               window=0)
    _, feed = engine_with(q1, q2, q3)
    assert [r["query"] for r in feed("B", 0, pressure=95.0)] == ["q1"]
    assert [r["query"] for r in feed("T", 0, fluct=0.1)] == ["q3"]  # q2 fails exactly
    assert feed("T", 0, fluct=47.5) == []                            # not strictly less
    assert [r["query"] for r in feed("T", 0, fluct=47)] == ["q3"]


def test_strings_booleans_self_and_ts_columns():
    q = query("q", "H,K", attr("H.alert", Op.EQ, True), attr("K.name", Op.NE, "x"),
              pair("H.beatrate", Op.GT, "H.vib"), pair("H.ts", Op.LT, "K.ts", offset=-5),
              window=100)
    _, feed = engine_with(q)
    feed("H", 10, alert=True, beatrate=60, vib=50)
    feed("H", 11, alert=False, beatrate=60, vib=50)
    feed("H", 12, alert=True, beatrate=40, vib=50)
    # H.ts < K.ts - 5: only H@10 against K@16; K.name = "x" never matches.
    assert feed("K", 16, name="x") == []
    assert [r["sources"] for r in feed("K", 16, name="y")] == [{"H": 0, "K": 4}]


def test_late_event_raises_and_changes_nothing():
    q = query("q", "B,H", window=10_000)
    engine, feed = engine_with(q, allowed_lateness=0)
    twin, twin_feed = engine_with(q, allowed_lateness=0)
    for f in (feed, twin_feed):
        f("B", 1000, temp=1)
    with pytest.raises(LateEvent) as raised:
        feed("H", 999, vib=1)
    assert raised.value.event.ts == 999 and "maxts 1000" in raised.value.reason
    twin_feed.position += 1  # keep positions aligned with the engine that saw it
    # Same behaviour afterwards as an engine that never saw the late event.
    for f in (feed, twin_feed):
        assert f("H", 1000, vib=2) == [{"query": "q", "key": "p1", "ts": 1000,
                                        "sources": {"B": 0, "H": 2}, "row": {
                                            "B.temp": 1, "H.vib": 2}}]
        assert [r["sources"] for r in f("B", 1000, temp=3)] == [{"B": 3, "H": 2}]
    # Lateness is per key: an old ts on a new key is fine.
    assert feed("B", 0, key="p2", temp=1) == []


def test_allowed_lateness_joins_out_of_order_events_as_if_in_order():
    q = query("q", "B,H", pair("H.ts", Op.LT, "B.ts"), window=400, select="B.ts,H.ts")
    arrival = [("B", 1000), ("H", 700), ("H", 500), ("B", 900)]
    engine, feed = engine_with(q, allowed_lateness=500)
    out_of_order = [r for s, ts in arrival for r in feed(s, ts, v=0)]
    _, sorted_feed = engine_with(q)
    in_order = [r for s, ts in sorted(arrival, key=lambda e: e[1])
                for r in sorted_feed(s, ts, v=0)]
    def rows(results):
        return sorted((r["ts"], tuple(r["row"].values())) for r in results)

    assert rows(out_of_order) == rows(in_order) == [
        (900, (900, 500)), (900, (900, 700)), (1000, (1000, 700))]
    with pytest.raises(LateEvent):   # 499 < 1000 - 500
        feed("H", 499, v=0)


def test_retention_floor_hides_old_events_from_a_later_query():
    def run(retention: int) -> list:
        q1 = query("q1", "B", window=None)
        engine, feed = engine_with(q1, retention=retention)
        feed("B", 0, temp=1)                  # position 0
        feed("B", 5000, temp=2)               # floor = 5000 - max(retention, 0)
        late_query = query("q2", "B,H", window=10_000, select="B.ts")
        assert engine.register(late_query) == []
        assert engine.horizon == 10_000       # raised at once, never shrinks
        return [r["row"]["B.ts"] for r in feed("H", 5000, vib=1) if r["query"] == "q2"]

    assert run(retention=0) == [5000]         # B@0 below the floor at the command
    assert run(retention=10_000) == [0, 5000]  # a larger retention keeps it


def test_floor_uses_horizon_of_queries_registered_before_the_events():
    big = query("big", "B", window=None)
    engine, feed = engine_with(big, retention=0)
    engine.register(query("wide", "B,K", window=8000))
    engine.deregister("wide")                 # H stays 8000
    feed("B", 0, temp=1)
    feed("B", 8000, temp=2)                   # floor 0: B@0 still held
    later = query("later", "B,K", window=8000, select="B.ts")
    assert [r["row"]["B.ts"] for r in engine.register(later, history=True)] == []
    assert [r["row"]["B.ts"] for r in feed("K", 8000, x=1)
            if r["query"] == "later"] == [0, 8000]


def test_register_with_history_returns_results_over_held_events_only():
    q1 = query("q1", "B", window=None)
    engine, feed = engine_with(q1, retention=1000)
    feed("B", 0, temp=1)       # 0: below the floor once ts 2000 arrives
    feed("H", 1500, vib=1)     # 1
    feed("B", 2000, temp=2)    # 2: floor = 2000 - 1000 = 1000
    feed("H", 1800, key="p2", vib=2)   # 3: another key, nothing to join
    q2 = query("q2", "B,H", window=5000, select="B.ts,H.ts")
    history = [r.to_json() for r in engine.register(q2, history=True)]
    assert [tuple(r["sources"].values()) for r in history] == [(2, 1)]
    assert history[0]["ts"] == 2000 and history[0]["row"] == {"B.ts": 2000, "H.ts": 1500}
    # Results after the command are new combinations only; B@0 stays invisible.
    later = [r for r in feed("H", 2000, vib=3) if r["query"] == "q2"]
    assert [tuple(r["sources"].values()) for r in later] == [(2, 4)]


def test_history_false_returns_nothing_but_sees_held_events_later():
    engine, feed = engine_with(retention=10_000)
    feed("B", 0, temp=1)
    assert engine.register(query("q", "B,H", window=100), history=False) == []
    assert [r["sources"] for r in feed("H", 50, vib=1)] == [{"B": 0, "H": 1}]


def test_deregister_stops_results_and_errors_change_nothing():
    engine, feed = engine_with(JOIN_BH)
    feed("B", 0, temp=100)
    with pytest.raises(RegistrationError):
        engine.register(query("q1", "B", window=99_999))   # repeated id
    assert engine.horizon == 1000 and list(engine.queries) == ["q1"]
    assert engine.queries["q1"] is JOIN_BH
    engine.deregister("q1")
    assert engine.queries == {}
    assert feed("H", 10, vib=1) == []
    with pytest.raises(RegistrationError):
        engine.deregister("q1")                              # unknown now
    # The id can be used again; it is a new query from this command on.
    engine.register(JOIN_BH)
    assert [r["sources"] for r in feed("H", 20, vib=2)] == [{"B": 0, "H": 2}]


# -- dropping unheld events is safe (semantics 3: held events are all a query needs) -----

_QUERIES = [
    query("ab", "B,H", pair("B.v", Op.LT, "H.v"), window=300),
    query("abc", "B,H,T", pair("B.ts", Op.LE, "T.ts"), window=800),
    query("wide", "T,B", attr("T.v", Op.GE, 2), window=1500),
    query("one", "H", attr("H.v", Op.NE, 1)),
]
_step = st.one_of(
    st.tuples(st.just("event"), st.sampled_from("BHT"), st.sampled_from(["p1", "p2"]),
              st.integers(-400, 400), st.integers(0, 4)),
    st.tuples(st.just("register"), st.sampled_from(_QUERIES), st.booleans()),
    st.tuples(st.just("deregister"), st.sampled_from(_QUERIES)),
)


def _run(engine: NaiveEngine, steps) -> list:
    out, clock = [], {"p1": 0, "p2": 0}
    for position, step in enumerate(steps):
        if step[0] == "event":
            _, stream, key, jump, value = step
            clock[key] += jump
            try:
                results = engine.process(Event(stream, key, clock[key], {"v": value}, position))
            except LateEvent:
                out.append(("late", position))
                continue
            for r in results:
                assert max(r.sources.values()) == position
            out.extend(r.identity() for r in results)
        elif step[0] == "register":
            try:
                out.extend(r.identity() for r in engine.register(step[1], history=step[2]))
            except RegistrationError:
                out.append(("dup", position))
        else:
            try:
                engine.deregister(step[1].id)
            except RegistrationError:
                out.append(("unknown", position))
    return out


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(_step, max_size=60), lateness=st.sampled_from([0, 100, 500]),
       retention=st.sampled_from([0, 400, 2000]))
def test_purging_unheld_events_never_changes_results(steps, lateness, retention):
    config = dict(allowed_lateness=lateness, retention=retention)
    keep_all = _run(NaiveEngine(EngineConfig(**config)), steps)
    purged = _run(NaiveEngine(EngineConfig(**config), purge=True), steps)
    assert purged == keep_all
