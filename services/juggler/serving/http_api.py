"""A results page answered inside a runtime's own process: the Faust runtime's, on
Faust's web server (`faust/app.py`). The worker's port is a process of its own
(`page_process`), which reads the same index with the same checks.

A results page is read from the index on the event loop itself, not in a thread: a
page's SQLite read costs less than the hop to a thread would, and the page is built by
concatenation (`results_api.page_body`) (docs/worker.md, "HTTP").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from juggler.runtime.pages import JobView
from juggler.runtime.results_store import ResultsStore
from juggler.serving.json_pages import page_request, unknown_query
from juggler.serving.results_api import page_body

Page = Callable[[web.Request], Awaitable[web.Response]]

NO_INDEX = "the results index has not started"


def results_handler(worker: JobView) -> Page:
    """`GET /queries/<id>/results`: it reads `names`, `own_topic`, `results_store` and
    `restored_tasks` of `worker`."""
    async def handler(request: web.Request) -> web.Response:
        asked = page_request(worker.names, request)
        if isinstance(asked, web.Response):
            return asked
        query_id = asked.query_id
        names = worker.names
        topic = names.results(query_id) if worker.own_topic(query_id) else names.all_results
        store = _store(worker)
        results, positions = store.page(query_id, topic, asked.after, asked.limit)
        if not results and not _known(worker, store, query_id, topic):
            return unknown_query(query_id)
        body = page_body(results, positions, store.behind(topic))
        return web.Response(body=body, content_type="application/json")
    return handler


def _store(worker: JobView) -> ResultsStore:
    """The runtime's results index: started before the runtime serves its pages, so a
    page that finds none answers 503, as while the index is failed."""
    store = worker.results_store
    if store is None:
        raise web.HTTPServiceUnavailable(reason=NO_INDEX)
    return store


def _known(worker: JobView, store: ResultsStore, query_id: str, topic: str) -> bool:
    """Whether the query is registered in a task here or has a result indexed on
    `topic`. A membership test of a task's dict is atomic, so it is read as it
    stands, mid-round or not."""
    return any(query_id in t.texts for t in worker.restored_tasks()) \
        or store.known(query_id, topic)
