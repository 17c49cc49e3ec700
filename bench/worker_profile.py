"""Where a worker's time goes, read from its own metrics and /proc, so that a
missed target comes with the profile that says where the time goes.

A snapshot before and one after a measured stretch (a backlog, a live run); their
difference gives

- the worker's main loop by phase (`juggler_loop_seconds_total` and
  `juggler_loop_cpu_seconds_total`, see `juggler.runtime.loop_clock`): what the loop
  spent its wall time on, and how much of it the loop's thread had a core;
- its clearances (`juggler_clearance_seconds`: the broker round trips a fetched record
  waits for before it may be taken, semantics 4a) and its transactions: how many, how
  long each took, and how long a round waited for the one in flight
  (`juggler_transaction_seconds`, `juggler_commit_queue_seconds`);
- a result's age when its round was handed to the commit thread and when it was
  committed (`juggler_handover_latency_seconds`, `juggler_processing_latency_seconds`,
  from the Kafka timestamp of its last event): what of its latency came before the
  transaction and what the transaction added;
- CPU seconds of the worker process (the loop, the commit thread, librdkafka's
  threads), of its results index process, and of the Kafka broker(s) on this machine.

The metrics are the ones a deployment exports to Prometheus, so the same profile can be
read off a dashboard; no profiler is attached, so nothing here slows the worker down.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

INF = float("inf")
HISTOGRAMS = ("juggler_clearance_seconds", "juggler_transaction_seconds",
              "juggler_commit_queue_seconds",
              "juggler_handover_latency_seconds", "juggler_processing_latency_seconds")


@dataclass
class Snapshot:
    phases: dict[str, float]
    phases_cpu: dict[str, float]
    histograms: dict[str, dict[float, float]]
    """Per histogram: upper bound -> cumulative count (+Inf included), and the sum
    under the bound `-1`."""
    cpu: dict[str, float]


def snapshot(worker: Any) -> Snapshot:
    """`worker`: a `juggler.launcher.WorkerProcess` that is running."""
    _, text = worker.get("/metrics")
    phases: dict[str, float] = {}
    phases_cpu: dict[str, float] = {}
    histograms: dict[str, dict[float, float]] = {name: {} for name in HISTOGRAMS}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "juggler_loop_seconds_total":
                phases[sample.labels["phase"]] = sample.value
            elif sample.name == "juggler_loop_cpu_seconds_total":
                phases_cpu[sample.labels["phase"]] = sample.value
            for name in HISTOGRAMS:
                if sample.name == f"{name}_bucket":
                    histograms[name][float(sample.labels["le"])] = sample.value
                elif sample.name == f"{name}_sum":
                    histograms[name][-1.0] = sample.value
    pid = worker.proc.pid
    cpu = {"worker": _cpu(pid),
           "results index": sum(_cpu(child) for child in children(pid)),
           "broker": sum(_cpu(broker) for broker in _brokers())}
    return Snapshot(phases, phases_cpu, histograms, cpu)


def profile(before: Snapshot, after: Snapshot, events: int, seconds: float) -> dict[str, Any]:
    """What happened between two snapshots, `events` events in `seconds` of wall time."""
    phases = {p: after.phases[p] - before.phases.get(p, 0.0) for p in after.phases}
    phases_cpu = {p: after.phases_cpu[p] - before.phases_cpu.get(p, 0.0)
                  for p in after.phases_cpu}
    transactions = {}
    for name in HISTOGRAMS:
        a, b = after.histograms[name], before.histograms[name]
        buckets = {le: a[le] - b.get(le, 0.0) for le in a if le >= 0}
        count = buckets.get(INF, 0.0)
        transactions[name] = {"count": count,
                              "mean": (a[-1.0] - b.get(-1.0, 0.0)) / count if count else 0.0,
                              "p50": _quantile(buckets, 0.5), "p99": _quantile(buckets, 0.99)}
    cpu = {k: after.cpu[k] - before.cpu[k] for k in after.cpu}
    return {"events": events, "seconds": seconds, "phases": phases, "phases_cpu": phases_cpu,
            "transactions": transactions, "cpu": cpu}


def render(p: dict[str, Any]) -> list[str]:
    """Markdown: the loop's phases, the transactions, the CPU by process."""
    from juggler.runtime.loop_clock import PHASES

    events, seconds = p["events"], p["seconds"]
    loop = sum(p["phases"].values())
    lines = [
        f"The worker's main loop by phase (`juggler_loop_seconds_total`; {events:,} "
        f"events in {seconds:.2f} s of wall time, the loop's phases sum to {loop:.2f} s):",
        "",
        "| phase | what | seconds | of which on the CPU | share of the loop | µs per event |",
        "|---|---|---|---|---|---|",
    ]
    for phase, what in PHASES.items():
        s, cpu = p["phases"].get(phase, 0.0), p["phases_cpu"].get(phase, 0.0)
        share = f"{s / loop:.1%} | {s / events * 1e6:.1f}" if loop and events else "- | -"
        lines.append(f"| {phase} | {what} | {s:.2f} | {cpu:.2f} | {share} |")
    h = p["transactions"]
    c, t, q = (h["juggler_clearance_seconds"], h["juggler_transaction_seconds"],
               h["juggler_commit_queue_seconds"])
    ready, done = h["juggler_handover_latency_seconds"], h["juggler_processing_latency_seconds"]
    lines += [
        "",
        f"Clearances (semantics 4a; a fetched record waits for one): {c['count']:,.0f}, "
        f"{_ms(c['mean'])} on average (p50 {_ms(c['p50'])}, p99 {_ms(c['p99'])}). "
        f"Transactions: {t['count']:,.0f} ({t['count'] / seconds:.1f}/s), each "
        f"{_ms(t['mean'])} on average (p50 {_ms(t['p50'])}, p99 {_ms(t['p99'])}); a round "
        f"waited for the one in flight {_ms(q['mean'])} on average (p50 {_ms(q['p50'])}, "
        f"p99 {_ms(q['p99'])}). A result's age from its last event's Kafka timestamp: "
        f"when its round was handed to the commit thread p50 {_ms(ready['p50'])}, p99 "
        f"{_ms(ready['p99'])}; when committed p50 {_ms(done['p50'])}, p99 "
        f"{_ms(done['p99'])} ({done['count']:,.0f} results). Quantiles are interpolated "
        "within the histograms' buckets, as Prometheus's `histogram_quantile` does.",
        "",
        "CPU seconds over the same stretch (2 cores: at most "
        f"{2 * seconds:.2f}): " + ", ".join(f"{k} {v:.2f}" for k, v in p["cpu"].items()) + ".",
    ]
    if events and p["phases"].get("evaluate"):
        bound = events / p["phases"]["evaluate"]
        lines += ["", f"If everything but the operator took no time, this worker would "
                      f"process {bound:,.0f} events/s (events over the evaluate phase)."]
    return lines


def _quantile(buckets: dict[float, float], q: float) -> float:
    """The `q` quantile of a histogram (upper bound -> cumulative count), interpolated
    linearly within its bucket like Prometheus's `histogram_quantile`; in the +Inf
    bucket, the largest finite bound."""
    total = buckets.get(INF, 0.0)
    if not total:
        return 0.0
    rank, lower, below = q * total, 0.0, 0.0
    for le in sorted(buckets):
        if buckets[le] >= rank:
            if le == INF:
                return lower
            inside = buckets[le] - below
            return lower + (le - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = le, buckets[le]
    return lower


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def _cpu(pid: int) -> float:
    """User + system CPU seconds of process `pid` (all its threads), 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def _brokers() -> list[int]:
    """The Kafka brokers running on this machine (the benchmarks' own local one)."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if b"kafka.Kafka" in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids
