"""Two workers share the partitions of one consumer group: a second worker joins in the
middle of the stream (a rebalance moves a partition, its task is rebuilt from the
state topic on the new owner), then leaves again; the results stay exactly the
reference's, with no event late (lateness 0: each task merges by timestamp wherever it
runs). And 1, 2 or 4 workers sharing 4 partitions from the start publish the same
results (scale-out by partitions)."""

from __future__ import annotations

import random
import time
from collections import Counter

import pytest
from test_worker import LATENESS, Q1, Q2, Reference, generate
from test_worker_harness import Client, WorkerProcess, by_query, diff, unique

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _partitions(worker: WorkerProcess) -> list[int]:
    status, body = worker.get("/health")
    return body["partitions"] if status == 200 else []


def _wait_settled(bootstrap: str, app_id: str, workers: list[WorkerProcess]) -> None:
    """Until the broker says the group is stable with every worker owning stream
    partitions, and the workers serve exactly the members' assignments (so none still
    serves what an earlier generation gave it). Each join rebalances the whole group,
    and a loaded machine can take long to stop churning: the deadline only guards
    against a hang, and names the group's state when it hits."""
    from confluent_kafka.admin import AdminClient

    from juggler.kafka.client_config import client_config

    admin = AdminClient(client_config(bootstrap))
    deadline = time.monotonic() + 300
    while True:
        group = admin.describe_consumer_groups([app_id])[app_id].result(10)
        owned = sorted(sorted({tp.partition for tp in m.assignment.topic_partitions
                               if ".stream." in tp.topic}) for m in group.members)
        served = sorted(_partitions(w) for w in workers)
        if group.state.name == "STABLE" and len(owned) == len(workers) \
                and all(owned) and owned == served:
            return
        assert time.monotonic() < deadline, (group.state, owned, served)
        time.sleep(0.3)


def _assert_reference_results(client: Client, ref: Reference) -> None:
    """No dead letter, and each query's results exactly the reference's."""
    assert client.dead_letters() == []
    expected = by_query(ref.results)
    for qid in ("q1", "q2"):
        actual = Counter(r.identity() for r in client.results(qid))
        assert actual == expected[qid], f"{qid}: {diff(expected[qid], actual)}"


@pytest.mark.parametrize("runtime", ["worker"])
def test_two_workers_share_partitions_and_hand_them_over(kafka_bootstrap: str, tmp_path,
                                                         runtime: str) -> None:
    """The worker only: on the Faust runtime this hand-over passed every run on a quiet
    machine but stalled in two CI runs (a partition handed back when the second member
    leaves was not restored; docs/faust.md, "Known limits"), and a test that fails now
    and then blocks everyone."""
    app_id = unique("g")
    prefix = f"{app_id}."
    first = WorkerProcess(kafka_bootstrap, app_id, prefix, tmp_path, allowed_lateness=LATENESS,
                          batch_max=50, runtime=runtime)
    second = WorkerProcess(kafka_bootstrap, app_id, prefix, tmp_path, allowed_lateness=LATENESS,
                           batch_max=50, runtime=runtime)
    client = Client(kafka_bootstrap, prefix)

    def revive() -> None:
        first.revive()
        second.revive()

    client.watch = revive
    ref = Reference()
    streams = [client.names.stream(s) for s in "BHKT"]
    records = generate(random.Random(5), 900, 1_000_000)
    try:
        first.start()
        for qid, text in (("q1", Q1), ("q2", Q2)):
            assert client.wait_status(client.command("REGISTER", qid, text))["status"] == "ACCEPTED"
            ref.register(qid, text)
        ref.process(client.send_events(records[:300]))
        client.wait_consumed(app_id, streams)

        second.start()
        ref.process(client.send_events(records[300:600]))
        client.wait_consumed(app_id, streams, timeout=120)
        deadline = time.monotonic() + 60
        while not (_partitions(first) and _partitions(second)):
            # /health answers 200 (with the partitions) once the rebalance is done and
            # the moved partition is restored on its new owner
            assert time.monotonic() < deadline, (_partitions(first), _partitions(second))
            ref.process(client.send_events(records[600:620]))
            records = records[:600] + records[620:]
            client.wait_consumed(app_id, streams, timeout=120)
        assert sorted(_partitions(first) + _partitions(second)) == [0, 1]

        second.stop()  # leaves the group: its partition goes back to the first worker
        ref.process(client.send_events(records[600:]))
        client.wait_consumed(app_id, streams, timeout=120)

        _assert_reference_results(client, ref)
    finally:
        second.stop()
        first.stop()


@pytest.mark.parametrize("count", [1, 2, 4])
def test_a_group_of_workers_publishes_one_workers_results(kafka_bootstrap: str, tmp_path,
                                                          count: int) -> None:
    """Scale-out by partitions (4 here): 1, 2 and 4 workers in one group, every one owning
    partitions from the start, publish exactly the reference's results, which are one
    worker's (test_worker), so the same results whatever the worker count."""
    app_id = unique(f"s{count}")
    prefix = f"{app_id}."
    workers = [WorkerProcess(kafka_bootstrap, app_id, prefix, tmp_path, partitions=4,
                             allowed_lateness=LATENESS, batch_max=50) for _ in range(count)]
    client = Client(kafka_bootstrap, prefix)
    client.watch = lambda: [w.revive() for w in workers]
    ref = Reference()
    try:
        for worker in workers:
            worker.start()
        _wait_settled(kafka_bootstrap, app_id, workers)
        for qid, text in (("q1", Q1), ("q2", Q2)):
            assert client.wait_status(client.command("REGISTER", qid, text))["status"] == "ACCEPTED"
            ref.register(qid, text)
        ref.process(client.send_events(generate(random.Random(13), 800, 2_000_000)))
        client.wait_consumed(app_id, [client.names.stream(s) for s in "BHKT"], timeout=120)

        _assert_reference_results(client, ref)
    finally:
        for worker in workers:
            worker.stop()
