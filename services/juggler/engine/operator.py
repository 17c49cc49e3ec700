"""The Juggler operator: every registered query evaluated over one shared state.

Per incoming event (thesis Figure 3.19): the candidate queries are those over its
stream; the three predicate types are applied in the order the predicate type manager
keeps; the first of join/window retrieves partners through its exploitation structure
(JES value range or WES time range, using the loosest bound of the candidate queries)
and every later phase only filters; each filter is one probe per predicate list that
removes, as a query bitmask, every query the combination fails. A combination that
still has queries when all of a query's streams are bound is a result of those.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from itertools import islice
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from juggler.engine.events import (
    EngineConfig,
    Event,
    LateEvent,
    RegistrationError,
    Result,
)
from juggler.engine.ordering import PredicateTypeManager
from juggler.engine.plan import Check, Plan, PlanNode
from juggler.engine.exact import EXACT_INT
from juggler.engine.predicate_lists import (
    EQUALITY,
    LOWER,
    UPPER,
    AttributeEqualityList,
    AttributeRangeList,
    Bound,
)
from juggler.engine.shared_predicates import SharedPredicates
from juggler.engine.state import Held, KeyState, StreamStore
from juggler.language.model import TIMESTAMP, PredicateKind, Query

_SAMPLED_CANDIDATES = 4  # candidates per sampled partner stream whose filters are measured
_SLACK = 2.0**-40  # relative widening of float JES bounds; the exact filter decides


@dataclass(frozen=True)
class KeySnapshot:
    maxts: int | None
    floor: int | None
    events: list[Event]


@dataclass(frozen=True, slots=True)
class _Output:
    """What emitting a result of one query needs, precomputed at registration."""

    query: Query
    order: int  # registration order, for a deterministic output order
    select: tuple[tuple[str, str, str], ...] | None  # (label, stream, column)


class JugglerEngine:
    """The shared operator. See `QueryEngine` for the contract of each method."""

    def __init__(self, config: EngineConfig = EngineConfig()) -> None:
        self.config = config
        self.shared = SharedPredicates()
        self.plan = Plan(self.shared)
        self.manager = PredicateTypeManager(config.order, config.reorder_every)
        self.keys: dict[str, KeyState] = {}
        self.horizon = config.retention
        self._queries: dict[str, Query] = {}
        self._bits: dict[str, int] = {}
        self._outputs: dict[int, _Output] = {}
        self._free_bits: list[int] = []
        self._registrations = 0
        self._seq = 0
        self._attr_version: dict[str, int] = {}
        self._attr_programs: dict[str, tuple] = {}
        self._labels: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}

    # registration -------------------------------------------------------------------

    @property
    def queries(self) -> dict[str, Query]:
        return dict(self._queries)

    def register(self, query: Query, history: bool = False) -> list[Result]:
        if query.id in self._queries:
            raise RegistrationError(f"query {query.id!r} is already registered")
        index = self._free_bits.pop() if self._free_bits else len(self._outputs)
        bit = 1 << index
        self._queries[query.id] = query
        self._bits[query.id] = index
        select = None if query.select is None else tuple(
            (str(c), c.stream, c.column) for c in query.select)
        self._outputs[index] = _Output(query, self._registrations, select)
        self._registrations += 1
        self.shared.add(query, bit)
        self.plan.add(query, bit)
        self.horizon = max(self.horizon, query.window)
        self._lists_changed(query)
        return self._history(query, bit) if history else []

    def deregister(self, query_id: str) -> None:
        if query_id not in self._queries:
            raise RegistrationError(f"query {query_id!r} is not registered")
        query = self._queries.pop(query_id)
        index = self._bits.pop(query_id)
        self.shared.remove(query, 1 << index)
        self.plan.remove(query, 1 << index)
        del self._outputs[index]
        self._free_bits.append(index)
        self._lists_changed(query)

    def _lists_changed(self, query: Query) -> None:
        """Invalidate what was derived from the lists of the query's streams: compiled
        attribute programs and cached attribute masks (which may hold a reused bit)."""
        for stream in query.streams:
            self._attr_version[stream] = self._attr_version.get(stream, 0) + 1

    def _history(self, query: Query, bit: int) -> list[Result]:
        """PSoup's query-data duality: the new query over the events already held, each
        combination found once, from the event that arrived last."""
        out: list[tuple] = []
        for ks in self.keys.values():
            held = [h for s in query.streams if s in ks.streams
                    for h in ks.streams[s].all() if h.ts >= ks.floor]
            held.sort(key=lambda h: h.seq)
            for h in held:
                self._evaluate(ks, h, bit, out, h.seq)
        return _sorted(out)

    # events -------------------------------------------------------------------------

    def process(self, event: Event) -> list[Result]:
        ks = self.keys.get(event.key)
        if ks is None:
            ks = self.keys[event.key] = KeyState()
        lateness = self.config.allowed_lateness
        if ks.maxts is None or event.ts > ks.maxts:
            ks.maxts = event.ts
        elif event.ts < ks.maxts - lateness:
            raise LateEvent(event, ks.maxts, lateness)
        floor = ks.maxts - self.horizon - lateness
        if ks.floor is None or floor > ks.floor:
            ks.floor = floor
        seq = self._seq
        self._seq = seq + 1
        held = Held(event, seq)
        out: list[tuple] = []
        candidates = self.shared.stream_queries.get(event.stream, 0)
        if candidates:
            self._evaluate(ks, held, candidates, out, None)
        store = ks.streams.get(event.stream)
        if store is None:
            store = ks.store(event.stream, self.config.bucket_ms)
        store.insert(held)
        if ks.purged_to is None or ks.floor - ks.purged_to >= self.config.bucket_ms:
            ks.purge()
        manager = self.manager
        if manager.adaptive and not (seq + 1) % manager.period:
            manager.remeasure()
        return _sorted(out) if out else []

    def snapshot(self, key: str) -> KeySnapshot | None:
        """What must survive a restart for one key: its `maxts`, its floor and its held
        events in arrival order (the Kafka worker keeps this in a changelogged table)."""
        ks = self.keys.get(key)
        if ks is None:
            return None
        held = sorted((h for store in ks.streams.values() for h in store.all() if h.ts >= ks.floor),
                      key=lambda h: h.seq)
        return KeySnapshot(ks.maxts, ks.floor, [h.event for h in held])

    def restore(self, key: str, snapshot: KeySnapshot) -> None:
        """Reinstate a key from `snapshot` without evaluating anything: its events were
        processed, and their results emitted, before the snapshot was taken."""
        ks = self.keys[key] = KeyState()
        ks.maxts, ks.floor = snapshot.maxts, snapshot.floor
        for event in snapshot.events:
            ks.store(event.stream, self.config.bucket_ms).insert(Held(event, self._seq))
            self._seq += 1

    def held_events(self) -> dict[str, int]:
        """Events held in state per stream, over all keys."""
        counts: dict[str, int] = {}
        for ks in self.keys.values():
            for stream, store in ks.streams.items():
                counts[stream] = counts.get(stream, 0) + store.size
        return counts

    # evaluation ---------------------------------------------------------------------

    def _attr_fail(self, held: Held) -> int:
        """Queries failing this event's attribute and in-event predicates (cached).

        The stream's lists are compiled into plain tuples once per registration change,
        so a probe is a dict read, a bisect and an index, with no call per list."""
        stream = held.event.stream
        version = self._attr_version.get(stream, 0)
        if held.attr_version == version:
            return held.attr_fail
        program = self._attr_programs.get(stream)
        if program is None or program[0] != version:
            program = self._attr_programs[stream] = (version, *_compile_attributes(
                self.shared.attribute.get(stream, ())))
        _, lower, upper, equal, other, probes = program
        data = held.data
        fail = 0
        for column, thresholds, fail_at, plist in lower:
            value = data[column]
            if type(value) is int and not -EXACT_INT <= value <= EXACT_INT:
                fail |= plist.failing(value)
            else:
                fail |= fail_at[bisect_right(thresholds, value)]
        for column, thresholds, fail_at, plist in upper:
            value = data[column]
            if type(value) is int and not -EXACT_INT <= value <= EXACT_INT:
                fail |= plist.failing(value)
            else:
                fail |= fail_at[bisect_left(thresholds, value)]
        for column, table, default in equal:
            fail |= table.get(data[column], default)
        for plist in other:
            if plist.kind is PredicateKind.ATTRIBUTE:
                fail |= plist.failing(held.value(plist.column.column))
            else:
                fail |= plist.failing(held.value(plist.left.column), held.value(plist.right.column))
        self.manager.comparisons["A"] += probes
        held.attr_fail = fail
        held.attr_version = version
        return fail

    def _evaluate(self, ks: KeyState, held: Held, candidates: int, out: list,
                  before_seq: int | None) -> None:
        root = self.plan.roots.get(held.event.stream)
        if root is None:
            return
        manager = self.manager
        mask = candidates & root.mask
        sampled = manager.adaptive and not held.seq % manager.sample_every
        if sampled:
            fail = self._attr_fail(held)
            manager.observe("A", 1, 1 if mask & ~fail else 0)
        pending = manager.order[0] != "A"
        if not pending:
            manager.comparisons["A"] += 1
            mask &= ~self._attr_fail(held)
            if not mask:
                return
        ends = mask & root.ends
        if ends:
            if pending:
                ends &= ~self._attr_fail(held)
            if ends:
                self._emit(ends, root.path, [held], out)
        if root.children:
            self._expand(ks, root, [held], mask, pending, out, before_seq, held.ts, held.ts, sampled)

    def _expand(self, ks: KeyState, node: PlanNode, partial: list[Held], mask: int,
                pending: bool, out: list, before_seq: int | None, mints: int, maxts: int,
                sampled: bool = False) -> None:
        order = self.manager.order
        join_first = order.index("J") < order.index("W")
        shared = self.shared
        for child in node.children.values():
            group = mask & child.mask
            if not group:
                continue
            store = ks.streams.get(child.stream)
            if store is None or not store.size:
                continue
            widest = shared.widest(group)
            lo, hi = self._time_range(child, partial, group, max(maxts - widest, ks.floor), mints + widest)
            if sampled:
                self._measure(ks, child, partial, group, store, mints, maxts, lo, hi,
                              self._join_ranges(child, partial, group))
            for survivors_at_start, candidates in self._retrieve(ks, child, partial, group, store,
                                                                   lo, hi, mints, maxts, join_first):
                self._extend(ks, child, partial, survivors_at_start, candidates, pending, out,
                             before_seq, mints, maxts)

    def _extend(self, ks: KeyState, child: PlanNode, partial: list[Held], group: int,
                candidates: list[Held], pending: bool, out: list, before_seq: int | None,
                mints: int, maxts: int) -> None:
        """Run the filter phases, in order, on each retrieved partner of `child`, and
        emit or expand what survives."""
        manager = self.manager
        order = manager.order
        comparisons = manager.comparisons
        for partner in candidates:
            if before_seq is not None and partner.seq >= before_seq:
                continue
            survivors = group
            for phase in order:
                if phase == "A":
                    comparisons["A"] += 1
                    survivors &= ~self._attr_fail(partner)
                    if pending and survivors:
                        comparisons["A"] += 1
                        survivors &= ~self._attr_fail(partial[0])
                elif phase == "J":
                    survivors = self._filter(child.joins, partial, partner, survivors, "J")
                else:
                    survivors = self._window_filter(child, partner, survivors, mints, maxts, partial)
                if not survivors:
                    break
            if not survivors:
                continue
            partial.append(partner)
            ends = survivors & child.ends
            if ends:
                self._emit(ends, child.path, partial, out)
            if child.children:
                pts = partner.ts
                self._expand(ks, child, partial, survivors, False, out, before_seq,
                             mints if mints < pts else pts, maxts if maxts > pts else pts)
            partial.pop()

    def _retrieve(self, ks: KeyState, child: PlanNode, partial: list[Held], group: int,
                  store: StreamStore, lo: int, hi: int, mints: int, maxts: int,
                  join_first: bool) -> Iterator[tuple[int, list[Held]]]:
        """Partners of `child` for the queries in `group`, as (queries, candidates).

        Join first: each join list serves the queries that have a predicate in it, with
        a JES probe over the loosest of their bounds, so a group of queries with
        different joins is not left to a full window scan; queries with no join
        predicate on this stream fall back to the WES. Window first: one WES probe for
        all. A partner found for two disjoint sets of queries is examined once for each."""
        comparisons = self.manager.comparisons
        remaining = group
        if join_first:
            for check in child.joins:
                plist = check.plist
                queries = remaining & plist.users
                if not queries:
                    continue
                bound = plist.bound(queries)
                if bound is None:
                    continue
                ranges = _partner_ranges(plist, check.partner_is_left,
                                         partial[check.other].value(check.other_column), bound)
                if ranges is None:
                    continue
                index = store.index(check.partner_column)
                found = list(_irange_all(index, ranges))
                comparisons["J"] += 1 + len(found)
                yield queries, [h for h in found if lo <= h.ts <= hi]
                remaining &= ~queries
                if not remaining:
                    return
            if remaining != group:
                widest = self.shared.widest(remaining)
                lo, hi = self._time_range(child, partial, remaining, max(maxts - widest, ks.floor),
                                          mints + widest)
        found = list(store.between(lo, hi)) if lo <= hi else []
        comparisons["W"] += 1 + len(found)
        yield remaining, found

    def _measure(self, ks: KeyState, child: PlanNode, partial: list[Held], group: int,
                 store: StreamStore, mints: int, maxts: int, lo: int, hi: int,
                 join: tuple[str, list[tuple[Any, Any]]] | None) -> None:
        """Selectivity of each predicate type for one partner stream, whatever the
        current order: the share of its held events inside the JES value range and
        the WES time range (read from index positions and bucket sizes), and the
        share of a few candidates that pass each filter; each for all candidate
        queries and for those the tuple's attributes leave."""
        manager = self.manager
        pruned = group & ~self._attr_fail(partial[0])
        probes = {"J": _users(child.joins, group), "W": 1 + _users(child.windows, group),
                  "J|A": _users(child.joins, pruned), "W|A": 1 + _users(child.windows, pruned)}
        manager.observe_expansion(store.size, probes)
        manager.observe("Jok", 1, 1 if join is not None else 0)
        self._observe_ranges(store, lo, hi, join, "")
        if pruned == group:
            self._observe_ranges(store, lo, hi, join, "|A", count=False)
        elif pruned:
            widest = self.shared.widest(pruned)
            plo, phi = self._time_range(child, partial, pruned, max(maxts - widest, ks.floor), mints + widest)
            self._observe_ranges(store, plo, phi, self._join_ranges(child, partial, pruned), "|A")
        else:
            manager.observe("W|A", store.size, 0)
            manager.observe("J|A", store.size, 0)
        if lo > hi:
            return
        for partner in islice(store.between(lo, hi), _SAMPLED_CANDIDATES):
            if pruned:
                manager.observe("Ac", 1, 1 if pruned & ~self._attr_fail(partner) else 0)
            for queries, given in ((group, ""), (pruned, "|A")):
                if not queries or (given and queries == group):
                    continue
                joined = 1 if self._filter(child.joins, partial, partner, queries, "J") else 0
                timed = 1 if self._window_filter(child, partner, queries, mints, maxts, partial) else 0
                for name in ((given,) if given else ("", "|A") if pruned == group else ("",)):
                    manager.observe("Jc" + name, 1, joined)
                    manager.observe("Wc" + name, 1, timed)

    def _observe_ranges(self, store: StreamStore, lo: int, hi: int,
                        join: tuple[str, list[tuple[Any, Any]]] | None, given: str,
                        count: bool = True) -> None:
        manager = self.manager
        manager.comparisons["W"] += count
        manager.observe("W" + given, store.size, store.count_between(lo, hi) if lo <= hi else 0)
        if join is None:
            return
        inside = _count_in(store.index(join[0]), join[1])
        manager.comparisons["J"] += count
        manager.observe("J" + given, store.size, inside)

    def _window_filter(self, child: PlanNode, partner: Held, survivors: int, mints: int,
                       maxts: int, partial: list[Held]) -> int:
        pts = partner.ts
        span = (maxts if maxts > pts else pts) - (mints if mints < pts else pts)
        self.manager.comparisons["W"] += 1
        survivors &= ~self.shared.too_narrow(span)
        if survivors and child.windows:
            survivors = self._filter(child.windows, partial, partner, survivors, "W")
        return survivors

    def _filter(self, checks: tuple[Check, ...], partial: list[Held], partner: Held,
                survivors: int, kind: str) -> int:
        probes = 0
        for check in checks:
            plist = check.plist
            if not plist.users & survivors:
                continue
            probes += 1
            mine = partner.value(check.partner_column)
            theirs = partial[check.other].value(check.other_column)
            if check.partner_is_left:
                survivors &= ~plist.failing(mine, theirs)
            else:
                survivors &= ~plist.failing(theirs, mine)
            if not survivors:
                break
        self.manager.comparisons[kind] += probes
        return survivors

    @staticmethod
    def _join_ranges(child: PlanNode, partial: list[Held],
                     group: int) -> tuple[str, list[tuple[Any, Any]]] | None:
        """The JES column and value ranges that the loosest predicate of one join list
        allows, for a list that every query of the group has a predicate in."""
        for check in child.joins:
            plist = check.plist
            if group & ~plist.users:
                continue
            bound = plist.bound(group)
            if bound is None:
                continue
            other = partial[check.other].value(check.other_column)
            ranges = _partner_ranges(plist, check.partner_is_left, other, bound)
            if ranges is not None:
                return check.partner_column, ranges
        return None

    @staticmethod
    def _time_range(child: PlanNode, partial: list[Held], group: int, lo: int, hi: int) -> tuple[int, int]:
        """The MAXWINDOW range narrowed by every window list that all queries of the
        group have a predicate in (the WES probe of the window type)."""
        for check in child.windows:
            plist = check.plist
            if group & ~plist.users or plist.factor != 1:
                continue
            bound = plist.bound(group)
            if bound is None:
                continue
            ranges = _partner_ranges(plist, check.partner_is_left, partial[check.other].ts, bound)
            if ranges is None:
                continue
            low = min(r[0] for r in ranges)
            high = max(r[1] for r in ranges)
            if low > -math.inf:
                lo = max(lo, math.ceil(low))
            if high < math.inf:
                hi = min(hi, math.floor(high))
        return lo, hi

    def _emit(self, queries: int, path: tuple[str, ...], partial: list[Held], out: list) -> None:
        by_stream = dict(zip(path, partial))
        ts = max(h.ts for h in partial) if len(partial) > 1 else partial[0].ts
        key = partial[0].event.key
        while queries:
            low = queries & -queries
            queries ^= low
            output = self._outputs[low.bit_length() - 1]
            query = output.query
            sources = {s: by_stream[s].event.position for s in query.streams}
            if output.select is None:
                row = {}
                for s in query.streams:
                    data = by_stream[s].data
                    row.update(zip(self._star_labels(s, data), data.values()))
            else:
                row = {label: by_stream[s].value(c) for label, s, c in output.select}
            out.append((output.order, tuple(sources.values()), Result(query.id, key, ts, sources, row)))

    def _star_labels(self, stream: str, data: dict[str, Any]) -> tuple[str, ...]:
        """`S.col` for each column of `data`, cached per stream while its columns stay."""
        columns = tuple(data)
        cached = self._labels.get(stream)
        if cached is None or cached[0] != columns:
            cached = self._labels[stream] = (columns, tuple(f"{stream}.{c}" for c in columns))
        return cached[1]


