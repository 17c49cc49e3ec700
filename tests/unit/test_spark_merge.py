"""The shared backfill's merge on the driver (`juggler.spark.merge`): partitions'
results, each in eval's order and spread over many compressed batches, come out as
one stream in eval's order with nothing lost or repeated, whatever order Spark hands
the batches over in."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from juggler.spark import merge


class Batches:
    """What `merge.ordered` reads of the cached RDD: its batches, in the order the
    driver receives them."""

    def __init__(self, batches: list[merge.Batch]) -> None:
        self.batches = batches

    def toLocalIterator(self) -> Any:  # noqa: N802 - pyspark's name
        return iter(self.batches)


def partition_rows(rng: random.Random, keys: list[str], events: int) -> list[tuple[Any, ...]]:
    """A partition's rows: triggers at increasing positions, each with one to three
    results in key order (several keys at one position, as a registration's history
    gives them; positions also repeat across partitions, as control lines do)."""
    rows = []
    for position in sorted(rng.sample(range(10 * events), events)):
        for seq, key in enumerate(sorted(rng.choices(keys, k=rng.randint(1, 3)))):
            rows.append((position, key, seq, f"{position} {key} {seq}\n"))
    return rows


def test_many_batches_per_partition_merge_into_eval_order(tmp_path: Path) -> None:
    rng = random.Random(20261203)
    partitions = [partition_rows(rng, [f"k{p}-{i}" for i in range(5)], 8_000) for p in range(3)]
    packed = [list(merge.packed(p, rows)) for p, rows in enumerate(partitions)]
    assert all(len(own) > 3 for own in packed)  # several a partition: reading ahead matters
    batches = []  # the partitions' batches interleaved, each partition's in its order
    while any(packed):
        batches.append(rng.choice([own for own in packed if own]).pop(0))
    merged = list(merge.ordered(Batches(batches), tmp_path))
    assert merged == sorted(row for rows in partitions for row in rows)
    assert not list(tmp_path.iterdir())  # the spill files are gone
