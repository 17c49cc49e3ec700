"""Producing a few records and knowing where each landed, or why Kafka could not be
used: what the control-plane client's commands and the worker's settings records need
(an idempotent producer, acks=all, every delivery confirmed), with one error for an
unreachable cluster, a missing topic or a failed delivery."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient

from juggler.kafka.client_config import client_config


class ControlError(RuntimeError):
    """Kafka could not be used (unreachable, missing topic, failed produce)."""


@dataclass(frozen=True)
class Sent:
    topic: str
    partition: int
    offset: int


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]],
            timeout: float) -> list[Sent]:
    """Produce `records` (key, value) in order with one idempotent producer; where each
    landed, in the same order."""
    producer = Producer(client_config(bootstrap, {
        "enable.idempotence": True, "acks": "all", "linger.ms": 5,
        "message.timeout.ms": max(1, int(timeout * 1000)), "log_level": 0}))
    require_topic(producer, topic, timeout)
    outcome: dict[int, Any] = {}

    def delivered(i: int) -> Callable[[Any, Message], None]:
        return lambda err, msg: outcome.__setitem__(i, (err, msg))

    try:
        for i, (key, value) in enumerate(records):
            while True:
                try:
                    producer.produce(topic, key=key, value=value, on_delivery=delivered(i))
                    break
                except BufferError:
                    producer.poll(0.05)
    except KafkaException as exc:
        raise ControlError(f"cannot produce to {topic}: {exc}") from None
    producer.flush(timeout + 1)
    if len(outcome) < len(records):
        raise ControlError(f"no acknowledgement from Kafka for {len(records) - len(outcome)} "
                           f"messages to {topic} within {timeout:g}s")
    failed = [err for err, _ in outcome.values() if err is not None]
    if failed:
        raise ControlError(f"producing to {topic} failed: {failed[0].str()}")
    return [Sent(msg.topic(), msg.partition(), msg.offset())
            for _, msg in (outcome[i] for i in range(len(records)))]


def require_topic(client: Producer | Consumer | AdminClient, topic: str, timeout: float) -> int:
    """The topic's partition count; a clear error when Kafka or the topic is missing."""
    try:
        metadata = client.list_topics(topic, timeout=timeout)
    except KafkaException as exc:
        # librdkafka says "transport failure" for a wrong address, protocol or password alike
        raise ControlError(f"cannot reach Kafka: {exc.args[0].str()} (check --bootstrap and "
                           f"the security settings: --security-protocol, --sasl-*, --ssl-*, "
                           f"or JUGGLER_KAFKA_*)") from None
    found = metadata.topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        raise ControlError(f"topic {topic} does not exist; create the topics with "
                           f"`juggler topics apply`")
    return len(found.partitions)
