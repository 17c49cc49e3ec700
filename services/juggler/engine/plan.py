"""The shared join plan: in which order an incoming event meets its partners.

For each stream S there is a tree rooted at S. A query over streams F that S belongs
to follows the path S, then the rest of F in one global order; queries whose streams
share a prefix share the nodes of that prefix, so a partial combination built for one
query is built once for all of them. Each node knows the predicate lists that become
evaluable when its stream joins the streams above it (the checks), and each query
reaches its last stream at exactly one node, which is what makes every result come
out once.
"""

from __future__ import annotations

from dataclasses import dataclass

from juggler.engine.predicate_lists import PairList
from juggler.engine.shared_predicates import SharedPredicates
from juggler.language.model import PredicateKind, Query


@dataclass(frozen=True, slots=True)
class Check:
    """One pair list to evaluate when `partner` is bound: the other side's position in
    the partial combination, and which side of the list the partner is on."""

    plist: PairList
    partner_is_left: bool
    other: int  # index into the partial combination (path order)
    partner_column: str
    other_column: str


class PlanNode:
    __slots__ = ("stream", "path", "mask", "ends", "children", "joins", "windows")

    def __init__(self, path: tuple[str, ...]) -> None:
        self.stream = path[-1]
        self.path = path
        self.mask = 0  # queries whose path passes through here
        self.ends = 0  # queries whose last stream is bound here
        self.children: dict[str, PlanNode] = {}
        self.joins: tuple[Check, ...] = ()
        self.windows: tuple[Check, ...] = ()

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
        return (first, *sorted(s for s in query.streams if s != first))

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
