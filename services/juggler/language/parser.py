"""Query text -> syntax tree, with errors a user can act on.

Lark (LALR, contextual lexer, `grammar.lark`) does the parsing. This module turns Lark's
tree into small typed nodes that keep their source positions, and turns Lark's
`UnexpectedInput` into a `QueryError` naming the clause, line, column, what was expected
and what was found. The expected list comes from the parser's *actual* next-token set
(`InteractiveParser.accepts()`), not the LALR table's looser one, so messages do not
offer tokens that could never be accepted.

Two thesis typos get their own wording because a generic "expected ..." list would not
say what is wrong: a comparison where `and` should join two comparisons (Figure 3.3
query 2) and a conjunction that ends with `and` (75%-overlap query 1).

Nothing here knows about streams or types; `normalize.py` and `compiler.py` check those.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Iterable, Iterator, Union

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput, UnexpectedToken

from .errors import QueryError, position, quote
from .model import MAX_CONSTANT_BITS, MAX_WINDOW_MILLIS, ColumnRef, Op

GRAMMAR_FILE = Path(__file__).with_name("grammar.lark")

MAX_NESTING = 64
"""Deepest allowed nesting of parentheses and unary signs. The tree walkers recurse, so
an unbounded `((((...` within the length limit must be a QueryError, not a RecursionError."""

# --------------------------------------------------------------------------- syntax tree


@dataclass(frozen=True)
class Span:
    """Where a node is in the query text: offsets [start, end) and 1-based line/column of start."""

    start: int
    end: int
    line: int
    column: int


@dataclass(frozen=True)
class NumberLit:
    """A numeric literal, already the exact value semantics section 2 assigns to its text."""

    value: Fraction
    span: Span


@dataclass(frozen=True)
class StringLit:
    value: str
    span: Span


@dataclass(frozen=True)
class BoolLit:
    value: bool
    span: Span


@dataclass(frozen=True)
class ColumnName:
    """`S.col` as written; whether it exists is checked later against the catalog."""

    ref: ColumnRef
    span: Span


@dataclass(frozen=True)
class Signed:
    """Unary `-x` (negative=True) or `+x`."""

    negative: bool
    operand: "Expr"
    span: Span


@dataclass(frozen=True)
class Sum:
    """`t0 ± t1 ± ...`, kept flat so long chains do not make deep trees. terms[0][0] is '+'."""

    terms: tuple[tuple[str, "Expr"], ...]
    span: Span


@dataclass(frozen=True)
class Product:
    """`f0 */ f1 */ ...`, kept flat. factors[0][0] is '*'."""

    factors: tuple[tuple[str, "Expr"], ...]
    span: Span


Expr = Union[NumberLit, StringLit, BoolLit, ColumnName, Signed, Sum, Product]


@dataclass(frozen=True)
class Comparison:
    """`left op right` with the operator spelling already folded to `Op`."""

    left: Expr
    op: Op
    op_span: Span
    right: Expr
    clause: str  # "WINDOW" or "WHERE": where it was written (for error messages only)
    span: Span
    text: str  # the comparison exactly as written


@dataclass(frozen=True)
class StreamName:
    """One FROM item as written (may be a concatenation like `BH`, resolved by the compiler)."""

    name: str
    span: Span


@dataclass(frozen=True)
class Duration:
    millis: int
    span: Span


@dataclass(frozen=True)
class SyntaxQuery:
    """The parsed query, before any catalog check. Absent WINDOW/WHERE give empty tuples."""

    text: str
    select: tuple[ColumnName, ...] | None  # None for SELECT *
    select_span: Span
    streams: tuple[StreamName, ...]
    from_span: Span
    window: tuple[Comparison, ...]
    max_window: Duration | None
    where: tuple[Comparison, ...]
    end: Span  # just after the last token: where "found end of query" points


def leaves(comparisons: Iterable[Comparison]) -> Iterator[Expr]:
    """Every literal and column written in the comparisons, at any depth."""
    stack: list[Expr] = [side for cmp in comparisons for side in (cmp.left, cmp.right)]
    while stack:
        node = stack.pop()
        if isinstance(node, Signed):
            stack.append(node.operand)
        elif isinstance(node, Sum):
            stack.extend(term for _, term in node.terms)
        elif isinstance(node, Product):
            stack.extend(factor for _, factor in node.factors)
        else:
            yield node


# --------------------------------------------------------------------------- parsing


@cache
def lark_parser() -> Lark:
    """The Lark parser, built once per process: building the LALR tables costs far more
    than parsing a query (docs/worker.md, "Commands: barriers, ACCEPTED, LIVE")."""
    return Lark(
        GRAMMAR_FILE.read_text(encoding="utf-8"),
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=False,
    )


def parse(text: str, query_id: str = "?") -> SyntaxQuery:
    """Parse query text into a `SyntaxQuery`, or raise `QueryError`."""
    try:
        tree = lark_parser().parse(text)
    except UnexpectedInput as err:
        raise _syntax_error(err, text, query_id) from None
    return _Builder(text, query_id).query(tree)


# --------------------------------------------------------------------------- tree -> nodes

_OPS: dict[str, Op] = {
    "=": Op.EQ, "==": Op.EQ, "eq": Op.EQ,
    "!=": Op.NE, "<>": Op.NE, "ne": Op.NE,
    "<": Op.LT, "lt": Op.LT,
    "<=": Op.LE, "lt=": Op.LE, "le": Op.LE,
    ">": Op.GT, "gt": Op.GT,
    ">=": Op.GE, "gt=": Op.GE, "ge": Op.GE,
}

_UNIT_MILLIS: dict[str, int] = {}
for _names, _ms in (
    (("ms", "msec", "msecs", "millis", "millisecond", "milliseconds"), 1),
    (("s", "sec", "secs", "second", "seconds"), 1000),
    (("min", "mins", "minute", "minutes"), 60_000),
    (("h", "hr", "hrs", "hour", "hours"), 3_600_000),
):
    _UNIT_MILLIS.update(dict.fromkeys(_names, _ms))


def unit_millis(text: str, number_end: int, end: int) -> int:
    """Milliseconds per unit of a MAXWINDOW amount whose number ends at `number_end` of
    `text` and whose unit ends at `end`."""
    return _UNIT_MILLIS[text[number_end:end].strip().lower()]


_CLAUSE_OF_RULE = {
    "select_clause": "SELECT",
    "from_clause": "FROM",
    "window_clause": "WINDOW",
    "maxwindow_clause": "MAXWINDOW",
    "where_clause": "WHERE",
}


def _token_span(tok: Token) -> Span:
    # lark types a token's position as optional (one made by hand has none); the
    # parser's tokens have all four
    return Span(tok.start_pos or 0, tok.end_pos or 0, tok.line or 1, tok.column or 1)


def _token(node: Tree | Token) -> Token:
    """A child that the grammar makes a terminal (lark types every child as either)."""
    assert isinstance(node, Token), f"the grammar gives a token here, not {node!r}"
    return node


def _tree_span(tree: Tree) -> Span:
    m = tree.meta
    return Span(m.start_pos, m.end_pos, m.line, m.column)


class LiteralError(ValueError):
    """A numeric literal the language cannot represent; the caller adds the position.

    `expected` and `hint` are the words for the `QueryError`.
    """

    def __init__(self, expected: str, hint: str = "") -> None:
        super().__init__(expected)
        self.expected = expected
        self.hint = hint


@dataclass(frozen=True)
class ScaledDigits:
    """A numeric literal as `int(digits) * 10**exponent`, read without computing either.

    `digits` has no leading or trailing zeros ("" for zero), so the magnitude is known
    from lengths alone: a non-zero value lies in [10**(top - 1), 10**top). That is what
    lets `1e99999999` be rejected at once instead of building a 100-million-digit int.
    """

    digits: str
    exponent: int

    @property
    def top(self) -> int:
        return len(self.digits) + self.exponent


def scaled_digits(literal: str) -> ScaledDigits:
    """Split a NUMBER token (`12.50e-3`) into significant digits and a power of ten."""
    mantissa, _, exponent_text = literal.lower().partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    significant = digits.rstrip("0")
    trailing_zeros = len(digits) - len(significant)
    return ScaledDigits(significant, _exponent(exponent_text) - len(fraction) + trailing_zeros)


def _exponent(text: str) -> int:
    """The value of an exponent's text, clamped to +-10**18.

    Beyond that every literal is equally out of range, and `int()` of a long digit
    string is slow (and refused past 4,300 digits).
    """
    negative = text.startswith("-")
    digits = text.lstrip("+-").lstrip("0") or "0"
    value = 10**18 if len(digits) > 18 else int(digits)
    return -value if negative else value


def number_value(literal: str) -> Fraction:
    """The exact value of a numeric literal (semantics section 2), or `LiteralError`.

    Integer literals are exact integers below 2^MAX_CONSTANT_BITS. Decimals and
    exponents are the double nearest to their text, because that is the value a user's
    double column would hold; `float()` rounds correctly in time linear in the text
    (it never builds 10**exponent). A literal whose nearest double is infinite, or 0
    although it is not zero, is rejected: it cannot mean what it says.
    """
    if literal.isdigit():
        return Fraction(_integer(literal))
    value = float(literal)
    if math.isinf(value):
        raise LiteralError(
            "a number with a finite double value (magnitude below about 1.8e308)",
            "its nearest double is infinite",
        )
    if value == 0 and scaled_digits(literal).digits:
        raise LiteralError(
            "a number whose nearest double is not 0",
            "it is below the smallest double, about 4.9e-324",
        )
    return Fraction(value)


_INTEGER_DIGITS = len(str(2**MAX_CONSTANT_BITS))
"""No integer literal with more digits fits MAX_CONSTANT_BITS; checked before `int()`,
which is quadratic in the digits and refuses more than 4,300."""


def _integer(literal: str) -> int:
    """An integer literal's exact value (semantics section 2: every int64 compares exactly)."""
    digits = literal.lstrip("0") or "0"
    value = int(digits) if len(digits) <= _INTEGER_DIGITS else None
    if value is None or value.bit_length() > MAX_CONSTANT_BITS:
        raise LiteralError(
            f"an integer below 2^{MAX_CONSTANT_BITS}",
            "a decimal such as 1e20 means the nearest double",
        )
    return value


