"""The Kafka worker (`juggler worker`): a Faust app that feeds the Juggler engine.

Modules, one job each: `settings` (configuration), `app` (the worker object and the
Faust app), `partition_engines` (one engine per source partition), `state_tables`
(changelogged tables), `transactions` (one transaction per partition batch),
`event_agent` and `control_plane` (the agents), `deadletters`, `results_api` (HTTP
results with a cursor, /queries, /health, /metrics), `metrics`, `topic_names` and
`topic_setup`. See docs/worker.md.
"""
