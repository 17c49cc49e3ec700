"""The Faust app: `faust -A juggler.faust.app worker` (or `juggler faust-worker`).

Configured by the worker's `JUGGLER_*` settings (`Settings.from_env`) and reading and
writing the worker's topics, in the worker's records. Faust's vocabulary, thinly:

- agent `events` over every stream topic and the fanout topic (co-partitioned): each
  record goes to its partition's task (`FaustJob.stream_record`);
- agent `commands` over the control topic: REGISTER / DEREGISTER decided, statuses and
  one fanout copy per partition published (`FaustJob.control_records`);
- table `state`: each partition's WES/JES state (`juggler.faust.state_table`), and table
  `registered`: the accepted queries, both changelog-backed and restored by Faust;
- a task running `FaustJob.pump`, which evaluates and publishes;
- pages on Faust's web port: `/health`, `/metrics` (the worker's names), `/queries`, and
  `/queries/<id>/results?after=<cursor>` from the results index the worker uses.

A Faust app and a worker must not share an app id: they would join one consumer group
(the settings check refuses the second, `runtime.settings_log`).
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import faust
from faust.types import TP
from faust.web import Request, Response, View

from juggler.faust.runtime import FaustJob
from juggler.serving.http_api import results_handler
from juggler.serving.json_pages import json_errors
from juggler.serving.http_auth import bearer_token
from juggler.runtime.metrics import CONTENT_TYPE
from juggler.runtime.job import FAILURE_EXIT
from juggler.runtime.results_store import TRIM_INTERVAL, CodecOptions, ResultsStore
from juggler.runtime.settings import Settings
from juggler.runtime.settings_log import REFUSED_EXIT, agree

log = logging.getLogger(__name__)

settings = Settings.from_env()
job = FaustJob(settings)
names = job.names
if job.client_config["security.protocol"] != "PLAINTEXT":
    raise SystemExit("the Faust runtime connects with PLAINTEXT only; run `juggler worker` "
                     "(the default runtime) against a secured cluster (docs/faust.md)")
# before the app exists, so a member whose settings differ never joins the group; it
# stops (as a Kafka Streams instance with a bad configuration does) rather than wait
# refused as the worker does: Faust's web port starts with the app
_refusal = agree(job, job.group_settings(), job.instance)
if _refusal is not None:
    log.critical("%s; exiting with status %d", _refusal, REFUSED_EXIT)
    raise SystemExit(REFUSED_EXIT)


def _broker_settings(s: Settings) -> dict[str, Any]:
    timeouts: dict[str, Any] = {}
    if s.session_timeout is not None:
        timeouts = {"broker_session_timeout": s.session_timeout,
                    "broker_rebalance_timeout": s.session_timeout,
                    "broker_heartbeat_interval": max(0.2, s.session_timeout / 10)}
    return timeouts


DATADIR = Path(tempfile.gettempdir()) / f"juggler-faust-{settings.app_id}-{os.getpid()}"
"""Faust's data directory: empty with the memory store (the tables live in memory and
in their changelogs), one per process (members of one group may share a machine), and
removed when the process exits."""
atexit.register(shutil.rmtree, DATADIR, ignore_errors=True)

app = faust.App(
    settings.app_id,
    broker=";".join(f"kafka://{b.strip()}" for b in settings.bootstrap.split(",")),
    store="memory://",
    processing_guarantee="at_least_once",
    topic_partitions=job.partitions,
    topic_replication_factor=settings.replication_factor,
    topic_disable_leader=True,
    table_standby_replicas=0,
    web_enabled=True,
    web_port=settings.web_port,
    web_bind=settings.web_host,
    web_host=settings.web_host,
    datadir=str(DATADIR),
    autodiscover=False,
    consumer_auto_offset_reset="earliest",
    producer_acks=-1,
    producer_max_request_size=max(1_048_576, settings.max_record_bytes + 65_536),
    **_broker_settings(settings),
)

# faust's interface types (`Web`, `StreamT`, `TableManagerT`, a signal receiver) omit
# what its concrete classes have and its documentation uses: the `type: ignore`s below
# mark each such use
app.web.web_app.middlewares.append(json_errors)  # type: ignore[attr-defined]
if settings.web_token:
    app.web.web_app.middlewares.append(bearer_token(settings.web_token))  # type: ignore[attr-defined]

inputs = app.topic(*(names.stream(s) for s in job.streams), names.fanout,
                   key_serializer="raw", value_serializer="raw", partitions=job.partitions)
control = app.topic(names.control, key_serializer="raw", value_serializer="raw",
                    partitions=1)
COMMAND_WAIT = 0.05
"""Seconds the control agent waits for a burst of commands to fill a batch (up to
`batch_max`, as the worker's fetch) before deciding what it has: a burst is decided,
published and written to the accepted set a batch at a time, and a lone command waits
this much longer."""


job.highwater = lambda topic, partition: app.consumer.highwater(TP(topic, partition))
job.state = app.Table("state", partitions=job.partitions, key_type=bytes, value_type=bytes)
job.registered = app.Table("registered", partitions=1, key_type=bytes, value_type=bytes)


@app.agent(inputs)
async def events(stream: faust.StreamT) -> None:
    async for event in stream.noack().events():  # type: ignore[attr-defined]
        await job.stream_record(event)


@app.agent(control)
async def commands(stream: faust.StreamT) -> None:
    async for events in stream.noack().take_events(  # type: ignore[attr-defined]
            settings.batch_max, within=COMMAND_WAIT):
        await job.control_records(events)


@app.task
async def pump() -> None:
    """Start the results index, then evaluate and publish until the app stops."""
    job.producer = app.producer
    job.results_store = ResultsStore(
        job.client_config, names.all_results,
        CodecOptions(settings.schemas_dir, settings.registry_url), settings.loglevel,
        settings.results_trim_interval or TRIM_INTERVAL)
    job.results_store.start()
    log.info("juggler faust app %r: %d partitions, reorder %d ms, HTTP on http://%s:%d",
             settings.app_id, job.partitions, settings.reorder_ms, settings.web_host,
             settings.web_port)
    try:
        await job.pump()
    except Exception as exc:
        # as the worker does: what was not committed is processed again after a restart
        log.critical("the Faust runtime failed: %r; exiting with status %d", exc,
                     FAILURE_EXIT, exc_info=True)
        logging.shutdown()
        os._exit(FAILURE_EXIT)


@app.on_partitions_assigned.connect  # type: ignore[arg-type]
async def assigned(sender: Any, assigned: set[Any], **kwargs: Any) -> None:
    topics = {names.stream(s) for s in job.streams} | {names.fanout}
    job.owned = {tp.partition for tp in assigned if tp.topic in topics}


@app.on_partitions_revoked.connect  # type: ignore[arg-type]
async def revoked(sender: Any, revoked: set[Any], **kwargs: Any) -> None:
    topics = {names.stream(s) for s in job.streams} | {names.fanout}
    await job.revoked({tp.partition for tp in revoked if tp.topic in topics},
                      any(tp.topic == names.control for tp in revoked))


@app.on_before_shutdown.connect  # type: ignore[arg-type]
async def stop_results_index(sender: Any, **kwargs: Any) -> None:
    if job.results_store is not None:
        job.results_store.stop()


@app.on_rebalance_complete.connect  # type: ignore[arg-type]
async def rebalanced(sender: Any, **kwargs: Any) -> None:
    """Faust recovered the tables of the new assignment and is about to resume the
    streams: the tasks of the assigned partitions are restored first, so the pages see
    their queries and the first record finds its engine."""
    job.producer = app.producer  # the restore may write; the pump may not have started
    topics = {names.stream(s) for s in job.streams} | {names.fanout}
    inputs = [tp for tp in app.consumer.assignment() if tp.topic in topics | {names.control}]
    job.arrived.clear()
    await job.restore({tp.partition for tp in inputs if tp.topic in topics})
    job.assigned = True
    app.add_future(rewind(inputs))


async def rewind(inputs: list[Any]) -> None:
    """Once Faust resumed the streams, seek to their start the input partitions the
    group never committed an offset in and nothing arrived from yet
    (`FaustJob.never_committed` says why)."""
    await app.tables.recovery.completed.wait()  # type: ignore[attr-defined]
    for tp in job.never_committed(inputs):
        if (tp.topic, tp.partition) not in job.arrived:
            await app.consumer.seek(tp, 0)


@app.page("/health")
class Health(View):
    """200 once the group assigned this worker its partitions and Faust recovered the
    tables, 503 before and during a rebalance, and 503 with the reason while a broker
    cannot be reached (as the worker's `/health`)."""

    async def get(self, request: Request) -> Response:
        body: dict[str, object] = {"app": settings.app_id, "runtime": "faust",
                                   "partitions": sorted(job.tasks)}
        if job.results_store is not None:  # its indexer watched as the worker's is
            body["results_index"] = job.results_store.health()
        reason = job.unavailable()
        if reason is not None:
            return self.json({"status": "unavailable", "reason": reason, **body}, status=503)
        ready = job.assigned and not app.rebalancing and not app.in_recovery
        return self.json({"status": "ok" if ready else "starting", **body},
                         status=200 if ready else 503)


@app.page("/metrics")
class Metrics(View):
    async def get(self, request: Request) -> Response:
        return self.bytes(job.metrics.expose(), content_type=CONTENT_TYPE)


@app.page("/queries")
class Queries(View):
    async def get(self, request: Request) -> Response:
        return self.json({"queries": job.registered_queries()})


@app.page("/queries/{query_id}/results")
class Results(View):
    """A query's results by cursor, as the worker serves them (`http_api`)."""

    handler = staticmethod(results_handler(job))

    async def get(self, request: Request, query_id: str) -> Response:
        # under faust's aiohttp driver its Request and Response are aiohttp's
        return await self.handler(request)  # type: ignore[arg-type, return-value]


def main() -> None:
    """`juggler faust-worker`: this app's Faust worker, in this process."""
    worker = faust.Worker(app, loglevel=settings.loglevel)
    worker.execute_from_commandline()


