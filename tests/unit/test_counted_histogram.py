"""The worker's latency histogram takes an event's results in one observation: what
Prometheus scrapes must be what prometheus-client's own Histogram would export had each
result been observed on its own."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from juggler.runtime.metrics import LATENCY_BUCKETS, _CountedHistogram

NAME = "juggler_processing_latency_seconds"


@given(st.lists(st.tuples(st.sampled_from([0.0, *LATENCY_BUCKETS, 0.003, 0.07, 99.0]),
                          st.integers(1, 5)), max_size=20))
def test_counted_observations_export_like_one_observation_each(observed):
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    counted = _CountedHistogram(NAME, "latency", LATENCY_BUCKETS)
    ours.register(counted)
    reference = Histogram(NAME, "latency", buckets=LATENCY_BUCKETS, registry=theirs)
    for value, count in observed:
        counted.observe(value, count)
        for _ in range(count):
            reference.observe(value)
    (ours_sum, ours_rest), (their_sum, their_rest) = _samples(ours), _samples(theirs)
    assert ours_rest == their_rest
    assert math.isclose(ours_sum, their_sum, rel_tol=1e-12, abs_tol=1e-12)


def _samples(registry: CollectorRegistry) -> tuple[float, list[str]]:
    """The exposition's sum (added in another order, so equal up to rounding) and its
    other lines, without the creation time only the reference exports."""
    lines = generate_latest(registry).decode().splitlines()
    total = [float(line.split()[1]) for line in lines if line.startswith(f"{NAME}_sum ")]
    return total[0], [line for line in lines
                      if "_created" not in line and not line.startswith(f"{NAME}_sum ")]
