"""The control task: `juggler.control` in; statuses and barriers out.

Each command is validated against the accepted set and the codec's catalog. A rejected
command (repeated id, unknown id on deregister, a query that does not compile, an id
that cannot name a topic) gets a REJECTED status with the reason and changes nothing; a
record that is not a command is dead-lettered as well. An accepted one gets its results
topic, an ACCEPTED status, and one copy per partition on `juggler.control.fanout`
carrying the barrier: the log-end offsets (last stable offsets) that partition's
stream partitions had at acceptance. Task p applies it exactly there (semantics 4a).

The accepted set is what the ACCEPTED statuses say: they are written in the same
transaction as the control offsets, so on assignment the task reads the status topic
up to its end and holds the set as of its committed offset. The status topic keeps
every record (`topics/control.yaml`: no retention limit) for that reason.

The control topic is compacted by key, and `juggler query list` shows a registered
query's text from it: so the last record under a registered query's key must stay its
accepted REGISTER. When a rejected command or a tombstone comes under that key, the
task writes the accepted REGISTER again after it, in the same transaction, with
`REWRITTEN_HEADER` naming the original's offset; it skips such a copy when it reads it,
and readers of the topic take it for the original.
"""

from __future__ import annotations

import logging
from collections import Counter
from functools import partial

from juggler.codec.avro import CodecError
from juggler.language import QueryError
from juggler.runtime.job import TaskContext
from juggler.runtime.task import Record, RoundCounts
from juggler.runtime.transactions import Outbox
from juggler.wire.commands import (ACCEPTED, REGISTER, REJECTED, Command, CommandStatus,
                                   DeregisterCommand, RegisterCommand, decode_command,
                                   barrier_text, fanout_headers, is_rewritten,
                                   rewritten_headers)

log = logging.getLogger(__name__)

MAX_MESSAGE = 4096
"""Characters of a rejection message kept in the status record."""


