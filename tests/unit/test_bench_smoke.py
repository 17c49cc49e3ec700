"""The benchmark workloads, tiny, through both engines: they must return the same results.

`bench/` times the Juggler engine against the naive per-query baseline; this checks
that on the benchmark's own generators both do the same work (equal result
multisets, compared by `Result.identity()`), so a ratio compares like with like. The
sizes are small because the baseline's nested loops are slow.
"""

from __future__ import annotations

import importlib
import itertools
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` lives at the repository root, beside `services`
    sys.path.insert(0, str(ROOT))

from bench.workloads import build  # noqa: E402
from juggler.codec.avro import Codec  # noqa: E402
from juggler.engine.events import EngineConfig  # noqa: E402
from juggler.engine.naive import NaiveEngine  # noqa: E402
from juggler.engine.orders import STATIC_ORDERS  # noqa: E402
from juggler.engine.native_engine import NativeEngine  # noqa: E402
from juggler.language import compile_query  # noqa: E402

CASES = {
    # name: (workload, parameters, events, engine configs to check)
    "S": ("S", {"n": 20}, 3000, [{}]),
    # One key's worth of J at 5 events/s per stream: 30 s of event time, 2- and 3-stream
    # queries, windows up to 20 s; J's real sizes would take the baseline hours.
    "J": ("J", {"n": 5, "overlap": 0.5, "keys": 3, "base_keys": 3, "rate": 5}, 360,
          [{}, {"retention": 20000}]),
    # J's instance in the language's other forms (equalities, offsets on either side).
    "J-forms": ("J-forms", {"n": 8, "overlap": 0.5, "keys": 3, "base_keys": 3, "rate": 5}, 360,
                [{}, {"retention": 20000}]),
    # Both halves of the drift; attributes hold half the time in the first half so
    # that a tiny instance has results there too. Every static order and adaptive.
    "D": ("D", {"cycles": 2, "keys": 1, "per_cycle": 16, "variants": 5, "hold": (0.5, 0.95)},
          None, [{"order": o} for o in ("adaptive", *STATIC_ORDERS)]),
}


def _results(engine, queries, events) -> Counter:
    for query in queries:
        engine.register(query)
    return Counter(r.identity() for event in events for r in engine.process(event))


@pytest.mark.parametrize("name", sorted(CASES))
def test_engine_matches_baseline_on_workload(name: str) -> None:
    workload_name, params, count, configs = CASES[name]
    workload = build(workload_name, **params)
    queries = workload.compiled()
    events = list(workload.events() if count is None else itertools.islice(workload.events(), count))
    assert len(events) == (workload.length if count is None else count)
    expected = _results(NaiveEngine(EngineConfig()), queries, events)
    assert sum(expected.values()) > 0, "the tiny instance must produce results to compare"
    for config in configs:
        got = _results(NativeEngine(EngineConfig(**config)), queries, events)
        assert got == expected, f"{name} with {config}: engine and baseline differ"


@pytest.mark.parametrize("name, params", [("S", {"n": 5}), ("J", {"n": 5, "overlap": 0.25}),
                                          ("J-forms", {"n": 5, "overlap": 0.25}), ("D", {"cycles": 2})])
def test_workloads_are_deterministic(name: str, params: dict) -> None:
    a, b = build(name, **params), build(name, **params)
    assert a.queries == b.queries
    first = [(e.stream, e.key, e.ts, e.data, e.position) for e in itertools.islice(a.events(), 200)]
    again = [(e.stream, e.key, e.ts, e.data, e.position) for e in itertools.islice(b.events(), 200)]
    assert first == again
    stamps = [ts for _, _, ts, _, _ in first]
    assert stamps == sorted(stamps), "events arrive in timestamp order"


@pytest.mark.parametrize("module", sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts)
    for path in (ROOT / "bench").rglob("*.py") if path.name != "__main__.py"))
def test_every_benchmark_module_imports(module: str) -> None:
    """The benchmark commands run outside pytest, so a module that no longer imports (a
    syntax error in a report's text once went unnoticed) would only show in the README's
    benchmark command."""
    importlib.import_module(module)


@pytest.mark.parametrize("workload", ["K", "S"])
def test_the_bare_engine_counts_every_result_of_the_events(workload: str) -> None:
    """K's and S's bare engine (`kafka_load.bare_engine`) evaluates the events as the
    worker does, decoded with Kafka positions and in batches, with results written in
    Rust: its results per event must be the baseline's on the same events, so the
    worker's share of it compares like with like."""
    from bench.kafka_load import _with_alerts, bare_engine
    from bench.kafka_selection import selection_events, selection_queries

    if workload == "K":
        j = build("J", n=5, overlap=0.5, keys=3, base_keys=3, rate=5)
        text, events = j.queries, list(_with_alerts(itertools.islice(j.events(), 360)))
    else:
        text, events = selection_queries(20), selection_events(1500, keys=4)
    catalog = Codec().catalog()
    queries = [compile_query(query_id, query, catalog) for query_id, query in text]
    expected = _results(NaiveEngine(EngineConfig()), queries, events)
    assert sum(expected.values()) > 0
    _, per_event = bare_engine(text, events)
    assert per_event * len(events) == pytest.approx(sum(expected.values()))

