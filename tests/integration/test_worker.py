"""The Kafka worker against a real broker: results equal the reference evaluator's,
registration with and without history mid-stream, deregistration, rejected commands,
LIVE statuses, dead letters, the HTTP results cursor and the metrics. Every test runs
on both runtimes: the worker and the Faust app (`juggler worker --runtime faust`).

One worker subprocess serves the whole module (it is started once: joining the group
and restoring its partitions takes seconds). Allowed lateness is 0, as by default: a
task merges its stream partitions by event time (docs/worker.md), and the events are
produced in timestamp order, so no event is late and the worker must give exactly the
reference's results; only the deliberate late event is late.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

import pytest
from test_worker_harness import Client, WorkerProcess, by_query, diff, unique

pytestmark = pytest.mark.integration

LATENESS = 0
"""The worker's default: the arrival order is a timestamp merge, so events produced in
timestamp order are never late and need no allowance."""

Q1 = "SELECT * FROM B, H WHERE B.temp > H.vib MAXWINDOW 5 sec"
Q2 = """Select H.alert
From   B, H, T
Window T.ts > B.ts
MaxWindow 4sec
Where  H.beatrate > 60 and B.temp > H.vib and B.pressure > T.fluct"""
Q3 = "SELECT B.temp, K.fluid FROM B, K WHERE K.fluid < 50 and B.pressure >= K.fluid MAXWINDOW 3 sec"
Q4 = "SELECT * FROM H, T WHERE H.vib <= T.fluct MAXWINDOW 2 sec"


def generate(rng: random.Random, n: int, start_ts: int) -> list[tuple[str, str, int, dict]]:
    keys = [f"patient-{i}" for i in range(6)]
    ts = start_ts
    out = []
    for _ in range(n):
        ts += rng.randint(50, 300)
        stream = rng.choice("BHKT")
        key = rng.choice(keys)
        if stream == "B":
            data = {"pressure": _num(rng), "temp": _num(rng), "alert": rng.random() < 0.5}
        elif stream == "H":
            data = {"beatrate": _num(rng), "vib": _num(rng), "alert": rng.random() < 0.5}
        elif stream == "K":
            data = {"fluid": _num(rng)}
        else:
            data = {"fluct": _num(rng), "degree": _num(rng), "incr": _num(rng)}
        out.append((stream, key, ts, data))
    return out


def _num(rng: random.Random) -> float:
    return float(rng.randint(0, 100))


class Reference:
    """The naive evaluator, fed the same events in production order."""

    def __init__(self) -> None:
        from juggler.codec.avro import Codec
        from juggler.engine.events import EngineConfig
        from juggler.engine.naive import NaiveEngine

        self.engine = NaiveEngine(EngineConfig(allowed_lateness=LATENESS))
        self.catalog = Codec().catalog()
        self.results: list[Any] = []

    def register(self, query_id: str, text: str, history: bool = False) -> None:
        from juggler.language import compile_query

        self.results += self.engine.register(compile_query(query_id, text, self.catalog),
                                             history=history)

    def deregister(self, query_id: str) -> None:
        self.engine.deregister(query_id)

    def process(self, events: list[Any]) -> None:
        for event in events:
            self.results += self.engine.process(event)


@pytest.fixture(scope="module", params=["worker", "faust"])
def setup(request: pytest.FixtureRequest, kafka_bootstrap: str,
          tmp_path_factory: pytest.TempPathFactory):
    app_id = unique("w")
    prefix = f"{app_id}."
    worker = WorkerProcess(kafka_bootstrap, app_id, prefix, tmp_path_factory.mktemp("worker"),
                           allowed_lateness=LATENESS, batch_max=100, runtime=request.param)
    worker.start()
    client = Client(kafka_bootstrap, prefix)
    client.watch = worker.revive  # a worker that stopped itself (status 70) is restarted
    try:
        yield worker, client, app_id
    finally:
        worker.stop()


@pytest.fixture(scope="module")
def scenario(setup):
    """Registrations before and in the middle of the stream, with and without history,
    a deregistration, and rejected commands; the reference sees the same sequence."""
    _, client, app_id = setup
    rng = random.Random(7)
    ref = Reference()
    stream_topics = [client.names.stream(s) for s in "BHKT"]
    consumed = stream_topics + [client.names.fanout]
    statuses = {}

    def command(action: str, qid: str, text: str | None = None, history: bool = False):
        offset = client.command(action, qid, text, history)
        statuses[(action, qid, offset)] = client.wait_status(offset)
        return statuses[(action, qid, offset)]

    assert command("REGISTER", "q1", Q1)["status"] == "ACCEPTED"
    assert command("REGISTER", "q2", Q2)["status"] == "ACCEPTED"
    ref.register("q1", Q1)
    ref.register("q2", Q2)
    client.wait_consumed(app_id, consumed)

    phase1 = client.send_events(generate(rng, 250, 1_000_000))
    ref.process(phase1)
    client.wait_consumed(app_id, consumed)

    rejected = [command("REGISTER", "q1", Q3),                       # repeated id
                command("DEREGISTER", "nope"),                        # unknown id
                command("REGISTER", "q5", "SELECT * FROM B WHERE B.nope > 1"),  # bad column
                command("REGISTER", "q 6", Q1),                       # not a topic name
                command("REGISTER", "q7", "SELECT * FROM B, H")]      # no MAXWINDOW
    assert command("REGISTER", "q3", Q3)["status"] == "ACCEPTED"
    assert command("REGISTER", "q4", Q4, history=True)["status"] == "ACCEPTED"
    ref.register("q3", Q3)
    ref.register("q4", Q4, history=True)
    client.wait_consumed(app_id, consumed)

    phase2 = client.send_events(generate(rng, 250, 2_000_000))
    ref.process(phase2)
    client.wait_consumed(app_id, consumed)

    assert command("DEREGISTER", "q1")["status"] == "ACCEPTED"
    ref.deregister("q1")
    client.wait_consumed(app_id, consumed)
    phase3 = client.send_events(generate(rng, 150, 3_000_000))
    ref.process(phase3)
    client.wait_consumed(app_id, consumed)
    return ref, rejected, phase1 + phase2 + phase3


def test_results_equal_the_reference(setup, scenario) -> None:
    _, client, _ = setup
    ref, _, _ = scenario
    # produced in timestamp order, merged by timestamp: nothing may be late (a late
    # event is dropped, so the results would differ from the reference's below)
    late = [d for d in client.dead_letters() if d["kind"] == "late"]
    assert not late, f"{len(late)} late events, e.g. " + \
        "; ".join(f"{d['topic']}[{d['partition']}]@{d['offset']}: {d['reason']}" for d in late[:3])
    expected = by_query(ref.results)
    assert set(expected) == {"q1", "q2", "q3", "q4"}
    for qid in ("q1", "q2", "q3", "q4"):
        actual = Counter(r.identity() for r in client.results(qid))
        assert actual == expected[qid], f"{qid}: {diff(expected[qid], actual)}"
        assert max(actual.values()) == 1, f"{qid}: duplicated results"
    # the mid-stream registrations mattered: q4's history results exist, q3 has none
    # from phase 1 alone, q1 has nothing from phase 3
    assert sum(expected["q4"].values()) > 0 and sum(expected["q3"].values()) > 0


def test_rejected_commands_change_nothing(setup, scenario) -> None:
    worker, _, _ = setup
    _, rejected, _ = scenario
    assert [s["status"] for s in rejected] == ["REJECTED"] * 5
    messages = [s["message"] for s in rejected]
    assert "already registered" in messages[0]
    assert "not registered" in messages[1]
    assert "nope" in messages[2]
    assert "may only contain" in messages[3]
    assert "MAXWINDOW" in messages[4].upper()
    status, body = worker.get("/queries")
    assert status == 200
    assert sorted(q["id"] for q in body["queries"]) == ["q2", "q3", "q4"]


def test_accepted_commands_go_live_once_per_partition(setup, scenario) -> None:
    """ACCEPTED once from the control task; then every partition's task says LIVE for it
    or a later command (LIVE is cumulative); a rejected command never goes live."""
    _, client, _ = setup
    _, rejected, _ = scenario
    by_offset: dict[int, list[dict]] = {}
    for status in client.statuses():
        by_offset.setdefault(status["command_offset"], []).append(status)
    accepted = {o: s for o, s in by_offset.items() if s[0]["status"] == "ACCEPTED"}
    assert sorted((s[0]["action"], s[0]["id"]) for s in accepted.values()) == [
        ("DEREGISTER", "q1"), ("REGISTER", "q1"), ("REGISTER", "q2"), ("REGISTER", "q3"),
        ("REGISTER", "q4")]
    lives = [s for s in client.statuses() if s["status"] == "LIVE"]
    assert lives and all(s["partitions"] == 2 for s in lives)
    for offset in accepted:
        assert {s["partition"] for s in lives if s["command_offset"] >= offset} == {0, 1}
    for status in rejected:
        assert [s["status"] for s in by_offset[status["command_offset"]]] == ["REJECTED"]


def test_bad_input_goes_to_dead_letters_and_the_worker_keeps_going(setup, scenario) -> None:
    import io

    import fastavro
    from juggler.codec import framing

    worker, client, app_id = setup
    codec = client.codec
    b_topic = client.names.stream("B")
    garbage = client.send_raw(b_topic, b"patient-0", b"\x00garbage")
    wrong = client.send_raw(b_topic, b"patient-0",
                            codec.encode("H", {"ts": 5, "beatrate": 1.0, "vib": 2.0, "alert": True}))
    body = io.BytesIO()
    fastavro.schemaless_writer(body, codec.schema("B"),
                               {"ts": 5, "pressure": float("nan"), "temp": 1.0, "alert": False})
    nan = client.send_raw(b_topic, b"patient-0",
                          framing.single_object(codec.fingerprint("B"), body.getvalue()))
    keyless = client.send_raw(b_topic, None,
                              codec.encode("B", {"ts": 5, "pressure": 1.0, "temp": 1.0, "alert": False}))
    client.send_events([("B", "late-key", 10_000_000, {"pressure": 1.0, "temp": 1.0, "alert": False})])
    late = client.send_raw(b_topic, b"late-key",
                           codec.encode("B", {"ts": 10_000_000 - LATENESS - 1, "pressure": 1.0,
                                              "temp": 1.0, "alert": False}))
    # ... and it keeps going: a good B after all this still joins an H
    after = client.send_events([("H", "late-key", 10_000_001, {"beatrate": 99.0, "vib": 0.0, "alert": True}),
                                ("B", "late-key", 10_000_002, {"pressure": 1.0, "temp": 50.0, "alert": False})])
    client.wait_consumed(app_id, [client.names.stream(s) for s in "BHKT"])

    letters = {(d["topic"], d["partition"], d["offset"]): d for d in client.dead_letters()}
    assert set(letters) == {garbage, wrong, nan, keyless, late}  # none late in the scenario
    assert {pos: d["kind"] for pos, d in letters.items()} == {
        garbage: "undecodable", wrong: "schema", nan: "schema", keyless: "no_key",
        late: "late"}
    assert letters[garbage]["value"] == b"\x00garbage" and letters[garbage]["key"] == b"patient-0"
    assert (letters[garbage]["key_size"], letters[garbage]["value_size"]) == (9, 8)
    assert letters[garbage]["reason"]
    assert "juggler.stream.H" in letters[wrong]["reason"]
    assert "non-finite" in letters[nan]["reason"]
    assert letters[keyless]["key"] is None and letters[keyless]["key_size"] == -1
    assert "key" in letters[keyless]["reason"]
    assert letters[late]["reason"].startswith("late:")
    late_results = [r for r in client.results("q2") + client.results("q3")
                    if r.key == "late-key"]
    assert after and not late_results  # q2 needs T, q3 needs K: nothing to join
    status, text = worker.get("/metrics")
    assert status == 200
    metric = _metrics(text)
    assert metric['juggler_dead_letters_total{reason="late"}'] == 1
    assert metric['juggler_late_events_total{stream="B"}'] == 1
    assert metric['juggler_dead_letters_total{reason="undecodable"}'] == 1
    assert metric['juggler_dead_letters_total{reason="schema"}'] == 2
    assert metric['juggler_dead_letters_total{reason="no_key"}'] == 1


def test_http_results_cursor_pages_through_every_result(setup, scenario) -> None:
    worker, client, _ = setup
    stored = [(r.query, r.key, r.ts) for r in client.results("q2")]
    assert len(stored) > 10
    seen: list[dict] = []
    cursor = None
    pages = 0
    while True:
        path = "/queries/q2/results?limit=7" + (f"&after={cursor}" if cursor else "")
        status, body = worker.get(path)
        assert status == 200, body
        pages += 1
        cursor = body["next"]
        if not body["results"]:
            break
        assert len(body["results"]) <= 7
        seen += body["results"]
    assert pages > 2
    positions = [(r["position"]["partition"], r["position"]["offset"]) for r in seen]
    assert len(positions) == len(set(positions)), "a result was served twice"
    assert Counter((r["query"], r["key"], r["ts"]) for r in seen) == Counter(stored)
    # a client coming back with its cursor gets exactly what was committed since
    before = len(client.results("q4"))
    status, body = worker.get("/queries/q4/results?limit=10000")
    assert status == 200 and len(body["results"]) == before
    mark = body["next"]
    client.send_events([("H", "patient-9", 9_000_000, {"beatrate": 1.0, "vib": 1.0, "alert": False}),
                        ("T", "patient-9", 9_000_001, {"fluct": 5.0, "degree": 0.0, "incr": 0.0})])
    client.wait_consumed(setup[2], [client.names.stream(s) for s in "BHKT"])
    status, body = worker.get(f"/queries/q4/results?after={mark}")
    assert status == 200 and [r["key"] for r in body["results"]] == ["patient-9"]
    assert worker.get(f"/queries/q4/results?after={body['next']}")[1]["results"] == []
    assert worker.get("/queries/q4/results?after=!!")[0] == 400
    assert worker.get("/queries/unknown/results")[0] == 404


def test_metrics(setup, scenario) -> None:
    worker, client, _ = setup
    _, _, events = scenario
    status, text = worker.get("/metrics")
    assert status == 200
    metric = _metrics(text)
    streams = Counter(e.stream for e in events)
    for stream, n in streams.items():
        assert metric[f'juggler_events_in_total{{stream="{stream}"}}'] >= n
    assert metric['juggler_results_out_total{query="q2"}'] == len(client.results("q2"))
    # q1 was deregistered: its series has left /metrics by the next render at the latest,
    # which a scrape more than half a second later shows (docs/metrics.md)
    deadline = time.monotonic() + 30
    while 'juggler_results_out_total{query="q1"}' in _metrics(worker.get("/metrics")[1]):
        assert time.monotonic() < deadline, "q1's series never left /metrics"
        time.sleep(0.1)
    assert metric['juggler_comparisons_total{type="A"}'] > 0
    assert sum(v for k, v in metric.items() if k.startswith("juggler_evaluation_order{")) == 1
    for t in "AJW":
        assert 0.0 <= metric[f'juggler_selectivity{{type="{t}"}}'] <= 1.0
    assert "juggler_reorders_total" in metric
    assert metric['juggler_held_events{stream="B"}'] > 0
    assert metric["juggler_registered_queries"] == 3
    assert metric["juggler_processing_latency_seconds_count"] > 0


def test_a_tombstone_stops_nothing_and_query_list_keeps_the_text(setup, scenario) -> None:
    """Runs after the tests that count dead letters and metrics (module order)."""
    from juggler.client.control import REGISTERED, read_control

    worker, client, app_id = setup
    tombstone = client.send_raw(client.names.control, b"q2", None)
    client.wait_consumed(app_id, [client.names.control])
    letter, = [d for d in client.dead_letters()
               if (d["topic"], d["partition"], d["offset"]) == tombstone]
    assert letter["kind"] == "bad_command" and "DEREGISTER" in letter["reason"]
    assert "q2" in [q["id"] for q in worker.get("/queries")[1]["queries"]]
    q2 = read_control(client.bootstrap, prefix=client.names.prefix).queries["q2"]
    assert q2.state == REGISTERED and q2.command.text == Q2


def _metrics(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


@pytest.mark.parametrize("runtime", ["worker", "faust"])
def test_the_web_token_guards_every_page_but_health_and_metrics(
        kafka_bootstrap: str, tmp_path, runtime: str) -> None:
    app_id = unique("tok")
    worker = WorkerProcess(kafka_bootstrap, app_id, f"{app_id}.", tmp_path, runtime=runtime,
                           web_token="s3cret")
    with worker:
        worker.token = None  # ask without it
        assert worker.get("/queries")[0] == 401
        assert worker.get("/queries/q1/results")[0] == 401
        assert worker.get("/health")[0] == 200
        assert worker.get("/metrics")[0] == 200
        worker.token = "s3cret"
        assert worker.get("/queries") == (200, {"queries": []})
