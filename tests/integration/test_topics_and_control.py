"""`juggler topics apply` and `juggler query ...` against a real Kafka broker.

No worker runs here, so commands get no status: the tests check what is produced,
`--no-wait`, the timeout message, and `list`/`show` (statuses PENDING). One test writes
status records by hand to check how `list` joins them with commands.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from juggler.cli import main

pytestmark = pytest.mark.integration


def juggler(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def partitions_of(bootstrap: str, topic: str) -> int | None:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    found = md.topics.get(topic)
    return len(found.partitions) if found and found.error is None else None


def topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return {key: entry.value for key, entry in future.result(30).items()}


@pytest.fixture(scope="module")
def topics(kafka_bootstrap: str) -> str:
    """The project's topics, applied once (P as already in use if another test
    created them first)."""
    from juggler.kafka.topics import apply_topics

    report = apply_topics(kafka_bootstrap)
    assert report.ok, str(report)
    return kafka_bootstrap


def test_topics_apply_twice(kafka_bootstrap: str) -> None:
    """Without --partitions, P is what the cluster already has, else 4."""
    p = partitions_of(kafka_bootstrap, "juggler.control.fanout") or 4
    first = juggler("topics", "apply", "--bootstrap", kafka_bootstrap)
    assert first.exit_code == 0, first.output
    second = juggler("topics", "apply", "--bootstrap", kafka_bootstrap)
    assert second.exit_code == 0, second.output
    assert second.output == "no changes (11 topics as specified)\n"
    other = juggler("topics", "apply", "--bootstrap", kafka_bootstrap,
                    "--partitions", str(p + 1))
    assert other.exit_code == 1
    assert f"mismatch: juggler.stream.B has {p} partitions, the spec says {p + 1}; not " \
           f"changed" in other.output
    expected = {"juggler.control": 1, "juggler.control.status": 1, "juggler.settings": 1,
                "juggler.control.fanout": p, "juggler.deadletter": p, "juggler.state": p,
                "juggler.results": p,
                **{f"juggler.stream.{s}": p for s in "BHKT"}}
    assert {t: partitions_of(kafka_bootstrap, t) for t in expected} == expected
    assert topic_config(kafka_bootstrap, "juggler.control")["cleanup.policy"] == "compact"
    assert topic_config(kafka_bootstrap, "juggler.stream.B")["cleanup.policy"] == "delete"
    assert topic_config(kafka_bootstrap,
                        "juggler.stream.B")["message.timestamp.type"] == "LogAppendTime"
    assert topic_config(kafka_bootstrap, "juggler.control.status")["retention.ms"] == "-1"
    # the worker's state: the latest record per key is what a restore needs
    assert topic_config(kafka_bootstrap, "juggler.state")["cleanup.policy"] == "compact"


def test_a_stream_of_a_deployments_own_schema_gets_a_topic_like_the_others(
        kafka_bootstrap: str) -> None:
    """The worker creates a topic for every stream of its schemas; one the specs do not
    name is stamped by the broker as theirs are, or its idle waits would hold the
    worker's fetch lag."""
    from juggler.kafka.topics import apply_topics

    prefix = unique("own") + "."
    report = apply_topics(kafka_bootstrap, prefix=prefix, extra_streams=["B", "ward"])
    assert report.ok, str(report)
    for stream in ("B", "ward"):
        config = topic_config(kafka_bootstrap, f"{prefix}juggler.stream.{stream}")
        assert config["message.timestamp.type"] == "LogAppendTime"


