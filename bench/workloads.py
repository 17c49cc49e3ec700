"""Seeded generators for the standard workloads S, J and D (docs/workloads.md).

Every generator returns a `Workload`: the queries as TEXT (what a user registers; they
are compiled with `juggler.language.compile_query`, like the service does) and a
factory for a fresh, deterministic event iterator. The same (workload, parameters,
seed) always gives the same queries and the same events, so the engine and the naive
baseline, and every repeat, measure the same work.

S  many single-stream selection queries (CACQ's experiment): one stream `S`, columns
   a..e uniform on [0, 100), one key; 1-3 tail range predicates per query, constants
   from 20 values per (column, operator), ~0.1% of events match a query.
J  many join queries over B, H, T (thesis columns), 20 keys, 50 events/s per stream per
   key in event time, in timestamp order; 1-2 attribute, 1-2 join and 1 window
   predicate per query, MAXWINDOW in {2, 5, 10, 20} s, a target share of predicates
   falling into a predicate list another query already uses (the overlap level).
J-forms  J's queries and events with the language's other forms mixed in as the thesis's
   example queries use them (`J_FORMS`): equality attribute and join predicates, the
   column's factor and the offset written on either side, and integer column values
   (so an equality can hold).
D  the thesis Figure 5.8 query plus 20 variants; halfway through, the data drifts so the
   most selective predicate type changes from attribute to window.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable, Iterator

from juggler.engine.events import Event
from juggler.language import ColumnType, Query, compile_query

NUMBER = ColumnType.NUMBER


@dataclass
class Workload:
    """Queries (id, text), the catalog they compile against, and the events."""

    name: str
    params: dict
    catalog: dict[str, dict[str, ColumnType]]
    queries: list[tuple[str, str]]
    events: Callable[[], Iterator[Event]]
    """A fresh, seeded iterator over the events, in arrival order, each call."""
    length: int | None = None
    """Number of events for fixed-length workloads (D); None when the iterator is endless."""
    checkpoints: tuple[int, ...] = ()
    """Event counts at which a measurement records the engine's counters (D: the shift)."""
    info: dict = field(default_factory=dict)

    def compiled(self) -> list[Query]:
        return [compile_query(qid, text, self.catalog) for qid, text in self.queries]


def _fmt(x: float, digits: int = 2) -> str:
    text = f"{x:.{digits}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _signed(x: float, digits: int = 2) -> str:
    """` + 3.5` / ` - 3.5` / `` for an offset written after an expression."""
    text = _fmt(abs(x), digits)
    if text == "0":
        return ""
    return f" + {text}" if x > 0 else f" - {text}"


# --------------------------------------------------------------------------- S

S_COLUMNS = ("a", "b", "c", "d", "e")
S_OPS = (">", ">=", "<", "<=")
S_CATALOG = {"S": {c: NUMBER for c in S_COLUMNS}}
# Each (column, operator) has 20 constants: 7 for one-predicate queries, 7 for two and
# 6 for three. A k-predicate query's predicates each hold with probability about
# 0.001 ** (1/k), so the query matches ~0.1% of events whatever k is.
_S_TIERS = {1: range(0, 7), 2: range(7, 14), 3: range(14, 20)}


def _s_constants() -> dict[tuple[str, str], list[float]]:
    table = {}
    for column in S_COLUMNS:
        for op in S_OPS:
            values = []
            for k, slots in _S_TIERS.items():
                base = 0.001 ** (1 / k)
                m = len(slots)
                for j in range(m):
                    p = base * math.exp(-0.3 + 0.6 * j / (m - 1))  # +-30% around the tier
                    values.append(round(100 * (1 - p) if op in (">", ">=") else 100 * p, 3))
            assert len(set(values)) == 20
            table[column, op] = values
    return table


