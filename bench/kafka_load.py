"""Workload K: the worker through a real broker (docs/workloads.md, "K: through Kafka").

    python -m bench.kafka_load [--events 100000] [--repeats 3] [--latency-seconds 20] [--out docs/benchmarks.md]

Starts a fresh local broker, produces workload J (n = 100, 50% overlap) to the stream
topics, and measures in the same run:

- the ceiling: confluent-kafka consuming the stream topics and decoding every record
  into an engine event as the worker does (`Codec.stream_event`: the native decoder)
  (median of the repeats);
- the bare engine on the same events, in this process, called as the worker calls it
  (what evaluation alone costs);
- one worker (`juggler worker`, a child process) with the 100 queries registered:
  events/s on a backlog produced beforehand (one transaction, so it becomes readable
  at once; `_produce`), from its commit to the group's commit covering the last event;
- produce-to-result latency: a sweep of producer rates (fractions of the worker's
  backlog rate), each with the rate the worker kept up and p50/p99, plotted to
  `docs/k_rates.png`; then events produced at half the sustainable rate (the largest
  swept rate kept up with) for a while, each result timed from the produce call of its
  newest source event to its arrival, read_committed, at a client; each run produces
  `MARGIN` seconds more before and after what it times (a stream that goes on);
- scale-out: 1, 2 and 4 workers in one consumer group on the same events (the topics
  have 4 partitions, so 4 workers get one each), events/s per worker count, and
  whether every count published exactly the one worker's results.

Prints the table and writes it into the `K` section of the report (see
`bench.report_sections`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any

from bench import worker_profile
from bench.report_sections import publish
from bench.workloads import workload_j
from juggler.kafka.client_config import client_config

APP_ID = "juggler-bench-k"
PARTITIONS = 4
"""As many as the largest group below: a fifth worker would have nothing to do."""
WORKERS = (1, 2, 4)
SWEEP = (0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 1.0)
"""Producer rates of the sweep, as fractions of one worker's rate on a backlog: live, a
worker takes fewer records per round (each round asks the broker for a clearance and
commits a transaction), so it keeps up with less than its backlog rate."""
KEPT_UP = 0.99
"""A producer rate is sustainable if the worker had committed at least this fraction of
it when the producer finished (the rest: the round and the transaction in flight, well
under 1% of a run at every rate it kept up with). A lower bar counted a worker falling
behind, its latency growing, as keeping up (docs/benchmarks.md, K notes)."""
PACE = 0.001
"""How early `paced` sends an event: the events due within a millisecond go together.
A sleep per event (every 77 us at 13,000 events/s) made the producing process, on the
worker's cores, one of the busiest there."""
MARGIN = 1.0
"""Seconds of events produced untimed before and after each timed live run
(`measure_latency`): what is measured is a stream that goes on, as a deployment's
does, not one that starts from a fresh producer and then stops."""
ENGINE_SHARE, LIVE_SHARE, P99_TARGET = 0.6, 0.7, 0.150
"""The targets: one worker at 0.6 of the bare engine on a backlog; live, keeping up with
0.7 of its backlog rate; p99 under 150 ms at half the sustainable rate."""
READ_BATCH, READ_WAIT = 1000, 0.002
"""The latency reader takes the results that arrived within 2 ms (or a thousand) in
one call and stamps them together: a result's latency is at most 2 ms long, and the
reader, on the worker's cores, makes no Python call per result (docs/benchmarks.md,
K notes: the load generator's own CPU)."""
PLOT = "k_rates.png"
"""The sweep's plot, written beside the report."""
LATENESS_MS = 0
"""The worker's default. Workload J's events are produced in timestamp order and each
task merges its stream partitions by timestamp, so none should be late, backlog or
not; late events are counted and reported (a late event is not evaluated, which would
flatter the worker's rate)."""
ALERT_STREAMS = {"B", "H"}

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka_load",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000,
                        help="events of workload J in the throughput runs: a backlog "
                             "long enough that the fixed waits of its first and last "
                             "records (semantics 4a's idle wait, 0.5 s each) weigh little")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-seconds", type=float, default=20.0)
    parser.add_argument("--sweep-seconds", type=float, default=10.0,
                        help="per producer rate of the sweep (0: no sweep)")
    parser.add_argument("--out", default="docs/benchmarks.md", help="report ('-': none)")
    args = parser.parse_args(argv)

    from juggler.kafka.broker import LocalBroker

    workload = workload_j(100, 0.5)
    stream = _with_alerts(workload.events())
    throughput_events = list(islice(stream, args.events))
    later = stream  # the latency runs go on from there, taking what they need
    log(f"K: J n=100 50% overlap, {args.events} events, {args.repeats} repeats")
    with tempfile.TemporaryDirectory(prefix="juggler-bench-k-") as tmp, \
            LocalBroker(Path(tmp) / "kafka") as broker:
        bootstrap = broker.bootstrap
        rows = measure_all(bootstrap, Path(tmp), workload.queries, throughput_events,
                           later, args)
    if rows["sweep"] and args.out != "-":
        plot(rows["sweep"], Path(args.out).parent / PLOT)
    publish(render(rows, args), args.out, "K")
    return 0


