"""Esper, run as the benchmark runs it, returns exactly Juggler's results on S and J.

Needs Maven (Esper's jars from Maven Central, cached) and a JDK; two JVM runs of a few
seconds each. The instances are small but have results: S with 20 queries, and J on
three keys at 5 events/s per stream (30 s of event time, 2- and 3-stream queries,
windows up to 20 s), as `tests/unit/test_bench_smoke.py` uses.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` lives at the repository root, beside `services`
    sys.path.insert(0, str(ROOT))

from bench.peers import compare, esper, files, reference  # noqa: E402
from bench.workloads import build  # noqa: E402

pytestmark = pytest.mark.integration

CASES = {
    "S": ("S", {"n": 20}, 5000),
    "J": ("J", {"n": 8, "overlap": 0.5, "keys": 3, "base_keys": 3, "rate": 5}, 1350),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_esper_results_equal_juggler(name: str, tmp_path: Path) -> None:
    workload_name, params, count = CASES[name]
    workload = build(workload_name, **params)
    exported = files.export(workload, count, tmp_path / "events")
    juggler = reference.measure({"workload": workload_name, "params": params,
                                 "events": str(exported.directory),
                                 "out": str(tmp_path / "juggler.tsv")}, timeout=120)
    assert juggler["results"] > 0, "the instance must have results to compare"
    peer = esper.run(exported, workload.compiled(), tmp_path, timeout=120)
    assert peer["events"] == count
    verdict = compare.check(juggler["results_file"], peer["results_file"])
    assert verdict["equal"], verdict
