"""The worker on Kafka and `juggler eval` on a file give the same results for the same
events: the ICU queries registered up front, one registered mid-stream with history
and one without, and a deregistration, over simulated vitals of many patients.

Events are compared by their index in the produced sequence: in eval's output a source
is a line number, in the worker's a Kafka position, and both name the same event.
Both run with the default allowed lateness, 0: each phase is produced as a backlog in
timestamp order (the simulator's events are strictly increasing in `ts`), and the
worker's tasks merge their stream partitions by timestamp, so the worker must take
every key's events in eval's order and drop none as late.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
from test_worker_harness import Client, WorkerProcess, diff, unique

from juggler.demo.run import EXAMPLE_QUERIES, load_queries
from juggler.demo.vitals import VitalsSimulator

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LATE_QUERY = ("tachy_low_pressure", "SELECT B.pressure, H.beatrate FROM B, H "
              "WHERE H.beatrate > 110 and B.pressure < 90 MAXWINDOW 3 sec")
FRESH_QUERY = ("fever_brady", "SELECT * FROM T, H WHERE H.beatrate < 52 and T.degree > 40 "
               "and T.ts > H.ts MAXWINDOW 2 sec")
Identity = tuple[str, str, int, frozenset[tuple[str, int]], tuple[tuple[str, Any], ...]]


def identity(query: str, key: str, ts: int, sources: dict[str, int],
             row: dict[str, Any]) -> Identity:
    """A result with its sources as event indexes and numbers as floats (eval writes
    JSON, where 85.0 is 85; Avro doubles stay 85.0)."""
    values = tuple(sorted((k, float(v) if isinstance(v, int) and not isinstance(v, bool)
                           else v) for k, v in row.items()))
    return query, key, ts, frozenset(sources.items()), values


def test_worker_results_equal_eval(kafka_bootstrap: str, tmp_path: Path) -> None:
    events = list(islice(VitalsSimulator(patients=12, seed=11).events(1_700_000_000_000,
                                                                      rate=150), 2400))
    first, second, third = events[:900], events[900:1700], events[1700:]
    queries = load_queries(EXAMPLE_QUERIES)

    # -- the file run: the same sequence, commands as control lines -------------------
    lines = [_event_line(e) for e in first]
    lines.append({"control": "register", "id": LATE_QUERY[0], "text": LATE_QUERY[1],
                  "history": True})
    lines.append({"control": "register", "id": FRESH_QUERY[0], "text": FRESH_QUERY[1]})
    lines += [_event_line(e) for e in second]
    lines.append({"control": "deregister", "id": "q3"})
    lines += [_event_line(e) for e in third]
    events_file = tmp_path / "events.jsonl"
    events_file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "results.jsonl"
    subprocess.run([sys.executable, "-m", "juggler.cli", "eval", "--queries",
                    str(EXAMPLE_QUERIES), "--events", str(events_file), "--out", str(out)],
                   check=True, timeout=300)
    line_to_index = _line_indexes(lines)
    expected = Counter(identity(r["query"], r["key"], r["ts"],
                                {s: line_to_index[p] for s, p in r["sources"].items()},
                                r["row"])
                       for r in map(json.loads, out.read_text().splitlines()))

    # -- the Kafka run ------------------------------------------------------------------
    app_id = unique("agree")
    worker = WorkerProcess(kafka_bootstrap, app_id, f"{app_id}.", tmp_path)
    client = Client(kafka_bootstrap, f"{app_id}.")
    client.watch = worker.revive
    consumed = [client.names.stream(s) for s in "BHKT"] + [client.names.fanout]
    with worker:
        def command(action: str, query_id: str, text: str | None = None,
                    history: bool = False) -> None:
            status = client.wait_status(client.command(action, query_id, text, history))
            assert status["status"] == "ACCEPTED", status
            client.wait_consumed(app_id, consumed)

        for query_id, text in queries:
            command("REGISTER", query_id, text)
        sent = client.send_events(first)
        client.wait_consumed(app_id, consumed)
        command("REGISTER", *LATE_QUERY, history=True)
        command("REGISTER", *FRESH_QUERY)
        sent += client.send_events(second)
        client.wait_consumed(app_id, consumed)
        command("DEREGISTER", "q3")
        sent += client.send_events(third)
        client.wait_consumed(app_id, consumed)

        position_to_index = {e.position: i for i, e in enumerate(sent)}
        actual: Counter[Identity] = Counter()
        for query_id in [q for q, _ in queries] + [LATE_QUERY[0], FRESH_QUERY[0]]:
            for r in client.results(query_id):
                actual[identity(r.query, r.key, r.ts,
                                {s: position_to_index[p] for s, p in r.sources.items()},
                                r.row)] += 1
        letters = client.dead_letters()

    late = [d for d in letters if d["kind"] == "late"]
    assert not late, f"{len(late)} of {len(sent)} events late, e.g. " + "; ".join(
        f"{d['topic']}[{d['partition']}]@{d['offset']}: {d['reason']}" for d in late[:3])
    assert letters == [], "nothing bad was produced, so nothing is dead-lettered"
    by_query = {q for q, *_ in expected}
    assert by_query == {q for q, _ in queries} | {LATE_QUERY[0], FRESH_QUERY[0]}, \
        "every query should have results, or the comparison proves little"
    assert actual == expected, diff(expected, actual)


def _event_line(event: tuple[str, str, int, dict[str, Any]]) -> dict[str, Any]:
    stream, key, ts, data = event
    return {"stream": stream, "key": key, "ts": ts, "data": data}


def _line_indexes(lines: list[dict[str, Any]]) -> dict[int, int]:
    """0-based line number (eval's position) -> index among the events alone."""
    out: dict[int, int] = {}
    for line_no, line in enumerate(lines):
        if "control" not in line:
            out[line_no] = len(out)
    return out
