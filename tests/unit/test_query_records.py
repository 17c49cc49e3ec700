"""A task's registered queries in its state partition's `Q/` records, without Kafka:
what a restart reads back is what is registered, in registration order, however the
registrations and deregistrations fell into rounds and the topic was compacted."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juggler.runtime.held_state import TaskState
from juggler.runtime.query_records import (QUERIES_PER_RECORD, QueryRecords, queries_key,
                                           queries_of, queries_record)

LIMIT = 1_000_000

Log = list[tuple[bytes, bytes | None]]


class Task:
    """What `PartitionTask` keeps of its queries, and the records it wrote."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.records = QueryRecords(limit)
        self.texts: dict[str, str] = {}
        self.own: set[str] = set()
        self.log: Log = []

    def register(self, qid: str, text: str, own: bool) -> None:
        if qid in self.texts:
            return  # a repeated id changes nothing
        self.texts[qid] = text
        if own:
            self.own.add(qid)
        self.records.add(qid)

    def deregister(self, qid: str) -> None:
        if qid in self.texts:
            del self.texts[qid]
            self.own.discard(qid)
            self.records.remove(qid)

    def round(self) -> Log:
        written = self.records.flush(self.texts, self.own)
        self.log += written
        return written


def compacted(log: Log) -> Log:
    """The log as compaction may leave it: the last record of each key, at its place."""
    last = {key: i for i, (key, _) in enumerate(log)}
    return [record for i, record in enumerate(log) if last[record[0]] == i]


def folded(log: Log) -> TaskState:
    state = TaskState()
    for key, value in log:
        state.apply(key, value, [])
    return state


def restarted(log: Log) -> Task:
    """A restore: the task's queries and records from the compacted log."""
    state = folded(compacted(log))
    task = Task()
    task.log = compacted(log)
    for qid, (_, text, own) in sorted(state.queries.items(), key=lambda kv: kv[1][0]):
        task.texts[qid] = text
        if own:
            task.own.add(qid)
    task.records.restored(state.query_records, state.legacy, state.queries, task.texts)
    return task


OPS = st.lists(st.one_of(
    st.tuples(st.just("register"), st.integers(0, 250), st.text(max_size=8), st.booleans()),
    st.tuples(st.just("deregister"), st.integers(0, 250), st.none(), st.none()),
    st.tuples(st.sampled_from(["round", "restart"]), st.none(), st.none(), st.none())),
    max_size=400)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_a_restart_reads_back_the_registered_queries_in_registration_order(
        ops: list[tuple[str, int | None, str | None, bool | None]]) -> None:
    """Against a model (an insertion-ordered dict of what is registered): after every
    round the state, folded from the whole log or from a compacted one, holds exactly
    the registered queries with their texts and own-topic flags, their sequence numbers
    in registration order; no record holds more than `QUERIES_PER_RECORD` or none."""
    task = Task()
    model: dict[str, tuple[str, bool]] = {}
    committed: dict[str, tuple[str, bool]] = {}
    for op, n, text, own in ops:
        qid = f"q{n}"
        if op == "register" and qid not in model:
            assert text is not None and own is not None
            model[qid] = (text, own)
            task.register(qid, text, own)
        elif op == "deregister" and qid in model:
            del model[qid]
            task.deregister(qid)
        elif op == "round":
            for key, value in task.round():
                assert value is None or 0 < len(queries_of(value)) <= QUERIES_PER_RECORD
            committed = dict(model)
            for log in (task.log, compacted(task.log)):
                state = folded(log)
                in_order = sorted(state.queries.items(), key=lambda kv: kv[1][0])
                assert [(q, text, own) for q, (_, text, own) in in_order] == \
                    [(q, text, own) for q, (text, own) in committed.items()]
        elif op == "restart":  # a crash: the last round's state comes back
            task = restarted(task.log)
            model = dict(committed)


def test_a_burst_of_registrations_is_written_a_hundred_queries_a_record() -> None:
    task = Task()
    for n in range(250):
        task.register(f"q{n}", f"SELECT * FROM H WHERE H.beatrate > {n}", n % 2 == 0)
    written = task.round()
    assert [key for key, _ in written] == [queries_key(0), queries_key(1), queries_key(2)]
    assert [len(queries_of(value or b"")) for _, value in written] == [100, 100, 50]
    assert queries_of(written[0][1] or b"")["q2"] == (2, "SELECT * FROM H WHERE H.beatrate > 2",
                                                      True)


