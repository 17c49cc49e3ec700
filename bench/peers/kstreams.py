"""Kafka Streams (Apache Kafka, from Maven Central) as a peer: build and run the app.

Why a JVM process of its own: Kafka Streams is a Java library, and what a Kafka user
would deploy instead of Juggler is an application process reading the same topics. Its
jars are fetched once with Maven (`juggler.maven`, as the Esper peer's and the broker's),
and `KStreamsPeer.java` is compiled with `javac` together with the topology that
`kstreams_topology` generates for the run's queries (a few seconds, outside any timing).
`bench.peers.kstreams_load` drives it on workload K.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench.peers import kstreams_topology
from juggler import maven
from juggler.codec.avro import default_schemas_dir
from juggler.language import Query
from juggler.launcher import log_tail, terminate

VERSION = "4.3.1"
"""Kafka Streams' version: the local broker's (`juggler.kafka.broker`)."""
AVRO = "1.12.2"
HERE = Path(__file__).resolve().parent
SOURCE = HERE / "KStreamsPeer.java"
POM = HERE / "kstreams-pom.xml"


def libs() -> Path:
    """Kafka Streams' and Avro's jars with their dependencies, fetched on first use."""
    return maven.fetch(POM, maven.cache_root() / f"kstreams-{VERSION}-avro-{AVRO}-1",
                       {"kstreams.version": VERSION, "avro.version": AVRO},
                       expect="kafka-streams-*.jar", what=f"Kafka Streams {VERSION}")


def build(queries: list[Query], orders: dict[str, tuple[str, ...]], work: Path) -> Path:
    """Compile `KStreamsPeer.java` and the topology of `queries` into `work/classes`."""
    if shutil.which("javac") is None:
        raise RuntimeError("`javac` (a JDK, 17 or later) is needed to run the Kafka Streams peer")
    streams = sorted({s for q in queries for s in q.streams})
    columns = kstreams_topology.stream_columns(default_schemas_dir(), streams)
    generated = work / f"{kstreams_topology.CLASS}.java"
    generated.parent.mkdir(parents=True, exist_ok=True)
    generated.write_text(kstreams_topology.source(queries, orders, columns))
    out = work / "classes"
    out.mkdir(exist_ok=True)
    proc = subprocess.run(["javac", "-nowarn", "-cp", f"{libs()}/*", "-d", str(out),
                           str(SOURCE), str(generated)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"javac failed on the Kafka Streams peer:\n{proc.stderr[-4000:]}")
    return out


class KStreamsApp:
    """The peer application as a child process: `start` returns once Kafka Streams
    reports RUNNING (`startup` holds the seconds from the launch), `stop` sends SIGTERM
    (Kafka Streams closes: commits, flushes its stores) and waits."""

    def __init__(self, classes: Path, work: Path, *, bootstrap: str, prefix: str,
                 app_id: str, results_topic: str, threads: int, max_task_idle_ms: int = 0
                 ) -> None:
        self.work = work
        self.app_id = app_id
        self.config = work / f"{app_id}.properties"
        settings = {"bootstrap": bootstrap, "topic.prefix": prefix, "application.id": app_id,
                    "results.topic": results_topic, "threads": threads,
                    "max.task.idle.ms": max_task_idle_ms,
                    "schemas": default_schemas_dir(), "state.dir": work / f"{app_id}-state"}
        self.config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        self.cmd = ["java", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                    "-cp", f"{libs()}/*{os.pathsep}{classes}", "KStreamsPeer", str(self.config)]
        self.log = work / f"{app_id}.log"
        self.proc: subprocess.Popen[str] | None = None
        self.startup: float | None = None
        self.running_at: float | None = None
        """`perf_counter` time when RUNNING was read."""
        self._running = threading.Event()
        self.lines: list[dict[str, Any]] = []

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 600.0) -> "KStreamsApp":
        t0 = time.perf_counter()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=log, text=True,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not self._running.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"Kafka Streams did not reach RUNNING ({self.lines}): "
                                   f"{self.log_tail()}")
        assert self.running_at is not None
        self.startup = self.running_at - t0
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            self.lines.append(message)
            if message.get("state") == "RUNNING" and self.running_at is None:
                self.running_at = time.perf_counter()
                self._running.set()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        terminate(self.proc, 90)

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log, lines)

    def __enter__(self) -> "KStreamsApp":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
