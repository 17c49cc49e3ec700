"""Workload K through Kafka Streams beside the worker, on one broker in one run.

    python -m bench.peers --peers kstreams [--k-sizes 10,100] [--k-events 20000]
                          [--repeats 3] [--latency-seconds 20] [--ks-threads 2]

A fresh local broker (`juggler.kafka.broker`), workload K's events (workload J, 50%
overlap, produced as `bench.kafka_load` does: Avro on the stream topics, 4 partitions),
and for each number of queries n, the worker (`juggler worker`) and the Kafka Streams
application (`KStreamsPeer.java` with the topology `kstreams_topology` writes) on the
same records:

1. **Backlog**: the worker, its n queries registered, takes a backlog produced in one
   transaction (`kafka_load.timed_backlog`: from its commit to the group's commit of
   the last event). Then Kafka Streams starts on the same topics, the backlog already
   there, and its rate is from RUNNING to its group's commit of the last event.
   Startup: Kafka Streams from the launch to RUNNING (the JVM, the topology, its
   changelog topics, the first rebalance); the worker from a restart to ready with the
   n queries registered (`/health`, `/queries`).
2. **Results**: both against `juggler eval` on the same events (run by its CLI, its
   line numbers mapped to the positions the producer got), as sets of (query, key,
   ts, source positions).
3. **Memory**: the peak resident set (`VmHWM`) of the Kafka Streams JVM and of the
   worker process (its results index child apart).
4. **Latency** (last repeat): the same live events to each, one at a time on fresh
   topics, at half the lower of the two backlog rates (Kafka Streams', by far: at half
   the worker's own it never keeps up), p50/p99 from the produce call of a result's
   newest event to its arrival at a read_committed client (`kafka_load.measure_latency`).
5. **Started idle** (semantics 4a): both running and idle on fresh topics, then the same
   backlog from one producer per stream (`kafka_load.produce_per_stream`, each topic in
   its own burst); the results of each against `juggler eval`'s. Kafka Streams' joins
   drop a record that comes after its window closed by stream time, and stream time
   runs ahead on whichever topic arrives first.

Repeats are the outer loop; figures are medians, ratios taken per repeat, then the median.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Callable, TypedDict

from bench.faust_load import peak_memory, proc_status, vm_hwm
from bench.kafka_load import (KEPT_UP, LATENESS_MS, PARTITIONS, _free_port, _metric, _register,
                              _results, _wait_committed, _wait_registered, _with_alerts,
                              committed_records, last_offsets, measure_latency,
                              produce_per_stream, timed_backlog)
from bench.peers import kstreams, kstreams_topology
from bench.workloads import workload_j

APP_ID = "juggler-bench-ks"
SAMPLE = 10_000
"""Events on which the join orders are measured (`kstreams_topology.join_orders`)."""
Identity = tuple[Any, ...]


@dataclass(frozen=True)
class KPlan:
    sizes: tuple[int, ...] = (10, 100)
    events: int = 20_000
    """Kafka Streams takes about a minute for 20,000 events at 100 queries."""
    repeats: int = 3
    latency_seconds: float = 20.0
    threads: int = 2
    """Kafka Streams' stream threads: one per core of this machine (4 tasks to share)."""
    idle_sizes: tuple[int, ...] = (10, 100)
    timeout: float = 1800.0


@dataclass
class Expected:
    """`juggler eval`'s results for one query set, by event index (mapped to Kafka
    positions per run)."""
    results: list[tuple[str, str, int, dict[str, int]]] = field(default_factory=list)

    def identities(self, where: list[tuple[str, int, int]], prefix: str) -> Counter[Identity]:
        return Counter(
            (query, key, ts, tuple(sorted((s, where[i][0].removeprefix(prefix), where[i][1],
                                           where[i][2]) for s, i in sources.items())))
            for query, key, ts, sources in self.results)


