"""The results API under concurrent readers: p50 and p99 per request.

    python -m bench.results_api [--readers 50] [--repeats 5] [--limit 50] [--keep-alive]
        [--processes 1]

One worker (4 partitions) on a fresh topic prefix; the five queries `B.temp > t` of
`tests/integration/test_many_queries.py` and its 600 events (a few hundred results per
query on the shared topic), waited for until the index serves them all. Then, per
repeat, `--readers` readers each page one query from the beginning to its end with
`GET /queries/<id>/results?limit=N&after=<cursor>` (a new connection per request, as
`urllib` does, or one per reader with `--keep-alive`), all starting together: threads
of this process, as the test's readers, or spread over `--processes` processes, so
that the readers' own GIL is not what they wait for. Every request's latency is
recorded. Printed: p50 and p99 per repeat, their medians over the repeats, and the CPU
per request of the worker process and of the readers. A local broker is started unless
`JUGGLER_BOOTSTRAP` names one. Numbers go in the `resultsapi` section of
docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import resource
import statistics
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from juggler.kafka.broker import broker_or_env, free_port
from juggler.launcher import WorkerProcess

PARTITIONS = 4
THRESHOLDS = {"hot10": 10, "hot30": 30, "hot50": 50, "hot70": 70, "hot85": 85}
EVENTS = 600


class Reader:
    """One reader's HTTP client: a new connection per request, as `urllib` does (and
    the test), or with `keep_alive` one connection for all its requests, as an HTTP
    client's session does."""

    def __init__(self, base: str, keep_alive: bool) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.address = (host, int(port))
        self.keep_alive = keep_alive
        self.connection: http.client.HTTPConnection | None = None

    def get(self, path: str) -> tuple[float, dict[str, Any]]:
        """(seconds, body) of one request; raises on a status other than 200."""
        started = time.perf_counter()
        if self.keep_alive:
            if self.connection is None:
                self.connection = http.client.HTTPConnection(*self.address, timeout=30)
            self.connection.request("GET", path)
            response = self.connection.getresponse()
            status, body = response.status, json.loads(response.read())
        else:
            with urllib.request.urlopen(f"http://{self.address[0]}:{self.address[1]}{path}",
                                        timeout=30) as response:
                status, body = response.status, json.loads(response.read())
        if status != 200:
            raise RuntimeError(f"{path}: HTTP {status} {body}")
        return time.perf_counter() - started, body

    def page_through(self, query_id: str, limit: int) -> tuple[list[float], int]:
        """Every page of a query, until one is empty: (latencies, results)."""
        latencies, results, cursor = [], 0, None
        while True:
            took, body = self.get(f"/queries/{query_id}/results?limit={limit}"
                                  + (f"&after={cursor}" if cursor else ""))
            latencies.append(took)
            if not body["results"]:
                if self.connection is not None:
                    self.connection.close()
                return latencies, results
            results += len(body["results"])
            cursor = body["next"]


def load(base: str, readers: int, limit: int, keep_alive: bool = False,
         processes: int = 1) -> list[float]:
    """One round: `readers` paging together, as threads of this process or spread over
    `processes` processes (each with its own GIL, as separate clients are); every
    request's latency."""
    if processes == 1:
        return _threads(base, range(readers), limit, keep_alive)
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    go = context.Barrier(processes)

    def run(ids: range) -> None:
        go.wait(30)
        results.put(_threads(base, ids, limit, keep_alive))

    children = [context.Process(target=run, args=(range(i, readers, processes),))
                for i in range(processes)]
    for child in children:
        child.start()
    latencies = [t for _ in children for t in results.get(timeout=120)]
    for child in children:
        child.join()
        if child.exitcode != 0:
            raise RuntimeError(f"a reader process exited with {child.exitcode}")
    return latencies


