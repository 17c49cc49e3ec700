"""`juggler results` and `juggler deadletters` print what the topics hold as JSON lines."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from juggler.cli import main
from juggler.codec.bounded import dead_letter
from juggler.kafka.topics import apply_topics
from test_worker_harness import Client, unique

pytestmark = pytest.mark.integration


def test_results_and_dead_letters_as_json_lines(kafka_bootstrap: str) -> None:
    prefix = unique("tail-") + "."
    assert apply_topics(kafka_bootstrap, prefix=prefix).ok
    client = Client(kafka_bootstrap, prefix)
    codec = client.codec
    for qid, ts in (("q1", 10), ("q2", 20), ("q1", 30)):
        value = codec.encode("juggler.Result", {
            "query": qid, "key": "p1", "ts": ts, "row": {"B.temp": 1.5},
            "sources": {"B": {"topic": "t", "partition": 0, "offset": ts}}})
        client.producer.producer.produce(client.names.all_results, key=b"p1", value=value,
                                         headers=[("juggler-query", qid.encode())])
    key, value = dead_letter(codec, topic="t", partition=0, offset=7, key=b"\xff",
                             value=b"abc", kind="bad_key", reason="key is not UTF-8",
                             max_bytes=1_000_000)
    client.send_raw(client.names.deadletter, key, value)
    runner = CliRunner()
    base = ["--bootstrap", kafka_bootstrap, "--topic-prefix", prefix, "--from-beginning"]
    run = runner.invoke(main, ["results", "q1", *base])
    assert run.exit_code == 0, run.output
    lines = [json.loads(line) for line in run.output.splitlines()]
    assert [(r["query"], r["ts"]) for r in lines] == [("q1", 10), ("q1", 30)]
    assert lines[0]["row"] == {"B.temp": 1.5} and lines[0]["position"]["topic"].startswith(prefix)
    run = runner.invoke(main, ["results", "q1", "--limit", "1", *base])
    assert len(run.output.splitlines()) == 1
    run = runner.invoke(main, ["deadletters", *base])
    [letter] = [json.loads(line) for line in run.output.splitlines()]
    assert (letter["kind"], letter["key"], letter["value"]) == ("bad_key", {"base64": "/w=="}, "abc")
    assert runner.invoke(main, ["results", "q1", "--bootstrap", kafka_bootstrap,
                                "--topic-prefix", prefix]).output == ""  # only new ones


def test_status_shows_progress_and_queries(kafka_bootstrap: str) -> None:
    prefix = unique("status-") + "."
    assert apply_topics(kafka_bootstrap, prefix=prefix).ok
    Client(kafka_bootstrap, prefix).send_events([("B", "p1", 1, {"pressure": 1.0, "temp": 2.0,
                                                                 "alert": False})])
    run = CliRunner().invoke(main, ["status", "--bootstrap", kafka_bootstrap,
                                    "--topic-prefix", prefix, "--app-id", unique("g")])
    assert run.exit_code == 0, run.output
    assert f"{prefix}juggler.stream.B" in run.output
    assert "behind by 1 records; 0 queries registered" in run.output  # no worker in group
