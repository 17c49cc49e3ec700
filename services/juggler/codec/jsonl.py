"""JSON lines in: events and queries, checked against stream schemas.

The offline evaluator (semantics section 5) reads these files; the Kafka side can reuse the
value checks and `StreamSchema`. A control line of an events file is a command, read by
`juggler.wire.commands` with the checks here. Every check raises `InputError` with a message meant
for the person who wrote the file; the caller adds the file name and line number.

Decisions where docs/semantics.md is silent:

- Lines holding only whitespace are skipped (they still count as positions).
- A JSON object with a repeated member name, or with a member this format does not
  define, is rejected rather than silently half-used.
- `ts` and integer values must fit a signed 64-bit Avro long; floats must be finite.
- Stream and column names are identifiers (`[A-Za-z_][A-Za-z0-9_]*`); a data column may
  not be called `ts`, which is every stream's event time.
- `data` is handed on in the stream's schema column order (first event's order, or the
  `.avsc` field order), so `SELECT *` rows have one column order per stream.
- Avro schemas (`--schemas DIR`, loaded by `juggler.codec.avro.load_avro_schemas`):
  every `*.avsc` file in DIR is one record whose name (the part after the last dot) is
  the stream, except the service's own records (`juggler.Command`...), which are
  skipped; field types are plain `int`, `long`, `float`, `double`, `string`, `boolean`
  (or `{"type": <one of those>}`). A field named `ts` is the event time (must be
  int/long) and is not a data column. `int`/`long` columns take only integer values;
  `float`/`double` take any finite number.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from juggler.language.model import TIMESTAMP, ColumnType

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_LONG_MIN, _LONG_MAX = -(2 ** 63), 2 ** 63 - 1


class InputError(ValueError):
    """A record or schema that does not follow the input format; str() is user-facing.

    `line` is the 1-based line number when the error was found while reading a file."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


# -- records -------------------------------------------------------------------------


@dataclass(frozen=True)
class EventRecord:
    """An event line, checked for shape but not yet against its stream's schema."""

    stream: str
    key: str
    ts: int
    data: dict[str, Any]
    raw: dict[str, Any] = field(compare=False, repr=False)


@dataclass(frozen=True)
class QueryLine:
    """One line of queries.jsonl: `{"id": ..., "text": ...}`."""

    id: str
    text: str


