"""The one error type of the query language.

semantics section 2: a bad query is a user error, not a crash, and the message must name
the query, the clause, the line and column, and what was expected. Every failure the
language package detects -- syntax, unknown names, types, non-linear arithmetic,
limits -- is a `QueryError`, so callers (the control-topic handler, the offline
evaluator) need a single `except` and can show `str(err)` to the user as is.
"""

from __future__ import annotations

CLAUSES = ("SELECT", "FROM", "WINDOW", "MAXWINDOW", "WHERE")


class QueryError(Exception):
    """A query that cannot be compiled.

    Attributes:
        query_id: the id the query was registered under.
        clause: "SELECT", "FROM", "WINDOW", "MAXWINDOW", "WHERE", or None when the
            problem is not inside one clause (empty text, length limit).
        line, column: 1-based position of the offending token in the query text.
        expected: what would have been accepted there, in words.
        found: what was there instead, quoted, or "end of query".
        hint: optional extra explanation (may be empty).
        message: the part after the location: "expected X, found Y (hint)".

    `str(err)` is "query q1, WHERE clause, line 7, column 13: expected ..., found ...".
    """

    def __init__(
        self,
        query_id: str,
        clause: str | None,
        line: int,
        column: int,
        expected: str,
        found: str,
        hint: str = "",
    ) -> None:
        if clause is not None and clause not in CLAUSES:
            raise ValueError(f"unknown clause {clause!r}")
        self.query_id = query_id
        self.clause = clause
        self.line = line
        self.column = column
        self.expected = expected
        self.found = found
        self.hint = hint
        self.message = f"expected {expected}, found {found}" + (f" ({hint})" if hint else "")
        super().__init__(str(self))

    @property
    def location(self) -> str:
        """`query q1, WHERE clause, line 7, column 13` (the clause part may be absent)."""
        where = f", {self.clause} clause" if self.clause else ""
        return f"query {self.query_id}{where}, line {self.line}, column {self.column}"

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"

    def __reduce__(self):  # keep the error picklable (multiprocessing, Spark)
        return (
            type(self),
            (self.query_id, self.clause, self.line, self.column, self.expected, self.found, self.hint),
        )


QUOTE_LIMIT = 80
"""Longest piece of query text a message quotes whole. Longer pieces (a 20,000-digit
number, a FROM item of 18,000 letters) keep their start and end, so the message stays
readable and small on the status topic; line and column still say where the piece is."""


def quote(text: str) -> str:
    """Quote a piece of query text for a message: `'T.fluct'`, cut down to QUOTE_LIMIT."""
    text = text.replace("\n", " ")
    if len(text) <= QUOTE_LIMIT:
        return f"'{text}'"
    return f"'{text[:QUOTE_LIMIT - 30]}...{text[-20:]}' ({len(text)} characters)"


def position(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a character offset, counted like Lark counts them."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column
