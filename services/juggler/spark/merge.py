"""The shared backfill's results in eval's order, merged on the driver.

Why not a global sort: every partition's engine already yields its results in eval's
order (by trigger position, then key, then index within the trigger), and a key lives
in one partition, so the partitions' outputs only need merging. A Spark sort of all
results shuffles them and ran a 1 GB driver out of heap at 1.7 million results; the
merge reads each result once and holds a batch per partition.

Spark hands a partition to the driver only whole and one at a time
(`toLocalIterator`), and in local mode that partition and the executors' cache share
the driver's heap. So the partitions hold their results as compressed batches
(`packed`, zlib level 1: JSON lines shrink about sixfold), each partition is spilled
as such to a file on the driver's disk, and the files are merged (`heapq.merge`) as
streams, a batch per partition at a time.
"""

from __future__ import annotations

import heapq
import pickle
import struct
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from itertools import islice
from operator import itemgetter
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark import RDD

BATCH = 4096
"""Rows per compressed batch: what the merge holds per partition."""

LENGTH = struct.Struct(">I")
"""A batch's size in bytes, before it in a spill file."""

ORDER = itemgetter(0, 1, 2)
"""A result row's place in eval's order: (trigger position, key, index in the trigger)."""


Batch = tuple[int, bytes]
"""A `packed` batch: (its partition, the rows pickled and compressed)."""


def packed(partition: int, rows: Iterable[tuple[Any, ...]]) -> Iterator[Batch]:
    """A partition's rows as batches, each tagged with the partition, so that the
    driver can tell the partitions' batches apart without another pass through
    Python over them (`ordered` reads the cached batches as they are)."""
    rows = iter(rows)
    while batch := list(islice(rows, BATCH)):
        yield partition, zlib.compress(pickle.dumps(batch, pickle.HIGHEST_PROTOCOL), 1)


def unpacked(batch: Batch) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = pickle.loads(zlib.decompress(batch[1]))
    return rows


def ordered(batches: RDD[Batch], spill_dir: Path) -> Iterator[tuple[Any, ...]]:
    """Every row of `packed` batches whose partitions are each in `ORDER`, merged
    into `ORDER`, with spill files in a temporary directory under `spill_dir`
    (removed at the end)."""
    with tempfile.TemporaryDirectory(prefix=".backfill-merge-", dir=spill_dir) as tmp, \
            ThreadPoolExecutor(2, thread_name_prefix="backfill-inflate") as inflate:
        files: dict[int, IO[bytes]] = {}
        try:
            for partition, blob in batches.toLocalIterator():
                if partition not in files:
                    files[partition] = open(Path(tmp) / str(partition), "w+b")
                files[partition].write(LENGTH.pack(len(blob)) + blob)
            for handle in files.values():
                handle.seek(0)
            yield from heapq.merge(*(_read(h, inflate) for h in files.values()), key=ORDER)
        finally:
            for handle in files.values():
                handle.close()


def _read(handle: IO[bytes], inflate: Executor) -> Iterator[tuple[Any, ...]]:
    """A spill file's rows, each batch decompressed on `inflate`'s threads while the
    one before is merged: `zlib.decompress` runs without the interpreter's lock, so
    on a second core it takes nothing from the merge (docs/benchmarks.md, "Spark
    backfill")."""
    def batch() -> Future[bytes] | None:
        head = handle.read(LENGTH.size)
        return inflate.submit(zlib.decompress, handle.read(LENGTH.unpack(head)[0])) \
            if head else None

    ahead = batch()
    while ahead is not None:
        current, ahead = ahead, batch()
        yield from pickle.loads(current.result())
