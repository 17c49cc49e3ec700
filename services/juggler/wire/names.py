"""Topic and header names of semantics section 7, and the symbols of the command and
status enums, in one place and with no Kafka import.

Why apart from `kafka/topics.py`: the codec (default Schema Registry subjects, the
command and status bodies), the CLI and the worker all need the names, but not the
admin client or the YAML specs.
"""

from __future__ import annotations

import re
from typing import Literal, get_args

Action = Literal["REGISTER", "DEREGISTER"]
"""A command's action: the `Action` enum of `juggler.Command`, symbols in its order."""
Outcome = Literal["ACCEPTED", "REJECTED", "LIVE"]
"""A command's status: the `Status` enum of `juggler.CommandStatus`, in its order."""
ACTIONS: tuple[Action, ...] = get_args(Action)
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)

CONTROL = "juggler.control"
CONTROL_STATUS = "juggler.control.status"
CONTROL_FANOUT = "juggler.control.fanout"
DEADLETTER = "juggler.deadletter"
STATE = "juggler.state"
SETTINGS = "juggler.settings"
"""Per app id, the settings its members' results depend on (`runtime.group_settings`)."""
STREAM_PREFIX = "juggler.stream."
RESULTS = "juggler.results"
"""Every query's results, keyed by entity key, the query id in the record and in the
`juggler-query` header (semantics 7): no topic per query unless one asks for it."""
RESULTS_PREFIX = "juggler.results."
QUERY_HEADER = "juggler-query"
"""The header carrying the query id on every result, so a reader of the shared topic
filters without decoding."""

CONTROL_OFFSET_HEADER = "juggler-control-offset"
"""On a fanout copy of a command, and on the statuses it causes: the offset of the
command on the control topic, which a client waits on."""
BARRIER_HEADER = "juggler-barrier"
"""On a fanout copy of a command: per stream partition of its partition, the log end at
which it takes effect (semantics 4a), as JSON."""

REWRITTEN_HEADER = "juggler-rewritten-from"
"""On a control record the worker wrote again (a registered query's accepted REGISTER,
after a rejected command or a tombstone under its key): the offset of the original,
whose status answers both."""

MAX_TOPIC_LENGTH = 249
"""Kafka's limit on a topic name's length."""

_QUERY_ID = re.compile(r"[A-Za-z0-9._-]+\Z")
_STREAM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class InvalidName(ValueError):
    """A query id or stream name that cannot be part of a topic name; str() says why."""


def validate_query_id(query_id: str) -> str:
    """A query id names its results topic, so it must be made of topic-name characters
    (`[A-Za-z0-9._-]`) and short enough. Returns it unchanged."""
    if not isinstance(query_id, str) or not query_id:
        raise InvalidName(f"query id must be a non-empty string, got {query_id!r}")
    if not _QUERY_ID.match(query_id):
        bad = sorted({c for c in query_id if not re.match(r"[A-Za-z0-9._-]", c)})
        raise InvalidName(f"query id {query_id!r} may only contain letters, digits, '.', "
                          f"'_' and '-' (it names the topic {RESULTS_PREFIX}<id>); "
                          f"not {', '.join(map(repr, bad))}")
    longest = MAX_TOPIC_LENGTH - len(RESULTS_PREFIX)
    if len(query_id) > longest:
        raise InvalidName(f"query id {query_id[:20]!r}... has {len(query_id)} characters; "
                          f"at most {longest} fit in a topic name")
    return query_id


def stream_topic(name: str) -> str:
    """`juggler.stream.<name>` for a stream name (letters, digits, `_`)."""
    if not isinstance(name, str) or not _STREAM.match(name):
        raise InvalidName(f"stream name {name!r} must be letters, digits and '_', not "
                          f"starting with a digit")
    return STREAM_PREFIX + name


def results_topic(query_id: str) -> str:
    """`juggler.results.<query id>`; raises `InvalidName` for an unusable id."""
    return RESULTS_PREFIX + validate_query_id(query_id)


def stream_of_topic(topic: str) -> str | None:
    """The stream a `juggler.stream.<S>` topic carries, or None for any other topic."""
    if topic.startswith(STREAM_PREFIX):
        name = topic[len(STREAM_PREFIX):]
        if _STREAM.match(name):
            return name
    return None
