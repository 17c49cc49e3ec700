"""The Avro codec (`juggler.codec.avro`): round trips for every schema in `schemas/`,
byte-for-byte agreement with the reference implementation (the `avro` package), every
DecodeError / SchemaViolation path and the kind it reports (fuzzed: bad input raises a
CodecError and nothing else), and the Schema Registry framing against a small in-test
HTTP server that implements the two registry endpoints the codec uses.

No real Schema Registry is run here (karapace is not on PyPI and Confluent's registry
is not on Maven Central); the server below follows the Confluent REST API for
`POST /subjects/<subject>/versions` and `GET /schemas/ids/<id>`.
"""

from __future__ import annotations

import io
import json
import math
import struct
import threading
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import avro.io
import avro.schema
import fastavro
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from juggler.cli import main
from juggler.codec import framing
from juggler.codec.avro import (CODEC_KINDS, COMMAND, MAX_KEY_BYTES, RESULT, Codec,
                                CodecError, DecodeError, RegistryError, SchemaViolation,
                                UnknownSchema, load_avro_schemas, result_record)
from juggler.codec.jsonl import InputError
from juggler.codec.registry import RegistryClient
from juggler.engine.events import Result
from juggler.language.model import ColumnType

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
ICU = ROOT / "examples" / "icu"

# One or more records per schema; decode(encode(r)) must give back `r` with ints in
# double fields read as floats.
SAMPLES: dict[str, list[dict[str, Any]]] = {
    "juggler.stream.B": [{"ts": 1000, "pressure": 120.0, "temp": 38.2, "alert": False},
                         {"ts": -5, "pressure": -0.0, "temp": 1e308, "alert": True}],
    "juggler.stream.H": [{"ts": 1200, "beatrate": 52.0, "vib": 31.5, "alert": True}],
    "juggler.stream.K": [{"ts": 2 ** 63 - 1, "fluid": 350.25}],
    "juggler.stream.T": [{"ts": 0, "fluct": 103.0, "degree": 5e-324, "incr": -31.0}],
    "juggler.Command": [
        {"action": "REGISTER", "id": "q1", "history": True, "own_topic": True,
         "text": "Select H.alert\nFrom B, H\nMaxWindow 4sec\nWhere B.temp > H.vib — ünïcode"},
        {"action": "DEREGISTER", "id": "q1", "text": None, "history": False,
         "own_topic": False}],
    "juggler.CommandStatus": [
        {"id": "q1", "action": "REGISTER", "status": "REJECTED",
         "message": "query q1, WHERE, line 4 column 7: unknown column", "command_offset": 7,
         "partition": -1, "partitions": 4},
        {"id": "q1", "action": "DEREGISTER", "status": "ACCEPTED", "message": "",
         "command_offset": 0, "partition": -1, "partitions": 4},
        {"id": "q1", "action": "REGISTER", "status": "LIVE", "message": "",
         "command_offset": 3, "partition": 2, "partitions": 4}],
    "juggler.Result": [
        {"query": "q1", "key": "p1", "ts": 2000,
         "sources": {"B": {"topic": "juggler.stream.B", "partition": 3, "offset": 17},
                     "H": {"topic": "juggler.stream.H", "partition": 3, "offset": 2 ** 40}},
         "row": {"H.alert": True, "B.pressure": 120.5, "B.count": 3, "B.name": "x",
                 "B.none": None, "B.big": -(2 ** 63)}},
        {"query": "q.2-x_y", "key": "", "ts": 0, "sources": {}, "row": {}}],
    "juggler.DeadLetter": [
        {"key": b"p1", "value": b"\x00\xff{not avro", "key_size": 2, "value_size": 10,
         "topic": "juggler.stream.B", "partition": 0, "offset": 12, "kind": "late",
         "reason": "late: ts 1 < maxts 5 - 0"},
        {"key": None, "value": None, "key_size": -1, "value_size": 1_000_000,
         "topic": "juggler.stream.K", "partition": 2, "offset": 0, "kind": "no_key",
         "reason": "stream K message without a key"},
        {"key": b"k", "value": None, "key_size": 1, "value_size": -1,
         "topic": "juggler.stream.H", "partition": 1, "offset": 2 ** 40,
         "kind": "null_value", "reason": "no message value (a tombstone) — ünïcode"}],
}


