"""`juggler produce` draws a progress bar on a terminal and stays quiet elsewhere."""

from __future__ import annotations

import io
from pathlib import Path

from juggler.client.produce import Produced
from juggler.client.produce_progress import progress_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def events_file(tmp_path: Path, lines: int) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_text('{"stream": "B"}\n\n' * lines)  # blank lines are not produced
    return path


def test_a_terminal_sees_how_far_produce_is(tmp_path: Path) -> None:
    out = Terminal()
    with progress_bar(events_file(tmp_path, 2500), out) as shown:
        assert shown is not None
        shown(Produced(events=1990, commands=10))
    assert "2000/2500" in out.getvalue() and "80%" in out.getvalue()


def test_standard_input_gets_a_count_without_total() -> None:
    out = Terminal()
    with progress_bar(None, out) as shown:
        assert shown is not None
        shown(Produced(events=3000))
    assert "3000 lines" in out.getvalue()


def test_a_pipe_or_log_gets_no_progress_output(tmp_path: Path) -> None:
    out = io.StringIO()
    with progress_bar(events_file(tmp_path, 10), out) as shown:
        assert shown is None
    assert out.getvalue() == ""
