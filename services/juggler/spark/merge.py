"""The shared backfill's results in eval's order, merged on the driver.

Why not a global sort: every partition's engine already yields its results in eval's
order (by trigger position, then key, then index within the trigger), and a key lives
in one partition, so the partitions' outputs only need merging. A Spark sort of all
results shuffles them and ran a 1 GB driver out of heap at 1.7 million results; the
merge reads each result once and holds a batch per partition.

Spark hands a partition to the driver only whole and one at a time
(`toLocalIterator`), so each partition is first spilled to a file of pickled
batches on the driver's disk, then the files are merged (`heapq.merge`) as streams.
"""

from __future__ import annotations

import heapq
import pickle
import tempfile
from collections.abc import Iterable, Iterator
from operator import itemgetter
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark import RDD

BATCH = 4096
"""Rows per pickled batch in a spill file: what the merge holds per partition."""

ORDER = itemgetter(0, 1, 2)
"""A result row's place in eval's order: (trigger position, key, index in the trigger)."""


def ordered(rows: RDD[tuple[Any, ...]], spill_dir: Path) -> Iterator[tuple[Any, ...]]:
    """Every row of `rows`, whose partitions are each in `ORDER`, merged into `ORDER`,
    with spill files in a temporary directory under `spill_dir` (removed at the end)."""
    with tempfile.TemporaryDirectory(prefix=".backfill-merge-", dir=spill_dir) as tmp:
        files: dict[int, IO[bytes]] = {}
        try:
            _spill(rows, Path(tmp), files)
            for handle in files.values():
                handle.seek(0)
            yield from heapq.merge(*(_read(h) for h in files.values()), key=ORDER)
        finally:
            for handle in files.values():
                handle.close()


def _spill(rows: RDD[tuple[Any, ...]], tmp: Path, files: dict[int, IO[bytes]]) -> None:
    """Each partition's rows, in their order, to a file of its own."""
    batches: dict[int, list[tuple[Any, ...]]] = {}

    def flush(partition: int) -> None:
        pickle.dump(batches.pop(partition), files[partition], pickle.HIGHEST_PROTOCOL)

    for partition, row in rows.mapPartitionsWithIndex(_tagged).toLocalIterator():
        if partition not in files:
            files[partition] = open(tmp / str(partition), "w+b")
        batch = batches.setdefault(partition, [])
        batch.append(row)
        if len(batch) >= BATCH:
            flush(partition)
    for partition in list(batches):
        flush(partition)


def _tagged(partition: int, rows: Iterable[Any]) -> Iterator[tuple[int, Any]]:
    return ((partition, row) for row in rows)


def _read(handle: IO[bytes]) -> Iterator[tuple[Any, ...]]:
    while True:
        try:
            yield from pickle.load(handle)
        except EOFError:
            return
