"""The `juggler` command. Subcommands import their machinery lazily, so `juggler --help`
stays fast and one subcommand's dependencies never break another."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

from juggler import __version__
from juggler.kafka.cli_options import kafka_options, security_options

if TYPE_CHECKING:
    from juggler.client.control import ControlView
    from juggler.wire.commands import Command

T = TypeVar("T")

ORDERS = ("adaptive", *("".join(p) for p in itertools.permutations("AJW")))
"""`--order`: adaptive, or a static order of the Attribute/Join/Window predicate types."""

BAD_INPUT = 2
"""Exit status for bad input (semantics section 5), the same as click's usage errors."""


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="juggler")
def main() -> None:
    """Juggler: many continuous queries over event streams, evaluated together."""


@main.command("eval")
@click.option("--queries", required=True, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSON lines {\"id\", \"text\"}, registered before the first event.")
@click.option("--events", required=True, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSON lines: events and control commands, in arrival order.")
@click.option("--out", required=True, metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the results (JSON lines); written only on success.")
@click.option("--allowed-lateness", default=0, show_default=True, metavar="MS",
              type=click.IntRange(min=0), help="How far behind a key's max ts an event may be.")
@click.option("--retention", default=0, show_default=True, metavar="MS",
              type=click.IntRange(min=0),
              help="Keep events at least this long (lower bound of the horizon).")
@click.option("--schemas", "schemas_dir", default=None, metavar="DIR",
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Avro .avsc files, one per stream; default: infer from the events.")
@click.option("--dead-letters", default=None, metavar="FILE",
              type=click.Path(dir_okay=False, path_type=Path),
              help="Write late events here (JSON lines with line and reason).")
@click.option("--engine", default="juggler", show_default=True,
              type=click.Choice(["juggler", "naive"]),
              help="The Juggler operator, or the naive reference evaluator.")
@click.option("--order", default="adaptive", show_default=True,
              type=click.Choice(ORDERS, case_sensitive=False),
              help="Predicate type order: adaptive, or static like AJW.")
@click.option("--strict", is_flag=True, default=False,
              help="A query over a stream with no events and no schema is an error "
                   "(default: a warning).")
def eval_command(queries: Path, events: Path, out: Path, allowed_lateness: int,
                 retention: int, schemas_dir: Path | None, dead_letters: Path | None,
                 engine: str, order: str, strict: bool) -> None:
    """Evaluate queries over an events file, deterministically, with no Kafka.

    Exit status 2 on bad input (malformed JSON, a bad query...), with nothing written.
    Without --schemas, a query over a stream that has no events is warned about on
    stderr (an error with --strict).
    """
    from juggler.engine.events import EngineConfig
    from juggler.offline import BadInput, EngineUnavailable, evaluate

    config = EngineConfig(allowed_lateness=allowed_lateness, retention=retention,
                          order=order)
    try:
        summary = evaluate(queries, events, out, config=config, engine=engine,
                           schemas_dir=schemas_dir, dead_letters=dead_letters, strict=strict,
                           warn=lambda message: click.echo(f"Warning: {message}", err=True))
    except BadInput as exc:
        click.echo(f"Error: {exc}", err=True)
        raise SystemExit(BAD_INPUT) from None
    except EngineUnavailable as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(str(summary), err=True)


@main.command("worker")
@click.option("--bootstrap", default=None, help="Kafka bootstrap servers [env JUGGLER_BOOTSTRAP].")
@click.option("--app-id", default=None,
              help="Consumer group; workers with one id share the partitions.")
@click.option("--instance-id", default=None,
              help="This worker's stable name (its transactional id); default host-pid.")
@click.option("--partitions", default=None, type=click.IntRange(min=1),
              help="Partitions of the stream/fanout topics (default: from the broker).")
@click.option("--allowed-lateness", default=None, metavar="MS", type=click.IntRange(min=0))
@click.option("--retention", default=None, metavar="MS", type=click.IntRange(min=0))
@click.option("--order", default=None, type=click.Choice(ORDERS, case_sensitive=False))
@click.option("--max-idle-ms", default=None, metavar="MS", type=click.IntRange(min=0),
              help="The longest wait for an idle stream partition (default 500).")
@click.option("--idle-estimate/--no-idle-estimate", default=None,
              help="Wait for an idle stream partition only while its measured delay says "
                   "it could still deliver an earlier event (default on; off: always "
                   "--max-idle-ms).")
@click.option("--idle-margin-ms", default=None, metavar="MS", type=click.IntRange(min=0),
              help="Added to a partition's largest recent delay (default 20).")
@click.option("--runtime", type=click.Choice(["worker", "faust"]), default=None,
              help="worker (default): exactly once, the contract's order (docs/worker.md); "
                   "faust: a Faust app, at least once, a reorder buffer (docs/faust.md; "
                   "needs `pip install juggler[faust]`) [env JUGGLER_RUNTIME].")
@click.option("--reorder-ms", default=None, metavar="MS", type=click.IntRange(min=0),
              help="Faust runtime: how long a record waits for a silent stream (default 1000).")
@click.option("--web-host", default=None,
              help="Address the HTTP port binds to (default 127.0.0.1; 0.0.0.0 for all).")
@click.option("--web-port", default=None, type=click.IntRange(min=1, max=65535),
              help="HTTP port: /queries/<id>/results, /queries, /health, /metrics.")
@click.option("--web-token", default=None, metavar="TOKEN",
              help="Require `Authorization: Bearer TOKEN` on the HTTP port (but /health "
                   "and /metrics); prefer env JUGGLER_WEB_TOKEN: a flag shows in `ps`.")
@click.option("--schemas", "schemas_dir", default=None, metavar="DIR",
              type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--registry-url", default=None, help="Schema Registry URL (optional).")
@click.option("--topic-prefix", default=None, help="Prefix of every topic name (default none).")
@click.option("--create-topics/--no-create-topics", default=None,
              help="Create the topics the worker needs before starting (default on).")
@click.option("--batch-max", default=None, type=click.IntRange(min=1),
              help="Records fetched and taken per round (one transaction per round).")
@click.option("--loglevel", default=None,
              type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False))
@security_options
def worker_command(**options: object) -> None:
    """Run the Kafka worker until SIGTERM/SIGINT.

    Settings come from JUGGLER_* environment variables (e.g. JUGGLER_WEB_PORT);
    options given here override them. See docs/worker.md, and docs/faust.md for
    `--runtime faust`.
    """
    from juggler.runtime.settings import Settings

    try:
        settings = Settings.from_env(overrides=options)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if settings.runtime == "faust":
        _faust_worker(options)
        return
    from juggler.logs import log_to_stderr
    from juggler.runtime.worker import JugglerWorker
    from juggler.serving.page_feed import serve_apart

    log_to_stderr(settings.loglevel)
    JugglerWorker(settings).run(serve_apart)


def _faust_worker(options: dict[str, object]) -> None:
    """The Faust app reads its settings from the environment when it is imported (as
    `faust -A juggler.faust.app worker` does), so the options given go there first."""
    for name, value in options.items():
        if value is not None:
            os.environ[f"JUGGLER_{name.upper()}"] = str(value)
    try:
        from juggler.faust.app import main as faust_main
    except ModuleNotFoundError as exc:
        raise click.ClickException(f"{exc}: the Faust runtime needs `pip install "
                                   f"juggler[faust]`") from None
    faust_main()


# -- Kafka: broker, topics, control plane ---------------------------------------------

def timeout_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--timeout", default=30.0, show_default=True, metavar="SECONDS",
                        type=click.FloatRange(min=0, min_open=True),
                        help="How long to wait for Kafka (and for the command's status)."
                        )(command)


def topic_prefix_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--topic-prefix", envvar="JUGGLER_TOPIC_PREFIX", default="",
                        help="The deployment's topic prefix (env JUGGLER_TOPIC_PREFIX)."
                        )(command)


def app_id_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--app-id", envvar="JUGGLER_APP_ID", default="juggler",
                        show_default=True,
                        help="The workers' consumer group (env JUGGLER_APP_ID).")(command)


@main.command("broker")
@click.option("--data-dir", default=None, metavar="DIR",
              type=click.Path(file_okay=False, path_type=Path),
              help="Persistent broker data; default: $JUGGLER_CACHE/broker-data "
                   "(~/.cache/juggler/broker-data).")
@click.option("--port", default=9092, show_default=True, type=click.IntRange(1, 65535),
              help="PLAINTEXT port on 127.0.0.1.")
def broker_command(data_dir: Path | None, port: int) -> None:
    """Run a local single-node Kafka broker (KRaft) until Ctrl-C."""
    from juggler.kafka.broker import cache_root, run_forever

    run_forever(data_dir or cache_root() / "broker-data", port)


@main.group("topics")
def topics_group() -> None:
    """Kafka topics of topics/*.yaml."""


@topics_group.command("apply")
@kafka_options
@click.option("--partitions", default=None, envvar="JUGGLER_PARTITIONS",
              type=click.IntRange(min=1), metavar="P",
              help="Partitions of the stream, fan-out and dead-letter topics "
                   "(env JUGGLER_PARTITIONS; default: what juggler.control.fanout "
                   "already has, else topics/defaults.yaml).")
@click.option("--specs", "specs_dir", default=None, metavar="DIR",
              type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Topic spec directory (env JUGGLER_TOPICS; default: the repo's topics/).")
@topic_prefix_option
@timeout_option
def topics_apply(bootstrap: str, partitions: int | None, specs_dir: Path | None,
                 topic_prefix: str, timeout: float) -> None:
    """Create missing topics and align their configs; never deletes.

    Exit status 1 when a topic could not be created or altered, or has a partition
    count other than its spec (reported, never changed).
    """
    from juggler.kafka.topics import TopicsError, TopicSpecError, apply_topics

    try:
        report = apply_topics(bootstrap, specs_dir, partitions, timeout=timeout,
                              prefix=topic_prefix)
    except TopicSpecError as exc:
        click.echo(f"Error: {exc}", err=True)
        raise SystemExit(BAD_INPUT) from None
    except TopicsError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(str(report))
    if not report.ok:
        raise SystemExit(1)


@main.group("group")
def group_group() -> None:
    """A worker group (app id) as a whole."""


@group_group.command("reset-settings")
@kafka_options
@app_id_option
@topic_prefix_option
@timeout_option
def group_reset_settings(bootstrap: str, app_id: str, topic_prefix: str,
                         timeout: float) -> None:
    """Let the next worker to start set the group's settings (lateness, retention,
    partitions, schemas...): run it with every worker of the group stopped, then start
    the workers with their new settings (docs/worker.md, "One group, one set of
    settings"). Exit status 1 while the group has live members.
    """
    from juggler.kafka.delivery import ControlError
    from juggler.runtime.settings_log import reset

    try:
        reset(bootstrap, topic_prefix, app_id, timeout)
    except ControlError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"settings of group {app_id!r} reset: the next worker to start sets them")


@main.group("query")
def query_group() -> None:
    """Register, deregister and inspect queries on the control topic."""


def _submit(bootstrap: str, command: Command, wait: bool, timeout: float,
            topic_prefix: str = "") -> None:
    """Send `command`; with `wait`, until it is live in every partition (or rejected)."""
    from juggler.client.control import submit
    from juggler.client.report import submission
    from juggler.kafka.delivery import ControlError

    try:
        sub = submit(bootstrap, command, wait=wait, timeout=timeout, prefix=topic_prefix)
    except ControlError as exc:
        raise click.ClickException(str(exc)) from None
    text, status = submission(sub, waited=wait, timeout=timeout)
    click.echo(text, err=status != 0)
    raise SystemExit(status)


def _query_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from juggler.wire.names import InvalidName, validate_query_id

    try:
        return validate_query_id(value)
    except InvalidName as exc:
        raise click.BadParameter(str(exc)) from None


@query_group.command("register")
@click.argument("query_id", metavar="[ID]", required=False)
@click.option("--text", default=None, help="The query text.")
@click.option("--file", "file", default=None, type=click.File("r", encoding="utf-8"),
              help="With ID: read the query text from FILE. Without: register every "
                   "query of FILE, JSON lines {\"id\", \"text\"[, \"history\"]} (the "
                   "format of `juggler eval --queries`). '-' for stdin.")
@click.option("--history", is_flag=True,
              help="Also apply the query at once to the events the engine still holds.")
@click.option("--own-topic", is_flag=True,
              help="Publish its results to juggler.results.<ID> (created now) instead of "
                   "the shared juggler.results.")
@click.option("--no-wait", is_flag=True,
              help="Do not wait for the status (nor for the query to be live).")
@kafka_options
@topic_prefix_option
@timeout_option
def query_register(query_id: str | None, text: str | None, file: IO[str] | None, history: bool,
                   own_topic: bool, no_wait: bool, bootstrap: str, topic_prefix: str,
                   timeout: float) -> None:
    """Register query ID (or every query of --file); wait until ACCEPTED and live in
    every partition (exit 0) or REJECTED (exit 1).

    Exit status 3 when --timeout seconds passed with no answer (no worker running?):
    while the workers answer (statuses, LIVE), the wait goes on, however long a large
    --file takes to go live.
    """
    from juggler.wire.commands import RegisterCommand

    if query_id is None:
        if file is None or text is not None:
            raise click.UsageError("give ID with --text or --file, or --file of queries alone")
        _submit_file(bootstrap, file, history, own_topic, not no_wait, timeout, topic_prefix)
        return
    _query_id(click.get_current_context(), None, query_id)  # type: ignore[arg-type]
    if file is not None and text is None:
        body = file.read()
    elif text is not None and file is None:
        body = text
    else:
        raise click.UsageError("give the query as exactly one of --text or --file")
    if not body.strip():
        raise click.UsageError("the query text is empty")
    _submit(bootstrap, RegisterCommand(query_id, body, history, own_topic), not no_wait,
            timeout, topic_prefix)


def _submit_file(bootstrap: str, file: IO[str], history: bool, own_topic: bool, wait: bool,
                 timeout: float, topic_prefix: str = "") -> None:
    """Register every query of a JSON-lines file in one go (one producer, one reader)."""
    from juggler.codec.jsonl import InputError, decode_json, parse_query_line
    from juggler.client.control import submit_many
    from juggler.client.report import submissions
    from juggler.kafka.delivery import ControlError
    from juggler.wire.commands import RegisterCommand

    commands = []
    for number, line in enumerate(file, start=1):
        if not line.strip():
            continue
        try:
            value = decode_json(line)
            query = parse_query_line({k: v for k, v in value.items()
                                      if k not in ("history", "own_topic")}
                                     if isinstance(value, dict) else value)
        except InputError as exc:
            click.echo(f"Error: {file.name}: line {number}: {exc}", err=True)
            raise SystemExit(BAD_INPUT) from None
        commands.append(RegisterCommand(query.id, query.text,
                                        bool(value.get("history", history)),
                                        bool(value.get("own_topic", own_topic))))
    try:
        subs = submit_many(bootstrap, commands, wait=wait, timeout=timeout,
                           prefix=topic_prefix)
    except ControlError as exc:
        raise click.ClickException(str(exc)) from None
    text, status = submissions(subs, waited=wait, timeout=timeout)
    click.echo(text, err=status != 0)
    raise SystemExit(status)


@query_group.command("deregister")
@click.argument("query_id", metavar="ID", callback=_query_id)
@click.option("--no-wait", is_flag=True, help="Do not wait for the command's status.")
@kafka_options
@topic_prefix_option
@timeout_option
def query_deregister(query_id: str, no_wait: bool, bootstrap: str, topic_prefix: str,
                     timeout: float) -> None:
    """Deregister query ID; exit statuses as for register."""
    from juggler.wire.commands import DeregisterCommand

    _submit(bootstrap, DeregisterCommand(query_id), not no_wait, timeout, topic_prefix)


def _control_view(bootstrap: str, timeout: float, topic_prefix: str) -> ControlView:
    """The control topic read to its end; a broker that cannot be read is the user's
    error message, not a traceback."""
    from juggler.client.control import read_control
    from juggler.kafka.delivery import ControlError

    try:
        return read_control(bootstrap, timeout=timeout, prefix=topic_prefix)
    except ControlError as exc:
        raise click.ClickException(str(exc)) from None


@query_group.command("list")
@click.option("--all", "everything", is_flag=True,
              help="Also the ids that are not registered, marked as such: rejected, "
                   "pending (no status yet) or deregistered.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@kafka_options
@topic_prefix_option
@timeout_option
def query_list(everything: bool, as_json: bool, bootstrap: str, topic_prefix: str,
               timeout: float) -> None:
    """The registered queries: an accepted REGISTER is in effect (a rejected command
    changes nothing). With --all, every id of the control topic and where it stands."""
    from juggler.client import report

    view = _control_view(bootstrap, timeout, topic_prefix)
    for warning in view.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(report.query_list(view, everything=everything, as_json=as_json))


@query_group.command("show")
@click.argument("query_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@kafka_options
@topic_prefix_option
@timeout_option
def query_show(query_id: str, as_json: bool, bootstrap: str, topic_prefix: str,
               timeout: float) -> None:
    """One query's text, state (registered, rejected, pending or deregistered) and
    status (exit 1 if the id never appeared)."""
    from juggler.client import report

    view = _control_view(bootstrap, timeout, topic_prefix)
    text, status = report.query_show(view.queries.get(query_id), query_id,
                                     as_json=as_json)
    click.echo(text, err=status != 0)
    raise SystemExit(status)


@main.command("produce")
@click.option("--events", "events", required=True, metavar="FILE",
              help="JSON lines in the format of `juggler eval` ('-' for standard input).")
@kafka_options
@topic_prefix_option
@timeout_option
def produce_command(events: str, bootstrap: str, topic_prefix: str, timeout: float) -> None:
    """Produce an events file to the stream topics, in order; a control line is sent
    and waited for until live in every partition before the events after it. A
    progress bar shows on a terminal; elsewhere only the final count is printed.

    Exit status 2 on bad input (naming the line), 1 when a command was rejected.
    """
    import sys

    from juggler.codec.jsonl import InputError
    from juggler.client.produce import lines_of, produce, source
    from juggler.client.produce_progress import progress_bar
    from juggler.kafka.delivery import ControlError

    file = source(events)
    try:
        with progress_bar(file if isinstance(file, Path) else None, sys.stderr) as shown:
            done = produce(bootstrap, lines_of(file), prefix=topic_prefix, timeout=timeout,
                           progress=shown)
    except InputError as exc:
        where = f"line {exc.line}: " if exc.line else ""
        click.echo(f"Error: {events}: {where}{exc}", err=True)
        raise SystemExit(BAD_INPUT) from None
    except (ControlError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"produced {done.events:,} events, {done.commands} commands", err=True)


def _tail_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in (
        click.option("--from-beginning", is_flag=True,
                     help="From the oldest retained record (default: only new ones)."),
        click.option("--follow", is_flag=True,
                     help="Keep reading as records come (Ctrl-C to stop)."),
        topic_prefix_option,
        kafka_options):
        command = option(command)
    return command


def _print_lines(messages: Iterable[T], line: Callable[[T], object], limit: int | None) -> None:
    import json

    shown = 0
    try:
        for m in messages:
            click.echo(json.dumps(line(m), ensure_ascii=False))
            shown += 1
            if limit is not None and shown >= limit:
                return
    except KeyboardInterrupt:
        pass


@main.command("results")
@click.argument("query_id", metavar="QUERY")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="Stop after N results.")
@_tail_options
def results_command(query_id: str, limit: int | None, from_beginning: bool, follow: bool,
                    topic_prefix: str, bootstrap: str) -> None:
    """Print QUERY's results as JSON lines (the shared results topic, or its own topic)."""
    from juggler.codec.avro import Codec
    from juggler.client.tail import of_query, records, result_line
    from juggler.runtime.topic_names import TopicNames

    names, codec, mine = TopicNames(topic_prefix), Codec(), of_query(query_id)
    own = names.results(query_id)
    keep = lambda m: m.topic() == own or mine(m)  # noqa: E731
    _print_lines(records(bootstrap, [names.all_results, own], from_beginning=from_beginning,
                         follow=follow, keep=keep),
                 lambda m: result_line(codec, m), limit)


@main.command("deadletters")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="Stop after N.")
@_tail_options
def deadletters_command(limit: int | None, from_beginning: bool, follow: bool,
                        topic_prefix: str, bootstrap: str) -> None:
    """Print the dead letters as JSON lines: where each came from, its kind and reason."""
    from juggler.codec.avro import Codec
    from juggler.client.tail import dead_letter_line, records
    from juggler.runtime.topic_names import TopicNames

    codec = Codec()
    _print_lines(records(bootstrap, [TopicNames(topic_prefix).deadletter],
                         from_beginning=from_beginning, follow=follow),
                 lambda m: dead_letter_line(codec, m), limit)


@main.command("status")
@kafka_options
@app_id_option
@topic_prefix_option
@timeout_option
def status_command(bootstrap: str, app_id: str, topic_prefix: str, timeout: float) -> None:
    """One screen: how far the workers are per stream (processed, log end, lag) and the
    registered queries, with how many are live in every partition."""
    from collections import defaultdict

    from juggler.codec.avro import Codec
    from juggler.client.control import read_control
    from juggler.kafka.delivery import ControlError
    from juggler.kafka.group_progress import progress
    from juggler.runtime.topic_names import TopicNames

    names = TopicNames(topic_prefix)
    topics = [names.stream(s) for s in Codec().stream_names()] + [names.fanout]
    try:
        rows = progress(bootstrap, app_id, topics)
        view = read_control(bootstrap, timeout=timeout, prefix=topic_prefix)
    except ControlError as exc:
        raise click.ClickException(str(exc)) from None
    per_topic: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in rows:
        totals = per_topic[r.topic]
        totals[0] += r.committed or 0
        totals[1] += r.end
        totals[2] += r.lag
    width = max([len("TOPIC"), *(len(t) for t in per_topic)])
    click.echo(f"{'TOPIC':<{width}}  PROCESSED    LOG END      LAG")
    for topic, (done, end, lag) in per_topic.items():
        click.echo(f"{topic:<{width}}  {done:>9}  {end:>9}  {lag:>7}")
    behind = sum(r.lag for r in rows)
    registered = view.registered()
    live = sum(1 for q in registered if q.live[1] and q.live[0] >= q.live[1])
    partitions = max((q.live[1] for q in registered), default=0)
    click.echo(("caught up" if behind == 0 else f"behind by {behind} records") +
               f"; {len(registered)} queries registered, {live} live in all "
               f"{partitions or '?'} partitions; {len(view.queries) - len(registered)} "
               f"other ids (juggler query list --all)")


@main.command("progress")
@kafka_options
@app_id_option
@topic_prefix_option
@click.option("--wait", is_flag=True,
              help="Wait until everything produced before this call is processed.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@timeout_option
def progress_command(bootstrap: str, app_id: str, topic_prefix: str, wait: bool,
                     as_json: bool, timeout: float) -> None:
    """How far the workers are: per stream and fanout partition, the offsets processed
    (committed with their results) against the log end.

    Exit status 0 when everything in the log (with --wait: everything produced before
    the call) is processed, 3 when not (with --wait: not within --timeout).
    """
    import json
    import time

    from juggler.codec.avro import Codec
    from juggler.kafka.group_progress import progress
    from juggler.runtime.topic_names import TopicNames

    names = TopicNames(topic_prefix)
    topics = [names.stream(s) for s in Codec().stream_names()] + [names.fanout]
    rows = progress(bootstrap, app_id, topics)
    if wait:
        ends = {(r.topic, r.partition): r.end for r in rows}
        deadline = time.monotonic() + timeout
        while any(r.lag for r in rows) and time.monotonic() < deadline:
            time.sleep(0.2)
            rows = progress(bootstrap, app_id, topics, ends)
    behind = sum(r.lag for r in rows)
    if as_json:
        click.echo(json.dumps({"caught_up": behind == 0, "behind": behind, "partitions": [
            {"topic": r.topic, "partition": r.partition, "processed": r.committed,
             "log_end": r.end, "lag": r.lag} for r in rows]}, indent=2))
    else:
        width = max([len("TOPIC"), *(len(r.topic) for r in rows)])
        click.echo(f"{'TOPIC':<{width}}  PART  PROCESSED    LOG END     LAG")
        for r in rows:
            done = "-" if r.committed is None else str(r.committed)
            click.echo(f"{r.topic:<{width}}  {r.partition:>4}  {done:>9}  {r.end:>9}  {r.lag:>6}")
        click.echo("caught up: everything in the log is processed" if behind == 0
                   else f"behind by {behind} records")
    raise SystemExit(0 if behind == 0 else 3)


@main.command("demo")
@click.option("--seconds", default=30.0, show_default=True, type=click.FloatRange(min=1),
              help="How long to produce events.")
@click.option("--rate", default=100.0, show_default=True, type=click.FloatRange(min=1),
              help="Events per second (all streams, all patients).")
@click.option("--patients", default=20, show_default=True, type=click.IntRange(min=1),
              help="Distinct keys.")
@click.option("--seed", default=7, show_default=True, type=int)
@click.option("--queries", default=None, metavar="FILE",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="JSON lines {\"id\", \"text\"}; default: the thesis's ICU queries.")
@click.option("--show", default=3, show_default=True, type=click.IntRange(min=0),
              help="Results printed per query (all are counted).")
@click.option("--bootstrap", default=None, metavar="HOST:PORT",
              help="Use this cluster instead of starting a local broker.")
@click.option("--runtime", type=click.Choice(["worker", "faust"]), default=None,
              help="The demo's worker: worker (default) or faust, the Faust app "
                   "(docs/faust.md) [env JUGGLER_RUNTIME].")
@security_options
def demo_command(seconds: float, rate: float, patients: int, seed: int,
                 queries: Path | None, show: int, bootstrap: str | None,
                 runtime: str | None) -> None:
    """The whole service on this machine: a local Kafka broker, the topics, a worker,
    the ICU queries registered, simulated vitals produced in real time, and each
    query's results printed as they are committed."""
    from juggler.demo.run import DemoOptions, run
    from juggler.kafka.client_config import Security
    from juggler.kafka.delivery import ControlError

    if bootstrap is None and Security.from_env().security_protocol != "PLAINTEXT":
        raise click.UsageError("the security settings are for --bootstrap's cluster; "
                               "the demo's own local broker is PLAINTEXT")
    options = DemoOptions(seconds=seconds, rate=rate, patients=patients, seed=seed,
                          show=show, bootstrap=bootstrap)
    if queries:
        options = replace(options, queries=queries)
    if runtime:
        options = replace(options, runtime=runtime)
    try:
        run(options)
    except ControlError as exc:
        raise click.ClickException(str(exc)) from None


from juggler.spark.cli import spark  # noqa: E402  (after main: the group attaches to it)

main.add_command(spark)

if __name__ == "__main__":
    main()
