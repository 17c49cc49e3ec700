"""The Rust core (juggler_native) against its Python definitions, on random inputs.

- `PairRange.position` answers exactly what `PairRangeList._position` answers, or
  nothing; and `PairRangeList.position` (native, then Python) is the exact rational
  answer, for ints beyond 2^53 and 2^63, negative zero, huge and tiny floats, bools.
- `CandidateFilter.survivors` keeps exactly the queries, and counts exactly the
  comparisons, of the operator's filter phases as they were written in Python (kept
  below as the reference), over masks wider than 64 and 128 bits, equality lists,
  stale attribute masks, history (`before_seq`) and every phase order.
- Masks and pickling round-trip.
"""

from __future__ import annotations

import math
import pickle
from bisect import bisect_left
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from juggler.engine.events import Event
from juggler.engine.native import PairRange, WindowTable, candidate_filter
from juggler.engine.plan import Check
from juggler.engine.predicate_lists import LOWER, UPPER, PairEqualityList, PairRangeList
from juggler.engine.state import Held
from juggler.language.model import ColumnRef, Op

BIG = [  # around the double and the 64-bit limits
    2**53, 2**53 + 1, -(2**53) - 1, 2**60 + 1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**80 + 3]
INTS = st.one_of(st.integers(-10, 10), st.integers(-(2**70), 2**70), st.sampled_from(BIG))
FLOATS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 0.5, -0.5, 1 / 3, 0.1, 0.3, 1e308, -1e308, 5e-324, -5e-324,
                     2.2250738585072014e-308, float(2**53), float(2**63), 9.007199254740993e15]),
    st.floats(-10, 10))
NUMBERS = st.one_of(INTS, FLOATS)
VALUES = st.one_of(NUMBERS, st.booleans())
FACTORS = st.one_of(
    st.sampled_from([Fraction(1), Fraction(2), Fraction(-1), Fraction(3), Fraction(1, 2), Fraction(1, 3),
                     Fraction(-5, 4), Fraction(0.1), Fraction(2**64), Fraction(-(2**70) - 1)]),
    st.fractions(max_denominator=10).filter(lambda f: f != 0))
CONSTANTS = st.one_of(
    st.sampled_from([Fraction(0), Fraction(1), Fraction(-1, 2), Fraction(1, 3), Fraction(0.1), Fraction(0.3),
                     Fraction(2**60 + 1), Fraction(2**63), Fraction(-(2**100)), Fraction(1e308), Fraction(5e-324),
                     Fraction(10**400), Fraction(-(10**400) - 1, 3)]),
    st.fractions(max_denominator=7).map(lambda f: f * 10),
    INTS.map(Fraction))
RANGE_OPS = st.sampled_from([Op.GT, Op.GE, Op.LT, Op.LE])

B_X, H_Y = ColumnRef("B", "x"), ColumnRef("H", "y")


def range_list(factor: Fraction, direction: str, entries: list[tuple[Op, Fraction]]) -> PairRangeList:
    plist = PairRangeList(B_X, H_Y, factor, direction)
    for i, (op, k) in enumerate(entries):
        plist.add_predicate(op, k, 1 << (i * 37 % 150))
    return plist


@st.composite
def range_lists(draw) -> PairRangeList:
    direction = draw(st.sampled_from([LOWER, UPPER]))
    ops = [Op.GT, Op.GE] if direction == LOWER else [Op.LT, Op.LE]
    entries = draw(st.lists(st.tuples(st.sampled_from(ops), CONSTANTS), max_size=6))
    return range_list(draw(FACTORS), direction, entries)


def exact_position(plist: PairRangeList, x, y) -> int:
    """Entries on the low side of d = x - factor*y, in rational arithmetic."""
    d = Fraction(x) - plist.factor * Fraction(y)
    lower = plist.direction == LOWER
    return sum(1 for k, strict in zip(plist.constants, plist.strict)
               if k < d or (k == d and strict != lower))


def _long(v) -> bool:
    return type(v) is int and -(2**63) <= v < 2**63


def near(target: Fraction, steps: int) -> float:
    """The double `steps` ulps away from the one nearest `target`."""
    try:
        x = float(target)
    except OverflowError:
        x = math.inf if target > 0 else -math.inf
    for _ in range(abs(steps)):
        x = math.nextafter(x, math.copysign(math.inf, steps))
    return x


@settings(max_examples=1500, deadline=None)
@given(plist=range_lists(), x=VALUES, y=VALUES, data=st.data())
def test_native_position_is_the_python_definition(plist: PairRangeList, x, y, data) -> None:
    if plist.constants and isinstance(y, (int, float)) and math.isfinite(y) and data.draw(st.booleans()):
        # x within a few ulps of factor*y + k: where rounding could put d on the wrong side
        k = data.draw(st.sampled_from(plist.constants))
        x = near(plist.factor * Fraction(y) + k, data.draw(st.integers(-3, 3)))
        if not math.isfinite(x):
            return
    native = plist.native.position(x, y)
    python = plist._position(x, y)
    assert native is None or native == python, (native, python)
    assert plist.position(x, y) == python == exact_position(plist, x, y)
    if _long(x) and _long(y) and plist.int_factor is not None and _long(plist.int_factor):
        assert native is not None  # the exact integer path is always native
    if type(x) is bool or type(y) is bool:
        assert native is None  # Python's own arithmetic decides bools