def s_queries(n: int, seed: int = 1, stream: str = "S", columns: tuple[str, ...] = S_COLUMNS,
              constants_of: tuple[str, ...] | None = None) -> list[tuple[str, str]]:
    """S's queries over `columns` of `stream`: 1 to min(3, len(columns)) range
    predicates on distinct columns, with S's constants for that many predicates, so each
    query holds for ~0.1% of uniform events. A column takes the constants of the S
    column of the same name, or (`constants_of`) of the S column at its place."""
    rng = random.Random(f"S-queries-{seed}")
    constants = _s_constants()
    queries = []
    for i in range(n):
        k = rng.randint(1, min(3, len(columns)))
        chosen = rng.sample(columns, k)
        preds = []
        for column, s_column in zip(chosen, constants_of or chosen):
            op = rng.choice(S_OPS)
            value = constants[s_column, op][rng.choice(_S_TIERS[k])]
            preds.append(f"{stream}.{column} {op} {_fmt(value, 3)}")
        queries.append((f"s{i}", f"SELECT * FROM {stream} WHERE " + " AND ".join(preds)))
    return queries


def workload_s(n: int, seed: int = 1) -> Workload:
    """Workload S with `n` queries."""
    queries = s_queries(n, seed)

    def events() -> Iterator[Event]:
        r = random.Random(f"S-events-{seed}").random
        for i in itertools.count():
            yield Event("S", "k0", i, {"a": r() * 100, "b": r() * 100, "c": r() * 100,
                                       "d": r() * 100, "e": r() * 100}, i)

    return Workload("S", {"n": n, "seed": seed}, S_CATALOG, queries, events)


# --------------------------------------------------------------------------- J

J_CATALOG = {
    "B": {"pressure": NUMBER, "temp": NUMBER},
    "H": {"beatrate": NUMBER, "vib": NUMBER},
    "T": {"fluct": NUMBER, "degree": NUMBER, "incr": NUMBER},
}
J_STREAMS = ("B", "H", "T")
J_WINDOWS_S = (2, 5, 10, 20)
J_FACTORS = ("1", "2", "0.5", "1.5", "3", "0.25", "2.5", "0.75", "4", "1.25")
FAMILY_OPS = {"lower": (">", ">="), "upper": ("<", "<=")}
J_TARGET = 0.02
"""Expected results per event of a query's streams, what the constants are tuned for
(results stay moderate, so output does not dominate the measurement)."""


def _j_combinations() -> dict[str, list[tuple]]:
    """The space of predicate lists: a list is (stream(s), column(s), operator family,
    factor) -- exactly what the engine shares one list between (semantics 6)."""
    attr, join, window = [], [], []
    for stream in J_STREAMS:
        for column in J_CATALOG[stream]:
            for fam in FAMILY_OPS:
                attr.append(("A", stream, column, fam))
    for ls, rs in itertools.combinations(J_STREAMS, 2):
        for lc in J_CATALOG[ls]:
            for rc in J_CATALOG[rs]:
                for factor in J_FACTORS:
                    for fam in FAMILY_OPS:
                        join.append(("J", ls, lc, rs, rc, factor, fam))
        for fam in FAMILY_OPS:
            window.append(("W", ls, rs, fam))
    return {"A": attr, "J": join, "W": window}


def _streams_of(key: tuple) -> tuple[str, ...]:
    return (key[1],) if key[0] == "A" else (key[1], key[3]) if key[0] == "J" else (key[1], key[2])


def _columns_of(key: tuple) -> set[tuple[str, str]]:
    """The data columns a predicate list reads (window predicates read only `ts`)."""
    if key[0] == "A":
        return {(key[1], key[2])}
    if key[0] == "J":
        return {(key[1], key[2]), (key[3], key[4])}
    return set()


def _diff_cdf(f: float, k: float) -> float:
    """P(x - f*y <= k) for x, y independent uniform on [0, 100), f > 0 (exact)."""
    a, b = k / 100.0, f  # x/100 <= a + b*y/100 with y/100 uniform on [0, 1)
    y0, y1 = -a / b, (1 - a) / b  # where a + b*y crosses 0 and 1
    lo, hi = min(max(y0, 0.0), 1.0), min(max(y1, 0.0), 1.0)
    return (hi - lo) * a + b * (hi * hi - lo * lo) / 2 + (1 - hi)


