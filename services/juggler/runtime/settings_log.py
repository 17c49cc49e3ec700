"""The settings topic: how the members of one group come to one set of settings
(`group_settings`), with nothing but Kafka.

A member reads the topic to its end. If its group has no claim since the last reset, it
writes its own claim and reads the topic again, past that claim. The group's settings
are the first claim after the last reset: every member that read past its own claim
sees the same first one, however many started at once, because the partition's log is
one order that all of them read. The topic is neither compacted nor trimmed by age
(compaction would keep a key's last record, not its first), and only a group's first
member and `juggler group reset-settings` write to it, so it stays a few records long.

Why not the consumer group's own metadata (Kafka Streams' subscription userdata):
librdkafka's assignors give a client no way to add its own userdata, and a member
refused there would already have joined; a member refused here never subscribes.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from juggler.kafka.delivery import ControlError, produce
from juggler.kafka.client_config import client_config
from juggler.kafka.client_log import stamp
from juggler.kafka.offsets import answered, retriable
from juggler.runtime.group_settings import CLAIM, RESET, Claim, GroupSettings, current, record
from juggler.runtime.readback import Reader, read_partitions
from juggler.runtime.topic_names import TopicNames

log = logging.getLogger(__name__)

RECHECK_EVERY = 10.0
"""Seconds between two reads of the settings topic by a refused worker: once an
operator reset the group's settings, it claims them and joins within this long."""
WRITE_TIMEOUT = 30.0
REFUSED_EXIT = 78
"""The Faust runtime's exit status when its settings differ from its group's
(`EX_CONFIG`: restarting it with the same settings cannot help)."""


class Member(Reader, Protocol):
    """What the settings log uses of a runtime joining its group: what a read needs,
    and its topic names."""

    @property
    def names(self) -> TopicNames: ...


def group_claim(job: Member) -> Claim | None:
    """The group's settings as the settings topic holds them now, or None."""
    topic = (job.names.settings, 0)
    return current(((key, value) for _, key, value, _ in read_partitions(job, [topic])),
                   job.settings.app_id)


def agree(job: Member, mine: GroupSettings, instance: str) -> str | None:
    """None once `mine` are the group's settings (claimed here if the group had none);
    else why this member must stay out of the group. Raises `KafkaException` or
    `ControlError` when the topic cannot be read or written."""
    app_id = job.settings.app_id
    claim = group_claim(job)
    if claim is None:
        produce(job.settings.bootstrap, job.names.settings,
                [(app_id.encode(), record(CLAIM, instance, stamp(time.time()), mine))],
                WRITE_TIMEOUT)
        claim = group_claim(job)
        if claim is None:
            return f"the settings of group {app_id!r} were reset while this worker claimed " \
                   f"them; it reads them again"
    if claim.settings.fingerprint != mine.fingerprint:
        return refusal(app_id, mine, claim)
    log.info("settings %s: those of group %r, as %s set them at %s", mine.fingerprint[:12],
             app_id, "this worker" if claim.instance == instance else claim.instance,
             claim.at)
    return None


def refusal(app_id: str, mine: GroupSettings, claim: Claim) -> str:
    """Why a member with `mine` takes no partition, and what the operator can do."""
    return (f"this worker's settings differ from those of its group {app_id!r} (set by "
            f"{claim.instance} at {claim.at}): {'; '.join(mine.differences(claim.settings))}. "
            f"It takes no partitions: start it with the group's settings, or stop every "
            f"worker of the group and run `juggler group reset-settings --app-id {app_id}`")


def reset(bootstrap: str, prefix: str, app_id: str, timeout: float) -> None:
    """Let the next member to start set the group's settings: refused while the group
    has members (they run with the settings being replaced). Raises `ControlError`."""
    admin = AdminClient(client_config(bootstrap, {"log_level": 0}))
    members = _members(admin, app_id, timeout)
    if members:
        hosts = ", ".join(sorted(f"{m.client_id}@{m.host}" for m in members))
        raise ControlError(f"group {app_id!r} has {len(members)} live member(s) ({hosts}): "
                           f"stop every worker of the group first (a killed worker leaves it "
                           f"after its session timeout)")
    value = record(RESET, f"juggler group reset-settings on {socket.gethostname()}",
                   stamp(time.time()))
    produce(bootstrap, TopicNames(prefix).settings, [(app_id.encode(), value)], timeout)


def _members(admin: AdminClient, app_id: str, timeout: float) -> list[Any]:
    """The group's live members (none for a group that does not exist), asked again
    while the answer is an error asking again can cure (`retriable`: the group
    coordinator still loading after a broker started, or moving)."""
    deadline = time.monotonic() + timeout
    while True:
        future = admin.describe_consumer_groups([app_id], request_timeout=timeout)[app_id]
        try:
            return list(answered(future, timeout, f"describe group {app_id!r}").members)
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return []
            if not retriable(error) or time.monotonic() > deadline:
                raise ControlError(f"cannot describe group {app_id!r}: {error.str()}") from None
        time.sleep(0.2)
