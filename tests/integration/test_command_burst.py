"""A burst of rules of one shape, submitted at once, on both runtimes: every valid one
goes live in every partition, one with a bad number is rejected at its own line and
column, and deregistering half of them leaves the other half. (The worker decides a
round's commands together and the Faust app a batch of them; both compile a shape
once and decode each fanout command once per process.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_worker_harness import WorkerProcess, unique

from juggler.client.control import submit_many
from juggler.wire.commands import DeregisterCommand, RegisterCommand

pytestmark = pytest.mark.integration

RULES = 200
RULE = "SELECT *\nFROM H\nWHERE H.beatrate > {}"


@pytest.mark.parametrize("runtime", ["worker", "faust"])
def test_a_burst_of_one_shape_goes_live_everywhere(kafka_bootstrap: str, tmp_path: Path,
                                                   runtime: str) -> None:
    app_id = unique("burst")
    prefix = f"{app_id}."
    worker = WorkerProcess(kafka_bootstrap, app_id, prefix, tmp_path, runtime=runtime)
    worker.start()
    try:
        texts = {f"hr{i}": RULE.format(f"{i}.5" if i % 2 else i) for i in range(RULES)}
        commands = [RegisterCommand(qid, text) for qid, text in texts.items()]
        commands.insert(RULES // 2, RegisterCommand("bad", RULE.format("1e999")))
        done = {s.command.id: s for s in submit_many(kafka_bootstrap, commands, prefix=prefix,
                                                    timeout=120)}
        assert [qid for qid in texts if not done[qid].everywhere] == []
        bad = done["bad"].status
        assert bad is not None and bad.status == "REJECTED"
        assert "WHERE clause, line 3, column 20" in bad.message, bad.message

        gone = [f"hr{i}" for i in range(0, RULES, 2)]
        done = submit_many(kafka_bootstrap, [DeregisterCommand(qid) for qid in gone],
                           prefix=prefix, timeout=120)
        assert all(s.everywhere for s in done)
        status, body = worker.get("/queries")
        assert status == 200
        assert {q["id"]: q["text"] for q in body["queries"]} == \
            {qid: text for qid, text in texts.items() if qid not in gone}
    finally:
        worker.stop()
