"""The Juggler query language (semantics section 2): text -> checked, normalized `Query`.

    from juggler.language import compile_query, QueryError
    query = compile_query("q1", text, catalog)

`model` holds the compiled shapes the engines consume; `compiler.compile_query` is the
only entry point a caller needs; every user error is a `QueryError`.
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

__all__ = [
    "compile_query",
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