def test_apply_alters_configs_and_reports_partition_mismatches(kafka_bootstrap: str,
                                                                 tmp_path: Path) -> None:
    name = unique("juggler.test")
    spec = tmp_path / "t.yaml"
    spec.write_text(f"topics:\n  - name: {name}\n    partitions: 2\n"
                    f"    config: {{retention.ms: 1000}}\n")
    run = juggler("topics", "apply", "--bootstrap", kafka_bootstrap, "--specs", str(tmp_path))
    assert (run.exit_code, run.output) == (0, f"created {name}\n")
    assert topic_config(kafka_bootstrap, name)["retention.ms"] == "1000"

    spec.write_text(f"topics:\n  - name: {name}\n    partitions: 3\n"
                    f"    config: {{retention.ms: 2000, cleanup.policy: compact}}\n")
    run = juggler("topics", "apply", "--bootstrap", kafka_bootstrap, "--specs", str(tmp_path))
    assert run.exit_code == 1
    assert run.output.splitlines() == [
        f"altered {name}: retention.ms 1000 -> 2000, cleanup.policy delete -> compact",
        f"mismatch: {name} has 2 partitions, the spec says 3; not changed (adding "
        f"partitions re-maps keys: recreate the topic, or apply with --partitions 2)"]
    assert partitions_of(kafka_bootstrap, name) == 2
    config = topic_config(kafka_bootstrap, name)
    assert (config["retention.ms"], config["cleanup.policy"]) == ("2000", "compact")


def test_ensure_results_topic(topics: str) -> None:
    from juggler.wire.names import InvalidName
    from juggler.kafka.topics import ensure_results_topic

    query_id = unique("q")
    name = ensure_results_topic(topics, query_id)
    assert name == f"juggler.results.{query_id}"
    assert ensure_results_topic(topics, query_id) == name  # idempotent
    assert partitions_of(topics, name) == partitions_of(topics, "juggler.control.fanout")
    assert topic_config(topics, name)["retention.ms"] == "604800000"
    with pytest.raises(InvalidName):
        ensure_results_topic(topics, "no spaces")


def read_commands(bootstrap: str, query_id: str) -> list[tuple[int, bytes, dict[str, Any]]]:
    """(offset, key, decoded value) of every command for `query_id` in juggler.control."""
    from juggler.codec.avro import COMMAND, Codec
    from juggler.client.control import _read_all

    codec = Codec()
    return [(m.offset(), m.key(), codec.decode(COMMAND, m.value()))
            for m in _read_all(bootstrap, "juggler.control", 30)
            if m.key() == query_id.encode()]


def test_register_no_wait_produces_the_command(topics: str, tmp_path: Path) -> None:
    query_id = unique("q")
    text = "Select H.alert\nFrom B, H\nMaxWindow 4sec\nWhere B.temp > H.vib"
    query_file = tmp_path / "q.sql"
    query_file.write_text(text)
    run = juggler("query", "register", query_id, "--file", str(query_file), "--history",
                  "--no-wait", "--bootstrap", topics)
    assert run.exit_code == 0, run.output
    [(offset, key, command)] = read_commands(topics, query_id)
    assert run.output == (f"sent REGISTER {query_id} (juggler.control offset {offset}); "
                          f"not waiting for its status\n")
    assert command == {"action": "REGISTER", "id": query_id, "text": text, "history": True,
                       "own_topic": False}

    run = juggler("query", "deregister", query_id, "--no-wait", "--bootstrap", topics)
    assert run.exit_code == 0, run.output
    commands = read_commands(topics, query_id)
    assert [c[2]["action"] for c in commands] == ["REGISTER", "DEREGISTER"]
    assert commands[1][2] == {"action": "DEREGISTER", "id": query_id, "text": None,
                              "history": False, "own_topic": False}


def test_register_waits_and_times_out_without_a_worker(topics: str) -> None:
    query_id = unique("q")
    run = juggler("query", "register", query_id, "--text", "SELECT * FROM B",
                  "--timeout", "2", "--bootstrap", topics)
    assert run.exit_code == 3, run.output
    [(offset, _, _)] = read_commands(topics, query_id)
    assert f"no status for REGISTER {query_id} (juggler.control offset {offset}): 2s " \
           f"passed without an answer; is a worker running?" in run.output


