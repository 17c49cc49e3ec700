"""The machine and the tree a benchmark ran on, for the report's header: core count,
CPU, memory, load, the commit and whether the tree was clean, and a digest of the
engine's sources (what was measured, even from an uncommitted tree)."""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from pathlib import Path

from bench.measure import ROOT


def machine(services: Path) -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    except OSError:
        nproc = str(os.cpu_count())
    mem = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    untracked = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
    state = "clean" if not untracked else (
        "uncommitted changes in tracked files" if dirty else "untracked files present")
    digest = hashlib.sha256()
    native = services / "juggler_native"
    sources = [*(services / "juggler").rglob("*.py"), *(native / "src").rglob("*.rs"),
               native / "Cargo.toml", native / "Cargo.lock"]
    for path in sorted(p for p in sources if p.exists()):
        digest.update(str(path.relative_to(services)).encode() + b"\0" + path.read_bytes())
    return {"nproc": nproc, "cpu": cpu, "memory": mem, "commit": commit, "tree": state,
            "source": digest.hexdigest()[:12],
            "python": platform.python_version(),
            "load": " ".join(f"{x:.2f}" for x in os.getloadavg())}
