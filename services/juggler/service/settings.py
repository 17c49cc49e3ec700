"""What a worker is configured with: environment variables `JUGGLER_*`, overridden by
`juggler worker` flags. One frozen object, so every part of the worker reads the same
values and a test can build a worker from a plain constructor call."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

GUARANTEES = ("exactly_once", "at_least_once")


@dataclass(frozen=True)
class Settings:
    bootstrap: str = "127.0.0.1:9092"
    """Kafka bootstrap servers, `host:port[,host:port]`."""
    app_id: str = "juggler"
    """Faust app id: the consumer group, the prefix of changelog topics and of
    transactional ids. Workers with the same id share the partitions."""
    partitions: int | None = None
    """Partitions of the stream and fanout topics (and of the changelog topics).
    None: read from the broker (the fanout topic's partition count)."""
    allowed_lateness: int = 0
    retention: int = 0
    order: str = "adaptive"
    processing_guarantee: str = "exactly_once"
    replication_factor: int = 1
    """Of the topics the worker creates (Faust's changelog topics, results topics)."""
    web_host: str = "0.0.0.0"
    web_port: int = 6066
    schemas_dir: Path | None = None
    """Avro schemas (default: the codec's own default, the repo's `schemas/`)."""
    registry_url: str | None = None
    """A Confluent-compatible schema registry; unused unless the codec supports it."""
    topic_prefix: str = ""
    """Prepended to every topic name the worker reads or writes (test isolation, or
    several Juggler deployments on one cluster). The default keeps DESIGN's names."""
    create_topics: bool = True
    """Apply the topic specs (idempotently) before the worker starts consuming."""
    batch_max: int = 1000
    """At most this many events are taken at a time (one transaction per partition per
    batch); a batch also closes when no further event is waiting."""
    session_timeout: float | None = None
    """Seconds before the group gives up on a silent worker (and its rebalance timeout);
    None keeps Faust's 60 s. Lower means a killed worker's partitions move sooner."""
    data_dir: Path = Path("/tmp/juggler-worker")
    loglevel: str = "info"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """`JUGGLER_<FIELD>` for every field (e.g. `JUGGLER_WEB_PORT`), then `overrides`
        (None values are ignored, so CLI options that were not given keep the env)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f"JUGGLER_{f.name.upper()}")
            if raw is not None and raw != "":
                values[f.name] = _convert(f.name, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values).checked()

    def checked(self) -> Settings:
        if self.processing_guarantee not in GUARANTEES:
            raise ValueError(f"processing_guarantee must be one of {', '.join(GUARANTEES)}, "
                             f"got {self.processing_guarantee!r}")
        if self.allowed_lateness < 0 or self.retention < 0:
            raise ValueError("allowed_lateness and retention must be >= 0")
        if self.partitions is not None and self.partitions < 1:
            raise ValueError("partitions must be >= 1")
        from juggler.engine.ordering import check_order

        return replace(self, order=check_order(self.order))


_INTS = {"partitions", "allowed_lateness", "retention", "web_port", "batch_max",
         "replication_factor"}
_PATHS = {"schemas_dir", "data_dir"}


def _convert(name: str, raw: str) -> Any:
    if name in _INTS:
        return int(raw)
    if name in _PATHS:
        return Path(raw)
    if name == "session_timeout":
        return float(raw)
    if name == "create_topics":
        return raw.strip().lower() not in ("0", "false", "no", "off")
    return raw
