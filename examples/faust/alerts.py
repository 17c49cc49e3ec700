"""ICU alerts from a Juggler worker's results, in a Faust agent.

Reads every query's results from the worker's shared results topic (``juggler.results``)
as typed `Result` records, prints one line per result and forwards the results that
raise an alert (a selected ``*.alert`` column that is true) to ``<prefix>alerts``, in
the worker's own Avro. Run from the repository root, with the worker's settings:

    JUGGLER_BOOTSTRAP=127.0.0.1:9092 python -m examples.faust.alerts worker -l info
    # or: PYTHONPATH=. faust -A examples.faust.alerts worker -l info

``JUGGLER_TOPIC_PREFIX`` is the worker's topic prefix (empty by default);
``JUGGLER_ALERTS_APP_ID`` the Faust app id (consumer group; default ``juggler-alerts``).
Faust's web port is 6067, because the worker's HTTP has 6066 (``--web-port`` or
``--without-web`` to change it).

``processing_guarantee="exactly_once"`` is how Faust 0.15.3 reads read_committed: the
worker writes results in Kafka transactions, and a read_uncommitted consumer also sees
the records of a transaction the worker aborted, whose results it writes again. It
also makes this app's own sends and offset commits transactional, so each result is
forwarded once. `Repeats` drops a result written twice by an at-least-once producer
(the Faust runtime) that this process sees again.
"""

from __future__ import annotations

import os

import faust

from juggler.faust.records import RESULT_CODEC, Repeats, Result
from juggler.runtime.topic_names import TopicNames

names = TopicNames(os.environ.get("JUGGLER_TOPIC_PREFIX", ""))
bootstrap = os.environ.get("JUGGLER_BOOTSTRAP", "127.0.0.1:9092")

app = faust.App(
    os.environ.get("JUGGLER_ALERTS_APP_ID", "juggler-alerts"),
    broker=[f"kafka://{server.strip()}" for server in bootstrap.split(",")],
    processing_guarantee="exactly_once",  # consume read_committed (see above)
    web_port=6067,
)

results = app.topic(names.all_results, key_type=str, value_type=Result,
                    value_serializer=RESULT_CODEC)
alerts = app.topic(f"{names.prefix}alerts", internal=True, partitions=1,
                   key_type=str, value_type=Result, value_serializer=RESULT_CODEC)
repeats = Repeats()


def raised(result: Result) -> list[str]:
    """The selected alert columns that are true (``H.alert`` in the ICU queries)."""
    return [column for column, value in result.row.items()
            if column.endswith(".alert") and value is True]


@app.agent(results)
async def watch(stream: faust.StreamT[Result]) -> None:
    await alerts.maybe_declare()  # Faust declares only the topics it consumes
    async for result in stream:
        if not repeats.first(result):
            continue
        sources = " ".join(f"{stream_name}={p.topic}[{p.partition}]@{p.offset}"
                           for stream_name, p in sorted(result.sources.items()))
        columns = raised(result)
        print(f"result {result.query} {result.key} ts={result.ts} {sources}"
              + (f" ALERT {','.join(columns)}" if columns else ""))
        if columns:
            await alerts.send(key=result.key, value=result)


if __name__ == "__main__":
    app.main()
