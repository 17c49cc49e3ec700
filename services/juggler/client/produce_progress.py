"""What `juggler produce` shows while it works: a progress bar on a terminal, nothing
elsewhere.

Why: producing a long file takes minutes (each control line waits until its command is
live everywhere), and a count that never says how far it is from the end does not tell
a user whether to wait. A log or a pipe gets no bar and no carriage returns, only the
final count line the command prints. tqdm draws the bar (rate, ETA, terminal width).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from juggler.client.produce import Produced


@contextlib.contextmanager
def progress_bar(events: Path | None, out: TextIO) -> Iterator[Callable[[Produced], None] | None]:
    """A callback for `produce(progress=...)` drawing a bar on `out` when it is a
    terminal (None otherwise). `events`: the file, whose non-blank lines are counted
    first for the bar's total (None: standard input, a count with no total)."""
    if not out.isatty():
        yield None
        return
    from tqdm import tqdm

    total = _lines(events) if events is not None else None
    # `produce` reports every 1000 lines, already coarse: draw each report
    with tqdm(total=total, unit=" lines", file=out, dynamic_ncols=True, leave=False,
              desc="produce", mininterval=0, miniters=1) as bar:

        def draw(done: Produced) -> None:
            bar.update(done.events + done.commands - bar.n)

        yield draw


def _lines(path: Path) -> int:
    """The lines `produce` will send (blank ones are skipped); bytes, not text, so
    counting a large file costs a fraction of producing it."""
    with open(path, "rb") as handle:
        return sum(1 for line in handle if line.strip())
