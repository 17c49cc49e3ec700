"""What flows into and out of an engine: events, results, and the engine's settings."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Hashable, Protocol

from juggler.language.model import Query

if TYPE_CHECKING:  # typing only: a reader of these records needs no built Rust core
    from juggler.engine.rust_core import DecodedEvent

Position = Hashable
"""Where an event entered: a line number offline, `(topic, partition, offset)` on Kafka."""


@dataclass(slots=True, eq=False)
class Event:
    """One accepted or candidate event. Values are validated before they get here:
    numbers are finite ints/floats, and every column of the stream's schema is present."""

    stream: str
    key: str
    ts: int
    data: dict[str, Any]
    position: Position


@dataclass(slots=True)
class Result:
    """One result of a query (semantics section 3): an event per FROM stream, same key.

    Not frozen: a frozen dataclass pays `object.__setattr__` per field, and results
    are built on the hot path."""

    query: str
    key: str
    ts: int
    sources: dict[str, Position]
    row: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"query": self.query, "key": self.key, "ts": self.ts,
                "sources": dict(self.sources), "row": dict(self.row)}

    def identity(self) -> tuple:
        """A hashable form, for comparing result multisets."""
        return (self.query, self.key, self.ts, tuple(sorted(self.sources.items())),
                tuple(sorted((k, repr(v)) for k, v in self.row.items())))


@dataclass(frozen=True)
class KeySnapshot:
    """What must survive a restart for one key: its `maxts`, its floor and its held
    events in arrival order (the Kafka worker keeps these in the state topic)."""

    maxts: int | None
    floor: int | None
    events: Sequence[Event | DecodedEvent]


class LateEvent(Exception):
    """Raised by `process` for an event older than `maxts - allowed_lateness` of its key.

    The event is not joined and not stored; the caller dead-letters it with `reason`.
    """

    def __init__(self, event: Event | DecodedEvent, maxts: int,
                 allowed_lateness: int) -> None:
        self.event = event
        self.reason = (f"late: ts {event.ts} < maxts {maxts} - allowed_lateness "
                       f"{allowed_lateness} for key {event.key!r}")
        super().__init__(self.reason)


class RegistrationError(Exception):
    """A register/deregister command that must change nothing (repeated or unknown id)."""


@dataclass(frozen=True)
class EngineConfig:
    """Settings shared by the Juggler operator and the naive reference.

    `retention` (ms) is the lower bound of the horizon H; every registered MAXWINDOW
    raises H (semantics section 3). `order` is "adaptive" or a static order of the three
    predicate types such as "AJW".
    """

    allowed_lateness: int = 0
    retention: int = 0
    order: str = "adaptive"
    reorder_every: int = 128


class QueryEngine(Protocol):
    """The interface both engines implement, so every driver (offline evaluator, Kafka
    worker, benchmarks, property tests) can run either one."""

    def register(self, query: Query, history: bool = False) -> list[Result]:
        """Add a query between events; with `history`, return its results over held events."""

    def deregister(self, query_id: str) -> None:
        """Remove a query; none of its results are emitted afterwards."""

    def process(self, event: Event) -> list[Result]:
        """Accept an event and return every result whose last event it is.

        Raises LateEvent (and changes nothing) when the event is late.
        """

    @property
    def queries(self) -> dict[str, Query]:
        """The registered queries by id, in registration order."""


def process_batch(engine: QueryEngine, events: list[Event]) -> list[Sequence[Result] | LateEvent]:
    """`engine.process` over `events`: per event its results, or the LateEvent it
    raised. The native operator crosses into Rust once for the whole batch."""
    batch = getattr(engine, "process_batch", None)
    if batch is not None:
        return batch(events)
    out: list[Sequence[Result] | LateEvent] = []
    for event in events:
        try:
            out.append(engine.process(event))
        except LateEvent as late:
            out.append(late)
    return out
