"""The Juggler operator with its state and per-event path in Rust.

Python keeps the language: this module compiles each query into the specs
`juggler_native.Operator.register` takes (`juggler.engine.predicate_specs`),
computing every threshold exactly here (`juggler.engine.exact`), and answers the
operator's exact fallback, the rare comparison that doubles cannot decide (a
difference within rounding of a constant, an int beyond 64 bits), with rational
arithmetic. Everything per event (attribute masks, held events by key and stream,
time-range retrieval, join and window lists, MAXWINDOW, results) runs in Rust, one
boundary crossing per event or per batch.
Every entry point that takes events takes `Event`s and the worker's
`juggler_native.DecodedEvent`s (stream records decoded in Rust, `Codec.native_decoder`)
alike; the operator reads the latter's values without a Python object per column.

The operator assumes what every driver gives it: within a stream, positions grow
with arrival (line numbers offline, offsets of one partition on Kafka), so results
are ordered by arrival where docs/semantics.md orders them by position.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import lru_cache
from fractions import Fraction
from typing import Any, Literal

from juggler.engine.events import (EngineConfig, Event, KeySnapshot, LateEvent,
                                   RegistrationError, Result)
from juggler.engine.exact import (attribute_holds, equality_key, lower_threshold,
                                  pair_holds, to_float, upper_threshold)
from juggler.engine.rust_core import DecodedEvent, Operator
from juggler.engine.orders import TYPES, check_order
from juggler.engine.predicate_specs import (EqConstant, EqSpec, PairEqSpec,
                                            PairRangeSpec, PredicateSpec, RangeSpec)
from juggler.engine.shared_registry import Lineage, SharedRegistries
from juggler.language.model import (AttributePredicate, Constant, Op, PairPredicate,
                                    Predicate, Query)

_LOWER = (Op.GT, Op.GE)
_UPPER = (Op.LT, Op.LE)
_I64 = 2**63
COPY_SHARE = 4
"""A registry is copied rather than built when the batch is at least a `COPY_SHARE`th
of what is registered after it: a copy costs a fraction of building per query it
copies (docs/benchmarks.md, "Registration"), but copying everything for a few new
queries would make a command's cost grow with what is registered."""


