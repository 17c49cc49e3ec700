"""Faust records and codecs for what a Juggler worker writes, so Faust users can consume it.

Why this module: the worker writes Avro (`schemas/Result.avsc`, `DeadLetter.avsc`,
`CommandStatus.avsc`) framed by `juggler.codec.avro.Codec`; a Faust agent wants typed
`faust.Record` values and a serializer name for `app.topic(..., value_serializer=...)`.
Importing this module registers three Faust codecs that do the Avro part with the
project's own `Codec` (framing, single-object or Schema Registry, and every check of a
malformed message stay in one place) and turn the decoded records into `Result`,
`DeadLetter` and `CommandStatus`:

    ==========================  ===============  ====================================
    codec name                  record           topic (with the worker's prefix)
    ==========================  ===============  ====================================
    ``"juggler.result"``        `Result`         ``juggler.results`` (and
                                                 ``juggler.results.<id>``)
    ``"juggler.deadletter"``    `DeadLetter`     ``juggler.deadletter``
    ``"juggler.commandstatus"`` `CommandStatus`  ``juggler.control.status``
    ==========================  ===============  ====================================

The codecs also encode (a record, or a mapping of its fields), so a Faust app can
produce these records in the worker's own bytes; each record class names its codec as
its serializer, so `topic.send(value=result)` writes Avro whatever the topic's default.

Repeats: the worker writes each result exactly once (Kafka transactions; read its
topics read_committed). A producer that is only at-least-once (the Faust runtime,
`juggler.faust.app`) can write a result again after a crash, and a result's bytes do
not say so. `Result.identity()` is what makes two copies recognisable, and `Repeats`
drops a copy seen shortly after its original.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from functools import cache
from typing import Any, ClassVar, Dict, Optional

import faust
from faust.serializers import codecs

from juggler.bounded_cache import BoundedCache
from juggler.codec.avro import COMMAND_STATUS, DEAD_LETTER, RESULT, Codec as AvroCodec, \
    result_record
from juggler.engine import events
from juggler.wire import commands

__all__ = ["RESULT_CODEC", "DEAD_LETTER_CODEC", "COMMAND_STATUS_CODEC", "JugglerRecord",
           "Position", "Result", "DeadLetter", "CommandStatus", "RecordCodec", "ResultCodec",
           "DeadLetterCodec", "CommandStatusCodec", "Repeats"]

RESULT_CODEC = "juggler.result"
DEAD_LETTER_CODEC = "juggler.deadletter"
COMMAND_STATUS_CODEC = "juggler.commandstatus"

_METADATA = "__faust"
"""The key Faust adds to a record's representation to name its class (not Avro)."""


@cache
def _project_codec() -> AvroCodec:
    """One project codec per process: it parses the schema files once. Created on
    first use, not on import, so importing this module (which registers the codecs)
    never fails for a missing schemas directory; `JUGGLER_SCHEMAS` and
    `JUGGLER_SCHEMA_REGISTRY_URL` apply as for the worker."""
    return AvroCodec()


class JugglerRecord(faust.Record, abstract=True, include_metadata=False):
    """A Faust record for one of the worker's Avro records (`avro_name`).

    `include_metadata=False`: the Avro schema, not Faust's ``__faust`` key, says what a
    message is, and the codec never writes Faust's key."""

    avro_name: ClassVar[str]

    @classmethod
    def from_avro(cls, record: Mapping[str, Any]) -> JugglerRecord:
        """The record for a decoded Avro record (`Codec.decode`'s dict)."""
        return cls(**record)

    def to_avro(self) -> dict[str, Any]:
        """The Avro record `Codec.encode` writes for this record."""
        return self.asdict()


class Position(faust.Record, include_metadata=False):
    """Where an event a result used entered: its stream record's Kafka position."""

    topic: str
    partition: int
    offset: int


class Result(JugglerRecord, serializer=RESULT_CODEC):
    """One result of a query (`juggler.Result`): one event from each stream of its
    FROM, all with the same `key`."""

    avro_name = RESULT

    query: str
    """The query id."""
    key: str
    """The entity key every event of the result has (also the Kafka message key)."""
    ts: int
    """The largest event time (ms) among the result's events."""
    sources: Dict[str, Position]
    """Stream name -> where the event used from that stream entered."""
    row: Dict[str, Any]
    """The selected columns, ``"S.col"`` -> None, bool, int, float or str."""

    @classmethod
    def from_avro(cls, record: Mapping[str, Any]) -> Result:
        return cls(query=record["query"], key=record["key"], ts=record["ts"],
                   sources={stream: Position(p["topic"], p["partition"], p["offset"])
                            for stream, p in record["sources"].items()},
                   row=dict(record["row"]))

    def to_avro(self) -> dict[str, Any]:
        # the worker's own mapping from an engine result to the Avro record
        return result_record(self.to_engine())

    def to_engine(self) -> events.Result:
        """The engine's `Result`, with each source as ``(topic, partition, offset)``: the
        form `juggler eval`, the engines and the project's tests compare results in."""
        return events.Result(self.query, self.key, self.ts,
                             {stream: (p.topic, p.partition, p.offset)
                              for stream, p in self.sources.items()},
                             dict(self.row))

    def identity(self) -> tuple:
        """What makes two copies of a result the same result: the engine's
        `Result.identity()`, so a consumer compares equal with the worker's tests.

        A result is determined by its query and the positions of its sources (one
        event per FROM stream; the key, ts and row follow from those events), and the
        identity holds exactly those plus what follows from them. One caveat: a query
        id deregistered and registered again with history gives its history results
        again, with the earlier results' identity."""
        return self.to_engine().identity()


