"""Peer engines beside Juggler in the same benchmark run.

    python -m bench.peers [--peers esper,flink] [--only S,J] [--out docs/benchmarks.md]
    python -m bench.run --peers esper,flink ...          # the same after the usual grid
    python -m bench.peers --peers kstreams               # K through a broker (kstreams_load)

Esper (a JVM library from Maven Central) runs S and J; Flink SQL (PyFlink, installed
into a virtual environment of its own on first use) runs J. Every engine reads the same
exported event files, and a peer's results must equal Juggler's before its rate is
compared: `files` exports, `predicates`/`epl`/`flink_sql` translate compiled queries,
`esper`/`flink`/`reference` run one engine each, `compare` drives and checks, `report`
prints the table and the `peers` section of docs/benchmarks.md. Kafka Streams is a
service's peer rather than a library's: `kstreams_load` runs it beside the worker on
one broker (`kstreams_topology` writes its Java topology, `kstreams` builds and starts
it) and writes the `kstreams` section.
"""