@settings(max_examples=300, deadline=None)
@given(plist=range_lists(), x=st.sampled_from([math.inf, -math.inf, math.nan]), y=NUMBERS)
def test_non_finite_floats_are_answered_as_python_would(plist: PairRangeList, x, y) -> None:
    for a, b in ((x, y), (y, x)):
        native = plist.native.position(a, b)
        try:
            python = plist._position(a, b)
        except (OverflowError, ValueError):  # Fraction(inf), Fraction(nan)
            assert native is None
            continue
        assert native is None or native == python


def test_the_exact_cases_native_leaves_to_python() -> None:
    plist = range_list(Fraction(1, 3), LOWER, [(Op.GE, Fraction(0))])
    assert plist.native.position(1, 3) is None and plist.position(1, 3) == 1  # 1 - 3/3 == 0
    plist = range_list(Fraction(1), LOWER, [(Op.GT, Fraction(2**60 + 1))])
    assert plist.native.position(2**60 + 2, 0) == 1  # exact ints
    assert plist.native.position(float(2**60), 0) is None  # float meets the band
    assert plist.position(float(2**60), 0) == 0
    assert plist.native.position(2**64, 0) is None and plist.position(2**64, 0) == 1
    assert plist.native.position(True, 0) is None


# ---------------------------------------------------------------- the filter phases

def reference_survivors(joins, windows, too_narrow, candidates, lo, hi, group, order, partial,
                        pending, before_seq, mints, maxts, version, attr_fail):
    """The operator's `_extend` / `_filter` / `_window_filter`, as they were in Python,
    with the lists' exact answers."""
    counts = {"A": 0, "J": 0, "W": 0}

    def failing(plist, x, y):
        if isinstance(plist, PairRangeList):
            return plist.fail_at[exact_position(plist, x, y)]
        return plist.failing(x, y)

    def filter_(checks, partner, survivors, kind):
        for check in checks:
            plist = check.plist
            if not plist.users & survivors:
                continue
            counts[kind] += 1
            mine = partner.value(check.partner_column)
            theirs = partial[check.other].value(check.other_column)
            x, y = (mine, theirs) if check.partner_is_left else (theirs, mine)
            survivors &= ~failing(plist, x, y)
            if not survivors:
                break
        return survivors

    kept = []
    for partner in candidates:
        if lo is not None and partner.ts < lo or hi is not None and partner.ts > hi:
            continue  # _retrieve left these out
        if before_seq is not None and partner.seq >= before_seq:
            continue
        survivors = group
        for phase in order:
            if phase == "A":
                counts["A"] += 1
                survivors &= ~(partner.attr_fail if partner.attr_version == version else attr_fail(partner))
                if pending and survivors:
                    counts["A"] += 1
                    survivors &= ~attr_fail(partial[0])
            elif phase == "J":
                survivors = filter_(joins, partner, survivors, "J")
            else:
                pts = partner.ts
                counts["W"] += 1
                survivors &= ~too_narrow(max(maxts, pts) - min(mints, pts))
                if survivors and windows:
                    survivors = filter_(windows, partner, survivors, "W")
            if not survivors:
                break
        if survivors:
            kept.append((partner, survivors))
    return kept, counts["A"], counts["J"], counts["W"]


QUERY_BITS = st.integers(0, 2**150 - 1)
COLUMNS = ("x", "y", "s", "ts")


