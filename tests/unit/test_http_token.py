"""The worker's HTTP port with a bearer token: without it, 401; probes and scrapers
(`/health`, `/metrics`) still answer."""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from fake_port import port_reads, serve_fake
from juggler.runtime.pages import EMPTY


def fake_worker(index: Path) -> SimpleNamespace:
    return SimpleNamespace(ready=True, tasks={}, unavailable=lambda: None,
                           pages=replace(EMPTY, queries={"q1": "SELECT ..."}),
                           metrics=SimpleNamespace(cached=lambda: None,
                                                   expose=lambda: b"juggler_up 1\n"),
                           **port_reads(index))


def get(port: int, path: str, token: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> int:
    index = tmp_path_factory.mktemp("index") / "results.db"
    return serve_fake(fake_worker(index), token="s3cret").port


@pytest.mark.parametrize("token, status", [(None, 401), ("wrong", 401), ("s3cret", 200)])
def test_queries_need_the_token(guarded: int, token: str | None, status: int) -> None:
    assert get(guarded, "/queries", token) == status


def test_health_and_metrics_stay_open(guarded: int) -> None:
    assert [get(guarded, path) for path in ("/health", "/health/results", "/metrics")] \
        == [200, 200, 200]


def test_no_token_means_open(tmp_path: Path) -> None:
    assert get(serve_fake(fake_worker(tmp_path / "results.db")).port, "/queries") == 200


def test_a_header_of_non_utf8_bytes_is_refused_not_a_server_error(guarded: int) -> None:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", guarded, timeout=10)
    connection.putrequest("GET", "/queries")
    connection.putheader("Authorization", b"Bearer caf\xe9")
    connection.endheaders()
    assert connection.getresponse().status == 401
