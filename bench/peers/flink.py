"""Flink SQL (PyFlink, local mini-cluster) as a peer: one statement set over the J files.

Why a virtual environment of its own: `apache-flink` brings a JVM distribution of
several hundred MB and pins numpy, pandas, pyarrow and Apache Beam to versions of its
own; it must not be installed into the project's environment, nor when nobody asked
for the Flink peer. Its requirement is the `peers` extra of `pyproject.toml`; the first
`--peers flink` creates `~/.cache/juggler/pyflink/venv` (``JUGGLER_CACHE`` moves it)
and installs that requirement there with pip, once.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

from bench.peers import flink_sql
from bench.peers.files import EventFiles
from juggler import maven
from juggler.language import Query

HERE = Path(__file__).resolve().parent
PYPROJECT = HERE.parents[1] / "pyproject.toml"
PARALLELISM = 1
"""One task slot per operator: Juggler and Esper run on one thread, and the machines the
benchmark runs on have 2 cores shared with other work."""


def requirement() -> str:
    """The PyFlink requirement, from the `peers` extra of pyproject.toml."""
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    return next(r for r in extras["peers"] if r.startswith("apache-flink"))


def interpreter() -> Path:
    """PyFlink's Python, installing it on first use (a file lock serialises installers)."""
    home = maven.cache_root() / "pyflink"
    python, marker, wanted = home / "venv" / "bin" / "python", home / ".complete", requirement()
    if marker.exists() and marker.read_text().strip() == wanted:
        return python
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and marker.read_text().strip() == wanted:
            return python
        marker.unlink(missing_ok=True)
        shutil.rmtree(home / "venv", ignore_errors=True)
        print(f"peers: installing {wanted} into {home / 'venv'} (once)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", wanted], check=True)
        marker.write_text(wanted + "\n")
    return python


def _run_group(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Run `cmd` in a process group of its own and, past `timeout`, end the whole group:
    PyFlink's JVM is a child of its Python, which `subprocess.run` alone would orphan."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise RuntimeError(f"Flink peer did not finish within {timeout:.0f} s") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def run(files: EventFiles, queries: list[Query], work: Path, timeout: float) -> dict:
    """Run every query as one INSERT of one statement set over `files`; the
    measurements, with "results_file" naming the results in the peers' form."""
    sink = work / "flink-sink"
    shutil.rmtree(sink, ignore_errors=True)
    spec = {"parallelism": PARALLELISM,
            "tables": [flink_sql.source_table(s, cols, str(files.stream(s)))
                       for s, cols in files.columns.items()]
                      + [flink_sql.results_table(str(sink)), flink_sql.discard_table()],
            "scans": [flink_sql.scan(s) for s in files.columns],
            "inserts": [flink_sql.insert(q) for q in queries]}
    path = work / "flink-spec.json"
    path.write_text(json.dumps(spec))
    proc = _run_group([str(interpreter()), str(HERE / "flink_job.py"), str(path)], timeout)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"Flink peer failed ({proc.returncode}): {proc.stderr[-2000:]}")
    out = json.loads(lines[-1])
    results = work / "flink-results.tsv"
    count = 0
    with results.open("w") as f:
        for part in sorted(sink.rglob("*")) if sink.exists() else []:
            if part.is_file() and not part.name.startswith("."):
                with part.open(newline="") as rows:
                    for query, sources in csv.reader(rows):
                        f.write(f"{query}\t{sources}\n")
                        count += 1
    events = sum(1 for _ in files.arrival.open())
    net = out["seconds"] - out["fixed_s"]
    return out | {"events": events, "results": count, "results_file": str(results),
                  "events_per_s": events / out["seconds"] if out["seconds"] > 0 else None,
                  "net_events_per_s": events / net if net > 0 else None}
