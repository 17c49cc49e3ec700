"""A partition's state in the Faust runtime's table (`juggler.faust.state_table`).

What a user relies on: whatever prefix of a batch's table records reached the changelog
before a crash, the restore gives exactly the state of the last batch whose mark was
written, and writes back what the unfinished batch overwrote; an `r/` record rewritten
into a newer one is not restored twice.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from juggler.faust import state_table
from juggler.faust.state_table import Mark, batch_records, restore
from juggler.runtime.held_state import KEY, key_meta, refs_key, refs_record
from juggler.runtime.query_records import queries_key, queries_record

P = 3


def apply(data: dict[bytes, bytes], records: list[tuple[bytes, bytes | None]]) -> None:
    """What Faust's recovery does with changelog records: the last value per key wins,
    a tombstone removes."""
    for key, value in records:
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value


def write(data: dict[bytes, bytes], batch: int, puts: list[tuple[bytes, bytes | None]],
          offsets: dict[str, int], cut: int | None = None) -> None:
    """A batch's records as the runtime writes them; `cut`: only that many reach the
    changelog (a crash)."""
    values, tombstones = batch_records(P, batch, puts, Mark(batch, offsets), data)
    records = values + [(key, None) for key in tombstones]
    apply(data, records if cut is None else records[:cut])


def ref(offset: int, seq: int, ts: int, key: str = "p1") -> tuple[str, int, int, int, str]:
    return ("B", offset, seq, ts, key)


BATCH_1 = [(refs_key(0), refs_record([ref(0, 0, 100), ref(1, 1, 200)])),
           ((KEY + "p1").encode(), key_meta(200, 100)),
           (queries_key(0), queries_record({"q1": (0, "SELECT * FROM B", False),
                                            "q3": (1, "SELECT * FROM T", False)}))]
BATCH_2 = [(refs_key(1), refs_record([ref(2, 2, 300)])),
           ((KEY + "p1").encode(), key_meta(300, 250)),
           (queries_key(1), queries_record({"q2": (2, "SELECT * FROM H", False)})),
           (queries_key(0), queries_record({"q3": (1, "SELECT * FROM T", False)}))]


def after_batch_1() -> dict[bytes, bytes]:
    data: dict[bytes, bytes] = {}
    write(data, 0, BATCH_1, {"B": 2})
    return data


def test_a_marked_batch_restores_as_written() -> None:
    data = after_batch_1()
    write(data, 1, BATCH_2, {"B": 3})
    restored = restore(P, data)
    assert restored.mark == Mark(1, {"B": 3})
    assert restored.state.keys == {"p1": (300, 250)}
    assert set(restored.state.queries) == {"q2", "q3"}
    assert {k: len(v) for k, v in restored.state.refs.items()} == {refs_key(0): 2, refs_key(1): 1}
    assert restored.repairs == []


@given(st.integers(0, sum(v is not None for _, v in BATCH_2)))
def test_an_unmarked_batch_restores_as_the_last_mark(cut: int) -> None:
    """Every prefix of batch 2's records that stops before its mark (its values come
    first, then the mark, then its tombstones)."""
    data = after_batch_1()
    write(data, 1, BATCH_2, {"B": 3}, cut=cut)
    restored = restore(P, data)
    assert restored.mark == Mark(0, {"B": 2})
    assert restored.state.keys == {"p1": (200, 100)}
    assert set(restored.state.queries) == {"q1", "q3"}
    assert list(restored.state.refs) == [refs_key(0)]
    apply(data, restored.repairs)
    again = restore(P, data)
    assert again.repairs == [] and again.state.keys == restored.state.keys
    assert list(again.state.refs) == [refs_key(0)]


def test_a_record_rewritten_into_a_newer_one_is_dropped_once() -> None:
    """Record 0 kept one held event, rewritten into record 1 by batch 2, whose
    tombstone of record 0 (after the mark) never reached the changelog."""
    data = after_batch_1()
    moved = [(refs_key(1), refs_record([ref(1, 1, 200), ref(2, 2, 300)])),
             (refs_key(0), None)]
    write(data, 1, moved, {"B": 3}, cut=2)  # record 1 and the mark; not the tombstone
    restored = restore(P, data)
    assert list(restored.state.refs) == [refs_key(1)]
    assert (state_table.table_key(P, refs_key(0)), None) in restored.repairs


def test_other_partitions_are_not_read() -> None:
    data = after_batch_1()
    assert restore(P + 1, data).state.keys == {}
