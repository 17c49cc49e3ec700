"""The worker's metrics (semantics section 8) as a real Prometheus scraped them: every
metric is there, with the values a user would check against what happened (events
produced, results on the results topics, queries registered, dead letters, lag).

`test_worker.py::test_metrics` reads `/metrics` directly; this goes through the
exposition format, the scrape and PromQL, as a dashboard or an alert would.

Every test runs on both runtimes (`scraped_worker` is parametrized): the worker and the
Faust app export the same names from the same `WorkerMetrics`, the consumer lag and the
hand-over latency included. What only the worker's own loop measures (its
transactions, clearance questions and commit thread, and its fetch and decode phases)
is checked on the worker; on the Faust runtime the same tests check what it exports
instead: those histograms present and empty (`FAUST_UNOBSERVED`), and its own
`juggler_results_maybe_repeated_total`.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # imported by pytest_plugins, so that pytest rewrites its asserts
    from prometheus_server import ScrapedWorker

pytestmark = pytest.mark.integration
pytest_plugins = ["prometheus_server"]

FAUST_UNOBSERVED = ("juggler_transaction_seconds", "juggler_commit_queue_seconds",
                    "juggler_clearance_seconds")
"""Histograms the Faust runtime exports (from the shared `WorkerMetrics`) and can never
observe: it has no transactions, no commit thread and no clearance questions (its
reorder buffer takes what arrived)."""
FAUST_UNTIMED_PHASES = ("poll", "decode")
"""Loop phases the Faust runtime does not enter today: Faust's consumer fetches, and
its agents hand records to the tasks, outside the clock (only `FaustJob.pump` is
timed). Not required there, either way."""


def test_the_worker_is_scraped(scraped_worker: ScrapedWorker) -> None:
    prom = scraped_worker.prometheus
    assert prom.scalar('up{job="juggler"}') == 1
    assert prom.scalar("juggler_partition_engines") == 2


def test_events_in_per_stream_equal_what_was_produced(scraped_worker: ScrapedWorker) -> None:
    events_in = scraped_worker.prometheus.values(
        "sum by (stream) (juggler_events_in_total)", "stream")
    assert events_in == {s: float(n) for s, n in scraped_worker.produced.items()}


def test_results_out_per_query_equal_the_results_topics(scraped_worker: ScrapedWorker) -> None:
    """Each query's count, the deregistered one's too: its series reported its final
    count and then left the scrape (docs/metrics.md), which takes two scrapes at most."""
    prom = scraped_worker.prometheus
    on_topics = {q: float(len(scraped_worker.client.results(q))) for q in scraped_worker.queried}
    assert all(n > 0 for n in on_topics.values()), on_topics
    for _ in range(2):
        prom.wait_scraped_after(time.time())
    assert prom.values("sum by (query) (juggler_results_out_total)", "query") == \
        {q: on_topics[q] for q in scraped_worker.registered}
    reported = prom.values("max by (query) (max_over_time(juggler_results_out_total"
                           f"[{_since(scraped_worker)}]))", "query")
    assert reported == on_topics


def test_registered_queries_and_commands(scraped_worker: ScrapedWorker) -> None:
    prom = scraped_worker.prometheus
    assert prom.scalar("juggler_registered_queries") == len(scraped_worker.registered)
    commands = {(s["metric"]["action"], s["metric"]["status"]): float(s["value"][1])
                for s in prom.query("sum by (action, status) (juggler_commands_total)")}
    assert commands == {("REGISTER", "ACCEPTED"): 3, ("REGISTER", "REJECTED"): 1,
                        ("DEREGISTER", "ACCEPTED"): 1, ("DEREGISTER", "REJECTED"): 0}


def test_dead_letters_by_reason_and_late_events_per_stream(
        scraped_worker: ScrapedWorker) -> None:
    """Every reason (a dead letter's kind) and stream is exported from the start (at 0),
    so that a dashboard's rate() sees the first dead letter too."""
    from juggler.codec.bounded import DEAD_LETTER_KINDS

    prom = scraped_worker.prometheus
    assert prom.values("sum by (reason) (juggler_dead_letters_total)", "reason") == \
        {**dict.fromkeys(DEAD_LETTER_KINDS, 0.0), "late": 1, "undecodable": 1}
    assert prom.values("sum by (stream) (juggler_late_events_total)", "stream") == \
        {**dict.fromkeys("BHKT", 0.0), "B": 1}
    seen_late = prom.query("max_over_time(increase(juggler_dead_letters_total"
                           f'{{reason="late"}}[10s])[{_since(scraped_worker)}:1s])')
    assert float(seen_late[0]["value"][1]) > 0, "the late event never showed in a rate"
    letters = scraped_worker.client.dead_letters()
    assert sorted(d["kind"] for d in letters) == ["late", "undecodable"]


def test_latency_histogram_counts_every_result(scraped_worker: ScrapedWorker) -> None:
    """No query was registered with history, so every result was made by an event and
    its latency observed once."""
    prom = scraped_worker.prometheus
    results = sum(len(scraped_worker.client.results(q)) for q in scraped_worker.queried)
    assert prom.scalar("sum(juggler_processing_latency_seconds_count)") == results
    assert prom.scalar('sum(juggler_processing_latency_seconds_bucket{le="+Inf"})') == results
    median = prom.scalar("histogram_quantile(0.5, sum by (le) "
                         "(juggler_processing_latency_seconds_bucket))")
    assert 0 < median < 60
    # the same results timed when handed to the commit thread (the Faust runtime: when
    # their batch starts publishing): each one younger then
    assert prom.scalar("sum(juggler_handover_latency_seconds_count)") == results
    assert prom.scalar("sum(juggler_handover_latency_seconds_sum)") < \
        prom.scalar("sum(juggler_processing_latency_seconds_sum)")


def test_operator_metrics(scraped_worker: ScrapedWorker) -> None:
    from juggler.engine.orders import STATIC_ORDERS

    prom = scraped_worker.prometheus
    selectivity = prom.values("juggler_selectivity", "type")
    assert set(selectivity) == {"A", "J", "W"}
    assert all(0.0 <= v <= 1.0 for v in selectivity.values()), selectivity
    comparisons = prom.values("juggler_comparisons_total", "type")
    assert set(comparisons) == {"A", "J", "W"} and comparisons["A"] > 0 and \
        comparisons["J"] > 0, comparisons
    order = prom.values("juggler_evaluation_order", "order")
    assert set(order) == set(STATIC_ORDERS)
    assert [o for o, v in order.items() if v == 1] == [o for o, v in order.items() if v != 0]
    assert sum(order.values()) == 1, order
    assert prom.scalar("juggler_reorders_total") >= 0


def test_the_loop_time_by_phase_adds_up_to_at_most_the_worker_s_life(
        scraped_worker: ScrapedWorker) -> None:
    """Each phase of the main loop is exported; the phases that run whenever an event
    is processed took time; and together they never count more time than the
    process has lived (a phase counted twice would). On the Faust runtime the loop is
    `FaustJob.pump`, which need not poll nor decode (`FAUST_UNTIMED_PHASES`)."""
    from juggler.runtime.loop_clock import PHASES

    prom = scraped_worker.prometheus
    lived = _lifetime(scraped_worker.worker.proc.pid)
    phases = prom.values("juggler_loop_seconds_total", "phase")
    assert set(phases) == set(PHASES)
    untimed = FAUST_UNTIMED_PHASES if scraped_worker.runtime == "faust" else ()
    assert all(phases[p] > 0 for p in ("poll", "decode", "order", "evaluate", "publish",
                                       "state", "commit") if p not in untimed), f"{phases}"
    assert sum(phases.values()) <= lived, (phases, lived)
    cpu = prom.values("juggler_loop_cpu_seconds_total", "phase")
    assert set(cpu) == set(PHASES) and cpu["evaluate"] > 0
    # one thread's CPU time never exceeds its wall time (clock granularity aside)
    assert all(cpu[p] <= phases[p] * 1.01 + 0.01 for p in PHASES), (cpu, phases)


def test_every_transaction_is_timed_with_its_queue(scraped_worker: ScrapedWorker) -> None:
    prom = scraped_worker.prometheus
    if scraped_worker.runtime == "faust":
        _faust_exports_instead_of_transactions(scraped_worker)
        return
    transactions = prom.scalar("juggler_transaction_seconds_count")
    assert transactions > 0
    assert prom.scalar("juggler_commit_queue_seconds_count") == transactions
    assert prom.scalar("juggler_clearance_seconds_count") > 0  # every record waited for one
    assert 0 < prom.scalar("juggler_transaction_seconds_sum") < \
        _lifetime(scraped_worker.worker.proc.pid)


def test_held_events_per_stream(scraped_worker: ScrapedWorker) -> None:
    held = scraped_worker.prometheus.values("juggler_held_events", "stream")
    produced = scraped_worker.produced
    assert set(held) <= set(produced) and held, held
    # every key's newest events are held; retention bounds how many
    assert all(0 < held[s] <= produced[s] for s in held), (held, produced)


def test_consumer_lag_per_partition_is_zero_once_consumed(
        scraped_worker: ScrapedWorker) -> None:
    """One series per assigned stream partition (the fanout and control topics hold
    commands, not events, and are not counted); on the Faust runtime from the high
    watermarks Faust's consumer fetched."""
    names = scraped_worker.client.names
    lag = {(s["metric"]["topic"], s["metric"]["partition"]): float(s["value"][1])
           for s in scraped_worker.prometheus.query("juggler_consumer_lag")}
    expected = {(names.stream(s), str(p)) for s in "BHKT" for p in (0, 1)}
    assert set(lag) == expected
    assert all(v == 0 for v in lag.values()), lag


def test_nothing_is_nan(scraped_worker: ScrapedWorker) -> None:
    nan = [s["metric"] for s in scraped_worker.prometheus.query('{__name__=~"juggler_.*"}')
           if math.isnan(float(s["value"][1]))]
    assert not nan


def _faust_exports_instead_of_transactions(scraped_worker: ScrapedWorker) -> None:
    """The Faust runtime publishes at least once: the worker's transaction, queue and
    clearance histograms are exported with no observation (so dashboards and alerts
    over them find the series), and its own counter of results published while a
    partition replays after a crash is there, at 0 (nothing crashed)."""
    prom = scraped_worker.prometheus
    for histogram in FAUST_UNOBSERVED:
        assert prom.scalar(f"{histogram}_count") == 0, histogram
        assert prom.scalar(f'{histogram}_bucket{{le="+Inf"}}') == 0, histogram
        assert prom.scalar(f"{histogram}_sum") == 0, histogram
    assert prom.scalar("juggler_results_maybe_repeated_total") == 0


def _lifetime(pid: int) -> float:
    """Seconds since process `pid` started (Linux: /proc)."""
    import os

    with open(f"/proc/{pid}/stat") as stat:
        started = int(stat.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as uptime:
        return float(uptime.read().split()[0]) - started / os.sysconf("SC_CLK_TCK")


def _since(scraped_worker: ScrapedWorker) -> str:
    """A PromQL range covering the whole scenario."""
    return f"{int(time.time() - scraped_worker.started) + 5}s"
