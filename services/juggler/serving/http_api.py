"""The worker's HTTP port: results by cursor, registered queries, progress, health and
Prometheus metrics. aiohttp on its own thread and event loop, so a slow client never
holds up the processing loop. No handler reads the live tasks mid-round: `/queries`,
`/progress` and `/metrics` read the snapshot its loop published at the end of its last
round (`worker.pages`, see `pages`), `/health` and the results page what can be read
atomically, so no request waits for a round.

A results page is read from the index on the event loop itself, not in a thread: a
page's SQLite read costs less than the hop to a thread would, and the page is built by
concatenation (`results_api.page_body`) (docs/worker.md, "HTTP").

- `GET /queries/<id>/results?after=<cursor>&limit=N`: see `results_api`;
- `GET /queries`: the queries registered in this worker's tasks;
- `GET /progress`: per owned partition and stream partition, the next offset to
  process against the log end (asked now), and whether everything in the log is done;
- `GET /health`: 200 once the assigned partitions are restored, 503 before, and 503
  with the reason while the worker cannot commit or its settings differ from its
  group's (`JugglerWorker.unavailable`); its
  `results_index` says how the results index is (`results_health`);
- `GET /health/results`: 503 while the results index is failed;
- `GET /metrics`: Prometheus text.

With a token, every page but `/health` and `/metrics` requires it (`http_auth`).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from confluent_kafka import KafkaException

from juggler.kafka.offsets import log_ends
from juggler.serving.http_auth import Handler, bearer_token
from juggler.runtime.metrics import CONTENT_TYPE
from juggler.runtime.pages import JobView, WorkerView, listed
from juggler.runtime.results_store import ResultsStore
from juggler.serving.results_api import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    BadCursor,
    decode_cursor,
    page_body,
)


Page = Callable[[web.Request], Awaitable[web.Response]]


@dataclass
class Server:
    port: int
    thread: threading.Thread


def serve(worker: WorkerView, host: str, port: int, token: str | None = None) -> Server:
    """Start the HTTP server on a daemon thread; returns once it listens."""
    app = web.Application(middlewares=[json_errors, *([bearer_token(token)] if token else [])])
    app.add_routes([web.get("/queries/{query_id}/results", results_handler(worker)),
                    web.get("/queries", _queries(worker)),
                    web.get("/progress", _progress(worker)),
                    web.get("/health", _health(worker)),
                    web.get("/health/results", results_health(worker)),
                    web.get("/metrics", _metrics(worker))])
    started = threading.Event()
    bound: list[int] = []

    def run() -> None:
        loop = asyncio.new_event_loop()
        runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, host, port)
        loop.run_until_complete(site.start())
        bound.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, name="juggler-http", daemon=True)
    thread.start()
    if not started.wait(30):
        raise RuntimeError(f"the HTTP server did not start on {host}:{port}")
    return Server(bound[0], thread)


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own answers (no such page, a method other than GET) as the JSON error
    every other page gives, so a client reads one shape of error from this port."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return web.json_response({"error": exc.reason}, status=exc.status,
                                 headers={k: v for k, v in exc.headers.items()
                                          if k in ("Allow",)})


def results_handler(worker: JobView) -> Page:
    """`GET /queries/<id>/results`, for either runtime: it reads `names`, `own_topic`,
    `results_store` and `restored_tasks` of `worker`."""
    async def handler(request: web.Request) -> web.Response:
        query_id = request.match_info["query_id"]
        problem = worker.names.query_id_problem(query_id)
        if problem:
            return web.json_response({"error": problem}, status=400)
        try:
            after = decode_cursor(request.query.get("after"))
            limit = int(request.query.get("limit", DEFAULT_LIMIT))
            if not 1 <= limit <= MAX_LIMIT:
                raise ValueError
        except BadCursor as exc:
            return web.json_response({"error": str(exc)}, status=400)
        except ValueError:
            return web.json_response(
                {"error": f"limit must be an integer from 1 to {MAX_LIMIT}"}, status=400)
        names = worker.names
        topic = names.results(query_id) if worker.own_topic(query_id) else names.all_results
        store = _store(worker)
        results, positions = store.page(query_id, topic, after, limit)
        if not results and not _known(worker, store, query_id, topic):
            return web.json_response({"error": f"no query {query_id!r} is registered here "
                                               f"and no result of it is kept"}, status=404)
        body = page_body(results, positions, store.behind(topic))
        return web.Response(body=body, content_type="application/json")
    return handler


def _store(worker: JobView) -> ResultsStore:
    """The runtime's results index: started before the runtime serves its pages, so a
    page that finds none answers 503, as while the index is failed."""
    store = worker.results_store
    if store is None:
        raise web.HTTPServiceUnavailable(reason="the results index has not started")
    return store


def _known(worker: JobView, store: ResultsStore, query_id: str, topic: str) -> bool:
    """Whether the query is registered in a task here or has a result indexed on
    `topic`. A membership test of a task's dict is atomic, so it is read as it
    stands, mid-round or not."""
    return any(query_id in t.texts for t in worker.restored_tasks()) \
        or store.known(query_id, topic)


def _queries(worker: WorkerView) -> Page:
    """The body rendered once per list of registered queries the loop took: a snapshot
    is published every round, but it carries the same `queries` object until they are
    taken again (`pages.Registered`)."""
    rendered: list[tuple[Mapping[str, str], bytes]] = []

    async def handler(request: web.Request) -> web.Response:
        queries = worker.pages.queries
        if not rendered or rendered[-1][0] is not queries:
            rendered[:] = [(queries, json.dumps({"queries": listed(queries)}).encode())]
        return web.Response(body=rendered[-1][1], content_type="application/json",
                            charset="utf-8")
    return handler


def _progress(worker: WorkerView) -> Page:
    """503 while the cluster does not answer: the log ends are asked of it."""
    async def handler(request: web.Request) -> web.Response:
        try:
            return web.json_response(await asyncio.to_thread(progress, worker))
        except KafkaException as exc:
            return web.json_response({"error": f"cannot ask the log ends: {exc}"}, status=503)
    return handler


def progress(worker: WorkerView) -> dict[str, Any]:
    """The published `worker.progress()` (copied: it is shared) with every log end asked
    now, and `caught_up` per partition and overall: nothing in the log is left to
    process."""
    published = worker.pages.progress
    report = {**published, "partitions": {
        p: {**part, "inputs": {topic: dict(inp) for topic, inp in part["inputs"].items()}}
        for p, part in published["partitions"].items()}}
    tps = [(topic, int(p)) for p, part in report["partitions"].items() for topic in part["inputs"]]
    ends = log_ends(worker.admin, tps) if tps else {}
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


def _health(worker: WorkerView) -> Page:
    """Read as it stands (copying the tasks' keys is one atomic step), never waiting
    for the loop: a round stuck behind a transaction that cannot commit is when
    `/health` must answer why."""
    async def handler(request: web.Request) -> web.Response:
        body = {"app": worker.settings.app_id, "partitions": sorted(list(worker.tasks)),
                "results_index": _store(worker).health()}
        reason = worker.unavailable()
        if reason is not None:
            return web.json_response({"status": "unavailable", "reason": reason, **body},
                                     status=503)
        ready = worker.ready
        return web.json_response({"status": "ok" if ready else "starting", **body},
                                 status=200 if ready else 503)
    return handler


def results_health(worker: WorkerView) -> Page:
    """`GET /health/results`: the results index alone, 200 while
    its indexer runs (behind by a moment or not) and 503 while it is failed, until a
    restarted one caught up. Apart from `/health` because the worker's processing is
    fine meanwhile: a liveness probe must not restart it for this, while a readiness
    probe of a Service that serves the results API may take it out (every worker indexes
    the same topics, so another one answers in full)."""
    async def handler(request: web.Request) -> web.Response:
        index = _store(worker).health()
        return web.json_response(index, status=503 if index["status"] == "failed" else 200)
    return handler


def _metrics(worker: WorkerView) -> Page:
    """The text rendered for the current snapshot if there is one, answered from the
    event loop; else rendered on a thread, so that a render never holds up `/health`."""
    async def handler(request: web.Request) -> web.Response:
        body = worker.metrics.cached() or await asyncio.to_thread(worker.metrics.expose)
        return web.Response(body=body, content_type=CONTENT_TYPE)
    return handler
