"""A minimal client for a Confluent-compatible Schema Registry (REST API).

Why our own: the codec needs only two calls, register a schema under a subject and
fetch a schema by id, and caches both answers forever (ids are immutable), so the
standard library's urllib is enough; confluent-kafka's registry client would pull in
httpx, authlib and attrs for this.

Errors split by whose fault they are: an id the registry does not know is a property
of the message (`UnknownSchemaId`; the codec turns it into a `DecodeError`, so the
worker dead-letters the message). An unreachable or failing registry is not
(`RegistryError`): the caller should retry or stop, never dead-letter good data.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryError(RuntimeError):
    """The registry could not be reached or answered with an error (not the data's fault)."""


class UnknownSchemaId(LookupError):
    """The registry answered 404 for a schema id."""


class RegistryClient:
    """Register and look up Avro schemas; every answer is cached for the process."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"schema registry URL must start with http:// or https://, "
                             f"got {url!r}")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._ids: dict[tuple[str, str], int] = {}
        self._schemas: dict[int, str] = {}
        self._lock = threading.Lock()

    def register(self, subject: str, schema_json: str) -> int:
        """`POST /subjects/<subject>/versions`: the id of `schema_json` under `subject`
        (the registry returns the existing id when the schema is already there)."""
        cache_key = (subject, schema_json)
        with self._lock:
            cached = self._ids.get(cache_key)
        if cached is not None:
            return cached
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions"
        answer = self._request("POST", path, {"schema": schema_json})
        schema_id = answer.get("id") if isinstance(answer, dict) else None
        if not isinstance(schema_id, int):
            raise RegistryError(f"{self.url}{path} answered without an integer id: "
                                f"{str(answer)[:200]}")
        with self._lock:
            self._ids[cache_key] = schema_id
            self._schemas.setdefault(schema_id, schema_json)
        return schema_id

    def schema(self, schema_id: int) -> str:
        """`GET /schemas/ids/<id>`: the schema's JSON text. Raises `UnknownSchemaId`."""
        with self._lock:
            cached = self._schemas.get(schema_id)
        if cached is not None:
            return cached
        path = f"/schemas/ids/{schema_id}"
        try:
            answer = self._request("GET", path, None)
        except urllib.error.HTTPError as exc:  # re-raised by _request only for 404
            raise UnknownSchemaId(f"schema id {schema_id} is not in the registry at "
                                  f"{self.url}") from exc
        text = answer.get("schema") if isinstance(answer, dict) else None
        schema_type = answer.get("schemaType", "AVRO") if isinstance(answer, dict) else None
        if not isinstance(text, str) or schema_type != "AVRO":
            raise UnknownSchemaId(f"schema id {schema_id} in the registry at {self.url} "
                                  f"is not an Avro schema")
        with self._lock:
            self._schemas[schema_id] = text
        return text

    def _request(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 404 and method == "GET":
                raise
            detail = exc.read()[:300].decode("utf-8", "replace")
            raise RegistryError(f"{method} {self.url}{path} failed: HTTP {exc.code} "
                                f"{detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RegistryError(f"{method} {self.url}{path} failed: {reason}") from None
        try:
            return json.loads(payload)
        except ValueError:
            raise RegistryError(f"{method} {self.url}{path} answered with non-JSON: "
                                f"{payload[:200]!r}") from None
