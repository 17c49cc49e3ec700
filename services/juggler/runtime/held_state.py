"""What a task must recover after a restart, as records of the compacted state topic.

Partition p of `juggler.state` holds task p's state, written in the same transaction as
the results and input offsets it goes with, so after a crash it matches the committed
offsets exactly. A round writes only what it changed:

- `r/<n>`: references to the held events a round took (up to `REFS_PER_RECORD` of
  them), as JSON `{"refs": {<topic>: [[offset, seq, ts, entity key], ...]}}`: each one
  points at its input record (partition p of `<topic>` at `offset`), with its arrival
  sequence and `ts`. A tombstone once every event in it is released; when fewer than a
  quarter of them are still held, those are written again in the current round's record
  and the old one is tombstoned, so a quiet key cannot pin a whole record of released
  events for long.
- `k/<entity key>`: the key's `maxts` and `floor` (JSON), after each batch touching it.
  An event of an `r/` record is still held exactly when its `ts` is not below its key's
  floor (the floor is what releases it), so releasing an event writes nothing.
- `Q/<n>`: queries registered in p's task, up to a hundred a record (JSON: per query
  id its registration sequence, text, and whether it has its own results topic;
  `query_records`); rewritten without a query at its deregistration, a tombstone once
  it holds none. Earlier versions wrote `q/<query id>` per query, still read.
- `h`: the task's horizon H, which a deregistration must not shrink.

Why a record per round rather than per event: a record and a tombstone per held event
were a large share of the records a round produced (docs/worker.md, "State and
restore"), each one a produce call in the worker and a record the broker appends and its
cleaner compacts. Why references rather than copies of the values: the stream topic
already holds every held event. It is Kafka Streams' source-topic changelog optimisation
(a table restored from its input topic), and it costs the same requirement: the stream
topics must keep a record as long as it can be held. The restore reads the originals
back from the stream topics (`readback.read_originals`).

Earlier versions wrote `e/<topic>/<offset>` per held event (headers: the entity key and
the arrival sequence; the value an ignored copy or empty, a tombstone on release). They
restore the same way, and the first round after such a restore writes their events
again as `r/` records and tombstones them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from heapq import heappop, heappush
from itertools import chain
from typing import Any

from juggler.codec.bounded import RECORD_OVERHEAD_BYTES
from juggler.runtime.query_records import (LEGACY, QUERIES, StoredQuery, legacy_query_of,
                                           queries_of)

EVENT = "e/"
"""An earlier version's reference to one held event (read, never written)."""
REFS = "r/"
KEY = "k/"
HORIZON = "h"
ENTITY_HEADER = "key"
SEQ_HEADER = "seq"
REFS_PER_RECORD = 1000
"""At most this many references in one `r/` record (about 35 KB with short keys): a
record is only tombstoned when all of its events are released, so smaller records
free state sooner; larger ones cost fewer records per round."""

Ref = tuple[str, int, int, int, str]
"""A held event's reference: (topic, offset, arrival sequence, ts, entity key)."""
log = logging.getLogger(__name__)


def refs_key(number: int) -> bytes:
    return f"{REFS}{number}".encode()


_QUOTE = json.JSONEncoder(ensure_ascii=False).encode
"""A str as JSON, exactly what `json.dumps(text, ensure_ascii=False)` returns, without
building an encoder per call as `json.dumps` does for non-default options."""
_REF = "[%d,%d,%d,%s],"
"""One reference in an `r/` record, its key already quoted (`_QUOTE`). `%d` writes an
int as `json.dumps` does; a reference's numbers are ints, never bools or floats (which
`_refs_of` would not read back either)."""


