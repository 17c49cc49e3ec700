"""The two ways a Juggler Avro message says which schema wrote it.

Why two: with no schema registry, every message must still name its writer schema, and
Avro's own answer is the *single-object encoding* (Avro spec, "Single-object
encoding"): ``C3 01`` + the 8-byte little-endian CRC-64-AVRO fingerprint of the
schema's parsing canonical form + the binary body. Deployments that run a Confluent-
compatible Schema Registry expect its *wire format* instead: ``00`` + the 4-byte
big-endian schema id + the binary body. Both are parsed here without looking at the
body; `juggler.codec.avro` does the rest.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from fastavro.schema import fingerprint as _fingerprint
from fastavro.schema import to_parsing_canonical_form

SINGLE_OBJECT_MAGIC = b"\xc3\x01"
CONFLUENT_MAGIC = b"\x00"
SINGLE_OBJECT_HEADER = len(SINGLE_OBJECT_MAGIC) + 8
CONFLUENT_HEADER = len(CONFLUENT_MAGIC) + 4

_SCHEMA_ID = struct.Struct(">I")


class FramingError(ValueError):
    """The bytes do not start with a header of either format; str() says what was seen."""


@dataclass(frozen=True)
class Frame:
    """A parsed header: exactly one of `fingerprint` (8 bytes) or `schema_id` is set;
    the Avro body starts at `body_start`."""

    fingerprint: bytes | None
    schema_id: int | None
    body_start: int


def canonical_form(parsed_schema: Any) -> str:
    """The Avro parsing canonical form of a schema parsed by `fastavro.parse_schema`."""
    return to_parsing_canonical_form(parsed_schema)


def fingerprint(parsed_schema: Any) -> bytes:
    """CRC-64-AVRO of the canonical form, as the 8 little-endian bytes the header holds.

    fastavro returns the fingerprint as hex of exactly those bytes (the unit tests
    check this against the reference `avro` package)."""
    return bytes.fromhex(_fingerprint(canonical_form(parsed_schema), "CRC-64-AVRO"))


def single_object(fp: bytes, body: bytes) -> bytes:
    if len(fp) != 8:
        raise ValueError(f"a CRC-64-AVRO fingerprint has 8 bytes, got {len(fp)}")
    return SINGLE_OBJECT_MAGIC + fp + body


def confluent(schema_id: int, body: bytes) -> bytes:
    return CONFLUENT_MAGIC + _SCHEMA_ID.pack(schema_id) + body


def parse(data: bytes) -> Frame:
    """Read the header of either format; raise `FramingError` naming what is wrong."""
    if data.startswith(SINGLE_OBJECT_MAGIC):
        if len(data) < SINGLE_OBJECT_HEADER:
            raise FramingError(f"truncated single-object header: {len(data)} bytes, the "
                               f"header alone has {SINGLE_OBJECT_HEADER}")
        return Frame(bytes(data[2:SINGLE_OBJECT_HEADER]), None, SINGLE_OBJECT_HEADER)
    if data.startswith(CONFLUENT_MAGIC):
        if len(data) < CONFLUENT_HEADER:
            raise FramingError(f"truncated Schema Registry header: {len(data)} bytes, the "
                               f"header alone has {CONFLUENT_HEADER}")
        (schema_id,) = _SCHEMA_ID.unpack_from(data, 1)
        return Frame(None, schema_id, CONFLUENT_HEADER)
    if not data:
        raise FramingError("empty message value (a tombstone?), expected an Avro message")
    raise FramingError(f"unknown magic bytes {describe_bytes(data[:2])}: expected Avro "
                       f"single-object encoding (c3 01) or the Schema Registry wire "
                       f"format (00)")


def describe_bytes(data: bytes) -> str:
    """Hex, plus the text when it is printable (so a JSON payload is easy to spot)."""
    text = data.hex(" ")
    try:
        decoded = data.decode("ascii")
    except UnicodeDecodeError:
        return text
    return f"{text} ({decoded!r})" if decoded.isprintable() else text
