"""Records the worker writes, kept under the producer's size limit (semantics section 7).

Why: a record the producer refuses (too large) fails the whole transaction of its batch,
and the worker redoes the batch, meets the same input and fails again: a crash loop on
one bad stream record. Two records the worker writes hold data it does not control:

- a dead letter copies the original key and value, and a stream record can itself be
  up to the limit (a 999,700-byte value has no room left for topic, offset and reason);
- a result copies selected columns, and `SELECT *` over large string columns can add up
  to more than the limit.

So both are built to fit: a dead letter drops the copies that do not fit (the sizes
and the original's topic/partition/offset remain, so nothing is lost: the original is
still on its topic), and a result drops its row (the sources remain, so a client can
fetch the events) and says so in a Kafka header. The size counted is what the producer
counts: the Kafka key, the value, and `RECORD_OVERHEAD_BYTES` for headers and framing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from juggler.codec.avro import CODEC_KINDS, DEAD_LETTER, RESULT, Codec

__all__ = [
    "LATE", "BAD_COMMAND", "DEAD_LETTER_KINDS", "DEFAULT_MAX_RECORD_BYTES",
    "RECORD_OVERHEAD_BYTES", "MAX_REASON_BYTES", "ROW_OMITTED_HEADER", "RecordTooLarge",
    "dead_letter", "encode_result_bounded", "result_budget",
]

LATE = "late"
"""An event older than its key's newest event minus the allowed lateness."""
BAD_COMMAND = "bad_command"
"""A control record that is not a command (any `CodecError` on the control topic)."""
DEAD_LETTER_KINDS = (*CODEC_KINDS, LATE, BAD_COMMAND)
"""Every `kind` a `juggler.DeadLetter` can have: the codec's kinds for stream records
(`juggler.codec.avro.CODEC_KINDS`), `late` and `bad_command`. Also the values of the
dead-letter metric's label, so a dashboard can list them all up front."""

DEFAULT_MAX_RECORD_BYTES = 1_000_000
"""The producer's size limit the worker configures by default: librdkafka's default
`message.max.bytes`. It is below the broker's default `message.max.bytes` (1,048,588)
and aiokafka's default `max_request_size` (1,048,576), so a record kept under it passes
all three. A deployment that raises the broker and producer limits passes its own
`max_bytes`."""

RECORD_OVERHEAD_BYTES = 512
"""What a record costs the producer besides its key and value: the headers the worker
adds (a query id header of at most 233 characters, `ROW_OMITTED_HEADER`) and the record
and batch framing (varint lengths, timestamp and offset deltas, the 61-byte batch
header of a batch holding only this record): about 400 bytes at most, rounded up."""

MAX_REASON_BYTES = 4096
"""A dead letter's reason text is cut to this many bytes of UTF-8. Reasons are written
to be short (values shown shortened), but one may quote unbounded input; 4 KiB keeps
every dead letter's fixed part small whatever the reason."""

ROW_OMITTED_HEADER = "juggler-row-omitted"
"""The Kafka header the worker adds to a result whose row `encode_result_bounded`
omitted, so a client knows the empty row is not the query's answer."""

_CUT = "..."


class RecordTooLarge(ValueError):
    """Even the smallest form of a record (no copies, no row) does not fit `max_bytes`:
    the limit is configured far below the default, not the data's fault."""


