"""Syntax: keywords, clause order, MAXWINDOW spellings and durations, operator spellings,
literals, positions. Mostly through `parse` (no catalog), a few through `compile_query`."""

from __future__ import annotations

from fractions import Fraction

import pytest

from juggler.language import ColumnRef, ColumnType, Op, QueryError, compile_query
from juggler.language.parser import (
    BoolLit,
    ColumnName,
    NumberLit,
    Product,
    Signed,
    StringLit,
    Sum,
    parse,
)

N, S, BOOL = ColumnType.NUMBER, ColumnType.STRING, ColumnType.BOOLEAN
CATALOG = {
    "B": {"pressure": N, "temp": N, "alert": S, "ok": BOOL},
    "H": {"beatrate": N, "vib": N, "alert": S},
}


def where_one(condition: str):
    """The single comparison of `Select * From B Where <condition>`."""
    (cmp,) = parse(f"Select * From B Where {condition}").where
    return cmp


def test_basic_structure() -> None:
    q = parse("Select H.alert, B.ts\nFrom B, H\nWindow H.ts > B.ts\nMaxWindow 4sec\nWhere B.temp > 3")
    assert [c.ref for c in q.select or ()] == [ColumnRef("H", "alert"), ColumnRef("B", "ts")]
    assert [s.name for s in q.streams] == ["B", "H"]
    assert q.max_window is not None and q.max_window.millis == 4000
    assert [c.text for c in q.window] == ["H.ts > B.ts"]
    assert [c.text for c in q.where] == ["B.temp > 3"]
    assert q.where[0].clause == "WHERE" and q.window[0].clause == "WINDOW"


def test_select_star_and_optional_clauses() -> None:
    q = parse("Select * From B")
    assert q.select is None
    assert q.window == () and q.where == () and q.max_window is None


@pytest.mark.parametrize(
    "text",
    [
        "select * from B where B.temp > 1 and B.temp < 5",
        "SELECT * FROM B WHERE B.temp > 1 AND B.temp < 5",
        "SeLeCt * FrOm B wHeRe B.temp > 1 aNd B.temp < 5",
    ],
)
def test_keywords_are_case_insensitive(text: str) -> None:
    q = parse(text)
    assert [c.text for c in q.where] == ["B.temp > 1", "B.temp < 5"]


@pytest.mark.parametrize(
    "order",
    [
        "Window B.ts < H.ts MaxWindow 1s Where B.temp > 1",
        "Where B.temp > 1 Window B.ts < H.ts MaxWindow 1s",
        "MaxWindow 1s Where B.temp > 1 Window B.ts < H.ts",
    ],
)
def test_window_maxwindow_where_in_any_order(order: str) -> None:
    q = compile_query("q", f"Select * From B, H {order}", CATALOG)
    assert q.max_window == 1000
    assert {p.text for p in q.predicates} == {"B.ts < H.ts", "B.temp > 1"}


@pytest.mark.parametrize("spelling", ["MaxWindow", "Max Window", "MAXWINDOW", "max window", "Max\n  Window", "maxWINDOW"])
def test_maxwindow_spellings(spelling: str) -> None:
    q = parse(f"Select * From B {spelling} 20 sec")
    assert q.max_window is not None and q.max_window.millis == 20_000


@pytest.mark.parametrize(
    "duration, millis",
    [
        ("4sec", 4000), ("20 sec", 20_000), ("500 ms", 500), ("500ms", 500), ("2 min", 120_000),
        ("1 h", 3_600_000), ("1h", 3_600_000), ("3 s", 3000), ("3 secs", 3000), ("3 seconds", 3000),
        ("3 SEC", 3000), ("2 MIN", 120_000), ("1 H", 3_600_000), ("0 ms", 0), ("1.5 sec", 1500),
        ("0.25s", 250), ("1e3 ms", 1000), ("2 minutes", 120_000), ("1 hour", 3_600_000),
    ],
)
def test_durations(duration: str, millis: int) -> None:
    q = parse(f"Select * From B MaxWindow {duration}")
    assert q.max_window is not None and q.max_window.millis == millis


