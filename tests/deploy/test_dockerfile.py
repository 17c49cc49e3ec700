"""The `Dockerfile`, without a Docker engine: its instructions (parsed with
dockerfile-parse), the build context `.dockerignore` leaves (moby's matcher), the
wheel `pip install .` makes from that context, and its HEALTHCHECK command run
against a real HTTP server."""

from __future__ import annotations

import http.server
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path, PurePosixPath

import pytest
from dockerfile_parse import DockerfileParser

from deploy_parsers import ROOT
from juggler.runtime.settings import Settings


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)


def stages() -> dict[str, Stage]:
    parser = DockerfileParser(str(ROOT / "Dockerfile"))
    found: dict[str, Stage] = {}
    current: Stage | None = None
    for base, item in zip(parser.parent_images, (i for i in parser.structure
                                                 if i["instruction"] == "FROM"), strict=True):
        found[item["value"].split()[-1]] = Stage(item["value"].split()[-1], base)
    for item in parser.structure:
        if item["instruction"] == "FROM":
            current = found[item["value"].split()[-1]]
        elif current is not None and item["instruction"] != "COMMENT":
            current.instructions.append((item["instruction"], item["value"]))
    return found


def lineage(name: str) -> list[Stage]:
    """The stage and the stages it is built FROM, outermost first."""
    all_stages = stages()
    chain = [all_stages[name]]
    while chain[0].base in all_stages:
        chain.insert(0, all_stages[chain[0].base])
    return chain


def values(name: str, instruction: str) -> list[str]:
    return [v for stage in lineage(name) for i, v in stage.instructions if i == instruction]


def env(name: str) -> dict[str, str]:
    return dict(pair.split("=", 1) for v in values(name, "ENV") for pair in shlex.split(v))


def copies(name: str) -> Iterator[tuple[list[str], PurePosixPath]]:
    """(sources, absolute destination) of each COPY from the build context (not those
    `--from` another stage)."""
    workdir = PurePosixPath("/")
    for stage in lineage(name):
        for instruction, value in stage.instructions:
            if instruction == "WORKDIR":
                workdir = workdir / value
            elif instruction == "COPY" and not value.startswith("--from"):
                *sources, dest = value.split()
                assert not any(s.startswith("--") for s in sources), value
                yield sources, workdir / dest


def test_targets_the_deployments_use() -> None:
    """compose builds `worker` and `spark`; a plain `docker build .` (and Helm's image)
    gets the last stage, which must be the worker."""
    assert {"worker", "spark"} <= set(stages())
    assert list(stages())[-1] == "worker"
    assert lineage("worker")[0].base == "python:3.11-slim"


@pytest.mark.parametrize("target", ["worker", "spark"])
def test_entrypoint_is_juggler_run_by_a_non_root_user(target: str) -> None:
    assert json.loads(values(target, "ENTRYPOINT")[-1]) == ["juggler"]
    user = values(target, "USER")[-1]
    assert user not in ("root", "0")
    created = [v for v in values(target, "RUN") if "useradd" in v]
    assert created and shlex.split(created[0].split("&&")[0])[-1] == user


def test_worker_serves_http_on_the_settings_port() -> None:
    assert json.loads(values("worker", "CMD")[-1]) == ["worker"]
    assert values("worker", "EXPOSE") == [str(Settings().web_port)]


def test_copy_sources_are_in_the_build_context(build_context: set[str]) -> None:
    sources = [s for target in ("worker", "spark", "native") for group, _ in copies(target)
               for s in group]
    assert sources
    for source in sources:
        path = source.rstrip("/")
        assert path in build_context or any(f.startswith(path + "/") for f in build_context), \
            f"COPY {source}: not in the build context (.dockerignore or missing)"


def test_build_context_leaves_out_the_working_tree(build_context: set[str]) -> None:
    tops = {f.split("/")[0] for f in build_context}
    assert tops == {"pyproject.toml", "README.md", "services", "schemas", "topics"}
    assert not [f for f in build_context if "__pycache__" in f or ".egg-info" in f]


def test_the_rust_core_is_built_in_its_own_stage_and_installed_as_a_wheel(
        build_context: set[str]) -> None:
    """The `native` stage builds services/juggler_native with the Cargo.lock versions;
    the images install only its wheel, so neither carries the Rust toolchain, and the
    build context does not ship cargo's target/ directory."""
    native = stages()["native"]
    assert native.base == "python:3.11-slim"
    build = " ".join(values("native", "RUN"))
    assert "install-rust" in build and "maturin build --release --locked" in build
    assert "--out /wheels" in build
    base = [v for i, v in stages()["base"].instructions if i in ("COPY", "RUN")]
    assert "--from=native /wheels/ /tmp/wheels/" in base
    installs = pip_installs("base")
    assert installs and installs[0][0] == "/tmp/wheels/*.whl", installs
    for target in ("worker", "spark"):
        assert "native" not in [s.name for s in lineage(target)]
    assert not [f for f in build_context if f.startswith("services/juggler_native/target/")]
    assert "services/juggler_native/Cargo.lock" in build_context


