"""What every Kafka-facing part shares: the client settings, topic specs, the
event producer, the group-progress reader, the client library's log summary, and the
local single-node broker (KRaft) that development and the integration tests run."""
