"""The clearance's requests run in the background: the loop must get no answer before
the requests are done, the committed control offset must be asked before the log ends
(the order `Clearance.clear`'s argument rests on), and a failed request must stop
the loop rather than pass for an answer, and so must a request that never answers."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException

from juggler.kafka import offsets
from juggler.runtime import clearance
from juggler.runtime.clearance import ClearanceAsker, Question

CONTROL = ("juggler.control", 0)


def _question(ask_group: bool, committed: int | None = None) -> Question:
    return Question(epoch=7, generation=1, waiting=(0,), committed=committed,
                    ask_group=ask_group, fanout=(("juggler.fanout", 0),), idle=())


def _wait_answer(asker: ClearanceAsker) -> clearance.Answer:
    """Until the answer arrived (the loop polls the same way); 30 s is a hang."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = asker.answer()
        if answer is not None:
            return answer
        time.sleep(0.001)
    raise AssertionError("no answer in 30 s")


def test_no_answer_until_the_requests_are_done_and_the_group_is_asked_first(monkeypatch):
    calls: list[str] = []
    release = threading.Event()

    def group_offsets(admin, group, tps, timeout):
        calls.append("group")
        return {CONTROL: 5}

    def log_ends(admin, tps, timeout):
        release.wait(10)
        calls.append("ends")
        return {tp: 5 for tp in tps}

    monkeypatch.setattr(clearance, "group_offsets", group_offsets)
    monkeypatch.setattr(clearance, "log_ends", log_ends)
    asker = ClearanceAsker(None, "app", CONTROL)
    try:
        asker.ask(_question(ask_group=True))
        assert asker.busy and asker.answer() is None
        release.set()
        answer = _wait_answer(asker)
    finally:
        asker.close()
    assert calls == ["group", "ends"]
    assert (answer.committed, answer.ends[CONTROL], answer.question.epoch) == (5, 5, 7)
    assert not asker.busy


def test_a_known_committed_offset_is_not_asked_again(monkeypatch):
    monkeypatch.setattr(clearance, "group_offsets", lambda *a: pytest.fail("asked the group"))
    monkeypatch.setattr(clearance, "log_ends", lambda admin, tps, timeout: {tp: 3 for tp in tps})
    asker = ClearanceAsker(None, "app", CONTROL)
    try:
        asker.ask(_question(ask_group=False, committed=3))
        assert _wait_answer(asker).committed == 3
    finally:
        asker.close()


def test_a_failed_request_raises_in_the_loop(monkeypatch):
    def log_ends(admin, tps, timeout):
        raise RuntimeError("broker gone")

    monkeypatch.setattr(clearance, "log_ends", log_ends)
    asker = ClearanceAsker(None, "app", CONTROL)
    try:
        asker.ask(_question(ask_group=False, committed=0))
        with pytest.raises(RuntimeError, match="broker gone"):
            _wait_answer(asker)
    finally:
        asker.close()


def test_the_wait_for_an_answer_is_timed_when_the_loop_takes_it(monkeypatch):
    """`juggler_clearance_seconds`: from the question to the loop taking the answer,
    once per answer, the broker's slowness included."""
    monkeypatch.setattr(clearance, "group_offsets", lambda admin, group, tps, timeout: {CONTROL: 5})

    def log_ends(admin, tps, timeout):
        time.sleep(0.05)
        return {tp: 5 for tp in tps}

    monkeypatch.setattr(clearance, "log_ends", log_ends)
    waits: list[float] = []
    asker = ClearanceAsker(None, "app", CONTROL, waits.append)
    try:
        asker.ask(_question(ask_group=True))
        assert asker.answer() is None and waits == []
        _wait_answer(asker)
    finally:
        asker.close()
    assert len(waits) == 1 and waits[0] >= 0.05


def test_a_question_that_never_answers_raises_in_the_loop(monkeypatch):
    """A clearance stuck in the client library must not leave the worker healthy and
    idle with records waiting: it fails like a broker request, and the worker recovers."""
    stuck = threading.Event()
    monkeypatch.setattr(clearance, "log_ends", lambda admin, tps, timeout: stuck.wait())
    monkeypatch.setattr(clearance, "STALLED_AFTER", 0.2)
    asker = ClearanceAsker(None, "app", CONTROL)
    try:
        asker.ask(_question(ask_group=False, committed=0))
        with pytest.raises(KafkaException) as raised:
            _wait_answer(asker)
    finally:
        stuck.set()
        asker.close()
    assert raised.value.args[0].code() == KafkaError._TIMED_OUT


def test_an_admin_request_that_never_answers_times_out(monkeypatch):
    """`log_ends` and `group_offsets` wait for an answer no longer than their timeout
    (plus a grace), even when the client library never resolves the request."""

    class Silent:
        def list_offsets(self, requests, **_):
            return {tp: Future() for tp in requests}

        def list_consumer_group_offsets(self, requests, **_):
            return {requests[0].group_id: Future()}

    monkeypatch.setattr(offsets, "ANSWER_GRACE", 0.1)
    for ask in (lambda: offsets.log_ends(Silent(), [("t", 0)], 0.1),
                lambda: offsets.group_offsets(Silent(), "app", [("t", 0)], 0.1)):
        with pytest.raises(KafkaException) as raised:
            ask()
        assert raised.value.args[0].code() == KafkaError._TIMED_OUT
