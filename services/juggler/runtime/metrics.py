"""Prometheus metrics of one worker (semantics section 8), served at `/metrics`.

Counters the worker updates as it goes (events in, results out, dead letters, latency)
are ordinary prometheus-client collectors; what the engines measure themselves
(comparisons, selectivity, evaluation order, reorders, held events) and the consumer lag
are read at scrape time from the runtime's `scrape()` (`pages.Scrape`: for the worker,
the snapshot its loop published at the end of its last round) and aggregated over the
partition engines.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import Counter as Tally
from collections.abc import Iterable, Set
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                   HistogramMetricFamily)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from juggler.engine.orders import STATIC_ORDERS, TYPES
from juggler.codec.bounded import DEAD_LETTER_KINDS
from juggler.runtime.loop_clock import PHASES, LoopClock
from juggler.runtime.pages import Engine, JobView, Scrape
from juggler.wire.commands import VERDICTS
from juggler.wire.names import ACTIONS

if TYPE_CHECKING:  # the task module imports this one through `job`
    from juggler.runtime.task import RoundCounts

# aiohttp takes the charset separately; Prometheus text is UTF-8 anyway.
CONTENT_TYPE = CONTENT_TYPE_LATEST.split("; charset")[0]
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0,
                   1.5, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Finer between 50 ms and 1.5 s, where a live result's p50 and p99 fall on a busy
machine: a quantile is interpolated within its bucket."""
TRANSACTION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075,
                       0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""Finer than the latency's below 0.1 s, where a transaction on a local broker falls
(docs/worker.md, "The loop")."""


class WorkerMetrics:
    """The worker's collectors, and its Prometheus text rendered once per published
    snapshot: rendering is most of a scrape's cost (the more so while the loop holds
    the interpreter), and every probe or scrape between two rounds would render the
    same text again. Not kept longer: the loop's time by phase (`_LoopCollector`) moves
    every round, even an idle one."""

    def __init__(self, worker: JobView) -> None:
        self.worker = worker
        self.generation = 0
        """Bumped by the commit thread's updates (`count`, `transaction_done`); the
        loop's own updates are followed by a new snapshot."""
        self._exposed: tuple[Scrape, int, bytes] | None = None
        """The last text, with the snapshot and generation it was rendered at."""
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.events_in = Counter("juggler_events_in", "Events consumed, per stream",
                                 ["stream"], registry=r)
        self.results_out = Counter("juggler_results_out", "Results published, per query",
                                   ["query"], registry=r)
        # a query no longer registered here -> the count its series was last exported with
        self._retiring: dict[str, float] = {}
        self._counting = threading.Lock()  # a round's counts against a series' removal
        self.dead_letters = Counter("juggler_dead_letters",
                                    "Events sent to the dead-letter topic, by reason",
                                    ["reason"], registry=r)
        self.late_events = Counter("juggler_late_events",
                                   "Events later than the allowed lateness, per stream",
                                   ["stream"], registry=r)
        self.commands = Counter("juggler_commands", "Control commands, by action and status",
                                ["action", "status"], registry=r)
        self.latency = _CountedHistogram(
            "juggler_processing_latency_seconds",
            "From the Kafka timestamp of a result's last event to the commit of the "
            "transaction that published the result", LATENCY_BUCKETS, r)
        self.handover = _CountedHistogram(
            "juggler_handover_latency_seconds",
            "From the Kafka timestamp of a result's last event to the hand-over of its "
            "round to the commit thread: the part of juggler_processing_latency_seconds "
            "before the transaction (fetch, arrival order, evaluation)", LATENCY_BUCKETS, r)
        self.transaction = _CountedHistogram(
            "juggler_transaction_seconds",
            "A round's transaction, from its begin to its commit (the broker round trips "
            "of its produce requests, offsets and markers)", TRANSACTION_BUCKETS, r)
        self.commit_queue = _CountedHistogram(
            "juggler_commit_queue_seconds",
            "From a round's hand-over to the commit thread to the begin of the transaction "
            "that carries it (the transaction in flight finishing)", TRANSACTION_BUCKETS, r)
        self.clearance = _CountedHistogram(
            "juggler_clearance_seconds",
            "From a clearance question (semantics 4a: no command can still apply below the "
            "records fetched) to the loop taking its answer: the broker round trips a "
            "fetched record waits for before it can be taken", TRANSACTION_BUCKETS, r)
        self.restore_missing = Counter(
            "juggler_restore_missing_events",
            "Held events restored without their input record, gone from its stream topic "
            "(its retention must exceed the horizon)", registry=r)
        self.recoveries = Counter(
            "juggler_recoveries",
            "Times Kafka failed under the loop and the worker closed its tasks dirty to "
            "resume them from the last committed round (docs/worker.md, \"Faults\")",
            registry=r)
        self.batches = Histogram("juggler_batch_size", "Events per processed batch",
                                 buckets=(1, 10, 100, 1000, 10000), registry=r)
        r.register(_EngineCollector(worker))
        r.register(_LoopCollector(worker.clock))
        r.register(_ConsumerLagCollector(worker))
        r.register(_ResultsIndexCollector(worker))
        # Every label value known in advance is exported from the start, at 0: a counter
        # that appears only at its first increment hides that increment from rate().
        for stream in worker.catalog:
            self.events_in.labels(stream)
            self.late_events.labels(stream)
        for reason in DEAD_LETTER_KINDS:
            self.dead_letters.labels(reason)
        for action in ACTIONS:
            for status in VERDICTS:
                self.commands.labels(action, status)

    def transaction_done(self, queued: float, took: float) -> None:
        """A committed transaction's times (`transactions.Transactions`, commit thread)."""
        self.commit_queue.observe(queued)
        self.transaction.observe(took)
        self.generation += 1

    def handed_over(self, counts: RoundCounts) -> None:
        """A round's results, handed to the commit thread now (`task.RoundCounts`)."""
        self.handover.observe_ages(counts.produced_at)

    def count(self, counts: RoundCounts) -> None:
        """Add a committed round's counts (`task.RoundCounts`)."""
        for stream, n in counts.events_in.items():
            self.events_in.labels(stream).inc(n)
        for stream, n in counts.late.items():
            self.late_events.labels(stream).inc(n)
        with self._counting:
            for query, n in counts.results_out.items():
                self.results_out.labels(query).inc(n)
        for kind, n in counts.dead_letters.items():
            self.dead_letters.labels(kind).inc(n)
        self.latency.observe_ages(counts.produced_at)
        self.generation += 1

    def cached(self) -> bytes | None:
        """The text `expose` would give, if it was rendered since the runtime's last
        snapshot and the commit thread's last update; None if it must be rendered."""
        return self._rendered(self.worker.scrape(), self.generation)

    def _rendered(self, view: Scrape, generation: int) -> bytes | None:
        exposed = self._exposed
        if exposed is not None and exposed[0] is view and exposed[1] == generation:
            return exposed[2]
        return None

    def expose(self) -> bytes:
        view, generation = self.worker.scrape(), self.generation
        text = self._rendered(view, generation)
        if text is not None:
            return text
        for query in view.registered:  # from its registration on, like the streams' counters
            self.results_out.labels(query)
        self._retire_queries(view.registered)
        text = generate_latest(self.registry)
        # a text exporting a retiring series' final count is served once: the next
        # scrape is the one that drops the series
        self._exposed = None if self._retiring else (view, generation, text)
        return text

    def _retire_queries(self, registered: Set[str]) -> None:
        """Remove the `results_out` series of a query no longer registered here once a
        scrape has exported its final count: at the first scrape that finds it
        unchanged since the one before. A round committed after the deregistration
        (its results came before the command) still counts, and is exported, before
        the series goes. Registration at runtime is ordinary (semantics 7: a rule per
        patient, added and dropped as patients come and go), and a series per query
        ever registered would grow the worker's memory and every scrape without bound;
        Kafka Streams likewise drops a closed task's metrics. A query registered again
        starts from 0, which `rate()` reads as a counter reset."""
        with self._counting:
            counted = {sample.labels["query"]: sample.value
                       for family in self.results_out.collect() for sample in family.samples
                       if sample.name == "juggler_results_out_total"}
            retiring = {}
            for query, value in counted.items():
                if query in registered:
                    continue
                if self._retiring.get(query) == value:
                    self.results_out.remove(query)
                else:
                    retiring[query] = value
            self._retiring = retiring


