"""The public entry point: query text + catalog -> checked, normalized `Query`.

Order of work: length limit (before any parsing, so oversized input costs nothing),
parse (`parser.py`, reused for a text that differs from one parsed before only in its
numbers: `shapes.py`), resolve FROM against the catalog, check SELECT, normalize every
comparison (`normalize.py`), drop duplicates, then the rules that need the whole query
(MAXWINDOW required for several streams, the predicate limit). Every failure is a
`QueryError` carrying the query id, clause, line and column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .errors import QueryError, position, quote
from .model import TIMESTAMP, Catalog, ColumnRef, ColumnType, Predicate, Query
from .normalize import Normalizer
from .parser import BoolLit, ColumnName, Comparison, Span, StringLit, SyntaxQuery, leaves
from .shapes import parse


@dataclass(frozen=True)
class Limits:
    """Configurable bounds that reject oversized queries with a clear error (semantics section 2).

    Each is checked before the work it bounds, so no query text stalls the worker:

    * `max_length` (20,000 characters): before parsing; all later work is at most
      linear in the text (or bounded by the limits below).
    * `max_streams` (16): while FROM is resolved; a FROM item longer than
      `max_streams` of the longest stream names is refused before it is split.
    * `max_predicates` (256 distinct): as each comparison is normalized.

    Fixed bounds keep each expression small: `parser.MAX_NESTING` (parentheses and
    signs), `model.MAX_CONSTANT_BITS` (exact numbers), `model.MAX_WINDOW_MILLIS`.
    """

    max_streams: int = 16
    max_predicates: int = 256
    max_length: int = 20000


def compile_query(query_id: str, text: str, catalog: Catalog, limits: Limits = Limits()) -> Query:
    """Compile one query, or raise `QueryError`.

    `catalog` maps stream name -> column name -> `ColumnType`; `ts` is implicit.
    Predicates come out in the order written, duplicates (equal after normalization)
    removed.
    """
    check_length(query_id, text, limits)
    return compile_syntax(query_id, parse(text, query_id), catalog, limits)


def check_length(query_id: str, text: str, limits: Limits) -> None:
    """The length limit, checked before any parsing, so oversized input costs nothing."""
    if len(text) > limits.max_length:
        line, column = position(text, limits.max_length)
        raise QueryError(
            query_id, None, line, column, f"a query of at most {limits.max_length} characters",
            f"{len(text)} characters", "the limit is configurable",
        )


def compile_syntax(query_id: str, syntax: SyntaxQuery, catalog: Catalog, limits: Limits) -> Query:
    """`compile_query` after the parse: `syntax` is the text's parse."""
    return _Compiler(query_id, syntax, catalog, limits).compile()


def unknown_streams(query_id: str, text: str, catalog: Catalog,
                    limits: Limits = Limits()) -> dict[str, dict[str, ColumnType]]:
    """The FROM items of a query that name no stream of `catalog`, with stand-in schemas.

    For a caller whose catalog is only what it has seen (`juggler eval` infers schemas
    from the events): such a stream has no events, so the query can have no result, but
    the caller may still accept it (with a warning) by compiling against the catalog plus
    these stand-ins. A FROM item that is a concatenation of known streams (`BH`) is not
    unknown. Each column the query uses takes the type its use implies: compared with a
    string, `true`/`false` or a typed column, that type; otherwise a number. Conflicting
    uses are then the compiler's type mismatch, as with a real schema. Text that does not
    parse or is too long gives {} (compiling it reports the error).
    """
    if len(text) > limits.max_length:
        return {}
    try:
        syntax = parse(text, query_id)
    except QueryError:
        return {}
    unknown: dict[str, dict[str, ColumnType]] = {item.name: {} for item in syntax.streams
               if item.name not in catalog and not _splits(item.name, catalog)}
    if not unknown:
        return {}
    comparisons = syntax.window + syntax.where

    def typed(col: ColumnName) -> ColumnType | None:
        stream, column = col.ref.stream, col.ref.column
        if column == TIMESTAMP:
            return ColumnType.NUMBER
        columns = unknown.get(stream, catalog.get(stream, {}))
        return ColumnType(columns[column]) if column in columns else None

    def settle(cmp: Comparison, copy_columns: bool) -> None:
        for mine, other in ((cmp.left, cmp.right), (cmp.right, cmp.left)):
            if not isinstance(mine, ColumnName) or mine.ref.stream not in unknown:
                continue
            found: ColumnType | None
            if isinstance(other, StringLit):
                found = ColumnType.STRING
            elif isinstance(other, BoolLit):
                found = ColumnType.BOOLEAN
            elif isinstance(other, ColumnName):
                found = typed(other) if copy_columns else None
            else:
                found = ColumnType.NUMBER
            if found is not None and mine.ref.column != TIMESTAMP:
                unknown[mine.ref.stream].setdefault(mine.ref.column, found)

    for cmp in comparisons:
        settle(cmp, copy_columns=False)
    for _ in range(2):  # a column compared with one typed by the first pass
        for cmp in comparisons:
            settle(cmp, copy_columns=True)
    used = [*(syntax.select or ()),
            *(node for node in leaves(comparisons) if isinstance(node, ColumnName))]
    for col in used:
        if col.ref.stream in unknown and col.ref.column != TIMESTAMP:
            unknown[col.ref.stream].setdefault(col.ref.column, ColumnType.NUMBER)
    return unknown


