"""Control commands and statuses as Python values, and their Avro records.

Why here and not in the codec: the worker (which applies commands and writes
statuses) and the `juggler query` client (which writes commands and reads statuses)
must build and read these records the same way; the codec only knows schemas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from juggler.codec.avro import COMMAND, COMMAND_STATUS, Codec

Action = Literal["REGISTER", "DEREGISTER"]
Outcome = Literal["ACCEPTED", "REJECTED", "LIVE"]

REGISTER: Action = "REGISTER"
DEREGISTER: Action = "DEREGISTER"
ACCEPTED: Outcome = "ACCEPTED"
REJECTED: Outcome = "REJECTED"
LIVE: Outcome = "LIVE"
"""Written by each partition's task when the command took effect there."""


@dataclass(frozen=True)
class Command:
    """A `juggler.Command`: `text` is set for REGISTER and None for DEREGISTER."""

    action: Action
    id: str
    text: str | None = None
    history: bool = False
    own_topic: bool = False
    """Results to `juggler.results.<id>` instead of the shared `juggler.results`."""

    @classmethod
    def register(cls, query_id: str, text: str, history: bool = False,
                 own_topic: bool = False) -> Command:
        return cls(REGISTER, query_id, text, history, own_topic)

    @classmethod
    def deregister(cls, query_id: str) -> Command:
        return cls(DEREGISTER, query_id)

    def record(self) -> dict[str, Any]:
        return {"action": self.action, "id": self.id, "text": self.text,
                "history": self.history, "own_topic": self.own_topic}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Command:
        return cls(record["action"], record["id"], record["text"], record["history"],
                   record.get("own_topic", False))

    def encode(self, codec: Codec) -> bytes:
        return codec.encode(COMMAND, self.record())

    @classmethod
    def decode(cls, codec: Codec, data: bytes | None) -> Command:
        return cls.from_record(codec.decode(COMMAND, data))


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

    def encode(self, codec: Codec) -> bytes:
        return codec.encode(COMMAND_STATUS, self.record())

    @classmethod
    def decode(cls, codec: Codec, data: bytes | None) -> CommandStatus:
        return cls.from_record(codec.decode(COMMAND_STATUS, data))
