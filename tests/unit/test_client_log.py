"""The Kafka clients' log: a broker outage is a few lines, not one per failed connection,
and `/health` learns when the cluster is unreachable and when it answers again."""

from __future__ import annotations

import logging

import pytest

from juggler.kafka.client_log import HOOKS, QUIET, ClientLog, unwatched, watched

KafkaError = pytest.importorskip("confluent_kafka").KafkaError

REFUSED = ("127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection "
           "refused (after 0ms in state CONNECT)")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clog(caplog: pytest.LogCaptureFixture) -> tuple[ClientLog, Clock]:
    caplog.set_level(logging.DEBUG, "juggler.kafka.test")
    clock = Clock()
    return ClientLog(logging.getLogger("juggler.kafka.test"), clock=clock, wall=clock), clock


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


def test_an_outage_is_a_line_when_it_begins_one_per_interval_and_one_at_its_end(
        clog: tuple[ClientLog, Clock], caplog: pytest.LogCaptureFixture) -> None:
    log, clock = clog
    for i in range(2400):  # 40 a second for 60 s, under two names for the one broker
        clock.now = 1000.0 + i / 40
        text = REFUSED.replace("/bootstrap", "/1") if i % 2 else REFUSED
        if i % 3 == 0:  # librdkafka's own suppression, which only shortens the echo
            text = text.replace("CONNECT)", "CONNECT, 315 identical error(s) suppressed)")
        log.error(KafkaError(KafkaError._TRANSPORT, text))
    clock.now += QUIET + 1
    log.answered()
    log._over()
    assert lines(caplog) == [
        "broker 127.0.0.1:9092 unreachable: Connection refused",
        "broker 127.0.0.1:9092 unreachable: Connection refused (1200 times in the last 30 s)",
        "broker 127.0.0.1:9092 reachable again after 60 s (2400 connection failures)"]


def test_unreachable_once_all_brokers_are_down_and_a_connection_failed_until_it_answers(
        clog: tuple[ClientLog, Clock]) -> None:
    log, clock = clog
    log.error(KafkaError(KafkaError._TRANSPORT, "127.0.0.1:9092/1: Disconnected (after "
                                                "600000ms in state UP)"))
    log.error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    assert log.unreachable() is None  # an idle connection the broker closed
    log.error(KafkaError(KafkaError._TRANSPORT, REFUSED))
    assert log.unreachable() == (1000.0, "127.0.0.1:9092: Connection refused")
    clock.now += 5
    log.answered()
    assert log.unreachable() is None and log.outages == 1
    log.answered()
    assert log.outages == 1


def test_other_lines_pass_once_per_interval_with_a_count_and_failures_only_once(
        clog: tuple[ClientLog, Clock], caplog: pytest.LogCaptureFixture) -> None:
    log, clock = clog
    for _ in range(5):
        log.log(3, "%s [%s] %s", "FAIL", "rdkafka#producer-1", "[thrd:x]: " + REFUSED)
        log.log(4, "%s [%s] %s", "REQTMOUT", "rdkafka#producer-1",
                "[thrd:127.0.0.1:9092/1]: 127.0.0.1:9092/1: Timed out 1 in-flight request")
    clock.now += 31
    log.log(4, "%s [%s] %s", "REQTMOUT", "rdkafka#producer-1", "again")
    assert lines(caplog) == [
        "Kafka client: REQTMOUT: 127.0.0.1:9092/1: Timed out 1 in-flight request",
        "Kafka client: REQTMOUT: again (and 4 more like it since the last)"]


def test_a_refusal_of_the_credentials_is_remembered(clog: tuple[ClientLog, Clock]) -> None:
    log, clock = clog
    log.error(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: bad password"))
    assert log.refused_since(999.0) == "SASL authentication error: bad password"
    assert log.refused_since(1001.0) is None


def test_the_hooks_stay_in_their_process() -> None:
    config = watched({"bootstrap.servers": "b:9092"})
    assert set(HOOKS) <= set(config)
    assert unwatched(config) == {"bootstrap.servers": "b:9092"}


def test_a_coordinator_is_named_by_the_address_it_tried(
        clog: tuple[ClientLog, Clock], caplog: pytest.LogCaptureFixture) -> None:
    log, _ = clog
    log.error(KafkaError(KafkaError._TRANSPORT, REFUSED))
    log.error(KafkaError(KafkaError._TRANSPORT, "GroupCoordinator: Connect to "
                                                "ipv4#127.0.0.1:9092 failed: Connection refused"))
    log.error(KafkaError(KafkaError._TRANSPORT, "TxnCoordinator/1: Disconnected"))
    assert lines(caplog) == ["broker 127.0.0.1:9092 unreachable: Connection refused",
                             "broker TxnCoordinator unreachable: Disconnected"]