def test_a_deregistration_rewrites_only_the_record_that_held_the_query() -> None:
    task = Task()
    for n in range(150):
        task.register(f"q{n}", "SELECT * FROM B", False)
    task.round()
    task.deregister("q120")
    assert task.round() == [(queries_key(1), queries_record(
        {f"q{n}": (n, "SELECT * FROM B", False) for n in range(100, 150) if n != 120}))]
    for n in range(100):
        task.deregister(f"q{n}")
    assert task.round() == [(queries_key(0), None)]


def test_queries_too_large_for_one_record_are_split_within_the_limit() -> None:
    task = Task(limit=20_000)
    text = "SELECT * FROM B WHERE B.temp > 1" + " " * 1_000
    for n in range(30):
        task.register(f"q{n}", text, False)
    written = task.round()
    assert len(written) > 1
    assert all(len(value or b"") <= task.records.max_bytes for _, value in written)
    assert sum(len(queries_of(value or b"")) for _, value in written) == 30


def test_an_earlier_versions_query_records_are_read_and_tombstoned_at_deregistration() -> None:
    legacy = [(f"q/{qid}".encode(), json.dumps({"seq": seq, "text": text,
                                                 "own_topic": seq == 1}).encode())
              for seq, (qid, text) in enumerate([("a", "SELECT * FROM B"),
                                                 ("b", "SELECT * FROM H")])]
    task = restarted(legacy)
    assert task.texts == {"a": "SELECT * FROM B", "b": "SELECT * FROM H"} and task.own == {"b"}
    task.register("c", "SELECT * FROM T", False)
    task.deregister("a")
    assert task.round() == [(b"q/a", None), (queries_key(0), queries_record(
        {"c": (2, "SELECT * FROM T", False)}))]
    assert folded(task.log).queries == {"b": (1, "SELECT * FROM H", True),
                                        "c": (2, "SELECT * FROM T", False)}


@pytest.mark.parametrize("value", [b'{"queries": {"q1": [0, "SELECT * FROM B"]}}',
                                   b'{"queries": {"q1": ["0", "SELECT * FROM B", false]}}',
                                   b'{"queries": [1]}', b"not json"])
def test_a_query_record_the_worker_did_not_write_is_skipped(value: bytes) -> None:
    state = TaskState()
    state.apply(queries_key(0), queries_record({"q0": (0, "SELECT * FROM B", False)}), [])
    state.apply(queries_key(1), value, [])
    assert state.queries == {"q0": (0, "SELECT * FROM B", False)}


TEXTS = st.one_of(st.text(), st.text("\"\\\x00\x08\n\t\x1f\x7f\u2028é€😀 Q/", max_size=8))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(TEXTS, st.tuples(st.integers(0, 2**63), TEXTS, st.booleans()),
                       max_size=5))
def test_a_query_record_is_what_json_dumps_writes_and_reads_back(
        queries: dict[str, tuple[int, str, bool]]) -> None:
    """`queries_record` builds its JSON as text: byte for byte what `json.dumps` writes,
    and `queries_of` gives the queries back in order."""
    value = queries_record(queries)
    assert value == json.dumps({"queries": {q: list(v) for q, v in queries.items()}},
                               separators=(",", ":")).encode()
    assert list(queries_of(value).items()) == list(queries.items())


def test_a_restored_query_that_no_longer_compiles_is_kept_until_deregistered() -> None:
    """Left out of the engine at a restore, it stays in the state as it was when its
    record is rewritten, and leaves it at its deregistration."""
    task = Task()
    for n in range(3):
        task.register(f"q{n}", f"SELECT * FROM B WHERE B.temp > {n}", n == 1)
    task.round()
    state = folded(task.log)
    again = Task()
    again.log = list(task.log)
    again.texts = {"q0": state.queries["q0"][1], "q2": state.queries["q2"][1]}  # q1 left out
    again.records.restored(state.query_records, state.legacy, state.queries, again.texts)
    again.deregister("q0")
    again.round()
    assert folded(again.log).queries == {"q1": (1, "SELECT * FROM B WHERE B.temp > 1", True),
                                         "q2": (2, "SELECT * FROM B WHERE B.temp > 2", False)}
    again.records.remove("q1")  # what the task does at q1's DEREGISTER
    again.round()
    assert folded(again.log).queries == {"q2": (2, "SELECT * FROM B WHERE B.temp > 2", False)}
