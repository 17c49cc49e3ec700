"""The naive reference evaluator: the executable form of semantics sections 3 and 4.

It is written to be obviously correct, not fast. It keeps every accepted event, and for
each arriving event evaluates every query on its own, with nested loops over the stored
events of the query's other FROM streams that share the event's key. The Juggler
operator (`juggler.engine.native_engine`) must return exactly what this engine returns, in
the same order; property tests hold one against the other, and benchmarks use this one
as the baseline.

Decisions where docs/semantics.md is silent (each repeated where it applies):

- A query id may be registered again after it was deregistered; it is then a new
  registration (new registration index, new snapshot of the floors).
- Registration raises the horizon H at once, but floors only move when events arrive,
  so `history` and the "held at the command" test use the floors as they are at the
  command.
- Results returned by one call are sorted by (registration index of the query, tuple of
  source positions in FROM order).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Iterator

from juggler.engine.events import (EngineConfig, Event, LateEvent, RegistrationError,
                                   Result)
from juggler.engine.exact import attribute_holds, pair_holds
from juggler.language.model import TIMESTAMP, AttributePredicate, Predicate, Query


@dataclass(frozen=True)
class _Stored:
    """An accepted event and its arrival number (0, 1, 2... over all accepted events)."""

    arrival: int
    event: Event


@dataclass(frozen=True)
class _Registration:
    """A registered query and what the engine looked like at the register command.

    `arrivals_before` counts the events accepted before the command; `floors` is the
    per-key floor at the command (semantics section 4: an event that arrived before the
    command can be part of a result only if it was still held then).
    """

    query: Query
    index: int
    arrivals_before: int
    floors: dict[str, int]

    def sees(self, stored: _Stored) -> bool:
        """Semantics 4: events arriving after the command are always usable; earlier ones
        only if `ts >= floor_k` at the command (a key without a floor had no events)."""
        if stored.arrival >= self.arrivals_before:
            return True
        floor = self.floors.get(stored.event.key)
        return floor is None or stored.event.ts >= floor


class NaiveEngine:
    """Reference implementation of the QueryEngine protocol (semantics sections 3-4).

    Per key it tracks `maxts` (largest ts of accepted events, any stream) and `floor`
    (`max(floor, maxts - H - L)`, updated at every accepted event of the key).

    By default every accepted event is kept, so that comparing this engine with one that
    drops unheld events also tests that dropping them is safe. `purge=True` drops events
    below their key's floor (semantics 3 allows it: no result can use them any more), which
    keeps memory bounded when this engine is the benchmarks' baseline.
    """

    def __init__(self, config: EngineConfig | None = None, *, purge: bool = False) -> None:
        self.config = config or EngineConfig()
        self.purge = purge
        self._registrations: dict[str, _Registration] = {}
        self._next_index = 0
        self._horizon = self.config.retention
        self._arrivals = 0
        self._stored: dict[str, dict[str, list[_Stored]]] = {}  # key -> stream -> events
        self._maxts: dict[str, int] = {}
        self._floor: dict[str, int] = {}

    # -- the QueryEngine protocol ----------------------------------------------------

    @property
    def queries(self) -> dict[str, Query]:
        return {qid: reg.query for qid, reg in self._registrations.items()}

    @property
    def horizon(self) -> int:
        """H = max(retention, MAXWINDOW of every query registered so far) (semantics 3).

        It never shrinks on deregistration."""
        return self._horizon

    def register(self, query: Query, history: bool = False) -> list[Result]:
        """Semantics 4 `register`. A repeated id raises RegistrationError and changes nothing.

        The registration snapshots the arrival count and the per-key floors. With
        `history`, returns every result made only of events that arrived before the
        command and were all held at it. H grows at once (semantics 3); the floors move
        only when the next event of a key arrives.
        """
        if query.id in self._registrations:
            raise RegistrationError(f"query {query.id!r} is already registered")
        reg = _Registration(query, self._next_index, self._arrivals, dict(self._floor))
        self._next_index += 1
        self._registrations[query.id] = reg
        self._horizon = max(self._horizon, query.window)
        if not history:
            return []
        results: list[Result] = []
        for key in sorted(self._stored):
            candidates = [self._visible(reg, key, stream) for stream in query.streams]
            results.extend(self._results(reg, key, candidates))
        return sorted(results, key=_positions)

    def deregister(self, query_id: str) -> None:
        """Semantics 4 `deregister`: no result of the query afterwards. An unknown id raises
        RegistrationError. A deregistered id may be registered again later, as a new query."""
        if query_id not in self._registrations:
            raise RegistrationError(f"query {query_id!r} is not registered")
        del self._registrations[query_id]

    def process(self, event: Event) -> list[Result]:
        """Semantics 3: accept an event and return every result whose last event it is.

        A late event (`ts < maxts_k - L`) raises LateEvent before anything changes.
        """
        lateness = self.config.allowed_lateness
        maxts = self._maxts.get(event.key)
        if maxts is not None and event.ts < maxts - lateness:
            raise LateEvent(event, maxts, lateness)

        arriving = _Stored(self._arrivals, event)
        results: list[Result] = []
        for reg in self._registrations.values():  # registration order
            if event.stream not in reg.query.streams:
                continue
            candidates = [[arriving] if stream == event.stream
                          else self._visible(reg, event.key, stream)
                          for stream in reg.query.streams]
            results.extend(sorted(self._results(reg, event.key, candidates), key=_positions))

        streams = self._stored.setdefault(event.key, {})
        streams.setdefault(event.stream, []).append(arriving)
        self._arrivals += 1
        maxts = event.ts if maxts is None else max(maxts, event.ts)
        self._maxts[event.key] = maxts
        floor = maxts - self._horizon - lateness
        if event.key in self._floor:
            floor = max(self._floor[event.key], floor)
        self._floor[event.key] = floor
        if self.purge:
            for stream, stored in streams.items():
                streams[stream] = [s for s in stored if s.event.ts >= floor]
        return results

    # -- evaluation ------------------------------------------------------------------

    def _visible(self, reg: _Registration, key: str, stream: str) -> list[_Stored]:
        return [s for s in self._stored.get(key, {}).get(stream, ()) if reg.sees(s)]

    def _results(self, reg: _Registration, key: str,
                 candidates: list[list[_Stored]]) -> Iterator[Result]:
        """Every combination (one event per FROM stream, in FROM order) that is a result."""
        query = reg.query
        for combo in itertools.product(*candidates):
            events = {stream: stored.event for stream, stored in zip(query.streams, combo)}
            if _is_result(query, events):
                yield _make_result(query, key, events)


def _is_result(query: Query, events: dict[str, Event]) -> bool:
    """Semantics 3: every predicate holds and `max(ts) - min(ts) <= MAXWINDOW`."""
    stamps = [e.ts for e in events.values()]
    if max(stamps) - min(stamps) > query.window:
        return False
    return all(_holds(p, events) for p in query.predicates)


def _value(event: Event, column: str) -> Any:
    """The `ts` column is the event's time; every other column comes from its data."""
    return event.ts if column == TIMESTAMP else event.data[column]


def _holds(predicate: Predicate, events: dict[str, Event]) -> bool:
    """Semantics 2: evaluate exactly (`juggler.engine.exact`)."""
    if isinstance(predicate, AttributePredicate):
        return attribute_holds(predicate, _value(events[predicate.column.stream], predicate.column.column))
    return pair_holds(predicate, _value(events[predicate.left.stream], predicate.left.column),
                      _value(events[predicate.right.stream], predicate.right.column))


def _make_result(query: Query, key: str, events: dict[str, Event]) -> Result:
    """Semantics 3: ts is the largest ts; sources in FROM order; `SELECT *` lists every data
    column of every FROM stream (FROM order, then the event's data order), never `ts`."""
    if query.select is None:
        row = {f"{stream}.{column}": value
               for stream in query.streams
               for column, value in events[stream].data.items()}
    else:
        row = {str(ref): _value(events[ref.stream], ref.column) for ref in query.select}
    return Result(query=query.id, key=key, ts=max(e.ts for e in events.values()),
                  sources={stream: events[stream].position for stream in query.streams},
                  row=row)


def _positions(result: Result) -> tuple:
    """Within one query, results are ordered by their sources' positions in FROM order."""
    return tuple(result.sources.values())

