"""Commands and statuses keep their bytes: each record, encoded and decoded again, is
itself, and its encoding is the literal a client, a worker or an events file of an
earlier release wrote, so either side may be upgraded first."""

from __future__ import annotations

import json

import pytest

from juggler.codec.avro import Codec
from juggler.wire.commands import (Command, CommandStatus, DeregisterCommand,
                                   accepted_of,
                                   RegisterCommand, barrier_of, barrier_text,
                                   control_offset_of, decode_command, encode_command,
                                   fanout_headers, is_rewritten, parse_event_line,
                                   rewritten_from, rewritten_headers)

COMMAND_HEADER = b"\xc3\x01\xd63\xac6\\\x07\x89)"
STATUS_HEADER = b"\xc3\x01\xce\xa5\xbcW\xe4\xcd\x13x"
"""The single-object framing: marker and the schema's fingerprint."""


@pytest.fixture(scope="module")
def codec() -> Codec:
    return Codec(registry_url="")


@pytest.mark.parametrize("command, value", [
    (RegisterCommand("q1", "SELECT * FROM B", history=True, own_topic=True),
     COMMAND_HEADER + b"\x00\x04q1\x02\x1eSELECT * FROM B\x01\x01"),
    (RegisterCommand("q1", "SELECT * FROM B"),
     COMMAND_HEADER + b"\x00\x04q1\x02\x1eSELECT * FROM B\x00\x00"),
    (DeregisterCommand("q1"), COMMAND_HEADER + b"\x02\x04q1\x00\x00\x00"),
])
def test_a_command_on_kafka(codec: Codec, command: Command, value: bytes) -> None:
    assert encode_command(codec, command) == value
    assert decode_command(codec, value) == command


@pytest.mark.parametrize("status, value", [
    (CommandStatus("q1", "REGISTER", "REJECTED", "no", 7, -1, 2),
     STATUS_HEADER + b"\x04q1\x00\x02\x04no\x0e\x01\x04"),
    (CommandStatus("q1", "DEREGISTER", "LIVE", "", 7, 1, 2),
     STATUS_HEADER + b"\x04q1\x02\x04\x00\x0e\x02\x04"),
])
def test_a_status_on_kafka(codec: Codec, status: CommandStatus, value: bytes) -> None:
    assert status.encode(codec) == value
    assert CommandStatus.decode(codec, value) == status


@pytest.mark.parametrize("command, line", [
    (RegisterCommand("q1", "SELECT * FROM B", history=True),
     '{"control": "register", "id": "q1", "text": "SELECT * FROM B", "history": true}'),
    (DeregisterCommand("q1"), '{"control": "deregister", "id": "q1"}'),
])
def test_a_command_in_an_events_file(command: Command, line: str) -> None:
    assert json.dumps(command.line()) == line
    assert parse_event_line(json.loads(line)) == command


def test_a_fanout_copy_carries_its_control_offset_and_barrier() -> None:
    headers = fanout_headers(5, barrier_text({"B": 3, "H": 0}))
    assert headers == [("juggler-control-offset", b"5"),
                       ("juggler-barrier", b'{"B": 3, "H": 0}')]
    assert control_offset_of(headers) == 5 and control_offset_of(None) == -1
    assert barrier_of(headers, ("B", "H")) == {"B": 3, "H": 0}
    assert barrier_of(headers, ("B", "X")) is None and barrier_of([], ("B",)) is None


def test_a_rewritten_register_names_its_original() -> None:
    headers = rewritten_headers(12)
    assert headers == [("juggler-rewritten-from", b"12")]
    assert is_rewritten(headers) and rewritten_from(headers) == 12
    assert not is_rewritten(None) and rewritten_from([("other", b"1")]) is None


def test_the_accepted_set_follows_the_statuses_in_log_order() -> None:
    def status(qid: str, action: str, outcome: str, offset: int) -> CommandStatus:
        return CommandStatus(qid, action, outcome, "", offset)  # type: ignore[arg-type]

    statuses = [status("a", "REGISTER", "ACCEPTED", 1), status("b", "REGISTER", "ACCEPTED", 2),
                status("a", "REGISTER", "LIVE", 1), status("c", "REGISTER", "REJECTED", 3),
                status("b", "DEREGISTER", "ACCEPTED", 4), status("a", "DEREGISTER", "REJECTED", 5),
                status("b", "REGISTER", "ACCEPTED", 6)]
    assert accepted_of(statuses) == {"a": 1, "b": 6}
    assert accepted_of(statuses[:5]) == {"a": 1}
