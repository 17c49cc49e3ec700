"""Run Juggler and the peers on the same files, and check that their results are equal.

For each workload (S, J) the first N events are exported once (`files`); for each number
of queries, Juggler (`reference`, a fresh process) and each peer that takes the
workload run every query over exactly those events from an empty state. Results are
compared as multisets of (query id, source positions in FROM order): a peer's rate is
only worth quoting next to Juggler's if it did the same work.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.peers import esper, files, flink, reference
from bench.workloads import build

Runner = Callable[[files.EventFiles, list, Path, float], dict]
PEERS: dict[str, tuple[Runner, frozenset[str]]] = {
    "esper": (esper.run, frozenset({"S", "J"})),
    "flink": (flink.run, frozenset({"J"})),
}
"""Each peer and the workloads it runs (Esper on S and J, Flink SQL on J)."""


@dataclass(frozen=True)
class PeerPlan:
    s_sizes: tuple[int, ...] = (1, 100, 1000)
    j_sizes: tuple[int, ...] = (1, 10, 100)
    s_events: int = 200_000
    j_events: int = 20_000
    j_overlap: float = 0.5
    repeats: int = 3
    timeout: float = 1800.0
    """Per engine run, in seconds."""


def _multiset(path: str) -> Counter:
    with open(path) as f:
        return Counter(f.read().splitlines())


def check(expected_file: str, got_file: str) -> dict:
    """How a peer's results differ from Juggler's: counts of missing and extra results,
    and a few examples of each (query id TAB positions)."""
    expected, got = _multiset(expected_file), _multiset(got_file)
    missing, extra = expected - got, got - expected
    return {"equal": not missing and not extra, "missing": sum(missing.values()),
            "extra": sum(extra.values()), "missing_examples": sorted(missing)[:3],
            "extra_examples": sorted(extra)[:3]}


def run(peers: list[str], workloads: set[str], plan: PeerPlan, log: Callable[[str], None],
        services: Path | None = None) -> list[dict]:
    """One row per (repeat, workload, queries, engine); Juggler's row first in each group.
    Repeats are the outer loop, as in `bench.run`, so a shared machine's slow drift hits
    every engine alike. `services` is where Juggler's package is taken from (`bench.run`
    passes its snapshot)."""
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="juggler-peers-") as tmp:
        jobs = []
        for name, sizes, count in (("S", plan.s_sizes, plan.s_events),
                                   ("J", plan.j_sizes, plan.j_events)):
            takers = [p for p in peers if p in PEERS and name in PEERS[p][1]]
            if name not in workloads or not takers:
                continue
            params: dict = {"n": 1} if name == "S" else {"n": 1, "overlap": plan.j_overlap}
            exported = files.export(build(name, **params), count, Path(tmp) / name / "events")
            jobs += [(name, params | {"n": n}, takers, exported) for n in sizes]
        for repeat in range(plan.repeats):
            log(f"peers: repeat {repeat + 1}/{plan.repeats}")
            for name, params, takers, exported in jobs:
                work = Path(tmp) / name / f"{params['n']}-{repeat}"
                rows += [row | {"repeat": repeat} for row in
                         _compare(name, params, takers, exported, work, plan, log, services)]
    return rows


def _compare(name: str, params: dict, peers: list[str], exported: files.EventFiles,
             work: Path, plan: PeerPlan, log: Callable[[str], None],
             services: Path | None) -> list[dict]:
    work.mkdir(parents=True)
    label = f"{name} n={params['n']:,}"
    juggler = reference.measure({"workload": name, "params": params,
                                 "events": str(exported.directory),
                                 "out": str(work / "juggler.tsv")}, plan.timeout, services)
    log(f"  {label:12s} juggler {juggler['events_per_s']:>12,.0f} ev/s, "
        f"{juggler['results']:,} results")
    rows = [{"workload": name, "n": params["n"], "engine": "juggler"} | juggler]
    queries = build(name, **params).compiled()
    for peer in peers:
        row = {"workload": name, "n": params["n"], "engine": peer}
        try:
            row |= PEERS[peer][0](exported, queries, work, plan.timeout)
            row |= check(juggler["results_file"], row["results_file"])
            log(f"  {label:12s} {peer:7s} {row['events_per_s']:>12,.0f} ev/s, "
                f"{row['results']:,} results, equal: {row['equal']}")
        except Exception as e:  # a peer that fails is reported, not fatal to the run
            row["error"] = str(e).strip().splitlines()[-1] if str(e).strip() else repr(e)
            log(f"  {label:12s} {peer:7s} ERROR {row['error']}")
        rows.append(row)
    return rows
