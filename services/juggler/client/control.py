"""Send control commands and read the control plane back (`juggler query ...`).

Why this shape:

- A command is produced with an idempotent producer and acks=all, keyed by the query
  id, so it is written once and survives a broker failure; its offset in
  `juggler.control` identifies it.
- To wait for its outcome without missing it, the end offset of
  `juggler.control.status` is taken *before* producing, and statuses are read from
  there until one has the same id and `command_offset`. A status for an earlier
  command with the same id is skipped. An accepted command is then waited for until
  every partition's task said LIVE (it took effect at its barrier there), so events
  produced after `submit` returns are seen by the query everywhere.
- `read_control` reads both topics from the beginning to the end offsets they had when
  it started, with `assign` (no consumer group, nothing committed): the control topic
  is compacted, so its last command per id is the current state of that id.
"""

from __future__ import annotations

import bisect
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from juggler.codec.avro import Codec, CodecError
from juggler.kafka.client_config import client_config
from juggler.kafka.delivery import ControlError, Sent, produce, require_topic
from juggler.kafka.offsets import log_ends
from juggler.wire.commands import (ACCEPTED, REGISTER, REJECTED, Command, CommandStatus,
                                   RegisterCommand, decode_command, encode_command,
                                   rewritten_from)
from juggler.wire.names import CONTROL, CONTROL_STATUS, validate_query_id

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message

PENDING = "PENDING"
"""The state of a command no status has answered yet (no worker running, or behind)."""

REGISTERED, NOT_YET, REFUSED, DEREGISTERED = "registered", "pending", "rejected", "deregistered"
"""Where an id stands (`QueryState.state`): only REGISTERED is in effect in the worker."""


@dataclass(frozen=True)
class Submission:
    """A produced command and, when waited for and answered in time, its status, and
    in how many of how many partitions it is live."""

    command: Command
    sent: Sent
    status: CommandStatus | None
    live: tuple[int, int] | None = None
    """(partitions that said LIVE, partitions), when waited for."""

    @property
    def everywhere(self) -> bool:
        return self.live is not None and self.live[1] > 0 and self.live[0] >= self.live[1]


@dataclass(frozen=True)
class QueryState:
    """The last command for one id in `juggler.control`, joined with its status."""

    id: str
    command: Command
    offset: int
    status: str  # ACCEPTED, REJECTED or PENDING (no status for this command yet)
    message: str = ""  # the status's message
    later: str = ""  # a later command that changed nothing (rejected) or not yet (pending)
    live: tuple[int, int] = (0, 0)  # (partitions where it took effect, partitions)

    @property
    def register(self) -> RegisterCommand | None:
        """The command shown when it is a REGISTER, so it has a query text, whatever
        its status: `state` says whether the query is in effect."""
        return self.command if isinstance(self.command, RegisterCommand) else None

    @property
    def state(self) -> str:
        """REGISTERED only when an accepted REGISTER is in effect (a later command that
        was rejected, or is not answered yet, is a note in `later`); otherwise the id is
        not registered and this says why: its last command is pending (no status yet),
        was rejected, or is an accepted DEREGISTER."""
        if self.status == PENDING:
            return NOT_YET
        if self.status == REJECTED:
            return REFUSED
        return REGISTERED if self.register is not None else DEREGISTERED

    def to_json(self) -> dict[str, Any]:
        register = self.register or RegisterCommand(self.id, None)
        return {"id": self.id, "state": self.state, "action": self.command.action,
                "text": register.text, "history": register.history,
                "own_topic": register.own_topic, "offset": self.offset,
                "status": self.status, "message": self.message, "later": self.later,
                "live_partitions": self.live[0], "partitions": self.live[1]}


@dataclass
class ControlView:
    """Every id's state, in order of the offset of its last command, plus the messages
    that could not be decoded (reported, not fatal)."""

    queries: dict[str, QueryState] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def registered(self) -> list[QueryState]:
        """The queries in effect: an accepted REGISTER is the id's last accepted command."""
        return [q for q in self.queries.values() if q.state == REGISTERED]

    def not_registered(self) -> list[QueryState]:
        """The other ids: rejected, pending or deregistered."""
        return [q for q in self.queries.values() if q.state != REGISTERED]


# -- sending -------------------------------------------------------------------------


