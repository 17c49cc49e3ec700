"""The main job: broker, topics, worker, queries, producer and results, in one terminal.

Everything runs for real: the broker is Apache Kafka started from the cache (unless a
bootstrap address is given), the worker is `juggler worker` in a child process (on the
runtime `--runtime` picks: the worker's own loop, or the Faust app), queries go through
the control topic, and results are read back read_committed from the shared results
topic (each record names its query), exactly as a client would. Event time is wall-clock time, so
MAXWINDOW and lateness mean what they say while the demo runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from juggler.codec.avro import Codec
from juggler.wire.names import RESULTS

EXAMPLE_QUERIES = Path(__file__).resolve().parents[3] / "examples" / "icu" / "queries.jsonl"
APP_ID = "juggler-demo"
RUNTIME_ENV = "JUGGLER_RUNTIME"
"""Where `juggler demo --runtime` puts its choice (the worker reads the same variable)."""


@dataclass(frozen=True)
class DemoOptions:
    seconds: float = 30.0
    rate: float = 100.0
    patients: int = 20
    seed: int = 7
    queries: Path = EXAMPLE_QUERIES
    bootstrap: str | None = None
    """An existing cluster; None starts a local broker in a temporary directory."""
    show: int = 3
    """Results printed per query (the rest are counted)."""
    allowed_lateness: int = 2_000
    runtime: str = field(default_factory=lambda: os.environ.get(RUNTIME_ENV) or "worker")
    """The worker's runtime (`Settings.runtime`): "worker" or "faust"; by default
    `JUGGLER_RUNTIME`'s, as for `juggler worker`, else the worker."""

    def __post_init__(self) -> None:
        from juggler.runtime.settings import RUNTIMES

        if self.runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, "
                             f"not {self.runtime!r}")


@dataclass
class Tally:
    """What the terminal shows, shared by the producer loop and the results reader."""

    produced: int = 0
    results: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    """Seconds from the result's newest event time (wall clock here) to its arrival."""