@st.composite
def filter_cases(draw):
    n_partial = draw(st.integers(1, 2))

    def held(stream, seq):
        data = {"x": draw(NUMBERS), "y": draw(NUMBERS), "s": draw(st.sampled_from(["a", "b"]))}
        h = Held(Event(stream, "k", draw(st.integers(0, 5000)), data, seq), seq)
        h.attr_version = draw(st.sampled_from([0, 1]))
        h.attr_fail = draw(QUERY_BITS)
        return h

    partial = [held("B", i) for i in range(n_partial)]
    candidates = [held("H", 10 + i) for i in range(draw(st.integers(0, 6)))]

    def check(windowed: bool):
        partner_is_left = draw(st.booleans())
        other = draw(st.integers(0, n_partial - 1))
        if windowed:
            mine = theirs = "ts"
        else:
            mine, theirs = draw(st.sampled_from([("x", "x"), ("x", "y"), ("y", "ts"), ("s", "s")]))
        left, right = (ColumnRef("H", mine), ColumnRef("B", theirs)) if partner_is_left else \
            (ColumnRef("B", theirs), ColumnRef("H", mine))
        if mine == "s" or draw(st.integers(0, 4)) == 0:
            plist = PairEqualityList(left, right, Fraction(1) if mine == "s" else draw(FACTORS))
            for _ in range(draw(st.integers(1, 3))):
                op = draw(st.sampled_from([Op.EQ, Op.NE]))
                plist.add_predicate(op, Fraction(0) if mine == "s" else draw(CONSTANTS), draw(QUERY_BITS) | 1)
        else:
            direction = draw(st.sampled_from([LOWER, UPPER]))
            plist = PairRangeList(left, right, Fraction(1) if windowed else draw(FACTORS), direction)
            ops = [Op.GT, Op.GE] if direction == LOWER else [Op.LT, Op.LE]
            for _ in range(draw(st.integers(1, 4))):
                k = Fraction(draw(st.integers(-3000, 3000))) if windowed else draw(CONSTANTS)
                plist.add_predicate(draw(st.sampled_from(ops)), k, draw(QUERY_BITS) | 1)
        return Check(plist, partner_is_left, other, mine, theirs)

    joins = tuple(check(False) for _ in range(draw(st.integers(0, 3))))
    windows = tuple(check(True) for _ in range(draw(st.integers(0, 2))))
    by_window = draw(st.dictionaries(st.integers(0, 4000), QUERY_BITS, max_size=4))
    bounds = sorted(by_window)
    narrower = [0]
    for w in bounds:
        narrower.append(narrower[-1] | by_window[w])
    order = "".join(draw(st.permutations("AJW"))[:draw(st.integers(1, 3))])
    return dict(joins=joins, windows=windows, bounds=bounds, narrower=narrower, partial=partial,
                candidates=candidates, group=draw(QUERY_BITS), order=order,
                pending=draw(st.booleans()),
                before_seq=draw(st.one_of(st.none(), st.integers(9, 17))),
                mints=draw(st.integers(0, 5000)), span=draw(st.integers(0, 3000)),
                lo=draw(st.one_of(st.none(), st.integers(0, 5000))),
                hi=draw(st.one_of(st.none(), st.integers(0, 5000))),
                fresh_fail=draw(QUERY_BITS), root_fail=draw(QUERY_BITS))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=filter_cases())
def test_candidate_filter_is_the_python_filter_phases(case) -> None:
    table = WindowTable(case["bounds"], case["narrower"])
    native = candidate_filter(case["joins"], case["windows"], table)
    calls: list[Held] = []

    def attr_fail(held: Held) -> int:
        calls.append(held)
        return case["root_fail"] if held is case["partial"][0] else case["fresh_fail"]

    def too_narrow(span: int) -> int:
        return case["narrower"][bisect_left(case["bounds"], span)]

    mints = case["mints"]
    args = (case["candidates"], case["lo"], case["hi"], case["group"], case["order"], case["partial"], case["pending"],
            case["before_seq"], mints, mints + case["span"], 1)
    try:
        expected = reference_survivors(case["joins"], case["windows"], too_narrow, *args, attr_fail)
    except (OverflowError, ValueError, TypeError) as exc:  # e.g. a huge int meets a float
        with pytest.raises(type(exc)):
            native.survivors(*args, attr_fail)
        return
    expected_calls = list(calls)
    calls.clear()
    got = native.survivors(*args, attr_fail)
    assert got == expected  # the same partners (Held compares by identity), masks, counts
    # the attribute callback is asked for the same held events (root at most once)
    assert {id(h) for h in calls} == {id(h) for h in expected_calls}


def test_masks_of_any_width_round_trip() -> None:
    for mask in (0, 1, 2**63, 2**64 - 1, 2**64, 2**128 + 5, 2**1000 - 1, 3 << 5000):
        assert WindowTable([], [mask]).too_narrow(0) == mask
    with pytest.raises((OverflowError, ValueError)):  # 3.11-3.12, 3.13+: masks are never negative
        WindowTable([], [-1])


def test_native_objects_pickle() -> None:
    plist = range_list(Fraction(2), LOWER, [(Op.GT, Fraction(-1, 2)), (Op.GE, Fraction(2**70))])
    clone = pickle.loads(pickle.dumps(plist.native))
    assert [clone.position(x, 0) for x in (-1, 0, 2**62)] == [plist.position(x, 0) for x in (-1, 0, 2**62)]
    table = pickle.loads(pickle.dumps(WindowTable([10], [0, 2**70])))
    assert table.too_narrow(11) == 2**70
    check = Check(plist, True, 0, "x", "x")
    filt = pickle.loads(pickle.dumps(candidate_filter((check,), (), table)))
    partner = Held(Event("H", "k", 0, {"x": 5}, 0), 1)
    partner.attr_version, partner.attr_fail = 0, 0
    root = Held(Event("B", "k", 0, {"x": 0}, 0), 0)
    # query 1 (d > -1/2) holds, query 2^37 (d >= 2^70) fails, 2^70 uses no list here
    kept, a, j, w = filt.survivors([partner], None, None, 2**70 | 2**37 | 1, "J", [root], False, None,
                                   0, 0, 0, None)
    assert (kept, a, j, w) == ([(partner, 2**70 | 1)], 0, 1, 0)


def test_pair_range_checks_its_shape() -> None:
    with pytest.raises(TypeError):
        PairRange(True, 1, 1.0, [0.0], [0], [0])
