"""`juggler spark generate`: synthetic events for the example domain's streams.

Every value is a pure function of (seed, event number, what it is for), through
Spark's `xxhash64`, so a run is deterministic for its arguments whatever the number
of Spark partitions or executors. Event n (0-based) is:

- stream: uniform over the schemas' streams; key `k<i>` uniform over `keys`;
- ts: `START_TS + n * step` with `step = max(1, 1000 // rate)` ms (1 ms without
  `--rate`), so up to 1,000 events/s event time keeps pace with the writing;
- columns by Avro type: numbers are drawn from a per-column range (the ICU columns
  have realistic ones, `RANGES`) and rounded to 0.1 (integers: to 1); booleans are true
  10% or 50% of the time; strings are one of ten words;
- drift: the events are cut into `phases` equal phases; in each, every numeric column
  is drawn low-heavy, uniform or high-heavy (`u**4`, `u`, `u**0.25`), rotating per
  phase and per column. Attribute, join and window predicates therefore change
  selectivity over the run, which is what the engine's adaptive ordering adapts to;
- late (`late_fraction`): ts moved back by `lateness + 1 + 10 * keys * step` ms, ten
  times a key's mean gap, so the key has almost surely seen a newer event and the
  worker (with that allowed lateness) dead-letters it as late;
- malformed (`malformed_fraction`, Kafka only): one of three things the worker
  dead-letters: bytes that are not Avro (`not avro`), a truncated Avro body, or a
  record whose first floating column is NaN (a schema violation).

The event number is the event's position in the archive form (`--archive`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from juggler.codec.avro import Codec
from juggler.language.model import TIMESTAMP
from juggler.runtime.topic_names import TopicNames
from juggler.spark import streams, wire
from juggler.spark.archive import KEY, POSITION, data_columns, write_archive
from juggler.spark.errors import BadInput
from juggler.spark.progress import Pacer, Progress

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

START_TS = 1_700_000_000_000
RANGES = {("B", "pressure"): (60, 160), ("B", "temp"): (35, 42),
          ("H", "beatrate"): (40, 160), ("H", "vib"): (0, 100), ("K", "fluid"): (0, 500),
          ("T", "fluct"): (0, 200), ("T", "degree"): (35, 42), ("T", "incr"): (0, 100)}
DEFAULT_RANGE = (0, 100)
SHAPES = (4.0, 1.0, 0.25)
"""Exponents of the drift phases: u**4 is low-heavy, u**0.25 high-heavy."""
NOT_AVRO = b"not avro"


@dataclass(frozen=True)
class Spec:
    """What to generate; `check` says what is wrong with it, for the CLI."""

    seed: int
    count: int
    keys: int = 100
    rate: float | None = None
    late_fraction: float = 0.0
    malformed_fraction: float = 0.0
    lateness: int = 0
    phases: int = 4

    @property
    def step_ms(self) -> int:
        return max(1, int(1000 / self.rate)) if self.rate else 1

    def check(self, to_archive: bool = False) -> None:
        problems = []
        if to_archive and self.malformed_fraction:
            problems.append("--malformed-fraction needs Kafka: an archive holds decoded "
                            "events, so it cannot hold malformed ones")
        if self.count < 1:
            problems.append(f"--count must be at least 1, got {self.count}")
        if self.keys < 1:
            problems.append(f"--keys must be at least 1, got {self.keys}")
        if self.rate is not None and not self.rate > 0:
            problems.append(f"--rate must be a positive number of events/s, got {self.rate}")
        for name, value in (("--late-fraction", self.late_fraction),
                            ("--malformed-fraction", self.malformed_fraction)):
            if not 0.0 <= value <= 1.0:
                problems.append(f"{name} must be between 0 and 1, got {value}")
        if self.late_fraction + self.malformed_fraction > 1.0:
            problems.append("--late-fraction plus --malformed-fraction must not exceed 1")
        if self.phases < 1:
            problems.append(f"--drift-phases must be at least 1, got {self.phases}")
        if self.lateness < 0:
            problems.append(f"--lateness must not be negative, got {self.lateness}")
        if problems:
            raise BadInput("; ".join(problems))


def uniform(spec: Spec, salt: int) -> Column:
    """A uniform double in [0, 1) from (seed, event number, salt)."""
    from pyspark.sql import functions as F

    h = F.xxhash64(F.lit(spec.seed), F.col("id"), F.lit(salt))
    return F.pmod(h, F.lit(2**53)).cast("double") / F.lit(float(2**53))


def base(spark: SparkSession, spec: Spec, codec: Codec, start: int, end: int) -> DataFrame:
    """Events start..end-1 with their common columns: id, stream index, key, ts,
    phase, and the late / malformed draws."""
    from pyspark.sql import functions as F

    streams = codec.stream_names()
    ts = F.lit(START_TS) + F.col("id") * F.lit(spec.step_ms)
    late_by = spec.lateness + 1 + 10 * spec.keys * spec.step_ms
    late = uniform(spec, 3) < F.lit(spec.late_fraction)
    malformed = (uniform(spec, 3) >= F.lit(spec.late_fraction)) & \
        (uniform(spec, 3) < F.lit(spec.late_fraction + spec.malformed_fraction))
    return (spark.range(start, end).select(
        "id",
        F.floor(uniform(spec, 1) * len(streams)).cast("int").alias("stream_index"),
        F.concat(F.lit("k"), F.floor(uniform(spec, 2) * spec.keys).cast("string")).alias(KEY),
        F.when(late, ts - F.lit(late_by)).otherwise(ts).alias(TIMESTAMP),
        F.floor(F.col("id") * spec.phases / spec.count).cast("int").alias("phase"),
        malformed.alias("malformed"),
        F.floor(uniform(spec, 4) * 3).cast("int").alias("malformed_kind")))


def stream_frames(events: DataFrame, spec: Spec, codec: Codec) -> dict[str, DataFrame]:
    """Archive-shaped frames (key, ts, position, columns) per stream, plus the
    `malformed` and `malformed_kind` draws."""
    from pyspark.sql import functions as F

    frames = {}
    for index, stream in enumerate(codec.stream_names()):
        columns = []
        for number, (column, kind) in enumerate(data_columns(codec, stream)):
            salt = 100 + 10 * index + number
            columns.append(_value(spec, stream, column, kind, salt, index + number)
                           .alias(column))
        frames[stream] = events.filter(F.col("stream_index") == index).select(
            KEY, TIMESTAMP, F.col("id").alias(POSITION), *columns, "malformed",
            "malformed_kind")
    return frames


def _value(spec: Spec, stream: str, column: str, kind: str, salt: int,
           rotation: int) -> Column:
    from pyspark.sql import functions as F

    u = uniform(spec, salt)
    phase = (F.col("phase") + F.lit(rotation)) % len(SHAPES)
    if kind == "boolean":
        return u < F.when(F.col("phase") % 2 == 0, 0.1).otherwise(0.5)
    if kind == "string":
        return F.concat(F.lit("w"), F.floor(u * 10).cast("string"))
    low, high = RANGES.get((stream, column), DEFAULT_RANGE)
    shaped = F.pow(u, F.element_at(F.array(*map(F.lit, SHAPES)), phase + 1))
    value = F.lit(float(low)) + shaped * F.lit(float(high - low))
    if kind in ("int", "long"):
        return F.floor(value).cast("int" if kind == "int" else "long")
    return F.round(value, 1).cast(kind)


def message_value(codec: Codec, stream: str) -> Column:
    """The message value of a generated event: the framed record, or one of the three
    malformed kinds for the events drawn malformed."""
    from pyspark.sql import functions as F

    good = streams.framed(codec, stream)
    floating = [c for c, kind in data_columns(codec, stream) if kind in ("float", "double")]
    truncated = F.substring(good, 1, wire.HEADER_BYTES + 2)
    if floating:
        nan = F.lit(float("nan")).cast(dict(data_columns(codec, stream))[floating[0]])
        violating = wire.encode(F.struct(*[
            (nan if c == floating[0] else F.col(c)).alias(c)
            for c in [TIMESTAMP] + [name for name, _ in data_columns(codec, stream)]]),
            codec, stream)
    else:
        violating = truncated
    kind = F.col("malformed_kind")
    bad = (F.when(kind == 0, F.lit(NOT_AVRO)).when(kind == 1, truncated)
           .otherwise(violating))
    return F.when(F.col("malformed"), bad).otherwise(good)


def chunks(spec: Spec) -> list[tuple[int, int]]:
    """Event-number ranges written one Spark job each: one second of events with a
    rate, else a quarter of the run (at least 250,000 events) for progress lines."""
    size = max(1, round(spec.rate)) if spec.rate else max(250_000, -(-spec.count // 4))
    return [(lo, min(lo + size, spec.count)) for lo in range(0, spec.count, size)]


def run(spark: SparkSession, spec: Spec, codec: Codec, progress: Progress, *,
        bootstrap: str | None = None, names: TopicNames = streams.UNPREFIXED,
        archive: Path | None = None, archive_format: str = "parquet") -> None:
    """Generate onto the stream topics (paced by `spec.rate`), or into an archive."""
    spec.check(to_archive=archive is not None)
    if archive is not None:
        frames = stream_frames(base(spark, spec, codec, 0, spec.count), spec, codec)
        write_archive({s: f.drop("malformed", "malformed_kind") for s, f in frames.items()},
                      archive, archive_format)
        progress.advance(spec.count)
        return
    assert bootstrap is not None
    streams.ensure_topics(bootstrap, names, codec)
    pacer = Pacer(1.0 if spec.rate else None)  # with a rate, a chunk is 1 s of events
    for step, (start, end) in enumerate(chunks(spec)):
        pacer.wait(step)
        frames = stream_frames(base(spark, spec, codec, start, end), spec, codec)
        records = streams.to_records(frames, codec, names, message_value)
        streams.write(records, bootstrap, order=["position"])
        progress.advance(end - start)
