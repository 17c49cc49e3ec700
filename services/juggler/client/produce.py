"""`juggler produce`: a `juggler eval` events file onto Kafka, in its order.

Event lines are Avro-encoded with the stream's schema and produced to its topic, keyed
by the entity key (murmur2, like the Java client, so a key's events of every stream
meet in one partition). A control line is a barrier (semantics 4a): the events before it
are flushed, the command is sent and waited for until it is live in every partition,
and only then the events after it are produced. So the worker sees the commands exactly
where the file has them, and `juggler eval` on the same file gives the same results
(per partition, each segment between commands merged by `ts`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from juggler.client.control import submit
from juggler.codec.jsonl import EventRecord, InputError, decode_json
from juggler.kafka.delivery import ControlError
from juggler.wire.commands import Command, parse_event_line


@dataclass
class Produced:
    events: int = 0
    commands: int = 0


def lines_of(source: Path | TextIO) -> Iterator[tuple[int, EventRecord | Command]]:
    """(1-based line, parsed line) of a file or of standard input; blank lines skipped."""
    handle = open(source, encoding="utf-8") if isinstance(source, Path) else source
    try:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                yield number, parse_event_line(decode_json(text))
            except InputError as exc:
                raise InputError(str(exc), line=number) from None
    finally:
        if handle is not source:
            handle.close()


def produce(bootstrap: str, lines: Iterable[tuple[int, EventRecord | Command]], *,
            prefix: str = "", timeout: float = 60.0,
            progress: Callable[[Produced], None] | None = None) -> Produced:
    """Produce `lines` in order; raise `InputError` (with the line) or `ControlError`."""
    from juggler.codec.avro import Codec, CodecError
    from juggler.kafka.producer import EventProducer

    producer = EventProducer(bootstrap, Codec(), prefix=prefix)
    done = Produced()
    for number, item in lines:
        if isinstance(item, EventRecord):
            try:
                producer.send(item.stream, item.key, item.ts, item.data)
            except CodecError as exc:
                raise InputError(exc.reason, line=number) from None
            done.events += 1
        else:
            producer.flush(timeout)
            sub = submit(bootstrap, item, timeout=timeout, prefix=prefix)
            if sub.status is None or not sub.status.accepted or not sub.everywhere:
                why = sub.status.message if sub.status is not None else "no status"
                raise ControlError(f"line {number}: {item.action} {item.id} was not "
                                   f"made live: {why or 'not live in every partition'}")
            done.commands += 1
        if progress is not None and (done.events + done.commands) % 1000 == 0:
            progress(done)
    producer.flush(timeout)
    return done


def source(path: str) -> Path | TextIO:
    return sys.stdin if path == "-" else Path(path)
