"""Records the worker writes stay under the producer's size limit
(`juggler.codec.bounded`): dead letters of any input, however large, and results with
huge rows. Every bound is checked the way the producer counts: Kafka key + value +
`RECORD_OVERHEAD_BYTES` <= max_bytes. Dead letters are also read back with the
reference `avro` package.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_avro_codec import SCHEMAS, FakeRegistry, reference_read

from juggler.codec.avro import CODEC_KINDS, DEAD_LETTER, MAX_KEY_BYTES, RESULT, Codec
from juggler.codec.bounded import (DEAD_LETTER_KINDS, DEFAULT_MAX_RECORD_BYTES,
                                   MAX_REASON_BYTES, RECORD_OVERHEAD_BYTES, RecordTooLarge,
                                   dead_letter, encode_result_bounded)

LIMIT = DEFAULT_MAX_RECORD_BYTES
WHERE = {"topic": "juggler.stream.B", "partition": 3, "offset": 2 ** 40}


@pytest.fixture(scope="module")
def codec() -> Codec:
    return Codec(SCHEMAS, registry_url="")


def letter(codec: Codec, key: bytes | None, value: bytes | None, *, kind: str = "undecodable",
           reason: str = "unknown magic bytes", max_bytes: int = LIMIT
           ) -> tuple[bytes | None, dict[str, Any]]:
    """Dead-letter one record; check the size bound and that both implementations read
    the same record back. Returns (Kafka key, decoded DeadLetter)."""
    kafka_key, data = dead_letter(codec, **WHERE, key=key, value=value, kind=kind,
                                  reason=reason, max_bytes=max_bytes)
    assert len(kafka_key or b"") + len(data) + RECORD_OVERHEAD_BYTES <= max_bytes
    record = codec.decode(DEAD_LETTER, data)
    assert reference_read(DEAD_LETTER, data[10:]) == record
    assert kafka_key == record["key"]  # keyed by the original key exactly when copied
    assert (record["topic"], record["partition"], record["offset"]) == tuple(WHERE.values())
    assert (record["key_size"], record["value_size"]) == (_size(key), _size(value))
    assert record["kind"] == kind
    return kafka_key, record


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


# -- kinds -------------------------------------------------------------------------------


def test_dead_letter_kinds() -> None:
    assert DEAD_LETTER_KINDS == (*CODEC_KINDS, "late", "bad_command")
    assert len(set(DEAD_LETTER_KINDS)) == len(DEAD_LETTER_KINDS)
    schema = json.loads((SCHEMAS / "DeadLetter.avsc").read_text())
    kind_doc = next(f["doc"] for f in schema["fields"] if f["name"] == "kind")
    assert all(kind in kind_doc for kind in DEAD_LETTER_KINDS)


def test_unknown_kind_is_a_caller_mistake(codec: Codec) -> None:
    with pytest.raises(ValueError, match="dead-letter kind 'bad' is not one of null_value"):
        dead_letter(codec, **WHERE, key=b"k", value=b"v", kind="bad", reason="x",
                    max_bytes=LIMIT)


# -- dead letters ------------------------------------------------------------------------


def test_small_record_is_copied(codec: Codec) -> None:
    kafka_key, record = letter(codec, b"p1", b"\x00garbage", kind="late",
                               reason="late: ts 1 < maxts 5 - 0")
    assert kafka_key == b"p1"
    assert record == {"key": b"p1", "value": b"\x00garbage", "key_size": 2, "value_size": 8,
                      **WHERE, "kind": "late", "reason": "late: ts 1 < maxts 5 - 0"}


def test_tombstone_and_keyless(codec: Codec) -> None:
    kafka_key, record = letter(codec, b"p1", None, kind="null_value")
    assert (kafka_key, record["value"], record["value_size"]) == (b"p1", None, -1)
    kafka_key, record = letter(codec, None, b"", kind="no_key")
    assert (kafka_key, record["key"], record["key_size"]) == (None, None, -1)
    assert (record["value"], record["value_size"]) == (b"", 0)


@pytest.mark.parametrize("size", [999_700, LIMIT - RECORD_OVERHEAD_BYTES - 2, LIMIT,
                                  5 * LIMIT])
def test_value_too_large_to_copy_is_referenced(codec: Codec, size: int) -> None:
    """The crash-loop case: a value near or over the limit leaves no room for the rest;
    the dead letter keeps the key, the size and where the original is."""
    kafka_key, record = letter(codec, b"patient-0", b"\xab" * size)
    assert kafka_key == b"patient-0" and record["key"] == b"patient-0"
    assert record["value"] is None and record["value_size"] == size


def test_largest_value_that_fits_is_copied(codec: Codec) -> None:
    without = dead_letter(codec, **WHERE, key=b"k", value=b"v" * LIMIT, kind="late",
                          reason="r", max_bytes=LIMIT)[1]
    # copying the value adds its bytes and a 3-byte length (value_size is as long and
    # the union index is one byte either way); the Kafka key is 1 byte
    room = LIMIT - RECORD_OVERHEAD_BYTES - 1 - len(without) - 3
    assert letter(codec, b"k", b"v" * room, kind="late", reason="r")[1]["value"] is not None
    assert letter(codec, b"k", b"v" * (room + 1), kind="late", reason="r")[1]["value"] is None


def test_key_too_large_to_copy_is_dropped_with_the_kafka_key(codec: Codec) -> None:
    kafka_key, record = letter(codec, b"k" * 600_000, b"small", kind="oversized_key")
    assert kafka_key is None and record["key"] is None and record["key_size"] == 600_000
    assert record["value"] == b"small"
    kafka_key, record = letter(codec, b"k" * 600_000, b"v" * 600_000, kind="oversized_key")
    assert kafka_key is None and record["key"] is None and record["value"] == b"v" * 600_000
    kafka_key, record = letter(codec, b"k" * 600_000, b"v" * 999_500, kind="oversized_key")
    assert kafka_key is None and record["key"] is record["value"] is None
    assert (record["key_size"], record["value_size"]) == (600_000, 999_500)


def test_oversized_stream_key_is_still_copied_when_it_fits(codec: Codec) -> None:
    key = b"k" * (MAX_KEY_BYTES + 1)
    kafka_key, record = letter(codec, key, b"value", kind="oversized_key")
    assert kafka_key == key and record["key"] == key and record["value"] == b"value"


def test_reason_is_cut(codec: Codec) -> None:
    reason = letter(codec, b"k", b"v", reason="é" * 10_000)[1]["reason"]
    assert len(reason.encode()) <= MAX_REASON_BYTES and reason.endswith("é...")
    assert letter(codec, b"k", b"v", reason="x\ud800y")[1]["reason"] == "x?y"
    exact = "r" * MAX_REASON_BYTES
    assert letter(codec, b"k", b"v", reason=exact)[1]["reason"] == exact


def test_limit_too_small_for_any_dead_letter(codec: Codec) -> None:
    with pytest.raises(RecordTooLarge, match="does not fit 600 bytes even without"):
        dead_letter(codec, **WHERE, key=b"k", value=b"v", kind="late", reason="r" * 200,
                    max_bytes=600)


@settings(max_examples=150, deadline=None)
@given(key_size=st.one_of(st.none(), st.integers(0, 1_200_000)),
       value_size=st.one_of(st.none(), st.integers(0, 1_200_000)),
       max_bytes=st.integers(20_000, LIMIT),
       kind=st.sampled_from(DEAD_LETTER_KINDS))
def test_any_dead_letter_fits(codec: Codec, key_size: int | None, value_size: int | None,
                              max_bytes: int, kind: str) -> None:
    key = None if key_size is None else b"k" * key_size
    value = None if value_size is None else b"v" * value_size
    _, record = letter(codec, key, value, kind=kind, reason="why " * 2000,
                       max_bytes=max_bytes)
    room = max_bytes - RECORD_OVERHEAD_BYTES - 5_000 - 2 * (key_size or 0)
    if (value_size or 0) < room:  # plenty of room: nothing is given up
        assert (record["key"], record["value"]) == (key, value)


def test_registry_subject_is_the_dead_letter_topic() -> None:
    registry = FakeRegistry()
    try:
        codec = Codec(SCHEMAS, registry_url=registry.url)
        _, data = dead_letter(codec, **WHERE, key=b"k", value=b"v" * LIMIT, kind="empty",
                              reason="r", max_bytes=LIMIT,
                              deadletter_topic="test-juggler.deadletter")
        assert list(registry.subjects) == ["test-juggler.deadletter-value"]
        assert codec.decode(DEAD_LETTER, data)["value_size"] == LIMIT
    finally:
        registry.close()


# -- results -----------------------------------------------------------------------------


def result(row: dict[str, Any]) -> dict[str, Any]:
    return {"query": "q1", "key": "p1", "ts": 2000,
            "sources": {"B": {"topic": "juggler.stream.B", "partition": 3, "offset": 17},
                        "H": {"topic": "juggler.stream.H", "partition": 3, "offset": 9}},
            "row": row}


def test_ordinary_result_is_encoded_as_is(codec: Codec) -> None:
    record = result({"B.temp": 38.5, "H.alert": True, "B.name": "x"})
    data, omitted = encode_result_bounded(codec, record, topic="juggler.results",
                                          key=b"p1", max_bytes=LIMIT)
    assert not omitted and data == codec.encode(RESULT, record)


def test_huge_row_is_omitted_and_flagged(codec: Codec) -> None:
    """SELECT * over several large string columns: each fits, together they do not."""
    record = result({f"B.s{i}": "x" * 300_000 for i in range(4)})
    data, omitted = encode_result_bounded(codec, record, topic="juggler.results",
                                          key=b"p1", max_bytes=LIMIT)
    assert omitted and len(b"p1") + len(data) + RECORD_OVERHEAD_BYTES <= LIMIT
    assert codec.decode(RESULT, data) == {**record, "row": {}}  # sources kept


def test_result_bound_is_exact(codec: Codec) -> None:
    record = result({"B.s": "x" * 1000})
    size = len(codec.encode(RESULT, record))
    key = b"k" * 100
    fits = len(key) + size + RECORD_OVERHEAD_BYTES
    assert encode_result_bounded(codec, record, topic="t", key=key, max_bytes=fits)[1] is False
    assert encode_result_bounded(codec, record, topic="t", key=key,
                                 max_bytes=fits - 1)[1] is True


def test_limit_too_small_for_any_result(codec: Codec) -> None:
    with pytest.raises(RecordTooLarge, match="a result of q1 does not fit 600 bytes even "
                                             "without its row"):
        encode_result_bounded(codec, result({"B.s": "x"}), topic="t", key=b"k" * 200,
                              max_bytes=600)