def evaluate(queries: list[tuple[str, str]], events: list[Any], work: Path) -> Expected:
    """`juggler eval` (the CLI, with the repository's schemas) on `events` in their order."""
    from juggler.codec.avro import default_schemas_dir

    work.mkdir(parents=True, exist_ok=True)
    events_file, queries_file, out = work / "events.jsonl", work / "queries.jsonl", work / "eval.jsonl"
    if not events_file.exists():
        events_file.write_text("".join(json.dumps({"stream": e.stream, "key": e.key, "ts": e.ts,
                                                   "data": e.data}) + "\n" for e in events))
    queries_file.write_text("".join(json.dumps({"id": q, "text": t}) + "\n" for q, t in queries))
    subprocess.run([sys.executable, "-m", "juggler.cli", "eval", "--queries", str(queries_file),
                    "--events", str(events_file), "--schemas", str(default_schemas_dir()),
                    "--out", str(out)], check=True, capture_output=True, timeout=1800)
    expected = Expected()
    for line in out.read_text().splitlines():
        r = json.loads(line)
        expected.results.append((r["query"], r["key"], r["ts"], r["sources"]))
    return expected


def results_topic(prefix: str) -> str:
    return f"{prefix}kstreams.results"


def kstreams_sources(prefix: str) -> Callable[[bytes], list[tuple[str, int, int]]]:
    """A Kafka Streams result's source positions, as the producer reported them."""
    def sources(value: bytes) -> list[tuple[str, int, int]]:
        _, _, text = value.decode().split("\t")
        out = []
        for source in text.split(","):
            stream, partition, offset = source.split(":")
            out.append((f"{prefix}juggler.stream.{stream}", int(partition), int(offset)))
        return out
    return sources


def kstreams_results(bootstrap: str, prefix: str) -> Counter[Identity]:
    """Kafka Streams' committed results, by the identity `kafka_load._results` gives."""
    out: Counter[Identity] = Counter()
    for msg in committed_records(bootstrap, results_topic(prefix)):
        query, ts, text = msg.value().decode().split("\t")
        sources = []
        for source in text.split(","):
            stream, partition, offset = source.split(":")
            sources.append((stream, f"juggler.stream.{stream}", int(partition), int(offset)))
        out[(query, msg.key().decode(), int(ts), tuple(sorted(sources)))] += 1
    return out


def create_topics(bootstrap: str, prefix: str) -> None:
    """The service's topics under `prefix` (Kafka Streams needs its source topics before
    it starts) and Kafka Streams' results topic, `PARTITIONS` each."""
    from juggler.kafka.topics import apply_topics

    apply_topics(bootstrap, partitions=PARTITIONS, prefix=prefix)
    apply_results_topic(bootstrap, prefix)


def _worker(bootstrap: str, work: Path, prefix: str, **settings: Any) -> tuple[Any, str]:
    from juggler.launcher import WorkerProcess

    app_id = f"{APP_ID}-w-{prefix.rstrip('.')}"
    return WorkerProcess({"bootstrap": bootstrap, "app_id": app_id, "web_port": _free_port(),
                          "web_host": "127.0.0.1", "allowed_lateness": LATENESS_MS,
                          "loglevel": "warning", "topic_prefix": prefix,
                          "partitions": PARTITIONS, **settings}, work / f"{app_id}.log"), app_id


def _app(classes: Path, work: Path, bootstrap: str, prefix: str, plan: KPlan,
         max_task_idle_ms: int = 0) -> kstreams.KStreamsApp:
    return kstreams.KStreamsApp(classes, work, bootstrap=bootstrap, prefix=prefix,
                                app_id=f"{APP_ID}-k-{prefix.rstrip('.')}",
                                results_topic=results_topic(prefix), threads=plan.threads,
                                max_task_idle_ms=max_task_idle_ms)


def compare(expected: Counter[Identity], got: Counter[Identity]) -> dict[str, Any]:
    missing, extra = expected - got, got - expected
    return {"equal": not missing and not extra, "expected": sum(expected.values()),
            "got": sum(got.values()), "missing": sum(missing.values()),
            "extra": sum(extra.values())}


