"""The Avro bodies of `juggler.Command` and `juggler.CommandStatus`, written and read
without fastavro.

Why: a burst of registrations costs, per command, a client command to read, a fanout
copy and an ACCEPTED status to write, and the client reads the statuses back;
fastavro's generic writer and reader, and the check that an untrusted body is minimal
(written again and compared), were a fifth of the worker's busiest thread in such a
burst (docs/benchmarks.md, "Registration"). These know the two schemas
(`schemas/Command.avsc`, `schemas/CommandStatus.avsc`) and do the same in a few
operations per field.

Both sides leave everything unusual to fastavro, which writes it or says what is wrong:
a writer raises `Unwritable` (or `KeyError`) for a record that is not exactly what the
schema holds, field by field as fastavro's validator checks it, so a record it writes
needs no validation (a client's commands are written so too); and a reader gives None
for a body that is not in the one form the writer writes (a number not minimally
encoded, an index out of range, bytes left over, a string that is not UTF-8). So a body
read here is exactly what fastavro would read, and passed the minimal check.
`tests/unit/test_control_bodies.py` holds both to fastavro.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from juggler.codec.result_body import (INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, Unwritable,
                                       write_long, write_string)
from juggler.wire.names import ACTIONS, OUTCOMES

_ACTION_INDEX = {symbol: i for i, symbol in enumerate(ACTIONS)}
_STATUS_INDEX = {symbol: i for i, symbol in enumerate(OUTCOMES)}


class _NotCanonical(Exception):
    """A body this reader leaves to fastavro."""


def command_body(record: Mapping[str, Any]) -> bytes:
    out = bytearray()
    out.append(_ACTION_INDEX[record["action"]] << 1)
    write_string(record["id"], out)
    text = record["text"]
    if text is None:
        out.append(0)
    else:
        out.append(2)
        write_string(text, out)
    out.append(_boolean(record["history"]))
    out.append(_boolean(record["own_topic"]))
    return bytes(out)


def status_body(record: Mapping[str, Any]) -> bytes:
    out = bytearray()
    write_string(record["id"], out)
    out.append(_ACTION_INDEX[record["action"]] << 1)
    out.append(_STATUS_INDEX[record["status"]] << 1)
    write_string(record["message"], out)
    write_long(record["command_offset"], out, LONG_MIN, LONG_MAX)
    write_long(record["partition"], out, INT_MIN, INT_MAX)
    write_long(record["partitions"], out, INT_MIN, INT_MAX)
    return bytes(out)


def read_command(data: bytes, pos: int) -> dict[str, Any] | None:
    """The command whose body starts at `pos` and ends with `data`, or None."""
    try:
        action, pos = _symbol(ACTIONS, data, pos)
        qid, pos = _read_text(data, pos)
        branch = data[pos]
        if branch == 0:
            text, pos = None, pos + 1
        elif branch == 2:
            text, pos = _read_text(data, pos + 1)
        else:
            return None
        history, own_topic = _read_boolean(data[pos]), _read_boolean(data[pos + 1])
        if pos + 2 != len(data):
            return None
    except (_NotCanonical, IndexError, UnicodeDecodeError):
        return None
    return {"action": action, "id": qid, "text": text, "history": history,
            "own_topic": own_topic}


def read_status(data: bytes, pos: int) -> dict[str, Any] | None:
    """The status whose body starts at `pos` and ends with `data`, or None."""
    try:
        qid, pos = _read_text(data, pos)
        action, pos = _symbol(ACTIONS, data, pos)
        status, pos = _symbol(OUTCOMES, data, pos)
        message, pos = _read_text(data, pos)
        offset, pos = _read_long(data, pos, LONG_MIN, LONG_MAX)
        partition, pos = _read_long(data, pos, INT_MIN, INT_MAX)
        partitions, pos = _read_long(data, pos, INT_MIN, INT_MAX)
        if pos != len(data):
            return None
    except (_NotCanonical, IndexError, UnicodeDecodeError):
        return None
    return {"id": qid, "action": action, "status": status, "message": message,
            "command_offset": offset, "partition": partition, "partitions": partitions}


def _boolean(value: Any) -> int:
    if type(value) is not bool:
        raise Unwritable(f"{value!r} is not a boolean")
    return 1 if value else 0


def _read_long(data: bytes, pos: int, low: int, high: int) -> tuple[int, int]:
    """A minimally encoded zigzag varint within [low, high]."""
    byte = data[pos]
    n, shift = byte & 0x7F, 7
    while byte >= 0x80:
        pos += 1
        byte = data[pos]
        n |= (byte & 0x7F) << shift
        shift += 7
    if (byte == 0 and shift > 7) or shift > 70:  # a redundant last byte, or past a long
        raise _NotCanonical
    value = (n >> 1) ^ -(n & 1)
    if not low <= value <= high:
        raise _NotCanonical
    return value, pos + 1


def _read_text(data: bytes, pos: int) -> tuple[str, int]:
    size, pos = _read_long(data, pos, 0, LONG_MAX)
    end = pos + size
    if end > len(data):
        raise _NotCanonical
    return data[pos:end].decode("utf-8"), end


def _read_boolean(byte: int) -> bool:
    if byte > 1:
        raise _NotCanonical
    return byte == 1


def _symbol(symbols: tuple[str, ...], data: bytes, pos: int) -> tuple[str, int]:
    byte = data[pos]
    if byte & 1 or byte >> 1 >= len(symbols):
        raise _NotCanonical
    return symbols[byte >> 1], pos + 1
