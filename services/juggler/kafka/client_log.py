"""What a process's Kafka clients report about the cluster, said once and remembered.

librdkafka reports every failed attempt of every client to reach every broker: during a
broker outage the worker's consumer, producer and admin clients and the results index's
logged about 40 "Connection refused" lines a second, 1,790 in 52 s. Every librdkafka
client of the worker and of its results index is configured through `watched` (the
worker's `Job.client_config`), which hands the client's log lines and error events to
the process's one `ClientLog`:

- a broker's connection failures make one line when they begin, then at most one per
  `SUMMARY_EVERY` with their count ("broker 127.0.0.1:9092 unreachable: Connection
  refused (412 times in the last 30 s)"), and one when the cluster answers again;
- any other line or error is passed on at most once per `SUMMARY_EVERY` for one kind,
  the next one saying how many were held back;
- a fatal error is logged at once, as it is (the call that meets it raises anyway).

It also keeps what `/health` says about the cluster: since when a broker could not be
reached (`unreachable`), until a request is answered again. While brokers are down, a
thread of its own asks one of the admin clients it serves (`serve`) for the cluster's
metadata every `POLL_EVERY` seconds to learn when they are back; it also serves those
clients' callbacks, which librdkafka delivers only when a client is polled.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

log = logging.getLogger("juggler.kafka")

SUMMARY_EVERY = 30.0
"""Seconds between two lines about the same broker's failures, or the same kind of line."""
POLL_EVERY = 1.0
"""Seconds between two polls of the served admin clients (and, while a broker is down,
two questions whether the cluster answers)."""
QUIET = 12.0
"""Seconds without a failure, the cluster answering meanwhile, after which a broker's
failures are over: longer than librdkafka's longest wait between two attempts to
connect (`reconnect.backoff.max.ms`, 10 s), so a broker still down is not reported back
and gone again at every attempt."""
HOOKS = ("logger", "error_cb")
"""The config keys `watched` adds: objects of this process, never sent to another."""

_SYSLOG_LEVELS = {0: logging.CRITICAL, 1: logging.CRITICAL, 2: logging.CRITICAL,
                  3: logging.ERROR, 4: logging.WARNING, 5: logging.INFO, 6: logging.INFO,
                  7: logging.DEBUG}
_BROKER = re.compile(r"^(?:\w+Coordinator(?:/\d+)?: )?(?P<broker>\S+:\d+)(?:/\S+)?: "
                     r"(?P<what>.+)$")
_LOGICAL = re.compile(r"^(?P<broker>\w+Coordinator)(?:/\d+)?: (?P<what>.+)$")
"""A logical broker (the group's or the transaction's coordinator) failing: named by the
address it tried, when it says which."""
_ADDRESS = re.compile(r"^Connect to (?:ipv[46]#)?(?P<address>\S+:\d+) failed")
_CONNECT = re.compile(r"^Connect to \S+ failed: ")
_AFTER = re.compile(r" \(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)$")
_CONNECTING = ("Connect to", "Failed to resolve", "Connection setup timed out",
               "SSL handshake failed")
"""What a failed attempt to connect says (a disconnect alone may be an idle connection
the broker closed, which the client opens again when it needs it)."""


@dataclass
class _Broker:
    """One broker's connection failures since they began."""

    since_clock: float
    """`time.monotonic()` of the first failure."""
    reason: str
    said_at: float
    """`time.monotonic()` of the last line about them."""
    held: int = 0
    """Failures since that line."""
    total: int = 1
    last: float = 0.0
    """`time.monotonic()` of the last failure."""
    connecting: bool = False
    """Whether an attempt to connect failed (else the broker only closed a connection,
    perhaps an idle one, which is worth a line, not a warning)."""

    @property
    def level(self) -> int:
        return logging.WARNING if self.connecting else logging.INFO


@dataclass
class _Held:
    """Lines of one kind held back since the last one passed on."""

    said_at: float
    count: int = 0


