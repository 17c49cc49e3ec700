"""The worker's results index against a real broker: once a results partition's log
start moves (retention, here `delete_records`), `GET /queries/<id>/results` stops
serving what is below it and an old cursor continues from the first result kept; and
the index's directory goes when the worker stops, and when it is killed.

The worker trims every 0.5 s (`results_trim_interval`) instead of every minute, and
keeps its temporary files in the test's own directory (TMPDIR), so what it leaves
behind can be seen."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_worker_harness import Client, WorkerProcess, unique

pytestmark = pytest.mark.integration

QUERY = "SELECT * FROM B, H WHERE B.temp > H.vib MAXWINDOW 5 sec"


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.fixture
def running(kafka_bootstrap: str, tmp_path: Path) -> Iterator[tuple[WorkerProcess, Client, str]]:
    app_id = unique("trim")
    worker = WorkerProcess(kafka_bootstrap, app_id, f"{app_id}.", tmp_path,
                           results_trim_interval=0.5)
    (tmp_path / "tmp").mkdir()
    worker.env["TMPDIR"] = str(tmp_path / "tmp")
    worker.start()
    try:
        yield worker, Client(kafka_bootstrap, f"{app_id}."), app_id
    finally:
        worker.stop()


def index_dirs(worker: WorkerProcess) -> list[Path]:
    return sorted(Path(worker.env["TMPDIR"]).glob("juggler-results-*"))


def served(worker: WorkerProcess, after: str = "") -> list[tuple[int, int]]:
    """The (partition, offset) of every result of the query the worker serves."""
    status, body = worker.get(f"/queries/q1/results?limit=10000&after={after}")
    assert status == 200, body
    return [(r["position"]["partition"], r["position"]["offset"]) for r in body["results"]]


def test_results_below_a_moved_log_start_are_no_longer_served(running) -> None:
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    from juggler.kafka.client_config import client_config
    from juggler.serving.results_api import encode_cursor

    worker, client, app_id = running
    consumed = [client.names.stream(s) for s in "BHKT"] + [client.names.fanout]
    assert client.wait_status(client.command("REGISTER", "q1", QUERY))["status"] == "ACCEPTED"
    client.wait_consumed(app_id, consumed)
    events: list[tuple[str, str, int, dict[str, Any]]] = []
    for i in range(40):  # every B joins the H events of its key before it
        key, ts = f"patient-{i % 6}", 1_000_000 + 100 * i
        events += [("H", key, ts, {"beatrate": 70.0, "vib": 1.0, "alert": False}),
                   ("B", key, ts + 50, {"pressure": 1.0, "temp": 50.0, "alert": False})]
    client.send_events(events)
    client.wait_consumed(app_id, consumed)

    topic = client.names.all_results
    stored = sorted((m.partition(), m.offset()) for m in client.read(topic))
    assert len(stored) > 20
    wait_for(lambda: served(worker) == stored, "the index to hold every result")

    partition = max({p for p, _ in stored}, key=lambda p: sum(q == p for q, _ in stored))
    offsets = [o for p, o in stored if p == partition]
    cut = offsets[len(offsets) // 2]
    admin = AdminClient(client_config(client.bootstrap, {"log_level": 0}))
    deleted, = admin.delete_records([TopicPartition(topic, partition, cut)]).values()
    assert deleted.result().low_watermark == cut

    kept = [(p, o) for p, o in stored if p != partition or o >= cut]
    wait_for(lambda: served(worker) == kept, "the index to drop what Kafka deleted")
    # a client's cursor from before the deletion continues from the first result kept
    old = encode_cursor({p: 0 for p, _ in stored} | {partition: offsets[1]})
    assert served(worker, old) == kept


def test_the_index_directory_goes_when_the_worker_stops_or_is_killed(running) -> None:
    worker, _, _ = running
    directory, = index_dirs(worker)
    assert (directory / "results.db").exists()
    worker.stop()  # SIGTERM: the worker's own shutdown removes it before it exits
    assert index_dirs(worker) == []

    worker.start()
    assert len(index_dirs(worker)) == 1
    worker.kill()  # SIGKILL: the indexing process sees its worker gone and removes it
    wait_for(lambda: index_dirs(worker) == [], "the indexing process to remove the index")
