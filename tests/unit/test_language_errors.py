"""User errors: each names the query, the clause, the line and column, and what was expected."""

from __future__ import annotations

import pickle

import pytest

from thesis_corpus import CATALOG

from juggler.language import ColumnType, Limits, QueryError, compile_query

N, S = ColumnType.NUMBER, ColumnType.STRING


def fails(text: str, limits: Limits = Limits(), query_id: str = "q7") -> QueryError:
    with pytest.raises(QueryError) as info:
        compile_query(query_id, text, CATALOG, limits)
    err = info.value
    # The contract of every error: query, clause, line, column, expected, found.
    message = str(err)
    assert message.startswith(f"query {query_id}, ")
    if err.clause is not None:
        assert f"{err.clause} clause" in message
    assert f"line {err.line}, column {err.column}: expected {err.expected}, found {err.found}" in message
    assert err.expected and err.found
    return err


def where(err: QueryError) -> tuple[str | None, int, int]:
    return err.clause, err.line, err.column


def test_unknown_stream_in_from() -> None:
    err = fails("Select *\nFrom B, X\nMaxWindow 1s")
    assert where(err) == ("FROM", 2, 9)
    assert err.found == "'X'" and "a known stream (B, H, K, T)" in err.expected


def test_unknown_stream_in_a_predicate() -> None:
    err = fails("Select * From B, H MaxWindow 1s\nWhere B.temp > 1 and X.y > 2")
    assert where(err) == ("WHERE", 2, 22)
    assert "a stream listed in FROM (B, H)" in err.expected and err.found == "'X.y'"


def test_stream_not_in_from() -> None:
    err = fails("Select * From B, H MaxWindow 1s Window B.ts < T.ts")
    assert where(err) == ("WINDOW", 1, 47)
    assert "stream T is not in FROM" in str(err)


def test_select_stream_not_in_from() -> None:
    err = fails("Select T.fluct From B")
    assert where(err) == ("SELECT", 1, 8)
    assert "stream T is not in FROM" in str(err)


def test_unknown_column() -> None:
    err = fails("Select *\nFrom B\nWhere  B.temp > 1 and B.colour = 'red'")
    assert where(err) == ("WHERE", 3, 23)
    assert err.expected == "a column of stream B (ts, pressure, temp, alert)"
    assert err.found == "'B.colour'"


def test_string_compared_with_number() -> None:
    err = fails("Select * From B Where B.alert = 3")
    assert where(err) == ("WHERE", 1, 33)
    assert "a string or string column" in err.expected and "type mismatch" in str(err)
    err = fails("Select * From B Where B.temp != 'hot'")
    assert where(err) == ("WHERE", 1, 33)
    assert "a number or numeric column" in err.expected


def test_string_column_in_arithmetic() -> None:
    err = fails("Select * From B Where B.alert + 1 = 3")
    assert where(err) == ("WHERE", 1, 23)
    assert "numeric column" in err.expected


def test_ordering_operator_on_strings() -> None:
    err = fails("Select * From B, H MaxWindow 1s Where B.alert < H.alert")
    assert where(err) == ("WHERE", 1, 47)
    assert err.expected == "'=' or '!=' for string values" and err.found == "'<'"


def test_non_linear_product_of_columns() -> None:
    err = fails("Select * From B, H MaxWindow 1s Where B.temp * H.vib > 1")
    assert where(err) == ("WHERE", 1, 48)
    assert "linear expression" in err.expected and "non-linear" in str(err)


def test_non_linear_division_by_column() -> None:
    err = fails("Select * From B, H MaxWindow 1s Where 10 / B.temp > 1")
    assert where(err) == ("WHERE", 1, 44)
    assert "non-linear" in str(err)


def test_division_by_zero() -> None:
    err = fails("Select * From B Where B.temp / (2 - 2) > 1")
    assert where(err) == ("WHERE", 1, 33)  # the divisor inside the parentheses
    assert "non-zero divisor" in err.expected and err.found == "'2 - 2'"


def test_two_columns_on_one_side() -> None:
    err = fails("Select * From B, H MaxWindow 1s Where B.temp + H.vib > 1")
    assert where(err) == ("WHERE", 1, 48)
    assert err.expected == "at most one column on each side of a comparison"


def test_column_that_cancels_out_is_accepted() -> None:
    """Semantics 2: `N.b * 0 = 0` and `U.name = U.name` are legal (true or false as written);
    tests/unit/test_language_normalize.py checks what they compile to."""
    for condition in ("B.temp - B.temp > 1", "2 * B.temp > B.temp * 2 + 1", "B.temp * 0 = 0",
                      "B.alert = B.alert", "B.alert != B.alert"):
        compile_query("q", f"Select * From B Where {condition}", CATALOG)


def test_comparison_without_a_column() -> None:
    """Only constants, no column written at all: no stream to check it on, likely a slip."""
    err = fails("Select * From B Where 1 < 2")
    assert where(err) == ("WHERE", 1, 23)
    assert err.expected == "a column in the comparison"


