"""Workload K on the Faust runtime beside the worker (docs/benchmarks.md, "Workload K on
the Faust runtime").

    python -m bench.faust_load [--events 100000] [--repeats 1] [--latency-seconds 20]
                               [--runtimes worker,faust] [--py-spy PATH]
                               [--out docs/benchmarks.md]

Starts a fresh local broker and measures, for each runtime (`juggler worker` and
`juggler worker --runtime faust`, each a child process with the same settings), on the
same broker and the same K records (workload J, n = 100, 50% overlap, as
`bench.kafka_load`), each on topics of its own (a prefix per runtime and phase):

1. events/s on a backlog produced beforehand in one transaction (`kafka_load.timed_backlog`:
   from its commit to the group's commit covering the last event); beside it, the time
   to the last event counted processed in the runtime's `/metrics`, since the Faust
   runtime's offsets commit on Faust's timer (every 2.8 s) after its results are out;
2. p50/p99 produce-to-result latency at a read_committed client with the same events
   produced live at the same rate to both (`kafka_load.measure_latency`): half the
   lower of the two backlog rates (the Faust runtime's, in every run so far), since
   half of each one's own rate would not compare like with like;
3. peak memory: the peak resident set (`VmHWM`) of the runtime process, and of its
   results index process, over the backlog and over the live run;
4. a SIGKILL in the middle of a backlog (when half its events are counted processed)
   and a restart: the results present after it caught up, read read_committed and
   counted by identity (query, key, ts, sources' positions), against the results of the
   worker's uninterrupted backlog run (exactly once, and equal to the engine's):
   missing, unexpected, and how many were published more than once, and whether each
   repeat has a copy carrying `juggler-may-repeat: 1`.

Figures are medians over `--repeats` (each repeat's beside them where they differ);
ratios are Faust / worker of the medians. Where the time goes: the loop's phases
(`juggler_loop_seconds_total`) and the CPU of each process over the backlog and the live
run (`bench.worker_profile`), per runtime; the events per commit (the worker's
transactions, the Faust runtime's batch marks in its state table); and with `--py-spy
PATH` (`pip install py-spy`) one more backlog through the Faust runtime, sampled, its
event loop thread's time by layer (`attribute`). Writes the `faust` section of the
report (`bench.report_sections`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Set as AbstractSet
from itertools import islice
from pathlib import Path
from typing import Any

from bench import worker_profile
from bench.kafka_load import (LATENESS_MS, PARTITIONS, _free_port, _machine, _metric,
                              _produce, _results, _wait_committed, _with_alerts, log,
                              measure_latency, timed_backlog)
from bench.kafka_selection import register
from bench.report_sections import publish
from bench.workloads import workload_j

APP_ID = "juggler-bench-kf"
RUNTIMES = ("worker", "faust")
SESSION_TIMEOUT = 6.0
"""Of the SIGKILL run's processes: the restarted one waits for the group to drop the
killed member for up to this long (the default, 45 s, would be most of the run)."""
KILL_AT = 0.5
"""The SIGKILL lands when this fraction of the backlog's events is counted processed."""
POLL = 0.1
"""Seconds between the `/metrics` reads that watch a run's progress: each read renders
every series on the runtime's own thread or loop, so not much more often than this."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.faust_load",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000,
                        help="events of workload J in the backlog and the SIGKILL runs")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--latency-seconds", type=float, default=20.0)
    parser.add_argument("--runtimes", default=",".join(RUNTIMES),
                        help="which runtimes, in the order they run (ratios need both)")
    parser.add_argument("--py-spy", metavar="PATH", default=None,
                        help="py-spy's executable: then one more backlog through the Faust "
                             "runtime, sampled, and its event loop's time by layer")
    parser.add_argument("--out", default="docs/benchmarks.md", help="report ('-': none)")
    args = parser.parse_args(argv)
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]

    from juggler.kafka.broker import LocalBroker

    workload = workload_j(100, 0.5)
    stream = _with_alerts(workload.events())
    backlog = list(islice(stream, args.events))
    log(f"K on {', '.join(runtimes)}: J n=100 50% overlap, {args.events} events, "
        f"{args.repeats} repeat(s)")
    with tempfile.TemporaryDirectory(prefix="juggler-bench-kf-") as tmp, \
            LocalBroker(Path(tmp) / "kafka") as broker:
        # the Faust app keeps a data directory under the temporary directory: this run's
        os.environ["TMPDIR"] = tmp
        rows = measure_all(broker.bootstrap, Path(tmp), workload.queries, backlog, stream,
                           runtimes, args)
    publish(render(rows, args), args.out, "faust")
    return 0


def measure_all(bootstrap: str, workdir: Path, queries: list[tuple[str, str]],
                backlog: list[Any], later: Any, runtimes: list[str],
                args: argparse.Namespace) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {r: [] for r in runtimes}
    reference: Counter[tuple[Any, ...]] | None = None
    for repeat in range(args.repeats):
        for runtime in runtimes:
            run = backlog_run(bootstrap, workdir, runtime, f"b{repeat}{runtime[0]}.",
                              queries, backlog)
            if reference is None and (runtime == "worker" or "worker" not in runtimes):
                reference = run["results"]  # exactly once: the worker's, when it runs
            runs[runtime].append(run)
        # the same live events, at the same rate, to both: half the lower backlog rate
        rate = min(runs[rt][-1]["rate"] for rt in runtimes) / 2
        live = list(islice(later, int(rate * args.latency_seconds) + 1))
        for runtime in runtimes:
            runs[runtime][-1]["live"] = live_run(bootstrap, workdir, runtime,
                                                 f"l{repeat}{runtime[0]}.", queries, live,
                                                 rate, args.latency_seconds)
        assert reference is not None  # set by the first repeat's backlog runs above
        for runtime in runtimes:
            runs[runtime][-1]["kill"] = kill_run(bootstrap, workdir, runtime,
                                                 f"k{repeat}{runtime[0]}.", queries, backlog,
                                                 reference)
    assert reference is not None
    for runtime in runtimes:
        for run in runs[runtime]:
            run["equal"] = run["results"] == reference
            run["versus"] = compare(reference, run["results"], Counter(), run["late_set"])
    spied = None
    if args.py_spy and "faust" in runtimes:
        spied = spied_backlog(bootstrap, workdir, "faust", "sf.", queries, backlog, args.py_spy)
    return {"runs": runs, "reference": sum(reference.values()), "runtimes": runtimes,
            "spied": spied}


def _process(bootstrap: str, workdir: Path, runtime: str, prefix: str,
             **settings: Any) -> tuple[Any, str]:
    """A runtime's process on topics of its own (`prefix`), and its app id."""
    from juggler.launcher import WorkerProcess

    app_id = f"{APP_ID}-{prefix.rstrip('.')}"
    return WorkerProcess({"runtime": runtime, "bootstrap": bootstrap, "app_id": app_id,
                          "web_port": _free_port(), "web_host": "127.0.0.1",
                          "allowed_lateness": LATENESS_MS, "loglevel": "warning",
                          "topic_prefix": prefix, "partitions": PARTITIONS, **settings},
                         workdir / f"{prefix}{runtime}.log"), app_id


