"""Registration of queries into the shared structures (thesis Figure 3.9).

Each predicate joins the predicate list of its stream(s), column(s), operator family
and factor, creating it if needed; a query owns one bit, and the lists, the per-stream
query masks and the MAXWINDOW table record which queries use what. Removing a query
touches only the lists it used and drops those left empty.
"""

from __future__ import annotations

from typing import Iterable

from juggler.engine.native import WindowTable
from juggler.engine.predicate_lists import (
    EQUALITY,
    AttributeEqualityList,
    AttributeRangeList,
    PairEqualityList,
    PairRangeList,
    PredicateList,
    family,
)
from juggler.language.model import (
    AttributePredicate,
    PredicateKind,
    Query,
)


class SharedPredicates:
    """All predicate lists of the operator, indexed the ways evaluation reads them."""

    def __init__(self) -> None:
        self.lists: dict[tuple, PredicateList] = {}
        self.attribute: dict[str, list] = {}  # stream -> attribute and in-event lists
        self.pairs: dict[frozenset[str], list] = {}  # two streams -> join and window lists
        self.stream_queries: dict[str, int] = {}
        self.windows: dict[int, int] = {}  # MAXWINDOW -> queries
        # the MAXWINDOW values, and per position the queries whose MAXWINDOW is below
        # it: a combination spanning more than window_bounds[i - 1] fails narrower_than[i]
        # (the native filter reads them as `window_table`)
        self.window_bounds: list[int] = []
        self.narrower_than: list[int] = [0]
        self.window_table = WindowTable([], [0])

    # registration -------------------------------------------------------------------

    def add(self, query: Query, bit: int) -> None:
        for stream in query.streams:
            self.stream_queries[stream] = self.stream_queries.get(stream, 0) | bit
        for predicate in query.predicates:
            plist = self._list_for(predicate)
            if isinstance(predicate, AttributePredicate):
                plist.add_predicate(predicate.op, predicate.constant, bit)
            else:
                plist.add_predicate(predicate.op, predicate.offset, bit)
        self.windows[query.window] = self.windows.get(query.window, 0) | bit
        self._rebuild_windows()

    def remove(self, query: Query, bit: int) -> None:
        for stream in query.streams:
            self.stream_queries[stream] &= ~bit
            if not self.stream_queries[stream]:
                del self.stream_queries[stream]
        for predicate in query.predicates:
            key = _list_key(predicate)
            plist = self.lists.get(key)
            if plist is None or not plist.users & bit:
                continue
            plist.remove(bit)
            if not plist.users:
                del self.lists[key]
                plist.home.remove(plist)
        self.windows[query.window] &= ~bit
        if not self.windows[query.window]:
            del self.windows[query.window]
        self._rebuild_windows()

    def _list_for(self, predicate) -> PredicateList:
        key = _list_key(predicate)
        plist = self.lists.get(key)
        if plist is not None:
            return plist
        if isinstance(predicate, AttributePredicate):
            plist = (AttributeEqualityList(predicate.column) if family(predicate.op) == EQUALITY
                     else AttributeRangeList(predicate.column, family(predicate.op)))
        elif family(predicate.op) == EQUALITY:
            plist = PairEqualityList(predicate.left, predicate.right, predicate.factor)
        else:
            plist = PairRangeList(predicate.left, predicate.right, predicate.factor, family(predicate.op))
        plist.kind = predicate.kind
        self.lists[key] = plist
        if isinstance(predicate, AttributePredicate):
            plist.home = self.attribute.setdefault(predicate.column.stream, [])
        elif predicate.kind is PredicateKind.SELF:
            plist.home = self.attribute.setdefault(predicate.left.stream, [])
        else:
            plist.home = self.pairs.setdefault(predicate.streams, [])
        plist.home.append(plist)
        return plist

    def _rebuild_windows(self) -> None:
        self.window_bounds = sorted(self.windows)
        self.narrower_than = [0]
        for w in self.window_bounds:
            self.narrower_than.append(self.narrower_than[-1] | self.windows[w])
        self.window_table = WindowTable(self.window_bounds, self.narrower_than)

    # reading ------------------------------------------------------------------------

    def widest(self, queries: int) -> int:
        """The largest MAXWINDOW among `queries`: how far apart their events may be."""
        for w in reversed(self.window_bounds):
            if self.windows[w] & queries:
                return w
        return 0

    def between(self, a: str, b: str) -> Iterable:
        return self.pairs.get(frozenset((a, b)), ())


def _list_key(predicate) -> tuple:
    if isinstance(predicate, AttributePredicate):
        return ("attribute", predicate.column, family(predicate.op))
    return ("pair", predicate.left, predicate.right, predicate.factor, family(predicate.op))
