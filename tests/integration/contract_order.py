"""The results semantics 4a expects from what the topics hold, computed without the worker.

Per partition p: read every stream record of partition p and p's fanout records (the
accepted commands with their barriers); cut p's records into segments at the barriers'
offsets; within a segment, merge the stream partitions by event `ts` (ties in the
streams' fixed order, offset order kept within a partition); run one engine per
partition over that sequence, with each command at its barrier. The union of the
partitions' results is what the worker must publish, exactly once each.
"""

from __future__ import annotations

import heapq
import json
from collections import Counter
from typing import Any, Callable

from juggler.engine.events import EngineConfig, LateEvent
from juggler.engine.naive import NaiveEngine
from juggler.language import compile_query


def expected(client: Any, config: EngineConfig = EngineConfig(), *,
             engine: Callable[[EngineConfig], Any] = lambda c: NaiveEngine(c, purge=True)
             ) -> tuple[Counter, set]:
    """(identities of the expected results, positions (topic, partition, offset) of the
    late events), by the naive reference unless `engine` says otherwise. A barrier can
    make events late even at lateness 0: the log ends of two topics at one moment need
    not lie at the same event time (a producer's batches for different topics are
    appended one after the other)."""
    codec = client.codec
    streams = codec.stream_names()
    catalog = codec.catalog()
    per_partition: dict[int, dict[str, list[Any]]] = {}
    for rank, stream in enumerate(streams):
        for m in client.read(client.names.stream(stream)):
            try:
                event = codec.event_from(stream, m.key(), m.value(),
                                         (m.topic(), m.partition(), m.offset()))
            except Exception:
                continue  # dead-lettered by the worker; changes no state
            per_partition.setdefault(m.partition(), {}).setdefault(stream, []).append(
                (event.ts, rank, m.offset(), event))
    barriers: dict[int, list[tuple[dict[str, int], dict[str, Any]]]] = {}
    for m in client.read(client.names.fanout):
        headers = dict(m.headers() or ())
        offsets = json.loads(headers["juggler-barrier"])
        barriers.setdefault(m.partition(), []).append(
            (offsets, codec.decode("juggler.Command", m.value())))
    results: Counter = Counter()
    late: set = set()
    for p in set(per_partition) | set(barriers):
        evaluator = engine(config)
        records = per_partition.get(p, {})
        taken = {s: 0 for s in streams}
        for offsets, command in [*barriers.get(p, []), (None, None)]:
            segment = []
            for s in streams:
                rows = records.get(s, [])
                limit = len(rows) if offsets is None else \
                    sum(1 for r in rows if r[2] < offsets[s])
                segment.append(rows[taken[s]:limit])
                taken[s] = limit
            for _, _, _, event in heapq.merge(*segment, key=lambda r: (r[0], r[1])):
                try:
                    results.update(r.identity() for r in evaluator.process(event))
                except LateEvent:
                    late.add(event.position)
            if command is None:
                break
            if command["action"] == "REGISTER":
                query = compile_query(command["id"], command["text"], catalog)
                results.update(r.identity() for r in
                               evaluator.register(query, history=command["history"]))
            else:
                evaluator.deregister(command["id"])
    return results, late
