"""The control task's accepted set, read back in a process of its own beside a restore.

Why apart: the set comes from every status the status topic holds, an ACCEPTED per
command ever decided (100,000 of them for as many rules), and decoding them on the
loop's thread was an eighth of a restart with many queries, while the partitions'
state, the compiling and the registering waited behind it. Read in a child process, it
takes the second core while the loop restores the tasks (docs/benchmarks.md,
"Registration"). The child is spawned, not forked: the worker's librdkafka threads are
running, and a forked copy of them is undefined.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AdminClient

from juggler.codec.avro import Codec, CodecError
from juggler.kafka.client_log import unwatched
from juggler.runtime.readback import Reader, read_partitions
from juggler.runtime.settings import Settings
from juggler.wire.commands import CommandStatus, accepted_of


@dataclass
class AcceptedSet:
    """What the child read: the accepted set (`ControlTask.accepted`) and, for the
    worker's log, why each record it skipped is not a status."""

    accepted: dict[str, int]
    skipped: list[str] = field(default_factory=list)


@contextmanager
def accepted_read(worker: Reader, topic: str) -> Iterator[Future[AcceptedSet]]:
    """Start reading `topic`'s accepted set in a child process; the child is gone when
    the block ends (waited for: a restore that failed does not leave it reading)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield pool.submit(read_accepted, worker.settings, unwatched(worker.client_config),
                          topic)


@dataclass
class _ChildReader:
    """A `Reader` in the child, of the worker's settings and client configuration."""

    settings: Settings
    client_config: dict[str, Any]

    def __post_init__(self) -> None:
        self.admin = AdminClient({**self.client_config, "log_level": 3})


def read_accepted(settings: Settings, config: dict[str, Any], topic: str) -> AcceptedSet:
    """The accepted set of every status in partition 0 of `topic`, up to its end."""
    codec = Codec(settings.schemas_dir, registry_url=settings.registry_url)
    statuses: list[CommandStatus] = []
    skipped: list[str] = []
    for _, _, value, _ in read_partitions(_ChildReader(settings, config), [(topic, 0)]):
        try:
            statuses.append(CommandStatus.decode(codec, value))
        except CodecError as exc:
            skipped.append(exc.reason)
    return AcceptedSet(accepted_of(statuses), skipped)
