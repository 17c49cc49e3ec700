"""One measurement -- (workload, size, engine) -- in a fresh Python process.

A fresh process per measurement keeps the peak memory (`ru_maxrss`) clean and keeps
one run's garbage, caches and JIT-less warm-up from leaking into the next.

    python -m bench.measure '<json spec>'      # prints one JSON line

The spec (see `Spec`) names the workload and its parameters, the engine ("engine" =
NativeEngine, the operator; "naive" = NaiveEngine, the per-query nested-loop
baseline), the engine config, and the mode:

- "rate": optionally load `prefill` events with no query registered (cheap: the engine
  only stores them; with `retention` they stay held, so the measurement starts with
  full windows), register the queries, then process events until at least
  `min_seconds` of processing time AND `min_events` events, or `max_events`, or
  `max_seconds`. A hard timer (`hard_seconds`) interrupts an event that runs far over:
  only completed events count. Events are generated in untimed chunks.
- "passes": process exactly the first `max_events` events, a fresh engine each pass
  (registered once, then copied by pickling),
  until `min_seconds` of processing in total (at most `max_passes`); reports the
  median pass. Used to time the engine on exactly the prefix the baseline processed.
- "fixed": process every event of a fixed-length workload (D) once, recording the
  engine's counters at the workload's checkpoints.

`measure(spec)` runs the subprocess from the parent and returns the parsed result.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
import pickle
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss_now_kb() -> int:
    """Current resident set size (not the peak), from /proc/self/statm."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE // 1024


def _peak_rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


class _Stop(Exception):
    pass


def _alarm(signum, frame):  # pragma: no cover - timing dependent
    raise _Stop()


def _make_engine(kind: str, config: dict):
    from juggler.engine.events import EngineConfig

    cfg = EngineConfig(**config)
    if kind == "engine":
        from juggler.engine.native_engine import NativeEngine
        return NativeEngine(cfg)
    if kind == "naive":
        from juggler.engine.naive import NaiveEngine
        return NaiveEngine(cfg)
    raise ValueError(f"unknown engine {kind!r}")


def _counters(engine, before: dict[str, int] | None = None) -> dict[str, Any]:
    """The engine's work counters over the timed events (`before`: at their start) and
    its predicate type manager's since creation. Candidates are held events examined as
    partners, each once per retrieval."""
    if not hasattr(engine, "stats"):
        return {}
    stats = {k: v - (before or {}).get(k, 0) for k, v in engine.stats().items()}
    manager = engine.manager
    return {"work": stats, "candidates_per_event": stats["candidates"] / max(stats["events"], 1),
            "candidates_per_result": stats["candidates"] / max(stats["results"], 1),
            "comparisons": dict(manager.comparisons),
            "total_comparisons": manager.total_comparisons,
            "reorders": manager.reorders,
            "order": manager.order}