def _threads(base: str, ids: range, limit: int, keep_alive: bool) -> list[float]:
    """Readers `ids` as threads of this process, starting together."""
    latencies: list[float] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    go = threading.Barrier(len(ids))

    def reader(n: int) -> None:
        try:
            go.wait(30)
            mine, _ = Reader(base, keep_alive).page_through(
                list(THRESHOLDS)[n % len(THRESHOLDS)], limit)
        except BaseException as exc:  # reported after the round
            failures.append(exc)
            return
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=reader, args=(n,)) for n in ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return latencies


def client_cpu() -> float:
    """CPU seconds of this process and of its reader processes that ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), \
        resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def cpu_seconds(pid: int) -> float:
    """User and system CPU time so far of a process and its live children (the
    worker's HTTP port and results index are processes of their own; Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    children = [int(c) for task in Path(f"/proc/{pid}/task").iterdir()
                for c in (task / "children").read_text().split()]
    return own + sum(cpu_seconds(child) for child in children)


def prepare(bootstrap: str, prefix: str, worker: WorkerProcess) -> None:
    """The queries registered, the events produced, and every result served."""
    from juggler.codec.avro import Codec
    from juggler.client.control import submit_many
    from juggler.kafka.producer import EventProducer
    from juggler.wire.commands import RegisterCommand

    submit_many(bootstrap, [RegisterCommand(q, f"SELECT * FROM B WHERE B.temp > {t}")
                            for q, t in THRESHOLDS.items()], prefix=prefix, timeout=120)
    producer = EventProducer(bootstrap, Codec(), prefix=prefix)
    temps = [(i * 37) % 100 for i in range(EVENTS)]
    for i, temp in enumerate(temps):
        producer.send("B", f"patient-{i % 9}", 2_000_000 + 10 * i,
                      {"temp": float(temp), "pressure": 1.0, "alert": False})
    producer.flush(60)
    deadline = time.monotonic() + 120
    for qid, t in THRESHOLDS.items():
        expected = sum(1 for temp in temps if temp > t)
        while Reader(worker.url, keep_alive=False).page_through(qid, 1000)[1] < expected:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{qid}: not every result served after 120 s")
            time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--readers", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--keep-alive", action="store_true",
                        help="one connection per reader instead of one per request")
    parser.add_argument("--processes", type=int, default=1,
                        help="reader processes the readers are spread over")
    args = parser.parse_args()
    with broker_or_env() as bootstrap, tempfile.TemporaryDirectory() as tmp:
        prefix = f"api-{uuid.uuid4().hex[:6]}."
        worker = WorkerProcess({"bootstrap": bootstrap, "topic_prefix": prefix,
                                "partitions": PARTITIONS, "app_id": prefix.rstrip("."),
                                "web_port": free_port(), "web_host": "127.0.0.1",
                                "loglevel": "warning"}, Path(tmp) / "worker.log")
        with worker:
            prepare(bootstrap, prefix, worker)
            assert worker.proc is not None
            cpu = cpu_seconds(worker.proc.pid), client_cpu()
            p50s, p99s, requests = [], [], 0
            for _ in range(args.repeats):
                latencies = load(worker.url, args.readers, args.limit, args.keep_alive,
                                 args.processes)
                requests += len(latencies)
                p50s.append(1000 * statistics.median(latencies))
                p99s.append(1000 * percentile(latencies, 99))
                print(f"  {len(latencies)} requests: p50 {p50s[-1]:.1f} ms, "
                      f"p99 {p99s[-1]:.1f} ms", flush=True)
            worker_cpu = cpu_seconds(worker.proc.pid) - cpu[0]
            readers_cpu = client_cpu() - cpu[1]
    print(f"{args.readers} readers in {args.processes} process(es), limit {args.limit}, "
          f"{'keep-alive' if args.keep_alive else 'a connection per request'}, "
          f"{args.repeats} repeats: median p50 "
          f"{statistics.median(p50s):.1f} ms, median p99 {statistics.median(p99s):.1f} ms "
          f"(p99s: {', '.join(f'{p:.0f}' for p in p99s)}); CPU per request: worker "
          f"(its processes) "
          f"{1000 * worker_cpu / requests:.2f} ms, readers {1000 * readers_cpu / requests:.2f} ms")


if __name__ == "__main__":
    main()
