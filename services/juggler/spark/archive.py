"""The event archive: recorded events as files, one directory per stream.

Layout (the decision docs/semantics.md leaves open; docs/spark.md): `ARCHIVE/<S>/` holds the
events of stream `S` as Parquet (`*.parquet`) or Avro container files (`*.avro`), with
the columns

    key: string, ts: long, position: long, <the data columns of S's Avro schema>

`position` is the event's place in the archive's **arrival order**, 0-based and
unique across all streams: the order the events entered, which decides lateness
(semantics 3) and which `sources` name (semantics 5: `juggler eval`'s line numbers). An
archive made from an events file (`import_events`) has position = line number - 1, so
`juggler spark backfill` and `juggler eval` name the same events the same way.
Data columns have the Spark types of the stream's Avro fields (`schemas/`), so an
archive can be replayed onto the stream topics with `to_avro` as it is. Control lines
(registrations, deregistrations) are kept beside the streams in `ARCHIVE/control.jsonl`
with their positions (`juggler.spark.shared`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from juggler.codec.avro import Codec, load_avro_schemas
from juggler.codec.jsonl import EventRecord, Schemas
from juggler.language.model import TIMESTAMP
from juggler.spark.errors import BadInput
from juggler.wire.commands import Command, parse_event_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

FORMATS = ("parquet", "avro")
KEY, POSITION = "key", "position"


def avro_fields(codec: Codec, stream: str) -> list[tuple[str, str]]:
    """(field, Avro primitive type) of a stream's record, `ts` included, in order."""
    fields = []
    for spec in codec.schema(stream)["fields"]:
        kind = spec["type"]
        fields.append((spec["name"], kind["type"] if isinstance(kind, dict) else kind))
    return fields


def spark_type(avro_type: str) -> DataType:
    from pyspark.sql import types as T

    return {"int": T.IntegerType(), "long": T.LongType(), "float": T.FloatType(),
            "double": T.DoubleType(), "string": T.StringType(),
            "boolean": T.BooleanType()}[avro_type]


def sql_type(avro_type: str) -> str:
    """`spark_type` as Spark SQL names it (in a `CAST`)."""
    return spark_type(avro_type).simpleString()


def data_columns(codec: Codec, stream: str) -> list[tuple[str, str]]:
    """The data columns of a stream (every field but `ts`), with their Avro types."""
    return [(name, kind) for name, kind in avro_fields(codec, stream) if name != TIMESTAMP]


def stream_schema(codec: Codec, stream: str) -> StructType:
    """The archive's Spark schema for one stream."""
    from pyspark.sql import types as T

    return T.StructType(
        [T.StructField(KEY, T.StringType()), T.StructField(TIMESTAMP, T.LongType()),
         T.StructField(POSITION, T.LongType())]
        + [T.StructField(name, spark_type(kind)) for name, kind in data_columns(codec, stream)])


def write_archive(frames: Mapping[str, DataFrame], directory: Path, fmt: str = "parquet") -> None:
    """Write one frame per stream (archive columns) under `directory`, replacing it."""
    if fmt not in FORMATS:
        raise BadInput(f"archive format {fmt!r}: choose one of {', '.join(FORMATS)}")
    for stream, frame in frames.items():
        frame.write.mode("overwrite").format(fmt).save(str(directory / stream))


def read_archive(spark: SparkSession, directory: Path, codec: Codec,
                 streams: Iterable[str] | None = None) -> dict[str, DataFrame]:
    """The archive's frames by stream (the given streams, else every `<S>/` there is),
    with the columns and types of `stream_schema`."""
    if not directory.is_dir():
        raise BadInput(f"archive {directory} is not a directory")
    known = set(codec.stream_names())
    present = sorted(p.name for p in directory.iterdir() if p.is_dir() and p.name in known)
    wanted = list(streams) if streams is not None else present
    if not present:
        raise BadInput(f"archive {directory} has no stream directory (expected "
                       f"{', '.join(f'{s}/' for s in sorted(known))})")
    frames = {}
    for stream in wanted:
        path = directory / stream
        if not path.is_dir():
            raise BadInput(f"archive {directory} has no events of stream {stream} "
                           f"(no {path}/)")
        files = _data_files(path)
        fmt = "avro" if any(f.suffix == ".avro" for f in files) else "parquet"
        schema = stream_schema(codec, stream)
        reader = spark.read.format(fmt)
        if not files or fmt == "parquet" and _holds(_written_schema(spark, files[0]), schema):
            reader = reader.schema(schema)
        frame = reader.load(str(path))
        missing = [f.name for f in schema.fields if f.name not in frame.columns]
        if missing:
            raise BadInput(f"archive {path}: missing column(s) {', '.join(missing)} "
                           f"(an archive holds key, ts, position and {stream}'s fields)")
        frames[stream] = frame.selectExpr(*(  # SQL text: one call into the JVM
            f"CAST(`{f.name}` AS {f.dataType.simpleString()}) AS `{f.name}`"
            for f in schema.fields))
    return frames


SPARK_SCHEMA_KEY = "org.apache.spark.sql.parquet.row.metadata"
"""The key of a Parquet footer's metadata under which Spark's writer keeps the frame's
Spark schema (as JSON): the schema Spark's inference reads back from that file."""


def _data_files(path: Path) -> list[Path]:
    """The files under a stream's directory that Spark reads as data (not `_`- or
    `.`-prefixed, at any depth: `_SUCCESS`, checksums), by path. None is a stream
    without events, read as an empty frame of the stream's schema, as Spark reads an
    empty table it is given the schema of."""
    return sorted(f for f in path.rglob("*") if f.is_file() and not any(
        part.startswith(("_", ".")) for part in f.relative_to(path).parts))


