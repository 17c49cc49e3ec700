"""`juggler worker` as a child process, for the demo, the load benchmark and the tests.

Why a real child process instead of an in-process worker: the worker installs signal
handlers and exits with status 70 on failure, and what users run (and what a SIGKILL
test must kill) is the process. Settings go through `JUGGLER_*` variables, exactly as a deployment sets them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

SERVICES = Path(__file__).resolve().parents[2]
"""The source folder holding the `juggler` package (put on the child's PYTHONPATH so a
source checkout works without an install)."""


class WorkerExited(RuntimeError):
    """The worker process ended or never became ready; str() holds its log's tail."""


class WorkerProcess:
    def __init__(self, settings: Mapping[str, Any], logfile: Path) -> None:
        """`settings` are `Settings` field names (e.g. `web_port`), passed as
        `JUGGLER_<NAME>`; `web_port` is required, since readiness is asked over HTTP."""
        self.port = int(settings["web_port"])
        self.token: str | None = settings.get("web_token")
        self.logfile = logfile
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SERVICES), env.get("PYTHONPATH")]))
        env.update({f"JUGGLER_{name.upper()}": str(value) for name, value in settings.items()})
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> Self:
        """Start the worker and wait until `/health` answers 200."""
        self.launch()
        self.wait_ready(timeout)
        return self

    def launch(self) -> None:
        """Start the worker without waiting for it (one refused by its group never
        gets ready)."""
        self.starts += 1
        self.logfile.parent.mkdir(parents=True, exist_ok=True)
        with open(self.logfile, "ab") as log:
            log.write(f"\n===== start {self.starts} =====\n".encode())
            log.flush()
            self.proc = subprocess.Popen([sys.executable, "-m", "juggler.cli", "worker"],
                                         env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def wait_ready(self, timeout: float) -> None:
        """The web server starts after table recovery, so /health answering means ready."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise WorkerExited(f"worker exited with {self.proc.returncode}\n{self.log_tail()}")
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise WorkerExited(f"worker not ready after {timeout}s\n{self.log_tail()}")

    def get(self, path: str) -> tuple[int, Any]:
        """(HTTP status, body): JSON decoded when the worker says it is JSON; with the
        worker's token, if it has one."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(self.url + path, headers=headers),
                                        timeout=30) as response:
                body = response.read()
                ctype = response.headers.get("Content-Type", "")
                return response.status, json.loads(body) if "json" in ctype else body.decode()
        except urllib.error.HTTPError as exc:
            body = exc.read()
            try:
                return exc.code, json.loads(body)
            except ValueError:
                return exc.code, body.decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush, no commit."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        """SIGTERM (the worker finishes its round and closes), SIGKILL after 30 s."""
        terminate(self.proc, 30)

    def log_tail(self, lines: int = 80) -> str:
        return log_tail(self.logfile, lines)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def terminate(proc: subprocess.Popen[Any] | None, grace: float) -> None:
    """SIGTERM a child process that is still running, SIGKILL it after `grace` seconds."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def log_tail(path: Path, lines: int) -> str:
    """The last `lines` lines of a child's log file, for an error message."""
    if not path.exists():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
