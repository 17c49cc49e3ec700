"""The type hints hold: mypy, configured in pyproject.toml, finds no error in
`services/juggler` or `bench`, so a collaborator typed as a `Query` or a `Settings` is
one, and a change that breaks a signature's promise (a benchmark's calls included)
fails here rather than at a user's call or in the middle of a benchmark run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mypy_finds_no_error_in_the_package() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