class NativeEngine:
    """The shared operator. See `QueryEngine` for the contract of each method."""

    def __init__(self, config: EngineConfig = EngineConfig(),
                 registries: SharedRegistries[NativeEngine] | None = None) -> None:
        """`registries`: the engines this one may copy registries from, and give them
        to (`shared_registry`)."""
        self.config = config
        self._op = Operator(config.retention, config.allowed_lateness, Result, self._exact,
                            check_order(config.order), config.reorder_every)
        self._queries: dict[str, Query] = {}
        self._bits: dict[str, int] = {}
        self._pred_ids: dict[Predicate, int] = {}
        self._preds: list[Predicate | None] = []
        self._pred_users: list[int] = []
        """Per predicate id, how many registered queries use it: an id with none is
        free for the next new predicate, so what is kept follows what is registered,
        not every predicate ever seen."""
        self._free_ids: list[int] = []
        self.lineage = Lineage()
        """What this engine registered and deregistered (`shared_registry`)."""
        self._registries = registries
        if registries is not None:
            registries.join(self)

    @property
    def queries(self) -> dict[str, Query]:
        return dict(self._queries)

    @property
    def horizon(self) -> int:
        return self._op.horizon

    @horizon.setter
    def horizon(self, value: int) -> None:
        self._op.horizon = value

    def register(self, query: Query, history: bool = False) -> list[Result]:
        if query.id in self._queries:
            raise RegistrationError(f"query {query.id!r} is already registered")
        bit = self._op.register(*self._spec(query))
        self._queries[query.id] = query
        self._bits[query.id] = bit
        self.lineage = self.lineage.registered([query])
        if not history:
            return []
        # By position across keys too: arrival numbers are per engine, and a restored
        # engine numbers its keys' events one key after another.
        return sorted(self._op.history(bit), key=lambda r: tuple(r.sources.values()))

    def register_many(self, queries: Iterable[Query]) -> None:
        """`register` without history for many queries at once (a restore, a burst of
        commands): one crossing into the operator, which builds its lists once for
        all of them instead of once per query; or, when another engine of the same
        `registries` has just registered the same ones after the same, copied from it.
        All or none: an id registered already, or twice among them, raises
        RegistrationError before any is registered."""
        queries = list(queries)
        seen: set[str] = set()
        for query in queries:
            if query.id in self._queries or query.id in seen:
                raise RegistrationError(f"query {query.id!r} is already registered")
            seen.add(query.id)
        lineage = self.lineage.registered(queries)
        source = self._registries.at(lineage, self) if self._registries is not None else None
        if source is None or not self._copy(source, queries):
            bits = self._op.register_many([self._spec(q) for q in queries])
            for query, bit in zip(queries, bits):
                self._queries[query.id] = query
                self._bits[query.id] = bit
        self.lineage = lineage

    def _copy(self, source: NativeEngine, queries: list[Query]) -> bool:
        """Take `source`'s registry, whose lineage is this engine's with `queries`
        registered: whether it was taken (not when the batch is too small a share of
        it, see `COPY_SHARE`, or the operator refuses, see `Operator.copy_registry`)."""
        theirs = source._queries
        # identity first: the tasks share one compiled query per text (`Job.compiled`),
        # and comparing two queries field by field was a tenth of a restore's copies
        if len(queries) * COPY_SHARE < len(theirs) or any(
                (held := theirs.get(q.id)) is not q and held != q for q in queries):
            return False
        if not self._op.copy_registry(source._op, [source._bits[q.id] for q in queries]):
            return False
        self._queries, self._bits = dict(theirs), dict(source._bits)
        self._pred_ids, self._preds = dict(source._pred_ids), list(source._preds)
        self._pred_users, self._free_ids = list(source._pred_users), list(source._free_ids)
        return True

    def deregister(self, query_id: str) -> None:
        query = self._queries.pop(query_id, None)
        if query is None:
            raise RegistrationError(f"query {query_id!r} is not registered")
        self._op.deregister(self._bits.pop(query_id))
        for predicate in query.predicates:
            self._release(predicate)
        self.lineage = self.lineage.deregistered(query_id)

    def registry_bytes(self) -> int:
        """Bytes the registered queries take in the operator (lists, plan, per-query
        records), counted by it; the Python objects of the queries come on top."""
        return self._op.registry_bytes()

    def process(self, event: Event) -> list[Result]:
        out = self._op.process(event)
        if isinstance(out, int):
            raise LateEvent(event, out, self.config.allowed_lateness)
        return out

    def process_batch(self, events: list[Event]) -> list[Sequence[Result] | LateEvent]:
        """`process` for each event, crossing into Rust once: per event its results
        (the empty tuple when there are none: nothing allocated per quiet event), or
        the LateEvent it would have raised."""
        lateness = self.config.allowed_lateness
        return [LateEvent(e, out, lateness) if isinstance(out, int) else out
                for e, out in zip(events, self._op.process_batch(events))]

    def process_batch_encoded(self, events: list[Event | DecodedEvent], budget: int
                              ) -> list[Sequence[tuple[str, bytes] | Result] | LateEvent]:
        """`process_batch` for the worker, each result already written in Rust as the
        Avro body of `juggler.Result`: per event the empty tuple, its LateEvent, or
        its results in `process_batch`'s order, each a `(query id, body)` pair (the
        body is `result_body(result_record(r))` for the same result r; all of an
        event's results have its key) or, for a result the native writer leaves to
        Python, the `Result` itself: one it cannot write as `result_body` would, or
        one whose Kafka key (the key in UTF-8) and body take more than `budget` bytes
        (`juggler.codec.bounded.result_budget`)."""
        lateness = self.config.allowed_lateness
        return [LateEvent(e, out, lateness) if isinstance(out, int) else out
                for e, out in zip(events, self._op.process_batch_encoded(events, budget))]

    def snapshot(self, key: str) -> KeySnapshot | None:
        """What must survive a restart for one key (see `KeySnapshot`)."""
        found = self._op.snapshot(key)
        if found is None:
            return None
        maxts, floor, held = found
        return KeySnapshot(maxts, floor, [Event(s, key, ts, data, pos) for s, ts, data, pos in held])

    def restore(self, key: str, snapshot: KeySnapshot) -> None:
        self._op.restore(key, snapshot.maxts, snapshot.floor, snapshot.events)

    def key_bounds(self, key: str) -> tuple[int | None, int | None] | None:
        """(maxts, floor) of a key, None for a key never seen."""
        return self._op.key_bounds(key)

    def key_count(self) -> int:
        return self._op.key_count()

    def state_bytes(self) -> int:
        """Bytes of per-key state (keys, held events, their indexes), counted by the
        operator itself: RSS also holds what the allocator kept from freed temporaries."""
        return self._op.state_bytes()

    def held_events(self) -> dict[str, int]:
        return self._op.held_events()

    def predicate_lists(self) -> list[tuple[Literal["upper", "lower", "eq"], str,
                                         str | None, float | None, int]]:
        """Every predicate list as (family "upper"/"lower"/"eq", left column, right
        column or None for an attribute list, factor, predicates sharing it): what
        the thesis's Figures 3.10-3.12 draw."""
        return self._op.lists()

    @property
    def manager(self) -> TypeCounters:
        """The predicate type manager's state (order, reorders, comparisons and
        selectivity per type), for the worker's metrics and the benchmarks."""
        return TypeCounters(self._op.ordering())

    def stats(self) -> dict[str, int]:
        """Events, candidates (held events examined as partners), join/window list
        probes and results since creation: the benchmark's work counters."""
        return self._op.stats()

    # compiling ------------------------------------------------------------------------

    def _spec(self, query: Query) -> tuple:
        """`Operator.register`'s arguments for `query`."""
        select = None if query.select is None else [
            (str(c), c.stream, c.column) for c in query.select]
        preds = [self._compile(p) for p in query.predicates]
        return query.id, list(query.streams), query.window, preds, select

    def _id(self, predicate: Predicate) -> int:
        """The predicate's id, counting one more query using it. The id a new one would
        take is offered to `setdefault`, so the predicate is hashed once whether it is
        new or not (hashing its `Fraction` is not cheap, and most of a burst is new)."""
        free = self._free_ids
        fresh = free[-1] if free else len(self._preds)
        found = self._pred_ids.setdefault(predicate, fresh)
        if found == fresh:  # no registered predicate holds a free id or the next one
            if free:
                free.pop()
                self._preds[found] = predicate
            else:
                self._preds.append(predicate)
                self._pred_users.append(0)
        self._pred_users[found] += 1
        return found

    def _release(self, predicate: Predicate) -> None:
        """One query fewer uses `predicate`; its id is free once none does."""
        found = self._pred_ids[predicate]
        self._pred_users[found] -= 1
        if not self._pred_users[found]:
            del self._pred_ids[predicate]
            self._preds[found] = None
            self._free_ids.append(found)

    def _exact(self, pred: int, left: Any, right: Any) -> bool:
        predicate = self._preds[pred]
        assert predicate is not None, "the operator asks only about registered predicates"
        if isinstance(predicate, AttributePredicate):
            return attribute_holds(predicate, left)
        return pair_holds(predicate, left, right)

    def _compile(self, p: Predicate) -> PredicateSpec:
        op = self._op
        if isinstance(p, AttributePredicate):
            spec, constants = _attribute_constants(p)
            stream, slot = op.slot(p.column.stream, p.column.column)
            return spec(self._id(p), stream, slot, *constants)
        pair, pair_constants = _pair_constants(p)
        return pair(self._id(p), op.slot(p.left.stream, p.left.column),
                    op.slot(p.right.stream, p.right.column), *pair_constants)


