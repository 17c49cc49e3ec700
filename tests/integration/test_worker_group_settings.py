"""One group, one set of settings: a second worker started in the group (same app id)
with another allowed lateness takes no partition and says why, in its log and on
`/health`, and the group's results are one worker's; `juggler group reset-settings`
is refused while a member is alive, and once the group is stopped it lets the waiting
worker set the group's settings and take every partition."""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

import pytest
from click.testing import CliRunner
from test_worker import LATENESS, Q1, Q2, Reference, generate
from test_worker_group import _partitions
from test_worker_harness import Client, WorkerProcess, by_query, diff, unique

pytestmark = pytest.mark.integration

OTHER_LATENESS = 60_000


def _refusal(worker: WorkerProcess, timeout: float = 90.0) -> dict[str, Any]:
    """The worker's `/health` body once it answers 503 with a reason."""
    deadline = time.monotonic() + timeout
    while True:
        assert worker.proc is not None and worker.proc.poll() is None, worker.log_tail()
        try:
            status, body = worker.get("/health")
        except OSError:  # not listening yet
            status, body = 0, None
        if status == 503 and isinstance(body, dict) and body.get("reason"):
            return body
        assert time.monotonic() < deadline, (status, body, worker.log_tail())
        time.sleep(0.3)


def _late_events(records: list[tuple[str, str, int, dict]]) -> list[tuple[str, str, int, dict]]:
    """One event per key, 3 s older than the key's newest: late at lateness 0, not at
    `OTHER_LATENESS`."""
    newest: dict[str, int] = {}
    for _, key, ts, _ in records:
        newest[key] = max(newest.get(key, 0), ts)
    return [("B", key, ts - 3000, {"pressure": 50.0, "temp": 99.0, "alert": True})
            for key, ts in sorted(newest.items())]


def _reset(bootstrap: str, app_id: str, prefix: str) -> Any:
    from juggler.cli import main

    return CliRunner().invoke(main, ["group", "reset-settings", "--bootstrap", bootstrap,
                                     "--app-id", app_id, "--topic-prefix", prefix])


def test_a_worker_with_other_settings_takes_no_partition(kafka_bootstrap: str,
                                                         tmp_path) -> None:
    app_id = unique("gs")
    prefix = f"{app_id}."
    first = WorkerProcess(kafka_bootstrap, app_id, prefix, tmp_path,
                          allowed_lateness=LATENESS, batch_max=50)
    second = WorkerProcess(kafka_bootstrap, app_id, prefix, tmp_path,
                           allowed_lateness=OTHER_LATENESS, batch_max=50)
    client = Client(kafka_bootstrap, prefix)
    streams = [client.names.stream(s) for s in "BHKT"]
    ref = Reference()  # one worker's results: lateness LATENESS
    try:
        first.start()
        second.launch()
        body = _refusal(second)
        reason = body["reason"]
        assert f"allowed_lateness: {OTHER_LATENESS} here, {LATENESS} in the group" in reason
        assert f"juggler group reset-settings --app-id {app_id}" in reason
        assert body["partitions"] == []
        assert reason in second.logfile.read_text()  # the log says it too

        for qid, text in (("q1", Q1), ("q2", Q2)):
            assert client.wait_status(client.command("REGISTER", qid, text))["status"] == "ACCEPTED"
            ref.register(qid, text)
        records = generate(random.Random(11), 600, 1_000_000)
        ref.process(client.send_events(records))
        client.wait_consumed(app_id, streams)
        late = client.send_events(_late_events(records))  # dead letters, no results
        client.wait_consumed(app_id, streams)

        assert _partitions(first) == [0, 1]
        assert second.get("/health")[0] == 503
        letters = client.dead_letters()
        assert Counter((d["topic"], d["partition"], d["offset"], d["kind"]) for d in letters) \
            == Counter((*e.position, "late") for e in late)
        expected = by_query(ref.results)
        for qid in ("q1", "q2"):
            actual = Counter(r.identity() for r in client.results(qid))
            assert actual == expected[qid], f"{qid}: {diff(expected[qid], actual)}"

        # changing a group's settings: refused while a member runs, then stop, reset
        refused = _reset(kafka_bootstrap, app_id, prefix)
        assert refused.exit_code == 1 and "1 live member(s)" in refused.output, refused.output
        first.stop()
        done = _reset(kafka_bootstrap, app_id, prefix)
        assert done.exit_code == 0, done.output
        second.wait_ready(90)  # it reads the group's settings again, claims them, joins
        assert _partitions(second) == [0, 1]
    finally:
        second.stop()
        first.stop()


def test_a_faust_app_in_a_workers_group_stops_and_says_why(kafka_bootstrap: str,
                                                           tmp_path) -> None:
    """The Faust runtime checks the same settings before its app joins the group, and
    stops (status 78) instead of waiting: its web port starts with the app."""
    from juggler.runtime.settings_log import REFUSED_EXIT

    app_id = unique("gf")
    prefix = f"{app_id}."
    worker = WorkerProcess(kafka_bootstrap, app_id, prefix, tmp_path)
    faust = WorkerProcess(kafka_bootstrap, app_id, prefix, tmp_path, runtime="faust")
    try:
        worker.start()
        faust.launch()
        assert faust.proc is not None
        assert faust.proc.wait(120) == REFUSED_EXIT, faust.log_tail()
        assert 'runtime: "faust" here, "worker" in the group' in faust.log_tail()
        assert _partitions(worker) == [0, 1]
    finally:
        faust.stop()
        worker.stop()


def test_workers_starting_at_once_agree_on_one_claim(kafka_bootstrap: str) -> None:
    """Four members of one group claim the group's settings at the same moment, each with
    another lateness: exactly one finds its own settings are the group's, and the other
    three are refused in favour of that one (each read past its own claim)."""
    import threading
    from types import SimpleNamespace

    from confluent_kafka.admin import AdminClient

    from juggler.codec.avro import Codec
    from juggler.kafka.client_config import client_config
    from juggler.kafka.topics import apply_topics
    from juggler.runtime.group_settings import GroupSettings
    from juggler.runtime.settings import Settings
    from juggler.runtime.settings_log import agree
    from juggler.runtime.topic_names import TopicNames

    app_id = unique("gc")
    prefix = f"{app_id}."
    assert apply_topics(kafka_bootstrap, partitions=2, prefix=prefix).ok
    codec, start = Codec(), threading.Barrier(4)
    outcome: dict[str, str | None] = {}

    def member(instance: str, lateness: int) -> None:
        settings = Settings(bootstrap=kafka_bootstrap, app_id=app_id, allowed_lateness=lateness)
        job = SimpleNamespace(settings=settings, names=TopicNames(prefix),
                              admin=AdminClient(client_config(kafka_bootstrap)),
                              client_config=client_config(kafka_bootstrap))
        mine = GroupSettings.of(settings, 2, codec)
        start.wait()
        outcome[instance] = agree(job, mine, instance)

    threads = [threading.Thread(target=member, args=(f"m{i}", i * 1000)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(outcome) == 4, outcome
    [winner] = [instance for instance, refusal in outcome.items() if refusal is None]
    for instance, refusal in outcome.items():
        if instance != winner:
            assert refusal is not None and f"set by {winner} at" in refusal, refusal