_MIN_WHOLE_EXPONENT = -7
"""Below this power of ten an amount is never whole milliseconds: significant digits
without a trailing zero lack a factor 2 or 5, and no unit has more than 2^7 or 5^5 in it
(an hour is 2^7 * 3^2 * 5^5 ms)."""

_WINDOW_TOP = len(str(MAX_WINDOW_MILLIS))
"""Any amount of 10**_WINDOW_TOP or more, in any unit, exceeds MAX_WINDOW_MILLIS."""


def duration_millis(literal: str, unit_millis: int) -> int:
    """`literal` units in whole milliseconds, at most MAX_WINDOW_MILLIS, or `LiteralError`.

    The magnitude and the exponent are bounded from the text before any exact
    arithmetic, so `1e99999999 ms` or a 5,000-digit amount is refused at once and the
    result is a plain int that JSON and every engine can take.
    """
    number = scaled_digits(literal)
    if not number.digits:
        return 0
    too_long = LiteralError(
        f"a window of at most {MAX_WINDOW_MILLIS} ms (2^53 - 1, about 285,000 years)",
        "it already spans every epoch-millisecond timestamp",
    )
    if number.top > _WINDOW_TOP:
        raise too_long
    if number.exponent < _MIN_WHOLE_EXPONENT:
        raise _not_whole(literal, unit_millis)
    amount = int(number.digits) * Fraction(10) ** number.exponent * unit_millis
    if amount.denominator != 1:
        raise _not_whole(literal, unit_millis)
    if amount > MAX_WINDOW_MILLIS:
        raise too_long
    return int(amount)


