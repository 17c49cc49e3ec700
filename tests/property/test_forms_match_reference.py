"""Every written form of a predicate must give exactly the naive reference's results
when the operator narrows its retrievals with it.

The operator finds a partner through value-index probes and sieves built from the
query's own constants: a range list's threshold bounds a column from one side, an
equality list's constant pins it, a window list's offset (or `=` offset) bounds the
partner's `ts`. Those paths are taken only when a stream holds enough events in the
time range (a short range is scanned), so these runs are dense: one or two keys,
events a few milliseconds apart, small integer values (and a few doubles) so that
equalities hold often, and timestamps on a 10 ms grid so that offsets and `=` window
predicates meet the window bounds exactly. Queries are written as a user would,
with the constant or the scaled column on either side and the offset beside either
column, and compiled from their text.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings, strategies as st

from juggler.engine.events import EngineConfig, Event, LateEvent
from juggler.engine.naive import NaiveEngine
from juggler.engine.native_engine import NativeEngine
from juggler.engine.orders import STATIC_ORDERS
from juggler.language import compile_query
from juggler.language.model import ColumnType

COLUMNS = {"B": ("x", "y"), "H": ("x", "z"), "T": ("y", "z")}
CATALOG = {s: {c: ColumnType.NUMBER for c in cols} for s, cols in COLUMNS.items()}
VALUES = st.one_of(st.integers(0, 4), st.sampled_from([0.5, 1.5, 2.5]))
CONSTANTS = st.sampled_from(["0", "1", "2", "3", "0.5", "1.5", "-1"])
FACTORS = st.sampled_from(["1", "2", "0.5", "3", "-1"])
OPS = st.sampled_from(["<", "<=", ">", ">=", "=", "=", "!="])
OFFSETS = st.sampled_from(["0", "10", "20", "50", "100", "-10", "-50", "5"])
MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}


@st.composite
def attribute(draw, stream: str) -> str:
    col = f"{stream}.{draw(st.sampled_from(COLUMNS[stream]))}"
    op, k = draw(OPS), draw(CONSTANTS)
    return draw(st.sampled_from([
        f"{col} {op} {k}",
        f"{k} {MIRROR[op]} {col}",
        f"{col} * 2 {op} {k} * 2",
        f"{col} - 1 {op} {k} - 1",
    ]))


@st.composite
def join(draw, first: str, second: str) -> str:
    left = f"{first}.{draw(st.sampled_from(COLUMNS[first]))}"
    right = f"{second}.{draw(st.sampled_from(COLUMNS[second]))}"
    if draw(st.booleans()):
        left, right = right, left
    op, f, k = draw(OPS), draw(FACTORS), draw(CONSTANTS)
    return draw(st.sampled_from([
        f"{left} {op} {f} * {right} + {k}",
        f"{right} * {f} + {k} {MIRROR[op]} {left}",
        f"{left} - {k} {op} {right} * {f}",
        f"({left} - {k}) / {f} {op} {right}",
    ]))


@st.composite
def window(draw, first: str, second: str) -> str:
    op, k = draw(OPS), draw(OFFSETS)
    a, b = (first, second) if draw(st.booleans()) else (second, first)
    return draw(st.sampled_from([
        f"{a}.ts {op} {b}.ts + {k}",
        f"{b}.ts + {k} {MIRROR[op]} {a}.ts",
        f"{a}.ts - {k} {op} {b}.ts",
    ]))


@st.composite
def query_texts(draw) -> str:
    streams = tuple(draw(st.lists(st.sampled_from("BHT"), min_size=2, max_size=3, unique=True)))
    preds = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["attribute", "join", "join", "window"]))
        if kind == "attribute":
            preds.append(draw(attribute(draw(st.sampled_from(streams)))))
            continue
        first, second = draw(st.permutations(streams))[:2]
        preds.append(draw(join(first, second) if kind == "join" else window(first, second)))
    max_window = draw(st.sampled_from([50, 100, 300, 1000]))
    return f"SELECT * FROM {', '.join(streams)} MAXWINDOW {max_window} ms WHERE {' AND '.join(preds)}"


@st.composite
def runs(draw):
    """Queries (some sharing lists: drawn from a few texts), then dense events; a query
    registered with history part-way."""
    texts = draw(st.lists(query_texts(), min_size=1, max_size=4))
    queries = [compile_query(f"q{i}", draw(st.sampled_from(texts)), CATALOG)
               for i in range(draw(st.integers(1, 8)))]
    late = compile_query("late", draw(query_texts()), CATALOG)
    events, clock = [], 0
    for n in range(draw(st.integers(40, 100))):
        clock += draw(st.sampled_from([0, 0, 0, 10]))
        stream = draw(st.sampled_from("BHT"))
        data = {c: draw(VALUES) for c in COLUMNS[stream]}
        key = draw(st.sampled_from(["k1", "k1", "k1", "k2"]))
        events.append(Event(stream, key, clock, data, n))
    return queries, late, draw(st.integers(0, len(events))), events


def _identities(results) -> list:
    return [r.identity() for r in results]


def _process(engine, event):
    try:
        return _identities(engine.process(event))
    except LateEvent:
        return "late"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(run=runs(), order=st.sampled_from(("adaptive",) + STATIC_ORDERS), retention=st.sampled_from([0, 1000]))
def test_every_written_form_gives_the_reference_results(run, order, retention):
    queries, late, at, events = run
    config = EngineConfig(retention=retention, order=order, reorder_every=3)
    engine, reference = NativeEngine(config), NaiveEngine(config)
    for q in queries:
        assert engine.register(q) == reference.register(q) == []
    for n, event in enumerate(events):
        if n == at:
            assert Counter(_identities(engine.register(late, history=True))) == \
                Counter(_identities(reference.register(late, history=True)))
        assert _process(engine, event) == _process(reference, event), event
