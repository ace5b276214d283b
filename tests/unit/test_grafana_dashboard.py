"""docs/grafana-dashboard.json: valid JSON that Grafana can import, every query names only
series the Prometheus adapter really exports, and every metric the workers record has a panel."""

import json
import re
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from adapters.prometheus import PrometheusMetrics, prometheus_name
from application.ports.metrics import CATALOGUE, HANDOFF_LATENCY_MS

DASHBOARD = Path(__file__).parents[2] / "docs" / "grafana-dashboard.json"
SERIES = re.compile(r"\bwsfleet_[a-z0-9_]+\b")
# Recorded only during a graceful shutdown (the worker then exits): a panel would be empty.
NOT_ON_THE_DASHBOARD = {HANDOFF_LATENCY_MS}


def exported() -> set[str]:
    """Every sample name a worker's /metrics shows (histograms: _bucket, _count, _sum)."""
    _, body = PrometheusMetrics({"version": "0", "python": "3", "backend": "x"}).scrape()
    return {
        sample.name
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def panels() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(DASHBOARD.read_text())["panels"]
    return found


def queries() -> list[str]:
    return [target["expr"] for panel in panels() for target in panel["targets"]]


def test_the_dashboard_is_importable() -> None:
    document = json.loads(DASHBOARD.read_text())
    assert document["title"]
    assert document["uid"]
    ids = [panel["id"] for panel in document["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"]: v for v in document["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    for panel in document["panels"]:
        assert panel["targets"], panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}"
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}


def test_every_query_names_only_exported_series() -> None:
    names = exported()
    for expr in queries():
        used = SERIES.findall(expr)
        assert used, f"no wsfleet series in {expr!r}"
        unknown = set(used) - names
        assert not unknown, f"{expr!r} names {unknown}, which no worker exports"
        assert expr.count("(") == expr.count(")"), expr


def test_every_recorded_metric_has_a_panel() -> None:
    used = {name for expr in queries() for name in SERIES.findall(expr)}
    for spec in CATALOGUE:
        if spec.name in NOT_ON_THE_DASHBOARD:
            continue
        base = prometheus_name(spec)
        assert any(name.startswith(base) for name in used), f"{spec.name} ({base}) has no panel"
