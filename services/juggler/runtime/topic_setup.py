"""The topics a worker needs, from the project's topic specs under the worker's prefix
(the broker does not auto-create topics, and the specs carry the contract: a compacted
control topic, co-partitioned stream topics)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from juggler.kafka import topics
from juggler.runtime.settings import Settings

log = logging.getLogger(__name__)


def ensure_worker_topics(settings: Settings, streams: Sequence[str]) -> None:
    """Apply the specs, plus a stream topic for every stream of the worker's schemas.
    A partition-count mismatch is logged, not fixed (see `juggler.kafka.topics`)."""
    report = topics.apply_topics(settings.bootstrap, partitions=settings.partitions,
                                 prefix=settings.topic_prefix, extra_streams=streams)
    for line in report.mismatches:
        log.warning("topics: %s", line)
    if report.errors:
        raise topics.TopicsError("; ".join(report.errors))


def partitions(settings: Settings) -> int | None:
    """P as the cluster was set up (the fanout topic's partition count), or None."""
    return topics.current_partitions(settings.bootstrap, prefix=settings.topic_prefix)


def ensure_results_topic(settings: Settings, partitions: int, query_id: str) -> None:
    topics.ensure_results_topic(settings.bootstrap, query_id, partitions=partitions,
                                prefix=settings.topic_prefix)
