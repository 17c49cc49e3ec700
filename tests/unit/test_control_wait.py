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


def test_a_live_answers_every_command_up_to_its_offset_in_its_partition(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """LIVE statuses are cumulative per partition: one at offset c answers every command
    at or below c, also those whose verdict comes later, and a stale LIVE (below one
    seen from the same partition) changes nothing."""
    from juggler.codec.avro import Codec
    from juggler.kafka.delivery import Sent
    from juggler.wire.commands import (ACCEPTED, LIVE, REGISTER, REJECTED, CommandStatus,
                                       RegisterCommand)

    codec = Codec(registry_url="")
    commands = [RegisterCommand(f"q{i}", "SELECT * FROM H") for i in range(5)]
    offsets = [10, 11, 12, 20, 21]

    def status(i: int, outcome: str, partition: int = -1) -> _Message:
        return _Message(CommandStatus(commands[i].id, REGISTER, outcome, "", offsets[i],
                                      partition, 2).encode(codec))

    statuses = [status(0, ACCEPTED), status(1, ACCEPTED), status(1, LIVE, 0),
                status(3, LIVE, 1),  # before the verdicts of 2 and 3
                status(0, LIVE, 0), status(2, REJECTED), status(3, ACCEPTED),
                status(4, ACCEPTED), status(3, LIVE, 0), status(4, LIVE, 1)]
    seen: list[Any] = []

    def find(bootstrap: str, topic: str, start: Any, quiet: float, match: Any) -> Any:
        for msg in statuses:
            seen.append(match(msg))
        return None

    monkeypatch.setattr(client, "_end_offsets", lambda *args: {0: 0})
    monkeypatch.setattr(client, "produce", lambda *args: [Sent("c", 0, o) for o in offsets])
    monkeypatch.setattr(client, "_find", find)
    done = client.submit_many("unused", commands, codec=codec)
    assert [(d.status.status if d.status else None, d.live) for d in done] == [
        (ACCEPTED, (2, 2)), (ACCEPTED, (2, 2)), (REJECTED, (1, 2)), (ACCEPTED, (2, 2)),
        (ACCEPTED, (1, 2))]
    assert [d.everywhere for d in done] == [True, True, False, True, False]
    assert seen[4] is None  # the stale LIVE in partition 0 answered nothing new
