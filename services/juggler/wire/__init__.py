"""What Juggler's parts exchange on Kafka, one typed form each: the topic and header
names (`names`) and the control plane's command and status records with their
encodings (`commands`). The `juggler query` client, the worker's control and partition
tasks (and the Faust runtime, which drives the same tasks), `juggler eval`,
`juggler produce` and the Spark backfill all build and read them from here, so a name
or a field means the same everywhere.

This file imports nothing: `names` sits below the codec and the Kafka clients, which
`commands` builds on, so importing the package must not pull `commands` in."""
