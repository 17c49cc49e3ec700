"""Decoding and encoding at the edges: JSON lines, Avro schemas (semantics sections 1 and 5)."""
