"""The control agent: `juggler.control` in, statuses and fanout copies out.

Each command is validated against the accepted set (a changelogged table, so validation
survives restarts) and the codec's catalog. A rejected command (repeated id, unknown id
on deregister, a query that does not compile, an id that cannot name a topic, bytes
that are not a command) only gets a REJECTED status with the reason. An accepted one
gets its results topic created (idempotent), an ACCEPTED status, and one copy per
partition of `juggler.control.fanout`, so that every partition engine applies it in
its own log order. Statuses, copies, the accepted-set change and the control offset are
one transaction.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from juggler.codec.avro import COMMAND, COMMAND_STATUS, CodecError
from juggler.service.event_agent import CONTROL_OFFSET_HEADER, InputGap, batch_agent
from juggler.service.input_positions import (
    as_faust_tps,
    committed_offsets,
    nothing_between,
)
from juggler.service.transactions import Outbox

log = logging.getLogger(__name__)


class ControlPlane:
    def __init__(self, worker: Any) -> None:
        self.w = worker
        self.codec = worker.codec
        self.names = worker.names
        self.tables = worker.tables
        self.next_offsets: dict[Any, int] | None = None  # see input_positions

    def accepted(self) -> dict[str, dict[str, Any]]:
        """The accepted queries by id (on the worker that owns the control partition)."""
        return {key: json.loads(value)
                for key, value in self.tables.items(self.tables.accepted)}

    async def process_batch(self, events: Sequence[Any]) -> None:
        settings = self.w.settings
        if self.next_offsets is None:
            self.next_offsets = as_faust_tps(await asyncio.to_thread(
                committed_offsets, settings.bootstrap, settings.app_id,
                [(self.names.control, 0)]))
        outbox = Outbox()
        offsets: dict[Any, int] = {}
        accepted = self.accepted()  # this batch's view, ahead of the table
        for event in events:
            message = event.message
            expected = self.next_offsets.get(message.tp)
            if expected is not None and message.offset < expected:
                continue  # delivered a second time: already applied and committed
            if expected is not None and message.offset > expected and not \
                    await asyncio.to_thread(nothing_between, settings.bootstrap,
                                            settings.app_id, message.topic, message.partition,
                                            expected, message.offset):
                raise InputGap(f"the consumer delivered control offset {message.offset} but "
                               f"skipped committed commands from offset {expected}")
            self.next_offsets[message.tp] = message.offset + 1
            offsets[message.tp] = message.offset + 1
            await self._handle(message, accepted, outbox)
        if not offsets:
            return
        await self.w.transactions.commit(events[0].message.topic, events[0].message.partition,
                                         offsets, outbox)

    async def _handle(self, message: Any, accepted: dict[str, dict[str, Any]],
                      outbox: Outbox) -> None:
        from juggler.language import QueryError, compile_query

        try:
            command = self.codec.decode(COMMAND, message.value)
        except CodecError as exc:
            self.w.dead_letters.send(outbox, message, "bad_command", exc.reason)
            log.warning("control offset %d: not a command: %s", message.offset, exc.reason)
            return
        query_id, action = command["id"], command["action"]
        problem = None
        if action == "REGISTER":
            problem = self.names.query_id_problem(query_id)
            if problem is None and query_id in accepted:
                problem = f"query {query_id!r} is already registered"
            if problem is None and not command.get("text"):
                problem = f"register {query_id!r}: the command has no query text"
            if problem is None:
                try:
                    compile_query(query_id, command["text"], self.w.catalog)
                except QueryError as exc:
                    problem = str(exc)
        elif query_id not in accepted:
            problem = f"query {query_id!r} is not registered"

        if problem is None:
            if action == "REGISTER":
                await asyncio.to_thread(self.w.ensure_results_topic, query_id)
                record = {"text": command["text"], "history": bool(command.get("history")),
                          "offset": message.offset}
                accepted[query_id] = record
                value: bytes | None = json.dumps(record).encode()
            else:
                accepted.pop(query_id, None)
                value = None
            self.tables.write(outbox, self.tables.accepted, message.partition, query_id, value)
            copy = self.codec.encode(COMMAND, command, topic=self.names.fanout)
            headers = [(CONTROL_OFFSET_HEADER, str(message.offset).encode())]
            for p in range(self.w.partitions):
                outbox.send(self.names.fanout, query_id.encode(), copy, partition=p,
                            headers=headers)
        status = {"id": query_id, "action": action,
                  "status": "REJECTED" if problem else "ACCEPTED",
                  "message": problem or "", "command_offset": message.offset}
        outbox.send(self.names.status, query_id.encode(),
                    self.codec.encode(COMMAND_STATUS, status, topic=self.names.status))
        counter = self.w.metrics.commands.labels(action, status["status"])
        outbox.then(counter.inc)
        log.info("control offset %d: %s %r %s%s", message.offset, action, query_id,
                 status["status"], f" ({problem})" if problem else "")


def install(worker: Any) -> ControlPlane:
    plane = ControlPlane(worker)
    channel = worker.app.topic(worker.names.control, key_serializer="raw", value_serializer="raw")
    batch_agent(worker, channel, "juggler.control", plane, 100)
    return plane