def load_queries(path: Path) -> list[tuple[str, str]]:
    """(id, text) pairs from a JSON-lines file like `juggler eval --queries`."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            out.append((record["id"], record["text"]))
    return out


def run(options: DemoOptions, out: TextIO = sys.stdout) -> Tally:
    """Run the demo; returns the final counts (the CLI prints, tests assert)."""
    from juggler.client.control import submit
    from juggler.kafka.broker import LocalBroker, free_port
    from juggler.kafka.topics import apply_topics
    from juggler.launcher import WorkerProcess
    from juggler.runtime.settings_log import reset
    from juggler.wire.commands import RegisterCommand

    say = _printer(out)
    queries = load_queries(options.queries)
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="juggler-demo-")))
        bootstrap = options.bootstrap
        if bootstrap is None:
            t0 = time.monotonic()
            broker = stack.enter_context(LocalBroker(workdir / "kafka"))
            bootstrap = broker.bootstrap
            say(f"Kafka ready on {bootstrap} in {time.monotonic() - t0:.1f} s")
        report = apply_topics(bootstrap)
        say(f"topics: {len(report.created)} created, {len(report.unchanged)} already there")
        # each run is a fresh demo, its runtime and lateness this run's: the demo's group
        # takes them (refused while another demo's worker is in the group)
        reset(bootstrap, "", APP_ID, timeout=30)
        t0 = time.monotonic()
        worker = WorkerProcess({"bootstrap": bootstrap, "app_id": APP_ID,
                                "web_port": free_port(), "web_host": "127.0.0.1",
                                "allowed_lateness": options.allowed_lateness,
                                "runtime": options.runtime, "loglevel": "warning"},
                               workdir / "worker.log")
        stack.enter_context(worker)
        say(f"worker ({options.runtime} runtime) ready at {worker.url} in "
            f"{time.monotonic() - t0:.1f} s")
        for query_id, text in queries:
            sub = submit(bootstrap, RegisterCommand(query_id, text), timeout=60)
            state = sub.status.status if sub.status else "no answer"
            say(f"registered {query_id}: {state}"
                + (f" ({sub.status.message})" if sub.status and sub.status.message else ""))
        tally = Tally()
        reader = ResultsReader(bootstrap, [q for q, _ in queries], tally, options.show)
        stack.callback(reader.stop)
        reader.start()
        say(f"producing ICU vitals for {options.patients} patients at {options.rate:g} "
            f"events/s for {options.seconds:g} s")
        last = _produce(bootstrap, options, tally, reader, say)
        _wait_consumed(bootstrap, last, reader, say)
        reader.drain(say)
        _summary(tally, [q for q, _ in queries], worker.url, say)
        return tally


PROGRESS_EVERY = 5.0
"""Seconds between progress lines when the output is not a terminal (a log)."""


def _printer(out: TextIO) -> Callable[..., None]:
    """Print a line above the progress line, which a terminal redraws in place; a log
    gets a progress line every few seconds instead."""
    live = out.isatty()
    last = [0.0]

    def say(text: str, progress: bool = False) -> None:
        if progress:
            if live:
                out.write("\r\033[K" + text)
                out.flush()
            elif time.monotonic() - last[0] >= PROGRESS_EVERY:
                last[0] = time.monotonic()
                out.write(text + "\n")
                out.flush()
            return
        out.write(("\r\033[K" if live else "") + text + "\n")
        out.flush()

    return say


def _produce(bootstrap: str, options: DemoOptions, tally: Tally, reader: ResultsReader,
             say: Callable[..., None]) -> dict[tuple[str, int], int]:
    """Produce in real time; returns the last offset produced per topic partition."""
    from juggler.demo.vitals import VitalsSimulator
    from juggler.kafka.producer import EventProducer

    producer = EventProducer(bootstrap, Codec())
    start = _now_ms()
    end = start + int(options.seconds * 1000)
    events = VitalsSimulator(options.patients, options.seed).events(start, options.rate)
    pending = next(events)
    last_line = 0.0
    while pending[2] < end:
        now = _now_ms()
        while pending[2] <= now and pending[2] < end:
            stream, key, ts, data = pending
            producer.send(stream, key, ts, data)
            tally.produced += 1
            pending = next(events)
        reader.drain(say)
        if time.monotonic() - last_line > 0.5:
            last_line = time.monotonic()
            say(_progress(tally, (now - start) / 1000), progress=True)
        time.sleep(0.02)
    producer.flush()
    return producer.last_offsets


def _progress(tally: Tally, elapsed: float) -> str:
    counts = " ".join(f"{q}={n}" for q, n in sorted(tally.results.items()))
    # a rate over less than a second says nothing about the producer
    rate = f" ({tally.produced / elapsed:,.0f}/s)" if elapsed >= 1 else ""
    return (f"[{elapsed:5.1f} s] produced {tally.produced:,} events{rate} | "
            f"results: {counts or 'none yet'}")


def _wait_consumed(bootstrap: str, last: dict[tuple[str, int], int],
                   reader: ResultsReader, say: Callable[..., None],
                   timeout: float = 60.0) -> None:
    """Until the worker's group has committed past every produced event: its results
    are then committed too (the worker commits both in one transaction; the Faust
    runtime acknowledges an input record only once the broker has its results)."""
    from juggler.kafka.group_progress import GroupProgress

    def waiting(behind: int) -> None:
        say(f"waiting for the worker: {behind:,} events to go", progress=True)
        reader.drain(say)

    with GroupProgress(bootstrap, APP_ID) as progress:
        if not progress.wait(last, timeout, on_wait=waiting):
            say(f"the worker did not catch up within {timeout:g} s")


def _summary(tally: Tally, query_ids: list[str], url: str, say: Callable[..., None]) -> None:
    say("")
    say(f"{tally.produced:,} events produced; results per query (on the shared topic "
        f"{RESULTS}, each record naming its query; or GET {url}/queries/<id>/results):")
    for query_id in query_ids:
        say(f"  {query_id:<14} {tally.results[query_id]:>6,}")
    if tally.latencies:
        ordered = sorted(tally.latencies)
        p50 = ordered[len(ordered) // 2]
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        say(f"event time to result on the client: p50 {p50 * 1000:.0f} ms, "
            f"p99 {p99 * 1000:.0f} ms")


def _now_ms() -> int:
    return int(time.time() * 1000)


class ResultsReader:
    """Reads the shared results topic from the beginning, read_committed, in a thread;
    the main thread prints what it queued (one writer to the terminal)."""

    def __init__(self, bootstrap: str, query_ids: list[str], tally: Tally, show: int) -> None:
        from confluent_kafka import Consumer

        from juggler.kafka.client_config import client_config

        self.topics = [RESULTS]  # every query's results, the query id in each record
        self.consumer = Consumer(client_config(bootstrap, {
            "group.id": "juggler-demo-view", "isolation.level": "read_committed",
            "auto.offset.reset": "earliest", "enable.auto.commit": False, "log_level": 0}))
        self.codec = Codec()
        self.tally = tally
        self.show = show
        self.lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="results", daemon=True)

    def start(self) -> None:
        from confluent_kafka import TopicPartition

        metadata = self.consumer.list_topics(timeout=10)
        self.consumer.assign([TopicPartition(t, p, 0) for t in self.topics
                              for p in metadata.topics[t].partitions])
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(10)
        self.consumer.close()

    def drain(self, say: Callable[..., None]) -> None:
        with contextlib.suppress(queue.Empty):
            while True:
                say(self.lines.get_nowait())

    def _loop(self) -> None:
        while not self.stopping.is_set():
            for msg in self._poll():
                result = self.codec.decode("juggler.Result", msg.value())
                arrived = time.time()
                query = result["query"]
                self.tally.results[query] += 1
                self.tally.latencies.append(max(0.0, arrived - result["ts"] / 1000))
                if self.tally.results[query] <= self.show:
                    self.lines.put(_result_line(result))

    def _poll(self) -> Iterator[Any]:
        # poll, not consume(n, timeout): consume waits for n messages or the timeout,
        # which would add up to the timeout to every result's latency
        msg = self.consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            yield msg


def _result_line(result: dict[str, Any]) -> str:
    """One result as a reader tells it apart from the next: its event time as a clock
    reading, the selected columns, and the events it combines (each stream's
    partition:offset), which are what differ between results whose rows look alike."""
    row = ", ".join(f"{k}={_value(v)}" for k, v in sorted(result["row"].items()))
    sources = " ".join(f"{stream}@{pos['partition']}:{pos['offset']}"
                       for stream, pos in sorted(result["sources"].items()))
    return f"  [{result['query']}] {result['key']} at {_clock(result['ts'])}: {row}  <- {sources}"


def _clock(ts: int) -> str:
    """An event time as the local wall clock (the demo's event time is wall-clock
    time), to the millisecond."""
    return time.strftime("%H:%M:%S", time.localtime(ts / 1000)) + f".{ts % 1000:03d}"


def _value(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)
