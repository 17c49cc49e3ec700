"""The compiled form of a query: what the parser produces and the engines consume.

Everything here is exact. Constants are `Fraction`s holding the double nearest to the
constant's text (semantics section 2), and normalization (dividing by a factor, moving a
term across the comparison) is done in `Fraction` arithmetic, so a normalized predicate
holds on exactly the same values as the predicate as written.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping, Union


class Op(str, enum.Enum):
    """Comparison operators after the parser has folded their spellings (`lt=`, `<>`...)."""

    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EQ = "="
    NE = "!="

    @property
    def mirrored(self) -> "Op":
        """The operator that holds when the two sides are swapped (`a < b` iff `b > a`)."""
        return _MIRROR[self]

    def holds(self, left: object, right: object) -> bool:
        """Evaluate on two values of one comparable type (exact for int/Fraction/float)."""
        return _HOLDS[self](left, right)


_MIRROR = {Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE, Op.EQ: Op.EQ, Op.NE: Op.NE}
_HOLDS = {
    Op.LT: lambda a, b: a < b,
    Op.LE: lambda a, b: a <= b,
    Op.GT: lambda a, b: a > b,
    Op.GE: lambda a, b: a >= b,
    Op.EQ: lambda a, b: a == b,
    Op.NE: lambda a, b: a != b,
}


class ColumnType(str, enum.Enum):
    """What a column can be compared with; Avro int/long/float/double are all NUMBER."""

    NUMBER = "number"
    STRING = "string"
    BOOLEAN = "boolean"


TIMESTAMP = "ts"
"""Every stream's event-time column; comparing two streams' `ts` makes a window predicate."""

Catalog = Mapping[str, Mapping[str, ColumnType]]
"""Stream name -> column name -> type. `ts` is implicit and need not be listed."""

Constant = Union[Fraction, str, bool]

MAX_WINDOW_MILLIS = 2**53 - 1
"""The longest MAXWINDOW, in milliseconds (about 285,000 years).

The window becomes the engine's horizon, which is written to JSON checkpoints and read
by tools that hold numbers as doubles; 2^53 - 1 is the largest integer every one of them
keeps exact, and `maxts - H - L` stays far inside a signed 64-bit long. No real data
needs more: epoch-millisecond timestamps are below 2^41, so this window already spans
every event since 1970."""

MAX_CONSTANT_BITS = 4096
"""Widest numerator or denominator of any number normalization computes, in bits.

A literal is an int64 (64 bits) or a double (at most 1075 bits, for the smallest
subnormal), so ordinary arithmetic on a few of them stays far below this. Without a
bound, `B.x * 1e300 * 1e300 * ...` within the length limit makes exact `Fraction`s of
millions of bits, which take seconds to compute and to compare per event. Within it,
every operation costs microseconds and `str()` of any constant has under 1,300 digits,
so it serializes (Python refuses int-to-text conversions beyond 4,300 digits)."""


@dataclass(frozen=True, order=True)
class ColumnRef:
    stream: str
    column: str

    def __str__(self) -> str:
        return f"{self.stream}.{self.column}"


class PredicateKind(str, enum.Enum):
    """The thesis's three predicate types, plus comparisons inside one event.

    SELF predicates (two columns of one stream) are per-event filters; the engine
    evaluates them with the attribute predicates of that stream.
    """

    ATTRIBUTE = "attribute"
    JOIN = "join"
    WINDOW = "window"
    SELF = "self"


@dataclass(frozen=True)
class AttributePredicate:
    """`column op constant`, the constant already solved for (`T.fluct * 2 = 103` -> `T.fluct = 103/2`).

    For strings and booleans only `=` and `!=` are allowed.
    """

    column: ColumnRef
    op: Op
    constant: Constant
    text: str = field(default="", compare=False)

    @property
    def kind(self) -> PredicateKind:
        return PredicateKind.ATTRIBUTE

    @property
    def streams(self) -> frozenset[str]:
        return frozenset((self.column.stream,))


@dataclass(frozen=True)
class PairPredicate:
    """`left op factor * right + offset` over two columns, canonically oriented.

    `left` is the smaller `ColumnRef`, so `T.fluct < 0.5 * B.pressure` and
    `B.pressure > 2 * T.fluct` become the same object. `factor` is never zero. String
    and boolean columns only take `=`/`!=` with factor 1 and offset 0.

    `left == right` (a SELF predicate with factor 1) is a comparison whose column
    cancelled out (`N.b * 0 = 0`, `U.name = U.name`): true or false whatever the value.
    """

    kind: PredicateKind  # JOIN, WINDOW or SELF
    left: ColumnRef
    op: Op
    factor: Fraction
    right: ColumnRef
    offset: Fraction
    text: str = field(default="", compare=False)

    @property
    def streams(self) -> frozenset[str]:
        return frozenset((self.left.stream, self.right.stream))


Predicate = Union[AttributePredicate, PairPredicate]


@dataclass(frozen=True)
class Query:
    """A registered continuous query, compiled and checked against the catalog.

    `select` is None for `SELECT *`. `max_window` is in milliseconds, a plain int in
    [0, MAX_WINDOW_MILLIS] (so JSON and every engine can take it as is), and is None only
    for single-stream queries written without MAXWINDOW. Every `Fraction` in
    `predicates` fits MAX_CONSTANT_BITS.
    """

    id: str
    text: str
    streams: tuple[str, ...]
    select: tuple[ColumnRef, ...] | None
    predicates: tuple[Predicate, ...]
    max_window: int | None

    def predicates_of(self, kind: PredicateKind) -> tuple[Predicate, ...]:
        return tuple(p for p in self.predicates if p.kind is kind)

    @property
    def window(self) -> int:
        """The MAXWINDOW bound, 0 when absent (a single stream spans no time)."""
        return self.max_window or 0
