"""Every PromQL query of the committed dashboards and rules, and Grafana's macros substituted
the way Grafana would before it sends a query to Prometheus."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grafana.generate import OUT

RULES = Path(__file__).resolve().parents[2] / "grafana" / "prometheus" / "rules.yml"
RULES_TEST = RULES.with_name("rules_test.yml")
PROTOCOLS = ("kafka", "rabbitmq_stream", "iggy", "rog")
ALL_PROTOCOLS = "(" + "|".join(PROTOCOLS) + ")"  # a multi-value "All", as Grafana formats it
RATE_INTERVAL = "1m"


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str  # file name
    panel: str  # title
    ref: str
    expr: str

    def where(self) -> str:
        return f"{self.dashboard} / {self.panel!r} / {self.ref}"


def dashboards() -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(OUT.glob("*.json"))}


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])  # a collapsed row holds its panels


def panels(board: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(_panels(board.get("panels") or []))


def panel_queries(name: str, board: Mapping[str, Any]) -> list[PanelQuery]:
    return [
        PanelQuery(name, panel.get("title", ""), t.get("refId", ""), t["expr"])
        for panel in panels(board)
        for t in panel.get("targets") or []
    ]


def variable_queries(board: Mapping[str, Any]) -> dict[str, str]:
    """name -> query of each query variable."""
    return {v["name"]: v["query"] for v in board["templating"]["list"] if v.get("type") == "query"}


_LABEL_VALUES = re.compile(r"^label_values\((?:(?P<expr>.+),\s*)?(?P<label>[a-zA-Z_]\w*)\)$")


def label_values(query: str) -> tuple[str, str]:
    """Grafana's ``label_values(expr, label)`` as a PromQL query with one series per value:
    (``count by (label) (expr)``, label)."""
    m = _LABEL_VALUES.match(query.strip())
    assert m is not None, f"not a label_values() query: {query}"
    label = m["label"]
    expr = m["expr"] or "{" + label + '=~".+"}'
    return f"count by ({label}) ({expr})", label


def substitute(expr: str, *, instance: str, protocol: str) -> str:
    """The query Grafana would send: variables and ``$__rate_interval`` replaced. A ``$`` left
    over is a variable no dashboard defines: an error here rather than a query that never
    matches."""
    out = expr.replace("$__rate_interval", RATE_INTERVAL)
    # Grafana regex-escapes a value used with =~ and escapes the backslash for the PromQL string.
    escaped = re.escape(instance).replace("\\", "\\\\")
    for name, value in (("instance", escaped), ("protocol", protocol)):
        out = out.replace("${" + name + "}", value).replace("$" + name, value)
    assert "$" not in out, f"unknown variable or macro left in {out!r}"
    return out


def recorded_names() -> list[str]:
    """Every ``record:`` of rules.yml (read as text: no YAML library in the test extra)."""
    return re.findall(r"^\s*- record:\s*(\S+)\s*$", RULES.read_text(), re.M)


def alert_names() -> list[str]:
    return re.findall(r"^\s*- alert:\s*(\S+)\s*$", RULES.read_text(), re.M)
