"""One Juggler engine per source partition, like a Kafka Streams task.

Every stream topic and the fanout topic have the same partition count and are consumed
by one agent, so partition p of all of them goes to the same worker: engine[p] sees
p's events and p's copy of every accepted command, in the order they were consumed.

What engine[p] must recover after a restart or a rebalance is kept in two changelogged
Faust tables (written inside p's transaction, so they match the committed offsets):

- `queries`, key `"<p>"`: the queries registered in engine[p], in registration order,
  and the engine's horizon (which a deregistration must not shrink);
- `held`, key `"<p>/<entity key>"`: the key's `KeySnapshot` (maxts, floor, held events
  with their positions). The partition in the key lets a restore find p's keys, and
  keeps two partitions apart if a producer ever sends one entity key to both.

An engine is built lazily, from the recovered tables, when p's first event after an
assignment is processed (Faust holds back the streams until table recovery is done),
and dropped when p leaves the assignment.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from juggler.engine.events import EngineConfig, Event
from juggler.engine.operator import JugglerEngine, KeySnapshot
from juggler.service.state_tables import StateTables

log = logging.getLogger(__name__)


@dataclass
class PartitionEngine:
    partition: int
    engine: JugglerEngine
    texts: dict[str, str] = field(default_factory=dict)
    """Registered query id -> text, in registration order (what `queries` stores)."""
    next_offsets: dict[Any, int] = field(default_factory=dict)
    """Per source topic-partition, the offset after the last record this engine took."""

    refetching: dict[Any, tuple[int, float]] = field(default_factory=dict)
    """Topic-partitions sought back over a gap: the offset seen after it, and when."""

    def admit(self, tp: Any, offset: int, gaps_allowed: bool, now: float = 0.0) -> str:
        """Whether to take a record, given what this engine took so far:

        - "take": the next record (or the first of a topic-partition that has no
          committed offset yet); it is now taken;
        - "again": already taken, and committed (each batch commits before the next is
          taken): the consumer delivered it twice, so it is skipped;
        - "gap": offsets between the last record taken and this one were not delivered.
          On the fanout topic (written in transactions) that is normal: read_committed
          consumers skip commit markers and aborted records, so it is taken. On a stream
          topic it may be lost input (faust-streaming 0.15 was seen to skip records,
          mostly right after a restart): the caller checks whether the offsets in
          between hold committed records; if they do it seeks back (`refetch`), else it
          calls `take`;
        - "stale": after a seek back, a record past the gap fetched before the seek.
        """
        expected = self.next_offsets.get(tp)
        if expected is not None and offset < expected:
            return "again"
        if tp in self.refetching:
            if offset != expected:
                return "stale"
            del self.refetching[tp]
        elif expected is not None and offset > expected and not gaps_allowed:
            return "gap"
        self.next_offsets[tp] = offset + 1
        return "take"

    def take(self, tp: Any, offset: int) -> None:
        self.next_offsets[tp] = offset + 1

    def refetch(self, tp: Any, offset: int, now: float) -> None:
        """Records from `next_offsets[tp]` are being fetched again; drop others until then."""
        self.refetching[tp] = (offset, now)

    def stuck(self, now: float, timeout: float) -> list[Any]:
        """Topic-partitions whose re-fetch did not come back within `timeout` seconds."""
        return [tp for tp, (_, since) in self.refetching.items() if now - since > timeout]

    def queries_record(self) -> bytes:
        return json.dumps({"queries": [{"id": i, "text": t} for i, t in self.texts.items()],
                           "horizon": self.engine.horizon}, separators=(",", ":")).encode()


@dataclass
class Retired:
    """Counters of dropped engines, so the exported counters never go down."""

    comparisons: dict[str, int] = field(default_factory=dict)
    reorders: int = 0


class PartitionEngines:
    def __init__(self, config: EngineConfig, tables: StateTables, catalog: Any) -> None:
        self.config = config
        self.tables = tables
        self.catalog = catalog
        self._engines: dict[int, PartitionEngine] = {}
        self.retired = Retired()

    def __iter__(self) -> Iterator[PartitionEngine]:
        return iter(list(self._engines.values()))

    def __contains__(self, partition: int) -> bool:
        return partition in self._engines

    def get(self, partition: int) -> PartitionEngine:
        pe = self._engines.get(partition)
        if pe is None:
            pe = self._engines[partition] = self._restore(partition)
        return pe

    def keep_only(self, partitions: set[int]) -> None:
        """Drop the engines of partitions this worker no longer owns."""
        for p in [p for p in self._engines if p not in partitions]:
            self.drop(p)

    def drop(self, partition: int) -> None:
        pe = self._engines.pop(partition, None)
        if pe is None:
            return
        manager = pe.engine.manager
        for kind, n in manager.comparisons.items():
            self.retired.comparisons[kind] = self.retired.comparisons.get(kind, 0) + n
        self.retired.reorders += manager.reorders
        log.info("dropped the engine of partition %d", partition)

    def _restore(self, partition: int) -> PartitionEngine:
        from juggler.language import QueryError, compile_query

        engine = JugglerEngine(self.config)
        pe = PartitionEngine(partition, engine)
        raw = self.tables.get(self.tables.queries, str(partition))
        if raw is not None:
            record = json.loads(raw)
            for q in record["queries"]:
                try:
                    engine.register(compile_query(q["id"], q["text"], self.catalog))
                except QueryError as exc:  # the schemas changed under a registered query
                    log.error("partition %d: cannot restore query %r: %s", partition, q["id"], exc)
                    continue
                pe.texts[q["id"]] = q["text"]
            engine.horizon = max(engine.horizon, int(record.get("horizon", 0)))
        keys = 0
        for key, value in self.tables.items_with_prefix(self.tables.held, f"{partition}/"):
            entity = key.split("/", 1)[1]
            engine.restore(entity, decode_snapshot(value, entity))
            keys += 1
        log.info("partition %d: engine restored with %d queries and %d keys",
                 partition, len(pe.texts), keys)
        return pe


def held_key(partition: int, key: str) -> str:
    return f"{partition}/{key}"


def encode_snapshot(snapshot: KeySnapshot) -> bytes:
    events = [[e.stream, e.ts, e.data, list(e.position)] for e in snapshot.events]
    return json.dumps({"maxts": snapshot.maxts, "floor": snapshot.floor, "events": events},
                      separators=(",", ":"), allow_nan=False).encode()


def decode_snapshot(value: bytes, key: str) -> KeySnapshot:
    record = json.loads(value)
    events = [Event(stream, key, ts, data, tuple(position))
              for stream, ts, data, position in record["events"]]
    return KeySnapshot(record["maxts"], record["floor"], events)
