"""The Spark jobs in local mode against the real broker: generate, replay, backfill.

One SparkSession serves the whole module (starting one costs tens of seconds), and
the jobs run through their `juggler spark ...` commands in-process, so the CLI,
the progress lines and the exit statuses are what is tested. Each test writes under
its own topic prefix.

Backfill is held against `juggler eval` on the same events: the bundled ICU example
and a generated set with many keys, late events and predicates that need exact
arithmetic. Numbers are compared as JSON values (`120 == 120.0`): eval repeats the
input's spelling, the archive holds the schema's doubles, like the worker.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from juggler.codec.avro import Codec, DecodeError, SchemaViolation
from juggler.spark.cli import spark as spark_group
from test_worker_harness import Client, unique

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ICU = ROOT / "examples" / "icu"
STREAMS = ("B", "H", "K", "T")

GENERATED_QUERIES = [
    {"id": "pairs", "text": "SELECT * FROM B, H MaxWindow 2 sec "
                            "WHERE B.temp > H.vib * 0.5 AND B.ts <= H.ts"},
    {"id": "exact", "text": "SELECT B.pressure, T.fluct FROM B, T MaxWindow 3 sec "
                            "WHERE B.pressure * 0.3 <= T.fluct * 0.1 + 0.7 AND T.ts > B.ts"},
    # 83 results in exact arithmetic; comparing doubles would give 124
    {"id": "equal", "text": "SELECT B.temp, T.degree FROM B, T MaxWindow 2 sec "
                            "WHERE B.temp = T.degree * 0.5 + 18.5"},
    {"id": "three", "text": "SELECT H.alert, T.ts FROM B, H, T Window B.ts < H.ts "
                            "MaxWindow 1500 ms WHERE H.beatrate gt 100 AND "
                            "B.pressure > T.fluct AND T.degree >= B.temp"},
    {"id": "single", "text": "SELECT * FROM K WHERE K.fluid < 25.5"},
]


@pytest.fixture(scope="module")
def session() -> Any:
    from juggler.spark.session import spark_session

    spark = spark_session("juggler-tests")
    yield spark
    spark.stop()


@pytest.fixture(scope="module")
def codec() -> Codec:
    return Codec(registry_url="")


def juggler_spark(session: Any, *args: str) -> str:
    """Run `juggler spark ARGS` in this process (sharing the session); return stderr,
    where the progress lines go. Fails the test on a non-zero exit status."""
    result = CliRunner().invoke(spark_group, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output + result.stderr
    return result.stderr


def eval_results(queries: Path, events: Path, out: Path, lateness: int) -> list[dict]:
    subprocess.run([sys.executable, "-m", "juggler.cli", "eval", "--queries", str(queries),
                    "--events", str(events), "--out", str(out),
                    "--allowed-lateness", str(lateness)], check=True, capture_output=True)
    return [json.loads(line) for line in out.read_text().splitlines()]


def backfill_results(session: Any, tmp: Path, archive: Path, query: dict,
                     lateness: int) -> list[dict]:
    """The per-query Spark SQL reference's results for one query."""
    out = tmp / f"{query['id']}-{lateness}.jsonl"
    juggler_spark(session, "backfill", "--reference", "--query-id", query["id"],
                  "--text", query["text"], "--archive", str(archive), "--out", str(out),
                  "--allowed-lateness", str(lateness))
    return [json.loads(line) for line in out.read_text().splitlines()]


def shared_results(session: Any, tmp: Path, archive: Path, queries_file: Path,
                   lateness: int) -> list[dict]:
    """The shared job's results: every query of the file in one job."""
    out = tmp / f"shared-{lateness}.jsonl"
    stderr = juggler_spark(session, "backfill", "--queries", str(queries_file),
                           "--archive", str(archive), "--out", str(out),
                           "--allowed-lateness", str(lateness))
    assert "stage" in stderr and "Spark UI" in stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def write_queries(tmp: Path, queries: list[dict]) -> Path:
    queries_file = tmp / "queries.jsonl"
    queries_file.write_text("".join(json.dumps(q) + "\n" for q in queries))
    return queries_file


