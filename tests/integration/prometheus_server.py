"""A real Prometheus server for tests (Debian's `prometheus`, installed by `bin/setup`):
`PrometheusServer` starts one on a free port of 127.0.0.1 with a temporary config and
TSDB directory, scraping given targets every second, and queries it over its HTTP API.

    prom = PrometheusServer(tmp_path, ["127.0.0.1:6066"]).start()
    prom.wait_scraped_after(time.time())
    prom.values("sum by (stream) (juggler_events_in_total)", "stream")  # {"B": 12.0, ...}
    prom.stop()

The session fixture `scraped_worker` is what the metrics and dashboard tests share: a
real worker, driven through commands, good, bad and late events, and a Prometheus that
scraped it all along; once on each runtime (`juggler worker` and `--runtime faust`,
which export the same metric names from the same `WorkerMetrics`). A test module gets it with `pytest_plugins = ["prometheus_server"]`
(a fixture imported by name would be a second fixture, started a second time).

No tests here.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from test_worker import LATENESS, Q1, Q2, Q3, generate
from test_worker_harness import Client, WorkerProcess, free_port, unique

JOB = "juggler"
SCRAPE_INTERVAL = "1s"


class PrometheusError(RuntimeError):
    """Prometheus answered a query with an error (bad expression, bad range...)."""


class PrometheusServer:
    def __init__(self, workdir: Path, targets: list[str]) -> None:
        self.workdir = workdir
        self.targets = targets
        self.port = free_port()
        self.logfile = workdir / "prometheus.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> PrometheusServer:
        binary = shutil.which("prometheus")
        if binary is None:
            raise FileNotFoundError("prometheus not found: run bin/setup (Debian's package)")
        config = self.workdir / "prometheus.yml"
        # JSON is YAML: no YAML writer needed
        config.write_text(json.dumps({
            "global": {"scrape_interval": SCRAPE_INTERVAL, "scrape_timeout": SCRAPE_INTERVAL,
                       "evaluation_interval": SCRAPE_INTERVAL},
            "scrape_configs": [{"job_name": JOB, "metrics_path": "/metrics",
                                "static_configs": [{"targets": self.targets}]}],
        }, indent=2))
        log = open(self.logfile, "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={self.workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited with {self.proc.returncode}\n"
                                     f"{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"prometheus not ready after {timeout}s\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def api(self, path: str, **params: Any) -> Any:
        """`data` of a Prometheus HTTP API answer; PrometheusError when it failed."""
        query = urllib.parse.urlencode({k: str(v) for k, v in params.items()})
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}",
                                        timeout=30) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            answer = json.loads(exc.read() or b"{}")
        if answer.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {answer.get('errorType')}: "
                                  f"{answer.get('error')}")
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector of `expr` now."""
        data = self.api("query", query=expr)
        if data["resultType"] != "vector":
            raise PrometheusError(f"{expr}: a {data['resultType']}, not an instant vector")
        return data["result"]

    def query_range(self, expr: str, start: float, end: float,
                    step: float = 1.0) -> list[dict[str, Any]]:
        """The range query Grafana's time series panels send: a matrix of series."""
        return self.api("query_range", query=expr, start=start, end=end, step=step)["result"]

    def values(self, expr: str, by: str) -> dict[str, float]:
        """`expr`'s instant vector as {value of label `by`: sample value}."""
        return {s["metric"].get(by, ""): float(s["value"][1]) for s in self.query(expr)}

    def scalar(self, expr: str) -> float:
        """The single sample of `expr` (NaN when the vector is empty)."""
        result = self.query(expr)
        if len(result) > 1:
            raise PrometheusError(f"{expr}: {len(result)} series, expected one")
        return float(result[0]["value"][1]) if result else math.nan

    def wait_scraped_after(self, moment: float, timeout: float = 30.0) -> None:
        """Until every target was scraped successfully after Unix time `moment`, so
        instant queries see what the targets exposed since."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            targets = self.api("targets", state="active")["activeTargets"]
            if targets and all(t["health"] == "up" and _scraped_at(t) > moment for t in targets):
                return
            time.sleep(0.2)
        raise AssertionError(f"no successful scrape after {moment} within {timeout}s: "
                             f"{self.api('targets', state='active')}")

    def log_tail(self, lines: int = 40) -> str:
        if not self.logfile.exists():
            return "(no log)"
        return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])


def _scraped_at(target: dict[str, Any]) -> float:
    return datetime.fromisoformat(target["lastScrape"]).timestamp()


@dataclass
class ScrapedWorker:
    """What the scenario did, for the tests to hold the scraped metrics against."""

    worker: WorkerProcess
    client: Client
    prometheus: PrometheusServer
    produced: Counter[str]
    """Records produced per stream, bad and late ones included."""
    registered: list[str]
    """Queries registered at the end."""
    queried: list[str]
    """Every query that was registered at some point."""
    started: float
    """Unix time before the first command."""
    runtime: str
    """The worker's runtime: "worker" or "faust"."""


