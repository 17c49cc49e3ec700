"""The results index's native path (`juggler_native.result_json`,
services/juggler_native/src/result_json.rs) against its Python path in `index_row`: on every
result a worker can write it gives the same JSON text, byte for byte, and on anything
else it gives None, so `index_row`'s row is the one the Python path gives.

The Python path is `index_row` with a header no message carries (`OTHER_HEADER`)."""

from __future__ import annotations

import json
import math
import random
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from juggler.codec import framing
from juggler.codec.avro import RESULT, Codec
from juggler.engine.rust_core import result_json
from juggler.wire.names import QUERY_HEADER
from juggler.runtime.results_store import Row, index_row

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
OTHER_HEADER = framing.single_object(b"\xff" * 8, b"")
CODEC = Codec(registry_url="")
HEADER = CODEC.single_object_header(RESULT)
LONG = st.integers(-2**63, 2**63 - 1)

SPECIAL = '"\\/\n\r\t\b\f\x00\x01\x1f\x7f\x80\xe9\u2028\ud7ff\ue000\uffff\U0001f600\U0010ffff'
TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from(SPECIAL), max_size=12)
"""Any text (no lone surrogates: they are not UTF-8), often with what JSON escapes."""


def _double_of(bits: int) -> float:
    return struct.unpack("<d", bits.to_bytes(8, "little"))[0]


DOUBLE = (st.floats(allow_nan=False, allow_infinity=False)
          | st.integers(0, 2**64 - 1).map(_double_of).filter(math.isfinite)
          | st.integers(-2**60, 2**60).map(float)
          | st.integers(-2**56, 2**56).map(lambda n: n / 8)  # often a tie between the shortest
          | st.integers(-1074, 1023).map(lambda e: 2.0**e)  # closer doubles below than above
          | st.sampled_from([0.0, -0.0, 1e-5, 1e-4, 1e15, 1e16, 9999999999999998.0, 5e-324,
                             2.2250738585072014e-308, 1.7976931348623157e308, 0.1, 1 / 3]))
VALUE = st.none() | st.booleans() | LONG | DOUBLE | TEXT
POSITION = st.fixed_dictionaries({"topic": TEXT, "partition": st.integers(-2**31, 2**31 - 1),
                                  "offset": LONG})
RESULTS = st.fixed_dictionaries({
    "query": TEXT, "key": TEXT, "ts": LONG,
    "sources": st.dictionaries(TEXT, POSITION, max_size=4),
    "row": st.dictionaries(TEXT, VALUE, max_size=8)})


class Message:
    """What `index_row` reads of a confluent_kafka message."""

    def __init__(self, value: bytes | None, query: bytes | None = b"q1", topic: str = "juggler.results",
                 partition: int = 2, offset: int = 41) -> None:
        self._value, self._topic, self._partition, self._offset = value, topic, partition, offset
        self._headers = [(QUERY_HEADER, query)] if query is not None else None

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes]] | None:
        return self._headers

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


def python_row(m: Message) -> Row | None:
    return index_row(m, CODEC, OTHER_HEADER)


def encoded(record: dict[str, Any]) -> bytes:
    return CODEC.encode(RESULT, record, trusted=True)


def native_text(value: bytes, m: Message | None = None) -> str | None:
    m = m or Message(value)
    return result_json(value, HEADER, m.topic(), m.partition(), m.offset())


@given(RESULTS, TEXT, st.integers(0, 2**31 - 1), st.integers(-2**63, 2**63 - 1))
@SETTINGS
def test_a_worker_result_is_written_as_the_python_path_writes_it(
        record: dict[str, Any], topic: str, partition: int, offset: int) -> None:
    m = Message(encoded(record), topic=topic, partition=partition, offset=offset)
    text = native_text(encoded(record), m)
    expected = python_row(m)
    assert expected is not None
    assert text == expected[4]
    assert index_row(m, CODEC, HEADER) == expected
    position = {"topic": topic, "partition": partition, "offset": offset}
    assert json.loads(text) == json.loads(json.dumps(record | {"position": position}))


