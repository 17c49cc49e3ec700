"""Fetch, configure, start and stop a real single-node Apache Kafka broker (KRaft).

Why: Juggler's integration tests and ``juggler broker`` need a *real* Kafka, not a
mock, but must not depend on Docker or on downloads outside Maven Central.  The
broker's jars are therefore resolved with Maven (``pom.xml`` next to this file) into
a cache (`juggler.maven`, shared with the Spark jobs' connectors) and run with
``java -cp 'libs/*' kafka.Kafka server.properties``.

Version (see docs/kafka-version.md for the full record)
-------------------------------------------------------
Pinned: **Apache Kafka 4.3.1** (Scala 2.13 build), the newest 4.x release whose
artifacts all resolve on Maven Central as of 2026-11-21.  4.4.0 is listed in
``kafka_2.13/maven-metadata.xml`` but cannot be resolved: Maven fails with
"Could not find artifact org.apache.kafka:kafka-tools-api:jar:4.4.0 in central"
(HTTP 404 on repo1 and repo.maven.apache.org).  Bump ``DEFAULT_VERSION`` and the
pom's ``kafka.version`` once that artifact appears (pass ``--version`` to try it).

Kafka 4.0 dropped old protocol versions (KIP-896); the project's only Kafka client is
confluent-kafka (librdkafka 2.16), whose admin, idempotent and transactional
producers (KIP-447 group metadata) and read_committed consumers are tested against
this broker (docs/kafka-version.md; aiokafka and Faust were checked too while the
worker ran on them).  No failures, so no fallback to 3.9 was needed (3.9.2
still starts with this module: ``LocalBroker(version="3.9.2")``).

Quorum choice: a *static* quorum (``controller.quorum.voters=1@127.0.0.1:<port>``,
formatted without ``--standalone``) works the same on 3.9 and 4.x, and, unlike a
dynamic ``--standalone`` quorum, it does not store the controller's address in the
metadata log -- so a persistent data dir can be restarted on a new controller port.

Topics are *not* auto-created (``auto.create.topics.enable=false``): docs/semantics.md section 7
says topic specs are applied by the project's own command, so a missing topic must
fail loudly instead of silently appearing with default settings.

Environment:
  ``JUGGLER_CACHE``      cache root (default ``~/.cache/juggler``); jars go to
                         ``$JUGGLER_CACHE/kafka-<version>/libs``.
  ``JUGGLER_BOOTSTRAP``  use this existing cluster instead of starting one
                         (honoured by :func:`broker_or_env`, not by :class:`LocalBroker`).
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from juggler import maven
from juggler.kafka.secure_listener import NAME as SASL_SSL
from juggler.kafka.secure_listener import SaslSslListener
from juggler.maven import cache_root

DEFAULT_VERSION = "4.3.1"
POM = Path(__file__).with_name("pom.xml")


# --------------------------------------------------------------------------- fetching


def libs_dir(version: str = DEFAULT_VERSION) -> Path:
    return cache_root() / f"kafka-{version}" / "libs"


def fetch(version: str = DEFAULT_VERSION) -> Path:
    """Resolve the broker's jars from Maven Central once; return the ``libs`` dir
    (idempotent and safe against concurrent or killed fetches: `juggler.maven.fetch`)."""
    try:
        return maven.fetch(POM, libs_dir(version), {"kafka.version": version},
                           expect=f"kafka_2.13-{version}.jar", what=f"Kafka {version}")
    except maven.MavenError as exc:
        raise RuntimeError(str(exc)) from None


# --------------------------------------------------------------------------- config


def free_port() -> int:
    """A port that was free a moment ago (the usual bind-to-0 trick; racy but fine locally)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_in_use(port: int) -> bool:
    """Whether a listener could not bind ``port`` (SO_REUSEADDR, like the JVM: TIME_WAIT is fine)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def new_cluster_id() -> str:
    """A Kafka-style cluster id: 16 random bytes, URL-safe base64, no padding.

    Ids starting with ``-`` are avoided because the CLI would read them as options.
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid


