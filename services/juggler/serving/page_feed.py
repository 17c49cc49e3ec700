"""The worker's side of its HTTP port's process (`page_process`): binds the port, starts
the process, pushes it the pages as they change, answers what it asks, and starts it
again if it stops.

One thread of the worker does all of it (`PageFeed`): every `PUSH_EVERY` it reads
what `/health`, `/health/results` and `/progress` show, how the results index is and
which queries have their own topic, and sends what changed; in between it answers what
the process asks: a scrape's metrics, the registered queries when those the process
holds are no longer the published ones, and one query's facts. Reading the pushed
pages is what the worker's own server did per request; now it is done at most
`1 / PUSH_EVERY` times a second however often a probe asks, and sends nothing when
nothing changed (a published round's snapshot is compared by identity).
"""

from __future__ import annotations

import atexit
import json
import logging
import multiprocessing
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from juggler.kafka.client_log import unwatched
from juggler.runtime.metrics import CONTENT_TYPE
from juggler.runtime.pages import WorkerView
from juggler.runtime.recovery import Backoff
from juggler.runtime.results_store import ResultsStore
from juggler.serving.page_messages import (
    Answer,
    Asked,
    IndexState,
    MetricsReply,
    Origin,
    OwnTopics,
    Pushed,
    QueriesReply,
    QueryReply,
    Reply,
    port_main,
)

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.context import SpawnProcess

log = logging.getLogger(__name__)

PUSH_EVERY = 0.01
"""Seconds between two looks at what the pages show: how stale `/health` may be, on
top of the wait for the interpreter's lock."""
HEARTBEAT_EVERY = 1.0
"""Seconds after which the process is sent an empty push if nothing changed, so that it
can tell a quiet worker from a frozen one."""
SILENT_AFTER = 10.0
"""Seconds of silence after which the process's `/health` says 503: several times the
heartbeat, and longer than the worker's longest hold of its interpreter seen (a native
registration of 100,000 queries at restore, about 2 s)."""
RESTART_FIRST, RESTART_MOST = 0.1, 10.0
"""Waits before starting a stopped HTTP process again, doubling..."""
LIVED = 60.0
"""...back to the first after a process that served this long."""


@dataclass
class Server:
    port: int
    feed: PageFeed


def serve_apart(worker: WorkerView, host: str, port: int, token: str | None = None, *,
                silent_after: float = SILENT_AFTER) -> Server:
    """Bind `host:port` here (a taken port fails now, as the worker starts) and serve
    it from a process of its own; returns at once, while that process starts."""
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                  flags=socket.AI_PASSIVE)[0]
    sock = socket.create_server(address, family=family, backlog=512)
    store = worker.results_store
    if store is None:
        raise RuntimeError("the results index must start before the HTTP port")
    origin = Origin(worker.names, token, unwatched(dict(worker.client_config)), store.path,
                    worker.settings.loglevel, CONTENT_TYPE, worker.registered.published,
                    silent_after)
    feed = PageFeed(worker, store, sock, origin)
    feed.start()
    return Server(sock.getsockname()[1], feed)


@dataclass
class _Sent:
    """What the process was last sent."""

    health: tuple[int, dict[str, Any]] | None = None
    index_health: dict[str, Any] | None = None
    progress: Any = field(default=None, repr=False)
    index: IndexState | None = None
    version: int = -1
    at: float = float("-inf")
    """When anything was sent last."""


