"""A Faust user's agent over the worker's results: the example app
(`examples/faust/alerts.py`, run by the `faust` command as a user runs it) against a
real worker and broker sees each result the worker wrote exactly once.

The worker runs the ICU example (its queries registered first, then its events file
with the control lines at their barriers, as `juggler produce` sends it) while the
Faust app is already consuming, so the app reads the results topic while the worker's
transactions are open and committed. What the worker wrote is read back
read_committed; the app's view is its log (one line per result) and its alerts topic
(the results that raise an alert, forwarded in the worker's Avro by the app's own
transactions).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_worker_harness import Client, WorkerProcess, diff, unique

pytest.importorskip("faust")

from juggler.wire.commands import parse_event_line  # noqa: E402
from juggler.client.produce import lines_of, produce  # noqa: E402
from juggler.faust import records  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ICU = ROOT / "examples" / "icu"
DEADLINE = 120.0
"""Generous: the Faust app joins its group and starts one transactional producer per
partition before it reads."""

LINE = re.compile(r"result (\S+) (\S+) ts=(-?\d+) ((?:\S+=\S+\[\d+\]@\d+ ?)+)")
SOURCE = re.compile(r"(\w+)=(\S+)\[(\d+)\]@(\d+)")


def seen(query: str, key: str, ts: int, sources: dict[str, tuple[str, int, int]]) -> tuple:
    """What a line of the app's log says of a result: its query, key, ts and sources."""
    return query, key, ts, tuple(sorted(sources.items()))


def logged(log: str) -> Counter:
    out: Counter = Counter()
    for match in LINE.finditer(log):
        query, key, ts, sources = match.groups()
        out[seen(query, key, int(ts), {s: (t, int(p), int(o))
                                       for s, t, p, o in SOURCE.findall(sources)})] += 1
    return out


def decoded(client: Client, topic: str, record: type[records.JugglerRecord]) -> list[Any]:
    """Every committed record of `topic`, decoded by the record class's Faust codec."""
    return [record.loads(m.value()) for m in client.read(topic)]


def raises_alert(result: records.Result) -> bool:
    return any(c.endswith(".alert") and v is True for c, v in result.row.items())


def abort_a_result(bootstrap: str, topic: str) -> records.Result:
    """Write a result to every partition of `topic` in a transaction and abort it: what
    a worker's failed round leaves in the log. Written before the worker's results, so
    an app that saw every result also went past these records; a read_uncommitted
    consumer would take them as results."""
    from confluent_kafka import Producer

    from juggler.kafka.client_config import client_config

    result = records.Result(query="aborted", key="p1", ts=1, row={"H.alert": True},
                            sources={"H": records.Position(topic, 0, 0)})
    producer = Producer(client_config(bootstrap, {"transactional.id": unique("abort-")}))
    partitions = producer.list_topics(topic, timeout=10).topics[topic].partitions
    producer.init_transactions(30)
    producer.begin_transaction()
    for partition in partitions:
        producer.produce(topic, key=b"p1", value=result.dumps(), partition=partition,
                         headers=[("juggler-query", b"aborted")])
    producer.flush(30)
    producer.abort_transaction(30)
    return result