def server_properties(
    data_dir: Path, port: int, controller_port: int, *, auto_create_topics: bool = False,
    secure: tuple[SaslSslListener, int] | None = None,
) -> str:
    """KRaft settings for one node that is both broker and controller on 127.0.0.1,
    with the optional SASL_SSL `secure` (listener, port) beside its PLAINTEXT one.

    Internal topics get replication factor 1 and a single partition each: the
    defaults (RF 3, 50 partitions) either cannot be met by one node or only slow
    down the first consumer group / transaction on a dev machine.
    """
    listeners = {"PLAINTEXT": port}
    if secure is not None:
        listeners[SASL_SSL] = secure[1]
    advertised = ",".join(f"{name}://127.0.0.1:{p}" for name, p in listeners.items())
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "listeners": f"{advertised},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": advertised,
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": ",".join(
            f"{name}:{name}" for name in listeners) + ",CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir / "kraft-logs"),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "auto.create.topics.enable": str(auto_create_topics).lower(),
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "log.retention.hours": "168",
        **(secure[0].properties(secure[1]) if secure is not None else {}),
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def log4j2_properties(log_dir: Path) -> str:
    """Log4j2 config: broker logs to ``<data>/logs/server.log``, not to our stdout."""
    return f"""\
status = warn
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = {log_dir}/server.log
appender.file.filePattern = {log_dir}/server.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 50MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


# --------------------------------------------------------------------------- broker


class LocalBroker:
    """One KRaft broker+controller JVM, as a context manager.

    ``data_dir=None`` uses a temporary directory that is deleted on :meth:`stop`;
    a given ``data_dir`` is kept and reused (already formatted storage is not
    formatted again), which is what ``juggler broker`` wants. ``sasl_ssl`` adds a
    secured listener (:attr:`secure_bootstrap`) beside the PLAINTEXT one.
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        port: int | None = None,
        *,
        version: str = DEFAULT_VERSION,
        heap: str = "512m",
        startup_timeout: float = 120.0,
        stop_timeout: float = 30.0,
        auto_create_topics: bool = False,
        sasl_ssl: SaslSslListener | None = None,
    ) -> None:
        self.version = version
        self.heap = heap
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.auto_create_topics = auto_create_topics
        self.sasl_ssl = sasl_ssl
        self.secure_port: int | None = None
        self._given_data_dir = Path(data_dir).expanduser().resolve() if data_dir else None
        self._requested_port = port
        self.data_dir: Path | None = None
        self.port: int | None = None
        self.controller_port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stdout: IO[bytes] | None = None

    # -- public API

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:PORT"``, valid once :meth:`start` has returned."""
        if self.port is None:
            raise RuntimeError("broker not started")
        return f"127.0.0.1:{self.port}"

    @property
    def secure_bootstrap(self) -> str:
        """``"127.0.0.1:PORT"`` of the SASL_SSL listener, once started with one."""
        if self.secure_port is None:
            raise RuntimeError("broker not started with a SASL_SSL listener")
        return f"127.0.0.1:{self.secure_port}"

    @property
    def running(self) -> bool:
        """Whether the broker JVM started by this object is still alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def log_file(self) -> Path:
        assert self.data_dir is not None
        return self.data_dir / "logs" / "server.log"

    @staticmethod
    def fetch(version: str = DEFAULT_VERSION) -> Path:
        return fetch(version)

    def start(self) -> Self:
        """Fetch (if needed), write config, format storage, launch, and wait until usable."""
        if self._proc is not None:
            raise RuntimeError("broker already started")
        libs = fetch(self.version)
        self.data_dir = self._given_data_dir or Path(tempfile.mkdtemp(prefix="juggler-kafka-"))
        try:
            self._launch(libs, self.data_dir)
            self._wait_ready()
        except BaseException:
            self.stop()  # also removes a temporary data dir
            raise
        return self

    def stop(self) -> None:
        """SIGTERM (Kafka shuts down cleanly), SIGKILL after ``stop_timeout`` seconds."""
        proc, self._proc = self._proc, None
        if proc is not None:
            atexit.unregister(self.stop)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(self.stop_timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if self._stdout is not None:
            self._stdout.close()
            self._stdout = None
        if self._given_data_dir is None and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- internals

    def _launch(self, libs: Path, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "logs").mkdir(exist_ok=True)
        self.port = self._requested_port or free_port()
        if _port_in_use(self.port):
            raise RuntimeError(f"port {self.port} on 127.0.0.1 is already in use")
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        secure = None
        if self.sasl_ssl is not None:
            self.secure_port = free_port()
            while self.secure_port in (self.port, self.controller_port):
                self.secure_port = free_port()
            secure = (self.sasl_ssl, self.secure_port)

        config = data_dir / "server.properties"
        config.write_text(
            server_properties(
                data_dir, self.port, self.controller_port,
                auto_create_topics=self.auto_create_topics, secure=secure,
            )
        )
        log4j = data_dir / "log4j2.properties"
        log4j.write_text(log4j2_properties(data_dir / "logs"))
        self._format(libs, config)

        self._stdout = open(data_dir / "logs" / "stdout.log", "ab")  # noqa: SIM115 - lives as long as the JVM
        self._proc = subprocess.Popen(
            self._java(libs, log4j) + ["kafka.Kafka", str(config)],
            stdout=self._stdout,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            # own session: a terminal Ctrl-C goes to Python only, which then stops the
            # JVM in order (SIGTERM, wait) instead of both racing on the signal
            start_new_session=True,
        )
        atexit.register(self.stop)  # never leave an orphan JVM behind a normal exit

    def _java(self, libs: Path, log4j: Path) -> list[str]:
        """The JVM's command line. C1 only (`-XX:TieredStopAtLevel=1`): this broker
        shares a small machine with the worker, the tests or the benchmark, and lives
        for minutes. With the default tiered JIT, C2's compiler threads ran through
        every run, meeting the produce, fetch and transaction paths, and took most of
        the broker's CPU on a machine of 2 cores (docs/benchmarks.md, "The broker's
        compiler"). C2's code serves requests with less CPU once compiled, which a
        broker running for weeks gains and keeps its JVM's defaults for."""
        assert self.data_dir is not None
        return [
            "java",
            f"-Xmx{self.heap}",
            "-Xms64m",
            "-XX:TieredStopAtLevel=1",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}",
            # keep logging through Kafka's own shutdown hook (log4j2's hook would race it)
            "-Dlog4j2.shutdownHookEnabled=false",
            f"-Dkafka.logs.dir={self.data_dir / 'logs'}",
            "-cp",
            f"{libs}/*",
        ]

    def _format(self, libs: Path, config: Path) -> None:
        assert self.data_dir is not None
        if (self.data_dir / "kraft-logs" / "meta.properties").exists():
            return  # already formatted: keep its cluster id and data
        # a short-lived tool: the serial GC starts noticeably faster
        java = [a if a != "-XX:+UseG1GC" else "-XX:+UseSerialGC"
                for a in self._java(libs, self.data_dir / "log4j2.properties")]
        cmd = java + [
            "kafka.tools.StorageTool", "format",
            "--config", str(config),
            "--cluster-id", new_cluster_id(),
            "--ignore-formatted",
            *(self.sasl_ssl.format_arguments() if self.sasl_ssl is not None else []),
        ]
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed:\n{proc.stdout}\n{proc.stderr}")

    def _wait_ready(self) -> None:
        """Port accepts connections AND an admin metadata call lists at least one broker."""
        assert self._proc is not None and self.port is not None
        deadline = time.monotonic() + self.startup_timeout
        last_error: object = None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"Kafka exited with code {self._proc.returncode} during startup\n"
                    + self._log_tail()
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
                if admin_ready(self.bootstrap, timeout=5.0):
                    return
            except OSError as e:
                last_error = e
            time.sleep(0.3)
        raise TimeoutError(
            f"Kafka not ready on {self.bootstrap} after {self.startup_timeout}s "
            f"(last error: {last_error})\n" + self._log_tail()
        )

    def _log_tail(self, lines: int = 40) -> str:
        assert self.data_dir is not None
        out = []
        for name in ("stdout.log", "server.log"):
            f = self.data_dir / "logs" / name
            if f.exists():
                tail = f.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {f}\n" + "\n".join(tail))
        return "\n".join(out)


