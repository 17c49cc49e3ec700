"""`juggler spark replay`: recorded events back onto the stream topics, in event-time order.

Sources: an archive (`juggler.spark.archive`), or the stream topics themselves
(under `source_names`' prefix), of which the events with `start_ts <= ts < end_ts`
are taken. Topic records are re-published byte for byte; records that do not decode
as their stream's schema are skipped and counted (the worker dead-lettered them
already).

Order: by ts, then by arrival (archive position; for topics: topic, partition,
offset), each key's events through one producer (`juggler.spark.streams.write`).
With a speed factor X, event time is cut into slices of X seconds and slice i is
written i seconds after the first, so X = 1 replays at the recorded pace and X = 10
ten times faster; the order inside a slice is kept, not the gaps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from juggler.codec.avro import Codec
from juggler.wire.names import STREAM_PREFIX
from juggler.language.model import TIMESTAMP
from juggler.runtime.topic_names import TopicNames
from juggler.spark import streams
from juggler.spark.archive import read_archive
from juggler.spark.errors import BadInput
from juggler.spark.progress import Pacer, Progress

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class TopicRange:
    """The stream topics under `names`' prefix, events with start_ts <= ts < end_ts."""

    names: TopicNames
    start_ts: int
    end_ts: int


def check(source: Path | TopicRange, speed: float | None) -> None:
    if speed is not None and not speed > 0:
        raise BadInput(f"--speed must be a positive factor, got {speed}")
    if isinstance(source, TopicRange) and source.start_ts >= source.end_ts:
        raise BadInput(f"--start-ts {source.start_ts} must be less than --end-ts "
                       f"{source.end_ts}")


def records(spark: SparkSession, codec: Codec, source: Path | TopicRange, bootstrap: str,
            names: TopicNames, progress: Progress) -> tuple[DataFrame, list[str]]:
    """The records to write (topic, key, value, ts, ordering columns) and the order."""
    from pyspark.sql import functions as F

    if isinstance(source, Path):
        frames = read_archive(spark, source, codec)
        return streams.to_records(frames, codec, names), [TIMESTAMP, "position"]
    recorded = streams.read_topics(spark, bootstrap, codec, source.names).cache()
    undecodable = recorded.filter(F.col(TIMESTAMP).isNull()).count()
    if undecodable:
        progress.note(f"skipped {undecodable:,} records that do not decode")
    target = F.concat(F.lit(names.prefix + STREAM_PREFIX), F.col("stream"))
    chosen = recorded.filter((F.col(TIMESTAMP) >= source.start_ts)
                             & (F.col(TIMESTAMP) < source.end_ts))
    return (chosen.select(target.alias("topic"), "key", "value", TIMESTAMP,
                          F.col("topic").alias("source_topic"), "partition", "offset"),
            [TIMESTAMP, "source_topic", "partition", "offset"])


def run(spark: SparkSession, codec: Codec, source: Path | TopicRange, bootstrap: str,
        progress: Progress, *, names: TopicNames = streams.UNPREFIXED,
        speed: float | None = None) -> None:
    from pyspark.sql import functions as F

    check(source, speed)
    streams.ensure_topics(bootstrap, names, codec)
    chosen, order = records(spark, codec, source, bootstrap, names, progress)
    chosen = chosen.cache()
    if speed is None:
        progress.total = chosen.count()
        streams.write(chosen, bootstrap, order)
        progress.advance(progress.total)
        return
    earliest = chosen.agg(F.min(TIMESTAMP)).first()
    first = earliest[0] if earliest is not None else None
    if first is None:  # nothing in the range
        return
    width = speed * 1000.0  # ms of event time per second of wall time
    sliced = chosen.withColumn("slice", F.floor((F.col(TIMESTAMP) - F.lit(first)) / width))
    counts = sorted(tuple(r) for r in sliced.groupBy("slice").count().collect())
    progress.total = sum(count for _, count in counts)
    pacer = Pacer(1.0)
    for index, count in counts:
        pacer.wait(index)
        streams.write(sliced.filter(F.col("slice") == index), bootstrap, order)
        progress.advance(count)