def submit(bootstrap: str, command: Command, *, wait: bool = True, timeout: float = 30.0,
           codec: Codec | None = None, prefix: str = "", live: bool = True) -> Submission:
    """Produce `command` to `juggler.control` (under the deployment's topic `prefix`);
    with `wait`, wait up to `timeout` seconds for its status (`Submission.status` is
    None when none came) and, with `live`, for an accepted command to be live in every
    partition."""
    return submit_many(bootstrap, [command], wait=wait, timeout=timeout, codec=codec,
                       prefix=prefix, live=live)[0]


def submit_many(bootstrap: str, commands: Sequence[Command], *, wait: bool = True,
                timeout: float = 30.0, codec: Codec | None = None, prefix: str = "",
                live: bool = True) -> list[Submission]:
    """`submit` for many commands at once: one producer sends them all (in order, one
    round trip for the lot), and one reader of the status topic collects every answer,
    so the cost per command is a record, not a connection.

    `timeout` bounds each wait for Kafka and, while waiting for the answers, the time
    without any: every status or LIVE that answers one of the commands starts it again,
    so a large batch that the workers take minutes to apply is waited for as long as
    they make progress, and given up only once nothing has come for `timeout` seconds."""
    for command in commands:
        validate_query_id(command.id)
    codec = codec or Codec()
    status_topic = prefix + CONTROL_STATUS
    start = _end_offsets(bootstrap, status_topic, timeout) if wait else None
    sent = produce(bootstrap, prefix + CONTROL,
                   [(c.id.encode(), encode_command(codec, c)) for c in commands], timeout)
    if start is None:
        return [Submission(c, s, None) for c, s in zip(commands, sent)]
    outcomes = {s.offset: _Outcome(c.id, s.offset, live) for c, s in zip(commands, sent)}
    pending = set(outcomes)
    in_order = sorted(outcomes)
    live_up_to: dict[int, int] = {}
    """Per partition, how many of `in_order` its LIVEs answered already: a LIVE
    answers every command up to its offset, so each one goes on from the last, and a
    burst's statuses cost the commands once per partition, not per LIVE."""

    def see(msg: Message) -> bool | None:
        """True once every command is answered; False when this status answered some
        (progress); None when it answered none."""
        try:
            status = CommandStatus.decode(codec, msg.value())
        except CodecError:
            return None
        if status.live:
            first = live_up_to.get(status.partition, 0)
            last = bisect.bisect_right(in_order, status.command_offset, lo=first)
            live_up_to[status.partition] = last
            offsets = [o for o in in_order[first:last] if o in pending]
        else:
            offsets = [status.command_offset] if status.command_offset in pending else []
        answered = False
        for offset in offsets:
            outcome = outcomes[offset]
            before = (outcome.verdict is None, len(outcome.live))
            if outcome.see(status):
                pending.discard(offset)
            answered = answered or (outcome.verdict is None, len(outcome.live)) != before
        return True if not pending else (False if answered else None)

    _find(bootstrap, status_topic, start, timeout, see)
    return [Submission(c, s, outcomes[s.offset].verdict,
                       (len(outcomes[s.offset].live), outcomes[s.offset].partitions)
                       if live else None)
            for c, s in zip(commands, sent)]


@dataclass
class _Outcome:
    """The statuses of one command as they come: its verdict, then LIVE per partition."""

    query_id: str
    offset: int
    wait_live: bool
    verdict: CommandStatus | None = None
    live: set[int] = field(default_factory=set)
    partitions: int = 0

    def see(self, status: CommandStatus) -> bool | None:
        """True once nothing more is to be waited for."""
        if status.live:  # cumulative: every command up to its offset is live there
            if status.command_offset < self.offset:
                return None
            self.live.add(status.partition)
            self.partitions = status.partitions
        elif status.id != self.query_id or status.command_offset != self.offset:
            return None
        else:
            self.verdict = status
            self.partitions = self.partitions or status.partitions
        done = self.verdict is not None and (
            not self.wait_live or not self.verdict.accepted
            or (self.partitions > 0 and len(self.live) >= self.partitions))
        return True if done else None


# -- reading -------------------------------------------------------------------------