class _CountedHistogram:
    """A histogram that takes an observation `count` times in one call: every result of
    an event has the same latency, and prometheus-client's `Histogram.observe` once per
    result costs the worker's main thread a lock and a bucket search per result."""

    def __init__(self, name: str, documentation: str, buckets: tuple[float, ...],
                 registry: CollectorRegistry | None = None) -> None:
        self.name, self.documentation = name, documentation
        self.bounds = buckets
        self.counts = [0] * (len(buckets) + 1)
        """Per bucket (the last is +Inf), not cumulative."""
        self.sum = 0.0
        self.lock = threading.Lock()
        """The loop thread observes while the HTTP thread scrapes."""
        if registry is not None:
            registry.register(self)

    def observe(self, value: float, count: int = 1) -> None:
        with self.lock:
            self.counts[bisect.bisect_left(self.bounds, value)] += count
            self.sum += value * count

    def observe_ages(self, produced_at: list[tuple[int, int]]) -> None:
        """Per (Kafka timestamp in ms, count): that many results, as old as the
        timestamp is now (a timestamp of 0 or less is unknown and left out)."""
        now = time.time()
        for timestamp, n in produced_at:
            if timestamp > 0:
                self.observe(max(0.0, now - timestamp / 1000.0), n)

    def collect(self) -> Iterable[HistogramMetricFamily]:
        with self.lock:
            counts, total = list(self.counts), self.sum
        cumulative, buckets = 0, []
        for bound, n in zip([*map(str, self.bounds), "+Inf"], counts):
            cumulative += n
            buckets.append((bound, cumulative))
        yield HistogramMetricFamily(self.name, self.documentation, buckets=buckets,
                                    sum_value=total)


