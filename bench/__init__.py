"""Juggler's benchmarks: the standard workloads S, J and D of docs/workloads.md.

    python -m bench.run [--quick] [--only S,J,D] [--repeats 3] [--out docs/benchmarks.md]

`workloads` generates the seeded queries (as text) and events, `measure` runs one
(workload, size, engine) measurement in a fresh subprocess, `run` drives the grid,
prints the tables, writes `docs/benchmarks.md` and draws the PNG figures. `peers` runs
Esper and Flink SQL on the same event files and checks their results against the
engine's (`python -m bench.peers`, or `bench.run --peers esper,flink`).
"""
