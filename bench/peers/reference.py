"""Juggler's side of a peer comparison, in a fresh process like every measurement.

    python -m bench.peers.reference '<json spec>'     # prints one JSON line

The spec names the workload (name and parameters, for its queries), the directory of
the exported event files, the engine ("engine" or "naive") and where to write the
results. The engine starts empty with every query registered, then processes exactly
the events of the files, as the peers do, so the rates compare the same work from the
same state; reading the file and compiling are not timed. The events go in batches
of `BATCH`, the way `juggler eval` and the worker hand them over. Results are written in the
peers' form (query id TAB source positions in FROM order) for the comparison.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.measure import ROOT, _make_engine
from bench.peers.files import EventFiles, read
from bench.workloads import build
from juggler.engine.events import LateEvent, Position, process_batch

BATCH = 1024


def run_spec(spec: dict) -> dict[str, Any]:
    workload = build(spec["workload"], **spec["params"])
    queries = workload.compiled()
    events = read(EventFiles.at(Path(spec["events"])))
    engine = _make_engine(spec.get("engine", "engine"), spec.get("config", {}))
    for query in queries:
        engine.register(query)
    order = {q.id: q.streams for q in queries}
    found: list[tuple[str, dict[str, Position]]] = []
    clock = time.perf_counter
    start = clock()
    for at in range(0, len(events), BATCH):  # keep what identifies a result, not its row
        for outcome in process_batch(engine, events[at:at + BATCH]):
            if isinstance(outcome, LateEvent):
                raise outcome
            found.extend([(r.query, r.sources) for r in outcome])
    seconds = clock() - start
    stats = engine.stats()
    with open(spec["out"], "w") as f:
        for qid, sources in found:
            f.write(f"{qid}\t{','.join(str(sources[s]) for s in order[qid])}\n")
    return {"events": len(events), "seconds": seconds, "results": len(found),
            "events_per_s": len(events) / seconds if seconds > 0 else None,
            "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "results_file": spec["out"],
            "candidates_per_result": stats["candidates"] / max(stats["results"], 1)}


def measure(spec: dict, timeout: float, services: Path | None = None) -> dict[str, Any]:
    """Run `spec` in a fresh interpreter, with Juggler's package from `services`
    (default: the working tree's)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(services or ROOT / "services"), str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("PYTHONHASHSEED", "0")  # as bench.measure runs the engine
    proc = subprocess.run([sys.executable, "-m", "bench.peers.reference", json.dumps(spec)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"Juggler run failed: {proc.stderr[-2000:]}")
    return json.loads(lines[-1])


if __name__ == "__main__":
    print(json.dumps(run_spec(json.loads(sys.argv[1]))))