def backlog_run(bootstrap: str, workdir: Path, runtime: str, prefix: str,
                queries: list[tuple[str, str]], events: list[Any]) -> dict[str, Any]:
    """Events/s on a backlog (`timed_backlog`), to the group's commit and to the last
    event counted processed; the profile over it, the peak memory, the results."""
    w, app_id = _process(bootstrap, workdir, runtime, prefix)
    with w:
        register(bootstrap, prefix, queries)  # LIVE in every partition before the backlog
        counted = Watch(lambda: _metric(w, "juggler_events_in_total") >= len(events))
        t0, elapsed, profile = timed_backlog(bootstrap, w, prefix, app_id, events)
        processed = counted.wait() - t0
        late = _metric(w, "juggler_late_events_total")
        memory = peak_memory(w.proc.pid)
    results = _results(bootstrap, prefix)
    late_set = late_letters(bootstrap, prefix)
    # what a commit carries: the worker's transactions, the Faust runtime's batch marks
    commits = (profile["transactions"]["juggler_transaction_seconds"]["count"]
               if runtime == "worker" else faust_batches(bootstrap, app_id))
    log(f"  {runtime}: backlog {len(events) / elapsed:,.0f} ev/s to the commit, "
        f"{len(events) / processed:,.0f} ev/s to the last event processed, {late:.0f} late, "
        f"{sum(results.values()):,} results, peak RSS {memory['process'] / 2**20:,.0f} MiB")
    return {"rate": len(events) / elapsed, "processed_rate": len(events) / processed,
            "late": late, "memory": memory, "profile": profile, "results": results,
            "commits": commits, "per_commit": len(events) / commits if commits else 0.0,
            "late_set": late_set}


