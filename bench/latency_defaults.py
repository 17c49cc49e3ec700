"""Latency against late events: what the worker's idle wait costs and buys (docs/benchmarks.md, "Latency defaults").

    python -m bench.latency_defaults [--seconds 15] [--repeats 3] [--rate 100] [--out docs/benchmarks.md]

A task takes its stream partitions' records in `ts` order, and waits for an idle
partition before it lets a record go past it (docs/worker.md, "Arrival order"): the
wait is what a quiet alert's latency is made of, and what keeps events from being
late. This measures both, live, for each worker setting in `CONFIGS` (`max_idle_ms`,
`idle_estimate`, `allowed_lateness`), on a fresh local broker, 4 partitions:

- the query: one selection query on H (`QUERIES["selection"]`), or a join of H and T
  (`QUERIES["join"]`, the multi-stream case: its results need both streams' events in
  order); one worker per setting and query, nothing else registered;
- the producers, `--rate` events/s of B, H and T over 16 keys (K is never written), each
  event stamped with its producer's clock when sent: either one producer for every
  stream (librdkafka's default linger, 5 ms, the worker's clock), or one independent
  producer per stream, each with its own linger and its clock off the worker's by its
  own offset (`PER_STREAM`: one behind, one ahead);
- after `WARMUP` seconds of events (connections, the first waits for K and for
  partitions not yet measured), `--seconds` of events whose results are timed from the
  produce call of their newest source event to their arrival at a read_committed client
  (`kafka_load.measure_latency`, with this module's producers as its sender);
- late events: the worker's `juggler_late_events_total` over the run; missing results:
  what `juggler eval`'s engine gives on the same events in `ts` order (every result
  exact, none late) and the worker did not publish.

Settings alternate in order between repeats; the table gives medians of p50/p99 over
the repeats, and late events and missing results summed over them. Written into the
`latency` section of the report (`bench.report_sections`).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import worker_profile
from bench.kafka_load import (_free_port, _machine, _metric, _results, log,
                               measure_latency, paced)
from bench.kafka_selection import register
from bench.report_sections import publish

PARTITIONS = 4
KEYS = 16
WARMUP = 4.0
"""Seconds of events before the timed ones: connections, and K, never written, waited
for `max_idle_ms` once."""
ESTIMATE_WARMUP = 65.0
"""With the delay estimate on: longer than its window (a minute), so that what the
producers' and the worker's first moments cost (a new producer's first records came
over 100 ms after their `ts`) no longer holds the waits up: the table is the steady
state. The first minute after a worker or a producer starts waits longer."""
TIMESTAMP_TYPE = "timestamp_type"
"""Not a worker setting: the stream topics' `message.timestamp.type` set after the worker
created them (its topics are `LogAppendTime`, `topics/streams.yaml`): with `CreateTime`
the worker measures a partition's delay at its fetches, its own fetch lag included."""
CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("`max_idle_ms` 0", {"max_idle_ms": 0, "idle_estimate": False}),
    ("`max_idle_ms` 50", {"max_idle_ms": 50, "idle_estimate": False}),
    ("`max_idle_ms` 500, no estimate",
     {"max_idle_ms": 500, "idle_estimate": False}),
    ("**default**: `max_idle_ms` 500 + estimate, margin 20, stream topics on "
     "`LogAppendTime`", {}),
    ("`max_idle_ms` 0, `allowed_lateness` 100",
     {"max_idle_ms": 0, "idle_estimate": False, "allowed_lateness": 100}),
    ("default + `allowed_lateness` 50", {"allowed_lateness": 50}),
    ("default, stream topics on `CreateTime` (the default before)",
     {TIMESTAMP_TYPE: "CreateTime"}),
]
DEFAULT = 3
"""The row of `CONFIGS` the worker runs with no setting given."""
QUERIES = {
    "selection": ("alert", "SELECT * FROM H WHERE H.beatrate > 90"),
    "join": ("pair", "SELECT H.beatrate, T.fluct FROM H, T WHERE H.vib > T.fluct "
                     "MAXWINDOW 1 sec"),
}
PER_STREAM = {"B": (0, -40), "H": (5, 0), "T": (20, 25)}
"""Stream -> (linger ms, clock offset ms) of its own producer: B's clock 40 ms behind
the worker's, T's 25 ms ahead (and batching for 20 ms)."""
PRODUCERS: dict[str, dict[str, tuple[int, int]] | None] = {
    "one": None, "per stream": PER_STREAM}


@dataclass
class Sent:
    """What a sender delivered: (stream, key, ts, data, (topic, partition, offset))."""

    events: list[tuple[str, str, int, dict[str, Any], tuple[str, int, int]]] = \
        field(default_factory=list)


