"""The real parsers of the deployment files, built once from `tools/`.

There is no Docker engine or Kubernetes cluster here, so the files are checked by
what Docker Compose and Helm themselves run before they do anything: compose-go
loads `docker-compose.yml`, Helm renders and lints the chart, moby's pattern matcher
applies `.dockerignore`. They are Go programs; each is built once into
`$JUGGLER_CACHE/go-tools` (default `~/.cache/juggler/go-tools`) under a hash of its
sources and the Go version, and rebuilt only when those change.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from juggler.kafka.broker import cache_root

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools"
CHART = ROOT / "helm" / "juggler"
GO_FALLBACK = Path("/usr/local/go/bin/go")
BUILD_TIMEOUT_S = 1200
"""The first Helm build compiles much of Kubernetes' client code: minutes on 2 cores."""


def _go() -> str:
    found = shutil.which("go") or (str(GO_FALLBACK) if GO_FALLBACK.exists() else None)
    if found is None:
        pytest.skip("Go is not installed (needed to build tools/: the Compose and Helm "
                    "parsers these tests run)")
    return found


def _source_hash(go: str, tool_dir: Path) -> str:
    digest = hashlib.sha256(subprocess.run([go, "version"], capture_output=True, text=True,
                                           check=True).stdout.encode())
    for path in sorted(p for p in tool_dir.iterdir() if p.suffix in (".go", ".mod", ".sum")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Another pytest session may be building the same tool: wait for it."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def go_tool(name: str, package: str = ".") -> Path:
    """The binary of `tools/<name>` (its `package`), built with the go.sum-pinned
    module versions (`-mod=readonly`: a go.mod that needs changing fails the build)."""
    go = _go()
    tool_dir = TOOLS / name
    cache = cache_root() / "go-tools"
    cache.mkdir(parents=True, exist_ok=True)
    binary = cache / f"{name}-{_source_hash(go, tool_dir)}"
    with _locked(cache / f"{name}.lock"):
        if not binary.exists():
            partial = binary.with_suffix(".partial")
            env = {**os.environ, "GOFLAGS": "-mod=readonly -buildvcs=false"}
            result = subprocess.run([go, "build", "-o", str(partial), package], cwd=tool_dir,
                                    env=env, capture_output=True, text=True,
                                    timeout=BUILD_TIMEOUT_S)
            if result.returncode != 0:
                pytest.fail(f"building tools/{name} failed:\n{result.stderr}")
            partial.rename(binary)
    return binary


def clean_env(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal environment, so a developer's own KAFKA_PORT or HELM_* settings
    cannot change what the tests see."""
    env = {key: os.environ[key] for key in ("PATH", "HOME") if key in os.environ}
    env.update(overrides or {})
    return env


class Compose:
    """`docker-compose.yml` as Docker Compose resolves it."""

    def __init__(self, binary: Path) -> None:
        self.binary = binary

    REQUIRED = {"GRAFANA_ADMIN_PASSWORD": "a-password-of-the-operators-choice"}
    """What the file refuses to start without (no default passwords)."""

    def load(self, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), "-project-directory", str(ROOT), str(ROOT / "docker-compose.yml")],
            env=clean_env(env), capture_output=True, text=True, timeout=60)

    def model(self, env: Mapping[str, str] | None = None) -> dict[str, Any]:
        result = self.load({**self.REQUIRED, **(env or {})})
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)


class Helm:
    """The real `helm` CLI, with its caches and config kept in a temporary home."""

    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        self.env = clean_env({f"HELM_{kind}_HOME": str(home / kind.lower())
                              for kind in ("CACHE", "CONFIG", "DATA")})

    def run(self, *args: str, values: Mapping[str, Any] | None = None,
            tmp_path: Path | None = None) -> subprocess.CompletedProcess[str]:
        extra: list[str] = []
        if values is not None:
            assert tmp_path is not None, "values need a tmp_path to be written to"
            values_file = tmp_path / "values.yaml"
            values_file.write_text(yaml.safe_dump(dict(values)))
            extra = ["--values", str(values_file)]
        return subprocess.run([str(self.binary), *args, *extra], env=self.env,
                              capture_output=True, text=True, timeout=120)

    def template(self, values: Mapping[str, Any] | None = None,
                 tmp_path: Path | None = None) -> list[dict[str, Any]]:
        """Every manifest `helm template` renders, hooks included, parsed."""
        result = self.run("template", "demo", str(CHART), "--namespace", "streams",
                          values=values, tmp_path=tmp_path)
        assert result.returncode == 0, result.stderr
        return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def grafana_dashboards() -> list[Path]:
    """The dashboards of `deploy/grafana/dashboards`, which another part of the project
    provides: skip while that directory does not exist, and fail once it exists but
    holds no dashboard."""
    directory = ROOT / "deploy" / "grafana" / "dashboards"
    if not directory.is_dir():
        pytest.skip(f"{directory.relative_to(ROOT)} does not exist yet")
    files = sorted(directory.glob("*.json"))
    assert files, f"{directory.relative_to(ROOT)} holds no *.json dashboard"
    return files


def parse_juggler_args(args: list[str]) -> click.Context:
    """Parse `juggler ARGS` the way the container's entrypoint would, without running
    the command: an unknown subcommand or option, or a bad value, raises click's
    UsageError/BadParameter."""
    from juggler.cli import main

    command: click.Command = main
    rest = list(args)
    while isinstance(command, click.Group):
        name, rest = rest[0], rest[1:]
        sub = command.get_command(click.Context(command), name)
        if sub is None:
            raise click.UsageError(f"no such command {name!r} in {command.name!r}")
        command = sub
    return command.make_context(command.name, rest)
