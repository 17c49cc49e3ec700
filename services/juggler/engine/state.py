"""Held events of one key: WES time buckets and JES value indexes (thesis 3.3).

Each event is stored once, as a `Held` record; buckets and indexes hold references to
it. Keys are independent (joins never cross keys), so a deployment scales by
partition and a key costs nothing until its first event arrives.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import Any, Iterator

from juggler.engine.events import Event
from juggler.language.model import TIMESTAMP


class Held:
    """An accepted event with what the operator caches about it.

    `attr_fail` is the mask of queries whose attribute (and in-event) predicates this
    event fails, computed on first use and recomputed when `attr_version` is stale.
    """

    __slots__ = ("event", "ts", "data", "seq", "attr_fail", "attr_version")

    def __init__(self, event: Event, seq: int) -> None:
        self.event = event
        self.ts = event.ts
        self.data = event.data
        self.seq = seq
        self.attr_fail = 0
        self.attr_version = -1

    def value(self, column: str) -> Any:
        return self.ts if column == TIMESTAMP else self.data[column]


class ValueIndex:
    """A JES: the held events of one stream and key sorted by one column, as two
    parallel lists (values, events), so a value-range probe is two C bisections and
    one slice, with no per-event Python work and no tuple keys to compare. Inserting
    moves the tail of a plain list: cheap for the per-key stores it serves (a key holds
    its own horizon's events), linear for a single key holding very many."""

    __slots__ = ("values", "helds")

    def __init__(self, helds: list[Held], column: str) -> None:
        helds = sorted(helds, key=lambda h: h.value(column))
        self.values = [h.value(column) for h in helds]
        self.helds = helds

    def add(self, value: Any, held: Held) -> None:
        i = bisect_right(self.values, value)
        self.values.insert(i, value)
        self.helds.insert(i, held)

    def remove(self, value: Any, held: Held) -> None:
        i = bisect_left(self.values, value)
        helds = self.helds
        while helds[i] is not held:
            i += 1
        del self.values[i]
        del helds[i]

    def span(self, low: Any, high: Any) -> tuple[int, int]:
        """Positions [first, last) of the events with low <= value <= high."""
        first = bisect_left(self.values, low)
        return first, bisect_right(self.values, high, first)


class StreamStore:
    """The held events of one stream of one key.

    The WES is a set of time buckets of `bucket_ms` each, kept sorted by timestamp so a
    time-range probe reads whole buckets inside the range and filters only the two at
    its ends, and purging expired events drops whole buckets. JES indexes are
    `ValueIndex`es per probed column, built on first use.
    """

    __slots__ = ("bucket_ms", "bucket_ids", "buckets", "indexes", "size")

    def __init__(self, bucket_ms: int) -> None:
        self.bucket_ms = bucket_ms
        self.bucket_ids: list[int] = []
        self.buckets: dict[int, list[Held]] = {}
        self.indexes: dict[str, ValueIndex] = {}
        self.size = 0

    def insert(self, held: Held) -> None:
        bid = held.ts // self.bucket_ms
        bucket = self.buckets.get(bid)
        if bucket is None:
            bucket = self.buckets[bid] = []
            if not self.bucket_ids or bid > self.bucket_ids[-1]:
                self.bucket_ids.append(bid)
            else:
                insort(self.bucket_ids, bid)
        if not bucket or bucket[-1].ts <= held.ts:
            bucket.append(held)
        else:
            bucket.insert(bisect_right(bucket, held.ts, key=_ts), held)
        for column, index in self.indexes.items():
            index.add(held.value(column), held)
        self.size += 1

    def between(self, lo: int, hi: int) -> Iterator[Held]:
        """Held events with lo <= ts <= hi, in timestamp order."""
        ids = self.bucket_ids
        first_full = -(-lo // self.bucket_ms)  # buckets from here on start at or after lo
        i = bisect_left(ids, lo // self.bucket_ms)
        last = hi // self.bucket_ms
        while i < len(ids) and ids[i] <= last:
            bid = ids[i]
            bucket = self.buckets[bid]
            if bid >= first_full and bid < last:
                yield from bucket
            else:
                start = bisect_left(bucket, lo, key=_ts)
                stop = bisect_right(bucket, hi, key=_ts)
                yield from bucket[start:stop]
            i += 1

    def count_between(self, lo: int, hi: int) -> int:
        """How many held events have lo <= ts <= hi, reading bucket sizes, not events."""
        ids = self.bucket_ids
        i = bisect_left(ids, lo // self.bucket_ms)
        last = hi // self.bucket_ms
        count = 0
        while i < len(ids) and ids[i] <= last:
            bucket = self.buckets[ids[i]]
            if bucket[0].ts >= lo and bucket[-1].ts <= hi:
                count += len(bucket)
            else:
                count += bisect_right(bucket, hi, key=_ts) - bisect_left(bucket, lo, key=_ts)
            i += 1
        return count

    def index(self, column: str) -> ValueIndex:
        """The JES over `column`, built from the WES the first time a probe needs it."""
        index = self.indexes.get(column)
        if index is None:
            index = self.indexes[column] = ValueIndex(list(self.all()), column)
        return index

    def all(self) -> Iterator[Held]:
        for bid in self.bucket_ids:
            yield from self.buckets[bid]

    def purge(self, floor: int) -> None:
        """Drop every bucket that ends before `floor` (no held event can be in it)."""
        ids = self.bucket_ids
        n = 0
        while n < len(ids) and (ids[n] + 1) * self.bucket_ms <= floor:
            bucket = self.buckets.pop(ids[n])
            self.size -= len(bucket)
            for column, index in self.indexes.items():
                for held in bucket:
                    index.remove(held.value(column), held)
            n += 1
        if n:
            del ids[:n]


def _ts(held: Held) -> int:
    return held.ts


class KeyState:
    """Everything held for one key: its `maxts`, its retention floor and its streams."""

    __slots__ = ("maxts", "floor", "streams", "purged_to")

    def __init__(self) -> None:
        self.maxts: int | None = None
        self.floor: int | None = None
        self.streams: dict[str, StreamStore] = {}
        self.purged_to: int | None = None

    def store(self, stream: str, bucket_ms: int) -> StreamStore:
        store = self.streams.get(stream)
        if store is None:
            store = self.streams[stream] = StreamStore(bucket_ms)
        return store

    def purge(self) -> None:
        """Drop whole buckets below the floor, at most once per bucket width crossed."""
        for store in self.streams.values():
            store.purge(self.floor)
        self.purged_to = self.floor

    def held(self) -> int:
        return sum(s.size for s in self.streams.values())
