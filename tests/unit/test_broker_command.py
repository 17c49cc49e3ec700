"""The local broker's JVM command: C1 only, so its compiler does not take the small
machine's cores from the worker, the tests and the benchmarks it shares them with
(`LocalBroker._java`); the format tool, a short-lived JVM, with the serial GC."""

from __future__ import annotations

from pathlib import Path

from juggler.kafka.broker import LocalBroker


def _broker(tmp_path: Path) -> LocalBroker:
    broker = LocalBroker(tmp_path)
    broker.data_dir = tmp_path
    return broker


def test_the_broker_jvm_runs_c1_only_with_g1(tmp_path: Path) -> None:
    cmd = _broker(tmp_path)._java(tmp_path / "libs", tmp_path / "log4j2.properties")
    assert cmd[0] == "java"
    assert "-XX:TieredStopAtLevel=1" in cmd
    assert "-XX:+UseG1GC" in cmd
    assert cmd[-2:] == ["-cp", f"{tmp_path / 'libs'}/*"]


def test_the_format_tool_swaps_g1_for_the_serial_gc(tmp_path: Path, monkeypatch) -> None:
    import subprocess

    ran: list[list[str]] = []

    def run(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        ran.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", run)
    config = tmp_path / "server.properties"
    _broker(tmp_path)._format(tmp_path / "libs", config)
    (cmd,) = ran
    assert "-XX:+UseSerialGC" in cmd and "-XX:+UseG1GC" not in cmd
    assert "-XX:TieredStopAtLevel=1" in cmd
    assert cmd[cmd.index("kafka.tools.StorageTool"):][:4] == [
        "kafka.tools.StorageTool", "format", "--config", str(config)]