def faust_batches(bootstrap: str, app_id: str) -> int:
    """How many batches the Faust runtime committed: the marks (`state_table.MARK`, one
    per batch) in its state table's changelog (Faust names it `<app id>-state-changelog`)."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    from juggler.faust.state_table import MARK
    from juggler.kafka.client_config import client_config
    from juggler.kafka.offsets import log_ends

    topic, mark = f"{app_id}-state-changelog", b"/" + MARK.encode()
    ends = log_ends(AdminClient(client_config(bootstrap)), [(topic, p) for p in range(PARTITIONS)])
    consumer = Consumer(client_config(bootstrap, {
        "group.id": f"marks-{time.time()}", "enable.auto.commit": False, "log_level": 0}))
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    marks, seen, deadline = 0, 0, time.monotonic() + 300
    try:
        while seen < sum(ends.values()) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=1.0):
                if msg.error() is None:
                    seen += 1
                    marks += (msg.key() or b"").endswith(mark)
    finally:
        consumer.close()
    return marks


def live_run(bootstrap: str, workdir: Path, runtime: str, prefix: str,
             queries: list[tuple[str, str]], events: list[Any], rate: float,
             seconds: float) -> dict[str, Any]:
    """`measure_latency` at `rate` on fresh topics with the queries LIVE; the rate kept
    up, the profile and the peak memory over the run."""
    w, app_id = _process(bootstrap, workdir, runtime, prefix)
    with w:
        register(bootstrap, prefix, queries)
        before, t0 = worker_profile.snapshot(w), time.perf_counter()
        out = measure_latency(bootstrap, prefix, events, queries, rate, seconds,
                              committed=app_id)
        out["profile"] = worker_profile.profile(before, worker_profile.snapshot(w),
                                                out["events"], time.perf_counter() - t0)
        out["late"] = _metric(w, "juggler_late_events_total")
        out["memory"] = peak_memory(w.proc.pid)
    log(f"  {runtime}: live at {rate:,.0f} ev/s: p50 {out['p50'] * 1000:,.0f} ms, "
        f"p99 {out['p99'] * 1000:,.0f} ms, kept {out['kept']:,.0f} ev/s, {out['late']:.0f} late")
    return out


def kill_run(bootstrap: str, workdir: Path, runtime: str, prefix: str,
             queries: list[tuple[str, str]], events: list[Any],
             reference: Counter[tuple[Any, ...]]) -> dict[str, Any]:
    """A backlog, a SIGKILL once `KILL_AT` of it is counted processed, a restart; the
    results once the group committed the last event, against `reference`."""
    w, app_id = _process(bootstrap, workdir, runtime, prefix,
                         instance_id=f"{prefix.rstrip('.')}-bench",
                         session_timeout=SESSION_TIMEOUT)
    with w:
        register(bootstrap, prefix, queries)
        positions, _ = _produce(bootstrap, prefix, events)
        Watch(lambda: _metric(w, "juggler_events_in_total") >= KILL_AT * len(events),
              interval=0.02).wait()
        killed_after = _metric(w, "juggler_events_in_total")  # may read a moment late
        w.kill()
        restart = time.perf_counter()
        w.start(timeout=300)
        _wait_committed(bootstrap, app_id, positions)
        caught_up = time.perf_counter() - restart
        maybe = _metric(w, "juggler_results_maybe_repeated_total")
        memory = peak_memory(w.proc.pid)
    flagged: Counter[tuple[Any, ...]] = Counter()
    got = _results(bootstrap, prefix, flagged)
    late = late_letters(bootstrap, prefix)
    out = {"killed_at": killed_after, "caught_up": caught_up, "maybe_repeated": maybe,
           "memory": memory, "late": len(late), **compare(reference, got, flagged, late)}
    log(f"  {runtime}: SIGKILL after {killed_after:,.0f} events: {out['expected']:,} "
        f"expected, {out['present']:,} present, {out['missing']:,} missing "
        f"({out['missing_late']:,} with a late source; {len(late):,} late events), "
        f"{out['unexpected']:,} unexpected, {out['repeated']:,} published more than once "
        f"({out['copies']:,} extra copies, {out['unflagged']:,} without the header); caught "
        f"up {caught_up:.1f} s after the restart")
    return out


def spied_backlog(bootstrap: str, workdir: Path, runtime: str, prefix: str,
                  queries: list[tuple[str, str]], events: list[Any], py_spy: str
                  ) -> dict[str, Any]:
    """A backlog as in `backlog_run` (not timed for the report: the sampler takes CPU
    too), with py-spy sampling the runtime process from before the backlog is produced
    until the group committed its last event; the event loop thread's samples by layer
    (`attribute`)."""
    import signal
    import subprocess

    w, app_id = _process(bootstrap, workdir, runtime, prefix)
    raw = workdir / f"{prefix}py-spy.txt"
    with w:
        register(bootstrap, prefix, queries)
        spy = subprocess.Popen([py_spy, "record", "--pid", str(w.proc.pid), "--format", "raw",
                                "--rate", str(SPY_RATE), "--idle", "--threads",
                                "--nonblocking", "--output", str(raw)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(2.0)  # attached
        _, elapsed, _ = timed_backlog(bootstrap, w, prefix, app_id, events)
        spy.send_signal(signal.SIGINT)
        spy.wait(120)
    layers, frames = attribute(raw.read_text().splitlines())
    log(f"  {runtime} with py-spy: {len(events) / elapsed:,.0f} ev/s, "
        f"{sum(layers.values()):,} samples of its event loop thread")
    return {"rate": len(events) / elapsed, "events": len(events), "layers": layers,
            "frames": frames}


SPY_RATE = 100
"""py-spy's samples per second: one sample stands for 10 ms of the thread's time."""
LAYERS = (
    ("idle", "idle: the event loop waiting in epoll (for the broker's answers, the next "
             "fetch, a reorder deadline)"),
    ("operator", "the operator (`process_batch_encoded`, native)"),
    ("commit", "the runtime's commit (`FaustJob._commit`: state-table records, awaiting "
               "the sends), Python side"),
    ("agent", "the runtime's agent hand-over (`FaustJob.stream_record`), itself"),
    ("task", "the worker's task code: decode, reorder buffer, results framing, state "
             "records, metrics"),
    ("metrics", "metrics: counting, and `/metrics` read by the benchmark (aiohttp)"),
    ("faust", "Faust and mode: consumer, conductor, streams, agents, tables"),
    ("aiokafka", "aiokafka: fetch and produce requests, protocol, connections"),
    ("asyncio", "the asyncio event loop itself (callbacks, tasks, futures)"),
    ("logging", "logging (Faust's and aiokafka's debug calls, filtered)"),
    ("other", "anything else"),
)
FRAMES = {
    "agent": "events (juggler/faust/app.py",
    "stream_record": "FaustJob.stream_record (",
    "task_run": "PartitionTask.run (",
    "commit": "FaustJob._commit (",
    "sender": "Sender._sender_routine (",
}
"""Frames whose inclusive samples the report gives: the agent (Faust's stream machinery
per record and the hand-over), the hand-over alone, a task's batch, a batch's commit,
aiokafka's producer routine."""


