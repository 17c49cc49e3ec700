"""The broker the project starts really works for both client stacks we use:
confluent-kafka (admin, produce/consume) and aiokafka (which faust-streaming runs on).
"""

from __future__ import annotations

import asyncio
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


def test_aiokafka_round_trip_with_group_commit(kafka_bootstrap: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    name = _topic("aiokafka")
    _create(kafka_bootstrap, name)
    group = f"g-{name}"

    async def round_trip() -> tuple[list[bytes], int | None]:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(name, f"v{i}".encode(), key=b"k")
        finally:
            await producer.stop()

        consumer = AIOKafkaConsumer(
            name,
            bootstrap_servers=kafka_bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            values: list[bytes] = []
            async with asyncio.timeout(30):
                while len(values) < 3:
                    batch = await consumer.getmany(timeout_ms=1000)
                    values += [m.value for msgs in batch.values() for m in msgs if m.value]
            await consumer.commit()
            (tp,) = consumer.assignment()
            return values, await consumer.committed(tp)
        finally:
            await consumer.stop()

    values, committed = asyncio.run(round_trip())
    assert values == [b"v0", b"v1", b"v2"]
    assert committed == 3


def test_aiokafka_transaction(kafka_bootstrap: str) -> None:
    """faust's exactly_once guarantee relies on aiokafka transactions."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    name = _topic("tx")
    _create(kafka_bootstrap, name)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=f"tx-{name}")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send(name, b"committed")
            await producer.begin_transaction()
            await producer.send(name, b"aborted")
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send(name, b"committed-2")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            name,
            bootstrap_servers=kafka_bootstrap,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
        )
        await consumer.start()
        try:
            values: list[bytes] = []
            async with asyncio.timeout(30):
                while len(values) < 2:
                    batch = await consumer.getmany(timeout_ms=1000)
                    values += [m.value for msgs in batch.values() for m in msgs if m.value]
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [b"committed", b"committed-2"]


def test_topics_are_not_auto_created(kafka_bootstrap: str) -> None:
    """DESIGN section 7: topics come from `topics/` specs, never from auto-creation."""
    import os

    if os.environ.get("JUGGLER_BOOTSTRAP"):
        pytest.skip("external cluster: its auto-create policy is not ours")
    from confluent_kafka.admin import AdminClient

    name = _topic("absent")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.list_topics(topic=name, timeout=10)  # a metadata request for it would auto-create
    assert name not in admin.list_topics(timeout=10).topics