class ControlTask:
    def __init__(self, worker: TaskContext) -> None:
        self.w = worker
        self.accepted: dict[str, int] = {}
        """The registered queries: id -> the control offset of its accepted REGISTER."""
        self.pending: list[Record] = []
        self.restored = False
        self.position: int | None = None
        """The consumer's position on the control partition, when the runtime reads
        it (the worker): past transaction markers, as a record's offset + 1 is not.
        The worker's own copies (`_keep_registered`) end in a marker, and clearances
        need the committed control offset at the log's end, so once nothing is pending
        the task commits the position."""

    def restore(self, accepted: dict[str, int]) -> None:
        """Take the accepted set the status topic says (`accepted_of`)."""
        self.accepted = accepted
        self.restored = True

    def add(self, record: Record) -> None:
        self.pending.append(record)

    def run(self, outbox: Outbox, counts: RoundCounts) -> None:
        """Decide every pending command; the barriers of this round's accepted commands
        are the log ends asked once, now (they were all accepted at this moment)."""
        w = self.w
        if not self.pending:
            if self.position is not None:
                outbox.offsets[(w.names.control, 0)] = self.position
            return
        barriers: dict[int, bytes] | None = None
        verdicts: Counter[tuple[str, str]] = Counter()
        for record in self.pending:
            if is_rewritten(record.headers):
                continue  # this task's own copy of an accepted REGISTER
            command = self._decode(record, outbox, counts)
            if command is None:
                self._keep_registered(record.key, outbox)
                continue
            problem = _key_problem(record.key, command.id) or self._problem(command)
            if problem is None:
                if barriers is None:
                    barriers = {p: barrier_text(ends) for p, ends in w.stream_log_ends().items()}
                self._accept(command, record, barriers, outbox)
            else:
                self._keep_registered(record.key, outbox)
            verdicts[self._status(command, record, problem, outbox)] += 1
        for (action, verdict), n in verdicts.items():
            outbox.then(partial(w.metrics.commands.labels(action, verdict).inc, n))
        last = self.pending[-1]
        outbox.offsets[(last.topic, last.partition)] = max(last.offset + 1, self.position or 0)
        self.pending = []

    def _decode(self, record: Record, outbox: Outbox, counts: RoundCounts) -> Command | None:
        if record.value is None:
            self.w.dead_letters.send(
                outbox, counts, record, "bad_command",
                "a tombstone is not a command: send DEREGISTER to stop a query (the "
                "control topic keeps a registered query's REGISTER under its key)")
            log.warning("control offset %d: a tombstone, not a command", record.offset)
            return None
        try:
            return decode_command(self.w.codec, record.value)
        except CodecError as exc:
            self.w.dead_letters.send(outbox, counts, record, "bad_command", exc.reason)
            log.warning("control offset %d: not a command (%s): %s", record.offset, exc.kind,
                        exc.reason)
            return None

    def _problem(self, command: Command) -> str | None:
        qid = command.id
        if isinstance(command, DeregisterCommand):
            return None if qid in self.accepted else f"query {qid!r} is not registered"
        problem = self.w.names.query_id_problem(qid)
        if problem is not None:
            return problem
        if qid in self.accepted:
            return f"query {qid!r} is already registered"
        if command.text is None:
            return f"register {qid!r}: the command has no query text"
        try:
            self.w.compiled(qid, command.text)
        except QueryError as exc:
            return str(exc)
        return None

    def _accept(self, command: Command, record: Record, barriers: dict[int, bytes],
                outbox: Outbox) -> None:
        w = self.w
        qid = command.id
        if isinstance(command, RegisterCommand):
            if command.own_topic:
                w.ensure_results_topic(qid)
            self.accepted[qid] = record.offset
        else:
            self.accepted.pop(qid, None)
        copy = w.fanout_value(command)
        for p in range(w.partitions):
            outbox.send(w.names.fanout, qid.encode(), copy, partition=p,
                        headers=fanout_headers(record.offset, barriers[p]))

    def _keep_registered(self, key: bytes | None, outbox: Outbox) -> None:
        """After a record that is not an accepted command under a registered query's
        key, write that query's accepted REGISTER again, so compaction keeps it as the
        key's last record (see the module's docstring)."""
        if key is None:
            return
        try:
            qid = key.decode()
        except UnicodeDecodeError:
            return
        offset = self.accepted.get(qid)
        if offset is None:
            return
        value = self.w.control_value_at(offset)
        try:
            original = None if value is None else decode_command(self.w.codec, value)
        except CodecError:
            original = None
        if not isinstance(original, RegisterCommand) or original.id != qid:
            log.warning("control offset %d: the REGISTER of %r is no longer there; its "
                        "text will not show in `juggler query list`", offset, qid[:100])
            return
        outbox.send(self.w.names.control, key, value, partition=0,
                    headers=rewritten_headers(offset))

    def _status(self, command: Command, record: Record, problem: str | None,
                outbox: Outbox) -> tuple[str, str]:
        """Write the command's status; its (action, verdict), which the round counts."""
        w = self.w
        qid, action = command.id, command.action
        verdict = REJECTED if problem else ACCEPTED
        status = CommandStatus(qid[:1024], action, verdict, (problem or "")[:MAX_MESSAGE],
                               record.offset, -1, w.partitions)
        outbox.send(w.names.status, qid.encode()[:1024],
                    status.encode(w.codec, topic=w.names.status))
        log.log(logging.INFO if problem else logging.DEBUG, "control offset %d: %s %r %s%s",
                record.offset, action, qid[:100], verdict, f" ({problem})" if problem else "")
        return action, verdict


def _key_problem(key: bytes | None, qid: str) -> str | None:
    """Why a command's Kafka key does not fit it, if it does not: the control topic is
    compacted by key, so a command keyed otherwise than by its query id would survive
    or be removed with another query's records (`juggler query list` would show the
    wrong text, or lose this one's)."""
    if key == qid.encode():
        return None
    shown = "none" if key is None else repr(key.decode("utf-8", "backslashreplace")[:100])
    return f"the command's key ({shown}) is not its query id {qid[:100]!r}: commands are keyed by query id"