def _layer(frame: str) -> str | None:
    """The layer a stack frame (`function (path:line)`, as py-spy writes it) belongs
    to, or None to look at its caller."""
    func, _, where = frame.partition(" (")
    if "process_batch_encoded" in func:
        return "operator"
    if where.startswith("juggler/faust/state_table.py") or (
            where.startswith("juggler/faust/runtime.py") and func.split(".")[-1] in (
                "_commit", "_publish", "_send_table", "_write", "_flag_repeats")):
        return "commit"
    if where.startswith(("prometheus_client/", "aiohttp/", "faust/web/",
                         "juggler/runtime/metrics.py")) or func.startswith("Metrics."):
        return "metrics"
    if func in ("FaustJob.stream_record", "events"):
        return "agent"
    if where.startswith("juggler/"):
        return "task"
    if where.startswith("aiokafka/"):
        return "aiokafka"
    if where.startswith(("faust/", "mode/")):
        return "faust"
    if where.startswith(("asyncio/", "selectors.py")):
        return "asyncio"
    if where.startswith("logging/"):
        return "logging"
    return None


def attribute(lines: list[str]) -> tuple[Counter[str], Counter[str]]:
    """py-spy's raw output (`frame;frame;... count`, outermost first, the thread first
    with `--threads`): the main (event loop) thread's samples by the layer of their
    innermost frame that has one (`_layer`; waiting in `select` is `idle`), and the
    samples that include each of `FRAMES`."""
    layers: Counter[str] = Counter()
    frames: Counter[str] = Counter()
    for line in lines:
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        chain = stack.split(";")
        if chain[0].startswith("thread ("):
            if not chain[0].endswith("MainThread"):
                continue
            chain = chain[1:]
        n = int(count)
        if chain and chain[-1].split(" (")[0].endswith("Selector.select"):
            layers["idle"] += n
        else:
            layers[next((layer for frame in reversed(chain)
                         if (layer := _layer(frame)) is not None), "other")] += n
        for name, marker in FRAMES.items():
            if any(frame.startswith(marker) for frame in chain):
                frames[name] += n
    return layers, frames


