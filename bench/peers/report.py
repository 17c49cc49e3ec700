"""The peers table: events/s and peak memory of each engine, Juggler/peer ratios, and
whether the results were equal. Printed by `bench.run --peers` and `python -m
bench.peers`, and kept in the `peers` section of docs/benchmarks.md."""

from __future__ import annotations

import statistics

from bench.peers.compare import PeerPlan


def _rate(x: float | None) -> str:
    return "n/a" if not x else f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _mb(kb: float | None) -> str:
    return "n/a" if not kb else f"{kb / 1024:,.0f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _times(x: float | None) -> str:
    return f"{x:.3g}x" if x else "n/a"


def _equal(row: dict) -> str:
    if "error" in row:
        return f"error: {row['error'][:80]}"
    if row["equal"]:
        return "yes"
    def example(results: list[str]) -> str:
        return f" (e.g. `{results[0].replace(chr(9), ' ')}`)" if results else ""
    return (f"**no**: {row['missing']:,} missing{example(row['missing_examples'])}, "
            f"{row['extra']:,} extra{example(row['extra_examples'])}")


def _median(values: list) -> float | None:
    values = [v for v in values if v]
    return statistics.median(values) if values else None


def _verdict(runs: list[dict]) -> str:
    """"yes" if every repeat's results were equal, else the first bad run's difference."""
    bad = [r for r in runs if "error" in r or not r["equal"]]
    if not bad:
        return "yes"
    return _equal(bad[0]) + (f" ({len(bad)} of {len(runs)} runs)" if len(runs) > 1 else "")


