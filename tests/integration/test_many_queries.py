"""Many registered queries through the real broker: a batch of 2,000 queries
registered with `juggler query register --file`, a worker restart that restores them in
every partition, the results API under 50 concurrent readers, and the per-query results
topic opt-in, whose pages come from the same index and survive a restart.

Timings are printed (run with -s), never asserted: benchmark numbers go in
docs/benchmarks.md. Every wait is for a condition (statuses, committed offsets, the
results index), bounded by a deadline.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_worker_harness import Client, WorkerProcess, unique

from juggler.cli import main

pytestmark = pytest.mark.integration

BATCH = 2000
PARTITIONS = 4
"""As the default setup (`juggler topics apply`): every command must be LIVE in each."""


def juggler(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def batch_text(i: int) -> str:
    """Query i: one (temp, pressure) pair of stream B, so the 2,000 queries are distinct
    and an event with temp t and pressure p matches query 100 * p + t alone."""
    return f"SELECT * FROM B WHERE B.temp = {i % 100} AND B.pressure = {i // 100}"


def b_event(key: str, ts: int, temp: float, pressure: float) -> tuple[str, str, int, dict]:
    return ("B", key, ts, {"temp": float(temp), "pressure": float(pressure), "alert": False})


def results_by_query(client: Client) -> dict[str, list[Any]]:
    """Every result on the shared topic, by the query id of its header (one read)."""
    from juggler.engine.events import Result

    out: dict[str, list[Any]] = {}
    for m in client.read(client.names.all_results, timeout=60):
        qid = dict(m.headers() or ()).get("juggler-query", b"").decode()
        r = client.codec.decode("juggler.Result", m.value())
        assert r["query"] == qid, (r["query"], qid)
        out.setdefault(qid, []).append(
            Result(r["query"], r["key"], r["ts"], {s: (p["topic"], p["partition"], p["offset"])
                                                   for s, p in r["sources"].items()}, r["row"]))
    return out


def identity_of(record: dict[str, Any]) -> tuple:
    """A result served by the HTTP API, in the form of `Result.identity()`."""
    from juggler.engine.events import Result

    return Result(record["query"], record["key"], record["ts"],
                  {s: (p["topic"], p["partition"], p["offset"])
                   for s, p in record["sources"].items()}, record["row"]).identity()


def page_all(worker: WorkerProcess, query_id: str, limit: int, max_requests: int = 1000
             ) -> tuple[list[dict[str, Any]], list[int]]:
    """Every result of the query by cursor, until a page is empty: (results, statuses)."""
    seen: list[dict[str, Any]] = []
    statuses: list[int] = []
    cursor = None
    for _ in range(max_requests):
        path = f"/queries/{query_id}/results?limit={limit}" + (f"&after={cursor}" if cursor else "")
        status, body = worker.get(path)
        statuses.append(status)
        if status != 200 or not body["results"]:
            return seen, statuses
        seen += body["results"]
        cursor = body["next"]
    raise AssertionError(f"{query_id}: more than {max_requests} pages")


def wait_indexed(worker: WorkerProcess, query_id: str, expected: int, timeout: float = 60.0
                 ) -> None:
    """Until the worker's results index serves all `expected` results of the query (the
    index follows the shared topic on its own thread, a little behind the commit)."""
    deadline = time.monotonic() + timeout
    while True:
        seen, statuses = page_all(worker, query_id, limit=1000)
        if statuses[-1] == 200 and len(seen) >= expected:
            return
        assert time.monotonic() < deadline, \
            f"{query_id}: the index serves {len(seen)} of {expected} results ({statuses[-1]})"
        time.sleep(0.2)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


# -- a batch of 2,000 queries, a restart, and the list -----------------------------


def test_batch_registration_survives_a_restart(kafka_bootstrap: str, tmp_path: Path) -> None:
    app_id = unique("many")
    prefix = f"{app_id}."
    worker = WorkerProcess(kafka_bootstrap, app_id, prefix, tmp_path, partitions=PARTITIONS)
    worker.start()
    client = Client(kafka_bootstrap, prefix)
    client.watch = worker.revive
    common = ("--bootstrap", kafka_bootstrap, "--topic-prefix", prefix)
    try:
        texts = {f"m{i:04d}": batch_text(i) for i in range(BATCH)}
        queries = tmp_path / "queries.jsonl"
        queries.write_text("".join(json.dumps({"id": qid, "text": text}) + "\n"
                                   for qid, text in texts.items()))
        started = time.monotonic()
        run = juggler("query", "register", "--file", str(queries), "--timeout", "180", *common)
        took = time.monotonic() - started
        print(f"\n{BATCH} queries registered with `query register --file` and live in all "
              f"{PARTITIONS} partitions in {took:.2f} s ({BATCH / took:.0f}/s)")
        assert run.exit_code == 0, run.output[-3000:] + worker.log_tail()
        assert run.output.strip().splitlines()[-1] == (
            f"{BATCH} accepted and live in all {PARTITIONS} partitions, 0 rejected, 0 not "
            f"confirmed (180s passed with no answer)")
        produced = [m.timestamp()[1] for m in client.read(client.names.control)]
        answered = [m.timestamp()[1] for m in client.read(client.names.status)]
        print(f"  record timestamps: the {len(produced)} commands produced within "
              f"{max(produced) - min(produced)} ms, the last of {len(answered)} statuses "
              f"(a LIVE) {max(answered) - min(produced)} ms after the first command")

        # rejected commands change nothing and leave nothing in the list
        bad = tmp_path / "bad.jsonl"
        bad.write_text(json.dumps({"id": "bad0", "text": "SELECT * FROM X"}) + "\n" +
                       json.dumps({"id": "m0000", "text": "SELECT * FROM H"}) + "\n")
        run = juggler("query", "register", "--file", str(bad), "--timeout", "60", *common)
        assert run.exit_code == 1, run.output
        assert "REJECTED REGISTER bad0" in run.output and "REJECTED REGISTER m0000" in run.output

        def listed() -> dict[str, dict[str, Any]]:
            run = juggler("query", "list", "--json", "--timeout", "60", *common)
            assert run.exit_code == 0, run.output[-2000:]
            return {q["id"]: q for q in json.loads(run.output)}

        before = listed()
        assert {qid: q["text"] for qid, q in before.items()} == texts
        assert {(q["state"], q["status"], q["live_partitions"], q["partitions"])
                for q in before.values()} == {("registered", "ACCEPTED", PARTITIONS, PARTITIONS)}
        assert "REGISTER at offset" in before["m0000"]["later"]  # the rejected repeat
        run = juggler("query", "list", *common)
        assert run.output.strip().splitlines()[-1] == \
            "(1 more id is not registered: 1 rejected; --all lists them)"
        run = juggler("query", "show", "bad0", *common)
        assert "state:   rejected, not registered" in run.output, run.output
        status, body = worker.get("/queries")
        assert status == 200
        assert {q["id"]: q["text"] for q in body["queries"]} == texts

        worker.stop()
        started = time.monotonic()
        worker.start()
        print(f"worker restarted with {BATCH} queries: ready in "
              f"{time.monotonic() - started:.2f} s")
        status, body = worker.get("/queries")
        assert status == 200
        assert {q["id"]: q["text"] for q in body["queries"]} == texts
        after = listed()
        assert after == before

        # events after the restart give each sampled query exactly its events' results
        sample = [f"m{i:04d}" for i in range(0, BATCH, BATCH // 20)] + ["m1999"]
        events, expected = [], Counter()
        ts = 1_000_000
        for round_ in range(3):
            for qid in sample:
                i = int(qid[1:])
                ts += 10
                key = f"patient-{(i + round_) % 7}"
                events.append(b_event(key, ts, i % 100, i // 100))
                expected[(qid, key, ts)] += 1
            ts += 10
            events.append(b_event("patient-0", ts, 5, 99))  # no query has pressure 99
        sent = client.send_events(events)
        # every partition's task restored the queries, not only some of them
        assert {e.position[1] for e in sent} == set(range(PARTITIONS))
        client.wait_consumed(app_id, [client.names.stream(s) for s in "BHKT"], timeout=120)
        got = results_by_query(client)
        actual = Counter((r.query, r.key, r.ts) for rs in got.values() for r in rs)
        assert actual == expected
        assert client.dead_letters() == []
    finally:
        worker.stop()


# -- a worker for the results API tests --------------------------------------------


@pytest.fixture(scope="module")
def served(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory):
    app_id = unique("api")
    prefix = f"{app_id}."
    worker = WorkerProcess(kafka_bootstrap, app_id, prefix, tmp_path_factory.mktemp("api"),
                           partitions=PARTITIONS)
    worker.start()
    client = Client(kafka_bootstrap, prefix)
    client.watch = worker.revive
    try:
        yield worker, client, app_id, ("--bootstrap", kafka_bootstrap, "--topic-prefix", prefix)
    finally:
        worker.stop()


READERS = 50
THRESHOLDS = {"hot10": 10, "hot30": 30, "hot50": 50, "hot70": 70, "hot85": 85}
"""Queries B.temp > t over temperatures 0..99: a few hundred results each."""


def test_results_api_under_concurrent_readers(served) -> None:
    worker, client, app_id, common = served
    for qid, t in THRESHOLDS.items():
        run = juggler("query", "register", qid, "--text", f"SELECT * FROM B WHERE B.temp > {t}",
                      *common)
        assert run.exit_code == 0, run.output
    events = [b_event(f"patient-{i % 9}", 2_000_000 + 10 * i, (i * 37) % 100, 1)
              for i in range(600)]
    client.send_events(events)
    client.wait_consumed(app_id, [client.names.stream(s) for s in "BHKT"], timeout=120)
    stored = results_by_query(client)
    expected = {qid: Counter(r.identity() for r in stored.get(qid, [])) for qid in THRESHOLDS}
    for qid, t in THRESHOLDS.items():
        assert sum(expected[qid].values()) == sum(1 for e in events if e[3]["temp"] > t)
        wait_indexed(worker, qid, sum(expected[qid].values()))

    limit, max_requests, deadline = 50, 100, time.monotonic() + 90
    alone = []
    for _ in range(50):  # one reader, for comparison
        started = time.perf_counter()
        assert worker.get(f"/queries/hot10/results?limit={limit}")[0] == 200
        alone.append(time.perf_counter() - started)
    latencies: list[float] = []
    outcome: dict[int, tuple[str, list[dict[str, Any]], list[int]]] = {}
    failures: list[str] = []
    lock = threading.Lock()
    go = threading.Barrier(READERS)

    def reader(n: int) -> None:
        qid = list(THRESHOLDS)[n % len(THRESHOLDS)]
        seen: list[dict[str, Any]] = []
        statuses: list[int] = []
        mine: list[float] = []
        cursor = None
        try:
            go.wait(30)
            for _ in range(max_requests):
                if time.monotonic() > deadline:
                    failures.append(f"reader {n}: deadline passed")
                    break
                path = f"/queries/{qid}/results?limit={limit}" + \
                    (f"&after={cursor}" if cursor else "")
                started = time.perf_counter()
                status, body = worker.get(path)
                mine.append(time.perf_counter() - started)
                statuses.append(status)
                if status != 200 or not body["results"]:
                    break
                seen += body["results"]
                cursor = body["next"]
        except Exception as exc:  # reported below, with the others
            failures.append(f"reader {n}: {exc!r}")
        with lock:
            latencies.extend(mine)
            outcome[n] = (qid, seen, statuses)

    threads = [threading.Thread(target=reader, args=(n,), daemon=True) for n in range(READERS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(1.0, deadline - time.monotonic() + 5))
    wall = time.monotonic() - started
    assert not any(thread.is_alive() for thread in threads), "a reader did not finish"
    assert failures == []
    print(f"\n{READERS} concurrent readers, {len(latencies)} requests of up to {limit} results "
          f"in {wall:.2f} s ({len(latencies) / wall:.0f} requests/s): "
          f"p50 {1000 * statistics.median(latencies):.1f} ms, "
          f"p99 {1000 * percentile(latencies, 99):.1f} ms, "
          f"max {1000 * max(latencies):.1f} ms; one reader alone: p50 "
          f"{1000 * statistics.median(alone):.1f} ms, p99 {1000 * percentile(alone, 99):.1f} ms")
    assert len(outcome) == READERS
    for n, (qid, seen, statuses) in outcome.items():
        assert set(statuses) == {200}, (n, Counter(statuses))
        positions = [(r["position"]["partition"], r["position"]["offset"]) for r in seen]
        assert len(positions) == len(set(positions)), f"reader {n}: a result served twice"
        assert Counter(identity_of(r) for r in seen) == expected[qid], f"reader {n} ({qid})"


def test_own_topic_is_opt_in(served) -> None:
    from confluent_kafka.admin import AdminClient

    worker, client, app_id, common = served
    own, shared = unique("own"), unique("shared")
    run = juggler("query", "register", own, "--own-topic", "--text",
                  "SELECT * FROM B WHERE B.pressure = 777", *common)
    assert run.exit_code == 0, run.output
    run = juggler("query", "register", shared, "--text",
                  "SELECT * FROM B WHERE B.pressure >= 777", *common)
    assert run.exit_code == 0, run.output
    run = juggler("query", "show", own, *common)
    assert f"results: juggler.results.{own} (its own topic)" in run.output, run.output

    topics = AdminClient({"bootstrap.servers": client.bootstrap}).list_topics(timeout=30).topics
    assert client.names.results(own) in topics
    assert client.names.results(shared) not in topics  # no topic without the opt-in
    assert not [t for t in topics if t.startswith(client.names.all_results + ".")
                and t != client.names.results(own)]

    events = [b_event(f"patient-{i % 5}", 9_000_000 + 10 * i, 1, 777 if i % 3 else 778)
              for i in range(90)]
    client.send_events(events)
    client.wait_consumed(app_id, [client.names.stream(s) for s in "BHKT"], timeout=120)
    matching = Counter((e[1], e[2]) for e in events if e[3]["pressure"] == 777)

    on_own = client.read(client.names.results(own))
    decoded = [client.codec.decode("juggler.Result", m.value()) for m in on_own]
    assert Counter((r["key"], r["ts"]) for r in decoded) == matching
    assert {r["query"] for r in decoded} == {own}
    assert {dict(m.headers() or ()).get("juggler-query") for m in on_own} <= {own.encode()}
    on_shared = results_by_query(client)
    assert own not in on_shared  # not on the shared topic as well
    assert len(on_shared[shared]) == len(events)  # the other one is, every event matches
    assert client.names.results(shared) not in AdminClient(
        {"bootstrap.servers": client.bootstrap}).list_topics(timeout=30).topics

    # the HTTP API pages the own topic from the same index, with the same cursors
    wait_indexed(worker, own, sum(matching.values()))
    started = time.perf_counter()
    own_pages = page_all(worker, own, limit=7)
    seen, statuses = own_pages
    print(f"\nown topic: {len(statuses)} pages in {time.perf_counter() - started:.2f} s "
          f"(from the index)")
    assert set(statuses) == {200} and len(statuses) > 3
    assert Counter((r["key"], r["ts"]) for r in seen) == matching
    assert {r["position"]["topic"] for r in seen} == {client.names.results(own)}
    wait_indexed(worker, shared, len(events))
    seen, statuses = page_all(worker, shared, limit=25)
    assert len(seen) == len(events) and set(statuses) == {200}

    # a restarted worker indexes the own topic again: the same pages
    worker.stop()
    worker.start()
    wait_indexed(worker, own, sum(matching.values()))
    assert page_all(worker, own, limit=7) == own_pages
