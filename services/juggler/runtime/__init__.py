"""The Kafka worker (`juggler worker`): a consumer-group member that runs one task per
partition, like a Kafka Streams instance, each feeding one Juggler engine.

Modules, one job each: `settings` (configuration), `worker` (the loop: fetch, route,
clear, run, commit; the rebalance), `arrival` (the order a task takes its records in,
semantics 4a), `clearance` (when fetched records may be taken, semantics 4a), `task`
(one partition: engine, order, what it emits), `control_plane` (commands in, barriers
out), `job` (what both runtimes share, and the `TaskContext` a task uses of them),
`held_state`, `restore`, `accepted_read` and `readback` (the state and status
topics), `transactions` (one
transaction per round), `deadletters`, `results_store` (the results index process)
and `results_table` (its SQLite table),
`pages` (what the HTTP port and the metrics read: the round's snapshot and the
runtime's typed views), `metrics`, `topic_names` and `topic_setup`. The HTTP port is
`juggler.serving`, above this package; `juggler.launcher` starts a worker as a child
process. See docs/worker.md and docs/architecture.md.
"""
