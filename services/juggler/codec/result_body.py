"""The Avro body of a `juggler.Result` record, written without fastavro.

Why: a worker writes one record per result, and at 100 join queries results outnumber
events; fastavro's generic writer resolves the row's union branch by branch for every
value, which at that rate is a large share of the worker's time (docs/benchmarks.md,
"K"). This writer knows the schema (`schemas/Result.avsc`: query, key, ts,
sources: map of Position, row: map of [null, boolean, long, double, string]) and
writes the same bytes in a third of the time, caching the encoded form of the strings
that repeat (query ids, column names, topics, keys).

Only for records built by the service (`Codec.encode(..., trusted=True)`): anything it
does not expect raises `Unwritable`, and the caller lets fastavro write the record or
say what is wrong with it. `tests/unit/test_result_body.py` holds it to fastavro's
bytes.

The worker's results per event are written by the native operator instead
(`services/juggler_native/src/avro.rs`, `NativeEngine.process_batch_encoded`); this
writer keeps the rest (a registration's history results, and the results the native
writer hands back: too large, or not writable the same way) and is the oracle
`tests/unit/test_native_results.py` holds the native bytes to.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
STRING_CACHE = 50_000
"""Encoded strings kept (query ids, column names, topics, entity keys); when full, new
strings are encoded every time."""

_double = struct.Struct("<d").pack
_strings: dict[str, bytes] = {}


class Unwritable(ValueError):
    """A record this writer does not handle; fastavro's writer decides."""


def result_body(record: Mapping[str, Any]) -> bytes:
    out = bytearray()
    _string(record["query"], out)
    _string(record["key"], out)
    write_long(record["ts"], out, LONG_MIN, LONG_MAX)
    sources = record["sources"]
    if sources:
        write_long(len(sources), out, 0, LONG_MAX)
        for stream, position in sources.items():
            _string(stream, out)
            _string(position["topic"], out)
            write_long(position["partition"], out, INT_MIN, INT_MAX)
            write_long(position["offset"], out, LONG_MIN, LONG_MAX)
    out.append(0)
    row = record["row"]
    if row:
        write_long(len(row), out, 0, LONG_MAX)
        for column, value in row.items():
            _string(column, out)
            kind = type(value)
            if kind is float:
                out.append(6)  # branch 3 (double), zigzag
                out += _double(value)
            elif value is None:
                out.append(0)
            elif kind is bool:
                out.append(2)
                out.append(1 if value else 0)
            elif kind is int:
                out.append(4)
                write_long(value, out, LONG_MIN, LONG_MAX)
            elif kind is str:
                out.append(8)
                _string(value, out)
            else:
                raise Unwritable(f"row value of type {kind.__name__}")
    out.append(0)
    return bytes(out)


def write_long(n: Any, out: bytearray, low: int, high: int) -> None:
    """Zigzag varint, as Avro writes int and long."""
    if type(n) is not int or not low <= n <= high:
        raise Unwritable(f"{n!r} is not an Avro number in [{low}, {high}]")
    n = (n << 1) ^ (n >> 63)
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def write_string(text: Any, out: bytearray) -> None:
    """An Avro string: its UTF-8 length, then its bytes."""
    if type(text) is not str:
        raise Unwritable(f"{text!r} is not a string")
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raise Unwritable("a string that is not UTF-8") from None
    write_long(len(raw), out, 0, LONG_MAX)
    out += raw


def _string(text: Any, out: bytearray) -> None:
    encoded = _strings.get(text) if type(text) is str else None
    if encoded is None:
        head = bytearray()
        write_string(text, head)
        encoded = bytes(head)
        if len(_strings) < STRING_CACHE:
            _strings[text] = encoded
    out += encoded
