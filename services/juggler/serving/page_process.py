"""The worker's HTTP port, served by a process of its own.

Why a process: a request answered inside the worker waits for the interpreter's lock
at every step (accept, read, handle, write), and a busy worker's loop holds it most of
the time; on two cores shared with the broker, `/health` took up to 125 ms and
`/progress` up to 470 ms at p99 (docs/benchmarks.md, "Probes"), while a Kubernetes
probe gives up after 1 s. This process holds no engine and takes no lock of the
worker's, so a probe waits for the operating system's scheduler alone.

What it answers, and from what:

- `/health` and `/health/results`: as the worker last pushed them (`page_feed`),
  pushed whenever they change and looked at every `page_feed.PUSH_EVERY`;
- `/progress`: the progress the worker last published, pushed likewise, with the log
  ends asked of the cluster now by this process's own admin client
  (`progress_report`): it may be a moment behind, its `caught_up` never
  ahead;
- `/queries`: as this process last got them, while the count the worker publishes with
  every snapshot in shared memory (`Registered.published`) says they are current; else
  asked of the worker (`Asked`), so a query that went live is listed, as the worker's
  own page would list it;
- `/metrics`: the text the worker rendered last, while it is at most `METRICS_FRESH`
  old; a scraper that comes back within that time has the next one asked for at once
  (ready when it comes), one that comes back later (Prometheus, every 15 s) waits for
  a text rendered after it came;
- `/queries/<id>/results`: read here from the results index's SQLite file
  (`results_table`, WAL: a reader never waits for the indexer), with what the worker
  pushed of the index's health (a page's `behind`) and of the queries with their own
  topic (current by the same count as `/queries`); a query id neither indexed nor known
  that way is asked of the worker before a 404.

It serves the listening socket the worker bound (so a taken port fails the worker at
once, and connections wait in the socket's backlog while this process starts or is
started again) and stops when the worker's end of the pipe closes: a worker killed
without any clean-up leaves no server behind.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from aiohttp import web
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from juggler.kafka.client_log import client_log, watched
from juggler.kafka.offsets import log_ends
from juggler.logs import log_to_stderr
from juggler.runtime import results_table
from juggler.runtime.results_table import TP
from juggler.runtime.pages import queries_body
from juggler.serving.http_auth import bearer_token
from juggler.serving.json_pages import PageRequest, json_errors, page_request, unknown_query
from juggler.serving.page_messages import (
    STARTING,
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
)
from juggler.serving.results_api import page_body

METRICS_FRESH = 0.5
"""A scrape may show the metrics as they were up to this many seconds before it: the
worker's render takes a few ms of its interpreter for 100 queries, and under load
tens of ms of waiting for it, which a scraper that comes back several times a second
should not wait for each time."""
WORKER_WAIT = 30.0
"""Seconds a page waits for the worker before a 503 (the metrics of 100,000 queries
take about a second to render)."""
JSON = "application/json"


@dataclass
class Pages:
    """The pages as last pushed or asked, and the requests waiting for the worker."""

    health: Answer = STARTING
    results_health: Answer = STARTING
    progress: Mapping[str, Any] = field(
        default_factory=lambda: {"partitions": {}, "restoring": [], "control": False})
    index: IndexState = IndexState(False, {})
    own_topics: OwnTopics = OwnTopics(-1, frozenset())
    queries: tuple[int, bytes] | None = None
    """`/queries`' body and the count it is as of."""
    waiting: dict[int, asyncio.Future[Any]] = field(default_factory=dict)
    metrics: MetricsReply | None = None
    """The newest metrics' text the worker rendered."""
    rendering: tuple[float, asyncio.Future[Any]] | None = None
    """The metrics asked for ahead of a scrape, and when."""
    last_scrape: float = float("-inf")
    """When the last scrape came."""
    heard: float = field(default_factory=time.monotonic)
    """When the worker last sent anything (it pushes at least every
    `page_feed.HEARTBEAT_EVERY`)."""

    def take(self, message: Pushed | Reply) -> None:
        self.heard = time.monotonic()
        if isinstance(message, Pushed):
            self.health = message.health or self.health
            self.results_health = message.results_health or self.results_health
            self.progress = message.progress or self.progress
            self.index = message.index or self.index
            self.own_topics = message.own_topics or self.own_topics
            return
        waiting = self.waiting.pop(message.ask, None)
        if waiting is not None and not waiting.done():
            waiting.set_result(message)

    def keep(self, text: MetricsReply) -> None:
        """`text` as the metrics to serve, unless those held were rendered later."""
        if self.metrics is None or self.metrics.at < text.at:
            self.metrics = text


