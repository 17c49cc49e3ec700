"""A partition task publishes the native operator's encoded results as the records the
Python path wrote: same topics, keys, values and headers, and the size bound still
omits a row too large for one record."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from juggler.codec.avro import RESULT, Codec
from juggler.codec.bounded import (RECORD_OVERHEAD_BYTES, RecordTooLarge,
                                   encode_result_bounded, result_budget)
from juggler.engine.events import Event, LateEvent
from juggler.engine.native_engine import NativeEngine
from juggler.engine.shared_registry import SharedRegistries
from juggler.language import ColumnType, compile_query
from juggler.runtime.deadletters import DeadLetters
from juggler.runtime import pages
from juggler.runtime.loop_clock import LoopClock
from juggler.runtime.settings import Settings
from juggler.runtime.task import ROW_OMITTED_HEADER, PartitionTask, Record, RoundCounts
from juggler.runtime.topic_names import TopicNames
from juggler.runtime.transactions import Outbox
from juggler.runtime.worker import JugglerWorker

CATALOG = {"B": {"temp": ColumnType.NUMBER, "note": ColumnType.STRING},
           "H": {"alert": ColumnType.BOOLEAN}}
QUERIES = {"all": "SELECT * FROM B, H MAXWINDOW 5 s",
           "temps": "SELECT B.temp FROM B WHERE B.temp > 37",
           "own": "SELECT H.alert, B.note FROM B, H MAXWINDOW 5 s"}


class FakeWorker:
    """What a task uses of `JugglerWorker` to publish results, with the worker's own
    methods, but no broker."""

    encode_result = JugglerWorker.encode_result
    result_header = JugglerWorker.result_header
    arrival_order = JugglerWorker.arrival_order

    def __init__(self, max_record_bytes: int = 1_000_000) -> None:
        self.settings = Settings(max_record_bytes=max_record_bytes)
        self.names = TopicNames()
        self.codec = Codec(registry_url="")
        self.streams = ("B", "H")
        self.max_record_bytes = max_record_bytes
        self._encode_result = encode_result_bounded
        self.result_budget = result_budget(self.codec, max_record_bytes)
        self._result_headers: dict[str, bytes] = {}
        self.dead_letters = DeadLetters(self)
        self.clock = LoopClock()
        self.registries = SharedRegistries()


def task_with_queries(worker: FakeWorker) -> PartitionTask:
    task = PartitionTask(worker, 0)
    for qid, text in QUERIES.items():
        task.engine.register(compile_query(qid, text, CATALOG))
    task.own_topic.add("own")
    return task


def batch(worker: FakeWorker, events: list[tuple[str, str, int, dict[str, Any]]]
          ) -> list[tuple[str, Record, Event]]:
    out = []
    for offset, (stream, key, ts, data) in enumerate(events):
        topic = worker.names.stream(stream)
        record = Record(topic, 0, offset, key.encode(), b"", ts)
        out.append((stream, record, Event(stream, key, ts, data, (topic, 0, offset))))
    return out


EVENTS = [("B", "p1", 1000, {"temp": 38.5, "note": "é"}), ("B", "p2", 1100, {"temp": 36.0, "note": ""}),
          ("H", "p1", 1200, {"alert": True}), ("B", "p1", 1300, {"temp": 39.0, "note": "x"}),
          ("H", "p1", 100, {"alert": False}),  # late
          ("H", "p2", 1500, {"alert": False}), ("B", "p2", 1600, {"temp": 40, "note": "y" * 300})]


def result_messages(outbox: Outbox) -> list[tuple[Any, ...]]:
    return [(topic, key, value, headers) for topic, value, key, _, headers in outbox.messages
            if topic.startswith("juggler.results")]


def python_path(worker: FakeWorker, items: list[tuple[str, Record, Event]]
                ) -> tuple[list[tuple[Any, ...]], RoundCounts]:
    """The records the Python path writes: `process_batch`'s `Result`s, each encoded by
    `_publish` (what the task did for every result before the native writer)."""
    task, outbox, counts = task_with_queries(worker), Outbox(), RoundCounts()
    engine: NativeEngine = task.engine
    for outcome in engine.process_batch([event for _, _, event in items]):
        if not isinstance(outcome, LateEvent):
            task._publish(outcome, outbox, counts)
    return result_messages(outbox), counts


def native_path(worker: FakeWorker, items: list[tuple[str, Record, Event]]
                ) -> tuple[list[tuple[Any, ...]], RoundCounts]:
    task, outbox, counts = task_with_queries(worker), Outbox(), RoundCounts()
    task._events(list(items), outbox, counts, {})  # it empties the batch it took
    return result_messages(outbox), counts


def test_the_task_publishes_the_records_the_python_path_wrote() -> None:
    worker = FakeWorker()
    items = batch(worker, EVENTS)
    messages, counts = native_path(worker, items)
    expected, expected_counts = python_path(worker, items)
    assert messages == expected
    assert counts.results_out == expected_counts.results_out
    assert {topic for topic, *_ in messages} == {"juggler.results", "juggler.results.own"}
    assert len(messages) == 3 + 4 + 4 and counts.late == {"H": 1}


def test_a_result_too_large_for_one_record_is_sent_without_its_row() -> None:
    worker = FakeWorker(max_record_bytes=RECORD_OVERHEAD_BYTES + 300)
    items = batch(worker, EVENTS)
    messages, _ = native_path(worker, items)
    assert messages == python_path(worker, items)[0]
    omitted = [(topic, key, value) for topic, key, value, headers in messages
               if (ROW_OMITTED_HEADER, b"too large for one record; read the sources") in headers]
    assert len(omitted) == 2  # B.note of 300 bytes, in `all` and in `own`
    for topic, key, value in omitted:
        assert len(key) + len(value) + RECORD_OVERHEAD_BYTES <= worker.max_record_bytes
        record = worker.codec.decode(RESULT, value)
        assert record["row"] == {} and set(record["sources"]) == {"B", "H"}


def test_a_limit_too_small_for_any_result_still_fails_the_round() -> None:
    worker = FakeWorker(max_record_bytes=RECORD_OVERHEAD_BYTES + 20)
    with pytest.raises(RecordTooLarge, match="a result of temps does not fit"):
        native_path(worker, batch(worker, EVENTS))


def test_a_rounds_key_bounds_are_written_in_the_order_its_keys_were_first_taken() -> None:
    """A round's state records come out in the same order in every run, whatever the
    process's string hashing (`PYTHONHASHSEED`): the keys' bounds follow the order the
    round first took each key."""
    import random

    from juggler.runtime.held_state import KEY

    worker = FakeWorker()
    task = task_with_queries(worker)
    keys = [f"key{i}" for i in random.Random(7).sample(range(40), 40)]
    events = [("B", key, 1_000 + i, {"temp": 30.0, "note": ""}) for i, key in enumerate(keys)]
    outbox, dirty = Outbox(), {}
    task._events(batch(worker, events + events[:5]), outbox, RoundCounts(), dirty)
    task._finish(outbox, dirty)
    written = [key.decode() for _, _, key in outbox.latest if key.startswith(KEY.encode())]
    assert written == [KEY + key for key in keys]


def test_a_rounds_evaluation_publishing_and_state_records_are_timed_in_their_phases() -> None:
    """`juggler_loop_seconds_total`: what a task does in a round goes to the phases a
    dashboard shows, not to whatever the loop did before."""
    worker = FakeWorker()
    task = task_with_queries(worker)
    worker.clock.enter("poll")
    outbox, dirty = Outbox(), {}
    task._events(batch(worker, EVENTS), outbox, RoundCounts(), dirty)
    task._finish(outbox, dirty)
    poll = worker.clock.seconds["poll"]
    worker.clock.enter("other")
    assert all(worker.clock.seconds[p] > 0 for p in ("evaluate", "publish", "order", "state"))
    assert worker.clock.seconds["poll"] == poll


def test_each_published_snapshot_shows_what_the_engine_holds_and_counted_then() -> None:
    """The snapshot asks an engine again only when its task evaluated or registered
    something (`pages.Engine.changes`): what it shows is still what the engine says."""
    worker = FakeWorker()
    task = task_with_queries(worker)
    task.restored = True
    view = SimpleNamespace(tasks={0: task}, restored_tasks=lambda: [task], pages=pages.EMPTY,
                           high_watermark=lambda topic, p: None, progress=lambda tasks: {})
    registered = pages.Registered()

    def published() -> pages.Engine:
        view.pages = pages.take(view, registered)
        [engine] = view.pages.scrape.engines
        assert engine.held == task.engine.held_events()
        assert engine.manager.comparisons == task.engine.manager.comparisons
        assert engine.queries == len(task.texts)
        return engine

    quiet = published()
    assert published() is quiet
    task._events(batch(worker, EVENTS), Outbox(), RoundCounts(), {})
    assert sum(published().held.values()) > 0
    task._events(batch(worker, EVENTS[4:5]), Outbox(), RoundCounts(), {})  # late only
    published()
    before = task.engine.manager.comparisons
    task.engine.register(compile_query("again", QUERIES["all"], CATALOG), history=True)
    assert published().manager.comparisons != before  # its history evaluated