def _not_whole(literal: str, unit_millis: int) -> LiteralError:
    return LiteralError("a whole number of milliseconds", f"that is {float(literal) * unit_millis} ms")


class _Builder:
    """Walks Lark's tree into the typed nodes above, checking what the grammar cannot."""

    def __init__(self, text: str, query_id: str) -> None:
        self.text = text
        self.query_id = query_id

    def error(self, clause: str | None, span: Span, expected: str, found: str, hint: str = "") -> QueryError:
        return QueryError(self.query_id, clause, span.line, span.column, expected, found, hint)

    def query(self, tree: Tree) -> SyntaxQuery:
        select_tree, from_tree, *clause_trees = tree.children
        select, select_span = self.select(select_tree)
        streams = tuple(StreamName(str(t), _token_span(t)) for t in map(_token, from_tree.children)
                        if t.type == "NAME")
        seen: dict[str, Tree] = {}
        for clause_tree in clause_trees:
            name = _CLAUSE_OF_RULE[clause_tree.data]
            if name in seen:
                keyword = _token(clause_tree.children[0])
                raise self.error(
                    name, _token_span(keyword), f"at most one {name} clause",
                    f"a second {quote(str(keyword))}",
                    f"the first one is on line {seen[name].meta.line}",
                )
            seen[name] = clause_tree
        end_line, end_column = position(self.text, len(self.text.rstrip()))
        end = Span(len(self.text.rstrip()), len(self.text.rstrip()), end_line, end_column)
        return SyntaxQuery(
            text=self.text,
            select=select,
            select_span=select_span,
            streams=streams,
            from_span=_tree_span(from_tree),
            window=self.conjunction(seen["WINDOW"], "WINDOW") if "WINDOW" in seen else (),
            max_window=self.duration(seen["MAXWINDOW"]) if "MAXWINDOW" in seen else None,
            where=self.conjunction(seen["WHERE"], "WHERE") if "WHERE" in seen else (),
            end=end,
        )

    def select(self, tree: Tree) -> tuple[tuple[ColumnName, ...] | None, Span]:
        tokens = [t for t in tree.children if isinstance(t, Token)]
        if any(t.type == "STAR" for t in tokens):
            return None, _tree_span(tree)
        return tuple(self.column(t) for t in tokens if t.type == "COLUMN"), _tree_span(tree)

    def column(self, tok: Token) -> ColumnName:
        stream, _, column = str(tok).partition(".")
        return ColumnName(ColumnRef(stream, column), _token_span(tok))

    def duration(self, tree: Tree) -> Duration:
        number, unit = map(_token, tree.children[1:])
        span = replace(_token_span(number), end=_token_span(unit).end)
        try:
            return Duration(duration_millis(str(number), _UNIT_MILLIS[str(unit).lower()]), span)
        except LiteralError as err:
            raise self.error(
                "MAXWINDOW", span, err.expected, quote(self.text[span.start:span.end]), err.hint,
            ) from None

    def conjunction(self, tree: Tree, clause: str) -> tuple[Comparison, ...]:
        conj = tree.children[1]
        return tuple(self.comparison(c, clause) for c in conj.children if isinstance(c, Tree))

    def comparison(self, tree: Tree, clause: str) -> Comparison:
        left, op_tok, right = tree.children
        span = _tree_span(tree)
        return Comparison(
            left=self.expr(left, clause, 0),
            op=_OPS[str(op_tok).lower()],
            op_span=_token_span(_token(op_tok)),
            right=self.expr(right, clause, 0),
            clause=clause,
            span=span,
            text=self.text[span.start:span.end],
        )

    def expr(self, node: Tree | Token, clause: str, depth: int) -> Expr:
        if isinstance(node, Token):  # cannot happen with this grammar; keep the walker total
            raise self.error(clause, _token_span(node), "an expression", quote(str(node)))
        span = _tree_span(node)
        kind = node.data
        if kind == "number":
            tok = node.children[0]
            try:
                return NumberLit(number_value(str(tok)), span)
            except LiteralError as err:
                raise self.error(clause, span, err.expected, quote(str(tok)), err.hint) from None
        if kind == "column":
            return self.column(_token(node.children[0]))
        if kind == "string":
            return StringLit(unquote(str(node.children[0])), span)
        if kind == "boolean":
            return BoolLit(str(node.children[0]).lower() == "true", span)
        if depth >= MAX_NESTING:
            raise self.error(
                clause, span, f"at most {MAX_NESTING} nested parentheses or signs",
                "deeper nesting", "simplify the expression",
            )
        if kind == "paren":
            return self.expr(node.children[1], clause, depth + 1)
        if kind == "signed":
            sign, operand = node.children
            return Signed(str(sign) == "-", self.expr(operand, clause, depth + 1), span)
        if kind in ("sum", "product"):
            parts: list[tuple[str, Expr]] = []
            op = "+" if kind == "sum" else "*"
            for child in node.children:
                if isinstance(child, Token):
                    op = str(child)
                else:
                    parts.append((op, self.expr(child, clause, depth)))
            return Sum(tuple(parts), span) if kind == "sum" else Product(tuple(parts), span)
        raise AssertionError(f"unknown syntax node {kind}")  # grammar and walker out of sync


