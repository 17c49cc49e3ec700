"""The thesis's own queries (Figures 3.1, 3.3, 5.1, 5.8, 5.13-5.15) parse as printed.

Texts are the verbatim copies of `thesis_corpus`. Three printed queries are broken in the thesis (a missing or
trailing `and`); they must fail with a precise message and parse once repaired.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from juggler.language import (
    AttributePredicate,
    ColumnRef,
    Op,
    PairPredicate,
    PredicateKind,
    QueryError,
    compile_query,
)

from thesis_corpus import CATALOG, FIG_5_1_CATALOG, OVERLAP, TEMPLATE_CATALOG, thesis_texts  # noqa: E402

GOOD_MAIN_CATALOG = ["fig3_3_q1", "fig3_3_q3", "fig5_8", *OVERLAP]


@pytest.fixture(scope="module")
def thesis() -> dict[str, str]:
    return thesis_texts()


def _pair(kind: PredicateKind, left: str, op: Op, factor, right: str, offset=0) -> PairPredicate:
    l_s, l_c = left.split(".")
    r_s, r_c = right.split(".")
    return PairPredicate(kind, ColumnRef(l_s, l_c), op, Fraction(factor), ColumnRef(r_s, r_c), Fraction(offset))


def _attr(col: str, op: Op, constant) -> AttributePredicate:
    s, c = col.split(".")
    return AttributePredicate(ColumnRef(s, c), op, Fraction(constant) if not isinstance(constant, str) else constant)


W, J = PredicateKind.WINDOW, PredicateKind.JOIN


# Comparisons written in each query (none repeats, so each is one predicate).
COMPARISONS = {
    "fig3_3_q1": 4, "fig3_3_q3": 3, "fig5_8": 9,
    "overlap25_q1": 3, "overlap25_q2": 5, "overlap25_q3": 7, "overlap25_q4": 9, "overlap25_q5": 9,
    "overlap50_q1": 3, "overlap50_q2": 5, "overlap50_q3": 7, "overlap50_q4": 9, "overlap50_q5": 9,
    "overlap75_q2": 5, "overlap75_q3": 7, "overlap75_q4": 9,
}


def test_the_list_of_correct_queries_is_complete() -> None:
    assert sorted(COMPARISONS) == sorted(GOOD_MAIN_CATALOG)


@pytest.mark.parametrize("name", GOOD_MAIN_CATALOG)
def test_every_correct_thesis_query_parses_as_printed(thesis: dict[str, str], name: str) -> None:
    text = thesis[name]
    query = compile_query(name, text, CATALOG)
    assert query.id == name
    assert query.text == text
    assert len(query.predicates) == COMPARISONS[name]
    for pred in query.predicates:
        assert pred.text and pred.text in text
    assert query.max_window is not None


@pytest.mark.parametrize("name", OVERLAP)
def test_overlap_queries_read_from_bh_as_b_and_h(thesis: dict[str, str], name: str) -> None:
    query = compile_query(name, thesis[name], CATALOG)
    assert query.streams == ("B", "H")
    assert query.select is None
    assert query.max_window == 20_000
    assert len(query.predicates_of(W)) == 1


def test_figure_3_3_query_1(thesis: dict[str, str]) -> None:
    q = compile_query("1", thesis["fig3_3_q1"], CATALOG)
    assert q.streams == ("B", "H", "K", "T")
    assert q.select == (ColumnRef("H", "alert"),)
    assert q.max_window == 4000
    assert q.predicates == (
        _pair(W, "B.ts", Op.LT, 1, "T.ts"),
        _attr("H.beatrate", Op.EQ, 52),
        _pair(J, "B.temp", Op.GT, 1, "H.vib"),
        _pair(J, "B.pressure", Op.GT, 1, "T.fluct"),
    )
    assert [p.text for p in q.predicates] == [
        "T.ts > B.ts", "H.beatrate = 52", "B.temp > H.vib", "B.pressure > T.fluct",
    ]


def test_figure_3_3_query_3(thesis: dict[str, str]) -> None:
    q = compile_query("3", thesis["fig3_3_q3"], CATALOG)
    assert q.streams == ("T", "H")
    assert q.max_window == 5000
    assert q.predicates == (
        _pair(W, "H.ts", Op.LT, 1, "T.ts"),
        _attr("T.fluct", Op.EQ, 103),
        _pair(J, "H.vib", Op.EQ, 1, "T.incr"),
    )


def test_figure_5_8_word_operators_and_window_in_where(thesis: dict[str, str]) -> None:
    q = compile_query("5.8", thesis["fig5_8"], CATALOG)
    assert q.streams == ("B", "H", "T")
    assert q.max_window == 20_000
    assert q.predicates == (
        _pair(W, "B.ts", Op.LE, 1, "T.ts"),
        _pair(W, "H.ts", Op.LE, 1, "T.ts"),
        _attr("B.pressure", Op.LT, 90),
        _attr("H.beatrate", Op.GT, 115),
        _pair(J, "B.pressure", Op.LE, 1, "H.vib"),
        _pair(W, "B.ts", Op.LE, 1, "H.ts"),  # written in WHERE, classified by content
        _attr("T.fluct", Op.LT, 200),  # `lt`
        _pair(J, "B.temp", Op.LE, 1, "T.degree"),  # `lt=` is <=
        _pair(J, "H.vib", Op.LE, 1, "T.fluct"),
    )


def test_overlap_25_query_4_gt_and_factors(thesis: dict[str, str]) -> None:
    q = compile_query("q4", thesis["overlap25_q4"], CATALOG)
    assert q.predicates[0] == _pair(W, "B.ts", Op.GT, 1, "H.ts")
    assert _pair(J, "B.pressure", Op.LE, 4, "H.vib") in q.predicates
    assert _pair(J, "B.pressure", Op.EQ, 1, "H.beatrate") in q.predicates


def test_overlap_75_query_3_factor_on_the_right(thesis: dict[str, str]) -> None:
    q = compile_query("q3", thesis["overlap75_q3"], CATALOG)
    assert _pair(J, "B.temp", Op.GT, 2, "H.beatrate") in q.predicates
    assert _pair(J, "B.pressure", Op.LE, 2, "H.vib") in q.predicates


@pytest.mark.parametrize("name", ["fig5_1_q1", "fig5_1_q2"])
def test_figure_5_1(thesis: dict[str, str], name: str) -> None:
    q = compile_query(name, thesis[name], FIG_5_1_CATALOG)
    assert q.streams == ("A", "B")
    assert q.max_window == 2000
    assert len(q.predicates) == 3


def test_figure_5_1_query_2_is_similar_to_query_1(thesis: dict[str, str]) -> None:
    q2 = compile_query("2", thesis["fig5_1_q2"], FIG_5_1_CATALOG)
    assert q2.predicates[1] == _pair(J, "A.col1", Op.GE, 2, "B.col2")


# ---------------------------------------------------------------- the broken ones


def test_figure_3_3_query_2_missing_and(thesis: dict[str, str]) -> None:
    with pytest.raises(QueryError) as info:
        compile_query("q2", thesis["fig3_3_q2"], CATALOG)
    err = info.value
    assert (err.query_id, err.clause, err.line, err.column) == ("q2", "WHERE", 7, 13)
    assert err.expected == "'and' between two comparisons"
    assert err.found == "'T.fluct'"
    assert str(err).startswith(
        "query q2, WHERE clause, line 7, column 13: expected 'and' between two comparisons, found 'T.fluct'"
    )


def test_figure_3_3_query_2_with_and_inserted(thesis: dict[str, str]) -> None:
    text = thesis["fig3_3_q2"].replace("0.5 * B.pressure\n", "0.5 * B.pressure and\n")
    q = compile_query("q2", text, CATALOG)
    assert q.streams == ("B", "T", "H")
    assert q.max_window == 6000
    assert q.predicates == (
        _pair(W, "B.ts", Op.GT, 1, "T.ts"),
        _pair(W, "B.ts", Op.LE, 1, "H.ts"),
        _pair(J, "B.pressure", Op.GT, 2, "T.fluct"),
        _attr("T.fluct", Op.EQ, Fraction(103, 2)),
    )


def test_overlap_75_query_1_trailing_and(thesis: dict[str, str]) -> None:
    text = thesis["overlap75_q1"]
    with pytest.raises(QueryError) as info:
        compile_query("q1", text, CATALOG)
    err = info.value
    last = text.splitlines()[-1]
    assert (err.clause, err.line, err.column) == ("WHERE", 6, len(last) + 1)
    assert err.message == "expected a comparison after 'and', found end of query"
    assert str(err) == f"query q1, WHERE clause, line 6, column {len(last) + 1}: {err.message}"


def test_overlap_75_query_1_without_trailing_and(thesis: dict[str, str]) -> None:
    text = thesis["overlap75_q1"].removesuffix(" and")
    q = compile_query("q1", text, CATALOG)
    assert q.predicates == (
        _pair(W, "B.ts", Op.LE, 1, "H.ts"),
        _attr("B.pressure", Op.LT, 110),
        _pair(J, "B.pressure", Op.LE, 1, "H.vib"),
    )


def test_overlap_75_query_5_missing_and(thesis: dict[str, str]) -> None:
    with pytest.raises(QueryError) as info:
        compile_query("q5", thesis["overlap75_q5"], CATALOG)
    err = info.value
    assert (err.query_id, err.clause, err.line, err.column) == ("q5", "WHERE", 9, 7)
    assert err.message == "expected 'and' between two comparisons, found 'B.pressure'"


def test_overlap_75_query_5_with_and_inserted(thesis: dict[str, str]) -> None:
    text = thesis["overlap75_q5"].replace("B.temp = 98\n", "B.temp = 98 and\n")
    q = compile_query("q5", text, CATALOG)
    assert len(q.predicates) == 9
    assert _attr("B.temp", Op.EQ, 98) in q.predicates
    assert _pair(J, "B.temp", Op.GT, 4, "H.beatrate") in q.predicates


def test_figure_3_1_template_is_rejected_at_the_placeholder(thesis: dict[str, str]) -> None:
    with pytest.raises(QueryError) as info:
        compile_query("3.1", thesis["fig3_1"], TEMPLATE_CATALOG)
    err = info.value
    assert (err.clause, err.line, err.column) == ("SELECT", 1, 8)
    assert err.found == "'<'"
    assert "'*' or a column" in err.expected


def test_figure_3_1_with_placeholders_filled_in(thesis: dict[str, str]) -> None:
    text = thesis["fig3_1"].replace("<v1c, v2.. vn list>", "S1.col1").replace("103c", "103")
    q = compile_query("3.1", text, TEMPLATE_CATALOG)
    assert q.select == (ColumnRef("S1", "col1"),)
    assert q.max_window == 6000
    assert q.predicates == (
        _pair(W, "S1.ts", Op.GT, 1, "S2.ts"),
        _pair(W, "S2.ts", Op.LE, 1, "S3.ts"),
        _pair(J, "S1.col1", Op.LT, Fraction(1, 2), "S3.col2"),
        _attr("S2.col1", Op.EQ, Fraction(103, 2)),
    )
