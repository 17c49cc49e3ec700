"""`juggler spark ...` without Spark: argument errors come before any Spark start, and
`backfill --explain` shows the statement a backfill would run.

The jobs themselves run in tests/integration/test_spark_jobs.py.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner
from juggler.cli import main


def juggler(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["spark", *args])
    return result.exit_code, result.output + result.stderr


def test_juggler_help_does_not_load_pyspark() -> None:
    code = "import sys, juggler.cli; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip() == "False"
    code, text = juggler("--help")
    assert code == 0 and "generate" in text and "backfill" in text and "replay" in text


@pytest.mark.parametrize(("args", "message"), [
    (["generate", "--seed", "1", "--count", "0"], "--count must be at least 1"),
    (["generate", "--seed", "1", "--count", "9", "--late-fraction", "1.5"],
     "--late-fraction must be between 0 and 1"),
    (["generate", "--seed", "1", "--count", "9", "--late-fraction", "0.6",
      "--malformed-fraction", "0.6"], "must not exceed 1"),
    (["generate", "--seed", "1", "--count", "9", "--rate", "0"], "--rate must be a positive"),
    (["generate", "--seed", "1", "--count", "9", "--malformed-fraction", "0.1",
      "--archive", "/tmp/never-written"], "--malformed-fraction needs Kafka"),
    (["generate", "--count", "9"], "Missing option '--seed'"),
    (["replay"], "exactly one of --from-archive DIR or --from-topics"),
    (["replay", "--from-topics", "--start-ts", "5"], "needs --start-ts and --end-ts"),
    (["replay", "--from-topics", "--start-ts", "5", "--end-ts", "5"],
     "--start-ts 5 must be less than --end-ts 5"),
    (["replay", "--from-topics", "--start-ts", "1", "--end-ts", "5", "--speed", "-1"],
     "--speed must be a positive factor"),
    (["backfill", "--query-id", "q", "--archive", "."], "exactly one of --to-topic or --out"),
    (["backfill", "--query-id", "q", "--archive", ".", "--to-topic", "--out", "x"],
     "exactly one of --to-topic or --out"),
    (["backfill", "--query-id", "bad id", "--archive", ".", "--to-topic"],
     "may only contain letters"),
    (["backfill", "--query-id", "q", "--archive", ".", "--explain",
      "--text", "SELECT * FROM B, H WHERE B.temp > H.vib"], "MAXWINDOW"),
    (["backfill", "--queries", __file__, "--query-id", "q", "--archive", ".", "--to-topic"],
     "--queries FILE or --query-id ID, not both"),
    (["backfill", "--text", "SELECT * FROM K", "--archive", ".", "--to-topic"],
     "--text needs --query-id"),
    (["backfill", "--reference", "--archive", ".", "--out", "x"], "give --query-id"),
])
def test_bad_arguments_exit_2_with_a_message_and_no_spark(args: list[str], message: str) -> None:
    code, text = juggler(*args)
    assert code == 2
    assert message in text
    assert "starting Spark" not in text


def test_explain_prints_the_interval_join_with_exact_thresholds() -> None:
    text = ("Select H.alert From B, H Window B.ts < H.ts MaxWindow 4sec "
            "Where H.beatrate < 50 and B.temp > H.vib * 0.5")
    code, sql = juggler("backfill", "--query-id", "q1", "--archive", ".", "--explain",
                        "--text", text)
    assert code == 0
    assert "juggler_backfill_B" in sql and "juggler_backfill_H" in sql
    assert "div 4000" in sql  # time buckets as wide as MAXWINDOW
    # beatrate < 50 holds for exactly the doubles <= the largest double below 50
    assert "s1.`beatrate` <= CAST('49.99999999999999' AS DOUBLE)" in sql
    # the window predicate is integer arithmetic: B.ts - H.ts <= -1
    assert "<= CAST('-1' AS DECIMAL(38,0))" in sql
    assert "near_0" in sql  # B.temp > 0.5 * H.vib is decided exactly near its boundary
