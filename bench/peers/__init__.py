"""Peer engines beside Juggler in the same benchmark run (issue 10, item 5).

    python -m bench.peers [--peers esper,flink] [--only S,J] [--out docs/benchmarks.md]
    python -m bench.run --peers esper,flink ...          # the same after the usual grid

Esper (a JVM library from Maven Central) runs S and J; Flink SQL (PyFlink, installed
into a virtual environment of its own on first use) runs J. Every engine reads the same
exported event files, and a peer's results must equal Juggler's before its rate is
compared: `files` exports, `predicates`/`epl`/`flink_sql` translate compiled queries,
`esper`/`flink`/`reference` run one engine each, `compare` drives and checks, `report`
prints the table and the `peers` section of docs/benchmarks.md.
"""
