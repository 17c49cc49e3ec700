"""A compiled `Query` as one Spark SQL statement: the backfill's interval join.

Why SQL text: it can be printed (`juggler spark backfill --explain`), read against the
query, and run by any Spark. The statement joins one event per FROM stream on the
entity key and a time bucket, and keeps the combinations where every predicate and
MAXWINDOW hold: exactly semantics section 3's results when all events are accepted ones.

- Interval join. MAXWINDOW W bounds every result, so with buckets of width
  w = max(W, 1) ms every event of a result lies in the bucket of the first FROM
  stream's event or in one of its two neighbours. Each other stream's events are
  exploded into their bucket and both neighbours and joined on `(key, bucket)`; every
  combination meets exactly one copy of each partner, so none is found twice.
- Exactness (semantics 2). Comparisons must hold exactly as written over the values, and
  Spark has no exact arithmetic for doubles. So:
  - An attribute predicate on a double becomes a comparison with the float threshold
    `juggler.engine.exact` computes (exact for every double); on an integer column,
    with an integer threshold.
  - A pair predicate over integer columns with an integer factor is computed in
    DECIMAL, which is exact; `x op y` over two doubles is compared as it is.
  - Any other numeric pair predicate `x op f*y + k` is computed in doubles with the
    engine's error bound (`exact._BAND`). Outside the bound the double
    comparison is the answer. Inside it the row is kept and flagged `near_<i>`; the
    caller then decides those rows with `Fraction`s (`exact_holds`).

Columns of the statement: `key`, `ts` (the largest ts), `last_position`,
`src_<i>` (position of the FROM stream i's event), `row_<j>` (the j-th selected
column), and `near_<i>`, `x_<i>`, `y_<i>` (plus the helpers `d_<i>`, `b_<i>`) for each
pair predicate decided in doubles, which an outer SELECT filters on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from juggler.engine.exact import (
    Number,
    exact_difference,
    lower_threshold,
    to_float,
    upper_threshold,
)
from juggler.language.model import (
    TIMESTAMP,
    AttributePredicate,
    ColumnRef,
    Op,
    PairPredicate,
    Predicate,
    Query,
)

Types = Mapping[str, Mapping[str, str]]
"""Stream -> column -> Avro primitive type (`ts` is `long`)."""

INTEGRAL = frozenset({"int", "long"})
FLOATING = frozenset({"float", "double"})
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_DECIMAL_LIMIT = 10**35  # beyond any difference of two longs times a factor < 2**31
_BAND = "CAST('3.552713678800501e-15' AS DOUBLE)"  # 2**-48, exact._BAND
_SQL_OP = {Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">=", Op.EQ: "=", Op.NE: "<>"}


@dataclass(frozen=True)
class BackfillStatement:
    """The statement and what the caller needs to finish and label its rows."""

    query: Query
    sql: str
    row_names: tuple[str, ...]
    """`S.col` of each `row_<j>`, in the order a result's row lists them."""
    near: tuple[PairPredicate, ...]
    """The pair predicates decided in doubles: `near_<i>` flags rows to re-check."""


def compile_statement(query: Query, types: Types, views: Mapping[str, str]) -> BackfillStatement:
    """The statement for `query` over the views of accepted events (`views[S]` names
    stream S's view: key, ts, position and the data columns)."""
    return _Statement(query, types, views).build()


def exact_holds(predicate: PairPredicate, x: Number, y: Number) -> bool:
    """A numeric pair predicate decided in exact arithmetic (the rows flagged near)."""
    return predicate.op.holds(exact_difference(x, predicate.factor, y), predicate.offset)


