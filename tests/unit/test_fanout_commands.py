"""Every partition's task applies its copy of an accepted command, though the worker
decodes and compiles each command once for all of them: a query registered once runs
in every partition, a deregistration stops it in every partition, and an id
registered again with other numbers runs with its new ones."""

from __future__ import annotations

import json
import time

import pytest

from juggler.bounded_cache import BoundedCache
from juggler.codec.avro import COMMAND, COMMAND_STATUS, Codec
from juggler.codec.bounded import result_budget
from juggler.engine.events import Event
from juggler.engine.shared_registry import SharedRegistries
from juggler.wire.names import BARRIER_HEADER, CONTROL_OFFSET_HEADER
from juggler.language import QueryCompiler
from juggler.runtime.deadletters import DeadLetters
from juggler.runtime.held_state import HORIZON
from juggler.runtime import job as job_module
from juggler.runtime.job import COMPILED_CACHE, FANOUT_CACHE, Job
from juggler.runtime.loop_clock import LoopClock
from juggler.runtime.settings import Settings
from juggler.runtime.task import PartitionTask, Record, RoundCounts
from juggler.runtime.topic_names import TopicNames
from juggler.runtime.transactions import Outbox
from juggler.wire.commands import Command, DeregisterCommand, RegisterCommand

PARTITIONS = 2


class BrokerlessJob(Job):
    """`Job`'s caches and encoders, without its topics and clients."""

    def __init__(self) -> None:
        self.settings = Settings()
        self.names = TopicNames()
        self.codec = Codec(registry_url="")
        self.catalog = self.codec.catalog()
        self.streams = tuple(self.codec.stream_names())
        self.partitions = PARTITIONS
        self.max_record_bytes = self.settings.max_record_bytes
        self.result_budget = result_budget(self.codec, self.max_record_bytes)
        self.clock = LoopClock()
        self.dead_letters = DeadLetters(self)
        self._result_headers: dict[str, bytes] = {}
        self._compiler = QueryCompiler(self.catalog)
        self._compiled = BoundedCache(COMPILED_CACHE)
        self._fanout = BoundedCache(FANOUT_CACHE)
        self.registries = SharedRegistries()
        self.tasks = {}

    def own_results_topic(self, query_id: str) -> None:
        pass


def restored(job: BrokerlessJob) -> list[PartitionTask]:
    """One task per partition, as a restore leaves them on empty stream topics."""
    tasks = [PartitionTask(job, p) for p in range(PARTITIONS)]
    job.tasks = dict(enumerate(tasks))
    for task in tasks:
        task.restored = True
        for inp in task.order.inputs.values():
            inp.position = 0
    return tasks


def apply(job: BrokerlessJob, tasks: list[PartitionTask], command: Command | bytes,
          offset: int) -> list[Outbox]:
    """Each task's copy of `command` (or of a value that is not one) at `offset`, taken
    in one round of each task; each task's outbox."""
    value = command if isinstance(command, bytes) else \
        job.codec.encode(COMMAND, command.record(), topic=job.names.fanout)
    outboxes = []
    for task in tasks:
        headers = [(CONTROL_OFFSET_HEADER, str(offset).encode()),
                   (BARRIER_HEADER, json.dumps(dict.fromkeys(job.streams, 0)).encode())]
        task.add_barrier(Record(job.names.fanout, task.partition, offset, b"k", value, 0, headers))
        outboxes.append(Outbox())
        task.run(outboxes[-1], RoundCounts(), 100, time.monotonic())
    return outboxes


def matches(task: PartitionTask, beatrate: float, ts: int) -> list[str]:
    event = Event("H", f"p{task.partition}", ts, {"beatrate": beatrate, "vib": 0.0, "alert": ""},
                  (task.w.names.stream("H"), task.partition, ts))
    return sorted(result.query for result in task.engine.process(event))


def test_a_command_applied_by_every_partition_runs_in_every_partition() -> None:
    job = BrokerlessJob()
    tasks = restored(job)
    rule = "SELECT * FROM H WHERE H.beatrate > {}"
    apply(job, tasks, RegisterCommand("fast", rule.format(120)), 0)
    outboxes = apply(job, tasks, RegisterCommand("slow", rule.format(40)), 1)
    assert [matches(task, 130.0, 1000) for task in tasks] == [["fast", "slow"]] * PARTITIONS
    lives = [job.codec.decode(COMMAND_STATUS, value) for outbox in outboxes
             for topic, value, *_ in outbox.messages if topic == job.names.status]
    assert [(s["id"], s["status"], s["partition"]) for s in lives] == \
        [("slow", "LIVE", p) for p in range(PARTITIONS)]

    apply(job, tasks, DeregisterCommand("fast"), 2)
    assert [matches(task, 130.0, 2000) for task in tasks] == [["slow"]] * PARTITIONS
    apply(job, tasks, RegisterCommand("fast", rule.format(150)), 3)  # the id, new numbers
    assert [matches(task, 130.0, 3000) for task in tasks] == [["slow"]] * PARTITIONS
    assert [matches(task, 160.0, 4000) for task in tasks] == [["fast", "slow"]] * PARTITIONS
    assert [task.texts["fast"] for task in tasks] == [rule.format(150)] * PARTITIONS


