"""The Grafana dashboard in deploy/grafana/ queries only metrics the scheduler registers, so a
renamed or removed metric breaks this test instead of leaving an empty panel."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from stromboli.core.scheduler.metrics import SchedulerMetrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "stromboli-scheduler.json"

#: PromQL words that look like metric names but are not.
KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool"}
    | {"and", "or", "unless", "inf", "nan"}
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_VARIABLES = re.compile(r"\$\{?\w+\}?")
_IDENTIFIER = re.compile(r"(?<![\w.])([A-Za-z_:][\w:]*)(\s*\()?")


def metric_names(expr: str) -> set[str]:
    """Metric names an expression selects: identifiers left once strings, label matchers,
    ranges, grouping clauses and Grafana variables are removed, and not called as functions."""
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub("", text)
    text = _RANGES.sub("", text)
    text = _GROUPING.sub("", text)
    text = _VARIABLES.sub("", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        name, call = match.groups()
        if call or name.lower() in KEYWORDS:
            continue
        names.add(name)
    return names


def load() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels") or [])
    return out


def expressions(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and query variable."""
    found = []
    for panel in panels(dashboard):
        for target in panel.get("targets") or []:
            found.append((panel["title"], target["expr"]))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            found.append(
                (f"${variable['name']}", query["query"] if isinstance(query, dict) else query)
            )
    return found


def test_metric_names_are_read_from_promql() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le, action) (rate(volcano_action_scheduling_latency_"
        'milliseconds_bucket{action=~"$queue", x="a b"}[$__rate_interval]))) / on (job) '
        "group_left max(volcano_unschedule_job_count offset 5m) and vector(1)"
    )
    assert metric_names(expr) == {
        "volcano_action_scheduling_latency_milliseconds_bucket",
        "volcano_unschedule_job_count",
    }
    assert metric_names("label_values(volcano_queue_weight, queue_name)") == {
        "volcano_queue_weight",
        "queue_name",
    }


def test_dashboard_is_a_grafana_dashboard_with_a_prometheus_datasource_variable() -> None:
    dashboard = load()
    assert 36 <= dashboard["schemaVersion"] <= 41
    assert dashboard["uid"] and dashboard["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids))
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


@pytest.mark.parametrize(("where", "expr"), expressions(load()))
def test_every_queried_metric_is_registered(where: str, expr: str) -> None:
    registered = SchedulerMetrics().series_names()
    label_names = {"queue_name"}  # label_values(metric, label) names a label too
    names = metric_names(expr) - label_names
    assert names, f"{where}: no metric in {expr!r}"
    unknown = names - registered
    assert not unknown, f"{where}: {sorted(unknown)} not registered by SchedulerMetrics"


def test_dashboard_covers_the_promised_panels() -> None:
    titles = {p["title"] for p in panels(load())}
    for wanted in (
        "Queue share",
        "Queue cpu: allocated vs deserved",
        "Pending pods by reason",
        "Cycle latency",
        "Job and pod scheduling latency",
        "Action latency p99",
        "Eviction transactions by action",
        "Pods placed per cycle",
        "Unschedulable jobs",
    ):
        assert wanted in titles