def pip_installs(name: str) -> list[list[str]]:
    """The arguments of each `pip install` the RUN instructions of stage `name` (not
    of its bases) run, as the shell splits them (quotes removed)."""
    out = []
    for instruction, value in stages()[name].instructions:
        if instruction == "RUN":
            for command in value.split("&&"):
                words = shlex.split(command)
                if words[:2] == ["pip", "install"]:
                    out.append(words[2:])
    return out


def test_the_image_installs_the_package_with_the_faust_runtime() -> None:
    """`JUGGLER_RUNTIME=faust` (compose, the chart's `config.runtime`) runs the Faust
    app, which imports faust-streaming: the base of both images installs the package
    from the build context with its `faust` extra, the extra pyproject.toml defines."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert any(r.startswith("faust-streaming") for r in extras["faust"])
    packages = [arg for args in pip_installs("base") for arg in args if arg.startswith(".")]
    assert packages == [".[faust]"], packages
    for target in ("worker", "spark"):
        assert "base" in [s.name for s in lineage(target)]


def test_installed_package_finds_the_copied_schemas_and_topics() -> None:
    """A non-editable install cannot find schemas/ and topics/ next to its source, so
    JUGGLER_SCHEMAS and JUGGLER_TOPICS must name where the image copied them."""
    copied = {sources[0].rstrip("/"): dest for sources, dest in copies("worker")}
    image_env = env("worker")
    assert PurePosixPath(image_env["JUGGLER_SCHEMAS"]) == copied["schemas"]
    assert PurePosixPath(image_env["JUGGLER_TOPICS"]) == copied["topics"]


def test_every_juggler_variable_of_the_image_is_read() -> None:
    """`Settings.from_env` ignores variables it has no field for, so a stale one (the
    Faust worker's JUGGLER_DATA_DIR) would be set in every container and do nothing."""
    from juggler.codec.avro import SCHEMAS_ENV
    from juggler.kafka.topics import SPECS_ENV

    read = {f"JUGGLER_{f.name.upper()}" for f in fields(Settings)}
    read |= {SCHEMAS_ENV, SPECS_ENV, "JUGGLER_CACHE"}  # codec, topic specs, juggler.maven
    for target in ("worker", "spark"):
        assert {name for name in env(target) if name.startswith("JUGGLER_")} <= read, target


def test_pip_install_ships_every_data_file_of_the_package(build_context: set[str],
                                                         tmp_path: Path) -> None:
    """The image runs `pip install .` on the build context; every non-Python file of
    the package (grammar, the poms Maven fetches jars with) must be in that wheel."""
    for name in build_context:
        (tmp_path / "ctx" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / "ctx" / name)
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                             "-w", str(tmp_path / "dist"), str(tmp_path / "ctx")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    (wheel,) = (tmp_path / "dist").glob("juggler-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    package = ROOT / "services"
    data_files = {p.relative_to(package).as_posix() for p in (package / "juggler").rglob("*")
                  if p.is_file() and p.suffix not in (".py", ".pyc")}
    assert data_files
    assert data_files - shipped == set(), "missing from [tool.setuptools.package-data]"


class _Health(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.send_response(self.status if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def healthcheck(port: int) -> int:
    """Run the worker's HEALTHCHECK command (shell form) as Docker would."""
    (spec,) = values("worker", "HEALTHCHECK")
    command = spec.split(" CMD ", 1)[1]
    bin_dir = str(Path(sys.executable).parent)
    return subprocess.run(["/bin/sh", "-c", command], capture_output=True, timeout=30,
                          env={"PATH": bin_dir + os.pathsep + os.environ["PATH"],
                               "JUGGLER_WEB_PORT": str(port)}).returncode


@pytest.mark.parametrize("status, healthy", [(200, True), (503, False)])
def test_healthcheck_follows_the_health_endpoint(status: int, healthy: bool) -> None:
    handler = type("Handler", (_Health,), {"status": status})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert (healthcheck(server.server_address[1]) == 0) is healthy
    finally:
        server.shutdown()
        server.server_close()


def test_healthcheck_fails_when_nothing_listens() -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    port = server.server_address[1]
    server.server_close()
    assert healthcheck(port) != 0