def backlog(bootstrap: str, work: Path, prefix: str, queries: list[tuple[str, str]],
            classes: Path, events: list[Any], expected: Expected, plan: KPlan,
            log: Callable[[str], None]) -> dict[str, Any]:
    """Step 1-3 of the module doc for one query set: the worker, then Kafka Streams."""
    worker, group = _worker(bootstrap, work, prefix)
    where: list[Any] = [None] * len(events)
    with worker:
        _register(bootstrap, prefix, queries)
        _wait_registered(worker, len(queries))
        _, elapsed, _ = timed_backlog(bootstrap, worker, prefix, group, events, where)
        w: dict[str, Any] = {"rate": len(events) / elapsed,
                             "late": _metric(worker, "juggler_late_events_total"),
                             "memory": peak_memory(worker.proc.pid)}
        worker.stop()
        t0 = time.perf_counter()
        worker.start()
        _wait_registered(worker, len(queries))
        w["startup"] = time.perf_counter() - t0
    want = expected.identities(where, prefix)
    w |= compare(want, _results(bootstrap, prefix))
    apply_results_topic(bootstrap, prefix)
    app = _app(classes, work, bootstrap, prefix, plan)
    with app:
        _wait_committed(bootstrap, app.app_id, last_offsets(where), plan.timeout)
        assert app.running_at is not None
        k: dict[str, Any] = {"rate": len(events) / (time.perf_counter() - app.running_at),
                             "startup": app.startup, "memory": vm_hwm(proc_status(app.pid))}
    k |= compare(want, kstreams_results(bootstrap, prefix))
    if not k["equal"]:
        log(f"  kstreams' results differ; its log: {app.log}\n{app.log_tail()}")
    log(f"  n={len(queries)}: worker {w['rate']:,.0f} ev/s ({w['got']:,} results, equal "
        f"{w['equal']}, {w['late']:.0f} late, {w['memory']['process'] / 2**20:,.0f} MiB, "
        f"start {w['startup']:.1f} s); kstreams {k['rate']:,.0f} ev/s ({k['got']:,} "
        f"results, equal {k['equal']}, {k['memory'] / 2**20:,.0f} MiB, start "
        f"{k['startup']:.1f} s)")
    return {"worker": w, "kstreams": k}


def apply_results_topic(bootstrap: str, prefix: str) -> None:
    """Kafka Streams' results topic, kept whole: a result record carries its event time
    as its timestamp (K's `ts` counts from 0, 1970 to the broker), and a time-based
    retention deleted results at the broker's next check."""
    from juggler.kafka.topics import TopicSpec, admin_client, apply_specs

    apply_specs(admin_client(bootstrap), [TopicSpec(results_topic(prefix), PARTITIONS,
                                                    {"retention.ms": "-1"})])


def latency(bootstrap: str, work: Path, n: int, queries: list[tuple[str, str]],
            classes: Path, live: list[Any], rate: float, plan: KPlan,
            log: Callable[[str], None]) -> dict[str, Any]:
    """Step 4: the same live events at `rate` to the worker, then to Kafka Streams."""
    out: dict[str, Any] = {"rate": rate}
    prefix = f"lw{n}."
    worker, group = _worker(bootstrap, work, prefix)
    with worker:
        _register(bootstrap, prefix, queries)
        _wait_registered(worker, len(queries))
        out["worker"] = measure_latency(bootstrap, prefix, live, queries, rate,
                                        plan.latency_seconds, committed=group)
        out["worker"]["memory"] = peak_memory(worker.proc.pid)
    prefix = f"lk{n}."
    create_topics(bootstrap, prefix)
    app = _app(classes, work, bootstrap, prefix, plan)
    with app:
        out["kstreams"] = measure_latency(bootstrap, prefix, live, queries, rate,
                                          plan.latency_seconds, committed=app.app_id,
                                          results=(results_topic(prefix),
                                                   kstreams_sources(prefix)))
        out["kstreams"]["memory"] = vm_hwm(proc_status(app.pid))
    log(f"  n={n} live at {rate:,.0f} ev/s: worker p50 {out['worker']['p50'] * 1000:,.0f} ms "
        f"p99 {out['worker']['p99'] * 1000:,.0f} ms; kstreams p50 "
        f"{out['kstreams']['p50'] * 1000:,.0f} ms p99 {out['kstreams']['p99'] * 1000:,.0f} ms")
    return out


IDLE_SETTINGS = (("defaults", None, 0), ("both wait 5 s", 5_000, 5_000))
"""The started-idle runs: (label, the worker's `max_idle_ms` (None: its default), Kafka
Streams' `max.task.idle.ms`). Each topic's burst comes while the others are silent,
so only an engine that waits for a silent topic at least as long as the bursts before
it take can merge them by event time; the second run gives both the same allowance."""


