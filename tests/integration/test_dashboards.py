"""The Grafana dashboard (`deploy/grafana/dashboards/juggler.json`) and its provisioning:
it has a panel for everything an operator watches, every panel's query returns data
from a real Prometheus that scraped a real worker, legends name labels the series
have, and the data source the dashboard asks for is the one provisioning creates.

The tests with a scraped worker run on both runtimes. On the Faust runtime the targets
over what only the worker's own loop measures (`FAUST_NO_DATA`: its transactions,
commit queue and clearance questions) have no data, and a test lists them panel by
panel; every other target must answer there too.
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

if TYPE_CHECKING:  # imported by pytest_plugins, so that pytest rewrites its asserts
    from prometheus_server import ScrapedWorker

pytestmark = [pytest.mark.integration, pytest.mark.slow]
pytest_plugins = ["prometheus_server"]

GRAFANA = Path(__file__).resolve().parents[2] / "deploy" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "juggler.json"

REQUIRED = {
    # what the operator watches: (metric, label the panel groups by)
    "throughput per stream": ("juggler_events_in_total", "stream"),
    "results per query": ("juggler_results_out_total", "query"),
    "selectivity per predicate type": ("juggler_selectivity", "type"),
    "current evaluation order": ("juggler_evaluation_order", "order"),
    "held state": ("juggler_held_events", "stream"),
    "lateness": ("juggler_late_events_total", "stream"),
    "dead letters": ("juggler_dead_letters_total", "reason"),
    "latency percentiles": ("juggler_processing_latency_seconds_bucket", "le"),
    "latency before the transaction": ("juggler_handover_latency_seconds_bucket", "le"),
    "consumer lag": ("juggler_consumer_lag", "topic"),
    "partitions per worker": ("juggler_partition_engines", "instance"),
    "where the worker's loop spends its time": ("juggler_loop_seconds_total", "phase"),
    "transaction times": ("juggler_transaction_seconds_bucket", "le"),
    "time waiting for the transaction in flight": ("juggler_commit_queue_seconds_bucket", "le"),
    "clearance round trips": ("juggler_clearance_seconds_bucket", "le"),
}

FAUST_NO_DATA = {
    "juggler_transaction_seconds_bucket": "the Faust runtime has no transactions "
                                          "(at least once)",
    "juggler_commit_queue_seconds_bucket": "no commit thread, so no queue before it",
    "juggler_clearance_seconds_bucket": "no clearance questions: the reorder buffer "
                                        "takes what arrived",
}
"""Metrics the Faust runtime exports empty or not at all (test_metrics_prometheus.py
checks each), so that a panel target over one of them has no data there."""

GRAFANA_VARIABLES = {
    # what Grafana would put in for a 1 s scrape interval and the last few minutes
    "$__rate_interval": "10s",
    "$__interval": "2s",
}


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel that is not a row, including those inside collapsed rows."""
    out = []
    for panel in board["panels"]:
        out += panel.get("panels", []) if panel["type"] == "row" else [panel]
    return out


def targets(board: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(panel, target) for panel in panels(board) for target in panel["targets"]]


def concrete(expr: str, board: dict[str, Any]) -> str:
    """`expr` with Grafana's and the dashboard's variables replaced, as Grafana sends it
    with every worker selected."""
    for name, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(name, value)
    for variable in board["templating"]["list"]:
        if variable["type"] == "query" and variable.get("includeAll"):
            for form in (f"${{{variable['name']}}}", f"${variable['name']}"):
                expr = expr.replace(form, variable["allValue"])
    assert "$" not in expr, f"a variable the test does not know: {expr}"
    return expr


def test_there_is_a_panel_for_everything_an_operator_watches() -> None:
    board = dashboard()
    exprs = [(panel["title"], target["expr"]) for panel, target in targets(board)]
    for item, (metric, label) in REQUIRED.items():
        grouped = [title for title, expr in exprs
                   if re.search(rf"\b{metric}\b", expr)
                   and any(label in by.split(",") for by in _groupings(expr))]
        assert grouped, f"no panel for {item}: {metric} by {label}"
    latency = [panel for panel in panels(board)
               if sum("histogram_quantile(" in t["expr"] for t in panel["targets"]) >= 3]
    assert latency, "no panel of latency percentiles"