class _Compiler:
    def __init__(self, query_id: str, syntax: SyntaxQuery, catalog: Catalog, limits: Limits) -> None:
        self.query_id = query_id
        self.syntax = syntax
        self.catalog = catalog
        self.limits = limits
        self.streams: tuple[str, ...] = ()

    def error(self, clause: str | None, span: Span, expected: str, found: str, hint: str = "") -> QueryError:
        return QueryError(self.query_id, clause, span.line, span.column, expected, found, hint)

    def compile(self) -> Query:
        syntax = self.syntax
        self.streams = self.resolve_from()
        select = self.select()
        predicates = self.predicates()
        if len(self.streams) > 1 and syntax.max_window is None:
            raise self.error(
                "MAXWINDOW", syntax.end,
                "a MAXWINDOW clause such as 'MaxWindow 4sec'",
                "end of query", f"it is required because FROM lists {len(self.streams)} streams",
            )
        return Query(
            id=self.query_id,
            text=syntax.text,
            streams=self.streams,
            select=select,
            predicates=predicates,
            max_window=syntax.max_window.millis if syntax.max_window is not None else None,
        )

    # ------------------------------------------------------------------ FROM

    def resolve_from(self) -> tuple[str, ...]:
        """FROM items -> stream names, expanding thesis-style concatenations (`BH`)."""
        streams: list[str] = []
        first_seen: set[str] = set()
        for item in self.syntax.streams:
            for name in self.expand(item.name, item.span):
                if name in first_seen:
                    hint = "it is listed twice" if item.name == name else f"{quote(item.name)} includes {name}"
                    raise self.error("FROM", item.span, "distinct streams in FROM", quote(item.name), hint)
                first_seen.add(name)
                streams.append(name)
                if len(streams) > self.limits.max_streams:
                    raise self.error(
                        "FROM", item.span, f"at most {self.limits.max_streams} streams",
                        f"stream number {len(streams)}, {quote(name)}", "the limit is configurable",
                    )
        return tuple(streams)

    def expand(self, name: str, span: Span) -> tuple[str, ...]:
        """An exact stream name, or the unique split of `name` into known stream names.

        The thesis prints `From BH` for streams B and H (Figures 5.13-5.15). An exact
        name always wins; an ambiguous split is an error rather than a guess. A name
        longer than `max_streams` of the longest stream names cannot split within the
        stream limit, so it is refused before any splitting.
        """
        if name in self.catalog:
            return (name,)
        known = f"a known stream ({_listing(self.catalog)})"
        if len(name) > self.limits.max_streams * max(map(len, self.catalog), default=0):
            hint = f"too long for at most {self.limits.max_streams} stream names written together"
            raise self.error("FROM", span, known, quote(name), hint)
        splits = _splits(name, self.catalog)
        if len(splits) == 1 and len(splits[0]) > 1:
            return splits[0]
        if splits:
            options = " or ".join("+".join(s) for s in splits)
            raise self.error("FROM", span, "an unambiguous stream name", quote(name), f"it could be {options}")
        raise self.error("FROM", span, known, quote(name))

    # ------------------------------------------------------------------ SELECT

    def select(self) -> tuple[ColumnRef, ...] | None:
        if self.syntax.select is None:
            return None
        refs: dict[ColumnRef, None] = {}
        for col in self.syntax.select:
            self.type_of(col, "SELECT")
            refs[col.ref] = None
        return tuple(refs)

    # ------------------------------------------------------------------ predicates

    def predicates(self) -> tuple[Predicate, ...]:
        normalizer = Normalizer(self.query_id, self.syntax.text, self.type_of)
        comparisons = sorted(self.syntax.window + self.syntax.where, key=lambda c: c.span.start)
        out: dict[Predicate, None] = {}
        for cmp in comparisons:
            pred = normalizer.predicate(cmp)
            if pred in out:
                continue
            out[pred] = None
            if len(out) > self.limits.max_predicates:
                raise self.error(
                    cmp.clause, cmp.span, f"at most {self.limits.max_predicates} distinct predicates",
                    f"predicate number {len(out)}, {quote(cmp.text)}", "the limit is configurable",
                )
        return tuple(out)

    def type_of(self, col: ColumnName, clause: str) -> ColumnType:
        """The type of `S.col`, checking the stream is known and in FROM and the column exists."""
        stream, column = col.ref.stream, col.ref.column
        if stream not in self.catalog:
            raise self.error(
                clause, col.span, f"a stream listed in FROM ({', '.join(self.streams)})",
                quote(str(col.ref)), f"there is no stream {stream}",
            )
        if stream not in self.streams:
            raise self.error(
                clause, col.span, f"a stream listed in FROM ({', '.join(self.streams)})",
                quote(str(col.ref)), f"stream {stream} is not in FROM",
            )
        if column == TIMESTAMP:
            return ColumnType.NUMBER
        columns = self.catalog[stream]
        if column not in columns:
            names = [TIMESTAMP, *(c for c in columns if c != TIMESTAMP)]
            raise self.error(
                clause, col.span, f"a column of stream {stream} ({_listing(names)})",
                quote(str(col.ref)), f"stream {stream} has no column {column}",
            )
        return ColumnType(columns[column])


