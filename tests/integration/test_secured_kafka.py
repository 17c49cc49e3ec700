"""Juggler on a secured cluster: the project's broker with a SASL_SSL listener (SCRAM
users, a CA and certificates made here, client certificates required), the worker
configured by environment, the CLI by flags, and clients without the credentials
refused."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from juggler.cli import main
from juggler.kafka.client_config import ENV_PREFIX, Security, client_config
from test_worker_harness import Client, WorkerProcess, unique
from tls_files import TlsFiles, make_tls_files

pytestmark = [pytest.mark.integration, pytest.mark.slow]

USER, PASSWORD = "juggler", "s3cret-Pa55"
QUERY = "SELECT H.alert FROM H WHERE H.beatrate < 50"
TOKEN = "t0ken-for-the-http-port"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, TlsFiles]]:
    """(the SASL_SSL bootstrap, the TLS files) of a broker of its own."""
    from juggler.kafka.broker import LocalBroker
    from juggler.kafka.secure_listener import SaslSslListener

    workdir = tmp_path_factory.mktemp("secured")
    tls = make_tls_files(workdir / "tls")
    listener = SaslSslListener(tls.broker_keystore, {USER: PASSWORD}, client_ca=tls.ca)
    with LocalBroker(workdir / "kafka", sasl_ssl=listener) as broker:
        yield broker.secure_bootstrap, tls


def settings(tls: TlsFiles, password: str = PASSWORD) -> dict[str, str]:
    """The security settings by field name (`Security`'s, as the flags name them)."""
    return {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": USER, "sasl_password": password,
            "ssl_ca_location": str(tls.ca),
            "ssl_certificate_location": str(tls.client_certificate),
            "ssl_key_location": str(tls.client_key)}


def flags(tls: TlsFiles, password: str = PASSWORD) -> list[str]:
    return [arg for name, value in settings(tls, password).items()
            for arg in ("--" + name.replace("_", "-"), value)]


def juggler(*args: str) -> Any:
    """`juggler ...` in this process with no JUGGLER_KAFKA_* variable: only its flags
    can tell it how to connect."""
    unset: dict[str, str | None] = {ENV_PREFIX + f.name.upper(): None for f in fields(Security)}
    return CliRunner().invoke(main, list(args), env=unset)


def http_status(url: str) -> int:
    """The status of a GET without any `Authorization` header."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_worker_registration_and_results_through_sasl_ssl(
        cluster: tuple[str, TlsFiles], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bootstrap, tls = cluster
    app_id = unique("sec")
    prefix = f"{app_id}."
    for name, value in settings(tls).items():  # the worker: its deployment's environment
        monkeypatch.setenv(ENV_PREFIX + name.upper(), value)
    worker = WorkerProcess(bootstrap, app_id, prefix, tmp_path, web_token=TOKEN)
    for name in settings(tls):
        monkeypatch.delenv(ENV_PREFIX + name.upper())
    common = ["--bootstrap", bootstrap, "--topic-prefix", prefix, *flags(tls)]
    with worker:
        run = juggler("query", "register", "slow", "--text", QUERY, *common)
        assert run.exit_code == 0, run.output
        events = tmp_path / "events.jsonl"
        events.write_text("".join(json.dumps({"stream": "H", "key": key, "ts": ts, "data": {
            "beatrate": rate, "vib": 1.0, "alert": True}}) + "\n"
            for key, ts, rate in (("p1", 1000, 45), ("p2", 1100, 80), ("p3", 1200, 30))))
        run = juggler("produce", "--events", str(events), *common)
        assert run.exit_code == 0, run.output
        run = juggler("progress", "--wait", "--app-id", app_id, *common)
        assert run.exit_code == 0, run.output

        run = juggler("results", "slow", "--from-beginning", *common)
        assert run.exit_code == 0, run.output
        assert sorted(json.loads(line)["key"] for line in run.output.splitlines()) == ["p1", "p3"]
        assert _http_results(worker, "slow") == ["p1", "p3"]  # the worker's own reader

        for path, status in (("/queries", 401), ("/queries/slow/results", 401),
                             ("/progress", 401), ("/health", 200), ("/metrics", 200)):
            assert http_status(worker.url + path) == status, path


def _http_results(worker: WorkerProcess, query_id: str, timeout: float = 30.0) -> list[str]:
    """The query's result keys from the worker's HTTP API, once its index has them
    (it follows the results topic on its own consumer)."""
    deadline = time.monotonic() + timeout
    while True:
        status, body = worker.get(f"/queries/{query_id}/results")
        keys = sorted(r["key"] for r in body["results"]) if status == 200 else []
        if len(keys) >= 2 or time.monotonic() > deadline:
            return keys
        time.sleep(0.2)


def test_clients_without_the_credentials_are_refused(cluster: tuple[str, TlsFiles]) -> None:
    bootstrap, tls = cluster
    for refused in ([], flags(tls, password="wrong")):
        run = juggler("query", "list", "--bootstrap", bootstrap, "--timeout", "5", *refused)
        assert run.exit_code != 0 and "cannot reach Kafka" in run.output, run.output
        assert "check --bootstrap and the security settings" in run.output
    wrong = Security.from_env({ENV_PREFIX + name.upper(): value
                               for name, value in settings(tls, password="wrong").items()})
    assert "SASL authentication error" in _first_error(wrong, bootstrap)
    run = juggler("topics", "apply", "--bootstrap", bootstrap, *flags(tls))
    assert run.exit_code == 0, run.output
    run = juggler("query", "list", "--bootstrap", bootstrap, *flags(tls))
    assert run.exit_code == 0, run.output  # the same command, with the credentials


def _first_error(security: Security, bootstrap: str, timeout: float = 30.0) -> str:
    """The first error a consumer reports (librdkafka tells authentication failures
    through its error callback, not through a failed call)."""
    from confluent_kafka import Consumer

    errors: list[Any] = []
    consumer = Consumer(client_config(bootstrap, {
        "group.id": unique("refused-"), "error_cb": errors.append, "log_level": 0},
        security=security))
    try:
        deadline = time.monotonic() + timeout
        while not errors and time.monotonic() < deadline:
            consumer.poll(0.2)
        return errors[0].str() if errors else "no error"
    finally:
        consumer.close()


def test_spark_jobs_write_and_read_through_sasl_ssl(cluster: tuple[str, TlsFiles],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """generate writes with Spark's Kafka sink and replay reads with its source, both
    given the same settings as the Java client's options (SCRAM JAAS, PEM stores)."""
    pytest.importorskip("pyspark")
    from juggler.spark.cli import spark as spark_group
    from juggler.spark.session import spark_session

    bootstrap, tls = cluster
    source, target = unique("spark-sec-") + ".", unique("spark-sec-") + "."
    session = spark_session("juggler-secured-test")
    try:
        for args in (["generate", "--seed", "3", "--count", "200", "--topic-prefix", source],
                     ["replay", "--from-topics", "--start-ts", "0", "--end-ts", str(2**62),
                      "--source-prefix", source, "--topic-prefix", target]):
            run = CliRunner().invoke(spark_group, [*args, "--bootstrap", bootstrap,
                                                   *flags(tls)])
            assert run.exit_code == 0, run.output
    finally:
        session.stop()
    for name, value in settings(tls).items():  # the test's own reader
        monkeypatch.setenv(ENV_PREFIX + name.upper(), value)
    copies = [Client(bootstrap, prefix) for prefix in (source, target)]
    counts = [sum(len(c.read(c.names.stream(s))) for s in "BHKT") for c in copies]
    assert counts == [200, 200]
