"""The `juggler` command. Subcommands import their machinery lazily, so `juggler --help`
stays fast and one subcommand's dependencies never break another."""

from __future__ import annotations

import itertools
from pathlib import Path

import click

from juggler import __version__

ORDERS = ("adaptive", *("".join(p) for p in itertools.permutations("AJW")))
"""`--order`: adaptive, or a static order of the Attribute/Join/Window predicate types."""

BAD_INPUT = 2
"""Exit status for bad input (DESIGN section 5), the same as click's usage errors."""


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
def eval_command(queries: Path, events: Path, out: Path, allowed_lateness: int,
                 retention: int, schemas_dir: Path | None, dead_letters: Path | None,
                 engine: str, order: str) -> None:
    """Evaluate queries over an events file, deterministically, with no Kafka.

    Exit status 2 on bad input (malformed JSON, a bad query...), with nothing written.
    """
    from juggler.engine.events import EngineConfig
    from juggler.offline import BadInput, EngineUnavailable, evaluate

    config = EngineConfig(allowed_lateness=allowed_lateness, retention=retention,
                          order=order)
    try:
        summary = evaluate(queries, events, out, config=config, engine=engine,
                           schemas_dir=schemas_dir, dead_letters=dead_letters)
    except BadInput as exc:
        click.echo(f"Error: {exc}", err=True)
        raise SystemExit(BAD_INPUT) from None
    except EngineUnavailable as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(str(summary), err=True)


if __name__ == "__main__":
    main()
