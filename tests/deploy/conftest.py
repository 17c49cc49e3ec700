"""Session fixtures for tests/deploy: the real Compose, Helm and .dockerignore
parsers (deploy_parsers.py), each built once per machine and shared by every test.

Every test here is marked `integration`: on a fresh machine the first Helm build takes
minutes, and `-m "not integration"` must stay the fast engine suite.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from deploy_parsers import ROOT, Compose, Helm, go_tool


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/deploy/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def compose() -> Compose:
    return Compose(go_tool("composecheck"))


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(go_tool("helm", "helm.sh/helm/v3/cmd/helm"), tmp_path_factory.mktemp("helm"))


@pytest.fixture(scope="session")
def build_context() -> set[str]:
    """The files `docker build .` would send, after `.dockerignore`."""
    result = subprocess.run([str(go_tool("buildcontext")), str(ROOT)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout))
