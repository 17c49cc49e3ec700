"""The worker: one Faust app built from `Settings`, with its agents, tables and pages.

    worker = JugglerWorker(Settings.from_env())
    worker.run()            # blocks; what `juggler worker` does

Everything a part of the worker needs hangs off this object (codec, topic names,
partition engines, tables, metrics, transactions), so the agents and views stay thin:
they translate between Kafka and the engine and nothing else.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from juggler.service.settings import Settings
from juggler.service.topic_names import TopicNames

log = logging.getLogger(__name__)

FAILURE_EXIT = 70
"""Exit status when processing fails: state may be ahead of what was committed."""


def _timeouts(session_timeout: float | None) -> dict[str, float]:
    if session_timeout is None:
        return {}
    return {"broker_session_timeout": session_timeout,
            "broker_rebalance_timeout": session_timeout,
            "broker_heartbeat_interval": max(0.2, session_timeout / 10)}


class JugglerWorker:
    def __init__(self, settings: Settings) -> None:
        import faust

        from juggler.codec.avro import Codec
        from juggler.engine.events import EngineConfig
        from juggler.service import (
            control_plane,
            event_agent,
            faust_patches,
            results_api,
        )
        from juggler.service.deadletters import DeadLetters
        from juggler.service.metrics import WorkerMetrics
        from juggler.service.partition_engines import PartitionEngines
        from juggler.service.state_tables import StateTables
        from juggler.service.topic_setup import ensure_worker_topics, partitions
        from juggler.service.transactions import Transactions

        faust_patches.apply()
        self.settings = settings
        self.names = TopicNames(settings.topic_prefix)
        self.codec = Codec(settings.schemas_dir,
                           **({"registry_url": settings.registry_url}
                              if settings.registry_url is not None else {}))
        self.catalog = self.codec.catalog()
        streams = self.codec.stream_names()
        if settings.create_topics:
            ensure_worker_topics(settings, streams)
        self.partitions = partitions(settings) or settings.partitions or 1
        exactly_once = settings.processing_guarantee == "exactly_once"
        brokers = ";".join(f"kafka://{b.strip()}" for b in settings.bootstrap.split(","))
        self.app = faust.App(
            settings.app_id,
            broker=brokers,
            store="memory://",
            processing_guarantee=settings.processing_guarantee,
            topic_partitions=self.partitions,
            topic_replication_factor=settings.replication_factor,
            web_enabled=True,
            web_port=settings.web_port,
            web_bind=settings.web_host,
            datadir=str(settings.data_dir),
            autodiscover=False,
            consumer_auto_offset_reset="earliest",
            **_timeouts(settings.session_timeout),
        )
        self.app.juggler_commits_offsets = exactly_once  # see faust_patches
        self.tables = StateTables(self.app, self.partitions)
        config = EngineConfig(allowed_lateness=settings.allowed_lateness,
                              retention=settings.retention, order=settings.order)
        self.engines = PartitionEngines(config, self.tables, self.catalog)
        self.metrics = WorkerMetrics(self.engines, lambda: len(self.control.accepted()))
        self.dead_letters = DeadLetters(self.codec, self.names.deadletter, self.metrics)
        self.transactions = Transactions(self.app, exactly_once)
        self.control = control_plane.install(self)
        self.events = event_agent.install(self)
        results_api.install(self)
        self.event_topics = {self.names.stream(s) for s in streams} | {self.names.fanout}
        self.metrics.watch_consumer(self.app, self.event_topics | {self.names.control})
        self.app.on_partitions_assigned.connect(self._on_assigned)

    async def _on_assigned(self, sender: Any, assigned: Any, **kwargs: Any) -> None:
        """Drop the engines of partitions that went to another worker; forget where the
        control partition stood if it went too (it is read again when it comes back)."""
        self.engines.keep_only({tp.partition for tp in assigned if tp.topic in self.event_topics})
        if not any(tp.topic == self.names.control for tp in assigned):
            self.control.next_offsets = None

    def ensure_results_topic(self, query_id: str) -> None:
        from juggler.service.topic_setup import ensure_results_topic

        ensure_results_topic(self.settings, self.partitions, query_id)

    def registered_queries(self) -> list[dict[str, Any]]:
        """The accepted set where this worker owns the control partition, else the
        queries registered in its partition engines."""
        accepted = self.control.accepted()
        if accepted:
            return [{"id": qid, "text": r["text"]} for qid, r in accepted.items()]
        seen: dict[str, str] = {}
        for pe in self.engines:
            seen.update(pe.texts)
        return [{"id": qid, "text": text} for qid, text in seen.items()]

    async def fail(self, exc: BaseException) -> None:
        """Stop at once, like a crash: what this process did since its last commit is
        uncommitted and is aborted (fenced) when a worker takes over the partitions."""
        log.critical("worker failed: %r; exiting with status %d", exc, FAILURE_EXIT)
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stderr.flush()
        os._exit(FAILURE_EXIT)

    def run(self) -> None:
        """Run the Faust worker in this process until it is stopped (SIGTERM/SIGINT)."""
        import faust

        worker = faust.Worker(self.app, loglevel=self.settings.loglevel)
        worker.execute_from_commandline()
