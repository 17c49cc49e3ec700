"""The shared join plan: in which order an incoming event meets its partners.

For each stream S there is a tree rooted at S. A query over streams F that S belongs
to follows the path S, then the rest of F, each next the stream its own predicates
filter most once bound (so a partner is reached through a join rather than through
MAXWINDOW alone); queries whose paths share a prefix share the nodes of that prefix,
so a partial combination built for one query is built once for all of them. Each node
knows the predicate lists that become evaluable when its stream joins the streams
above it (the checks), and each query reaches its last stream at exactly one node,
which is what makes every result come out once. What a node needs for one set of
candidate queries (the lists they use, the JES probes that serve them) is derived
once per set and cached until the next registration change.
"""

from __future__ import annotations

from dataclasses import dataclass

from juggler.engine.native import CandidateFilter, candidate_filter
from juggler.engine.predicate_lists import AttributeRangeList, Bound, PairList
from juggler.engine.shared_predicates import SharedPredicates
from juggler.language.model import TIMESTAMP, PredicateKind, Query


@dataclass(frozen=True, slots=True)
class Check:
    """One pair list to evaluate when `partner` is bound: the other side's position in
    the partial combination, and which side of the list the partner is on."""

    plist: PairList
    partner_is_left: bool
    other: int  # index into the partial combination (path order)
    partner_column: str
    other_column: str


Scan = tuple[str, float, float]
"""A value-index range that holds every partner satisfying some attribute predicates:
(column, low, high)."""


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """What evaluating one node for one set of candidate queries needs, derived once
    per (node, group) instead of per partial combination: the lists some query of the
    group uses (the filter phases skip the others without looking), the JES probes of
    join-first retrieval with their loosest bounds, the value-index scans by attribute
    list (for the queries no join list serves, or instead of a probe when narrower),
    and the WES window narrowing, and the filter phases over those lists, native."""

    group: int  # the candidate queries
    joins: tuple[Check, ...]  # join checks with a user in the group
    windows: tuple[Check, ...]  # window checks with a user in the group
    probes: tuple[tuple[Check, int, Bound, tuple[Scan, ...]], ...]
    # (join list, queries it serves, their bound, attribute scans that serve them all)
    scans: tuple[tuple[Scan, int], ...]  # (scan, queries) for those no join list serves
    widest: int  # largest MAXWINDOW of the group
    narrowing: tuple[tuple[Check, Bound], ...]  # factor-1 window lists every query uses
    filter: CandidateFilter  # the A, J and W phases over `joins` and `windows`


_PLANS_KEPT = 4096  # groups remembered per node; beyond that the cache starts over


class PlanNode:
    __slots__ = ("stream", "path", "mask", "ends", "children", "joins", "windows", "plans")

    def __init__(self, path: tuple[str, ...]) -> None:
        self.stream = path[-1]
        self.path = path
        self.mask = 0  # queries whose path passes through here
        self.ends = 0  # queries whose last stream is bound here
        self.children: dict[str, PlanNode] = {}
        self.joins: tuple[Check, ...] = ()
        self.windows: tuple[Check, ...] = ()
        self.plans: dict[int, GroupPlan] = {}

    def for_group(self, group: int, shared: SharedPredicates) -> GroupPlan:
        """The `GroupPlan` of `group` (a subset of `mask`), cached until the next
        registration change."""
        plan = self.plans.get(group)
        if plan is None:
            if len(self.plans) >= _PLANS_KEPT:
                self.plans.clear()
            plan = self.plans[group] = self._plan(group, shared)
        return plan

    def _plan(self, group: int, shared: SharedPredicates) -> GroupPlan:
        joins = tuple(c for c in self.joins if c.plist.users & group)
        ranged = [plist for plist in shared.attribute.get(self.stream, ())
                  if isinstance(plist, AttributeRangeList) and plist.column.column != TIMESTAMP]
        probes = []
        rest = group
        for check in joins:
            queries = rest & check.plist.users
            if not queries:
                continue
            bound = check.plist.bound(queries)
            if bound is None:
                continue
            covering = tuple((p.column.column, *p.loosest(queries)) for p in ranged
                             if not queries & ~p.users)
            probes.append((check, queries, bound, covering))
            rest &= ~queries
        scans = []
        for plist in ranged:
            queries = rest & plist.users
            if queries:
                scans.append(((plist.column.column, *plist.loosest(queries)), queries))
                rest &= ~queries
        narrowing = []
        for check in self.windows:
            plist = check.plist
            if group & ~plist.users or plist.factor != 1:
                continue
            bound = plist.bound(group)
            if bound is not None:
                narrowing.append((check, bound))
        windows = tuple(c for c in self.windows if c.plist.users & group)
        return GroupPlan(group, joins, windows, tuple(probes), tuple(scans), shared.widest(group),
                         tuple(narrowing), candidate_filter(joins, windows, shared.window_table))

    def refresh_checks(self, shared: SharedPredicates) -> None:
        joins: list[Check] = []
        windows: list[Check] = []
        for depth, other in enumerate(self.path[:-1]):
            for plist in shared.between(self.stream, other):
                if not plist.users & self.mask:
                    continue
                partner_is_left = plist.left.stream == self.stream
                mine, theirs = (plist.left, plist.right) if partner_is_left else (plist.right, plist.left)
                check = Check(plist, partner_is_left, depth, mine.column, theirs.column)
                (windows if plist.kind is PredicateKind.WINDOW else joins).append(check)
        self.joins, self.windows = tuple(joins), tuple(windows)


