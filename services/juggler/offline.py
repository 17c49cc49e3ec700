"""`juggler eval`: run an engine over files, with no Kafka (semantics section 5).

queries.jsonl is registered before the first event; events.jsonl holds events and
control commands in arrival order, and an event's position is its 0-based line number.
Results go to results.jsonl, late events to an optional dead-letter file. Bad input
stops the run with a `BadInput` naming the file and line, and nothing is written: the
outputs are written to temporary files beside their targets and renamed into place only
when the whole run succeeded.

Decisions where docs/semantics.md is silent:

- The events file is read twice: first to check every line and infer the stream
  schemas (queries are compiled against them), then to run. So a bad event line fails
  the run before anything is evaluated.
- A dead-letter line is `{"line": n, "position": n - 1, "reason": ..., "event": {...}}`
  with `line` 1-based like the error messages and `position` as in results' `sources`.
- "N events" in the summary counts every event line, late ones included.
- Queries, including those registered by a control line, are compiled against the
  schemas of the whole events file (or `--schemas`), not only of the lines before them.
- An output path whose directory does not exist, or that cannot be written, is bad
  input too (status 2).
- With inferred schemas (no `--schemas`), a query over a stream with no event in the
  events file is accepted with a warning naming the query, the stream and the line (a
  typo in a stream name would otherwise go unnoticed): it has no results, and the
  columns it uses get the types their use implies. With `strict` it is bad input. With
  `--schemas` an unknown stream is always an error, as the schemas are the whole list.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterable, Sequence
from typing import IO, Any, Callable, Iterator, TypeVar

from juggler.codec.avro import load_avro_schemas
from juggler.codec.jsonl import EventRecord, InputError, Schemas, parse_query_line, read_lines
from juggler.engine.events import (EngineConfig, Event, LateEvent, QueryEngine,
                                   RegistrationError, Result, process_batch)
from juggler.wire.commands import Command, RegisterCommand, parse_event_line

ENGINES = ("juggler", "naive")


class BadInput(Exception):
    """Input the run cannot go on with (exit status 2); str() names the file and line."""

    def __init__(self, path: Path | str, line: int | None, message: str) -> None:
        self.path, self.line, self.message = str(path), line, message
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {message}")


class EngineUnavailable(Exception):
    """The chosen engine cannot be imported (the Juggler operator is optional here)."""


_BATCH = 1024
"""Events evaluated per call: one crossing into the native operator per batch."""

Tag = TypeVar("Tag")


@dataclass
class Summary:
    events: int = 0
    results: int = 0
    late: int = 0

    def __str__(self) -> str:
        return f"{self.events} events, {self.results} results, {self.late} late"


def make_engine(name: str, config: EngineConfig) -> QueryEngine:
    """The engine by name; the Juggler operator is imported only when asked for."""
    if name == "naive":
        from juggler.engine.naive import NaiveEngine
        return NaiveEngine(config)
    if name == "juggler":
        try:
            from juggler.engine.native_engine import NativeEngine
        except ImportError as exc:
            raise EngineUnavailable(f"the juggler engine is not available ({exc}); "
                                    f"try --engine naive") from exc
        return NativeEngine(config)
    raise ValueError(f"unknown engine {name!r} (choose from {', '.join(ENGINES)})")


def evaluate(queries: Path, events: Path, out: Path, *, config: EngineConfig = EngineConfig(),
             engine: str = "juggler", schemas_dir: Path | None = None,
             dead_letters: Path | None = None, strict: bool = False,
             warn: Callable[[str], None] | None = None) -> Summary:
    """Run `juggler eval`; raises BadInput (with nothing written) on bad input.

    `warn` receives each warning (a query over a stream with no events and no schema);
    with `strict` that is bad input instead.
    """
    from juggler.language import QueryError, compile_query, unknown_streams

    query_lines = list(read_checked(queries, parse_query_line))
    schemas = _schemas(events, schemas_dir)
    catalog = schemas.catalog
    runner = make_engine(engine, config)
    summary = Summary()

    def register(path: Path, line: int, query_id: str, text: str, history: bool) -> list[Result]:
        query_catalog = catalog
        if schemas.inferred:
            stand_ins = unknown_streams(query_id, text, catalog)
            for stream in stand_ins:
                message = (f"query {query_id} reads stream {stream!r}, which has no events in "
                           f"{events} and no schema")
                if strict:
                    raise BadInput(path, line, f"{message} (--strict)")
                if warn is not None:
                    warn(f"{path}:{line}: {message}; it can have no results "
                         f"(is the stream name right?)")
            query_catalog = {**catalog, **stand_ins}
        try:
            return runner.register(compile_query(query_id, text, query_catalog), history=history)
        except (QueryError, RegistrationError) as exc:
            raise BadInput(path, line, str(exc)) from None

    for line, query in query_lines:
        register(queries, line, query.id, query.text, False)

    with atomic_outputs(out, dead_letters) as (results_file, dead_file):
        assert results_file is not None  # `out` is always given
        def emit(results: list[Result]) -> None:
            for result in results:
                results_file.write(jsonl_line(result.to_json()))
            summary.results += len(results)

        def arrivals() -> Iterator[tuple[tuple[int, Any], Event | Command]]:
            for line, record in read_checked(events, parse_event_line):
                if isinstance(record, EventRecord):
                    data = conform(schemas, events, line, record)
                    yield (line, record), Event(record.stream, record.key, record.ts, data,
                                                position=line - 1)
                else:
                    yield (line, record), record

        def command(tag: tuple[int, Any], record: Command) -> list[Result]:
            line = tag[0]
            if isinstance(record, RegisterCommand):
                assert record.text is not None  # a control line always has its text
                return register(events, line, record.id, record.text, record.history)
            try:
                runner.deregister(record.id)
            except RegistrationError as exc:
                raise BadInput(events, line, str(exc)) from None
            return []

        for (line, record), outcome in feed(runner, arrivals(), command):
            if isinstance(record, EventRecord):
                summary.events += 1
            if isinstance(outcome, LateEvent):
                summary.late += 1
                if dead_file is not None:
                    dead_file.write(jsonl_line({"line": line, "position": line - 1,
                                                "reason": outcome.reason,
                                                "event": record.raw}))
            else:
                emit(list(outcome))
    return summary


def feed(runner: QueryEngine, arrivals: Iterable[tuple[Tag, Event | Command]],
         command: Callable[[Tag, Command], Sequence[Result]]
         ) -> Iterator[tuple[Tag, Sequence[Result] | LateEvent]]:
    """Drive `runner` over events and control commands in arrival order: each
    arrival's tag with its results (or its LateEvent). Events between two commands go
    to the operator in batches of `_BATCH` (one crossing into Rust per batch); a
    command is applied by `command`, after every event before it. `juggler eval` and
    the Spark backfill's partitions both run their engines through this, so the two
    cannot drift apart."""
    batch: list[tuple[Tag, Event]] = []

    def flush() -> Iterator[tuple[Tag, Sequence[Result] | LateEvent]]:
        outcomes = process_batch(runner, [event for _, event in batch])
        yield from zip([tag for tag, _ in batch], outcomes)
        batch.clear()

    for tag, arrival in arrivals:
        if isinstance(arrival, Event):
            batch.append((tag, arrival))
            if len(batch) >= _BATCH:
                yield from flush()
            continue
        yield from flush()
        yield tag, command(tag, arrival)
    yield from flush()


def read_checked(path: Path, parse: Callable[[Any], Any]) -> Iterator[tuple[int, Any]]:
    """Parse every line of a JSON-lines file, turning InputError into BadInput."""
    lines = read_lines(path)
    while True:
        try:
            line, value = next(lines)
        except StopIteration:
            return
        except InputError as exc:
            raise BadInput(path, exc.line, str(exc)) from None
        except OSError as exc:
            raise BadInput(path, None, f"cannot read: {exc.strerror or exc}") from None
        try:
            record = parse(value)
        except InputError as exc:
            raise BadInput(path, line, str(exc)) from None
        yield line, record


def _schemas(events: Path, schemas_dir: Path | None) -> Schemas:
    """The stream schemas: loaded from `--schemas`, or inferred; every event line is
    checked against them here, before anything runs."""
    schemas = Schemas()
    if schemas_dir:
        try:
            schemas = Schemas(load_avro_schemas(schemas_dir))
        except InputError as exc:
            raise BadInput(schemas_dir, None, str(exc)) from None
        except OSError as exc:
            raise BadInput(schemas_dir, None, f"cannot read: {exc.strerror or exc}") from None
    for line, record in read_checked(events, parse_event_line):
        if isinstance(record, EventRecord):
            conform(schemas, events, line, record)
    return schemas


def conform(schemas: Schemas, path: Path, line: int, record: EventRecord) -> dict[str, Any]:
    try:
        return schemas.conform(record, f"line {line}")
    except InputError as exc:
        raise BadInput(path, line, str(exc)) from None


def _line_encoder() -> Callable[[Any], str]:
    """What `json.dumps(obj, separators=(",", ":"), ensure_ascii=False,
    allow_nan=False)` writes, with its C encoder made once. `json.dumps` with arguments
    builds a new `JSONEncoder` per call, and even one kept builds its C encoder (and a
    dict to check for cycles, which a result never has) at every `encode`: a fifth of a
    line's cost, paid per result by eval and by the Spark backfill's engines. Where
    CPython's `c_make_encoder` is not there or takes other arguments, the kept
    encoder's `encode`."""
    encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    make = getattr(json.encoder, "c_make_encoder", None)
    try:
        iterencode = make(None, encoder.default, json.encoder.encode_basestring, None,
                          ":", ",", False, False, False) if make is not None else None
    except TypeError:
        iterencode = None
    if iterencode is None:
        return encoder.encode
    join = "".join
    return lambda obj: join(iterencode(obj, 0))


