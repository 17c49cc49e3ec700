"""Normalization: linear forms solved exactly, canonical orientation, classification by
content, and a property test that normalization never changes a comparison's result."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from lark import Token, Tree

from juggler.language import (
    AttributePredicate,
    ColumnRef,
    ColumnType,
    Op,
    PairPredicate,
    Predicate,
    PredicateKind,
    QueryError,
    compile_query,
)
from juggler.language.parser import lark_parser

N, S, BOOL = ColumnType.NUMBER, ColumnType.STRING, ColumnType.BOOLEAN
CATALOG = {
    "B": {"pressure": N, "temp": N, "alert": S, "ok": BOOL},
    "H": {"beatrate": N, "vib": N, "alert": S, "ok": BOOL},
    "K": {"fluid": N},
    "T": {"fluct": N, "degree": N, "incr": N},
}
ATTR, JOIN, WINDOW, SELF = (
    PredicateKind.ATTRIBUTE, PredicateKind.JOIN, PredicateKind.WINDOW, PredicateKind.SELF,
)


def ref(name: str) -> ColumnRef:
    stream, column = name.split(".")
    return ColumnRef(stream, column)


def one(condition: str, streams: str = "B, H, K, T") -> Predicate:
    """The single predicate of a query over the thesis streams."""
    query = compile_query("q", f"Select * From {streams} MaxWindow 1s Where {condition}", CATALOG)
    (pred,) = query.predicates
    return pred


def attr(column: str, op: Op, constant) -> AttributePredicate:
    return AttributePredicate(ref(column), op, constant)


def pair(kind: PredicateKind, left: str, op: Op, factor, right: str, offset=0) -> PairPredicate:
    return PairPredicate(kind, ref(left), op, Fraction(factor), ref(right), Fraction(offset))


# ---------------------------------------------------------------- worked examples


def test_attribute_solved_for_the_column() -> None:
    assert one("T.fluct * 2 = 103") == attr("T.fluct", Op.EQ, Fraction(103, 2))
    assert one("B.pressure - 50 = 45") == attr("B.pressure", Op.EQ, Fraction(95))
    assert one("B.temp / 4 > 1") == attr("B.temp", Op.GT, Fraction(4))


def test_decimal_constant_is_the_nearest_double_divided_exactly() -> None:
    pred = one("T.fluct * 3 = 0.3")
    assert pred == attr("T.fluct", Op.EQ, Fraction(float("0.3")) / 3)
    assert pred.constant != Fraction(1, 10)


def test_negative_coefficient_flips_the_operator() -> None:
    assert one("-2 * B.temp < 4") == attr("B.temp", Op.GT, Fraction(-2))
    assert one("4 > -2 * B.temp") == attr("B.temp", Op.GT, Fraction(-2))
    assert one("3 - B.temp >= 1") == attr("B.temp", Op.LE, Fraction(2))


def test_constant_on_the_left() -> None:
    assert one("52 = H.beatrate") == attr("H.beatrate", Op.EQ, Fraction(52))
    assert one("100 < B.pressure") == attr("B.pressure", Op.GT, Fraction(100))


def test_join_with_factor_and_offset() -> None:
    assert one("(B.pressure + 3) * 2 >= H.vib") == pair(JOIN, "B.pressure", Op.GE, Fraction(1, 2), "H.vib", -3)


def test_equivalent_spellings_compile_to_the_same_predicate() -> None:
    a = one("T.fluct < 0.5 * B.pressure")
    b = one("B.pressure > 2 * T.fluct")
    assert a == b == pair(JOIN, "B.pressure", Op.GT, 2, "T.fluct", 0)
    assert a.text == "T.fluct < 0.5 * B.pressure" and b.text == "B.pressure > 2 * T.fluct"


def test_window_orientation() -> None:
    assert one("T.ts > B.ts + 2000") == pair(WINDOW, "B.ts", Op.LT, 1, "T.ts", -2000)
    assert one("B.ts + 2000 < T.ts") == pair(WINDOW, "B.ts", Op.LT, 1, "T.ts", -2000)
    assert one("B.ts <= H.ts") == pair(WINDOW, "B.ts", Op.LE, 1, "H.ts", 0)


def test_classification_is_by_content_not_clause() -> None:
    q = compile_query(
        "q", "Select * From B, H Window B.ts > 1000 MaxWindow 1s Where B.ts <= H.ts", CATALOG
    )
    first, second = q.predicates
    assert first == attr("B.ts", Op.GT, Fraction(1000)) and first.kind is ATTR
    assert second.kind is WINDOW


def test_timestamp_against_other_columns() -> None:
    assert one("B.ts > H.vib").kind is JOIN
    assert one("B.ts > B.temp") == pair(SELF, "B.temp", Op.LT, 1, "B.ts", 0)


def test_self_predicate() -> None:
    pred = one("B.temp > B.pressure", streams="B")
    assert pred == pair(SELF, "B.pressure", Op.LT, 1, "B.temp", 0)
    assert pred.streams == frozenset({"B"})


def test_same_column_terms_are_combined() -> None:
    assert one("B.temp + B.temp > 4") == attr("B.temp", Op.GT, Fraction(2))
    assert one("2 * B.temp > B.temp + 1") == attr("B.temp", Op.GT, Fraction(1))
    assert one("B.temp > 3 * B.temp - 4") == attr("B.temp", Op.LT, Fraction(2))


def test_column_that_cancels_out_is_a_per_event_predicate_true_or_false_as_written() -> None:
    """Semantics 2: `N.b * 0 = 0` is `b op d` whatever the value, kept as `x op x + (d - b)`,
    which holds on every finite x exactly when `b op d` does."""
    assert one("B.temp * 0 = 0") == pair(SELF, "B.temp", Op.EQ, 1, "B.temp", 0)
    assert one("B.temp * 0 = 1") == pair(SELF, "B.temp", Op.EQ, 1, "B.temp", 1)
    assert one("B.temp - B.temp > 1") == pair(SELF, "B.temp", Op.GT, 1, "B.temp", 1)
    assert one("2 * B.temp + 0.5 < B.temp * 2") == pair(SELF, "B.temp", Op.LT, 1, "B.temp", Fraction(-1, 2))
    assert one("B.temp = B.temp") == pair(SELF, "B.temp", Op.EQ, 1, "B.temp", 0)
    assert one("B.ts - B.ts >= 0") == pair(SELF, "B.ts", Op.GE, 1, "B.ts", 0)
    assert one("B.alert = B.alert") == pair(SELF, "B.alert", Op.EQ, 1, "B.alert", 0)
    assert one("B.ok <> B.ok") == pair(SELF, "B.ok", Op.NE, 1, "B.ok", 0)
    assert one("B.alert = B.alert").streams == frozenset({"B"})
    # A side whose column cancels is a constant beside the other side's column.
    assert one("B.temp - B.temp < H.vib") == attr("H.vib", Op.GT, Fraction(0))


def test_strings_and_booleans() -> None:
    assert one("B.alert = 'high'") == attr("B.alert", Op.EQ, "high")
    assert one("'high' = B.alert") == attr("B.alert", Op.EQ, "high")
    assert one("H.alert != B.alert") == pair(JOIN, "B.alert", Op.NE, 1, "H.alert", 0)
    assert one("B.ok = true") == attr("B.ok", Op.EQ, True)
    assert one("B.ok <> H.ok") == pair(JOIN, "B.ok", Op.NE, 1, "H.ok", 0)


def test_duplicates_are_dropped_keeping_the_first() -> None:
    q = compile_query(
        "q", "Select * From B Where B.temp > 3 and B.pressure < 1 and 3 < B.temp and B.temp gt 3", CATALOG
    )
    assert [p.text for p in q.predicates] == ["B.temp > 3", "B.pressure < 1"]


def test_predicates_keep_text_order_across_clauses() -> None:
    q = compile_query("q", "Select * From B, H Where B.temp > 3 MaxWindow 1s Window B.ts < H.ts", CATALOG)
    assert [p.text for p in q.predicates] == ["B.temp > 3", "B.ts < H.ts"]


def test_select_list() -> None:
    q = compile_query("q", "Select H.alert, B.ts, H.alert From B, H MaxWindow 1 s", CATALOG)
    assert q.select == (ref("H.alert"), ref("B.ts"))


def test_single_stream_needs_no_maxwindow() -> None:
    q = compile_query("q", "Select * From B Where B.temp > 1", CATALOG)
    assert q.max_window is None and q.window == 0


# ---------------------------------------------------------------- FROM concatenations


def test_from_concatenation_expands() -> None:
    q = compile_query("q", "Select * From BH MaxWindow 1s", CATALOG)
    assert q.streams == ("B", "H")
    q = compile_query("q", "Select * From TBK, H MaxWindow 1s", CATALOG)
    assert q.streams == ("T", "B", "K", "H")


def test_exact_stream_name_wins_over_a_concatenation() -> None:
    catalog = {"B": {"x": N}, "H": {"y": N}, "BH": {"z": N}}
    q = compile_query("q", "Select * From BH Where BH.z > 1", catalog)
    assert q.streams == ("BH",)


def test_ambiguous_concatenation_is_an_error() -> None:
    catalog = {"A": {}, "B": {}, "AB": {}, "BA": {}}
    with pytest.raises(QueryError) as info:
        compile_query("q", "Select * From ABA MaxWindow 1s", catalog)
    assert info.value.clause == "FROM" and "unambiguous" in info.value.expected


def test_concatenation_repeating_a_stream_is_a_duplicate() -> None:
    with pytest.raises(QueryError) as info:
        compile_query("q", "Select * From B, BH MaxWindow 1s", CATALOG)
    assert info.value.expected == "distinct streams in FROM"
    assert (info.value.line, info.value.column) == (1, 18)


# ---------------------------------------------------------------- property: exactness

X, Y, Z = "B.pressure", "H.vib", "B.temp"  # X < Y (other stream), X < Z (same stream)

_OP_SPELLINGS = {
    "=": Op.EQ, "==": Op.EQ, "eq": Op.EQ, "!=": Op.NE, "<>": Op.NE, "ne": Op.NE,
    "<": Op.LT, "lt": Op.LT, "<=": Op.LE, "lt=": Op.LE, "le": Op.LE,
    ">": Op.GT, "gt": Op.GT, ">=": Op.GE, "gt=": Op.GE, "ge": Op.GE,
}
_HOLDS = {
    Op.EQ: lambda a, b: a == b, Op.NE: lambda a, b: a != b, Op.LT: lambda a, b: a < b,
    Op.LE: lambda a, b: a <= b, Op.GT: lambda a, b: a > b, Op.GE: lambda a, b: a >= b,
}

constants = st.one_of(
    st.integers(0, 20).map(str),
    st.builds(lambda i, f: f"{i}.{f}", st.integers(0, 99), st.integers(0, 999)),
    st.builds(lambda m, e: f"{m}e{e}", st.integers(1, 9), st.integers(-3, 3)),
    st.sampled_from(["0.1", "0.3", "0.7", "1.1", "2.675", "1e-3"]),
)


def literal_value(text: str) -> Fraction:
    """The test's own reading of semantics section 2: integers exact, others nearest double."""
    return Fraction(int(text)) if text.isdigit() else Fraction(float(text))


