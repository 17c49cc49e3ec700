"""`juggler spark ...`: the generate, replay, backfill and archive jobs.

pyspark is imported inside the commands, after the arguments are checked, so
`juggler --help` stays fast and a bad argument fails in a second, not after a Spark
start. Exit status: 0 done; 1 the job failed (cluster unreachable, topic refused);
2 bad arguments or input (like `juggler eval`).
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import click

from juggler.kafka.cli_options import kafka_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from juggler.codec.avro import Codec
    from juggler.language.model import Query

BAD_INPUT = 2


def _prefix(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--topic-prefix", default="", metavar="P",
                        help="Prefix of every topic name, as the worker's --topic-prefix."
                        )(command)


def _schemas(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--schemas", "schemas_dir", default=None, metavar="DIR",
                        type=click.Path(exists=True, file_okay=False, path_type=Path),
                        help="Avro schemas (default: the repository's schemas/).")(command)


@click.group("spark")
def spark() -> None:
    """Spark jobs: generate, replay and backfill events through Kafka.

    Spark runs in local mode unless JUGGLER_SPARK_MASTER names a cluster. Its Kafka
    and Avro connectors are fetched from Maven Central on first use.
    """


@spark.command("generate")
@kafka_options
@click.option("--seed", required=True, type=int, help="Same seed, same events.")
@click.option("--count", required=True, type=int, help="Events to generate.")
@click.option("--rate", default=None, type=float, metavar="EVENTS_PER_S",
              help="Target events per second (default: as fast as possible).")
@click.option("--keys", default=100, show_default=True, type=int, help="Distinct entity keys.")
@click.option("--late-fraction", default=0.0, show_default=True, type=float,
              help="Share of events stamped later than --lateness allows.")
@click.option("--malformed-fraction", default=0.0, show_default=True, type=float,
              help="Share of events the worker dead-letters (bad bytes, NaN).")
@click.option("--lateness", default=0, show_default=True, type=int, metavar="MS",
              help="The worker's allowed lateness that late events exceed.")
@click.option("--drift-phases", default=4, show_default=True, type=int,
              help="Phases of the value distributions' scheduled drift.")
@_prefix
@click.option("--archive", default=None, metavar="DIR",
              type=click.Path(file_okay=False, path_type=Path),
              help="Write an archive here instead of producing to Kafka.")
@click.option("--archive-format", default="parquet", show_default=True,
              type=click.Choice(["parquet", "avro"]))
@_schemas
def generate_command(bootstrap: str, seed: int, count: int, rate: float | None, keys: int,
                     late_fraction: float, malformed_fraction: float, lateness: int,
                     drift_phases: int, topic_prefix: str, archive: Path | None,
                     archive_format: str, schemas_dir: Path | None) -> None:
    """Synthetic events onto the stream topics (or into an archive)."""
    from juggler.runtime.topic_names import TopicNames
    from juggler.spark import generate
    from juggler.spark.progress import Progress

    spec = generate.Spec(seed, count, keys, rate, late_fraction, malformed_fraction,
                         lateness, drift_phases)
    with _job() as start:
        spec.check(to_archive=archive is not None)
        codec = _codec(schemas_dir)
        session = start()
        progress = Progress("generate", count)
        generate.run(session, spec, codec, progress, bootstrap=bootstrap,
                     names=TopicNames(topic_prefix), archive=archive,
                     archive_format=archive_format)
        progress.finish()


@spark.command("replay")
@kafka_options
@click.option("--from-archive", default=None, metavar="DIR",
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Replay the events of this archive.")
@click.option("--from-topics", is_flag=True,
              help="Replay the stream topics' events with --start-ts <= ts < --end-ts.")
@click.option("--start-ts", default=None, type=int, metavar="MS")
@click.option("--end-ts", default=None, type=int, metavar="MS")
@click.option("--speed", default=None, type=float, metavar="X",
              help="Event time per wall time (1: as recorded; default: as fast as possible).")
@_prefix
@click.option("--source-prefix", default=None, metavar="P",
              help="Topic prefix to read with --from-topics (default: --topic-prefix).")
@_schemas
def replay_command(bootstrap: str, from_archive: Path | None, from_topics: bool,
                   start_ts: int | None, end_ts: int | None, speed: float | None,
                   topic_prefix: str, source_prefix: str | None,
                   schemas_dir: Path | None) -> None:
    """Re-publish recorded events onto the stream topics in event-time order."""
    from juggler.runtime.topic_names import TopicNames
    from juggler.spark import replay
    from juggler.spark.progress import Progress

    if (from_archive is None) == (not from_topics):
        raise click.UsageError("give exactly one of --from-archive DIR or --from-topics")
    source: Path | replay.TopicRange
    if from_topics:
        if start_ts is None or end_ts is None:
            raise click.UsageError("--from-topics needs --start-ts and --end-ts")
        prefix = topic_prefix if source_prefix is None else source_prefix
        source = replay.TopicRange(TopicNames(prefix), start_ts, end_ts)
    else:
        if start_ts is not None or end_ts is not None:
            raise click.UsageError("--start-ts/--end-ts select from topics; "
                                   "an archive is replayed whole")
        assert from_archive is not None
        source = from_archive
    with _job() as start:
        replay.check(source, speed)
        codec = _codec(schemas_dir)
        session = start()
        progress = Progress("replay", None)
        replay.run(session, codec, source, bootstrap, progress,
                   names=TopicNames(topic_prefix), speed=speed)
        progress.finish()


@spark.command("backfill")
@click.option("--queries", "queries_file", default=None, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Queries as JSON lines, like `juggler eval --queries`.")
@click.option("--query-id", default=None, metavar="ID",
              help="One query: its registered text on the control topic, or --text.")
@click.option("--text", default=None, help="The text of --query-id's query.")
@click.option("--archive", required=True, metavar="DIR",
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The events to apply the queries to.")
@click.option("--to-topic", is_flag=True, help="Write to the shared results topic.")
@click.option("--out", default=None, metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="Write JSON lines like `juggler eval --out` (written only on success).")
@click.option("--allowed-lateness", default=0, show_default=True, metavar="MS",
              type=click.IntRange(min=0), help="As the worker's and eval's.")
@click.option("--reference", is_flag=True,
              help="Run --query-id's query as its own Spark SQL interval join, the "
                   "independent reference, instead of the shared operator.")
@click.option("--explain", is_flag=True,
              help="With --reference: print the Spark SQL statement and exit.")
@kafka_options
@_prefix
@_schemas
def backfill_command(queries_file: Path | None, query_id: str | None, text: str | None,
                     archive: Path, to_topic: bool, out: Path | None, allowed_lateness: int,
                     reference: bool, explain: bool, bootstrap: str, topic_prefix: str,
                     schemas_dir: Path | None) -> None:
    """Apply queries to an archive: the results `juggler eval` gives on those events.

    The queries are --queries FILE, or --query-id ID (with --text, or its registered
    text), or else every query registered on the control topic. They all run in one
    pass over the archive, with the archive's control lines applied where they are.
    """
    from juggler.runtime.topic_names import TopicNames
    from juggler.spark import backfill, shared
    from juggler.spark.progress import Progress, StageProgress

    if not explain and to_topic == (out is not None):
        raise click.UsageError("give exactly one of --to-topic or --out FILE")
    if queries_file is not None and (query_id is not None or text is not None):
        raise click.UsageError("give --queries FILE or --query-id ID, not both")
    if text is not None and query_id is None:
        raise click.UsageError("--text needs --query-id")
    if (reference or explain) and query_id is None:
        raise click.UsageError("--reference and --explain run one query: give --query-id")
    names = TopicNames(topic_prefix)
    for given in [query_id] if query_id is not None else []:
        problem = names.query_id_problem(given)
        if problem:
            raise click.BadParameter(problem, param_hint="--query-id")
    with _job() as start, ThreadPoolExecutor(1, thread_name_prefix="compile") as pool:
        codec = _codec(schemas_dir)
        if explain:
            query = _queries(queries_file, query_id, text, codec, bootstrap, topic_prefix)[0]
            click.echo(backfill.statement(query, codec).sql)
            return
        # compiled on a thread while Spark starts and plans the archive (the JVM's
        # side, without the interpreter's lock): a bad query is reported then
        compiling = pool.submit(_queries, queries_file, query_id, text, codec, bootstrap,
                                topic_prefix)
        session = start(not reference)
        progress = Progress("backfill", None, unit="results")
        with StageProgress(session, progress):
            if reference:
                backfill.run(session, compiling.result()[0], archive, codec, progress,
                             allowed_lateness=allowed_lateness, out=out,
                             bootstrap=bootstrap, names=names)
            else:
                shared.run(session, compiling.result, archive, codec, progress,
                           allowed_lateness=allowed_lateness, out=out, bootstrap=bootstrap,
                           names=names)
        progress.finish()


@spark.command("archive")
@click.option("--events", required=True, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A `juggler eval` events file (control lines are left out).")
@click.option("--archive", required=True, metavar="DIR",
              type=click.Path(file_okay=False, path_type=Path), help="Where to write it.")
@click.option("--format", "archive_format", default="parquet", show_default=True,
              type=click.Choice(["parquet", "avro"]))
@_schemas
def archive_command(events: Path, archive: Path, archive_format: str,
                    schemas_dir: Path | None) -> None:
    """Turn an events file into an archive (position = line number - 1)."""
    from juggler.spark.archive import import_events
    from juggler.spark.progress import Progress

    with _job() as start:
        codec = _codec(schemas_dir)
        session = start()
        progress = Progress("archive", None)
        progress.advance(import_events(session, events, archive, codec, archive_format))
        progress.finish()


class _Start(Protocol):
    def __call__(self, python_work: bool = False) -> SparkSession: ...


@contextmanager
def _job() -> Iterator[_Start]:
    """Map the jobs' errors to exit statuses; yield a function that starts Spark, told
    whether the job's work is in its Python workers (`spark_session`'s `python_work`)."""
    from juggler.codec.jsonl import InputError
    from juggler.language.errors import QueryError
    from juggler.maven import MavenError
    from juggler.spark.errors import BadInput, JobError

    def start(python_work: bool = False) -> SparkSession:
        from juggler.spark.session import spark_session

        click.echo("starting Spark ...", err=True)
        return spark_session(ui=True, python_work=python_work)

    try:
        yield start
    except (BadInput, QueryError, InputError) as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(BAD_INPUT)
    except (JobError, MavenError) as exc:
        raise click.ClickException(str(exc)) from None


def _codec(schemas_dir: Path | None) -> Codec:
    from juggler.codec.avro import Codec

    return Codec(schemas_dir, registry_url="")


def _queries(queries_file: Path | None, query_id: str | None, text: str | None,
             codec: Codec, bootstrap: str, topic_prefix: str) -> list[Query]:
    """The queries compiled against the schemas: the file's, or the one id's (its
    given text, or the text of its last REGISTER on the control topic), or every query
    registered on the control topic."""
    from juggler.codec.jsonl import parse_query_line
    from juggler.client.control import read_control
    from juggler.kafka.delivery import ControlError
    from juggler.language import compile_query
    from juggler.offline import BadInput as EvalBadInput
    from juggler.offline import read_checked
    from juggler.spark.errors import BadInput, JobError

    if queries_file is not None:
        try:
            lines = [q for _, q in read_checked(queries_file, parse_query_line)]
        except EvalBadInput as exc:
            raise BadInput(str(exc)) from None
        return [compile_query(q.id, q.text, codec.catalog()) for q in lines]
    if text is not None and query_id is not None:
        return [compile_query(query_id, text, codec.catalog())]
    try:
        states = read_control(bootstrap, codec=codec, prefix=topic_prefix).queries
    except ControlError as exc:
        raise JobError(str(exc)) from None
    if query_id is not None:
        state = states.get(query_id)
        register = state.register if state is not None else None
        if register is None or register.text is None:
            raise BadInput(f"query {query_id!r} is not registered on the control topic; "
                           f"give --text")
        return [compile_query(query_id, register.text, codec.catalog())]
    registered = [(s.id, s.register.text) for s in states.values() if s.register is not None]
    queries = [compile_query(i, t, codec.catalog()) for i, t in registered if t is not None]
    if not queries:
        raise BadInput("no query is registered on the control topic; give --queries "
                       "FILE or --query-id ID --text TEXT")
    return queries
