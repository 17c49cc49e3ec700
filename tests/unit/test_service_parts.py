"""The worker's pure parts, without Kafka: settings, cursors, state records, topic
names."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

from juggler.engine.events import EngineConfig, Event
from juggler.language import compile_query
from juggler.service import held_state
from juggler.service.results_api import BadCursor, decode_cursor, encode_cursor
from juggler.service.settings import Settings
from juggler.service.topic_names import TopicNames


def test_settings_from_env_and_overrides() -> None:
    env = {"JUGGLER_BOOTSTRAP": "k:9092", "JUGGLER_WEB_PORT": "7000",
           "JUGGLER_ALLOWED_LATENESS": "5", "JUGGLER_CREATE_TOPICS": "false",
           "JUGGLER_SCHEMAS_DIR": "/x", "JUGGLER_SESSION_TIMEOUT": "6.5", "JUGGLER_ORDER": "wja"}
    s = Settings.from_env(env, web_port=None, retention=9)
    assert (s.bootstrap, s.web_port, s.allowed_lateness, s.retention) == ("k:9092", 7000, 5, 9)
    assert s.create_topics is False and s.schemas_dir == Path("/x")
    assert s.session_timeout == 6.5 and s.order == "WJA"
    assert s.max_idle_ms == 500 and Settings.from_env({"JUGGLER_MAX_IDLE_MS": "0"}).max_idle_ms == 0
    with pytest.raises(ValueError, match="max_idle_ms"):
        Settings.from_env({}, max_idle_ms=-1)
    with pytest.raises(ValueError, match="order"):
        Settings.from_env({"JUGGLER_ORDER": "AAA"})


def test_cursor_round_trip_and_rejects_garbage() -> None:
    assert decode_cursor(encode_cursor({0: 5, 3: 120})) == {0: 5, 3: 120}
    assert decode_cursor(None) == {} and decode_cursor("") == {}
    for bad in ("!!", "abc", encode_cursor({0: 1}) + "%", "LTE6Mg"):  # "-1:2"
        with pytest.raises(BadCursor):
            decode_cursor(bad)


CATALOG = {"B": {"temp": "number"}, "H": {"vib": "number"}}


def _catalog():
    from juggler.language import ColumnType

    return {s: {c: ColumnType.NUMBER for c in cols} for s, cols in CATALOG.items()}


def test_state_records_fold_to_what_is_held() -> None:
    """The last record per key wins, tombstones remove, and held events are references:
    their entity key, arrival sequence and input record, whatever the value says (an
    earlier version wrote a copy there)."""
    state = held_state.TaskState()
    headers = held_state.event_headers(b"p1", 7)
    state.apply(held_state.event_key("t.juggler.stream.B", 12), b"", headers)
    state.apply(held_state.event_key("t.juggler.stream.H", 3), b"\x01a copy",
                held_state.event_headers(b"p1", 8))
    state.apply(held_state.event_key("t.juggler.stream.B", 2), b"", held_state.event_headers(b"p2", 9))
    state.apply(held_state.event_key("t.juggler.stream.B", 13), b"", headers)
    state.apply(held_state.event_key("t.juggler.stream.B", 13), None, [])
    state.apply(b"k/p1", held_state.key_meta(5000, 1000), [])
    state.apply(b"q/a", held_state.query_record(0, "SELECT * FROM B"), [])
    state.apply(b"q/b", held_state.query_record(1, "SELECT * FROM H"), [])
    state.apply(b"q/a", None, [])
    state.apply(b"h", held_state.horizon_record(20_000), [])
    held = sorted((e.topic, e.offset, e.key, e.seq) for e in state.events.values())
    assert held == [("t.juggler.stream.B", 2, b"p2", 9), ("t.juggler.stream.B", 12, b"p1", 7),
                    ("t.juggler.stream.H", 3, b"p1", 8)]
    assert state.originals(5) == {("t.juggler.stream.B", 5): [2, 12],
                                  ("t.juggler.stream.H", 5): [3]}
    assert state.keys == {"p1": (5000, 1000)}
    assert state.queries == {"b": (1, "SELECT * FROM H", False)} and state.horizon == 20_000
    assert state.next_seq() == 10 and state.next_query_seq() == 2


def test_held_tracker_releases_events_below_the_floor_once() -> None:
    tracker = held_state.HeldTracker()
    for ts, offset in ((1000, 0), (300, 1), (2000, 2)):
        tracker.add("k", ts, "t", offset)
    assert tracker.release("k", 1500) == [b"e/t/1", b"e/t/0"]
    assert tracker.release("k", 1500) == [] and tracker.held() == 1
    assert tracker.release("other", 10**9) == []


def test_topic_names_and_query_ids() -> None:
    names = TopicNames("t1.")
    assert names.stream("B") == "t1.juggler.stream.B"
    assert names.results("q-1.x_y") == "t1.juggler.results.q-1.x_y"
    assert names.control == "t1.juggler.control" and names.fanout == "t1.juggler.control.fanout"
    assert names.query_id_problem("q1") is None
    assert "may only contain" in names.query_id_problem("q 1")
    assert names.query_id_problem("") is not None
    assert names.query_id_problem("x" * 240) is not None


def test_restore_cursor_takes_wanted_records_and_names_the_gone() -> None:
    """The sequential read of a stream partition keeps the wanted offsets, ignores the
    others (and records fetched again after a seek), and reports a wanted offset it
    passes without meeting as gone."""
    from juggler.service.restore import _Cursor

    cursor, got = _Cursor([3, 5, 9, 40]), {}
    for offset in (3, 4, 5, 6, 4, 7, 10):  # 4 again: a fetch from before a seek
        assert not cursor.take(offset, f"v{offset}".encode(), got)
    assert got == {3: b"v3", 5: b"v5"} and cursor.gone == [9] and cursor.next == 40
    assert cursor.rest() == [9, 40]
    assert cursor.take(40, b"v40", got) and got[40] == b"v40"


def test_freezing_the_heap_collects_first_and_leaves_later_objects_to_the_collector() -> None:
    import gc
    import weakref

    from juggler.service.worker import _freeze_heap

    class Node:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the cyclic collector frees it

    try:
        garbage = Node()
        gone = weakref.ref(garbage)
        del garbage
        _freeze_heap()
        assert gone() is None  # collected before the freeze, not frozen for good
        assert gc.get_freeze_count() > 0
        later = Node()
        assert any(o is later for o in gc.get_objects(generation=0))  # collected as before
    finally:
        gc.unfreeze()
