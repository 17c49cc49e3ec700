"""The broker the project starts really works for the client the project uses:
confluent-kafka (librdkafka) for admin, produce/consume, and the transactions the
worker commits each round with (outputs and group offsets together, KIP-447).
"""

from __future__ import annotations

import time
import uuid

import pytest

pytestmark = pytest.mark.integration


def _topic(prefix: str) -> str:
    return f"test.{prefix}.{uuid.uuid4().hex[:8]}"


def _create(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=30,
    )
    futures[name].result(timeout=30)


def test_admin_creates_topic(kafka_bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource

    name = _topic("admin")
    _create(kafka_bootstrap, name, partitions=3, config={"cleanup.policy": "compact"})
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    md = admin.list_topics(timeout=10)
    assert name in md.topics
    assert len(md.topics[name].partitions) == 3
    configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)])
    (result,) = configs.values()
    assert result.result(timeout=10)["cleanup.policy"].value == "compact"


def test_confluent_produce_consume(kafka_bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer

    name = _topic("confluent")
    _create(kafka_bootstrap, name)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    producer.produce(name, key=b"k", value=b"hello")
    assert producer.flush(10) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"g-{name}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([name])
        msg = None
        for _ in range(30):
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                break
        assert msg is not None and msg.error() is None
        assert (msg.key(), msg.value()) == (b"k", b"hello")
        consumer.commit(message=msg, asynchronous=False)
    finally:
        consumer.close()


def test_transaction_commits_outputs_with_group_offsets(kafka_bootstrap: str) -> None:
    """What each round of the worker does (KIP-447): the outputs and the consumed
    offsets of a group in one transaction, fenced by the group's metadata. An aborted
    transaction leaves neither its records nor its offsets; a committed one both."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    source, sink = _topic("tx-in"), _topic("tx-out")
    _create(kafka_bootstrap, source)
    _create(kafka_bootstrap, sink)
    group = f"g-{source}"
    plain = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(4):
        plain.produce(source, key=b"k", value=f"v{i}".encode())
    assert plain.flush(10) == 0

    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "log_level": 0})
    producer = Producer({"bootstrap.servers": kafka_bootstrap,
                         "transactional.id": f"tx-{source}", "log_level": 0})
    try:
        producer.init_transactions(30)
        consumer.subscribe([source])
        taken: list = []
        deadline = time.monotonic() + 30
        while len(taken) < 4:
            assert time.monotonic() < deadline, "the source records never came"
            taken += [m for m in consumer.consume(4, timeout=1.0) if m.error() is None]
        metadata = consumer.consumer_group_metadata()

        def round_trip(messages: list, commit: bool) -> None:
            producer.begin_transaction()
            for m in messages:
                producer.produce(sink, key=m.key(), value=m.value() + b"-out")
            producer.send_offsets_to_transaction(
                [TopicPartition(source, 0, messages[-1].offset() + 1)], metadata, 30)
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)

        round_trip(taken[:2], commit=False)
        assert _committed(consumer, source) is None
        round_trip(taken[:2], commit=True)
        assert _committed(consumer, source) == 2
        round_trip(taken[2:], commit=True)
        assert _committed(consumer, source) == 4
    finally:
        consumer.close()
    assert _read_committed(kafka_bootstrap, sink, 4) == [b"v0-out", b"v1-out", b"v2-out",
                                                         b"v3-out"]


def _committed(consumer, topic: str) -> int | None:
    from confluent_kafka import TopicPartition

    (tp,) = consumer.committed([TopicPartition(topic, 0)], timeout=10)
    return tp.offset if tp.offset >= 0 else None


def _read_committed(bootstrap: str, topic: str, count: int) -> list[bytes]:
    """Every committed value of `topic` (partition 0), read until its end."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "enable.auto.commit": False, "log_level": 0})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF and len(values) >= count:
                    break
                continue
            values.append(m.value())
        return values
    finally:
        consumer.close()


def test_topics_are_not_auto_created(kafka_bootstrap: str) -> None:
    """Semantics section 7: topics come from `topics/` specs, never from auto-creation."""
    import os

    if os.environ.get("JUGGLER_BOOTSTRAP"):
        pytest.skip("external cluster: its auto-create policy is not ours")
    from confluent_kafka.admin import AdminClient

    name = _topic("absent")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.list_topics(topic=name, timeout=10)  # a metadata request for it would auto-create
    assert name not in admin.list_topics(timeout=10).topics
