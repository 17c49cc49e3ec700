"""Prometheus metrics of one worker (DESIGN section 8), served at `/metrics`.

Counters the worker updates as it goes (events in, results out, dead letters, latency)
are ordinary prometheus-client collectors; what the engines measure themselves
(comparisons, selectivity, evaluation order, reorders, held events) is read from the
partition engines at scrape time and aggregated over them.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from juggler.engine.ordering import STATIC_ORDERS, TYPES

# aiohttp takes the charset separately; Prometheus text is UTF-8 anyway.
CONTENT_TYPE = CONTENT_TYPE_LATEST.split("; charset")[0]
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class WorkerMetrics:
    def __init__(self, engines: Any, registered: Callable[[], int]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.events_in = Counter("juggler_events_in", "Events consumed, per stream",
                                 ["stream"], registry=r)
        self.results_out = Counter("juggler_results_out", "Results published, per query",
                                   ["query"], registry=r)
        self.dead_letters = Counter("juggler_dead_letters",
                                    "Events sent to the dead-letter topic, by reason",
                                    ["reason"], registry=r)
        self.late_events = Counter("juggler_late_events",
                                   "Events later than the allowed lateness, per stream",
                                   ["stream"], registry=r)
        self.commands = Counter("juggler_commands", "Control commands, by action and status",
                                ["action", "status"], registry=r)
        self.latency = Histogram("juggler_processing_latency_seconds",
                                 "From the Kafka timestamp of a result's last event to the "
                                 "commit of the transaction that published the result",
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.redelivered = Counter("juggler_redelivered_records",
                                   "Records the consumer delivered again after the engine "
                                   "had applied them; skipped", registry=r)
        self.refetches = Counter("juggler_refetches",
                                 "Seeks back over committed stream records the consumer "
                                 "skipped", registry=r)
        self.batches = Histogram("juggler_batch_size", "Events per processed batch",
                                 buckets=(1, 10, 100, 1000, 10000), registry=r)
        r.register(_EngineCollector(engines, registered))

    def expose(self) -> bytes:
        return generate_latest(self.registry)


class _EngineCollector:
    def __init__(self, engines: Any, registered: Callable[[], int]) -> None:
        self.engines = engines
        self.registered = registered

    def describe(self) -> Iterable[Any]:
        return []  # dynamic: collected at scrape time only

    def collect(self) -> Iterable[Any]:
        engines = list(self.engines)
        comparisons = Tally(self.engines.retired.comparisons)
        reorders = self.engines.retired.reorders
        selectivity: dict[str, list[float]] = {t: [] for t in TYPES}
        orders: Tally[str] = Tally()
        held: Tally[str] = Tally()
        queries = 0
        for pe in engines:
            manager = pe.engine.manager
            comparisons.update(manager.comparisons)
            reorders += manager.reorders
            for t in TYPES:
                selectivity[t].append(manager.selectivity.get(t, 1.0))
            orders[manager.order] += 1
            held.update(pe.engine.held_events())
            queries = max(queries, len(pe.texts))

        c = CounterMetricFamily("juggler_comparisons",
                                "Predicate comparisons, per predicate type (A, J, W)",
                                labels=["type"])
        for t in TYPES:
            c.add_metric([t], comparisons.get(t, 0))
        yield c
        s = GaugeMetricFamily("juggler_selectivity",
                              "Measured selectivity per predicate type (mean over the "
                              "partition engines; 1 when nothing was measured)",
                              labels=["type"])
        for t in TYPES:
            values = selectivity[t]
            s.add_metric([t], sum(values) / len(values) if values else 1.0)
        yield s
        current = orders.most_common(1)[0][0] if orders else None
        o = GaugeMetricFamily("juggler_evaluation_order",
                              "1 for the evaluation order of the predicate types in use (the "
                              "one most partition engines use), 0 for the others",
                              labels=["order"])
        for order in STATIC_ORDERS:
            o.add_metric([order], 1.0 if order == current else 0.0)
        yield o
        yield CounterMetricFamily("juggler_reorders", "Changes of the evaluation order",
                                  value=reorders)
        h = GaugeMetricFamily("juggler_held_events", "Events held in state, per stream",
                              labels=["stream"])
        for stream, n in sorted(held.items()):
            h.add_metric([stream], n)
        yield h
        yield GaugeMetricFamily("juggler_registered_queries", "Queries registered",
                                value=max(queries, self.registered()))
        yield GaugeMetricFamily("juggler_partition_engines",
                                "Source partitions this worker evaluates", value=len(engines))