def test_list_and_show(topics: str) -> None:
    kept, dropped = unique("kept"), unique("dropped")
    for query_id in (kept, dropped):
        run = juggler("query", "register", query_id, "--text", f"SELECT * FROM B -- {query_id}",
                      "--no-wait", "--bootstrap", topics)
        assert run.exit_code == 0, run.output
    assert juggler("query", "deregister", dropped, "--no-wait",
                   "--bootstrap", topics).exit_code == 0

    # no worker here: nothing is answered, so nothing is registered; --all shows them
    run = juggler("query", "list", "--json", "--bootstrap", topics)
    assert run.exit_code == 0, run.output
    listed = {q["id"]: q for q in json.loads(run.output)}
    assert kept not in listed and dropped not in listed
    run = juggler("query", "list", "--all", "--json", "--bootstrap", topics)
    assert run.exit_code == 0, run.output
    listed = {q["id"]: q for q in json.loads(run.output)}
    assert (listed[kept]["state"], listed[kept]["status"]) == ("pending", "PENDING")
    assert listed[kept]["text"] == f"SELECT * FROM B -- {kept}"
    assert (listed[dropped]["state"], listed[dropped]["action"]) == ("pending", "DEREGISTER")

    run = juggler("query", "list", "--bootstrap", topics)
    assert run.exit_code == 0 and kept not in run.output and "--all lists them" in run.output
    run = juggler("query", "list", "--all", "--bootstrap", topics)
    assert run.exit_code == 0 and run.output.startswith("ID ")
    assert any(line.startswith(kept) and "pending" in line for line in run.output.splitlines())

    run = juggler("query", "show", kept, "--bootstrap", topics)
    assert run.exit_code == 0, run.output
    assert "state:   pending, not registered yet (REGISTER" in run.output
    assert f"  SELECT * FROM B -- {kept}" in run.output
    assert "status:  PENDING (no status for this command yet)" in run.output
    run = juggler("query", "show", dropped, "--bootstrap", topics)
    assert run.exit_code == 0 and "state:   pending, not registered (DEREGISTER" in run.output
    run = juggler("query", "show", unique("never"), "--bootstrap", topics)
    assert run.exit_code == 1 and "is not in juggler.control" in run.output


def test_list_joins_the_latest_status_of_the_last_command(topics: str) -> None:
    """Status records written by hand (no worker here): `list` shows a status only when
    it answers the id's last command; a later command without one is PENDING."""
    from confluent_kafka import Producer

    from juggler.codec.avro import Codec
    from juggler.client.control import read_control, submit
    from juggler.wire.commands import CommandStatus, RegisterCommand

    codec = Codec()
    query_id = unique("q")
    first = submit(topics, RegisterCommand(query_id, "SELECT * FROM B"), wait=False)
    producer = Producer({"bootstrap.servers": topics})
    status = CommandStatus(query_id, "REGISTER", "REJECTED", "query text: oops",
                           first.sent.offset)
    producer.produce("juggler.control.status", key=query_id.encode(),
                     value=status.encode(codec))
    producer.flush(30)
    state = read_control(topics).queries[query_id]
    assert (state.status, state.message, state.offset) == ("REJECTED", "query text: oops",
                                                           first.sent.offset)
    second = submit(topics, RegisterCommand(query_id, "SELECT * FROM H"), wait=False)
    state = read_control(topics).queries[query_id]
    assert (state.status, state.offset, state.command.text) == ("PENDING", second.sent.offset,
                                                                "SELECT * FROM H")


def test_errors_are_clear(kafka_bootstrap: str) -> None:
    run = juggler("query", "register", "a/b", "--text", "x", "--bootstrap", kafka_bootstrap)
    assert run.exit_code == 2 and "may only contain letters, digits" in run.output
    run = juggler("query", "register", "q", "--bootstrap", kafka_bootstrap)
    assert run.exit_code == 2 and "exactly one of --text or --file" in run.output
    run = juggler("query", "list", "--bootstrap", "127.0.0.1:1", "--timeout", "1")
    assert run.exit_code == 1 and "cannot reach Kafka" in run.output
