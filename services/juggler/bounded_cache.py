"""`BoundedCache`: a mapping that keeps at most `limit` entries, forgetting the least
recently used first, for the per-process memos (compiled queries, decoded commands,
query shapes, the keys whose results were seen) whose inputs are unbounded.

An OrderedDict underneath because it moves a key to the end and drops its first key in
constant time; a plain dict whose first key is popped again and again finds its new
first key ever slower (the holes stay in front until the dict is resized).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """At most `limit` entries; `get` counts as a use, `put` of a new key beyond the
    limit forgets the entry used longest ago."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value put for `key`, None if there is none (any more)."""
        try:
            self._entries.move_to_end(key)
        except KeyError:
            return None
        return self._entries[key]

    def put(self, key: K, value: V) -> V:
        """Remembers `value` for `key` as its most recent use; returns `value`."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        if len(self._entries) > self.limit:
            self._entries.popitem(last=False)
        return value

    def pop(self, key: K) -> None:
        """Forget `key`, if it is kept."""
        self._entries.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._entries
