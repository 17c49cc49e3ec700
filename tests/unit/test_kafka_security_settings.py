"""The Kafka security settings every client takes: from `JUGGLER_KAFKA_*` or flags,
checked before any connection, and the same for librdkafka and Spark's Java client."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from juggler.cli import main
from juggler.kafka.client_config import Security, SecurityError, client_config, spark_options


def env(**values: str) -> dict[str, str]:
    return {f"JUGGLER_KAFKA_{name.upper()}": value for name, value in values.items()}


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    return path


def test_plaintext_by_default() -> None:
    assert client_config("k:9092", {"group.id": "g"}, security=Security.from_env({})) == {
        "bootstrap.servers": "k:9092", "security.protocol": "PLAINTEXT", "group.id": "g"}


def test_sasl_ssl_for_librdkafka_and_for_spark(ca: Path) -> None:
    security = Security.from_env(env(security_protocol="sasl_ssl",
                                     sasl_mechanism="scram-sha-512", sasl_username="app",
                                     sasl_password='pa"ss\\word', ssl_ca_location=str(ca)))
    assert client_config("k:9093", security=security) == {
        "bootstrap.servers": "k:9093", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "app",
        "sasl.password": 'pa"ss\\word', "ssl.ca.location": str(ca)}
    spark = spark_options("k:9093", security)
    assert spark["kafka.bootstrap.servers"] == "k:9093"
    assert spark["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="app" password="pa\\"ss\\\\word";')
    assert (spark["kafka.ssl.truststore.type"], spark["kafka.ssl.truststore.certificates"]) \
        == ("PEM", ca.read_text())


@pytest.mark.parametrize("values, problem", [
    ({"security_protocol": "TLS"}, "expected one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ({"security_protocol": "SASL_SSL", "sasl_username": "u", "sasl_password": "p"},
     "needs a SASL mechanism"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"}, "needs a SASL username"),
    ({"sasl_username": "u", "sasl_password": "p"}, "use SASL_SSL"),
    ({"security_protocol": "SSL", "ssl_ca_location": "/nonexistent/ca.pem"},
     "JUGGLER_KAFKA_SSL_CA_LOCATION: no file /nonexistent/ca.pem"),
    ({"security_protocol": "SSL", "ssl_key_location": "/etc/hostname"}, "needs its key"),
])
def test_contradictions_are_refused_before_connecting(values: dict[str, str], problem: str) -> None:
    with pytest.raises(SecurityError, match=problem.replace("(", r"\(")):
        Security.from_env(env(**values))


def test_cli_flags_are_checked_and_do_not_outlive_the_command(ca: Path) -> None:
    run = CliRunner().invoke(main, ["query", "list", "--security-protocol", "SASL_SSL",
                                    "--sasl-username", "app", "--sasl-password", "x",
                                    "--ssl-ca-location", str(ca)])
    assert run.exit_code == 2 and "SASL_SSL needs a SASL mechanism" in run.output
    assert "JUGGLER_KAFKA_SASL_USERNAME" not in os.environ


def test_the_demo_refuses_security_settings_for_its_own_plaintext_broker() -> None:
    run = CliRunner().invoke(main, ["demo", "--security-protocol", "SSL"])
    assert run.exit_code == 2 and "--bootstrap" in run.output
