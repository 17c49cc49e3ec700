"""Broker outages: the worker rides them out in its own process (docs/worker.md, "Faults").

Each test runs a broker of its own, on a persistent data directory and a fixed port, so
that it can be stopped mid-stream and started again where it was. The worker is never
restarted by anyone: its process must stay alive through the outage, say on `/health`
that it cannot commit (503, with the reason) and that it can again (200), log a bounded
number of lines about it, and end with exactly `juggler eval`'s results on everything
produced (the naive reference in file order, `in_process`), none of them twice.

Producers buffer what they send while the broker is down (librdkafka delivers it once
the broker is back, in order), so events keep arriving "during" the outage as they would
from a real producer.

The 60 s outage takes about two minutes; it runs in CI (the broker outage it guards
against took the worker down after 38 s before).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_kafka_order import QUERIES, _wait_results, all_results, all_streams, events, \
    in_process, register_all
from test_worker_harness import Client, WorkerProcess, diff, free_port, unique

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OUTAGE_LINES = 40
"""Lines the worker (and its results index) may log from the broker's stop until it is
back to 200, whatever the outage's length: one per broker per 30 s per process, plus
the failure and the recovery. Echoed, librdkafka's connection errors were ~40 a second."""


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Any]:
    from juggler.kafka.broker import LocalBroker

    own = LocalBroker(tmp_path / "kafka", free_port())
    own.start()
    try:
        yield own
    finally:
        own.stop()


@pytest.fixture
def deployment(broker: Any, tmp_path: Path) -> Iterator[tuple[Client, WorkerProcess, str]]:
    app = unique("outage-")
    client = Client(broker.bootstrap, f"{app}.")
    # small rounds: many transactions, so the broker stops with one in flight
    worker = WorkerProcess(broker.bootstrap, app, f"{app}.", tmp_path, partitions=2,
                           batch_max=20)
    try:
        worker.start()
        register_all(client, QUERIES)
        yield client, worker, app
    finally:
        worker.stop()


class HealthWatch(threading.Thread):
    """Asks the worker's `/health` every 0.3 s from the first outage on, and notes
    whether its process is alive, until `done` is set."""

    def __init__(self, worker: WorkerProcess) -> None:
        super().__init__(daemon=True)
        self.worker = worker
        self.seen: list[tuple[float, int, str | None]] = []
        """(time.monotonic(), status, reason) of each answer."""
        self.died = False
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.3):
            proc = self.worker.proc
            if proc is None or proc.poll() is not None:
                self.died = True
                return
            try:
                status, body = self.worker.get("/health")
            except OSError:
                continue
            reason = body.get("reason") if isinstance(body, dict) else None
            self.seen.append((time.monotonic(), status, reason))

    def reasons(self, since: float, until: float) -> list[str]:
        return [r for t, status, r in self.seen if since <= t < until and status == 503
                and r is not None]


def _outage(broker: Any, worker: WorkerProcess, seconds: float) -> dict[str, Any]:
    """Stop the broker, start it again `seconds` after it is down; returns when it is
    back, with the moment it stopped and the worker's log size then."""
    at, began = worker.logfile.stat().st_size, time.monotonic()
    broker.stop()
    time.sleep(seconds)  # the outage's length is the scenario; HealthWatch watches
    broker.start()
    return {"began": began, "log_at": at}


def _healthy_again(worker: WorkerProcess, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert worker.proc is not None and worker.proc.poll() is None, worker.log_tail()
        if worker.get("/health")[0] == 200:
            return
        time.sleep(0.2)
    raise AssertionError(f"/health not 200 again after {timeout} s\n{worker.log_tail()}")


def _log_since(worker: WorkerProcess, at: int) -> list[str]:
    with open(worker.logfile, "rb") as log:
        log.seek(at)
        return log.read().decode(errors="replace").splitlines()


def _ride_out(client: Client, worker: WorkerProcess, app: str, broker: Any,
              outages: list[float]) -> None:
    before = client.send_events(events(3_000, keys=24, seed=7))
    _wait_results(worker, 100)  # mid-stream: some results committed, most to come
    later = events(1_000, keys=24, seed=8, start=before[-1].ts + 1)
    during: list[Any] = []
    seen: list[dict[str, Any]] = []
    watch = HealthWatch(worker)
    watch.start()
    for i, seconds in enumerate(outages):
        if i == 0:  # a producer goes on sending during the outage: librdkafka buffers
            producing = threading.Thread(
                target=lambda: during.extend(client.send_events(later, timeout=seconds + 120)),
                daemon=True)
            producing.start()
        seen.append(_outage(broker, worker, seconds))
    producing.join(180)
    assert not producing.is_alive() and len(during) == len(later)
    _healthy_again(worker)
    back = time.monotonic()
    watch.done.set()
    watch.join(10)
    client.wait_consumed(app, all_streams(client), timeout=240)

    alive = worker.proc is not None and worker.proc.poll() is None
    assert alive and not watch.died and worker.starts == 1, \
        f"the worker was restarted or stopped\n{worker.log_tail()}"
    for outage, until in zip(seen, [o["began"] for o in seen[1:]] + [back]):
        reasons = watch.reasons(outage["began"], until)
        assert reasons, "/health never said 503 while the broker was down"
        assert all("cannot commit" in r for r in reasons), reasons
    lines = _log_since(worker, seen[0]["log_at"])
    refused = [line for line in lines if "Connection refused" in line]
    assert len(lines) <= OUTAGE_LINES * len(outages), "\n".join(lines)
    # per process (the worker's, its index's): a few lines per outage, one per 30 s
    assert len(refused) <= 2 * (4 * len(outages) + sum(outages) / 30), "\n".join(refused)

    want = in_process(client, before + during, QUERIES)
    got = all_results(client, list(QUERIES))
    assert got == want, diff(want, got)
    assert client.dead_letters() == []
    _, metrics = worker.get("/metrics")
    recoveries = [line for line in metrics.splitlines()
                  if line.startswith("juggler_recoveries_total ")]
    said = Counter(r.split(" since")[0] for r in watch.reasons(seen[0]["began"], back))
    print(f"{len(lines)} log lines over {len(outages)} outage(s), {len(refused)} about "
          f"refused connections; {recoveries}; {sum(want.values())} results; /health "
          f"said 503: {dict(said)}")


def test_a_60_s_broker_outage_mid_stream_loses_and_duplicates_nothing(
        deployment: tuple[Client, WorkerProcess, str], broker: Any) -> None:
    """The long one (about 2 minutes): longer than the transaction timeout (10 s), the
    producer's message timeout and the group's session timeout (6 s here)."""
    client, worker, app = deployment
    _ride_out(client, worker, app, broker, [60.0])


def test_two_5_s_broker_outages_in_a_row_lose_and_duplicate_nothing(
        deployment: tuple[Client, WorkerProcess, str], broker: Any) -> None:
    """The second outage begins as soon as the broker is back from the first: the worker
    may be recovering from one when the next comes."""
    client, worker, app = deployment
    _ride_out(client, worker, app, broker, [5.0, 5.0])
