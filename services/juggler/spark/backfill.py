"""`juggler spark backfill`: a registered query over an archive, at Spark scale.

PSoup's idea (new queries over old data) with docs/semantics.md's semantics: the query counts
as registered before the archive's first event, exactly like `juggler eval`'s
queries.jsonl, so the results are every combination of accepted events that the
query's predicates and MAXWINDOW admit (semantics 3), each once. Accepted means:

- well-formed: key, ts, position and every column present, numbers finite (the
  worker dead-letters the rest, and they move nobody's `maxts`);
- not late: `ts >= maxts - L`, where maxts is the largest ts of the key's earlier
  accepted events (any stream) in **position order** (the archive's arrival order).

Retention and the floor cannot remove anything a result needs when the query is
registered first (a result's events are within MAXWINDOW <= H of its last one), so
they play no part here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from juggler.codec.avro import RESULT, Codec
from juggler.engine.events import Result
from juggler.language.model import TIMESTAMP, ColumnRef, Query
from juggler.runtime.topic_names import TopicNames
from juggler.spark import streams, wire
from juggler.spark.archive import (
    KEY,
    POSITION,
    avro_fields,
    data_columns,
    read_archive,
    stream_schema,
)
from juggler.spark.errors import JobError
from juggler.spark.progress import Progress
from juggler.spark.sql import BackfillStatement, compile_statement, exact_holds
from juggler.wire.names import QUERY_HEADER

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

VIEW_PREFIX = "juggler_backfill_"


@dataclass(frozen=True)
class Accepted:
    """The accepted events of each stream, and how many of the archive's were not."""

    frames: dict[str, DataFrame]
    late: int
    malformed: int


def accepted_events(frames: Mapping[str, DataFrame], codec: Codec,
                    allowed_lateness: int) -> Accepted:
    """Drop malformed rows, then late events (semantics 3), judged over all streams in
    position order; malformed rows move no key's maxts."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    arrivals = None
    for stream, frame in frames.items():
        checks = [F.col(c).isNotNull() for c in frame.columns]
        checks += [~F.isnan(c) & (F.abs(c) != float("inf"))
                   for c, kind in data_columns(codec, stream) if kind in ("float", "double")]
        part = frame.select(KEY, TIMESTAMP, POSITION, _all(checks).alias("wellformed"))
        arrivals = part if arrivals is None else arrivals.unionByName(part)
    assert arrivals is not None
    earlier = Window.partitionBy(KEY).orderBy(POSITION).rowsBetween(Window.unboundedPreceding, -1)
    maxts = F.max(F.when(F.col("wellformed"), F.col(TIMESTAMP))).over(earlier)
    verdict = (F.when(~F.col("wellformed"), "malformed")
               .when(F.col(TIMESTAMP) < maxts - F.lit(allowed_lateness), "late")
               .otherwise("accepted"))
    judged = arrivals.select(POSITION, verdict.alias("verdict")).cache()
    counts = dict(tuple(r) for r in judged.groupBy("verdict").count().collect())
    rejected = judged.filter(F.col("verdict") != "accepted").select(POSITION)
    accepted = {s: f.join(rejected, POSITION, "left_anti") for s, f in frames.items()}
    return Accepted(accepted, counts.get("late", 0), counts.get("malformed", 0))


def statement(query: Query, codec: Codec) -> BackfillStatement:
    """The Spark SQL statement of `query` (views named `juggler_backfill_<S>`)."""
    types = {s: dict(avro_fields(codec, s)) for s in query.streams}
    return compile_statement(query, types, {s: VIEW_PREFIX + s for s in query.streams})


def results(spark: SparkSession, query: Query, accepted: Accepted,
            codec: Codec) -> tuple[BackfillStatement, DataFrame]:
    """The query's results as rows of the statement's columns (see `juggler.spark.sql`),
    near-boundary rows already decided exactly."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType

    for stream in query.streams:
        accepted.frames[stream].createOrReplaceTempView(VIEW_PREFIX + stream)
    compiled = statement(query, codec)
    rows = spark.sql(compiled.sql)
    if not compiled.near:
        return compiled, rows
    predicates = compiled.near

    def decide(*values: Any) -> bool:
        return all(not values[3 * i] or exact_holds(p, values[3 * i + 1], values[3 * i + 2])
                   for i, p in enumerate(predicates))

    checks = [F.col(f"{name}_{i}") for i in range(len(predicates))
              for name in ("near", "x", "y")]
    any_near = _any([F.col(f"near_{i}") for i in range(len(predicates))])
    exact = F.udf(decide, BooleanType())
    decided = rows.filter(~any_near).unionByName(rows.filter(any_near).filter(exact(*checks)))
    return compiled, decided


