"""The shared operator must give exactly the naive reference's results, step by step.

Random queries (any subset of three streams, attribute / join / window / in-event
predicates with factors and offsets that exercise exact arithmetic, and comparisons
whose column cancels out -- `B.x * 0 < 0.5`, `B.s = B.s` -- compiled from their text
as semantics section 2 accepts them), random events
over two keys arriving out of order within and beyond the allowed lateness, and
registrations (with and without history) and deregistrations between events, under
every evaluation order and several bucket widths.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

from hypothesis import HealthCheck, given, settings, strategies as st

from juggler.engine.events import EngineConfig, Event, LateEvent
from juggler.engine.naive import NaiveEngine
from juggler.engine.native_engine import NativeEngine
from juggler.engine.orders import STATIC_ORDERS
from juggler.language import compile_query
from juggler.language.model import (
    AttributePredicate,
    ColumnRef,
    ColumnType,
    Op,
    PairPredicate,
    PredicateKind,
    Query,
)

COLUMNS = {"B": ("x", "y", "s"), "H": ("x", "z", "s"), "T": ("y", "z")}
NUMERIC = {s: tuple(c for c in cols if c != "s") for s, cols in COLUMNS.items()}
VALUES = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, 1 / 3, 2 / 3, 1.5, -0.5, 0.1, 0.3, 2**60 + 1]))
CONSTANTS = st.sampled_from([Fraction(0), Fraction(1), Fraction(-2), Fraction(1, 2), Fraction(1, 3),
                             Fraction(0.1), Fraction(0.3), Fraction(2**60 + 1)])
FACTORS = st.sampled_from([Fraction(1), Fraction(2), Fraction(-1), Fraction(1, 2), Fraction(1, 3), Fraction(3)])
NUMERIC_OPS = st.sampled_from(list(Op))
STRING_OPS = st.sampled_from([Op.EQ, Op.NE])
CATALOG = {stream: {c: ColumnType.STRING if c == "s" else ColumnType.NUMBER for c in cols}
           for stream, cols in COLUMNS.items()}
CONSTANT_TEXTS = st.sampled_from(["0", "1", "-2", "0.5", "1/3", "0.1", "0.3", "1152921504606846977"])


def _cancelling_text(draw, stream: str, streams: tuple[str, ...]) -> str:
    """A comparison whose column cancels out, as a user would write it (semantics 2)."""
    op = draw(NUMERIC_OPS).value
    if draw(st.booleans()) and stream != "T":
        col = f"{stream}.s"
        return f"{col} {draw(STRING_OPS).value} {col}"
    col = f"{stream}.{draw(st.sampled_from(NUMERIC[stream] + ('ts',)))}"
    k = draw(CONSTANT_TEXTS)
    other = draw(st.sampled_from(streams))
    other_col = f"{other}.{draw(st.sampled_from(NUMERIC[other]))}"
    return draw(st.sampled_from([
        f"{col} * 0 {op} {k}",
        f"{col} - {col} {op} {k}",
        f"{k} {op} {col} - {col}",
        f"2 * {col} + {k} {op} {col} * 2",
        f"{col} {op} {col}",
        f"{col} - {col} {op} {other_col}",  # a constant side next to another column
    ]))


@st.composite
def predicates(draw, streams: tuple[str, ...]):
    kind = draw(st.sampled_from(["attribute", "attribute", "join", "window", "self", "string", "cancel"]))
    stream = draw(st.sampled_from(streams))
    if kind == "cancel":
        window = " MaxWindow 1s" if len(streams) > 1 else ""
        text = f"Select * From {', '.join(streams)}{window} Where {_cancelling_text(draw, stream, streams)}"
        (predicate,) = compile_query("generated", text, CATALOG).predicates
        return predicate
    if kind == "attribute":
        column = draw(st.sampled_from(NUMERIC[stream] + ("ts",)))
        return AttributePredicate(ColumnRef(stream, column), draw(NUMERIC_OPS), draw(CONSTANTS))
    if kind == "string":
        if stream == "T":
            return None
        return AttributePredicate(ColumnRef(stream, "s"), draw(STRING_OPS), draw(st.sampled_from("ab")))
    if kind == "self":
        a, b = sorted(draw(st.permutations(NUMERIC[stream]))[:2])
        return PairPredicate(PredicateKind.SELF, ColumnRef(stream, a), draw(NUMERIC_OPS),
                             draw(FACTORS), ColumnRef(stream, b), draw(CONSTANTS))
    if len(streams) < 2:
        return None
    first, second = sorted(draw(st.permutations(streams))[:2])
    if kind == "window":
        return PairPredicate(PredicateKind.WINDOW, ColumnRef(first, "ts"), draw(NUMERIC_OPS), Fraction(1),
                             ColumnRef(second, "ts"), Fraction(draw(st.sampled_from([0, 100, -150, 50]))))
    if draw(st.booleans()) and first != "T" and second != "T":
        return PairPredicate(PredicateKind.JOIN, ColumnRef(first, "s"), draw(STRING_OPS), Fraction(1),
                             ColumnRef(second, "s"), Fraction(0))
    left = ColumnRef(first, draw(st.sampled_from(NUMERIC[first])))
    right = ColumnRef(second, draw(st.sampled_from(NUMERIC[second])))
    return PairPredicate(PredicateKind.JOIN, left, draw(NUMERIC_OPS), draw(FACTORS), right, draw(CONSTANTS))


@st.composite
def queries(draw, query_id: str):
    streams = tuple(draw(st.lists(st.sampled_from("BHT"), min_size=1, max_size=3, unique=True)))
    found = [draw(predicates(streams)) for _ in range(draw(st.integers(0, 4)))]
    chosen = tuple(dict.fromkeys(p for p in found if p is not None))
    select = None if draw(st.booleans()) else tuple(ColumnRef(s, "ts") for s in streams)
    window = draw(st.sampled_from([0, 100, 300, 1000])) if len(streams) > 1 else None
    return Query(query_id, f"generated {query_id}", streams, select, chosen, window)


@st.composite
def scripts(draw):
    """A run: commands and events in arrival order."""
    steps = []
    registered: list[str] = []
    clock = 0
    for n in range(draw(st.integers(1, 45))):
        action = draw(st.sampled_from(["event"] * 6 + ["register", "deregister"]))
        if action == "register" or not registered and n < 3:
            qid = f"q{n}"
            steps.append(("register", draw(queries(qid)), draw(st.booleans())))
            registered.append(qid)
        elif action == "deregister" and registered:
            qid = draw(st.sampled_from(registered))
            registered.remove(qid)
            steps.append(("deregister", qid))
        else:
            clock += draw(st.integers(0, 120))
            stream = draw(st.sampled_from("BHT"))
            data = {c: (draw(st.sampled_from("ab")) if c == "s" else draw(VALUES)) for c in COLUMNS[stream]}
            ts = clock + draw(st.integers(-400, 0))
            steps.append(("event", Event(stream, draw(st.sampled_from(["k1", "k2"])), ts, data, n)))
    return steps


def _identities(results) -> Counter:
    return Counter(r.identity() for r in results)


def _run(engine, step):
    if step[0] == "register":
        return engine.register(step[1], history=step[2])
    if step[0] == "deregister":
        engine.deregister(step[1])
        return []
    try:
        return engine.process(step[1])
    except LateEvent:
        return "late"


CONFIGS = {
    "lateness": st.sampled_from([0, 100, 500]),
    "retention": st.sampled_from([0, 250]),
    "order": st.sampled_from(("adaptive",) + STATIC_ORDERS),
}
"""The engine settings both comparisons draw, beside the script."""


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=scripts(), **CONFIGS)
def test_engine_results_equal_reference(script, lateness, retention, order):
    config = EngineConfig(allowed_lateness=lateness, retention=retention, order=order, reorder_every=3)
    engine, reference = NativeEngine(config), NaiveEngine(config)
    for step in script:
        got, want = _run(engine, step), _run(reference, step)
        if want == "late" or got == "late":
            assert got == want, step
        else:
            assert _identities(got) == _identities(want), step


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=scripts(), **CONFIGS)
def test_native_engine_results_equal_reference_in_order(script, lateness, retention, order):
    config = EngineConfig(allowed_lateness=lateness, retention=retention, order=order, reorder_every=3)
    engine, reference = NativeEngine(config), NaiveEngine(config)
    for n, step in enumerate(script):
        got, want = _run(engine, step), _run(reference, step)
        if want == "late" or got == "late":
            assert got == want, step
        else:
            assert [r.identity() for r in got] == [r.identity() for r in want], step
        if n % 7 == 6:
            engine = _restarted(engine, config)


def _restarted(engine: NativeEngine, config: EngineConfig) -> NativeEngine:
    """A new engine rebuilt as the worker rebuilds one: the queries in registration
    order in one batch, the horizon, then each key's snapshot."""
    fresh = NativeEngine(config)
    fresh.register_many(engine.queries.values())
    fresh.horizon = engine.horizon
    for key in ("k1", "k2"):
        snapshot = engine.snapshot(key)
        if snapshot is not None:
            fresh.restore(key, snapshot)
    return fresh
