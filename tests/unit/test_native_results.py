"""The native operator's Avro result bodies (`NativeEngine.process_batch_encoded`) are
the bytes the Python path writes for the same results, and it leaves to Python exactly
the results that path must decide itself."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from juggler.codec.avro import RESULT, Codec, SchemaViolation, result_record
from juggler.codec.result_body import Unwritable, result_body
from juggler.engine.events import EngineConfig, Event, LateEvent, Result
from juggler.engine.native_engine import NativeEngine
from juggler.language import ColumnType, compile_query

NUMBER, STRING, BOOLEAN = ColumnType.NUMBER, ColumnType.STRING, ColumnType.BOOLEAN
CATALOG = {"B": {"x": NUMBER, "s": STRING, "ok": BOOLEAN},
           "H": {"y": NUMBER, "t": STRING},
           "K": {"z": NUMBER, "x": NUMBER}}
COLUMNS = [(stream, column) for stream, columns in CATALOG.items() for column in columns]
NO_LIMIT = 1 << 62


def python_bodies(results: list[Result]) -> list[bytes | None]:
    """What the worker's Python path writes for each result: `result_body`'s bytes, or
    None where it hands the record to fastavro (or refuses it)."""
    out: list[bytes | None] = []
    for result in results:
        try:
            out.append(result_body(result_record(result)))
        except (Unwritable, SchemaViolation):
            out.append(None)
    return out


def engines(queries: list[tuple[str, str]], engine_class: type[NativeEngine] = NativeEngine
            ) -> tuple[NativeEngine, NativeEngine]:
    """Two engines with the same queries: one for `process_batch`, one (of
    `engine_class`) for the encoded."""
    pair = NativeEngine(EngineConfig(allowed_lateness=5)), engine_class(EngineConfig(allowed_lateness=5))
    for engine in pair:
        for qid, text in queries:
            engine.register(compile_query(qid, text, CATALOG))
    return pair


def assert_same_results(queries: list[tuple[str, str]], events: list[Event],
                        budget: int = NO_LIMIT, engine_class: type[NativeEngine] = NativeEngine) -> int:
    """Both entry points on the same events: the same lateness and, per result, the
    body the Python path writes, or the same `Result` where that path must decide.
    Returns how many results had a body."""
    plain, encoded = engines(queries, engine_class)
    written = 0
    for event, old, new in zip(events, plain.process_batch(events),
                               encoded.process_batch_encoded(events, budget), strict=True):
        if isinstance(old, LateEvent):
            assert isinstance(new, LateEvent) and new.reason == old.reason
            continue
        assert len(new) == len(old)
        for result, item, body in zip(old, new, python_bodies(list(old)), strict=True):
            assert result.key == event.key
            fits = body is not None and len(event.key.encode()) + len(body) <= budget
            if fits:
                assert item == (result.query, body)
                written += 1
            else:
                assert isinstance(item, Result) and item.identity() == result.identity()
    return written


# -- property: any values, names, positions ----------------------------------------------

values = st.one_of(
    st.booleans(),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    st.integers(min_value=-(1 << 66), max_value=1 << 66),  # some beyond 64 bits
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324]),
    st.text(max_size=12),
    st.text(alphabet="é∑😀\x00", max_size=70),  # multi-byte, and long enough for a 2-byte length
)
# SELECT * labels come from the events' own columns, which need not be identifiers
column_names = st.sampled_from(["x", "s", "ok", "y", "t", "z", "é", "a.b", "w" * 70])
topics = st.one_of(st.sampled_from(["juggler.stream.B", "t"]), st.text(max_size=8))
partitions = st.one_of(st.integers(min_value=0, max_value=3),
                       st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1),
                       st.integers(min_value=1 << 31, max_value=1 << 40))  # beyond an Avro int
offsets = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)


# predicates on values of any type, ints beyond 64 bits included: some comparisons only
# the exact fallback (a Python callback) decides
WHERE = {("B",): [" WHERE B.x > 3", " WHERE B.x <= 9223372036854775807.5"],
         ("B", "H"): [" WHERE B.x >= H.y", " WHERE B.x = H.y + 1"],
         ("B", "K"): [" WHERE B.x < 2 * K.z", " WHERE K.x != B.x"],
         ("H", "K"): [" WHERE H.y > K.z - 0.5"]}


@st.composite
def queries(draw: st.DrawFn) -> list[tuple[str, str]]:
    out = []
    for n in range(draw(st.integers(min_value=1, max_value=4))):
        streams = draw(st.lists(st.sampled_from(list(CATALOG)), min_size=1, max_size=3, unique=True))
        columns = [f"{s}.{c}" for s, c in COLUMNS if s in streams]
        select = draw(st.one_of(st.just(["*"]),
                                st.lists(st.sampled_from(columns), min_size=1, unique=True)))
        where = draw(st.sampled_from(["", f" WHERE {streams[0]}.ts >= 0", *WHERE.get(tuple(streams[:2]), [])]))
        qid = draw(st.sampled_from([f"q{n}", f"qé{n}", f"{'q' * 70}{n}"]))
        out.append((qid, f"SELECT {', '.join(select)} FROM {', '.join(streams)} "
                         f"MAXWINDOW 10 s{where}"))
    return out


@st.composite
def event_lists(draw: st.DrawFn) -> list[Event]:
    keys = draw(st.lists(st.text(max_size=6), min_size=1, max_size=3, unique=True))
    events = []
    for i in range(draw(st.integers(min_value=1, max_value=10))):
        data = draw(st.dictionaries(column_names, values, max_size=4))
        position = (draw(topics), draw(partitions), draw(offsets))
        events.append(Event(draw(st.sampled_from(list(CATALOG))), draw(st.sampled_from(keys)),
                            draw(st.integers(min_value=-20, max_value=40)) * 1000, data, position))
    return events


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queries(), event_lists())
def test_bodies_are_the_python_writer_s_bytes(qs: list[tuple[str, str]], events: list[Event]) -> None:
    assert_same_results(qs, events)


def test_every_kind_of_value_is_written_natively() -> None:
    """A fixed case the property must not skip: one result per row value type, SELECT
    lists and SELECT *, several streams, all written in Rust."""
    data = [{"x": 1, "s": "é∑😀", "ok": True}, {"x": -(1 << 63), "s": "", "ok": False},
            {"x": math.nan, "s": "a" * 200}, {"x": math.inf}, {"x": -0.0, "s": "\x00"}]
    events = [Event("B", "k", i * 10, d, ("juggler.stream.B", 2, 100 + i)) for i, d in enumerate(data)]
    events += [Event("H", "k", 100, {"y": 2.5, "t": "h"}, ("juggler.stream.H", 2, (1 << 63) - 1)),
               Event("K", "k", 110, {"z": (1 << 63) - 1}, ("juggler.stream.K", 2, 0))]
    qs = [("all", "SELECT * FROM B, H, K MAXWINDOW 1 s"),
          ("some", "SELECT K.z, B.s, H.t, B.ok FROM B, H, K MAXWINDOW 1 s"),
          ("one", "SELECT B.x FROM B")]
    assert assert_same_results(qs, events) == 2 * len(data) + len(data)


def test_what_the_native_writer_leaves_to_python() -> None:
    """An int beyond 64 bits, a partition beyond an Avro int, a position that is not
    (topic, partition, offset): each result is given back as its `Result`, so the
    worker does for it what it always did (fastavro, or a SchemaViolation)."""
    events = [Event("B", "k", 0, {"x": 1 << 64}, ("t", 0, 1)),
              Event("B", "k", 1, {"x": 1}, ("t", 1 << 31, 2)),
              Event("B", "k", 2, {"x": 1}, 3),
              Event("B", "k", 3, {"x": 1}, ("t", True, 4)),
              Event("B", "k", 4, {"x": 1}, ("t", 0, 5))]
    assert assert_same_results([("q", "SELECT B.x FROM B")], events) == 1
    _, engine = engines([("q", "SELECT B.x FROM B")])
    outcomes = engine.process_batch_encoded(events, NO_LIMIT)
    assert [type(out[0]).__name__ for out in outcomes] == ["Result"] * 4 + ["tuple"]


class Label(str):
    """A str subclass: `result_body` leaves it to fastavro."""


def test_names_the_native_writer_does_not_write_go_to_python() -> None:
    engine = NativeEngine()
    query = compile_query("q", "SELECT B.x FROM B", CATALOG)
    engine.register(dataclasses.replace(query, id=Label("q")))
    [[item]] = engine.process_batch_encoded([Event("B", "k", 0, {"x": 1}, ("t", 0, 0))], NO_LIMIT)
    assert isinstance(item, Result) and type(item.query) is Label


def test_the_budget_counts_key_and_body() -> None:
    """A result whose UTF-8 key and body exceed the budget is given back to be encoded
    by `encode_result_bounded`, which omits its row."""
    event = Event("B", "ké", 0, {"x": 1, "s": "x" * 50}, ("t", 0, 0))
    _, engine = engines([("q", "SELECT * FROM B")])
    [[(qid, body)]] = engine.process_batch_encoded([event], NO_LIMIT)
    exact = len("ké".encode()) + len(body)
    for budget, native in [(exact, True), (exact - 1, False)]:
        _, engine = engines([("q", "SELECT * FROM B")])
        [[item]] = engine.process_batch_encoded([event], budget)
        assert (item == (qid, body)) if native else isinstance(item, Result)


def test_late_and_quiet_events_are_answered_as_process_batch_does() -> None:
    events = [Event("B", "k", 1000, {"x": 1}, ("t", 0, 0)), Event("H", "k", 10, {"y": 1}, ("t", 0, 1)),
              Event("H", "k", 1000, {"y": 1}, ("t", 0, 2))]
    _, engine = engines([("q", "SELECT * FROM B, H MAXWINDOW 1 s")])
    quiet, late, results = engine.process_batch_encoded(events, NO_LIMIT)
    assert quiet == () and isinstance(late, LateEvent) and late.event is events[1]
    assert [qid for qid, _ in results] == ["q"]


@pytest.mark.parametrize("registry", [False, True])
def test_headers_frame_bodies_as_encode_does(registry: bool) -> None:
    class Registry:
        def register(self, subject: str, schema: str) -> int:
            return {"juggler.results-value": 7, "juggler.results.q-value": 8}[subject]

    codec = Codec(registry=Registry()) if registry else Codec(registry_url="")
    record = {"query": "q", "key": "k", "ts": 1, "sources": {}, "row": {"B.x": 1}}
    for topic in ["juggler.results", "juggler.results.q"]:
        header = codec.header(RESULT, topic)
        assert len(header) == codec.header_size
        assert header + result_body(record) == codec.encode(RESULT, record, topic=topic, trusted=True)


def test_comparisons_only_the_exact_fallback_decides() -> None:
    """Ints beyond 64 bits, and a double next to a large int: the operator asks the
    Python fallback, and the results are the same."""
    big = 1 << 70
    events = [Event("B", "k", 0, {"x": big + 1}, ("t", 0, 0)), Event("H", "k", 1, {"y": big}, ("t", 0, 1)),
              Event("B", "k", 2, {"x": 2**53 + 1}, ("t", 0, 2)), Event("H", "k", 3, {"y": 2.0**53}, ("t", 0, 3)),
              Event("H", "k", 4, {"y": big + 1}, ("t", 0, 4))]
    qs = [("eq", "SELECT B.x, H.y FROM B, H MAXWINDOW 1 s WHERE B.x = H.y + 1"),
          ("gt", "SELECT * FROM B, H MAXWINDOW 1 s WHERE B.x > H.y"),
          ("big", "SELECT H.y FROM H WHERE H.y > 1180591620717411303424.5")]
    asked = []

    class Counting(NativeEngine):
        def _exact(self, pred: int, left: Any, right: Any) -> bool:
            asked.append(pred)
            return super()._exact(pred, left, right)

    # 2**53 + 1 against 2.0**53, by eq and gt; the other results hold ints beyond 64
    # bits, given as Result objects
    assert assert_same_results(qs, events, engine_class=Counting) == 2
    assert asked


class FailingExact(NativeEngine):
    def _exact(self, pred: int, left: Any, right: Any) -> bool:
        raise ZeroDivisionError("from the exact fallback")


def test_an_error_of_the_exact_fallback_is_raised() -> None:
    engine = FailingExact()
    engine.register(compile_query("q", "SELECT * FROM B WHERE B.x > 3", CATALOG))
    events = [Event("B", "k", 0, {"x": 5}, ("t", 0, 0)), Event("B", "k", 1, {"x": 1 << 70}, ("t", 0, 1))]
    with pytest.raises(ZeroDivisionError, match="from the exact fallback"):
        engine.process_batch_encoded(events, NO_LIMIT)


@pytest.mark.parametrize("bad", [{"x": [1]}, "no data"])
def test_an_unreadable_event_fails_the_batch_after_the_events_before_it(bad: Any) -> None:
    """As `process_batch`: the events before it are evaluated and held, none after it."""
    events = [Event("B", "k", 0, {"x": 1}, ("t", 0, 0)), Event("H", "k", 1, {"y": 1}, ("t", 0, 1)),
              Event("B", "k", 2, bad, ("t", 0, 2)), Event("H", "k", 3, {"y": 2}, ("t", 0, 3))]
    plain, encoded = engines([("q", "SELECT * FROM B, H MAXWINDOW 1 s")])
    with pytest.raises(TypeError) as old:
        plain.process_batch(events)
    with pytest.raises(TypeError) as new:
        encoded.process_batch_encoded(events, NO_LIMIT)
    assert str(new.value) == str(old.value)
    held = [[(e.stream, e.ts, e.data, e.position) for e in engine.snapshot("k").events]
            for engine in (plain, encoded)]
    assert held[1] == held[0] and [e[:2] for e in held[1]] == [("B", 0), ("H", 1)]