class LiveProducers:
    """Live sources for `kafka_load.measure_latency`: each event is stamped with its
    producer's clock when sent (the worker's, plus the producer's offset), and goes
    out through its stream's producer (one for all with `profiles` None). Looks like
    the one `EventProducer` measure_latency would use (`send`, `flush`,
    `last_offsets`)."""

    def __init__(self, bootstrap: str, prefix: str,
                 profiles: dict[str, tuple[int, int]] | None, sent: Sent) -> None:
        from juggler.codec.avro import Codec
        from juggler.kafka.producer import EventProducer

        codec = Codec()
        self.prefix = prefix
        self.sent = sent
        if profiles is None:
            one = EventProducer(bootstrap, codec, prefix=prefix)  # librdkafka's linger: 5 ms
            self.by_stream = dict.fromkeys(codec.stream_names(), one)
            self.offsets = dict.fromkeys(codec.stream_names(), 0)
        else:
            self.by_stream = {s: EventProducer(bootstrap, codec, prefix=prefix,
                                               **{"linger.ms": linger})
                              for s, (linger, _) in profiles.items()}
            self.offsets = {s: offset for s, (_, offset) in profiles.items()}
        self.producers = list({id(p): p for p in self.by_stream.values()}.values())
        self._connect(bootstrap, prefix)

    def _connect(self, bootstrap: str, prefix: str) -> None:
        """What a live source has done long before: its connections, the stream
        topics' metadata, and (idempotent producers) its producer id, which it asks
        at its first record. Asked here by a record to a topic of its own, else the
        first events trail their `ts` by half a second, and a partition's delay is the
        largest of the last minute."""
        from confluent_kafka.admin import AdminClient, NewTopic

        from juggler.kafka.client_config import client_config

        topic = f"{prefix}bench.connect"
        admin = AdminClient(client_config(bootstrap))
        for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            try:
                future.result(30)
            except Exception:  # noqa: BLE001 - already there (the second sender)
                pass
        for stream, p in self.by_stream.items():
            p.producer.list_topics(p.topic(stream), timeout=30)
        for p in self.producers:
            p.send_raw(topic, b"connect", b"")
            p.flush()

    def send(self, stream: str, key: str, ts: int, data: dict[str, Any],
             on_delivery: Any = None) -> None:
        ts = int(time.time() * 1000) + self.offsets[stream]

        def delivered(pos: tuple[str, int, int]) -> None:
            self.sent.events.append(
                (stream, key, ts, data, (pos[0].removeprefix(self.prefix), *pos[1:])))
            if on_delivery is not None:
                on_delivery(pos)

        self.by_stream[stream].send(stream, key, ts, data, delivered)

    def flush(self) -> None:
        for p in self.producers:
            p.flush()

    @property
    def last_offsets(self) -> dict[tuple[str, int], int]:
        out: dict[tuple[str, int], int] = {}
        for p in self.producers:
            out.update(p.last_offsets)
        return out


def events(seed: int) -> Any:
    """B, H and T events on `KEYS` keys, endlessly (their `ts` is stamped when sent):
    a third of them H, half of whose beatrates pass the selection query."""
    from juggler.engine.events import Event

    rng = random.Random(f"latency-{seed}")
    while True:
        stream = rng.choice("BHT")
        data = {"B": lambda: {"pressure": rng.uniform(50, 150), "temp": rng.uniform(30, 90),
                              "alert": False},
                "H": lambda: {"beatrate": rng.uniform(60, 120), "vib": rng.uniform(10, 90),
                              "alert": False},
                "T": lambda: {"fluct": rng.uniform(40, 140), "degree": rng.uniform(35, 42),
                              "incr": rng.uniform(0, 2)}}[stream]()
        yield Event(stream, f"p{rng.randrange(KEYS)}", 0, data, ("", 0, 0))


def feed(sender: LiveProducers, source: Any, rate: float, seconds: float) -> None:
    """Send from `source` at `rate` for `seconds`, untimed (the warm-up)."""
    for _, event in paced(source, rate, seconds):
        sender.send(event.stream, event.key, event.ts, event.data)
    sender.flush()


