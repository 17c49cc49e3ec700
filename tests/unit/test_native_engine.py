"""What the worker and `juggler eval` rely on beyond the QueryEngine protocol."""

from __future__ import annotations

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
    assert outcomes[0] == [] and outcomes[3] == []
    assert isinstance(outcomes[2], LateEvent) and outcomes[2].event is events[2]
    assert "maxts 1500" in outcomes[2].reason


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
