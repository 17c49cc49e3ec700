"""Results pages from the worker's index, without Kafka: the body is what encoding the
decoded page gave before (byte for byte), a cursor walks every indexed result once and
never past the indexed end, and a query's own topic and the shared one stay apart."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from juggler.serving.results_api import BadCursor, decode_cursor, encode_cursor, page_body
from juggler.runtime.results_store import ResultsStore

SHARED, OWN = "juggler.results", "juggler.results.q1"


def result(query: str, topic: str, partition: int, offset: int) -> dict[str, Any]:
    return {"query": query, "key": "patient-\u00e9", "ts": 1_000 + offset,
            "sources": {"B": {"topic": "juggler.events.B", "partition": partition,
                              "offset": offset}},
            "row": {"B.temp": 37.25 + offset / 3, "B.alert": False, "B.note": None},
            "position": {"topic": topic, "partition": partition, "offset": offset}}


def row(query: str, topic: str, partition: int, offset: int) -> tuple[str, str, int, int, str]:
    return query, topic, partition, offset, json.dumps(result(query, topic, partition, offset))


def pages(store: ResultsStore, query: str, topic: str, limit: int,
          cursor: str | None = None) -> tuple[list[dict[str, Any]], str]:
    """Every page until an empty one, through the body a client receives."""
    seen: list[dict[str, Any]] = []
    while True:
        body = json.loads(page_body(*store.page(query, topic, decode_cursor(cursor), limit)))
        cursor = body["next"]
        if not body["results"]:
            return seen, cursor
        seen += body["results"]


def test_page_body_is_the_encoded_page_byte_for_byte() -> None:
    records = [result("q1", SHARED, p, o) for p, o in ((0, 3), (2, 7), (3, 11))]
    positions = {0: 4, 1: 0, 2: 8, 3: 12}
    expected = json.dumps({"results": records, "next": encode_cursor(positions)}).encode()
    assert page_body([json.dumps(r) for r in records], positions) == expected
    assert json.loads(page_body([], {})) == {"results": [], "next": ""}


@pytest.mark.parametrize("fetched", [40, 7, 1])
def test_cursor_walks_every_indexed_result_once_and_stops_at_the_indexed_end(
        fetched: int) -> None:
    """`fetched`: offsets per append, as the indexer appends a fetch at a time, so a
    query's results of a partition lie in one run, in several, or one a run."""
    store = ResultsStore({}, SHARED)
    rows = [row(q, SHARED, p, o) for p in range(4) for o in range(p, 40, 3)
            for q in ("q1", "q2")]
    for low in range(0, 40, fetched):
        store.append([r for r in rows if low <= r[3] < low + fetched], {})
    store.append([], {(SHARED, p): 30 for p in range(4)})  # offsets 30.. are not indexed yet
    expected = [(p, o) for p in range(4) for o in range(p, 30, 3)]
    for limit in (1, 4, 7, 1000):
        seen, cursor = pages(store, "q1", SHARED, limit)
        assert [(r["position"]["partition"], r["position"]["offset"]) for r in seen] == expected
        assert {r["query"] for r in seen} == {"q1"}
        assert decode_cursor(cursor) == {p: 30 for p in range(4)}

    # the index moves on: the same cursor gives what came after, once
    store.append([], {(SHARED, p): 40 for p in range(4)})
    later, _ = pages(store, "q1", SHARED, 5, cursor)
    assert [(r["position"]["partition"], r["position"]["offset"]) for r in later] == \
        [(p, o) for p in range(4) for o in range(p, 40, 3) if o >= 30]


def test_own_topic_and_shared_topic_results_stay_apart() -> None:
    store = ResultsStore({}, SHARED)
    store.follow(OWN)
    store.append([row("q1", SHARED, 0, 5), row("q1", OWN, 0, 0), row("q1", OWN, 1, 0),
                  row("q1", OWN, 1, 1)],
                 {(SHARED, 0): 6, (OWN, 0): 1, (OWN, 1): 2})
    own, cursor = pages(store, "q1", OWN, 2)
    assert [r["position"]["topic"] for r in own] == [OWN] * 3
    assert decode_cursor(cursor) == {0: 1, 1: 2}
    assert [r["position"]["topic"] for r in pages(store, "q1", SHARED, 2)[0]] == [SHARED]
    assert store.known("q1", OWN) and not store.known("q2", OWN)


def test_a_cursor_is_url_safe_base64_of_partition_offsets() -> None:
    """Clients keep cursors: their format is what it was."""
    assert base64.urlsafe_b64decode(encode_cursor({0: 4, 3: 12}) + "==") == b"0:4,3:12"


def test_the_indexing_process_runs_below_the_workers_priority() -> None:
    """The index yields the CPU to the worker's loop (`INDEX_NICENESS`): on a small
    machine it preempted the loop that every result waits for. No broker is needed:
    the process lowers its priority before it connects."""
    import os
    import time

    from juggler.runtime.results_store import INDEX_NICENESS

    store = ResultsStore({"bootstrap.servers": "127.0.0.1:9", "log_level": 0}, SHARED)
    store.start()
    try:
        pid = store.process.pid
        assert pid is not None
        wanted = min(19, os.getpriority(os.PRIO_PROCESS, 0) + INDEX_NICENESS)  # 19: the lowest

        def lowered() -> bool:
            return os.getpriority(os.PRIO_PROCESS, pid) >= wanted

        deadline = time.monotonic() + 60  # a spawned interpreter importing on a busy machine
        while not lowered() and store.process.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lowered()
    finally:
        store.stop()


@pytest.mark.parametrize("text", ["0:9223372036854775808", "2147483648:0", "0:-1"])
def test_a_cursor_beyond_kafka_positions_is_a_bad_cursor(text: str) -> None:
    cursor = base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
    with pytest.raises(BadCursor):
        decode_cursor(cursor)
