"""Test harness for the Kafka worker: a worker subprocess, a client for its topics, and
the reference evaluator fed with the same events (no tests here; imported by the
worker tests).

Each test module uses its own topic prefix and app id, so tests share one broker
without seeing each other's topics, consumer groups or transactional ids.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("confluent_kafka")
pytest.importorskip("fastavro")

from juggler import launcher as process  # noqa: E402
from juggler.codec.avro import CodecError  # noqa: E402


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def free_port() -> int:
    from juggler.kafka.broker import free_port as _free

    return _free()


class WorkerProcess(process.WorkerProcess):
    """The package's worker process, with a test's prefix, app id and short timeouts."""

    def __init__(self, bootstrap: str, app_id: str, prefix: str, workdir: Path,
                 partitions: int = 2, **settings: Any) -> None:
        port = free_port()
        values = {"bootstrap": bootstrap, "app_id": app_id, "topic_prefix": prefix,
                  "partitions": partitions, "web_port": port, "web_host": "127.0.0.1",
                  "instance_id": app_id + "-" + str(port), "session_timeout": 6,
                  "loglevel": "info", **settings}
        super().__init__(values, workdir / f"worker-{app_id}-{port}.log")
        self.workdir = workdir
        self.revived = 0

    def revive(self) -> bool:
        """Restart the worker if it stopped itself (exit status 70: it refused to go on
        from an inconsistent position, see docs/worker.md); True when it did."""
        if self.proc is not None and self.proc.poll() == 70:
            self.revived += 1
            self.start()
            return True
        return False


class Client:
    """Produces Avro events and commands, reads topics read_committed."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        from juggler.codec.avro import Codec
        from juggler.kafka.producer import EventProducer
        from juggler.runtime.topic_names import TopicNames

        self.bootstrap = bootstrap
        self.names = TopicNames(prefix)
        self.codec = Codec()
        self.producer = EventProducer(bootstrap, self.codec, prefix=prefix, **{"linger.ms": 2})
        self.watch: Any = None
        """Called while waiting (e.g. `WorkerProcess.revive`)."""

    def send_raw(self, topic: str, key: bytes | None, value: bytes | None) -> tuple[str, int, int]:
        positions: list[tuple[str, int, int]] = []
        self.producer.send_raw(topic, key, value, positions.append)
        self.producer.flush(30)
        return positions[0]

    def send_events(self, items: Iterable[tuple[str, str, int, dict[str, Any]]],
                    timeout: float = 60.0) -> list[Any]:
        """Produce (stream, key, ts, data) records, waiting up to `timeout` seconds for
        their delivery; return the engine Events with their Kafka positions, decoded
        from the very bytes that were sent."""
        sent: list[tuple[str, str, bytes]] = []
        positions: dict[int, tuple[str, int, int]] = {}
        for i, (stream, key, ts, data) in enumerate(items):
            value = self.producer.send(stream, key, ts, data,
                                       lambda pos, i=i: positions.__setitem__(i, pos))
            sent.append((stream, key, value))
        self.producer.flush(timeout)
        return [self.codec.event_from(stream, key, value, positions[i])
                for i, (stream, key, value) in enumerate(sent)]

    def command(self, action: str, query_id: str, text: str | None = None,
                history: bool = False, own_topic: bool = False) -> int:
        # produced directly, not through `juggler.client.control.submit`: tests send
        # commands the client refuses (ids that cannot name a topic) to see the
        # worker reject them
        value = self.codec.encode("juggler.Command", {"action": action, "id": query_id,
                                                      "text": text, "history": history,
                                                      "own_topic": own_topic})
        return self.send_raw(self.names.control, query_id.encode(), value)[2]

    def read(self, topic: str, timeout: float = 20.0) -> list[Any]:
        """Every committed record of `topic`, partition by partition in offset order."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        from juggler.kafka.client_config import client_config

        consumer = Consumer(client_config(self.bootstrap, {
            "group.id": unique("read-"), "isolation.level": "read_committed",
            "enable.partition.eof": True, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "log_level": 0}))
        try:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            if meta.error is not None:
                return []
            parts = sorted(meta.partitions)
            consumer.assign([TopicPartition(topic, p, 0) for p in parts])
            eof: set[int] = set()
            out: list[Any] = []
            deadline = time.monotonic() + timeout
            while len(eof) < len(parts):
                assert time.monotonic() < deadline, f"reading {topic} timed out"
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        eof.add(msg.partition())
                        continue
                    raise AssertionError(str(msg.error()))
                out.append(msg)
            return sorted(out, key=lambda m: (m.partition(), m.offset()))
        finally:
            consumer.close()

    def statuses(self) -> list[dict[str, Any]]:
        """The status topic's statuses (a record that is not one, which a test wrote
        to see the worker skip it, is left out)."""
        out = []
        for m in self.read(self.names.status):
            try:
                out.append(self.codec.decode("juggler.CommandStatus", m.value()))
            except CodecError:
                continue
        return out

    def wait_status(self, command_offset: int, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for status in self.statuses():
                if status["command_offset"] == command_offset:
                    return status
            if self.watch is not None:
                self.watch()
            time.sleep(0.3)
        raise AssertionError(f"no status for control offset {command_offset}")

    def results(self, query_id: str) -> list[Any]:
        """The query's results: from the shared results topic (its records with the
        query's header) and from its own topic if it was registered with one."""
        from juggler.engine.events import Result

        out = []
        messages = [m for m in self.read(self.names.all_results)
                    if dict(m.headers() or ()).get("juggler-query") == query_id.encode()]
        for m in messages + self.read(self.names.results(query_id)):
            r = self.codec.decode("juggler.Result", m.value())
            out.append(Result(r["query"], r["key"], r["ts"],
                              {s: (p["topic"], p["partition"], p["offset"])
                               for s, p in r["sources"].items()}, r["row"]))
        return out

    def dead_letters(self) -> list[dict[str, Any]]:
        return [self.codec.decode("juggler.DeadLetter", m.value())
                for m in self.read(self.names.deadletter)]

    def wait_consumed(self, app_id: str, topics: Iterable[str], timeout: float = 60.0,
                      watch: Any = None) -> None:
        """Until the worker group's committed offsets cover every committed record of
        `topics` (so everything produced so far is processed and its output committed)."""
        last: dict[tuple[str, int], int] = {}
        for topic in topics:
            for m in self.read(topic):
                key = (m.topic(), m.partition())
                last[key] = max(last.get(key, -1), m.offset())
        self.wait_committed(app_id, last, timeout, watch)

    def wait_committed(self, app_id: str, last: dict[tuple[str, int], int],
                       timeout: float = 60.0, watch: Any = None) -> None:
        """Until the worker group's committed offsets cover every record up to `last`
        (topic, partition -> offset) of each partition."""
        from juggler.kafka.group_progress import GroupProgress

        if not last:
            return

        def waiting(_: int) -> None:
            for hook in (watch, self.watch):
                if hook is not None:
                    hook()

        with GroupProgress(self.bootstrap, app_id) as progress:
            assert progress.wait(last, timeout, on_wait=waiting), \
                f"worker did not consume: {progress.behind(last)} records behind"


def identities(results: Iterable[Any]) -> Counter:
    return Counter(r.identity() for r in results)


def by_query(results: Iterable[Any]) -> dict[str, Counter]:
    out: dict[str, Counter] = {}
    for r in results:
        out.setdefault(r.query, Counter())[r.identity()] += 1
    return out


def diff(expected: Counter, actual: Counter, limit: int = 5) -> str:
    missing = list((expected - actual).elements())[:limit]
    extra = list((actual - expected).elements())[:limit]
    return (f"expected {sum(expected.values())}, got {sum(actual.values())}; "
            f"missing (first {limit}): {missing}; extra/duplicated: {extra}")