def measure_all(bootstrap: str, workdir: Path, queries: list[tuple[str, str]],
                events: list[Any], later: Iterator[Any],
                args: argparse.Namespace) -> dict[str, Any]:
    from juggler.launcher import WorkerProcess

    ceilings, engines, workers, lates = [], [], [], []
    profiles: list[dict[str, Any]] = []
    latency: dict[str, Any] = {}
    for repeat in range(args.repeats):
        # each repeat produces the same events to fresh topics (its own prefix)
        worker = WorkerProcess({"bootstrap": bootstrap, "app_id": f"{APP_ID}-{repeat}",
                                "web_port": _free_port(), "web_host": "127.0.0.1",
                                "allowed_lateness": LATENESS_MS, "loglevel": "warning",
                                "topic_prefix": f"r{repeat}.", "partitions": PARTITIONS},
                               workdir / f"worker-{repeat}.log")
        with worker:
            _register(bootstrap, f"r{repeat}.", queries)
            _wait_registered(worker, len(queries))
            _, elapsed, profile = timed_backlog(bootstrap, worker, f"r{repeat}.",
                                                f"{APP_ID}-{repeat}", events)
            workers.append(len(events) / elapsed)
            profiles.append(profile)
            late = _metric(worker, "juggler_late_events_total")
            lates.append(late)
            log(f"  repeat {repeat + 1}: worker {workers[-1]:,.0f} ev/s ({late:.0f} late)")
            ceilings.append(ceiling(bootstrap, f"r{repeat}.", len(events)))
            log(f"  repeat {repeat + 1}: ceiling {ceilings[-1]:,.0f} ev/s")
            engines.append(bare_engine(queries, events)[0])
            log(f"  repeat {repeat + 1}: bare engine {engines[-1]:,.0f} ev/s")
            if repeat == args.repeats - 1:
                sweep = [measure_latency(bootstrap, f"r{repeat}.", later, queries,
                                         f * statistics.median(workers), args.sweep_seconds,
                                         committed=f"{APP_ID}-{repeat}", margin=MARGIN)
                         for f in SWEEP] if args.sweep_seconds > 0 else []
                rate = sustainable(sweep, statistics.median(workers)) / 2
                before, t0 = worker_profile.snapshot(worker), time.perf_counter()
                latency = measure_latency(bootstrap, f"r{repeat}.", later, queries, rate,
                                          args.latency_seconds, margin=MARGIN)
                latency["profile"] = worker_profile.profile(
                    before, worker_profile.snapshot(worker), latency["events"],
                    time.perf_counter() - t0)
                latency["late"] = _metric(worker, "juggler_late_events_total") - late
    groups = {n: measure_group(bootstrap, workdir, queries, events, n) for n in WORKERS}
    reference = groups[1]["results"]
    for row in groups.values():
        row["equal"] = row["results"] == reference
        log(f"  {row['workers']} worker(s): {row['rate']:,.0f} ev/s, "
            f"{sum(row['results'].values()):,} results, equal to one worker's: {row['equal']}")
    median = sorted(range(len(workers)), key=workers.__getitem__)[len(workers) // 2]
    return {"ceiling": statistics.median(ceilings), "engine": statistics.median(engines),
            "worker": statistics.median(workers), "latency": latency, "late": max(lates),
            "profile": profiles[median],
            "sweep": sweep, "groups": groups,
            "raw": {"ceiling": ceilings, "engine": engines, "worker": workers}}


def sustainable(sweep: list[dict[str, Any]], backlog_rate: float) -> float:
    """The largest swept producer rate the worker kept up with: where the issue's "half
    the sustainable rate" is measured from. Without a sweep, the backlog rate."""
    if not sweep:
        return backlog_rate
    return max((r["rate"] for r in sweep if r["kept"] >= KEPT_UP * r["rate"]),
               default=sweep[0]["rate"])


def measure_group(bootstrap: str, workdir: Path, queries: list[tuple[str, str]],
                  events: list[Any], count: int) -> dict[str, Any]:
    """`count` workers in one group on fresh topics: events/s on a backlog made
    readable at once (`_produce`), to the group's commit covering the last event, and
    the results published."""
    from contextlib import ExitStack

    from juggler.launcher import WorkerProcess

    prefix, app_id = f"g{count}.", f"{APP_ID}-group-{count}"
    with ExitStack() as stack:
        workers = [stack.enter_context(WorkerProcess(
            {"bootstrap": bootstrap, "app_id": app_id, "web_port": _free_port(),
             "web_host": "127.0.0.1", "allowed_lateness": LATENESS_MS,
             "loglevel": "warning", "topic_prefix": prefix, "partitions": PARTITIONS},
            workdir / f"group-{count}-{i}.log")) for i in range(count)]
        _wait_assigned(workers)
        _register(bootstrap, prefix, queries)
        for worker in workers:
            _wait_registered(worker, len(queries))
        positions, t0 = _produce(bootstrap, prefix, events)
        _wait_committed(bootstrap, app_id, positions)
        rate = len(events) / (time.perf_counter() - t0)
        late = sum(_metric(w, "juggler_late_events_total") for w in workers)
    return {"workers": count, "rate": rate, "late": late,
            "results": _results(bootstrap, prefix)}


def timed_backlog(bootstrap: str, worker: Any, prefix: str, group: str, events: list[Any],
                  where: list[Any] | None = None) -> tuple[float, float, dict[str, Any]]:
    """`events` as a backlog (`_produce`) through `worker` of consumer group `group`:
    when it became readable (`perf_counter`), the seconds from then to the group's
    commit covering its last event, and the worker's profile over them
    (`worker_profile`), read once its counters count every event. `where`: as
    `_produce`'s."""
    positions, t0 = _produce(bootstrap, prefix, events, where)
    before = worker_profile.snapshot(worker)  # the backlog is readable from t0
    _wait_committed(bootstrap, group, positions)
    elapsed = time.perf_counter() - t0
    _counted(worker, len(events))
    return t0, elapsed, worker_profile.profile(before, worker_profile.snapshot(worker),
                                               len(events), elapsed)


def _wait_assigned(workers: list[Any], timeout: float = 120.0) -> None:
    """Until the group's rebalances are over: every partition owned, and restored."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        owned: list[int | None] = []  # None: a worker not answering 200 yet
        for worker in workers:
            status, body = worker.get("/health")
            owned += body["partitions"] if status == 200 else [None]
        if sorted(owned, key=str) == list(range(PARTITIONS)):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the group did not settle in {timeout:g} s")


def _results(bootstrap: str, prefix: str, flagged: Counter[tuple[Any, ...]] | None = None
             ) -> Counter[tuple[Any, ...]]:
    """Every committed result on the shared results topic, as (query, key, ts, sources
    without the topic prefix): what a worker count must publish identically. With
    `flagged`: also counts there, by the same identity, the copies that carry the Faust
    runtime's `juggler-may-repeat: 1` header (`bench.faust_load`'s SIGKILL run)."""
    from juggler.codec.avro import RESULT, Codec

    codec = Codec()
    out: Counter[tuple[Any, ...]] = Counter()
    for msg in committed_records(bootstrap, f"{prefix}juggler.results"):
        r = codec.decode(RESULT, msg.value())
        identity = (r["query"], r["key"], r["ts"], tuple(sorted(
            (s, p["topic"].removeprefix(prefix), p["partition"], p["offset"])
            for s, p in r["sources"].items())))
        out[identity] += 1
        if flagged is not None and dict(msg.headers() or ()).get("juggler-may-repeat") == b"1":
            flagged[identity] += 1
    return out


def committed_records(bootstrap: str, topic: str, partitions: int = PARTITIONS
                      ) -> Iterator[Any]:
    """Every committed record of `topic` up to its log ends as of now (read_committed).
    An empty partition gives a consumer no position to compare, so it is not read; nor,
    after 5 s with nothing, one that ends in records of an aborted transaction. A
    partition whose log no longer starts at 0 is read from its start (librdkafka's
    default would have skipped to the end, reading nothing)."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    from juggler.kafka.offsets import log_ends

    ends = log_ends(AdminClient(client_config(bootstrap)), [(topic, p) for p in range(partitions)])
    parts = [p for p in range(partitions) if ends[(topic, p)] > 0]
    consumer = Consumer(client_config(bootstrap, {
        "group.id": f"results-{time.time()}", "isolation.level": "read_committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "log_level": 0}))
    consumer.assign([TopicPartition(topic, p, 0) for p in parts])
    quiet = 0
    try:
        while quiet < 5 and any(tp.offset < ends[(topic, tp.partition)] for tp in
                                consumer.position([TopicPartition(topic, p) for p in parts])):
            messages = consumer.consume(1000, timeout=1.0)
            quiet = 0 if messages else quiet + 1
            for msg in messages:
                if msg.error() is None:
                    yield msg
    finally:
        consumer.close()


def ceiling(bootstrap: str, prefix: str, count: int, streams: Iterable[str] = ("B", "H", "T"),
            partitions: int = PARTITIONS) -> float:
    """confluent-kafka consume + the worker's decode of every stream record."""
    from confluent_kafka import Consumer, TopicPartition

    from juggler.codec.avro import Codec

    codec = Codec()
    consumer = Consumer(client_config(bootstrap, {
        "group.id": f"ceiling-{time.time()}", "enable.auto.commit": False, "log_level": 0,
        "fetch.max.bytes": 52_428_800}))
    topics = {f"{prefix}juggler.stream.{s}": s for s in streams}
    consumer.assign([TopicPartition(t, p, 0) for t in topics for p in range(partitions)])
    seen = 0
    t0 = time.perf_counter()
    try:
        while seen < count:
            for msg in consumer.consume(1000, timeout=1.0):
                if msg.error() is None:
                    topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                    # set on every message without an error; confluent-kafka's stubs make
                    # them optional
                    assert topic is not None and partition is not None and offset is not None
                    codec.stream_event(topics[topic], msg.key(), msg.value(), topic, partition,
                                       offset)
                    seen += 1
        return seen / (time.perf_counter() - t0)
    finally:
        consumer.close()


def bare_engine(queries: list[tuple[str, str]], events: list[Any]) -> tuple[float, float]:
    """The engine alone, called as the worker calls it (one engine; the worker has one
    per partition): (events/s, results per event). The events are first encoded and
    decoded by the worker's codec with Kafka positions, outside the timing, and then
    evaluated `batch_max` at a time by `process_batch_encoded`, which writes each
    result's Avro body in Rust. `process` one event at a time built a Python `Result`
    per result instead, a path the worker does not take (a tenth of the instructions
    on K), so the worker's share of it was measured against a slower engine."""
    from juggler.codec.avro import Codec
    from juggler.codec.bounded import result_budget
    from juggler.engine.events import EngineConfig, LateEvent
    from juggler.engine.native_engine import NativeEngine
    from juggler.wire.names import stream_topic
    from juggler.language import compile_query
    from juggler.runtime.settings import Settings

    codec = Codec()
    offsets: Counter[str] = Counter()
    decoded = []
    for event in events:
        topic = stream_topic(event.stream)
        decoded.append(codec.stream_event(
            event.stream, event.key.encode(), codec.encode(event.stream, {"ts": event.ts, **event.data}),
            topic, 0, offsets[topic]))
        offsets[topic] += 1
    engine = NativeEngine(EngineConfig(allowed_lateness=LATENESS_MS))
    for query_id, text in queries:
        engine.register(compile_query(query_id, text, codec.catalog()))
    batch, results = Settings.batch_max, 0
    budget = result_budget(codec, Settings.max_record_bytes)  # the worker's
    t0 = time.perf_counter()
    for i in range(0, len(decoded), batch):
        for outcome in engine.process_batch_encoded(decoded[i:i + batch], budget):
            results += 0 if isinstance(outcome, LateEvent) else len(outcome)
    return len(decoded) / (time.perf_counter() - t0), results / len(decoded)


def measure_latency(bootstrap: str, prefix: str, events: Iterable[Any],
                    queries: list[tuple[str, str]], rate: float,
                    seconds: float, committed: str | None = None,
                    results: tuple[str, Callable[[bytes], list[tuple[str, int, int]]]]
                    | None = None, sender: Any = None, margin: float = 0.0
                    ) -> dict[str, Any]:
    """Produce at `rate` events/s for `seconds`; time each result from the produce call
    of its newest source event to its arrival at a read_committed client. `margin`:
    seconds produced at the same rate before and after those, whose results are not
    timed, so that the timed ones come from a stream that goes on: without them, the
    first second's results waited for the fresh producer's connection, and the last
    events' for the partitions that had stopped (semantics 4a's idle wait), and those
    edges decided the p99 (docs/benchmarks.md, K notes). With
    `committed` (the worker's group): also the rate the worker kept up, the events its
    group had committed when the producer finished over the time the producer ran.
    `results`: another application's results topic and how to read a result's source
    positions from its value (default: the worker's, Avro `juggler.Result`).
    `sender`: what produces the events instead of one `EventProducer` at librdkafka's
    defaults, as a user's producer runs (linger 5 ms: at 13,000 events/s on K, linger 0
    sent them in many more, smaller requests, and the broker's CPU for those, on the
    worker's two cores, took the worker's p99 from 87-93 to 131-325 ms): anything with
    its `send`, `flush` and `last_offsets` (`bench.latency_defaults` sends from a
    producer per stream, each with its own linger and clock). Without one,
    the run's events are encoded before it starts (`EventProducer.frame`): the load generator
    shares the worker's two cores, and what it spends while the worker is measured is
    taken from the worker (docs/benchmarks.md, K notes)."""
    from confluent_kafka import Consumer, TopicPartition

    from juggler.codec.avro import Codec
    from juggler.kafka.group_progress import GroupProgress
    from juggler.kafka.producer import EventProducer

    codec = Codec()
    produced_at: dict[tuple[str, int, int], float] = {}
    sent_at: dict[int, float] = {}
    latencies: list[float] = []
    consumer = Consumer(client_config(bootstrap, {
        "group.id": f"latency-{time.time()}", "isolation.level": "read_committed",
        "enable.auto.commit": False, "log_level": 0}))
    results_topics = [results[0] if results else f"{prefix}juggler.results"]  # all queries
    ends = {}
    for topic in results_topics:
        for p in range(PARTITIONS):
            ends[(topic, p)] = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                              timeout=10)[1]
    consumer.assign([TopicPartition(t, p, ends[(t, p)]) for t, p in ends])
    stop = threading.Event()

    received: list[tuple[float, bytes | None]] = []

    def read() -> None:
        # only the arrival time here: the results are decoded after the run. Decoding
        # each one before taking the next (a Python Avro decode, on a GIL shared with
        # the producer below) timestamped a burst of results at the reader's pace: at
        # 1,400 events/s on K up to ~100 ms of the p99 was this reader's own backlog
        # (against a bare read_committed consumer in a process of its own)
        while not stop.is_set():
            batch = consumer.consume(READ_BATCH, READ_WAIT)
            now = time.perf_counter()
            received.extend((now, m.value()) for m in batch if m.error() is None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    total = seconds + 2 * margin
    producer = sender or EventProducer(bootstrap, codec, prefix=prefix)
    if sender is None:
        events = [producer.frame(e.stream, e.key, e.ts, e.data)
                  for e in islice(events, int(rate * total) + 1)]

        def send(item: Any, delivered: Callable[[tuple[str, int, int]], None]) -> None:
            topic, key, value = item
            producer.send_raw(topic, key, value, delivered)
    else:
        def send(item: Any, delivered: Callable[[tuple[str, int, int]], None]) -> None:
            sender.send(item.stream, item.key, item.ts, item.data, delivered)

    t0, cpu0 = time.perf_counter(), time.process_time()
    timed = (t0 + margin, t0 + margin + seconds)
    count = 0
    for i, event in paced(events, rate, total):
        sent_at[i] = time.perf_counter()

        def delivered(pos: tuple[str, int, int], i: int = i) -> None:
            # runs on this thread (in poll/flush), and the reader no longer reads
            # produced_at while the run lasts: no lock
            produced_at[pos] = sent_at[i]

        send(event, delivered)
        count += 1
    producer.flush()
    kept = None
    if committed is not None:
        # what the worker processed while the producer ran: timing to the commit of the
        # last event instead counted the last records' idle wait (semantics 4a), up to a
        # second, against the worker's rate
        produced = time.perf_counter() - t0
        with GroupProgress(bootstrap, committed) as progress:
            kept = (count - progress.behind(producer.last_offsets)) / produced
        _wait_committed(bootstrap, committed, producer.last_offsets)
    time.sleep(5.0)  # results of the last events
    stop.set()
    reader.join(5)
    consumer.close()
    client_cpu = time.process_time() - cpu0  # what producing and reading took here
    def sources(value: bytes) -> list[tuple[str, int, int]]:
        return [(s["topic"], s["partition"], s["offset"])
                for s in codec.decode("juggler.Result", value)["sources"].values()]

    for arrived, value in received:
        assert value is not None  # a result always has a body: no tombstones on a results topic
        positions = (results[1] if results else sources)(value)
        if positions and all(s in produced_at for s in positions):
            newest = max(produced_at[s] for s in positions)
            if timed[0] <= newest < timed[1]:
                latencies.append(arrived - newest)
    ordered = sorted(latencies)
    p50, p99 = _quantile(ordered, 0.5), _quantile(ordered, 0.99)
    log(f"  at {rate:,.0f} ev/s: p50 {p50 * 1000:,.0f} ms, p99 {p99 * 1000:,.0f} ms"
        + (f", kept {kept:,.0f} ev/s" if kept else ""))
    return {"rate": rate, "events": count, "results": len(ordered), "kept": kept,
            "p50": p50, "p99": p99, "client_cpu": client_cpu}


def paced(events: Iterable[Any], rate: float, seconds: float) -> Iterator[tuple[int, Any]]:
    """`events` with their indexes, each when it is due at `rate` per second from now
    (up to `PACE` early), for `seconds`."""
    t0 = time.perf_counter()
    for i, event in enumerate(events):
        due = t0 + i / rate
        if due - t0 > seconds:
            return
        while (wait := due - time.perf_counter()) > PACE:
            time.sleep(min(wait, 0.01))
        yield i, event


def plot(sweep: list[dict[str, Any]], path: Path) -> None:
    """Throughput kept and latency percentiles against the producer's rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = [r["rate"] for r in sweep]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(7, 6))
    top.plot(rates, [r["kept"] for r in sweep], "o-", label="worker (events/s kept)")
    top.plot(rates, rates, ":", color="grey", label="producer's rate")
    top.set_ylabel("events/s")
    top.legend()
    top.set_title("K: one worker, J n=100 (50% overlap), producer-rate sweep")
    for q in ("p50", "p99"):
        bottom.plot(rates, [r[q] * 1000 for r in sweep], "o-", label=q)
    bottom.axhline(P99_TARGET * 1000, color="grey", linestyle=":",
                   label=f"p99 target ({P99_TARGET * 1000:g} ms)")
    bottom.set_yscale("log")
    bottom.set_ylabel("produce to result (ms)")
    bottom.set_xlabel("producer's rate (events/s)")
    bottom.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    log(f"plot: {path}")


def render(rows: dict[str, Any], args: argparse.Namespace) -> str:
    lat = rows["latency"]
    c, e, w = rows["ceiling"], rows["engine"], rows["worker"]
    lines = [
        "## K: through Kafka (the service)",
        "",
        f"`python -m bench.kafka_load --events {args.events} --repeats {args.repeats}` on "
        f"{_machine()}: workload J (n = 100, 50% overlap) produced to a fresh local broker "
        f"({PARTITIONS} partitions per stream topic), medians of {args.repeats} repeats.",
        "",
        "| measurement | events/s | fraction of the ceiling |",
        "|---|---|---|",
        f"| ceiling: confluent-kafka consume + the worker's Avro decode | {c:,.0f} | 1 |",
        f"| bare engine, same events, in process, as the worker calls it (no Kafka) "
        f"| {e:,.0f} | {e / c:.3g} |",
        f"| one worker: consume, decode, evaluate, publish, commit | {w:,.0f} | {w / c:.3g} |",
        "",
        f"Worker / bare engine: **{w / e:.2f}**. Target {ENGINE_SHARE:g} or more: "
        f"**{'met' if w >= ENGINE_SHARE * e else 'not met'}**. Late events in a throughput run "
        f"(allowed lateness {LATENESS_MS} ms; each is dead-lettered, not evaluated): at most "
        f"{rows['late']:.0f}.",
        "",
    ]
    if lat:
        lines += [
            f"Latency from produce to result at a read_committed client (one producer at "
            f"librdkafka's defaults, linger 5 ms), producing at half "
            f"the sustainable rate (the sweep's largest rate kept up with, at least "
            f"{KEPT_UP:g} of it: {lat['rate']:,.0f} events/s) for {args.latency_seconds:g} s "
            f"timed, with {MARGIN:g} s untimed before and after "
            f"({lat['events']:,} events, {lat['results']:,} results timed, "
            f"{lat.get('late', 0):.0f} late events): **p50 {lat['p50'] * 1000:,.0f} ms, "
            f"p99 {lat['p99'] * 1000:,.0f} ms**; the benchmark's producer and reader took "
            f"{lat['client_cpu']:.1f} CPU-seconds on the same cores meanwhile. "
            f"Target p99 < {P99_TARGET * 1000:g} ms: "
            f"**{'met' if lat['p99'] < P99_TARGET else 'not met'}**. (A selection query's "
            "latency with live producers is section \"Latency defaults\": K's events keep "
            "workload J's timestamps, so live they are a replay at a rate, whose idle "
            "partitions are waited for `max_idle_ms`, semantics 4a.)",
            "",
        ]
    if rows["sweep"]:
        kept = sustainable(rows["sweep"], w) / w
        lines += [
            f"Live, the worker kept up with {kept:.2f} of its backlog rate (the sweep's "
            f"largest rate kept up with): target {LIVE_SHARE:g} or more: "
            f"**{'met' if kept >= LIVE_SHARE else 'not met'}**.",
            "",
        ]
        lines += [
            f"Producer-rate sweep ({args.sweep_seconds:g} s timed per rate, {MARGIN:g} s "
            f"more before and after, one worker; ![plot]({PLOT})):",
            "",
            "| producer events/s | fraction of the worker's backlog rate | worker kept events/s "
            "| p50 ms | p99 ms |",
            "|---|---|---|---|---|",
        ]
        lines += [f"| {r['rate']:,.0f} | {f:g} | {r['kept']:,.0f} | {r['p50'] * 1000:,.0f} | "
                  f"{r['p99'] * 1000:,.0f} |" for f, r in zip(SWEEP, rows["sweep"])]
        lines.append("")
    groups = rows["groups"]
    lines += [
        f"Scale-out: workers in one group on the same events ({PARTITIONS} partitions; "
        f"{_machine()} shared with the broker and the producer):",
        "",
        "| workers | events/s | x one worker | results | equal to one worker's | late |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {n} | {g['rate']:,.0f} | {g['rate'] / groups[1]['rate']:.2f} | "
              f"{sum(g['results'].values()):,} | {'yes' if g['equal'] else '**no**'} | "
              f"{g['late']:.0f} |" for n, g in groups.items()]
    lines.append("")
    lines.append(f"Raw: {', '.join(f'{k} {[round(x) for x in v]}' for k, v in rows['raw'].items())}.")
    lines += ["", "### Where the time goes (`bench.worker_profile`)", "",
              "**The backlog** (the repeat with the median rate):", "",
              *worker_profile.render(rows["profile"])]
    if lat.get("profile"):
        lines += ["", f"**Live at {lat['rate']:,.0f} events/s** (the latency run above, "
                      "until its last results arrived):", "",
                  *worker_profile.render(lat["profile"])]
    return "\n".join(lines) + "\n"


def _with_alerts(events: Iterator[Any]) -> Iterator[Any]:
    """J's events carry only the numeric columns; the Avro schemas also have `alert`."""
    for event in events:
        if event.stream in ALERT_STREAMS:
            event.data["alert"] = False
        yield event


def _register(bootstrap: str, prefix: str, queries: list[tuple[str, str]]) -> None:
    from juggler.client.control import submit
    from juggler.wire.commands import RegisterCommand

    for query_id, text in queries:
        submit(bootstrap, RegisterCommand(query_id, text), wait=False, prefix=prefix)


def _wait_registered(worker: Any, count: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = worker.get("/queries")
        if status == 200 and len(body["queries"]) >= count:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the worker did not register {count} queries in {timeout:g} s")


def _produce(bootstrap: str, prefix: str, events: list[Any], where: list[Any] | None = None
             ) -> tuple[dict[tuple[str, int], int], float]:
    """Every event in one transaction: the last offset per topic partition, and the
    `perf_counter` time when the transaction committed. With `where` (a list as long
    as `events`): each event's (topic, partition, offset) is put at its index.

    Why one transaction: workload K (docs/workloads.md) times a backlog produced to the
    broker beforehand, and the worker reads read_committed, so the whole backlog becomes
    readable at once when the transaction commits, and the worker's time starts there.
    Producing while the worker ran timed the producer too (0.6 s of 3.4 s for 20,000
    events), and the worker, fetching a backlog still being written, could take nothing
    before every partition's log end stopped moving (semantics 4a)."""
    from juggler.codec.avro import Codec
    from juggler.kafka.producer import EventProducer

    producer = EventProducer(bootstrap, Codec(), prefix=prefix,
                             **{"transactional.id": f"bench-{prefix}-{time.time()}"})
    producer.producer.init_transactions(30)
    producer.producer.begin_transaction()
    for i, event in enumerate(events):
        producer.send(event.stream, event.key, event.ts, event.data,
                      None if where is None else partial(where.__setitem__, i))
    producer.flush()
    producer.producer.commit_transaction(60)
    return producer.last_offsets, time.perf_counter()


def produce_per_stream(bootstrap: str, prefix: str, events: list[Any]) -> list[Any]:
    """`events` from one producer per stream, each topic in its own burst: the first
    stream's producer writes all of that stream's events (in their order) in one
    transaction and commits, then the next stream's, and so on. Each burst becomes
    readable at once, a moment after the one before: a topic's whole backlog is there
    while the next topic's is not yet, as when devices upload their logs one after
    another. Each event's (topic, partition, offset), by index."""
    from juggler.codec.avro import Codec
    from juggler.kafka.producer import EventProducer

    codec = Codec()
    where: list[Any] = [None] * len(events)
    for stream in sorted({e.stream for e in events}):
        producer = EventProducer(bootstrap, codec, prefix=prefix, **{
            "transactional.id": f"bench-{prefix}{stream}-{time.time()}"})
        producer.producer.init_transactions(30)
        producer.producer.begin_transaction()
        for i, event in enumerate(events):
            if event.stream == stream:
                producer.send(stream, event.key, event.ts, event.data,
                              partial(where.__setitem__, i))
        producer.flush()
        producer.producer.commit_transaction(60)
    return where


def last_offsets(where: Iterable[tuple[str, int, int]]) -> dict[tuple[str, int], int]:
    """The last offset per (topic, partition) among positions."""
    last: dict[tuple[str, int], int] = {}
    for topic, partition, offset in where:
        last[(topic, partition)] = max(offset, last.get((topic, partition), -1))
    return last


def _wait_committed(bootstrap: str, group: str, last: dict[tuple[str, int], int],
                    timeout: float = 3600.0) -> None:
    from juggler.kafka.group_progress import GroupProgress

    with GroupProgress(bootstrap, group) as progress:
        if not progress.wait(last, timeout, interval=0.05):
            raise RuntimeError("the worker did not catch up")


def _counted(worker: Any, events: int, timeout: float = 60.0) -> None:
    """Until the worker's metrics count `events` consumed events. A round's counts reach
    the metrics once its transaction's callbacks run on the worker's loop, a moment
    after the group's offsets show it committed: read earlier, the counters missed the
    last rounds (up to 14% of S's results)."""
    deadline = time.monotonic() + timeout
    while _metric(worker, "juggler_events_in_total") < events:
        if time.monotonic() > deadline:
            raise RuntimeError("the worker's metrics did not count every event")
        time.sleep(0.05)


def _metric(worker: Any, name: str) -> float:
    _, text = worker.get("/metrics")
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name))


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


def _free_port() -> int:
    from juggler.kafka.broker import free_port

    return free_port()


def _machine() -> str:
    import os
    import platform

    return f"{os.cpu_count()} x {platform.processor() or platform.machine()}"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
