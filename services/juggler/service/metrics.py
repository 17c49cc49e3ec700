"""Prometheus metrics of one worker (DESIGN section 8), served at `/metrics`.

Counters the worker updates as it goes (events in, results out, dead letters, latency)
are ordinary prometheus-client collectors; what the engines measure themselves
(comparisons, selectivity, evaluation order, reorders, held events) is read from the
partition engines at scrape time and aggregated over them, and so is the consumer lag
(`watch_consumer`).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Collection, Iterable
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
from juggler.service.deadletters import REASONS

# aiohttp takes the charset separately; Prometheus text is UTF-8 anyway.
CONTENT_TYPE = CONTENT_TYPE_LATEST.split("; charset")[0]
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class WorkerMetrics:
    def __init__(self, engines: Any, registered: Callable[[], int]) -> None:
        self.engines = engines
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
        # Every label value known in advance is exported from the start, at 0: a counter
        # that appears only at its first increment hides that increment from rate().
        for stream in engines.catalog:
            self.events_in.labels(stream)
            self.late_events.labels(stream)
        for reason in REASONS:
            self.dead_letters.labels(reason)
        for action in ("REGISTER", "DEREGISTER"):
            for status in ("ACCEPTED", "REJECTED"):
                self.commands.labels(action, status)

    def watch_consumer(self, app: Any, topics: Collection[str]) -> None:
        """Export the consumer lag of `app`'s assigned partitions of `topics` (the topics
        its agents process; the table changelogs are read only at recovery, so their lag
        would mean nothing)."""
        self.registry.register(_ConsumerLagCollector(app, frozenset(topics)))

    def expose(self) -> bytes:
        for pe in self.engines:
            for query in pe.texts:  # from its registration on, like the streams' counters
                self.results_out.labels(query)
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


class _ConsumerLagCollector:
    """`juggler_consumer_lag{topic, partition}`: records in the partition that the
    consumer has not handed to the agents yet. Like the Java consumer's `records-lag`:
    the end is the last stable offset for a read_committed consumer (exactly_once) and
    the highwater otherwise, both as of the partition's last fetch response; the
    position is the consumer's, so transaction markers never count as lag. Records
    fetched but still waiting in the agent's buffer are not counted either (at most
    Faust's `stream_buffer_maxsize`): `juggler_events_in_total` shows what was processed.
    """

    def __init__(self, app: Any, topics: frozenset[str]) -> None:
        self.app = app
        self.topics = topics

    def describe(self) -> Iterable[Any]:
        return []

    def collect(self) -> Iterable[Any]:
        g = GaugeMetricFamily("juggler_consumer_lag",
                              "Records not yet consumed, per assigned topic partition "
                              "(last stable offset or highwater minus consumer position)",
                              labels=["topic", "partition"])
        for (topic, partition), lag in sorted(consumer_lag(self.app, self.topics).items()):
            g.add_metric([topic, str(partition)], lag)
        yield g


def consumer_lag(app: Any, topics: frozenset[str]) -> dict[tuple[str, int], int]:
    """Lag per assigned (topic, partition) of `topics` whose end and position are known
    (after the partition's first fetch), read without blocking from the aiokafka
    consumer's fetch state: Faust's own `position()` is a coroutine run in the consumer's
    thread, which a scrape must not wait for."""
    consumer = getattr(app.consumer._thread, "_consumer", None)  # None before it starts
    subscription = getattr(getattr(consumer, "_subscription", None), "subscription", None)
    assignment = getattr(subscription, "assignment", None)
    if assignment is None:  # not started, or between two generations of the group
        return {}
    lag = {}
    for tp in list(assignment.tps):
        if tp.topic not in topics:
            continue
        state = assignment.state_value(tp)
        if state is None or not state.has_valid_position:
            continue
        end = state.lso if state.lso is not None and state.lso >= 0 else state.highwater
        if end is None:
            continue
        lag[(tp.topic, tp.partition)] = max(0, end - state.position)
    return lag
