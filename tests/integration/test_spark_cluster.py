"""`juggler spark backfill` on a standalone Spark cluster, as a user runs it there.

A master and a worker are started as processes of their own with pyspark's
`spark-class` (no download), and the jobs run as `juggler` commands with
`JUGGLER_SPARK_MASTER=spark://...`. The executors' Python is a bare virtual
environment in which juggler is not importable, so the shared job can only run if
the session shipped the package and its native operator to the executors.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_spark_jobs import ICU, canonical, eval_results

pytestmark = [pytest.mark.integration, pytest.mark.slow]

READY_WITHIN = 180.0
"""Seconds a master or worker may take to come up on a loaded machine."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def spark_class(log: Path, *args: str) -> subprocess.Popen[bytes]:
    """A Spark daemon from pyspark's own `bin/spark-class`, in its own process group."""
    import pyspark

    script = Path(pyspark.__file__).parent / "bin" / "spark-class"
    with open(log, "wb") as out:
        return subprocess.Popen([str(script), *args], stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
                                start_new_session=True)


def wait_for(condition: Callable[[], bool], what: str, logs: list[Path]) -> None:
    deadline = time.monotonic() + READY_WITHIN
    while not condition():
        if time.monotonic() > deadline:
            tails = "\n".join(log.read_text(errors="replace")[-2000:] for log in logs)
            pytest.fail(f"{what} not within {READY_WITHIN:.0f}s:\n{tails}")
        time.sleep(0.5)


def master_state(web_port: int) -> dict[str, Any] | None:
    """The master's status from its web UI's JSON view; None while it is not up."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=5) as answer:
            return dict(json.load(answer))
    except OSError:
        return None


def stop(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A standalone master and one worker (1 core, 1 GB); yields the master's URL and
    its web UI port once the worker has registered."""
    tmp = tmp_path_factory.mktemp("cluster")
    port, web = free_port(), free_port()
    logs = [tmp / "master.log", tmp / "worker.log"]
    master = spark_class(logs[0], "org.apache.spark.deploy.master.Master", "--host",
                         "127.0.0.1", "--port", str(port), "--webui-port", str(web))
    processes = [master]
    try:
        wait_for(lambda: master_state(web) is not None, "the master's web UI", logs)
        url = f"spark://127.0.0.1:{port}"
        processes.append(spark_class(
            logs[1], "org.apache.spark.deploy.worker.Worker", url, "--cores", "1",
            "--memory", "1g", "--webui-port", "0", "--work-dir", str(tmp / "work")))
        wait_for(lambda: (master_state(web) or {}).get("aliveworkers", 0) >= 1,
                 "a registered worker", logs)
        yield url, web
    finally:
        for process in reversed(processes):
            stop(process)


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with nothing installed: the executors' interpreter."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import juggler"], capture_output=True)
    assert probe.returncode != 0, "juggler must not be importable by the executors' Python"
    return python


def juggler_on(master: str, python: Path, *args: str) -> str:
    """`juggler ARGS` with the cluster as Spark master; returns stderr."""
    env = {**os.environ, "JUGGLER_SPARK_MASTER": master, "PYSPARK_PYTHON": str(python),
           "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run([sys.executable, "-m", "juggler.cli", *args], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stderr


def test_shared_backfill_on_a_cluster_equals_eval(cluster: tuple[str, int], bare_python: Path,
                                                  tmp_path: Path) -> None:
    """The ICU example with its control lines, archived and backfilled on the cluster:
    eval's results; the job shows the UI's address and its stages, and the master
    lists it as its application."""
    master, web = cluster
    archive, out = tmp_path / "archive", tmp_path / "shared.jsonl"
    juggler_on(master, bare_python, "spark", "archive", "--events",
               str(ICU / "events.jsonl"), "--archive", str(archive))
    stderr = juggler_on(master, bare_python, "spark", "backfill", "--queries",
                        str(ICU / "queries.jsonl"), "--archive", str(archive),
                        "--out", str(out), "--allowed-lateness", "1000")
    expected = eval_results(ICU / "queries.jsonl", ICU / "events.jsonl",
                            tmp_path / "eval.jsonl", 1000)
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert list(map(canonical, got)) == list(map(canonical, expected))
    assert len(got) >= 10
    assert "backfill: Spark UI at http://" in stderr
    assert "backfill: stage " in stderr and " done (" in stderr

    def both_jobs_ran_there() -> bool:
        apps = (master_state(web) or {}).get("completedapps", [])
        return len([app for app in apps if app["name"] == "juggler"]) == 2

    wait_for(both_jobs_ran_there, "the two jobs among the master's applications", [])