def read_control(bootstrap: str, *, timeout: float = 30.0, codec: Codec | None = None,
                 prefix: str = "") -> ControlView:
    """Each id's state from the commands in `juggler.control` and their statuses,
    read from the beginning up to the end offsets at the time of the call.

    The last command per id wins, joined with its status, except that a command the
    worker rejected (or has not answered yet) does not hide an earlier ACCEPTED one
    still in the log: registering an id that is already registered is rejected and
    changes nothing, so the id is shown with its accepted text and a note about the
    later command. Which ids are registered is decided by the ACCEPTED statuses, as the
    worker's control task decides it: once compaction has removed an accepted REGISTER
    (the later rejected command has the same key), the id is still shown registered,
    with its text unknown (`command.text` None). `QueryState.state` says where each id
    stands. `prefix`: the deployment's topic prefix (see the worker's
    `topic_prefix`)."""
    codec = codec or Codec()
    control, control_status = prefix + CONTROL, prefix + CONTROL_STATUS
    view = ControlView()
    history: dict[str, list[tuple[int, Command]]] = {}
    for msg in _read_all(bootstrap, control, timeout):
        query_id = _key(msg)
        if msg.value() is None:  # a tombstone deletes the id
            history.pop(query_id, None)
            continue
        try:
            command = decode_command(codec, msg.value())
        except CodecError as exc:
            view.warnings.append(f"{control} offset {msg.offset()}: {exc.reason}")
            continue
        commands = history.pop(command.id, [])  # re-insert: order by the last command
        original = rewritten_from(msg.headers())
        if original is None:
            commands.append((_offset(msg), command))
        elif all(offset != original for offset, _ in commands):
            # the worker's copy of an accepted REGISTER whose original compaction
            # removed: it stands where the original stood, before any later command
            commands = sorted([*commands, (original, command)], key=lambda c: c[0])
        history[command.id] = commands
    statuses: dict[int, CommandStatus] = {}  # verdicts by command offset
    live_through: dict[int, int] = {}  # partition -> every command up to here is live
    for msg in _read_all(bootstrap, control_status, timeout):
        try:
            status = CommandStatus.decode(codec, msg.value())
        except CodecError as exc:
            view.warnings.append(f"{control_status} offset {msg.offset()}: {exc.reason}")
            continue
        if status.live:
            live_through[status.partition] = max(live_through.get(status.partition, -1),
                                                 status.command_offset)
        else:
            statuses[status.command_offset] = status
    view.queries = _states(history, statuses, live_through)
    return view


def _states(history: dict[str, list[tuple[int, Command]]],
            statuses: dict[int, CommandStatus],
            live_through: dict[int, int]) -> dict[str, QueryState]:
    """Each id's state from its commands (offset, command) still in the control topic,
    the verdicts by command offset, and per partition the offset up to which every
    command is live there."""
    states = {query_id: _state(query_id, commands, statuses)
              for query_id, commands in history.items()}
    for query_id, offset in _registered_by_status(statuses).items():
        state = states.get(query_id)
        if state is None or state.state != REGISTERED:
            # its accepted REGISTER is no longer in the compacted control topic (a later
            # command with the same key replaced it, or a tombstone), but the worker
            # still runs the query: its registered set is what the statuses say
            states[query_id] = _without_text(query_id, offset, statuses[offset], state)
    out = {}
    for query_id, state in states.items():
        verdict = statuses.get(state.offset)
        partitions = verdict.partitions if verdict is not None else 0
        done = sum(1 for through in live_through.values() if through >= state.offset)
        out[query_id] = replace(state, live=(done, partitions))
    return out


def _registered_by_status(statuses: dict[int, CommandStatus]) -> dict[str, int]:
    """The registered set as the worker's control task holds it (ACCEPTED statuses in
    command order), each id with the offset of its accepted REGISTER."""
    registered: dict[str, int] = {}
    for offset in sorted(statuses):
        status = statuses[offset]
        if not status.accepted:
            continue
        if status.action == REGISTER:
            registered[status.id] = offset
        else:
            registered.pop(status.id, None)
    return registered


def _without_text(query_id: str, offset: int, status: CommandStatus,
                  last: QueryState | None) -> QueryState:
    later = "" if last is None else _note(last.command.action, last.offset, last.status,
                                          last.message)
    return QueryState(query_id, RegisterCommand(query_id, None), offset, ACCEPTED,
                      status.message, later)


def _note(action: str, offset: int, outcome: str, message: str) -> str:
    return f"{action} at offset {offset}: {outcome}" + (f": {message}" if message else "")