@pytest.fixture(scope="module")
def codec() -> Codec:
    return Codec(SCHEMAS, registry_url="")


def reference_schema(name: str) -> avro.schema.Schema:
    path = SCHEMAS / (name.rsplit(".", 1)[-1] + ".avsc")
    return avro.schema.parse(path.read_text())


def reference_body(name: str, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    avro.io.DatumWriter(reference_schema(name)).write(record, avro.io.BinaryEncoder(out))
    return out.getvalue()


def reference_read(name: str, body: bytes) -> Any:
    return avro.io.DatumReader(reference_schema(name)).read(
        avro.io.BinaryDecoder(io.BytesIO(body)))


def single_object(codec: Codec, name: str, record: dict[str, Any]) -> bytes:
    """Write with fastavro directly (no codec checks), framed: for crafting bad input."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, codec.schema(name), record)
    return framing.single_object(codec.fingerprint(name), out.getvalue())


# -- schemas and round trips -----------------------------------------------------------


def test_every_schema_has_samples(codec: Codec) -> None:
    assert codec.names() == sorted(SAMPLES)
    assert codec.stream_names() == ["B", "H", "K", "T"]


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_round_trip(codec: Codec, name: str) -> None:
    for record in SAMPLES[name]:
        data = codec.encode(name, record)
        assert data[:2] == b"\xc3\x01"
        assert codec.decode(name, data) == record
        short = name.rsplit(".", 1)[-1]
        assert codec.decode(short, codec.encode(short, record)) == record


def test_ints_are_fine_for_double_columns(codec: Codec) -> None:
    data = codec.encode("B", {"ts": 1, "pressure": 120, "temp": 38, "alert": False})
    decoded = codec.decode("B", data)
    assert decoded == {"ts": 1, "pressure": 120.0, "temp": 38.0, "alert": False}
    assert type(decoded["pressure"]) is float


def test_result_row_keeps_value_types(codec: Codec) -> None:
    row = SAMPLES[RESULT][0]["row"]
    decoded = codec.decode(RESULT, codec.encode(RESULT, SAMPLES[RESULT][0]))["row"]
    assert {k: type(v) for k, v in decoded.items()} == {k: type(v) for k, v in row.items()}


def test_catalog_and_stream_schemas(codec: Codec) -> None:
    number, boolean = ColumnType.NUMBER, ColumnType.BOOLEAN
    assert codec.catalog() == {
        "B": {"pressure": number, "temp": number, "alert": boolean},
        "H": {"beatrate": number, "vib": number, "alert": boolean},
        "K": {"fluid": number},
        "T": {"fluct": number, "degree": number, "incr": number},
    }
    loaded = load_avro_schemas(SCHEMAS)  # the service records are skipped
    assert {name: dict(s.columns) for name, s in loaded.items()} == codec.catalog()


def test_event_from(codec: Codec) -> None:
    value = codec.encode("T", {"incr": 4, "ts": 1500, "degree": 2.5, "fluct": 103})
    position = ("juggler.stream.T", 2, 41)
    event = codec.event_from("T", b"p1", value, position)
    assert (event.stream, event.key, event.ts, event.position) == ("T", "p1", 1500, position)
    assert list(event.data.items()) == [("fluct", 103.0), ("degree", 2.5), ("incr", 4.0)]
    assert codec.event_from("T", "p1", value, position).key == "p1"


def test_result_record(codec: Codec) -> None:
    result = Result("q1", "p1", 2000, {"B": ("juggler.stream.B", 1, 5)}, {"B.temp": 38.5})
    record = result_record(result)
    assert record["sources"] == {"B": {"topic": "juggler.stream.B", "partition": 1,
                                       "offset": 5}}
    assert codec.decode(RESULT, codec.encode(RESULT, record)) == record
    with pytest.raises(SchemaViolation, match="expected \\(topic, partition, offset\\)"):
        result_record(Result("q1", "p1", 1, {"B": 3}, {}))


def test_eval_accepts_the_repository_schemas(tmp_path: Path) -> None:
    """`juggler eval --schemas schemas/` reads the stream schemas, skips the service
    records, and gives the same results as inferring the schemas from the events."""
    outputs = []
    for extra in ([], ["--schemas", str(SCHEMAS)]):
        out = tmp_path / f"results{len(extra)}.jsonl"
        run = CliRunner().invoke(main, ["eval", "--queries", str(ICU / "queries.jsonl"),
                                        "--events", str(ICU / "events.jsonl"),
                                        "--out", str(out), *extra])
        assert run.exit_code == 0, run.output
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1] and outputs[0]


# -- the reference implementation ------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_fingerprint_and_canonical_form_match_reference(codec: Codec, name: str) -> None:
    reference = reference_schema(name)
    assert codec.fingerprint(name) == reference.fingerprint("CRC-64-AVRO")
    assert framing.canonical_form(codec.schema(name)) == reference.canonical_form


def _unambiguous(name: str, record: dict[str, Any]) -> dict[str, Any]:
    """avro (Python) writes a union value with the *last* branch it validates against,
    so in ["null", "boolean", "long", "double", "string"] it writes True and 3 as
    doubles. Java and fastavro pick the branch of the value's own type. Byte identity
    is compared on rows whose values fit one branch only (null, float, string)."""
    if name != RESULT:
        return record
    row = {k: v for k, v in record["row"].items() if v is None or type(v) in (float, str)}
    return {**record, "row": row}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_single_object_bytes_identical_to_reference(codec: Codec, name: str) -> None:
    for record in SAMPLES[name]:
        record = _unambiguous(name, record)
        expected = b"\xc3\x01" + reference_schema(name).fingerprint() + \
            reference_body(name, record)
        assert codec.encode(name, record) == expected
    assert codec.single_object_header(name) == b"\xc3\x01" + reference_schema(name).fingerprint()


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_reference_reads_what_the_codec_writes(codec: Codec, name: str) -> None:
    for record in SAMPLES[name]:
        data = codec.encode(name, record)
        assert data[:2] == b"\xc3\x01"
        assert data[2:10] == reference_schema(name).fingerprint()
        assert reference_read(name, data[10:]) == record  # all union values, types kept


# -- DecodeError -------------------------------------------------------------------------


def test_wrong_magic_is_named(codec: Codec) -> None:
    with pytest.raises(DecodeError) as err:
        codec.decode("B", b'{"ts": 1}')
    assert "unknown magic bytes 7b 22 ('{\"')" in err.value.reason
    assert "single-object encoding (c3 01)" in err.value.reason
    assert "expected a juggler.stream.B record" in err.value.reason
    with pytest.raises(DecodeError, match="unknown magic bytes c3 02"):
        codec.decode("B", b"\xc3\x02" + bytes(20))


def test_empty_and_missing_values(codec: Codec) -> None:
    with pytest.raises(DecodeError, match="empty message value"):
        codec.decode("B", b"")
    with pytest.raises(DecodeError, match="no message value \\(a tombstone\\)"):
        codec.decode("B", None)


def test_truncated_headers(codec: Codec) -> None:
    with pytest.raises(DecodeError, match="truncated single-object header: 6 bytes"):
        codec.decode("B", b"\xc3\x01" + bytes(4))
    with pytest.raises(DecodeError, match="truncated Schema Registry header: 3 bytes"):
        codec.decode("B", b"\x00\x00\x01")


def test_unknown_fingerprint(codec: Codec) -> None:
    data = codec.encode("B", SAMPLES["juggler.stream.B"][0])
    bogus = data[:2] + bytes(8) + data[10:]
    with pytest.raises(DecodeError) as err:
        codec.decode("B", bogus)
    assert err.value.reason.startswith("unknown schema fingerprint 0000000000000000")
    assert codec.fingerprint("B").hex() in err.value.reason


def test_message_of_another_schema(codec: Codec) -> None:
    """Well-formed but not the topic's record: a contract violation, not bad bytes."""
    data = codec.encode("H", SAMPLES["juggler.stream.H"][0])
    with pytest.raises(SchemaViolation, match="written with schema juggler.stream.H, "
                                              "expected juggler.stream.B") as err:
        codec.decode("B", data)
    assert err.value.kind == "schema"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_truncation_is_a_decode_error(codec: Codec, name: str) -> None:
    data = codec.encode(name, SAMPLES[name][0])
    for end in range(len(data)):
        with pytest.raises(DecodeError) as err:
            codec.decode(name, data[:end])
        assert err.value.reason  # e.g. "truncated Avro body for juggler.stream.B: ..."
        assert "object at 0x" not in err.value.reason  # the same record, the same reason
    with pytest.raises(DecodeError, match=f"truncated Avro body for {name}"):
        codec.decode(name, data[:-1])


def test_trailing_bytes(codec: Codec) -> None:
    data = codec.encode("K", {"ts": 1, "fluid": 2.0})
    with pytest.raises(DecodeError, match="2 trailing bytes after the juggler.stream.K "
                                          "record \\(9-byte body\\)"):
        codec.decode("K", data + b"\x00\x00")


def test_invalid_utf8(codec: Codec) -> None:
    body = b"\x00" + b"\x04q\xff" + b"\x00" + b"\x00"  # REGISTER, id = b"q\xff", null, false
    data = framing.single_object(codec.fingerprint(COMMAND), body)
    with pytest.raises(DecodeError, match="a string is not valid UTF-8"):
        codec.decode(COMMAND, data)


@pytest.mark.parametrize("body, what", [
    (b"\x04\x02q\x00\x00", "enum index 2 of 2 symbols"),
    (b"\x01\x02q\x00\x00\x00", "enum index -1 (fastavro would read the last symbol)"),
    (b"\x00\x02q\x04\x00", "union index 2 of 2 branches"),
    (b"\x00\x02q\x01\x02t\x00\x00", "union index -1 (fastavro would read a string)"),
])
def test_enum_and_union_indexes_out_of_range(codec: Codec, body: bytes, what: str) -> None:
    data = framing.single_object(codec.fingerprint(COMMAND), body)
    with pytest.raises(DecodeError, match="an enum or union index is out of range"):
        codec.decode(COMMAND, data)


def test_registry_framing_without_a_registry(codec: Codec) -> None:
    body = codec.encode("B", SAMPLES["juggler.stream.B"][0])[10:]
    with pytest.raises(DecodeError, match="Schema Registry wire format \\(schema id 7\\) "
                                          "but no registry is configured"):
        codec.decode("B", framing.confluent(7, body))


# -- SchemaViolation ---------------------------------------------------------------------


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_violations(codec: Codec, value: float) -> None:
    record = {"ts": 1, "pressure": 120.0, "temp": value, "alert": False}
    data = single_object(codec, "B", record)
    with pytest.raises(SchemaViolation) as err:
        codec.decode("B", data)
    assert err.value.reason.startswith("non-finite number in column temp")
    with pytest.raises(SchemaViolation, match="non-finite number in column temp"):
        codec.event_from("B", b"p1", data, ("juggler.stream.B", 0, 0))
    with pytest.raises(SchemaViolation, match="non-finite number in column temp"):
        codec.encode("B", record)
    result = {**SAMPLES[RESULT][1], "row": {"B.temp": value}}
    with pytest.raises(SchemaViolation, match="non-finite number in column B.temp"):
        codec.decode(RESULT, single_object(codec, RESULT, result))


@pytest.mark.parametrize("record, message", [
    ({"ts": 1, "pressure": 1.0, "temp": 2.0}, "missing field 'alert' (boolean)"),
    ({"ts": 1, "pressure": "1", "temp": 2.0, "alert": False},
     'juggler.stream.B.pressure: got "1", expected double'),
    ({"ts": 1, "pressure": True, "temp": 2.0, "alert": False},
     "juggler.stream.B.pressure: got true, expected double"),
    ({"ts": 1, "pressure": 1.0, "temp": 2.0, "alert": 1},
     "juggler.stream.B.alert: got 1, expected boolean"),
    ({"ts": 1.5, "pressure": 1.0, "temp": 2.0, "alert": False},
     "juggler.stream.B.ts: got 1.5, expected long"),
    ({"ts": 2 ** 63, "pressure": 1.0, "temp": 2.0, "alert": False},
     "juggler.stream.B.ts: got 9223372036854775808, expected long"),
    ({"ts": 1, "pressure": 1.0, "temp": 2.0, "alert": False, "extra": 1},
     "more fields than the schema specifies: extra"),
    ([1, 2], "must be a mapping"),
])
def test_encode_rejects_records_that_do_not_fit(codec: Codec, record: Any,
                                                message: str) -> None:
    with pytest.raises(SchemaViolation) as err:
        codec.encode("B", record)
    assert message in err.value.reason
    assert err.value.reason == str(err.value)


def test_encode_command_violations(codec: Codec) -> None:
    with pytest.raises(SchemaViolation, match="juggler.Command.action: got \"REG\", "
                                              "expected one of REGISTER, DEREGISTER"):
        codec.encode(COMMAND, {"action": "REG", "id": "q", "text": None})
    # defaults may be left out
    assert codec.decode(COMMAND, codec.encode(COMMAND, {"action": "DEREGISTER", "id": "q"})) \
        == {"action": "DEREGISTER", "id": "q", "text": None, "history": False,
            "own_topic": False}


def test_event_keys(codec: Codec) -> None:
    data = codec.encode("K", {"ts": 1, "fluid": 2.0})
    with pytest.raises(SchemaViolation, match="stream K message without a key"):
        codec.event_from("K", None, data, 0)
    with pytest.raises(DecodeError, match="stream K message key is not UTF-8 text: ff fe"):
        codec.event_from("K", b"\xff\xfe", data, 0)
    with pytest.raises(DecodeError, match="not UTF-8 text: ed a0 80"):
        codec.event_from("K", "\ud800", data, 0)  # a lone surrogate in a str key
    longest = "é" * (MAX_KEY_BYTES // 2)
    assert codec.event_from("K", longest.encode(), data, 0).key == longest
    with pytest.raises(SchemaViolation, match="stream K message key has 65,537 bytes, more "
                                              "than the 65,536 an entity key may have"):
        codec.event_from("K", b"k" * (MAX_KEY_BYTES + 1), data, 0)


# -- kinds: what is wrong, for the worker's dead letters and metrics ----------------------

DECODE_KINDS = {"null_value", "empty", "undecodable", "bad_key"}
"""The kinds raised as DecodeError; the others (schema, no_key, oversized_key) are
SchemaViolations."""
VALUE_KINDS = ("null_value", "empty", "undecodable", "schema")
"""The kinds a value can have (a control record's, or a stream record's with a good key)."""


def bad_stream_records(codec: Codec) -> list[tuple[str, bytes | None, bytes | None]]:
    """(kind, key, value) of bad records on the B topic, at least one of every kind."""
    b = SAMPLES["juggler.stream.B"][0]
    good = codec.encode("B", b)
    return [
        ("null_value", b"p1", None),
        ("empty", b"p1", b""),
        ("undecodable", b"p1", b"\x8f\x13\xa0 random bytes"),
        ("undecodable", b"p1", b'{"ts": 1}'),
        ("undecodable", b"p1", good[:-1]),  # truncated body
        ("undecodable", b"p1", good[:5]),  # truncated header
        ("undecodable", b"p1", good[:2] + bytes(8) + good[10:]),  # unknown fingerprint
        ("undecodable", b"p1", good + b"\x00"),  # trailing bytes
        ("undecodable", b"p1", framing.confluent(7, good[10:])),  # no registry here
        ("schema", b"p1", codec.encode(COMMAND, SAMPLES[COMMAND][0])),  # another record
        ("schema", b"p1", codec.encode("H", SAMPLES["juggler.stream.H"][0])),
        ("schema", b"p1", single_object(codec, "B", {**b, "temp": math.nan})),
        ("no_key", None, good),
        ("no_key", None, None),  # the key is checked first
        ("bad_key", b"p\xff1", good),
        ("oversized_key", b"k" * (MAX_KEY_BYTES + 1), good),
    ]


def test_every_bad_stream_record_has_its_kind(codec: Codec) -> None:
    cases = bad_stream_records(codec)
    assert {kind for kind, _, _ in cases} == set(CODEC_KINDS)
    for kind, key, value in cases:
        with pytest.raises(CodecError) as err:
            codec.event_from("B", key, value, ("juggler.stream.B", 0, 9))
        assert err.value.kind == kind, (key, value, err.value.reason)
        expected = DecodeError if kind in DECODE_KINDS else SchemaViolation
        assert type(err.value) is expected and err.value.reason


@pytest.mark.parametrize("value, kind", [
    (None, "null_value"), (b"", "empty"), (b"\x00\x01", "undecodable"),
    (b"REGISTER q1", "undecodable"), (b"\xc3\x01" + bytes(8), "undecodable"),
])
def test_control_record_kinds(codec: Codec, value: bytes | None, kind: str) -> None:
    with pytest.raises(DecodeError) as err:
        codec.decode(COMMAND, value)
    assert err.value.kind == kind
    stream_record = codec.encode("K", {"ts": 1, "fluid": 2.0})
    with pytest.raises(SchemaViolation) as err:
        codec.decode(COMMAND, stream_record)
    assert err.value.kind == "schema"


def test_encode_violations_are_of_kind_schema(codec: Codec) -> None:
    with pytest.raises(SchemaViolation) as err:
        codec.encode("B", {"ts": 1})
    assert err.value.kind == "schema"


def _mutated(data: bytes, index: int, byte: int, end: int) -> bytes:
    """`data` with one byte replaced and cut at `end` (no cut when `end` is past it)."""
    changed = bytearray(data)
    changed[index % len(changed)] = byte
    return bytes(changed[:end])


def values(codec: Codec, names: Iterable[str] = SAMPLES) -> st.SearchStrategy[bytes | None]:
    """Random bytes, random bodies behind the headers of `names`' schemas, and valid
    messages of those schemas with one byte changed and a random cut."""
    headers = [framing.single_object(codec.fingerprint(name), b"") for name in names]
    valid = [codec.encode(name, record) for name in names for record in SAMPLES[name]]
    return st.one_of(
        st.none(), st.binary(max_size=64),
        st.builds(bytes.__add__, st.sampled_from([*headers, framing.confluent(1, b"")]),
                  st.binary(max_size=64)),
        st.builds(_mutated, st.sampled_from(valid), st.integers(0, 400),
                  st.integers(0, 255), st.integers(0, 400)))


@settings(max_examples=600, deadline=None)
@given(data=st.data())
def test_fuzz_stream_values_raise_codec_errors_only(codec: Codec, data: st.DataObject) -> None:
    stream = data.draw(st.sampled_from(codec.stream_names()))
    value = data.draw(st.one_of(values(codec, [f"juggler.stream.{stream}"]), values(codec)))
    try:
        event = codec.event_from(stream, b"p1", value, ("t", 0, 0))
    except CodecError as exc:
        assert exc.kind in VALUE_KINDS and exc.reason
        assert isinstance(exc, DecodeError) == (exc.kind in DECODE_KINDS)
    else:
        assert event.stream == stream and event.key == "p1"


@settings(max_examples=200, deadline=None)
@given(key=st.one_of(st.none(), st.binary(max_size=24), st.text(max_size=12),
                     st.just(b"k" * (MAX_KEY_BYTES + 1))))
def test_fuzz_stream_keys_raise_codec_errors_only(codec: Codec,
                                                  key: str | bytes | None) -> None:
    value = codec.encode("K", {"ts": 1, "fluid": 2.0})
    try:
        event = codec.event_from("K", key, value, ("t", 0, 0))
    except CodecError as exc:
        assert exc.kind in ("no_key", "bad_key", "oversized_key") and exc.reason
    else:
        assert event.key.encode() == (key.encode() if isinstance(key, str) else key)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_fuzz_control_records_raise_codec_errors_only(codec: Codec,
                                                      data: st.DataObject) -> None:
    try:
        command = codec.decode(COMMAND, data.draw(values(codec)))
    except CodecError as exc:
        assert exc.kind in VALUE_KINDS and exc.reason
    else:
        assert command["action"] in ("REGISTER", "DEREGISTER")


def test_unknown_schema_names(codec: Codec) -> None:
    with pytest.raises(UnknownSchema, match="schema 'X' is not among"):
        codec.encode("X", {})
    with pytest.raises(UnknownSchema, match="not a stream schema"):
        codec.event_from("Command", b"k", b"", 0)


# -- loading schemas ---------------------------------------------------------------------


def test_default_directory_and_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JUGGLER_SCHEMAS", raising=False)
    monkeypatch.delenv("JUGGLER_SCHEMA_REGISTRY_URL", raising=False)
    codec = Codec()
    assert codec.schemas_dir.resolve() == SCHEMAS and codec.framing == "single-object"
    (tmp_path / "S.avsc").write_text(json.dumps({
        "type": "record", "name": "S", "fields": [{"name": "ts", "type": "long"},
                                                  {"name": "n", "type": "int"}]}))
    monkeypatch.setenv("JUGGLER_SCHEMAS", str(tmp_path))
    assert Codec().stream_names() == ["S"]


@pytest.mark.parametrize("files, message", [
    ({}, "no .avsc schema files"),
    ({"A.avsc": "{"}, "malformed JSON"),
    ({"A.avsc": '{"type": "record", "name": "A", "fields": [{"name": "x", "type": "nope"}]}'},
     "not a valid Avro schema"),
    ({"A.avsc": '{"type": "record", "name": "A", "fields": [{"name": "x", "type": "long"}]}'},
     "stream 'A' has no 'ts' field"),
    ({"A.avsc": '{"type": "record", "name": "A", "fields": [{"name": "ts", "type": "long"},'
                ' {"name": "x", "type": ["null", "long"]}]}'}, "is not supported"),
    ({"A.avsc": '{"type": "record", "name": "a.A", "fields": [{"name": "ts", "type": "long"}]}',
      "B.avsc": '{"type": "record", "name": "A", "namespace": "a",'
                ' "fields": [{"name": "ts", "type": "int"}]}'}, "record a.A is defined twice"),
])
def test_bad_schema_directories(tmp_path: Path, files: dict[str, str], message: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(InputError, match=message):
        Codec(tmp_path, registry_url="")


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        Codec(tmp_path / "nope", registry_url="")


# -- Schema Registry wire format ---------------------------------------------------------


class FakeRegistry:
    """The two endpoints of the Confluent Schema Registry REST API the codec uses.

    Like the real one: a schema gets one global id however many subjects hold it, and
    an unknown id answers 404 with error code 40403."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.schemas: dict[int, str] = {}
        self.subjects: dict[str, list[int]] = {}
        self.requests: list[tuple[str, str]] = []
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, code: int, body: dict[str, Any]) -> None:
                payload = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                registry.requests.append(("POST", self.path))
                parts = self.path.strip("/").split("/")
                length = int(self.headers["Content-Length"])
                body = json.loads(self.rfile.read(length))
                if len(parts) != 3 or parts[0] != "subjects" or parts[2] != "versions":
                    return self._answer(404, {"error_code": 404, "message": "HTTP 404"})
                text = body["schema"]
                fastavro.parse_schema(json.loads(text))  # a real registry checks it
                schema_id = registry.ids.setdefault(text, len(registry.ids) + 1)
                registry.schemas[schema_id] = text
                versions = registry.subjects.setdefault(parts[1], [])
                if schema_id not in versions:
                    versions.append(schema_id)
                self._answer(200, {"id": schema_id})

            def do_GET(self) -> None:  # noqa: N802
                registry.requests.append(("GET", self.path))
                parts = self.path.strip("/").split("/")
                if len(parts) == 3 and parts[:2] == ["schemas", "ids"] and \
                        int(parts[2]) in registry.schemas:
                    return self._answer(200, {"schema": registry.schemas[int(parts[2])]})
                self._answer(404, {"error_code": 40403, "message": "Schema not found"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    server = FakeRegistry()
    yield server
    server.close()


def test_registry_framing(registry: FakeRegistry, codec: Codec) -> None:
    writer = Codec(SCHEMAS, registry_url=registry.url)
    assert writer.framing == "schema-registry"
    record = SAMPLES["juggler.stream.B"][0]
    data = writer.encode("B", record)
    (schema_id,) = struct.unpack(">I", data[1:5])
    assert data[0] == 0 and schema_id == 1
    assert data[5:] == codec.encode("B", record)[10:]  # the same Avro body
    assert registry.subjects == {"juggler.stream.B-value": [1]}
    assert json.loads(registry.schemas[1])["name"] == "B"  # as written, docs kept

    writer.encode("B", record)  # cached: no second POST
    assert registry.requests == [("POST", "/subjects/juggler.stream.B-value/versions")]

    reader = Codec(SCHEMAS, registry_url=registry.url)
    assert reader.decode("B", data) == record
    assert reader.decode("B", data) == record  # cached: one GET
    assert registry.requests[1:] == [("GET", "/schemas/ids/1")]
    # a single-object message decodes whatever the configuration
    assert reader.decode("B", codec.encode("B", record)) == record


def test_registry_default_subjects(registry: FakeRegistry) -> None:
    writer = Codec(SCHEMAS, registry_url=registry.url)
    for name in SAMPLES:
        writer.encode(name, SAMPLES[name][0])
    writer.encode("juggler.Command", SAMPLES[COMMAND][0], topic="juggler.control.fanout")
    assert sorted(registry.subjects) == [
        "juggler.control-value", "juggler.control.fanout-value",
        "juggler.control.status-value", "juggler.deadletter-value",
        "juggler.results-value", "juggler.stream.B-value", "juggler.stream.H-value",
        "juggler.stream.K-value", "juggler.stream.T-value"]
    assert registry.subjects["juggler.control.fanout-value"] == \
        registry.subjects["juggler.control-value"]


def test_registry_unknown_id_and_evolved_writer(registry: FakeRegistry) -> None:
    reader = Codec(SCHEMAS, registry_url=registry.url)
    body = reader.encode("K", {"ts": 5, "fluid": 1.5})  # registers K as id 1
    with pytest.raises(DecodeError, match="schema id 99 is not in the registry at "
                                          "http://127.0.0.1:.*expected juggler.stream.K"):
        reader.decode("K", b"\x00\x00\x00\x00\x63" + body[5:])
    # a newer writer schema with one more field: read with Avro schema resolution
    newer = json.loads((SCHEMAS / "K.avsc").read_text())
    newer["fields"].append({"name": "unit", "type": "string", "default": "ml"})
    client = RegistryClient(registry.url)
    newer_id = client.register("juggler.stream.K-value", json.dumps(newer))
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(newer),
                               {"ts": 7, "fluid": 2.0, "unit": "l"})
    event = reader.event_from("K", b"p1", framing.confluent(newer_id, out.getvalue()), 0)
    assert (event.ts, event.data) == (7, {"fluid": 2.0})
    # a writer schema that cannot be read as K
    other = client.register("x-value", (SCHEMAS / "B.avsc").read_text())
    with pytest.raises(SchemaViolation, match="cannot be read as juggler.stream.K") as err:
        reader.decode("K", framing.confluent(other, b"\x02" + bytes(17)))
    assert err.value.kind == "schema"


def test_registry_down_is_not_a_decode_error(registry: FakeRegistry) -> None:
    url = registry.url
    registry.close()
    codec = Codec(SCHEMAS, registry_url=url)
    with pytest.raises(RegistryError, match="POST http://127.0.0.1:.* failed"):
        codec.encode("K", {"ts": 5, "fluid": 1.5})
    with pytest.raises(RegistryError, match="GET http://127.0.0.1:.*/schemas/ids/3 failed"):
        codec.decode("K", framing.confluent(3, b"\x02" + bytes(8)))
    assert not issubclass(RegistryError, DecodeError)


def test_registry_url_from_env(registry: FakeRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUGGLER_SCHEMA_REGISTRY_URL", registry.url)
    assert Codec(SCHEMAS).framing == "schema-registry"
    assert Codec(SCHEMAS, registry_url="").framing == "single-object"
    with pytest.raises(ValueError, match="must start with http"):
        Codec(SCHEMAS, registry_url="localhost:8081")
