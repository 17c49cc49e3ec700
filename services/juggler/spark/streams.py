"""Stream events between Spark frames and the Kafka stream topics.

Why one module: generate and replay both turn archive-shaped frames (key, ts,
position, data columns) into Kafka records, and both must write them so that the
worker reads each key's events of a topic in order. Kafka keeps order per partition
and Spark's sink writes each of its partitions in order, so records are first
grouped by key into Spark partitions and sorted there; the sink's default partitioner
(Java murmur2 on the key bytes, like the worker's producers) then co-partitions them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from juggler.codec.avro import Codec
from juggler.kafka import topics as kafka_topics
from juggler.kafka.client_config import spark_options
from juggler.language.model import TIMESTAMP
from juggler.runtime.topic_names import TopicNames
from juggler.spark import wire
from juggler.spark.archive import KEY, data_columns
from juggler.spark.errors import JobError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

PRODUCER_OPTIONS = {
    "kafka.acks": "all",
    "kafka.enable.idempotence": "true",  # retries never reorder a partition
    "kafka.linger.ms": "5",
    "kafka.batch.size": "262144",
}
UNPREFIXED = TopicNames()
"""docs/semantics.md's topic names, with no prefix (the jobs' default)."""
WRITE_PARTITIONS = 4
"""Spark partitions (concurrent producers) a write is spread over, by key."""


def ensure_topics(bootstrap: str, names: TopicNames, codec: Codec) -> None:
    """Create the project's topics (and one per stream of the schemas) under the
    prefix, like the worker does; the broker does not auto-create topics."""
    try:
        report = kafka_topics.apply_topics(bootstrap, prefix=names.prefix,
                                           extra_streams=codec.stream_names())
    except kafka_topics.TopicsError as exc:
        raise JobError(str(exc)) from None
    for line in report.mismatches:
        print(f"warning: {line}", file=sys.stderr)
    if report.errors:
        raise JobError("; ".join(report.errors))


def record(codec: Codec, stream: str) -> Column:
    """The Avro record struct of a stream, from an archive-shaped frame's columns."""
    from pyspark.sql import functions as F

    return F.struct(F.col(TIMESTAMP), *(F.col(c) for c, _ in data_columns(codec, stream)))


def framed(codec: Codec, stream: str) -> Column:
    """The message value of an archive-shaped row: its record, Avro single-object."""
    return wire.encode(record(codec, stream), codec, stream)


def to_records(frames: Mapping[str, DataFrame], codec: Codec, names: TopicNames,
               value: Callable[[Codec, str], Column] = framed) -> DataFrame:
    """Kafka records (topic, key, value) of archive-shaped frames, keeping `ts` and
    `position` for ordering."""
    from pyspark.sql import functions as F

    out = None
    for stream, frame in frames.items():
        part = frame.select(F.lit(names.stream(stream)).alias("topic"),
                            F.col(KEY).cast("binary").alias("key"),
                            value(codec, stream).alias("value"), TIMESTAMP, "position")
        out = part if out is None else out.unionByName(part)
    if out is None:
        raise JobError("no streams to write")
    return out


def write(records: DataFrame, bootstrap: str, order: Sequence[str]) -> None:
    """Write (topic, key, value[, headers]) records to Kafka; each key's records go out
    in `order` through one producer."""
    columns = ["topic", "key", "value"] + (["headers"] if "headers" in records.columns else [])
    (records.repartition(WRITE_PARTITIONS, "key").sortWithinPartitions(*order)
     .select(*columns)
     .write.format("kafka").options(**spark_options(bootstrap))
     .options(**PRODUCER_OPTIONS).save())


def read_topics(spark: SparkSession, bootstrap: str, codec: Codec,
                names: TopicNames) -> DataFrame:
    """Every stream topic's records as they are now (earliest to latest offsets,
    read_committed), decoded: columns topic, partition, offset, key, value, stream,
    ts. Records that do not decode as their stream's schema get a null ts."""
    from pyspark.sql import functions as F

    streams = {names.stream(s): s for s in codec.stream_names()}
    raw = (spark.read.format("kafka").options(**spark_options(bootstrap))
           .option("subscribe", ",".join(streams))
           .option("startingOffsets", "earliest").option("endingOffsets", "latest")
           .option("kafka.isolation.level", "read_committed").load())
    ts = None
    for topic, stream in streams.items():
        decoded = wire.decode(F.col("value"), codec, stream)[TIMESTAMP]
        ts = (F.when(F.col("topic") == topic, decoded) if ts is None
              else ts.when(F.col("topic") == topic, decoded))
    assert ts is not None
    stream_of = F.element_at(F.create_map(*(F.lit(x) for pair in streams.items() for x in pair)),
                             F.col("topic"))
    return raw.select("topic", "partition", "offset", "key", "value",
                      stream_of.alias("stream"), ts.alias(TIMESTAMP))
