"""Rules that differ only in their literals compile by plan (`juggler.language.plans`):
each compiles to exactly what a fresh compile of its text gives, predicates' texts and
errors with their line and column included, whatever texts of its shape came before."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juggler.language import ColumnType, Limits, QueryError, compile_query
from juggler.language import parser
from juggler.language.compiler import check_length, compile_syntax
from juggler.language.plans import QueryCompiler

N, S, BOOL = ColumnType.NUMBER, ColumnType.STRING, ColumnType.BOOLEAN
CATALOG = {"B": {"temp": N, "note": S, "flag": BOOL}, "H": {"beatrate": N, "vib": N}}
NUMBERS = ["0", "7", "120", "1.5", ".5", "5.", "1e3", "2E-2", "3.25e+1", "007", "1" * 30,
           "0.1", "4.9e-324", "1e999", "9" * 1300, "1e-999"]
STRINGS = ["'a'", "'room 5'", '"x y"', "''", r"'it\'s'", r'"\\"', "'5'"]
DURATIONS = ["4", "2.5", "0", "0.0001", "1e20", "10"]


def fresh(query_id: str, text: str, limits: Limits = Limits()) -> object:
    """What compiling `text` alone gives: Lark's parse, then the compiler."""
    try:
        check_length(query_id, text, limits)
        return outcome(compile_syntax(query_id, parser.parse(text, query_id), CATALOG, limits))
    except QueryError as err:
        return str(err)


def planned(compiler: QueryCompiler, query_id: str, text: str) -> object:
    try:
        return outcome(compiler.compile(query_id, text))
    except QueryError as err:
        return str(err)


def outcome(query: object) -> object:
    """A query with its predicates' texts, which its equality leaves out."""
    return query, [p.text for p in query.predicates]  # type: ignore[attr-defined]


COLUMNS = {"B": [("B.temp", "n"), ("B.note", "s"), ("B.flag", "b")],
           "H": [("H.beatrate", "n"), ("H.vib", "n")]}


@st.composite
def shapes(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A query text with `{}` for each literal, and each literal's kind."""
    streams = draw(st.sampled_from([["H"], ["B"], ["B", "H"]]))
    space = st.sampled_from([" ", "\n", "  \n\t", "\n  "])
    kinds: list[str] = []
    comparisons = []
    for _ in range(draw(st.integers(1, 4))):
        column, kind = draw(st.sampled_from([c for s in streams for c in COLUMNS[s]]))
        if draw(st.integers(0, 9)) == 0:  # a literal of the wrong type: no shape compiles
            kind = "s" if kind == "n" else "n"
        if kind == "n":
            prefix = "".join(draw(st.lists(st.sampled_from(["-", "+", "- ", "(", "-("]),
                                           max_size=2)))
            literal = prefix + "{}" + ")" * prefix.count("(")
            kinds.append("n")
        elif kind == "s":
            literal = "{}"
            kinds.append("s")
        else:
            literal = draw(st.sampled_from(["true", "FALSE"]))
        op = draw(st.sampled_from(["<", "<=", ">", ">=", "=", "!=", "lt=", "<>", "gt="]))
        left, right = (column, literal) if draw(st.booleans()) else (literal, column)
        comparisons.append(f"{left}{draw(space)}{op} {right}")
    text = f"SELECT *{draw(space)}FROM {', '.join(streams)}{draw(space)}WHERE "
    text += f"{draw(space)}and ".join(comparisons)
    if len(streams) > 1 and draw(st.integers(0, 5)):
        text += f"{draw(space)}MAXWINDOW {{}}{draw(st.sampled_from([' sec', 'ms', ' min']))}"
        kinds.append("d")
    return text, kinds


@settings(max_examples=400, deadline=None)
@given(shape=shapes(), data=st.data(), max_predicates=st.sampled_from([256, 2]))
def test_texts_of_one_shape_compile_as_each_alone(shape: tuple[str, list[str]],
                                                  data: st.DataObject,
                                                  max_predicates: int) -> None:
    template, kinds = shape
    pools = {"n": NUMBERS, "s": STRINGS, "d": DURATIONS}
    limits = Limits(max_predicates=max_predicates)
    compiler = QueryCompiler(CATALOG, limits)
    for i in range(4):
        literals = [data.draw(st.sampled_from(pools[kind])) for kind in kinds]
        text = template.format(*literals)
        assert planned(compiler, f"q{i}", text) == fresh(f"q{i}", text, limits)


RULE = "SELECT * FROM H WHERE H.beatrate > {}"


def test_a_rule_after_its_shape_is_the_fresh_compile_with_its_own_constant() -> None:
    compiler = QueryCompiler(CATALOG)
    for i, number in enumerate(["100", "-3", "2.5e1", "0.1"]):
        query = compiler.compile(f"r{i}", RULE.format(number))
        assert query == compile_query(f"r{i}", RULE.format(number), CATALOG)
        assert query.predicates[0].text == f"H.beatrate > {number}"


def test_a_bad_literal_in_a_planned_shape_reports_its_own_line_and_column() -> None:
    compiler = QueryCompiler(CATALOG)
    template = "Select * From B\n  Where B.note = {} and  B.temp > {}\n"
    compiler.compile("a", template.format("'x'", "1"))
    with pytest.raises(QueryError) as err:
        compiler.compile("b", template.format("'longer'", "1e999"))
    assert (err.value.clause, err.value.line, err.value.column) == ("WHERE", 2, 41)
    assert "finite double" in err.value.expected


def test_equal_comparisons_are_one_predicate_as_in_a_fresh_compile() -> None:
    compiler = QueryCompiler(CATALOG)
    template = "SELECT * FROM H WHERE H.vib > {} and {} < H.vib"
    compiler.compile("a", template.format(1, 2))
    query = compiler.compile("b", template.format(3, 3))
    assert [p.text for p in query.predicates] == ["H.vib > 3"]
    assert query == compile_query("b", template.format(3, 3), CATALOG)