def late_letters(bootstrap: str, prefix: str) -> set[tuple[str, int, int]]:
    """The records dead-lettered as late on the deadletter topic, as (topic without the
    prefix, partition, offset), each once (a replay after a crash dead-letters again)."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    from juggler.codec.avro import Codec
    from juggler.kafka.client_config import client_config
    from juggler.kafka.offsets import log_ends

    topic, codec = f"{prefix}juggler.deadletter", Codec()
    admin = AdminClient(client_config(bootstrap))
    partitions = list(admin.list_topics(topic, timeout=30).topics[topic].partitions)
    ends = log_ends(admin, [(topic, p) for p in partitions])
    partitions = [p for p in partitions if ends[(topic, p)] > 0]  # no position in an empty one
    if not partitions:
        return set()
    consumer = Consumer(client_config(bootstrap, {
        "group.id": f"late-{time.time()}", "isolation.level": "read_committed",
        "enable.auto.commit": False, "log_level": 0}))
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    late, quiet = set(), 0
    try:
        # to the log ends; or until nothing came for 5 s (a partition whose records are
        # all aborted or markers gives a consumer no position to compare)
        while quiet < 5 and any(
                tp.offset < ends[(topic, tp.partition)] for tp in consumer.position(
                    [TopicPartition(topic, p) for p in partitions])):
            messages = consumer.consume(1000, timeout=1.0)
            quiet = 0 if messages else quiet + 1
            for msg in messages:
                if msg.error() is None:
                    letter = codec.decode("juggler.DeadLetter", msg.value())
                    if letter["kind"] == "late":
                        late.add((letter["topic"].removeprefix(prefix), letter["partition"],
                                  letter["offset"]))
    finally:
        consumer.close()
    return late


def compare(expected: Counter[tuple[Any, ...]], got: Counter[tuple[Any, ...]],
            flagged: Counter[tuple[Any, ...]],
            late: AbstractSet[tuple[str, int, int]] = frozenset()) -> dict[str, int]:
    """Results after a crash against the uninterrupted run's, by identity: expected and
    present (distinct identities), missing, and of those the ones with a source among
    the `late` records (dead-lettered as late, so not evaluated: lateness, not loss),
    unexpected (present, not expected), published more than once (identities, and
    copies beyond the first), and repeated identities none of whose copies carries the
    may-repeat header (a repeat a consumer could not tell)."""
    repeated = {i: n for i, n in got.items() if n > 1}
    missing = expected.keys() - got.keys()
    return {"expected": len(expected), "present": len(got), "missing": len(missing),
            "missing_late": sum(1 for i in missing
                                if any(tuple(source[1:]) in late for source in i[3])),
            "unexpected": len(got.keys() - expected.keys()),
            "repeated": len(repeated), "copies": sum(n - 1 for n in repeated.values()),
            "unflagged": sum(1 for i in repeated if not flagged.get(i))}


class Watch:
    """Polls `ready` every `interval` seconds in a thread of its own, from now on; `wait`
    returns the `perf_counter` time of the first poll that found it true."""

    def __init__(self, ready: Any, interval: float = POLL, timeout: float = 3600.0) -> None:
        self.ready, self.interval, self.timeout = ready, interval, timeout
        self.at: float | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + self.timeout
        try:
            while time.monotonic() < deadline:
                if self.ready():
                    self.at = time.perf_counter()
                    return
                time.sleep(self.interval)
        except BaseException as exc:  # reported by wait()
            self.error = exc

    def wait(self) -> float:
        self.thread.join(self.timeout)
        if self.at is None:
            raise RuntimeError(f"not ready in {self.timeout:g} s: {self.error!r}")
        return self.at


def peak_memory(pid: int) -> dict[str, int]:
    """Peak resident set in bytes (`VmHWM`, since the process started) of the runtime
    process `pid` and, summed, of its child processes (the results index)."""
    return {"process": vm_hwm(proc_status(pid)),
            "index": sum(vm_hwm(proc_status(c)) for c in worker_profile.children(pid))}


def proc_status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""


def vm_hwm(status: str) -> int:
    """Bytes of `VmHWM` in a /proc/<pid>/status text (0 when absent: the process ended)."""
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            value, unit = line.split()[1:3]
            return int(value) * {"kB": 1024, "mB": 2**20, "gB": 2**30}[unit]
    return 0


def ratio(faust: float, worker: float) -> str:
    """Faust / worker, for the report; '-' where the worker's figure is 0."""
    return f"{faust / worker:.3g}x" if worker else "-"


