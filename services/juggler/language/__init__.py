"""The Juggler query language (semantics section 2): text -> checked, normalized `Query`.

    from juggler.language import compile_query, QueryError
    query = compile_query("q1", text, catalog)

`model` holds the compiled shapes the engines consume; `compiler.compile_query` is the
only entry point a caller needs, and `plans.QueryCompiler` the same for a caller that
compiles many texts of a few shapes against one catalog; every user error is a
`QueryError`.
"""

from .compiler import Limits, compile_query, unknown_streams
from .errors import QueryError
from .model import (
    MAX_CONSTANT_BITS,
    MAX_WINDOW_MILLIS,
    TIMESTAMP,
    AttributePredicate,
    Catalog,
    ColumnRef,
    ColumnType,
    Constant,
    Op,
    PairPredicate,
    Predicate,
    PredicateKind,
    Query,
)
from .plans import QueryCompiler

__all__ = [
    "compile_query",
    "QueryCompiler",
    "unknown_streams",
    "Limits",
    "QueryError",
    "MAX_CONSTANT_BITS",
    "MAX_WINDOW_MILLIS",
    "TIMESTAMP",
    "AttributePredicate",
    "Catalog",
    "ColumnRef",
    "ColumnType",
    "Constant",
    "Op",
    "PairPredicate",
    "Predicate",
    "PredicateKind",
    "Query",
]
