"""Topic specs from `topics/*.yaml`, applied idempotently (semantics section 7).

Why our own command instead of broker auto-creation: topic settings are part of the
contract (the control topic must be compacted, the stream topics co-partitioned), and
the local broker has auto-creation off so that a missing topic fails loudly.

`apply_topics` creates missing topics and alters the configs a spec names when they
differ; it never deletes a topic and never resets a config the spec does not name. A
different partition count on an existing topic is reported, not changed: adding
partitions re-maps keys to partitions, which breaks co-partitioning and any state
kept per partition.

Spec files (every `*.yaml` in the directory, read in name order) are mappings with:

- `partitions: N` (at most one file): P, the default for keyed data topics;
- `topics:` a list of `{name, partitions, config, replication_factor, doc}`;
- `templates:` the same, for topics made later, with `{query_id}` (a query's own results)
  or `{stream}` (a stream of a deployment's own schemas) in the name.

`partitions` is a number or `P`; `replication_factor` defaults to the broker's
`default.replication.factor`; `config` values are strings (numbers and booleans are
converted the way Kafka writes them).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from juggler.kafka.offsets import log_ends
from juggler.wire.names import (CONTROL, CONTROL_FANOUT, CONTROL_STATUS, DEADLETTER,
                                RESULTS_PREFIX, STREAM_PREFIX, InvalidName, results_topic,
                                stream_of_topic, stream_topic, validate_query_id)

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

__all__ = [
    "TopicSpec", "TopicSpecs", "TopicSpecError", "TopicsError", "ApplyReport",
    "default_specs_dir", "load_specs", "apply_topics", "apply_specs",
    "ensure_results_topic", "current_partitions", "admin_client", "stream_topic", "results_topic",
    "stream_of_topic", "validate_query_id", "InvalidName", "CONTROL", "CONTROL_STATUS",
    "CONTROL_FANOUT", "DEADLETTER", "RESULTS_TEMPLATE", "DEFAULT_PARTITIONS",
]

SPECS_ENV = "JUGGLER_TOPICS"
DEFAULT_PARTITIONS = 4
RESULTS_TEMPLATE = RESULTS_PREFIX + "{query_id}"
STREAM_TEMPLATE = STREAM_PREFIX + "{stream}"
_SPEC_KEYS = {"name", "doc", "partitions", "replication_factor", "config"}


class TopicSpecError(ValueError):
    """A spec file that cannot be used; str() names the file and the problem."""


class TopicsError(RuntimeError):
    """The cluster refused to create or alter a topic."""


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: Mapping[str, str] = field(default_factory=dict)
    replication_factor: int | None = None  # None: the broker's default
    doc: str = ""


@dataclass(frozen=True)
class TopicSpecs:
    """The topics to apply, the templates, and P (the data topics' partition count)."""

    topics: tuple[TopicSpec, ...]
    templates: Mapping[str, TopicSpec]
    partitions: int
    prefix: str = ""
    """Prepended to every name (tests, or several deployments on one cluster)."""

    def with_prefix(self, prefix: str) -> TopicSpecs:
        """The same specs with every topic name under `prefix`."""
        return replace(self, prefix=prefix,
                       topics=tuple(replace(t, name=prefix + t.name) for t in self.topics))

    def results(self, query_id: str, partitions: int | None = None) -> TopicSpec:
        """The spec of `<prefix>juggler.results.<query_id>` from its template."""
        template = self.templates.get(RESULTS_TEMPLATE)
        if template is None:
            raise TopicSpecError(f"no template {RESULTS_TEMPLATE!r} in the topic specs")
        name = self.prefix + results_topic(query_id)
        return replace(template, name=name, partitions=partitions or template.partitions)

    def stream(self, stream: str) -> TopicSpec:
        """The spec of `<prefix>juggler.stream.<stream>` from its template, or with P
        partitions and the broker's config where the specs have no such template."""
        name = self.prefix + stream_topic(stream)
        template = self.templates.get(STREAM_TEMPLATE)
        if template is None:
            return TopicSpec(name, self.partitions)
        return replace(template, name=name)


def default_specs_dir() -> Path:
    """`JUGGLER_TOPICS`, else `topics/` at the root of this package's source tree."""
    env = os.environ.get(SPECS_ENV)
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[3] / "topics"


def load_specs(specs_dir: str | Path | None = None,
               partitions: int | None = None) -> TopicSpecs:
    """Read every `*.yaml` spec file; `partitions` overrides the files' P."""
    directory = Path(specs_dir) if specs_dir else default_specs_dir()
    files = sorted(directory.glob("*.yaml")) if directory.is_dir() else []
    if not files:
        raise TopicSpecError(f"{directory}: no topic spec files (*.yaml)")
    raw: list[tuple[Path, str, dict[str, Any]]] = []
    p_value: int | None = None
    for path in files:
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise TopicSpecError(f"{path}: not valid YAML: {exc}") from None
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise TopicSpecError(f"{path}: expected a mapping with 'topics', 'templates' "
                                 f"or 'partitions'")
        unknown = set(doc) - {"topics", "templates", "partitions"}
        if unknown:
            raise TopicSpecError(f"{path}: unknown key(s) {sorted(unknown)} (allowed: "
                                 f"topics, templates, partitions)")
        if "partitions" in doc:
            if p_value is not None:
                raise TopicSpecError(f"{path}: 'partitions' (P) is set in two files")
            p_value = _count(doc["partitions"], path, "partitions", None)
        for kind in ("topics", "templates"):
            entries = doc.get(kind) or []
            if not isinstance(entries, list):
                raise TopicSpecError(f"{path}: {kind!r} must be a list")
            raw.extend((path, kind, entry) for entry in entries)
    p = partitions if partitions is not None else (p_value or DEFAULT_PARTITIONS)
    if not isinstance(p, int) or isinstance(p, bool) or p < 1:
        raise TopicSpecError(f"partitions (P) must be a positive integer, got {p!r}")
    topics: dict[str, TopicSpec] = {}
    templates: dict[str, TopicSpec] = {}
    for path, kind, entry in raw:
        spec = _spec(entry, path, p)
        target = topics if kind == "topics" else templates
        if spec.name in topics or spec.name in templates:
            raise TopicSpecError(f"{path}: topic {spec.name!r} is specified twice")
        if kind == "topics":
            _check_topic_name(spec.name, path)
        target[spec.name] = spec
    return TopicSpecs(tuple(topics.values()), templates, p)


def _spec(entry: Any, path: Path, p: int) -> TopicSpec:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise TopicSpecError(f"{path}: each topic needs a 'name', got {entry!r}")
    name = entry["name"]
    unknown = set(entry) - _SPEC_KEYS
    if unknown:
        raise TopicSpecError(f"{path}: topic {name}: unknown key(s) {sorted(unknown)} "
                             f"(allowed: {', '.join(sorted(_SPEC_KEYS))})")
    config = entry.get("config") or {}
    if not isinstance(config, dict):
        raise TopicSpecError(f"{path}: topic {name}: 'config' must be a mapping")
    rf = entry.get("replication_factor")
    return TopicSpec(
        name=name,
        partitions=_count(entry.get("partitions", "P"), path, f"topic {name}: partitions", p),
        config={str(k): _config_value(v, path, name, k) for k, v in config.items()},
        replication_factor=None if rf is None else _count(rf, path,
                                                          f"topic {name}: replication_factor",
                                                          None),
        doc=str(entry.get("doc") or ""))


def _count(value: Any, path: Path, what: str, p: int | None) -> int:
    if value == "P" and p is not None:
        return p
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    allowed = "a positive integer" + (" or P" if p is not None else "")
    raise TopicSpecError(f"{path}: {what} must be {allowed}, got {value!r}")


def _config_value(value: Any, path: Path, topic: str, key: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    raise TopicSpecError(f"{path}: topic {topic}: config {key!r} must be a string, "
                         f"number or boolean, got {value!r}")


def _check_topic_name(name: str, path: Path) -> None:
    ok = all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
    if not name or not ok or len(name) > 249 or name in (".", ".."):
        raise TopicSpecError(f"{path}: {name!r} is not a valid Kafka topic name "
                             f"([A-Za-z0-9._-], at most 249 characters)")


# -- applying --------------------------------------------------------------------------


@dataclass
class ApplyReport:
    """What `apply_topics` did. `errors` are refusals by the cluster; `mismatches` are
    differences it deliberately does not fix (partition counts)."""

    created: list[str] = field(default_factory=list)
    altered: dict[str, dict[str, tuple[str | None, str]]] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.altered)

    @property
    def ok(self) -> bool:
        return not (self.mismatches or self.errors)

    def lines(self) -> list[str]:
        out = [f"created {name}" for name in self.created]
        for name, changes in self.altered.items():
            parts = [f"{key} {old if old is not None else '(unset)'} -> {new}"
                     for key, (old, new) in changes.items()]
            out.append(f"altered {name}: {', '.join(parts)}")
        out += [f"mismatch: {text}" for text in self.mismatches]
        out += [f"error: {text}" for text in self.errors]
        if not self.changed:
            out.insert(0, f"no changes ({len(self.unchanged)} topics as specified)")
        elif self.unchanged:
            out.append(f"{len(self.unchanged)} topics already as specified")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def admin_client(bootstrap: str) -> AdminClient:
    from confluent_kafka.admin import AdminClient

    from juggler.kafka.client_config import client_config

    return AdminClient(client_config(bootstrap, {"log_level": 0}))


def _admin(admin_or_bootstrap: AdminClient | str) -> AdminClient:
    return admin_client(admin_or_bootstrap) if isinstance(admin_or_bootstrap, str) \
        else admin_or_bootstrap


def apply_topics(bootstrap: str | AdminClient, specs_dir: str | Path | None = None,
                 partitions: int | None = None, *, prefix: str = "",
                 extra_streams: Iterable[str] = (), timeout: float = 30.0) -> ApplyReport:
    """Make the cluster match the specs in `specs_dir` (see the module doc), every name
    under `prefix`; `extra_streams` get a stream topic like the specs' ones (streams a
    deployment's own schemas add).

    P is `partitions`, else the partition count `juggler.control.fanout` already has
    (so applying again needs no `--partitions`), else the specs' P."""
    admin = _admin(bootstrap)
    specs = load_specs(specs_dir, partitions or current_partitions(
        admin, prefix=prefix, timeout=timeout)).with_prefix(prefix)
    named = {t.name for t in specs.topics}
    extra = [specs.stream(s) for s in extra_streams if prefix + stream_topic(s) not in named]
    return apply_specs(admin, [*specs.topics, *extra], timeout=timeout)


def current_partitions(admin_or_bootstrap: AdminClient | str, *, prefix: str = "",
                       timeout: float = 30.0) -> int | None:
    """P as the cluster was set up: the partition count of `juggler.control.fanout`
    (under `prefix`), or None when that topic does not exist."""
    from confluent_kafka import KafkaException

    fanout_name = prefix + CONTROL_FANOUT
    try:
        metadata = _admin(admin_or_bootstrap).list_topics(fanout_name, timeout=timeout)
    except KafkaException as exc:
        raise TopicsError(f"cannot reach the cluster: {exc}") from None
    fanout = metadata.topics.get(fanout_name)
    if fanout is None or fanout.error is not None or not fanout.partitions:
        return None
    return len(fanout.partitions)


def apply_specs(admin: AdminClient, specs: Iterable[TopicSpec], *,
                timeout: float = 30.0) -> ApplyReport:
    """Create the missing topics among `specs` and align the configs of the others."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    specs = list(specs)
    report = ApplyReport()
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise TopicsError(f"cannot reach the cluster to list topics: {exc}") from None
    existing = {spec.name for spec in specs if spec.name in metadata.topics}
    missing = [spec for spec in specs if spec.name not in existing]
    if missing:
        futures = admin.create_topics(
            [NewTopic(s.name, num_partitions=s.partitions,
                      replication_factor=s.replication_factor or -1, config=dict(s.config))
             for s in missing], operation_timeout=timeout, request_timeout=timeout)
        for spec in missing:
            try:
                futures[spec.name].result(timeout + 5)
                report.created.append(spec.name)
            except KafkaException as exc:
                error = exc.args[0]
                if error.code() == KafkaError.TOPIC_ALREADY_EXISTS:  # created meanwhile
                    existing.add(spec.name)
                else:
                    report.errors.append(f"cannot create {spec.name}: {error.str()}")
        _wait_described(admin, report.created, timeout)
    for spec in specs:
        if spec.name in existing and spec.name in metadata.topics:
            count = len(metadata.topics[spec.name].partitions)
            if count != spec.partitions:
                report.mismatches.append(
                    f"{spec.name} has {count} partitions, the spec says {spec.partitions}; "
                    f"not changed (adding partitions re-maps keys: recreate the topic, or "
                    f"apply with --partitions {count})")
    _align_configs(admin, [s for s in specs if s.name in existing], report, timeout)
    return report


def _wait_described(admin: AdminClient, created: list[str], timeout: float) -> None:
    """Until every created topic has a leader for each partition that answers offsets.

    CreateTopics answers when the controller has recorded the topic, before every broker
    serves it: a client that lists offsets right after got UNKNOWN_TOPIC_OR_PART or
    NOT_LEADER_FOR_PARTITION (a flaky test, and a first `juggler query register` that
    failed). Raises `TopicsError` if they are not served within `timeout` seconds."""
    import time

    deadline = time.monotonic() + timeout
    waiting = set(created)
    while waiting:
        metadata = admin.list_topics(timeout=timeout)
        for name in list(waiting):
            topic = metadata.topics.get(name)
            if topic is not None and topic.error is None and topic.partitions and all(
                    p.leader >= 0 and p.error is None for p in topic.partitions.values()):
                waiting.discard(name)
        if waiting:
            if time.monotonic() > deadline:
                raise TopicsError(f"created but not served within {timeout:g}s: "
                                  f"{', '.join(sorted(waiting))}")
            time.sleep(0.1)
    partitions = [(name, p) for name in created
                  for p in admin.list_topics(name, timeout=timeout).topics[name].partitions]
    log_ends(admin, partitions, max(deadline - time.monotonic(), 1.0))


def _align_configs(admin: AdminClient, specs: list[TopicSpec], report: ApplyReport,
                   timeout: float) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)

    if not specs:
        return
    resources = {s.name: ConfigResource(ResourceType.TOPIC, s.name) for s in specs}
    described = admin.describe_configs(list(resources.values()), request_timeout=timeout)
    to_alter: dict[str, dict[str, tuple[str | None, str]]] = {}
    for spec in specs:
        try:
            current = described[resources[spec.name]].result(timeout + 5)
        except KafkaException as exc:
            report.errors.append(f"cannot read the config of {spec.name}: "
                                 f"{exc.args[0].str()}")
            continue
        diff = {}
        for key, wanted in spec.config.items():
            entry = current.get(key)
            value = entry.value if entry is not None else None
            if value != wanted:
                diff[key] = (value, wanted)
        if diff:
            to_alter[spec.name] = diff
        else:
            report.unchanged.append(spec.name)
    if not to_alter:
        return
    alter = [ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry(key, new, incremental_operation=AlterConfigOpType.SET)
        for key, (_, new) in diff.items()]) for name, diff in to_alter.items()]
    futures = admin.incremental_alter_configs(alter, request_timeout=timeout)
    for resource, future in futures.items():
        try:
            future.result(timeout + 5)
            report.altered[resource.name] = to_alter[resource.name]
        except KafkaException as exc:
            report.errors.append(f"cannot alter the config of {resource.name}: "
                                 f"{exc.args[0].str()}")


def ensure_results_topic(admin_or_bootstrap: AdminClient | str, query_id: str, *,
                         partitions: int | None = None,
                         specs_dir: str | Path | None = None, prefix: str = "",
                         timeout: float = 30.0) -> str:
    """Create `<prefix>juggler.results.<query_id>` from its template if it is missing;
    return its name. Idempotent.

    Partitions: `partitions`, else the partition count of `juggler.control.fanout` (P
    as the cluster was actually set up, even with `--partitions`), else the specs' P.
    Raises `InvalidName` for an unusable id and `TopicsError` if the cluster refuses.
    """
    admin = _admin(admin_or_bootstrap)
    if partitions is None:
        partitions = current_partitions(admin, prefix=prefix, timeout=timeout)
    spec = load_specs(specs_dir).with_prefix(prefix).results(query_id, partitions)
    report = apply_specs(admin, [spec], timeout=timeout)
    if report.errors:
        raise TopicsError("; ".join(report.errors))
    return spec.name