def _diff_quantile(f: float, p: float) -> float:
    lo, hi = -100.0 * f - 1, 101.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if _diff_cdf(f, mid) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _j_predicate(key: tuple, s: float, window_ms: int, rng: random.Random) -> tuple[str, str]:
    """(clause, text) of a predicate in list `key` that holds with probability ~`s`."""
    kind, fam = key[0], key[-1]
    op = rng.choice(FAMILY_OPS[fam])
    if kind == "A":  # column uniform on [0, 100)
        value = 100 * (1 - s) if fam == "lower" else 100 * s
        return "WHERE", f"{key[1]}.{key[2]} {op} {_fmt(value)}"
    if kind == "J":  # d = left - f*right, "left op f*right + k"
        _, ls, lc, rs, rc, factor, _ = key
        k = _diff_quantile(float(factor), 1 - s if fam == "lower" else s)
        scaled = f"{rs}.{rc}" if factor == "1" else f"{factor} * {rs}.{rc}"
        return "WHERE", f"{ls}.{lc} {op} {scaled}{_signed(k)}"
    # window: d = left.ts - right.ts, taken as uniform on [-W, W] within MAXWINDOW
    _, ls, rs, _ = key
    k = window_ms * (1 - 2 * s) if fam == "lower" else window_ms * (2 * s - 1)
    return "WINDOW", f"{ls}.ts {op} {rs}.ts{_signed(round(k, -1), 0)}"


J_FORMS = {"A": 12 / 51, "J": 5 / 52}
"""Share of the attribute and of the join predicate lists that are equalities in
J-forms: 12 of the 51 attribute and 5 of the 52 join predicates of the thesis's
example queries (Figures 3.1, 3.3, 5.1, 5.8 and 5.13-5.15) are equalities."""
EQ_VALUES = 100
"""J-forms column values are the integers 0..99: an equality holds on 1 value in 100."""


def _is_equality(key: tuple, seed: int) -> bool:
    """Whether J-forms writes the predicates of list `key` as equalities: decided per
    list (not per predicate), so predicates that share a list in J share one in J-forms."""
    share = J_FORMS.get(key[0], 0.0)
    return random.Random(f"J-forms-{key}-{seed}").random() < share


def _mirror(op: str) -> str:
    return {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}[op]


def _j_form(key: tuple, s: float, window_ms: int, rng: random.Random, equality: bool) -> tuple[str, str]:
    """(clause, text) of a J-forms predicate in list `key` holding with probability ~`s`
    (an equality: ~1/EQ_VALUES), written in one of the forms the language normalizes
    to that list: the constant or the scaled column on either side, the offset beside
    either column, a division instead of a factor."""
    kind = key[0]
    if kind == "W":
        clause, text = _j_predicate(key, s, window_ms, rng)
        left, op, right = text.split(" ", 2)
        if rng.random() < 0.5:
            return clause, f"{right} {_mirror(op)} {left}"
        return clause, text
    if kind == "A":
        column = f"{key[1]}.{key[2]}"
        if not equality:
            _, text = _j_predicate(key, s, window_ms, rng)
            _, op, value = text.split(" ", 2)
            return "WHERE", text if rng.random() < 0.5 else f"{value} {_mirror(op)} {column}"
        v = rng.randrange(EQ_VALUES)
        form = rng.randrange(3)
        if form == 0:
            return "WHERE", f"{column} = {v}"
        if form == 1:
            return "WHERE", f"{column} * 2 = {2 * v}"
        return "WHERE", f"{column} - 50 = {v - 50}"
    _, ls, lc, rs, rc, factor, fam = key
    if equality:
        op, k = "=", float(rng.randint(-5, 5))
    else:
        op = rng.choice(FAMILY_OPS[fam])
        k = round(_diff_quantile(float(factor), 1 - s if fam == "lower" else s), 2)
    left, right = f"{ls}.{lc}", f"{rs}.{rc}"
    scaled = right if factor == "1" else f"{right} * {factor}"
    form = rng.randrange(4)
    if form == 0:  # l op f*r + k
        return "WHERE", f"{left} {op} {factor} * {right}{_signed(k)}"
    if form == 1:  # r*f + k op' l
        return "WHERE", f"{scaled}{_signed(k)} {_mirror(op)} {left}"
    if form == 2:  # l - k op f*r
        return "WHERE", f"{left}{_signed(-k)} {op} {scaled}"
    return "WHERE", f"({left}{_signed(-k)}) / {factor} {op} {right}"  # (l - k)/f op r


