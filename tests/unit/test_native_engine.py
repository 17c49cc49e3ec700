"""What the worker and `juggler eval` rely on beyond the QueryEngine protocol."""

from __future__ import annotations

import gc
import sys
import threading

from juggler.engine.events import EngineConfig, Event, LateEvent
from juggler.engine.native_engine import NativeEngine
from juggler.language import ColumnType, compile_query

CATALOG = {"B": {"x": ColumnType.NUMBER}, "H": {"y": ColumnType.NUMBER}}


def _engine() -> NativeEngine:
    engine = NativeEngine(EngineConfig(allowed_lateness=10))
    engine.register(compile_query("q", "SELECT * FROM B, H MAXWINDOW 1 s WHERE B.x < H.y", CATALOG))
    return engine


def test_a_batch_gives_each_event_its_results_or_its_lateness() -> None:
    events = [Event("B", "k", 1000, {"x": 1}, 0), Event("H", "k", 1500, {"y": 2}, 1),
              Event("B", "k", 100, {"x": 0}, 2), Event("H", "k", 1600, {"y": 0}, 3)]
    outcomes = _engine().process_batch(events)
    assert [r.sources for r in outcomes[1]] == [{"B": 0, "H": 1}]
    assert not outcomes[0] and not outcomes[3]
    assert isinstance(outcomes[2], LateEvent) and outcomes[2].event is events[2]
    assert "maxts 1500" in outcomes[2].reason


def test_rows_follow_each_event_s_own_columns_whatever_the_last_event_had() -> None:
    """Column names are recognised by object while they repeat; an event with other
    columns, the same ones in another order, or equal names in new string objects
    must still get its own values under its own labels."""
    engine = NativeEngine(EngineConfig())
    engine.register(compile_query("q", "SELECT * FROM B WHERE B.x > 0", CATALOG))
    x, z = "x", "z"
    datas = [{x: 1, z: 2}, {x: 3, z: 4}, {z: 5, x: 6}, {x: 7}, {"".join(["x"]): 8, "".join(["z"]): 9}]
    outcomes = engine.process_batch([Event("B", "k", i, d, i) for i, d in enumerate(datas)])
    assert [list(r.row.items()) for out in outcomes for r in out] == [
        [("B.x", 1), ("B.z", 2)], [("B.x", 3), ("B.z", 4)], [("B.z", 5), ("B.x", 6)], [("B.x", 7)],
        [("B.x", 8), ("B.z", 9)]]


def test_a_late_event_in_a_batch_changes_nothing() -> None:
    batched, single = _engine(), _engine()
    events = [Event("B", "k", 1000, {"x": 1}, 0), Event("B", "k", 10, {"x": 1}, 1),
              Event("H", "k", 1200, {"y": 5}, 2)]
    batched.process_batch(events)
    single.process(events[0])
    single.process(events[2])
    assert batched.snapshot("k") is not None
    assert [(e.stream, e.ts) for e in batched.snapshot("k").events] == \
        [(e.stream, e.ts) for e in single.snapshot("k").events]


def test_counters_are_readable_from_another_thread() -> None:
    """The worker's HTTP thread serves /metrics from the engines' counters."""
    engine = _engine()
    engine.process(Event("B", "k", 0, {"x": 1}, 0))
    engine.process(Event("H", "k", 10, {"y": 2}, 1))
    seen: list = []
    reader = threading.Thread(target=lambda: seen.append((engine.manager.comparisons,
                                                          engine.held_events())))
    reader.start()
    reader.join()
    comparisons, held = seen[0]
    assert comparisons["A"] >= 2 and comparisons["J"] >= 1
    assert held == {"B": 1, "H": 1}


def test_a_data_column_named_ts_is_refused_rather_than_taken_for_the_event_time() -> None:
    import pytest

    with pytest.raises(ValueError, match="reserved for the event time"):
        _engine().process(Event("B", "k", 5, {"x": 1, "ts": 99}, 0))


def test_results_are_left_out_of_the_garbage_collector_and_stay_usable() -> None:
    """Results (and Kafka position tuples) are untracked by the collector: they hold
    no cycles, and twenty per event kept it busy. They must still read, compare and
    be freed like any other object."""
    engine = _engine()
    topic_pos = ("topic", 3)
    engine.process(Event("B", "k", 0, {"x": 1}, (*topic_pos, 7)))
    [result] = engine.process(Event("H", "k", 10, {"y": 2}, (*topic_pos, 8)))
    assert not gc.is_tracked(result)
    assert not gc.is_tracked(result.sources) and not gc.is_tracked(result.sources["B"])
    assert result.sources == {"B": ("topic", 3, 7), "H": ("topic", 3, 8)}
    assert (result.query, result.key, result.ts, result.row) == ("q", "k", 10, {"B.x": 1, "H.y": 2})
    assert sys.getrefcount(result) == 2  # the name and the call's argument: nothing leaks it


def test_a_stream_s_first_event_may_have_no_columns() -> None:
    """It has no last event's shape to share (an empty one is not "the same")."""
    engine = NativeEngine(EngineConfig())
    engine.register(compile_query("q", "SELECT * FROM B", CATALOG))
    outcomes = engine.process_batch([Event("B", "k", 0, {}, 0), Event("B", "k", 1, {"x": 1}, 1),
                                     Event("B", "k", 2, {}, 2)])
    assert [r.row for out in outcomes for r in out] == [{}, {"B.x": 1}, {}]
