"""Syntax tree -> linear forms -> canonical predicates, in exact arithmetic.

Each side of a comparison is reduced to a *linear form* `coef * column + const` (the
column may be absent). A comparison `a*x + b  op  c*y + d` is then solved:

* one column (or the same column on both sides): `x op' k` -- an attribute predicate;
* two columns: `left op factor * right + offset` with `left` the smaller `ColumnRef`,
  so equivalent spellings (`T.fluct < 0.5 * B.pressure`, `B.pressure > 2 * T.fluct`)
  become equal objects and can share a predicate list;
* a column that cancels out (`N.b * 0 = 0`, `B.x - B.x < 1`, `U.name = U.name`): the
  comparison is true or false whatever the value (semantics section 2). It becomes the
  per-event (SELF) predicate `x op 1 * x + (d - b)`, which for every finite number (and
  every string or boolean, with offset 0) holds exactly when `b op d` does, so every
  engine evaluates it as written with no new predicate kind: a true one lets every
  event through, a false one none, and the query then never matches. A side whose
  column cancels (`B.x - B.x`) is a constant next to a column on the other side.
  A comparison with no column at all (`1 < 2`) is still an error: it names no stream.

Dividing by a coefficient flips the operator when the coefficient is negative. All of
it is `Fraction` arithmetic on the exact values of the literals, so the normalized
predicate holds on exactly the inputs the written one holds on (semantics section 2) --
the property test in tests/unit/test_language_normalize.py checks that. Exact numbers
can grow with every operation, so each intermediate and final one must fit
MAX_CONSTANT_BITS; a longer chain of arithmetic is a QueryError, not a stall.

Classification is by content, not by clause: `B.ts <= H.ts` in WHERE is a window
predicate, `B.ts > 1000` in WINDOW is an attribute predicate.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

from .errors import QueryError, quote
from .model import (
    MAX_CONSTANT_BITS,
    TIMESTAMP,
    AttributePredicate,
    ColumnRef,
    ColumnType,
    Op,
    PairPredicate,
    Predicate,
    PredicateKind,
)
from .parser import (
    BoolLit,
    ColumnName,
    Comparison,
    Expr,
    NumberLit,
    Product,
    Signed,
    Span,
    StringLit,
    Sum,
)

TypeOf = Callable[[ColumnName, str], ColumnType]
"""Resolves a column to its type for a clause, raising QueryError if it is unknown."""

_ONE = Fraction(1)
_ZERO = Fraction(0)


@dataclass(frozen=True)
class Linear:
    """`coef * column + const`; `column` is None for a constant. `coef` is 0 when the
    column cancels out (`B.x - B.x`, `B.x * 0`); `solve` then treats the side as the
    constant it is."""

    column: ColumnRef | None
    coef: Fraction
    const: Fraction
    column_span: Span | None = None

    def scaled(self, k: Fraction) -> "Linear":
        return Linear(self.column, self.coef * k, self.const * k, self.column_span)


class Normalizer:
    """Normalizes the comparisons of one query; knows the query id for error messages."""

    def __init__(self, query_id: str, text: str, type_of: TypeOf) -> None:
        self.query_id = query_id
        self.text = text
        self.type_of = type_of

    def error(self, clause: str, span: Span, expected: str, found: str, hint: str = "") -> QueryError:
        return QueryError(self.query_id, clause, span.line, span.column, expected, found, hint)

    def source(self, span: Span) -> str:
        return quote(self.text[span.start:span.end])

    def check_bits(self, clause: str, span: Span, *numbers: Fraction) -> None:
        """Reject the arithmetic at `span` once an exact number it made exceeds MAX_CONSTANT_BITS.

        Checked after every operation, so no operation ever starts on an oversized number.
        """
        if any(_bits(n) > MAX_CONSTANT_BITS for n in numbers):
            raise self.error(
                clause, span, f"arithmetic whose exact values fit in {MAX_CONSTANT_BITS} bits",
                self.source(span), "the exact value of the expression up to here is too large; simplify it",
            )

    # ------------------------------------------------------------------ comparisons

    def predicate(self, cmp: Comparison) -> Predicate:
        """The canonical predicate of one comparison."""
        left_t = self.side_type(cmp.left, cmp.clause)
        right_t = self.side_type(cmp.right, cmp.clause)
        if left_t is not ColumnType.NUMBER or right_t is not ColumnType.NUMBER:
            return self.equality(cmp, left_t, right_t)
        left = self.side(cmp.left, cmp.clause)
        right = self.side(cmp.right, cmp.clause)
        return self.solve(cmp, left, right)

    def side_type(self, expr: Expr, clause: str) -> ColumnType:
        """NUMBER for any arithmetic; otherwise the type of a bare literal or column."""
        if isinstance(expr, StringLit):
            return ColumnType.STRING
        if isinstance(expr, BoolLit):
            return ColumnType.BOOLEAN
        if isinstance(expr, ColumnName):
            return self.type_of(expr, clause)
        return ColumnType.NUMBER

    def equality(self, cmp: Comparison, left_t: ColumnType, right_t: ColumnType) -> Predicate:
        """String and boolean comparisons: `=`/`!=` between bare values of one type."""
        if left_t is not right_t:
            right = cmp.right
            what = f"{_a(right_t)} column" if isinstance(right, ColumnName) else _a(right_t)
            raise self.error(
                cmp.clause, right.span,
                f"{_type_words(left_t)} to compare with {self.source(cmp.left.span)}",
                f"{self.source(right.span)}, {what}", "type mismatch",
            )
        if cmp.op not in (Op.EQ, Op.NE):
            raise self.error(
                cmp.clause, cmp.op_span, f"'=' or '!=' for {left_t.value} values",
                self.source(cmp.op_span), f"{left_t.value}s are not ordered",
            )
        left, right = cmp.left, cmp.right
        if isinstance(left, ColumnName) and isinstance(right, ColumnName):
            # The same column twice (`U.name = U.name`) is a per-event predicate that is
            # always true (`=`) or always false (`!=`).
            a, b = sorted((left.ref, right.ref))
            return PairPredicate(_pair_kind(a, b), a, cmp.op, _ONE, b, _ZERO, cmp.text)
        if isinstance(right, ColumnName):
            left, right = right, left
        if not isinstance(left, ColumnName):
            raise self.error(
                cmp.clause, cmp.span, "a column in the comparison",
                f"only constants in {quote(cmp.text)}",
            )
        assert isinstance(right, (StringLit, BoolLit))
        return AttributePredicate(left.ref, cmp.op, right.value, cmp.text)

    def solve(self, cmp: Comparison, left: Linear, right: Linear) -> Predicate:
        """`a*x + b op c*y + d` -> attribute or canonical pair predicate."""
        op = cmp.op
        # A side whose column cancelled (`B.x - B.x`) counts as the constant it is.
        x = left.column if left.coef != 0 else None
        y = right.column if right.coef != 0 else None
        a, b, c, d = left.coef, left.const, right.coef, right.const
        if x is not None and y is not None and x != y:
            return self.pair(cmp, x, a, b, y, c, d)
        # One column (possibly on both sides): (a - c) * col  op  d - b.
        col = x if x is not None else y
        coef = (a if x is not None else _ZERO) - (c if y is not None else _ZERO)
        if col is None or coef == 0:
            cancelled = col or left.column or right.column
            if cancelled is None:
                raise self.error(
                    cmp.clause, cmp.span, "a column in the comparison",
                    f"only constants in {quote(cmp.text)}",
                )
            # `b op d` whatever the column's value: as `x op x + (d - b)`, which holds
            # on every finite x exactly when `b op d` does (semantics section 2).
            offset = d - b
            self.check_bits(cmp.clause, cmp.span, offset)
            return PairPredicate(PredicateKind.SELF, cancelled, op, _ONE, cancelled, offset, cmp.text)
        constant = (d - b) / coef
        self.check_bits(cmp.clause, cmp.span, constant)
        return AttributePredicate(col, _divide_op(op, coef), constant, cmp.text)

    def pair(
        self, cmp: Comparison, x: ColumnRef, a: Fraction, b: Fraction, y: ColumnRef, c: Fraction, d: Fraction
    ) -> PairPredicate:
        if x < y:  # x op (c/a) y + (d - b)/a
            left, op, factor, right, offset = x, _divide_op(cmp.op, a), c / a, y, (d - b) / a
        else:  # c y + d  op.mirrored  a x + b   ->   y op' (a/c) x + (b - d)/c
            left, op, factor, right, offset = y, _divide_op(cmp.op.mirrored, c), a / c, x, (b - d) / c
        self.check_bits(cmp.clause, cmp.span, factor, offset)
        kind = _pair_kind(left, right)
        if kind is PredicateKind.WINDOW and factor != 1:
            raise self.error(
                cmp.clause, cmp.span, "timestamps compared with factor 1 (like 'T.ts > B.ts + 2000')",
                quote(cmp.text), "window predicates compare timestamps with factor 1",
            )
        return PairPredicate(kind, left, op, factor, right, offset, cmp.text)

    # ------------------------------------------------------------------ linear forms

    def side(self, expr: Expr, clause: str) -> Linear:
        return self.linear(expr, clause)

    def linear(self, expr: Expr, clause: str) -> Linear:
        if isinstance(expr, NumberLit):
            return Linear(None, _ZERO, expr.value)
        if isinstance(expr, ColumnName):
            col_t = self.type_of(expr, clause)
            if col_t is not ColumnType.NUMBER:
                raise self.error(
                    clause, expr.span, "a numeric column in arithmetic",
                    f"{self.source(expr.span)}, {_a(col_t)} column", "type mismatch",
                )
            return Linear(expr.ref, _ONE, _ZERO, expr.span)
        if isinstance(expr, (StringLit, BoolLit)):
            found_t = ColumnType.STRING if isinstance(expr, StringLit) else ColumnType.BOOLEAN
            raise self.error(
                clause, expr.span, "a number in arithmetic",
                f"{self.source(expr.span)}, {_a(found_t)}", "type mismatch",
            )
        if isinstance(expr, Signed):
            inner = self.linear(expr.operand, clause)
            return inner.scaled(Fraction(-1)) if expr.negative else inner
        if isinstance(expr, Sum):
            total = Linear(None, _ZERO, _ZERO)
            for sign, term in expr.terms:
                part = self.linear(term, clause)
                total = self.add(total, part if sign == "+" else part.scaled(Fraction(-1)), clause)
                self.check_bits(clause, term.span, total.coef, total.const)
            return total
        if isinstance(expr, Product):
            result: Linear | None = None
            for op, factor_expr in expr.factors:
                factor = self.linear(factor_expr, clause)
                result = factor if result is None else self.multiply(result, op, factor, factor_expr, expr, clause)
                self.check_bits(clause, factor_expr.span, result.coef, result.const)
            assert result is not None
            return result
        raise AssertionError(f"unknown expression node {type(expr).__name__}")

    def add(self, p: Linear, q: Linear, clause: str) -> Linear:
        if p.column is not None and q.column is not None and p.column != q.column:
            assert q.column_span is not None
            raise self.error(
                clause, q.column_span, "at most one column on each side of a comparison",
                f"{quote(str(q.column))} added to {quote(str(p.column))}",
            )
        column = p.column if p.column is not None else q.column
        span = p.column_span if p.column is not None else q.column_span
        return Linear(column, p.coef + q.coef, p.const + q.const, span)

    def multiply(self, p: Linear, op: str, q: Linear, q_expr: Expr, whole: Product, clause: str) -> Linear:
        if op == "*":
            if p.column is not None and q.column is not None:
                raise self.error(
                    clause, _span(q_expr), "a linear expression (a column times constants only)",
                    self.source(_span(q_expr)),
                    f"{self.source(whole.span)} multiplies two columns, which is non-linear",
                )
            if q.column is not None:
                return q.scaled(p.const)
            return p.scaled(q.const)
        if q.column is not None:
            raise self.error(
                clause, _span(q_expr), "a linear expression (division by constants only)",
                self.source(_span(q_expr)),
                f"{self.source(whole.span)} divides by a column, which is non-linear",
            )
        if q.const == 0:
            raise self.error(
                clause, _span(q_expr), "a non-zero divisor", self.source(_span(q_expr)), "division by zero",
            )
        return p.scaled(1 / q.const)


# ---------------------------------------------------------------------- helpers


def _divide_op(op: Op, k: Fraction) -> Op:
    """The operator after dividing both sides by k (k != 0): mirrored when k < 0."""
    return op.mirrored if k < 0 else op


def _pair_kind(left: ColumnRef, right: ColumnRef) -> PredicateKind:
    if left.stream == right.stream:
        return PredicateKind.SELF
    if left.column == TIMESTAMP and right.column == TIMESTAMP:
        return PredicateKind.WINDOW
    return PredicateKind.JOIN


def _bits(n: Fraction) -> int:
    return max(n.numerator.bit_length(), n.denominator.bit_length())


def _span(expr: Expr) -> Span:
    return expr.span


def _a(t: ColumnType) -> str:
    return {"number": "a number", "string": "a string", "boolean": "a boolean"}[t.value]


def _type_words(t: ColumnType) -> str:
    return {
        "number": "a number or numeric column",
        "string": "a string or string column",
        "boolean": "true, false or a boolean column",
    }[t.value]