def test_panels_are_laid_out_on_the_grid() -> None:
    board = dashboard()
    ids = [panel["id"] for panel in board["panels"]] + \
        [p["id"] for row in board["panels"] for p in row.get("panels", [])]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    cells: dict[tuple[int, int], str] = {}
    for panel in board["panels"]:
        g = panel["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24, panel["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


def test_the_dashboard_uses_the_provisioned_prometheus() -> None:
    board = dashboard()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    source = variables["datasource"]
    assert source["type"] == "datasource" and source["query"] == "prometheus"
    reference = {"type": "prometheus", "uid": "${datasource}"}
    for panel, target in targets(board):
        assert panel["datasource"] == reference, panel["title"]
        assert target["datasource"] == reference, panel["title"]
    assert variables["instance"]["datasource"] == reference

    provisioned = yaml.safe_load((GRAFANA / "provisioning" / "datasources" /
                                  "prometheus.yaml").read_text())["datasources"]
    prometheus = [d for d in provisioned if d["type"] == "prometheus"]
    assert len(prometheus) == 1
    assert source["current"]["value"] == prometheus[0]["uid"]
    assert prometheus[0]["url"] == "http://prometheus:9090"

    providers = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" /
                                "juggler.yaml").read_text())["providers"]
    assert [p["options"]["path"] for p in providers if p["type"] == "file"] == \
        ["/var/lib/grafana/dashboards"]


def test_every_panel_query_returns_data(scraped_worker: ScrapedWorker) -> None:
    """Each target as Grafana sends it: a range query over the time the worker was
    driven (an instant query for stat panels). Each must give at least one series with
    a number in it, and every label its legend names; on the Faust runtime too, but
    the targets over `FAUST_NO_DATA`, which must have none (else the list is stale)."""
    board = dashboard()
    prom = scraped_worker.prometheus
    start, end = scraped_worker.started, time.time()
    problems = []
    for panel, target in targets(board):
        expr = concrete(target["expr"], board)
        where = f"{panel['title']} [{target['refId']}]"
        if target.get("instant"):
            series = [{"metric": s["metric"], "values": [s["value"]]} for s in prom.query(expr)]
        else:
            series = prom.query_range(expr, start, end, step=1)
        numbers = [float(v) for s in series for _, v in s["values"] if not math.isnan(float(v))]
        if scraped_worker.runtime == "faust" and _mentions(expr, FAUST_NO_DATA):
            if numbers:
                problems.append(f"{where}: data on the Faust runtime from {expr}, which "
                                "FAUST_NO_DATA says it has none of")
            continue
        if not numbers:
            problems.append(f"{where}: no data from {expr}")
        for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")):
            if not all(label in s["metric"] for s in series):
                problems.append(f"{where}: the legend names {label!r}, which its series lack")
    assert not problems, "\n".join(problems)


def test_the_worker_variable_lists_the_worker(scraped_worker: ScrapedWorker) -> None:
    variable = {v["name"]: v for v in dashboard()["templating"]["list"]}["instance"]
    metric, label = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)",
                                 variable["query"]["query"]).groups()
    values = scraped_worker.prometheus.values(f"count by ({label}) ({metric})", label)
    assert f"127.0.0.1:{scraped_worker.worker.port}" in values


def test_per_stream_and_per_query_panels_show_every_stream_and_query(
        scraped_worker: ScrapedWorker) -> None:
    """The rate panels see the late event and each query's results, not only series
    that stay at 0 (a counter must be exported before its first increment)."""
    board = dashboard()
    prom = scraped_worker.prometheus
    start, end = scraped_worker.started, time.time()
    seen: dict[str, set[str]] = {}
    for panel, target in targets(board):
        for metric, label in (("juggler_events_in_total", "stream"),
                              ("juggler_results_out_total", "query"),
                              ("juggler_late_events_total", "stream"),
                              ("juggler_dead_letters_total", "reason")):
            if re.search(rf"\brate\({metric}\b", target["expr"]):
                series = prom.query_range(concrete(target["expr"], board), start, end, step=1)
                seen[metric] = {s["metric"][label] for s in series
                                if any(float(v) > 0 for _, v in s["values"])}
    assert seen == {"juggler_events_in_total": set("BHKT"),
                    "juggler_results_out_total": set(scraped_worker.queried),
                    "juggler_late_events_total": {"B"},
                    "juggler_dead_letters_total": {"late", "undecodable"}}


def test_the_faust_runtime_leaves_only_the_worker_s_own_panels_empty() -> None:
    """Which targets have nothing to show on the Faust runtime (checked against a real
    one by `test_every_panel_query_returns_data[faust]`), by panel: only the broker
    round trips of the worker's own loop (transaction, commit queue, clearance)."""
    empty: dict[str, list[str]] = {}
    for panel, target in targets(dashboard()):
        if _mentions(target["expr"], FAUST_NO_DATA):
            empty.setdefault(panel["title"], []).append(target["refId"])
    assert empty == {
        "Broker round trips: clearance, commit queue, transaction": list("ABCDEF"),
    }


def _mentions(expr: str, metrics: dict[str, str]) -> bool:
    """Whether `expr` reads one of `metrics`."""
    return any(re.search(rf"\b{metric}\b", expr) for metric in metrics)


def _groupings(expr: str) -> list[str]:
    return [by.replace(" ", "") for by in re.findall(r"\bby\s*\(([^)]*)\)", expr)]
