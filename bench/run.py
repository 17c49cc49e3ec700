"""The one benchmark command.

    python -m bench.run [--quick] [--only S,J,D] [--repeats 3] [--out docs/benchmarks.md]
                        [--peers esper,flink]

Runs the standard workloads (docs/workloads.md) -- each measurement in a fresh
subprocess (`bench.measure`) -- with the Juggler engine and the naive per-query
baseline in the same run, prints the tables, writes the report (date, machine, commit,
tables, targets) and draws the figures next to it. Reported numbers are MEDIANS over
the repeats; engine/naive ratios are computed per repeat, from measurements taken next
to each other, and their median is reported. Repeats are the outer loop, so slow drift
of a shared machine hits every configuration alike.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from bench.machine import machine
from bench.measure import ROOT, measure
from bench.peers import report as peer_report
from bench.report_sections import block, carry_over

ORDERS = ("adaptive", "AJW", "AWJ", "JAW", "JWA", "WAJ", "WJA")
J_EVENT_RATE = 3000  # events per second of event time in J and J-keys (3 streams x 20 keys x 50)
J_PREFILL = 20 * J_EVENT_RATE  # 20 s of event time: the largest MAXWINDOW
SLOW_SECONDS = 15.0  # a measurement whose first run timed longer than this is not repeated
J_STEADY_NAIVE = (1, 10)  # sizes at which the baseline is also timed at steady state (once)


@dataclass(frozen=True)
class Plan:
    s_sizes: tuple[int, ...]
    j_sizes: tuple[int, ...]
    j_overlaps: tuple[float, ...]
    j_keys: bool
    d_cycles: int
    engine_seconds: float  # minimum timed work per engine measurement
    j_engine_seconds: float  # the same for J at steady state (few, very unequal events)
    engine_max_seconds: float
    naive_seconds: float  # wall budget of a baseline measurement
    passes_seconds: float
    s_naive_prefix: int  # at most this many events for the baseline
    j_naive_prefix: int
    repeats: int


FULL = Plan(s_sizes=(1, 10, 100, 1000, 10000), j_sizes=(1, 10, 100, 1000),
            j_overlaps=(0.25, 0.5, 0.75), j_keys=True, d_cycles=16, engine_seconds=2.0,
            j_engine_seconds=4.0,
            engine_max_seconds=30.0, naive_seconds=6.0, passes_seconds=1.0,
            s_naive_prefix=50_000, j_naive_prefix=20_000, repeats=3)
QUICK = Plan(s_sizes=(1, 10, 100), j_sizes=(1, 10), j_overlaps=(0.5,), j_keys=False,
             d_cycles=8, engine_seconds=1.0, j_engine_seconds=1.0, engine_max_seconds=10.0,
             naive_seconds=2.0,
             passes_seconds=0.5, s_naive_prefix=20_000, j_naive_prefix=5_000, repeats=1)


# --------------------------------------------------------------------------- running

class Runner:
    def __init__(self, plan: Plan, only: set[str], log: Callable[[str], None],
                 services: Path | None = None) -> None:
        self.plan = plan
        self.services = services
        self.only = only
        self.log = log
        self.data: dict[tuple, list[dict]] = {}
        self.started = time.monotonic()

    def _measure(self, key: tuple, spec: dict) -> dict:
        previous = self.data.get(key, [])
        if previous and all(r.get("seconds", 0) > SLOW_SECONDS for r in previous):
            self.log(f"  {'/'.join(map(str, key))}: not repeated (first run timed "
                     f"{previous[0]['seconds']:.0f} s)")
            return previous[0]
        t0 = time.monotonic()
        result = measure(spec, timeout=600, services=self.services)
        self.data.setdefault(key, []).append(result)
        if "error" in result:
            self.log(f"  {key}: ERROR {result['error']}")
        else:
            rate = result.get("events_per_s")
            self.log(f"  [{time.monotonic() - self.started:6.0f}s] {'/'.join(map(str, key)):28s} "
                     f"{_num(rate):>10s} ev/s over {result.get('events')} events "
                     f"({time.monotonic() - t0:.1f}s wall)")
        return result

    def run(self) -> None:
        p = self.plan
        for rep in range(p.repeats):
            self.log(f"repeat {rep + 1}/{p.repeats}")
            if "S" in self.only:
                for n in p.s_sizes:
                    self._s(n)
            if "J" in self.only:
                for n, overlap in j_configs(p):
                    self._j(n, overlap)
                    if rep == 0 and n in J_STEADY_NAIVE and overlap == 0.5:
                        self._measure(("J", n, overlap, "naive-steady"), {
                            "workload": "J", "params": {"n": n, "overlap": overlap},
                            "engine": "naive", "config": {"retention": 20000},
                            "prefill": J_PREFILL, "min_seconds": p.naive_seconds,
                            "max_seconds": p.naive_seconds, "hard_seconds": 20.0, "chunk": 50})
                for n in p.j_sizes:
                    self._measure(("J-forms", n, 0.5, "engine"), {
                        "workload": "J-forms", "params": {"n": n, "overlap": 0.5},
                        "engine": "engine", "config": {"retention": 20000},
                        "prefill": J_PREFILL, "min_seconds": p.j_engine_seconds,
                        "max_seconds": p.engine_max_seconds})
                if p.j_keys:
                    self._measure(("J-keys", 100, 0.5, "engine"), {
                        "workload": "J-keys", "params": {"n": 100, "overlap": 0.5, "keys": 10000},
                        "engine": "engine", "config": {"retention": 20000},
                        "prefill": J_PREFILL, "min_seconds": p.j_engine_seconds,
                        "max_seconds": p.engine_max_seconds})
            if "D" in self.only:
                for order in ORDERS:
                    self._measure(("D", order), {
                        "workload": "D", "params": {"cycles": p.d_cycles}, "engine": "engine",
                        "mode": "fixed", "config": {"order": order}})

    def _s(self, n: int) -> None:
        p = self.plan
        self._measure(("S", n, "engine"), {
            "workload": "S", "params": {"n": n}, "engine": "engine",
            "min_seconds": p.engine_seconds, "max_seconds": p.engine_max_seconds})
        self._measure(("S", n, "naive"), {
            "workload": "S", "params": {"n": n}, "engine": "naive",
            "min_seconds": p.naive_seconds, "max_seconds": p.naive_seconds,
            "hard_seconds": 3 * p.naive_seconds, "max_events": p.s_naive_prefix, "chunk": 500})

    def _j(self, n: int, overlap: float) -> None:
        p = self.plan
        params = {"n": n, "overlap": overlap}
        self._measure(("J", n, overlap, "engine"), {
            "workload": "J", "params": params, "engine": "engine",
            "config": {"retention": 20000}, "prefill": J_PREFILL,
            "min_seconds": p.j_engine_seconds, "max_seconds": p.engine_max_seconds})
        naive = self._measure(("J", n, overlap, "naive"), {
            "workload": "J", "params": params, "engine": "naive",
            "min_seconds": p.naive_seconds, "max_seconds": p.naive_seconds,
            "hard_seconds": 3 * p.naive_seconds, "max_events": p.j_naive_prefix, "chunk": 500})
        prefix = naive.get("events") or 0
        if prefix:
            self._measure(("J", n, overlap, "engine-prefix"), {
                "workload": "J", "params": params, "engine": "engine", "mode": "passes",
                "max_events": prefix, "min_seconds": p.passes_seconds})


def j_configs(plan: Plan) -> list[tuple[int, float]]:
    """n = 1 has no overlap (one query), so it is measured once, at 0.5."""
    out = []
    for n in plan.j_sizes:
        for overlap in ((0.5,) if n == 1 else plan.j_overlaps):
            out.append((n, overlap))
    return out


# --------------------------------------------------------------------------- summaries

def _ok(results: list[dict]) -> list[dict]:
    return [r for r in results if "error" not in r and r.get("events_per_s")]


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _med(data: dict, key: tuple, field: str) -> float | None:
    return _median([r.get(field) for r in _ok(data.get(key, []))])


def _spread(data: dict, key: tuple, field: str = "events_per_s") -> tuple[float, float] | None:
    values = [r[field] for r in _ok(data.get(key, [])) if r.get(field) is not None]
    return (min(values), max(values)) if values else None


def _ratio(data: dict, num: tuple, den: tuple) -> float | None:
    """Median over repeats of num/den, each pair measured in the same repeat."""
    a, b = data.get(num, []), data.get(den, [])
    ratios = []
    for x, y in zip(a, b):
        if "error" in x or "error" in y or not x.get("events_per_s") or not y.get("events_per_s"):
            continue
        ratios.append(x["events_per_s"] / y["events_per_s"])
    return _median(ratios)


def _num(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    if x == 0:
        return "0"
    if abs(x) >= 10 ** digits:
        return f"{x:,.0f}"
    return f"{x:,.{max(0, digits - 1 - int(_floor_log10(abs(x))))}f}"


def _floor_log10(x: float) -> int:
    import math
    return math.floor(math.log10(x))


def _mb(kb: float | None) -> str:
    return "n/a" if kb is None else f"{kb / 1024:.0f}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w)
                              for i, (c, w) in enumerate(zip(r, widths))) + " |" for r in rows]
    return "\n".join([line, sep, *body])


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**met**" if ok else "**not met**")


class Report:
    def __init__(self, runner: Runner) -> None:
        self.data = runner.data
        self.plan = runner.plan
        self.only = runner.only
        self.targets: list[tuple[str, str, str]] = []  # (target, measured, verdict)

    # S ------------------------------------------------------------------------------
    def s_table(self) -> str:
        d = self.data
        rows = []
        for n in self.plan.s_sizes:
            e, nv = ("S", n, "engine"), ("S", n, "naive")
            rows.append([
                f"{n:,}", _num(_med(d, e, "events_per_s")), _num(_med(d, nv, "events_per_s")),
                _num(_med(d, nv, "events"), 2), _num(_ratio(d, e, nv)) + "x",
                _num(_med(d, e, "results_per_event")), _mb(_med(d, e, "peak_rss_kb")),
                _mb(_med(d, nv, "peak_rss_kb")), _num(_med(d, e, "compile_s") or 0, 2)])
        return _table(["queries", "engine ev/s", "naive ev/s", "naive events", "engine/naive",
                       "results/event", "engine peak MB", "naive peak MB", "compile s"], rows)

    def s_targets(self) -> None:
        d = self.data
        one, hundred, thousand = (_med(d, ("S", n, "engine"), "events_per_s") for n in (1, 100, 1000))
        if one and thousand:
            share = thousand / one
            self.targets.append((
                "S: engine at 1,000 queries >= 1/3 of engine at 1 query",
                f"{_num(thousand)} / {_num(one)} = {share:.2f}"
                + ("" if share >= 1 / 3 else f" ({(1 / 3 - share) / (1 / 3):.0%} short)"),
                _verdict(share >= 1 / 3)))
        if hundred:
            self.targets.append((
                "S: engine >= 100,000 events/s at 100 queries", f"{_num(hundred)} ev/s"
                + ("" if hundred >= 1e5 else f" ({1 - hundred / 1e5:.0%} short)"),
                _verdict(hundred >= 1e5)))

    # J ------------------------------------------------------------------------------
    def j_table(self) -> str:
        d = self.data
        rows = []
        for n, overlap in j_configs(self.plan):
            e, nv, ep = (("J", n, overlap, r) for r in ("engine", "naive", "engine-prefix"))
            ok = _ok(d.get(e, []))
            info: dict[str, object] = (ok[0].get("info") or {}) if ok else {}
            achieved = info.get("achieved_overlap")
            rate = _num(_med(d, e, "events_per_s"))
            below = [r["events_per_s_below"] for r in d.get(e, []) if "events_per_s_below" in r]
            if rate == "n/a" and below:
                rate = f"< {_num(max(below))}"
            rows.append([
                f"{n:,}", "-" if n == 1 else f"{overlap:.0%}",
                "-" if achieved is None or n == 1 else f"{achieved:.0%}",
                rate, _num(_med(d, e, "events"), 2),
                _num(_med(d, e, "results_per_s")), _num(_med(d, e, "results_per_event")),
                _num(_med(d, e, "candidates_per_event")), _num(_med(d, e, "candidates_per_result")),
                _num(_med(d, e, "held"), 2), _mb(_med(d, e, "peak_rss_kb")),
                _num(_med(d, nv, "events_per_s")), _num(_med(d, nv, "events"), 2),
                _num(_med(d, ep, "events_per_s")), _num(_ratio(d, ep, nv)) + "x"])
        return _table(["queries", "overlap", "achieved", "engine ev/s", "events timed",
                       "results/s", "results/event", "candidates/event", "candidates/result",
                       "held events", "peak MB",
                       "naive ev/s (prefix)", "prefix events", "engine ev/s (same prefix)",
                       "engine/naive"], rows)

    def j_overlap_notes(self) -> list[str]:
        notes = []
        for n, overlap in j_configs(self.plan):
            info = next((r.get("info") for r in _ok(self.data.get(("J", n, overlap, "engine"), []))), None)
            if not info or n == 1:
                continue
            forced = info.get("forced_overlap", 0)
            if forced:
                kinds = ", ".join(f"{k}: {v}" for k, v in info.get("forced_overlap_by_kind", {}).items() if v)
                notes.append(f"- n = {n:,}, target {overlap:.0%}: {forced} of {info['predicates']} "
                             f"predicates wanted a new list but none was left ({kinds}); "
                             f"{info['lists_used']} of {sum(info['space'].values())} lists in use.")
        return notes

    def j_forms_table(self) -> str | None:
        """J-forms beside J (50% overlap), each measured at steady state the same way."""
        d = self.data
        rows = []
        for n in self.plan.j_sizes:
            forms, base = ("J-forms", n, 0.5, "engine"), ("J", n, 0.5, "engine")
            if not _ok(d.get(forms, [])):
                continue
            rows.append([f"{n:,}", _num(_med(d, base, "events_per_s")), _num(_med(d, forms, "events_per_s")),
                         _num(_med(d, base, "results_per_event")), _num(_med(d, forms, "results_per_event")),
                         _num(_med(d, base, "candidates_per_result")),
                         _num(_med(d, forms, "candidates_per_result"))])
        if not rows:
            return None
        return _table(["queries", "J ev/s", "J-forms ev/s", "J results/event", "J-forms results/event",
                       "J candidates/result", "J-forms candidates/result"], rows)

    def j_keys_table(self) -> str | None:
        d = self.data
        k, base = ("J-keys", 100, 0.5, "engine"), ("J", 100, 0.5, "engine")
        self.jkeys = None
        if not _ok(d.get(k, [])):
            return None

        def state(key):
            """KB of per-key state: the operator's own count where it gives one (RSS
            also holds what the allocator kept from freed temporaries)."""
            return _median([r["state_bytes"] / 1024 if "state_bytes" in r
                            else r["rss_after_kb"] - r["rss_empty_kb"]
                            for r in _ok(d.get(key, [])) if "rss_empty_kb" in r])

        rows = []
        for label, key in (("20", base), ("10,000", k)):
            if _ok(d.get(key, [])):
                rows.append([label, _num(_med(d, key, "events_per_s")),
                             _num(_med(d, key, "held"), 2), _mb(_med(d, key, "peak_rss_kb")),
                             _mb(state(key))])
        many, few = state(k), state(base)
        held_many, held_few = _med(d, k, "held"), _med(d, base, "held")
        if many is not None and few is not None and held_few:
            assert held_many is not None  # counted in the runs `many` is from (the engine's)
            raw = (many - few) * 1024 / (10000 - 20)
            per_held = few * 1024 / held_few  # bytes per held event at 20 keys
            net = (many - few) * 1024 - per_held * (held_many - held_few)
            self.jkeys = {"raw": raw, "net": net / (10000 - 20), "per_held": per_held,
                          "extra_held": held_many - held_few}
        return _table(["keys", "engine ev/s", "held events", "peak MB", "state MB"], rows)

    def j_steady_table(self) -> str | None:
        d = self.data
        rows = []
        for n, overlap in j_configs(self.plan):
            key = ("J", n, overlap, "naive-steady")
            if n not in J_STEADY_NAIVE or key not in d:
                continue
            runs = d[key]
            naive = _med(d, key, "events_per_s")
            below = [r["events_per_s_below"] for r in runs if "events_per_s_below" in r]
            engine = _med(d, ("J", n, overlap, "engine"), "events_per_s")
            naive_s = _num(naive) if naive else (f"< {_num(max(below))}" if below else "n/a")
            ratio = (_num(engine / naive) + "x") if naive and engine else (
                f"> {_num(engine / max(below))}x" if below and engine else "n/a")
            rows.append([f"{n:,}", _num(engine), naive_s, _num(_med(d, key, "events"), 2), ratio])
        if not rows:
            return None
        return _table(["queries", "engine ev/s (steady)", "naive ev/s (steady)",
                       "naive events", "engine/naive"], rows)

    def j_targets(self) -> None:
        d = self.data
        key_n, key_o = 100, 0.5
        ratio = _ratio(d, ("J", key_n, key_o, "engine-prefix"), ("J", key_n, key_o, "naive"))
        if ratio is not None:
            self.targets.append(("J: engine >= 10x the baseline at 100 queries, 50% overlap",
                                 f"{_num(ratio)}x (same prefix)", _verdict(ratio >= 10)))
        helds = [(n, h) for n in self.plan.j_sizes
                 if (h := _med(d, ("J", n, 0.5, "engine"), "held"))]
        if len(helds) > 1:
            bound = J_EVENT_RATE * (20 + 2)  # 20 s horizon + up to two 1 s WES buckets
            self.targets.append((f"J: held events do not grow with n (all <= {bound:,} = "
                                 "3,000 ev/s x (20 s horizon + 2 buckets))",
                                 ", ".join(f"n={n:,}: {h:,.0f}" for n, h in helds),
                                 _verdict(all(h <= bound for _, h in helds))))
        rates = [(n, r) for n in self.plan.j_sizes
                 if (r := _med(d, ("J", n, 0.5, "engine"), "events_per_s"))]
        if rates:
            self.targets.append((
                f"J: engine keeps up with event time ({J_EVENT_RATE:,} events/s) at steady state, "
                "50% overlap (informational)",
                ", ".join(f"n={n:,}: {r / J_EVENT_RATE:.2g}x" for n, r in rates), ""))
        peaks = [(n, p) for n in self.plan.j_sizes
                 if (p := _med(d, ("J", n, 0.5, "engine"), "peak_rss_kb"))]
        if len(peaks) > 1:
            self.targets.append(("J: peak memory by n (50% overlap; informational)",
                                 ", ".join(f"n={n:,}: {p / 1024:.0f} MB" for n, p in peaks), ""))

    # D ------------------------------------------------------------------------------
    def d_rows(self) -> list[dict]:
        out = []
        for order in ORDERS:
            runs = _ok(self.data.get(("D", order), []))
            if not runs:
                continue
            r = runs[0]  # comparison counts are deterministic; rates are medians
            half = r["checkpoints"][0] if r.get("checkpoints") else None
            total, events = r["total_comparisons"], r["events"]
            row = {"order": order, "total": total / events,
                   "first": half["total_comparisons"] / half["events"] if half else None,
                   "second": (total - half["total_comparisons"]) / (events - half["events"]) if half else None,
                   "by_type": {t: c / events for t, c in r["comparisons"].items()},
                   "eps": _median([x["events_per_s"] for x in runs]),
                   "reorders": r["reorders"], "results": r["results"], "events": events}
            out.append(row)
        return out

    def d_table(self) -> str:
        rows = [[r["order"], _num(r["total"]), _num(r["first"]), _num(r["second"]),
                 " / ".join(_num(r["by_type"][t]) for t in "AJW"), _num(r["eps"]),
                 str(r["reorders"]), f"{r['results']:,}"] for r in self.d_rows()]
        return _table(["order", "comparisons/event", "first half", "second half",
                       "A / J / W per event", "events/s", "reorders", "results"], rows)

    def d_targets(self) -> None:
        rows = {r["order"]: r for r in self.d_rows()}
        if "adaptive" not in rows or len(rows) < 7:
            return
        static = [r for o, r in rows.items() if o != "adaptive"]
        best = min(static, key=lambda r: r["total"])
        worst = max(static, key=lambda r: r["total"])
        a = rows["adaptive"]["total"]
        self.targets.append((
            "D: adaptive within 5% of the best static order (comparisons/event)",
            f"adaptive {_num(a)} vs best {best['order']} {_num(best['total'])} "
            f"({a / best['total'] - 1:+.1%})", _verdict(a <= 1.05 * best["total"])))
        self.targets.append((
            "D: adaptive >= 2x fewer comparisons than the worst static order",
            f"worst {worst['order']} {_num(worst['total'])} = {worst['total'] / a:.1f}x adaptive",
            _verdict(worst["total"] >= 2 * a)))


# --------------------------------------------------------------------------- figures

def draw(report: Report, out_dir: Path) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = []
    d, plan = report.data, report.plan
    if "S" in report.only and any(_ok(d.get(("S", n, "engine"), [])) for n in plan.s_sizes):
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for role, label, style in (("engine", "Juggler engine", "o-"),
                                   ("naive", "naive baseline (per query)", "s--")):
            xs, ys, lo, hi = [], [], [], []
            for n in plan.s_sizes:
                m, sp = _med(d, ("S", n, role), "events_per_s"), _spread(d, ("S", n, role))
                if m:
                    assert sp is not None  # the same runs as the median's
                    xs.append(n); ys.append(m); lo.append(m - sp[0]); hi.append(sp[1] - m)
            ax.errorbar(xs, ys, yerr=[lo, hi], fmt=style, capsize=3, label=label)
        ax.set_xscale("log"); ax.set_yscale("log")
        ax.set_xlabel("number of queries"); ax.set_ylabel("events / second")
        ax.set_title("Workload S: selection queries (cf. CACQ Fig. 6a)")
        ax.grid(True, which="both", alpha=0.3); ax.legend()
        fig.tight_layout()
        fig.savefig(out_dir / "bench_selection_throughput.png", dpi=120)
        plt.close(fig)
        drawn.append("bench_selection_throughput.png")
    rows = report.d_rows() if "D" in report.only else []
    if rows:
        import numpy as np
        fig, ax = plt.subplots(figsize=(7.2, 4.2))
        x = np.arange(len(rows))
        for i, (field, label) in enumerate((("first", "first half (attributes select)"),
                                            ("second", "second half (windows select)"),
                                            ("total", "whole run"))):
            ax.bar(x + (i - 1) * 0.27, [r[field] or 0 for r in rows], 0.27, label=label)
        ax.set_xticks(x, [r["order"] for r in rows])
        ax.set_yscale("log"); ax.set_ylabel("comparisons per event")
        ax.set_title("Workload D: drift, comparisons per event by evaluation order")
        ax.grid(True, axis="y", which="both", alpha=0.3); ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / "bench_drift_comparisons.png", dpi=120)
        plt.close(fig)
        drawn.append("bench_drift_comparisons.png")
    if "J" in report.only and any(_ok(d.get(("J", n, 0.5, "engine"), [])) for n in plan.j_sizes):
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for role, label, style in (("engine", "engine, steady state (full windows)", "o-"),
                                   ("naive-steady", "naive baseline, steady state", "x:"),
                                   ("engine-prefix", "engine, baseline's prefix", "^-"),
                                   ("naive", "naive baseline, from empty state", "s--")):
            pts = [(n, _med(d, ("J", n, 0.5, role), "events_per_s")) for n in plan.j_sizes]
            pts = [(n, m) for n, m in pts if m]
            if pts:
                ax.plot(*zip(*pts), style, label=label)
        ax.set_xscale("log"); ax.set_yscale("log")
        ax.set_xlabel("number of queries (50% overlap)"); ax.set_ylabel("events / second")
        ax.set_title("Workload J: join queries")
        ax.grid(True, which="both", alpha=0.3); ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / "bench_join_throughput.png", dpi=120)
        plt.close(fig)
        drawn.append("bench_join_throughput.png")
    return drawn


# --------------------------------------------------------------------------- document



# The report's guide to every benchmark: `document` writes it at the top, since the
# sections other commands own follow the part this module writes.
HOW_TO_RUN = [
    "Each benchmark is a module of `bench/` whose first lines give its command and "
    "options. `python -m bench.run` measures S, J, J-keys and D in process and rewrites "
    "this report down to \"Reproduce\"; the others need a Kafka broker (they start their own "
    "`LocalBroker` unless given one) and each rewrites only its own section, marked by "
    "HTML comments (`section NAME`), which `bench.run` carries over, as it does the "
    "sections written by hand. Figures are medians over repeats; a ratio compares "
    "measurements made in the same run (alternating, when two versions are compared). The "
    "2 cores are shared with other engineers' jobs and, for the Kafka benchmarks, with the "
    "broker, so absolute rates move by tens of percent from hour to hour: each section "
    "gives its run's date and load.",
    "",
    "| section | command |",
    "|---|---|",
    "| S, J, J-keys, D | `python -m bench.run`; one measurement: `python -m bench.measure '<json spec>'` |",
    "| S, J and J-keys: the operator's own targets | `python -m bench.measure`, `python -m bench.peers --peers esper --only S` |",
    "| Registration | `python -m bench.registration`, `python -m bench.restart` |",
    "| K: through Kafka (the service), S through the worker | `python -m bench.kafka_load`, `python -m bench.kafka_selection` |",
    "| Probes | `python -m bench.probes` |",
    "| Latency defaults | `python -m bench.latency_defaults` |",
    "| Peers: Kafka Streams on workload K | `python -m bench.peers --peers kstreams` |",
    "| Workload K on the Faust runtime | `python -m bench.faust_load` |",
    "| Peers: Esper and Flink SQL | `python -m bench.peers`, or `python -m bench.run --peers esper,flink` |",
    "| Spark | `python -m bench.spark_producers`, `python -m bench.spark_backfill` |",
    "| Restore | `python -m bench.restore` |",
    "| Results API and index | `python -m bench.results_api`, `python -m bench.index_row` |",
    "| What was tried and why it was dropped | (the end of this report) |",
    "",
]


def document(report: Report, figures: list[str], info: dict, args, wall: float,
             load_end: str) -> str:
    p = report.plan
    lines = [
        "# Benchmarks",
        "",
        f"Generated by `{info['command']}` on {info['date']} (wall time {wall / 60:.1f} min).",
        "",
        f"- Machine: {info['nproc']} CPUs (`nproc`), {info['cpu']}, {info['memory']} RAM; "
        f"load average {info['load']} at start, {load_end} at the end (shared machine).",
        f"- Code: commit `{info['commit']}` ({info['tree']}; sha256 of `services/juggler/**/*.py` "
        f"and the Rust core's sources (`services/juggler_native`, built into the environment by "
        f"`bin/setup`) as measured: `{info['source']}`, a snapshot taken at the start of the run), "
        f"Python {info['python']}.",
        f"- {p.repeats} repeat(s); every number is the MEDIAN over the repeats, each measurement "
        "in a fresh process; engine/naive ratios are taken per repeat between measurements "
        "made next to each other, then the median.",
        "",
        "Workloads, seeded and regenerated identically for every run, are those "
        "[workloads.md](workloads.md) describes; the generators are in `bench/workloads.py` and "
        "`tests/unit/test_bench_smoke.py` checks that both engines return the same results "
        "on them. Queries are generated as text and compiled with "
        "`juggler.language.compile_query`; compile and registration time is not part of "
        "the rates. Event generation is done in untimed chunks. Peak memory is "
        "`ru_maxrss` of the measuring process (interpreter and compiled queries included).",
        "",
        *HOW_TO_RUN,
    ]
    if report.targets:
        lines += ["## Targets", "", _table(["target", "measured", "verdict"],
                                            [list(t) for t in report.targets]), ""]
    if "S" in report.only:
        lines += [
            "## S: many selection queries", "",
            "One stream `S`, columns a..e uniform on [0, 100), one key. Each query has 1-3 range "
            "predicates on distinct columns; constants come from 20 values per (column, operator) "
            "placed in the tails so that each query matches ~0.1% of events (so results/event "
            "is ~n/1000). "
            f"Engine: at least {p.engine_seconds:g} s of processing. Baseline (`NaiveEngine`): "
            f"stopped after {p.naive_seconds:g} s or {p.s_naive_prefix:,} events, whichever "
            "comes first; its rate is over what it processed ('naive events'). S holds no "
            "state worth the name, so both rates are per-event costs and the ratio compares "
            "them directly.", "",
            report.s_table(), "",
        ]
        if "bench_selection_throughput.png" in figures:
            lines += ["![events/s vs number of selection queries](bench_selection_throughput.png)",
                      "", "Error bars: min-max over the repeats.", ""]
    if "J" in report.only:
        lines += [
            "## J: many join queries", "",
            "Streams B (pressure, temp), H (beatrate, vib), T (fluct, degree, incr), values "
            "uniform on [0, 100); 20 keys; 50 events/s per stream per key in event time (3,000 "
            "events/s in all), in timestamp order. Each query reads 2 or 3 streams and has 1-2 "
            "join, 1-2 attribute and 1 window predicate and a MAXWINDOW from {2, 5, 10, 20} s. "
            "A predicate list is (stream(s), column(s), operator family, factor), as the engine "
            "shares them: 14 attribute lists, 320 join lists (16 column pairs x 10 factors x "
            "2 families) and 6 window lists exist. 'overlap' is the target share of "
            "predicates put into a list an earlier query already uses (with its own constant); "
            "'achieved' is the share the generator reached. Within a query no column is used "
            "twice, so predicates are independent and the constants (tail quantiles) aim at "
            "~0.02 results per query per event.", "",
            "How it is measured:", "",
            f"- *engine ev/s*: steady state. The first 20 s of event time ({J_PREFILL:,} events) "
            "are loaded before the queries are registered, with `EngineConfig(retention=20000)` "
            "(the largest MAXWINDOW), so every window is full from the first timed event; then "
            f"at least {p.j_engine_seconds:g} s of processing (at most {p.engine_max_seconds:g} s; "
            "'events timed' says how many: at large n it is a handful of events, whose costs "
            "differ a lot by stream, so read those rates as orders of magnitude; a "
            f"measurement whose first run timed more than {SLOW_SECONDS:g} s is not repeated). "
            "'held events' is `held_events()` at the end; it is "
            "set by the 20 s horizon (3,000 events/s x 20 s), whatever n is.",
            "- *naive ev/s (prefix)*: the baseline keeps every event and joins each query with "
            "nested loops, so its cost per event grows without bound as events accumulate; it "
            f"runs from an empty state for {p.naive_seconds:g} s or {p.j_naive_prefix:,} events, "
            "whichever comes first, and its rate is over that prefix ('prefix events').",
            "- *engine ev/s (same prefix)* times the engine, fresh, on exactly that prefix "
            "(median of several passes), and *engine/naive* is that rate over the baseline's: "
            "the same events, from the same empty state, so the ratio is conservative: the "
            "baseline is timed where it is cheapest (see the steady-state table below).", "",
            report.j_table(), "",
        ]
        notes = report.j_overlap_notes()
        if notes:
            lines += ["The combination space runs out: there are only 14 attribute and 6 window "
                      "lists, so beyond a few dozen queries every further attribute and window "
                      "predicate overlaps whatever the target, and the achieved overlap exceeds "
                      "the target:", "", *notes, ""]
        if "bench_join_throughput.png" in figures:
            lines += ["![events/s vs number of join queries](bench_join_throughput.png)", ""]
        steady = report.j_steady_table()
        if steady:
            lines += [
                "For scale, the baseline timed once at steady state too (same 20 s prefill and "
                f"retention as the engine, {p.naive_seconds:g} s budget; an event still running "
                "after 20 s is abandoned and the rate given as an upper bound):", "",
                steady, ""]
        jf = report.j_forms_table()
        if jf:
            lines += [
                "### J-forms: the language's other forms", "",
                "J's queries (50% overlap) with the forms the thesis's example queries use, in "
                "their proportions (`bench/workloads.py`, `J_FORMS`): a quarter of the attribute "
                "lists and a tenth of the join lists are equalities (`H.beatrate = 31`, "
                "`T.fluct * 2 = 62`, `B.temp = 1.25 * H.vib + 3`), and every predicate is written "
                "in one of the ways the language normalizes to its list: the constant or the "
                "scaled column on either side, the offset beside either column, a division for "
                "a factor (`T.incr * 2 - 22 >= B.pressure`, `(B.temp + 7.1) / 0.25 < T.degree`, "
                "`H.ts - 490 < B.ts`). The columns hold J's draws rounded down to the integers "
                "0..99, so an equality holds on one value in a hundred; the constants of the "
                "other predicates are retuned so each query still aims at ~0.02 results per "
                "event. Measured as J; J's columns beside it are from the table above.", "",
                jf, "",
            ]
        jk = report.j_keys_table()
        if jk:
            m = report.jkeys
            lines += [
                "### J-keys: 10,000 keys", "",
                "n = 100 at 50% overlap (the same queries), the same total event rate (3,000 "
                "events/s) spread over 10,000 keys, so each (stream, key) emits every 10 s; "
                "measured like J. 'state MB' is the operator's own count of its per-key "
                "state (`NativeEngine.state_bytes()`: keys, held events, value indexes).", "",
                jk, "",
            ]
            if m:
                lines += [
                    f"Memory per key: (state at 10,000 keys - state at 20 keys) / 9,980 = "
                    f"**{_num(m['raw'])} bytes per key**. Part of it is "
                    f"{m['extra_held']:,.0f} more held events (a key only purges when one of its "
                    f"own events arrives, at 1 s bucket granularity); at ~{_num(m['per_held'])} "
                    f"bytes per held event (20-key run), the rest is ~{_num(m['net'])} bytes "
                    "per key of per-key structures.", ""]
    if "D" in report.only:
        rows = report.d_rows()
        events = rows[0]["events"] if rows else 0
        lines += [
            "## D: drift", "",
            'D runs the native operator (`NativeEngine`, `"engine": "engine"` in the measurement '
            "specs) once per evaluation order: `adaptive` (the predicate type manager in "
            "`services/juggler_native/src/ordering.rs`) and the six static orders. "
            "The thesis Figure 5.8 query (as printed) plus 20 variants with other constants "
            "(same predicate lists), over B, H, T; 2 keys. Per key, every 45 s each stream emits "
            f"{60} events within 20 s, then the key is quiet (cycles never meet within "
            f"MAXWINDOW 20 s); {p.d_cycles} cycles, {events:,} events. First half: the "
            "attribute predicates rarely hold (~5%) and T comes after B and H, so the window "
            "predicates `B.ts <= T.ts`, `H.ts <= T.ts` hold; second half: attributes hold "
            "~95% and T comes first, so the window predicates rarely hold. Every order sees "
            "the same events and returns the same results. Comparisons are the engine's own "
            "count (`manager.total_comparisons`: bitset operations, exploitation-structure "
            "probes and the candidates they return, predicate-list probes) divided by events; "
            "they are deterministic. events/s is the median over the repeats.", "",
            report.d_table(), "",
        ]
        if "bench_drift_comparisons.png" in figures:
            lines += ["![comparisons per event by order](bench_drift_comparisons.png)", ""]
    lines += ["## Reproduce", "", "```", "pip install matplotlib lark click "
              "hypothesis pytest", info["command"], "```", "",
              "`--quick` runs a reduced grid (S up to 100 queries, J up to 10, one repeat, "
              "shorter budgets) in under two minutes; `--only S,J,D` picks workloads; "
              "`--json FILE` also saves every raw measurement; `--peers esper,flink` adds "
              "the peer engines on S and J (section below).", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main

def _peers(peers: list[str], only: set[str], quick: bool, repeats: int,
           log: Callable[[str], None], services: Path) -> list[dict]:
    """The peer comparison after the grid: its own sizes (the peers are slow at the
    grid's largest), smaller with --quick, the grid's number of repeats."""
    from bench.peers import compare

    plan = compare.PeerPlan(s_sizes=(1, 10, 100), j_sizes=(1, 10), s_events=50_000,
                            j_events=10_000, repeats=repeats) if quick else \
        compare.PeerPlan(repeats=repeats)
    log("peers: " + ", ".join(peers))
    workloads = (only & {"S", "J"}) | ({"J-forms"} if "J" in only else set())
    return compare.run(peers, workloads, plan, log, services)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="reduced grid, about 2 minutes")
    parser.add_argument("--only", default="S,J,D", help="comma-separated workloads (S, J, D)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="repeats per measurement (default 3, --quick 1)")
    parser.add_argument("--out", default="docs/benchmarks.md",
                        help="report path; figures go next to it ('-' for none)")
    parser.add_argument("--json", default=None, help="also dump the raw measurements here")
    parser.add_argument("--peers", default=None,
                        help="also run these peer engines on S and J: esper, flink (a JDK; "
                             "Flink installs PyFlink into ~/.cache/juggler on first use)")
    args = parser.parse_args(argv)
    only = {w.strip().upper() for w in args.only.split(",") if w.strip()}
    unknown = only - {"S", "J", "D"}
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(sorted(unknown))}; choose from S, J, D")
    peers = None
    if args.peers is not None:
        from bench.peers.__main__ import parse_peers
        try:
            peers = parse_peers(args.peers)
        except argparse.ArgumentTypeError as e:
            parser.error(str(e))
        if "kstreams" in peers:
            parser.error("kstreams runs on K through a broker: python -m bench.peers --peers kstreams")
    plan = QUICK if args.quick else FULL
    if args.repeats is not None:
        if args.repeats < 1:
            parser.error("--repeats must be at least 1")
        plan = Plan(**{**plan.__dict__, "repeats": args.repeats})

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    tmp = tempfile.TemporaryDirectory(prefix="juggler-bench-")
    # Measure one version of the code: a snapshot of services/ taken now, so edits made
    # to the working tree during the run do not mix versions. (The Rust core is the
    # build installed in the environment; its cargo target/ directory is not copied.)
    services = Path(tmp.name) / "services"
    shutil.copytree(ROOT / "services", services,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "target"))
    info = machine(services)
    info["date"] = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    info["command"] = "python -m bench.run" + (" --quick" if args.quick else "") + (
        f" --only {','.join(sorted(only))}" if only != {"S", "J", "D"} else "") + (
        f" --repeats {args.repeats}" if args.repeats is not None else "") + (
        f" --peers {','.join(peers)}" if peers else "")
    log(f"bench: {info['command']} on {info['nproc']} x {info['cpu']}, commit {info['commit']}")
    t0 = time.monotonic()
    try:
        runner = Runner(plan, only, log, services)
        runner.run()
        peer_rows = _peers(peers, only, args.quick, plan.repeats, log, services) if peers else []
    finally:
        tmp.cleanup()
    wall = time.monotonic() - t0

    report = Report(runner)
    if "S" in only:
        report.s_targets()
    if "J" in only:
        report.j_targets()
    if "D" in only:
        report.d_targets()
    if args.json:
        Path(args.json).write_text(json.dumps(
            [{"key": list(k), "runs": v} for k, v in runner.data.items()], default=str, indent=1))

    sections = []
    if "S" in only:
        sections += ["S: many selection queries", report.s_table()]
    if "J" in only:
        sections += ["J: many join queries", report.j_table()]
        steady = report.j_steady_table()
        if steady:
            sections += ["J: baseline at steady state (once)", steady]
        jf = report.j_forms_table()
        if jf:
            sections += ["J-forms (50% overlap)", jf]
        jk = report.j_keys_table()
        if jk:
            sections += ["J-keys (n=100, 50% overlap)", jk]
    if "D" in only:
        sections += ["D: drift (comparisons per event)", report.d_table()]
    if report.targets:
        sections += ["Targets", _table(["target", "measured", "verdict"],
                                       [list(t) for t in report.targets])]
    if peer_rows:
        sections += ["Peers (same event files)", peer_report.table(peer_rows)]
    for i in range(0, len(sections), 2):
        print(f"\n## {sections[i]}\n\n{sections[i + 1]}")
    # (what failed: a measurement's key, or "peers"; why)
    errors: list[tuple[tuple | str, str]] = [
        (k, r["error"]) for k, rs in runner.data.items() for r in rs if "error" in r]
    for key, err in errors:
        print(f"ERROR {key}: {err}", file=sys.stderr)
    if peer_rows:
        for line in peer_report.mismatches(peer_rows):
            errors.append(("peers", line))
            print(f"MISMATCH {line}", file=sys.stderr)

    if args.out != "-":
        out = Path(args.out)
        if not out.is_absolute():
            out = Path.cwd() / out
        out.parent.mkdir(parents=True, exist_ok=True)
        figures = draw(report, out.parent)
        load_end = " ".join(f"{x:.2f}" for x in os.getloadavg())
        previous = out.read_text(encoding="utf-8") if out.exists() else ""
        text = document(report, figures, info, args, wall, load_end)
        if peer_rows:
            text += "\n" + block("peers", peer_report.section(peer_rows, info, info["command"]))
        out.write_text(carry_over(previous, text))
        log(f"wrote {out} and {', '.join(figures) or 'no figures'} ({wall / 60:.1f} min)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