class _Statement:
    def __init__(self, query: Query, types: Types, views: Mapping[str, str]) -> None:
        self.query, self.types, self.views = query, types, views
        self.alias = {stream: f"s{i}" for i, stream in enumerate(query.streams)}
        self.near: list[PairPredicate] = []
        self.near_columns: list[str] = []  # d_i, b_i, x_i, y_i, computed in the join
        self.near_flags: list[str] = []  # near_i, computed over the join's rows
        self.near_conditions: list[str] = []  # near_i OR d_i op k_i

    def build(self) -> BackfillStatement:
        query = self.query
        stamps = [self.column(ColumnRef(s, TIMESTAMP)) for s in query.streams]
        positions = [f"{self.alias[s]}.position" for s in query.streams]
        conditions = [self.predicate(p) for p in query.predicates]
        if len(query.streams) > 1:
            conditions.insert(0, f"{_decimal(_greatest(stamps))} - {_decimal(_least(stamps))}"
                                 f" <= {query.window}")
        exact = [c for c in conditions if c is not None]
        row_names, row_exprs = self.row()
        select = ["s0.key AS key", f"{_greatest(stamps)} AS ts",
                  f"{_greatest(positions)} AS last_position",
                  *(f"{p} AS src_{i}" for i, p in enumerate(positions)),
                  *(f"{e} AS row_{j}" for j, e in enumerate(row_exprs)),
                  *self.near_columns]
        sql = (f"SELECT {', '.join(select)}\nFROM {self.source()}"
               + (f"\nWHERE {_and(exact)}" if exact else ""))
        if self.near:
            sql = (f"SELECT *, {', '.join(self.near_flags)}\nFROM (\n{sql}\n) combinations"
                   f"\nWHERE {_and(self.near_conditions)}")
        return BackfillStatement(query, sql, tuple(row_names), tuple(self.near))

    # -- FROM: the interval join

    def source(self) -> str:
        first, *others = self.query.streams
        width = max(self.query.window, 1)
        parts = [f"`{self.views[first]}` s0"]
        bucket = f"((s0.ts - pmod(s0.ts, {width})) div {width})"
        for stream in others:
            alias = self.alias[stream]
            own = f"((ts - pmod(ts, {width})) div {width})"
            parts.append(
                f"JOIN (SELECT *, explode(sequence({own} - 1, {own} + 1)) AS bucket "
                f"FROM `{self.views[stream]}`) {alias}\n  ON {alias}.key = s0.key AND "
                f"{alias}.bucket = {bucket}")
        return "\n".join(parts)

    # -- SELECT: the result's row

    def row(self) -> tuple[list[str], list[str]]:
        query = self.query
        if query.select is None:
            refs = [ColumnRef(s, c) for s in query.streams for c in self.types[s]
                    if c != TIMESTAMP]
        else:
            refs = list(query.select)
        return [str(r) for r in refs], [self.column(r) for r in refs]

    def column(self, ref: ColumnRef) -> str:
        return f"{self.alias[ref.stream]}.`{ref.column}`"

    def type_of(self, ref: ColumnRef) -> str:
        return "long" if ref.column == TIMESTAMP else self.types[ref.stream][ref.column]

    # -- WHERE: predicates

    def predicate(self, predicate: Predicate) -> str | None:
        """The predicate's SQL condition, or None when it is decided in doubles after
        the join (`near_pair`)."""
        if isinstance(predicate, AttributePredicate):
            return self.attribute(predicate)
        return self.pair(predicate)

    def attribute(self, p: AttributePredicate) -> str:
        x, kind, c = self.column(p.column), self.type_of(p.column), p.constant
        if not isinstance(c, Fraction):  # string or boolean: = and != only
            return f"{x} {_SQL_OP[p.op]} {_literal(c)}"
        if kind in INTEGRAL:
            return _integer_compare(x, p.op, c, _LONG_MIN, _LONG_MAX, str)
        if p.op in (Op.GT, Op.GE):
            return f"{x} >= {_double(lower_threshold(p.op, c))}"
        if p.op in (Op.LT, Op.LE):
            return f"{x} <= {_double(upper_threshold(p.op, c))}"
        near = to_float(c)
        if not (math.isfinite(near) and Fraction(near) == c):  # no double equals c
            return "FALSE" if p.op is Op.EQ else "TRUE"
        return f"{x} {_SQL_OP[p.op]} {_double(near)}"

    def pair(self, p: PairPredicate) -> str | None:
        x, y = self.column(p.left), self.column(p.right)
        kinds = {self.type_of(p.left), self.type_of(p.right)}
        if not kinds <= INTEGRAL | FLOATING:  # strings or booleans: factor 1, offset 0
            return f"{x} {_SQL_OP[p.op]} {y}"
        if kinds <= INTEGRAL and p.factor.denominator == 1 and abs(p.factor) < 2**31:
            product = _decimal(y) if p.factor == 1 else \
                f"{_decimal(y)} * CAST('{int(p.factor)}' AS DECIMAL(11,0))"
            difference = f"({_decimal(x)} - {product})"
            return _integer_compare(difference, p.op, p.offset, -_DECIMAL_LIMIT,
                                    _DECIMAL_LIMIT, _decimal_literal)
        if kinds <= FLOATING and p.factor == 1 and p.offset == 0:
            return f"{x} {_SQL_OP[p.op]} {y}"  # IEEE comparison of two doubles is exact
        self.near_pair(p, x, y)
        return None

    def near_pair(self, p: PairPredicate, x: str, y: str) -> None:
        """`x - f*y op k` in doubles, `b` bounding its error (`exact._BAND`):
        outside [d - b, d + b] the double comparison is exact; inside, the row is kept
        with `near_<i>` set for `exact_holds`."""
        i = len(self.near)
        self.near.append(p)
        xd, yd = f"CAST({x} AS DOUBLE)", f"CAST({y} AS DOUBLE)"
        product = yd if p.factor == 1 else f"({_double(to_float(p.factor))} * {yd})"
        d = f"({xd} - {product})"
        bound = f"((abs({xd}) + 2.0D * abs({product}) + abs({d})) * {_BAND} + 1e-300D)"
        self.near_columns += [f"{d} AS d_{i}", f"{bound} AS b_{i}", f"{x} AS x_{i}",
                              f"{y} AS y_{i}"]
        k = _double(to_float(p.offset))
        # NaN or infinite d/b compare false on both sides, so they count as near
        near = f"NOT ({k} < d_{i} - b_{i} OR {k} > d_{i} + b_{i})"
        self.near_flags.append(f"{near} AS near_{i}")
        self.near_conditions.append(f"{near} OR d_{i} {_SQL_OP[p.op]} {k}")


