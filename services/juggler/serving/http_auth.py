"""The worker's HTTP port behind an optional bearer token.

Why: the port serves every registered query's text and results; on a shared network
that is everyone's data. With `web_token` set, a request must carry
`Authorization: Bearer <token>` or gets 401. `/health` and `/metrics` stay open:
Kubernetes probes and Prometheus scrapers (pod annotations) cannot be given a secret
header, and neither page carries query text or results.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

OPEN_PATHS = frozenset({"/health", "/health/results", "/metrics"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def bearer_token(token: str) -> Middleware:
    """An aiohttp middleware refusing requests without the token (compared in
    constant time, so its bytes cannot be guessed one by one from response times)."""
    expected = f"Bearer {token}".encode()

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        # aiohttp keeps a header's non-UTF-8 bytes as surrogates: encoded back as they came
        given = request.headers.get("Authorization", "").encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, expected):
            return web.json_response(
                {"error": "this worker requires `Authorization: Bearer <token>` "
                          "(its JUGGLER_WEB_TOKEN)"},
                status=401, headers={"WWW-Authenticate": 'Bearer realm="juggler"'})
        return await handler(request)

    return check
