"""Workload S through the worker with 100 and 10,000 queries registered.

    python -m bench.kafka_selection [--queries 100,10000] [--events 50000] [--keys 8] [--out docs/benchmarks.md]

Workload S has one stream S with five columns a..e; the service's schemas have no such
stream, so S is put on stream B, whose two numeric columns are `pressure` and `temp`
(uniform in [0, 100), as S's columns). Each query keeps S's shape: 1 or 2 range
predicates (`>`, `>=`, `<`, `<=`) on distinct columns, with S's own constants for a
k-predicate query (`bench.workloads._s_constants`), so every query matches about 0.1%
of the events whatever k is (3-predicate queries are impossible with two columns).
Expected results per event: about n / 1000.

For each n, on a fresh local broker (`broker_or_env`): one worker (`juggler worker`,
a child process, 4 partitions per topic as the default setup) with its own topic
prefix; the n queries registered with `submit_many` (waits until LIVE in every
partition); then a backlog of `--events` events on a few keys is produced to stream B
in one transaction (`kafka_load._produce`: the worker reads read_committed, so the
backlog becomes readable at once), and the worker's rate is the backlog over the time
from that commit to its group's committed offsets covering the last event
(`GroupProgress`). Results per event come from the worker's `juggler_results_out`
counter. The ceiling, in the same run, is confluent-kafka consuming the same topic and
decoding every record with the worker's codec (`kafka_load.ceiling`); the bare engine
on the same queries and events, in this process and called as the worker calls it
(`kafka_load.bare_engine`), is given for comparison.

Prints the table and writes it into the `selection` section of the report (see
`bench.report_sections`).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import worker_profile
from bench.kafka_load import (_free_port, _machine, _metric, bare_engine, ceiling, log,
                               timed_backlog)
from bench.report_sections import publish
from bench.workloads import s_queries

APP_ID = "juggler-bench-sel"
PARTITIONS = 4
COLUMNS = ("pressure", "temp")
"""S's columns, on stream B: a query draws 1 or 2 of them."""
ENGINE_EVENTS = 10_000
"""Events for the in-process bare engine (enough for a steady rate)."""


def selection_queries(n: int, seed: int = 1) -> list[tuple[str, str]]:
    """`workload_s(n)`'s generator on B's two columns (S's constants of `a` and `b`)."""
    return s_queries(n, seed, "B", COLUMNS, ("a", "b"))


def selection_events(count: int, keys: int, seed: int = 1) -> list[Any]:
    """`count` B events in timestamp order, round robin over `keys` keys."""
    from juggler.engine.events import Event

    r = random.Random(f"S-events-{seed}").random
    return [Event("B", f"k{i % keys}", i, {"pressure": r() * 100, "temp": r() * 100,
                                          "alert": False}, i)
            for i in range(count)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_selection",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", default="100,10000", help="comma-separated n")
    parser.add_argument("--events", type=int, default=50_000, help="backlog per n")
    parser.add_argument("--keys", type=int, default=8)
    parser.add_argument("--out", default="docs/benchmarks.md", help="report ('-': none)")
    args = parser.parse_args(argv)

    from juggler.kafka.broker import broker_or_env

    sizes = [int(x) for x in args.queries.split(",")]
    events = selection_events(args.events, args.keys)
    rows = []
    with tempfile.TemporaryDirectory(prefix="juggler-bench-sel-") as tmp:
        with broker_or_env(data_dir=Path(tmp) / "kafka") as bootstrap:
            for n in sizes:
                rows.append(measure(bootstrap, Path(tmp), n, events))
    publish(render(rows, args), args.out, "selection")
    return 0


