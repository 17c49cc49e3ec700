"""The state topic's records of held events, without Kafka: what a restart would read
back is what the task holds, whatever the rounds, releases and restarts before."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from juggler.runtime import held_state
from juggler.runtime.held_state import HeldRefs, TaskState

LIMIT = 1_000_000
TOPIC = "t.juggler.stream.B"


def _write(state: TaskState, refs: HeldRefs, floors: dict[str, int]) -> list[bytes]:
    """Finish a round: fold what it writes into `state` as the topic would keep it, and
    return the keys it wrote."""
    gone, written = refs.flush()
    for key in gone:
        state.apply(key, None, [])
    for key, value in written:
        state.apply(key, value, [])
    for key, floor in floors.items():
        state.apply(f"k/{key}".encode(), held_state.key_meta(None, floor), [])
    return gone + [key for key, _ in written]


def _held(state: TaskState) -> set[tuple[str, int, bytes, int]]:
    return {(e.topic, e.offset, e.key, e.seq) for _, _, held in state.held() for e in held}


def _restart(state: TaskState) -> HeldRefs:
    """A restore that reads every original back: each still-held event comes back."""
    refs = HeldRefs(LIMIT)
    ts_of = {(topic, offset): ts for records in state.refs.values()
             for topic, offset, _, ts, _ in records}
    for state_key, size, held in state.held():
        refs.restored(state_key, size, len(held),
                      [(e.topic, e.offset, e.seq, ts_of[(e.topic, e.offset)], e.key.decode())
                       for e in held])
    return refs


def test_a_round_writes_one_record_and_nothing_for_what_it_released() -> None:
    refs, state = HeldRefs(LIMIT), TaskState()
    for offset, ts in enumerate((100, 300, 200)):
        refs.add((TOPIC, offset, offset, ts, "p1"))
    refs.add((TOPIC, 3, 3, 50, "p2"))
    refs.release("p1", 250)
    _, written = refs.flush()
    assert written == [(b"r/0", json.dumps(
        {"refs": {TOPIC: [[1, 1, 300, "p1"], [3, 3, 50, "p2"]]}}, separators=(",", ":")).encode())]


def test_a_record_is_tombstoned_when_its_events_are_released_and_rewritten_when_sparse() -> None:
    refs, state = HeldRefs(LIMIT), TaskState()
    for offset in range(8):
        refs.add((TOPIC, offset, offset, 1000 + offset, f"k{offset}"))
    assert _write(state, refs, {}) == [b"r/0"]
    for offset in range(6):  # 2 of 8 still held: a quarter, kept
        refs.release(f"k{offset}", 5000)
    assert _write(state, refs, {f"k{o}": 5000 for o in range(6)}) == []
    refs.release("k6", 5000)  # 1 of 8: rewritten with the round's events
    refs.add((TOPIC, 8, 8, 2000, "k8"))
    assert _write(state, refs, {f"k{o}": 5000 for o in range(7)}) == [b"r/0", b"r/1"]
    assert sorted(state.refs) == [b"r/1"]
    assert _held(state) == {(TOPIC, 7, b"k7", 7), (TOPIC, 8, b"k8", 8)}
    refs.release("k7", 5000)
    refs.release("k8", 5000)
    assert _write(state, refs, {"k7": 5000, "k8": 5000}) == [b"r/1"]
    assert state.refs == {} and refs.held() == 0


def test_a_record_over_the_producer_limit_is_split() -> None:
    limit = 20_000
    refs, state = HeldRefs(limit), TaskState()
    for offset in range(8):
        refs.add((TOPIC, offset, offset, 1, "x" * 4_000 + str(offset)))
    _, written = refs.flush()
    assert len(written) > 1
    assert all(len(k) + len(v) + held_state.RECORD_OVERHEAD_BYTES <= limit for k, v in written)
    for key, value in written:
        state.apply(key, value, [])
    assert len(_held(state)) == 8


def test_records_of_an_earlier_version_restore_and_are_written_again() -> None:
    """`e/` records (a reference per event, headers the entity key and sequence, the
    value an ignored copy) come back as held events, and the first round writes them
    as an `r/` record and tombstones them."""
    state = TaskState()
    headers = [("key", b"p1"), ("seq", b"7")]
    state.apply(f"e/{TOPIC}/12".encode(), b"", headers)
    state.apply(b"e/t.juggler.stream.H/3", b"\x01a copy", [("key", b"p1"), ("seq", b"8")])
    state.apply(f"e/{TOPIC}/13".encode(), b"", headers)
    state.apply(f"e/{TOPIC}/13".encode(), None, [])
    state.apply(b"r/4", held_state.refs_record([(TOPIC, 20, 9, 500, "p2"),
                                                (TOPIC, 21, 10, 900, "p2")]), [])
    state.apply(b"k/p2", held_state.key_meta(900, 600), [])
    state.apply(b"r/nonsense", b"{}", [])  # not the worker's: skipped
    state.apply(b"r/5", b'{"refs": {"t": [[1, 2, "3", "k"]]}}', [])
    assert _held(state) == {(TOPIC, 12, b"p1", 7), ("t.juggler.stream.H", 3, b"p1", 8),
                            (TOPIC, 21, b"p2", 10)}
    assert held_state.originals(state.held(), 5) == {(TOPIC, 5): [12, 21],
                                                     ("t.juggler.stream.H", 5): [3]}
    assert state.next_seq() == 11
    refs = HeldRefs(LIMIT)
    for state_key, size, held in state.held():
        refs.restored(state_key, size, len(held),
                      [(e.topic, e.offset, e.seq, 1000, e.key.decode()) for e in held])
    gone, written = refs.flush()
    assert sorted(gone) == [f"e/{TOPIC}/12".encode(), b"e/t.juggler.stream.H/3"]
    assert [key for key, _ in written] == [b"r/5"]  # r/4 still holds half of its own


def test_an_event_a_restore_could_not_bring_back_is_not_read_again() -> None:
    state = TaskState()
    state.apply(b"r/0", held_state.refs_record([(TOPIC, o, o, 100, "p") for o in range(4)]), [])
    refs = HeldRefs(LIMIT)
    (state_key, size, held), = state.held()
    refs.restored(state_key, size, len(held), [(TOPIC, o, o, 100, "p") for o in (0, 1, 3)])
    _write(state, refs, {})
    assert _held(state) == {(TOPIC, o, b"p", o) for o in (0, 1, 3)}


INTS = st.one_of(st.integers(), st.integers(-2**70, 2**70),
                 st.sampled_from([0, -1, 2**63 - 1, 2**63, -2**63, 10**40]))
KEYS = st.one_of(st.text(), st.text("\"\\\x00\x08\x0c\n\r\t\x1f\x7f\u2028é€😀 k/", max_size=6))
REFS = st.lists(KEYS, min_size=1, max_size=5).flatmap(lambda keys: st.lists(
    st.tuples(st.sampled_from([TOPIC, "t.juggler.stream.H", "t\"ö\\"]), INTS, INTS, INTS,
              st.sampled_from(keys)), max_size=40))
"""References with large and negative ints, keys with quotes, backslashes, control
characters and non-ASCII text, keys and topics repeating in any order."""


@settings(max_examples=500, deadline=None)
@given(REFS)
def test_refs_record_is_what_json_dumps_wrote_and_reads_back(refs: list[held_state.Ref]) -> None:
    """`refs_record` builds its JSON as text: it must be byte for byte what `json.dumps`
    of the nested lists wrote before (so a record reads back the same whichever version
    wrote it), and `_refs_of` gives back each topic's references in order."""
    by_topic: dict[str, list[list[object]]] = {}
    for topic, offset, seq, ts, key in refs:
        by_topic.setdefault(topic, []).append([offset, seq, ts, key])
    value = held_state.refs_record(refs)
    assert value == json.dumps({"refs": by_topic}, ensure_ascii=False,
                               separators=(",", ":")).encode()
    assert held_state._refs_of(value) == [
        (topic, *written) for topic, written_in in by_topic.items() for written in written_in]