def _compile_attributes(lists) -> tuple[tuple, tuple, tuple, tuple, int]:
    """Split a stream's per-event lists by how `_attr_fail` probes them; lists on `ts`
    and in-event (SELF) lists keep the generic call."""
    lower, upper, equal, other = [], [], [], []
    for plist in lists:
        if isinstance(plist, AttributeRangeList) and plist.column.column != TIMESTAMP:
            target = lower if plist.direction == LOWER else upper
            target.append((plist.column.column, plist.thresholds, plist.fail_at, plist))
        elif isinstance(plist, AttributeEqualityList) and plist.column.column != TIMESTAMP:
            equal.append((plist.column.column, plist.table, plist.default))
        else:
            other.append(plist)
    return tuple(lower), tuple(upper), tuple(equal), tuple(other), len(lists)


def _users(checks: tuple[Check, ...], queries: int) -> int:
    return sum(1 for c in checks if c.plist.users & queries)


def _sorted(out: list[tuple]) -> list[Result]:
    if len(out) > 1:
        out.sort(key=lambda item: (item[0], item[1]))
    return [item[2] for item in out]


def _partner_ranges(plist, partner_is_left: bool, other: Any,
                    bound: Bound) -> list[tuple[Any, Any]] | None:
    """Value ranges of the partner's column allowed by `bound`, widened for rounding.

    The list compares d = left - f*right with constants k. Solving for the partner
    side gives one interval per constant (a point for equality); floats are widened
    by a relative slack so no partner is lost, and the lists' exact filter decides.
    """
    if isinstance(other, (str, bool)):
        return [(other, other)] if bound.family == EQUALITY else None
    factor = plist.float_factor
    direction = bound.family
    if not partner_is_left and factor > 0 and direction != EQUALITY:
        direction = UPPER if direction == LOWER else LOWER  # dividing by f > 0 keeps, moving sides flips
    ranges = []
    for k in bound.floats:
        # partner on the left: left = f*other + k; on the right: right = (other - k) / f
        target = factor * other + k if partner_is_left else (other - k) / factor
        slack = (abs(target) + abs(k) + abs(other)) * _SLACK + 1e-300
        if direction == EQUALITY:
            ranges.append((target - slack, target + slack))
        elif direction == LOWER:
            ranges.append((target - slack, math.inf))
        else:
            ranges.append((-math.inf, target + slack))
    return ranges


def _count_in(index, ranges: Iterable[tuple[Any, Any]]) -> int:
    """Events of a JES inside the ranges, from two bisects per range."""
    return sum(index.bisect_right((high, math.inf)) - index.bisect_left((low,)) for low, high in ranges)


def _irange_all(index, ranges: Iterable[tuple[Any, Any]]) -> Iterator[Held]:
    for low, high in ranges:
        for _, _, held in index.irange((low,), (high, math.inf)):
            yield held
