"""A task's state in a Faust Table: the WES/JES state of each partition's operator.

The records are the worker's state records (`juggler.runtime.held_state`: `r/` the held
events of a round, `k/` a key's `maxts` and `floor`, `Q/` registered queries, `h` the
horizon), kept in one changelog-backed Table under `<partition>/<state key>`, written to
changelog partition p and restored by Faust's own recovery when p is assigned. Like the
worker's state topic, a held event is a reference to its stream record, read back at
restore, so no table record grows with what a key holds and a batch writes only what
it changed.

Faust offers no transaction, so a batch's records can reach the changelog in part
before a crash. Each value therefore carries the batch that wrote it and the value it
replaced; after a batch's records comes its mark (`<p>/m`: the batch number and the input
offsets it processed up to), and only then its tombstones, which nothing unwritten can
need. A restore takes every record of a batch past the last mark
at its previous value and writes that value back, so the state is exactly the last
marked batch's, and records below the mark's offsets that Faust delivers again (its
offsets commit on a timer) are skipped. Before a batch publishes, `<p>/w` names the
offsets it covers: results of records below them that are evaluated again after a
crash may have been published already, and are counted as possible repeats.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field

from juggler.runtime.held_state import REFS, TaskState

MARK = "m"
PUBLISHING = "w"


@dataclass
class Mark:
    """Where a partition's state stands: the last batch whose records all reached the
    changelog."""

    batch: int = -1
    offsets: dict[str, int] = field(default_factory=dict)
    """Input topic -> the next offset to process (everything below is in the state)."""


@dataclass
class Restored:
    state: TaskState
    mark: Mark
    publishing: dict[str, int]
    """Input topic -> the end of the offsets a batch was publishing at the crash."""
    repairs: list[tuple[bytes, bytes | None]]
    """Table records to write back: the unmarked batch's, at their previous values."""


def table_key(partition: int, state_key: bytes) -> bytes:
    return b"%d/" % partition + state_key


def envelope(batch: int, value: bytes, previous: bytes | None) -> bytes:
    """A table value: a JSON line with the batch and the replaced value, then `value`.
    What it adds stays within the producer's limit: `k/` and `h` records are small, a
    `Q/` record is at most a quarter of the limit (`QueryRecords.max_bytes`), and an
    `r/` record, sized to the limit less `RECORD_OVERHEAD_BYTES`, carries no previous
    value."""
    header = {"b": batch, "prev": None if previous is None else previous.decode("utf-8")}
    return json.dumps(header, separators=(",", ":")).encode() + b"\n" + value


def opened(stored: bytes) -> tuple[int, bytes, bytes | None]:
    """(batch, value, previous value) of a table value written by `envelope`."""
    line, _, value = stored.partition(b"\n")
    header = json.loads(line)
    prev = header["prev"]
    return int(header["b"]), value, None if prev is None else prev.encode("utf-8")


def value_of(stored: bytes | None) -> bytes | None:
    return None if stored is None else opened(stored)[1]


def mark_record(mark: Mark) -> bytes:
    return json.dumps({"batch": mark.batch, "offsets": mark.offsets},
                      separators=(",", ":")).encode()


def batch_records(partition: int, batch: int, puts: Iterable[tuple[bytes, bytes | None]],
                  mark: Mark, data: Mapping[bytes, bytes]
                  ) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """A batch's table records in the order they must reach the changelog: its values
    (each in its envelope, with what it replaces in `data`), the mark last; and the
    keys it tombstones, to delete once those are written."""
    values, tombstones = [], []
    for state_key, value in puts:
        key = table_key(partition, state_key)
        if value is None:
            tombstones.append(key)
        elif state_key.startswith(REFS.encode()):
            # written once under a new number, never replaced: nothing to keep, and an
            # `r/` record is as large as the producer's limit allows
            values.append((key, envelope(batch, value, None)))
        else:
            values.append((key, envelope(batch, value, value_of(data.get(key)))))
    values.append((table_key(partition, MARK.encode()), mark_record(mark)))
    return values, tombstones


def restore(partition: int, data: MutableMapping[bytes, bytes]) -> Restored:
    """Partition p's state from the table as Faust recovered it: the last mark, the
    records at their values as of that mark, and the writes that put them back."""
    prefix = b"%d/" % partition
    mine = {key[len(prefix):]: value for key, value in data.items() if key.startswith(prefix)}
    mark = Mark()
    stored_mark = mine.pop(MARK.encode(), None)
    if stored_mark is not None:
        m = json.loads(stored_mark)
        mark = Mark(int(m["batch"]), {t: int(o) for t, o in m["offsets"].items()})
    stored_publishing = mine.pop(PUBLISHING.encode(), None)
    publishing = {} if stored_publishing is None else {
        t: int(o) for t, o in json.loads(stored_publishing).items()}
    state = TaskState()
    repairs: list[tuple[bytes, bytes | None]] = []
    for state_key, stored in mine.items():
        batch, latest, previous = opened(stored)
        value: bytes | None = latest
        if batch > mark.batch:
            key = prefix + state_key
            repairs.append((key, None if previous is None
                            else envelope(mark.batch, previous, None)))
            value = previous
        if value is not None:
            state.apply(state_key, value, ())
    repairs += _drop_rewritten(partition, state)
    return Restored(state, mark, publishing, repairs)


def _drop_rewritten(partition: int, state: TaskState) -> list[tuple[bytes, bytes | None]]:
    """Tombstones for `r/` records whose events a newer record holds again: a record
    with few events left has them written into the next batch's record and is
    tombstoned after that batch's mark, so a crash in between leaves both. The older
    one goes (from `state` too): every event it still holds is in the newer."""
    seen: set[int] = set()
    gone: list[tuple[bytes, bytes | None]] = []
    for key in sorted(state.refs, key=lambda k: -int(k[len(REFS):])):
        seqs = {ref[2] for ref in state.refs[key]}
        if seqs & seen:
            del state.refs[key]
            gone.append((table_key(partition, key), None))
        seen |= seqs
    return gone
