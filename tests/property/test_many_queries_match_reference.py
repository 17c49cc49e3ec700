"""Many queries sharing predicate lists: the operator must still give exactly the naive
reference's results, in order, while queries come and go between events.

The operator keeps a list's entries in blocks with union rows only at block boundaries
once the query masks are wide (blocks of one entry up to 512 queries, of several
beyond), query sets as sorted bits or dense masks by their size, and registers a large
batch in bulk (sorted once at the end). Hundreds of single-stream queries over the
same columns, with many distinct and many repeated constants (thresholds, `=` and
`!=`, in-event differences), put lists in every one of those forms; random join and
window queries from the general generator ride along. Registrations one at a time, in
batches and in bulk, deregistrations of single queries and of large parts, history
registrations and restarts (`_restarted`: a fresh engine given every query in one
batch, as a worker restores a partition) interleave with events.
"""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction

from hypothesis import HealthCheck, given, settings, strategies as st

from juggler.engine.events import EngineConfig, Event, LateEvent
from juggler.engine.naive import NaiveEngine
from juggler.engine.native_engine import NativeEngine
from juggler.language.model import AttributePredicate, ColumnRef, Op, PairPredicate, PredicateKind, Query

from test_engine_matches_reference import COLUMNS, _restarted, queries

POOL = [Fraction(k, 2) for k in range(-6, 7)] + [Fraction(1, 3), Fraction(0.1), Fraction(2**60 + 1)]
"""Constants the fillers share: few enough that many queries repeat each one."""
WIDE = [Fraction(k, 8) for k in range(-40, 41)]
"""Constants few queries share: a list of many entries of one or two queries each."""
EVENT_VALUES = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -0.5, 1.5, 1 / 3, 0.1, 2.5, 0.3, -1.25]))


def filler(rng: random.Random, qid: str) -> Query:
    """A single-stream query of 1 or 2 predicates over B's or H's numeric columns and
    s. Drawn from a seeded generator, not by hypothesis: hundreds of hypothesis draws
    come out alike, and the lists must hold many distinct constants as well as
    constants many queries repeat (a third of the thresholds are 1)."""
    stream = rng.choice("BH")
    numeric = sorted(c for c in COLUMNS[stream] if c != "s")
    preds = []
    for _ in range(rng.randint(1, 2)):
        kind = rng.choice(["range", "range", "range", "eq", "string", "self"])
        column = ColumnRef(stream, rng.choice(numeric))
        if kind == "range":
            constant = rng.choice([rng.choice(POOL), rng.choice(WIDE), Fraction(1)])
            preds.append(AttributePredicate(column, rng.choice([Op.GT, Op.GE, Op.LT, Op.LE]), constant))
        elif kind == "eq":
            constant = rng.choice([rng.choice(POOL[:7]), rng.choice(WIDE)])
            preds.append(AttributePredicate(column, rng.choice([Op.EQ, Op.NE]), constant))
        elif kind == "string":
            preds.append(AttributePredicate(ColumnRef(stream, "s"), rng.choice([Op.EQ, Op.NE]), rng.choice("ab")))
        else:
            preds.append(PairPredicate(PredicateKind.SELF, ColumnRef(stream, numeric[0]), rng.choice(list(Op)),
                                       rng.choice([Fraction(1), Fraction(2), Fraction(1, 2)]),
                                       ColumnRef(stream, numeric[1]), rng.choice(POOL[3:10])))
    return Query(qid, f"filler {qid}", (stream,), None, tuple(dict.fromkeys(preds)), None)


@st.composite
def scripts(draw):
    """Commands and events in arrival order; a batch registers many queries at once."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    steps = []
    registered: list[str] = []
    count = 0

    def new_id() -> str:
        nonlocal count
        count += 1
        return f"q{count}"

    first = draw(st.sampled_from([1100, 600, 70, 0]))
    if first:
        batch = [filler(rng, new_id()) for _ in range(first)]
        steps.append(("batch", batch))
        registered += [q.id for q in batch]
    clock = 0
    for n in range(draw(st.integers(5, 30))):
        action = draw(st.sampled_from(["event"] * 5 + ["register", "batch", "deregister", "drop", "restart"]))
        if action == "register":
            query = filler(rng, new_id()) if draw(st.booleans()) else draw(queries(new_id()))
            steps.append(("register", query, draw(st.booleans())))
            registered.append(query.id)
        elif action == "batch":
            batch = [filler(rng, new_id()) for _ in range(draw(st.sampled_from([300, 80, 20, 2])))]
            steps.append(("batch", batch))
            registered += [q.id for q in batch]
        elif action in ("deregister", "drop") and registered:
            share = 1 if action == "deregister" else draw(st.sampled_from([2, 3, 10]))
            gone = registered[::share] if share > 1 else [draw(st.sampled_from(registered))]
            for qid in gone:
                registered.remove(qid)
                steps.append(("deregister", qid))
        elif action == "restart":
            steps.append(("restart",))
        else:
            clock += draw(st.integers(0, 120))
            stream = draw(st.sampled_from("BHT"))
            data = {c: (draw(st.sampled_from("ab")) if c == "s" else draw(EVENT_VALUES)) for c in COLUMNS[stream]}
            steps.append(("event", Event(stream, draw(st.sampled_from(["k1", "k2"])), clock - draw(st.integers(0, 200)),
                                         data, n)))
    return steps


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(script=scripts(), lateness=st.sampled_from([0, 300]), order=st.sampled_from(["adaptive", "AJW", "WJA"]))
def test_many_queries_give_the_references_results_as_they_come_and_go(script, lateness, order):
    config = EngineConfig(allowed_lateness=lateness, retention=250, order=order, reorder_every=3)
    engine, reference = NativeEngine(config), NaiveEngine(config)
    for step in script:
        if step[0] == "restart":
            engine = _restarted(engine, config)
        elif step[0] == "batch":
            engine.register_many(step[1])
            for query in step[1]:
                reference.register(query)
        elif step[0] == "deregister":
            engine.deregister(step[1])
            reference.deregister(step[1])
        elif step[0] == "register":
            got, want = engine.register(step[1], history=step[2]), reference.register(step[1], history=step[2])
            assert Counter(r.identity() for r in got) == Counter(r.identity() for r in want), step
        else:
            try:
                want = [r.identity() for r in reference.process(step[1])]
            except LateEvent:
                want = "late"
            try:
                got = [r.identity() for r in engine.process(step[1])]
            except LateEvent:
                got = "late"
            assert got == want, step
