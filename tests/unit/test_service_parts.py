"""The worker's pure parts, without Kafka: settings, cursors, state encoding, the
per-partition record admission, topic names."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("faust")
pytest.importorskip("prometheus_client")

from juggler.engine.events import EngineConfig, Event
from juggler.engine.operator import JugglerEngine
from juggler.language import compile_query
from juggler.service.partition_engines import (
    PartitionEngine,
    decode_snapshot,
    encode_snapshot,
)
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
    assert s.processing_guarantee == "exactly_once"
    with pytest.raises(ValueError, match="processing_guarantee"):
        Settings.from_env({}, processing_guarantee="maybe")
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


def test_snapshot_encoding_restores_an_equivalent_engine() -> None:
    query = compile_query("q", "SELECT * FROM B, H WHERE B.temp > H.vib MAXWINDOW 5 sec",
                          _catalog())
    live = JugglerEngine(EngineConfig(allowed_lateness=100))
    live.register(query)
    events = [Event("H", "k", 1000, {"vib": 1.5}, ("t.H", 0, 7)),
              Event("B", "k", 1200, {"temp": 2}, ("t.B", 0, 3)),
              Event("H", "k", 1100, {"vib": 0.25}, ("t.H", 0, 8))]
    for e in events:
        live.process(e)
    snapshot = live.snapshot("k")
    again = decode_snapshot(encode_snapshot(snapshot), "k")
    assert (again.maxts, again.floor) == (snapshot.maxts, snapshot.floor)
    assert [(e.stream, e.ts, e.data, e.position) for e in again.events] == \
        [(e.stream, e.ts, e.data, e.position) for e in snapshot.events]
    restored = JugglerEngine(EngineConfig(allowed_lateness=100))
    restored.register(query)
    restored.restore("k", again)
    nxt = Event("B", "k", 1300, {"temp": 1.0}, ("t.B", 0, 4))
    a = [r.identity() for r in live.process(nxt)]
    b = [r.identity() for r in restored.process(Event("B", "k", 1300, {"temp": 1.0}, ("t.B", 0, 4)))]
    assert a == b and len(a) == 1  # joins H(vib 0.25) only


def test_admit_skips_repeats_and_reports_gaps() -> None:
    pe = PartitionEngine(0, JugglerEngine())
    tp, fan = ("s", 0), ("fanout", 0)
    assert pe.admit(tp, 10, False) == "take"  # first record: no committed offset known
    assert pe.admit(tp, 11, False) == "take"
    assert pe.admit(tp, 11, False) == "again"
    assert pe.admit(tp, 5, False) == "again"
    assert pe.admit(tp, 14, False) == "gap"   # 12, 13 not delivered: the caller checks
    assert pe.next_offsets[tp] == 12          # nothing taken yet
    pe.take(tp, 14)                           # ... and found nothing committed in between
    assert pe.admit(tp, 15, False) == "take"
    assert pe.admit(tp, 19, False, now=1.0) == "gap"  # 16..18 hold records: seek back
    pe.refetch(tp, 19, now=1.0)
    assert pe.admit(tp, 20, False, now=2.0) == "stale"  # fetched before the seek
    assert pe.stuck(10.0, 20.0) == [] and pe.stuck(22.0, 20.0) == [tp]
    assert pe.admit(tp, 16, False, now=3.0) == "take"   # the re-fetch
    assert pe.stuck(30.0, 20.0) == []
    assert [pe.admit(tp, o, False) for o in (17, 18, 19, 19)] == ["take"] * 3 + ["again"]
    pe.next_offsets[fan] = 4
    assert pe.admit(fan, 6, True) == "take"   # transaction markers on the fanout topic
    assert pe.next_offsets[fan] == 7


def test_topic_names_and_query_ids() -> None:
    names = TopicNames("t1.")
    assert names.stream("B") == "t1.juggler.stream.B"
    assert names.results("q-1.x_y") == "t1.juggler.results.q-1.x_y"
    assert names.control == "t1.juggler.control" and names.fanout == "t1.juggler.control.fanout"
    assert names.query_id_problem("q1") is None
    assert "may only contain" in names.query_id_problem("q 1")
    assert names.query_id_problem("") is not None
    assert names.query_id_problem("x" * 240) is not None