def j_queries(n: int, overlap: float, seed: int = 1, rate: float = 50.0,
              target: float = J_TARGET, forms: bool = False) -> tuple[list[tuple[str, str]], dict]:
    """`n` join queries; `overlap` is the target share of predicates that go into a
    predicate list some earlier query already uses ("overlap"), the rest into a list
    no query uses yet ("new"). When the wanted kind is impossible (no earlier list fits
    the query's streams, or every list of that kind is taken) the other is used and
    counted, so the achieved share is reported next to the target. With `forms`, the
    same lists are written as J-forms writes them (`_j_form`)."""
    rng = random.Random(f"J-queries-{n}-{overlap}-{seed}")
    space = _j_combinations()
    used: set[tuple] = set()
    stats = {"predicates": 0, "overlapping": 0, "forced_new": 0, "forced_overlap": 0,
             "dropped": 0}
    forced_by_kind = {"A": 0, "J": 0, "W": 0}
    pools: dict[tuple[str, tuple[str, ...]], list[tuple]] = {}
    queries = []
    for i in range(n):
        streams = tuple(sorted(rng.sample(J_STREAMS, rng.choice((2, 3)))))
        window_s = rng.choice(J_WINDOWS_S)
        # Joins first, then attributes, then the window predicate. Within one query a
        # column is used by at most one predicate, so its predicates are independent
        # (the columns are) and the constants below give the intended result rate;
        # a join is only taken if it leaves a column for the attribute predicate.
        slots = ["J"] * rng.randint(1, 2) + ["A"] * rng.randint(1, 2) + ["W"]
        free_columns = {(s, c) for s in streams for c in J_CATALOG[s]}
        chosen: list[tuple] = []
        for kind in slots:
            pool = pools.get((kind, streams))
            if pool is None:
                pool = pools[kind, streams] = [k for k in space[kind]
                                              if set(_streams_of(k)) <= set(streams)]
            free = [k for k in pool if k not in chosen and _columns_of(k) <= free_columns
                    and (kind != "J" or len(free_columns) >= 3)]
            if kind == "W" and len(streams) == 3:  # connect all three streams
                joined = {frozenset(_streams_of(k)) for k in chosen if k[0] == "J"}
                free = [k for k in free if frozenset(_streams_of(k)) not in joined] or free
            if not free:
                stats["dropped"] += 1  # e.g. a second join on B, H would use every column
                continue
            old = [k for k in free if k in used]
            new = [k for k in free if k not in used]
            if rng.random() < overlap:
                if old:
                    key = rng.choice(old)
                else:
                    key = rng.choice(new)
                    if i:
                        stats["forced_new"] += 1
            elif new:
                key = rng.choice(new)
            else:
                key = rng.choice(old)
                stats["forced_overlap"] += 1
                forced_by_kind[kind] += 1
            stats["overlapping"] += key in used
            stats["predicates"] += 1
            chosen.append(key)
            free_columns -= _columns_of(key)
        slots = [k[0] for k in chosen]
        used.update(chosen)
        # Constants: expected combinations per event of the query's streams are about
        # (k/3) * (rate * W)^(k-1); spread the selectivity that leaves `target` results.
        k = len(streams)
        combos = (k / 3) * (rate * window_s) ** (k - 1)
        s_window = rng.uniform(0.3, 0.7)
        equal = {key for key in chosen if forms and _is_equality(key, seed)}
        others = len(slots) - 1 - len(equal)
        rest = target / combos / s_window * EQ_VALUES ** len(equal)
        s_other = min(0.9, max(0.0001, rest ** (1 / others))) if others else 0.0
        clauses: dict[str, list[str]] = {"WINDOW": [], "WHERE": []}
        for key in chosen:
            s = min(0.95, s_window if key[0] == "W" else s_other * math.exp(rng.uniform(-0.2, 0.2)))
            if forms:
                clause, text = _j_form(key, s, window_s * 1000, rng, key in equal)
            else:
                clause, text = _j_predicate(key, s, window_s * 1000, rng)
            clauses[clause].append(text)
        text = (f"SELECT *\nFROM {', '.join(streams)}\n"
                f"WINDOW {' AND '.join(clauses['WINDOW'])}\n"
                f"MAXWINDOW {window_s} sec\n"
                f"WHERE {' AND '.join(clauses['WHERE'])}")
        queries.append((f"j{i}", text))
    achieved = stats["overlapping"] / max(1, stats["predicates"])
    return queries, {**stats, "achieved_overlap": achieved, "lists_used": len(used),
                     "space": {kind: len(v) for kind, v in space.items()},
                     "forced_overlap_by_kind": forced_by_kind}