def main(conn: Connection, sock: socket.socket, origin: Origin) -> None:
    """The process's entry point (`page_feed` starts it)."""
    log_to_stderr(origin.loglevel)
    asyncio.run(PortProcess(conn, origin).serve(sock))


class PortProcess:
    def __init__(self, conn: Connection, origin: Origin) -> None:
        self.conn, self.origin = conn, origin
        self.pages = Pages()
        self._asks = itertools.count()
        self._index: sqlite3.Connection | None = None
        self._admin: AdminClient | None = None

    async def serve(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        gone = loop.create_future()

        def readable() -> None:
            try:
                while self.conn.poll():
                    self.pages.take(self.conn.recv())
            except (EOFError, OSError):
                loop.remove_reader(self.conn.fileno())
                if not gone.done():
                    gone.set_result(None)

        loop.add_reader(self.conn.fileno(), readable)
        token = self.origin.token
        app = web.Application(middlewares=[json_errors, *([bearer_token(token)] if token else [])])
        app.add_routes([web.get("/queries/{query_id}/results", self.results),
                        web.get("/queries", self.queries),
                        web.get("/progress", self.progress),
                        web.get("/health", self.health),
                        web.get("/health/results", self.pushed("results_health")),
                        web.get("/metrics", self.metrics)])
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.SockSite(runner, sock).start()
        await gone
        await runner.cleanup()

    # asking the worker -----------------------------------------------------------------

    def request(self, page: str, query_id: str = "") -> asyncio.Future[Any]:
        asked = next(self._asks)
        waiting: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pages.waiting[asked] = waiting
        waiting.add_done_callback(lambda _: self.pages.waiting.pop(asked, None))
        self.conn.send(Asked(asked, page, query_id))
        return waiting

    async def ask(self, page: str, query_id: str = "",
                  waiting: asyncio.Future[Any] | None = None) -> Any:
        """The worker's reply, or raises `web.HTTPServiceUnavailable`."""
        try:
            return await asyncio.wait_for(
                asyncio.shield(waiting or self.request(page, query_id)), WORKER_WAIT)
        except (OSError, asyncio.TimeoutError):
            raise web.HTTPServiceUnavailable(
                reason=f"the worker did not answer within {WORKER_WAIT:.0f} s") from None

    # the pages ---------------------------------------------------------------------------

    def pushed(self, name: str) -> Any:
        async def handler(request: web.Request) -> web.Response:
            answer: Answer = getattr(self.pages, name)
            return web.Response(body=answer.body, status=answer.status, content_type=JSON,
                                charset="utf-8")
        return handler

    async def health(self, request: web.Request) -> web.Response:
        """As pushed, unless the worker has been silent for `Origin.silent_after`: a
        worker whose process froze (its interpreter held, a deadlock) must fail its
        liveness probe here as it did when the probe waited on the worker itself."""
        silent = time.monotonic() - self.pages.heard
        if silent > self.origin.silent_after:
            return web.json_response(
                {"status": "unavailable",
                 "reason": f"the worker has not answered its HTTP port for {silent:.0f} s"},
                status=503)
        return await self.pushed("health")(request)

    def _log_ends(self, tps: Iterable[TP]) -> Mapping[TP, int]:
        if self._admin is None:  # at the first `/progress`: most ports are never asked
            self._admin = AdminClient({**watched(dict(self.origin.client_config)),
                                       "log_level": 3})
            client_log().serve(self._admin)
        return log_ends(self._admin, tps)

    async def progress(self, request: web.Request) -> web.Response:
        try:
            report = await asyncio.to_thread(progress_report, self.pages.progress,
                                             self._log_ends)
        except KafkaException as exc:
            return web.json_response({"error": f"cannot ask the log ends: {exc}"}, status=503)
        return web.json_response(report)

    async def queries(self, request: web.Request) -> web.Response:
        held = self.pages.queries
        if held is None or held[0] < self.origin.published.value:
            reply: QueriesReply = await self.ask("queries")
            held = self.pages.queries = (reply.version, queries_body(reply.queries))
        return web.Response(body=held[1], content_type=JSON, charset="utf-8")

    async def metrics(self, request: web.Request) -> web.Response:
        """The last text while it is at most `METRICS_FRESH` old, else one rendered
        after this scrape came. For a scraper that comes back within that time the next
        text is asked for at once, so that it is ready; for one that comes back later,
        as Prometheus does, it would be too old by then: a render for nothing."""
        pages, now = self.pages, time.monotonic()
        often, pages.last_scrape = now - pages.last_scrape < METRICS_FRESH, now
        text = pages.metrics
        if text is None or text.at < now - METRICS_FRESH:
            rendering = pages.rendering
            text = await self.ask("metrics", waiting=rendering[1] if rendering
                                  and rendering[0] >= now - METRICS_FRESH else None)
            pages.keep(text)
        if often and pages.rendering is None:
            try:
                pages.rendering = (time.monotonic(), self.request("metrics"))
            except OSError:
                pass  # the worker is gone, and this process goes with it
            else:
                pages.rendering[1].add_done_callback(self._rendered)
        return web.Response(body=text.body, headers={"Content-Type": self.origin.metrics_type})

    def _rendered(self, done: asyncio.Future[Any]) -> None:
        pages = self.pages
        pages.rendering = None
        if not done.cancelled() and done.exception() is None:
            pages.keep(done.result())

    async def results(self, request: web.Request) -> web.Response:
        asked = page_request(self.origin.names, request)
        if isinstance(asked, web.Response):
            return asked
        own = self.pages.own_topics
        if own.version >= self.origin.published.value:
            body = self._page(asked, asked.query_id in own.queries, registered=False)
            if body is not None:
                return web.Response(body=body, content_type=JSON)
        facts: QueryReply = await self.ask("query", asked.query_id)
        body = self._page(asked, facts.own_topic, facts.registered)
        if body is None:
            return unknown_query(asked.query_id)
        return web.Response(body=body, content_type=JSON)

    def _page(self, asked: PageRequest, own_topic: bool, registered: bool) -> bytes | None:
        """The page, or None when it is empty and the query neither `registered` nor
        indexed."""
        names = self.origin.names
        topic = names.results(asked.query_id) if own_topic else names.all_results
        try:
            if self._index is None:
                self._index = results_table.connect(self.origin.index_path)
            results, positions = results_table.page(self._index, asked.query_id, topic,
                                                    asked.after, asked.limit)
            if not results and not registered \
                    and not results_table.known(self._index, asked.query_id, topic):
                return None
        except sqlite3.Error as exc:
            self._index = None
            raise web.HTTPServiceUnavailable(reason=f"the results index cannot be read: {exc}")
        index = self.pages.index
        return page_body(results, positions,
                         results_table.behind(index.running, index.lag, topic))


def progress_report(published: Mapping[str, Any],
                    log_ends: Callable[[Iterable[TP]], Mapping[TP, int]]) -> dict[str, Any]:
    """`published` (a worker's `progress()`, copied: it is shared) with every log end
    asked now, and `caught_up` per partition and overall: nothing in the log is left to
    process. The ends are asked after the progress was taken, so `caught_up` may come a
    moment late, never early."""
    report = {**published, "partitions": {
        p: {**part, "inputs": {topic: dict(inp) for topic, inp in part["inputs"].items()}}
        for p, part in published["partitions"].items()}}
    tps = [(topic, int(p)) for p, part in report["partitions"].items() for topic in part["inputs"]]
    ends = log_ends(tps) if tps else {}
    everything = not report["restoring"]
    for p, part in report["partitions"].items():
        done = not part["pending_commands"]
        for topic, inp in part["inputs"].items():
            inp["log_end"] = ends[(topic, int(p))]
            inp["lag"] = None if inp["processed"] is None else max(0, inp["log_end"] - inp["processed"])
            done = done and inp["lag"] == 0
        part["caught_up"] = done
        everything = everything and done
    report["caught_up"] = everything
    return report