@lru_cache(maxsize=1 << 18)
def _attribute_constants(p: AttributePredicate) -> tuple[type[RangeSpec] | type[EqSpec],
                                                         tuple[Any, ...]]:
    """A predicate's spec class and the fields after its columns, exact thresholds, the
    part of its compiled form every engine shares: computed once per process, not once
    per partition's engine (in rational arithmetic, it was a third of each engine's
    registration, and every partition registers every query)."""
    k = p.constant
    if isinstance(k, Fraction) and p.op in _LOWER:
        return RangeSpec, (True, lower_threshold(p.op, k), _int_threshold(p.op, k))
    if isinstance(k, Fraction) and p.op in _UPPER:
        return RangeSpec, (False, upper_threshold(p.op, k), _int_threshold(p.op, k))
    return EqSpec, (p.op is Op.EQ, _eq_constant(k))


@lru_cache(maxsize=1 << 18)
def _pair_constants(p: PairPredicate) -> tuple[type[PairRangeSpec] | type[PairEqSpec],
                                               tuple[Any, ...]]:
    """`_attribute_constants` for a predicate over two columns."""
    factor = (to_float(p.factor),
              int(p.factor) if p.factor.denominator == 1 and abs(p.factor) < _I64 else None)
    o = p.offset
    if p.op in _LOWER or p.op in _UPPER:
        return PairRangeSpec, (p.op in _LOWER, *factor, to_float(o), _int_threshold(p.op, o))
    return PairEqSpec, (p.op is Op.EQ, *factor, ("d", to_float(o), int(o) if o.denominator == 1 else None))


