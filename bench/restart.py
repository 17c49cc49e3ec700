"""A worker restarted with many queries registered: start to ready.

    python -m bench.restart [--queries 10000] [--repeats 3]

One worker (4 partitions, the default setup) on a fresh topic prefix; workload S's n
selection queries (`bench.kafka_selection.selection_queries`) registered with
`submit_many` until LIVE everywhere; then the worker is stopped (SIGTERM) and started
again `--repeats` times. Each start is timed from the process start to `/health`
answering 200 (every assigned partition restored), beside the worker's own log line for
the restore of its partitions. Medians are printed; the numbers go in the `registration`
section of docs/benchmarks.md by hand. A local broker is started
unless `JUGGLER_BOOTSTRAP` names one.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from bench.kafka_selection import register, selection_queries
from juggler.kafka.broker import broker_or_env, free_port
from juggler.launcher import WorkerProcess

PARTITIONS = 4


def restarts(bootstrap: str, workdir: Path, n: int, repeats: int) -> list[tuple[float, float]]:
    """(start to ready, the worker's logged restore time) per restart."""
    prefix = f"restart-{uuid.uuid4().hex[:6]}."
    worker = WorkerProcess({"bootstrap": bootstrap, "topic_prefix": prefix,
                            "partitions": PARTITIONS, "app_id": prefix.rstrip("."),
                            "instance_id": "bench", "web_port": free_port(),
                            "web_host": "127.0.0.1"}, workdir / "worker.log")
    with worker:
        t0 = time.monotonic()
        register(bootstrap, prefix, selection_queries(n))
        print(f"{n:,} queries live in {time.monotonic() - t0:.1f} s")
    runs = []
    for _ in range(repeats):
        t0 = time.monotonic()
        worker.start(timeout=300)
        wall = time.monotonic() - t0
        worker.stop()
        logged = re.findall(r"restored partitions \[[0-9, ]+\] in ([0-9.]+)s",
                            worker.logfile.read_text())
        runs.append((wall, float(logged[-1])))
        print(f"  ready in {wall:.2f} s (restore {logged[-1]} s)")
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with broker_or_env() as bootstrap, tempfile.TemporaryDirectory() as tmp:
        runs = restarts(bootstrap, Path(tmp), args.queries, args.repeats)
    print(f"restart with {args.queries:,} queries, {PARTITIONS} partitions: start to ready "
          f"median {statistics.median(w for w, _ in runs):.2f} s, restore median "
          f"{statistics.median(r for _, r in runs):.2f} s (runs: "
          f"{', '.join(f'{w:.2f}' for w, _ in runs)})")


if __name__ == "__main__":
    main()
