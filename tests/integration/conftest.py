"""Fixtures for tests that need a real Kafka.

``kafka_bootstrap`` uses ``JUGGLER_BOOTSTRAP`` when set (an existing cluster, e.g. in
CI or a long-running ``juggler broker``); otherwise one LocalBroker is started for the
whole session, because starting a JVM broker costs seconds.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    existing = os.environ.get("JUGGLER_BOOTSTRAP")
    if existing:
        yield existing
        return
    from juggler.kafka.broker import LocalBroker

    data_dir: Path = tmp_path_factory.mktemp("kafka")
    broker = LocalBroker(data_dir)
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()
