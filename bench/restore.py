"""Restore time of one partition holding N held events (docs/worker.md, "Restore").

    .venv/bin/python -m bench.restore [--events 1000000] [--bootstrap HOST:PORT]

Writes N events of workload J's B stream over 20 keys to partition 0 of a fresh stream
topic (under a new topic prefix) and partition 0 of `juggler.state` the way a worker
leaves it after them within the retention (`r/` records of references to the held
events' input records; a `k/` record per key; one query), then
starts a real worker on that prefix and reports how long partition 0 took to restore
(the worker's own log line) and the wall time until `/health` answered 200. Medians of
`--repeats` runs. Without `--bootstrap` a local broker is started.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from juggler.codec.avro import Codec
from juggler.kafka.broker import broker_or_env, free_port
from juggler.kafka.client_config import client_config
from juggler.runtime import held_state
from juggler.launcher import WorkerProcess
from juggler.runtime.topic_names import TopicNames

KEYS = 20
QUERY = "SELECT * FROM B, H WHERE B.temp > H.vib MAXWINDOW 5 sec"


def fill(bootstrap: str, prefix: str, n: int) -> None:
    from confluent_kafka import Producer

    from juggler.kafka.topics import apply_topics
    from juggler.runtime.query_records import queries_key, queries_record

    apply_topics(bootstrap, prefix=prefix, partitions=1)
    names = TopicNames(prefix)
    codec = Codec()
    producer = Producer(client_config(bootstrap, {
        "linger.ms": 50, "batch.size": 1_000_000, "compression.type": "lz4", "log_level": 0}))
    stream_topic = names.stream("B")
    refs: list[held_state.Ref] = []
    for i in range(n):
        key = f"p{i % KEYS}"
        value = codec.encode("B", {"ts": 1_000 + i, "pressure": 100.0 + i % 50,
                                   "temp": 37.0, "alert": False})
        _produce(producer, stream_topic, key.encode(), value)
        refs.append((stream_topic, i, i, 1_000 + i, key))
        if len(refs) == held_state.REFS_PER_RECORD or i == n - 1:
            _produce(producer, names.state, held_state.refs_key(i // held_state.REFS_PER_RECORD),
                     held_state.refs_record(refs))
            refs = []
    for k in range(KEYS):
        producer.produce(names.state, key=f"k/p{k}".encode(),
                         value=held_state.key_meta(1_000 + n, 0), partition=0)
    producer.produce(names.state, key=queries_key(0),
                     value=queries_record({"q1": (0, QUERY, False)}), partition=0)
    producer.flush(120)


def _produce(producer: Any, topic: str, key: bytes, value: bytes) -> None:
    while True:
        try:
            producer.produce(topic, key=key, value=value, partition=0)
            return
        except BufferError:
            producer.poll(0.1)


def commit_processed(bootstrap: str, prefix: str, app_id: str, n: int) -> None:
    """The group's offsets as the worker left them: stream B's N events processed."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(client_config(bootstrap, {"group.id": app_id, "log_level": 0,
                                                    "enable.auto.commit": False}))
    try:
        consumer.commit(offsets=[TopicPartition(TopicNames(prefix).stream("B"), 0, n)],
                        asynchronous=False)
    finally:
        consumer.close()


def restore_once(bootstrap: str, prefix: str, workdir: Path, n: int) -> tuple[float, float]:
    port = free_port()
    app_id = f"restore-{uuid.uuid4().hex[:6]}"
    commit_processed(bootstrap, prefix, app_id, n)
    worker = WorkerProcess({"bootstrap": bootstrap, "topic_prefix": prefix, "partitions": 1,
                            "app_id": app_id, "web_port": port,
                            "web_host": "127.0.0.1", "retention": 10**9},
                           workdir / f"worker-{port}.log")
    t0 = time.monotonic()
    worker.start(timeout=600)
    wall = time.monotonic() - t0
    worker.stop()
    found = re.findall(r"restored partitions \[0\] in ([0-9.]+)s", worker.logfile.read_text())
    return float(found[-1]), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bootstrap", default=None)
    args = parser.parse_args()
    with broker_or_env() as bootstrap, tempfile.TemporaryDirectory() as tmp:
        bootstrap = args.bootstrap or bootstrap
        prefix = f"restore-{uuid.uuid4().hex[:6]}."
        t0 = time.monotonic()
        fill(bootstrap, prefix, args.events)
        print(f"wrote {args.events:,} held events in {time.monotonic() - t0:.1f}s")
        runs = [restore_once(bootstrap, prefix, Path(tmp), args.events)
                for _ in range(args.repeats)]
        restore = statistics.median(r for r, _ in runs)
        wall = statistics.median(w for _, w in runs)
        print(f"restore of partition 0 with {args.events:,} held events: median {restore:.1f}s "
              f"({args.events / restore:,.0f} events/s); start to ready {wall:.1f}s "
              f"(runs: {', '.join(f'{r:.1f}' for r, _ in runs)})")


if __name__ == "__main__":
    main()