def _splits(name: str, streams: Iterable[str]) -> list[tuple[str, ...]]:
    """The first two ways (if any) to write `name` as a concatenation of stream names.

    Linear in len(name) times the number of distinct stream-name lengths: `starts[i]`
    keeps up to two stream names that begin a complete split of `name[i:]`, filled from
    the end. The first split takes the first choice everywhere; a second exists exactly
    when some position on the first has two choices. (Carrying partial splits through
    the table instead took quadratic time and memory: seconds and gigabytes for
    `"BH" * 9000`.)
    """
    known = {s for s in streams if s}
    lengths = sorted({len(s) for s in known})
    starts: list[list[str]] = [[] for _ in range(len(name) + 1)]
    for i in range(len(name) - 1, -1, -1):
        for k in lengths:
            end = i + k
            if end > len(name) or len(starts[i]) == 2:
                break
            if (end == len(name) or starts[end]) and name[i:end] in known:
                starts[i].append(name[i:end])
    if not starts[0]:
        return []
    first = _first_split(name, starts, 0)
    offset = 0
    for j, part in enumerate(first):
        if len(starts[offset]) == 2:
            other = starts[offset][1]
            return [first, (*first[:j], other, *_first_split(name, starts, offset + len(other)))]
        offset += len(part)
    return [first]


def _first_split(name: str, starts: list[list[str]], offset: int) -> tuple[str, ...]:
    """The split of `name[offset:]` that takes the first choice in `starts` at every step."""
    parts: list[str] = []
    while offset < len(name):
        parts.append(starts[offset][0])
        offset += len(parts[-1])
    return tuple(parts)


def _listing(names: Iterable[str], limit: int = 12) -> str:
    names = list(names)
    shown = ", ".join(names[:limit])
    return shown + (f", ... {len(names) - limit} more" if len(names) > limit else "")