def assert_backfill_is_eval(session: Any, tmp: Path, queries: list[dict], events: Path,
                            archive: Path, lateness: int,
                            reference: list[dict] | None = None) -> Counter[str]:
    """The shared job's results equal eval's, in eval's order, and so does each
    reference query's (all by default) per-query Spark SQL job its share of them;
    returns the number of results compared per query."""
    queries_file = write_queries(tmp, queries)
    expected = eval_results(queries_file, events, tmp / "eval.jsonl", lateness)
    assert shared_results(session, tmp, archive, queries_file, lateness) == expected
    for query in queries if reference is None else reference:
        got = backfill_results(session, tmp, archive, query, lateness)
        assert got == [r for r in expected if r["query"] == query["id"]], query["id"]
    return Counter(r["query"] for r in expected)


def icu_events_without_commands(tmp: Path) -> Path:
    """The bundled events with the control lines blanked: backfill registers its
    query before all events, and blank lines keep eval's line numbers."""
    lines = (ICU / "events.jsonl").read_text().splitlines()
    events = tmp / "icu-events.jsonl"
    events.write_text("".join(("" if '"control"' in line else line) + "\n" for line in lines))
    return events


@pytest.fixture(scope="module")
def icu_archive(session: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("icu")
    events = icu_events_without_commands(tmp)
    archive = tmp / "archive"
    stderr = juggler_spark(session, "archive", "--events", str(events), "--archive", str(archive))
    assert "archive: done, 38 events" in stderr
    return events, archive


@pytest.mark.parametrize("lateness", [0, 1000])
def test_backfill_equals_eval_on_the_icu_example(session: Any, tmp_path: Path,
                                                 icu_archive: tuple[Path, Path],
                                                 lateness: int) -> None:
    events, archive = icu_archive
    queries = [json.loads(line) for line in (ICU / "queries.jsonl").read_text().splitlines()]
    compared = assert_backfill_is_eval(session, tmp_path, queries, events, archive, lateness)
    assert sum(compared.values()) >= 10


def test_backfill_equals_eval_on_generated_events_with_many_keys(
        session: Any, tmp_path: Path, codec: Codec) -> None:
    from juggler.spark.archive import export_events

    archive = tmp_path / "archive"
    juggler_spark(session, "generate", "--seed", "7", "--count", "6000", "--keys", "60",
                  "--late-fraction", "0.03", "--archive", str(archive))
    events = tmp_path / "events.jsonl"
    assert export_events(session, archive, codec, events) == 6000
    assert len({json.loads(line)["key"] for line in events.read_text().splitlines()}) == 60
    compared = assert_backfill_is_eval(session, tmp_path, GENERATED_QUERIES, events,
                                       archive, lateness=0)
    assert all(compared[q["id"]] > 0 for q in GENERATED_QUERIES), compared


def with_control_lines(events: Path, out: Path, commands: dict[int, dict]) -> Path:
    """`events` with control lines put in before the given 0-based event numbers."""
    lines = events.read_text().splitlines()
    with open(out, "w", encoding="utf-8") as handle:
        for number, line in enumerate(lines):
            if number in commands:
                handle.write(json.dumps(commands[number]) + "\n")
            handle.write(line + "\n")
    return out


def test_shared_backfill_applies_control_lines_on_many_keys_with_late_events(
        session: Any, tmp_path: Path, codec: Codec) -> None:
    """Registrations (with and without history) and a deregistration at their
    positions, over 60 keys with late events: the shared job gives eval's results;
    the reference gives each query's share from where it was registered to where it
    was removed."""
    from juggler.spark.archive import export_events

    generated = tmp_path / "generated"
    juggler_spark(session, "generate", "--seed", "11", "--count", "4000", "--keys", "60",
                  "--late-fraction", "0.03", "--archive", str(generated))
    plain = tmp_path / "plain.jsonl"
    export_events(session, generated, codec, plain)
    pairs, exact, equal, three, single = GENERATED_QUERIES
    events = with_control_lines(plain, tmp_path / "events.jsonl", {
        1000: {"control": "register", "id": "late-pairs", "text": pairs["text"]},
        1500: {"control": "register", "id": "history", "text": exact["text"],
               "history": True},
        2500: {"control": "deregister", "id": "three"},
        3000: {"control": "deregister", "id": "late-pairs"},
    })
    archive = tmp_path / "archive"
    juggler_spark(session, "archive", "--events", str(events), "--archive", str(archive))
    queries = [pairs, three, single]
    queries_file = write_queries(tmp_path, queries)
    lateness = 500
    expected = eval_results(queries_file, events, tmp_path / "eval.jsonl", lateness)
    got = shared_results(session, tmp_path, archive, queries_file, lateness)
    assert Counter(map(canonical, got)) == Counter(map(canonical, expected))
    # one registration's history results come by key; every other result in eval's order
    assert ([r for r in got if r["query"] != "history"]
            == [r for r in expected if r["query"] != "history"])
    counts = Counter(r["query"] for r in expected)
    assert all(counts[q] > 0 for q in ("pairs", "three", "single", "late-pairs", "history"))
    assert sum(1 for r in expected if r["query"] == "history"
               and max(r["sources"].values()) < 1500) > 0  # history results exist

    def between(query: dict, start: int, end: int) -> list[dict]:
        return [r for r in backfill_results(session, tmp_path, archive, query, lateness)
                if start < max(r["sources"].values()) < end]

    assert between(three, -1, 2500 + 2) == [r for r in expected if r["query"] == "three"]
    renamed = [{**r, "query": "late-pairs"} for r in between(pairs, 1000, 3000 + 3)]
    assert renamed == [r for r in expected if r["query"] == "late-pairs"]


def test_shared_backfill_of_the_icu_example_with_its_control_lines(
        session: Any, tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    juggler_spark(session, "archive", "--events", str(ICU / "events.jsonl"),
                  "--archive", str(archive))
    for lateness in (0, 1000):
        expected = eval_results(ICU / "queries.jsonl", ICU / "events.jsonl",
                                tmp_path / "eval.jsonl", lateness)
        got = shared_results(session, tmp_path, archive, ICU / "queries.jsonl", lateness)
        assert Counter(map(canonical, got)) == Counter(map(canonical, expected))
        assert {r["query"] for r in got} >= {"q1", "q2"}


def test_a_parquet_archive_of_juggler_is_read_without_a_spark_job(
        session: Any, icu_archive: tuple[Path, Path], codec: Codec) -> None:
    """Opening an archive `juggler spark archive` wrote runs no Spark job (its streams'
    schemas are known, not inferred): each backfill over it starts with its own work."""
    from juggler.spark.archive import read_archive

    _, archive = icu_archive
    context = session.sparkContext
    context.setJobGroup("juggler-read-archive", "reading the ICU archive")
    try:
        frames = read_archive(session, archive, codec)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    assert set(frames) == {"B", "H", "K", "T"}
    assert list(context.statusTracker().getJobIdsForGroup("juggler-read-archive")) == []


def test_a_stream_directory_without_data_files_is_a_stream_without_events(
        session: Any, tmp_path: Path, icu_archive: tuple[Path, Path], codec: Codec) -> None:
    """A stream's directory holding no data file (only Spark's `_SUCCESS`, as an empty
    table's would) reads as no events of that stream, with its columns, as Spark reads
    an empty table it knows the schema of; the other streams are read as they are."""
    import shutil

    from juggler.spark.archive import read_archive, stream_schema

    _, written = icu_archive
    archive = tmp_path / "archive"
    shutil.copytree(written, archive)
    shutil.rmtree(archive / "K")
    (archive / "K").mkdir()
    (archive / "K" / "_SUCCESS").write_text("")
    frames = read_archive(session, archive, codec)
    assert frames["K"].count() == 0
    assert frames["K"].schema == stream_schema(codec, "K")
    before = read_archive(session, written, codec)
    assert {s: frames[s].count() for s in "BHT"} == {s: before[s].count() for s in "BHT"}


@pytest.mark.parametrize("archive_format", ["parquet", "avro"])
def test_backfill_reads_archive_columns_by_name_and_names_a_missing_one(
        session: Any, tmp_path: Path, codec: Codec, archive_format: str) -> None:
    """An archive written by another tool: a column beyond the stream's schema is left
    out and one of another type is read as the schema's, so the results are eval's;
    an archive without one of a stream's columns fails naming it, before any job."""
    from pyspark.sql import functions as F

    from juggler.spark.archive import CONTROL_FILE, read_archive, write_archive

    written = tmp_path / "written"
    juggler_spark(session, "archive", "--events", str(ICU / "events.jsonl"),
                  "--archive", str(written), "--format", archive_format)
    frames = read_archive(session, written, codec)
    frames["B"] = frames["B"].withColumn("ward", F.lit("north"))
    frames["T"] = frames["T"].withColumn("position", F.col("position").cast("int"))
    other = tmp_path / "other"
    write_archive(frames, other, archive_format)
    (other / CONTROL_FILE).write_text((written / CONTROL_FILE).read_text())
    expected = eval_results(ICU / "queries.jsonl", ICU / "events.jsonl",
                            tmp_path / "eval.jsonl", 0)
    got = shared_results(session, tmp_path, other, ICU / "queries.jsonl", 0)
    assert Counter(map(canonical, got)) == Counter(map(canonical, expected))

    frames["H"] = frames["H"].drop("vib")
    write_archive(frames, other, archive_format)
    result = CliRunner().invoke(spark_group, [
        "backfill", "--queries", str(ICU / "queries.jsonl"), "--archive", str(other),
        "--out", str(tmp_path / "never.jsonl")])
    assert result.exit_code == 2
    assert (f"archive {other / 'H'}: missing column(s) vib (an archive holds key, ts, "
            f"position and H's fields)") in result.stderr
    assert not (tmp_path / "never.jsonl").exists()


def test_a_query_that_does_not_compile_fails_the_backfill_with_its_place(
        session: Any, tmp_path: Path) -> None:
    """The queries compile on a thread while Spark plans the archive: a bad one still
    ends the command with exit status 2, its id, line and column, and no output."""
    archive, out = tmp_path / "archive", tmp_path / "never.jsonl"
    juggler_spark(session, "archive", "--events", str(ICU / "events.jsonl"),
                  "--archive", str(archive))
    queries = tmp_path / "queries.jsonl"
    queries.write_text((ICU / "queries.jsonl").read_text() + json.dumps(
        {"id": "bad", "text": "SELECT * FROM B\nWHERE B.temp >> 3"}) + "\n")
    result = CliRunner().invoke(spark_group, ["backfill", "--queries", str(queries),
                                              "--archive", str(archive), "--out", str(out)])
    assert result.exit_code == 2, result.output + result.stderr
    assert "query bad, WHERE clause, line 2, column 15" in result.stderr
    assert not out.exists()


def test_shared_backfill_of_fifty_generated_queries(session: Any, tmp_path: Path) -> None:
    """Workload J's first 50 queries: one shared job equals eval; the reference
    agrees on a sample (a job per query is what the shared job saves)."""
    from bench.spark_backfill import write_workload

    queries_file, events = write_workload(tmp_path, 50, 6000)
    archive = tmp_path / "archive"
    juggler_spark(session, "archive", "--events", str(events), "--archive", str(archive))
    queries = [json.loads(line) for line in queries_file.read_text().splitlines()]
    # the reference on the first query and on the one with the most results
    compared = assert_backfill_is_eval(session, tmp_path, queries, events, archive, 0,
                                       reference=[queries[0], queries[42]])
    assert len(compared) >= 20 and sum(compared.values()) >= 500, compared


def canonical(result: dict) -> str:
    """A result as comparable text: numbers as floats (eval repeats the input's 120,
    the archive holds 120.0)."""
    row = {k: float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
           for k, v in result["row"].items()}
    return json.dumps({**result, "row": row}, sort_keys=True)


def read_stream_topics(client: Client) -> dict[str, list[Any]]:
    return {s: client.read(client.names.stream(s)) for s in STREAMS}


def test_generate_writes_deterministic_copartitioned_events_and_bad_ones(
        session: Any, kafka_bootstrap: str, codec: Codec) -> None:
    prefixes = [unique("spark-gen-"), unique("spark-gen-")]
    for prefix in prefixes:
        stderr = juggler_spark(session, "generate", "--bootstrap", kafka_bootstrap,
                               "--seed", "42", "--count", "4000", "--keys", "50",
                               "--late-fraction", "0.05", "--malformed-fraction", "0.05",
                               "--lateness", "500", "--topic-prefix", prefix)
        assert "generate: 4,000/4,000 (100%) events" in stderr
    first, second = (read_stream_topics(Client(kafka_bootstrap, p)) for p in prefixes)
    as_bytes = {s: Counter((m.key(), m.value()) for m in first[s]) for s in STREAMS}
    assert as_bytes == {s: Counter((m.key(), m.value()) for m in second[s]) for s in STREAMS}
    assert sum(len(messages) for messages in first.values()) == 4000

    outcomes: Counter[str] = Counter()
    partitions: dict[bytes, set[int]] = defaultdict(set)
    late = 0
    by_key: dict[tuple[str, bytes], list[int]] = defaultdict(list)
    for stream, messages in first.items():
        for m in messages:
            partitions[m.key()].add(m.partition())
            try:
                event = codec.event_from(stream, m.key(), m.value(), None)
            except (DecodeError, SchemaViolation) as exc:
                outcomes[type(exc).__name__] += 1
                continue
            outcomes["ok"] += 1
            by_key[(stream, m.key())].append(event.ts)
    for stamps in by_key.values():
        newest = stamps[0]
        for ts in stamps:
            late += ts < newest - 500
            newest = max(newest, ts)
    assert 120 <= outcomes["DecodeError"] + outcomes["SchemaViolation"] <= 290
    assert outcomes["DecodeError"] and outcomes["SchemaViolation"]
    assert 60 <= late <= 240  # late within one stream topic alone, past the lateness
    assert all(len(p) == 1 for p in partitions.values())  # a key's streams co-partitioned
    client = Client(kafka_bootstrap, prefixes[0])
    key, seen = next(iter(partitions.items()))
    assert client.send_raw(client.names.stream("B"), key, b"x")[1] in seen  # murmur2


def test_replay_archive_in_event_time_order(session: Any, kafka_bootstrap: str,
                                            tmp_path: Path, codec: Codec) -> None:
    from juggler.spark.archive import export_events

    archive = tmp_path / "archive"
    juggler_spark(session, "generate", "--seed", "3", "--count", "3000", "--keys", "20",
                  "--late-fraction", "0.1", "--archive", str(archive),
                  "--archive-format", "avro")
    prefix = unique("spark-replay-")
    stderr = juggler_spark(session, "replay", "--bootstrap", kafka_bootstrap,
                           "--from-archive", str(archive), "--topic-prefix", prefix)
    assert "replay: done, 3,000 events" in stderr
    export_events(session, archive, codec, tmp_path / "events.jsonl")
    recorded = Counter()
    for line in (tmp_path / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        recorded[(event["stream"], event["key"], event["ts"],
                  json.dumps(event["data"], sort_keys=True))] += 1
    replayed = Counter()
    for stream, messages in read_stream_topics(Client(kafka_bootstrap, prefix)).items():
        stamps: dict[bytes, list[int]] = defaultdict(list)
        for m in messages:
            event = codec.event_from(stream, m.key(), m.value(), None)
            replayed[(stream, event.key, event.ts, json.dumps(event.data, sort_keys=True))] += 1
            stamps[m.key()].append(event.ts)
        assert all(ts == sorted(ts) for ts in stamps.values()), stream
    assert replayed == recorded


def test_replay_from_topics_takes_a_time_range_at_a_speed(
        session: Any, kafka_bootstrap: str, icu_archive: tuple[Path, Path],
        codec: Codec) -> None:
    source, target = unique("spark-src-"), unique("spark-dst-")
    juggler_spark(session, "replay", "--bootstrap", kafka_bootstrap,
                  "--from-archive", str(icu_archive[1]), "--topic-prefix", source)
    client = Client(kafka_bootstrap, source)
    client.send_raw(client.names.stream("B"), b"p1", b"not avro")  # skipped, counted
    started = time.monotonic()
    stderr = juggler_spark(session, "replay", "--bootstrap", kafka_bootstrap,
                           "--from-topics", "--source-prefix", source, "--topic-prefix",
                           target, "--start-ts", "5000", "--end-ts", "12000",
                           "--speed", "4")
    took = time.monotonic() - started
    assert "skipped 1 records that do not decode" in stderr
    expected = Counter()
    for m in [m for s in STREAMS for m in client.read(client.names.stream(s))]:
        try:
            event = codec.event_from(m.topic().rsplit(".", 1)[1], m.key(), m.value(), None)
        except DecodeError:
            continue
        if 5000 <= event.ts < 12000:
            expected[(m.topic().rsplit(".", 1)[1], m.key(), m.value())] += 1
    copied = Counter((s, m.key(), m.value()) for s, messages in
                     read_stream_topics(Client(kafka_bootstrap, target)).items()
                     for m in messages)
    assert copied == expected and sum(copied.values()) >= 10
    assert took >= 1.0  # 7 s of event time at 4x: slices 0 and 1 are a second apart


def test_backfill_to_the_results_topic(session: Any, kafka_bootstrap: str, tmp_path: Path,
                                       icu_archive: tuple[Path, Path], codec: Codec) -> None:
    from juggler.kafka.topics import apply_topics

    prefix = unique("spark-bf-")
    query = json.loads((ICU / "queries.jsonl").read_text().splitlines()[2])  # fig58: SELECT *
    in_file = backfill_results(session, tmp_path, icu_archive[1], query, 0)
    # no query given: every query registered on the (prefixed) control topic, here one
    assert apply_topics(kafka_bootstrap, prefix=prefix).ok
    Client(kafka_bootstrap, prefix).command("REGISTER", query["id"], query["text"])
    stderr = juggler_spark(session, "backfill", "--bootstrap", kafka_bootstrap,
                           "--topic-prefix", prefix,
                           "--archive", str(icu_archive[1]), "--to-topic")
    assert "late and" in stderr
    client = Client(kafka_bootstrap, prefix)
    messages = client.read(client.names.all_results)
    on_topic = []
    for m in messages:
        assert dict(m.headers())["juggler-query"] == query["id"].encode()
        result = codec.decode("juggler.Result", m.value())
        assert m.key() == result["key"].encode()
        assert {p["topic"] for p in result["sources"].values()} <= {
            client.names.stream(s) for s in STREAMS}
        result["sources"] = {s: p["offset"] for s, p in result["sources"].items()}
        on_topic.append(result)
    assert in_file and sorted(on_topic, key=canonical) == sorted(in_file, key=canonical)
