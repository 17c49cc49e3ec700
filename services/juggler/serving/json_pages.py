"""What the two HTTP servers answer alike: the worker's port, a process of its own
(`page_process`), and the Faust runtime's (Faust's web server with `http_api`'s results
page). Kept apart from both and light to import (aiohttp and the cursor format, no
engine), because the port's process starts beside a restoring worker and every import
there is a core taken from the restore.

- `json_errors`: aiohttp's own refusals in the JSON shape of every other error;
- `page_request` and `unknown_query`: a results page's parameters checked and its 404,
  the same answers whichever server reads the index.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from juggler.runtime.topic_names import TopicNames
from juggler.serving.http_auth import Handler
from juggler.serving.results_api import DEFAULT_LIMIT, MAX_LIMIT, BadCursor, decode_cursor


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
