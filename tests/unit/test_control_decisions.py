"""The control task's decisions, without Kafka: what a client reads on the status topic
for a command it sent."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import CollectorRegistry, Counter

from juggler.codec.avro import COMMAND, COMMAND_STATUS, Codec
from juggler.service.control_plane import ControlTask
from juggler.service.job import Job
from juggler.service.task import Record, RoundCounts
from juggler.service.topic_names import TopicNames
from juggler.service.transactions import Outbox


class Context:
    """What the control task uses of its runtime, with the runtimes' own `compiled`."""

    compiled = Job.compiled

    def __init__(self) -> None:
        self.codec = Codec(registry_url="")
        self.catalog = self.codec.catalog()
        self._compiled: dict = {}
        self.names = TopicNames()
        self.partitions = 2
        self.metrics = SimpleNamespace(commands=Counter("c", "c", ["action", "status"],
                                                        registry=CollectorRegistry()))

    def stream_log_ends(self) -> dict[int, dict[str, int]]:
        return {p: {} for p in range(self.partitions)}


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
