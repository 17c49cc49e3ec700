"""Topic names, the specs in `topics/`, and what `juggler query` prints (no Kafka)."""

from __future__ import annotations

from pathlib import Path

import pytest

from juggler.control.client import ControlView, QueryState, Sent, Submission, _state
from juggler.control.commands import Command, CommandStatus
from juggler.control import report
from juggler.kafka.names import (InvalidName, results_topic, stream_of_topic, stream_topic,
                                 validate_query_id)
from juggler.kafka.topics import ApplyReport, TopicSpecError, load_specs

ROOT = Path(__file__).resolve().parents[2]


def test_names() -> None:
    assert stream_topic("B") == "juggler.stream.B"
    assert results_topic("q1.v-2_x") == "juggler.results.q1.v-2_x"
    assert stream_of_topic("juggler.stream.heart_2") == "heart_2"
    assert stream_of_topic("juggler.results.q1") is None
    assert validate_query_id("Q" * 233) == "Q" * 233


@pytest.mark.parametrize("query_id, message", [
    ("", "non-empty"),
    ("a b", "not ' '"),
    ("q/1:é", "not '/', ':', 'é'"),
    ("Q" * 234, "at most 233 fit"),
])
def test_invalid_query_ids(query_id: str, message: str) -> None:
    with pytest.raises(InvalidName) as err:
        results_topic(query_id)
    assert message in str(err.value)


def test_invalid_stream_names() -> None:
    with pytest.raises(InvalidName, match="letters, digits and '_'"):
        stream_topic("B.x")


def test_repository_specs() -> None:
    specs = load_specs(ROOT / "topics")
    by_name = {t.name: t for t in specs.topics}
    assert specs.partitions == 4
    assert list(by_name) == ["juggler.control", "juggler.control.status",
                             "juggler.control.fanout", "juggler.deadletter",
                             "juggler.results", "juggler.state", "juggler.stream.B",
                             "juggler.stream.H", "juggler.stream.K", "juggler.stream.T"]
    assert by_name["juggler.control"].partitions == 1
    assert by_name["juggler.control"].config == {"cleanup.policy": "compact"}
    assert by_name["juggler.control.status"].partitions == 1
    assert by_name["juggler.control.status"].config == {"retention.ms": "-1"}
    assert {by_name[n].partitions for n in by_name if n.startswith("juggler.stream.")} == {4}
    assert by_name["juggler.control.fanout"].partitions == 4
    assert by_name["juggler.state"].partitions == 4
    assert by_name["juggler.state"].config["cleanup.policy"] == "compact"
    assert all(t.replication_factor is None for t in specs.topics)
    assert by_name["juggler.results"].partitions == 4  # shared by every query
    assert by_name["juggler.results"].config == {"retention.ms": str(7 * 24 * 3600 * 1000)}
    results = specs.results("q1")  # a query registered with its own topic
    assert (results.name, results.partitions) == ("juggler.results.q1", 4)
    assert results.config == {"retention.ms": str(7 * 24 * 3600 * 1000)}


def test_partitions_override() -> None:
    specs = load_specs(ROOT / "topics", partitions=2)
    by_name = {t.name: t.partitions for t in specs.topics}
    assert by_name["juggler.stream.T"] == by_name["juggler.control.fanout"] == 2
    assert by_name["juggler.control"] == by_name["juggler.control.status"] == 1
    assert specs.results("q").partitions == 2
    assert specs.results("q", partitions=6).partitions == 6
    with pytest.raises(InvalidName):
        specs.results("bad id")


@pytest.mark.parametrize("text, message", [
    ("- a\n", "expected a mapping"),
    ("topic: []\n", "unknown key(s) ['topic']"),
    ("topics: [{name: x, partitions: 0}]\n", "partitions must be a positive integer or P"),
    ("topics: [{name: x, partitions: Q}]\n", "must be a positive integer or P, got 'Q'"),
    ("topics: [{name: x, retention: 1}]\n", "unknown key(s) ['retention']"),
    ("topics: [{name: 'a b'}]\n", "not a valid Kafka topic name"),
    ("topics: [{name: x}, {name: x}]\n", "specified twice"),
    ("topics: [{name: x, config: {a: [1]}}]\n", "must be a string, number or boolean"),
    ("partitions: P\n", "partitions must be a positive integer, got 'P'"),
    ("topics: [{partitions: 1}]\n", "needs a 'name'"),
    ("topics: {\n", "not valid YAML"),
])
def test_bad_spec_files(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "a.yaml").write_text(text)
    with pytest.raises(TopicSpecError) as err:
        load_specs(tmp_path)
    assert message in str(err.value) and "a.yaml" in str(err.value)


def test_spec_values(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        "partitions: 3\ntopics:\n  - name: x\n    replication_factor: 2\n"
        "    config: {retention.ms: 1000, preallocate: true, cleanup.policy: delete}\n")
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    [spec] = load_specs(tmp_path).topics
    assert (spec.partitions, spec.replication_factor) == (3, 2)
    assert spec.config == {"retention.ms": "1000", "preallocate": "true",
                           "cleanup.policy": "delete"}
    with pytest.raises(TopicSpecError, match="no topic spec files"):
        load_specs(tmp_path / "missing")
    with pytest.raises(TopicSpecError, match="no template"):
        load_specs(tmp_path).results("q")


def test_apply_report_text() -> None:
    assert str(ApplyReport(unchanged=["a", "b"])) == "no changes (2 topics as specified)"
    text = str(ApplyReport(created=["a"], altered={"b": {"cleanup.policy": ("delete",
                                                                             "compact")}},
                           unchanged=["c"], mismatches=["d has 2 partitions"]))
    assert text.splitlines() == ["created a", "altered b: cleanup.policy delete -> compact",
                                 "mismatch: d has 2 partitions",
                                 "1 topics already as specified"]