def test_a_copy_is_decoded_once_for_the_process_and_not_kept_once_every_task_read_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The control task's copies reach every partition without another decode, and a
    burst of commands leaves no decoded copy behind: memory does not grow with the
    commands a worker has applied (a copy read again is decoded again)."""
    job = BrokerlessJob()
    tasks = restored(job)
    decoded: list[bytes | None] = []
    decode = job_module.decode_command
    monkeypatch.setattr(job_module, "decode_command",
                        lambda codec, value, **kw: decoded.append(value) or decode(codec, value, **kw))
    commands = [RegisterCommand(f"r{i}", f"SELECT * FROM H WHERE H.beatrate > {i}")
                for i in range(5)]
    values = [job.fanout_value(command) for command in commands]  # the control task's
    for offset, value in enumerate(values):
        apply(job, tasks, value, offset)
    assert [sorted(task.texts) for task in tasks] == [[f"r{i}" for i in range(5)]] * PARTITIONS
    assert decoded == []
    assert [job.fanout_command(value) for value in values] == commands
    assert decoded == values


def horizons(job: BrokerlessJob, outboxes: list[Outbox]) -> list[int | None]:
    """Each partition's `h` state record written in its round, as the horizon it holds."""
    out = []
    for p, outbox in enumerate(outboxes):
        record = outbox.latest.get((job.names.state, p, HORIZON.encode()))
        out.append(None if record is None else json.loads(record[1])["horizon"])
    return out


def test_a_registration_that_widens_the_horizon_writes_it_to_the_state() -> None:
    """The horizon a restart restores (a deregistration must not shrink it) is written
    by the registration that widens it, and only by one that does."""
    job = BrokerlessJob()
    tasks = restored(job)
    join = "SELECT * FROM B, H WHERE B.temp > H.vib MAXWINDOW {} sec"
    assert horizons(job, apply(job, tasks, RegisterCommand("rule", "SELECT * FROM H"), 0)) \
        == [None] * PARTITIONS
    assert horizons(job, apply(job, tasks, RegisterCommand("five", join.format(5)), 1)) \
        == [5000] * PARTITIONS
    assert horizons(job, apply(job, tasks, RegisterCommand("two", join.format(2)), 2)) \
        == [None] * PARTITIONS
    apply(job, tasks, DeregisterCommand("five"), 3)
    assert horizons(job, apply(job, tasks, RegisterCommand("four", join.format(4)), 4)) \
        == [None] * PARTITIONS
    assert horizons(job, apply(job, tasks, RegisterCommand("nine", join.format(9)), 5)) \
        == [9000] * PARTITIONS


def test_a_value_that_is_no_command_is_dead_lettered_by_every_partition() -> None:
    job = BrokerlessJob()
    tasks = restored(job)
    outboxes = apply(job, tasks, b"not avro", 0)
    assert [[topic for topic, *_ in outbox.messages] for outbox in outboxes] == \
        [[job.names.deadletter]] * PARTITIONS
    assert [task.texts for task in tasks] == [{}] * PARTITIONS


def evaluate(job: BrokerlessJob, task: PartitionTask, beatrate: float, ts: int) -> list[str]:
    """The queries with a result for an H event that `task` evaluates as its round
    would (registering first whatever waits to be)."""
    topic = job.names.stream("H")
    event = Event("H", f"p{task.partition}", ts, {"beatrate": beatrate, "vib": 0.0, "alert": ""},
                  (topic, task.partition, ts))
    counts = RoundCounts()
    task._events([("H", Record(topic, task.partition, ts, b"k", b"", 0), event)], Outbox(),
                 counts, {})
    return sorted(counts.results_out)


def test_rules_registered_with_no_event_between_are_live_at_the_next_event() -> None:
    """A burst of registrations goes into the engines in a few batches rather than one
    per round, and every rule is live from its command on: the next event evaluated
    matches each one registered before it, and none deregistered."""
    job = BrokerlessJob()
    tasks = restored(job)
    for i in range(40):
        text = f"SELECT * FROM H WHERE H.beatrate > {i}"
        apply(job, tasks, RegisterCommand(f"r{i:02d}", text), i)
    for i in range(40, 45):  # too few against those registered to go in at once
        apply(job, tasks, RegisterCommand(f"r{i}", "SELECT * FROM H WHERE H.beatrate < 99"), i)
    below = [f"r{i:02d}" for i in range(21)]
    assert [evaluate(job, task, 20.5, 1000) for task in tasks] == \
        [below + [f"r{i}" for i in range(40, 45)]] * PARTITIONS
    apply(job, tasks, DeregisterCommand("r01"), 45)
    apply(job, tasks, DeregisterCommand("r44"), 46)
    assert [evaluate(job, task, 20.5, 2000) for task in tasks] == \
        [[q for q in below if q != "r01"] + [f"r{i}" for i in range(40, 44)]] * PARTITIONS