def _values(runs: list[dict[str, Any]], *path: str) -> list[float]:
    values = []
    for run in runs:
        value: Any = run
        for part in path:
            value = value[part]
        values.append(value)
    return values


def render(rows: dict[str, Any], args: argparse.Namespace) -> str:
    runs, runtimes = rows["runs"], rows["runtimes"]
    both = runtimes == list(RUNTIMES) or sorted(runtimes) == sorted(RUNTIMES)
    mib = 2 ** 20
    # (label, format, path into a run, and a scale where the figure is not in its unit)
    figures: list[tuple[str, str, tuple[str, ...]] | tuple[str, str, tuple[str, ...], float]] = [
        ("backlog events/s, to the group's commit covering the last event "
         "(`kafka_load.timed_backlog`)", "{:,.0f}", ("rate",)),
        ("backlog events/s, to the last event counted processed in /metrics",
         "{:,.0f}", ("processed_rate",)),
        ("backlog: events per commit (worker: per transaction; Faust runtime: per "
         "batch mark in its state table)", "{:,.1f}", ("per_commit",)),
        ("late events in the backlog", "{:,.0f}", ("late",)),
        ("backlog: the worker's results missing", "{:,.0f}", ("versus", "missing")),
        ("backlog: of those, with a source dead-lettered as late", "{:,.0f}",
         ("versus", "missing_late")),
        ("backlog: results the worker did not publish", "{:,.0f}", ("versus", "unexpected")),
        ("live: the producer's rate, events/s (half the lower backlog rate of its repeat)",
         "{:,.0f}", ("live", "rate")),
        ("live: events/s kept up (to the group's commit)", "{:,.0f}", ("live", "kept")),
        ("live: p50 produce to result (ms)", "{:,.0f}", ("live", "p50"), 1000),
        ("live: p99 produce to result (ms)", "{:,.0f}", ("live", "p99"), 1000),
        ("live: results timed", "{:,.0f}", ("live", "results")),
        ("peak RSS of the runtime process, backlog run (MiB)", "{:,.0f}",
         ("memory", "process"), 1 / mib),
        ("peak RSS of the runtime process, live run (MiB)", "{:,.0f}",
         ("live", "memory", "process"), 1 / mib),
        ("peak RSS of its results index process, backlog run (MiB)", "{:,.0f}",
         ("memory", "index"), 1 / mib),
        ("SIGKILL run: events counted processed when killed", "{:,.0f}", ("kill", "killed_at")),
        ("SIGKILL run: results expected", "{:,.0f}", ("kill", "expected")),
        ("SIGKILL run: results present (distinct)", "{:,.0f}", ("kill", "present")),
        ("SIGKILL run: missing", "{:,.0f}", ("kill", "missing")),
        ("SIGKILL run: of those, with a source dead-lettered as late", "{:,.0f}",
         ("kill", "missing_late")),
        ("SIGKILL run: events dead-lettered as late (distinct)", "{:,.0f}", ("kill", "late")),
        ("SIGKILL run: present but not expected", "{:,.0f}", ("kill", "unexpected")),
        ("SIGKILL run: results published more than once", "{:,.0f}", ("kill", "repeated")),
        ("SIGKILL run: copies beyond the first", "{:,.0f}", ("kill", "copies")),
        ("SIGKILL run: repeated results with no copy marked `juggler-may-repeat`",
         "{:,.0f}", ("kill", "unflagged")),
        ("SIGKILL run: `juggler_results_maybe_repeated_total` after the restart",
         "{:,.0f}", ("kill", "maybe_repeated")),
        ("SIGKILL run: restart to the group's commit of the last event (s)", "{:,.1f}",
         ("kill", "caught_up")),
    ]
    head = "| measurement | " + " | ".join(runtimes) + (" | Faust / worker |" if both else " |")
    lines = [
        "## Workload K on the Faust runtime",
        "",
        f"{time.strftime('%Y-%m-%d')}, `python -m bench.faust_load --events {args.events} "
        f"--repeats {args.repeats} --latency-seconds {args.latency_seconds:g}` on "
        f"{_machine()}, commit `{_commit()}`, the broker, the runtimes and the producer "
        "sharing the machine. "
        f"Workload K's records (J, n = 100, 50% overlap, {args.events:,} events) through "
        "`juggler worker` and `juggler worker --runtime faust` (faust-streaming 0.15.3), "
        f"each a child process with the same settings ({PARTITIONS} partitions, batch_max "
        "1000, allowed lateness 0; the Faust runtime's reorder_ms 1000), one after the "
        "other on the same local broker, each on topics of its own with the same records "
        f"produced to them; medians of {args.repeats} repeat(s), each repeat's figures "
        "in brackets where they differ, ratios of the medians. What each row is:",
        "",
        "- *backlog*: the records produced beforehand in one transaction, timed from its "
        "commit to the group's commit covering the last event, as `bench.kafka_load` "
        "times the worker; beside it, to the moment the runtime's `/metrics` count the "
        f"last event processed (read every {POLL:g} s), since the Faust runtime's "
        "offsets commit on Faust's timer (2.8 s) after its results and state are written;",
        "- *live*: the same events produced to both at one rate, half the lower of the two "
        "runtimes' backlog rates (to the group's commit) in the same repeat (the Faust "
        "runtime's in every run so far), from a producer sending each as it is due "
        "(librdkafka's defaults: linger 5 ms), each result timed from the produce call of its newest source event "
        "to its arrival at a read_committed client (`kafka_load.measure_latency`);",
        "- *peak RSS*: `VmHWM` of the process (`juggler worker`, interpreter and "
        "librdkafka or aiokafka included), since its start; the results index is a "
        "process of its own in both runtimes;",
        f"- *SIGKILL run*: fresh topics, the backlog produced, SIGKILL once {KILL_AT:.0%} "
        f"of its events are counted processed, restarted at once (session timeout "
        f"{SESSION_TIMEOUT:g} s), read read_committed after the group committed the last "
        "event; results counted by identity (query, key, ts, sources' positions) against "
        "the worker's uninterrupted backlog run on the same records.",
        "",
        head,
        "|---|" + "---|" * (len(runtimes) + (1 if both else 0)),
    ]
    for label, fmt, path, *scale in figures:
        k = scale[0] if scale else 1
        each = {rt: [v * k for v in _values(runs[rt], *path)] for rt in runtimes}
        medians = {rt: statistics.median(each[rt]) for rt in runtimes}
        cells = [fmt.format(medians[rt]) + (
            " (" + " / ".join(fmt.format(v) for v in each[rt]) + ")"
            if len({fmt.format(v) for v in each[rt]}) > 1 else "") for rt in runtimes]
        if both:
            cells.append(ratio(medians["faust"], medians["worker"]))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    if "worker" in runtimes:
        lines += ["", "Backlog results equal to the worker's (uninterrupted runs, by "
                      "identity, " + f"{rows['reference']:,} results): " + ", ".join(
                          f"{rt} {sum(r['equal'] for r in runs[rt])} of {len(runs[rt])}"
                          for rt in runtimes) + "."]
    lines += ["", "Raw: " + "; ".join(
        f"{rt} backlog {[round(r['rate']) for r in runs[rt]]}, live p99 ms "
        f"{[round(r['live']['p99'] * 1000) for r in runs[rt]]}" for rt in runtimes) + "."]
    lines += ["", "### Where the time goes (`bench.worker_profile`, the median backlog run)", ""]
    lines += phase_table({rt: median_run(runs[rt])["profile"] for rt in runtimes})
    for rt in runtimes:
        live = median_run(runs[rt])["live"]
        lines += ["", f"**{rt}**, live at {live['rate']:,.0f} events/s (the repeat of the "
                      "median backlog rate):", "", *phase_table({rt: live["profile"]})]
    if rows.get("spied"):
        lines += ["", *spy_table(rows["spied"])]
    return "\n".join(lines) + "\n"