class PageFeed:
    """Starts the port's process on `sock`, feeds it, and starts it again when it stops
    (until the worker's exit)."""

    def __init__(self, worker: WorkerView, store: ResultsStore, sock: socket.socket,
                 origin: Origin) -> None:
        self.worker, self.store, self.sock, self.origin = worker, store, sock, origin
        self._context = multiprocessing.get_context("spawn")  # no fork of librdkafka's threads
        self._backoff = Backoff(RESTART_FIRST, RESTART_MOST)
        self.thread = threading.Thread(target=self._run, name="juggler-pages-feed",
                                       daemon=True)
        self.process: SpawnProcess | None = None
        self._stopping = threading.Event()

    def start(self) -> None:
        self.thread.start()
        atexit.register(self.stop)  # before multiprocessing's own, which kills it unasked

    def stop(self) -> None:
        """End the process (the worker's exit): nothing is started again."""
        self._stopping.set()
        if self.process is not None and self.process.is_alive():
            self.process.terminate()
            self.process.join(5)

    def _run(self) -> None:
        while not self._stopping.is_set():
            mine, theirs = self._context.Pipe()
            self.process = process = self._context.Process(
                target=port_main, name="juggler-http", daemon=True,
                args=(theirs, self.sock, self.origin))
            process.start()
            started = time.monotonic()
            theirs.close()
            try:
                self._feed(mine, process)
            except (EOFError, OSError) as exc:
                reason = f"{type(exc).__name__}: {exc}"
            except Exception as exc:  # the port must outlive a fault of its own
                log.exception("feeding the HTTP port's process failed")
                reason = f"{type(exc).__name__}: {exc}"
            else:
                reason = f"exit status {process.exitcode}"
            mine.close()
            process.join(1)
            if process.is_alive():
                process.kill()
                process.join()
            if self._stopping.is_set():
                return
            if time.monotonic() - started > LIVED:
                self._backoff.reset()
            wait = self._backoff.next()
            log.warning("the HTTP port's process stopped (%s); starting it again in %.1f s",
                        reason, wait)
            self._stopping.wait(wait)

    def _feed(self, conn: Connection, process: SpawnProcess) -> None:
        sent = _Sent()
        while process.is_alive():
            self._push(conn, sent)
            if conn.poll(PUSH_EVERY):
                conn.send(self._answer(conn.recv()))

    def _answer(self, asked: Asked) -> Reply:
        worker = self.worker
        if asked.page == "metrics":
            at = time.monotonic()
            return MetricsReply(asked.ask, worker.metrics.cached() or worker.metrics.expose(),
                                at)
        if asked.page == "queries":
            version = worker.registered.published.value  # first: the queries are as new
            queries = worker.pages.queries               # or newer
            return QueriesReply(asked.ask, queries if isinstance(queries, dict)
                                else dict(queries), version)
        # a membership test of a task's dict or set is atomic: read as it stands
        return QueryReply(asked.ask,
                          any(asked.query_id in t.texts for t in worker.restored_tasks()),
                          worker.own_topic(asked.query_id))

    def _push(self, conn: Connection, sent: _Sent) -> None:
        worker, store = self.worker, self.store
        version = worker.registered.published.value  # before the pages: see `_answer`
        index_health = store.health()
        now_health, pages = health(worker, index_health), worker.pages
        index = IndexState(store.running(), store.lag)
        now = time.monotonic()
        if now_health == sent.health and index_health == sent.index_health \
                and pages.progress is sent.progress and index == sent.index \
                and version == sent.version:
            if now - sent.at >= HEARTBEAT_EVERY:
                conn.send(Pushed())
                sent.at = now
            return
        conn.send(Pushed(
            None if now_health == sent.health else _json(now_health),
            None if index_health == sent.index_health else _json(results_health(index_health)),
            None if pages.progress is sent.progress else dict(pages.progress),
            None if index == sent.index else index,
            None if version == sent.version else OwnTopics(version, pages.own_topic)))
        sent.health, sent.index_health, sent.progress = now_health, index_health, pages.progress
        sent.index, sent.version, sent.at = index, version, now


def health(worker: WorkerView, index: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """`/health`'s status and body, read as they stand (copying the tasks' keys is one
    atomic step), never waiting for the loop: a round stuck behind a transaction that
    cannot commit is when `/health` must answer why. `index`: the results index's
    `health()`."""
    body = {"app": worker.settings.app_id, "partitions": sorted(list(worker.tasks)),
            "results_index": index}
    reason = worker.unavailable()
    if reason is not None:
        return 503, {"status": "unavailable", "reason": reason, **body}
    ready = worker.ready
    return (200 if ready else 503), {"status": "ok" if ready else "starting", **body}


def results_health(index: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """`/health/results`: the results index's `health()` alone, 200 while
    its indexer runs (behind by a moment or not) and 503 while it is failed, until a
    restarted one caught up. Apart from `/health` because the worker's processing is
    fine meanwhile: a liveness probe must not restart it for this, while a readiness
    probe of a Service that serves the results API may take it out (every worker indexes
    the same topics, so another one answers in full)."""
    return (503 if index["status"] == "failed" else 200), index


def _json(page: tuple[int, dict[str, Any]]) -> Answer:
    return Answer(page[0], json.dumps(page[1]).encode())
