"""The predicate specs `juggler_native.Operator.register` takes: a query's predicates
compiled, with exact thresholds, into the column slots and the numbers the operator
compares with (`juggler.engine.native_engine` compiles them).

Named tuples so that both sides name every field (the binding reads them by name,
`juggler_native/src/py_spec.rs`) while building one per predicate per query, a
registration's inner loop, stays about as cheap as building a plain tuple. `kind`
tells the binding which spec it reads.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, TypeAlias

Slot: TypeAlias = tuple[int, int]
"""A column as the operator numbers it: (stream id, slot), `Operator.slot`'s answer."""

EqConstant: TypeAlias = (
    tuple[Literal["i"], int]
    | tuple[Literal["f"], float]
    | tuple[Literal["s"], str]
    | tuple[Literal["b"], bool]
    | tuple[Literal["never"]]
    | tuple[Literal["d"], float, int | None]
)
"""An `=`/`!=` constant as the operator hashes it: an int, a double, a string, a bool,
none any value can equal, or (for a pair) the exact difference as a double and an int."""


class RangeSpec(NamedTuple):
    """`column >= threshold` (`lower`) or `column <= threshold`: the double the
    operator compares doubles with, and the int it compares ints with exactly."""

    id: int
    stream: int
    slot: int
    lower: bool
    threshold: float
    int_threshold: int
    kind: Literal["range"] = "range"


class EqSpec(NamedTuple):
    """`column = constant` (`eq`) or `column != constant`."""

    id: int
    stream: int
    slot: int
    eq: bool
    constant: EqConstant
    kind: Literal["eq"] = "eq"


class PairRangeSpec(NamedTuple):
    """`left - factor * right >= threshold` (`lower`) or `<= threshold`; the factor
    also as an int when it is one within 64 bits, so pairs of ints compare exactly."""

    id: int
    left: Slot
    right: Slot
    lower: bool
    factor: float
    int_factor: int | None
    threshold: float
    int_threshold: int
    kind: Literal["pair_range"] = "pair_range"


class PairEqSpec(NamedTuple):
    """`left - factor * right = constant` (`eq`) or `!= constant`, the constant a
    `"d"` difference."""

    id: int
    left: Slot
    right: Slot
    eq: bool
    factor: float
    int_factor: int | None
    constant: EqConstant
    kind: Literal["pair_eq"] = "pair_eq"


PredicateSpec: TypeAlias = RangeSpec | EqSpec | PairRangeSpec | PairEqSpec
