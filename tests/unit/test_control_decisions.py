"""The control task's decisions, without Kafka: what a client reads on the status topic
for a command it sent."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import CollectorRegistry, Counter

from juggler.bounded_cache import BoundedCache
from juggler.codec.avro import COMMAND, COMMAND_STATUS, Codec
from juggler.wire.names import REWRITTEN_HEADER
from juggler.language import QueryCompiler
from juggler.runtime.control_plane import ControlTask
from juggler.runtime.job import COMPILED_CACHE, FANOUT_CACHE, Job
from juggler.runtime.task import Record, RoundCounts
from juggler.runtime.topic_names import TopicNames
from juggler.runtime.transactions import Outbox
from juggler.wire.commands import RegisterCommand, decode_command


class Context:
    """What the control task uses of its runtime, with the runtimes' own `compiled`."""

    compiled = Job.compiled
    fanout_value = Job.fanout_value
    fanout_command = Job.fanout_command

    def __init__(self) -> None:
        self.codec = Codec(registry_url="")
        self.catalog = self.codec.catalog()
        self._compiler = QueryCompiler(self.catalog)
        self._compiled: BoundedCache = BoundedCache(COMPILED_CACHE)
        self._fanout: BoundedCache = BoundedCache(FANOUT_CACHE)
        self.names = TopicNames()
        self.partitions = 2
        self.tasks = dict.fromkeys(range(self.partitions))
        """This process holds every partition's task."""
        self.metrics = SimpleNamespace(commands=Counter("c", "c", ["action", "status"],
                                                        registry=CollectorRegistry()))

        self.control_log: dict[int, bytes] = {}
        self.dead: list[tuple[int, str]] = []
        self.dead_letters = SimpleNamespace(
            send=lambda outbox, counts, record, kind, reason: self.dead.append(
                (record.offset, reason)))

    def stream_log_ends(self) -> dict[int, dict[str, int]]:
        return {p: {} for p in range(self.partitions)}

    def control_value_at(self, offset: int) -> bytes | None:
        return self.control_log.get(offset)


def test_an_accepted_command_is_copied_to_every_partition_as_itself() -> None:
    """Every partition's task reads the same command back from its copy, whether it
    decodes the copy (another process) or finds it decoded (the control task's own)."""
    context = Context()
    task = ControlTask(context)  # type: ignore[arg-type]
    command = RegisterCommand("q1", "SELECT * FROM H WHERE H.beatrate > 90", own_topic=False)
    value = context.codec.encode(COMMAND, command.record())
    task.add(Record("juggler.control", 0, 5, b"q1", value, 0))
    outbox = Outbox()
    task.run(outbox, RoundCounts())
    copies = [m for m in outbox.messages if m[0] == context.names.fanout]
    assert sorted(m[3] for m in copies) == list(range(context.partitions))
    assert {decode_command(Codec(registry_url=""), m[1], trusted=True) for m in copies} == {command}
    assert {context.fanout_command(m[1]) for m in copies} == {command}


def decide(command: dict, key: bytes | None = None) -> dict:
    """The status of `command`, sent keyed by its id unless `key` says otherwise."""
    context = Context()
    task = ControlTask(context)  # type: ignore[arg-type]
    task.add(Record("juggler.control", 0, 5, command["id"].encode() if key is None else key,
                    context.codec.encode(COMMAND, command), 0))
    outbox = Outbox()
    task.run(outbox, RoundCounts())
    status, = [m for m in outbox.messages if m[0] == context.names.status]
    return context.codec.decode(COMMAND_STATUS, status[1])


def test_an_empty_query_text_is_rejected_at_line_1_column_1() -> None:
    status = decide({"action": "REGISTER", "id": "q", "text": "", "history": False})
    assert status["status"] == "REJECTED"
    assert "line 1, column 1" in status["message"]


def test_a_register_without_text_says_so() -> None:
    status = decide({"action": "REGISTER", "id": "q", "text": None, "history": False})
    assert status["status"] == "REJECTED" and "no query text" in status["message"]


def test_a_good_query_is_accepted() -> None:
    status = decide({"action": "REGISTER", "id": "q", "text": "SELECT * FROM B",
                     "history": False})
    assert status["status"] == "ACCEPTED" and status["command_offset"] == 5


def test_a_command_keyed_by_another_id_is_rejected() -> None:
    status = decide({"action": "REGISTER", "id": "q", "text": "SELECT * FROM B",
                     "history": False}, key=b"other")
    assert status["status"] == "REJECTED"
    assert "key ('other') is not its query id 'q'" in status["message"]