OPS = st.lists(st.tuples(st.sampled_from(["add", "add", "add", "floor", "round", "restart"]),
                         st.integers(0, 2), st.integers(0, 20)), min_size=20, max_size=150)
"""(what, key, amount): take an event of key k{key} at `amount` above its floor, raise
key's floor by `amount`, finish a round, or crash and restore."""


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_what_a_restart_reads_back_is_what_is_held(ops: list[tuple[str, int, int]]) -> None:
    """Against a model that keeps every event whose ts its key's floor has not passed:
    after each round the state topic holds exactly those, in records that each still
    hold at least a quarter of what was written in them, across restarts."""
    refs, state = HeldRefs(LIMIT), TaskState()
    floors: dict[str, int] = {}
    added: list[held_state.Ref] = []
    committed: tuple[list[held_state.Ref], dict[str, int]] = ([], {})
    for n_op, (op, k, n) in enumerate(ops):
        key = f"k{k}"
        if op == "add":
            ref = (TOPIC, n_op, n_op, floors.get(key, 0) + n, key)
            added.append(ref)
            refs.add(ref)
        elif op == "floor":
            floors[key] = floors.get(key, 0) + n
            refs.release(key, floors[key])
        elif op == "round":
            _write(state, refs, floors)
            _check(state, added, floors)
            committed = (list(added), dict(floors))
        else:  # a crash: what the last round committed comes back
            refs = _restart(state)
            added, floors = list(committed[0]), dict(committed[1])


def _check(state: TaskState, added: list[held_state.Ref], floors: dict[str, int]) -> None:
    held = {(t, o, k.encode(), s) for t, o, s, ts, k in added if ts >= floors.get(k, 0)}
    assert _held(state) == held
    for records in state.refs.values():
        still = [r for r in records if r[3] >= floors.get(r[4], 0)]
        assert 4 * len(still) >= len(records)