# -- what `juggler query` prints ---------------------------------------------------------


def _submission(status: CommandStatus | None) -> Submission:
    return Submission(Command.register("q1", "SELECT * FROM B"),
                      Sent("juggler.control", 0, 5), status)


def test_submission_texts() -> None:
    text, code = report.submission(_submission(None), waited=False, timeout=3)
    assert (text, code) == ("sent REGISTER q1 (juggler.control offset 5); not waiting "
                            "for its status", 0)
    text, code = report.submission(_submission(None), waited=True, timeout=2.5)
    assert code == report.EXIT_NO_STATUS == 3
    assert text.startswith("no status for REGISTER q1 (juggler.control offset 5) within "
                           "2.5s; is a worker running?")
    ok = CommandStatus("q1", "REGISTER", "ACCEPTED", "", 5)
    assert report.submission(_submission(ok), waited=True, timeout=1) == (
        "ACCEPTED REGISTER q1 (juggler.control offset 5)", 0)
    bad = CommandStatus("q1", "REGISTER", "REJECTED", "query q1: unknown stream 'X'", 5)
    assert report.submission(_submission(bad), waited=True, timeout=1) == (
        "REJECTED REGISTER q1 (juggler.control offset 5): query q1: unknown stream 'X'", 1)


def test_list_and_show_texts() -> None:
    view = ControlView()
    assert report.query_list(view) == "no queries registered"
    view.queries["q1"] = QueryState("q1", Command.register("q1", "SELECT *\n  FROM B", True),
                                    3, "ACCEPTED")
    view.queries["q2"] = QueryState("q2", Command.deregister("q2"), 4, "PENDING")
    view.queries["long_id"] = QueryState("long_id", Command.register("long_id", "x" * 80),
                                         6, "REJECTED", "query long_id: bad")
    view.queries["q3"] = QueryState("q3", Command.register("q3", "SELECT * FROM K"), 7,
                                    "ACCEPTED", later="REGISTER at offset 9: PENDING")
    assert report.query_list(view).splitlines() == [
        "ID       STATUS    OFFSET  TEXT",
        "q1       ACCEPTED       3  SELECT * FROM B",
        "long_id  REJECTED       6  " + "x" * 67 + "...",
        "         query long_id: bad",
        "q3       ACCEPTED       7  SELECT * FROM K",
        "         later REGISTER at offset 9: PENDING",
    ]
    assert "later:   REGISTER at offset 9: PENDING" in report.query_show(
        view.queries["q3"], "q3")[0]
    text, code = report.query_show(view.queries["q1"], "q1")
    assert code == 0 and text.splitlines() == [
        "id:      q1", "state:   registered (REGISTER at juggler.control offset 3)",
        "status:  ACCEPTED", "history: true", "text:", "  SELECT *", "    FROM B"]
    text, code = report.query_show(view.queries["q2"], "q2")
    assert code == 0 and "deregistered (DEREGISTER at juggler.control offset 4)" in text
    assert "PENDING (no status for this command yet)" in text
    assert report.query_show(None, "q9") == ("query q9 is not in juggler.control", 1)


def _status(query_id: str, offset: int, outcome: str, action: str = "REGISTER",
            message: str = "") -> CommandStatus:
    return CommandStatus(query_id, action, outcome, message, offset)  # type: ignore[arg-type]


def test_state_of_an_id() -> None:
    """How `query list` folds one id's commands (offset, command) and their statuses."""
    reg1, reg2 = Command.register("q", "SELECT * FROM B"), Command.register("q", "SELECT * FROM H")
    dereg = Command.deregister("q")
    # no status yet: the last command, PENDING
    assert _state("q", [(0, reg1)], {}) == QueryState("q", reg1, 0, "PENDING")
    # answered
    assert _state("q", [(0, reg1)], {0: _status("q", 0, "ACCEPTED")}).status == "ACCEPTED"
    # a rejected repeat does not hide the accepted registration
    state = _state("q", [(0, reg1), (4, reg2)], {
        0: _status("q", 0, "ACCEPTED"), 4: _status("q", 4, "REJECTED", message="repeated")})
    assert (state.command, state.offset, state.status) == (reg1, 0, "ACCEPTED")
    assert state.later == "REGISTER at offset 4: REJECTED: repeated"
    # a pending deregistration is shown as a note until it is answered
    state = _state("q", [(0, reg1), (5, dereg)], {0: _status("q", 0, "ACCEPTED")})
    assert (state.status, state.later) == ("ACCEPTED", "DEREGISTER at offset 5: PENDING")
    state = _state("q", [(0, reg1), (5, dereg)], {
        0: _status("q", 0, "ACCEPTED"), 5: _status("q", 5, "ACCEPTED", "DEREGISTER")})
    assert (state.command, state.status, state.registered) == (dereg, "ACCEPTED", False)
    # register again after a deregistration: the new registration
    state = _state("q", [(0, reg1), (5, dereg), (8, reg2)], {
        0: _status("q", 0, "ACCEPTED"), 5: _status("q", 5, "ACCEPTED", "DEREGISTER"),
        8: _status("q", 8, "ACCEPTED")})
    assert (state.command, state.offset) == (reg2, 8)
    # a rejected first registration (no accepted command left): shown as rejected
    state = _state("q", [(2, reg2)], {2: _status("q", 2, "REJECTED", message="bad")})
    assert (state.status, state.message, state.registered) == ("REJECTED", "bad", True)
    # a status for another id at that offset does not count
    assert _state("q", [(0, reg1)], {0: _status("other", 0, "ACCEPTED")}).status == "PENDING"