def unquote(literal: str) -> str:
    """Strip the quotes; a backslash makes the next character literal."""
    body = literal[1:-1]
    out: list[str] = []
    chars = iter(body)
    for ch in chars:
        out.append(next(chars, "\\") if ch == "\\" else ch)
    return "".join(out)


# --------------------------------------------------------------------------- syntax errors

_CLAUSE_KEYWORDS = {"SELECT": "SELECT", "FROM": "FROM", "WINDOW": "WINDOW", "MAXWINDOW": "MAXWINDOW", "WHERE": "WHERE"}
_VALUE_START = {"NUMBER", "COLUMN", "STRING", "TRUE", "FALSE", "LPAR", "ADDOP"}
_COMPARISON_START = _VALUE_START - {"ADDOP"}  # a leading '-' would continue the previous expression

# Order in which expected items are listed, and their words.
_WORDS: list[tuple[str, str]] = [
    ("SELECT", "'SELECT'"),
    ("STAR", "'*'"),
    ("COLUMN", "a column (S.col)"),
    ("NAME", "a stream name"),
    ("NUMBER", "a number"),
    ("STRING", "a string"),
    ("TRUE", "true"),
    ("FALSE", "false"),
    ("LPAR", "'('"),
    ("UNIT", "a time unit (ms, s, sec, min, h)"),
    ("COMPOP", "a comparison operator"),
    ("ARITH", "an arithmetic operator (+ - * /)"),
    ("SLASH", "'/'"),
    ("ADDOP", "'+' or '-'"),
    ("RPAR", "')'"),
    ("COMMA", "','"),
    ("AND", "'and'"),
    ("FROM", "'FROM'"),
    ("WINDOW", "'WINDOW'"),
    ("MAXWINDOW", "'MAXWINDOW'"),
    ("WHERE", "'WHERE'"),
    ("$END", "end of query"),
]