class DeadLetter(JugglerRecord, serializer=DEAD_LETTER_CODEC):
    """A record the worker could not use (`juggler.DeadLetter`): see the schema's docs."""

    avro_name = DEAD_LETTER

    key: Optional[bytes]
    """The original message key; None when it was None or too large to copy."""
    value: Optional[bytes]
    """The original message value; None for a tombstone or when too large to copy."""
    key_size: int
    """The original key's length in bytes, -1 when it was None."""
    value_size: int
    """The original value's length in bytes, -1 when it was None."""
    topic: str
    partition: int
    offset: int
    """With topic and partition: where to read the original."""
    kind: str
    """Why, for machines: one of `juggler.codec.bounded.DEAD_LETTER_KINDS`."""
    reason: str
    """Why, for people."""


class CommandStatus(JugglerRecord, serializer=COMMAND_STATUS_CODEC):
    """The outcome of one control command (`juggler.CommandStatus`), keyed by query id:
    ACCEPTED or REJECTED once, then LIVE once per partition that applied it."""

    avro_name = COMMAND_STATUS

    id: str
    """The query id."""
    action: str
    """``"REGISTER"`` or ``"DEREGISTER"``."""
    status: str
    """``"ACCEPTED"``, ``"REJECTED"`` or ``"LIVE"``."""
    message: str
    """Why it was rejected (may be empty otherwise)."""
    command_offset: int
    """The command's offset in ``juggler.control``: which command this answers."""
    partition: int = -1
    """LIVE: the partition whose task applied the command; -1 otherwise."""
    partitions: int = 0
    """LIVE: how many partitions must say LIVE before the command is live everywhere."""

    @classmethod
    def from_avro(cls, record: Mapping[str, Any]) -> CommandStatus:
        # the wire's reading of the record (defaults for older writers)
        return cls(**commands.CommandStatus.from_record(record).record())

    def to_control(self) -> commands.CommandStatus:
        """The wire's `CommandStatus` (`juggler.wire.commands`), the form `juggler query`
        reads."""
        return commands.CommandStatus.from_record(self.asdict())

    @property
    def accepted(self) -> bool:
        return self.to_control().accepted

    @property
    def live(self) -> bool:
        return self.to_control().live


class RecordCodec(codecs.Codec):
    """A Faust codec for one `JugglerRecord` class: bytes <-> record via the project's
    Avro `Codec`.

    `loads` gives the record itself (Faust keeps a model as it is, with or without a
    topic's `value_type`). A message the project codec refuses raises its
    `DecodeError` or `SchemaViolation` (Faust wraps it in `ValueDecodeError`).
    `dumps` takes the record, or a mapping of its fields (what Faust passes for a
    model it serializes), and writes the worker's bytes. `codec=` uses another project
    codec (a schemas directory, a Schema Registry) than the process's default one."""

    model: ClassVar[type[JugglerRecord]]

    def __init__(self, children: Any = None, *, codec: AvroCodec | None = None,
                 **kwargs: Any) -> None:
        # `codec` is kept in kwargs so that Faust's `clone` (for `"a|b"` chains) keeps it
        super().__init__(children, codec=codec, **kwargs)
        self._codec = codec

    @property
    def avro(self) -> AvroCodec:
        return self._codec if self._codec is not None else _project_codec()

    def _loads(self, s: bytes) -> JugglerRecord:
        return self.model.from_avro(self.avro.decode(self.model.avro_name, s))

    def _dumps(self, obj: Any) -> bytes:
        if isinstance(obj, Mapping) and not isinstance(obj, self.model):
            fields = {k: v for k, v in obj.items() if k != _METADATA}
            obj = self.model.from_data(fields)
        if not isinstance(obj, self.model):
            raise TypeError(f"{self.model.avro_name} codec: expected a "
                            f"{self.model.__name__} or a mapping of its fields, got "
                            f"{type(obj).__name__}")
        return self.avro.encode(self.model.avro_name, obj.to_avro())


class ResultCodec(RecordCodec):
    model = Result


class DeadLetterCodec(RecordCodec):
    model = DeadLetter


class CommandStatusCodec(RecordCodec):
    model = CommandStatus


codecs.register(RESULT_CODEC, ResultCodec())
codecs.register(DEAD_LETTER_CODEC, DeadLetterCodec())
codecs.register(COMMAND_STATUS_CODEC, CommandStatusCodec())


class Repeats:
    """Drops a result seen again: remembers the identities of the last `per_key`
    results of each of the last `keys` entity keys (least recently seen key forgotten
    first), so memory stays bounded however many keys and results go by.

    Why per key: a repeat comes from a producer that wrote a result again after a
    crash (it resumed from its last committed input position), so it follows its
    original in the same partition, and only the results of the same key in between
    can push the original out of that key's window. `first(result)` is True the first
    time an identity is seen and False for each repeat. The memory is the process's
    own: a consumer that restarts between an original and its repeat lets that repeat
    through."""

    def __init__(self, per_key: int = 1024, keys: int = 100_000) -> None:
        if per_key < 1 or keys < 1:
            raise ValueError("per_key and keys must be at least 1")
        self.per_key = per_key
        self._seen: BoundedCache[str, dict[Hashable, None]] = BoundedCache(keys)
        self.dropped = 0
        """How many repeats `first` said False for."""

    def first(self, result: Result) -> bool:
        identity = result.identity()
        seen = self._seen.get(result.key)
        if seen is None:
            seen = self._seen.put(result.key, {})
        if identity in seen:
            self.dropped += 1
            return False
        seen[identity] = None
        if len(seen) > self.per_key:
            del seen[next(iter(seen))]  # a dict keeps insertion order: the oldest
        return True
