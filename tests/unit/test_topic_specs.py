"""Topic names, the specs in `topics/`, and what `juggler query` prints (no Kafka)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from juggler.client import report
from juggler.client.control import ControlView, QueryState, Submission, _state, _states
from juggler.kafka.delivery import Sent
from juggler.kafka.topics import ApplyReport, TopicSpecError, load_specs
from juggler.wire.commands import CommandStatus, DeregisterCommand, RegisterCommand
from juggler.wire.names import (InvalidName, results_topic, stream_of_topic, stream_topic,
                                validate_query_id)

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
                             "juggler.control.fanout", "juggler.settings", "juggler.deadletter",
                             "juggler.results", "juggler.state", "juggler.stream.B",
                             "juggler.stream.H", "juggler.stream.K", "juggler.stream.T"]
    assert by_name["juggler.control"].partitions == 1
    assert by_name["juggler.control"].config == {"cleanup.policy": "compact"}
    assert by_name["juggler.control.status"].partitions == 1
    assert by_name["juggler.control.status"].config == {"retention.ms": "-1"}
    # the group's settings are its first claim: never compacted nor trimmed away
    assert (by_name["juggler.settings"].partitions, by_name["juggler.settings"].config) == (
        1, {"retention.ms": "-1"})
    assert {by_name[n].partitions for n in by_name if n.startswith("juggler.stream.")} == {4}
    # the broker stamps stream records: the idle wait measures the producers' delay alone
    assert all(by_name[n].config == {"message.timestamp.type": "LogAppendTime"}
               for n in by_name if n.startswith("juggler.stream."))
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
    return Submission(RegisterCommand("q1", "SELECT * FROM B"),
                      Sent("juggler.control", 0, 5), status)


def test_submission_texts() -> None:
    text, code = report.submission(_submission(None), waited=False, timeout=3)
    assert (text, code) == ("sent REGISTER q1 (juggler.control offset 5); not waiting "
                            "for its status", 0)
    text, code = report.submission(_submission(None), waited=True, timeout=2.5)
    assert code == report.EXIT_NO_STATUS == 3
    assert text.startswith("no status for REGISTER q1 (juggler.control offset 5): 2.5s "
                           "passed without an answer; is a worker running?")
    ok = CommandStatus("q1", "REGISTER", "ACCEPTED", "", 5)
    assert report.submission(_submission(ok), waited=True, timeout=1) == (
        "ACCEPTED REGISTER q1 (juggler.control offset 5)", 0)
    bad = CommandStatus("q1", "REGISTER", "REJECTED", "query q1: unknown stream 'X'", 5)
    assert report.submission(_submission(bad), waited=True, timeout=1) == (
        "REJECTED REGISTER q1 (juggler.control offset 5): query q1: unknown stream 'X'", 1)


def test_a_batch_exits_with_its_worst_status_beyond_the_lines_it_shows() -> None:
    """More rejected commands than are shown, then one without an answer: the exit
    status is the unanswered one's, and the counts cover every command."""
    bad = CommandStatus("q1", "REGISTER", "REJECTED", "query q1: unknown stream 'X'", 5)
    subs = [_submission(bad)] * (report.SHOWN + 1) + [_submission(None)]
    text, code = report.submissions(subs, waited=True, timeout=1)
    assert code == report.EXIT_NO_STATUS
    assert len(text.splitlines()) == report.SHOWN + 1
    assert text.splitlines()[-1].startswith(f"0 accepted, {report.SHOWN + 1} rejected, 1 not")


def _view() -> ControlView:
    """One id in each state (two registered, one of them with a pending repeat)."""
    view = ControlView()
    view.queries["q1"] = QueryState("q1", RegisterCommand("q1", "SELECT *\n  FROM B", True),
                                    3, "ACCEPTED", live=(4, 4))
    view.queries["q2"] = QueryState("q2", DeregisterCommand("q2"), 4, "PENDING")
    view.queries["long_id"] = QueryState("long_id", RegisterCommand("long_id", "x" * 80),
                                         6, "REJECTED", "query long_id: bad")
    view.queries["q3"] = QueryState("q3", RegisterCommand("q3", "SELECT * FROM K"), 7,
                                    "ACCEPTED", later="REGISTER at offset 9: PENDING",
                                    live=(2, 4))
    view.queries["q4"] = QueryState("q4", DeregisterCommand("q4"), 11, "ACCEPTED")
    view.queries["q5"] = QueryState("q5", RegisterCommand("q5", "SELECT * FROM H"), 12,
                                    "PENDING")
    return view