def read_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """Yield (1-based line number, decoded JSON value) for every non-blank line.

    Raises `InputError` with `.line` set for a line that is not UTF-8 or not JSON."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                                 line=number) from None
            if number == 1:
                text = text.removeprefix("\ufeff")
            if not text.strip():
                continue
            try:
                value = decode_json(text)
            except InputError as exc:
                raise InputError(str(exc), line=number) from None
            yield number, value


def decode_json(text: str) -> Any:
    """Parse one JSON document; a repeated member name is an error, not last-one-wins."""
    try:
        return json.loads(text, object_pairs_hook=_unique_members)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON: {exc.msg} (column {exc.colno})") from None


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, value in pairs:
        if name in result:
            raise InputError(f"malformed JSON: member {name!r} appears twice in one object")
        result[name] = value
    return result


def parse_query_line(value: Any) -> QueryLine:
    obj = json_object(value, "a query", required=("id", "text"), optional=())
    return QueryLine(json_query_id(obj["id"]), json_string(obj["text"], "text"))


def parse_event(value: Any) -> EventRecord:
    """An events.jsonl line that is an event (semantics section 5)."""
    obj = json_object(value, "an event", required=("stream", "key", "ts", "data"),
                      optional=())
    stream = obj["stream"]
    if not isinstance(stream, str) or not IDENTIFIER.match(stream):
        raise InputError(f"'stream' must be a stream name (letters, digits, _), got "
                         f"{show_json(stream)}")
    key = json_string(obj["key"], "key")
    ts = obj["ts"]
    if not _is_integer(ts):
        raise InputError(f"'ts' must be an integer number of milliseconds, got {show_json(ts)}")
    if not _LONG_MIN <= ts <= _LONG_MAX:
        raise InputError(f"'ts' {ts} does not fit in a 64-bit long")
    data = obj["data"]
    if not isinstance(data, dict):
        raise InputError(f"'data' must be an object of columns, got {show_json(data)}")
    for column, value_ in data.items():
        check_column_name(column)
        column_type(column, value_)
    return EventRecord(stream, key, ts, data, raw=obj)


def json_object(value: Any, what: str, required: tuple[str, ...],
                optional: tuple[str, ...]) -> dict[str, Any]:
    """`value` as a JSON object with the `required` members and no others than
    `optional`; `what` names it in the message."""
    if not isinstance(value, dict):
        raise InputError(f"expected {what} as a JSON object, got {show_json(value)}")
    missing = [name for name in required if name not in value]
    if missing:
        raise InputError(f"{what} is missing {quote_names(missing)}")
    unknown = [name for name in value if name not in required and name not in optional]
    if unknown:
        allowed = quote_names(list(required) + list(optional))
        raise InputError(f"unexpected {quote_names(unknown)} in {what} (allowed: {allowed})")
    return value


def json_query_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"'id' must be a non-empty string, got {show_json(value)}")
    return value


def json_string(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{name!r} must be a string, got {show_json(value)}")
    return value


# -- values and schemas --------------------------------------------------------------


def check_column_name(column: str) -> None:
    if column == TIMESTAMP:
        raise InputError("column 'ts' is reserved for the event time; put it in 'ts', "
                         "not in 'data'")
    if not IDENTIFIER.match(column):
        raise InputError(f"column name {column!r} is not a name (letters, digits, _)")


def column_type(column: str, value: Any) -> ColumnType:
    """The type of one data value; numbers must be finite and fit Avro long/double."""
    if isinstance(value, bool):
        return ColumnType.BOOLEAN
    if isinstance(value, int):
        if not _LONG_MIN <= value <= _LONG_MAX:
            raise InputError(f"column {column!r}: {value} does not fit in a 64-bit long")
        return ColumnType.NUMBER
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(f"column {column!r}: {show_json(value)} is not a finite number")
        return ColumnType.NUMBER
    if isinstance(value, str):
        return ColumnType.STRING
    raise InputError(f"column {column!r}: {show_json(value)} is not a number, string or boolean")


@dataclass(frozen=True)
class StreamSchema:
    """A stream's data columns in order (`ts` is implicit), and where they were defined.

    `integral` lists the columns declared Avro int/long, which take only integers."""

    name: str
    columns: dict[str, ColumnType]
    origin: str
    integral: frozenset[str] = frozenset()

    def conform(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Check one event's data (already value-checked) and return it in column order."""
        missing = [c for c in self.columns if c not in data]
        unknown = [c for c in data if c not in self.columns]
        if missing or unknown:
            parts = ([f"missing {quote_names(missing)}"] if missing else []) + \
                    ([f"unexpected {quote_names(unknown)}"] if unknown else [])
            raise InputError(f"stream {self.name!r} has columns {quote_names(list(self.columns))} "
                             f"({self.origin}); this event has {', '.join(parts)}")
        for column, expected in self.columns.items():
            value = data[column]
            actual = column_type(column, value)
            if actual is not expected:
                raise InputError(f"stream {self.name!r} column {column!r} is a "
                                 f"{expected.value} ({self.origin}); got {show_json(value)}")
            if column in self.integral and not _is_integer(value):
                raise InputError(f"stream {self.name!r} column {column!r} is an Avro "
                                 f"int/long ({self.origin}); got {show_json(value)}")
        return {column: data[column] for column in self.columns}


class Schemas:
    """The stream schemas of one input: given up front, or inferred from each stream's
    first event (then every later event of the stream must have the same columns, each
    of one type; ints and floats are both NUMBER, booleans are not numbers)."""

    def __init__(self, given: Mapping[str, StreamSchema] | None = None) -> None:
        self._fixed = given is not None
        self._streams: dict[str, StreamSchema] = dict(given or {})

    def conform(self, record: EventRecord, where: str) -> dict[str, Any]:
        """Check an event against its stream's schema; `where` ("line 3") names the
        event if it is the first of its stream and schemas are inferred."""
        schema = self._streams.get(record.stream)
        if schema is None:
            if self._fixed:
                known = quote_names(sorted(self._streams)) or "none"
                raise InputError(f"unknown stream {record.stream!r} (schemas given for: "
                                 f"{known})")
            schema = StreamSchema(
                record.stream,
                {c: column_type(c, v) for c, v in record.data.items()},
                origin=f"from its first event, {where}")
            self._streams[record.stream] = schema
        return schema.conform(record.data)

    @property
    def inferred(self) -> bool:
        """True when the schemas come from the events (no schemas given up front)."""
        return not self._fixed

    @property
    def catalog(self) -> dict[str, dict[str, ColumnType]]:
        """Stream -> column -> type, the form `compile_query` checks queries against."""
        return {name: dict(schema.columns) for name, schema in self._streams.items()}


# -- small helpers -------------------------------------------------------------------


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def quote_names(names: list[str]) -> str:
    """Names as a message lists them."""
    return ", ".join(repr(n) for n in names)


def show_json(value: Any) -> str:
    """A value as the user wrote it in JSON (shortened)."""
    try:
        text = json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
