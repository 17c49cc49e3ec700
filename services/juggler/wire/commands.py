"""Control commands and their statuses: the records of `juggler.control`,
`juggler.control.fanout` and `juggler.control.status` (semantics section 4), and the
control lines of an events file (semantics section 5).

Why one module: a command is written by the `juggler query` client or read from a
JSON line, decided by the control task, copied to every partition's task with its
barrier, and answered by statuses the client waits for. Each of those reads the other's
bytes, so each builds and reads them with the types and functions here, and a field
means the same everywhere. The Avro schemas are `schemas/Command.avsc` and
`schemas/CommandStatus.avsc`; the codec knows only schemas, not what the fields mean.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from juggler.codec.avro import COMMAND, COMMAND_STATUS, Codec
from juggler.codec.jsonl import (EventRecord, InputError, json_object, json_query_id,
                                 json_string, parse_event, show_json)
from juggler.wire.names import (BARRIER_HEADER, CONTROL_OFFSET_HEADER, REWRITTEN_HEADER,
                                Action, Outcome)

REGISTER: Action = "REGISTER"
DEREGISTER: Action = "DEREGISTER"
ACCEPTED: Outcome = "ACCEPTED"
REJECTED: Outcome = "REJECTED"
LIVE: Outcome = "LIVE"
"""Written by each partition's task when the command took effect there."""
VERDICTS: tuple[Outcome, ...] = (ACCEPTED, REJECTED)
"""What the control task answers a command with."""

Headers = Iterable[tuple[str, str | bytes | None]] | Mapping[str, str | bytes | None] | None
"""A Kafka record's headers, as confluent-kafka types them (a consumed record's are a
list of pairs); each reader below takes them through `dict`, which reads either."""


# -- commands --------------------------------------------------------------------------


@dataclass(frozen=True)
class RegisterCommand:
    """A REGISTER: run query `id` from now on (with `history`, also over the held
    events at once).

    `text` is None only for a record read off the control topic without one (the
    control task rejects it), or, in `juggler query`, for a registered query whose
    REGISTER compaction removed; a JSON line always has it."""

    action: ClassVar[Action] = REGISTER
    id: str
    text: str | None
    history: bool = False
    own_topic: bool = False
    """Results to `juggler.results.<id>` instead of the shared `juggler.results`; set
    only on Kafka (an events file has no topics)."""

    def record(self) -> dict[str, Any]:
        """The `juggler.Command` record."""
        return {"action": REGISTER, "id": self.id, "text": self.text,
                "history": self.history, "own_topic": self.own_topic}

    def line(self) -> dict[str, Any]:
        """The control line of an events file (`parse_command_line` reads it back)."""
        return {"control": "register", "id": self.id, "text": self.text,
                "history": self.history}


@dataclass(frozen=True)
class DeregisterCommand:
    """A DEREGISTER: stop query `id`."""

    action: ClassVar[Action] = DEREGISTER
    id: str

    def record(self) -> dict[str, Any]:
        """The `juggler.Command` record."""
        return {"action": DEREGISTER, "id": self.id, "text": None, "history": False,
                "own_topic": False}

    def line(self) -> dict[str, Any]:
        """The control line of an events file (`parse_command_line` reads it back)."""
        return {"control": "deregister", "id": self.id}


Command = RegisterCommand | DeregisterCommand


def command_from_record(record: Mapping[str, Any]) -> Command:
    """The command of a decoded `juggler.Command` record (a writer that predates
    `own_topic` leaves it out)."""
    if record["action"] == REGISTER:
        return RegisterCommand(record["id"], record["text"], record["history"],
                               record.get("own_topic", False))
    return DeregisterCommand(record["id"])


def encode_command(codec: Codec, command: Command, topic: str | None = None, *,
                   trusted: bool = False) -> bytes:
    """A command's Kafka value; `topic` (default `juggler.control`) is where it goes,
    which names its Schema Registry subject. `trusted`: a command decoded from the
    control topic, so checked already (`Codec.encode`), as its fanout copies are."""
    return codec.encode(COMMAND, command.record(), topic=topic, trusted=trusted)


def decode_command(codec: Codec, value: bytes | None, *, trusted: bool = False) -> Command:
    """A Kafka value's command; raises `CodecError` for one that is not. `trusted`: a
    fanout copy, which a worker's control task wrote (`Codec.decode`)."""
    return command_from_record(codec.decode(COMMAND, value, trusted=trusted))


def parse_command_line(value: Any) -> Command:
    """A control line of an events file; raises `InputError` saying what is wrong."""
    control = value.get("control")
    if control == "register":
        obj = json_object(value, "a register command",
                          required=("control", "id", "text"), optional=("history",))
        history = obj.get("history", False)
        if not isinstance(history, bool):
            raise InputError(f"'history' must be true or false, got {show_json(history)}")
        return RegisterCommand(json_query_id(obj["id"]), json_string(obj["text"], "text"),
                               history)
    if control == "deregister":
        obj = json_object(value, "a deregister command", required=("control", "id"),
                          optional=())
        return DeregisterCommand(json_query_id(obj["id"]))
    raise InputError(f"'control' must be \"register\" or \"deregister\", got {show_json(control)}")