class TypeCounters:
    """A snapshot of the native predicate type manager (`juggler_native/src/ordering.rs`).

    `comparisons` per type as the thesis counts them (bitset operations, exploitation-
    structure probes and the entries they return, predicate-list probes); `selectivity`
    per type is what an adaptive order last measured on its samples, and for a static
    order (which does not sample) the share of partners that passed each filter phase
    in the hot path, where earlier phases already removed some."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.order: str = state["order"]
        self.adaptive: bool = state["adaptive"]
        self.reorders: int = state["reorders"]
        self.comparisons: dict[str, int] = {t: int(c) for t, c in state["comparisons"].items()}
        if self.adaptive:
            self.selectivity: dict[str, float] = dict(state["selectivity"])
        else:
            tested, passed = state["tested"], state["passed"]
            self.selectivity = {t: passed[t] / tested[t] if tested[t] else 1.0 for t in TYPES}

    @property
    def total_comparisons(self) -> int:
        return sum(self.comparisons.values())


def _int_threshold(op: Op, k: Fraction) -> int:
    """The int T such that an int (or an exact int difference) v satisfies `v op k`
    iff v >= T (`>`, `>=`) or v <= T (`<`, `<=`)."""
    if op is Op.GT:
        return math.floor(k) + 1
    if op is Op.GE:
        return math.ceil(k)
    if op is Op.LT:
        return math.ceil(k) - 1
    return math.floor(k)


def _eq_constant(k: Constant) -> EqConstant:
    """How the operator hashes an `=`/`!=` constant: ints and integral doubles alike
    (Python's `1 == 1.0`), never for a rational no event value can equal."""
    if isinstance(k, bool):
        return ("b", k)
    if isinstance(k, str):
        return ("s", k)
    key = equality_key(k)
    if isinstance(key, int) and -_I64 <= key < _I64:
        return ("i", key)
    if not isinstance(key, (int, float)):  # None: no event value equals it
        return ("never",)
    near = float(key) if abs(key) < 2**1024 else math.inf
    return ("f", near) if near == key else ("never",)
