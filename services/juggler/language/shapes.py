"""Parsing by shape: a query that differs from one parsed before only in its literals
(numbers and strings) reuses that parse, with the literals and positions put in.

A ward's alert rules are a few shapes with many constants (`... WHERE H.beatrate > c`
for a thousand c), and Lark's parse is most of a compile. `parse` gives exactly what
`parser.parse` gives, errors included, in a fraction of the time when the shape is
known. (`plans.py` goes further for the simplest shapes: no syntax tree at all.)

The shape of a text is the text with its numeric and string literals cut out, and the
kind of each. A scan finds them the way the grammar's lexer would: names are skipped
whole, so a digit in `beat2` is not a number, strings are taken whole, so a digit in
`'a5'` is part of the string, and what is left that matches NUMBER is one. Two texts of
one shape then lex alike but for the literals' own characters: a number starts with a
digit or `.`, which only NUMBER can match in any parser state; it never follows a
name's character directly (the scan would have taken it into the name), so no
keyword's, operator's or unit's boundary looks at it; and it holds no character that
could continue the token before it. A string starts and ends with a quote, which no
other token holds, and its extent is the one STRING's pattern gives. The parser sees
the same token types, so builds the same tree. A shape is kept only when the scan's
literals are exactly the NUMBER and STRING tokens of its first parse, and only from a
parse that succeeded.

Putting another text into the kept `SyntaxQuery`: every span moves by what the literals
before it grew or shrank (spans start and end at token boundaries, so never inside a
literal), line and column are counted again on the new text, and each literal's value
is computed from its new text. A number that is not a valid literal (out of range, a
fractional millisecond) is left to `parser.parse`, which reports it as it always does.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import replace
from functools import cache
from itertools import accumulate
from typing import NamedTuple

from juggler.bounded_cache import BoundedCache

from .parser import (ColumnName, Comparison, Duration, Expr, LiteralError,
                     NumberLit, Product, Signed, Span, StreamName, StringLit, Sum, SyntaxQuery,
                     duration_millis, lark_parser, leaves, number_value, unit_millis, unquote)
from .parser import parse as parse_text

SHAPES = 1024
"""Shapes kept per process (least recently used dropped first). Each holds one parse of its text."""

Regions = list[tuple[int, int]]
NUMBER, STRING = "n", "s"
"""A literal's kind in a shape."""

Shape = tuple[tuple[str, ...], str]
"""The pieces of a text between its literals, and the literals' kinds in order."""


class Scan(NamedTuple):
    """A text's shape, and where its literals are."""

    shape: Shape
    regions: Regions


class _Shape:
    """A parse of one text of the shape, and where that text's literals are."""

    def __init__(self, syntax: SyntaxQuery, regions: Regions) -> None:
        self.syntax = syntax
        self.starts = [start for start, _ in regions]
        self.ends = [end for _, end in regions]


_shapes: BoundedCache[Shape, _Shape | None] = BoundedCache(SHAPES)
"""Shape -> its parse, or None for a shape whose literals are not its tokens."""


def parse(text: str, query_id: str = "?", scanned: Scan | None = None) -> SyntaxQuery:
    """`parser.parse(text, query_id)`, reusing the parse of a text of the same shape;
    `scanned` is `scan(text)` when the caller has it."""
    shape, regions = scanned or scan(text)
    known = _shapes.get(shape)
    if known is not None:
        try:
            return _Moved(known, text, regions).query()
        except LiteralError:
            pass  # parse_text reports it, at its place among the query's other errors
    syntax = parse_text(text, query_id)
    if shape not in _shapes:
        _shapes.put(shape, _Shape(syntax, regions) if tokens_are(syntax, Scan(shape, regions))
                    else None)
    return syntax


@cache
def _pattern() -> re.Pattern[str]:
    """(group 1) a string, a name, or (group 2) a number: the grammar's own terminals."""
    def terminal(name: str) -> str:
        return lark_parser().get_terminal(name).pattern.to_regexp()

    return re.compile(f"({terminal('STRING')})|{terminal('NAME')}|({terminal('NUMBER')})")


