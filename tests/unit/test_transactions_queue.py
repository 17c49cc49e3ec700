"""Transactions: one in flight; what is submitted meanwhile is merged into the next one,
committed by the commit thread as soon as the one in flight is done (no broker: a fake
transactional producer records what each transaction held)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from juggler.runtime import transactions as tx
from juggler.runtime.transactions import CommitFailed, Outbox, Transactions


class FakeProducer:
    def __init__(self, config: dict[str, Any]) -> None:
        self.done: list[tuple[list[str], dict[tuple[str, int], int]]] = []
        self.current: list[str] = []
        self.offsets: dict[tuple[str, int], int] = {}
        self.gate = threading.Event()
        self.gate.set()
        self.fail = False

    def init_transactions(self, timeout: float) -> None:
        pass

    def begin_transaction(self) -> None:
        self.current, self.offsets = [], {}

    def produce(self, topic: str, value: Any = None, key: Any = None, partition: int = -1,
                **_: Any) -> None:
        self.current.append(None if value is None else value.decode())

    def send_offsets_to_transaction(self, tps: list[Any], group: Any, timeout: float) -> None:
        self.offsets = {(tp.topic, tp.partition): tp.offset for tp in tps}

    def commit_transaction(self, timeout: float) -> None:
        assert self.gate.wait(10)
        if self.fail:
            from confluent_kafka import KafkaError, KafkaException
            raise KafkaException(KafkaError(KafkaError._FATAL, "fenced"))
        self.done.append((self.current, self.offsets))

    def flush(self, timeout: float) -> int:
        return 0


def outbox(*values: str, offset: int, log: list[str]) -> Outbox:
    box = Outbox()
    for v in values:
        box.send("out", None, v.encode())
    box.offsets[("in", 0)] = offset
    box.then(lambda: log.append(",".join(values)))
    return box


@pytest.fixture
def txns(monkeypatch: pytest.MonkeyPatch) -> Transactions:
    from juggler.runtime import transactions

    monkeypatch.setattr(transactions, "Producer", FakeProducer)
    return Transactions({}, "t", 1000)


def test_rounds_submitted_while_one_is_in_flight_commit_together_next(txns: Transactions) -> None:
    producer: FakeProducer = txns.producer  # type: ignore[assignment]
    log: list[str] = []
    producer.gate.clear()
    txns.submit(outbox("a", offset=1, log=log), None)  # in flight, held at its commit
    txns.submit(outbox("b", offset=2, log=log), None)  # does not wait: queued
    txns.submit(outbox("c", "d", offset=4, log=log), None)  # merged with b
    assert producer.done == [] and log == []
    producer.gate.set()
    txns.wait()
    assert producer.done == [(["a"], {("in", 0): 1}), (["b", "c", "d"], {("in", 0): 4})]
    assert log == ["a", "b", "c,d"]  # callbacks in the caller's thread, in order
    txns.submit(outbox("e", offset=5, log=log), None)
    txns.close()
    assert producer.done[-1] == (["e"], {("in", 0): 5}) and log[-1] == "e"


def test_a_failed_transaction_stops_what_follows(txns: Transactions) -> None:
    producer: FakeProducer = txns.producer  # type: ignore[assignment]
    producer.gate.clear()
    producer.fail = True
    txns.submit(outbox("a", offset=1, log=[]), None)
    txns.submit(outbox("b", offset=2, log=[]), None)
    producer.gate.set()
    with pytest.raises(CommitFailed):
        txns.wait()
    with pytest.raises(CommitFailed):
        txns.submit(outbox("c", offset=3, log=[]), None)
    assert producer.done == []


def test_submit_waits_when_the_queue_is_full(txns: Transactions,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tx, "QUEUE_MAX", 2)
    producer: FakeProducer = txns.producer  # type: ignore[assignment]
    producer.gate.clear()
    txns.submit(outbox("a", offset=1, log=[]), None)
    txns.submit(outbox("b", "c", offset=3, log=[]), None)  # queued: now full
    third = threading.Thread(target=txns.submit, args=(outbox("d", offset=4, log=[]), None))
    third.start()
    third.join(0.2)
    assert third.is_alive()  # held until the commit thread takes the queue
    producer.gate.set()
    third.join(5)
    txns.wait()
    assert [m for m, _ in producer.done] == [["a"], ["b", "c"], ["d"]]


def test_a_compacted_key_sent_again_in_one_transaction_is_written_once(txns: Transactions) -> None:
    """Live, each round writes its keys' bounds to the state topic; merged into one
    transaction, a reader of the compacted topic must see the last value per key (and
    partition), written once."""
    producer: FakeProducer = txns.producer  # type: ignore[assignment]
    producer.gate.clear()
    txns.submit(outbox("a", offset=1, log=[]), None)  # in flight
    first, second = Outbox(), Outbox()
    first.put("state", b"key:k1", b"bounds-1", 0)
    first.put("state", b"key:k1", b"bounds-1", 1)  # another task's partition: kept
    first.put("state", b"ref:7", b"", 0)
    second.put("state", b"key:k1", b"bounds-2", 0)
    second.put("state", b"ref:7", None, 0)  # the reference released a round later
    assert not second.empty()
    txns.submit(first, None)
    txns.submit(second, None)  # merged with `first`
    producer.gate.set()
    txns.wait()
    assert producer.done[-1][0] == ["bounds-2", "bounds-1", None]


def test_a_transaction_stuck_in_the_client_fails_the_wait_and_the_worker_recovers(
        txns: Transactions, monkeypatch: pytest.MonkeyPatch) -> None:
    """librdkafka's `send_offsets_to_transaction` can block past its timeout once the
    group coordinator went away: the worker waiting for that transaction (a rebalance
    does) must fail as a recoverable commit failure, not stand still for good."""
    from juggler.runtime.recovery import diagnose

    monkeypatch.setattr(tx, "STALLED_AFTER", 0.2)
    producer: FakeProducer = txns.producer  # type: ignore[assignment]
    producer.gate.clear()  # the commit never returns while the test runs
    txns.submit(outbox("a", offset=1, log=[]), None)
    with pytest.raises(CommitFailed) as stalled:
        txns.wait()
    assert "neither committed nor aborted" in str(stalled.value)
    assert diagnose(stalled.value) == "transaction stalled"  # recoverable: no exit 70
    with pytest.raises(CommitFailed):
        txns.submit(outbox("b", offset=2, log=[]), None)
    producer.gate.set()  # let the stuck call end
