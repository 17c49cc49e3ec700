"""Predicate lists: similar predicates of many queries, answered by one probe.

A list holds every predicate with the same stream(s), column(s), operator family and
(for pairs) factor, ordered from most to least covering (thesis 3.2.1). One probe
finds where the value falls in that order; because the satisfied predicates are a
prefix (or suffix) of it, the queries left unsatisfied are precomputed per position
as a query bitmask. Probing a list therefore answers the thesis's SatPBS/QED test for
all its queries at once: the returned mask is the set of queries whose QED the
tuple's SatPBS does not cover on this list.

Bitmasks are Python ints: bit i is the query with bit index i.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Hashable, Iterator

from juggler.engine.exact import (
    EXACT_INT,
    equality_key,
    exact_difference,
    float_difference,
    lower_threshold,
    to_float,
    upper_threshold,
)
from juggler.engine.native import PairRange
from juggler.language.model import ColumnRef, Op, PredicateKind

LOWER = "lower"  # > and >=: satisfied by values above a threshold
UPPER = "upper"  # < and <=: satisfied by values below a threshold
EQUALITY = "equality"  # = and !=


def family(op: Op) -> str:
    """Which list an operator's predicates share; `>` and `>=` differ only in the threshold."""
    if op in (Op.GT, Op.GE):
        return LOWER
    if op in (Op.LT, Op.LE):
        return UPPER
    return EQUALITY


def _suffix_or(masks: list[int]) -> list[int]:
    """out[i] = OR of masks[i:]; out[len] = 0."""
    out = [0] * (len(masks) + 1)
    for i in range(len(masks) - 1, -1, -1):
        out[i] = out[i + 1] | masks[i]
    return out


def _prefix_or(masks: list[int]) -> list[int]:
    """out[i] = OR of masks[:i]."""
    out = [0] * (len(masks) + 1)
    for i, mask in enumerate(masks):
        out[i + 1] = out[i] | mask
    return out


class PredicateList:
    """Bookkeeping shared by every list: which queries use which predicate."""

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.entries: dict[Hashable, int] = {}
        self.users = 0
        self.kind: PredicateKind | None = None  # set by the registry
        self.home: list | None = None  # the registry's list this one is filed in

    def add(self, entry: Hashable, bit: int) -> None:
        self.entries[entry] = self.entries.get(entry, 0) | bit
        self.users |= bit
        self._rebuild()

    def remove(self, bit: int) -> None:
        """Forget one query; the caller drops the list once `users` is 0."""
        for entry in [e for e, m in self.entries.items() if m & bit]:
            rest = self.entries[entry] & ~bit
            if rest:
                self.entries[entry] = rest
            else:
                del self.entries[entry]
        self.users &= ~bit
        self._rebuild()

    def __len__(self) -> int:
        return len(self.entries)

    def _rebuild(self) -> None:
        raise NotImplementedError


class AttributeRangeList(PredicateList):
    """`column > c` / `column >= c` (or `<`, `<=`) for many constants c: CACQ's grouped
    filter as a sorted array of exact float thresholds."""

    def __init__(self, column: ColumnRef, direction: str) -> None:
        super().__init__((column, direction))
        self.column = column
        self.direction = direction
        self.thresholds: list[float] = []
        self.fail_at: list[int] = [0]
        self._threshold: dict[tuple[Op, Fraction], float] = {}
        """Each entry's exact float threshold, computed once: converting is exact
        Fraction arithmetic (and hashing a Fraction is slow), so a registration updates
        the queries per threshold instead of redoing every entry of the list (10,000
        registrations took minutes)."""
        self._by_threshold: dict[float, int] = {}

    def add_predicate(self, op: Op, constant: Fraction, bit: int) -> None:
        entry = (op, constant)
        t = self._threshold.get(entry)
        if t is None:
            convert = lower_threshold if self.direction == LOWER else upper_threshold
            t = self._threshold[entry] = convert(op, constant)
        self._by_threshold[t] = self._by_threshold.get(t, 0) | bit
        self.add(entry, bit)

    def remove(self, bit: int) -> None:
        super().remove(bit)
        self._threshold = {e: self._threshold[e] for e in self.entries}
        self._by_threshold = {}
        for entry, mask in self.entries.items():
            t = self._threshold[entry]
            self._by_threshold[t] = self._by_threshold.get(t, 0) | mask
        self._rebuild()

    def _rebuild(self) -> None:
        by_threshold = self._by_threshold
        self.thresholds = sorted(by_threshold)
        masks = [by_threshold[t] for t in self.thresholds]
        self.fail_at = _suffix_or(masks) if self.direction == LOWER else _prefix_or(masks)

    def loosest(self, queries: int) -> tuple[float, float]:
        """The value range outside which every predicate of `queries` in this list
        fails (they must all be users): a value index retrieves their partners with it.
        Its end is a double on the outer side of the constant, so probes compare floats."""
        constants = [c for (_, c), mask in self.entries.items() if mask & queries]
        if self.direction == LOWER:
            low = min(constants)
            near = to_float(low)
            return (near if near <= low else math.nextafter(near, -math.inf)), math.inf
        high = max(constants)
        near = to_float(high)
        return -math.inf, (near if near >= high else math.nextafter(near, math.inf))

    def failing(self, value: Any) -> int:
        """Queries with a predicate in this list that `value` does not satisfy."""
        if type(value) is int and not -EXACT_INT <= value <= EXACT_INT:
            return self._failing_exact(value)
        if self.direction == LOWER:
            return self.fail_at[bisect_right(self.thresholds, value)]
        return self.fail_at[bisect_left(self.thresholds, value)]

    def _failing_exact(self, value: int) -> int:
        fail = 0
        for (op, constant), mask in self.entries.items():
            if not op.holds(value, constant):
                fail |= mask
        return fail