def ordered(rows: DataFrame, compiled: BackfillStatement) -> DataFrame:
    """`juggler eval`'s order: by the position of each result's last event, then by
    the sources' positions in FROM order (naive engine: one event's results by
    registration, then positions)."""
    sources = [f"src_{i}" for i in range(len(compiled.query.streams))]
    return rows.orderBy("last_position", *sources)


def to_results(rows: Iterator[Any], compiled: BackfillStatement) -> Iterator[Result]:
    """Statement rows as engine `Result`s, with archive positions as `sources`."""
    query = compiled.query
    for row in rows:
        yield Result(query=query.id, key=row[KEY], ts=row[TIMESTAMP],
                     sources={s: row[f"src_{i}"] for i, s in enumerate(query.streams)},
                     row={name: row[f"row_{j}"] for j, name in enumerate(compiled.row_names)})


def run(spark: SparkSession, query: Query, archive: Path, codec: Codec, progress: Progress,
        *, allowed_lateness: int = 0, out: Path | None = None,
        bootstrap: str | None = None, names: TopicNames = streams.UNPREFIXED) -> None:
    """Backfill `query` over `archive` into the JSON-lines file `out` (eval's format,
    written atomically) or, without `out`, onto the query's results topic."""
    from pyspark.sql import functions as F

    from juggler.offline import atomic_outputs, jsonl_line

    frames = read_archive(spark, archive, codec)
    for stream in query.streams:  # a stream the archive lacks has no events
        if stream not in frames:
            frames[stream] = spark.createDataFrame([], stream_schema(codec, stream))
    accepted = accepted_events(frames, codec, allowed_lateness)
    progress.note(f"{accepted.late:,} late and {accepted.malformed:,} malformed events "
                  f"left out")
    compiled, rows = results(spark, query, accepted, codec)
    if out is not None:
        with atomic_outputs(out) as (handle,):
            assert handle is not None
            iterator = ordered(rows, compiled).toLocalIterator(prefetchPartitions=True)
            for result in to_results(iterator, compiled):
                handle.write(jsonl_line(result.to_json()))
                progress.done += 1
        return
    assert bootstrap is not None
    records = rows.select(F.col(KEY).cast("binary").alias("key"),
                          result_message(compiled, codec, names).alias("value"),
                          "last_position", *source_columns(compiled))
    # the shared results topic, with the query id in the header as the worker writes it
    header = F.struct(F.lit(QUERY_HEADER).alias("key"),
                      F.lit(query.id).cast("binary").alias("value"))
    records = (records.withColumn("topic", F.lit(names.all_results))
               .withColumn("headers", F.array(header)).cache())
    progress.total = records.count()
    streams.write(records, bootstrap, ["last_position", *source_columns(compiled)])
    progress.advance(progress.total)


def source_columns(compiled: BackfillStatement) -> list[str]:
    return [f"src_{i}" for i in range(len(compiled.query.streams))]


def result_message(compiled: BackfillStatement, codec: Codec, names: TopicNames) -> Column:
    """A `juggler.Result` message (Avro single-object) per row. Positions become
    `{topic: the stream's topic, partition: -1, offset: archive position}`: partition
    -1 says the event came from an archive, not a Kafka partition. Row values go into
    the union's branch for their type (Spark names the branches member0..member3:
    boolean, long, double, string)."""
    from pyspark.sql import functions as F

    query = compiled.query
    sources = F.create_map(*(x for i, s in enumerate(query.streams) for x in (
        F.lit(s), F.struct(F.lit(names.stream(s)).alias("topic"),
                           F.lit(-1).alias("partition"),
                           F.col(f"src_{i}").alias("offset")))))
    members = [("member0", "boolean"), ("member1", "long"), ("member2", "double"),
               ("member3", "string")]
    branch = {"boolean": "member0", "int": "member1", "long": "member1",
              "float": "member2", "double": "member2", "string": "member3"}
    entries = []
    for j, name in enumerate(compiled.row_names):
        ref = ColumnRef(*name.split(".", 1))
        kind = "long" if ref.column == TIMESTAMP else dict(avro_fields(codec, ref.stream))[ref.column]
        value = F.struct(*((F.col(f"row_{j}") if member == branch[kind] else F.lit(None))
                           .cast(spark_type).alias(member) for member, spark_type in members))
        entries += [F.lit(name), value]
    record = F.struct(F.lit(query.id).alias("query"), F.col(KEY).alias("key"),
                      F.col(TIMESTAMP).alias("ts"), sources.alias("sources"),
                      F.create_map(*entries).alias("row"))
    return wire.encode(record, codec, RESULT)


def _all(conditions: list[Column]) -> Column:
    from functools import reduce

    return reduce(lambda a, b: a & b, conditions)


def _any(conditions: list[Column]) -> Column:
    from functools import reduce

    return reduce(lambda a, b: a | b, conditions)
