"""Sections of `docs/benchmarks.md` that other benchmark commands own.

`bench.run` regenerates the report as a whole; the Kafka and Spark benchmarks need a
broker and take their own time, so they run separately and write a marked section
that `bench.run` carries over: one report, whichever command ran last.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- section {name} -->", f"<!-- /section {name} -->"


def sections(text: str) -> dict[str, str]:
    """The marked sections of a report, by name, markers included."""
    pattern = re.compile(r"<!-- section (\w+) -->.*?<!-- /section \1 -->\n?", re.DOTALL)
    return {m.group(1): m.group(0) for m in pattern.finditer(text)}


def block(name: str, body: str) -> str:
    """`body` between the markers of section `name`."""
    begin, end = _markers(name)
    return f"{begin}\n{body.rstrip()}\n{end}\n"


def replace_section(path: Path, name: str, body: str) -> None:
    """Put `body` in section `name` of the report at `path` (appended if new)."""
    new = block(name, body)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    old = sections(text).get(name)
    text = text.replace(old, new) if old else text.rstrip("\n") + "\n\n" + new
    path.write_text(text, encoding="utf-8")


def carry_over(old_text: str, new_text: str) -> str:
    """`new_text` with the sections of `old_text` it does not have, appended."""
    have = sections(new_text)
    kept = [block for name, block in sections(old_text).items() if name not in have]
    return new_text.rstrip("\n") + "\n\n" + "\n".join(kept) if kept else new_text


def publish(table: str, out: str, name: str) -> None:
    """Print a benchmark's table and, unless `out` is '-', make it section `name` of the
    report at `out` (what every benchmark run apart from `bench.run` ends with)."""
    print(table)
    if out != "-":
        replace_section(Path(out), name, table)
        print(f"wrote the {name} section of {out}", file=sys.stderr)
