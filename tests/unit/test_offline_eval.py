"""`juggler eval` end to end (semantics section 5), on the bundled ICU example and on small
bad inputs. The expected results of the example were computed by hand."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from juggler import __version__
from juggler.cli import main
from juggler.language.model import ColumnType
from juggler.offline import jsonl_line

ROOT = Path(__file__).resolve().parents[2]
ICU = ROOT / "examples" / "icu"

# (query, key, ts, sources in FROM order) of every result, in output order, with the
# default allowed lateness 0: lines 15 and 32 are late and dead-lettered.
ICU_RESULTS = [
    ("fig58", "p2", 1800, (1, 3, 5)),
    ("q1", "p1", 2000, (0, 2, 4, 6)),
    ("q3", "p1", 2000, (6, 2)),
    ("bradycardia", "p1", 3000, (8,)),
    ("q1", "p1", 3500, (0, 2, 4, 9)),
    ("q3", "p1", 3500, (9, 8)),
    ("bradycardia", "p2", 4000, (10,)),
    ("fig58", "p2", 5500, (11, 12, 13)),
    ("q1", "p1", 7200, (15, 17, 16, 18)),
    ("q2", "p1", 8100, (19, 18, 20)),      # history: returned by the register command
    ("q2", "p1", 9000, (19, 18, 22)),
    ("bradycardia", "p2", 10500, (25,)),   # H@11000 (line 28) comes after deregister
    ("q2", "p2", 10500, (24, 23, 25)),
    ("q2", "p2", 11000, (24, 23, 27)),
    ("q2", "p1", 12000, (19, 18, 29)),
    ("q3", "p1", 12500, (30, 29)),
    ("q2", "p2", 14000, (24, 23, 34)),
]

# With --allowed-lateness 1000 the two out-of-order events join as if in order.
ICU_LATE_ACCEPTED = {
    ("fig58", "p2", 5500, (14, 12, 13)),
    ("q3", "p1", 12500, (30, 31)),
    ("q2", "p1", 11800, (19, 18, 31)),
}


def summary(result: dict) -> tuple:
    return (result["query"], result["key"], result["ts"], tuple(result["sources"].values()))


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def run_eval(*args: str | Path):
    return CliRunner().invoke(main, ["eval", *map(str, args)], catch_exceptions=False)


def write_lines(path: Path, *lines: str | dict | list) -> Path:
    """One JSON value per line; a str is written as it is (for malformed lines)."""
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n"
                            for x in lines))
    return path


@pytest.fixture
def small(tmp_path: Path):
    """A one-query input and the paths to run it; events are filled in by the test."""
    queries = write_lines(tmp_path / "queries.jsonl",
                          {"id": "hot", "text": "SELECT B.temp FROM B WHERE B.temp > 38"})
    return tmp_path, queries, tmp_path / "events.jsonl", tmp_path / "out" / "results.jsonl"


def event(stream: str, key: str, ts, **data) -> dict:
    return {"stream": stream, "key": key, "ts": ts, "data": data}


# -- the bundled example -------------------------------------------------------------


def test_icu_example_with_the_naive_engine(tmp_path: Path):
    out, dead = tmp_path / "results.jsonl", tmp_path / "dead.jsonl"
    result = run_eval("--queries", ICU / "queries.jsonl", "--events", ICU / "events.jsonl",
                      "--out", out, "--engine", "naive", "--dead-letters", dead)
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == "38 events, 17 results, 2 late"
    results = read_jsonl(out)
    assert [summary(r) for r in results] == ICU_RESULTS
    assert out.read_text().splitlines()[0] == (
        '{"query":"fig58","key":"p2","ts":1800,"sources":{"B":1,"H":3,"T":5},"row":'
        '{"B.pressure":85,"B.temp":37.1,"B.alert":false,"H.beatrate":118,"H.vib":88,'
        '"H.alert":true,"T.fluct":95,"T.degree":37.5,"T.incr":4}}')
    assert results[1]["row"] == {"H.alert": True}
    assert results[9]["row"] == {"B.alert": True}
    letters = read_jsonl(dead)
    assert [(d["line"], d["position"], d["event"]["ts"]) for d in letters] == [
        (15, 14, 4800), (32, 31, 11800)]
    assert letters[0]["reason"].startswith("late: ts 4800 < maxts 5500")


def test_icu_example_with_allowed_lateness(tmp_path: Path):
    out = tmp_path / "results.jsonl"
    result = run_eval("--queries", ICU / "queries.jsonl", "--events", ICU / "events.jsonl",
                      "--out", out, "--engine", "naive", "--allowed-lateness", "1000")
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == "38 events, 20 results, 0 late"
    got = [summary(r) for r in read_jsonl(out)]
    assert set(got) == set(ICU_RESULTS) | ICU_LATE_ACCEPTED and len(got) == 20


def test_icu_example_through_python_m(tmp_path: Path):
    out = tmp_path / "results.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "services"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "juggler.cli", "eval", "--queries", ICU / "queries.jsonl",
         "--events", ICU / "events.jsonl", "--out", out, "--engine", "naive"],
        env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "17 results" in done.stderr
    assert [summary(r) for r in read_jsonl(out)] == ICU_RESULTS


def test_juggler_engine_agrees_with_naive_on_icu(tmp_path: Path):
    outputs = {}
    for engine in ("naive", "juggler"):
        outputs[engine] = tmp_path / f"{engine}.jsonl"
        result = run_eval("--queries", ICU / "queries.jsonl", "--events",
                          ICU / "events.jsonl", "--out", outputs[engine],
                          "--engine", engine, "--allowed-lateness", "1000")
        assert result.exit_code == 0, result.output
    assert outputs["juggler"].read_text() == outputs["naive"].read_text()


def test_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output


# -- bad input: status 2, a message naming file and line, nothing written ------------


def assert_bad_input(result, small_paths, *needles: str) -> None:
    tmp_path, _, _, out = small_paths
    assert result.exit_code == 2, result.output
    for needle in needles:
        assert needle in result.stderr, result.stderr
    assert not out.exists()
    leftovers = [p.name for p in out.parent.iterdir()] if out.parent.exists() else []
    assert leftovers == []


def run_small(small, *extra: str):
    tmp_path, queries, events, out = small
    out.parent.mkdir(exist_ok=True)
    return run_eval("--queries", queries, "--events", events, "--out", out,
                    "--engine", "naive", *extra)


def test_small_input_runs(small):
    _, _, events, out = small
    write_lines(events, event("B", "p1", 1, temp=37), event("B", "p1", 2, temp=39.5))
    result = run_small(small)
    assert result.exit_code == 0, result.output
    assert read_jsonl(out) == [{"query": "hot", "key": "p1", "ts": 2,
                                "sources": {"B": 1}, "row": {"B.temp": 39.5}}]


def test_malformed_json_on_line_3(small):
    _, _, events, _ = small
    write_lines(events, event("B", "p1", 1, temp=39), event("B", "p1", 2, temp=40),
                '{"stream": "B", "key": "p1", "ts": 3, "data": {"temp": 41}')
    result = run_small(small)
    assert_bad_input(result, small, "events.jsonl:3:", "malformed JSON")


def test_bad_query_reports_the_parser_message(small):
    from juggler.language import QueryError, compile_query

    tmp_path, queries, events, _ = small
    text = "SELECT B.temp FROM B WHERE B.nosuch > 1"
    write_lines(queries, {"id": "ok", "text": "SELECT B.temp FROM B"},
                {"id": "bad", "text": text})
    write_lines(events, event("B", "p1", 1, temp=39))
    with pytest.raises(QueryError) as parsed:
        compile_query("bad", text, {"B": {"temp": ColumnType.NUMBER}})
    result = run_small(small)
    assert_bad_input(result, small, "queries.jsonl:2:", str(parsed.value))


def test_bad_registered_query_names_the_events_line(small):
    _, _, events, _ = small
    write_lines(events, event("B", "p1", 1, temp=39),
                {"control": "register", "id": "x", "text": "SELECT FROM WHERE"})
    assert_bad_input(run_small(small), small, "events.jsonl:2:")


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_number_is_bad_input(small, value):
    _, _, events, _ = small
    write_lines(events, event("B", "p1", 1, temp=39),
                '{"stream": "B", "key": "p1", "ts": 2, "data": {"temp": %s}}' % value)
    assert_bad_input(run_small(small), small, "events.jsonl:2:", "not a finite number")


@pytest.mark.parametrize("line, message", [
    (event("B", 7, 2, temp=1), "'key' must be a string"),
    (event("B", "p1", 2.5, temp=1), "'ts' must be an integer"),
    (event("B", "p1", True, temp=1), "'ts' must be an integer"),
    (event("B", "p1", 2, temp=True), "column 'temp' is a number"),
    (event("B", "p1", 2, temp=1, extra=2), "unexpected 'extra'"),
    (event("B", "p1", 2), "missing 'temp'"),
    (event("B", "p1", 2, temp=None), "not a number, string or boolean"),
    ({"stream": "B", "key": "p1", "data": {"temp": 1}}, "missing 'ts'"),
    ({"stream": "B", "key": "p1", "ts": 2, "data": [1]}, "'data' must be an object"),
    ('{"stream": "B", "stream": "B", "key": "p1", "ts": 2, "data": {}}', "appears twice"),
    ([1, 2], "expected an event as a JSON object"),
    ({"control": "deregister", "id": "nope"}, "not registered"),
    ({"control": "register", "id": "hot", "text": "SELECT B.temp FROM B"},
     "already registered"),
    ({"control": "pause"}, "'control' must be"),
])
def test_bad_event_lines(small, line, message):
    _, _, events, _ = small
    write_lines(events, event("B", "p1", 1, temp=39), line)
    assert_bad_input(run_small(small), small, "events.jsonl:2:", message)


def test_repeated_query_id_in_queries_file(small):
    _, queries, events, _ = small
    write_lines(queries, {"id": "a", "text": "SELECT B.temp FROM B"},
                {"id": "a", "text": "SELECT B.temp FROM B"})
    write_lines(events, event("B", "p1", 1, temp=39))
    assert_bad_input(run_small(small), small, "queries.jsonl:2:", "already registered")


def test_failed_run_leaves_an_existing_output_untouched(small):
    _, _, events, out = small
    out.parent.mkdir()
    out.write_text("previous\n")
    write_lines(events, event("B", "p1", 1, temp=39), "not json")
    result = run_small(small)
    assert result.exit_code == 2
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in out.parent.iterdir()) == ["results.jsonl"]


# -- late events and schemas ---------------------------------------------------------


def test_late_event_goes_to_dead_letters(small):
    tmp_path, _, events, out = small
    dead = tmp_path / "dead.jsonl"
    write_lines(events, event("B", "p1", 1000, temp=39), event("B", "p1", 400, temp=40),
                event("B", "p2", 400, temp=41))
    result = run_small(small, "--dead-letters", dead, "--allowed-lateness", "500")
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == "3 events, 2 results, 1 late"
    [letter] = read_jsonl(dead)
    assert letter == {"line": 2, "position": 1, "reason": letter["reason"],
                      "event": event("B", "p1", 400, temp=40)}
    assert "maxts 1000" in letter["reason"] and "allowed_lateness 500" in letter["reason"]
    assert [r["sources"] for r in read_jsonl(out)] == [{"B": 0}, {"B": 2}]


def test_explicit_avro_schemas(small):
    tmp_path, _, events, out = small
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "B.avsc").write_text(json.dumps({
        "type": "record", "name": "juggler.B", "fields": [
            {"name": "ts", "type": "long"}, {"name": "temp", "type": "double"},
            {"name": "count", "type": "int"}]}))
    write_lines(events, event("B", "p1", 1, count=3, temp=39))
    result = run_small(small, "--schemas", schemas)
    assert result.exit_code == 0, result.output
    assert len(read_jsonl(out)) == 1
    out.unlink()

    write_lines(events, event("B", "p1", 1, count=3.5, temp=39))
    assert_bad_input(run_small(small, "--schemas", schemas), small,
                     "events.jsonl:1:", "'count' is an Avro int/long")
    write_lines(events, event("H", "p1", 1, vib=3))
    assert_bad_input(run_small(small, "--schemas", schemas), small,
                     "events.jsonl:1:", "unknown stream 'H'")
    (schemas / "B.avsc").write_text(json.dumps({
        "type": "record", "name": "B", "fields": [
            {"name": "temp", "type": ["null", "double"]}]}))
    assert_bad_input(run_small(small, "--schemas", schemas), small,
                     "B.avsc", "'temp'", "not supported")


# -- a query over a stream with no events and no schema --------------


def typo_input(small) -> None:
    """`hot` is fine; `typo` reads stream Bx (no events), registered on queries line 2;
    `joined` reads stream Q, registered by events line 2."""
    _, queries, events, _ = small
    write_lines(queries, {"id": "hot", "text": "SELECT B.temp FROM B WHERE B.temp > 38"},
                {"id": "typo", "text": "SELECT Bx.temp FROM Bx WHERE Bx.temp > 38"})
    write_lines(events, event("B", "p1", 1, temp=39),
                {"control": "register", "id": "joined",
                 "text": "SELECT * FROM B, Q MAXWINDOW 1s WHERE B.temp = Q.temp and Q.s = 'a'"},
                event("B", "p1", 2, temp=40))


def test_query_over_a_stream_without_events_is_a_warning(small):
    _, _, _, out = small
    typo_input(small)
    result = run_small(small)
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning:")]
    assert len(warnings) == 2, result.stderr
    assert "queries.jsonl:2:" in warnings[0] and "query typo" in warnings[0]
    assert "stream 'Bx'" in warnings[0] and "no events in" in warnings[0]
    assert "events.jsonl:2:" in warnings[1] and "query joined" in warnings[1]
    assert "stream 'Q'" in warnings[1]
    assert result.stderr.splitlines()[-1] == "2 events, 2 results, 0 late"
    assert [r["query"] for r in read_jsonl(out)] == ["hot", "hot"]


def test_strict_makes_a_stream_without_events_an_error(small):
    typo_input(small)
    assert_bad_input(run_small(small, "--strict"), small, "queries.jsonl:2:", "query typo",
                     "stream 'Bx'", "no events", "no schema")


def test_strict_names_the_events_line_of_a_registered_query(small):
    _, queries, events, _ = small
    typo_input(small)
    write_lines(queries, {"id": "hot", "text": "SELECT B.temp FROM B WHERE B.temp > 38"})
    assert_bad_input(run_small(small, "--strict"), small, "events.jsonl:2:", "query joined",
                     "stream 'Q'")


def test_strict_accepts_queries_over_streams_with_events(small):
    _, queries, events, out = small
    write_lines(queries, {"id": "both", "text": "SELECT * FROM BH MaxWindow 1s"})
    write_lines(events, event("B", "p1", 1, temp=39), event("H", "p1", 2, vib=1))
    result = run_small(small, "--strict")
    assert result.exit_code == 0, result.output
    assert "Warning" not in result.stderr
    assert len(read_jsonl(out)) == 1


def test_with_schemas_an_unknown_stream_is_still_a_query_error(small):
    tmp_path, queries, events, _ = small
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "B.avsc").write_text(json.dumps({
        "type": "record", "name": "B", "fields": [{"name": "temp", "type": "double"}]}))
    write_lines(queries, {"id": "typo", "text": "SELECT Bx.temp FROM Bx"})
    write_lines(events, event("B", "p1", 1, temp=39))
    assert_bad_input(run_small(small, "--schemas", schemas), small, "queries.jsonl:1:",
                     "expected a known stream (B), found 'Bx'")


def test_a_stream_without_events_still_gets_its_query_checked(small):
    """The stand-in schema takes each column's type from its use; conflicting uses are
    the same type mismatch a real schema would give."""
    _, queries, events, _ = small
    write_lines(queries, {"id": "odd", "text": "SELECT * FROM Z WHERE Z.a = 'x' and Z.a > 1"})
    write_lines(events, event("B", "p1", 1, temp=39))
    assert_bad_input(run_small(small), small, "queries.jsonl:1:", "query odd", "type mismatch")


def test_stand_in_columns_take_the_type_their_use_implies():
    from juggler.language import unknown_streams

    N, S, BOOL = ColumnType.NUMBER, ColumnType.STRING, ColumnType.BOOLEAN
    catalog = {"B": {"temp": N, "alert": S}, "H": {"vib": N}}
    text = ("SELECT Z.f FROM B, Z MaxWindow 1s WHERE Z.a = 'x' and Z.b = B.temp and Z.c + 1 > 2 "
            "and Z.d = true and Z.e = Z.a and B.alert = Z.g and Z.ts > B.ts")
    assert unknown_streams("q", text, catalog) == {
        "Z": {"a": S, "b": N, "c": N, "d": BOOL, "e": S, "g": S, "f": N}}
    assert unknown_streams("q", "SELECT * FROM BH MaxWindow 1s", catalog) == {}
    assert unknown_streams("q", "SELECT * FROM B", catalog) == {}
    assert unknown_streams("q", "SELECT FROM", catalog) == {}


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(), lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=6))
def test_a_results_line_is_what_json_dumps_writes(obj: dict) -> None:
    """eval's lines (and the Spark backfill's) are written by a C encoder made once:
    byte for byte `json.dumps` with eval's options, non-ASCII text kept as it is."""
    assert jsonl_line(obj) == json.dumps(obj, separators=(",", ":"), ensure_ascii=False,
                                         allow_nan=False) + "\n"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_number_is_refused_as_json_dumps_refuses_it(value: float) -> None:
    with pytest.raises(ValueError):
        jsonl_line({"row": {"x": value}})
