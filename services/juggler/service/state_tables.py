"""The worker's changelogged Faust tables, written inside the batch's own transaction.

Faust tables are used for what they do well: a compacted changelog topic per table,
co-partitioned with the source topics, and recovery of the assigned partitions before
the agents get any event. Writes do not go through `table[key] = value`, because Faust
sends those through a background buffer that its commit does not wait for; instead a
write is one more record in the batch's `Outbox` (same transaction as the results and
the offsets), and the local store is updated once that transaction is committed.

Keys and values are raw bytes (`str` keys are UTF-8); a `None` value deletes the key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from juggler.service.transactions import Outbox


class StateTables:
    def __init__(self, app: Any, partitions: int) -> None:
        self.held = self._table(app, "held", partitions,
                                "per entity key: the engine's held events (KeySnapshot)")
        self.queries = self._table(app, "queries", partitions,
                                   "per source partition: the queries registered in its engine")
        self.accepted = self._table(app, "accepted", 1, "the accepted (registered) queries, by id")

    @staticmethod
    def _table(app: Any, name: str, partitions: int, help: str) -> Any:
        table = app.Table(name, partitions=partitions, default=None, help=help,
                          key_type=bytes, value_type=bytes)
        # Faust derives serializers from Model types and falls back to JSON; the
        # changelog topic is made on first use, so raw bytes can still be set here.
        table.key_serializer = table.value_serializer = "raw"
        return table

    @staticmethod
    def write(outbox: Outbox, table: Any, partition: int, key: str, value: bytes | None) -> None:
        """Send a changelog record in `outbox`'s transaction; apply it locally on commit."""
        kb = key.encode()
        outbox.send(table.changelog_topic.get_topic_name(), kb, value, partition=partition)

        def apply() -> None:
            store = table.data
            if value is None:
                store.data.pop(kb, None)
                store._key_partition.pop(kb, None)
            else:
                store.data[kb] = value
                store._key_partition[kb] = partition  # what memory-store recovery keeps

        outbox.then(apply)

    @staticmethod
    def get(table: Any, key: str) -> bytes | None:
        return table.data.data.get(key.encode())

    @staticmethod
    def items_with_prefix(table: Any, prefix: str) -> Iterator[tuple[str, bytes]]:
        p = prefix.encode()
        for key, value in list(table.data.data.items()):
            if isinstance(key, str):
                key = key.encode()
            if key.startswith(p) and value is not None:
                yield key.decode(), value

    @staticmethod
    def items(table: Any) -> Iterator[tuple[str, bytes]]:
        return StateTables.items_with_prefix(table, "")
