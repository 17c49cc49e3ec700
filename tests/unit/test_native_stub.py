"""`juggler_native.pyi` describes the built extension: every class, method, function and
argument the binding has, and nothing it lacks (mypy's stubtest against the module
`bin/setup` built), so an editor or type checker reading the stub is told the truth."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CRATE = Path(__file__).resolve().parents[2] / "services" / "juggler_native"


def test_the_stub_matches_the_built_extension() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "juggler_native",
         "--allowlist", str(CRATE / "stubtest-allowlist.txt")],
        env={**os.environ, "MYPYPATH": str(CRATE)}, capture_output=True, text=True,
        timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_stub_is_itself_well_typed() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", str(CRATE / "juggler_native.pyi")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
