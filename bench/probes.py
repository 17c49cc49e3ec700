"""How fast the worker's small pages answer, idle and busy: what a Kubernetes probe or a
Prometheus scrape meets.

    python -m bench.probes [--requests 200] [--events 100000] [--out docs/benchmarks.md]

Starts a fresh local broker and one worker with workload K's 100 queries (J, n = 100,
50% overlap) and asks `/health`, `/queries`, `/progress` and `/metrics` in turn, one
request at a time on a new connection each (as a probe does), `--requests` times each:

- idle: the queries registered, nothing to process;
- busy: while the worker processes a backlog of `--events` events produced in one
  transaction (the requests start once it is readable and stop when it is done, so
  every one of them met a worker at work).

Prints p50, p99 and the maximum per page and state (medians are of single requests;
the machine is shared, so the maximum says more about it than about the worker), and
writes them into the `probes` section of the report. Goal: p99 under 50 ms everywhere.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
import urllib.request
from itertools import islice
from pathlib import Path
from typing import Any

from bench.kafka_load import (
    APP_ID,
    PARTITIONS,
    _free_port,
    _machine,
    _produce,
    _register,
    _wait_committed,
    _wait_registered,
    _with_alerts,
    log,
)
from bench.report_sections import publish
from bench.workloads import workload_j

PAGES = ("/health", "/queries", "/progress", "/metrics")
GOAL_MS = 50.0


def ask(url: str) -> float:
    """Seconds for one GET on a new connection, body read."""
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as response:
        response.read()
    return time.perf_counter() - t0


def sample(base: str, requests: int, until: threading.Event | None = None
           ) -> dict[str, list[float]]:
    """Each page asked `requests` times in turn (or until `until` is set), in ms."""
    times: dict[str, list[float]] = {page: [] for page in PAGES}
    for _ in range(requests):
        if until is not None and until.is_set():
            break
        for page in PAGES:
            times[page].append(ask(base + page) * 1000)
    return times


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


def measure(bootstrap: str, workdir: Path, requests: int, events: int) -> dict[str, Any]:
    from juggler.launcher import WorkerProcess

    workload = workload_j(100, 0.5)
    backlog = list(islice(_with_alerts(workload.events()), events))
    prefix, group = "probes.", f"{APP_ID}-probes"
    worker = WorkerProcess({"bootstrap": bootstrap, "app_id": group,
                            "web_port": _free_port(), "web_host": "127.0.0.1",
                            "loglevel": "warning", "topic_prefix": prefix,
                            "partitions": PARTITIONS}, workdir / "worker-probes.log")
    with worker:
        _register(bootstrap, prefix, workload.queries)
        _wait_registered(worker, len(workload.queries))
        log(f"probes: idle, {requests} requests per page")
        idle = sample(worker.url, requests)
        done = threading.Event()
        busy: dict[str, list[float]] = {}
        last, _ = _produce(bootstrap, prefix, backlog)
        asking = threading.Thread(target=lambda: busy.update(sample(worker.url, requests, done)))
        asking.start()
        t0 = time.perf_counter()
        _wait_committed(bootstrap, group, last)
        done.set()
        asking.join()
        log(f"probes: busy for {time.perf_counter() - t0:.1f} s, "
            f"{len(busy['/health'])} requests per page")
    return {"idle": idle, "busy": busy}


def render(rows: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [f"`python -m bench.probes --requests {args.requests} --events {args.events}` on "
             f"{_machine()}: one worker with workload K's 100 queries; each page asked "
             "in turn on a new connection, one request at a time. Milliseconds.", "",
             "| page | state | requests | p50 | p99 | max |", "|---|---|---|---|---|---|"]
    worst = 0.0
    for state in ("idle", "busy"):
        for page in PAGES:
            values = rows[state][page]
            p99 = quantile(values, 0.99)
            worst = max(worst, p99)
            lines.append(f"| `{page}` | {state} | {len(values)} | {quantile(values, 0.5):.1f} "
                         f"| {p99:.1f} | {max(values, default=float('nan')):.1f} |")
    verdict = "met" if worst < GOAL_MS else "**not met**"
    lines += ["", f"Goal: p99 under {GOAL_MS:.0f} ms on every page, idle and busy: {verdict} "
                  f"(worst p99 {worst:.1f} ms)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.probes",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="per page and state")
    parser.add_argument("--events", type=int, default=100_000, help="the busy state's backlog")
    parser.add_argument("--out", default="docs/benchmarks.md", help="report ('-': none)")
    args = parser.parse_args(argv)

    from juggler.kafka.broker import LocalBroker

    with tempfile.TemporaryDirectory(prefix="juggler-bench-probes-") as tmp, \
            LocalBroker(Path(tmp) / "kafka") as broker:
        rows = measure(broker.bootstrap, Path(tmp), args.requests, args.events)
    publish(render(rows, args), args.out, "probes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
