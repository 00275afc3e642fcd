"""The proof behind grafana/ (issue 16): Debian's Prometheus scrapes a real ``streamgate run``
on the embedded backend while a real client of each protocol drives it (a refused login and an
unknown topic among it); then EVERY panel query of every dashboard (Grafana's variables and
macros substituted, the per-protocol dashboard once for each protocol), every variable query
and every recording rule is evaluated through Prometheus's HTTP API, and none may fail to parse
or come back empty. ``promtool check metrics`` passes on the gateway's ``/metrics``.

Every process is started and stopped by its pid; the whole is bounded in time.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.gateways import running_gateway
from tests.helpers.prometheus import Prometheus, QueryFailed, binary, promtool, started
from tests.monitoring.queries import (
    ALL_PROTOCOLS,
    PROTOCOLS,
    RULES,
    dashboards,
    label_values,
    panel_queries,
    recorded_names,
    substitute,
    variable_queries,
)
from tests.monitoring.traffic import every_protocol

LIMIT_S = 110.0
PER_PROTOCOL = "streamgate-protocol.json"
OPT_IN = (
    "--set", "metrics.topic_patterns=proof-*", "--set", "metrics.lag_groups=proof-*",
    "--set", "metrics.lag_topics=proof-*", "--set", "metrics.lag_interval_s=1",
    "--set", "groups.initial_rebalance_delay_ms=200",
)  # fmt: skip


def scrape(admin: str) -> bytes:
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=10) as response:
        body: bytes = response.read()
    return body


def empty_or_broken(prometheus: Prometheus, expr: str) -> str | None:
    """Why ``expr`` shows nothing on a panel, or None when it has data."""
    try:
        found = prometheus.query(expr)
    except QueryFailed as exc:
        return str(exc)
    return None if found else "empty result"


def check_dashboards(prometheus: Prometheus, instance: str) -> tuple[list[str], int]:
    """Every panel and variable query of every dashboard: (what failed, how many ran)."""
    failures: list[str] = []
    ran = 0
    for name, board in dashboards().items():
        protocols = PROTOCOLS if name == PER_PROTOCOL else (ALL_PROTOCOLS,)
        for protocol in protocols:
            for q in panel_queries(name, board):
                expr = substitute(q.expr, instance=instance, protocol=protocol)
                ran += 1
                if (why := empty_or_broken(prometheus, expr)) is not None:
                    failures.append(f"{q.where()} [{protocol}]: {why}\n    {expr}")
        for variable, query in variable_queries(board).items():
            expr, label = label_values(substitute(query, instance=instance, protocol=""))
            ran += 1
            values = {s["metric"].get(label) for s in prometheus.query(expr)}
            wanted = {instance} if variable == "instance" else set(PROTOCOLS)
            if not wanted <= values:
                failures.append(f"{name} variable {variable}: {sorted(values)} lacks {wanted}")
    return failures, ran


def check_rules(prometheus: Prometheus) -> list[str]:
    """Every rule loaded and healthy, every recording rule with data."""
    failures = []
    groups = prometheus.api("rules")["groups"]
    loaded = {r["name"]: r for g in groups for r in g["rules"]}
    for rule in loaded.values():
        if rule["health"] != "ok":
            failures.append(f"rule {rule['name']}: {rule['health']} {rule.get('lastError')}")
    for record in recorded_names():
        if record not in loaded:
            failures.append(f"recording rule {record} not loaded")
        elif (why := empty_or_broken(prometheus, record)) is not None:
            failures.append(f"recording rule {record}: {why}\n    {loaded[record]['query']}")
    return failures


@pytest.mark.slow
async def test_every_panel_and_rule_has_data_from_a_real_gateway(tmp_path: Path) -> None:
    binary("prometheus")
    binary("promtool")
    with trio.fail_after(LIMIT_S):
        async with running_gateway(
            f"embedded:{tmp_path / 'data'}", tmp_path, "monitored", *OPT_IN
        ) as gateway:
            admin = gateway.addresses["admin"]
            async with started(tmp_path / "prometheus", [admin], [RULES]) as prometheus:
                await every_protocol(gateway.addresses)
                # Rates need two samples after the traffic; the lag sampler (every second) and
                # the rules (evaluated every second) one more round.
                await prometheus.scrapes(3)
                # The check bites: what no panel may show is told apart from data.
                assert empty_or_broken(prometheus, "streamgate_no_such_metric") == "empty result"
                assert "bad_data" in (empty_or_broken(prometheus, "sum(up") or "")
                failures, ran = check_dashboards(prometheus, admin)
                failures += check_rules(prometheus)
                exposition = await trio.to_thread.run_sync(scrape, admin)
    assert ran > 100  # the per-protocol dashboard four times, the others once
    assert failures == [], "\n".join(failures)
    assert b"_created" not in exposition
    checked = promtool("check", "metrics", stdin=exposition)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The errors the clients caused are there under their canonical types.
    errors = {
        (s.labels["protocol"], s.labels["error_type"])
        for family in text_string_to_metric_families(exposition.decode())
        for s in family.samples
        if s.name == "streamgate_command_duration_seconds_count" and s.labels["error_type"]
    }
    assert {
        ("iggy", "unauthorized"), ("rog", "not_found"), ("rabbitmq_stream", "already_exists")
    } <= errors, errors  # fmt: skip
