"""The README's by-hand section, run as written: broker, topics, worker, the thesis's
4-stream query registered, the ICU example produced in one burst (its control lines at
their barriers), and its results; and docs/faust.md's, the same on the Faust runtime.

The blocks are taken from the pages themselves, so the test fails when the docs and
the product drift apart. Two things are changed, for isolation only: the broker is this
test's own (on a free port, named by JUGGLER_BOOTSTRAP, which every command reads) and
the worker's HTTP port is a free one.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def by_hand_block(marker: str = "By hand, after `bin/setup`", page: str = "README.md"
                  ) -> list[str]:
    readme = (ROOT / page).read_text()
    start = readme.index(marker)
    block = re.search(r"```bash\n(.*?)```", readme[start:], re.S)
    assert block, "no bash block in the README's by-hand section"
    lines: list[str] = []
    for raw in block.group(1).splitlines():
        code = re.sub(r"\s+#.*$", "", raw)
        if not code.strip():
            continue
        if raw.startswith("  ") and lines:  # a continued command (the query text)
            lines[-1] += "\n" + code
        else:
            lines.append(code)
    return lines


def run_block(lines: list[str], port_in_readme: str, tmp_path: Path
              ) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    """Run a README block against this test's own broker and a free HTTP port; what it
    printed, and the results its `curl` fetched."""
    from juggler.kafka.broker import LocalBroker, free_port

    port = str(free_port())
    script = ["set -euo pipefail", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
    for line in lines:
        if line.startswith("juggler broker"):
            continue  # this test's own broker, below
        line = line.replace(port_in_readme, port)
        if line.startswith("juggler worker"):
            line = line.replace(" &", f" 2>{tmp_path}/worker.log &")
        if line.startswith("curl"):
            line = line.replace("curl ", "curl -s ") + f" > {tmp_path}/results.json"
        script.append(line)
    with LocalBroker(tmp_path / "kafka") as broker:
        env = {**os.environ, "JUGGLER_BOOTSTRAP": broker.bootstrap}
        done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        log = (tmp_path / "worker.log").read_text() if (tmp_path / "worker.log").exists() else ""
        assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{log[-3000:]}"
    return done, json.loads((tmp_path / "results.json").read_text())["results"]


def test_the_by_hand_section_returns_the_examples_results(tmp_path: Path) -> None:
    lines = by_hand_block()
    assert lines[1].startswith("juggler broker &")
    done, results = run_block(lines, "6066", tmp_path)
    assert "live in all 4 partitions" in done.stdout
    assert "caught up" in done.stdout
    assert [(r["key"], r["ts"]) for r in results] == [("p1", 2000), ("p1", 3500), ("p1", 7200)]
    listed = done.stdout[done.stdout.index("caught up"):]
    assert "q1" in listed and "q2" in listed and "bradycardia" not in listed  # query list


def test_the_faust_section_returns_the_same_results(tmp_path: Path) -> None:
    lines = by_hand_block("By hand, after `bin/setup`", "docs/faust.md")
    assert any(line.startswith("juggler worker --runtime faust") for line in lines)
    done, results = run_block(lines, "6067", tmp_path)
    assert "live in all 4 partitions" in done.stdout
    assert "caught up" in done.stdout
    assert [(r["key"], r["ts"]) for r in results] == [("p1", 2000), ("p1", 3500), ("p1", 7200)]
    assert all(r["position"]["topic"] == "faust.juggler.results" for r in results)
