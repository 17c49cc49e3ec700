"""Semantics 4a when the worker is up before the events exist: the Kafka Streams case.

A Kafka Streams application started idle, then given a backlog one topic after another
(one producer per stream, each topic in its own burst), loses windowed joins' results
(docs/benchmarks.md, the kstreams section): its stream time runs ahead on the topic
whose burst comes first, and a record behind a join window's end is dropped. The
worker's contract says results depend only on what the topics hold: it takes a record
only while no other stream partition of its task has records in the log it has not
fetched, and waits up to `max_idle_ms` for an idle one. So the same arrival, produced
the way the benchmark produces it (`bench.kafka_load.produce_per_stream`), must give
exactly `juggler eval`'s results, none late. (With `max_idle_ms` 0 the worker fails
this test: it would take the first topic's burst alone.)
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.kafka_load import produce_per_stream
from juggler.engine.events import Event
from test_kafka_order import (QUERIES, all_results, all_streams, events, in_process,
                              register_all, runtime, setup)
from test_worker_harness import diff

pytestmark = [pytest.mark.integration, pytest.mark.slow]

__all__ = ["runtime", "setup"]  # fixtures this module uses, imported from test_kafka_order

MAX_IDLE_MS = 5_000
"""The contract holds while no stream partition stays silent longer than `max_idle_ms`,
and here each topic stays silent while the bursts before it are written: a fraction of
a second, or more on a loaded machine. The test sets a bound far beyond that, so what
it checks is the order, not the machine's speed."""


def _as_decoded(data: dict[str, Any]) -> dict[str, Any]:
    """The values as the worker decodes them: every number column of B, H and T is an
    Avro double (a result's row shows 52.0 where the feed said 52)."""
    return {k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v
            for k, v in data.items()}


def test_idle_worker_given_a_backlog_by_one_producer_per_stream_gives_evals_results(
        setup: Any) -> None:
    client, worker, app = setup
    worker(max_idle_ms=MAX_IDLE_MS).start()
    register_all(client, QUERIES)  # live in every partition, and nothing to read yet
    feed = [Event(stream, key, ts, data, i)
            for i, (stream, key, ts, data) in enumerate(events(4_000, keys=24, seed=6))]
    where = produce_per_stream(client.bootstrap, client.names.prefix, feed)
    client.wait_consumed(app, all_streams(client), timeout=180)
    sent = [Event(e.stream, e.key, e.ts, _as_decoded(e.data), where[i])
            for i, e in enumerate(feed)]
    want = in_process(client, sent, QUERIES)
    got = all_results(client, list(QUERIES))
    assert client.dead_letters() == [], "an event was late: taken out of timestamp order"
    assert got == want, diff(want, got)
    assert {q for q, *_ in want} == set(QUERIES), "every query has results"
