"""`juggler spark backfill`: every query over an archive in one Spark job, through the
native operator.

One pass over the archive serves all the queries, as the worker's operator shares
work across them: the archive's streams are unioned, partitioned by entity key (a
key's streams meet in one partition, and every key's state is its own: lateness,
maxts, floors and held events are per key, docs/semantics.md), sorted within each
partition by arrival position, and each partition runs one engine over its events
through `juggler.offline.feed`, the driver `juggler eval` uses. So a key's events meet
the same engine calls, in the same order, as in eval, and the results are eval's.

Control lines (kept by `juggler spark archive` in `control.jsonl` beside the streams)
are broadcast: every partition applies each one at its position, because a
registration applies to every key. A registration with history gives, in each
partition, the results over that partition's keys; together, eval's.

`mapPartitions` rather than `mapInArrow`/`mapInPandas`: the engine needs each
partition's whole ordered stream in one Python function, and all three give that.
Arrow would move rows as columns instead of pickled rows, but PySpark's Arrow path
needs pandas and pyarrow on every executor (a few hundred MB the project does not
otherwise use); pickling costs a small share next to the engine (docs/benchmarks.md).
"""

from __future__ import annotations

import math
from itertools import groupby, islice
from operator import attrgetter, itemgetter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from juggler.codec.avro import Codec
from juggler.engine.events import EngineConfig, Event, LateEvent, Position, Result
from juggler.language.model import TIMESTAMP, Query
from juggler.runtime.topic_names import TopicNames
from juggler.spark import merge, streams
from juggler.spark.archive import (KEY, POSITION, data_columns, read_archive,
                                   read_control_lines, sql_type)
from juggler.spark.errors import BadInput
from juggler.spark.progress import Progress
from juggler.wire.commands import Command, RegisterCommand

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import DataFrame, SparkSession

STREAM = "stream"
TRIGGER, SEQ, QUERY = "trigger", "seq", "query"
SEPARATOR = "__"
"""Between a stream and its column in the unioned frame's names (`B__temp`)."""

@dataclass(frozen=True)
class Plan:
    """Everything a partition's engine needs, shipped to executors with the task:
    the queries registered before the first event, the control lines by position
    (each registration already compiled on the driver), and the stream columns."""

    queries: tuple[Query, ...]
    commands: tuple[tuple[int, Command], ...]
    compiled: dict[int, Query]
    columns: dict[str, tuple[str, ...]]
    allowed_lateness: int
    schemas_dir: str | None = None
    stream_topics: dict[str, str] | None = None
    """stream -> topic when results go to Kafka (a source is then `{topic, partition
    -1, offset: position}`); None for eval's JSON lines."""
    results_topic: str = ""


def plan(queries: list[Query], archive: Path, codec: Codec, allowed_lateness: int) -> Plan:
    """Compile the archive's registrations and check the ids' sequence on the driver,
    so a bad control line fails before Spark starts work (as eval fails on it)."""
    from juggler.language import compile_query

    commands = read_control_lines(archive)
    registered = set()
    for query in queries:
        if query.id in registered:
            raise BadInput(f"query {query.id!r} is given twice")
        registered.add(query.id)
    compiled = {}
    for position, command in commands:
        if isinstance(command, RegisterCommand):
            if command.id in registered:
                raise BadInput(f"control line at position {position}: query "
                               f"{command.id!r} is already registered")
            assert command.text is not None  # a control line always has its text
            compiled[position] = compile_query(command.id, command.text, codec.catalog())
            registered.add(command.id)
        elif command.id not in registered:
            raise BadInput(f"control line at position {position}: query {command.id!r} "
                           f"is not registered")
        else:
            registered.discard(command.id)
    columns = {s: tuple(name for name, _ in data_columns(codec, s)) for s in codec.stream_names()}
    return Plan(tuple(queries), tuple(commands), compiled, columns, allowed_lateness,
                str(codec.schemas_dir) if codec.schemas_dir else None)