class Plan:
    """The trees of all streams, updated one query at a time."""

    def __init__(self, shared: SharedPredicates) -> None:
        self.shared = shared
        self.roots: dict[str, PlanNode] = {}

    @staticmethod
    def path(query: Query, first: str) -> tuple[str, ...]:
        """`first`, then the query's other streams, each time the one that the most
        predicates filter once it is bound (its attribute and in-event predicates and
        its joins towards the streams already bound; then window predicates), ties by
        name: every partial combination that survives is expanded again below, so
        the stream that filters hardest goes first."""
        path = [first]
        rest = sorted(s for s in query.streams if s != first)
        while rest:
            bound = set(path)
            best = max(rest, key=lambda s: (*_filters(query, s, bound), -rest.index(s)))
            path.append(best)
            rest.remove(best)
        return tuple(path)

    def add(self, query: Query, bit: int) -> None:
        for first in query.streams:
            path = self.path(query, first)
            node = self.roots.get(first)
            if node is None:
                node = self.roots[first] = PlanNode(path[:1])
            for depth in range(len(path)):
                if depth:
                    child = node.children.get(path[depth])
                    if child is None:
                        child = node.children[path[depth]] = PlanNode(path[: depth + 1])
                    node = child
                node.mask |= bit
                node.refresh_checks(self.shared)
            node.ends |= bit
        self._forget_plans()

    def remove(self, query: Query, bit: int) -> None:
        for first in query.streams:
            path = self.path(query, first)
            nodes = [self.roots[first]]
            for stream in path[1:]:
                nodes.append(nodes[-1].children[stream])
            for node in nodes:
                node.mask &= ~bit
                node.ends &= ~bit
                node.refresh_checks(self.shared)
            for parent, node in reversed(list(zip(nodes, nodes[1:]))):
                if not node.mask:
                    del parent.children[node.stream]
            if not nodes[0].mask:
                del self.roots[first]
        self._forget_plans()

    def _forget_plans(self) -> None:
        """Drop every node's group plans: a registration change can move a list's
        bounds or a MAXWINDOW that a plan of a node off the query's paths relied on."""
        stack = list(self.roots.values())
        while stack:
            node = stack.pop()
            node.plans.clear()
            stack.extend(node.children.values())


def _filters(query: Query, stream: str, bound: set[str]) -> tuple[int, int]:
    """How many of `query`'s predicates apply once `stream` joins the `bound` ones:
    (value predicates, window predicates)."""
    values = windows = 0
    for predicate in query.predicates:
        streams = predicate.streams
        if stream in streams and streams <= bound | {stream}:
            if predicate.kind is PredicateKind.WINDOW:
                windows += 1
            else:
                values += 1
    return values, windows
