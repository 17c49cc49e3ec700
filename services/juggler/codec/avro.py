"""Avro on Kafka: the stream, control, result and dead-letter records of semantics section 7.

Why this module: every Kafka-facing part (the worker, the `juggler query` commands,
producers, tests) must agree byte for byte on how a record is written and on what a
malformed message is. `Codec` is that agreement:

- Framing (`juggler.codec.framing`): Avro single-object encoding by default, so a
  message names its writer schema with no registry; the Confluent Schema Registry wire
  format when a registry URL is configured (`JUGGLER_SCHEMA_REGISTRY_URL` or the
  constructor). Decoding accepts both, whatever the configuration.
- Errors: `DecodeError` for bytes that are not an Avro message we can read (none,
  empty, bad magic, unknown fingerprint or schema id, truncated body, trailing bytes,
  invalid UTF-8...) or a key that is not text, `SchemaViolation` for a message that is
  well-formed but breaks the contract (another record's schema, a non-finite number, a
  missing or oversized key) or a record given to `encode` that does not fit. Both carry
  `.reason`, the text for people, and `.kind`, one of `CODEC_KINDS`, for machines (the
  dead letter's kind and the metric label: the worker never parses the text). An
  unreachable registry raises `RegistryError` instead: that is not the message's fault.

Schemas live in one directory (`schemas/` at the repository root, or
`JUGGLER_SCHEMAS`), one record per `.avsc` file, each standing alone (no references
between files). The records `juggler.Command`, `juggler.CommandStatus`,
`juggler.Result` and `juggler.DeadLetter` are the service's own; every other record is
a stream, named by its record name (the part after the last dot; the repository's are
in namespace `juggler.stream`) and mapped to columns by `avro_stream_schema`.

fastavro reads a negative enum or union index as an index from the end instead of
failing, so records of schemas with enums or unions are re-encoded after decoding and
must give back the same bytes; stream records (primitives only) skip that check.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import fastavro
from fastavro.read import SchemaResolutionError
from fastavro.validation import ValidationError, validate

from juggler.codec import framing
from juggler.codec.control_bodies import command_body, read_command, read_status, status_body
from juggler.codec.jsonl import (IDENTIFIER, InputError, StreamSchema, check_column_name,
                                 decode_json, quote_names, show_json)
from juggler.codec.registry import RegistryClient, RegistryError, UnknownSchemaId
from juggler.codec.result_body import Unwritable, result_body
from juggler.engine.events import Event, Position, Result
from juggler.wire import names
from juggler.language.model import TIMESTAMP, Catalog, ColumnType

if TYPE_CHECKING:
    from juggler.engine.rust_core import DecodedEvent, EventDecoder

__all__ = [
    "Codec", "CodecError", "DecodeError", "SchemaViolation", "UnknownSchema",
    "RegistryError", "SERVICE_RECORDS", "STREAM_NAMESPACE", "default_schemas_dir",
    "load_avro_schemas", "avro_stream_schema", "result_record", "COMMAND",
    "COMMAND_STATUS", "RESULT", "DEAD_LETTER", "NULL_VALUE", "EMPTY", "UNDECODABLE",
    "SCHEMA", "NO_KEY", "BAD_KEY", "OVERSIZED_KEY", "CODEC_KINDS", "MAX_KEY_BYTES",
]

COMMAND = "juggler.Command"
COMMAND_STATUS = "juggler.CommandStatus"
RESULT = "juggler.Result"
DEAD_LETTER = "juggler.DeadLetter"
SERVICE_RECORDS = frozenset({COMMAND, COMMAND_STATUS, RESULT, DEAD_LETTER})
"""Records that are not streams; `load_avro_schemas` skips them."""

STREAM_NAMESPACE = "juggler.stream"

_SERVICE_TOPICS = {COMMAND: names.CONTROL, COMMAND_STATUS: names.CONTROL_STATUS,
                   DEAD_LETTER: names.DEADLETTER}
_CHECKING_WRITERS: dict[str, Callable[[Mapping[str, Any]], bytes]] = {
    COMMAND: command_body, COMMAND_STATUS: status_body}
"""Schema-specific writers that check every field as fastavro's validator would
(`control_bodies`), for any record: each raises for a record it does not expect, which
fastavro then validates and writes or refuses."""
_TRUSTED_WRITERS: dict[str, Callable[[Mapping[str, Any]], bytes]] = {RESULT: result_body}
"""The same for records the service built (`Codec.encode`'s `trusted`), which are not
checked field by field."""
_READERS: dict[str, Callable[[bytes, int], dict[str, Any] | None]] = {
    COMMAND: read_command, COMMAND_STATUS: read_status}
"""Schema-specific readers for bodies in their writer's one form; None for any other,
which fastavro then reads or refuses (`control_bodies`)."""

SCHEMAS_ENV = "JUGGLER_SCHEMAS"
REGISTRY_ENV = "JUGGLER_SCHEMA_REGISTRY_URL"


# Why a message is not usable, for machines (`CodecError.kind`). Stream records can
# have every kind; control records (no key checks) the first four.
NULL_VALUE = "null_value"
"""The value is null (a tombstone)."""
EMPTY = "empty"
"""The value has zero bytes."""
UNDECODABLE = "undecodable"
"""Not an Avro message we can read: bad framing, unknown fingerprint or schema id,
truncated or malformed body, trailing bytes."""
SCHEMA = "schema"
"""Well-formed, but breaks the contract: another record's schema, a non-finite number."""
NO_KEY = "no_key"
"""A stream record without a key (the entity key is the Kafka message key)."""
BAD_KEY = "bad_key"
"""A stream record whose key is not UTF-8 text."""
OVERSIZED_KEY = "oversized_key"
"""A stream record whose key is longer than `MAX_KEY_BYTES`."""
CODEC_KINDS = (NULL_VALUE, EMPTY, UNDECODABLE, SCHEMA, NO_KEY, BAD_KEY, OVERSIZED_KEY)

MAX_KEY_BYTES = 65_536
"""The longest entity key (a stream record's Kafka message key, UTF-8) the worker takes.

Why a limit: the key is copied into the records the worker writes for its entity (a
result holds it as Kafka key and in its `key` field, a state record as key and in its
value, a dead letter as Kafka key and in its `key` field), and each of those must stay
under the producer's size limit (`juggler.codec.bounded.DEFAULT_MAX_RECORD_BYTES`,
1,000,000 bytes). Two copies of a 64 KiB key take 13% of it, leaving the rest for rows,
state and reasons. Real entity keys (patient, account, device ids) have tens of bytes."""


class StreamRecord(Protocol):
    """What `Codec.stream_events` reads of a fetched stream record (`task.Record`)."""

    key: bytes | None
    value: bytes | None
    offset: int


R = TypeVar("R", bound=StreamRecord)
"""A fetched record type (`task.Record`): a list of them is read as `StreamRecord`s."""


class CodecError(ValueError):
    """A message or record that is not usable; `.reason` is the user-facing text and
    `.kind` (one of `CODEC_KINDS`) the class of problem, for dead letters and metrics."""

    default_kind = UNDECODABLE

    def __init__(self, reason: str, kind: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind or self.default_kind


class DecodeError(CodecError):
    """The bytes are not an Avro message we can read (or the key is not text)."""


class SchemaViolation(CodecError):
    """The message is well-formed Avro but breaks the contract (e.g. another record's
    schema, a non-finite number, no key)."""

    default_kind = SCHEMA


class UnknownSchema(LookupError):
    """A schema name the codec does not have (a caller's mistake, not a bad message)."""


# -- loading .avsc files ---------------------------------------------------------------


def default_schemas_dir() -> Path:
    """`JUGGLER_SCHEMAS`, else `schemas/` at the root of the source tree this package
    lives in (`services/juggler/codec/avro.py` -> `schemas/`)."""
    env = os.environ.get(SCHEMAS_ENV)
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[3] / "schemas"


def full_name(obj: Mapping[str, Any]) -> str | None:
    """An Avro named schema's full name (`namespace.name`), or None without a name."""
    name = obj.get("name")
    if not isinstance(name, str):
        return None
    namespace = obj.get("namespace")
    if "." in name or not isinstance(namespace, str) or not namespace:
        return name
    return f"{namespace}.{name}"


def load_avro_schemas(directory: Path) -> dict[str, StreamSchema]:
    """Every stream record among the `*.avsc` in `directory` (sorted by file name).

    The service's own records (`SERVICE_RECORDS`) are skipped, so `juggler eval
    --schemas schemas/` works on the repository's directory."""
    schemas: dict[str, StreamSchema] = {}
    files = sorted(Path(directory).glob("*.avsc"))
    if not files:
        raise InputError(f"{directory}: no .avsc schema files")
    for path in files:
        try:
            obj = decode_json(path.read_text(encoding="utf-8"))
            if isinstance(obj, dict) and full_name(obj) in SERVICE_RECORDS:
                continue
            schema = avro_stream_schema(obj, origin=f"schema {path.name}")
        except (InputError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: {exc}") from None
        if schema.name in schemas:
            raise InputError(f"{path}: stream {schema.name!r} is already defined by "
                             f"{schemas[schema.name].origin}")
        schemas[schema.name] = schema
    if not schemas:
        raise InputError(f"{directory}: no stream schemas (only "
                         f"{quote_names(sorted(SERVICE_RECORDS))})")
    return schemas


_AVRO_TYPES = {"int": ColumnType.NUMBER, "long": ColumnType.NUMBER,
               "float": ColumnType.NUMBER, "double": ColumnType.NUMBER,
               "string": ColumnType.STRING, "boolean": ColumnType.BOOLEAN}


def avro_stream_schema(obj: Any, origin: str) -> StreamSchema:
    """Map one Avro record schema to a stream schema (plain primitive fields only)."""
    if not isinstance(obj, dict) or obj.get("type") != "record":
        raise InputError("expected an Avro schema of type \"record\"")
    name = obj.get("name")
    if not isinstance(name, str):
        raise InputError("the record needs a \"name\" (the stream name)")
    stream = name.rsplit(".", 1)[-1]
    if not IDENTIFIER.match(stream):
        raise InputError(f"record name {name!r} is not a stream name (letters, digits, _)")
    fields = obj.get("fields")
    if not isinstance(fields, list):
        raise InputError("the record needs a \"fields\" list")
    columns: dict[str, ColumnType] = {}
    integral = set()
    for spec in fields:
        column = spec.get("name") if isinstance(spec, dict) else None
        if not isinstance(column, str):
            raise InputError(f"a field without a name: {show_json(spec)}")
        avro_type = spec.get("type")
        if isinstance(avro_type, dict):
            avro_type = avro_type.get("type")
        if not isinstance(avro_type, str) or avro_type not in _AVRO_TYPES:
            raise InputError(f"field {column!r}: type {show_json(spec.get('type'))} is not "
                             f"supported (use one of {', '.join(_AVRO_TYPES)})")
        if column == TIMESTAMP:
            if avro_type not in ("int", "long"):
                raise InputError("field 'ts' is the event time and must be a long")
            continue
        check_column_name(column)
        if column in columns:
            raise InputError(f"field {column!r} is declared twice")
        columns[column] = _AVRO_TYPES[avro_type]
        if avro_type in ("int", "long"):
            integral.add(column)
    return StreamSchema(stream, columns, origin, frozenset(integral))


@dataclass(frozen=True)
class _Schema:
    """One loaded schema and what the codec precomputes for it."""

    full_name: str
    short_name: str
    parsed: Any  # fastavro's parsed form
    text: str  # the schema as written (docs and defaults kept), for the registry
    fingerprint: bytes
    stream: StreamSchema | None  # set for stream records
    strict_check: bool  # has enums/unions: verify decoding by re-encoding
    has_floats: bool  # has float/double fields: only then can a number be non-finite
    header: bytes  # the single-object header (magic, fingerprint) of its messages


def _kinds(schema: Any, named: set[str] | None = None) -> set[str]:
    """Every type a (parsed) schema uses, nested ones included; a union as "union". A
    name refers to a type defined earlier in the schema, whose kinds are counted
    there."""
    named = set() if named is None else named
    if isinstance(schema, list):
        return {"union"}.union(*(_kinds(s, named) for s in schema))
    if isinstance(schema, str):
        return set() if schema in named else {schema}
    if not isinstance(schema, dict):
        return set()
    kind = schema.get("type")
    if kind in ("record", "enum", "fixed"):
        named.add(schema.get("name", ""))
    if kind == "record":
        return {"record"}.union(*(_kinds(f["type"], named) for f in schema["fields"]))
    if kind == "array":
        return {"array"} | _kinds(schema["items"], named)
    if kind == "map":
        return {"map"} | _kinds(schema["values"], named)
    return {kind} if kind in ("enum", "fixed") else _kinds(kind, named)


def _load_schema(path: Path) -> _Schema:
    where = f"{path}"
    try:
        obj = decode_json(path.read_text(encoding="utf-8"))
    except (InputError, UnicodeDecodeError) as exc:
        raise InputError(f"{where}: {exc}") from None
    name = full_name(obj) if isinstance(obj, dict) else None
    if not isinstance(obj, dict) or obj.get("type") != "record" or name is None:
        raise InputError(f"{where}: expected one named Avro record schema")
    try:
        parsed = fastavro.parse_schema(obj, named_schemas={})
    except Exception as exc:  # fastavro raises several types for a bad schema
        raise InputError(f"{where}: not a valid Avro schema: {exc}") from None
    stream = None
    if name not in SERVICE_RECORDS:
        try:
            stream = avro_stream_schema(obj, origin=f"schema {path.name}")
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        if not any(isinstance(f, dict) and f.get("name") == TIMESTAMP for f in obj["fields"]):
            raise InputError(f"{where}: stream {stream.name!r} has no 'ts' field (the "
                             f"event time, a long)")
    fingerprint = framing.fingerprint(parsed)
    kinds = _kinds(parsed)
    return _Schema(name, name.rsplit(".", 1)[-1], parsed,
                   json.dumps(obj, separators=(",", ":"), ensure_ascii=False),
                   fingerprint, stream, bool(kinds & {"enum", "union"}),
                   bool(kinds & {"float", "double"}), framing.single_object(fingerprint, b""))


# -- the codec -------------------------------------------------------------------------


class Codec:
    """Encode and decode the records of one schemas directory.

    `schemas_dir` defaults to `default_schemas_dir()`. `registry_url` defaults to
    `JUGGLER_SCHEMA_REGISTRY_URL`; `""` forces single-object encoding even when the
    variable is set. `registry` injects a ready client instead.
    """

    def __init__(self, schemas_dir: str | Path | None = None, *,
                 registry_url: str | None = None,
                 registry: RegistryClient | None = None) -> None:
        self.schemas_dir = Path(schemas_dir) if schemas_dir else default_schemas_dir()
        if registry is None:
            url = os.environ.get(REGISTRY_ENV, "") if registry_url is None else registry_url
            registry = RegistryClient(url) if url else None
        self.registry = registry
        self._schemas: dict[str, _Schema] = {}
        self._by_fingerprint: dict[bytes, _Schema] = {}
        self._by_short: dict[str, _Schema | None] = {}  # None: ambiguous
        self._registry_schemas: dict[int, Any] = {}
        self._load()

    @property
    def framing(self) -> str:
        """"schema-registry" or "single-object": how `encode` frames its output."""
        return "schema-registry" if self.registry is not None else "single-object"

    def _load(self) -> None:
        if not self.schemas_dir.is_dir():
            raise InputError(f"schemas directory {self.schemas_dir} does not exist (set "
                             f"{SCHEMAS_ENV} or pass schemas_dir)")
        files = sorted(self.schemas_dir.glob("*.avsc"))
        if not files:
            raise InputError(f"{self.schemas_dir}: no .avsc schema files")
        for path in files:
            schema = _load_schema(path)
            if schema.full_name in self._schemas:
                raise InputError(f"{path}: record {schema.full_name} is defined twice")
            same = self._by_fingerprint.get(schema.fingerprint)
            if same is not None:
                raise InputError(f"{path}: same canonical form as {same.full_name}")
            self._schemas[schema.full_name] = schema
            self._by_fingerprint[schema.fingerprint] = schema
            short = schema.short_name
            self._by_short[short] = None if short in self._by_short else schema

    # -- names

    def names(self) -> list[str]:
        """Full names of every loaded record, sorted."""
        return sorted(self._schemas)

    def stream_names(self) -> list[str]:
        """The streams (record names of the stream schemas), sorted."""
        return sorted(s.stream.name for s in self._schemas.values() if s.stream)

    def catalog(self) -> Catalog:
        """Stream -> column -> type, for `compile_query` (`ts` is implicit)."""
        return {s.stream.name: dict(s.stream.columns)
                for s in sorted(self._schemas.values(), key=lambda s: s.short_name)
                if s.stream}

    def schema(self, name: str) -> Any:
        """The fastavro-parsed schema of a record (full name, or unambiguous short name)."""
        return self._get(name).parsed

    def fingerprint(self, name: str) -> bytes:
        """The 8-byte CRC-64-AVRO fingerprint a single-object message of `name` carries."""
        return self._get(name).fingerprint

    def single_object_header(self, name: str) -> bytes:
        """The single-object header (magic, fingerprint) of `name`'s messages, registry
        or not: what readers of such messages written elsewhere (Spark's `to_avro`, the
        native operator's results) compare a message's first bytes with."""
        return self._get(name).header

    def _get(self, name: str) -> _Schema:
        schema = self._schemas.get(name)
        if schema is None:
            schema = self._by_short.get(name)
        if schema is None:
            why = "is ambiguous" if name in self._by_short else "is not"
            raise UnknownSchema(f"schema {name!r} {why} among {', '.join(self.names())} "
                                f"({self.schemas_dir})")
        return schema

    # -- encoding

    def encode(self, name: str, record: Mapping[str, Any], *,
               topic: str | None = None, trusted: bool = False) -> bytes:
        """Validate and write one record, framed.

        With a registry, the schema is registered under `<topic>-value`; `topic`
        defaults to the record's topic of semantics section 7 (a stream's topic, the
        control topics, `juggler.results.<record["query"]>`, the dead-letter topic).
        Raises `SchemaViolation` for a record that does not fit the schema.

        `trusted`: the record is built from values this codec decoded and checked (a
        result's row holds event columns), so it is written without validating it
        again; validating was two thirds of a result's encoding, the worker's largest
        per-result cost. A record that still does not fit raises `SchemaViolation`
        from the writer, with a terser reason."""
        schema = self._get(name)
        if not trusted:
            _check_finite(schema, record)
        body = self._write(schema, record, trusted)
        if self.registry is None:
            return framing.single_object(schema.fingerprint, body)
        return self._header(schema, topic or _default_topic(schema, record)) + body

    def header(self, name: str, topic: str) -> bytes:
        """The framing `encode(name, record, topic=topic)` puts before the Avro body,
        for bodies written elsewhere (the native operator's results). Every header
        of one codec has `header_size` bytes."""
        if self.registry is None:
            return self.single_object_header(name)
        return self._header(self._get(name), topic)

    @property
    def header_size(self) -> int:
        return framing.SINGLE_OBJECT_HEADER if self.registry is None else framing.CONFLUENT_HEADER

    def _header(self, schema: _Schema, topic: str) -> bytes:
        """The Schema Registry header: the schema registered under `<topic>-value`."""
        assert self.registry is not None
        return framing.confluent(self.registry.register(f"{topic}-value", schema.text), b"")

    def _write(self, schema: _Schema, record: Mapping[str, Any], trusted: bool = False) -> bytes:
        # fastavro's writer silently turns True into 1.0 and 1 into true; its
        # validator does not, so a boolean never passes for a number or back
        if not isinstance(record, Mapping):
            raise SchemaViolation(f"a {schema.full_name} record must be a mapping, got "
                                  f"{show_json(record)}")
        # validate without errors first: with raise_errors, fastavro builds (and
        # JSON-dumps the datum into) an error for every union branch it tries, which
        # made encoding results' rows most of the worker's time; the message is only
        # worth building for a record that really fails
        writer = _CHECKING_WRITERS.get(schema.full_name) or (
            _TRUSTED_WRITERS.get(schema.full_name) if trusted else None)
        if writer is not None:
            try:
                return writer(record)
            except (Unwritable, KeyError, TypeError, AttributeError):
                pass  # fastavro writes it, or says what is wrong with it
        if not trusted and not validate(record, schema.parsed, raise_errors=False):
            try:
                validate(record, schema.parsed, raise_errors=True)
            except ValidationError as exc:
                raise SchemaViolation(_invalid_record(schema, record, exc)) from None
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, schema.parsed, record,
                                       strict_allow_default=True)
        except Exception as exc:  # e.g. a field the schema does not have
            raise SchemaViolation(f"invalid {schema.full_name} record: {exc}") from None
        return out.getvalue()

    # -- decoding

    def decode(self, name: str, data: bytes | None, *, trusted: bool = False) -> dict[str, Any]:
        """Read one framed message that must be a `name` record (fields in schema order).

        Raises `DecodeError` or `SchemaViolation` with a reason and a kind (see the
        module doc), and `RegistryError` when a needed registry lookup fails.

        `trusted`: the message was written by a worker's `encode` (a result the results
        index reads back), so it is neither encoded again to prove it minimal nor
        checked for non-finite numbers; a malformed body still raises `DecodeError`.
        Those two checks were most of the index's cost, and the index shares the
        worker's process."""
        return self._decode(self._get(name), data, trusted)

    def _decode(self, schema: _Schema, data: bytes | None, trusted: bool = False) -> dict[str, Any]:
        if data is None:
            raise DecodeError(f"no message value (a tombstone), expected a "
                              f"{schema.full_name} record", NULL_VALUE)
        data = bytes(data)
        if data[:framing.SINGLE_OBJECT_HEADER] == schema.header:
            # what `_read_framed` does with it, without parsing the header in general
            # and looking its fingerprint up: a fifth of a stream record's decoding
            record = self._read(schema, schema.parsed, None, data,
                                framing.SINGLE_OBJECT_HEADER, trusted)
        else:
            record = self._read_framed(schema, data, trusted)
        if not trusted:
            _check_finite(schema, record)
        return record

    def _read_framed(self, schema: _Schema, data: bytes, trusted: bool) -> dict[str, Any]:
        """A message in either framing, read with its writer schema as `schema`."""
        try:
            frame = framing.parse(data)
        except framing.FramingError as exc:
            raise DecodeError(f"{exc} (expected a {schema.full_name} record)",
                              UNDECODABLE if data else EMPTY) from None
        if frame.fingerprint is not None:
            writer = self._by_fingerprint.get(frame.fingerprint)
            if writer is None:
                raise DecodeError(f"unknown schema fingerprint {frame.fingerprint.hex()} "
                                  f"(not one of the schemas in {self.schemas_dir}; "
                                  f"expected {schema.full_name}, "
                                  f"{schema.fingerprint.hex()})")
            if writer is not schema:
                raise SchemaViolation(f"message written with schema {writer.full_name}, "
                                      f"expected {schema.full_name}")
            return self._read(schema, schema.parsed, None, data, frame.body_start, trusted)
        assert frame.schema_id is not None
        writer_parsed = self._registry_schema(frame.schema_id, schema)
        same = framing.fingerprint(writer_parsed) == schema.fingerprint
        return self._read(schema, writer_parsed, None if same else schema.parsed,
                          data, frame.body_start, trusted)

    def _registry_schema(self, schema_id: int, expected: _Schema) -> Any:
        cached = self._registry_schemas.get(schema_id)
        if cached is not None:
            return cached
        if self.registry is None:
            raise DecodeError(f"message in the Schema Registry wire format (schema id "
                              f"{schema_id}) but no registry is configured "
                              f"({REGISTRY_ENV}); expected {expected.full_name}")
        try:
            text = self.registry.schema(schema_id)
        except UnknownSchemaId as exc:
            raise DecodeError(f"{exc} (expected {expected.full_name})") from None
        try:
            parsed = fastavro.parse_schema(json.loads(text), named_schemas={})
        except Exception as exc:
            raise DecodeError(f"schema id {schema_id} from the registry is not a valid "
                              f"Avro schema: {exc}") from None
        self._registry_schemas[schema_id] = parsed
        return parsed

    def _read(self, schema: _Schema, writer: Any, reader: Any, data: bytes,
              start: int, trusted: bool = False) -> dict[str, Any]:
        name = schema.full_name
        fast = _READERS.get(name) if reader is None else None
        if fast is not None:
            read = fast(data, start)
            if read is not None:  # a body in the writer's one form: fastavro's record
                return read
        stream = io.BytesIO(data)
        stream.seek(start)
        try:
            record = fastavro.schemaless_reader(stream, writer, reader)
        except EOFError as exc:
            # fastavro names the stream object ("cannot read double from <_io.BytesIO
            # object at 0x...>"): an address would make each dead letter's reason differ
            detail = f": {_STREAM_REPR.sub('', str(exc))}" if str(exc) else ""
            raise DecodeError(f"truncated Avro body for {name}: the data ends early"
                              f"{detail} ({len(data) - start}-byte body)") from None
        except UnicodeDecodeError:
            raise DecodeError(f"malformed Avro body for {name}: a string is not valid "
                              f"UTF-8") from None
        except IndexError:
            raise DecodeError(f"malformed Avro body for {name}: an enum or union index "
                              f"is out of range") from None
        except SchemaResolutionError as exc:  # a well-formed record of another schema
            raise SchemaViolation(f"the writer schema cannot be read as {name}: "
                                  f"{exc}") from None
        except Exception as exc:  # anything else fastavro trips over is a bad body too
            raise DecodeError(f"malformed Avro body for {name}: "
                              f"{type(exc).__name__}: {exc}") from None
        end = stream.tell()
        if end != len(data):
            raise DecodeError(f"{len(data) - end} trailing bytes after the {name} record "
                              f"({end - start}-byte body)")
        if not isinstance(record, dict):
            raise DecodeError(f"the message is not a {name} record")
        if reader is None and schema.strict_check and not trusted:
            again = io.BytesIO()
            fastavro.schemaless_writer(again, writer, record)
            if again.getvalue() != data[start:]:
                raise DecodeError(f"malformed Avro body for {name}: an enum or union "
                                  f"index is out of range (or a number is not minimally "
                                  f"encoded)")
        return record

    # -- streams

    @cached_property
    def native_decoder(self) -> EventDecoder:
        """The worker's fast path for stream records (`juggler_native.EventDecoder`):
        it reads the plain single-object records of every stream whose fields are
        plain primitives into events the operator takes without a dict, and gives
        None for any other record, which `event_from` then decodes or refuses."""
        from juggler.engine.rust_core import EventDecoder  # the Rust core, only for a worker

        streams = []
        for schema in self._schemas.values():
            fields = [(f["name"], f["type"]) for f in schema.parsed["fields"]]
            if (schema.stream is not None and self._by_short.get(schema.short_name) is schema
                    and all(isinstance(t, str) for _, t in fields)):
                streams.append((schema.short_name, schema.header, fields))
        return EventDecoder(streams, MAX_KEY_BYTES)

    def stream_event(self, stream: str, key: bytes | None, value: bytes | None, topic: str,
                     partition: int, offset: int) -> Event | DecodedEvent:
        """A stream record as the worker reads it: the native decoder reads the plain
        records (almost all) into a `juggler_native.DecodedEvent`, which the operator
        takes as it is and which reads like an `Event`; it gives None for any other
        record, which `event_from` decodes or refuses with the reason and kind a dead
        letter carries."""
        event = self.native_decoder.event(stream, key, value, topic, partition, offset)
        if event is None:
            return self.event_from(stream, key, value, (topic, partition, offset))
        return event

    def stream_events(self, stream: str, topic: str, partition: int,
                      records: list[R]) -> list[Event | DecodedEvent | CodecError]:
        """A fetched group of one stream partition's records, each as `stream_event`
        reads it but a refused one given as its `CodecError` rather than raised: one
        native call for the group (`EventDecoder.events`) instead of one per record,
        then `event_from` for just the records it left to Python."""
        events: list[Any] = self.native_decoder.events(stream, topic, partition, records)
        if None in events:  # rare: only malformed or leniently encoded records
            for i, record in enumerate(records):
                if events[i] is None:
                    try:
                        events[i] = self.event_from(stream, record.key, record.value,
                                                    (topic, partition, record.offset))
                    except CodecError as exc:
                        events[i] = exc
        return events

    def event_from(self, stream: str, key: str | bytes | None, value: bytes | None,
                   position: Position) -> Event:
        """A stream message as an engine `Event`: decoded, validated, `ts` taken out of
        `data` (columns in schema order). `key` is the Kafka message key (UTF-8).

        Any bad input raises a `CodecError` whose kind says what (the key is checked
        first): `no_key`, `oversized_key`, `bad_key`, then `null_value`, `empty`,
        `undecodable`, `schema`. Only a failing registry raises anything else
        (`RegistryError`)."""
        schema = self._get(stream)
        if schema.stream is None:
            raise UnknownSchema(f"{schema.full_name} is not a stream schema")
        entity = _entity_key(schema.stream.name, key)
        record = self._decode(schema, value)
        ts = record.pop(TIMESTAMP)
        return Event(schema.stream.name, entity, ts, record, position)


# -- helpers ---------------------------------------------------------------------------


_STREAM_REPR = re.compile(r" from <[^>]*>")


def _entity_key(stream: str, key: str | bytes | None) -> str:
    """A stream message's Kafka key as the entity key: present, at most `MAX_KEY_BYTES`
    long, UTF-8 text (a str key must be encodable, e.g. no lone surrogates)."""
    if key is None:
        raise SchemaViolation(f"stream {stream} message without a key: the entity key "
                              f"must be the Kafka message key", NO_KEY)
    raw = key.encode("utf-8", "surrogatepass") if isinstance(key, str) else bytes(key)
    if len(raw) > MAX_KEY_BYTES:
        raise SchemaViolation(f"stream {stream} message key has {len(raw):,} bytes, more "
                              f"than the {MAX_KEY_BYTES:,} an entity key may have: "
                              f"{framing.describe_bytes(raw[:16])}...", OVERSIZED_KEY)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DecodeError(f"stream {stream} message key is not UTF-8 text: "
                          f"{framing.describe_bytes(raw[:16])}", BAD_KEY) from None


def result_record(result: Result) -> dict[str, Any]:
    """A `juggler.Result` record for an engine result whose sources are Kafka
    positions `(topic, partition, offset)`."""
    sources = {}
    for stream, position in result.sources.items():
        if not (isinstance(position, tuple) and len(position) == 3):
            raise SchemaViolation(f"result of {result.query}: source {stream} has position "
                                  f"{position!r}, expected (topic, partition, offset)")
        topic, partition, offset = position
        sources[stream] = {"topic": topic, "partition": partition, "offset": offset}
    return {"query": result.query, "key": result.key, "ts": result.ts,
            "sources": sources, "row": dict(result.row)}


def _default_topic(schema: _Schema, record: Mapping[str, Any]) -> str:
    if schema.stream is not None:
        return names.stream_topic(schema.stream.name)
    if schema.full_name == RESULT:
        return names.RESULTS
    return _SERVICE_TOPICS[schema.full_name]


def _check_finite(schema: _Schema, record: Any) -> None:
    """Numbers must be finite (semantics section 1): NaN never compares, and +-inf is not
    an event value anyone means. A schema without float or double fields has none to
    check: walking a status or command record for them was a quarter of decoding it."""
    if not schema.has_floats:
        return
    if schema.stream is not None and isinstance(record, dict):  # flat: fast path
        items: Iterable[tuple[Any, Any]] = record.items()
    else:
        items = _numbers(record, None)
    for column, value in items:
        if isinstance(value, float) and not math.isfinite(value):
            raise SchemaViolation(f"non-finite number in column {column} of "
                                  f"{schema.full_name}: {value!r}")


def _numbers(value: Any, column: str | None) -> Iterable[tuple[str | None, float]]:
    if isinstance(value, float):
        yield column, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _numbers(item, key if isinstance(key, str) else column)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _numbers(item, column)


def _invalid_record(schema: _Schema, record: Mapping[str, Any],
                    error: ValidationError) -> str:
    """A readable reason from fastavro's validation errors: one line per field (a union
    reports every branch it tried; they are joined with "or")."""
    by_field: dict[str, tuple[Any, list[str]]] = {}
    for data in error.errors:
        field = getattr(data, "field", None) or schema.full_name
        datum, expected = by_field.setdefault(field, (data.datum, []))
        expected.append(_type_name(data.schema))
    details = []
    for field, (datum, expected) in list(by_field.items())[:3]:
        top = field.removeprefix(schema.full_name + ".")
        if datum is None and "." not in top and top not in record:
            details.append(f"missing field {top!r} ({' or '.join(expected)})")
        else:
            details.append(f"{field}: got {show_json(datum)}, expected {' or '.join(expected)}")
    return f"invalid {schema.full_name} record: " + "; ".join(details)


def _type_name(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return " or ".join(_type_name(s) for s in schema)
    if isinstance(schema, dict):
        if schema.get("type") == "enum":
            return f"one of {', '.join(schema.get('symbols', []))}"
        if schema.get("type") in ("record", "fixed"):
            return f"{schema['type']} {schema.get('name')}"
        if schema.get("type") == "map":
            return f"map of {_type_name(schema.get('values'))}"
        if schema.get("type") == "array":
            return f"array of {_type_name(schema.get('items'))}"
        return _type_name(schema.get("type"))
    return str(schema)
