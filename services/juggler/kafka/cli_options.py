"""The command-line options every Kafka command shares: where the cluster is
(`--bootstrap`) and how to authenticate to it (`--security-protocol`, `--sasl-*`,
`--ssl-*`, each also read from its `JUGGLER_KAFKA_*` variable).

Why flags become environment variables: `client_config.Security.from_env()` is the one
place every client reads its security settings from, and a command's child processes
(the demo's worker) must connect the same way. So a flag sets its variable for the
command's run (and its children), and the previous value comes back afterwards.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields
from typing import Any

import click

from juggler.kafka.client_config import ENV_PREFIX, MECHANISMS, PROTOCOLS, Security, SecurityError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

_HELP = {
    "security_protocol": "PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL.",
    "sasl_mechanism": f"{', '.join(MECHANISMS)}.",
    "sasl_username": "SASL user name.",
    "sasl_password": "SASL password (prefer the variable: a flag shows in `ps`).",
    "ssl_ca_location": "PEM file of the CA that signed the brokers' certificates.",
    "ssl_certificate_location": "PEM client certificate (brokers requiring TLS client auth).",
    "ssl_key_location": "PEM private key of the client certificate.",
    "ssl_key_password": "Password of that key, if it is encrypted.",
}
_CHOICES = {"security_protocol": click.Choice(PROTOCOLS, case_sensitive=False),
            "sasl_mechanism": click.Choice(MECHANISMS, case_sensitive=False)}


def security_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the security flags to a click command; the command runs with them in the
    environment, checked first (a contradiction is a usage error, before any
    connection is tried)."""
    names = [f.name for f in fields(Security)]

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        given = {ENV_PREFIX + name.upper(): str(value) for name in names
                 if (value := kwargs.pop("kafka_" + name)) is not None}
        with _environment(given):
            try:
                Security.from_env()
            except SecurityError as exc:
                raise click.UsageError(str(exc)) from None
            return command(*args, **kwargs)

    for name in reversed(names):
        run = click.option("--" + name.replace("_", "-"), "kafka_" + name, default=None,
                           type=_CHOICES.get(name),
                           metavar="FILE" if name.endswith("_location") else None,
                           help=f"{_HELP[name]} [env {ENV_PREFIX}{name.upper()}]")(run)
    return run


def kafka_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """`--bootstrap` and the security flags, for every command that talks to Kafka."""
    return click.option("--bootstrap", envvar="JUGGLER_BOOTSTRAP", default=DEFAULT_BOOTSTRAP,
                        show_default=True, metavar="HOST:PORT",
                        help="Kafka bootstrap servers [env JUGGLER_BOOTSTRAP].")(
        security_options(command))


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