RUNTIMES = ["worker", "faust"]


@pytest.fixture(scope="session", params=RUNTIMES)
def scraped_worker(request: pytest.FixtureRequest, kafka_bootstrap: str,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScrapedWorker]:
    """A worker with three queries (one deregistered later, one command rejected), 600
    events over two partitions, an undecodable record and a late event, scraped every
    second by a real Prometheus from before the first command; on each runtime."""
    runtime = request.param
    app_id = unique("m")
    prefix = f"{app_id}."
    workdir = tmp_path_factory.mktemp(f"scraped-{runtime}")
    worker = WorkerProcess(kafka_bootstrap, app_id, prefix, workdir,
                           allowed_lateness=LATENESS, batch_max=100, runtime=runtime)
    prometheus = PrometheusServer(workdir, [f"127.0.0.1:{worker.port}"])
    client = Client(kafka_bootstrap, prefix)
    client.watch = worker.revive
    try:
        worker.start()
        prometheus.start()
        started = time.time()
        consumed = [client.names.stream(s) for s in "BHKT"] + [client.names.fanout]
        for qid, text in (("q1", Q1), ("q2", Q2), ("q3", Q3)):
            assert client.wait_status(client.command("REGISTER", qid, text))["status"] == \
                "ACCEPTED"
        assert client.wait_status(client.command("REGISTER", "q1", Q3))["status"] == "REJECTED"
        client.wait_consumed(app_id, consumed)
        prometheus.wait_scraped_after(time.time())  # each query's series before its results
        rng = random.Random(11)
        events = client.send_events(generate(rng, 400, 1_000_000))
        client.wait_consumed(app_id, consumed)
        assert client.wait_status(client.command("DEREGISTER", "q3"))["status"] == "ACCEPTED"
        events += client.send_events(generate(rng, 200, 2_000_000))
        # the bad and the late record come last: a stream partition is taken in offset
        # order, so events after a record at 10,000,000 s would wait behind it while the
        # other streams' go on, and be late for their keys with lateness 0
        b_topic = client.names.stream("B")
        client.send_raw(b_topic, b"patient-0", b"\x00garbage")
        late = {"pressure": 1.0, "temp": 1.0, "alert": False}
        events += client.send_events([("B", "late-key", 10_000_000, late)])
        client.send_raw(b_topic, b"late-key",
                        client.codec.encode("B", {"ts": 10_000_000 - LATENESS - 1, **late}))
        client.wait_consumed(app_id, consumed)
        prometheus.wait_scraped_after(time.time())
        produced = Counter(e.stream for e in events)
        produced["B"] += 2  # the undecodable record and the late one
        yield ScrapedWorker(worker, client, prometheus, produced, ["q1", "q2"],
                            ["q1", "q2", "q3"], started, runtime)
    finally:
        prometheus.stop()
        worker.stop()
