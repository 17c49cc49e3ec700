"""Registration cost: N threshold rules on one column (`SELECT * FROM H WHERE
H.beatrate > c`, N distinct c), in process and through one worker.

    python -m bench.registration [--sizes 1000,10000,100000] [--repeats 3]
                                 [--worker 100000 | --worker 0]

In process, each size in a fresh process (`NativeEngine`, the queries compiled first
as the worker compiles them, by shape, and timed apart): registering them one at a time and all at once (`register_many`, what
a restore and a burst of commands use; in a second engine, so with the predicates'
thresholds already computed, as for every partition's engine but the first), the
same into a third engine that copies the second's registry (`shared_registry`, what
every partition's engine but the first does in a restore), deregistering a tenth one
at a time, the cost
per registration and its ratio at the largest size to the smallest (the target: within
2x), and the bytes per registered query (the operator's own count, and the process's
RSS growth, Python's query objects included). Through one worker (4 partitions, a
local broker unless `JUGGLER_BOOTSTRAP` names one): `juggler query register --file`'s
`submit_many` of `--worker` rules until every one is live in every partition, then a
restart to `/health` 200. Medians of `--repeats`; the numbers go in the Registration
section of docs/benchmarks.md by hand.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PARTITIONS = 4


def rules(n: int) -> list[tuple[str, str]]:
    """N threshold rules on one column, each with its own constant."""
    return [(f"hr{i}", f"SELECT * FROM H WHERE H.beatrate > {i}") for i in range(n)]


def _rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def in_process(n: int) -> dict[str, Any]:
    """One size, measured in this process (`main` runs each in a fresh one)."""
    from juggler.engine.events import EngineConfig
    from juggler.engine.native_engine import NativeEngine
    from juggler.engine.shared_registry import SharedRegistries
    from juggler.language import ColumnType, QueryCompiler

    catalog = {"H": {"beatrate": ColumnType.NUMBER, "vib": ColumnType.NUMBER}}
    compiler = QueryCompiler(catalog)
    t0 = time.perf_counter()
    queries = [compiler.compile(qid, text) for qid, text in rules(n)]
    compile_s = time.perf_counter() - t0
    out: dict[str, Any] = {"n": n, "compile_us": compile_s / n * 1e6}
    gc.collect()
    gc.freeze()  # the compiled queries: not what the collector's passes are timed on
    rss = _rss_kb()
    engine = NativeEngine(EngineConfig())
    t0 = time.perf_counter()
    for query in queries:
        engine.register(query)
    out["one_us"] = (time.perf_counter() - t0) / n * 1e6
    gc.collect()
    out["rss_bytes_per_query"] = (_rss_kb() - rss) * 1024 / n
    out["native_bytes_per_query"] = engine.registry_bytes() / n
    gone = queries[::10]
    t0 = time.perf_counter()
    for query in gone:
        engine.deregister(query.id)
    out["deregister_us"] = (time.perf_counter() - t0) / len(gone) * 1e6
    del engine
    gc.collect()
    registries: SharedRegistries[NativeEngine] = SharedRegistries()
    bulk = NativeEngine(EngineConfig(), registries)
    t0 = time.perf_counter()
    bulk.register_many(queries)
    out["many_us"] = (time.perf_counter() - t0) / n * 1e6
    copied = NativeEngine(EngineConfig(), registries)
    t0 = time.perf_counter()
    copied.register_many(queries)
    out["copy_us"] = (time.perf_counter() - t0) / n * 1e6
    return out


def _child(n: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "services"), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-m", "bench.registration", "--child", str(n)], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def through_worker(n: int, repeats: int) -> dict[str, Any]:
    """`submit_many` of n rules to live everywhere, then restarts to ready."""
    from juggler.client.control import submit_many
    from juggler.kafka.broker import broker_or_env, free_port
    from juggler.launcher import WorkerProcess
    from juggler.wire.commands import RegisterCommand

    out: dict[str, Any] = {"n": n, "restarts": []}
    with broker_or_env() as bootstrap, tempfile.TemporaryDirectory() as tmp:
        prefix = f"registration-{uuid.uuid4().hex[:6]}."
        worker = WorkerProcess({"bootstrap": bootstrap, "topic_prefix": prefix,
                                "partitions": PARTITIONS, "app_id": prefix.rstrip("."),
                                "instance_id": "bench", "web_port": free_port(),
                                "web_host": "127.0.0.1"}, Path(tmp) / "worker.log")
        with worker:
            commands = [RegisterCommand(qid, text) for qid, text in rules(n)]
            t0 = time.monotonic()
            done = submit_many(bootstrap, commands, prefix=prefix, timeout=60.0)
            out["live_s"] = time.monotonic() - t0
            out["not_live"] = sum(not s.everywhere for s in done)
            log(f"{n:,} rules live in {out['live_s']:.1f} s ({out['not_live']} not live)")
        for _ in range(repeats):
            t0 = time.monotonic()
            worker.start(timeout=600)
            out["restarts"].append(time.monotonic() - t0)
            worker.stop()
            log(f"  restart: ready in {out['restarts'][-1]:.2f} s")
    return out


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.registration", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", type=int, default=100_000, help="rules through one worker (0: none)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(in_process(args.child)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    rows: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    for rep in range(args.repeats):
        for n in sizes:
            rows[n].append(_child(n))
            log(f"repeat {rep + 1}: {n:,}: {rows[n][-1]}")
    fields = ["one_us", "many_us", "copy_us", "deregister_us", "compile_us", "native_bytes_per_query",
              "rss_bytes_per_query"]
    med = {n: {f: statistics.median(r[f] for r in rows[n]) for f in fields} for n in sizes}
    print("| rules | register one at a time (us/rule) | register_many (us/rule) | register_many copied (us/rule) "
          "| deregister (us/rule) | compile (us/rule, not in the others) | operator bytes/rule | RSS bytes/rule |")
    print("|---|---|---|---|---|---|---|---|")
    for n in sizes:
        m = med[n]
        print(f"| {n:,} | {m['one_us']:.1f} | {m['many_us']:.1f} | {m['copy_us']:.1f} | {m['deregister_us']:.1f} "
              f"| {m['compile_us']:.0f} "
              f"| {m['native_bytes_per_query']:.0f} | {m['rss_bytes_per_query']:.0f} |")
    small, large = min(sizes), max(sizes)
    for f in ("one_us", "many_us", "deregister_us"):
        print(f"{f}: cost per rule at {large:,} / at {small:,} = {med[large][f] / med[small][f]:.2f} "
              f"(target: within 2x)")
    if args.worker:
        w = through_worker(args.worker, args.repeats)
        print(f"through one worker ({PARTITIONS} partitions): {w['n']:,} rules live in {w['live_s']:.1f} s "
              f"(target: under 10 s; {w['not_live']} not live); restart to /health 200: median "
              f"{statistics.median(w['restarts']):.2f} s (target: under 10 s; runs "
              f"{', '.join(f'{r:.2f}' for r in w['restarts'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
