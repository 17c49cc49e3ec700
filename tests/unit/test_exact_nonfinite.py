"""Non-finite numbers never reach the engine from Kafka (the codec dead-letters them,
semantics section 1), but an engine called directly (`juggler eval` on JSON, a library
user) must not fail on one: a NaN fails every comparison but !=, an infinity compares
as IEEE 754 says, and the native operator and the naive reference agree."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from juggler.codec.avro import Codec
from juggler.engine.events import EngineConfig, Event
from juggler.engine.naive import NaiveEngine
from juggler.engine.native_engine import NativeEngine
from juggler.language import compile_query

QUERIES = {
    "join": "SELECT * FROM H, K MAXWINDOW 10 s WHERE H.beatrate > K.fluid - 0.5",
    "scaled": "SELECT * FROM H, K MAXWINDOW 10 s WHERE H.beatrate <= 2 * K.fluid",
    "attribute": "SELECT * FROM K WHERE K.fluid > 3",
    "unequal": "SELECT * FROM K WHERE K.fluid != 3",
}


def results(engine: NativeEngine | NaiveEngine, z: float) -> Counter:
    catalog = Codec().catalog()
    for query_id, text in QUERIES.items():
        engine.register(compile_query(query_id, text, catalog))
    events = [Event("H", "p", 0, {"beatrate": 7.0, "vib": 0.0, "alert": False}, 0),
              Event("K", "p", 1, {"fluid": z}, 1)]
    return Counter(r.query for e in events for r in engine.process(e))


@pytest.mark.parametrize("z, expected", [
    (math.nan, {"unequal": 1}),
    (math.inf, {"scaled": 1, "attribute": 1, "unequal": 1}),
    (-math.inf, {"join": 1, "unequal": 1}),
])
def test_non_finite_values_compare_as_ieee_says(z: float, expected: dict[str, int]) -> None:
    assert results(NaiveEngine(EngineConfig()), z) == expected
    assert results(NativeEngine(EngineConfig()), z) == expected