def started_idle(bootstrap: str, work: Path, n: int, queries: list[tuple[str, str]],
                 classes: Path, events: list[Any], expected: Expected, plan: KPlan,
                 log: Callable[[str], None]) -> dict[str, Any]:
    """Step 5: both idle on fresh topics, then the backlog from one producer per stream;
    once per `IDLE_SETTINGS`."""
    out = {}
    for i, (label, worker_idle, ks_idle) in enumerate(IDLE_SETTINGS):
        prefix = f"i{n}s{i}."
        settings = {} if worker_idle is None else {"max_idle_ms": worker_idle}
        worker, group = _worker(bootstrap, work, prefix, **settings)
        with worker:
            _register(bootstrap, prefix, queries)
            _wait_registered(worker, len(queries))
            apply_results_topic(bootstrap, prefix)
            app = _app(classes, work, bootstrap, prefix, plan, ks_idle)
            with app:
                where = produce_per_stream(bootstrap, prefix, events)
                last = last_offsets(where)
                _wait_committed(bootstrap, group, last, plan.timeout)
                _wait_committed(bootstrap, app.app_id, last, plan.timeout)
            late = _metric(worker, "juggler_late_events_total")
        want = expected.identities(where, prefix)
        run: dict[str, Any] = {
            "worker": compare(want, _results(bootstrap, prefix)) | {"late": late},
            "kstreams": compare(want, kstreams_results(bootstrap, prefix)),
            "worker_idle": worker_idle, "ks_idle": ks_idle}
        out[label] = run
        log(f"  n={n} started idle, one producer per stream, {label}: "
            f"{run['worker']['expected']:,} expected; worker {run['worker']['got']:,} "
            f"(equal {run['worker']['equal']}, {late:.0f} late); kstreams "
            f"{run['kstreams']['got']:,} ({run['kstreams']['missing']:,} missing)")
    return out


def run(plan: KPlan, log: Callable[[str], None]) -> dict[str, Any]:
    """Every measurement of the module doc, on a broker of its own."""
    from juggler.codec.avro import Codec
    from juggler.kafka.broker import LocalBroker
    from juggler.language import compile_query

    stream = _with_alerts(workload_j(100, 0.5).events())  # J's events do not depend on n
    events = list(islice(stream, plan.events))
    catalog = Codec().catalog()
    sizes = sorted(set(plan.sizes) | set(plan.idle_sizes))
    out: dict[str, Any] = {"plan": plan, "backlog": {n: [] for n in plan.sizes},
                           "latency": {}, "idle": {}, "orders": {}}
    with tempfile.TemporaryDirectory(prefix="juggler-bench-ks-") as tmp, \
            LocalBroker(Path(tmp) / "kafka") as broker:
        work = Path(tmp)
        bootstrap = broker.bootstrap
        queries, classes, expected = {}, {}, {}
        for n in sizes:
            queries[n] = workload_j(n, 0.5).queries
            compiled = [compile_query(q, t, catalog) for q, t in queries[n]]
            orders = kstreams_topology.join_orders(compiled, events[:SAMPLE])
            out["orders"][n] = orders
            classes[n] = kstreams.build(compiled, orders, work / f"java-{n}")
            expected[n] = evaluate(queries[n], events, work / "eval" / str(n))
            log(f"kstreams: n={n}: {len(expected[n].results):,} results expected "
                f"(juggler eval on {len(events):,} events)")
        for repeat in range(plan.repeats):
            log(f"kstreams: repeat {repeat + 1}/{plan.repeats}")
            for n in plan.sizes:
                out["backlog"][n].append(backlog(bootstrap, work, f"b{repeat}n{n}.", queries[n],
                                                 classes[n], events, expected[n], plan, log))
        for n in plan.sizes if plan.latency_seconds > 0 else ():
            runs = out["backlog"][n]
            rate = min(statistics.median(r["worker"]["rate"] for r in runs),
                       statistics.median(r["kstreams"]["rate"] for r in runs)) / 2
            live = list(islice(stream, int(rate * plan.latency_seconds) + 1))
            out["latency"][n] = latency(bootstrap, work, n, queries[n], classes[n], live, rate,
                                        plan, log)
        for n in plan.idle_sizes:
            out["idle"][n] = started_idle(bootstrap, work, n, queries[n], classes[n], events,
                                          expected[n], plan, log)
    return out


# -- the report -----------------------------------------------------------------------


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f}"


def _service_memory(run: dict[str, Any]) -> int:
    """The worker's whole footprint: its process and its results index's."""
    return run["memory"]["process"] + run["memory"]["index"]


class Summary(TypedDict):
    """One query count's row of the report (`summary`)."""

    worker_rate: float
    ks_rate: float
    rate_ratio: float
    worker_mem: float
    index_mem: float
    ks_mem: float
    mem_ratio: float
    worker_start: float
    ks_start: float
    expected: int
    worker_equal: bool
    ks_equal: bool
    worker_late: float
    ks_unequal: list[int]
    runs: int


