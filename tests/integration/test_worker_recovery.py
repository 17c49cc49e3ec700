"""Exactly once across crashes: SIGKILL the worker in the middle of a stream (twice),
restart it, and the results topics end up exactly the reference evaluator's: nothing
lost (held events, key watermarks and registered queries come back from the state
topic), nothing duplicated (the restarted worker has the same instance id, so its
transactional id fences the killed one's open transaction, and processing resumes from
the committed offsets). No event is late either: the restarted tasks take the backlog
in the same timestamp order, with the default lateness 0.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from test_worker import LATENESS, Q1, Q2, Reference, generate
from test_worker_harness import Client, WorkerProcess, by_query, diff, unique

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_sigkill_mid_stream_loses_and_duplicates_nothing(kafka_bootstrap: str, tmp_path) -> None:
    app_id = unique("k")
    prefix = f"{app_id}."
    worker = WorkerProcess(kafka_bootstrap, app_id, prefix, tmp_path,
                           allowed_lateness=LATENESS, batch_max=20)
    client = Client(kafka_bootstrap, prefix)
    client.watch = worker.revive
    ref = Reference()
    try:
        worker.start()
        for qid, text in (("q1", Q1), ("q2", Q2)):
            assert client.wait_status(client.command("REGISTER", qid, text))["status"] == "ACCEPTED"
            ref.register(qid, text)

        records = generate(random.Random(11), 3000, 1_000_000)
        sent: list = []
        producing = threading.Event()
        producing.set()

        def produce() -> None:
            try:
                for i in range(0, len(records), 10):
                    sent.extend(client.send_events(records[i:i + 10]))
                    time.sleep(0.06)  # slow enough that both kills fall mid-stream
            finally:
                producing.clear()

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        at_kill: list[tuple[bool, int]] = []  # (still producing, committed q1 results)
        for wanted in (40, 400):
            deadline = time.monotonic() + 120
            while (done := len(client.results("q1"))) < wanted:
                assert time.monotonic() < deadline, worker.log_tail()
                worker.revive()
                time.sleep(0.2)
            children = _children(worker.proc.pid)
            worker.kill()
            assert children, "the results index runs in a child process"
            _wait_gone(children)  # a SIGKILLed worker leaves no indexer consuming
            at_kill.append((producing.is_set(), done))
            worker.start()
        producer.join(120)
        assert not producer.is_alive()
        assert at_kill[0][0], "the first kill should come while events are still produced"
        ref.process(sent)
        client.wait_consumed(app_id, [client.names.stream(s) for s in "BHKT"], timeout=180,
                             watch=worker.revive)
        print(f"worker restarted itself {worker.revived} times (exit status 70)")

        expected = by_query(ref.results)
        for qid in ("q1", "q2"):
            actual = Counter(r.identity() for r in client.results(qid))
            assert actual == expected[qid], f"{qid}: {diff(expected[qid], actual)}"
        # both kills came before the worker was done: it had results left to produce
        assert all(done < sum(expected["q1"].values()) for _, done in at_kill), at_kill
        assert client.dead_letters() == []
        _, body = worker.get("/queries")
        assert sorted(q["id"] for q in body["queries"]) == ["q1", "q2"]
    finally:
        worker.stop()


def _one_partition(name: str, bootstrap: str, tmp_path: Path
                   ) -> tuple[str, WorkerProcess, Client]:
    """(app id, worker, client) of a one-partition deployment of its own."""
    app_id = unique(name)
    worker = WorkerProcess(bootstrap, app_id, f"{app_id}.", tmp_path, partitions=1)
    return app_id, worker, Client(bootstrap, f"{app_id}.")


def _start_with_query(worker: WorkerProcess, client: Client, qid: str, text: str) -> None:
    worker.start()
    assert client.wait_status(client.command("REGISTER", qid, text))["status"] == "ACCEPTED"


def _children(pid: int) -> set[int]:
    """The live processes whose parent is `pid` (from /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def _wait_gone(pids: set[int], timeout: float = 20.0) -> None:
    """Wait until none of `pids` runs (a zombie waiting for its reaper counts as gone)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = set()
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.add(pid)
        if not alive:
            return
        assert time.monotonic() < deadline, f"still running after the worker died: {alive}"
        time.sleep(0.1)


def test_restore_without_a_deleted_original_says_so_and_goes_on(kafka_bootstrap: str,
                                                                 tmp_path) -> None:
    """Held events are references to their stream records (docs/worker.md, "State and
    restore"). If one is deleted from its stream topic (retention shorter than the
    horizon) the restart restores the rest, counts the missing event and logs an
    error, and later events join only what came back; nothing stops the worker, and
    the next restart does not report the same event again."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    app_id, worker, client = _one_partition("gone", kafka_bootstrap, tmp_path)
    try:
        _start_with_query(worker, client, "q1", Q1)
        b = {"pressure": 80.0, "temp": 70.0, "alert": False}
        held = client.send_events([("B", "p1", 1_000, b), ("B", "p1", 1_100, b)])
        client.wait_consumed(app_id, [client.names.stream("B")])
        worker.stop()
        stream_b = client.names.stream("B")
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        first = held[0].position[2]
        for future in admin.delete_records([TopicPartition(stream_b, 0, first + 1)]).values():
            future.result()
        worker.start()
        _, metrics = worker.get("/metrics")
        assert "juggler_restore_missing_events_total 1.0" in metrics, metrics
        assert "cannot be read back" in worker.log_tail()
        client.send_events([("H", "p1", 1_200, {"beatrate": 60, "vib": 20.0, "alert": False})])
        client.wait_consumed(app_id, [client.names.stream(s) for s in "BH"])
        sources = [r.sources["B"] for r in client.results("q1")]
        assert sources == [held[1].position], sources
        assert client.dead_letters() == []
        worker.stop()  # the lost event's state record went with that round: not again
        worker.start()
        _, metrics = worker.get("/metrics")
        assert "juggler_restore_missing_events_total 0.0" in metrics, metrics
    finally:
        worker.stop()


def test_a_restart_keeps_the_accepted_set_and_logs_foreign_status_records(
        kafka_bootstrap: str, tmp_path) -> None:
    """The control task's accepted set comes back from the status topic, read in a
    child process beside the tasks' restore: after a restart a repeated id is still
    rejected and a deregistration of a query registered before it is accepted, and the
    tasks hold the queries registered before it and not those deregistered; a status
    record the worker did not write is skipped with a warning, not a failed restore."""
    _, worker, client = _one_partition("acc", kafka_bootstrap, tmp_path)
    try:
        _start_with_query(worker, client, "q1", Q1)
        assert client.wait_status(client.command("REGISTER", "q2", Q2))["status"] == "ACCEPTED"
        assert client.wait_status(client.command("DEREGISTER", "q2"))["status"] == "ACCEPTED"
        worker.stop()
        client.send_raw(client.names.status, b"q9", b"not a status")
        worker.start()
        # the tasks' registered set comes back from their state records: q2 stays gone
        assert [q["id"] for q in worker.get("/queries")[1]["queries"]] == ["q1"]
        again = client.wait_status(client.command("REGISTER", "q1", Q2))
        assert (again["status"], "already registered" in again["message"]) == ("REJECTED", True)
        assert client.wait_status(client.command("REGISTER", "q2", Q2))["status"] == "ACCEPTED"
        assert client.wait_status(client.command("DEREGISTER", "q1"))["status"] == "ACCEPTED"
        assert "status topic: skipping a record that is not a status" in worker.log_tail()
    finally:
        worker.stop()


def test_read_originals_reads_wanted_records_across_gaps(kafka_bootstrap: str) -> None:
    """The restore's bulk read: wanted offsets of two partitions, with a gap skipped by
    a seek, one offset below the log start and one past the end, all in one pass."""
    from types import SimpleNamespace

    from confluent_kafka import Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from juggler.runtime.readback import read_originals

    topic = unique("orig")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for p in (0, 1):
        for i in range(60):
            producer.produce(topic, key=b"k", value=f"{p}:{i}".encode(), partition=p)
    producer.flush(30)
    for future in admin.delete_records([TopicPartition(topic, 1, 5)]).values():
        future.result()
    worker = SimpleNamespace(admin=admin, client_config={"bootstrap.servers": kafka_bootstrap},
                             settings=SimpleNamespace(app_id=unique("orig-app")))
    got = read_originals(worker, {(topic, 0): [1, 2, 40, 59], (topic, 1): [3, 7, 60]}, skip=10)
    assert got == {(topic, 0): {1: b"0:1", 2: b"0:2", 40: b"0:40", 59: b"0:59"},
                   (topic, 1): {7: b"1:7"}}


def test_a_selection_backlog_leaves_one_held_event_in_the_state_topic(kafka_bootstrap: str,
                                                                       tmp_path) -> None:
    """The state topic holds what a restart needs, not a record per event: an event the
    key's floor passes in the round that took it (every event of a selection-only
    query but the key's last) is never written there, so each round's `r/` record
    refers to its last event alone, the compacted topic holds the backlog's last event
    alone, and a restart still publishes nothing twice."""
    app_id, worker, client = _one_partition("sel", kafka_bootstrap, tmp_path)
    try:
        _start_with_query(worker, client, "s", "SELECT * FROM B WHERE B.pressure > 90")
        worker.stop()
        sent = client.send_events([("B", "p1", 1_000 + 10 * i,
                                    {"pressure": 80.0 + i % 20, "temp": 70.0, "alert": False})
                                   for i in range(1_000)])
        worker.start()
        client.wait_consumed(app_id, [client.names.stream("B")])
        refs = [m for m in client.read(client.names.state) if m.key().startswith(b"r/")]
        # how many rounds took the backlog depends on the fetches; what each round
        # wrote does not
        written = [json.loads(m.value()) for m in refs if m.value() is not None]
        assert written and all(len(r["refs"]) == 1 and len(*r["refs"].values()) == 1
                               for r in written), written
        folded: dict[bytes, bytes | None] = {}
        for m in refs:
            folded[m.key()] = m.value()
        topic, _, offset = sent[-1].position
        assert [json.loads(v) for v in folded.values() if v is not None] == [
            {"refs": {topic: [[offset, 999, 10_990, "p1"]]}}]
        worker.stop()
        worker.start()
        client.send_events([("B", "p1", 20_000, {"pressure": 95.0, "temp": 70.0, "alert": False})])
        client.wait_consumed(app_id, [client.names.stream("B")])
        assert len(client.results("s")) == 1 + sum(1 for i in range(1_000) if 80 + i % 20 > 90)
    finally:
        worker.stop()