def dead_letter(codec: Codec, *, topic: str, partition: int, offset: int,
                key: bytes | None, value: bytes | None, kind: str, reason: str,
                max_bytes: int,
                deadletter_topic: str | None = None) -> tuple[bytes | None, bytes]:
    """A `juggler.DeadLetter` for the record at `topic`/`partition`/`offset`, as
    (the Kafka message key to send it with, the encoded value).

    Guarantee: len(Kafka key) + len(value) + `RECORD_OVERHEAD_BYTES` <= `max_bytes`.
    The original key and value are copied when they fit, the value given up first (it
    is usually the large one), and the Kafka key is the original key only when that is
    copied (a key too large to copy is too large to send twice). `reason` is cut to
    `MAX_REASON_BYTES`. `deadletter_topic` is where the record goes (the Schema Registry
    subject; default `juggler.deadletter`). Raises `ValueError` for a kind not in
    `DEAD_LETTER_KINDS` and `RecordTooLarge` when even no copies do not fit."""
    if kind not in DEAD_LETTER_KINDS:
        raise ValueError(f"dead-letter kind {kind!r} is not one of "
                         f"{', '.join(DEAD_LETTER_KINDS)}")
    record = {"key_size": _size(key), "value_size": _size(value), "topic": topic,
              "partition": partition, "offset": offset, "kind": kind,
              "reason": _cut(reason)}
    budget = max_bytes - RECORD_OVERHEAD_BYTES
    # most preferred first; dict.fromkeys drops repeats (when key or value is None)
    for copy_key, copy_value in dict.fromkeys(
            ((key, value), (key, None), (None, value), (None, None))):
        if 2 * len(copy_key or b"") + len(copy_value or b"") > budget:
            continue  # cannot fit: skip encoding a large record for nothing
        data = codec.encode(DEAD_LETTER, {"key": copy_key, "value": copy_value, **record},
                            topic=deadletter_topic)
        if len(copy_key or b"") + len(data) <= budget:
            return copy_key, data
    raise RecordTooLarge(f"a dead letter for {topic}/{partition}/{offset} does not fit "
                         f"{max_bytes:,} bytes even without the original key and value")


def encode_result_bounded(codec: Codec, record: Mapping[str, Any], *, topic: str,
                          key: bytes, max_bytes: int, trusted: bool = False
                          ) -> tuple[bytes, bool]:
    """Encode a `juggler.Result` record (`result_record`) for `topic`, sent with the
    Kafka key `key`, as (the encoded value, whether the row was omitted).

    Guarantee: len(key) + len(value) + `RECORD_OVERHEAD_BYTES` <= `max_bytes`. A result
    that would be larger is written with an empty `row`, and the flag tells the caller
    to add `ROW_OMITTED_HEADER`; its sources remain, so a client can still read the
    events. The usual case encodes once. Raises `SchemaViolation` for a record that
    does not fit the schema and `RecordTooLarge` when even an empty row does not fit.
    `trusted`: see `Codec.encode` (the worker's results are)."""
    budget = max_bytes - RECORD_OVERHEAD_BYTES - len(key)
    data = codec.encode(RESULT, record, topic=topic, trusted=trusted)
    if len(data) <= budget:
        return data, False
    data = codec.encode(RESULT, {**record, "row": {}}, topic=topic, trusted=trusted)
    if len(data) > budget:
        raise RecordTooLarge(f"a result of {record.get('query')} does not fit "
                             f"{max_bytes:,} bytes even without its row ({len(data):,} "
                             f"bytes and a {len(key):,}-byte key)")
    return data, True


def result_budget(codec: Codec, max_bytes: int) -> int:
    """What a result's Kafka key and Avro body may take together for the framed record
    to keep `encode_result_bounded`'s guarantee under `max_bytes`: the `budget` of
    `NativeEngine.process_batch_encoded`, which gives a result over it back to be
    encoded here."""
    return max_bytes - RECORD_OVERHEAD_BYTES - codec.header_size


def _size(data: bytes | None) -> int:
    """A DeadLetter's `key_size` / `value_size`: the length, -1 for null."""
    return -1 if data is None else len(data)


def _cut(reason: str) -> str:
    """`reason` in at most `MAX_REASON_BYTES` of UTF-8, ending with "..." when cut.

    Anything that cannot be UTF-8 (a lone surrogate) becomes "?" rather than making the
    dead letter unencodable."""
    raw = reason.encode("utf-8", "replace")
    if len(raw) <= MAX_REASON_BYTES:
        return raw.decode("utf-8")
    return raw[:MAX_REASON_BYTES - len(_CUT)].decode("utf-8", "ignore") + _CUT