def summary(out: dict[str, Any]) -> dict[int, Summary]:
    """Per query count: medians of the backlog runs, and per-repeat ratios' medians."""
    rows: dict[int, Summary] = {}
    for n, runs in out["backlog"].items():
        w, k = [r["worker"] for r in runs], [r["kstreams"] for r in runs]
        rows[n] = {
            "worker_rate": _median([x["rate"] for x in w]),
            "ks_rate": _median([x["rate"] for x in k]),
            "rate_ratio": _median([a["rate"] / b["rate"] for a, b in zip(w, k)]),
            "worker_mem": _median([x["memory"]["process"] for x in w]),
            "index_mem": _median([x["memory"]["index"] for x in w]),
            "ks_mem": _median([x["memory"] for x in k]),
            "mem_ratio": _median([_service_memory(a) / b["memory"] for a, b in zip(w, k)]),
            "worker_start": _median([x["startup"] for x in w]),
            "ks_start": _median([x["startup"] for x in k]),
            "expected": w[0]["expected"],
            "worker_equal": all(x["equal"] for x in w),
            "ks_equal": all(x["equal"] for x in k),
            "worker_late": max(x["late"] for x in w),
            "ks_unequal": [x["got"] for x in k if not x["equal"]],
            "runs": len(k),
        }
    return rows


def _equal(unequal: list[int], runs: int, expected: int) -> str:
    """"yes", or in how many runs not, and how many results each of those had."""
    if not unequal:
        return "yes"
    return (f"**no** in {len(unequal)} of {runs} runs ("
            + ", ".join(f"{n:,}" for n in unequal) + f" of {expected:,} results)")


