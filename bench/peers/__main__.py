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

from bench.peers import compare, report
from bench.report_sections import replace_section

SECTION = "peers"


def parse_peers(text: str) -> list[str]:
    """`esper,flink` -> ["esper", "flink"]; unknown names are an error."""
    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in compare.PEERS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown peer(s) {', '.join(unknown) or '(none)'}; choose from "
            f"{', '.join(compare.PEERS)}")
    return names


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def main(argv: list[str] | None = None) -> int:
    from bench.run import ROOT, machine

    default = compare.PeerPlan()
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=parse_peers, default=list(compare.PEERS),
                        help="comma-separated: esper, flink (default both)")
    parser.add_argument("--only", default="S,J", help="workloads (S, J)")
    parser.add_argument("--s-sizes", type=_sizes, default=default.s_sizes)
    parser.add_argument("--j-sizes", type=_sizes, default=default.j_sizes)
    parser.add_argument("--s-events", type=int, default=default.s_events)
    parser.add_argument("--j-events", type=int, default=default.j_events)
    parser.add_argument("--repeats", type=int, default=default.repeats)
    parser.add_argument("--out", default="docs/benchmarks.md",
                        help=f"report whose `{SECTION}` section is replaced ('-' for none)")
    args = parser.parse_args(argv)
    only = {w.strip().upper() for w in args.only.split(",") if w.strip()}
    if only - {"S", "J"}:
        parser.error("--only takes S and/or J")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    plan = compare.PeerPlan(s_sizes=args.s_sizes, j_sizes=args.j_sizes,
                            s_events=args.s_events, j_events=args.j_events,
                            repeats=args.repeats)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    info = machine(ROOT / "services")
    info["date"] = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    rows = compare.run(args.peers, only, plan, log)
    print(report.table(rows))
    command = "python -m bench.peers " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.out != "-":
        replace_section(Path(args.out), SECTION, report.section(rows, info, command.strip()))
    bad = report.mismatches(rows)
    for line in bad:
        print(f"MISMATCH {line}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
