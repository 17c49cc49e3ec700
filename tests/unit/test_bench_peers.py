"""The peer benchmark's translations and checks, without a JVM (bench/peers).

A peer's rate is only quoted next to Juggler's when its results are equal, so what is
checked here is what would make them differ: the EPL and Flink SQL a query becomes
(stream filters, key equalities, MAXWINDOW both ways), thresholds that decide a rational
constant exactly for every double, integer `ts` offsets, and the result comparison.
"""

from __future__ import annotations

import itertools
import math
import sys
from fractions import Fraction
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` lives at the repository root, beside `services`
    sys.path.insert(0, str(ROOT))

from bench.peers import compare, epl, files, flink_sql  # noqa: E402
from bench.workloads import J_CATALOG, S_CATALOG, build  # noqa: E402
from juggler.language import compile_query  # noqa: E402


def _j(text: str):
    return compile_query("q1", text, J_CATALOG)


def test_epl_join_query_has_filters_windows_key_and_both_time_bounds() -> None:
    query = _j("SELECT * FROM B, H WINDOW B.ts <= H.ts + 500 MAXWINDOW 5 sec "
               "WHERE B.temp > 30 AND H.vib < 20 AND B.pressure > 2 * H.beatrate + 1.5")
    assert epl.statement(query) == (
        "@name('q1') select s0.`__pos` as p0, s1.`__pos` as p1 "
        "from B(`temp` >= 30.000000000000004)#time(5001 milliseconds) as s0, "
        "H(`vib` <= 19.999999999999996)#time(5001 milliseconds) as s1 "
        "where s0.`__key` = s1.`__key` and s0.`ts` - s1.`ts` <= 5000 "
        "and s1.`ts` - s0.`ts` <= 5000 "
        "and s0.`ts` <= s1.`ts` + 500 and s0.`pressure` > 2.0 * s1.`beatrate` + 1.5")


def test_epl_selection_query_is_one_filtered_stream() -> None:
    query = compile_query("s7", "SELECT * FROM S WHERE S.a >= 99.5 AND S.b < 0.25", S_CATALOG)
    assert epl.statement(query) == (
        "@name('s7') select s0.`__pos` as p0 from S(`a` >= 99.5 and `b` <= 0.24999999999999997) "
        "as s0")


@pytest.mark.parametrize("op", [">", ">=", "<", "<=", "=", "!="])
@pytest.mark.parametrize("constant", ["1/3", "0.1", "52", "-7.25"])
def test_attribute_thresholds_decide_the_rational_constant_exactly(op: str, constant: str) -> None:
    """`B.temp * d op n` compiles to a rational constant; the peer's double comparison
    must agree with the exact one on the doubles around it."""
    n, _, d = constant.partition("/")
    query = _j(f"SELECT * FROM B WHERE B.temp * {d or 1} {op} {n}")
    text = epl.statement(query)
    expr = text[text.index("B(") + 2:text.index(") as s0")] if "B(" in text else "true"
    exact = Fraction(float(n)) / Fraction(float(d or 1))  # a literal is its nearest double
    ops = {">": "__gt__", ">=": "__ge__", "<": "__lt__", "<=": "__le__", "=": "__eq__",
           "!=": "__ne__"}
    near = float(exact)
    values = [near]
    for _ in range(3):
        values += [math.nextafter(values[-1], math.inf)]
    below = near
    for _ in range(3):
        below = math.nextafter(below, -math.inf)
        values.append(below)
    for v in values:
        want = getattr(Fraction(v), ops[op])(exact)
        got = _eval_epl_filter(expr, v)
        assert got == want, f"{expr} at {v!r}"


def _eval_epl_filter(expr: str, v: float) -> bool:
    """Evaluate the one-comparison filters this module's queries produce."""
    if expr in ("true", "false"):
        return expr == "true"
    column, op, literal = expr.split(" ")
    assert column == "`temp`"
    x = float(literal)
    return {">=": v >= x, "<=": v <= x, "=": v == x, "!=": v != x}[op]


@pytest.mark.parametrize("window, expected", [
    ("B.ts > H.ts + 2.5", "s0.`ts` > s1.`ts` + 2"),
    ("B.ts >= H.ts + 2.5", "s0.`ts` >= s1.`ts` + 3"),
    ("B.ts < H.ts - 2.5", "s0.`ts` < s1.`ts` - 2"),
    ("B.ts <= H.ts - 2.5", "s0.`ts` <= s1.`ts` - 3"),
    ("B.ts = H.ts + 0.5", "false"),
    ("B.ts < H.ts", "s0.`ts` < s1.`ts`"),
])
def test_window_offsets_stay_integer_and_exact(window: str, expected: str) -> None:
    query = _j(f"SELECT * FROM B, H WINDOW {window} MAXWINDOW 1 sec")
    assert epl.statement(query).endswith(" and " + expected)


def test_flink_insert_bounds_every_pair_of_streams_by_maxwindow() -> None:
    query = _j("SELECT * FROM B, H, T WINDOW B.ts < T.ts MAXWINDOW 2500 ms "
               "WHERE B.temp > H.vib AND T.fluct >= 50")
    sql = flink_sql.insert(query)
    interval = "INTERVAL '0 00:00:02.500' DAY TO SECOND"
    for x, y in itertools.combinations(("s0", "s1", "s2"), 2):
        assert f"{x}.`__key` = {y}.`__key`" in sql
        assert f"{x}.`__rt` BETWEEN {y}.`__rt` - {interval} AND {y}.`__rt` + {interval}" in sql
    assert "s2.`fluct` >= 50.0E0" in sql and "s0.`ts` < s2.`ts`" in sql
    assert sql.startswith("INSERT INTO `results` SELECT 'q1', CONCAT_WS(',', "
                          "CAST(s0.`__pos` AS STRING), CAST(s1.`__pos` AS STRING), "
                          "CAST(s2.`__pos` AS STRING)) FROM `B` AS s0, `H` AS s1, `T` AS s2")


def test_exported_files_read_back_as_the_generated_events(tmp_path: Path) -> None:
    workload = build("J", n=1)
    exported = files.export(workload, 500, tmp_path)
    again = files.read(files.EventFiles.at(tmp_path))
    original = list(itertools.islice(workload.events(), 500))
    assert [(e.stream, e.key, e.ts, e.data, e.position) for e in again] == \
        [(e.stream, e.key, e.ts, e.data, e.position) for e in original]
    assert sum(1 for _ in exported.stream("B").open()) == sum(e.stream == "B" for e in original)


def test_check_counts_missing_and_extra_results(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("j0\t1,2\nj0\t1,2\nj1\t3,4\n")
    (tmp_path / "b").write_text("j1\t3,4\nj0\t1,2\nj2\t5,6\n")
    out = compare.check(str(tmp_path / "a"), str(tmp_path / "b"))
    assert (out["equal"], out["missing"], out["extra"]) == (False, 1, 1)
    assert out["missing_examples"] == ["j0\t1,2"] and out["extra_examples"] == ["j2\t5,6"]
    assert compare.check(str(tmp_path / "a"), str(tmp_path / "a"))["equal"]
