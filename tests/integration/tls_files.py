"""A throwaway certificate authority and the PEM files a secured test cluster needs
(no tests here; imported by the security tests).

Made with `cryptography` in the test, so nothing depends on keystores or certificates
lying around: a CA, a broker certificate for 127.0.0.1 (what librdkafka checks by
default, `ssl.endpoint.identification.algorithm=https`), and a client certificate.
Keys are unencrypted PKCS#8, the form both the broker's and Spark's Java PEM stores read.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import pytest

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    """The CA certificate: clients trust it, the broker checks client certificates with it."""
    broker_keystore: Path
    """The broker's key followed by its certificate (Kafka's PEM keystore)."""
    client_certificate: Path
    client_key: Path


def make_tls_files(directory: Path) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("juggler test CA")
    ca = (_builder(ca_name, ca_name, ca_key)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    broker_key = ec.generate_private_key(ec.SECP256R1())
    broker = (_builder(_name("127.0.0.1"), ca_name, broker_key)
              .add_extension(x509.SubjectAlternativeName(
                  [x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                   x509.DNSName("localhost")]), critical=False)
              .sign(ca_key, hashes.SHA256()))
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _builder(_name("juggler client"), ca_name, client_key).sign(ca_key, hashes.SHA256())
    files = TlsFiles(directory / "ca.pem", directory / "broker.pem",
                     directory / "client.pem", directory / "client.key")
    files.ca.write_bytes(_pem(ca))
    files.broker_keystore.write_bytes(_key(broker_key) + _pem(broker))
    files.client_certificate.write_bytes(_pem(client))
    files.client_key.write_bytes(_key(client_key))
    return files


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
             ) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1)))


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
