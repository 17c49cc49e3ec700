"""Compiling by shape: a text whose shape (`shapes.py`: the text with its number and
string literals cut out) was compiled before is compiled by putting its literals into
that compile's plan, with no syntax tree and no normalizing.

A ward's alert rules are a few shapes with many constants (`... WHERE H.beatrate > c`
for a thousand c). Parsing by shape already reuses the parse; what was left of a
compile was moving the tree onto the new text and normalizing every comparison in
`Fraction` arithmetic, for a result that for such a rule is the column, the operator
and the literal.

A plan is made from a compile that succeeded, and only when every comparison is a
column against one literal (`H.beatrate > 5`, `-5 < H.beatrate`, `B.note = 'a'`,
`U.flag = true`, in parentheses or under signs): what normalizing makes of it is then
the column, the operator (mirrored when the literal is on the left) and the literal's
value (negated under each `-`), whatever the value. Nothing else the compiler decides
depends on the literals: the streams, the columns and their types are the first
compile's (the plans belong to one catalog and limits), a shape has no more comparisons
than `max_predicates`, and the length limit is checked first. Only a literal itself can
fail (a number out of range, a fractional millisecond): that text is compiled in full,
which reports the error where it always does, with its line and column. Two texts of
one shape parse alike but for their literals (`shapes.py` says why), so the plan gives
what a fresh compile gives; a property test holds it to `compile_query`.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

from juggler.bounded_cache import BoundedCache

from .compiler import Limits, check_length, compile_syntax
from .model import AttributePredicate, Catalog, ColumnRef, Constant, Op, Query
from .parser import (BoolLit, ColumnName, Expr, LiteralError, NumberLit, Signed,
                     StringLit, SyntaxQuery, duration_millis, number_value, unit_millis, unquote)
from .shapes import STRING, Regions, Scan, Shape, parse, scan, tokens_are

PLANS = 1024
"""Shapes whose plans a compiler keeps (least recently used dropped first)."""

Place = tuple[int, int]
"""A position as the piece of the shape it is in and the offset into that piece, so it
is found again in any text of the shape."""


class _Comparison(NamedTuple):
    """One comparison's predicate but for its literal, and where the comparison is."""

    column: ColumnRef
    op: Op
    literal: int | None
    """The index of its literal among the text's literals; None for a boolean."""
    negative: bool
    """Whether the signs before a number make it negative."""
    boolean: bool | None
    start: Place
    end: Place


class _Plan(NamedTuple):
    """What every text of a shape compiles to, but for its literals."""

    template: Query
    """The first text's query: its streams and SELECT are every text's."""
    comparisons: tuple[_Comparison, ...]
    """In the order the compiler takes them: by where they start."""
    duration: tuple[int, int] | None
    """The MAXWINDOW amount's literal index and the unit's milliseconds."""
    kinds: str
    """Each literal's kind (`shapes.NUMBER`, `shapes.STRING`)."""

    def query(self, query_id: str, text: str, regions: Regions) -> Query:
        """The query of `text`, of the plan's shape. Raises `LiteralError`."""
        starts = [0, *(end for _, end in regions)]
        predicates = []
        for cmp in self.comparisons:
            value: Constant
            if cmp.literal is None:
                assert cmp.boolean is not None
                value = cmp.boolean
            else:
                start, end = regions[cmp.literal]
                if self.kinds[cmp.literal] == STRING:
                    value = unquote(text[start:end])
                else:
                    value = number_value(text[start:end])
                    value = -value if cmp.negative else value
            source = text[starts[cmp.start[0]] + cmp.start[1]:starts[cmp.end[0]] + cmp.end[1]]
            predicates.append(AttributePredicate(cmp.column, cmp.op, value, source))
        template = self.template
        max_window = template.max_window
        if self.duration is not None:
            literal, unit = self.duration
            start, end = regions[literal]
            max_window = duration_millis(text[start:end], unit)
        return Query(query_id, text, template.streams, template.select,
                     tuple(dict.fromkeys(predicates)) if len(predicates) > 1 else tuple(predicates),
                     max_window)


class QueryCompiler:
    """`compile_query` for one catalog and limits, by plan for a shape it compiled
    before (see the module's docstring)."""

    def __init__(self, catalog: Catalog, limits: Limits = Limits()) -> None:
        self.catalog = catalog
        self.limits = limits
        self._plans: BoundedCache[Shape, _Plan | None] = BoundedCache(PLANS)
        """Shape -> its plan, or None for a shape that has none."""

    def compile(self, query_id: str, text: str) -> Query:
        """`compile_query(query_id, text, catalog, limits)`. Raises `QueryError`."""
        check_length(query_id, text, self.limits)
        scanned = scan(text)
        plan = self._plans.get(scanned.shape)
        if plan is not None:
            try:
                return plan.query(query_id, text, scanned.regions)
            except LiteralError:
                pass  # the full compile reports it, at its place among the query's other errors
        syntax = parse(text, query_id, scanned)
        query = compile_syntax(query_id, syntax, self.catalog, self.limits)
        if scanned.shape not in self._plans:
            self._plans.put(scanned.shape, _plan(syntax, query, scanned, self.limits))
        return query


def _plan(syntax: SyntaxQuery, query: Query, scanned: Scan, limits: Limits) -> _Plan | None:
    """The plan of a compiled text's shape, or None when its comparisons are not all a
    column against a literal."""
    comparisons = sorted(syntax.window + syntax.where, key=lambda c: c.span.start)
    if len(comparisons) > limits.max_predicates or not tokens_are(syntax, scanned):
        return None
    literal_at = {start: i for i, (start, _) in enumerate(scanned.regions)}
    ends = [end for _, end in scanned.regions]

    def place(position: int) -> Place:
        piece = bisect_right(ends, position)
        return piece, position - (ends[piece - 1] if piece else 0)

    planned = []
    for cmp in comparisons:
        if isinstance(cmp.left, ColumnName):
            column, op, side = cmp.left.ref, cmp.op, cmp.right
        elif isinstance(cmp.right, ColumnName):
            column, op, side = cmp.right.ref, cmp.op.mirrored, cmp.left
        else:
            return None
        literal = _literal(side)
        if literal is None:
            return None
        node, negative = literal
        if isinstance(node, BoolLit):
            index, boolean = None, node.value
        else:
            index, boolean = literal_at[node.span.start], None
        planned.append(_Comparison(column, op, index, negative, boolean,
                                   place(cmp.span.start), place(cmp.span.end)))
    duration = None
    if syntax.max_window is not None:
        index = literal_at[syntax.max_window.span.start]
        duration = (index, unit_millis(syntax.text, ends[index], syntax.max_window.span.end))
    return _Plan(query, tuple(planned), duration, scanned.shape[1])


def _literal(node: Expr) -> tuple[NumberLit | StringLit | BoolLit, bool] | None:
    """A literal under any signs (of a compiled query: so only a number has signs), and
    whether they make it negative; None for anything else."""
    negative = False
    while isinstance(node, Signed):
        negative ^= node.negative
        node = node.operand
    if isinstance(node, (NumberLit, StringLit, BoolLit)):
        return node, negative
    return None
