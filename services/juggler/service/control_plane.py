"""The control task: `juggler.control` in; statuses and barriers out.

Each command is validated against the accepted set and the codec's catalog. A rejected
command (repeated id, unknown id on deregister, a query that does not compile, an id
that cannot name a topic) gets a REJECTED status with the reason and changes nothing; a
record that is not a command is dead-lettered as well. An accepted one gets its results
topic, an ACCEPTED status, and one copy per partition on `juggler.control.fanout`
carrying the barrier: the log-end offsets (last stable offsets) that partition's
stream partitions had at acceptance. Task p applies it exactly there (DESIGN 4a).

The accepted set is what the ACCEPTED statuses say: they are written in the same
transaction as the control offsets, so on assignment the task reads the status topic
up to its end and holds the set as of its committed offset. The status topic keeps
every record (`topics/control.yaml`: no retention limit) for that reason.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from juggler.codec.avro import COMMAND, COMMAND_STATUS, CodecError
from juggler.service.task import BARRIER_HEADER, CONTROL_OFFSET_HEADER, Record, RoundCounts
from juggler.service.transactions import Outbox

if TYPE_CHECKING:
    from juggler.service.job import TaskContext

log = logging.getLogger(__name__)

MAX_MESSAGE = 4096
"""Characters of a rejection message kept in the status record."""


class ControlTask:
    def __init__(self, worker: TaskContext) -> None:
        self.w = worker
        self.accepted: set[str] = set()
        """The ids of the registered queries."""
        self.pending: list[Record] = []
        self.restored = False

    def restore(self, statuses: list[dict[str, Any]]) -> None:
        """The accepted set from the status topic (in log order)."""
        for status in statuses:
            if status["status"] != "ACCEPTED":
                continue
            if status["action"] == "REGISTER":
                self.accepted.add(status["id"])
            else:
                self.accepted.discard(status["id"])
        self.restored = True

    def add(self, record: Record) -> None:
        self.pending.append(record)

    def run(self, outbox: Outbox, counts: RoundCounts) -> None:
        """Decide every pending command; the barriers of this round's accepted commands
        are the log ends asked once, now (they were all accepted at this moment)."""
        if not self.pending:
            return
        w = self.w
        barriers: dict[int, dict[str, int]] | None = None
        for record in self.pending:
            command = self._decode(record, outbox, counts)
            if command is None:
                continue
            problem = _key_problem(record.key, command["id"]) or self._problem(command)
            if problem is None:
                if barriers is None:
                    barriers = w.stream_log_ends()
                self._accept(command, record, barriers, outbox)
            self._status(command, record, problem, outbox)
        last = self.pending[-1]
        outbox.offsets[(last.topic, last.partition)] = last.offset + 1
        self.pending = []

    def _decode(self, record: Record, outbox: Outbox, counts: RoundCounts) -> dict[str, Any] | None:
        try:
            return self.w.codec.decode(COMMAND, record.value)
        except CodecError as exc:
            self.w.dead_letters.send(outbox, counts, record, "bad_command", exc.reason)
            log.warning("control offset %d: not a command (%s): %s", record.offset, exc.kind,
                        exc.reason)
            return None

    def _problem(self, command: dict[str, Any]) -> str | None:
        from juggler.language import QueryError

        qid, action = command["id"], command["action"]
        if action == "DEREGISTER":
            return None if qid in self.accepted else f"query {qid!r} is not registered"
        problem = self.w.names.query_id_problem(qid)
        if problem is None and qid in self.accepted:
            problem = f"query {qid!r} is already registered"
        if problem is None and command.get("text") is None:
            problem = f"register {qid!r}: the command has no query text"
        if problem is None:
            try:
                self.w.compiled(qid, command["text"])
            except QueryError as exc:
                problem = str(exc)
        return problem

    def _accept(self, command: dict[str, Any], record: Record,
                barriers: dict[int, dict[str, int]], outbox: Outbox) -> None:
        w = self.w
        qid = command["id"]
        if command["action"] == "REGISTER":
            if command.get("own_topic"):
                w.ensure_results_topic(qid)
            self.accepted.add(qid)
        else:
            self.accepted.discard(qid)
        copy = w.codec.encode(COMMAND, command, topic=w.names.fanout)
        for p in range(w.partitions):
            headers = [(CONTROL_OFFSET_HEADER, str(record.offset).encode()),
                       (BARRIER_HEADER, json.dumps(barriers[p]).encode())]
            outbox.send(w.names.fanout, qid.encode(), copy, partition=p, headers=headers)

    def _status(self, command: dict[str, Any], record: Record, problem: str | None,
                outbox: Outbox) -> None:
        w = self.w
        qid, action = command["id"], command["action"]
        verdict = "REJECTED" if problem else "ACCEPTED"
        status = {"id": qid[:1024], "action": action, "status": verdict,
                  "message": (problem or "")[:MAX_MESSAGE], "command_offset": record.offset,
                  "partition": -1, "partitions": w.partitions}
        outbox.send(w.names.status, qid.encode()[:1024],
                    w.codec.encode(COMMAND_STATUS, status, topic=w.names.status))
        outbox.then(w.metrics.commands.labels(action, verdict).inc)
        log.log(logging.INFO if problem else logging.DEBUG, "control offset %d: %s %r %s%s",
                record.offset, action, qid[:100], verdict, f" ({problem})" if problem else "")


def _key_problem(key: bytes | None, qid: str) -> str | None:
    """Why a command's Kafka key does not fit it, if it does not: the control topic is
    compacted by key, so a command keyed otherwise than by its query id would survive
    or be removed with another query's records (`juggler query list` would show the
    wrong text, or lose this one's)."""
    if key == qid.encode():
        return None
    shown = "none" if key is None else repr(key.decode("utf-8", "backslashreplace")[:100])
    return f"the command's key ({shown}) is not its query id {qid[:100]!r}: commands are keyed by query id"