def test_a_command_whose_key_is_not_utf8_is_rejected() -> None:
    status = decide({"action": "DEREGISTER", "id": "q", "text": None, "history": False},
                    key=b"q\xff")
    assert status["status"] == "REJECTED" and "is not its query id" in status["message"]


class ControlLog:
    """A control task over a control topic of its own: records appended, then decided,
    as a worker's round would."""

    def __init__(self) -> None:
        self.context = Context()
        self.task = ControlTask(self.context)  # type: ignore[arg-type]
        self.next = 0

    def send(self, key: bytes | None, command: dict | None,
             headers: list[tuple[str, bytes]] | None = None) -> Outbox:
        value = None if command is None else self.context.codec.encode(COMMAND, command)
        offset, self.next = self.next, self.next + 1
        if value is not None:
            self.context.control_log[offset] = value
        self.task.add(Record("juggler.control", 0, offset, key, value, 0, headers))
        outbox = Outbox()
        self.task.run(outbox, RoundCounts())
        return outbox

    def rewritten(self, outbox: Outbox) -> list[tuple[bytes | None, dict, dict]]:
        """The control records the round wrote: (key, command, headers)."""
        return [(m[2], self.context.codec.decode(COMMAND, m[1]), dict(m[4] or ()))
                for m in outbox.messages if m[0] == self.context.names.control]


REGISTER_Q = {"action": "REGISTER", "id": "q", "text": "SELECT * FROM B", "history": False,
              "own_topic": False}


def test_a_tombstone_is_dead_lettered_and_the_registered_text_written_again() -> None:
    log = ControlLog()
    log.send(b"q", REGISTER_Q)
    outbox = log.send(b"q", None)
    assert log.context.dead and "tombstone is not a command" in log.context.dead[0][1]
    assert log.rewritten(outbox) == [(b"q", REGISTER_Q, {REWRITTEN_HEADER: b"0"})]
    assert "q" in log.task.accepted  # the query keeps running


def test_a_rejected_command_under_a_registered_key_keeps_the_accepted_text_last() -> None:
    log = ControlLog()
    log.send(b"q", REGISTER_Q)
    outbox = log.send(b"q", {**REGISTER_Q, "text": "SELECT * FROM H"})  # already registered
    assert log.rewritten(outbox) == [(b"q", REGISTER_Q, {REWRITTEN_HEADER: b"0"})]


def test_the_copy_is_skipped_when_read_back_and_nothing_else_is_rewritten() -> None:
    log = ControlLog()
    log.send(b"q", REGISTER_Q)
    copy = log.send(b"q", REGISTER_Q, headers=[(REWRITTEN_HEADER, b"0")])
    assert copy.messages == [] and copy.offsets == {("juggler.control", 0): 2}
    deregistered = log.send(b"q", {**REGISTER_Q, "action": "DEREGISTER", "text": None})
    assert log.rewritten(deregistered) == [] and "q" not in log.task.accepted
    assert log.rewritten(log.send(b"q", None)) == []  # no longer registered: nothing to keep


def test_the_commands_a_round_decided_are_counted_once_it_is_committed() -> None:
    context = Context()
    task = ControlTask(context)  # type: ignore[arg-type]
    commands = [{"action": "REGISTER", "id": "a", "text": "SELECT * FROM B"},
                {"action": "REGISTER", "id": "b", "text": "SELECT * FROM"},
                {"action": "REGISTER", "id": "c", "text": "SELECT * FROM H"},
                {"action": "DEREGISTER", "id": "a", "text": None}]
    for offset, command in enumerate(commands):
        task.add(Record("juggler.control", 0, offset, command["id"].encode(),
                        context.codec.encode(COMMAND, {**command, "history": False}), 0))
    outbox = Outbox()
    task.run(outbox, RoundCounts())

    def counted() -> dict[tuple[str, str], float]:
        return {(s.labels["action"], s.labels["status"]): s.value
                for metric in context.metrics.commands.collect() for s in metric.samples
                if s.name == "c_total"}

    assert not any(counted().values())  # not before the round's transaction commits
    for callback in outbox.after_commit:
        callback()
    assert counted() == {("REGISTER", "ACCEPTED"): 2, ("REGISTER", "REJECTED"): 1,
                         ("DEREGISTER", "ACCEPTED"): 1}