def test_list_shows_registered_queries_and_counts_the_rest() -> None:
    assert report.query_list(ControlView()) == "no queries registered"
    assert report.query_list(ControlView(), everything=True) == "no commands in juggler.control"
    view = _view()
    assert [q.state for q in view.queries.values()] == [
        "registered", "pending", "rejected", "registered", "deregistered", "pending"]
    assert report.query_list(view).splitlines() == [
        "ID  STATE        LIVE  OFFSET  TEXT",
        "q1  registered    4/4       3  SELECT * FROM B",
        "q3  registered    2/4       7  SELECT * FROM K",
        "    later REGISTER at offset 9: PENDING",
        "(4 more ids are not registered: 1 rejected, 2 pending, 1 deregistered; "
        "--all lists them)",
    ]
    listed = json.loads(report.query_list(view, as_json=True))
    assert [(q["id"], q["state"], q["live_partitions"]) for q in listed] == [
        ("q1", "registered", 4), ("q3", "registered", 2)]
    # a rejected command leaves nothing behind: only a count
    only_rejected = ControlView({"bad1": view.queries["long_id"]})
    assert report.query_list(only_rejected).splitlines() == [
        "no queries registered",
        "(1 more id is not registered: 1 rejected; --all lists them)"]


def test_list_all_marks_what_is_not_registered() -> None:
    view = _view()
    assert report.query_list(view, everything=True).splitlines() == [
        "ID       STATE          LIVE  OFFSET  TEXT",
        "q1       registered      4/4       3  SELECT * FROM B",
        "q2       pending           -       4  (deregister)",
        "long_id  rejected          -       6  " + "x" * 67 + "...",
        "         query long_id: bad",
        "q3       registered      2/4       7  SELECT * FROM K",
        "         later REGISTER at offset 9: PENDING",
        "q4       deregistered      -      11  (deregister)",
        "q5       pending           -      12  SELECT * FROM H",
    ]
    listed = json.loads(report.query_list(view, everything=True, as_json=True))
    assert [(q["id"], q["state"], q["status"]) for q in listed] == [
        ("q1", "registered", "ACCEPTED"), ("q2", "pending", "PENDING"),
        ("long_id", "rejected", "REJECTED"), ("q3", "registered", "ACCEPTED"),
        ("q4", "deregistered", "ACCEPTED"), ("q5", "pending", "PENDING")]


def test_show_agrees_with_the_status() -> None:
    view = _view()
    text, code = report.query_show(view.queries["q1"], "q1")
    assert code == 0 and text.splitlines() == [
        "id:      q1", "state:   registered (REGISTER at juggler.control offset 3)",
        "status:  ACCEPTED", "live:    in 4 of 4 partitions", "history: true", "text:",
        "  SELECT *", "    FROM B"]
    assert "later:   REGISTER at offset 9: PENDING" in report.query_show(
        view.queries["q3"], "q3")[0]
    # a rejected registration of a never-registered id is not registered
    text, code = report.query_show(view.queries["long_id"], "long_id")
    assert code == 0 and text.splitlines()[1:3] == [
        "state:   rejected, not registered (REGISTER at juggler.control offset 6)",
        "status:  REJECTED: query long_id: bad"]
    assert "live:" not in text
    text, code = report.query_show(view.queries["q5"], "q5")
    assert text.splitlines()[1:3] == [
        "state:   pending, not registered yet (REGISTER at juggler.control offset 12)",
        "status:  PENDING (no status for this command yet)"]
    text, code = report.query_show(view.queries["q2"], "q2")
    assert code == 0 and text.splitlines()[1:] == [
        "state:   pending, not registered (DEREGISTER at juggler.control offset 4)",
        "status:  PENDING (no status for this command yet)"]
    text, code = report.query_show(view.queries["q4"], "q4")
    assert code == 0 and text.splitlines()[1:] == [
        "state:   deregistered (DEREGISTER at juggler.control offset 11)",
        "status:  ACCEPTED"]
    own = QueryState("q6", RegisterCommand("q6", "SELECT * FROM B", own_topic=True), 13,
                     "ACCEPTED", live=(4, 4))
    assert "results: juggler.results.q6 (its own topic)" in report.query_show(own, "q6")[0]
    assert json.loads(report.query_show(own, "q6", as_json=True)[0])["own_topic"] is True
    assert report.query_show(None, "q9") == ("query q9 is not in juggler.control", 1)