class _EngineCollector:
    """What the engines measure themselves, summed over this worker's tasks at scrape
    time. Counters of tasks that moved to another worker are kept (`retired`), so the
    exported counters never go down."""

    def __init__(self, worker: JobView) -> None:
        self.worker = worker
        self.retired_comparisons: Tally[str] = Tally()
        self.retired_reorders = 0
        self._seen: dict[int, Engine] = {}

    def describe(self) -> Iterable[Any]:
        return []  # dynamic: collected at scrape time only

    def collect(self) -> Iterable[Any]:
        view = self.worker.scrape()
        self._retire(view)
        comparisons = Tally(self.retired_comparisons)
        reorders = self.retired_reorders
        selectivity: dict[str, list[float]] = {t: [] for t in TYPES}
        orders: Tally[str] = Tally()
        held: Tally[str] = Tally()
        queries = 0
        for engine in view.engines:
            manager = engine.manager
            comparisons.update(manager.comparisons)
            reorders += manager.reorders
            for t in TYPES:
                selectivity[t].append(manager.selectivity.get(t, 1.0))
            orders[manager.order] += 1
            held.update(engine.held)
            queries = max(queries, engine.queries)

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
                                value=queries)
        yield GaugeMetricFamily("juggler_partition_engines",
                                "Source partitions this worker evaluates",
                                value=len(view.engines))

    def _retire(self, view: Scrape) -> None:
        """Keep the last counters of each task seen restored, and add them to `retired`
        once the task is gone (a task being restored again is not gone). `Engine` holds
        its task, so a new task cannot take a gone one's `id`."""
        for engine in view.engines:
            self._seen[id(engine.task)] = engine
        current = {id(t) for t in view.tasks}
        for key, engine in list(self._seen.items()):
            if key not in current:
                self.retired_comparisons.update(engine.manager.comparisons)
                self.retired_reorders += engine.manager.reorders
                del self._seen[key]


class _LoopCollector:
    """`juggler_loop_seconds_total{phase}` and `juggler_loop_cpu_seconds_total{phase}`:
    the main loop's wall and CPU time by phase (`loop_clock.LoopClock`)."""

    def __init__(self, clock: LoopClock) -> None:
        self.clock = clock

    def describe(self) -> Iterable[Any]:
        return []

    def collect(self) -> Iterable[Any]:
        for name, documentation, seconds in (
                ("juggler_loop_seconds", "Wall time of the worker's main loop, by phase: "
                 + "; ".join(f"{k}: {v}" for k, v in PHASES.items()), self.clock.seconds),
                ("juggler_loop_cpu_seconds", "CPU time of the worker's main loop thread, by "
                 "phase (as juggler_loop_seconds): the rest of the wall time it waited",
                 self.clock.cpu)):
            family = CounterMetricFamily(name, documentation, labels=["phase"])
            for phase, value in list(seconds.items()):
                family.add_metric([phase], value)
            yield family


class _ConsumerLagCollector:
    """`juggler_consumer_lag{topic, partition}`: records of an assigned stream partition
    not processed yet (fetched and waiting in the task's order, or not fetched): the
    log end (the consumer's cached high watermark) minus the task's next offset
    (`pages.Scrape.lags`)."""

    def __init__(self, worker: JobView) -> None:
        self.worker = worker

    def describe(self) -> Iterable[Any]:
        return []

    def collect(self) -> Iterable[Any]:
        g = GaugeMetricFamily("juggler_consumer_lag",
                              "Records not yet processed, per assigned stream partition",
                              labels=["topic", "partition"])
        for topic, partition, lag in self.worker.scrape().lags:
            g.add_metric([topic, str(partition)], lag)
        yield g


class _ResultsIndexCollector:
    """The results index's failures and lag, read from its store at scrape time: an
    index that stopped or fell behind serves pages short of the topic, and nothing
    else on the worker shows it."""

    def __init__(self, worker: JobView) -> None:
        self.worker = worker

    def describe(self) -> Iterable[Any]:
        return []

    def collect(self) -> Iterable[Any]:
        store = getattr(self.worker, "results_store", None)
        failures = CounterMetricFamily(
            "juggler_results_index_failures",
            "Times the results index's process failed (a full disk) and was started "
            "again with back-off (docs/worker.md, \"Faults\")")
        failures.add_metric([], store.failures if store is not None else 0)
        yield failures
        health: dict[str, Any] = store.health() if store is not None \
            else {"lag": None, "status": "failed"}
        if health["lag"] is not None:
            lag = GaugeMetricFamily(
                "juggler_results_index_lag",
                "Records of the results topics committed but not yet in the results "
                "index (its ends against the topics' log ends, asked every second)")
            lag.add_metric([], health["lag"])
            yield lag
        up = GaugeMetricFamily("juggler_results_index_up",
                               "0 from a failure of the results index's process until a "
                               "restarted one caught up with the topics, 1 otherwise")
        up.add_metric([], 0 if health["status"] == "failed" else 1)
        yield up
