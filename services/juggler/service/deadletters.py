"""Input the engine cannot take goes to the dead-letter topic, never silently away.

A dead letter keeps the original key and bytes when they fit in one record (else their
sizes and a reference: topic, partition, offset), and why it was refused: a reason kind
for machines (`juggler.codec.bounded.DEAD_LETTER_KINDS`, also the metric's label) and a
text for people. It is produced in the same transaction as the round it came from, so a
restart neither loses nor repeats it.
"""

from __future__ import annotations

from typing import Any

from juggler.codec.bounded import dead_letter
from juggler.service.transactions import Outbox


class DeadLetters:
    def __init__(self, worker: Any) -> None:
        self.w = worker

    def send(self, outbox: Outbox, counts: Any, record: Any, kind: str, reason: str) -> None:
        """Dead-letter the input `record` (`task.Record`) in `outbox`'s transaction."""
        key, value = dead_letter(self.w.codec, topic=record.topic, partition=record.partition,
                                 offset=record.offset, key=record.key, value=record.value,
                                 kind=kind, reason=reason, max_bytes=self.w.max_record_bytes,
                                 deadletter_topic=self.w.names.deadletter)
        outbox.send(self.w.names.deadletter, key, value)
        counts.dead_letters[kind] += 1
