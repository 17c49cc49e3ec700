"""Input the engine cannot take goes to the dead-letter topic, never silently away.

A dead letter keeps the original key and bytes when they fit in one record (else their
sizes and a reference: topic, partition, offset), and why it was refused: a reason kind
for machines (`juggler.codec.bounded.DEAD_LETTER_KINDS`, also the metric's label) and a
text for people. It is produced in the same transaction as the round it came from, so a
restart neither loses nor repeats it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from juggler.codec.avro import Codec
from juggler.codec.bounded import dead_letter
from juggler.runtime.topic_names import TopicNames
from juggler.runtime.transactions import Outbox

if TYPE_CHECKING:  # the task's types (the task module imports this one through `job`)
    from juggler.runtime.task import Record, RoundCounts


class Framing(Protocol):
    """What a dead letter is written with: the runtime's codec, topic names and record
    size bound (`job.Job`)."""

    @property
    def codec(self) -> Codec: ...

    @property
    def names(self) -> TopicNames: ...

    @property
    def max_record_bytes(self) -> int: ...


class DeadLetters:
    def __init__(self, framing: Framing) -> None:
        self.w = framing

    def send(self, outbox: Outbox, counts: RoundCounts, record: Record, kind: str,
             reason: str) -> None:
        """Dead-letter the input `record` in `outbox`'s transaction."""
        key, value = dead_letter(self.w.codec, topic=record.topic, partition=record.partition,
                                 offset=record.offset, key=record.key, value=record.value,
                                 kind=kind, reason=reason, max_bytes=self.w.max_record_bytes,
                                 deadletter_topic=self.w.names.deadletter)
        outbox.send(self.w.names.deadletter, key, value)
        counts.dead_letters[kind] += 1
