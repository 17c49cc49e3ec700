"""`bench.faust_load`'s pure parts: results after a crash against the uninterrupted run's,
the peak resident set read from /proc, and py-spy's samples by layer."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` lives at the repository root, beside `services`
    sys.path.insert(0, str(ROOT))

from bench.faust_load import attribute, compare, ratio, vm_hwm  # noqa: E402


def result(query: str, offset: int) -> tuple:
    return (query, "k1", 1_000 + offset, (("B", "juggler.stream.B", 0, offset),
                                          ("H", "juggler.stream.H", 0, offset)))


def test_missing_unexpected_and_repeats_are_counted_by_identity() -> None:
    expected = Counter({result("q1", 1): 1, result("q1", 2): 1, result("q2", 3): 1})
    got = Counter({result("q1", 1): 3, result("q2", 3): 2, result("q9", 9): 1})
    flagged = Counter({result("q1", 1): 1})  # q2's second copy carries no header
    assert compare(expected, got, flagged) == {
        "expected": 3, "present": 3, "missing": 1, "missing_late": 0, "unexpected": 1,
        "repeated": 2, "copies": 3, "unflagged": 1}
    # q1's result at offset 2 is missing because its H event was dead-lettered as late
    late = {("juggler.stream.H", 0, 2)}
    assert compare(expected, got, flagged, late)["missing_late"] == 1
    assert compare(expected, got, flagged, {("juggler.stream.H", 0, 7)})["missing_late"] == 0


def test_an_exact_run_compares_clean() -> None:
    same = Counter({result("q1", 1): 1, result("q1", 2): 1})
    assert compare(same, Counter(same), Counter()) == {
        "expected": 2, "present": 2, "missing": 0, "missing_late": 0, "unexpected": 0,
        "repeated": 0, "copies": 0, "unflagged": 0}


def test_the_peak_resident_set_is_read_from_proc_status() -> None:
    status = "Name:\tpython\nVmPeak:\t  900000 kB\nVmHWM:\t   81234 kB\nVmRSS:\t 70000 kB\n"
    assert vm_hwm(status) == 81_234 * 1024
    assert vm_hwm("") == 0  # the process ended
    assert vm_hwm(Path("/proc/self/status").read_text()) > 0


def test_ratio_is_faust_over_worker() -> None:
    assert ratio(50.0, 200.0) == "0.25x"
    assert ratio(1.0, 0.0) == "-"


LOOP = ("thread (1): MainThread;<module> (juggler/cli.py:1);"
        "BaseEventLoop._run_once (asyncio/base_events.py:1)")


def test_samples_go_to_the_layer_of_their_innermost_known_frame() -> None:
    agent = f"{LOOP};Handle._run (asyncio/events.py:80);events (juggler/faust/app.py:88)"
    lines = [
        f"{LOOP};EpollSelector.select (selectors.py:468) 50",
        f"{agent};Stream._c_aiter (faust/streams.py:1180) 7",
        f"{agent};FaustJob.stream_record (juggler/faust/runtime.py:150) 2",
        f"{agent};FaustJob.stream_record (juggler/faust/runtime.py:150);"
        "PartitionTask.add_many (juggler/runtime/task.py:105);"
        "Codec.stream_events (juggler/codec/avro.py:612) 3",
        f"{LOOP};FaustJob._run (juggler/faust/runtime.py:200);"
        "PartitionTask.run (juggler/runtime/task.py:150);"
        "PartitionTask._events (juggler/runtime/task.py:210);"
        "NativeEngine.process_batch_encoded (juggler/engine/native_engine.py:111) 11",
        f"{LOOP};FaustJob._run (juggler/faust/runtime.py:200);"
        "FaustJob._commit (juggler/faust/runtime.py:220);"
        "FaustJob._send_table (juggler/faust/runtime.py:290);"
        "Producer.send (faust/transport/drivers/aiokafka.py:1000);"
        "AIOKafkaProducer.send (aiokafka/producer/producer.py:400) 5",
        f"{LOOP};FaustJob._run (juggler/faust/runtime.py:200);"
        "FaustJob._commit (juggler/faust/runtime.py:220);"
        "batch_records (juggler/faust/state_table.py:90) 4",
        f"{LOOP};Metrics.get (juggler/faust/app.py:160);"
        "generate_latest (prometheus_client/exposition.py:200) 6",
        f"{LOOP};Logger.debug (logging/__init__.py:1477) 1",
        f"{LOOP} 8",  # the event loop's own frame
        "thread (2): Thread-1;EpollSelector.select (selectors.py:468) 500",  # not the loop
        "",
    ]
    layers, frames = attribute(lines)
    assert layers == Counter({"idle": 50, "faust": 7, "agent": 2, "task": 3, "operator": 11,
                              "aiokafka": 5, "commit": 4, "metrics": 6, "logging": 1,
                              "asyncio": 8})
    assert frames == Counter({"agent": 12, "stream_record": 5, "task_run": 11, "commit": 9})
