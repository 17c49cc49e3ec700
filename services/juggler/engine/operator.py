"""The Juggler operator: every registered query evaluated over one shared state.

Per incoming event (thesis Figure 3.19): the candidate queries are those over its
stream; the three predicate types are applied in the order the predicate type manager
keeps; the first of join/window retrieves partners through its exploitation structure
(JES value range or WES time range, using the loosest bound of the candidate queries)
and every later phase only filters; each filter is one probe per predicate list that
removes, as a query bitmask, every query the combination fails. A combination that
still has queries when all of a query's streams are bound is a result of those.

With three streams, every partial combination of the tuple expands into the third
stream; a JES probe against the tuple itself (not the partner bound second) is the
same for all of them, so it is made once per tuple, with its partners' own attribute
predicates and the probed list applied, and kept sorted by time (`_root_probe`).
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
    KeySnapshot,
    LateEvent,
    RegistrationError,
    Result,
)
from juggler.engine.ordering import PredicateTypeManager
from juggler.engine.plan import Check, GroupPlan, Plan, PlanNode, Scan
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
from juggler.engine.state import Held, KeyState, StreamStore, ValueIndex
from juggler.language.model import TIMESTAMP, PredicateKind, Query

_SAMPLED_CANDIDATES = 4  # candidates per sampled partner stream whose filters are measured
_SLACK = 2.0**-40  # relative widening of float JES bounds; the exact filter decides


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
        # JES probes against the tuple under evaluation, by (check, queries): see _root_probe
        self._root_probes: dict[tuple[int, int], tuple[list[int], list[Held]] | None] = {}

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
        self._root_probes.clear()
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
            plan = child.for_group(group, shared)
            widest = plan.widest
            lo, hi = _time_range(plan, partial, max(maxts - widest, ks.floor), mints + widest)
            if sampled:
                self._measure(ks, child, plan, partial, store, mints, maxts, lo, hi)
            for queries, candidates, low, high in self._retrieve(ks, child, plan, partial, store,
                                                                  lo, hi, mints, maxts, join_first):
                self._extend(ks, child, plan, partial, queries, candidates, low, high, pending, out,
                             before_seq, mints, maxts)

    def _extend(self, ks: KeyState, child: PlanNode, plan: GroupPlan, partial: list[Held],
                group: int, candidates: list[Held], lo: int, hi: int, pending: bool, out: list,
                before_seq: int | None, mints: int, maxts: int) -> None:
        """Run the filter phases, in order, on each retrieved partner of `child` with
        lo <= ts <= hi (in one native call for all of them,
        `juggler_native.CandidateFilter`), and emit or expand what survives."""
        kept, a, j, w = plan.filter.survivors(
            candidates, lo, hi, group, self.manager.order, partial, pending, before_seq, mints,
            maxts, self._attr_version.get(child.stream, 0), self._attr_fail)
        comparisons = self.manager.comparisons
        comparisons["A"] += a
        comparisons["J"] += j
        comparisons["W"] += w
        for partner, survivors in kept:
            partial.append(partner)
            ends = survivors & child.ends
            if ends:
                self._emit(ends, child.path, partial, out)
            if child.children:
                pts = partner.ts
                self._expand(ks, child, partial, survivors, False, out, before_seq,
                             mints if mints < pts else pts, maxts if maxts > pts else pts)
            partial.pop()

    def _retrieve(self, ks: KeyState, child: PlanNode, plan: GroupPlan, partial: list[Held],
                  store: StreamStore, lo: int, hi: int, mints: int, maxts: int,
                  join_first: bool) -> Iterator[tuple[int, list[Held], int, int]]:
        """Partners of `child` for the queries of `plan`, as (queries, candidates, lo,
        hi): those of the candidates with lo <= ts <= hi are the partners (the filter
        drops the others as it goes, rather than a list being built without them).

        Join first: each join list serves the queries that have a predicate in it, with
        a JES probe over the loosest of their bounds, so a group of queries with
        different joins is not left to a full window scan (an attribute list of the
        partner's stream that all of them use serves instead when its value range
        holds fewer events; a probe against the tuple itself is shared, see
        `_root_probe`); queries with no join predicate on this stream are served by
        such an attribute list when its range holds fewer events than the time range,
        and the rest by the WES. Window first: one WES probe for all. A partner found
        for two disjoint sets of queries is examined once for each."""
        comparisons = self.manager.comparisons
        group = remaining = plan.group
        if join_first and (plan.probes or plan.scans):
            shared_root = len(partial) > 1
            for check, queries, bound, covering in plan.probes:
                if shared_root and not check.other:
                    probe = self._root_probe(check, queries, bound, partial[0], store)
                    if probe is None:
                        continue
                    times, kept = probe
                    comparisons["J"] += 1
                    yield queries, kept[bisect_left(times, lo):bisect_right(times, hi)], lo, hi
                    remaining &= ~queries
                    continue
                ranges = _partner_ranges(check.plist, check.partner_is_left,
                                         partial[check.other].value(check.other_column), bound)
                if ranges is None:
                    continue  # a string or boolean met a range list: the WES serves these
                span = _probe_span(store, check, ranges, covering)
                found = (span[0].helds[span[1]:span[2]] if span is not None
                         else _in_ranges(store.index(check.partner_column), ranges))
                comparisons["J"] += 1 + len(found)
                yield queries, found, lo, hi
                remaining &= ~queries
            for queries, index, first, last in _scans(store, plan, lo, hi):
                found = index.helds[first:last]
                comparisons["A"] += 1 + len(found)
                yield queries, found, lo, hi
                remaining &= ~queries
            if not remaining:
                return
            if remaining != group:
                rest = child.for_group(remaining, self.shared)
                lo, hi = _time_range(rest, partial, max(maxts - rest.widest, ks.floor),
                                     mints + rest.widest)
        found = list(store.between(lo, hi)) if lo <= hi else []
        comparisons["W"] += 1 + len(found)
        yield remaining, found, lo, hi

    def _root_probe(self, check: Check, queries: int, bound: Bound, root: Held,
                    store: StreamStore) -> tuple[list[int], list[Held]] | None:
        """A JES probe against the tuple being evaluated (the root of the partial
        combination), made once per tuple and reused by every partial combination
        below it: the partners that pass the probed list and their own attribute
        predicates for some of `queries`, in timestamp order (with their timestamps,
        so each combination takes its time range by bisection). None when the probe
        cannot be made (the WES serves those queries)."""
        key = (id(check), queries)
        probe = self._root_probes.get(key, False)
        if probe is not False:
            return probe
        theirs = root.value(check.other_column)
        ranges = _partner_ranges(check.plist, check.partner_is_left, theirs, bound)
        if ranges is None:
            probe = None
        else:
            failing = check.plist.failing
            column = check.partner_column
            kept = []
            visited = 0
            for held in _in_ranges(store.index(column), ranges):
                visited += 1
                if not queries & ~self._attr_fail(held):
                    continue
                mine = held.value(column)
                fail = failing(mine, theirs) if check.partner_is_left else failing(theirs, mine)
                if queries & ~fail:
                    kept.append(held)
            self.manager.comparisons["J"] += visited
            kept.sort(key=_held_ts)
            probe = ([h.ts for h in kept], kept)
        self._root_probes[key] = probe
        return probe

    def _measure(self, ks: KeyState, child: PlanNode, plan: GroupPlan, partial: list[Held],
                 store: StreamStore, mints: int, maxts: int, lo: int, hi: int) -> None:
        """Selectivity of each predicate type for one partner stream, whatever the
        current order: the share of its held events that join-first retrieval visits
        (its JES probes, read from index positions) and that the WES time range holds
        (read from bucket sizes), and the share of a few candidates that pass each
        filter; each for all candidate queries and for those the tuple's attributes
        leave."""
        manager = self.manager
        group = plan.group
        pruned = group & ~self._attr_fail(partial[0])
        pruned_plan = child.for_group(pruned, self.shared) if pruned else None
        probes = {"J": len(plan.joins), "W": 1 + len(plan.windows),
                  "J|A": len(pruned_plan.joins) if pruned_plan else 0,
                  "W|A": 1 + (len(pruned_plan.windows) if pruned_plan else 0)}
        self._measure_join_candidates(child, plan, pruned, partial, store, mints, maxts, probes)
        manager.observe_expansion(store.size, probes)
        joined = self._join_volume(ks, child, plan, partial, store, mints, maxts, lo, hi)
        manager.observe("Jok", 1, 1 if joined is not None else 0)
        self._observe_ranges(store, lo, hi, joined, "")
        if pruned == group:
            self._observe_ranges(store, lo, hi, joined, "|A", count=False)
        elif pruned_plan is not None:
            widest = pruned_plan.widest
            plo, phi = _time_range(pruned_plan, partial, max(maxts - widest, ks.floor), mints + widest)
            self._observe_ranges(store, plo, phi, self._join_volume(
                ks, child, pruned_plan, partial, store, mints, maxts, plo, phi), "|A")
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
                joined = 1 if self._passes(plan, "J", partial, partner, queries, mints, maxts) else 0
                timed = 1 if self._passes(plan, "W", partial, partner, queries, mints, maxts) else 0
                for name in ((given,) if given else ("", "|A") if pruned == group else ("",)):
                    manager.observe("Jc" + name, 1, joined)
                    manager.observe("Wc" + name, 1, timed)

    def _measure_join_candidates(self, child: PlanNode, plan: GroupPlan, pruned: int,
                                 partial: list[Held], store: StreamStore, mints: int,
                                 maxts: int, probes: dict[str, float]) -> None:
        """What filtering a partner that join-first retrieval found costs: each JES
        probe serves only its own queries, so its partners pass the filters (and
        probe the lists) of those queries, not the whole group's. A few partners
        spread over where each probe finds them (its first value range, or the
        attribute scan serving instead) are filtered for its queries (and for those
        the tuple's attributes leave); the lists probed per partner are averaged over
        the probes, weighted by how many partners each one finds."""
        manager = self.manager
        weights = {"": 0, "|A": 0}
        lists = {"Jj": 0, "Wj": 0, "Jj|A": 0, "Wj|A": 0}
        for check, queries, bound, covering in plan.probes:
            ranges = _partner_ranges(check.plist, check.partner_is_left,
                                     partial[check.other].value(check.other_column), bound)
            if ranges is None:
                continue
            index, first, last = _probe_span(store, check, ranges[:1], covering)
            found = last - first
            picks = [index.helds[first + found * k // (_SAMPLED_CANDIDATES + 1)]
                     for k in range(1, _SAMPLED_CANDIDATES + 1)] if found else []
            kept = queries & pruned
            for given, served in (("", queries), ("|A", kept)):
                if not served or (given and served == queries):
                    continue
                mine = child.for_group(served, self.shared)
                names = (given,) if given or kept != queries else ("", "|A")
                for name in names:
                    weights[name] += found
                    lists["Jj" + name] += found * len(mine.joins)
                    lists["Wj" + name] += found * (1 + len(mine.windows))
                for partner in picks:
                    passed = (1 if served & ~self._attr_fail(partner) else 0,
                              1 if self._passes(mine, "J", partial, partner, served, mints, maxts) else 0,
                              1 if self._passes(mine, "W", partial, partner, served, mints, maxts) else 0)
                    for name in names:
                        for kind, ok in zip(("Aj", "Jj", "Wj"), passed):
                            manager.observe(kind + name, 1, ok)
        for kind, total in lists.items():
            weight = weights[kind[2:]]
            probes[kind] = total / weight if weight else probes[kind[0] + kind[2:]]

    def _join_volume(self, ks: KeyState, child: PlanNode, plan: GroupPlan, partial: list[Held],
                     store: StreamStore, mints: int, maxts: int, lo: int, hi: int) -> int | None:
        """How many held events join-first retrieval would visit for `plan`'s queries:
        those inside each JES probe's and attribute scan's value ranges, plus the WES
        time range of the queries left; None when no such probe can be made."""
        visited = 0
        remaining = plan.group
        for check, queries, bound, covering in plan.probes:
            ranges = _partner_ranges(check.plist, check.partner_is_left,
                                     partial[check.other].value(check.other_column), bound)
            if ranges is None:
                continue
            span = _probe_span(store, check, ranges, covering)
            visited += (span[2] - span[1] if span is not None
                        else _count_in(store.index(check.partner_column), ranges))
            remaining &= ~queries
        for queries, _, first, last in _scans(store, plan, lo, hi):
            visited += last - first
            remaining &= ~queries
        if remaining == plan.group:
            return None
        if remaining:
            rest = child.for_group(remaining, self.shared)
            lo, hi = _time_range(rest, partial, max(maxts - rest.widest, ks.floor), mints + rest.widest)
            visited += store.count_between(lo, hi) if lo <= hi else 0
        return visited

    def _observe_ranges(self, store: StreamStore, lo: int, hi: int, joined: int | None,
                        given: str, count: bool = True) -> None:
        manager = self.manager
        manager.comparisons["W"] += count
        manager.observe("W" + given, store.size, store.count_between(lo, hi) if lo <= hi else 0)
        if joined is None:
            return
        manager.comparisons["J"] += count
        manager.observe("J" + given, store.size, joined)

    def _passes(self, plan: GroupPlan, phase: str, partial: list[Held], partner: Held,
                queries: int, mints: int, maxts: int) -> int:
        """The queries of `queries` that `partner` leaves after one filter phase, "J"
        (the join lists) or "W" (MAXWINDOW and the window lists), counted as the
        phase counts its comparisons."""
        kept, _, j, w = plan.filter.survivors([partner], None, None, queries, phase, partial, False,
                                              None, mints, maxts, 0, self._attr_fail)
        comparisons = self.manager.comparisons
        comparisons["J"] += j
        comparisons["W"] += w
        return kept[0][1] if kept else 0

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


def _time_range(plan: GroupPlan, partial: list[Held], lo: int, hi: int) -> tuple[int, int]:
    """The MAXWINDOW range narrowed by every window list that all queries of the
    group have a predicate in (the WES probe of the window type)."""
    for check, bound in plan.narrowing:
        ranges = _partner_ranges(check.plist, check.partner_is_left, partial[check.other].ts, bound)
        if ranges is None:
            continue
        low = min(r[0] for r in ranges)
        high = max(r[1] for r in ranges)
        if low > -math.inf:
            lo = max(lo, math.ceil(low))
        if high < math.inf:
            hi = min(hi, math.floor(high))
    return lo, hi


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


def _count_in(index: ValueIndex, ranges: Iterable[tuple[Any, Any]]) -> int:
    """Events of a JES inside the ranges, from two bisects per range."""
    return sum(last - first for first, last in (index.span(low, high) for low, high in ranges))


def _scans(store: StreamStore, plan: GroupPlan, lo: int,
           hi: int) -> Iterator[tuple[int, ValueIndex, int, int]]:
    """The attribute scans of `plan` worth making: (queries, index, first, last) for
    each whose value range holds fewer events than the WES range [lo, hi]."""
    if not plan.scans:
        return
    in_window = store.count_between(lo, hi) if lo <= hi else 0
    for (column, low, high), queries in plan.scans:
        index = store.index(column)
        first, last = index.span(low, high)
        if last - first < in_window:
            yield queries, index, first, last


def _probe_span(store: StreamStore, check: Check, ranges: list[tuple[Any, Any]],
                covering: tuple[Scan, ...]) -> tuple[ValueIndex, int, int] | None:
    """Where a JES probe with one value range finds its queries' partners: its own
    span, or that of an attribute scan holding all of them in fewer events (the
    most selective list serves); None for several ranges (equality constants)."""
    if len(ranges) != 1:
        return None
    index = store.index(check.partner_column)
    first, last = index.span(*ranges[0])
    for column, low, high in covering:
        scan = store.index(column)
        begin, end = scan.span(low, high)
        if end - begin < last - first:
            index, first, last = scan, begin, end
    return index, first, last


def _held_ts(held: Held) -> int:
    return held.ts


def _in_ranges(index: ValueIndex, ranges: list[tuple[Any, Any]]) -> list[Held]:
    """The events of a JES inside the ranges, each once (the widened ranges of two
    nearly equal constants can overlap)."""
    if len(ranges) == 1:
        first, last = index.span(*ranges[0])
        return index.helds[first:last]
    found: dict[Held, None] = {}
    for low, high in ranges:
        first, last = index.span(low, high)
        found.update(dict.fromkeys(index.helds[first:last]))
    return list(found)
