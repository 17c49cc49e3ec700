"""A SASL_SSL listener for the local broker: TLS with SCRAM users, as managed Kafka
clusters require.

Why: the project's clients must be shown to work against a secured cluster, and to be
refused by it without credentials, on the same real broker the other integration tests
use. The broker keeps its PLAINTEXT listener (inter-broker traffic and its own
readiness check); this listener is an extra port beside it.

The files are PEM, which Kafka brokers read directly (`ssl.keystore.type=PEM`): no
Java keystore tooling is needed to make them. SCRAM credentials are written into the
cluster's bootstrap metadata when the storage is formatted (`kafka-storage format
--add-scram`), so they exist before the first client connects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

NAME = "SASL_SSL"


@dataclass(frozen=True)
class SaslSslListener:
    keystore: Path
    """PEM: the broker's private key (unencrypted PKCS#8) followed by its certificate
    chain; the certificate must name the host clients connect to (127.0.0.1)."""
    users: Mapping[str, str] = field(default_factory=dict)
    """SCRAM user name -> password."""
    mechanism: str = "SCRAM-SHA-512"
    client_ca: Path | None = None
    """PEM CA: when given, clients must also present a certificate it signed."""

    def properties(self, port: int) -> dict[str, str]:
        """The broker settings of this listener on 127.0.0.1:`port`."""
        prefix = f"listener.name.{NAME.lower()}."
        props = {
            "sasl.enabled.mechanisms": self.mechanism,
            f"{prefix}{self.mechanism.lower()}.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            f"{prefix}ssl.keystore.type": "PEM",
            f"{prefix}ssl.keystore.location": str(self.keystore),
        }
        if self.client_ca is not None:
            props.update({f"{prefix}ssl.truststore.type": "PEM",
                          f"{prefix}ssl.truststore.location": str(self.client_ca),
                          f"{prefix}ssl.client.auth": "required"})
        return props

    def format_arguments(self) -> list[str]:
        """`kafka-storage format` arguments creating the SCRAM users."""
        args: list[str] = []
        for name, password in self.users.items():
            if any(c in name + password for c in ",[]="):
                raise ValueError("SCRAM user names and passwords for format must not "
                                 "contain , [ ] or =")
            args += ["--add-scram", f"{self.mechanism}=[name={name},password={password}]"]
        return args
