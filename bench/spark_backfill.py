"""How fast `juggler spark backfill` runs many queries: one shared job against one
Spark SQL job per query and against `juggler eval`.

    python -m bench.spark_backfill [--events 100000] [--queries 10,100,1000]
        [--sample 3] [--repeats 1] [--out -]

Workload J (docs/workloads.md) as `juggler eval` files (the B and H events get the
`alert` column their Avro schemas have), imported into a Parquet archive. For each
query count, in one run and a warm session:
- the shared job in local[1] and in local[2] (a session of each, the same job);
- the per-query reference jobs (`--reference`) for `--sample` queries in local[1],
  extrapolated to all the queries by the sample's mean;
- `juggler eval` (one core, the native operator), in-process.
Times are whole commands as a user runs them (`--out FILE`) less the process's start
(Python's, and Spark's session), the median of the repeats; rates are events per
second.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from itertools import islice
from pathlib import Path

from bench.report_sections import publish
from bench.workloads import workload_j
from juggler.offline import evaluate


def write_workload(directory: Path, queries: int, events: int) -> tuple[Path, Path]:
    """Workload J's first `queries` queries and `events` events as eval's files."""
    workload = workload_j(queries)
    queries_file, events_file = directory / "queries.jsonl", directory / "events.jsonl"
    queries_file.write_text("".join(json.dumps({"id": i, "text": t}) + "\n"
                                    for i, t in workload.queries))
    with open(events_file, "w", encoding="utf-8") as handle:
        for event in islice(workload.events(), events):
            data = dict(event.data) | ({"alert": False} if event.stream in "BH" else {})
            handle.write(json.dumps({"stream": event.stream, "key": event.key,
                                     "ts": event.ts, "data": data}) + "\n")
    return queries_file, events_file


def juggler(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "juggler.cli", *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def spark_job(master: str, *args: str) -> float:
    """Seconds of a `juggler spark` command at `master`, in a fresh process (a master
    is fixed per process) but without that process's session start: a fixed cost of
    seconds that a user pays once per command either way."""
    env = {**os.environ, "JUGGLER_SPARK_MASTER": master}
    process = subprocess.run([sys.executable, "-m", "bench.spark_backfill", "--job", *args],
                             env=env, stdout=subprocess.PIPE, text=True, check=True)
    return float(process.stdout.strip().splitlines()[-1])


def run_job(args: list[str]) -> None:
    """In the child: start the session, then time the command alone (printed last)."""
    from click.testing import CliRunner

    from juggler.spark.cli import spark
    from juggler.spark.session import spark_session

    spark_session(python_work="--reference" not in args)  # as the command starts it
    started = time.perf_counter()
    result = CliRunner().invoke(spark, args, catch_exceptions=False)
    elapsed = time.perf_counter() - started
    if result.exit_code != 0:
        print(result.output, result.stderr, file=sys.stderr)
        sys.exit(1)
    print(elapsed)


def timed(job: Callable[[], object]) -> float:
    started = time.perf_counter()
    job()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--queries", default="10,100,1000")
    parser.add_argument("--sample", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", default="-", help="report file, or - (print only)")
    args = parser.parse_args()
    if args.job is not None:
        run_job(args.job)
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="spark-backfill-") as tmp:
        for count in (int(n) for n in args.queries.split(",")):
            work = Path(tmp) / str(count)
            work.mkdir()
            queries, events = write_workload(work, count, args.events)
            archive = work / "archive"
            juggler("spark", "archive", "--events", str(events), "--archive", str(archive))
            common = ["backfill", "--archive", str(archive), "--out", str(work / "out.jsonl")]
            shared = {master: statistics.median(
                spark_job(master, *common, "--queries", str(queries))
                for _ in range(args.repeats)) for master in ("local[1]", "local[2]")}
            texts = [json.loads(line) for line in queries.read_text().splitlines()]
            sample = [spark_job("local[1]", *common, "--reference", "--query-id", q["id"],
                                "--text", q["text"]) for q in texts[:args.sample]]
            per_query = statistics.mean(sample) * count
            evaluated = statistics.median(timed(lambda: evaluate(
                queries, events, work / "eval.jsonl")) for _ in range(args.repeats))
            results = sum(1 for _ in open(work / "eval.jsonl"))
            rows.append((count, results, shared, per_query, evaluated))
            print(f"{count} queries: {shared} per-query {per_query:.1f}s eval "
                  f"{evaluated:.1f}s", file=sys.stderr, flush=True)
    table = [f"Workload J, {args.events:,} events (archive), {date.today()}, median of "
             f"{args.repeats}; per-query jobs extrapolated from {args.sample} "
             f"(local[1]); rates in events/s",
             "",
             "| queries | results | shared local[1] | shared local[2] | per-query jobs "
             "| eval (1 core) | shared vs per-query | shared vs eval | local[2] vs local[1] |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for count, results, shared, per_query, evaluated in rows:
        one, two = shared["local[1]"], shared["local[2]"]
        table.append(
            f"| {count:,} | {results:,} | {args.events / one:,.0f} ({one:.1f}s) "
            f"| {args.events / two:,.0f} ({two:.1f}s) | {args.events / per_query:,.0f} "
            f"({per_query:,.0f}s) | {args.events / evaluated:,.0f} ({evaluated:.1f}s) "
            f"| {per_query / one:,.1f}x | {evaluated / one:.2f}x | {one / two:.2f}x |")
    publish("\n".join(table), args.out, "sparkbackfill")


if __name__ == "__main__":
    main()