def expected(query: tuple[str, str], sent: Sent, lateness: int) -> Counter[tuple[Any, ...]]:
    """`juggler eval`'s results on the sent events in `ts` order (ties: schema order,
    then offset): what the worker publishes when none of them is late."""
    from juggler.codec.avro import Codec
    from juggler.engine.events import EngineConfig, Event
    from juggler.engine.naive import NaiveEngine
    from juggler.language import compile_query

    codec = Codec()
    engine = NaiveEngine(EngineConfig(allowed_lateness=lateness), purge=True)
    engine.register(compile_query(*query, codec.catalog()))
    rank = {s: i for i, s in enumerate(codec.stream_names())}  # the worker's tie order
    out: Counter[tuple[Any, ...]] = Counter()
    for stream, key, ts, data, pos in sorted(sent.events,
                                             key=lambda e: (e[2], rank[e[0]], e[4])):
        for r in engine.process(Event(stream, key, ts, dict(data), pos)):
            sources = []
            for s, p in r.sources.items():
                assert isinstance(p, tuple)  # a Kafka position, as given above
                sources.append((s, *p))
            out[(r.query, r.key, r.ts, tuple(sorted(sources)))] += 1
    return out


def stamp(bootstrap: str, prefix: str, timestamp_type: str) -> None:
    """The stream topics' `message.timestamp.type`."""
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource)

    from juggler.codec.avro import Codec
    from juggler.kafka.client_config import client_config
    from juggler.wire.names import stream_topic

    admin = AdminClient(client_config(bootstrap))
    entry = ConfigEntry("message.timestamp.type", timestamp_type,
                        incremental_operation=AlterConfigOpType.SET)
    resources = [ConfigResource("topic", prefix + stream_topic(s), incremental_configs=[entry])
                 for s in Codec().stream_names()]
    for future in admin.incremental_alter_configs(resources).values():
        future.result(30)


def delays(worker: Any) -> dict[str, float | None]:
    """Per stream, the largest estimated delay (ms) among the worker's partitions."""
    _, body = worker.get("/progress")
    out: dict[str, float | None] = {}
    for part in body["partitions"].values():
        for topic, inp in part["inputs"].items():
            stream = topic.rsplit(".", 1)[1]
            d = inp.get("delay_ms")
            if d is not None:
                out[stream] = max(d, out.get(stream) or d)
            else:
                out.setdefault(stream, None)
    return out


