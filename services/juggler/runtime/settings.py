"""What a worker is configured with: environment variables `JUGGLER_*`, overridden by
`juggler worker` flags. One frozen object, so every part of the worker reads the same
values and a test can build a worker from a plain constructor call."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from juggler.engine.orders import check_order

DEFAULT_MAX_IDLE_MS = 500
"""The longest a task waits for an idle stream partition before going on without it,
and the wait for a partition whose delay is not estimated (`idle_estimate` off, a
partition that never spoke or was silent for a minute, one replaying old events).

Long enough to cover what separates records produced at about the same moment on
different topics (producer linger, one fetch round trip, a scheduling hiccup on a busy
machine): a producer per stream, or one producer writing several streams, is then
merged by `ts` with no event late. Short enough that a stream that falls silent costs
its partners half a second once (the wait is not repeated while it stays silent)."""
DEFAULT_IDLE_MARGIN_MS = 20
"""Added to a live partition's largest delay of the last minute (`arrival.IdleEstimate`):
what its producer may lag beyond it before its next event could be late. The delays
measured already include the worker's own fetch (up to `FETCH_WAIT_MS` and a poll),
which the producer's side never needs, so the margin is on top of that slack.
docs/benchmarks.md, "Latency defaults", has what it costs and buys."""


RUNTIMES = ("worker", "faust")


@dataclass(frozen=True)
class Settings:
    runtime: str = "worker"
    """Which runtime `juggler worker` runs: `worker`, this package's own over librdkafka
    (exactly once, semantics 4a's order; docs/worker.md), or `faust`, the Faust app
    `juggler.faust.app` (at least once, a reorder buffer; docs/faust.md)."""
    bootstrap: str = "127.0.0.1:9092"
    """Kafka bootstrap servers, `host:port[,host:port]`."""
    app_id: str = "juggler"
    """The consumer group and the prefix of the transactional id. Workers with the same
    id share the partitions."""
    instance_id: str | None = None
    """This worker's name in the group (its transactional id is `<app_id>-<instance>`).
    Give each worker a stable one (a StatefulSet pod name): a restart then fences its
    previous incarnation at once. Default: host name and process id, unique but new at
    each start, so a killed worker's open transaction holds readers up to 10 s."""
    partitions: int | None = None
    """Partitions of the stream and fanout topics (and of the changelog topics).
    None: read from the broker (the fanout topic's partition count)."""
    allowed_lateness: int = 0
    retention: int = 0
    order: str = "adaptive"
    max_idle_ms: int = DEFAULT_MAX_IDLE_MS
    """See `DEFAULT_MAX_IDLE_MS` and docs/worker.md, "Arrival order"."""
    idle_estimate: bool = True
    """Wait for an idle stream partition only while it could still deliver an earlier
    event, judged by how far its records trail the wall clock when fetched
    (`arrival.IdleEstimate`), never longer than `max_idle_ms`. Off: always
    `max_idle_ms` (Kafka Streams' `max.task.idle.ms`). The worker runtime only."""
    idle_margin_ms: int = DEFAULT_IDLE_MARGIN_MS
    """See `DEFAULT_IDLE_MARGIN_MS`."""
    reorder_ms: int = 1000
    """The Faust runtime's reorder buffer (`juggler.faust.reorder`, semantics 4b): how long
    a record waits for the records of another stream partition that is silent. The
    worker does not use it: it knows the log ends, and waits `max_idle_ms` only for a
    partition that is caught up."""
    replication_factor: int = 1
    """Of the topics the worker creates (results topics)."""
    web_host: str = "127.0.0.1"
    """The address the HTTP port binds to: only this machine by default, since the
    port serves every query's text and results. Containers set `0.0.0.0`."""
    web_port: int = 6066
    web_token: str | None = None
    """When set, HTTP requests (but `/health` and `/metrics`) need
    `Authorization: Bearer <web_token>`; see `serving.http_auth`."""
    schemas_dir: Path | None = None
    """Avro schemas (default: the codec's own default, the repo's `schemas/`)."""
    registry_url: str | None = None
    """A Confluent-compatible schema registry; unused unless the codec supports it."""
    topic_prefix: str = ""
    """Prepended to every topic name the worker reads or writes (test isolation, or
    several Juggler deployments on one cluster). The default keeps docs/semantics.md's names."""
    create_topics: bool = True
    """Apply the topic specs (idempotently) before the worker starts consuming."""
    batch_max: int = 1000
    """Records fetched, and records taken per task, per round of the loop (one
    transaction per round)."""
    buffer_max: int = 20_000
    """Fetched records a stream partition may hold waiting for its turn; past it the
    partition is paused (a backlog of one stream never fills memory)."""
    max_record_bytes: int = 1_000_000
    """The producer's record limit (librdkafka `message.max.bytes`); nothing the worker
    writes is larger. Keep it at or below the broker's `message.max.bytes`."""
    session_timeout: float | None = None
    """Seconds before the group gives up on a silent worker; None: 45 s. Lower means a
    killed worker's partitions move sooner."""
    results_trim_interval: float | None = None
    """Seconds between the results index's passes that drop results below the topics'
    log starts; None: `results_store.TRIM_INTERVAL` (60 s). Tests shorten it."""
    loglevel: str = "info"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None,
                 overrides: Mapping[str, object] | None = None) -> Settings:
        """`JUGGLER_<FIELD>` for every field (e.g. `JUGGLER_WEB_PORT`), then `overrides`
        (None values are ignored, so CLI options that were not given keep the env)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f"JUGGLER_{f.name.upper()}")
            if raw is not None and raw != "":
                values[f.name] = _convert(f.name, raw)
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        return cls(**values).checked()

    def checked(self) -> Settings:
        if self.runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}")
        if self.max_idle_ms < 0 or self.reorder_ms < 0 or self.idle_margin_ms < 0:
            raise ValueError("max_idle_ms, idle_margin_ms and reorder_ms must be >= 0")
        if self.allowed_lateness < 0 or self.retention < 0:
            raise ValueError("allowed_lateness and retention must be >= 0")
        if self.partitions is not None and self.partitions < 1:
            raise ValueError("partitions must be >= 1")
        if self.results_trim_interval is not None and self.results_trim_interval <= 0:
            raise ValueError("results_trim_interval must be > 0")
        return replace(self, order=check_order(self.order))


_INTS = {"partitions", "allowed_lateness", "retention", "web_port", "batch_max",
         "replication_factor", "max_idle_ms", "idle_margin_ms", "reorder_ms", "buffer_max",
         "max_record_bytes"}
_PATHS = {"schemas_dir"}


def _convert(name: str, raw: str) -> Any:
    if name in _INTS:
        return int(raw)
    if name in _PATHS:
        return Path(raw)
    if name in ("session_timeout", "results_trim_interval"):
        return float(raw)
    if name in ("create_topics", "idle_estimate"):
        return raw.strip().lower() not in ("0", "false", "no", "off")
    return raw