@st.composite
def linear_side(draw: st.DrawFn, column: str | None, additive_only: bool = False) -> str:
    """Random linear text around one column (or a constant), e.g. `3 - (B.pressure * 0.5)`."""
    expr = column if column is not None else draw(constants)
    kinds = ["add", "radd", "sub"] if additive_only else ["mul", "rmul", "div", "add", "radd", "sub", "rsub", "neg"]
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(kinds))
        k = draw(constants)
        if kind in ("mul", "rmul", "div"):
            assume(literal_value(k) != 0)
        expr = {
            "mul": f"({expr}) * {k}", "rmul": f"{k} * ({expr})", "div": f"({expr}) / {k}",
            "add": f"{expr} + {k}", "radd": f"{k} + {expr}", "sub": f"{expr} - {k}",
            "rsub": f"{k} - ({expr})", "neg": f"-({expr})",
        }[kind]
    return expr


def exact_value(node: Tree | Token, values: dict[str, Fraction]) -> Fraction:
    """Evaluate a side of the raw Lark tree in exact arithmetic (no eval())."""
    assert isinstance(node, Tree)
    if node.data == "number":
        return literal_value(str(node.children[0]))
    if node.data == "column":
        return values[str(node.children[0])]
    if node.data == "paren":
        return exact_value(node.children[1], values)
    if node.data == "signed":
        v = exact_value(node.children[1], values)
        return -v if str(node.children[0]) == "-" else v
    result = exact_value(node.children[0], values)
    for op, operand in zip(node.children[1::2], node.children[2::2]):
        v = exact_value(operand, values)
        result = {"+": result + v, "-": result - v, "*": result * v, "/": result / v if v else None}[str(op)]
    return result


