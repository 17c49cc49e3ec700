"""The shared operator on cases a user would hit, each checked against exact answers,
in every evaluation order: an order changes what the operator costs, never what it
returns."""

from __future__ import annotations

import pytest

from juggler.engine.events import EngineConfig, Event
from juggler.engine.native_engine import NativeEngine
from juggler.engine.orders import STATIC_ORDERS
from juggler.language import ColumnType, compile_query

N, S = ColumnType.NUMBER, ColumnType.STRING
CATALOG = {"B": {"x": N, "s": S}, "H": {"y": N, "s": S}, "T": {"z": N}}


@pytest.fixture(autouse=True, params=("adaptive",) + STATIC_ORDERS)
def evaluation_order(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The order a test's engine uses unless the test names one."""
    monkeypatch.setitem(globals(), "_ORDER", request.param)


_ORDER = "adaptive"


def _engine(*queries: tuple[str, str], **config) -> NativeEngine:
    engine = NativeEngine(EngineConfig(**{"order": _ORDER, **config}))
    for qid, text in queries:
        engine.register(compile_query(qid, text, CATALOG))
    return engine


def _feed(engine: NativeEngine, *events: tuple[str, int, dict], key: str = "k") -> list[tuple]:
    out = []
    for position, (stream, ts, data) in enumerate(events):
        for r in engine.process(Event(stream, key, ts, data, position)):
            out.append((r.query, r.ts, r.sources))
    return out


def test_exact_arithmetic_decides_boundaries() -> None:
    """0.1 * 3 is 0.30000000000000004 in floats; the predicate is about exact values."""
    engine = _engine(("third", "SELECT * FROM B WHERE B.x * 3 = 0.3"),
                     ("above", "SELECT * FROM B WHERE B.x * 3 > 0.3"))
    results = _feed(engine, ("B", 0, {"x": 0.1, "s": "a"}))
    # 0.1 (the double) is slightly above 1/10, and 0.3 (the double) slightly below 3/10
    assert results == [("above", 0, {"B": 0})]


def test_integers_beyond_double_precision_compare_exactly() -> None:
    engine = _engine(("big", "SELECT * FROM B WHERE B.x >= 9007199254740993"))
    results = _feed(engine, ("B", 0, {"x": 2**53, "s": "a"}), ("B", 1, {"x": 2**53 + 1, "s": "a"}))
    assert results == [("big", 1, {"B": 1})]


def test_join_with_negative_factor_retrieves_the_right_partners() -> None:
    """B.x > -2 * H.y + 1 solved for H.y flips the range the JES is probed with."""
    engine = _engine(("q", "SELECT * FROM B, H MAXWINDOW 10 s WHERE B.x > -2 * H.y + 1"), order="JAW")
    results = _feed(engine, ("H", 0, {"y": 1, "s": "a"}), ("H", 1, {"y": -3, "s": "a"}),
                    ("B", 2, {"x": 0, "s": "a"}))
    assert results == [("q", 2, {"B": 2, "H": 0})]  # 0 > -1 holds; 0 > 7 does not


def test_string_equality_join() -> None:
    engine = _engine(("q", "SELECT * FROM B, H MAXWINDOW 1 s WHERE B.s = H.s"))
    results = _feed(engine, ("H", 0, {"y": 1, "s": "a"}), ("H", 1, {"y": 1, "s": "b"}),
                    ("B", 2, {"x": 0, "s": "b"}))
    assert results == [("q", 2, {"B": 2, "H": 1})]


def test_reused_query_bit_does_not_inherit_cached_attribute_masks() -> None:
    """A deregistered query's bit goes to the next registration; masks cached on held
    events for the old query must not leak into the new one."""
    engine = _engine(("old", "SELECT * FROM B, H MAXWINDOW 0 s"))
    _feed(engine, ("B", 0, {"x": 0, "s": "a"}))
    engine.deregister("old")
    engine.register(compile_query("new", "SELECT * FROM B, H MAXWINDOW 0 s WHERE B.x > 0", CATALOG))
    assert _feed(engine, ("H", 0, {"y": 0, "s": "a"})) == []


def test_each_result_once_when_its_last_event_arrives() -> None:
    engine = _engine(("q", "SELECT * FROM B, H, T MAXWINDOW 5 s"))
    results = _feed(engine, ("B", 0, {"x": 0, "s": "a"}), ("H", 1, {"y": 0, "s": "a"}),
                    ("T", 2, {"z": 0}), ("T", 3, {"z": 0}))
    assert results == [("q", 2, {"B": 0, "H": 1, "T": 2}), ("q", 3, {"B": 0, "H": 1, "T": 3})]


def test_queries_with_different_windows_share_one_state() -> None:
    engine = _engine(("short", "SELECT * FROM B, H MAXWINDOW 1 s"),
                     ("long", "SELECT * FROM B, H MAXWINDOW 10 s"))
    results = _feed(engine, ("B", 0, {"x": 0, "s": "a"}), ("H", 500, {"y": 0, "s": "a"}),
                    ("H", 5000, {"y": 0, "s": "a"}))
    assert results == [("short", 500, {"B": 0, "H": 1}), ("long", 500, {"B": 0, "H": 1}),
                       ("long", 5000, {"B": 0, "H": 2})]
    assert engine.held_events() == {"B": 1, "H": 2}


def test_retention_floor_hides_events_from_a_later_query_and_purges_state() -> None:
    engine = _engine(("first", "SELECT * FROM B, H MAXWINDOW 1 s"))
    _feed(engine, ("B", 0, {"x": 0, "s": "a"}), ("H", 5000, {"y": 0, "s": "a"}))
    assert engine.held_events() == {"B": 0, "H": 1}  # B@0 fell below 5000 - 1000 and was purged
    late_query = compile_query("wide", "SELECT * FROM B, H MAXWINDOW 10 s", CATALOG)
    assert engine.register(late_query, history=True) == []
    engine2 = _engine(("first", "SELECT * FROM B, H MAXWINDOW 1 s"), retention=10_000)
    _feed(engine2, ("B", 0, {"x": 0, "s": "a"}), ("H", 5000, {"y": 0, "s": "a"}))
    history = engine2.register(late_query, history=True)
    assert [(r.query, r.ts, r.sources) for r in history] == [("wide", 5000, {"B": 0, "H": 1})]


def test_restored_key_joins_like_the_original() -> None:
    """A worker restarted from a snapshot must produce what the original would have."""
    texts = [("q", "SELECT * FROM B, H MAXWINDOW 5 s WHERE B.x < H.y")]
    original = _engine(*texts)
    _feed(original, ("B", 0, {"x": 1, "s": "a"}), ("B", 1000, {"x": 5, "s": "a"}))
    restarted = _engine(*texts)
    restarted.restore("k", original.snapshot("k"))
    incoming = Event("H", "k", 2000, {"y": 3, "s": "a"}, 9)
    expected = [(r.query, r.sources) for r in original.process(incoming)]
    assert [(r.query, r.sources) for r in restarted.process(incoming)] == expected == [("q", {"B": 0, "H": 9})]
    assert _held(restarted) == _held(original)


def _held(engine: NativeEngine) -> tuple:
    snapshot = engine.snapshot("k")
    return (snapshot.maxts, snapshot.floor,
            [(e.stream, e.ts, e.data, e.position) for e in snapshot.events])


def test_nearly_equal_equality_constants_give_each_partner_once() -> None:
    """1/10 and the double nearest it are different constants whose widened search
    ranges overlap; a partner inside both must still make one result per query."""
    double_tenth = "0.1000000000000000055511151231257827021181583404541015625"
    texts = [(f"q{i}", f"SELECT * FROM B, H MAXWINDOW 10 s WHERE H.y = {c} and B.x < H.y")
             for i, c in enumerate(("0.1", double_tenth))]
    from juggler.engine.naive import NaiveEngine

    events = (("H", 0, {"y": 0.1, "s": "a"}), ("B", 1, {"x": 0.0, "s": "a"}),
              ("H", 2, {"y": 0.1, "s": "a"}), ("B", 3, {"x": -1.0, "s": "a"}))
    for order in ("adaptive", "AJW", "JAW", "WJA"):
        engine = _engine(*texts, order=order)
        check = _engine(*texts, order=order)
        naive = NaiveEngine(EngineConfig())
        for qid, text in texts:
            naive.register(compile_query(qid, text, CATALOG))
        expected = _feed(naive, *events)
        assert sorted(_feed(engine, *events), key=repr) == sorted(expected, key=repr)
        results = _feed(check, *events)
        assert len({repr(r) for r in results}) == len(results), "a result came out twice"
        assert {q for q, _, _ in results} == {"q0", "q1"}


def test_comparisons_whose_column_cancels_out_are_true_or_false_as_written() -> None:
    """Semantics 2, comparisons whose column cancels out: `B.x * 0 = 0`, `B.s = B.s`
    hold on every event; their false forms on none, so a query with one never matches;
    the reference agrees."""
    from juggler.engine.naive import NaiveEngine

    queries = [
        ("zero", "SELECT * FROM B WHERE B.x * 0 = 0"),
        ("one", "SELECT * FROM B WHERE B.x * 0 = 1"),
        ("same", "SELECT * FROM B WHERE B.s = B.s"),
        ("differs", "SELECT * FROM B WHERE B.s != B.s"),
        ("tiny", "SELECT * FROM B WHERE B.x - B.x < 1e-300"),
        ("join_false", "SELECT * FROM B, H MAXWINDOW 1s WHERE B.x = H.y and H.y - H.y > 0"),
        ("join_true", "SELECT * FROM B, H MAXWINDOW 1s WHERE B.x = H.y and H.y - H.y >= 0"),
    ]
    events = [("B", 0, {"x": 1e308, "s": "a"}), ("B", 1, {"x": -0.1, "s": ""}),
              ("H", 2, {"y": -0.1, "s": "b"})]
    want = [("zero", 0, {"B": 0}), ("same", 0, {"B": 0}), ("tiny", 0, {"B": 0}),
            ("zero", 1, {"B": 1}), ("same", 1, {"B": 1}), ("tiny", 1, {"B": 1}),
            ("join_true", 2, {"B": 1, "H": 2})]
    assert _feed(_engine(*queries), *events) == want
    reference = NaiveEngine(EngineConfig())
    for qid, text in queries:
        reference.register(compile_query(qid, text, CATALOG))
    got = [(r.query, r.ts, r.sources) for position, (stream, ts, data) in enumerate(events)
           for r in reference.process(Event(stream, "k", ts, data, position))]
    assert got == want
