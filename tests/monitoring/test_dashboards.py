"""grafana/ offline: the committed dashboards are the generator's output, well formed for
Grafana, every query parses as PromQL (promtool), and the Prometheus rules pass their
``promtool test rules`` unit tests. The same queries against a real Prometheus scraping a real
gateway: test_prometheus.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from grafana_foundation_sdk.models.dashboard import Dashboard

from grafana import generate
from tests.helpers.prometheus import promtool
from tests.monitoring.queries import (
    ALL_PROTOCOLS,
    RULES,
    RULES_TEST,
    alert_names,
    dashboards,
    label_values,
    panel_queries,
    panels,
    recorded_names,
    substitute,
    variable_queries,
)

PROVISIONING = generate.HERE / "provisioning"


def test_the_committed_json_is_what_the_generator_writes() -> None:
    assert generate.stale() == [], "run `python -m grafana.generate` and commit the JSON"
    assert sorted(dashboards()) == sorted(generate.DASHBOARDS)


def test_the_check_notices_a_dashboard_edited_by_hand(tmp_path: Path) -> None:
    generate.write(tmp_path)
    assert generate.stale(tmp_path) == []
    edited = tmp_path / "streamgate-backend.json"
    edited.write_text(edited.read_text().replace("Backend", "Backnd", 1))
    (tmp_path / "left-over.json").write_text("{}")
    assert generate.stale(tmp_path) == ["left-over.json", "streamgate-backend.json"]
    generate.write(tmp_path)
    assert generate.stale(tmp_path) == []


@pytest.mark.parametrize("name", sorted(generate.DASHBOARDS))
def test_each_dashboard_is_well_formed(name: str) -> None:
    board = dashboards()[name]
    Dashboard.from_json(board)  # the SDK's own model reads it back
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 36
    every = panels(board)
    ids = [p["id"] for p in every]
    assert len(ids) == len(set(ids)) and None not in ids, ids
    for panel in every:
        grid = panel["gridPos"]
        assert grid["w"] > 0 and grid["h"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"], f"{panel['title']} has no query"
            assert panel["options"], f"{panel['title']} has no options"
    variables = [v["name"] for v in board["templating"]["list"]]
    assert variables == ["datasource", "instance", "protocol"]


def test_the_per_protocol_dashboard_repeats_a_row_per_protocol() -> None:
    board = dashboards()["streamgate-protocol.json"]
    rows = [p for p in panels(board) if p["type"] == "row"]
    assert [r.get("repeat") for r in rows] == ["protocol"]
    kinds = {p["type"] for p in panels(board)}
    assert "heatmap" in kinds


def test_every_query_parses(tmp_path: Path) -> None:
    """Each panel's and variable's query, macros substituted, as a recording rule that
    ``promtool check rules`` parses (a broken query fails with Prometheus's own message)."""
    rules: list[dict[str, str]] = []
    for name, board in dashboards().items():
        for q in panel_queries(name, board):
            expr = substitute(q.expr, instance="127.0.0.1:9464", protocol=ALL_PROTOCOLS)
            rules.append({"record": f"panel:q{len(rules)}", "expr": expr})
        for query in variable_queries(board).values():
            expr, _ = label_values(substitute(query, instance="x", protocol=ALL_PROTOCOLS))
            rules.append({"record": f"variable:q{len(rules)}", "expr": expr})
    assert len(rules) > 40
    path = tmp_path / "panels.yml"
    path.write_text(json.dumps({"groups": [{"name": "panels", "rules": rules}]}))  # JSON is YAML
    done = promtool("check", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules)} rules found" in done.stdout


def test_a_broken_query_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "broken.yml"
    rule = {"record": "broken", "expr": "sum(rate(streamgate_bytes_sent_total[1m])"}
    path.write_text(json.dumps({"groups": [{"name": "g", "rules": [rule]}]}))
    done = promtool("check", "rules", str(path))
    assert done.returncode != 0 and "parse error" in done.stdout + done.stderr


def test_the_rules_pass_their_unit_tests() -> None:
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", str(RULES_TEST))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout
    text = RULES_TEST.read_text()
    for alert in alert_names():  # every alert has a firing case in the unit tests
        assert f"alertname: {alert}\n" in text, alert
    for record in recorded_names():
        assert f"expr: {record}" in text, record
    assert set(alert_names()) >= {
        "StreamgateDown", "StreamgateBackendDown", "StreamgateHighErrorRatio",
        "StreamgateLatencyP99High", "StreamgateConnectionErrors",
    }  # fmt: skip


def test_provisioning_points_grafana_at_the_generated_dashboards() -> None:
    provider = (PROVISIONING / "dashboards" / "streamgate.yaml").read_text()
    # grafana/provisioning is mounted at /etc/grafana/provisioning
    relative = generate.OUT.relative_to(PROVISIONING)
    assert f"path: /etc/grafana/provisioning/{relative}\n" in provider
    assert "type: file" in provider
    datasource = (PROVISIONING / "datasources" / "streamgate.yaml").read_text()
    assert "type: prometheus" in datasource and "apiVersion: 1" in datasource
