"""The worker's pure parts, without Kafka: settings, cursors, topic names."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("prometheus_client")

from juggler.serving.results_api import BadCursor, decode_cursor, encode_cursor
from juggler.runtime.settings import Settings
from juggler.runtime.topic_names import TopicNames


def test_settings_from_env_and_overrides() -> None:
    env = {"JUGGLER_BOOTSTRAP": "k:9092", "JUGGLER_WEB_PORT": "7000",
           "JUGGLER_ALLOWED_LATENESS": "5", "JUGGLER_CREATE_TOPICS": "false",
           "JUGGLER_SCHEMAS_DIR": "/x", "JUGGLER_SESSION_TIMEOUT": "6.5", "JUGGLER_ORDER": "wja"}
    s = Settings.from_env(env, {"web_port": None, "retention": 9})
    assert (s.bootstrap, s.web_port, s.allowed_lateness, s.retention) == ("k:9092", 7000, 5, 9)
    assert s.create_topics is False and s.schemas_dir == Path("/x")
    assert s.session_timeout == 6.5 and s.order == "WJA"
    assert s.max_idle_ms == 500 and Settings.from_env({"JUGGLER_MAX_IDLE_MS": "0"}).max_idle_ms == 0
    with pytest.raises(ValueError, match="max_idle_ms"):
        Settings.from_env({}, {"max_idle_ms": -1})
    assert (s.idle_estimate, s.idle_margin_ms) == (True, 20)
    off = Settings.from_env({"JUGGLER_IDLE_ESTIMATE": "false", "JUGGLER_IDLE_MARGIN_MS": "5"})
    assert (off.idle_estimate, off.idle_margin_ms) == (False, 5)
    with pytest.raises(ValueError, match="idle_margin_ms"):
        Settings.from_env({}, {"idle_margin_ms": -1})
    with pytest.raises(ValueError, match="order"):
        Settings.from_env({"JUGGLER_ORDER": "AAA"})


def test_cursor_round_trip_and_rejects_garbage() -> None:
    assert decode_cursor(encode_cursor({0: 5, 3: 120})) == {0: 5, 3: 120}
    assert decode_cursor(None) == {} and decode_cursor("") == {}
    for bad in ("!!", "abc", encode_cursor({0: 1}) + "%", "LTE6Mg"):  # "-1:2"
        with pytest.raises(BadCursor):
            decode_cursor(bad)


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
    from juggler.runtime.readback import _Cursor

    cursor, got = _Cursor([3, 5, 9, 40]), {}
    for offset in (3, 4, 5, 6, 4, 7, 10):  # 4 again: a fetch from before a seek
        assert not cursor.take(offset, f"v{offset}".encode(), got)
    assert got == {3: b"v3", 5: b"v5"} and cursor.gone == [9] and cursor.next == 40
    assert cursor.rest() == [9, 40]
    assert cursor.take(40, b"v40", got) and got[40] == b"v40"


def test_a_restore_collects_first_pauses_the_collector_and_freezes_what_it_leaves() -> None:
    import gc
    import weakref

    from juggler.runtime.restore import collector_paused

    class Node:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the cyclic collector frees it

    try:
        garbage = Node()
        gone = weakref.ref(garbage)
        del garbage
        with collector_paused():
            assert gone() is None  # collected before the restore, not frozen for good
            assert not gc.isenabled()
            restored = Node()
            left = Node()
            left_gone = weakref.ref(left)
            del left
        assert gc.isenabled()
        frozen = gc.get_freeze_count()
        assert frozen > 0 and not any(o is restored for o in gc.get_objects())
        gc.collect()
        assert left_gone() is not None  # the restore's own cycles wait for the next one
        later = Node()
        assert any(o is later for o in gc.get_objects(generation=0))  # collected as before
        with collector_paused():
            assert left_gone() is None
    finally:
        gc.unfreeze()