def measure(bootstrap: str, workdir: Path, config: dict[str, Any], query_name: str,
            seconds: float, rate: float, seed: int, profile: bool) -> dict[str, Any]:
    """One worker with `config` and one query; both producer setups one after the
    other: per setup, latency, late events, missing results, estimated delays."""
    from juggler.launcher import WorkerProcess

    query = QUERIES[query_name]
    prefix = f"lat{seed}-{query_name[0]}{int(time.time() * 1000) % 10**8}."
    settings = {k: v for k, v in config.items() if k != TIMESTAMP_TYPE}
    worker = WorkerProcess({"bootstrap": bootstrap, "app_id": f"bench-{prefix}",
                            "web_port": _free_port(), "web_host": "127.0.0.1",
                            "loglevel": "warning", "topic_prefix": prefix,
                            "partitions": PARTITIONS, **settings},
                           workdir / f"worker-{prefix}log")
    out: dict[str, Any] = {}
    with worker:
        register(bootstrap, prefix, [query])
        if TIMESTAMP_TYPE in config:
            stamp(bootstrap, prefix, config[TIMESTAMP_TYPE])
        sents: dict[str, Sent] = {}
        source = events(seed)
        for setup, profiles in PRODUCERS.items():
            sent = sents[setup] = Sent()
            sender = LiveProducers(bootstrap, prefix, profiles, sent)
            late0 = _metric(worker, "juggler_late_events_total")
            feed(sender, source, rate,
                 ESTIMATE_WARMUP if settings.get("idle_estimate", True) else WARMUP)
            before, t0 = worker_profile.snapshot(worker), time.perf_counter()
            run = measure_latency(bootstrap, prefix, source, [query], rate, seconds,
                                  sender=sender)
            if profile:
                run["profile"] = worker_profile.profile(
                    before, worker_profile.snapshot(worker), run["events"],
                    time.perf_counter() - t0)
            run["late"] = _metric(worker, "juggler_late_events_total") - late0
            run["load"] = os.getloadavg()[0]
            run["delays"] = delays(worker)
            run["sent"] = len(sent.events)
            out[setup] = run
        got = _results(bootstrap, prefix)
    lateness = settings.get("allowed_lateness", 0)
    for setup, sent in sents.items():
        want = expected(query, sent, lateness)
        # a result is the setup's whose newest source it sent (none straddles: the
        # setups' events are over a second apart and the join's window is one)
        out[setup]["expected"] = sum(want.values())
        out[setup]["missing"] = sum((want - got).values())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency_defaults",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="timed, per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rate", type=float, default=100.0, help="events/s")
    parser.add_argument("--configs", default=",".join(str(i) for i in range(len(CONFIGS))),
                        help="rows of CONFIGS to run (comma-separated indexes)")
    parser.add_argument("--queries", default="selection,join")
    parser.add_argument("--out", default="docs/benchmarks.md", help="report ('-': none)")
    args = parser.parse_args(argv)

    from juggler.kafka.broker import broker_or_env

    rows = [int(i) for i in args.configs.split(",")]
    queries = args.queries.split(",")
    runs: dict[tuple[int, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="juggler-bench-latency-") as tmp:
        with broker_or_env(data_dir=Path(tmp) / "kafka") as bootstrap:
            for repeat in range(args.repeats):
                order = rows if repeat % 2 == 0 else rows[::-1]
                for q in queries:
                    for c in order:
                        name, config = CONFIGS[c]
                        log(f"repeat {repeat + 1}, {q}, {name}")
                        runs.setdefault((c, q), []).append(measure(
                            bootstrap, Path(tmp), config, q, args.seconds, args.rate,
                            seed=repeat, profile=(c == DEFAULT and repeat == args.repeats - 1)))
    publish(render(runs, rows, queries, args), args.out, "latency")
    return 0


def render(runs: dict[tuple[int, str], list[dict[str, Any]]], rows: list[int],
           queries: list[str], args: argparse.Namespace) -> str:
    per = ", ".join(f"{s}: linger {lg} ms, clock {off:+d} ms"
                    for s, (lg, off) in PER_STREAM.items())
    lines = [
        "## Latency defaults",
        "",
        f"{time.strftime('%Y-%m-%d')}, `python -m bench.latency_defaults --seconds "
        f"{args.seconds:g} --repeats {args.repeats} --rate {args.rate:g} --configs "
        f"{args.configs} --queries {args.queries}` on {_machine()}, "
        f"the broker on the same machine, {PARTITIONS} partitions, one worker per setting "
        f"and query. {args.rate:g} events/s of B, H and T on {KEYS} keys, each stamped "
        f"with its producer's clock when sent; {WARMUP:g} s of them untimed, then "
        f"{args.seconds:g} s timed from the produce call of a result's newest event to "
        "its arrival at a read_committed client. Producers: **one** for every stream "
        f"(linger 5 ms, the worker's clock), or **per stream** ({per}); with the "
        f"estimate on, {ESTIMATE_WARMUP:g} s untimed instead (longer than its window: "
        "the steady state). p50/p99: medians "
        f"over {args.repeats} repeats; late events (dead-lettered) and missing results "
        "(against `juggler eval`'s engine on the same events in `ts` order): summed over "
        "the repeats.",
        "",
    ]
    loads = sorted(r[setup]["load"] for rs in runs.values() for r in rs for setup in PRODUCERS)
    lines += [f"The machine's load average (1 min) at the runs' ends: median "
              f"{statistics.median(loads):.1f}, {loads[0]:.1f} to {loads[-1]:.1f} "
              f"({os.cpu_count()} cores; other work shared them).", ""]
    for q in queries:
        lines += [f"`{QUERIES[q][1]}`:", "",
                  "| worker setting | one producer: p50 / p99 ms | late | missing "
                  "| per stream: p50 / p99 ms | late | missing |",
                  "|---|---|---|---|---|---|---|"]
        for c in rows:
            cells = [CONFIGS[c][0]]
            for setup in PRODUCERS:
                rs = [r[setup] for r in runs[(c, q)]]
                p50 = statistics.median(r["p50"] for r in rs) * 1000
                p99 = statistics.median(r["p99"] for r in rs) * 1000
                cells += [f"{p50:,.0f} / {p99:,.0f}",
                          f"{sum(r['late'] for r in rs):.0f} of {sum(r['sent'] for r in rs):,}",
                          f"{sum(r['missing'] for r in rs)} of "
                          f"{sum(r['expected'] for r in rs):,}"]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    if DEFAULT in rows:
        for q in queries:
            last = runs[(DEFAULT, q)][-1]
            shown = "; ".join(
                f"{setup}: " + ", ".join(f"{s} {d:.0f}" if d is not None else f"{s} none"
                                         for s, d in sorted(last[setup]["delays"].items()))
                for setup in PRODUCERS)
            lines += [f"Delays the default estimated (ms, largest over the partitions, "
                      f"last repeat, {q}): {shown}.", ""]
        for setup in PRODUCERS:
            p = runs[(DEFAULT, queries[0])][-1][setup].get("profile")
            if p:
                lines += [f"Where the time goes with the default, {queries[0]}, {setup} "
                          "producer (`bench.worker_profile`, the last repeat's timed run):",
                          "", *worker_profile.render(p), ""]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
