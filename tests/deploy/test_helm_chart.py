"""The Helm chart `helm/juggler`, rendered and linted by the real Helm CLI (built from
its Go module, tools/helm) with default and non-default values; the assertions are
on the parsed manifests Kubernetes would receive."""

from __future__ import annotations

import json
import tarfile
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy_parsers import CHART, ROOT, Helm, grafana_dashboards, parse_juggler_args
from juggler.kafka.client_config import ENV_PREFIX, Security
from juggler.runtime.settings import Settings

CUSTOM: dict[str, Any] = {
    "replicaCount": 5,
    "image": {"repository": "registry.example/juggler", "tag": "1.2.3"},
    "kafka": {"bootstrap": "kafka-0.kafka:9092,kafka-1.kafka:9092"},
    "partitions": 12,
    "webPort": 7070,
    "config": {"runtime": "faust", "app_id": "icu", "allowed_lateness": 500,
               "retention": 60000, "max_idle_ms": 200, "idle_estimate": False,
               "idle_margin_ms": 35, "reorder_ms": 300,
               "max_record_bytes": 2000000, "session_timeout": 10},
    "extraEnv": [{"name": "JUGGLER_BATCH_MAX", "value": "200"}],
    "resources": {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
    "metrics": {"podAnnotations": False,
                "serviceMonitor": {"enabled": True, "interval": "30s",
                                   "labels": {"release": "kube-prometheus-stack"}}},
    "dashboards": {"annotations": {"grafana_folder": "Juggler"}},
}
SECURED: dict[str, Any] = {
    "kafka": {"bootstrap": "kafka.example:9093", "securityProtocol": "SASL_SSL",
              "sasl": {"mechanism": "SCRAM-SHA-512", "existingSecret": "kafka-user"},
              "tls": {"existingSecret": "kafka-tls", "certificateKey": "tls.crt",
                      "keyKey": "tls.key"}},
    "webToken": {"existingSecret": "juggler-http"},
}
"""A secured cluster: SASL_SSL with credentials and PEM files from Secrets, and a token
on the workers' HTTP port."""
CHART_SETTINGS = {"bootstrap", "partitions", "web_port", "web_host", "web_token", "instance_id",
                  "create_topics"}
"""Settings the chart derives from its own values, so `config` must not set them."""


def by_kind(manifests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    kinds = [m["kind"] for m in manifests]
    assert len(kinds) == len(set(kinds)), kinds
    return {m["kind"]: m for m in manifests}


def container(pod_owner: dict[str, Any]) -> dict[str, Any]:
    (only,) = pod_owner["spec"]["template"]["spec"]["containers"]
    return only


def env(container: dict[str, Any]) -> dict[str, str]:
    """The container's literal env values (entries set `valueFrom` are left out)."""
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def env_from(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The container's env entries set from elsewhere (`valueFrom`)."""
    return {e["name"]: e["valueFrom"] for e in container["env"] if "valueFrom" in e}


@pytest.fixture(scope="module")
def default(helm: Helm) -> dict[str, dict[str, Any]]:
    return by_kind(helm.template())


@pytest.fixture(scope="module")
def custom(helm: Helm, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    return by_kind(helm.template(CUSTOM, tmp_path_factory.mktemp("values")))


@pytest.mark.parametrize("values", [None, CUSTOM, SECURED], ids=["default", "custom", "secured"])
def test_chart_lints_clean(helm: Helm, tmp_path: Path, values: dict[str, Any] | None) -> None:
    result = helm.run("lint", "--strict", str(CHART), values=values, tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_default_release(default: dict[str, dict[str, Any]]) -> None:
    assert set(default) == {"Deployment", "Service", "ConfigMap", "Job"}
    deployment = default["Deployment"]
    assert deployment["spec"]["replicas"] == 2
    worker = container(deployment)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert worker["image"] == f"juggler:{version}"
    assert worker["args"] == ["worker"]
    parse_juggler_args(worker["args"])
    assert worker["resources"]["requests"] == {"cpu": "500m", "memory": "512Mi"}
    settings = Settings.from_env(env(worker))
    assert (settings.bootstrap, settings.partitions, settings.web_port) == ("kafka:9092", 4, 6066)
    assert settings.create_topics is False  # the topic-setup job did it
    assert env(worker)["JUGGLER_RUNTIME"] == "worker"  # said, not only defaulted
    assert settings.runtime == "worker"


def test_custom_values_reach_the_workers(custom: dict[str, dict[str, Any]]) -> None:
    deployment = custom["Deployment"]
    assert deployment["spec"]["replicas"] == 5
    worker = container(deployment)
    assert worker["image"] == "registry.example/juggler:1.2.3"
    assert worker["resources"] == CUSTOM["resources"]
    worker_env = env(worker)
    assert worker_env["JUGGLER_BATCH_MAX"] == "200"
    settings = Settings.from_env(worker_env)
    assert settings.bootstrap == CUSTOM["kafka"]["bootstrap"]
    assert settings.partitions == 12
    assert settings.app_id == "icu"
    assert (settings.allowed_lateness, settings.retention) == (500, 60000)
    assert (settings.max_idle_ms, settings.max_record_bytes) == (200, 2_000_000)
    assert (settings.idle_estimate, settings.idle_margin_ms) == (False, 35)
    assert settings.session_timeout == 10.0
    assert settings.batch_max == 200
    # the Faust runtime: the same image and command (the image has the faust extra)
    assert (settings.runtime, settings.reorder_ms) == ("faust", 300)
    assert worker["args"] == ["worker"]


@pytest.mark.parametrize("release", ["default", "custom"])
def test_each_pod_is_its_own_instance_and_keeps_no_state(release: str,
                                                         request: pytest.FixtureRequest) -> None:
    """The instance id (the transactional id's suffix) is the pod's name, unique among
    the replicas and kept across container restarts; state lives in Kafka (the state
    topic), so the pod mounts nothing but scratch space."""
    deployment = request.getfixturevalue(release)["Deployment"]
    worker = container(deployment)
    assert env_from(worker)["JUGGLER_INSTANCE_ID"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert not {name for name in env(worker) if name.startswith("JUGGLER_")} - \
        {f"JUGGLER_{f.name.upper()}" for f in fields(Settings)} - \
        {f"{ENV_PREFIX}{f.name.upper()}" for f in fields(Security)}, "a variable no setting reads"
    assert [m["mountPath"] for m in worker["volumeMounts"]] == ["/tmp"]
    assert [v["emptyDir"] for v in deployment["spec"]["template"]["spec"]["volumes"]] == [{}]


def test_every_config_key_is_a_worker_setting() -> None:
    """A misspelt key would become an env variable the worker ignores."""
    config = yaml.safe_load((CHART / "values.yaml").read_text())["config"]
    assert set(config) <= {f.name for f in fields(Settings)} - CHART_SETTINGS


@pytest.mark.parametrize("release", ["default", "custom"])
def test_probes_and_service_use_the_http_port(release: str, request: pytest.FixtureRequest) -> None:
    manifests = request.getfixturevalue(release)
    worker = container(manifests["Deployment"])
    (port,) = worker["ports"]
    assert port["name"] == "http"
    assert port["containerPort"] == Settings.from_env(env(worker)).web_port
    # alive while the port accepts connections (the worker exits on a failure); ready,
    # in the Service, once /health says its partitions are restored: a probe on
    # /health would kill a worker in the middle of a long restore
    for probe in ("startupProbe", "livenessProbe"):
        assert worker[probe]["tcpSocket"] == {"port": "http"} and "httpGet" not in worker[probe]
    assert worker["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    (service_port,) = manifests["Service"]["spec"]["ports"]
    assert (service_port["port"], service_port["targetPort"]) == (port["containerPort"], "http")
    selector = manifests["Service"]["spec"]["selector"]
    pod_labels = manifests["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= pod_labels.items()


def test_metrics_scraping_by_annotations_or_service_monitor(
        default: dict[str, dict[str, Any]], custom: dict[str, dict[str, Any]]) -> None:
    annotations = default["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {"prometheus.io/scrape": "true", "prometheus.io/port": "6066",
                           "prometheus.io/path": "/metrics"}
    assert "annotations" not in custom["Deployment"]["spec"]["template"]["metadata"]
    monitor = custom["ServiceMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s"}]
    assert monitor["spec"]["selector"]["matchLabels"] == custom["Service"]["spec"]["selector"]


@pytest.mark.parametrize("release", ["default", "custom"])
def test_dashboards_configmap_holds_every_dashboard(release: str,
                                                   request: pytest.FixtureRequest) -> None:
    """One copy: the chart's dashboards/ is a symlink Helm follows into
    deploy/grafana/dashboards."""
    files = grafana_dashboards()
    configmap = request.getfixturevalue(release)["ConfigMap"]
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["data"] == {f.name: f.read_text() for f in files}
    for text in configmap["data"].values():
        json.loads(text)
    if release == "custom":
        assert configmap["metadata"]["annotations"] == {"grafana_folder": "Juggler"}


def test_topic_setup_job_is_a_hook_before_the_workers(default: dict[str, dict[str, Any]],
                                                      custom: dict[str, dict[str, Any]]) -> None:
    for manifests in (default, custom):
        job = manifests["Job"]
        hooks = job["metadata"]["annotations"]["helm.sh/hook"].split(",")
        assert set(hooks) == {"pre-install", "pre-upgrade"}
        topics = container(job)
        assert topics["args"] == ["topics", "apply"]
        parse_juggler_args(topics["args"])
        assert topics["image"] == container(manifests["Deployment"])["image"]
        job_env = env(topics)
        worker_env = env(container(manifests["Deployment"]))
        for name in ("JUGGLER_BOOTSTRAP", "JUGGLER_PARTITIONS"):
            assert job_env[name] == worker_env[name]


def test_without_the_job_the_workers_create_their_topics(helm: Helm, tmp_path: Path) -> None:
    manifests = by_kind(helm.template({"topicSetup": {"enabled": False}}, tmp_path))
    assert "Job" not in manifests
    assert Settings.from_env(env(container(manifests["Deployment"]))).create_topics is True


def test_security_settings_reach_the_workers_and_the_topic_job(helm: Helm,
                                                               tmp_path: Path) -> None:
    """Both connect the same way: the protocol and mechanism as values, the SASL
    credentials from their Secret, the PEM files from theirs, mounted where the
    settings point; the workers' HTTP port takes its token from a Secret too."""
    manifests = by_kind(helm.template(SECURED, tmp_path))
    for owner in (manifests["Deployment"], manifests["Job"]):
        pod = container(owner)
        settings = env(pod)
        assert settings["JUGGLER_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
        assert settings["JUGGLER_KAFKA_SASL_MECHANISM"] == "SCRAM-SHA-512"
        secret_refs = {name: ref["secretKeyRef"] for name, ref in env_from(pod).items()
                       if "secretKeyRef" in ref}
        assert secret_refs["JUGGLER_KAFKA_SASL_USERNAME"] == {"name": "kafka-user",
                                                              "key": "username"}
        assert secret_refs["JUGGLER_KAFKA_SASL_PASSWORD"] == {"name": "kafka-user",
                                                              "key": "password"}
        mount = next(m for m in pod["volumeMounts"] if m["mountPath"] == "/etc/juggler/tls")
        assert mount["readOnly"] is True
        volume = next(v for v in owner["spec"]["template"]["spec"]["volumes"]
                      if v["name"] == mount["name"])
        assert volume["secret"]["secretName"] == "kafka-tls"
        assert {k: v for k, v in settings.items() if k.startswith("JUGGLER_KAFKA_SSL")} == {
            "JUGGLER_KAFKA_SSL_CA_LOCATION": "/etc/juggler/tls/ca.crt",
            "JUGGLER_KAFKA_SSL_CERTIFICATE_LOCATION": "/etc/juggler/tls/tls.crt",
            "JUGGLER_KAFKA_SSL_KEY_LOCATION": "/etc/juggler/tls/tls.key"}
    worker = container(manifests["Deployment"])
    assert env_from(worker)["JUGGLER_WEB_TOKEN"] == {
        "secretKeyRef": {"name": "juggler-http", "key": "token"}}
    assert Settings.from_env(env(worker)).web_host == "0.0.0.0"  # probes reach the pod


def test_sasl_without_its_secret_is_refused(helm: Helm, tmp_path: Path) -> None:
    result = helm.run("template", "demo", str(CHART), tmp_path=tmp_path, values={
        "kafka": {"securityProtocol": "SASL_SSL", "sasl": {"mechanism": "PLAIN"}}})
    assert result.returncode != 0
    assert "kafka.sasl.existingSecret is required" in result.stderr


@pytest.mark.parametrize("values, message", [
    ({"config": {"runtime": "flink"}}, 'config.runtime must be worker or faust, not "flink"'),
    ({"config": {"runtime": "faust"}, **SECURED},
     "config.runtime faust connects with PLAINTEXT only"),
], ids=["unknown", "faust-on-a-secured-cluster"])
def test_a_runtime_the_workers_would_refuse_is_refused(helm: Helm, tmp_path: Path,
                                                       values: dict[str, Any],
                                                       message: str) -> None:
    """Settings.checked refuses an unknown runtime and the Faust app a secured cluster,
    at start: the chart says so at install instead of leaving pods crash-looping."""
    result = helm.run("template", "demo", str(CHART), values=values, tmp_path=tmp_path)
    assert result.returncode != 0
    assert message in result.stderr


def test_missing_bootstrap_is_refused(helm: Helm, tmp_path: Path) -> None:
    result = helm.run("template", "demo", str(CHART), values={"kafka": {"bootstrap": ""}},
                      tmp_path=tmp_path)
    assert result.returncode != 0
    assert "kafka.bootstrap is required" in result.stderr


def test_packaged_chart_carries_the_dashboards_themselves(helm: Helm, tmp_path: Path) -> None:
    """`helm package` follows the dashboards symlink, so an installed package needs
    no checkout of deploy/grafana."""
    files = grafana_dashboards()
    result = helm.run("package", str(CHART), "--destination", str(tmp_path))
    assert result.returncode == 0, result.stderr
    (package,) = tmp_path.glob("juggler-*.tgz")
    with tarfile.open(package) as archive:
        packed = {m.name: m for m in archive.getmembers()}
        for dashboard in files:
            member = packed[f"juggler/dashboards/{dashboard.name}"]
            assert member.isfile()
            extracted = archive.extractfile(member)
            assert extracted is not None and extracted.read() == dashboard.read_bytes()
