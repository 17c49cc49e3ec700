"""A real single-node Apache Kafka broker (KRaft) for development and integration tests."""