def written_holds(text: str, values: dict[str, Fraction]) -> bool:
    """Does the comparison as written hold, in exact arithmetic?"""
    tree = lark_parser().parse(f"Select * From B Where {text}")
    (cmp,) = list(tree.find_data("comparison"))
    left, op, right = cmp.children
    return _HOLDS[_OP_SPELLINGS[str(op).lower()]](exact_value(left, values), exact_value(right, values))


def compiled_holds(pred: Predicate, values: dict[str, Fraction]) -> bool:
    if isinstance(pred, AttributePredicate):
        return _HOLDS[pred.op](values[str(pred.column)], pred.constant)
    return _HOLDS[pred.op](values[str(pred.left)], pred.factor * values[str(pred.right)] + pred.offset)


finite = st.one_of(
    st.integers(-10**6, 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(-1e4, 1e4, allow_nan=False),
)


def near(target: Fraction) -> list[float | int]:
    """Doubles (and integers) at and right around `target`: where results flip."""
    out: list[float | int] = []
    if target.denominator == 1:
        out += [int(target), int(target) - 1, int(target) + 1]
    try:
        f = float(target)
    except OverflowError:
        f = math.inf
    out += [v for v in (f, math.nextafter(f, math.inf), math.nextafter(f, -math.inf)) if math.isfinite(v)]
    return out or [0]


SCENARIOS = ["attr_left", "attr_right", "pair_xy", "pair_yx", "self", "same_column", "window"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data(), scenario=st.sampled_from(SCENARIOS), op=st.sampled_from(sorted(_OP_SPELLINGS)))
def test_normalization_never_changes_a_result(data: st.DataObject, scenario: str, op: str) -> None:
    left_col, right_col, additive = {
        "attr_left": (X, None, False), "attr_right": (None, X, False),
        "pair_xy": (X, Y, False), "pair_yx": (Y, X, False), "self": (Z, X, False),
        "same_column": (X, X, False), "window": ("H.ts", "B.ts", True),
    }[scenario]
    left = data.draw(linear_side(left_col, additive), label="left")
    right = data.draw(linear_side(right_col, additive), label="right")
    text = f"{left} {op} {right}"
    pred = one(text, streams="B, H")  # a column that cancels out is accepted too (semantics 2)
    assert pred.text == text

    # Values: arbitrary finite numbers, plus the boundary where the predicate flips.
    columns = sorted({c for c in (left_col, right_col) if c is not None})
    values = {c: Fraction(data.draw(finite, label=c)) for c in columns}
    if isinstance(pred, AttributePredicate):
        values[str(pred.column)] = Fraction(data.draw(st.sampled_from(near(pred.constant)), label="edge"))
    elif data.draw(st.booleans(), label="at boundary"):
        target = pred.factor * values[str(pred.right)] + pred.offset
        values[str(pred.left)] = Fraction(data.draw(st.sampled_from(near(target)), label="edge"))
    assert compiled_holds(pred, values) == written_holds(text, values)


_MIRROR_SPELLING = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}


@settings(max_examples=150, deadline=None)
@given(data=st.data(), op=st.sampled_from(sorted(_MIRROR_SPELLING)))
def test_swapping_the_sides_gives_the_same_predicate(data: st.DataObject, op: str) -> None:
    left = data.draw(linear_side(X))
    right = data.draw(linear_side(Y))
    assert one(f"{left} {op} {right}", "B, H") == one(f"{right} {_MIRROR_SPELLING[op]} {left}", "B, H")