def spy_table(spied: dict[str, Any]) -> list[str]:
    """The Faust runtime's event loop thread during a sampled backlog, by layer."""
    layers, frames, events = spied["layers"], spied["frames"], spied["events"]
    total = sum(layers.values())
    if not total:
        return ["py-spy recorded no sample of the event loop thread."]
    lines = [f"**The Faust runtime's event loop thread, sampled** (py-spy {SPY_RATE} Hz, "
             f"`--idle --nonblocking`, one more backlog of {events:,} events on topics of "
             f"its own, {spied['rate']:,.0f} events/s with the sampler attached; from 2 s "
             "before the backlog was produced to the group's commit of its last event; each "
             "sample counted in the layer of its innermost frame that has one):", "",
             "| layer | samples | share | seconds | µs per event |", "|---|---|---|---|---|"]
    for key, what in LAYERS:
        n = layers.get(key, 0)
        lines.append(f"| {what} | {n:,} | {n / total:.1%} | {n / SPY_RATE:.2f} | "
                     f"{n / SPY_RATE / events * 1e6:.0f} |")
    busy = total - layers.get("idle", 0)
    names = {"agent": "the `events` agent (Faust's stream per record, and the hand-over)",
             "stream_record": "`FaustJob.stream_record` (the hand-over, with decode and "
                              "the reorder buffer's insert)",
             "task_run": "`PartitionTask.run` (a batch: order, operator, framing, state "
                         "records)",
             "commit": "`FaustJob._commit`", "sender": "aiokafka's `Sender` routine"}
    lines += ["", "Inclusive, of the thread's busy samples (" + f"{busy:,}): " + "; ".join(
        f"{names[k]} {frames.get(k, 0) / busy:.1%} "
        f"({frames.get(k, 0) / SPY_RATE / events * 1e6:.0f} µs per event)"
        for k in FRAMES) + "." if busy else ""]
    return lines


