"""The records Juggler's parts exchange, one typed form each, with their encodings.

The topic and header names are in `juggler.kafka.names`; what goes under them on the
control plane is here (`commands`), so the `juggler query` client, the worker's
control and partition tasks (and the Faust runtime, which drives the same tasks),
`juggler eval`, `juggler produce` and the Spark backfill build and read a command or a
status the same way."""
