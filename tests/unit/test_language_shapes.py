"""Rules that differ only in their numbers reuse one parse (`juggler.language.shapes`):
each still compiles to exactly what it would alone, and a bad one still reports its own
line and column."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thesis_corpus import thesis_texts

from juggler.language import ColumnType, QueryError, compile_query
from juggler.language import parser, shapes

N, S = ColumnType.NUMBER, ColumnType.STRING
CATALOG = {"B": {"temp": N, "pressure": N, "note": S}, "H": {"beatrate": N, "vib": N}}
RULE = "SELECT * FROM H WHERE H.beatrate > {}"
NUMBERS = ["0", "7", "120", "1.5", ".5", "5.", "1e3", "2E-2", "3.25e+1", "007", "1" * 30]


def alone(text: str) -> object:
    """What Lark's own parse gives for `text`: its tree, or its error's words."""
    try:
        return parser.parse(text, "q")
    except QueryError as err:
        return str(err)


def reused(text: str) -> object:
    try:
        return shapes.parse(text, "q")
    except QueryError as err:
        return str(err)


def test_rules_of_one_shape_compile_as_each_would_alone() -> None:
    first = compile_query("r0", RULE.format(100), CATALOG)
    for i, number in enumerate(NUMBERS, 1):
        text = RULE.format(number)
        assert shapes.parse(text) == parser.parse(text)
        query = compile_query(f"r{i}", text, CATALOG)
        (predicate,) = query.predicates
        assert predicate.constant == parser.number_value(number)
        assert query.text == text and query.id == f"r{i}"
    assert first.predicates[0].constant == 100


def test_positions_after_a_longer_number_move_with_it() -> None:
    """An error after the number points at its own column, on its own line."""
    template = "Select * From B\n  Where B.temp > {} and  B.nope < 2\n"
    with pytest.raises(QueryError) as short:
        compile_query("a", template.format(1), CATALOG)
    with pytest.raises(QueryError) as long:
        compile_query("b", template.format("12345.5"), CATALOG)
    assert (short.value.line, short.value.column) == (2, 25)
    assert (long.value.line, long.value.column) == (2, 31)
    assert (long.value.clause, long.value.found) == ("WHERE", "'B.nope'")


@pytest.mark.parametrize("number, expected", [
    ("1e999", "a number with a finite double value"),
    ("9" * 1300, "an integer below 2^"),
])
def test_a_bad_number_in_a_known_shape_reports_its_place(number: str, expected: str) -> None:
    compile_query("ok", RULE.format(5), CATALOG)
    with pytest.raises(QueryError) as err:
        compile_query("bad", RULE.format(number), CATALOG)
    assert (err.value.clause, err.value.line, err.value.column) == ("WHERE", 1, 36)
    assert expected in err.value.expected


def test_a_duration_of_a_known_shape_takes_its_own_amount() -> None:
    template = "SELECT * FROM B, H WHERE B.temp > H.vib MAXWINDOW {} sec"
    assert compile_query("a", template.format(4), CATALOG).max_window == 4000
    assert compile_query("b", template.format("2.5"), CATALOG).max_window == 2500
    with pytest.raises(QueryError) as err:
        compile_query("c", template.format("0.0001"), CATALOG)
    assert err.value.clause == "MAXWINDOW" and "whole number of milliseconds" in err.value.expected


def test_digits_in_strings_and_names_are_not_numbers() -> None:
    first = compile_query("a", "SELECT * FROM B WHERE B.note = 'room 5'", CATALOG)
    second = compile_query("b", "SELECT * FROM B WHERE B.note = 'room 6'", CATALOG)
    assert first.predicates[0].constant == "room 5" and second.predicates[0].constant == "room 6"


TEXTS = list(thesis_texts().values())


@settings(max_examples=300, deadline=None)
@given(text=st.sampled_from(TEXTS), numbers=st.lists(st.sampled_from(NUMBERS + ["1.2.3", "1e"]),
                                                     min_size=1, max_size=8),
       cut=st.integers(0, 400), piece=st.sampled_from(["", "(", " and ", "'", "\n", "e", "-", "5"]))
def test_any_text_parses_as_lark_parses_it_alone(text: str, numbers: list[str], cut: int,
                                                 piece: str) -> None:
    """The thesis's queries with their numbers replaced and a piece inserted: the reused
    parse is Lark's, or the same error, whatever texts of its shape came before."""
    import re

    text = text[:cut] + piece + text[cut:]
    each = iter(numbers * 50)
    renumbered = re.sub(r"[0-9]+", lambda _: next(each), text)
    for candidate in (text, renumbered):
        assert reused(candidate) == alone(candidate)
