"""A clearance's broker requests (semantics 4a, `JugglerWorker._clear`), asked in a thread
of their own.

Why: a clearance is one or two broker requests (the group's committed control offset,
then the log ends), 4.5 ms on average on the 2-core benchmark machine at 1,500 events/s
of workload K. Asked in the loop, every round that fetched something stood still for
them: about 40% of the loop's time. Asked here, the loop goes on fetching, routing and
running what is already cleared, and takes the answer in the first round after it
arrived. One question at a time: what is fetched meanwhile waits for the next one,
asked in the round that takes this answer.

Only the requests run here; what an answer clears is decided in the loop's thread, so
the tasks' state has one writer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from juggler.kafka.offsets import ANSWER_GRACE, TP, group_offsets, log_ends

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
    def __init__(self, admin: Any, group: str, control: TP,
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
                from confluent_kafka import KafkaError, KafkaException

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
        clearance (see `JugglerWorker._clear`)."""
        committed = question.committed
        if question.ask_group:
            committed = group_offsets(self.admin, self.group, [self.control],
                                      REQUEST_TIMEOUT)[self.control]
        asked_at = time.monotonic()
        ends = log_ends(self.admin, (self.control, *question.fanout, *question.idle),
                        REQUEST_TIMEOUT)
        return Answer(question, committed, ends, asked_at)