def table(rows: list[dict]) -> str:
    """A markdown table, one line per (workload, queries, peer): medians over the repeats;
    ratios are taken per repeat against Juggler's run of the same repeat, then the median.
    The ratio of rates uses the peer's net rate where it has one (Flink: beyond a
    read-only job of the files)."""
    head = ["workload", "queries", "events", "results", "Juggler candidates/result", "Juggler ev/s", "Juggler peak MB",
            "peer", "peer ev/s", "peer ev/s net", "peer peak MB", "Juggler/peer ev/s",
            "Juggler/peer memory", "results equal"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    juggler = {(r["workload"], r["n"], r["repeat"]): r for r in rows if r["engine"] == "juggler"}
    peers: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["engine"] != "juggler":
            peers.setdefault((r["workload"], r["n"], r["engine"]), []).append(r)
    for (workload, n, engine), runs in peers.items():
        mine = [juggler[workload, n, r["repeat"]] for r in runs]
        ok = [(j, r) for j, r in zip(mine, runs) if "error" not in r]
        has_net = any("net_events_per_s" in r for _, r in ok)
        lines.append("| " + " | ".join([
            workload, f"{n:,}", f"{mine[0]['events']:,}", f"{mine[0]['results']:,}",
            f"{mine[0]['candidates_per_result']:.2f}" if "candidates_per_result" in mine[0] else "n/a",
            _rate(_median([j["events_per_s"] for j in mine])),
            _mb(_median([j["peak_rss_kb"] for j in mine])), engine,
            _rate(_median([r["events_per_s"] for _, r in ok])),
            _rate(_median([r["net_events_per_s"] for _, r in ok])) if has_net else "-",
            _mb(_median([r["peak_rss_kb"] for _, r in ok])),
            _times(_median([_ratio(j["events_per_s"], r.get("net_events_per_s", r["events_per_s"]))
                            for j, r in ok])),
            _times(_median([_ratio(j["peak_rss_kb"], r["peak_rss_kb"]) for j, r in ok])),
            _verdict(runs)]) + " |")
    return "\n".join(lines)


def mismatches(rows: list[dict]) -> list[str]:
    """One line per peer run whose results differ from Juggler's or that failed."""
    return [f"{r['workload']} n={r['n']} {r['engine']} (repeat {r['repeat'] + 1}): {_equal(r)}"
            for r in rows if r["engine"] != "juggler" and ("error" in r or not r["equal"])]


def _sizes(sizes: tuple[int, ...]) -> str:
    return ",".join(str(n) for n in sizes)


def section(rows: list[dict], info: dict, command: str) -> str:
    """The `peers` section of docs/benchmarks.md: how it was measured, and the table."""
    plan = PeerPlan()  # the defaults, for the how-to
    repeats = 1 + max((r["repeat"] for r in rows), default=0)
    lines = [
        "## Peers: Esper and Flink SQL on the same files", "",
        "```",
        f"python -m bench.peers                       # S n={_sizes(plan.s_sizes)} "
        f"({plan.s_events:,} events), J and J-forms n={_sizes(plan.j_sizes)} ({plan.j_events:,})",
        "python -m bench.peers --peers esper --only S --s-sizes 1,10 --s-events 50000",
        "python -m bench.run --peers esper,flink     # the same after the standard grid "
        "(--quick: smaller)",
        "```", "",
        "Needs a JDK (17+, with `javac`) and Maven: Esper's jars come from Maven Central "
        "into `~/.cache/juggler/esper-9.0.0` and `bench/peers/EsperPeer.java` is compiled "
        "there on first use. The Flink peer installs the `peers` extra of `pyproject.toml` "
        "(`apache-flink==2.3.0`, about 850 MB with its JVM jars) into a virtual environment "
        "of its own, `~/.cache/juggler/pyflink/venv`, on first use. The command exits 1 if "
        "a peer's results differ from Juggler's or a peer fails. Kafka Streams, the peer "
        "a Kafka user would run instead of the service, runs on workload K through a "
        "broker (`python -m bench.peers --peers kstreams`): section \"Peers: Kafka "
        "Streams on workload K\" below.", "",
        f"`{command}` on {info['date']}: {info['nproc']} CPUs (`nproc`), {info['cpu']}, "
        f"commit `{info['commit']}` ({info['tree']}), load average {info['load']} at start "
        f"(shared machine). {repeats} repeat(s), each measurement in a fresh process; "
        "numbers are medians over the repeats, ratios are taken per repeat between runs "
        "made next to each other, then the median. Every engine reads the same exported "
        "files (`bench/peers/files.py`) and starts empty with every query registered.", "",
        "- *Juggler*: the native operator (`NativeEngine`) in a fresh Python process; the timed loop is "
        "`process_batch()` over the events, already read into memory, 1,024 at a time (as "
        "`juggler eval` and the worker hand them over: one crossing into Rust per batch).",
        "- *Esper* 9.0.0 (Maven Central) in its own JVM (`bench/peers/EsperPeer.java`, "
        "default JVM settings): one EPL statement per query, attribute predicates as stream "
        "filters, `#time` windows one ms longer than MAXWINDOW plus explicit `ts` bounds, "
        "the key as an equi-join, external clock advanced to each event's `ts`; the timed "
        "loop is `advanceTime` + `sendEventObjectArray` over the events in memory, JIT "
        "warm-up included (one pass, as for Juggler).",
        "- *Flink SQL* (PyFlink, local mini-cluster, parallelism 1, streaming mode): one "
        "source table per stream with a watermark on `ts`, every query one INSERT of one "
        "statement set, MAXWINDOW as event-time interval-join bounds between every pair of "
        "streams; the plan is compiled untimed, then the time is the job's wall clock from "
        "submission to the end (deployment, reading the CSV files, writing the results "
        "included, so at a few thousand events it is mostly fixed cost). *peer ev/s net* "
        "takes off the time of a job in the same JVM that reads the same files and keeps "
        "no row (run first, so it also warms the JVM up); Juggler/peer ev/s uses that net "
        "rate for Flink, and it is n/a when the job took no longer than the read-only one.",
        "- *peak MB*: the peak resident set of the engine's process (`ru_maxrss`, or "
        "`VmHWM` of the JVM), interpreter or JVM included; the JVMs run with their default "
        "heap (a quarter of RAM) and are free to grow into it.",
        "- *results equal*: the multisets of (query, source positions) are identical.",
        "- *Juggler candidates/result*: held events the operator examined as partners per "
        "result (`NativeEngine.stats()`), deterministic.", "",
        table(rows), "",
    ]
    return "\n".join(lines)