@pytest.mark.parametrize(
    "spelling, op",
    [
        ("=", Op.EQ), ("==", Op.EQ), ("!=", Op.NE), ("<>", Op.NE), ("<", Op.LT), ("<=", Op.LE),
        (">", Op.GT), (">=", Op.GE),
        ("eq", Op.EQ), ("ne", Op.NE), ("lt", Op.LT), ("lt=", Op.LE), ("le", Op.LE),
        ("gt", Op.GT), ("gt=", Op.GE), ("ge", Op.GE),
        ("EQ", Op.EQ), ("Lt=", Op.LE), ("GT=", Op.GE), ("Ne", Op.NE),
    ],
)
def test_operator_spellings(spelling: str, op: Op) -> None:
    assert where_one(f"B.temp {spelling} 3").op is op


def test_word_operator_needs_no_space_before_a_number() -> None:
    # `lt=` is one operator; `lt 3` and `lt=3` both work.
    assert where_one("B.temp lt=3").op is Op.LE
    assert where_one("B.temp gt 3").op is Op.GT


@pytest.mark.parametrize(
    "literal, value",
    [
        ("103", Fraction(103)),
        ("0.5", Fraction(1, 2)),
        ("0.3", Fraction(0.3)),  # the double nearest to 0.3, not 3/10
        ("1e3", Fraction(1000)),
        ("2.5E-1", Fraction(1, 4)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("12345678901234567890123", Fraction(12345678901234567890123)),  # integers stay exact
    ],
)
def test_number_literals(literal: str, value: Fraction) -> None:
    right = where_one(f"B.temp = {literal}").right
    assert isinstance(right, NumberLit) and right.value == value


def test_string_and_boolean_literals() -> None:
    assert where_one("B.alert = 'high'").right == StringLit("high", where_one("B.alert = 'high'").right.span)
    assert isinstance(where_one('B.alert = "a b"').right, StringLit)
    assert where_one('B.alert = "a b"').right.value == "a b"
    assert where_one(r"B.alert = 'it\'s'").right.value == "it's"
    assert where_one("B.ok = TRUE").right.value is True
    assert isinstance(where_one("B.ok != false").right, BoolLit)


def test_arithmetic_structure_is_flat_and_keeps_unary_minus() -> None:
    cmp = where_one("-(B.temp + 3) * 2 / 4 - 1 > 0")
    assert isinstance(cmp.left, Sum) and len(cmp.left.terms) == 2
    first = cmp.left.terms[0][1]  # unary minus binds tighter than * and /
    assert isinstance(first, Product) and [op for op, _ in first.factors] == ["*", "*", "/"]
    negated = first.factors[0][1]
    assert isinstance(negated, Signed) and negated.negative and isinstance(negated.operand, Sum)


def test_comparison_text_and_positions() -> None:
    text = "Select *\nFrom B\nWhere  (B.temp + 3) * 2 >= 4 and\n       B.pressure lt= 7"
    q = parse(text)
    first, second = q.where
    assert first.text == "(B.temp + 3) * 2 >= 4"
    assert (first.span.line, first.span.column) == (3, 8)
    assert second.text == "B.pressure lt= 7"
    assert (second.span.line, second.span.column) == (4, 8)
    assert isinstance(second.left, ColumnName) and second.left.span.column == 8


def test_multiline_and_between_comparisons() -> None:
    q = parse("Select *\nFrom B\nWindow          B.ts > 1\n                   and\n                   B.ts <= 5")
    assert [c.text for c in q.window] == ["B.ts > 1", "B.ts <= 5"]


def test_keywords_need_a_word_boundary() -> None:
    with pytest.raises(QueryError):
        parse("Select * From B Wherever B.temp > 1")


def test_columns_named_like_keywords_are_fine() -> None:
    catalog = {"B": {"from": N, "and": N, "lt": N}}
    q = compile_query("q", "Select B.from From B Where B.and lt B.lt", catalog)
    assert q.select == (ColumnRef("B", "from"),)
    assert q.predicates[0].op is Op.LT


def test_stream_named_like_a_unit() -> None:
    catalog = {"h": {"x": N}, "s": {"y": N}}
    q = compile_query("q", "Select * From h, s MaxWindow 1 h Where h.x > s.y", catalog)
    assert q.streams == ("h", "s") and q.max_window == 3_600_000


def test_duplicate_clause_is_an_error() -> None:
    with pytest.raises(QueryError) as info:
        parse("Select * From B Where B.temp > 1 Where B.temp < 3", query_id="dup")
    err = info.value
    assert (err.clause, err.line, err.column) == ("WHERE", 1, 34)
    assert "at most one WHERE clause" in err.expected
