"""`python -m bench.peers`: only the peer comparison, written to its own report section.

Why apart from `bench.run`: the standard grid takes ten minutes and the peers as long
again; this runs the comparison alone and replaces only the `peers` section of the
report, as the Kafka benchmark does with its section.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
from pathlib import Path

from bench.machine import machine
from bench.measure import ROOT
from bench.peers import compare, kstreams_load, report
from bench.peers.kstreams_load import KPlan
from bench.report_sections import replace_section

SECTION = "peers"


KAFKA_PEERS = ("kstreams",)
"""Peers that run on workload K through a broker (`kstreams_load`), not on the files;
they write a section of their own (`KAFKA_SECTION`), so running one alone leaves the
file peers' table as it was."""
KAFKA_SECTION = "kstreams"


def parse_peers(text: str) -> list[str]:
    """`esper,flink` -> ["esper", "flink"]; unknown names are an error."""
    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    known = (*compare.PEERS, *KAFKA_PEERS)
    unknown = [p for p in names if p not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown peer(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(known)}")
    return names


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def main(argv: list[str] | None = None) -> int:
    default = compare.PeerPlan()
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=parse_peers, default=list(compare.PEERS),
                        help="comma-separated: esper, flink (the default: both, on the "
                             "files of S and J), kstreams (K through a local broker)")
    parser.add_argument("--only", default="S,J,J-forms", help="workloads (S, J, J-forms)")
    parser.add_argument("--s-sizes", type=_sizes, default=default.s_sizes)
    parser.add_argument("--j-sizes", type=_sizes, default=default.j_sizes)
    parser.add_argument("--s-events", type=int, default=default.s_events)
    parser.add_argument("--j-events", type=int, default=default.j_events)
    parser.add_argument("--repeats", type=int, default=default.repeats)
    k = KPlan()
    parser.add_argument("--k-sizes", type=_sizes, default=k.sizes,
                        help="kstreams: query counts of the backlog and latency runs")
    parser.add_argument("--k-events", type=int, default=k.events,
                        help="kstreams: events of K in the backlog and started-idle runs")
    parser.add_argument("--k-idle-sizes", type=_sizes, default=k.idle_sizes,
                        help="kstreams: query counts of the started-idle runs")
    parser.add_argument("--latency-seconds", type=float, default=k.latency_seconds,
                        help="kstreams: seconds of each live run (0: none)")
    parser.add_argument("--ks-threads", type=int, default=k.threads,
                        help="kstreams: Kafka Streams' num.stream.threads")
    parser.add_argument("--out", default="docs/benchmarks.md",
                        help=f"report whose `{SECTION}` section is replaced ('-' for none)")
    args = parser.parse_args(argv)
    names = {"S": "S", "J": "J", "J-FORMS": "J-forms"}
    only = {names.get(w.strip().upper(), w.strip()) for w in args.only.split(",") if w.strip()}
    if only - set(names.values()):
        parser.error("--only takes S, J and/or J-forms")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    plan = compare.PeerPlan(s_sizes=args.s_sizes, j_sizes=args.j_sizes,
                            s_events=args.s_events, j_events=args.j_events,
                            repeats=args.repeats)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    info = machine(ROOT / "services")
    info["date"] = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    command = ("python -m bench.peers " + " ".join(argv if argv is not None else sys.argv[1:])
               ).strip()
    bad = []
    if any(p in compare.PEERS for p in args.peers):
        rows = compare.run([p for p in args.peers if p in compare.PEERS], only, plan, log)
        print(report.table(rows))
        if args.out != "-":
            replace_section(Path(args.out), SECTION, report.section(rows, info, command))
        bad += report.mismatches(rows)
    if "kstreams" in args.peers:
        out = kstreams_load.run(KPlan(sizes=args.k_sizes, events=args.k_events,
                                      repeats=args.repeats, idle_sizes=args.k_idle_sizes,
                                      latency_seconds=args.latency_seconds,
                                      threads=args.ks_threads), log)
        text = kstreams_load.render(out, info, command)
        print(text)
        if args.out != "-":
            replace_section(Path(args.out), KAFKA_SECTION, text)
        bad += kstreams_load.mismatches(out)
    for line in bad:
        print(f"MISMATCH {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
