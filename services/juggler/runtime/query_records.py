"""A task's registered queries as `Q/<n>` records of its state partition.

A round's registrations go into new records of up to `QUERIES_PER_RECORD` queries, not
one record per query: a burst of registrations made every partition write one state
record per command (four of the nine records a command cost at 4 partitions), and a
restart read them all back (docs/benchmarks.md, "Registration"). A deregistration
rewrites the record that holds the query without it, or tombstones the record when it
was the last, in the round that applies it.

Registration order is kept by each query's sequence number, written with it, as the
one-per-query `q/<query id>` records of earlier versions did; those are still read,
and a deregistration of such a query tombstones its `q/` record.
"""

from __future__ import annotations

import json
from collections.abc import Container, Iterable, Mapping

from juggler.codec.bounded import RECORD_OVERHEAD_BYTES

QUERIES = "Q/"
LEGACY = "q/"
"""An earlier version's record of one query (read; tombstoned at its deregistration)."""
QUERIES_PER_RECORD = 100
"""At most this many queries in one `Q/` record: a deregistration rewrites its record,
so a record's size is what a deregistration costs; at 100 a burst still writes a
hundredth of the records it did."""

StoredQuery = tuple[int, str, bool]
"""A query as its record holds it: (registration sequence, text, own results topic)."""

def queries_key(number: int) -> bytes:
    return f"{QUERIES}{number}".encode()


def queries_record(queries: Mapping[str, StoredQuery]) -> bytes:
    """`{"queries": {<id>: [seq, text, own_topic], ...}}`, in registration order."""
    return json.dumps({"queries": queries}, separators=(",", ":")).encode()


def queries_of(value: bytes) -> dict[str, StoredQuery]:
    """The queries of a `Q/` record; a TypeError or ValueError for one the worker did
    not write."""
    stored = json.loads(value)["queries"]
    if not isinstance(stored, dict):
        raise TypeError("the queries are not an object")
    out: dict[str, StoredQuery] = {}
    for qid, (seq, text, own) in stored.items():
        if type(seq) is not int or type(text) is not str or type(own) is not bool:
            raise TypeError("a query is not [seq, text, own_topic]")
        out[qid] = (seq, text, own)
    return out


def legacy_query_of(value: bytes) -> StoredQuery:
    """The query of an earlier version's `q/<query id>` record."""
    record = json.loads(value)
    return record["seq"], record["text"], bool(record.get("own_topic", False))


class QueryRecords:
    """Which record holds each of a task's registered queries, so that a round writes
    its registrations in a few records and a deregistration rewrites only the one that
    held the query."""

    def __init__(self, max_record_bytes: int) -> None:
        self.max_bytes = (max_record_bytes - RECORD_OVERHEAD_BYTES
                          - len(queries_key(2**63))) // 4
        """What a `Q/` record's value may take: a quarter of the producer's limit, since
        the Faust runtime writes a replaced record with its previous value beside it,
        escaped as JSON once more (`faust.state_table.envelope`)."""
        self.records: dict[int, dict[str, int]] = {}
        """Record number -> its queries' ids and sequence numbers, in registration order."""
        self.home: dict[str, int] = {}
        """Query id -> the number of the record holding it."""
        self.legacy: set[str] = set()
        """Queries held by an earlier version's `q/` record."""
        self.fresh: dict[str, int] = {}
        """This round's registrations, not in a record yet."""
        self.changed: dict[int, None] = {}
        """Records a deregistration changed this round."""
        self.gone: list[str] = []
        """This round's deregistrations of queries held by a `q/` record."""
        self.uncompiled: dict[str, StoredQuery] = {}
        """Restored queries the task left out (they no longer compile): kept as they
        are when their record is rewritten, as the state kept them."""
        self.next_record = 0
        self.next_seq = 0
        """The registration sequence the next query gets."""

    def add(self, qid: str) -> None:
        """`qid` registered, after every query registered before it."""
        self.fresh[qid] = self.next_seq
        self.next_seq += 1

    def remove(self, qid: str) -> None:
        """`qid` deregistered: registered by the task, or restored and left out of its
        engine (`uncompiled`), which must leave the state all the same, or a fixed
        schema would bring it back at a later restart."""
        if self.fresh.pop(qid, None) is not None:
            return
        self.uncompiled.pop(qid, None)
        number = self.home.pop(qid, None)
        if number is not None:
            del self.records[number][qid]
            self.changed[number] = None
        elif qid in self.legacy:
            self.legacy.discard(qid)
            self.gone.append(qid)

    def flush(self, texts: Mapping[str, str], own: Container[str]
              ) -> list[tuple[bytes, bytes | None]]:
        """The round's records (key, value or tombstone): the records its
        deregistrations changed, then its registrations in new ones. `texts` and `own`
        are the task's registered queries and those with their own results topic."""
        out: list[tuple[bytes, bytes | None]] = [
            ((LEGACY + qid).encode(), None) for qid in self.gone]
        for number in self.changed:
            kept = self.records[number]
            if kept:
                out.append((queries_key(number), self._value(kept, texts, own)))
            else:
                del self.records[number]
                out.append((queries_key(number), None))
        fresh = list(self.fresh.items())
        self.gone, self.changed, self.fresh = [], {}, {}
        for start in range(0, len(fresh), QUERIES_PER_RECORD):
            out += self._write(fresh[start:start + QUERIES_PER_RECORD], texts, own)
        return out

    def _write(self, part: list[tuple[str, int]], texts: Mapping[str, str],
               own: Container[str]) -> list[tuple[bytes, bytes]]:
        """`part` as one new record, or as halves while that is over `max_bytes` (a
        query's text may be 20,000 characters)."""
        queries = dict(part)
        value = self._value(queries, texts, own)
        if len(value) > self.max_bytes and len(part) > 1:
            half = len(part) // 2
            return self._write(part[:half], texts, own) + self._write(part[half:], texts, own)
        number = self.next_record
        self.next_record += 1
        self.records[number] = queries
        self.home.update(dict.fromkeys(queries, number))
        return [(queries_key(number), value)]

    def _value(self, queries: Mapping[str, int], texts: Mapping[str, str],
               own: Container[str]) -> bytes:
        uncompiled = self.uncompiled
        return queries_record({
            qid: (seq, texts[qid], qid in own) if qid not in uncompiled else uncompiled[qid]
            for qid, seq in queries.items()})

    def restored(self, records: Mapping[int, Iterable[str]], legacy: Iterable[str],
                 stored: Mapping[str, StoredQuery], registered: Container[str]) -> None:
        """The records a restore read back (`TaskState.query_records`, `.legacy`) and
        the queries they hold (`stored`), of which the task registered `registered`."""
        for number, qids in records.items():
            self.records[number] = {qid: stored[qid][0] for qid in qids}
            self.home.update(dict.fromkeys(qids, number))
            self.next_record = max(self.next_record, number + 1)
        self.legacy.update(legacy)
        self.uncompiled = {qid: query for qid, query in stored.items()
                           if qid not in registered}
        self.next_seq = max((seq for seq, _, _ in stored.values()), default=-1) + 1