_ENCODE = _line_encoder()


def jsonl_line(obj: dict[str, Any]) -> str:
    return _ENCODE(obj) + "\n"


@contextmanager
def atomic_outputs(*targets: Path | None) -> Iterator[tuple[IO[str] | None, ...]]:
    """Temporary files beside each target, renamed over the targets (os.replace) only
    if the block finishes; on any error they are removed and the targets untouched."""
    temps: list[tuple[IO[str], Path, Path] | None] = []  # (handle, temporary, target)
    with ExitStack() as stack:
        try:
            for target in targets:
                if target is None:
                    temps.append(None)
                    continue
                target = Path(target)
                try:
                    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                                dir=target.parent)
                except OSError as exc:
                    raise BadInput(target, None,
                                   f"cannot write: {exc.strerror or exc}") from None
                os.chmod(fd, 0o666 & ~_umask())
                handle = stack.enter_context(open(fd, "w", encoding="utf-8", newline="\n"))
                temps.append((handle, Path(name), target))
            yield tuple(t[0] if t else None for t in temps)
            for temp in temps:
                if temp:
                    temp[0].close()
            for temp in temps:
                if temp:
                    os.replace(temp[1], temp[2])
        except BaseException:
            for temp in temps:
                if temp:
                    temp[0].close()
                    Path(temp[1]).unlink(missing_ok=True)
            raise


def _umask() -> int:
    """The process umask, so outputs get the permissions a plain open() would give."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
