"""A compiled predicate as a boolean expression a peer engine evaluates (EPL or Flink SQL).

Why from the compiled `Query` rather than from the query text: the text is Juggler's
language, which neither peer parses, and the compiled form has already settled what
each comparison means (semantics section 2). Why not just print the normalized constants:
a normalized constant is an exact rational, often not a double (`B.temp * 3 > 1` is
`B.temp > 1/3`), and a peer compares doubles. So:

- attribute predicates become comparisons with the double threshold that decides them
  exactly for every double (`juggler.engine.exact`, as the engine itself does);
- window predicates over the integer `ts` become integer comparisons, the offset
  rounded the way that keeps them exact;
- join predicates (`l op f * r + o` over two data columns) are evaluated by the peer in
  double arithmetic. That can differ from the exact result only when `l - f * r` is
  within a few ulps of `o`; the benchmark compares result sets and reports any
  difference rather than assuming there is none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Callable

from juggler.engine.exact import lower_threshold, to_float, upper_threshold
from juggler.language import (TIMESTAMP, AttributePredicate, ColumnRef, Op, PairPredicate,
                               PredicateKind, Query)


@dataclass(frozen=True)
class Dialect:
    """What differs between EPL and Flink SQL in a comparison."""

    column: Callable[[ColumnRef], str]
    """How a column is written (its stream's alias, quoting, the `ts` column's name)."""
    double: Callable[[str], str]
    """A double literal from the digits of its shortest round-trip form."""
    not_equal: str
    true: str
    false: str


def double_literal(value: float, dialect: Dialect) -> str:
    """`value` written so that the peer's parser reads exactly this double back."""
    if not math.isfinite(value):
        raise ValueError(f"no literal for {value}")
    text = repr(value)
    if "e" in text:  # some grammars take no exponent; the exact decimal expansion is one
        text = format(Decimal(value), "f")
    if "." not in text:
        text += ".0"
    return dialect.double(text)


def _string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _op(op: Op, dialect: Dialect) -> str:
    return dialect.not_equal if op is Op.NE else op.value


def attribute(p: AttributePredicate, dialect: Dialect) -> str:
    """`column op constant`, exact for every double value of the column."""
    column = dialect.column(p.column)
    c = p.constant
    if isinstance(c, bool):
        return f"{column} {_op(p.op, dialect)} {dialect.true if c else dialect.false}"
    if isinstance(c, str):
        return f"{column} {_op(p.op, dialect)} {_string(c)}"
    if p.op in (Op.GT, Op.GE):
        return _threshold(column, ">=", lower_threshold(p.op, c), dialect)
    if p.op in (Op.LT, Op.LE):
        return _threshold(column, "<=", upper_threshold(p.op, c), dialect)
    exact = to_float(c) == c  # = and != : only a constant that is a double can be equalled
    if not exact:
        return dialect.false if p.op is Op.EQ else dialect.true
    return f"{column} {_op(p.op, dialect)} {double_literal(float(c), dialect)}"


def _threshold(column: str, op: str, bound: float, dialect: Dialect) -> str:
    if math.isinf(bound):  # `v >= inf` holds for no finite value, `v >= -inf` for all
        return dialect.false if (bound > 0) == (op == ">=") else dialect.true
    return f"{column} {op} {double_literal(bound, dialect)}"


def pair(p: PairPredicate, dialect: Dialect) -> str:
    """`left op factor * right + offset` (join, window or same-stream)."""
    left, right = dialect.column(p.left), dialect.column(p.right)
    if p.left == p.right and p.factor == 1:  # the column cancelled out: a constant truth
        return dialect.true if p.op.holds(Fraction(0), p.offset) else dialect.false
    if p.left.column == TIMESTAMP and p.right.column == TIMESTAMP and p.factor == 1:
        return _integer_difference(left, right, p.op, p.offset, dialect)
    scaled = right if p.factor == 1 else f"{double_literal(float(p.factor), dialect)} * {right}"
    if p.offset:
        sign = "+" if p.offset > 0 else "-"
        scaled = f"{scaled} {sign} {double_literal(abs(float(p.offset)), dialect)}"
    return f"{left} {_op(p.op, dialect)} {scaled}"


def _integer_difference(left: str, right: str, op: Op, offset: Fraction,
                        dialect: Dialect) -> str:
    """`left - right op offset` over integers, with an integer offset that keeps it exact
    (`a - b > 2.5` iff `a - b > 2`; `a - b = 2.5` never holds)."""
    if op in (Op.GT, Op.LE):
        bound = math.floor(offset)
    elif op in (Op.GE, Op.LT):
        bound = math.ceil(offset)
    elif offset.denominator != 1:
        return dialect.false if op is Op.EQ else dialect.true
    else:
        bound = int(offset)
    if bound == 0:
        return f"{left} {_op(op, dialect)} {right}"
    sign = "+" if bound > 0 else "-"
    return f"{left} {_op(op, dialect)} {right} {sign} {abs(bound)}"


def split(query: Query, dialect: Dialect) -> tuple[dict[str, list[str]], list[PairPredicate]]:
    """A query's predicates that one event decides (attribute and same-stream ones), as
    expressions by stream, where a peer filters a stream before any join; and the
    others (join and window predicates), for the peer to place."""
    filters: dict[str, list[str]] = {s: [] for s in query.streams}
    others: list[PairPredicate] = []
    for p in query.predicates:
        if isinstance(p, AttributePredicate):
            filters[p.column.stream].append(attribute(p, dialect))
        elif p.kind is PredicateKind.SELF:
            filters[p.left.stream].append(pair(p, dialect))
        else:
            others.append(p)
    return filters, others
