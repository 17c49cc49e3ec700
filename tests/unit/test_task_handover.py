"""A task's run hands the worker's round lock to waiting readers (the HTTP pages that read
under it) after every `HANDOVER_EVENTS` events, not only after its whole budget, and
splitting the run so changes none of its results."""

from __future__ import annotations

import math
import time

from test_fanout_commands import BrokerlessJob, restored

from juggler.engine.events import Event
from juggler.language import compile_query
from juggler.service.arrival import Pending
from juggler.service.settings import Settings
from juggler.service.task import HANDOVER_EVENTS, PartitionTask, Record, RoundCounts
from juggler.service.transactions import Outbox

EVENTS = 2 * HANDOVER_EVENTS + 100


def backlog(job: BrokerlessJob) -> tuple[PartitionTask, list[tuple[str, Record, Event]]]:
    """Partition 0's task with one query and `EVENTS` fetched, cleared H events; the
    events as the task's batches hold them, in the order it takes them."""
    job.settings = Settings(max_idle_ms=0, idle_estimate=False)  # the other streams are quiet
    task = restored(job)[0]
    task.engine.register(compile_query("q", "SELECT * FROM H WHERE H.beatrate > 50", job.catalog))
    topic = job.names.stream("H")
    pending = []
    for offset in range(EVENTS):
        key = f"p{offset % 7}"
        event = Event("H", key, 1000 + offset, {"beatrate": float(offset % 100), "vib": 0.0, "alert": ""},
                      (topic, 0, offset))
        pending.append(Pending(offset, event.ts, 0, (Record(topic, 0, offset, key.encode(), b"", 0), event)))
    task.order.extend("H", pending)
    task.order.cleared_epoch = 0
    for stream, inp in task.order.inputs.items():  # every log end known, asked after every deadline
        inp.position = EVENTS if stream == "H" else 0
        inp.end, inp.end_at, inp.end_epoch = inp.position, math.inf, 10**9
    return task, [("H", *p.item) for p in pending]


def test_a_run_pauses_between_batches_and_publishes_what_one_batch_does() -> None:
    task, _ = backlog(BrokerlessJob())
    evaluated_at_pause: list[int] = []
    outbox = Outbox()
    task.run(outbox, RoundCounts(), 10 * EVENTS, time.monotonic(),
             lambda: evaluated_at_pause.append(task.engine.stats()["events"]))
    assert evaluated_at_pause == [HANDOVER_EVENTS, 2 * HANDOVER_EVENTS]

    reference, events = backlog(BrokerlessJob())
    whole, dirty = Outbox(), dict[str, None]()
    reference._events(events, whole, RoundCounts(), dirty)  # the run's events in one batch
    reference._finish(whole, dirty)
    assert outbox.messages == whole.messages and outbox.latest == whole.latest
    assert sum(topic.startswith("juggler.results") for topic, *_ in outbox.messages) == \
        sum(1 for offset in range(EVENTS) if offset % 100 > 50)
