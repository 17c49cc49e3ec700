"""What the worker does about transactions left open on the topics it writes
(docs/worker.md, "Faults"): it finds the partitions with a transaction open, and its
abort over them ends only what its own transactional id left there: another producer's
open transaction, and everything committed, stay as they were."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from juggler.kafka.offsets import log_ends, open_transactions, still_open
from juggler.runtime.transactions import Transactions

pytestmark = pytest.mark.integration


def _read_committed(bootstrap: str, topic: str, partitions: int) -> list[tuple[bytes, bytes]]:
    """Every (key, value) a read_committed reader gets, up to the last stable offsets."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, ended = [], set()
    while len(ended) < partitions:
        message = consumer.poll(10)
        assert message is not None, "a read_committed reader stalled"
        if message.error():
            ended.add(message.partition())
        else:
            got.append((message.key(), message.value()))
    consumer.close()
    return got


def test_open_transactions_are_found_and_an_abort_ends_only_its_own(kafka_bootstrap: str) -> None:
    topic = f"test.hung.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1, config={"cleanup.policy": "compact"})])[
        topic].result(30)
    tps = [(topic, 0), (topic, 1)]
    other = Producer({"bootstrap.servers": kafka_bootstrap,
                      "transactional.id": f"other-{uuid.uuid4().hex}"})
    other.init_transactions(30)
    other.begin_transaction()
    other.produce(topic, b"kept", b"k", partition=0)
    other.flush(30)
    opened = open_transactions(admin, tps)
    assert list(opened) == [(topic, 0)]

    own = Transactions({"bootstrap.servers": kafka_bootstrap}, f"own-{uuid.uuid4().hex}",
                       1_000_000)
    try:
        before = log_ends(admin, tps)
        own.end_hung(tps)
        assert still_open(admin, {(topic, 1): before[(topic, 1)]}, 30) == []  # it ended
        assert list(open_transactions(admin, tps)) == [(topic, 0)]  # another producer's
        other.commit_transaction(30)
        assert still_open(admin, opened, 30) == []
        assert _read_committed(kafka_bootstrap, topic, 2) == [(b"k", b"kept")]
    finally:
        own.close()
