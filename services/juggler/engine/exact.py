"""Exact comparisons between event values and rational constants, at float speed.

A normalized predicate such as `T.fluct = 103/2` or `B.pressure > (1/3) * T.fluct`
holds or fails exactly as the text says (semantics section 2). Rather than doing rational
arithmetic per event, each constant is turned once into a float threshold that decides
the comparison exactly for every double (and every int a double represents), and pair
differences are computed in floats with an error bound, falling back to `Fraction`
only when a value sits within that bound of a constant.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TypeGuard, Union

from juggler.language.model import AttributePredicate, Op, PairPredicate

Number = Union[int, float]
Key = Union[int, float, Fraction, str, bool]

EXACT_INT = 2**53
"""Ints beyond this are not all doubles; comparing them uses the exact slow path."""

_BAND = 2.0**-48
"""Relative error allowed for `x - m*y` computed in floats (a few ulps, generously):
`d = x - m*y` is within `(|x| + 2|m*y| + |d|) * _BAND` of the exact value. The Spark
filters use it; the native operator's pair lists use twice it."""


def to_float(value: Fraction) -> float:
    """The nearest double, saturating to +-inf instead of overflowing."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def lower_threshold(op: Op, constant: Fraction) -> float:
    """T such that, for every double v, `v op constant` iff `v >= T` (op is > or >=).

    No double lies strictly between a constant and its nearest double, which is what
    lets a strict comparison become a non-strict one on the next double.
    """
    near = to_float(constant)
    side = _side(near, constant)
    if side > 0 or (side == 0 and op is Op.GE):
        return near
    return math.nextafter(near, math.inf)


def upper_threshold(op: Op, constant: Fraction) -> float:
    """T such that, for every double v, `v op constant` iff `v <= T` (op is < or <=)."""
    near = to_float(constant)
    side = _side(near, constant)
    if side < 0 or (side == 0 and op is Op.LE):
        return near
    return math.nextafter(near, -math.inf)


def _side(near: float, constant: Fraction) -> int:
    """The sign of `near - constant`, exactly, in integers: comparing a float with a
    `Fraction` makes a `Fraction` of the float first, which took most of a threshold's
    time, and a registration computes one per new constant."""
    if math.isinf(near):
        return 1 if near > 0 else -1
    numerator, denominator = near.as_integer_ratio()
    difference = numerator * constant.denominator - constant.numerator * denominator
    return (difference > 0) - (difference < 0)


def equality_key(constant: Key) -> Key | None:
    """The dict key under which values equal to `constant` hash, or None if no value can.

    Python hashes equal ints, floats and Fractions alike; a rational that is neither an
    integer nor a double equals no event value, so its predicate can never hold.
    """
    if not isinstance(constant, Fraction):
        return constant
    if constant.denominator == 1:
        return int(constant)
    near = to_float(constant)
    return near if near == constant else None


def exact_difference(x: Number, factor: Fraction, y: Number) -> Fraction:
    """`x - factor * y` in exact arithmetic."""
    return Fraction(x) - factor * Fraction(y)


def is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def exact(value: Number) -> Fraction | float:
    """A number as a Fraction (exact for ints and doubles), or a NaN or infinity as it
    is: it has no ratio (`Fraction` raises), and Python compares it with a Fraction as
    IEEE 754 says (NaN fails every comparison but !=). The codec refuses non-finite
    numbers (semantics section 1), but an engine called directly must not fail on one."""
    return value if isinstance(value, float) and not math.isfinite(value) else Fraction(value)


def attribute_holds(predicate: AttributePredicate, x: object) -> bool:
    """Semantics 2, exactly: a number becomes a Fraction, so `x op constant` is decided
    without rounding; strings and booleans compare as they are."""
    if is_number(x) and isinstance(predicate.constant, Fraction):
        return predicate.op.holds(exact(x), predicate.constant)
    return predicate.op.holds(x, predicate.constant)


def pair_holds(predicate: PairPredicate, x: object, y: object) -> bool:
    """`x op factor * y + offset` in exact arithmetic (or as written, for strings)."""
    if is_number(x) and is_number(y):
        return predicate.op.holds(exact(x), predicate.factor * exact(y) + predicate.offset)
    return predicate.op.holds(x, y)