def run_spec(spec: dict) -> dict[str, Any]:
    """The body of one measurement (runs in the child process)."""
    from bench.workloads import build

    mode = spec.get("mode", "rate")
    workload = build(spec["workload"], **spec.get("params", {}))
    t0 = time.perf_counter()
    queries = workload.compiled()
    compile_s = time.perf_counter() - t0
    out: dict[str, Any] = {"spec": spec, "compile_s": compile_s, "queries": len(queries),
                           "info": workload.info}
    if mode == "passes":
        return out | _passes(spec, workload, queries)

    gc.collect()
    out["rss_empty_kb"] = _rss_now_kb()
    engine = _make_engine(spec["engine"], spec.get("config", {}))
    events = workload.events()
    prefill = spec.get("prefill", 0)
    t0 = time.perf_counter()
    for event in itertools.islice(events, prefill):
        engine.process(event)
    out["prefill"] = prefill
    out["prefill_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for query in queries:
        engine.register(query)
    out["register_s"] = time.perf_counter() - t0
    gc.collect()
    before = engine.stats() if hasattr(engine, "stats") else None
    out["rss_before_kb"] = _rss_now_kb()
    out["peak_before_kb"] = _peak_rss_kb()

    if mode == "fixed":
        out |= _fixed(engine, events, workload)
    else:
        out |= _rate(spec, engine, events)
    out["peak_rss_kb"] = _peak_rss_kb()
    out["rss_after_kb"] = _rss_now_kb()
    held = getattr(engine, "held_events", None)
    if held is not None:
        counts = held()
        out["held"] = sum(counts.values())
        out["held_by_stream"] = counts
        out["keys"] = engine.key_count() if hasattr(engine, "key_count") else len(engine.keys)
        if hasattr(engine, "state_bytes"):
            out["state_bytes"] = engine.state_bytes()
    out |= _counters(engine, before)
    return out


def _rate(spec: dict, engine, events) -> dict[str, Any]:
    min_s = spec.get("min_seconds", 2.0)
    max_s = spec.get("max_seconds", 30.0)
    min_events = spec.get("min_events", 1)
    max_events = spec.get("max_events", 10**9)
    hard = spec.get("hard_seconds", max_s * 2)
    chunk = spec.get("chunk", 2000)
    processed = results = 0
    elapsed = 0.0
    stopped_by = "max_events"
    clock = time.perf_counter
    signal.signal(signal.SIGALRM, _alarm)
    done = False
    while not done and processed < max_events:
        batch = list(itertools.islice(events, min(chunk, max_events - processed)))
        if not batch:
            stopped_by = "end"
            break
        start = clock()
        last = start
        signal.setitimer(signal.ITIMER_REAL, max(0.001, hard - elapsed))
        try:
            for event in batch:
                results += len(engine.process(event))
                processed += 1
                last = clock()
                spent = elapsed + (last - start)
                if spent >= min_s and processed >= min_events:
                    stopped_by = "min_seconds"
                    done = True
                    break
                if spent >= max_s:
                    stopped_by = "max_seconds"
                    done = True
                    break
        except _Stop:
            stopped_by = "hard_seconds"
            done = True
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        elapsed += last - start
        del batch
    out = {"events": processed, "seconds": elapsed, "results": results,
           "events_per_s": processed / elapsed if elapsed > 0 and processed else None,
           "results_per_event": results / processed if processed else None,
           "results_per_s": results / elapsed if elapsed > 0 else None,
           "stopped_by": stopped_by}
    if not processed and elapsed > 0:  # not even one event finished within hard_seconds
        out["events_per_s_below"] = 1 / elapsed
    return out


def _fixed(engine, events, workload) -> dict[str, Any]:
    checkpoints = set(workload.checkpoints)
    marks = []
    processed = results = 0
    elapsed = 0.0
    clock = time.perf_counter
    for event in events:
        if processed in checkpoints:
            marks.append({"events": processed, "results": results, "seconds": elapsed}
                         | _counters(engine))
        start = clock()
        results += len(engine.process(event))
        elapsed += clock() - start
        processed += 1
    return {"events": processed, "seconds": elapsed, "results": results,
            "events_per_s": processed / elapsed if elapsed else None,
            "results_per_event": results / processed if processed else None,
            "results_per_s": results / elapsed if elapsed else None,
            "checkpoints": marks, "stopped_by": "end"}


def _passes(spec: dict, workload, queries) -> dict[str, Any]:
    prefix = list(itertools.islice(workload.events(), spec["max_events"]))
    min_s = spec.get("min_seconds", 1.0)
    max_passes = spec.get("max_passes", 15)
    template = _make_engine(spec["engine"], spec.get("config", {}))
    for query in queries:
        template.register(query)
    try:  # registering 1,000 queries takes seconds; unpickling a registered engine does not
        blob = pickle.dumps(template)
    except Exception:  # pragma: no cover - engines are plain Python objects
        blob = None
    rates: list[float] = []
    total, results = 0.0, 0
    while len(rates) < max_passes and (total < min_s or len(rates) < 3):
        if blob is not None:
            engine = pickle.loads(blob)
        else:
            engine = _make_engine(spec["engine"], spec.get("config", {}))
            for query in queries:
                engine.register(query)
        gc.collect()
        clock = time.perf_counter
        start = clock()
        results = 0
        for event in prefix:
            results += len(engine.process(event))
        spent = clock() - start
        total += spent
        rates.append(len(prefix) / spent if spent > 0 else float("inf"))
    return {"events": len(prefix), "passes": len(rates), "seconds": total,
            "events_per_s": statistics.median(rates), "results": results,
            "results_per_event": results / len(prefix) if prefix else None,
            "peak_rss_kb": _peak_rss_kb(), "stopped_by": "passes"}


def measure(spec: dict, timeout: float = 600.0, services: Path | None = None) -> dict[str, Any]:
    """Run `spec` in a fresh subprocess; a failure comes back as {"error": ...}.

    `services` is the directory holding the `juggler` package (default: the working
    tree's `services/`); `bench.run` passes a snapshot so a whole run measures one
    version of the code even while the working tree is being edited.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(services or ROOT / "services"), str(ROOT)]
        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("PYTHONHASHSEED", "0")
    try:
        proc = subprocess.run([sys.executable, "-m", "bench.measure", json.dumps(spec)],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"spec": spec, "error": f"timed out after {timeout:.0f} s"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"spec": spec, "error": (proc.stderr.strip().splitlines() or ["no output"])[-1],
                "stderr": proc.stderr[-2000:]}
    return json.loads(lines[-1])


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    result = run_spec(json.loads(argv[0]))
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
