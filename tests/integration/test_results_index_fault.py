"""The results index fails (its writes fail as on a full disk) under a running worker:
the API says it is behind instead of serving a fraction of the results as all there
is, `/health` keeps 200 (processing is fine) while its `results_index` and
`/health/results` say the index failed, the failure and lag metrics move, and once the
fault clears the restarted indexer catches up and every page is complete again.

The fault goes through the indexing process's real failure path: while the file named
by `JUGGLER_RESULTS_INDEX_FAULT` exists, its writes raise SQLite's "database or disk is
full" (`results_store.FAULT_ENV`); a tmpfs too small for the index needs root."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_results_retention import wait_for
from test_worker_harness import Client, WorkerProcess, unique

from juggler.runtime.results_store import FAULT_ENV

pytestmark = pytest.mark.integration

QUERY = "SELECT * FROM B, H WHERE B.temp > H.vib MAXWINDOW 5 sec"


def events(first: int, count: int) -> list[tuple[str, str, int, dict[str, Any]]]:
    """Every B joins the H event of its key just before it."""
    out: list[tuple[str, str, int, dict[str, Any]]] = []
    for i in range(first, first + count):
        key, ts = f"patient-{i % 6}", 1_000_000 + 100 * i
        out += [("H", key, ts, {"beatrate": 70.0, "vib": 1.0, "alert": False}),
                ("B", key, ts + 50, {"pressure": 1.0, "temp": 50.0, "alert": False})]
    return out


def served(worker: WorkerProcess) -> tuple[list[tuple[int, int]], bool]:
    """The (partition, offset) of every result of q1 the worker serves, paging by
    cursor to the end, and whether the last page said the index is behind."""
    found, cursor = [], ""
    while True:
        status, body = worker.get(f"/queries/q1/results?limit=50&after={cursor}")
        assert status == 200, body
        found += [(r["position"]["partition"], r["position"]["offset"])
                  for r in body["results"]]
        if not body["results"]:
            return sorted(found), body["behind"]
        cursor = body["next"]


def metric(worker: WorkerProcess, name: str) -> float | None:
    status, text = worker.get("/metrics")
    assert status == 200
    values = [float(line.split()[-1]) for line in text.splitlines()
              if line.startswith(name + " ")]
    return values[0] if values else None


def index_health(worker: WorkerProcess) -> dict[str, Any]:
    status, body = worker.get("/health")
    assert status == 200, body  # the processing is fine throughout
    return body["results_index"]


@pytest.fixture
def running(kafka_bootstrap: str, tmp_path: Path) -> Iterator[tuple[WorkerProcess, Client, str, Path]]:
    app_id = unique("indexfault")
    worker = WorkerProcess(kafka_bootstrap, app_id, f"{app_id}.", tmp_path)
    fault = tmp_path / "disk-full"
    worker.env[FAULT_ENV] = str(fault)
    worker.start()
    try:
        yield worker, Client(kafka_bootstrap, f"{app_id}."), app_id, fault
    finally:
        worker.stop()


def test_a_failed_index_says_it_is_behind_and_catches_up_once_the_fault_clears(
        running: tuple[WorkerProcess, Client, str, Path]) -> None:
    worker, client, app_id, fault = running
    consumed = [client.names.stream(s) for s in "BHKT"] + [client.names.fanout]
    topic = client.names.all_results
    assert client.wait_status(client.command("REGISTER", "q1", QUERY))["status"] == "ACCEPTED"
    client.wait_consumed(app_id, consumed)
    client.send_events(events(0, 30))
    client.wait_consumed(app_id, consumed)

    def stored() -> list[tuple[int, int]]:
        return sorted((m.partition(), m.offset()) for m in client.read(topic))

    before = stored()
    assert len(before) > 10
    wait_for(lambda: served(worker) == (before, False), "the index to hold every result")
    assert index_health(worker)["status"] == "ok"
    assert worker.get("/health/results")[0] == 200
    assert metric(worker, "juggler_results_index_failures_total") == 0
    # a scrape may show the metrics up to half a second old (docs/metrics.md): each
    # metric below is waited for, not read once after another page moved

    fault.touch()  # the disk is full from now on
    client.send_events(events(30, 30))
    client.wait_consumed(app_id, consumed)
    after = stored()
    assert len(after) > len(before)
    wait_for(lambda: index_health(worker)["status"] == "failed", "/health to say it failed")
    assert "database or disk is full" in index_health(worker)["reason"]
    status, body = worker.get("/health/results")
    assert status == 503 and body["status"] == "failed", body
    results, behind = served(worker)
    assert behind, "a page claims to be caught up while the index failed"
    assert len(results) < len(after)
    wait_for(lambda: (metric(worker, "juggler_results_index_lag") or 0) > 0,
             "the lag metric to show the results not indexed")
    wait_for(lambda: (metric(worker, "juggler_results_index_failures_total") or 0) >= 1,
             "the failure to be counted")
    wait_for(lambda: metric(worker, "juggler_results_index_up") == 0, "the index down")

    fault.unlink()  # the space is back
    wait_for(lambda: served(worker) == (after, False), "the index to catch up", 90.0)
    wait_for(lambda: index_health(worker)["status"] == "ok", "/health to say it is ok")
    assert worker.get("/health/results")[0] == 200
    wait_for(lambda: metric(worker, "juggler_results_index_lag") == 0, "the lag metric at 0")
    assert metric(worker, "juggler_results_index_up") == 1
    assert (metric(worker, "juggler_results_index_failures_total") or 0) >= 1
    log = worker.logfile.read_text(errors="replace")
    assert "the results index failed" in log and "caught up again" in log
