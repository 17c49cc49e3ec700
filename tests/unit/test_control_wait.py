"""`submit_many` waits as long as answers keep coming: its wait for statuses ends only
after `timeout` seconds without one (a batch of 100,000 registrations takes the
workers longer than any fixed timeout), never at a single deadline."""

from __future__ import annotations

from typing import Any

import pytest

from juggler.client import control as client


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class _Message:
    def __init__(self, value: Any) -> None:
        self.v = value

    def value(self) -> Any:
        return self.v

    def error(self) -> None:
        return None


class _Consumer:
    """Hands out scripted messages at their times on the fake clock."""

    def __init__(self, clock: _Clock, arrivals: list[tuple[float, Any]]) -> None:
        self.clock, self.arrivals = clock, list(arrivals)

    def assign(self, partitions: Any) -> None:
        pass

    def poll(self, timeout: float) -> _Message | None:
        if self.arrivals and self.arrivals[0][0] <= self.clock.now + timeout:
            at, value = self.arrivals.pop(0)
            self.clock.now = max(self.clock.now, at)
            return _Message(value)
        self.clock.now += timeout
        return None

    def close(self) -> None:
        pass


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(client.time, "monotonic", fake.monotonic)
    return fake


def _find(monkeypatch: pytest.MonkeyPatch, clock: _Clock, arrivals: list[tuple[float, Any]]) -> Any:
    monkeypatch.setattr(client, "_consumer", lambda bootstrap: _Consumer(clock, arrivals))
    # each message is progress (False) but the last, which ends the wait
    return client._find("unused", "topic", {0: 0}, 1.0,
                        lambda msg: msg.value() if msg.value() == "done" else False)


def test_the_wait_goes_on_while_answers_keep_coming(monkeypatch: pytest.MonkeyPatch, clock: _Clock) -> None:
    arrivals = [(0.9 * k, "progress") for k in range(1, 20)] + [(17.9, "done")]
    assert _find(monkeypatch, clock, arrivals) == "done"
    assert clock.now == pytest.approx(17.9)


def test_the_wait_ends_after_the_timeout_without_an_answer(monkeypatch: pytest.MonkeyPatch, clock: _Clock) -> None:
    arrivals = [(0.5, "progress"), (0.9, "progress"), (2.5, "done")]
    assert _find(monkeypatch, clock, arrivals) is None
    assert clock.now == pytest.approx(1.9)


def test_messages_that_answer_nothing_do_not_extend_the_wait(monkeypatch: pytest.MonkeyPatch, clock: _Clock) -> None:
    monkeypatch.setattr(client, "_consumer", lambda bootstrap: _Consumer(clock, [(0.4 * k, "other") for k in range(1, 10)]))
    assert client._find("unused", "topic", {0: 0}, 1.0, lambda msg: None) is None
    assert clock.now <= 1.5
