"""The Flink SQL peer's job, run by PyFlink's interpreter (`bench.peers.flink`).

    <pyflink venv>/bin/python flink_job.py SPEC.json      # prints one JSON line

Why a script of its own: PyFlink (and the JVM it starts) lives in a virtual environment
of its own, installed only when the Flink peer is asked for, so this file imports
nothing from Juggler. SPEC holds the DDL and the INSERTs (`bench.peers.flink_sql`) and
the parallelism. The statement set is compiled to a plan before the clock starts, so
the time is the job's: deployment, reading the files, the joins, writing the results.

Before it, a job that only reads the same files (SPEC's "scans", whose filters hold for
no row) is timed in the same JVM: Flink's fixed cost per job (deployment, start-up,
parsing the CSV), which at a few thousand events is most of the wall clock. Running it
first also warms the JVM up for the measured job.
"""

import json
import sys
import time
from pathlib import Path


def _children_peak_rss_kb() -> int:
    """Peak resident set (VmHWM) of this process's children: the JVM PyFlink started."""
    peak = 0
    for task in Path("/proc/self/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
            except OSError:
                continue
    return peak


def main(spec_path: str) -> None:
    from pyflink.table import EnvironmentSettings, TableEnvironment

    spec = json.loads(Path(spec_path).read_text())
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("parallelism.default", str(spec["parallelism"]))
    for ddl in spec["tables"]:
        env.execute_sql(ddl)
    fixed_s, _ = _timed(env, spec["scans"])
    seconds, plan_s = _timed(env, spec["inserts"])
    print(json.dumps({"plan_s": plan_s, "seconds": seconds, "fixed_s": fixed_s,
                      "peak_rss_kb": _children_peak_rss_kb()}))


def _timed(env, inserts: list[str]) -> tuple[float, float]:
    """(seconds the job ran, seconds its plan took to compile) for one statement set."""
    statements = env.create_statement_set()
    for text in inserts:
        statements.add_insert_sql(text)
    t0 = time.perf_counter()
    plan = statements.compile_plan()
    t1 = time.perf_counter()
    plan.execute().wait()
    return time.perf_counter() - t1, t1 - t0


if __name__ == "__main__":
    main(sys.argv[1])
