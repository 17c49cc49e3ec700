"""`docker-compose.yml`, as Docker Compose's own loader (compose-go) resolves it:
what `docker compose up` would start, in which order, with which settings."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml

from juggler.kafka.broker import DEFAULT_VERSION as KAFKA_VERSION
from juggler.kafka.client_config import ENV_PREFIX, Security
from juggler.runtime.settings import Settings

from deploy_parsers import ROOT, Compose, grafana_dashboards, parse_juggler_args

SERVICES = {"kafka", "topics", "worker", "spark-generator", "prometheus", "grafana"}


@pytest.fixture(scope="module")
def model(compose: Compose) -> dict[str, Any]:
    return compose.model()


def services(model: dict[str, Any]) -> dict[str, Any]:
    return model["services"]


def juggler_commands() -> set[str]:
    from juggler.cli import main

    return set(main.commands)


def env(service: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in (service.get("environment") or {}).items() if v is not None}


def kafka_listeners(kafka: dict[str, Any]) -> dict[str, str]:
    """Advertised listener name -> host:port, as clients are told to connect."""
    return dict(entry.split("://") for entry in env(kafka)["KAFKA_ADVERTISED_LISTENERS"].split(","))


def test_every_service_of_the_stack_is_there(model: dict[str, Any]) -> None:
    assert set(services(model)) == SERVICES


def test_kafka_is_the_official_kraft_image_at_the_projects_version(model: dict[str, Any]) -> None:
    kafka = services(model)["kafka"]
    assert kafka["image"] == f"apache/kafka:{KAFKA_VERSION}"
    settings = env(kafka)
    assert set(settings["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert settings["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"  # topics come from topics/
    assert kafka["healthcheck"]["test"][0] == "CMD-SHELL"


def test_workers_bootstrap_from_a_listener_kafka_advertises_inside_the_network(
        model: dict[str, Any]) -> None:
    svc = services(model)
    advertised = set(kafka_listeners(svc["kafka"]).values())
    for name in ("topics", "worker", "spark-generator"):
        settings = Settings.from_env(env(svc[name]))
        assert settings.bootstrap in advertised
        assert settings.bootstrap.split(":")[0] == "kafka"


def test_worker_settings(model: dict[str, Any]) -> None:
    worker = Settings.from_env(env(services(model)["worker"]))
    assert worker.partitions == 4
    assert worker.instance_id is None  # per replica: host name and pid (see the file)
    settable = {f"JUGGLER_{f.name.upper()}" for f in fields(Settings)} | {
        f"{ENV_PREFIX}{f.name.upper()}" for f in fields(Security)}
    for name in ("topics", "worker", "spark-generator"):
        # Settings.from_env ignores a variable it has no field for: a stale one would do nothing
        assert {k for k in env(services(model)[name]) if k.startswith("JUGGLER_")} <= settable
    assert worker.create_topics is False  # the topics service applied them
    assert worker.runtime == "worker"
    assert services(model)["worker"]["command"] == ["worker"]
    assert services(model)["topics"]["command"] == ["topics", "apply"]


def test_every_juggler_container_takes_the_kafka_security_settings(compose: Compose,
                                                                    tmp_path: Path) -> None:
    """The same JUGGLER_KAFKA_* variables reach topics, workers and the generator, and
    the TLS directory is mounted where those settings point."""
    (tmp_path / "ca.pem").write_text("a CA")
    secured = {"JUGGLER_BOOTSTRAP": "broker.example:9093",
               "JUGGLER_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
               "JUGGLER_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
               "JUGGLER_KAFKA_SASL_USERNAME": "juggler", "JUGGLER_KAFKA_SASL_PASSWORD": "pw",
               "JUGGLER_KAFKA_SSL_CA_LOCATION": "/etc/juggler/tls/ca.pem",
               "JUGGLER_TLS_DIR": str(tmp_path)}
    svc = services(compose.model(secured))
    for name in ("topics", "worker", "spark-generator"):
        settings = env(svc[name])
        assert Settings.from_env(settings).bootstrap == "broker.example:9093"
        mounts = {v["target"]: v["source"] for v in svc[name]["volumes"] if v["type"] == "bind"}
        assert mounts["/etc/juggler/tls"] == str(tmp_path)
        located = {k: v.replace("/etc/juggler/tls", str(tmp_path)) for k, v in settings.items()}
        security = Security.from_env(located)  # valid, and its CA file is the mounted one
        assert (security.security_protocol, security.sasl_username) == ("SASL_SSL", "juggler")
    unsecured = env(services(compose.model())["worker"])
    assert Security.from_env(unsecured).security_protocol == "PLAINTEXT"


def test_worker_http_is_reachable_and_takes_a_token(compose: Compose) -> None:
    worker = Settings.from_env(env(services(compose.model())["worker"]))
    assert (worker.web_host, worker.web_token) == ("0.0.0.0", None)
    worker = Settings.from_env(env(services(compose.model({"JUGGLER_WEB_TOKEN": "t"}))["worker"]))
    assert worker.web_token == "t"


def test_grafana_has_no_default_password_and_no_anonymous_access(compose: Compose) -> None:
    refused = compose.load({})
    assert refused.returncode != 0 and "GRAFANA_ADMIN_PASSWORD" in refused.stderr
    grafana = env(services(compose.model())["grafana"])
    assert grafana["GF_SECURITY_ADMIN_PASSWORD"] == Compose.REQUIRED["GRAFANA_ADMIN_PASSWORD"]
    assert grafana["GF_AUTH_ANONYMOUS_ENABLED"] == "false"


@pytest.mark.parametrize("service", ["topics", "worker", "spark-generator"])
def test_commands_are_ones_juggler_accepts(model: dict[str, Any], service: str) -> None:
    command = services(model)[service]["command"]
    if command[0] == "spark" and "spark" not in juggler_commands():
        pytest.skip("`juggler spark generate` is not in the CLI yet")
    parse_juggler_args(command)


def test_images_are_built_from_this_repos_dockerfile(model: dict[str, Any]) -> None:
    svc = services(model)
    built = ("topics", "worker", "spark-generator")
    targets = {name: svc[name]["build"]["target"] for name in built}
    assert targets == {"topics": "worker", "worker": "worker", "spark-generator": "spark"}
    for name in targets:
        assert Path(svc[name]["build"]["context"]) == ROOT
        assert (ROOT / svc[name]["build"]["dockerfile"]).is_file()
    assert svc["topics"]["image"] == svc["worker"]["image"]


def test_start_order_waits_for_health_and_topic_setup(model: dict[str, Any]) -> None:
    conditions = {name: {dep: spec["condition"]
                         for dep, spec in (s.get("depends_on") or {}).items()}
                  for name, s in services(model).items()}
    assert conditions["topics"] == {"kafka": "service_healthy"}
    assert conditions["worker"] == {"kafka": "service_healthy",
                                    "topics": "service_completed_successfully"}
    assert conditions["spark-generator"] == {"topics": "service_completed_successfully"}
    assert conditions["grafana"] == {"prometheus": "service_started"}


def test_worker_scales(model: dict[str, Any], compose: Compose) -> None:
    """`--scale worker=N` needs no fixed name and no fixed host port."""
    worker = services(model)["worker"]
    assert "container_name" not in worker
    assert [(p["target"], p.get("published")) for p in worker["ports"]] == [(6066, None)]
    assert worker["deploy"]["replicas"] == 2
    assert services(compose.model({"JUGGLER_WORKERS": "5"}))["worker"]["deploy"]["replicas"] == 5


def test_settings_are_interpolated_from_the_environment(compose: Compose) -> None:
    svc = services(compose.model({"KAFKA_PORT": "29092", "JUGGLER_PARTITIONS": "12",
                                  "GENERATOR_COUNT": "500", "GRAFANA_PORT": "3300",
                                  "JUGGLER_IMAGE_TAG": "v7", "JUGGLER_RUNTIME": "faust",
                                  "JUGGLER_REORDER_MS": "250"}))
    assert [p["published"] for p in svc["kafka"]["ports"]] == ["29092"]
    assert kafka_listeners(svc["kafka"])["HOST"] == "localhost:29092"
    assert Settings.from_env(env(svc["worker"])).partitions == 12
    # the Faust runtime, on the same image and command (the image has the faust extra)
    worker = Settings.from_env(env(svc["worker"]))
    assert (worker.runtime, worker.reorder_ms) == ("faust", 250)
    assert svc["worker"]["command"] == ["worker"]
    assert env(svc["topics"])["JUGGLER_PARTITIONS"] == "12"
    generate = svc["spark-generator"]["command"]
    assert generate[:2] == ["spark", "generate"]
    assert generate[generate.index("--count") + 1] == "500"
    assert [p["published"] for p in svc["grafana"]["ports"]] == ["3300"]
    assert svc["worker"]["image"] == "juggler:v7"


def test_bind_mounts_point_at_files_in_the_repo(model: dict[str, Any]) -> None:
    binds = [(name, v["source"]) for name, s in services(model).items()
             for v in s.get("volumes") or [] if v["type"] == "bind"]
    assert binds
    for name, source in binds:
        path = Path(source)
        assert path.is_relative_to(ROOT), (name, source)
        if path.is_relative_to(ROOT / "deploy" / "grafana") and not path.exists():
            pytest.skip(f"{path.relative_to(ROOT)} (the Grafana provisioning) does not exist yet")
        assert path.exists(), (name, source)


def test_grafana_gets_the_provisioning_and_dashboards_of_the_repo(model: dict[str, Any]) -> None:
    mounts = {v["target"]: Path(v["source"]) for v in services(model)["grafana"]["volumes"]
              if v["type"] == "bind"}
    grafana = ROOT / "deploy" / "grafana"
    assert mounts == {
        "/etc/grafana/provisioning/datasources": grafana / "provisioning" / "datasources",
        "/etc/grafana/provisioning/dashboards": grafana / "provisioning" / "dashboards",
        "/var/lib/grafana/dashboards": grafana / "dashboards",
    }


def test_grafana_provisioning_files_match_the_stack(model: dict[str, Any]) -> None:
    """The datasource reaches the prometheus service and the dashboard provider reads
    the directory the dashboards are mounted at."""
    grafana_dashboards()
    provisioning = ROOT / "deploy" / "grafana" / "provisioning"
    datasources = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())
    urls = [ds["url"] for ds in datasources["datasources"]]
    prometheus_port = services(model)["prometheus"]["ports"][0]["target"]
    assert f"http://prometheus:{prometheus_port}" in urls
    providers = yaml.safe_load((provisioning / "dashboards" / "juggler.yaml").read_text())
    assert [p["options"]["path"] for p in providers["providers"]] == ["/var/lib/grafana/dashboards"]
    for dashboard in grafana_dashboards():
        json.loads(dashboard.read_text())


def prometheus_config(model: dict[str, Any]) -> Path:
    prometheus = services(model)["prometheus"]
    flag = next(a for a in prometheus["command"] if a.startswith("--config.file="))
    mounted = {v["target"]: Path(v["source"]) for v in prometheus["volumes"] if v["type"] == "bind"}
    return mounted[flag.split("=", 1)[1]]


def test_prometheus_discovers_every_worker_replica(model: dict[str, Any]) -> None:
    config = yaml.safe_load(prometheus_config(model).read_text())
    (job,) = config["scrape_configs"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    (sd,) = job["dns_sd_configs"]
    assert sd["names"] == ["worker"]
    assert sd["type"] == "A"
    assert sd["port"] == services(model)["worker"]["ports"][0]["target"] == Settings().web_port


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian package "
                    "prometheus, installed by bin/setup) is not on PATH")
def test_prometheus_accepts_its_config(model: dict[str, Any]) -> None:
    result = subprocess.run(["promtool", "check", "config", str(prometheus_config(model))],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
