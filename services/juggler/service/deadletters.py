"""Input the engine cannot take goes to the dead-letter topic, never silently away.

A dead letter keeps the original key and bytes, where they came from and why they were
refused (`juggler.DeadLetter`). It is produced in the same transaction as the batch it
came from, so a restart neither loses nor repeats it. The metric label is the reason's
class (`late`, `undecodable`, `schema`, `no_key`, `bad_command`); the record holds the
full message.
"""

from __future__ import annotations

from typing import Any

from juggler.service.transactions import Outbox

REASONS = ("late", "undecodable", "schema", "no_key", "bad_command")


class DeadLetters:
    def __init__(self, codec: Any, topic: str, metrics: Any) -> None:
        self.codec = codec
        self.topic = topic
        self.metrics = metrics

    def send(self, outbox: Outbox, message: Any, kind: str, reason: str) -> None:
        """Dead-letter the Faust `message` (its raw key/value) in `outbox`'s transaction."""
        record = {"key": message.key, "value": message.value, "topic": message.topic,
                  "partition": message.partition, "offset": message.offset, "reason": reason}
        outbox.send(self.topic, message.key, self.codec.encode("juggler.DeadLetter", record))
        outbox.then(lambda: self.metrics.dead_letters.labels(kind).inc())