class FaustApp:
    """`faust -A examples.faust.alerts worker` with the worker's bootstrap and prefix,
    its own app id and data directory, no web server."""

    def __init__(self, bootstrap: str, prefix: str, workdir: Path) -> None:
        self.app_id = unique("alerts-")
        self.log = workdir / "faust.log"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT / "services"), str(ROOT), env.get("PYTHONPATH")]))
        env.update({"JUGGLER_BOOTSTRAP": bootstrap, "JUGGLER_TOPIC_PREFIX": prefix,
                    "JUGGLER_ALERTS_APP_ID": self.app_id, "PYTHONUNBUFFERED": "1"})
        faust = Path(sys.executable).with_name("faust")
        self.argv = [str(faust), "--datadir", str(workdir / "faust-data"),
                     "-A", "examples.faust.alerts", "worker", "-l", "info", "--without-web"]
        self.env = env
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, env=self.env, cwd=self.workdir,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait(self, what: str, done: Callable[[], bool], timeout: float = DEADLINE) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"faust exited with {self.proc.returncode} waiting for "
                                     f"{what}\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"faust: no {what} after {timeout}s\n{self.tail()}")
            time.sleep(0.3)

    def stop(self) -> int | None:
        """SIGTERM (Faust stops its agents, commits and leaves the group); SIGKILL to
        the process group after 60 s."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        return self.proc.returncode

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.text().splitlines()[-lines:])


def test_the_faust_example_sees_each_result_once(kafka_bootstrap: str, tmp_path: Path) -> None:
    app_id = unique("faustc")
    prefix = f"{app_id}."
    worker = WorkerProcess(kafka_bootstrap, app_id, prefix, tmp_path)
    client = Client(kafka_bootstrap, prefix)
    client.watch = worker.revive
    consumed = [client.names.stream(s) for s in "BHKT"] + [client.names.fanout]
    app = FaustApp(kafka_bootstrap, prefix, tmp_path)
    with worker:
        queries = [json.loads(line)
                   for line in (ICU / "queries.jsonl").read_text().splitlines()]
        produce(kafka_bootstrap, [(i, parse_event_line({"control": "register", **q}))
                                  for i, q in enumerate(queries, 1)], prefix=prefix)
        try:
            app.start()
            app.wait("Ready", lambda: "[^Worker]: Ready" in app.text())
            aborted = abort_a_result(kafka_bootstrap, client.names.all_results)
            produce(kafka_bootstrap, lines_of(ICU / "events.jsonl"), prefix=prefix)
            client.wait_consumed(app_id, consumed)

            written = decoded(client, client.names.all_results, records.Result)
            assert {r.query for r in written} == {q["id"] for q in queries} | {"q2"}, \
                "every ICU query, the one registered mid-file included, has results"
            expected_lines = Counter(seen(r.query, r.key, r.ts, r.to_engine().sources)
                                     for r in written)
            expected_alerts = Counter(r.identity() for r in written if raises_alert(r))
            assert 0 < sum(expected_alerts.values()) < len(written)

            app.wait(f"{len(written)} result lines",
                     lambda: sum(logged(app.text()).values()) >= len(written))
            alerts_topic = f"{prefix}alerts"
            app.wait(f"{sum(expected_alerts.values())} alerts",
                     lambda: len(client.read(alerts_topic)) >= sum(expected_alerts.values()))
            # the app committed its position past every result (in its transactions)
            client.wait_consumed(app.app_id, [client.names.all_results], timeout=DEADLINE)
        finally:
            status = app.stop()
        assert status == 0, f"faust exited with {status}\n{app.tail()}"

        lines = logged(app.text())
        assert not [line for line in lines if line[0] == aborted.query], \
            "the app read a result of an aborted transaction: it must read read_committed"
        assert lines == expected_lines, diff(expected_lines, lines)
        messages = client.read(alerts_topic)
        alerts = [records.Result.loads(m.value()) for m in messages]
        actual_alerts = Counter(r.identity() for r in alerts)
        assert actual_alerts == expected_alerts, diff(expected_alerts, actual_alerts)
        assert [m.key() for m in messages] == [r.key.encode() for r in alerts]

        # the worker's other records decode with the Faust codecs too: the dead letter of
        # the example's late event (H of p1 at 11800 after 12000, late in any order) and
        # the statuses of every command
        letters = decoded(client, client.names.deadletter, records.DeadLetter)
        assert letters and {d.kind for d in letters} == {"late"}
        statuses = decoded(client, client.names.status, records.CommandStatus)
        assert {s.id for s in statuses if s.accepted} == {q["id"] for q in queries} | {"q2"}
        assert any(s.live for s in statuses)