def arrivals(spark: SparkSession, archive: Path, codec: Codec, partitions: int) -> DataFrame:
    """The archive's events of every stream as one frame (`key, ts, position, stream`
    and every stream's columns as `<S>__<column>`, null for the other streams),
    partitioned by ranges of keys and sorted by position within each partition.

    Ranges rather than a hash of the key: Spark samples the keys (a small job) and
    cuts the ranges so that the partitions hold about as many events each, where a
    hash of a few keys can give one core most of them (workload J's 20 keys hashed 11
    to 9, the second core then idle for the last seconds; docs/benchmarks.md, "Spark
    backfill"). A key still lies in one partition."""
    frames = read_archive(spark, archive, codec)
    every = [(s, c, kind) for s in sorted(frames) for c, kind in data_columns(codec, s)]
    union = None
    for stream, frame in frames.items():
        # as SQL text, one call into the JVM per stream rather than several per column
        part = frame.selectExpr(KEY, TIMESTAMP, POSITION, f"'{stream}' AS {STREAM}", *(
            f"{f'`{c}`' if s == stream else f'CAST(NULL AS {sql_type(kind)})'} "
            f"AS `{s}{SEPARATOR}{c}`" for s, c, kind in every))
        union = part if union is None else union.unionByName(part)
    assert union is not None
    return union.repartitionByRange(partitions, KEY).sortWithinPartitions(POSITION)


def output_schema() -> str:
    """The rows of `evaluate` bound for the results topic, as a frame's schema."""
    return f"{TRIGGER} long, {KEY} string, {SEQ} int, {QUERY} string, value binary"