def test_window_factor_must_be_one() -> None:
    err = fails("Select * From B, T MaxWindow 1s Window 2 * T.ts > B.ts")
    assert where(err) == ("WINDOW", 1, 40)
    assert "window predicates compare timestamps with factor 1" in str(err)


def test_missing_maxwindow_for_two_streams() -> None:
    err = fails("Select *\nFrom B, H\nWhere B.temp > H.vib  \n")
    assert where(err) == ("MAXWINDOW", 3, 21)
    assert "MAXWINDOW clause" in err.expected and err.found == "end of query"


def test_duplicate_stream_in_from() -> None:
    err = fails("Select * From B, H, B MaxWindow 1s")
    assert where(err) == ("FROM", 1, 21)
    assert err.expected == "distinct streams in FROM" and err.found == "'B'"


def test_fractional_milliseconds() -> None:
    err = fails("Select * From B MaxWindow 0.5 ms")
    assert where(err) == ("MAXWINDOW", 1, 27)
    assert err.expected == "a whole number of milliseconds"


def test_unknown_unit() -> None:
    err = fails("Select * From B MaxWindow 3 weeks")
    assert where(err) == ("MAXWINDOW", 1, 29)
    assert "time unit" in err.expected


def test_missing_duration() -> None:
    err = fails("Select * From B, H MaxWindow Where B.temp > H.vib")
    assert where(err) == ("MAXWINDOW", 1, 30)
    assert err.expected == "a duration such as '4sec' or '20 sec'"


def test_syntax_error_lists_what_was_possible() -> None:
    err = fails("Select * From B Where B.temp > 1 B.pressure")
    assert err.expected == "'and' between two comparisons"
    err = fails("Select * From B Where B.temp >")
    assert where(err) == ("WHERE", 1, 31)
    assert err.found == "end of query" and err.expected.startswith("a value")
    err = fails("Select * Form B")
    assert where(err) == ("SELECT", 1, 10)
    assert err.expected == "'FROM'" and err.found == "'Form'"
    err = fails("Select B.temp Form B")
    assert err.expected == "',' or 'FROM'"


def test_trailing_and_before_another_clause() -> None:
    err = fails("Select * From B, H Where B.temp > 1 and\nMaxWindow 1s")
    assert where(err) == ("WHERE", 2, 1)
    assert err.message == "expected a comparison after 'and', found 'MaxWindow'"


def test_chained_comparison() -> None:
    err = fails("Select * From B Where 1 < B.temp < 5")
    assert "cannot be chained" in str(err)


def test_unexpected_character() -> None:
    err = fails("Select * From B Where B.temp > 1 ; drop")
    assert where(err) == ("WHERE", 1, 34)
    assert err.found == "';'"


def test_empty_query() -> None:
    err = fails("   \n ")
    assert where(err) == (None, 1, 1)
    assert err.expected == "'SELECT'" and err.found == "end of query"


def test_number_out_of_range() -> None:
    err = fails("Select * From B Where B.temp > 1e999")
    assert "finite" in err.expected


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    depth = 5000
    err = fails("Select * From B Where " + "(" * depth + "B.temp" + ")" * depth + " > 1")
    assert err.clause == "WHERE" and "nested" in err.expected
    err = fails("Select * From B Where " + "-" * depth + "B.temp > 1")
    assert "nested" in err.expected


def test_long_flat_expressions_are_fine() -> None:
    text = "Select * From B Where B.temp " + "+ 1 " * 3000 + "> 1"
    q = compile_query("q", text, CATALOG)
    assert q.predicates[0].constant == -2999


# ---------------------------------------------------------------- limits


def test_length_limit() -> None:
    text = "Select * From B Where B.temp > 1" + " and B.temp > 1" * 10
    err = fails(text, Limits(max_length=40))
    assert where(err) == (None, 1, 41)
    assert err.expected == "a query of at most 40 characters" and err.found == f"{len(text)} characters"


def test_default_length_limit() -> None:
    fails("Select * From B Where B.temp > 1" + " " * 20_000)


def test_stream_limit() -> None:
    err = fails("Select * From B, H, K, T MaxWindow 1s", Limits(max_streams=3))
    assert where(err) == ("FROM", 1, 24)
    assert err.expected == "at most 3 streams"


def test_predicate_limit() -> None:
    text = "Select * From B\nWhere B.temp > 1 and B.temp > 2 and\n B.temp > 1 and B.temp > 3"
    assert len(compile_query("q", text, CATALOG, Limits(max_predicates=3)).predicates) == 3
    err = fails(text, Limits(max_predicates=2))
    assert where(err) == ("WHERE", 3, 17)
    assert err.expected == "at most 2 distinct predicates"


def test_error_is_picklable() -> None:
    err = fails("Select * From X")
    clone = pickle.loads(pickle.dumps(err))
    assert str(clone) == str(err) and clone.clause == "FROM"