def j_events(keys: int = 20, rate: float = 50.0, base_keys: int = 20,
             seed: int = 1, integers: bool = False) -> Callable[[], Iterator[Event]]:
    """B, H, T events, in timestamp order. The total event rate is `rate` events/s per
    stream per key at `base_keys` keys, spread over `keys` keys (J-keys keeps the total
    rate and spreads it over 10,000 keys). Each (stream, key) emits one event every
    `period` ms at its own fixed phase; column values are uniform on [0, 100), or with
    `integers` the integers 0..99 (J-forms: the same draws, rounded down)."""
    period = round(1000 * keys / (rate * base_keys))
    rng = random.Random(f"J-phases-{keys}-{seed}")
    slots = sorted((rng.randrange(period), stream, f"k{key}")
                   for stream in J_STREAMS for key in range(keys))
    columns = {s: tuple(J_CATALOG[s]) for s in J_STREAMS}

    def events() -> Iterator[Event]:
        r = random.Random(f"J-events-{keys}-{seed}").random
        position = 0
        for cycle in itertools.count():
            base = cycle * period
            for phase, stream, key in slots:
                values = {c: r() * 100 for c in columns[stream]}
                if integers:
                    values = {c: int(v) for c, v in values.items()}
                yield Event(stream, key, base + phase, values, position)
                position += 1

    return events


def workload_j(n: int, overlap: float = 0.5, keys: int = 20, seed: int = 1,
               rate: float = 50.0, base_keys: int = 20, forms: bool = False) -> Workload:
    """Workload J (J-keys with keys=10000, J-forms with `forms`): `n` queries at the
    `overlap` level.

    The events: `rate` events/s per stream per key at `base_keys` keys, that total
    spread over `keys` keys. The queries (and their constants, tuned for `rate` per
    key) do not depend on `keys`, so J-keys runs exactly J's queries. Tests shrink
    `rate` and `base_keys` to get a small instance."""
    queries, stats = j_queries(n, overlap, seed, rate, forms=forms)
    name = "J-forms" if forms else "J" if keys == base_keys else "J-keys"
    params = {"n": n, "overlap": overlap, "keys": keys, "seed": seed, "rate": rate, "base_keys": base_keys}
    if forms:
        params["forms"] = True
    return Workload(name, params, J_CATALOG, queries, j_events(keys, rate, base_keys, seed, forms), info=stats)


# --------------------------------------------------------------------------- D

D_QUERY = next(json.loads(line)["text"] for line in
               (Path(__file__).resolve().parents[1] / "examples" / "icu" / "queries.jsonl").open()
               if json.loads(line)["id"] == "fig58")
"""Thesis Figure 5.8 exactly as printed, from the bundled example (one copy in the repo)."""

D_VARIANT = """Select *
From B,H,T
Window B.ts <= T.ts{w1} and H.ts <= T.ts{w2}
MaxWindow 20sec
Where B.pressure < {p} and
      H.beatrate > {b} and
      B.pressure <= H.vib{j1} and
      B.ts <= H.ts{w3} and
      T.fluct lt {f} and
      B.temp lt= T.degree{j2} and
      H.vib lt= T.fluct{j3}"""


def d_queries(variants: int = 20, seed: int = 1) -> list[tuple[str, str]]:
    """Figure 5.8 and `variants` copies with other constants (same predicate lists)."""
    rng = random.Random(f"D-queries-{seed}")
    queries = [("d0", D_QUERY)]
    for i in range(1, variants + 1):
        queries.append((f"d{i}", D_VARIANT.format(
            p=rng.randint(85, 95), b=rng.randint(110, 120), f=rng.randint(190, 210),
            j1=_signed(rng.choice((-4, -2, 0, 2, 4)), 0), j2=_signed(rng.choice((-1, 0, 1)), 0),
            j3=_signed(rng.choice((-10, -5, 0, 5, 10)), 0),
            w1=_signed(rng.choice((0, 0, 500, 1000)), 0),
            w2=_signed(rng.choice((0, 0, 500, 1000)), 0),
            w3=_signed(rng.choice((0, 0, 500, 1000)), 0))))
    return queries


