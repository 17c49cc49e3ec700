"""The hand-written Result writer gives fastavro's bytes, and hands back what it does
not handle (so the codec's fastavro path writes it or says why it cannot)."""

from __future__ import annotations

import io
import random
from typing import Any

import fastavro
import pytest

from juggler.codec.avro import RESULT, Codec, SchemaViolation
from juggler.codec.result_body import Unwritable, result_body

CODEC = Codec()
SCHEMA = CODEC.schema(RESULT)


def fastavro_body(record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, SCHEMA, record)
    return out.getvalue()


def test_the_schema_is_the_one_the_writer_knows() -> None:
    assert [(f["name"], f["type"] if isinstance(f["type"], str) else f["type"]["type"])
            for f in SCHEMA["fields"]] == [("query", "string"), ("key", "string"),
                                           ("ts", "long"), ("sources", "map"), ("row", "map")]
    assert SCHEMA["fields"][4]["type"]["values"] == ["null", "boolean", "long", "double", "string"]
    assert [f["name"] for f in SCHEMA["fields"][3]["type"]["values"]["fields"]] == \
        ["topic", "partition", "offset"]


def test_same_bytes_as_fastavro() -> None:
    rng = random.Random(3)
    values = [None, True, False, 0, -1, 1, 63, 64, -65, 2**62, -(2**63), 2**63 - 1, 0.0,
              -2.5, 1e300, 37.25, "", "é∑", "x" * 300]
    for i in range(500):
        record = {
            "query": rng.choice(["q", "query-é", "q" * 200]), "key": f"patient-{i}",
            "ts": rng.randint(-(2**63), 2**63 - 1),
            "sources": {s: {"topic": f"juggler.stream.{s}", "partition": rng.randint(0, 2**31 - 1),
                            "offset": rng.randint(0, 2**40)}
                        for s in rng.sample("BHKT", rng.randint(0, 4))},
            "row": {f"C.c{j}": rng.choice(values) for j in range(rng.randint(0, 20))},
        }
        assert result_body(record) == fastavro_body(record), record


@pytest.mark.parametrize("bad", [
    {"row": {"B.x": b"bytes"}}, {"ts": 2**63}, {"ts": 1.5}, {"key": None},
    {"sources": {"B": {"topic": "t", "partition": 2**31, "offset": 0}}},
])
def test_what_it_does_not_handle_goes_to_fastavro(bad: dict[str, Any]) -> None:
    record = {"query": "q", "key": "k", "ts": 1, "sources": {}, "row": {}, **bad}
    with pytest.raises(Unwritable):
        result_body(record)
    try:
        data = CODEC.encode(RESULT, record, trusted=True)
    except SchemaViolation:
        return
    assert data.endswith(fastavro_body(record))  # fastavro wrote what it accepts