def _integer_compare(x: str, op: Op, c: Fraction, low: int, high: int,
                     literal: Callable[[int], str]) -> str:
    """`x op c` for an integer-valued SQL expression x in [low, high] and a rational
    c, as a comparison with an integer threshold (or a constant)."""
    if op is Op.EQ or op is Op.NE:
        if c.denominator != 1 or not low <= c <= high:
            return "FALSE" if op is Op.EQ else "TRUE"
        return f"{x} {_SQL_OP[op]} {literal(int(c))}"
    if op in (Op.GT, Op.GE):  # x >= t
        t = math.floor(c) + 1 if op is Op.GT else math.ceil(c)
        if t <= low:
            return "TRUE"
        return "FALSE" if t > high else f"{x} >= {literal(t)}"
    t = math.ceil(c) - 1 if op is Op.LT else math.floor(c)  # x <= t
    if t >= high:
        return "TRUE"
    return "FALSE" if t < low else f"{x} <= {literal(t)}"


def _double(value: float) -> str:
    """A double literal that parses to exactly `value` (Java's parser rounds
    correctly, and repr() is the shortest text that round-trips)."""
    if math.isinf(value):
        return "CAST('Infinity' AS DOUBLE)" if value > 0 else "CAST('-Infinity' AS DOUBLE)"
    return f"CAST('{value!r}' AS DOUBLE)"


def _decimal(expression: str) -> str:
    return f"CAST({expression} AS DECIMAL(20,0))"


def _decimal_literal(value: int) -> str:
    return f"CAST('{value}' AS DECIMAL(38,0))"


def _literal(value: str | bool) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def _greatest(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"greatest({', '.join(items)})"


def _least(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"least({', '.join(items)})"


def _and(conditions: Sequence[str]) -> str:
    return "\n  AND ".join(f"({c})" for c in conditions)