def measure(bootstrap: str, workdir: Path, n: int, events: list[Any]) -> dict[str, Any]:
    from juggler.launcher import WorkerProcess

    queries = selection_queries(n)
    prefix = f"sel{n}-{int(time.time())}."
    log(f"S on B: n={n}, {len(events):,} events")
    worker = WorkerProcess({"bootstrap": bootstrap, "app_id": f"{APP_ID}-{n}-{prefix}",
                            "web_port": _free_port(), "web_host": "127.0.0.1",
                            "loglevel": "warning", "topic_prefix": prefix,
                            "partitions": PARTITIONS},
                           workdir / f"worker-{n}.log")
    with worker:
        t = time.perf_counter()
        register(bootstrap, prefix, queries)
        registered = time.perf_counter() - t
        log(f"  {n:,} queries live in {registered:.1f} s")
        t = time.perf_counter()
        t0, elapsed, profile = timed_backlog(bootstrap, worker, prefix,
                                             f"{APP_ID}-{n}-{prefix}", events)
        produced = t0 - t
        results = _metric(worker, "juggler_results_out_total")
        late = _metric(worker, "juggler_late_events_total")
    rate = len(events) / elapsed
    log(f"  worker {rate:,.0f} ev/s ({elapsed:.1f} s, produced in {produced:.1f} s), "
        f"{results / len(events):.3g} results/event, {late:.0f} late")
    top = ceiling(bootstrap, prefix, len(events), ("B",), PARTITIONS)
    log(f"  ceiling {top:,.0f} ev/s: the worker at {rate / top:.3g} of it")
    engine, engine_results = bare_engine(queries, events[:ENGINE_EVENTS])
    log(f"  bare engine {engine:,.0f} ev/s, {engine_results:.3g} results/event")
    return {"n": n, "events": len(events), "worker": rate, "ceiling": top, "seconds": elapsed,
            "produced": produced, "results": results / len(events), "late": late,
            "registered": registered, "engine": engine, "engine_results": engine_results,
            "profile": profile}


def register(bootstrap: str, prefix: str, queries: list[tuple[str, str]]) -> None:
    """All at once; returns when every one is accepted and LIVE in every partition."""
    from juggler.client.control import submit_many
    from juggler.wire.commands import RegisterCommand

    done = submit_many(bootstrap, [RegisterCommand(q, text) for q, text in queries],
                       prefix=prefix, timeout=300.0)
    missing = [s.command.id for s in done if not s.everywhere]
    if missing:
        raise RuntimeError(f"{len(missing)} queries not live, e.g. {missing[:3]}")


def render(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        "### Workload S through the worker",
        "",
        f"{time.strftime('%Y-%m-%d')}, `python -m bench.kafka_selection --queries "
        f"{args.queries} --events {args.events} --keys {args.keys}` on {_machine()}, the "
        f"broker on the same machine, {PARTITIONS} partitions, one worker. Workload S put "
        "on stream B: each query 1 or 2 range predicates on `pressure` / `temp` with S's "
        "constants (~0.1% of events each); a backlog of "
        f"{args.events:,} events on {args.keys} keys produced in one transaction, timed "
        "from its commit to the group's commit covering the last event.",
        "",
        "| queries | worker events/s | ceiling events/s (consume + decode) | worker / "
        "ceiling | results/event | backlog done in | bare engine events/s "
        f"(in process, as the worker calls it, first {min(ENGINE_EVENTS, args.events):,} "
        "events) | registration "
        "(`submit_many`, until LIVE) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['n']:,} | {r['worker']:,.0f} | {r['ceiling']:,.0f} | "
                     f"{r['worker'] / r['ceiling']:.3g} | {r['results']:.3g} | "
                     f"{r['seconds']:.1f} s (produced in {r['produced']:.1f} s) | "
                     f"{r['engine']:,.0f} | {r['registered']:.1f} s |")
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        lines += ["", f"{b['n']:,} queries / {a['n']:,}: worker rate x"
                  f"{b['worker'] / a['worker']:.2f}, results/event x"
                  f"{b['results'] / max(a['results'], 1e-9):.0f}. Late events: at most "
                  f"{max(r['late'] for r in rows):.0f}."]
    for r in rows:
        lines += ["", f"Where the time goes at {r['n']:,} queries (`bench.worker_profile`):",
                  "", *worker_profile.render(r["profile"])]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