def render(out: dict[str, Any], info: dict[str, Any], command: str) -> str:
    """The `kstreams` section of docs/benchmarks.md."""
    plan: KPlan = out["plan"]
    rows = summary(out)
    lines = [
        "## Peers: Kafka Streams on workload K", "",
        "```",
        "python -m bench.peers --peers kstreams     # K: n=10,100, 20,000 events, 3 repeats",
        "python -m bench.peers --peers kstreams --k-sizes 10 --k-events 5000 --repeats 1",
        "```", "",
        "Needs a JDK (17+, with `javac`) and Maven: Kafka Streams 4.3.1 (the local broker's "
        "version) and Avro come from Maven Central into `~/.cache/juggler/` "
        "(`bench/peers/kstreams-pom.xml`), and `bench/peers/KStreamsPeer.java` is compiled "
        "there with the topology of the run's queries. The command exits 1 if either "
        "side's backlog results differ from `juggler eval`'s.", "",
        f"`{command}` on {info['date']}: {info['nproc']} CPUs (`nproc`), {info['cpu']}, "
        f"commit `{info['commit']}` ({info['tree']}), load average {info['load']} at start "
        f"(shared machine; the broker, the producer and the engine under test share the "
        f"two cores). Workload K's events (J, 50% overlap, {plan.events:,} events, "
        f"{PARTITIONS} partitions per stream topic) on one fresh local broker; "
        f"{plan.repeats} repeat(s), medians, ratios per repeat then the median.", "",
        "**The Kafka Streams application** (`bench/peers/kstreams_topology.py` writes it "
        "from the compiled queries; `KStreamsPeer.java` holds what every query shares) is "
        "what a careful Kafka Streams user would write for these rules: one topology and "
        "one source stream per topic, shared by every query; the records' Avro "
        "single-object encoding decoded once per record, event time from the record's "
        "`ts` (a `TimestampExtractor`), each event's partition and offset kept for the "
        "results; per query, attribute predicates as `filter`s before any join, "
        "KStream-KStream `join`s on the entity key (co-partitioned, no repartition) with "
        "`JoinWindows.ofTimeDifferenceWithNoGrace(MAXWINDOW)`, a query of three streams "
        "as `(x JOIN y) JOIN z` with the pair (x, y) of fewest intermediate results "
        f"(counted on the first {SAMPLE:,} events), and each join or window predicate as a "
        "`filter` right after the join that first holds its streams; results to a topic "
        "as text. `processing.guarantee=exactly_once_v2`, RocksDB window stores with "
        f"changelogs (the defaults), {plan.threads} stream threads, default JVM heap, "
        "`max.task.idle.ms` at its default (0).", "",
        "**Backlog**: the worker with the queries registered takes the events produced in "
        "one transaction (from its commit to the group's commit of the last event); then "
        "Kafka Streams starts on the same topics with the backlog there, timed from "
        "RUNNING to its group's commit of the last event. *start*: Kafka Streams from the "
        "launch to RUNNING (JVM, topology, creating its changelog topics, first "
        "rebalance); the worker from a restart to ready with its queries registered. "
        "*peak MiB*: `VmHWM`, the worker's process + its results index process, and the "
        "Kafka Streams JVM. *equal*: the results as sets of (query, key, ts, source "
        "positions) against `juggler eval` on the same events.", "",
        "| queries | results (eval) | worker ev/s | Kafka Streams ev/s | worker / KS ev/s "
        "| worker peak MiB (+ index) | KS peak MiB | worker / KS memory | worker start s "
        "| KS start s | worker equal | KS equal |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in rows.items():
        lines.append(
            f"| {n:,} | {r['expected']:,} | {r['worker_rate']:,.0f} | {r['ks_rate']:,.0f} | "
            f"{r['rate_ratio']:.1f}x | {_mib(r['worker_mem'])} (+ {_mib(r['index_mem'])}) | "
            f"{_mib(r['ks_mem'])} | {r['mem_ratio']:.2f}x | {r['worker_start']:.1f} | "
            f"{r['ks_start']:.1f} | {'yes' if r['worker_equal'] else '**no**'} | "
            f"{_equal(r['ks_unequal'], r['runs'], r['expected'])} |")
    lines += ["", f"Raw backlog rates (worker, Kafka Streams) per repeat: " + "; ".join(
        f"n={n}: " + ", ".join(f"{r['worker']['rate']:,.0f}/{r['kstreams']['rate']:,.0f}"
                               for r in runs) for n, runs in out["backlog"].items()) + ".", ""]
    if out["latency"]:
        lines += [
            "**Latency**: the same live events to each on fresh topics, one after the other, "
            "at half the lower backlog rate of the two (Kafka Streams'), for "
            f"{plan.latency_seconds:g} s; from the produce call of a result's newest event "
            "to its arrival at a read_committed client.", "",
            "| queries | events/s | worker p50 ms | worker p99 ms | KS p50 ms | KS p99 ms "
            "| KS kept events/s |",
            "|---|---|---|---|---|---|---|",
        ]
        for n, lat in out["latency"].items():
            w, k = lat["worker"], lat["kstreams"]
            lines.append(f"| {n:,} | {lat['rate']:,.0f} | {_ms(w['p50'])} | {_ms(w['p99'])} | "
                         f"{_ms(k['p50'])} | {_ms(k['p99'])} | {k['kept'] or 0:,.0f} |")
        lines.append("")
    if out["idle"]:
        lines += [
            "**Started idle** (semantics 4a): the worker and Kafka Streams both running and "
            "idle on fresh topics, then the same events from one producer per stream, each "
            "topic in its own burst (`kafka_load.produce_per_stream`: B's events in one "
            "transaction, committed, then H's, then T's), once at each engine's defaults "
            "(the worker's `max_idle_ms`, Kafka Streams' `max.task.idle.ms` = 0) and once "
            "with both waiting up to 5 s for a silent topic.", "",
            "| queries | setting | results (eval) | worker results | worker equal "
            "| worker late (dead-lettered) | KS results | KS missing |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for n, runs in out["idle"].items():
            for label, idle in runs.items():
                w, k = idle["worker"], idle["kstreams"]
                share = k["missing"] / k["expected"] if k["expected"] else 0.0
                lines.append(f"| {n:,} | {label} | {w['expected']:,} | {w['got']:,} | "
                             f"{'yes' if w['equal'] else '**no**'} | {w['late']:,.0f} | "
                             f"{k['got']:,} | {k['missing']:,} ({share:.0%}) |")
        lines.append("")
    lines += verdict(out, rows)
    lines += ["", CAVEATS]
    return "\n".join(lines) + "\n"


CAVEATS = (
    'Caveats: the machine is shared, and the load average at the start (above) says '
    "how much else ran; the worker's latency here is not its reference (section K "
    'is). Kafka Streams runs with its defaults but for the settings named above: '
    'under exactly_once_v2 it commits every 100 ms (`commit.interval.ms`), and a '
    'larger interval would trade its latency for throughput; its broker CPU was not '
    'measured in this run.')
"""Under the table: what the figures do not say."""


def verdict(out: dict[str, Any], rows: dict[int, Summary]) -> list[str]:
    """The issue's targets at the largest query count, and what the numbers say."""
    n = max(rows)
    r = rows[n]
    lat = out["latency"].get(n)
    p99 = (lat["worker"]["p99"], lat["kstreams"]["p99"]) if lat else None
    met = {"throughput": r["rate_ratio"] >= 20, "memory": r["mem_ratio"] <= 0.2,
           "p99": p99 is not None and p99[0] < p99[1]}
    word = {True: "**met**", False: "**not met**"}
    lines = [
        f"Targets (at {n} queries): throughput 20x Kafka Streams' or more: "
        f"{r['rate_ratio']:.1f}x, {word[met['throughput']]}; memory at most 0.2x: "
        f"{r['mem_ratio']:.2f}x, {word[met['memory']]}; p99 lower: "
        + (f"{_ms(p99[0])} against {_ms(p99[1])} ms, {word[met['p99']]}." if p99 else
           "not measured."), "",
    ]
    lines += [
        "What the numbers say: Kafka Streams shares nothing between queries but the "
        "source topics: every query's filtered events go into RocksDB window stores of "
        "its own, and each store write is also a changelog record in the EOS "
        "transaction, so its cost grows with the queries times the events that pass "
        "their filters, where the worker evaluates all queries on one shared index per "
        "partition. "
        + ("From a backlog both give exactly `juggler eval`'s results." if all(
            x["worker_equal"] and x["ks_equal"] for x in rows.values()) else
           "From a backlog the results were not all equal (table).")]
    for m, lat in out["latency"].items():
        k = lat["kstreams"]
        if k["kept"] is not None and k["kept"] < KEPT_UP * lat["rate"]:
            lines[-1] += (f" Live at {lat['rate']:,.0f} events/s with {m} queries (half its "
                          f"median backlog rate), Kafka Streams kept up with "
                          f"{k['kept']:,.0f} events/s, and its results came p50 "
                          f"{k['p50']:,.1f} s after their events.")
    for label, *_ in IDLE_SETTINGS:
        runs = {m: r[label] for m, r in out["idle"].items() if label in r}
        if not runs:
            continue
        ks = "; ".join(f"{r['kstreams']['missing']:,} of {r['kstreams']['expected']:,} "
                       f"at {m} queries" for m, r in runs.items())
        worker = ("its results equal to `juggler eval`'s, none late" if all(
            r["worker"]["equal"] and not r["worker"]["late"] for r in runs.values()) else
                  "; ".join(f"{r['worker']['got']:,} of {r['worker']['expected']:,} "
                            f"with {r['worker']['late']:,.0f} events dead-lettered as late "
                            f"at {m} queries" for m, r in runs.items()))
        lines[-1] += (f" Started idle, the bursts one topic after another, {label}: Kafka "
                      f"Streams lost {ks} (silently: only its dropped-records metric says "
                      f"so), the worker had {worker}.")
    if any(r["worker"]["late"] for runs in out["idle"].values() for r in runs.values()):
        lines[-1] += (
            " Where the worker had late events: once `max_idle_ms` passed with a topic "
            "still silent, it took the first topic's burst alone, and with "
            "`allowed_lateness` 0 every later event of the same key was then behind its "
            "key's newest and dead-lettered as late (counted and kept, not silent), where a "
            "Kafka Streams window still takes an event up to a window behind its stream "
            "time, and Kafka Streams, slower, had run less far ahead. The contract (semantics "
            "4a) promises timestamp order only while no partition stays silent longer than "
            "`max_idle_ms`; a silence as long as a whole topic's upload needs a wait that "
            "long (or an `allowed_lateness` that long).")
    return lines


def mismatches(out: dict[str, Any]) -> list[str]:
    """Backlog runs whose results differ from `juggler eval`'s (a failed comparison)."""
    bad = []
    for n, runs in out["backlog"].items():
        for i, r in enumerate(runs):
            for side in ("worker", "kstreams"):
                if not r[side]["equal"]:
                    bad.append(f"K n={n} {side} (repeat {i + 1}): {r[side]['missing']:,} "
                               f"missing, {r[side]['extra']:,} extra")
    return bad
