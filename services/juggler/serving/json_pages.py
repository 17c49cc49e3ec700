"""What the worker's two HTTP servers answer alike: its port's own process
(`page_process`) and the server inside the worker (`http_api`). Kept apart from both and
light to import (aiohttp and the cursor format, no engine), because the port's process
starts beside a restoring worker and every import there is a core taken from the
restore.

- `json_errors`: aiohttp's own refusals in the JSON shape of every other error;
- `page_request` and `unknown_query`: a results page's parameters checked and its 404,
  the same answers whichever server reads the index;
- `progress_report`: the published progress with the log ends asked now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from juggler.runtime.topic_names import TopicNames
from juggler.serving.http_auth import Handler
from juggler.serving.results_api import DEFAULT_LIMIT, MAX_LIMIT, BadCursor, decode_cursor

TP = tuple[str, int]


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


@dataclass(frozen=True)
class PageRequest:
    """`GET /queries/<id>/results?after=&limit=`, checked."""

    query_id: str
    cursor: str | None
    """`after` as given (it decodes to `after`)."""
    after: dict[int, int]
    limit: int


def page_request(names: TopicNames, request: web.Request) -> PageRequest | web.Response:
    """The request's parameters, or the 400 that says which one is wrong."""
    query_id = request.match_info["query_id"]
    problem = names.query_id_problem(query_id)
    if problem:
        return web.json_response({"error": problem}, status=400)
    cursor = request.query.get("after")
    try:
        after = decode_cursor(cursor)
        limit = int(request.query.get("limit", DEFAULT_LIMIT))
        if not 1 <= limit <= MAX_LIMIT:
            raise ValueError
    except BadCursor as exc:
        return web.json_response({"error": str(exc)}, status=400)
    except ValueError:
        return web.json_response(
            {"error": f"limit must be an integer from 1 to {MAX_LIMIT}"}, status=400)
    return PageRequest(query_id, cursor, after, limit)


def unknown_query(query_id: str) -> web.Response:
    """A results page's 404: the query is neither registered nor indexed."""
    return web.json_response({"error": f"no query {query_id!r} is registered here and no "
                                       f"result of it is kept"}, status=404)


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