def d_events(cycles: int = 16, keys: int = 2, per_cycle: int = 60, cycle_ms: int = 45_000,
             seed: int = 1, hold: tuple[float, float] = (0.05, 0.95)
             ) -> Callable[[], Iterator[Event]]:
    """The drifting data. Per key, every `cycle_ms` each stream emits `per_cycle` events
    (evenly spaced, at its own phase), active for 20 s, then the key is quiet for the
    rest of the cycle so consecutive cycles never meet within MAXWINDOW 20 s.

    First half ("attributes select"): B.pressure, H.beatrate and T.fluct rarely satisfy
    the attribute predicates (about 5% each); B and H fill the first 18 s and T the last
    2 s, so `B.ts <= T.ts`, `H.ts <= T.ts` hold for every B/H/T combination in reach.
    Second half ("windows select"): the attributes hold ~95% of the time, and T fills
    the first 2 s, before B and H, so the window predicates rarely hold. `hold` is the
    probability of an attribute predicate holding in each half.
    """
    keys_ = [f"k{k}" for k in range(keys)]

    def schedule(cycle: int, rng: random.Random) -> list[tuple[int, str, str]]:
        second_half = cycle >= cycles // 2
        t0 = cycle * cycle_ms
        out = []
        for key in keys_:
            spans = {"B": (0, 18_000), "H": (0, 18_000), "T": (18_000, 20_000)}
            if second_half:
                spans = {"B": (2_000, 20_000), "H": (2_000, 20_000), "T": (0, 2_000)}
            for stream, (a, b) in spans.items():
                step = (b - a) / per_cycle
                phase = rng.random() * step
                for j in range(per_cycle):
                    out.append((t0 + a + int(phase + j * step), stream, key))
        out.sort()
        return out

    def values(stream: str, second_half: bool, r: random.Random) -> dict[str, float]:
        holds = r.random() < hold[second_half]  # the attribute predicate of this stream
        if stream == "B":
            pressure = r.uniform(60, 84) if holds else r.uniform(96, 180)
            return {"pressure": pressure, "temp": r.uniform(35, 42)}
        if stream == "H":
            beatrate = r.uniform(121, 160) if holds else r.uniform(50, 109)
            return {"beatrate": beatrate, "vib": r.uniform(60, 200)}
        fluct = r.uniform(100, 189) if holds else r.uniform(211, 300)
        return {"fluct": fluct, "degree": r.uniform(35, 42), "incr": r.uniform(0, 10)}

    def events() -> Iterator[Event]:
        r = random.Random(f"D-values-{seed}")
        position = 0
        for cycle in range(cycles):
            second_half = cycle >= cycles // 2
            for ts, stream, key in schedule(cycle, r):
                yield Event(stream, key, ts, values(stream, second_half, r), position)
                position += 1

    return events


def workload_d(cycles: int = 16, keys: int = 2, per_cycle: int = 60, seed: int = 1,
               variants: int = 20, hold: tuple[float, float] = (0.05, 0.95)) -> Workload:
    """Workload D: Figure 5.8 + `variants` queries; the checkpoint is the shift."""
    length = cycles * keys * 3 * per_cycle
    return Workload("D", {"cycles": cycles, "keys": keys, "per_cycle": per_cycle, "seed": seed,
                          "variants": variants, "hold": list(hold)},
                    J_CATALOG, d_queries(variants, seed),
                    d_events(cycles, keys, per_cycle, seed=seed, hold=(hold[0], hold[1])),
                    length=length, checkpoints=(length // 2,))


# --------------------------------------------------------------------------- lookup

def build(name: str, **params) -> Workload:
    """A workload by name ("S", "J", "J-keys", "J-forms", "D") and its parameters."""
    if name == "S":
        return workload_s(**params)
    if name in ("J", "J-keys"):
        return workload_j(**params)
    if name == "J-forms":
        return workload_j(**{**params, "forms": True})
    if name == "D":
        return workload_d(**params)
    raise ValueError(f"unknown workload {name!r}")
