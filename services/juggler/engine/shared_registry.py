"""Queries registered once for every engine of a process that registers the same ones.

Every partition of a worker registers the same queries in the same order: each
command's fanout copy reaches every task, and every task restores the same stored
queries. Building each engine's lists, plan and per-query records for them was most
of a worker's registration; instead the first engine to register a batch builds it,
and an engine that would then be where that one is copies its registry natively
(`juggler_native.Operator.copy_registry`), keeping its own keys and held events.

Whether two engines' registries are the same is told by their lineages: what each
registered and deregistered, in order, folded into a number (`Lineage`). A copy is
taken only from an engine whose lineage is this engine's with the batch added, so it
is what registering the batch here would have made (the same bits, orders and
results; how a list's entries are cut into blocks may differ with how the queries were
batched, which no result shows). An engine that went another way (it registered a
query the others did not, a copy was refused) builds its own.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Generic, NamedTuple, Protocol, TypeVar

if TYPE_CHECKING:
    from juggler.language.model import Query


class Lineage(NamedTuple):
    """What an engine registered and deregistered, in order: how many operations and
    a hash over them (per query its id and text, which a process compiles the same)."""

    ops: int = 0
    digest: int = 0

    def registered(self, queries: Iterable[Query]) -> Lineage:
        ops, digest = self
        for query in queries:
            ops, digest = ops + 1, hash((digest, query.id, query.text))
        return Lineage(ops, digest)

    def deregistered(self, query_id: str) -> Lineage:
        return Lineage(self.ops + 1, hash((self.digest, None, query_id)))


class Registrant(Protocol):
    """What the registries tell engines apart by: an engine's lineage, and the config
    that decides what its registry holds (only engines of one config copy each
    other's)."""

    @property
    def lineage(self) -> Lineage: ...

    @property
    def config(self) -> Hashable: ...


E = TypeVar("E", bound=Registrant)


class SharedRegistries(Generic[E]):
    """The engines of a process that may copy each other's registries (held weakly:
    an engine gone with its task is no source)."""

    def __init__(self) -> None:
        self._engines: weakref.WeakSet[E] = weakref.WeakSet()

    def join(self, engine: E) -> None:
        self._engines.add(engine)

    def at(self, lineage: Lineage, like: E) -> E | None:
        """An engine other than `like`, with its config, whose lineage is `lineage`."""
        for engine in list(self._engines):
            if engine is not like and engine.lineage == lineage and engine.config == like.config:
                return engine
        return None
