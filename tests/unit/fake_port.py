"""What the worker's HTTP port (`serving.page_feed.serve_apart`) reads of a worker, for
the tests that serve a fake one: a results index file with one result of q1, and the
rest of a restored worker's reads."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from juggler.runtime import results_table
from juggler.runtime.pages import Registered
from juggler.runtime.topic_names import TopicNames
from juggler.serving.page_feed import Server, serve_apart

RESULT = '{"query": "q1", "n": 1}'


def port_reads(index: Path, **settings: Any) -> dict[str, Any]:
    """The attributes a fake worker needs for its port (besides its pages, health and
    metrics), its results index created at `index`."""
    conn = results_table.connect(str(index))
    conn.executescript(results_table.SCHEMA)
    results_table.append(conn, [("q1", "juggler.results", 0, 0, RESULT)],
                         {("juggler.results", 0): 1})
    conn.close()
    store = SimpleNamespace(path=str(index), health=lambda: {"status": "ok", "lag": 0},
                            running=lambda: True, lag={"juggler.results": 0}, failures=0)
    return {"names": TopicNames(), "client_config": {"bootstrap.servers": "127.0.0.1:9"},
            "settings": SimpleNamespace(**{"app_id": "a", "loglevel": "warning", **settings}),
            "results_store": store, "registered": Registered(),
            "own_topic": lambda query_id: False,
            "restored_tasks": lambda: [SimpleNamespace(texts={"q1": "SELECT * FROM B"})]}


def serve_fake(worker: SimpleNamespace, token: str | None = None, **options: Any) -> Server:
    """`worker`'s port on 127.0.0.1, once its `/health` answers 200 (its process has
    started and has the worker's first push)."""
    server = serve_apart(worker, "127.0.0.1", 0, token, **options)  # type: ignore[arg-type]
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/health", timeout=60):
                return server
        except OSError:
            assert time.monotonic() < deadline, "the port's /health never answered 200"
            time.sleep(0.05)
