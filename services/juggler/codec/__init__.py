"""Decoding and encoding at the edges: JSON lines, Avro schemas (DESIGN sections 1 and 5)."""
