"""`BoundedCache` keeps at most its limit, forgetting the entry used longest ago, so a
memo whose inputs are unbounded keeps the ones still in use."""

from __future__ import annotations

import pytest

from juggler.bounded_cache import BoundedCache


def test_a_new_key_beyond_the_limit_forgets_the_least_recently_used() -> None:
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1          # "a" used after "b"
    cache.put("c", 3)
    assert "b" not in cache
    assert (cache.get("a"), cache.get("c")) == (1, 3)


def test_putting_a_known_key_again_replaces_it_and_forgets_nothing() -> None:
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    cache.put("c", 3)                   # "b" is now the least recently used
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (10, None, 3)


def test_a_value_of_none_is_kept_and_told_apart_by_membership() -> None:
    cache: BoundedCache[str, int | None] = BoundedCache(1)
    cache.put("a", None)
    assert "a" in cache and cache.get("a") is None
    assert "b" not in cache


def test_the_limit_is_at_least_one() -> None:
    with pytest.raises(ValueError):
        BoundedCache(0)
