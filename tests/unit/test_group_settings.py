"""The fingerprint a worker group agrees on (`service.group_settings`): which settings
change it, that it is the same in every process, and which record of the settings
topic is the group's (no Kafka)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from juggler.codec.avro import Codec, default_schemas_dir
from juggler.runtime.group_settings import CLAIM, RESET, GroupSettings, current, record
from juggler.runtime.settings import Settings

CODEC = Codec()


def _settings(partitions: int = 4, **values: object) -> GroupSettings:
    return GroupSettings.of(Settings(**values).checked(), partitions, CODEC)


BASE = _settings()


@pytest.mark.parametrize("values", [
    {"allowed_lateness": 60_000}, {"retention": 1000}, {"max_idle_ms": 100},
    {"idle_estimate": False}, {"idle_margin_ms": 5}, {"max_record_bytes": 500_000},
    {"runtime": "faust"},
])
def test_a_setting_that_changes_results_changes_the_fingerprint(values: dict) -> None:
    changed = _settings(**values)
    assert changed.fingerprint != BASE.fingerprint
    name = next(iter(values))
    assert any(line.startswith(f"{name}: ") for line in changed.differences(BASE)), \
        changed.differences(BASE)


def test_the_partition_count_is_in_the_fingerprint() -> None:
    assert _settings(partitions=2).differences(BASE) == ["partitions: 2 here, 4 in the group"]


@pytest.mark.parametrize("values", [
    {"order": "AJW"}, {"batch_max": 10}, {"buffer_max": 10}, {"web_port": 1},
    {"web_host": "0.0.0.0"}, {"instance_id": "pod-3"}, {"bootstrap": "kafka:9092"},
    {"session_timeout": 6.0}, {"web_token": "t"}, {"loglevel": "debug"},
    {"reorder_ms": 5},  # the Faust runtime's, not the worker's
    {"results_trim_interval": 1.0}, {"replication_factor": 3},
])
def test_a_setting_that_leaves_results_alone_leaves_the_fingerprint(values: dict) -> None:
    assert _settings(**values).fingerprint == BASE.fingerprint


def test_the_faust_runtime_compares_its_reorder_buffer_not_the_idle_wait() -> None:
    faust = _settings(runtime="faust")
    assert faust.differences(BASE) == ['runtime: "faust" here, "worker" in the group']
    assert _settings(runtime="faust", reorder_ms=5).fingerprint != faust.fingerprint
    assert _settings(runtime="faust", max_idle_ms=5).fingerprint == faust.fingerprint


def test_a_changed_schema_changes_the_fingerprint_and_is_named(tmp_path: Path) -> None:
    schemas = tmp_path / "schemas"
    shutil.copytree(default_schemas_dir(), schemas)
    b = json.loads((schemas / "B.avsc").read_text())
    b["fields"].append({"name": "extra", "type": "double", "default": 0.0})
    (schemas / "B.avsc").write_text(json.dumps(b))
    changed = GroupSettings.of(Settings(), 4, Codec(schemas))
    assert changed.fingerprint != BASE.fingerprint
    [line] = changed.differences(BASE)
    assert line.startswith("schemas: ") and line.endswith(" differ") and "B" in line


def test_the_fingerprint_is_the_same_in_another_process() -> None:
    script = ("from juggler.codec.avro import Codec\n"
              "from juggler.runtime.group_settings import GroupSettings\n"
              "from juggler.runtime.settings import Settings\n"
              "print(GroupSettings.of(Settings(allowed_lateness=7), 4, Codec()).fingerprint)")
    fingerprints = {
        subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                       text=True, env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip()
        for seed in ("1", "2")}
    assert fingerprints == {_settings(allowed_lateness=7).fingerprint}


def _claim(settings: GroupSettings, instance: str) -> bytes:
    return record(CLAIM, instance, "2026-11-27T16:00:00+00:00", settings)


def test_the_first_claim_after_the_last_reset_is_the_groups() -> None:
    late = _settings(allowed_lateness=60_000)
    log = [(b"other-app", _claim(late, "x")),
           (b"app", b"not json"),
           (b"app", None),
           (b"app", _claim(BASE, "first")),
           (b"app", _claim(late, "second")),  # a concurrent starter: the first stands
           ]
    claim = current(log, "app")
    assert claim is not None and (claim.instance, claim.settings) == ("first", BASE)
    assert claim.settings.fingerprint == BASE.fingerprint
    log += [(b"app", record(RESET, "operator", "2026-11-27T17:00:00+00:00"))]
    assert current(log, "app") is None
    log += [(b"app", _claim(late, "third")), (b"app", _claim(BASE, "fourth"))]
    claim = current(log, "app")
    assert claim is not None and claim.instance == "third" and claim.settings == late
    assert current(log, "nobody") is None
