"""The clearance protocol (semantics 4a): a task takes a fetched record only once no
command can still be accepted with a barrier below it that the task has not seen.

`Clearance` holds the protocol's state and decides, in the loop's thread, what an
answer clears (its `clear` says why that is correct), so the tasks' state has one
writer. `ClearanceAsker` asks a question's broker requests in a thread of its own.

Why a thread: a clearance is one or two broker requests (the group's committed control
offset, then the log ends), and asked in the loop every round that fetched something
stood still for them (docs/worker.md, "The loop"). Asked there, the loop goes on
fetching, routing and running what is already cleared, and takes the answer in the
first round after it arrived. One question at a time: what is fetched meanwhile waits
for the next one, asked in the round that takes this answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from juggler.kafka.offsets import ANSWER_GRACE, TP, group_offsets, log_ends
from juggler.runtime.task import PartitionTask
from juggler.runtime.topic_names import TopicNames

REQUEST_TIMEOUT = 30.0
"""Seconds each of a question's requests may take before it fails (the worker then
recovers as from any Kafka failure)."""
STALLED_AFTER = 2 * (REQUEST_TIMEOUT + ANSWER_GRACE) + 10.0
"""Seconds after which a question still under way counts as a Kafka failure in the
loop's thread (`answer`): its requests are bounded, so only a thread stuck in the
client library gets here, and every record the worker fetched would wait for it."""


@dataclass(frozen=True, slots=True)
class Question:
    epoch: int
    """The loop's fetch epoch when asked: what was fetched up to it may be cleared."""
    generation: int
    """The worker's assignment generation when asked: an answer from before a rebalance
    is dropped (its tasks may be gone, or back with new buffers)."""
    waiting: tuple[int, ...]
    """The partitions (tasks) asked for."""
    committed: int | None
    """The committed control offset, when the worker knows it (`ask_group` False)."""
    ask_group: bool
    fanout: tuple[TP, ...]
    """The fanout partition of each waiting task, in `waiting`'s order."""
    idle: tuple[TP, ...]
    """The waiting tasks' empty stream partitions, whose log ends an idle wait needs:
    asked in the same request, they cost no round trip of their own."""


@dataclass(frozen=True, slots=True)
class Answer:
    question: Question
    committed: int | None
    """The group's committed control offset, asked before `ends` (or the known one)."""
    ends: dict[TP, int]
    asked_at: float
    """`time.monotonic()` just before the log ends were asked."""


class ClearanceAsker:
    def __init__(self, admin: AdminClient, group: str, control: TP,
                 timed: Callable[[float], None] | None = None) -> None:
        """`timed(seconds)` is called in the loop's thread with each answer taken: the
        time from the question to the loop taking its answer, which every fetched
        record waits for (the worker's `juggler_clearance_seconds`)."""
        self.admin, self.group, self.control = admin, group, control
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="juggler-clearance")
        self._asked: Future[Answer] | None = None
        self._asked_at = 0.0
        self._timed = timed

    @property
    def busy(self) -> bool:
        """A question is under way (answered or not, its answer not taken yet)."""
        return self._asked is not None

    def ask(self, question: Question) -> None:
        assert self._asked is None, "one question at a time"
        self._asked_at = time.monotonic()
        self._asked = self._pool.submit(self._requests, question)

    def answer(self) -> Answer | None:
        """The answer, once it arrived (then the asker is free again); None before. A
        failed request raises here, in the loop's thread (the worker recovers from it,
        `recovery`), and so does a question under way for `STALLED_AFTER` seconds."""
        if self._asked is None:
            return None
        if not self._asked.done():
            waited = time.monotonic() - self._asked_at
            if waited > STALLED_AFTER:
                raise KafkaException(KafkaError(
                    KafkaError._TIMED_OUT, f"a clearance's broker requests went "
                    f"unanswered for {waited:.0f} s"))
            return None
        asked, self._asked = self._asked, None
        answer = asked.result()
        if self._timed is not None:
            self._timed(time.monotonic() - self._asked_at)
        return answer

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _requests(self, question: Question) -> Answer:
        """The committed control offset (M0, unless known), then the log ends (M1): in
        this order, which is what makes an answer with committed >= control end a
        clearance (see `Clearance.clear`)."""
        committed = question.committed
        if question.ask_group:
            committed = group_offsets(self.admin, self.group, [self.control],
                                      REQUEST_TIMEOUT)[self.control]
        asked_at = time.monotonic()
        ends = log_ends(self.admin, (self.control, *question.fanout, *question.idle),
                        REQUEST_TIMEOUT)
        return Answer(question, committed, ends, asked_at)