def test_doubles_are_written_as_python_repr() -> None:
    """Many doubles from random bits (every exponent, subnormals too), 500 a row."""
    rng = random.Random(20261124)
    for _ in range(40):
        row = {str(i): d for i in range(500)
               if math.isfinite(d := _double_of(rng.getrandbits(64)))}
        record = {"query": "q", "key": "k", "ts": 0, "sources": {}, "row": row}
        m = Message(encoded(record))
        assert native_text(encoded(record)) == python_row(m)[4]


def _varint(n: int) -> bytes:
    z, out = (n << 1) ^ (n >> 63), bytearray()
    while z > 0x7F:
        out.append(z & 0x7F | 0x80)
        z >>= 7
    return bytes(out + bytes([z]))


GOOD = encoded({"query": "q", "key": "k", "ts": 5, "sources": {"S": {"topic": "t", "partition": 1, "offset": 2}},
                "row": {"a": 1.5}})
ROW_START = len(GOOD) - 13  # the row map: count, "a", branch 3, 8 bytes, the end
MALFORMED = {
    "empty": b"",
    "a header alone": HEADER,
    "registry framing": framing.confluent(7, GOOD[10:]),
    "another fingerprint": framing.single_object(b"\x01" * 8, GOOD[10:]),
    "truncated": GOOD[:-1],
    "a trailing byte": GOOD + b"\x00",
    "a NaN": GOOD[:ROW_START + 4] + struct.pack("<d", math.nan) + b"\x00",
    "an infinity": GOOD[:ROW_START + 4] + struct.pack("<d", -math.inf) + b"\x00",
    "union branch 5": GOOD[:ROW_START + 3] + _varint(5) + b"\x00",
    "union branch -1": GOOD[:ROW_START + 3] + _varint(-1) + b"\x00",
    "boolean 2": GOOD[:ROW_START + 3] + _varint(1) + b"\x02\x00",
    "a negative block count": GOOD[:ROW_START] + _varint(-1) + _varint(11) + GOOD[ROW_START + 1:],
    "a key twice": GOOD[:ROW_START] + _varint(2) + GOOD[ROW_START + 1:-1] + GOOD[ROW_START + 1:],
    "a non-minimal varint": GOOD[:ROW_START] + b"\x82\x00" + GOOD[ROW_START + 1:],
    "bad UTF-8": GOOD[:ROW_START + 2] + b"\xff" + GOOD[ROW_START + 3:],
    "a partition beyond 32 bits": GOOD[:20] + b"\x80\x80\x80\x80\x10" + GOOD[21:],
}


def test_the_malformed_fixtures_change_only_what_they_say() -> None:
    assert GOOD[ROW_START:ROW_START + 4] == _varint(1) + b"\x02a" + _varint(3)
    assert GOOD[20] == _varint(1)[0]  # the source's partition
    assert native_text(GOOD) is not None


@pytest.mark.parametrize("name", MALFORMED)
def test_anything_else_takes_the_python_path(name: str) -> None:
    value = MALFORMED[name]
    assert native_text(value) is None
    m = Message(value)
    assert index_row(m, CODEC, HEADER) == python_row(m)


def test_rows_without_a_query_header_or_a_value_are_unchanged() -> None:
    for m in [Message(GOOD, query=None), Message(None), Message(None, query=None),
              Message(GOOD, query=b"\xff")]:
        assert index_row(m, CODEC, HEADER) == python_row(m)


@given(RESULTS, st.data())
@SETTINGS
def test_any_damage_to_a_result_gives_the_python_paths_row(record: dict[str, Any], data: st.DataObject) -> None:
    value = bytearray(encoded(record))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(value)))
        damage = data.draw(st.sampled_from(["cut", "insert", "replace"]))
        byte = data.draw(st.integers(0, 255))
        if damage == "cut":
            del value[i:]
        elif damage == "insert":
            value.insert(i, byte)
        elif i < len(value):
            value[i] = byte
    m = Message(bytes(value))
    assert index_row(m, CODEC, HEADER) == python_row(m)
