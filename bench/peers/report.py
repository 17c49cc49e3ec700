"""The peers table: events/s and peak memory of each engine, Juggler/peer ratios, and
whether the results were equal. Printed by `bench.run --peers` and `python -m
bench.peers`, and kept in the `peers` section of docs/benchmarks.md."""

from __future__ import annotations


def _rate(x: float | None) -> str:
    return "n/a" if not x else f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _mb(kb: float | None) -> str:
    return "n/a" if not kb else f"{kb / 1024:,.0f}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.3g}x" if a and b else "n/a"


def _equal(row: dict) -> str:
    if "error" in row:
        return f"error: {row['error'][:80]}"
    if row["equal"]:
        return "yes"
    def example(results: list[str]) -> str:
        return f" (e.g. `{results[0].replace(chr(9), ' ')}`)" if results else ""
    return (f"**no**: {row['missing']:,} missing{example(row['missing_examples'])}, "
            f"{row['extra']:,} extra{example(row['extra_examples'])}")


def table(rows: list[dict]) -> str:
    """A markdown table, one line per (workload, queries, peer). The ratio of rates uses
    the peer's net rate where it has one (Flink: beyond a read-only job of the files)."""
    head = ["workload", "queries", "events", "results", "Juggler ev/s", "Juggler peak MB",
            "peer", "peer ev/s", "peer ev/s net", "peer peak MB", "Juggler/peer ev/s",
            "Juggler/peer memory", "results equal"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    juggler: dict = {}
    for row in rows:
        if row["engine"] == "juggler":
            juggler = row
            continue
        lines.append("| " + " | ".join([
            row["workload"], f"{row['n']:,}", f"{juggler['events']:,}",
            f"{juggler['results']:,}", _rate(juggler["events_per_s"]),
            _mb(juggler["peak_rss_kb"]), row["engine"], _rate(row.get("events_per_s")),
            _rate(row["net_events_per_s"]) if "net_events_per_s" in row else "-",
            _mb(row.get("peak_rss_kb")),
            _ratio(juggler["events_per_s"], row.get("net_events_per_s", row.get("events_per_s"))),
            _ratio(juggler["peak_rss_kb"], row.get("peak_rss_kb")), _equal(row)]) + " |")
    return "\n".join(lines)


def mismatches(rows: list[dict]) -> list[str]:
    """One line per peer run whose results differ from Juggler's or that failed."""
    return [f"{r['workload']} n={r['n']} {r['engine']}: {_equal(r)}" for r in rows
            if r["engine"] != "juggler" and ("error" in r or not r["equal"])]


def section(rows: list[dict], info: dict, command: str) -> str:
    """The `peers` section of docs/benchmarks.md: how it was measured, and the table."""
    lines = [
        "## Peers: Esper and Flink SQL on the same files (issue 10, item 5)", "",
        f"`{command}` on {info['date']}: {info['nproc']} CPUs (`nproc`), {info['cpu']}, "
        f"commit `{info['commit']}` ({info['tree']}), load average {info['load']} at start "
        "(shared machine). One run of each measurement; every engine reads the same "
        "exported files (`bench/peers/files.py`) and starts empty with every query "
        "registered.", "",
        "- *Juggler*: `JugglerEngine` in a fresh Python process; the timed loop is "
        "`process()` over the events, already read into memory.",
        "- *Esper* 9.0.0 (Maven Central) in its own JVM (`bench/peers/EsperPeer.java`, "
        "default JVM settings): one EPL statement per query, attribute predicates as stream "
        "filters, `#time` windows one ms longer than MAXWINDOW plus explicit `ts` bounds, "
        "the key as an equi-join, external clock advanced to each event's `ts`; the timed "
        "loop is `advanceTime` + `sendEventObjectArray` over the events in memory.",
        "- *Flink SQL* (PyFlink, local mini-cluster, parallelism 1, streaming mode): one "
        "source table per stream with a watermark on `ts`, every query one INSERT of one "
        "statement set, MAXWINDOW as event-time interval-join bounds between every pair of "
        "streams; the plan is compiled untimed, then the time is the job's wall clock from "
        "submission to the end (deployment, reading the CSV files, writing the results "
        "included, so at a few thousand events it is mostly fixed cost). *peer ev/s net* "
        "takes off the time of a job in the same JVM that reads the same files and keeps "
        "no row (run first, so it also warms the JVM up); Juggler/peer ev/s uses that net "
        "rate for Flink.",
        "- *peak MB*: the peak resident set of the engine's process (`ru_maxrss`, or "
        "`VmHWM` of the JVM), interpreter or JVM included; the JVMs run with their default "
        "heap (a quarter of RAM) and are free to grow into it.",
        "- *results equal*: the multisets of (query, source positions) are identical.", "",
        table(rows), "",
    ]
    return "\n".join(lines)