class AttributeEqualityList(PredicateList):
    """`column = c` and `column != c` for many constants: a hash lookup (CACQ)."""

    def __init__(self, column: ColumnRef) -> None:
        super().__init__((column, EQUALITY))
        self.column = column
        self.table: dict[Any, int] = {}
        self.default = 0

    def add_predicate(self, op: Op, constant: Any, bit: int) -> None:
        self.add((op, constant), bit)

    def _rebuild(self) -> None:
        self.table, self.default = _equality_table(
            ((op, equality_key(constant), mask) for (op, constant), mask in self.entries.items())
        )

    def failing(self, value: Any) -> int:
        return self.table.get(value, self.default)


def _equality_table(items: Iterator[tuple[Op, Any, int]]) -> tuple[dict[Any, int], int]:
    """Precompute, per value, the queries an `=`/`!=` list fails.

    A query passes the `=` part only if every one of its `=` predicates names the value
    (two different constants can never both hold); it fails the `!=` part if one of
    its `!=` predicates names it. Values named by no predicate fail every `=` user.
    """
    eq: dict[Any, int] = {}
    ne: dict[Any, int] = {}
    never = 0
    for op, key, mask in items:
        if op is Op.EQ:
            if key is None:
                never |= mask
            else:
                eq[key] = eq.get(key, 0) | mask
        elif key is not None:
            ne[key] = ne.get(key, 0) | mask
    seen = multi = 0
    for mask in eq.values():
        multi |= seen & mask
        seen |= mask
    eq_users = seen | never
    blocked = multi | never
    table = {key: eq_users & ~(mask & ~blocked) for key, mask in eq.items()}
    for key, mask in ne.items():
        table[key] = table.get(key, eq_users) | mask
    return table, eq_users


@dataclass(frozen=True)
class Bound:
    """The loosest constraint some queries put on `left - factor*right` in a list:
    the exploitation structures retrieve partners with it, then every list filters."""

    family: str
    constants: tuple[Fraction, ...]  # one for ranges, the named values for equality
    floats: tuple[float, ...]  # the same, as floats, for computing JES probe ranges


