"""The hand-written Avro of commands and statuses (`juggler.codec.control_bodies`)
against fastavro: the same bytes written, the same records read, and any body that is
not in the writer's one form left to fastavro, which reads or refuses it as before."""

from __future__ import annotations

import io
import json

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from juggler.codec.avro import (COMMAND, COMMAND_STATUS, Codec, CodecError,
                                default_schemas_dir)
from juggler.codec.result_body import Unwritable
from juggler.codec.control_bodies import command_body, read_command, read_status, status_body
from juggler.wire.names import ACTIONS, OUTCOMES

CODEC = Codec(registry_url="")
TEXT = st.one_of(st.text(), st.text("\"\\\x00\n\u2028é😀ab", max_size=4), st.text(min_size=70))
INT = st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(-3, 3))
COMMANDS = st.fixed_dictionaries({
    "action": st.sampled_from(ACTIONS), "id": TEXT, "text": st.none() | TEXT,
    "history": st.booleans(), "own_topic": st.booleans()})
STATUS_RECORDS = st.fixed_dictionaries({
    "id": TEXT, "action": st.sampled_from(ACTIONS), "status": st.sampled_from(OUTCOMES),
    "message": TEXT, "command_offset": st.one_of(st.integers(-(2**63), 2**63 - 1), INT),
    "partition": INT, "partitions": INT})


def fastavro_body(name: str, record: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, CODEC._get(name).parsed, record)
    return out.getvalue()


def fastavro_read(name: str, body: bytes) -> object:
    return fastavro.schemaless_reader(io.BytesIO(body), CODEC._get(name).parsed, None)


@settings(max_examples=300, deadline=None)
@given(COMMANDS)
def test_a_command_is_written_and_read_as_fastavro_does(record: dict) -> None:
    body = command_body(record)
    assert body == fastavro_body(COMMAND, record)
    assert read_command(b"xx" + body, 2) == fastavro_read(COMMAND, body) == record


@settings(max_examples=300, deadline=None)
@given(STATUS_RECORDS)
def test_a_status_is_written_and_read_as_fastavro_does(record: dict) -> None:
    body = status_body(record)
    assert body == fastavro_body(COMMAND_STATUS, record)
    assert read_status(body, 0) == fastavro_read(COMMAND_STATUS, body) == record


@settings(max_examples=500, deadline=None)
@given(st.one_of(COMMANDS.map(command_body), st.binary(max_size=30)),
       st.lists(st.tuples(st.integers(0, 40), st.integers(0, 255)), max_size=3),
       st.sampled_from([b"", b"\x00", b"\x80\x00"]))
def test_any_other_body_is_left_to_fastavro(body: bytes, changes: list[tuple[int, int]],
                                            tail: bytes) -> None:
    """Bodies with bytes changed or added: what the reader accepts is what the codec's
    checked decode (fastavro, then the minimal check) accepts, as the same record."""
    changed = bytearray(body)
    for at, byte in changes:
        if at < len(changed):
            changed[at] = byte
    data = bytes(changed) + tail
    fast = read_command(data, 0)
    if fast is not None:
        assert fastavro_read(COMMAND, data) == fast
        assert command_body(fast) == data  # minimal: the one form


@pytest.mark.parametrize("body", [
    b"\x00\x04q1\x02\x02x\x00\x00\x00",  # a byte left over
    b"\x00\x84\x00q1\x00\x00\x00",  # a length not minimally encoded
    b"\x04\x04q1\x00\x00\x00",  # an action index out of range
    b"\x00\x04q1\x04\x00\x00",  # a union index out of range
    b"\x00\x04q1\x00\x02\x00",  # a boolean that is neither 0 nor 1
    b"\x00\x04\xff\xfe\x00\x00\x00",  # an id that is not UTF-8
    b"\x00\x03q1\x00\x00\x00",  # a negative length
])
def test_a_malformed_command_is_refused_with_the_codecs_reason(body: bytes) -> None:
    assert read_command(body, 0) is None
    with pytest.raises(CodecError):
        CODEC.decode(COMMAND, CODEC.single_object_header(COMMAND) + body)


ANY = st.one_of(st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(),
                st.text(max_size=3), st.sampled_from([*ACTIONS, *OUTCOMES]), st.binary(max_size=2))


@settings(max_examples=500, deadline=None)
@given(st.one_of(COMMANDS, STATUS_RECORDS).flatmap(lambda record: st.tuples(
    st.just(record), st.sampled_from(sorted(record)), ANY)))
def test_a_record_is_written_only_if_fastavros_validator_passes_it(
        case: tuple[dict, str, object]) -> None:
    """A field set to any value: the writer writes the record only when it is valid,
    with fastavro's bytes, so writing it needs no validation before."""
    record, field, value = case
    record = {**record, field: value}
    name, writer = (COMMAND, command_body) if "history" in record else \
        (COMMAND_STATUS, status_body)
    try:
        body = writer(record)
    except (Unwritable, KeyError):
        return
    assert fastavro.validate(record, CODEC._get(name).parsed, raise_errors=False)
    assert body == fastavro_body(name, record)


def test_the_enum_symbols_are_the_schemas_in_their_order() -> None:
    """The bodies write a symbol as its index in `ACTIONS`/`OUTCOMES`: an order other
    than the schema's would give every reader the wrong action or status."""
    root = default_schemas_dir()
    command = json.loads((root / "Command.avsc").read_text())
    status = json.loads((root / "CommandStatus.avsc").read_text())

    def symbols(schema: dict, field: str) -> tuple[str, ...]:
        (found,) = [f["type"]["symbols"] for f in schema["fields"] if f["name"] == field]
        return tuple(found)

    assert symbols(command, "action") == symbols(status, "action") == ACTIONS
    assert symbols(status, "status") == OUTCOMES