def _describe(accepts: Iterable[str]) -> str:
    """Turn a set of terminal names into 'a, b or c', grouping the obvious families."""
    names = set(accepts)
    if {"NUMBER", "COLUMN", "LPAR"} <= names:
        names -= _VALUE_START
        names.add("VALUE")
    if {"STAR", "SLASH", "ADDOP"} <= names:
        names -= {"STAR", "SLASH", "ADDOP"}
        names.add("ARITH")
    words = [w for n, w in [("VALUE", "a value (number, string, true/false, S.col or '(')")] + _WORDS if n in names]
    words += sorted(n for n in names if n not in dict(_WORDS) and n != "VALUE")  # unforeseen terminals
    if not words:
        return "nothing more"
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _current_clause(stack: list) -> str | None:
    """The clause being parsed: the last clause keyword or finished clause on the parser stack."""
    for item in reversed(stack):
        while isinstance(item, Tree):
            if item.data in _CLAUSE_OF_RULE:
                return _CLAUSE_OF_RULE[item.data]
            if not item.children:
                break
            item = item.children[-1]
        if isinstance(item, Token) and item.type in _CLAUSE_KEYWORDS:
            return _CLAUSE_KEYWORDS[item.type]
    return None


def _syntax_error(err: UnexpectedInput, text: str, query_id: str) -> QueryError:
    interactive = getattr(err, "interactive_parser", None)
    stack: list = list(interactive.parser_state.value_stack) if interactive is not None else []
    try:
        accepts = set(interactive.accepts()) if interactive is not None else set()
    except Exception:  # accepts() replays the parser; never let it mask the real error
        accepts = set()
    if not accepts:
        accepts = set(getattr(err, "expected", None) or getattr(err, "allowed", None) or ())
    clause = _current_clause(stack)
    previous = stack[-1] if stack and isinstance(stack[-1], Token) else None

    if isinstance(err, UnexpectedToken) and err.token.type == "$END":
        line, column = position(text, len(text.rstrip()))
        found, found_type = "end of query", "$END"
    elif isinstance(err, UnexpectedToken):
        line, column = err.token.line, err.token.column
        found, found_type = quote(str(err.token)), err.token.type
    else:
        line, column = err.line, err.column
        offset = getattr(err, "pos_in_stream", None)
        char = text[offset] if isinstance(offset, int) and 0 <= offset < len(text) else "?"
        found, found_type = quote(char), None

    hint = ""
    if previous is not None and previous.type == "AND" and found_type not in _COMPARISON_START:
        expected = "a comparison after 'and'"
    elif "AND" in accepts and found_type in _COMPARISON_START:
        expected = "'and' between two comparisons"
    elif (
        previous is not None and previous.type == "MAXWINDOW" and accepts == {"NUMBER"}
    ):
        expected = "a duration such as '4sec' or '20 sec'"
    else:
        expected = _describe(accepts)
        if "AND" in accepts and found_type == "COMPOP":
            hint = "comparisons cannot be chained; join them with 'and'"
    return QueryError(query_id, clause, line, column, expected, found, hint)
