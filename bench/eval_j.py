"""`juggler eval` on J and J-forms files, timed as a user runs it.

    python -m bench.eval_j [--n 100] [--events 100000] [--repeats 3]

Writes each variant's queries and first `--events` events as the JSON lines files
`juggler eval` reads, then times the CLI on them (a fresh process each time, reading,
evaluating and writing the results included), the variants alternated within each
repeat so a shared machine's drift hits both alike. Prints the median wall time, the
median CPU time of the process (user + system: what a busy shared machine inflates
least) and the results of each.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path

from bench.workloads import Workload, workload_j


def write(workload: Workload, count: int, directory: Path) -> tuple[Path, Path]:
    """The workload's queries and first `count` events as `juggler eval` input files."""
    directory.mkdir(parents=True)
    queries, events = directory / "queries.jsonl", directory / "events.jsonl"
    queries.write_text("".join(json.dumps({"id": qid, "text": text}) + "\n" for qid, text in workload.queries))
    with events.open("w") as f:
        for e in islice(workload.events(), count):
            f.write(json.dumps({"stream": e.stream, "key": e.key, "ts": e.ts, "data": e.data}) + "\n")
    return queries, events


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_eval(queries: Path, events: Path, out: Path) -> tuple[float, float, int]:
    """Wall and CPU seconds of one `juggler eval` run, and the results it wrote."""
    start, cpu = time.perf_counter(), _children_cpu()
    subprocess.run([sys.executable, "-m", "juggler.cli", "eval", "--queries", str(queries),
                    "--events", str(events), "--out", str(out)], check=True)
    seconds, cpu = time.perf_counter() - start, _children_cpu() - cpu
    with out.open() as f:
        return seconds, cpu, sum(1 for _ in f)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    variants = {"J": workload_j(args.n, 0.5), "J-forms": workload_j(args.n, 0.5, forms=True)}
    with tempfile.TemporaryDirectory(prefix="juggler-eval-j-") as tmp:
        files = {name: write(w, args.events, Path(tmp) / name) for name, w in variants.items()}
        runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in variants}
        for _ in range(args.repeats):
            for name, (queries, events) in files.items():
                runs[name].append(timed_eval(queries, events, Path(tmp) / name / "results.jsonl"))
    for name, measured in runs.items():
        seconds, cpu = [s for s, _, _ in measured], [c for _, c, _ in measured]
        print(f"{name}: n={args.n}, {args.events:,} events: median {statistics.median(seconds):.2f} s wall "
              f"(runs {', '.join(f'{s:.2f}' for s in seconds)}), {statistics.median(cpu):.2f} s CPU "
              f"(runs {', '.join(f'{c:.2f}' for c in cpu)}), {measured[0][2]:,} results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
