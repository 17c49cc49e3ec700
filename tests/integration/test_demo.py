"""The README's first command, as a user runs it: `juggler demo` starts its own broker
and worker, registers the ICU queries and prints results per query; with
`--runtime faust`, the same demo on the Faust runtime."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("runtime", ["worker", "faust"])
def test_demo_prints_results_for_every_query(runtime: str) -> None:
    done = subprocess.run([sys.executable, "-m", "juggler.cli", "demo", "--seconds", "12",
                           "--show", "1", "--runtime", runtime],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.search(rf"^worker \({runtime} runtime\) ready at http://", out, re.MULTILINE), out
    for query in ("q1", "q3", "fig58", "bradycardia"):
        assert f"registered {query}: ACCEPTED" in out
        count = re.search(rf"^  {query}\s+([\d,]+)$", out, re.MULTILINE)
        assert count, out
        assert int(count.group(1).replace(",", "")) > 0, f"no results for {query}\n{out}"
        # each query's first result is printed as it arrives: its key, its event time as
        # a clock reading, its row and the events it combines (stream@partition:offset)
        assert re.search(rf"^  \[{query}\] patient-\d+ at \d\d:\d\d:\d\d\.\d{{3}}: "
                         r".*  <- (\w+@\d+:\d+ ?)+$", out, re.MULTILINE), out
    assert re.search(r"\] produced [\d,]+ events", out), "no progress line\n" + out
    assert "1,200 events produced" in out
    assert "on the shared topic juggler.results," in out, out
    assert "did not catch up" not in out, out


def test_demo_help_shows_the_runtime_option() -> None:
    done = subprocess.run([sys.executable, "-m", "juggler.cli", "demo", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert re.search(r"--runtime \[worker\|faust\]", done.stdout), done.stdout
