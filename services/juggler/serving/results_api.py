"""Results for clients that come and go (PSoup): `GET /queries/<id>/results?after=`.

A results topic is the result store of record: it is retained, only committed
transactions are visible to a read_committed reader, and a position in it never
changes. Every query is served from the worker's index of the topic it publishes to
(`results_store`): the shared `juggler.results`, or its own topic if it asked for one;
a consumer per request would pay a connection and a fetch for every page.

A cursor is opaque to clients: URL-safe base64 of the next offset to read per
partition. No `after` means from the beginning (the oldest retained result). A client
that stores `next` and comes back later gets every result committed since, once: the
cursor only advances past results that were returned. Served by `http_api`; this
module is the page's format.
"""

from __future__ import annotations

import base64
import binascii
import json

DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
MAX_PARTITION = 2**31
MAX_OFFSET = 2**63
"""A cursor names Kafka partitions (int32) and offsets (int64); a larger number is no
position the index can hold (SQLite integers are 64-bit too), so it is a bad cursor."""


class BadCursor(ValueError):
    pass


def encode_cursor(offsets: dict[int, int]) -> str:
    text = ",".join(f"{p}:{o}" for p, o in sorted(offsets.items()))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def page_body(results: list[str], positions: dict[int, int], behind: bool | None = None
              ) -> bytes:
    """`{"results": [...], "next": "<cursor>", "behind": false}` from results already
    encoded as JSON texts, byte for byte what `json.dumps` of the decoded page gives:
    decoding each result and encoding the page again was most of a request's cost.
    `behind`: the index had not yet indexed everything
    committed to the topic, or its indexer failed, so a client at the end of the pages
    has not caught up with the topic; left out when None."""
    tail = "" if behind is None else ', "behind": ' + json.dumps(behind)
    return ('{"results": [' + ", ".join(results) + '], "next": '
            + json.dumps(encode_cursor(positions)) + tail + "}").encode()


def decode_cursor(cursor: str | None) -> dict[int, int]:
    if not cursor:
        return {}
    try:
        text = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_",
                                validate=True).decode()
        offsets = {}
        for part in filter(None, text.split(",")):
            p, o = part.split(":")
            offsets[int(p)] = int(o)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadCursor(f"not a cursor returned by this API: {cursor[:40]!r}") from None
    if any(not 0 <= p < MAX_PARTITION or not 0 <= o < MAX_OFFSET for p, o in offsets.items()):
        raise BadCursor(f"not a cursor returned by this API: {cursor[:40]!r}")
    return offsets
