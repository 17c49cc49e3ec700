"""How fast the Spark jobs write events into Kafka, against a plain producer.

    python -m bench.spark_producers [--events 200000] [--repeats 3] [--keys 1000]

Rows per second that `juggler spark generate` and `juggler spark replay` (from a
Parquet archive) write onto the stream topics in local mode, and the rate of
confluent-kafka's producer (`juggler.kafka.producer.EventProducer`: murmur2,
idempotent, linger 5 ms) sending the same number of already-encoded events to the same
topics in the same run. Every figure is the median of the repeats; repeats are the
outer loop, so a shared machine's drift hits all three alike. The timed span is the
whole job as a user runs it in a warm session (planning, the shuffle that keeps each
key's events in order, encoding, producing, flushing), not the session's start.

Uses `JUGGLER_BOOTSTRAP` when set, else starts its own LocalBroker.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

from bench.report_sections import publish
from juggler.codec.avro import Codec
from juggler.kafka.broker import broker_or_env
from juggler.kafka.producer import EventProducer
from juggler.runtime.topic_names import TopicNames
from juggler.spark import generate, replay
from juggler.spark.progress import Progress
from juggler.spark.session import spark_session


def timed(job: Callable[[], None]) -> float:
    started = time.perf_counter()
    job()
    return time.perf_counter() - started


def raw_producer(bootstrap: str, prefix: str, events: list[tuple[str, bytes, bytes]]) -> None:
    producer = EventProducer(bootstrap, Codec(), prefix=prefix)
    for stream, key, value in events:
        producer.send_raw(producer.topic(stream), key, value)
    producer.flush(120)


def encoded_events(codec: Codec, archive: Path) -> list[tuple[str, bytes, bytes]]:
    """The archive's events encoded by the project's codec, as the raw producer sends them."""
    import json

    from juggler.spark.archive import export_events

    session = spark_session()
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as handle:
        export_events(session, archive, codec, Path(handle.name))
        out = []
        for line in handle:
            event = json.loads(line)
            value = codec.encode(event["stream"], {"ts": event["ts"], **event["data"]})
            out.append((event["stream"], event["key"].encode(), value))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.spark_producers",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--out", default="docs/benchmarks.md",
                        help="report whose 'Spark' section gets the table ('-': none)")
    args = parser.parse_args(argv)

    codec = Codec(registry_url="")
    with broker_or_env() as bootstrap, tempfile.TemporaryDirectory() as tmp:
        session = spark_session("juggler-bench")
        names = TopicNames(f"bench-spark-{os.getpid()}-")
        spec = generate.Spec(seed=1, count=args.events, keys=args.keys)
        archive = Path(tmp) / "archive"
        quiet = Progress("bench", None, out=open(os.devnull, "w"))  # noqa: SIM115
        generate.run(session, spec, codec, quiet, archive=archive)
        events = encoded_events(codec, archive)
        # warm-up: topics exist and the JVM has compiled the paths before timing
        generate.run(session, generate.Spec(seed=2, count=10_000), codec, quiet,
                     bootstrap=bootstrap, names=names)
        jobs: dict[str, Callable[[], None]] = {
            "spark generate": lambda: generate.run(session, spec, codec, quiet,
                                                   bootstrap=bootstrap, names=names),
            "spark replay (archive)": lambda: replay.run(session, codec, archive, bootstrap,
                                                         quiet, names=names),
            "confluent-kafka producer": lambda: raw_producer(bootstrap, names.prefix, events),
        }
        seconds: dict[str, list[float]] = {name: [] for name in jobs}
        for repeat in range(args.repeats):
            for name, job in jobs.items():
                seconds[name].append(timed(job))
                print(f"repeat {repeat + 1}: {name}: {args.events / seconds[name][-1]:,.0f} "
                      f"rows/s", file=sys.stderr, flush=True)
        session.stop()

    rates = {name: args.events / statistics.median(s) for name, s in seconds.items()}
    raw = rates["confluent-kafka producer"]
    lines = ["## Spark jobs writing into Kafka", "",
             f"`python -m bench.spark_producers --events {args.events} --keys {args.keys} "
             f"--repeats {args.repeats}` on {os.cpu_count()} cores, {date.today()}: "
             f"{args.events:,} events, {args.keys:,} keys, 4 stream topics, local mode, "
             f"median of {args.repeats}; see [spark.md](spark.md).", "",
             "| writer | rows/s | vs producer |", "|---|---:|---:|"]
    lines += [f"| {name} | {rate:,.0f} | {rate / raw:.2f} |" for name, rate in rates.items()]
    publish("\n".join(lines) + "\n", args.out, "Spark")


if __name__ == "__main__":
    main()