class ClientLog:
    def __init__(self, logger: logging.Logger = log, every: float = SUMMARY_EVERY,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.logger = logger
        self.every = every
        self.clock = clock
        self.wall = wall
        self._lock = threading.Lock()
        self._brokers: dict[str, _Broker] = {}
        self._held: dict[str, _Held] = {}
        self._down: tuple[float, str] | None = None
        """(wall-clock time, what failed) of the first failed connection since the cluster
        last answered, once a client also said all its brokers are down: a broker of
        several may be down while the others lead its partitions, and a connection
        closed for being idle is no failure to connect."""
        self._failed: tuple[float, str] | None = None
        self._all_down = False
        self._answered_at = float("-inf")
        self.outages = 0
        """How many times the cluster answered again after a failure: a client that
        lived through one may be left broken (`Job.renew_admin`)."""
        self._refused: tuple[float, str] | None = None
        self._served: list[AdminClient] = []
        self._thread: threading.Thread | None = None

    # librdkafka's hooks ------------------------------------------------------------

    def log(self, level: int, msg: str, *args: Any) -> None:
        """The `logger` of a client: librdkafka calls `log(level, "%s [%s] %s", facility,
        client name, text)`, with syslog levels."""
        facility, text = ("", msg % args if args else msg)
        if len(args) == 3:
            facility, _, text = (str(a) for a in args)
        if facility == "FAIL":
            return  # a broker's failure: the error event for it comes to `error`
        self._pass_on(f"librdkafka {facility}", _SYSLOG_LEVELS.get(level, logging.WARNING),
                      f"Kafka client: {facility}: {_thread_free(text)}")

    def error(self, error: KafkaError) -> None:
        """The `error_cb` of a client. librdkafka retries what these report by itself;
        a fatal one also fails the next call on that client, which decides."""
        from confluent_kafka import KafkaError

        code, text = error.code(), error.str()
        if error.fatal():
            self.logger.critical("Kafka client: fatal error: %s", text)
            return
        if code == KafkaError._ALL_BROKERS_DOWN:  # each broker's failures say why
            with self._lock:
                self._all_down = True
                self._down = self._down or self._failed
            return
        if code in (KafkaError._TRANSPORT, KafkaError._RESOLVE, KafkaError._SSL):
            broker = _BROKER.match(text) or _LOGICAL.match(text)
            if broker is not None:
                address = _ADDRESS.match(broker["what"])
                self._broker_failed(address["address"] if address else broker["broker"],
                                    broker["what"])
                return
        if code in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
            with self._lock:
                self._refused = (self.wall(), text)
        self._pass_on(error.name(), logging.WARNING, f"Kafka client: {text}")

    # what the worker asks -----------------------------------------------------------

    def unreachable(self) -> tuple[float, str] | None:
        """(since when, as wall-clock time, and what failed) while the cluster cannot be
        reached (see `_down`) and has not answered since; None otherwise."""
        return self._down

    def refused_since(self, since: float) -> str | None:
        """What a broker said when it last refused this process's credentials, if it did
        after `since` (wall-clock time)."""
        refused = self._refused
        return refused[1] if refused is not None and refused[0] >= since else None

    def answered(self) -> None:
        """A request to the cluster was answered: it is reachable again."""
        with self._lock:
            if self._failed is not None:
                self.outages += 1
            self._down = self._failed = None
            self._all_down = False
            self._answered_at = self.clock()

    def serve(self, admin: AdminClient) -> None:
        """Poll `admin` every `POLL_EVERY` seconds from a thread of this log's (its log
        lines and errors are delivered only when it is polled), and ask it whether the
        cluster answers while a broker is reported down."""
        with self._lock:
            self._served.append(admin)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="juggler-kafka-log",
                                                daemon=True)
                self._thread.start()

    def forget(self, admin: AdminClient) -> None:
        """Stop polling `admin` (replaced by another)."""
        with self._lock:
            self._served = [a for a in self._served if a is not admin]

    # inside ---------------------------------------------------------------------------

    def _broker_failed(self, name: str, what: str) -> None:
        reason = _AFTER.sub("", _CONNECT.sub("", what))
        now = self.clock()
        with self._lock:
            if self._failed is None and what.startswith(_CONNECTING):  # see `_down`
                self._failed = (self.wall(), f"{name}: {reason}")
                if self._all_down:
                    self._down = self._failed
            connecting = what.startswith(_CONNECTING)
            broker = self._brokers.get(name)
            if broker is None:
                broker = self._brokers[name] = _Broker(now, reason, now, last=now,
                                                       connecting=connecting)
                held, elapsed = 0, 0.0
            else:
                broker.held += 1
                broker.total += 1
                broker.last = now
                broker.reason = reason
                broker.connecting |= connecting
                if now - broker.said_at < self.every:
                    return
                held, elapsed = broker.held, now - broker.said_at
                broker.held, broker.said_at = 0, now
        if held:
            self.logger.log(broker.level, "broker %s unreachable: %s (%d times in the last %s)",
                            name, reason, held, _duration(elapsed))
        else:
            self.logger.log(broker.level, "broker %s unreachable: %s", name, reason)

    def _over(self) -> None:
        """Say which brokers' failures are over: none for `QUIET` seconds, and the
        cluster answered since the last."""
        now = self.clock()
        with self._lock:
            over = [(name, b) for name, b in self._brokers.items()
                    if now - b.last >= QUIET and self._answered_at > b.last]
            for name, _ in over:
                del self._brokers[name]
        for name, broker in over:
            self.logger.log(broker.level, "broker %s reachable again after %s (%d connection "
                            "failures)", name, _duration(broker.last - broker.since_clock),
                            broker.total)

    def _pass_on(self, kind: str, level: int, line: str) -> None:
        now = self.clock()
        with self._lock:
            held = self._held.get(kind)
            if held is not None and now - held.said_at < self.every:
                held.count += 1
                return
            count = held.count if held is not None else 0
            self._held[kind] = _Held(now)
        if count:
            line += f" (and {count} more like it since the last)"
        self.logger.log(level, "%s", line)

    def _watch(self) -> None:
        while True:
            time.sleep(POLL_EVERY)
            try:
                self._tick()
            except Exception:  # noqa: BLE001 - a log must not stop; tried again next tick
                self.logger.exception("the Kafka clients' log failed; going on")

    def _tick(self) -> None:
        served = list(self._served)
        for admin in served:
            admin.poll(0)
        if not served or (self._down is None and not self._brokers):
            return
        from confluent_kafka import KafkaException

        try:
            served[-1].list_topics(timeout=POLL_EVERY)
        except KafkaException:
            return  # still down; asked again next time
        self.answered()
        self._over()