def admin_ready(bootstrap: str, timeout: float = 5.0) -> bool:
    """True when a confluent-kafka admin ``list_topics`` succeeds and shows a broker."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from juggler.kafka.client_config import Security, client_config

    # the broker's own PLAINTEXT listener, whatever the environment says about clusters
    admin = AdminClient(client_config(bootstrap, {"log_level": 0}, security=Security()))
    try:
        md = admin.list_topics(timeout=timeout)
    except KafkaException:
        return False
    return len(md.brokers) > 0


@contextlib.contextmanager
def broker_or_env(**kwargs: object) -> Iterator[str]:
    """Yield a bootstrap string: ``JUGGLER_BOOTSTRAP`` if set, else a fresh LocalBroker's."""
    existing = os.environ.get("JUGGLER_BOOTSTRAP")
    if existing:
        yield existing
        return
    with LocalBroker(**kwargs) as broker:  # type: ignore[arg-type]
        yield broker.bootstrap


# --------------------------------------------------------------------------- CLI


def run_forever(data_dir: str | Path, port: int = 9092, *, version: str = DEFAULT_VERSION) -> None:
    """Run a broker with a persistent data dir until SIGINT/SIGTERM (``juggler broker``)."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    t0 = time.monotonic()
    broker = LocalBroker(data_dir, port, version=version)
    with broker:
        print(
            f"Kafka {version} ready on {broker.bootstrap} in {time.monotonic() - t0:.1f}s "
            f"(data {broker.data_dir}, log {broker.log_file}); Ctrl-C to stop",
            flush=True,
        )
        while not stop.wait(1.0):
            if not broker.running:
                print("Kafka exited unexpectedly; see " + str(broker.log_file), file=sys.stderr)
                raise SystemExit(1)
        print("stopping Kafka ...", flush=True)
    print("stopped", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m juggler.kafka.broker", description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", help="persistent broker data directory (required to run)")
    parser.add_argument("--port", type=int, default=9092, help="PLAINTEXT port on 127.0.0.1")
    parser.add_argument("--version", default=DEFAULT_VERSION, help="Kafka version from Maven Central")
    parser.add_argument("--fetch-only", action="store_true", help="only download the jars and exit")
    args = parser.parse_args(argv)
    if args.fetch_only:
        print(fetch(args.version))
        return
    if not args.data_dir:
        parser.error("--data-dir is required (unless --fetch-only)")
    run_forever(args.data_dir, args.port, version=args.version)


if __name__ == "__main__":
    main()