def _commit() -> str:
    """The checkout measured: its commit, and whether the runtimes' code differs from it."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, text=True,
                              capture_output=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "services"], cwd=root,
                               text=True, capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (", services/ modified" if dirty else "")


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return sorted(runs, key=lambda r: r["rate"])[len(runs) // 2]


def phase_table(profiles: dict[str, dict[str, Any]]) -> list[str]:
    """The loop's phases (wall and CPU seconds, µs per event) per runtime side by side,
    then each process's CPU over the same stretch."""
    from juggler.runtime.loop_clock import PHASES

    names = list(profiles)
    lines = ["| phase | " + " | ".join(f"{n} s | {n} CPU s | {n} µs/event" for n in names)
             + " |", "|---|" + "---|---|---|" * len(names)]
    for phase in [*PHASES, "sum"]:
        cells = []
        for p in profiles.values():
            wall = sum(p["phases"].values()) if phase == "sum" else p["phases"].get(phase, 0.0)
            cpu = sum(p["phases_cpu"].values()) if phase == "sum" \
                else p["phases_cpu"].get(phase, 0.0)
            cells.append(f"{wall:.2f} | {cpu:.2f} | "
                         f"{wall / p['events'] * 1e6 if p['events'] else 0:.1f}")
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    lines.append("")
    for name, p in profiles.items():
        lines.append(f"CPU seconds, {name} ({p['events']:,} events in {p['seconds']:.2f} s of "
                     f"wall time; 2 cores: at most {2 * p['seconds']:.2f}): " + ", ".join(
                         f"{k} {v:.2f}" for k, v in p["cpu"].items()) +
                     f"; the runtime process {p['cpu']['worker'] / p['events'] * 1e6:.0f} µs "
                     "of CPU per event." if p["events"] else "")
    return lines


if __name__ == "__main__":
    sys.exit(main())