def _thread_free(text: str) -> str:
    """librdkafka's text without the "[thrd:...]: " prefix naming its thread."""
    return re.sub(r"^\[thrd:[^\]]*\]: ", "", text)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s"


def stamp(wall: float) -> str:
    """A wall-clock time as /health says it (UTC, ISO 8601, seconds)."""
    return datetime.fromtimestamp(wall, timezone.utc).isoformat(timespec="seconds")


_PROCESS_LOG: ClientLog | None = None
_PROCESS_LOCK = threading.Lock()


def client_log() -> ClientLog:
    """This process's `ClientLog` (the worker's and its results index's are two)."""
    global _PROCESS_LOG
    with _PROCESS_LOCK:
        if _PROCESS_LOG is None:
            _PROCESS_LOG = ClientLog()
        return _PROCESS_LOG


def watched(config: dict[str, Any]) -> dict[str, Any]:
    """A librdkafka client config whose log lines and error events go to this process's
    `ClientLog`."""
    hooks = client_log()
    return {**config, "logger": hooks, "error_cb": hooks.error}


def unwatched(config: dict[str, Any]) -> dict[str, Any]:
    """`config` without the hooks `watched` added, to hand to another process (which
    adds its own)."""
    return {k: v for k, v in config.items() if k not in HOOKS}
