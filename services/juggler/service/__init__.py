"""The Kafka worker (`juggler worker`): a consumer-group member that runs one task per
partition, like a Kafka Streams instance, each feeding one Juggler engine.

Modules, one job each: `settings` (configuration), `worker` (the loop: fetch, route,
clear, run, commit), `arrival` (the order a task takes its records in, semantics 4a),
`task` (one partition: engine, order, what it emits), `control_plane` (commands in,
barriers out), `held_state` and `restore` (the state topic), `transactions` (one
transaction per round), `deadletters`, `http_api` and `results_api` (HTTP), `metrics`,
`topic_names` and `topic_setup`. See docs/worker.md.
"""
