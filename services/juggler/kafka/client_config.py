"""How every Kafka client of the project connects: bootstrap servers plus the cluster's
security settings, merged in one place.

Why one module: managed Kafka clusters require TLS and SASL, and a setting honoured by
the worker but forgotten by `juggler query register`, the demo or a Spark job would
leave that tool unable to connect (or, worse, talking in clear text). So no client
builds its own `bootstrap.servers` dict: librdkafka clients (worker, CLI, demo) take
`client_config(...)`, Spark's Kafka source and sink take `spark_options(...)`, and
both read the same `Security`.

A long-running process (the worker, its results index) also routes every client's log
lines and errors to one place, `client_log.watched` on top of `client_config`: a broker
outage then logs a line per broker per 30 s instead of one per failed connection.

Where the settings come from: the environment (`JUGGLER_KAFKA_*`, below), which CLI
flags overwrite for their process (`juggler.kafka.cli_options`). Child processes
(the demo's worker) inherit them the same way a deployment's containers get them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
ENV_PREFIX = "JUGGLER_KAFKA_"

_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class SecurityError(ValueError):
    """The security settings contradict each other or name a missing file."""


@dataclass(frozen=True)
class Security:
    """The standard Kafka client security settings, named as librdkafka names them
    (`security.protocol`, `sasl.mechanism`, `ssl.ca.location`...); each field is read
    from `JUGGLER_KAFKA_<FIELD>` (e.g. `JUGGLER_KAFKA_SASL_PASSWORD`)."""

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    ssl_ca_location: Path | None = None
    """PEM file of the CA(s) that signed the brokers' certificates; None: the system's."""
    ssl_certificate_location: Path | None = None
    """PEM client certificate, for brokers that require TLS client authentication."""
    ssl_key_location: Path | None = None
    """PEM private key of the client certificate (PKCS#8 for the Spark jobs' Java client)."""
    ssl_key_password: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Security:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw:
                values[f.name] = Path(raw) if f.name.endswith("_location") else raw
        return cls(**values).checked()

    def checked(self) -> Security:
        """Refuse what could only fail later, at the first connection, with a vaguer
        message (or silently connect without the credentials given)."""
        protocol = self.security_protocol.upper()
        if protocol not in PROTOCOLS:
            raise SecurityError(f"security protocol {self.security_protocol!r}: expected "
                                f"one of {', '.join(PROTOCOLS)}")
        if protocol.startswith("SASL_"):
            if self.sasl_mechanism is None or self.sasl_mechanism.upper() not in MECHANISMS:
                raise SecurityError(f"{protocol} needs a SASL mechanism, one of "
                                    f"{', '.join(MECHANISMS)}")
            if not self.sasl_username or self.sasl_password is None:
                raise SecurityError(f"{protocol} needs a SASL username and password")
        elif self.sasl_username or self.sasl_password:
            raise SecurityError(f"SASL credentials are given but the security protocol "
                                f"is {protocol}: use SASL_SSL (or SASL_PLAINTEXT)")
        if (self.ssl_certificate_location is None) != (self.ssl_key_location is None):
            raise SecurityError("a client certificate needs its key, and a key its certificate")
        for f in fields(self):
            path = getattr(self, f.name)
            if isinstance(path, Path) and not path.is_file():
                raise SecurityError(f"{ENV_PREFIX}{f.name.upper()}: no file {path}")
        return Security(**{**self.__dict__, "security_protocol": protocol,
                           "sasl_mechanism": self.sasl_mechanism and self.sasl_mechanism.upper()})

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def librdkafka(self) -> dict[str, str]:
        """The settings as librdkafka (confluent-kafka) takes them."""
        out = {"security.protocol": self.security_protocol}
        if self.security_protocol.startswith("SASL_"):
            out.update({"sasl.mechanism": str(self.sasl_mechanism),
                        "sasl.username": str(self.sasl_username),
                        "sasl.password": str(self.sasl_password)})
        if self.tls:
            optional = {"ssl.ca.location": self.ssl_ca_location,
                        "ssl.certificate.location": self.ssl_certificate_location,
                        "ssl.key.location": self.ssl_key_location,
                        "ssl.key.password": self.ssl_key_password}
            out.update({k: str(v) for k, v in optional.items() if v is not None})
        return out

    def java(self) -> dict[str, str]:
        """The settings as the Java client takes them (Spark's connector passes on
        options prefixed `kafka.`). PEM files are read as PEM trust and key stores
        (Kafka clients >= 2.7), so the same files serve both clients."""
        out = {"security.protocol": self.security_protocol}
        if self.security_protocol.startswith("SASL_"):
            mechanism = str(self.sasl_mechanism)
            out.update({"sasl.mechanism": mechanism,
                        "sasl.jaas.config": f"{_JAAS_MODULES[mechanism]} required "
                                            f"username={_quoted(str(self.sasl_username))} "
                                            f"password={_quoted(str(self.sasl_password))};"})
        if self.tls:
            if self.ssl_ca_location is not None:
                out.update({"ssl.truststore.type": "PEM",
                            "ssl.truststore.certificates": self.ssl_ca_location.read_text()})
            if self.ssl_certificate_location is not None and self.ssl_key_location is not None:
                out.update({"ssl.keystore.type": "PEM",
                            "ssl.keystore.certificate.chain":
                                self.ssl_certificate_location.read_text(),
                            "ssl.keystore.key": self.ssl_key_location.read_text()})
                if self.ssl_key_password is not None:
                    out["ssl.key.password"] = self.ssl_key_password
        return out


def _quoted(value: str) -> str:
    """A JAAS option value: double-quoted, with `\\` and `"` escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def client_config(bootstrap: str, settings: Mapping[str, object] | None = None, *,
                  security: Security | None = None) -> dict[str, Any]:
    """A confluent-kafka Producer / Consumer / AdminClient config: `bootstrap`, the
    security settings (default: `Security.from_env()`), then the client's own
    `settings` (librdkafka names, e.g. `{"group.id": "g"}`)."""
    chosen = Security.from_env() if security is None else security
    return {"bootstrap.servers": bootstrap, **chosen.librdkafka(), **(settings or {})}


def spark_options(bootstrap: str, security: Security | None = None) -> dict[str, str]:
    """Options of Spark's `format("kafka")` source and sink: `kafka.bootstrap.servers`
    and the same security settings as `client_config`, in the Java client's names."""
    chosen = Security.from_env() if security is None else security
    return {"kafka.bootstrap.servers": bootstrap,
            **{f"kafka.{k}": v for k, v in chosen.java().items()}}