def _status(query_id: str, offset: int, outcome: str, action: str = "REGISTER",
            message: str = "") -> CommandStatus:
    return CommandStatus(query_id, action, outcome, message, offset)  # type: ignore[arg-type]


def test_state_of_an_id() -> None:
    """How `query list` folds one id's commands (offset, command) and their statuses."""
    reg1, reg2 = RegisterCommand("q", "SELECT * FROM B"), RegisterCommand("q", "SELECT * FROM H")
    dereg = DeregisterCommand("q")
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
    assert (state.command, state.status, state.register is not None) == (dereg, "ACCEPTED", False)
    # register again after a deregistration: the new registration
    state = _state("q", [(0, reg1), (5, dereg), (8, reg2)], {
        0: _status("q", 0, "ACCEPTED"), 5: _status("q", 5, "ACCEPTED", "DEREGISTER"),
        8: _status("q", 8, "ACCEPTED")})
    assert (state.command, state.offset) == (reg2, 8)
    # a rejected first registration (no accepted command left): shown as rejected
    state = _state("q", [(2, reg2)], {2: _status("q", 2, "REJECTED", message="bad")})
    assert (state.status, state.message, state.register is not None) == ("REJECTED", "bad", True)
    # a status for another id at that offset does not count
    assert _state("q", [(0, reg1)], {0: _status("other", 0, "ACCEPTED")}).status == "PENDING"
    # what each case is called
    assert _state("q", [(2, reg2)], {}).state == "pending"
    assert _state("q", [(0, reg1), (5, dereg), (8, reg2)], {
        0: _status("q", 0, "ACCEPTED"), 5: _status("q", 5, "ACCEPTED", "DEREGISTER"),
        8: _status("q", 8, "REJECTED", message="bad")}).state == "rejected"


def test_the_registered_set_is_what_the_statuses_say() -> None:
    """`read_control`'s fold: the registered set follows the ACCEPTED statuses (as the
    worker's control task does), live counts come from cumulative LIVE statuses, and an
    accepted REGISTER compacted away by a later rejected command is still registered."""
    reg1, reg2 = RegisterCommand("q", "SELECT * FROM B"), RegisterCommand("q", "SELECT * FROM H")
    accepted = {0: _status("q", 0, "ACCEPTED"),
                4: _status("q", 4, "REJECTED", message="query 'q' is already registered")}
    accepted = {o: CommandStatus(s.id, s.action, s.status, s.message, o, partitions=2)
                for o, s in accepted.items()}
    # both commands in the log: the accepted text, live in the partitions past offset 0
    states = _states({"q": [(0, reg1), (4, reg2)]}, accepted, {0: 3, 1: -1})
    assert (states["q"].state, states["q"].command, states["q"].live) == (
        "registered", reg1, (1, 2))
    # compaction kept only the rejected repeat: still registered, its text unknown
    [state] = _states({"q": [(4, reg2)]}, accepted, {0: 3, 1: 4}).values()
    assert (state.state, state.offset, state.command.text, state.live) == (
        "registered", 0, None, (2, 2))
    assert state.later == "REGISTER at offset 4: REJECTED: query 'q' is already registered"
    assert "(text no longer in juggler.control: compacted away)" in report.query_list(
        ControlView({"q": state}))
    # a tombstone removed every command: the statuses still say registered
    [state] = _states({}, accepted, {}).values()
    assert (state.state, state.offset, state.later) == ("registered", 0, "")
    # an accepted deregistration ends it
    dereg = CommandStatus("q", "DEREGISTER", "ACCEPTED", "", 9, partitions=2)
    [state] = _states({"q": [(9, DeregisterCommand("q"))]}, {**accepted, 9: dereg},
                      {}).values()
    assert state.state == "deregistered"
    # a rejected first registration stays rejected
    bad = {2: _status("r", 2, "REJECTED", message="bad")}
    assert _states({"r": [(2, RegisterCommand("r", "nope"))]}, bad, {})["r"].state == \
        "rejected"
