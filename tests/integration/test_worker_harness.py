"""Test harness for the Kafka worker: a worker subprocess, a client for its topics, and
the reference evaluator fed with the same events (no tests here; imported by the
worker tests).

Each test module uses its own topic prefix and app id, so tests share one broker
without seeing each other's topics, consumer groups or transactional ids.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "services"

pytest.importorskip("faust")
pytest.importorskip("confluent_kafka")
pytest.importorskip("fastavro")


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def free_port() -> int:
    from juggler.kafka.broker import free_port as _free

    return _free()


class WorkerProcess:
    """`python -m juggler.cli worker` as a subprocess, configured by environment."""

    def __init__(self, bootstrap: str, app_id: str, prefix: str, workdir: Path,
                 partitions: int = 2, **settings: Any) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.logfile = workdir / f"worker-{app_id}-{self.port}.log"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SERVICES), env.get("PYTHONPATH")]))
        values = {"bootstrap": bootstrap, "app_id": app_id, "topic_prefix": prefix,
                  "partitions": partitions, "web_port": self.port, "web_host": "127.0.0.1",
                  "data_dir": workdir / f"data-{app_id}", "session_timeout": 6,
                  "loglevel": "info", **settings}
        for name, value in values.items():
            env[f"JUGGLER_{name.upper()}"] = str(value)
        self.env = env
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.revived = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> WorkerProcess:
        self.starts += 1
        log = open(self.logfile, "ab")  # noqa: SIM115 - closed with the process
        log.write(f"\n===== start {self.starts} =====\n".encode())
        log.flush()
        self.proc = subprocess.Popen([sys.executable, "-m", "juggler.cli", "worker"],
                                     env=self.env, cwd=ROOT, stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        log.close()
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float) -> None:
        """The web server starts after table recovery, so /health answering means ready."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"worker exited with {self.proc.returncode}\n{self.log_tail()}")
            try:
                status, _ = self.get("/health")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"worker not ready after {timeout}s\n{self.log_tail()}")

    def get(self, path: str) -> tuple[int, Any]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=30) as response:
                body = response.read()
                ctype = response.headers.get("Content-Type", "")
                return response.status, json.loads(body) if "json" in ctype else body.decode()
        except urllib.error.HTTPError as exc:
            body = exc.read()
            try:
                return exc.code, json.loads(body)
            except ValueError:
                return exc.code, body.decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush, no commit."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def revive(self) -> bool:
        """Restart the worker if it stopped itself (exit status 70: it refused to go on
        from an inconsistent position, see docs/worker.md); True when it did."""
        if self.proc is not None and self.proc.poll() == 70:
            self.revived += 1
            self.start()
            return True
        return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 80) -> str:
        if not self.logfile.exists():
            return "(no log)"
        text = self.logfile.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])


class Client:
    """Produces Avro events and commands, reads topics read_committed."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        from confluent_kafka import Producer
        from juggler.codec.avro import Codec
        from juggler.service.topic_names import TopicNames

        self.bootstrap = bootstrap
        self.names = TopicNames(prefix)
        self.codec = Codec()
        # murmur2 like the Java client and aiokafka: a key lands in the same partition
        # of every stream topic (co-partitioning), whoever produced it
        self.watch: Any = None
        """Called while waiting (e.g. `WorkerProcess.revive`)."""
        self.producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                                  "linger.ms": 2, "enable.idempotence": True})

    def send_raw(self, topic: str, key: bytes | None, value: bytes | None) -> tuple[str, int, int]:
        positions: list[tuple[str, int, int]] = []

        def delivered(err: Any, msg: Any) -> None:
            assert err is None, err
            positions.append((msg.topic(), msg.partition(), msg.offset()))

        self.producer.produce(topic, key=key, value=value, on_delivery=delivered)
        self.producer.flush(30)
        return positions[0]

    def send_events(self, items: Iterable[tuple[str, str, int, dict[str, Any]]]) -> list[Any]:
        """Produce (stream, key, ts, data) records; return the engine Events with their
        Kafka positions, decoded from the very bytes that were sent."""
        sent: list[tuple[str, str, bytes]] = []
        positions: dict[int, tuple[str, int, int]] = {}

        def on_delivery(i: int):
            def delivered(err: Any, msg: Any) -> None:
                assert err is None, err
                positions[i] = (msg.topic(), msg.partition(), msg.offset())
            return delivered

        for i, (stream, key, ts, data) in enumerate(items):
            value = self.codec.encode(stream, {"ts": ts, **data})
            sent.append((stream, key, value))
            self.producer.produce(self.names.stream(stream), key=key.encode(), value=value,
                                  on_delivery=on_delivery(i))
            self.producer.poll(0)
        self.producer.flush(60)
        return [self.codec.event_from(stream, key, value, positions[i])
                for i, (stream, key, value) in enumerate(sent)]

    def command(self, action: str, query_id: str, text: str | None = None,
                history: bool = False) -> int:
        value = self.codec.encode("juggler.Command", {"action": action, "id": query_id,
                                                      "text": text, "history": history})
        return self.send_raw(self.names.control, query_id.encode(), value)[2]

    def read(self, topic: str, timeout: float = 20.0) -> list[Any]:
        """Every committed record of `topic`, partition by partition in offset order."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": unique("read-"),
                             "isolation.level": "read_committed", "enable.partition.eof": True,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False,
                             "log_level": 0})
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
        return [self.codec.decode("juggler.CommandStatus", m.value())
                for m in self.read(self.names.status)]

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
        from juggler.engine.events import Result

        out = []
        for m in self.read(self.names.results(query_id)):
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
        from confluent_kafka import Consumer, TopicPartition

        targets: dict[tuple[str, int], int] = {}
        for topic in topics:
            for m in self.read(topic):
                key = (m.topic(), m.partition())
                targets[key] = max(targets.get(key, 0), m.offset() + 1)
        if not targets:
            return
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": app_id,
                             "enable.auto.commit": False, "log_level": 0})
        try:
            deadline = time.monotonic() + timeout
            while True:
                committed = consumer.committed([TopicPartition(t, p) for t, p in targets],
                                               timeout=10)
                behind = {(tp.topic, tp.partition): (tp.offset, targets[(tp.topic, tp.partition)])
                          for tp in committed if tp.offset < targets[(tp.topic, tp.partition)]}
                if not behind:
                    return
                assert time.monotonic() < deadline, f"worker did not consume: {behind}"
                for hook in (watch, self.watch):
                    if hook is not None:
                        hook()
                time.sleep(0.3)
        finally:
            consumer.close()


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
