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
    out = tmp / f"{query['id']}-{lateness}.jsonl"
    juggler_spark(session, "backfill", "--query-id", query["id"], "--text", query["text"],
                  "--archive", str(archive), "--out", str(out),
                  "--allowed-lateness", str(lateness))
    return [json.loads(line) for line in out.read_text().splitlines()]


def assert_backfill_is_eval(session: Any, tmp: Path, queries: list[dict], events: Path,
                            archive: Path, lateness: int) -> Counter[str]:
    """Each query's backfill equals its share of eval's results, in eval's order;
    returns the number of results compared per query."""
    queries_file = tmp / "queries.jsonl"
    queries_file.write_text("".join(json.dumps(q) + "\n" for q in queries))
    expected = eval_results(queries_file, events, tmp / "eval.jsonl", lateness)
    for query in queries:
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
    # no --text: the query is the one registered on the (prefixed) control topic
    assert apply_topics(kafka_bootstrap, prefix=prefix).ok
    Client(kafka_bootstrap, prefix).command("REGISTER", query["id"], query["text"])
    stderr = juggler_spark(session, "backfill", "--bootstrap", kafka_bootstrap,
                           "--topic-prefix", prefix, "--query-id", query["id"],
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
    def canonical(r: dict) -> str:
        return json.dumps(r, sort_keys=True)

    assert in_file and sorted(on_topic, key=canonical) == sorted(in_file, key=canonical)
