"""What a task must recover after a restart, as records of the compacted state topic.

Partition p of `juggler.state` holds task p's state, written in the same transaction as
the results and input offsets it goes with, so after a crash it matches the committed
offsets exactly. Every record is small (a key plus at most a few hundred bytes), and a
batch writes only what it changed:

- `e/<topic>/<offset>`: one held event, as a reference to its input record (partition
  p of `<topic>` at `<offset>`): an empty value, headers the entity key and the event's
  arrival sequence. A tombstone when the key's floor passes the event. The restore
  reads the originals back from the stream topics (`restore.read_originals`), which
  therefore must keep a record at least as long as it can be held (DESIGN 7).
- `k/<entity key>`: the key's `maxts` and `floor` (JSON), after each batch touching it.
- `q/<query id>`: a query registered in p's task (JSON: registration sequence, text,
  whether it has its own results topic); a tombstone at deregistration.
- `h`: the task's horizon H, which a deregistration must not shrink.

Why per-event records rather than a snapshot per key: a key's whole held state can be
far larger than one record, and rewriting it per batch made state cost grow with what
was held instead of with what changed. Why references rather than copies of the
values: the stream topic already holds every held event, and the copy was 44% of the
state's bytes on workload K (72 bytes per event with it, 41 without), written by every
round to save reading the stream at restore; the copy path also needed a reference path
for records too large to copy, which is now the only path. It is Kafka Streams'
source-topic changelog optimisation (a table restored from its input topic), and it
costs the same requirement: the stream topics must keep a record as long as it can be
held. State records written by earlier versions, with a copy as their value, restore
the same way: the value is ignored.
"""

from __future__ import annotations

import heapq
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

EVENT = "e/"
KEY = "k/"
QUERY = "q/"
HORIZON = "h"
ENTITY_HEADER = "key"
SEQ_HEADER = "seq"

Headers = list[tuple[str, bytes]]
log = logging.getLogger(__name__)


def event_key(topic: str, offset: int) -> bytes:
    return f"{EVENT}{topic}/{offset}".encode()


def key_meta(maxts: int | None, floor: int | None) -> bytes:
    return json.dumps({"maxts": maxts, "floor": floor}, separators=(",", ":")).encode()


def query_record(seq: int, text: str, own_topic: bool = False) -> bytes:
    return json.dumps({"seq": seq, "text": text, "own_topic": own_topic},
                      separators=(",", ":")).encode()


def horizon_record(horizon: int) -> bytes:
    return json.dumps({"horizon": horizon}).encode()


def event_headers(entity_key: bytes, seq: int) -> Headers:
    """The headers of an `e/` record; its value is empty (a reference, not a copy)."""
    return [(ENTITY_HEADER, entity_key), (SEQ_HEADER, str(seq).encode())]


@dataclass
class HeldTracker:
    """Which `e/` records are still held, per entity key, ordered by `ts`, so the
    records a rising floor releases are found without scanning (a heap per key)."""

    by_key: dict[str, list[tuple[int, str, int]]] = field(default_factory=dict)

    def add(self, key: str, ts: int, topic: str, offset: int) -> None:
        heapq.heappush(self.by_key.setdefault(key, []), (ts, topic, offset))

    def release(self, key: str, floor: int | None) -> list[bytes]:
        """The `e/` keys of `key`'s events below `floor`, now no longer held."""
        heap = self.by_key.get(key)
        out: list[bytes] = []
        if heap is None or floor is None:
            return out
        while heap and heap[0][0] < floor:
            _, topic, offset = heapq.heappop(heap)
            out.append(event_key(topic, offset))
        return out

    def held(self) -> int:
        return sum(len(h) for h in self.by_key.values())


@dataclass
class StoredEvent:
    topic: str
    offset: int
    key: bytes
    seq: int


@dataclass
class TaskState:
    """Task p's state as read back from its partition of the state topic."""

    queries: dict[str, tuple[int, str, bool]] = field(default_factory=dict)
    """Query id -> (registration sequence, text, own results topic)."""
    horizon: int = 0
    keys: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    events: dict[bytes, StoredEvent] = field(default_factory=dict)

    def apply(self, key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, Any]]) -> None:
        """Fold one record of the state topic in (records come in log order; the last
        one per key wins, and a tombstone removes). A record the worker did not write
        is skipped with a warning: the state topic must never stop a restore."""
        try:
            self._apply(key, value, headers)
        except (KeyError, ValueError, TypeError) as exc:
            log.warning("state topic: skipping a record the worker did not write (key "
                        "%r): %s", (key or b"")[:60], exc)

    def _apply(self, key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, Any]]) -> None:
        if key is None:
            return
        text = key.decode("utf-8", "surrogateescape")
        if text.startswith(EVENT):
            if value is None:
                self.events.pop(key, None)
                return
            h = {name: bytes(v) for name, v in headers or ()}
            topic, _, offset = text[len(EVENT):].rpartition("/")
            self.events[key] = StoredEvent(topic, int(offset), h[ENTITY_HEADER],
                                           int(h[SEQ_HEADER]))
        elif text.startswith(KEY):
            entity = text[len(KEY):]
            if value is None:
                self.keys.pop(entity, None)
            else:
                meta = json.loads(value)
                self.keys[entity] = (meta["maxts"], meta["floor"])
        elif text.startswith(QUERY):
            qid = text[len(QUERY):]
            if value is None:
                self.queries.pop(qid, None)
            else:
                record = json.loads(value)
                self.queries[qid] = (record["seq"], record["text"],
                                     bool(record.get("own_topic", False)))
        elif text == HORIZON and value is not None:
            self.horizon = int(json.loads(value)["horizon"])

    def originals(self, partition: int) -> dict[tuple[str, int], list[int]]:
        """The input records to read back, per topic-partition, in offset order."""
        wanted: dict[tuple[str, int], list[int]] = {}
        for stored in self.events.values():
            wanted.setdefault((stored.topic, partition), []).append(stored.offset)
        for offsets in wanted.values():
            offsets.sort()
        return wanted

    def next_seq(self) -> int:
        return max((e.seq for e in self.events.values()), default=-1) + 1

    def next_query_seq(self) -> int:
        return max((q[0] for q in self.queries.values()), default=-1) + 1
