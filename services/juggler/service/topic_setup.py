"""Creating the topics the worker needs (the broker does not auto-create topics).

With the default prefix the project's topic specs apply (`juggler.kafka.topics`); with a
`topic_prefix` (tests, several deployments on one cluster) the same topics are created
here under the prefixed names, with the specs' shape: the control topic compacted with
one partition, the status topic one partition, the fanout, stream, dead-letter and
results topics with the worker's partition count. Creating an existing topic is fine.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from juggler.service.settings import Settings
from juggler.service.topic_names import TopicNames

log = logging.getLogger(__name__)


def _project_topics():  # the project's spec-driven admin, when present and usable
    try:
        from juggler.kafka import topics
    except ImportError:
        return None
    return topics


def create_topics(bootstrap: str, specs: Iterable[tuple[str, int, dict[str, str]]],
                  timeout: float = 30.0) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(name, num_partitions=p, replication_factor=1, config=config)
           for name, p, config in specs]
    if not new:
        return
    for future in admin.create_topics(new, operation_timeout=timeout).values():
        try:
            future.result(timeout)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise


def partitions_of(bootstrap: str, topic: str, timeout: float = 10.0) -> int | None:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        return None
    return len(t.partitions)


def ensure_worker_topics(settings: Settings, names: TopicNames, streams: list[str]) -> None:
    topics = _project_topics()
    if not settings.topic_prefix and topics is not None and hasattr(topics, "apply_topics"):
        topics.apply_topics(settings.bootstrap, partitions=settings.partitions)
        return
    p = settings.partitions or 1
    specs = [(names.control, 1, {"cleanup.policy": "compact"}), (names.status, 1, {}),
             (names.fanout, p, {}), (names.deadletter, p, {})]
    specs += [(names.stream(s), p, {}) for s in streams]
    create_topics(settings.bootstrap, specs)


def ensure_results_topic(settings: Settings, names: TopicNames, partitions: int,
                         query_id: str) -> None:
    topics = _project_topics()
    if not settings.topic_prefix and topics is not None and hasattr(topics, "ensure_results_topic"):
        topics.ensure_results_topic(settings.bootstrap, query_id)
        return
    create_topics(settings.bootstrap, [(names.results(query_id), partitions, {})])
