"""Avro single-object framing, done inside Spark.

Why: the worker decodes `c3 01` + the 8-byte CRC-64-AVRO fingerprint + the Avro body
(`juggler.codec.framing`), while Spark's `to_avro` writes the bare body and `from_avro`
reads one. The header is a constant per schema, so it is a binary literal
concatenated in front on the way out and compared and cut off on the way in; the
bytes stay in the JVM and no Python touches a record.

Schemas come from the project's `Codec` (the `schemas/` directory), and Spark is given
their parsing canonical form, whose fingerprint is exactly the header's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from juggler.codec import framing
from juggler.codec.avro import Codec

if TYPE_CHECKING:
    from pyspark.sql import Column

HEADER_BYTES = framing.SINGLE_OBJECT_HEADER
_MAX_MESSAGE = 1 << 30  # `substring` needs a length; no Kafka message is this long


def avro_schema(codec: Codec, name: str) -> str:
    """The schema as JSON for `to_avro`/`from_avro` (its parsing canonical form)."""
    return framing.canonical_form(codec.schema(name))


def encode(record: Column, codec: Codec, name: str) -> Column:
    """A framed Avro message of record `name` from a struct column whose fields are
    the schema's (by name)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    return F.concat(F.lit(codec.single_object_header(name)), to_avro(record, avro_schema(codec, name)))


def decode(value: Column, codec: Codec, name: str) -> Column:
    """The record struct of a framed message of record `name`, or null when the
    message has another header or a body Spark cannot read (the worker dead-letters
    those; replay skips them)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    framed = F.substring(value, 1, HEADER_BYTES) == F.lit(codec.single_object_header(name))
    body = F.substring(value, HEADER_BYTES + 1, _MAX_MESSAGE)
    return F.when(framed, from_avro(body, avro_schema(codec, name), {"mode": "PERMISSIVE"}))