def _written_schema(spark: SparkSession, first: Path) -> StructType | None:
    """The Spark schema in the footer of `first`, the first Parquet data file (Spark's
    inference also reads one file's footer), read on the driver; None without one (a
    file from another writer, or one that is not Parquet).

    Why not let Spark infer it: for Parquet, inference runs a Spark job per stream to
    read that footer, a fixed cost in every job over the archive. Given the schema,
    the reader runs none."""
    from py4j.protocol import Py4JJavaError
    from pyspark.sql.types import StructType

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        source = jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(
            jvm.org.apache.hadoop.fs.Path(first.as_uri()),
            spark.sparkContext._jsc.hadoopConfiguration())
        reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(source)
        try:
            stored = reader.getFooter().getFileMetaData().getKeyValueMetaData().get(
                SPARK_SCHEMA_KEY)
        finally:
            reader.close()
        return None if stored is None else StructType.fromJson(json.loads(stored))
    except (Py4JJavaError, ValueError, KeyError, TypeError):
        # not Parquet, or a footer this Spark cannot read: inference reports what it
        # finds, as it does for any reader
        return None


def _holds(written: StructType | None, schema: StructType) -> bool:
    """Whether files of the `written` schema have every column of `schema`, with its
    type: then reading them with `schema` gives what inferring theirs and casting does
    (columns beyond `schema` are left out either way). Otherwise the archive is read
    as it is, and a missing column is reported."""
    if written is None:
        return False
    types = {field.name: field.dataType for field in written.fields}
    return all(types.get(field.name) == field.dataType for field in schema.fields)


CONTROL_FILE = "control.jsonl"
"""An archive's control lines: `{"position": n, "command": <the control line>}`."""

def read_control_lines(archive: Path) -> list[tuple[int, Command]]:
    """The archive's control lines by position (none without `control.jsonl`)."""
    path = archive / CONTROL_FILE
    if not path.is_file():
        return []
    commands = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            entry = json.loads(text)
            command = parse_event_line(entry["command"])
            position = int(entry["position"])
        except (ValueError, KeyError, TypeError) as exc:
            raise BadInput(f"{path}:{number}: not a control line ({exc})") from None
        if isinstance(command, EventRecord):
            raise BadInput(f"{path}:{number}: an event, where a control line belongs")
        commands.append((position, command))
    return sorted(commands, key=lambda c: c[0])


def write_control_lines(archive: Path, commands: Iterable[tuple[int, Command]]) -> None:
    lines = [json.dumps({"position": position, "command": command.line()}) + "\n"
             for position, command in commands]
    (archive / CONTROL_FILE).write_text("".join(lines), encoding="utf-8")


def import_events(spark: SparkSession, events: Path, directory: Path, codec: Codec,
                  fmt: str = "parquet") -> int:
    """Turn a `juggler eval` events file into an archive (position = line - 1);
    return the number of events. Control lines go to the archive's `control.jsonl`
    with their positions (the streams hold only events), so positions still name
    eval's lines and the shared backfill applies each command where eval does."""
    from juggler.offline import BadInput as EvalBadInput
    from juggler.offline import conform, read_checked

    schemas = Schemas(load_avro_schemas(codec.schemas_dir))
    rows: dict[str, list[tuple[Any, ...]]] = {s: [] for s in codec.stream_names()}
    commands = []
    try:
        for line, record in read_checked(events, parse_event_line):
            if not isinstance(record, EventRecord):
                commands.append((line - 1, record))
                continue
            data = conform(schemas, events, line, record)
            columns = data_columns(codec, record.stream)
            rows[record.stream].append(
                (record.key, record.ts, line - 1,
                 *(_as_avro(data[name], kind) for name, kind in columns)))
    except EvalBadInput as exc:
        raise BadInput(str(exc)) from None
    write_archive({s: spark.createDataFrame(r, stream_schema(codec, s))
                   for s, r in rows.items() if r}, directory, fmt)
    write_control_lines(directory, commands)
    return sum(len(r) for r in rows.values())


def export_events(spark: SparkSession, directory: Path, codec: Codec, out: Path) -> int:
    """Write an archive as a `juggler eval` events file, in position order; positions
    must be 0, 1, 2... so that line numbers name the same events. Returns the count."""
    from pyspark.sql import functions as F

    frames = read_archive(spark, directory, codec)
    lines = None
    for stream, frame in frames.items():
        data = F.to_json(F.struct(*(c for c, _ in data_columns(codec, stream))))
        part = frame.select(POSITION, F.lit(stream).alias("stream"), KEY, TIMESTAMP,
                            data.alias("data"))
        lines = part if lines is None else lines.unionByName(part)
    assert lines is not None
    count = 0
    with open(out, "w", encoding="utf-8") as handle:
        for row in lines.orderBy(POSITION).toLocalIterator():
            if row[POSITION] != count:
                raise BadInput(f"archive {directory}: position {row[POSITION]} where "
                               f"{count} was expected; only an archive with positions "
                               f"0, 1, 2... is an events file")
            event = {"stream": row["stream"], "key": row[KEY], "ts": row[TIMESTAMP],
                     "data": json.loads(row["data"])}
            handle.write(json.dumps(event, separators=(",", ":")) + "\n")
            count += 1
    return count


def _as_avro(value: Any, avro_type: str) -> Any:
    """JSON numbers as the Avro field's type: an int in a float/double column is a float."""
    if avro_type in ("float", "double") and not isinstance(value, bool):
        return float(value)
    return value