def refs_record(refs: Iterable[Ref]) -> bytes:
    """The `r/` record of `refs`, which `_refs_of` reads: byte for byte what `json.dumps(
    {"refs": {<topic>: [[offset, seq, ts, key], ...]}}, ensure_ascii=False,
    separators=(",", ":")).encode()` writes, topics in order of first appearance. Built
    as text, one `%` per topic over a flat list of its values, because that `json.dumps`
    was most of the worker's bookkeeping of held events (docs/worker.md, "State and
    restore"): a list per reference, and the encoder's cycle check and escaping of the
    key for each one. Keys repeat (workload K has 20), so each is quoted once per record."""
    by_topic: dict[str, list[int | str]] = {}
    quoted: dict[str, str] = {}
    for topic, offset, seq, ts, key in refs:
        text = quoted.get(key)
        if text is None:
            text = quoted[key] = _QUOTE(key)
        values = by_topic.get(topic)
        if values is None:
            by_topic[topic] = [offset, seq, ts, text]
        else:
            values += offset, seq, ts, text
    return ('{"refs":{%s}}' % ",".join(
        "%s:[%s]" % (_QUOTE(topic), (_REF * (len(values) // 4))[:-1] % tuple(values))
        for topic, values in by_topic.items())).encode()


def _refs_of(value: bytes) -> list[Ref]:
    refs = [(topic, offset, seq, ts, key)
            for topic, written in json.loads(value)["refs"].items()
            for offset, seq, ts, key in written]
    if not all(type(n) is int for ref in refs for n in ref[1:4]) or \
            not all(type(ref[4]) is str for ref in refs):
        raise TypeError("a reference is not [offset, seq, ts, key]")
    return refs


_COMPACT = json.JSONEncoder(separators=(",", ":")).encode
"""`json.dumps(o, separators=(",", ":"))`, its encoder built once (see `_QUOTE`)."""


def key_meta(maxts: int | None, floor: int | None) -> bytes:
    return _COMPACT({"maxts": maxts, "floor": floor}).encode()


def horizon_record(horizon: int) -> bytes:
    return json.dumps({"horizon": horizon}).encode()


@dataclass(slots=True)
class _Written:
    """An `r/` record: the references in it still held, and how many it was written with."""

    live: dict[int, Ref]
    size: int


class HeldRefs:
    """Which held events each `r/` record refers to, so a round writes one record for
    the events it took, and a tombstone for a record whose events are all released.
    Per entity key, the held events in `ts` order (a heap), so those a rising floor
    releases are found without scanning."""

    def __init__(self, max_record_bytes: int) -> None:
        self.max_bytes = max_record_bytes - RECORD_OVERHEAD_BYTES - len(refs_key(2**63))
        """What an `r/` record's value may take within the producer's record limit."""
        self.by_key: dict[str, list[tuple[int, int]]] = {}
        self.fresh: dict[int, Ref] = {}
        """Held events not in a written record (yet): this round's, and those of a
        record rewritten because few of its events are still held. An event its
        key's floor passes before the round ends is never written."""
        self.home: dict[int, int] = {}
        """Arrival sequence -> number of the `r/` record holding that event."""
        self.records: dict[int, _Written] = {}
        self.gone: list[bytes] = []
        """`r/` (or earlier `e/`) records to tombstone when the round finishes."""
        self.next_record = 0

    def add(self, ref: Ref) -> None:
        """Hold `ref`'s event. Called once per accepted event, so it does not build an
        empty heap per call (`setdefault`) for keys that already have one."""
        _, _, seq, ts, key = ref
        heap = self.by_key.get(key)
        if heap is None:
            self.by_key[key] = [(ts, seq)]
        else:
            heappush(heap, (ts, seq))
        self.fresh[seq] = ref

    def release(self, key: str, floor: int | None) -> None:
        """Release `key`'s events below `floor`. Called per key and batch, and most
        released events are in a written record, so that case is handled inline with
        the dicts in locals rather than in a method call per event."""
        heap = self.by_key.get(key)
        if heap is None or floor is None:
            return
        fresh, home, records = self.fresh, self.home, self.records
        while heap and heap[0][0] < floor:
            seq = heappop(heap)[1]
            if fresh.pop(seq, None) is None:
                number = home.pop(seq)
                record = records[number]
                live = record.live
                del live[seq]
                if 4 * len(live) < record.size:
                    self._rewrite(number, record)

    def _rewrite(self, number: int, record: _Written) -> None:
        """Tombstone record `number`, and write what it still holds with this round's."""
        del self.records[number]
        self.gone.append(refs_key(number))
        for seq, ref in record.live.items():
            del self.home[seq]
            self.fresh[seq] = ref

    def flush(self) -> tuple[list[bytes], list[tuple[bytes, bytes]]]:
        """What the round writes to the state topic: the keys to tombstone, then the
        new `r/` records (key, value). A round's references that fit in one record are
        handed to `_write` as they are (the common case), not copied in pieces."""
        gone, self.gone = self.gone, []
        fresh, self.fresh = self.fresh, {}
        if len(fresh) <= REFS_PER_RECORD:
            parts = [fresh] if fresh else []
        else:
            items = list(fresh.items())
            parts = [dict(items[start:start + REFS_PER_RECORD])
                     for start in range(0, len(items), REFS_PER_RECORD)]
        written: list[tuple[bytes, bytes]] = []
        for part in parts:
            written += self._write(part)
        return gone, written

    def _write(self, refs: dict[int, Ref]) -> list[tuple[bytes, bytes]]:
        """`refs` (arrival sequence -> reference) as one record, or as halves when that
        is over the limit (keys can be up to 64 KiB each). The record keeps `refs` as
        its live references, so a round's dict is not copied (it is not used after)."""
        value = refs_record(refs.values())
        if len(value) > self.max_bytes and len(refs) > 1:
            items = list(refs.items())
            half = len(items) // 2
            return self._write(dict(items[:half])) + self._write(dict(items[half:]))
        number = self.next_record
        self.next_record += 1
        self.records[number] = _Written(refs, len(refs))
        self.home.update(dict.fromkeys(refs, number))
        return [(refs_key(number), value)]

    def restored(self, state_key: bytes, size: int, held: int, refs: list[Ref]) -> None:
        """A state record read back by the restore: `size` references were written in
        it, `held` of them are still held, and `refs` are those restored. It is kept
        as it is only if it is an `r/` record whose held events all came back and are
        at least a quarter of it; otherwise it is tombstoned and its restored events
        written again, so an event that could not be restored is reported once, not at
        every restart."""
        for _, _, seq, ts, key in refs:
            heappush(self.by_key.setdefault(key, []), (ts, seq))
        text = state_key.decode()
        if text.startswith(REFS):
            number = int(text[len(REFS):])
            self.next_record = max(self.next_record, number + 1)
            if len(refs) == held and 4 * held >= size:
                self.records[number] = _Written({ref[2]: ref for ref in refs}, size)
                self.home.update((ref[2], number) for ref in refs)
                return
        self.gone.append(state_key)
        self.fresh.update((ref[2], ref) for ref in refs)

    def held(self) -> int:
        return len(self.home) + len(self.fresh)


@dataclass
class StoredEvent:
    topic: str
    offset: int
    key: bytes
    seq: int


Held = list[tuple[bytes, int, list[StoredEvent]]]
"""Per state record holding events: its key, how many it was written with, those held."""


@dataclass
class TaskState:
    """Task p's state as read back from its partition of the state topic."""

    queries: dict[str, StoredQuery] = field(default_factory=dict)
    """Query id -> (registration sequence, text, own results topic)."""
    query_records: dict[int, list[str]] = field(default_factory=dict)
    """`Q/` record number -> the ids of the queries it holds."""
    legacy: set[str] = field(default_factory=set)
    """The ids of queries held by an earlier version's `q/` record."""
    horizon: int = 0
    keys: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    refs: dict[bytes, list[Ref]] = field(default_factory=dict)
    """`r/` records: every reference written in each, held or not."""
    events: dict[bytes, StoredEvent] = field(default_factory=dict)
    """An earlier version's `e/` records, each one held event."""
    read: dict[bytes, dict[str, StoredQuery]] = field(default_factory=dict, repr=False)
    """`Q/` record values already decoded, by value: a restore gives its tasks' states
    one dict, since partitions that applied the same commands in the same rounds wrote
    the same records (each decoded once, and one text object for all of them)."""

    def apply(self, key: bytes | None, value: bytes | None,
              headers: Iterable[tuple[str, Any]] | None) -> None:
        """Fold one record of the state topic in (records come in log order; the last
        one per key wins, and a tombstone removes). A record the worker did not write
        is skipped with a warning: the state topic must never stop a restore."""
        try:
            self._apply(key, value, headers)
        except (KeyError, ValueError, TypeError) as exc:
            log.warning("state topic: skipping a record the worker did not write (key "
                        "%r): %s", (key or b"")[:60], exc)

    def _apply(self, key: bytes | None, value: bytes | None,
               headers: Iterable[tuple[str, Any]] | None) -> None:
        if key is None:
            return
        text = key.decode("utf-8", "surrogateescape")
        if text.startswith(REFS):
            int(text[len(REFS):])  # a ValueError for a key the worker did not write
            if value is None:
                self.refs.pop(key, None)
            else:
                self.refs[key] = _refs_of(value)
        elif text.startswith(EVENT):
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
        elif text.startswith(QUERIES):
            number = int(text[len(QUERIES):])
            queries: dict[str, StoredQuery] | None = None
            if value is not None:  # decoded first: a record it refuses changes nothing
                queries = self.read.get(value)
                if queries is None:
                    queries = self.read[value] = queries_of(value)
            for qid in self.query_records.pop(number, ()):
                self.queries.pop(qid, None)
            if queries:
                self.queries.update(queries)
                self.query_records[number] = list(queries)
        elif text.startswith(LEGACY):
            qid = text[len(LEGACY):]
            if value is None:
                self.queries.pop(qid, None)
                self.legacy.discard(qid)
            else:
                self.queries[qid] = legacy_query_of(value)
                self.legacy.add(qid)
        elif text == HORIZON and value is not None:
            self.horizon = int(json.loads(value)["horizon"])

    def held(self) -> Held:
        """Per record holding events: its state key, how many events were written in
        it, and those still held. An `r/` event is held while its key's floor has not
        passed its `ts` (what releases it in the engine); an `e/` record is its event.
        Worked out once per restore: for a million events it takes about a second."""
        out: Held = []
        for state_key, refs in self.refs.items():
            held = []
            for topic, offset, seq, ts, key in refs:
                floor = self.keys.get(key, (None, None))[1]
                if floor is None or ts >= floor:
                    held.append(StoredEvent(topic, offset, key.encode(), seq))
            out.append((state_key, len(refs), held))
        out += [(state_key, 1, [stored]) for state_key, stored in self.events.items()]
        return out

    def next_seq(self) -> int:
        seqs = chain((e.seq for e in self.events.values()),
                     (ref[2] for refs in self.refs.values() for ref in refs))
        return max(seqs, default=-1) + 1


def originals(held: Held, partition: int) -> dict[tuple[str, int], list[int]]:
    """The input records of `held` (`TaskState.held`) to read back, per topic-partition,
    in offset order."""
    wanted: dict[tuple[str, int], list[int]] = {}
    for _, _, events in held:
        for stored in events:
            wanted.setdefault((stored.topic, partition), []).append(stored.offset)
    for offsets in wanted.values():
        offsets.sort()
    return wanted