def scan(text: str) -> Scan:
    """The text's shape, and where its literals are."""
    pieces: list[str] = []
    kinds: list[str] = []
    regions: Regions = []
    last = 0
    for match in _pattern().finditer(text):
        if match.lastindex:
            start, end = match.span()
            pieces.append(text[last:start])
            kinds.append(STRING if match.lastindex == 1 else NUMBER)
            regions.append((start, end))
            last = end
    pieces.append(text[last:])
    return Scan((tuple(pieces), "".join(kinds)), regions)


def tokens_are(syntax: SyntaxQuery, scanned: Scan) -> bool:
    """Whether the scan's literals are exactly the parse's NUMBER and STRING tokens: its
    number and string literals and its duration's amount."""
    found = [(node.span.start, NUMBER if isinstance(node, NumberLit) else STRING)
             for node in leaves(syntax.window + syntax.where)
             if isinstance(node, (NumberLit, StringLit))]
    if syntax.max_window is not None:
        found.append((syntax.max_window.span.start, NUMBER))
    return sorted(found) == [(start, kind) for (start, _), kind
                             in zip(scanned.regions, scanned.shape[1])]


class _Moved:
    """The kept parse with another text of its shape put in."""

    def __init__(self, shape: _Shape, text: str, regions: Regions) -> None:
        self.shape = shape
        self.text = text
        self.lexemes = {old: text[start:end] for old, (start, end) in zip(shape.starts, regions)}
        self.shift = [0, *accumulate((end - start) - (old_end - old_start)
                                     for (start, end), old_start, old_end
                                     in zip(regions, shape.starts, shape.ends))]
        self.lines = [0, *(m.end() for m in re.finditer("\n", text))] if "\n" in text else None

    def query(self) -> SyntaxQuery:
        old = self.shape.syntax
        text = self.text
        end = len(text.rstrip())
        return SyntaxQuery(
            text=text,
            select=None if old.select is None else tuple(self.column(c) for c in old.select),
            select_span=self.span(old.select_span),
            streams=tuple(StreamName(s.name, self.span(s.span)) for s in old.streams),
            from_span=self.span(old.from_span),
            window=tuple(self.comparison(c) for c in old.window),
            max_window=None if old.max_window is None else self.duration(old.max_window),
            where=tuple(self.comparison(c) for c in old.where),
            end=self.at(end, end),
        )

    def span(self, span: Span) -> Span:
        shift = self.shift
        ends = self.shape.ends
        return self.at(span.start + shift[bisect_right(ends, span.start)],
                       span.end + shift[bisect_right(ends, span.end)])

    def at(self, start: int, end: int) -> Span:
        """The span [start, end) of the new text, with its line and column."""
        if self.lines is None:
            return Span(start, end, 1, start + 1)
        line = bisect_right(self.lines, start)
        return Span(start, end, line, start - self.lines[line - 1] + 1)

    def column(self, column: ColumnName) -> ColumnName:
        return ColumnName(column.ref, self.span(column.span))

    def comparison(self, cmp: Comparison) -> Comparison:
        span = self.span(cmp.span)
        return Comparison(self.expr(cmp.left), cmp.op, self.span(cmp.op_span),
                          self.expr(cmp.right), cmp.clause, span, self.text[span.start:span.end])

    def expr(self, node: Expr) -> Expr:
        if isinstance(node, NumberLit):
            return NumberLit(number_value(self.lexemes[node.span.start]), self.span(node.span))
        if isinstance(node, StringLit):
            return StringLit(unquote(self.lexemes[node.span.start]), self.span(node.span))
        if isinstance(node, ColumnName):
            return self.column(node)
        if isinstance(node, Signed):
            return Signed(node.negative, self.expr(node.operand), self.span(node.span))
        if isinstance(node, Sum):
            return Sum(tuple((op, self.expr(t)) for op, t in node.terms), self.span(node.span))
        if isinstance(node, Product):
            return Product(tuple((op, self.expr(f)) for op, f in node.factors), self.span(node.span))
        return replace(node, span=self.span(node.span))  # a boolean literal

    def duration(self, duration: Duration) -> Duration:
        old = self.shape.syntax.text
        number_end = self.shape.ends[self.shape.starts.index(duration.span.start)]
        unit = unit_millis(old, number_end, duration.span.end)
        return Duration(duration_millis(self.lexemes[duration.span.start], unit),
                        self.span(duration.span))