class PairRangeList(PredicateList):
    """`left > factor*right + k` (or >=, <, <=) for many k: join, window and in-event
    predicates over the same two columns and factor, ordered by k.

    Predicates with different factors live in different lists: their covering order
    would depend on the sign of `right`, which no registration-time order can know.
    """

    def __init__(self, left: ColumnRef, right: ColumnRef, factor: Fraction, direction: str) -> None:
        super().__init__((left, right, factor, direction))
        self.left, self.right, self.factor, self.direction = left, right, factor, direction
        self.float_factor = to_float(factor)
        self.int_factor = int(factor) if factor.denominator == 1 else None
        self.constants: list[Fraction] = []
        self.strict: list[bool] = []
        self.float_constants: list[float] = []
        self.int_thresholds: list[int] = []
        self.masks: list[int] = []
        self.fail_at: list[int] = [0]
        self._rebuild()

    def add_predicate(self, op: Op, offset: Fraction, bit: int) -> None:
        self.add((offset, op in (Op.GT, Op.LT)), bit)

    def _rebuild(self) -> None:
        lower = self.direction == LOWER
        # At k == d a non-strict predicate holds and a strict one fails; the sort puts
        # the holding one on the satisfied side so satisfied entries stay contiguous.
        order = sorted(self.entries, key=lambda e: (e[0], e[1] if lower else not e[1]))
        self.constants = [k for k, _ in order]
        self.strict = [s for _, s in order]
        self.float_constants = [to_float(k) for k in self.constants]
        self.masks = [self.entries[e] for e in order]
        if lower:  # holds iff d >= threshold, for integer d
            self.int_thresholds = [math.floor(k) + 1 if s else math.ceil(k) for k, s in order]
            self.fail_at = _suffix_or(self.masks)
        else:  # holds iff d <= threshold
            self.int_thresholds = [math.ceil(k) - 1 if s else math.floor(k) for k, s in order]
            self.fail_at = _prefix_or(self.masks)
        self.native = PairRange(lower, self.int_factor, self.float_factor, self.float_constants,
                                self.int_thresholds, self.fail_at)

    def position(self, x: Any, y: Any) -> int:
        """How many entries lie on the low side of d = x - factor*y: the satisfied
        prefix for LOWER, the unsatisfied prefix for UPPER.

        The native core answers with `_position`'s own int and float paths, or not
        at all where it cannot decide (a value within rounding error of a constant,
        an int beyond 64 bits, anything but an int or a float)."""
        found = self.native.position(x, y)
        return self._position(x, y) if found is None else found

    def _position(self, x: Any, y: Any) -> int:
        """The definition of `position`: exact integers, or floats with an error bound
        and exact rationals within it."""
        lower = self.direction == LOWER
        if self.int_factor is not None and type(x) is int and type(y) is int:
            d = x - self.int_factor * y
            return bisect_right(self.int_thresholds, d) if lower else bisect_left(self.int_thresholds, d)
        diff, err = float_difference(x, self.float_factor, y)
        lo = bisect_left(self.float_constants, diff - err)
        hi = bisect_right(self.float_constants, diff + err, lo)
        if lo == hi:
            return lo
        exact = exact_difference(x, self.factor, y)
        while lo < hi:
            k = self.constants[lo]
            low_side = k < exact or (k == exact and (self.strict[lo] != lower))
            if not low_side:
                break
            lo += 1
        return lo

    def failing(self, x: Any, y: Any) -> int:
        return self.fail_at[self.position(x, y)]

    def bound(self, queries: int) -> Bound | None:
        """The loosest offset any of `queries` uses here (they must all be users)."""
        indexes = range(len(self.masks)) if self.direction == LOWER else range(len(self.masks) - 1, -1, -1)
        for i in indexes:
            if self.masks[i] & queries:
                return Bound(self.direction, (self.constants[i],), (self.float_constants[i],))
        return None


class PairEqualityList(PredicateList):
    """`left = factor*right + k` and `!=` for many k; strings and booleans use k = 0."""

    native = None  # no native core yet: the native filter calls `failing`

    def __init__(self, left: ColumnRef, right: ColumnRef, factor: Fraction) -> None:
        super().__init__((left, right, factor, EQUALITY))
        self.left, self.right, self.factor = left, right, factor
        self.float_factor = to_float(factor)
        self.table: dict[Any, int] = {}
        self.default = 0
        self.eq_users = 0
        self.only_zero = True

    def add_predicate(self, op: Op, offset: Fraction, bit: int) -> None:
        self.add((op, offset), bit)

    def _rebuild(self) -> None:
        self.table, self.default = _equality_table(
            (op, offset, mask) for (op, offset), mask in self.entries.items()
        )
        self.eq_users = self.default
        self.only_zero = self.factor == 1 and all(k == 0 for _, k in self.entries)
        self._when_equal = self.table.get(0, self.default)

    def failing(self, x: Any, y: Any) -> int:
        if self.only_zero:
            return self._when_equal if x == y else self.default
        return self.table.get(exact_difference(x, self.factor, y), self.default)

    def bound(self, queries: int) -> Bound | None:
        """The offsets that `queries`' `=` predicates name (all of them must have one)."""
        if queries & ~self.eq_users:
            return None
        named = tuple(k for (op, k), mask in self.entries.items() if op is Op.EQ and mask & queries)
        return Bound(EQUALITY, named, tuple(to_float(k) for k in named))


PairList = PairRangeList | PairEqualityList