def parse_event_line(value: Any) -> EventRecord | Command:
    """An events.jsonl line: an event, or a `control` command (semantics section 5)."""
    if isinstance(value, dict) and "control" in value:
        return parse_command_line(value)
    return parse_event(value)


# -- a command's headers ---------------------------------------------------------------


def fanout_headers(control_offset: int, barrier: bytes) -> list[tuple[str, bytes]]:
    """The headers of a partition's copy of an accepted command on the fanout topic:
    the command's control offset and the barrier (`barrier_text`: per stream, the log
    end it applies at)."""
    return [(CONTROL_OFFSET_HEADER, b"%d" % control_offset), (BARRIER_HEADER, barrier)]


def barrier_text(barrier: Mapping[str, int]) -> bytes:
    """A barrier as its header writes it: every command a round accepts has the same
    barrier per partition (the log ends asked once), so the control task writes each
    partition's text once per round."""
    return json.dumps(dict(barrier)).encode()


def barrier_of(headers: Headers, streams: tuple[str, ...]) -> Mapping[str, int] | None:
    """A fanout copy's barrier, or None when it has no valid one for `streams` (the
    control task did not write it)."""
    value = dict(headers or ()).get(BARRIER_HEADER)
    return None if value is None else _barrier_read(value, streams)


@functools.lru_cache(maxsize=256)
def _barrier_read(value: str | bytes, streams: tuple[str, ...]) -> Mapping[str, int] | None:
    """A barrier header's offsets if they name every stream, or None; cached, for the
    partition tasks reading a burst's copies, which carry the few texts of their
    rounds (read-only: each of them holds the one mapping)."""
    try:
        offsets = json.loads(value)
    except (TypeError, ValueError):
        return None
    if not isinstance(offsets, dict) or not all(isinstance(offsets.get(s), int)
                                                for s in streams):
        return None
    return MappingProxyType(offsets)


def control_offset_of(headers: Headers) -> int:
    """A fanout copy's command offset on the control topic; -1 when it has none."""
    value = dict(headers or ()).get(CONTROL_OFFSET_HEADER)
    return -1 if value is None else int(value)


def rewritten_headers(original: int) -> list[tuple[str, bytes]]:
    """The headers of the control task's copy of the accepted REGISTER at `original`,
    written again so compaction keeps it (`runtime.control_plane`)."""
    return [(REWRITTEN_HEADER, str(original).encode())]


def is_rewritten(headers: Headers) -> bool:
    """Whether a control record is such a copy."""
    return REWRITTEN_HEADER in dict(headers or ())


def rewritten_from(headers: Headers) -> int | None:
    """For such a copy, the offset of the original, whose status answers both; None
    for any other control record."""
    value = dict(headers or ()).get(REWRITTEN_HEADER)
    return None if value is None else int(value)


# -- statuses --------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandStatus:
    """A `juggler.CommandStatus`: the outcome of the command at `command_offset` of
    `juggler.control`."""

    id: str
    action: Action
    status: Outcome
    message: str
    command_offset: int
    partition: int = -1
    """LIVE: the partition whose task applied the command."""
    partitions: int = 0
    """How many partitions must say LIVE before the command is live everywhere."""

    @property
    def accepted(self) -> bool:
        return self.status == ACCEPTED

    @property
    def live(self) -> bool:
        return self.status == LIVE

    def record(self) -> dict[str, Any]:
        return {"id": self.id, "action": self.action, "status": self.status,
                "message": self.message, "command_offset": self.command_offset,
                "partition": self.partition, "partitions": self.partitions}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> CommandStatus:
        return cls(record["id"], record["action"], record["status"], record["message"],
                   record["command_offset"], record.get("partition", -1),
                   record.get("partitions", 0))

    def encode(self, codec: Codec, topic: str | None = None) -> bytes:
        """The Kafka value; `topic` as for `encode_command` (default
        `juggler.control.status`). Written without validating it (`Codec.encode`'s
        `trusted`): a worker builds a status of its own values, five per command."""
        return codec.encode(COMMAND_STATUS, self.record(), topic=topic, trusted=True)

    @classmethod
    def decode(cls, codec: Codec, data: bytes | None) -> CommandStatus:
        """Raises `CodecError` for a value that is not a status. Read as trusted
        (`Codec.decode`): only workers write statuses, and a client waiting for a burst
        of registrations, or a restore, reads five of them per command."""
        return cls.from_record(codec.decode(COMMAND_STATUS, data, trusted=True))


def accepted_of(statuses: Iterable[CommandStatus]) -> dict[str, int]:
    """The registered queries that statuses in log order say: id -> the control offset
    of its accepted REGISTER (what the control task restores, `ControlTask.accepted`)."""
    accepted: dict[str, int] = {}
    for status in statuses:
        if status.status != ACCEPTED:
            continue
        if status.action == REGISTER:
            accepted[status.id] = status.command_offset
        else:
            accepted.pop(status.id, None)
    return accepted