def evaluate(rows: RDD[Any], names: list[str], plan: Plan,
             counters: dict[str, Any]) -> RDD[tuple[Any, ...]]:
    """Each partition of `rows` (`arrivals`' rows, with the columns `names`) through
    one engine, giving rows (trigger position, key, seq within the
    trigger's results, then the query and its encoded `juggler.Result`, or for eval's
    file the key's run of JSON lines at that trigger, seq its first's), each
    partition's in that order (`juggler.spark.merge.ORDER`). A row per run rather than
    per line because the driver's merge, on one core, handles a row at a time
    (docs/benchmarks.md, "Spark backfill")."""
    columns = {name: i for i, name in enumerate(names)}

    def run(partition: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
        return run_partition(plan, iter(partition), columns, counters)

    return rows.mapPartitions(run)


def run_partition(plan: Plan, rows: Iterator[Any], columns: dict[str, int],
                  counters: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
    """One partition's engine (in an executor): every query registered, then the
    partition's events and the broadcast control lines in position order."""
    import heapq

    from juggler.offline import feed, jsonl_line, make_engine

    engine = make_engine("juggler", EngineConfig(allowed_lateness=plan.allowed_lateness))
    for query in plan.queries:
        engine.register(query)

    def command(position: int, record: Command) -> list[Result]:
        if isinstance(record, RegisterCommand):
            return engine.register(plan.compiled[position], history=record.history)
        engine.deregister(record.id)
        return []

    encode = _encoder(plan) if plan.stream_topics is not None else None
    events = _events(plan, rows, columns, counters)
    merged = heapq.merge(events, plan.commands, key=lambda arrival: arrival[0])
    results = 0
    for position, outcome in feed(engine, merged, command):
        if isinstance(outcome, LateEvent):
            counters["late"].add(1)
            continue
        # a registration's history spans the partition's keys: by key, as they merge
        # (an event's results all have its key)
        if position in plan.compiled:
            outcome = sorted(outcome, key=lambda r: r.key)
        results += len(outcome)
        if encode is not None:
            for seq, result in enumerate(outcome):
                yield position, result.key, seq, result.query, encode(result)
            continue
        seq = 0  # one row per key's run of lines: the driver merges rows, not results
        for key, run in groupby(outcome, key=attrgetter("key")):
            lines = [jsonl_line(result.to_json()) for result in run]
            yield position, key, seq, "".join(lines)
            seq += len(lines)
    counters["results"].add(results)


def _events(plan: Plan, rows: Iterator[Any], columns: dict[str, int],
            counters: dict[str, Any]) -> Iterator[tuple[int, Event]]:
    """The partition's well-formed events as engine events; malformed rows (a null,
    a non-finite number) are counted and left out, as the worker dead-letters them
    before its engine sees them.

    Each row is read as a plain tuple through `itemgetter`s: a pyspark `Row` indexes
    through a Python-level `__getitem__`, a call per column per event."""
    head = itemgetter(columns[KEY], columns[TIMESTAMP], columns[POSITION], columns[STREAM])
    places = {s: (names, _columns([columns[f"{s}{SEPARATOR}{c}"] for c in names]))
              for s, names in plan.columns.items()
              if all(f"{s}{SEPARATOR}{c}" in columns for c in names)}  # archived
    empty = ((), _columns([]))
    for row in rows:
        values = tuple(row)
        key, ts, position, stream = head(values)
        names, take = places.get(stream, empty)
        picked = take(values)
        if key is None or ts is None or position is None or any(
                v is None or (isinstance(v, float) and not math.isfinite(v)) for v in picked):
            counters["malformed"].add(1)
            continue
        yield position, Event(stream, key, ts, dict(zip(names, picked)), position=position)


def _columns(places: list[int]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """What a row holds at `places`, always as a tuple (an `itemgetter` of one place
    gives the bare value, of none cannot be made)."""
    if len(places) > 1:
        return itemgetter(*places)
    if places:
        (at,) = places
        return lambda values: (values[at],)
    return lambda _: ()


def _encoder(plan: Plan) -> Callable[[Result], bytes]:
    """A `juggler.Result` encoder as the worker's (single-object Avro), with archive
    positions as `{topic, partition: -1, offset: position}`."""
    from juggler.codec.avro import RESULT, result_record

    codec = Codec(Path(plan.schemas_dir) if plan.schemas_dir else None, registry_url="")
    topics = plan.stream_topics or {}

    def encode(result: Result) -> bytes:
        sources: dict[str, Position] = {s: (topics[s], -1, p)
                                        for s, p in result.sources.items()}
        record = result_record(Result(result.query, result.key, result.ts, sources,
                                      result.row))
        return codec.encode(RESULT, record, topic=plan.results_topic)

    return encode


def run(spark: SparkSession, queries: Callable[[], list[Query]], archive: Path,
        codec: Codec, progress: Progress, *, allowed_lateness: int = 0,
        out: Path | None = None, bootstrap: str | None = None,
        names: TopicNames = streams.UNPREFIXED) -> None:
    """Backfill every query over `archive` in one job, into the JSON-lines file `out`
    (eval's lines in eval's order, written atomically) or onto the shared results
    topic as the worker writes them.

    `queries` is called once Spark has planned the archive's frame and sampled its
    keys, which is the JVM's work: queries compiled on another thread meanwhile
    overlap it."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from juggler.wire.names import QUERY_HEADER
    from juggler.offline import atomic_outputs

    context = spark.sparkContext
    frame = arrivals(spark, archive, codec, context.defaultParallelism)
    rows = frame.rdd  # Spark plans the frame here, and samples the keys' ranges
    shared = plan(queries(), archive, codec, allowed_lateness)
    if out is None:
        shared = replace(shared, stream_topics={s: names.stream(s)
                                                for s in codec.stream_names()},
                         results_topic=names.all_results)
    counters = {name: context.accumulator(0) for name in ("late", "malformed", "results")}
    batches = evaluate(rows, frame.columns, shared, counters).mapPartitionsWithIndex(
        merge.packed)
    batches.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        batches.count()  # runs the job; its counters are then complete
        progress.total = counters["results"].value
        progress.note(f"{len(shared.queries):,} queries and {len(shared.commands):,} control "
                      f"lines over the archive: {progress.total:,} results; "
                      f"{counters['late'].value:,} late and "
                      f"{counters['malformed'].value:,} malformed events left out")
        if out is not None:
            with atomic_outputs(out) as (handle,):
                assert handle is not None
                merged = merge.ordered(batches, out.parent)
                while chunk := list(islice(merged, merge.BATCH)):  # a write per batch of
                    text = "".join([row[3] for row in chunk])  # rows, not per line
                    handle.write(text)
                    progress.done += text.count("\n")
            return
        assert bootstrap is not None
        header = F.struct(F.lit(QUERY_HEADER).alias("key"),
                          F.col(QUERY).cast("binary").alias("value"))
        results = batches.flatMap(merge.unpacked)
        records = spark.createDataFrame(results, output_schema()).select(
            F.lit(names.all_results).alias("topic"), F.col(KEY).cast("binary").alias("key"),
            "value", F.array(header).alias("headers"), TRIGGER, SEQ)
        streams.write(records, bootstrap, [TRIGGER, SEQ])
        progress.advance(progress.total)
    finally:
        batches.unpersist()
