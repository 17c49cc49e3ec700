"""The settings that decide a group's results, and which of them the group holds.

Semantics 4a (docs/semantics.md): results depend only on what the topics hold, never
on how many workers share the partitions. Each task runs with its owner's settings, so
two members of one group (one app id) with different lateness would give partition 0
one meaning and partition 1 another. `GroupSettings` is what a worker's results depend
on, readable and as one fingerprint; the settings topic (`runtime.settings_log`) holds
the group's, and a member whose fingerprint differs takes no partition.

In the fingerprint: the runtime, the partition count the worker runs with, allowed
lateness and retention (semantics 3), what decides when a task goes on without an idle
stream partition (the worker's `max_idle_ms`, `idle_estimate`, `idle_margin_ms`; the
Faust runtime's `reorder_ms`), `max_record_bytes` (a larger result is published without
its row), and every Avro schema's fingerprint with the codec's framing (what a result's
bytes are and which events decode). Not in it: the evaluation `order` (every order
returns the same results, docs/architecture.md), batch and buffer
sizes (semantics 4a), and where a worker listens or how it reaches Kafka.

The group's record on the settings topic: the first claim after the last reset
(`current`), so concurrent starters that read the topic past their own claims agree.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from juggler.codec.avro import Codec
from juggler.runtime.settings import Settings

RUNTIME_SETTINGS = {
    "worker": ("max_idle_ms", "idle_estimate", "idle_margin_ms"),
    "faust": ("reorder_ms",),
}
"""Per runtime, the settings of its arrival order (the other runtime ignores them)."""
ENGINE_SETTINGS = ("allowed_lateness", "retention", "max_record_bytes")

CLAIM, RESET = "claim", "reset"
"""The kinds of record on the settings topic: a member's settings, or an operator's
`juggler group reset-settings` that lets the next member's claim stand."""


@dataclass(frozen=True)
class GroupSettings:
    settings: dict[str, Any]
    """Setting name -> value (the schemas as full name -> fingerprint, hex)."""

    @classmethod
    def of(cls, settings: Settings, partitions: int, codec: Codec) -> GroupSettings:
        values: dict[str, Any] = {"runtime": settings.runtime, "partitions": partitions}
        for name in ENGINE_SETTINGS + RUNTIME_SETTINGS[settings.runtime]:
            values[name] = getattr(settings, name)
        values["framing"] = codec.framing
        values["schemas"] = {name: codec.fingerprint(name).hex() for name in codec.names()}
        return cls(values)

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the settings as canonical JSON: the same in every process, on
        every machine, for the same values."""
        text = json.dumps(self.settings, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def differences(self, group: GroupSettings) -> list[str]:
        """`name: <mine> here, <the group's> in the group` for each setting that
        differs (the schemas as the records whose schema differs); only the runtime
        when that differs, since each runtime has settings of its own."""
        out = []
        names = sorted(set(self.settings) | set(group.settings))
        if self.settings.get("runtime") != group.settings.get("runtime"):
            names = ["runtime"]
        for name in names:
            mine, theirs = self.settings.get(name), group.settings.get(name)
            if mine == theirs:
                continue
            if name == "schemas" and isinstance(mine, dict) and isinstance(theirs, dict):
                records = sorted(r for r in set(mine) | set(theirs)
                                 if mine.get(r) != theirs.get(r))
                out.append(f"schemas: {', '.join(records)} differ")
            else:
                out.append(f"{name}: {_shown(mine)} here, {_shown(theirs)} in the group")
        return out


@dataclass(frozen=True)
class Claim:
    """A member's settings as the settings topic holds them."""

    settings: GroupSettings
    instance: str
    at: str


def record(kind: str, instance: str, at: str, settings: GroupSettings | None = None) -> bytes:
    """A settings topic record's value (JSON: read with any console consumer)."""
    body: dict[str, Any] = {"kind": kind, "instance": instance, "at": at}
    if settings is not None:
        body.update(fingerprint=settings.fingerprint, settings=settings.settings)
    return json.dumps(body, sort_keys=True).encode()


def current(records: Iterable[tuple[bytes | None, bytes | None]], app_id: str
            ) -> Claim | None:
    """The group's settings from the settings topic's (key, value) records in
    log order: the first claim of `app_id` after its last reset, or None. A record
    that is not one of ours is skipped: nobody but an operator's mistake writes there,
    and it must not stop a worker."""
    key = app_id.encode()
    found: Claim | None = None
    for k, value in records:
        if k != key or value is None:
            continue
        try:
            body = json.loads(value)
            kind = body["kind"]
            if kind == RESET:
                found = None
            elif kind == CLAIM and found is None:
                found = Claim(GroupSettings(dict(body["settings"])), str(body["instance"]),
                              str(body["at"]))
        except (ValueError, KeyError, TypeError):
            continue
    return found


def _shown(value: Any) -> str:
    return "(unset)" if value is None else json.dumps(value)
