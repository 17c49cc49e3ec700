"""`bench.worker_profile`: the profile between two snapshots of a worker's metrics is
what happened between them, and what the benchmark report says of it."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` lives at the repository root, beside `services`
    sys.path.insert(0, str(ROOT))

from bench.worker_profile import HISTOGRAMS, Snapshot, profile, render  # noqa: E402

INF = float("inf")


def snap(evaluate: float, buckets: dict[float, float], total: float, cpu: float) -> Snapshot:
    histogram = {**buckets, -1.0: total}
    return Snapshot({"poll": 1.0, "evaluate": evaluate}, {"poll": 0.1, "evaluate": evaluate / 2},
                    dict.fromkeys(HISTOGRAMS, histogram),
                    {"worker": cpu, "results index": 0.0, "broker": cpu})


def test_the_profile_is_the_difference_of_the_snapshots() -> None:
    before = snap(2.0, {0.01: 5, 0.05: 5, INF: 5}, 0.05, 10.0)
    # 100 transactions after: 90 under 10 ms, 9 more under 50 ms, 1 slower
    after = snap(4.0, {0.01: 95, 0.05: 104, INF: 105}, 1.55, 12.5)
    p = profile(before, after, events=10_000, seconds=4.0)
    assert p["phases"] == {"poll": 0.0, "evaluate": 2.0}
    assert p["phases_cpu"] == {"poll": 0.0, "evaluate": 1.0}
    t = p["transactions"]["juggler_transaction_seconds"]
    assert t["count"] == 100 and abs(t["mean"] - 0.015) < 1e-12
    # interpolated within the bucket, as Prometheus does: the 50th of 90 in [0, 10 ms],
    # the 99th is the 9th of 9 in (10, 50 ms]
    assert abs(t["p50"] - 0.01 * 50 / 90) < 1e-12 and abs(t["p99"] - 0.05) < 1e-12
    assert p["cpu"]["worker"] == 2.5
    text = "\n".join(render(p))
    assert "| evaluate | the operator" in text and "| 2.00 | 1.00 | 100.0% | 200.0 |" in text
    assert "would process 5,000 events/s" in text


def test_a_stretch_without_transactions_has_no_times() -> None:
    same = snap(1.0, {0.01: 3, INF: 3}, 0.02, 1.0)
    t = profile(same, same, events=0, seconds=1.0)["transactions"]["juggler_transaction_seconds"]
    assert t == {"count": 0, "mean": 0.0, "p50": 0.0, "p99": 0.0}


def test_a_quantile_in_the_open_bucket_is_the_largest_bound() -> None:
    from bench.worker_profile import _quantile

    assert _quantile({0.1: 1, 1.0: 2, INF: 10}, 0.99) == 1.0
    assert _quantile({0.1: 10, INF: 10}, 0.5) == 0.05
