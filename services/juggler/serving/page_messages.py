"""What the worker (`page_feed`) and its HTTP port's process (`page_process`) send each
other over their pipe: each kind of message one typed, picklable form.

The worker pushes `Pushed` when what it holds changed, and answers an `Asked` with the
`Reply` of its kind; nothing else crosses. `port_main` is the process's entry point.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from ctypes import c_uint64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    import socket
    from multiprocessing.connection import Connection

from juggler.runtime.topic_names import TopicNames


@dataclass(frozen=True)
class Answer:
    """A page as the worker last pushed it."""

    status: int
    body: bytes


@dataclass(frozen=True)
class IndexState:
    """What a results page says of the index (`results_table.behind`)."""

    running: bool
    lag: Mapping[str, int]


@dataclass(frozen=True)
class OwnTopics:
    version: int
    """The `Registered.published` count these are as of."""
    queries: Set[str]
    """The registered queries with their own results topic."""


@dataclass(frozen=True)
class Pushed:
    """What changed since the last push (None: unchanged)."""

    health: Answer | None = None
    results_health: Answer | None = None
    progress: Mapping[str, Any] | None = None
    index: IndexState | None = None
    own_topics: OwnTopics | None = None


@dataclass(frozen=True)
class Asked:
    """What this process needs of the worker now."""

    ask: int
    page: str
    """`metrics`, `queries`, or `query` (one query's facts)."""
    query_id: str = ""


@dataclass(frozen=True)
class MetricsReply:
    ask: int
    body: bytes
    at: float
    """When the worker began to render it (`time.monotonic`, one clock for every
    process of the machine)."""


@dataclass(frozen=True)
class QueriesReply:
    ask: int
    queries: Mapping[str, str]
    version: int
    """The `Registered.published` count they are as of."""


@dataclass(frozen=True)
class QueryReply:
    """One query as the worker's tasks have it now."""

    ask: int
    registered: bool
    own_topic: bool


Reply = Union[MetricsReply, QueriesReply, QueryReply]

STARTING = Answer(503, b'{"status": "starting", "reason": "the worker has not said how it is yet"}')


@dataclass(frozen=True)
class Origin:
    """What this process needs of the worker besides the pipe (picklable: it is sent
    to a process started afresh)."""

    names: TopicNames
    token: str | None
    client_config: Mapping[str, Any]
    """Without `client_log`'s hooks (`unwatched`): this process adds its own."""
    index_path: str
    """The results index's SQLite file."""
    loglevel: str
    metrics_type: str
    """The Content-Type of the worker's metrics."""
    published: c_uint64
    """`Registered.published`, shared with the worker: how current the queries are."""
    silent_after: float
    """Seconds without a word from the worker after which `/health` says 503."""


def port_main(conn: Connection, sock: socket.socket, origin: Origin) -> None:
    """The port's process's entry point. Here and not in `page_process` so that the
    worker, which names it to start the process, does not import the server it never
    runs (aiohttp alone is half a second of its start)."""
    from juggler.serving.page_process import main

    main(conn, sock, origin)