def _state(query_id: str, commands: list[tuple[int, Command]],
           statuses: dict[int, CommandStatus]) -> QueryState:
    def answer(offset: int, command: Command) -> CommandStatus | None:
        status = statuses.get(offset)
        return status if status is not None and status.id == command.id else None

    accepted: tuple[int, Command] | None = None
    for offset, command in commands:
        status = answer(offset, command)
        if status is not None and status.accepted:
            accepted = (offset, command)
    last_offset, last = commands[-1]
    last_status = answer(last_offset, last)
    outcome = last_status.status if last_status else PENDING
    message = last_status.message if last_status else ""
    if accepted is not None and accepted[0] != last_offset \
            and isinstance(accepted[1], RegisterCommand):
        later = _note(last.action, last_offset, outcome, message)
        return QueryState(query_id, accepted[1], accepted[0], ACCEPTED,
                          answer(*accepted).message, later)  # type: ignore[union-attr]
    return QueryState(query_id, last, last_offset, outcome, message)


def _offset(msg: Message) -> int:
    offset = msg.offset()
    assert offset is not None  # every consumed or delivered message has one
    return offset


def _key(msg: Message) -> str:
    key = msg.key()
    return key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)


def _consumer(bootstrap: str) -> Consumer:
    from confluent_kafka import Consumer

    # assign() only: the group id is never joined and nothing is committed
    return Consumer(client_config(bootstrap, {
        "group.id": f"juggler-cli-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "enable.auto.offset.store": False, "auto.offset.reset": "earliest", "log_level": 0}))


def _end_offsets(bootstrap: str, topic: str, timeout: float) -> dict[int, int]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client_config(bootstrap))
    count = require_topic(admin, topic, timeout)
    ends = log_ends(admin, [(topic, p) for p in range(count)], timeout)
    return {p: end for (_, p), end in ends.items()}


def _find(bootstrap: str, topic: str, start: dict[int, int], quiet: float,
          match: Callable[[Message], Any]) -> Any:
    """The first `match(msg)` over messages from `start` that is neither None nor False,
    or None once `quiet` seconds pass with no message it matched: False (progress, not
    the end) starts that wait again."""
    from confluent_kafka import TopicPartition

    consumer = _consumer(bootstrap)
    deadline = time.monotonic() + quiet
    try:
        consumer.assign([TopicPartition(topic, p, offset) for p, offset in start.items()])
        while (left := deadline - time.monotonic()) > 0:
            msg = consumer.poll(min(left, 0.5))
            if msg is None or msg.error() is not None:
                continue
            found = match(msg)
            if found is False:
                deadline = time.monotonic() + quiet
            elif found is not None:
                return found
        return None
    finally:
        consumer.close()


def _read_all(bootstrap: str, topic: str, timeout: float) -> list[Message]:
    """Every message from the beginning to the end offsets as of now, in offset order
    per partition."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = _consumer(bootstrap)
    try:
        count = require_topic(consumer, topic, timeout)
        ends = {}
        for p in range(count):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                       timeout=timeout)
            if high > low:
                ends[p] = high
        if not ends:
            return []
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        messages: list[Message] = []
        deadline = time.monotonic() + timeout
        while ends:
            if time.monotonic() > deadline:
                raise ControlError(f"reading {topic} to its end took more than "
                                   f"{timeout:g}s")
            msg = consumer.poll(0.5)
            if msg is None:
                _drop_finished(consumer, topic, ends)
                continue
            if msg.error() is not None:
                continue
            partition = msg.partition()
            if partition in ends:
                messages.append(msg)
                if _offset(msg) >= ends[partition] - 1:
                    del ends[partition]
        return messages
    finally:
        consumer.close()


def _drop_finished(consumer: Consumer, topic: str, ends: dict[int, int]) -> None:
    """Partitions whose position reached the end though the last offset was no record
    (a transaction marker, or a record compacted away)."""
    from confluent_kafka import TopicPartition

    for tp in consumer.position([TopicPartition(topic, p) for p in list(ends)]):
        if tp.offset is not None and tp.partition is not None \
                and tp.offset >= ends[tp.partition]:
            del ends[tp.partition]


__all__ = ["ControlError", "Sent", "Submission", "QueryState", "ControlView", "PENDING",
           "REGISTERED", "NOT_YET", "REFUSED", "DEREGISTERED", "submit", "submit_many",
           "read_control"]