class Clearance:
    """The clearance protocol's state for one run of the worker's loop, and what an
    answer clears. Called on the loop's thread only; its asker's requests run in the
    background."""

    def __init__(self, admin: AdminClient, group: str, names: TopicNames,
                 stream_of_topic: dict[str, str],
                 timed: Callable[[float], None] | None = None) -> None:
        """`stream_of_topic`: the worker's map from a stream topic to its stream."""
        self.asker = ClearanceAsker(admin, group, (names.control, 0), timed)
        self.names = names
        self._stream_of_topic = stream_of_topic
        self._pending: dict[int, list[tuple[int, int]]] = {}
        """Per task: (fetch epoch, fanout log end) of clearances asked for; the epoch's
        records are cleared once the task's fanout position reaches that end."""
        self._control_committed: int | None = None
        self._control_known = False
        """Whether `_control_committed` is the group's committed control offset: known
        while this worker owns the control partition, from when it asked until it
        commits there again (`control_moved`)."""

    @property
    def busy(self) -> bool:
        """A question is under way: the loop's poll should not wait long for records."""
        return self.asker.busy

    def renew_admin(self, admin: AdminClient) -> None:
        """Ask the next questions with `admin` (the worker's, made anew after an outage)."""
        self.asker.admin = admin

    def control_moved(self) -> None:
        """The group's committed control offset may have moved (this worker committed
        there, or the control partition was assigned or revoked): ask it again."""
        self._control_known = False

    def forget(self, partition: int) -> None:
        """The task of `partition` was revoked: its clearances asked for go with it."""
        self._pending.pop(partition, None)

    def close(self) -> None:
        self.asker.close()

    def clear(self, tasks: Mapping[int, PartitionTask], owns_control: bool, epoch: int,
              generation: int) -> None:
        """Clear the records fetched so far once no command can be accepted with a
        barrier below them that a task has not seen (semantics 4a): every control record
        up to the control log's end is decided and committed (the group's committed
        control offset reached it), and each task has fetched its fanout partition up to
        where it ended after that. `epoch` is the loop's fetch epoch, `generation` its
        count of assignments and revocations, `owns_control` whether this worker owns
        the control partition (then only it commits there).

        A question is one broker request when this worker owns the control partition
        and committed nothing there since it last asked (only it commits there) and
        that answer passed, two otherwise; none is asked for a task whose buffered
        records were all fetched before a clearance already asked for. They run in the
        background (`ClearanceAsker`, one question at a time); this round takes an
        answer that arrived and asks the next question:

        1. the committed control offset C (as a stable offset: no transaction of the
           group pending on it, so its markers are written), known or asked (M0);
        2. in one request (moment M1, after M0): the control log end E, the fanout log
           end F of each waiting task, and the log end of the waiting tasks' empty
           stream partitions (what an idle partition needs before a record may go past
           it, `arrival`; asked here it costs no round trip of its own).

        If C >= E, every command in the control log at M1 was decided and its fanout
        copies committed by M0. A command whose barrier could lie at or below a record
        fetched before the question was asked (before M0) was accepted before that
        record was appended, so it is in the control log at M1 and its copies are below
        F: a task that has fetched its fanout partition up to F has seen it. A command
        accepted after M0 has a barrier above every record fetched before. A known C
        may be older than M0 (learnt by an earlier answer): it is a committed offset
        still, and any command appended after it makes E > C. Timing only decides how
        soon."""
        answer = self.asker.answer()
        if answer is not None:
            self._take_answer(answer, tasks, owns_control, generation)
        if not self.asker.busy:
            waiting = self._waiting(tasks)
            if waiting:
                self.asker.ask(self._question(waiting, tasks, owns_control, epoch,
                                              generation))
        for p, pending in self._pending.items():
            order = tasks[p].order
            position = order.barrier_position or 0
            done = [e for e, fanout_end in pending if position >= fanout_end]
            if done:
                order.cleared_epoch = max(order.cleared_epoch, *done)
                pending[:] = [c for c in pending if c[0] > order.cleared_epoch]

    def _waiting(self, tasks: Mapping[int, PartitionTask]) -> list[int]:
        """The tasks holding records fetched after every clearance asked for them."""
        waiting = []
        for p, t in tasks.items():
            order = t.order
            if not t.restored or order.newest_epoch <= order.cleared_epoch \
                    or not order.buffered():
                continue
            asked = max((e for e, _ in self._pending.get(p, ())), default=-1)
            if order.newest_epoch > asked:
                waiting.append(p)
        return waiting

    def _question(self, waiting: list[int], tasks: Mapping[int, PartitionTask],
                  owns_control: bool, epoch: int, generation: int) -> Question:
        known = owns_control and self._control_known
        fanout = tuple((self.names.fanout, p) for p in waiting)
        idle = tuple((tasks[p].topic_of[inp.stream], p) for p in waiting
                     for inp in tasks[p].order.inputs.values() if not inp.buffer)
        return Question(epoch, generation, tuple(waiting),
                        self._control_committed if known else None, not known, fanout, idle)

    def _take_answer(self, answer: Answer, tasks: Mapping[int, PartitionTask],
                     owns_control: bool, generation: int) -> None:
        q = answer.question
        if q.generation != generation:
            return  # a rebalance since: ask again for the tasks there are now
        if q.ask_group and owns_control:  # only this worker commits there now
            self._control_committed, self._control_known = answer.committed, True
        for topic, p in q.idle:
            inp = tasks[p].order.inputs[self._stream_of_topic[topic]]
            if answer.asked_at > inp.end_at:  # not over a later `JugglerWorker._refresh_ends`
                inp.end, inp.end_at = answer.ends[(topic, p)], answer.asked_at
                inp.end_epoch = q.epoch
        end = answer.ends[self.asker.control]
        if end == 0 or (answer.committed is not None and answer.committed >= end):
            for p, fanout in zip(q.waiting, q.fanout):
                self._pending.setdefault(p, []).append((q.epoch, answer.ends[fanout]))
        else:  # commands under way: ask the group again next time, never trust an
            self._control_known = False  # answer that has not cleared anything
