"""What every streamgate dashboard shares: the Prometheus datasource variable, the ``instance``
and ``protocol`` variables, label selectors, and panels with stable ids laid out on the grid.

Queries read the raw metrics (not the recording rules), so a dashboard works on any
Prometheus that scrapes a gateway, rules loaded or not.
"""

from __future__ import annotations

from collections.abc import Sequence

from grafana_foundation_sdk.builders import common, heatmap, prometheus, stat, table, timeseries
from grafana_foundation_sdk.builders.dashboard import (
    Dashboard,
    DashboardLink,
    DatasourceVariable,
    QueryVariable,
    Row,
)
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import common as common_model
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models import heatmap as heatmap_model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")
RATE = "$__rate_interval"
INSTANCE = 'instance=~"$instance"'
PROTOCOL = 'protocol=~"$protocol"'
ERROR = 'outcome="error"'
UNAVAILABLE = 'error_type=~"backend_unavailable|timeout"'
TAG = "streamgate"
PROTOCOLS = ("kafka", "rabbitmq_stream", "iggy", "rog")


def sel(*matchers: str) -> str:
    """A label selector: ``sel(INSTANCE, 'outcome="error"')`` -> ``{instance=~..., ...}``."""
    return "{" + ", ".join(matchers) + "}"


def rate(metric: str, *matchers: str) -> str:
    """``rate(metric{matchers}[$__rate_interval])``"""
    return f"rate({metric}{sel(*matchers)}[{RATE}])"


def sum_rate(by: str, metric: str, *matchers: str) -> str:
    """``sum by (by) (rate(...))``; ``by`` "" sums everything."""
    return f"sum by ({by}) ({rate(metric, *matchers)})" if by else f"sum({rate(metric, *matchers)})"


def quantile(q: float, metric: str, matchers: Sequence[str], by: Sequence[str] = ()) -> str:
    """The q-quantile of a histogram over the dashboard's rate window, per ``by``."""
    labels = ", ".join(("le", *by))
    return (
        f"histogram_quantile({q}, sum by ({labels}) "
        f"(rate({metric}_bucket{sel(*matchers)}[{RATE}])))"
    )


def target(expr: str, legend: str, ref: str = "A") -> prometheus.Dataquery:
    return (
        prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DATASOURCE)
    )


def targets(*pairs: tuple[str, str]) -> list[prometheus.Dataquery]:
    """Several (expr, legend) queries of one panel, ref ids A, B, C..."""
    return [target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(pairs)]


def graph(
    title: str, description: str, unit: str, queries: list[prometheus.Dataquery], width: int = 12
) -> timeseries.Panel:
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .height(8)
        .span(width)
        .fill_opacity(10)
        .legend(
            common.VizLegendOptions()
            .display_mode(common_model.LegendDisplayMode.LIST)
            .placement(common_model.LegendPlacement.BOTTOM)
            .show_legend(True)
        )
        .tooltip(
            common.VizTooltipOptions()
            .mode(common_model.TooltipDisplayMode.MULTI)
            .sort(common_model.SortOrder.DESCENDING)
        )
    )
    for q in queries:
        panel = panel.with_target(q)
    return panel


def number(
    title: str, description: str, unit: str, query: prometheus.Dataquery, width: int = 6
) -> stat.Panel:
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .height(4)
        .span(width)
        .graph_mode(common_model.BigValueGraphMode.NONE)
        .reduce_options(common.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .with_target(query.instant())
    )


def listing(title: str, description: str, query: prometheus.Dataquery, width: int) -> table.Panel:
    return (
        table.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .height(4)
        .span(width)
        .show_header(True)
        .with_target(query.instant().format(PromQueryFormat.TABLE))
    )


def heat(title: str, description: str, expr: str, width: int = 12) -> heatmap.Panel:
    query = target(expr, "{{le}}").format(PromQueryFormat.HEATMAP)
    return (
        heatmap.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .height(8)
        .span(width)
        .calculate(False)  # the histogram's own buckets, not Grafana's
        .y_axis(heatmap.YAxisConfig().unit("s"))
        .color(
            heatmap.HeatmapColorOptions()
            .mode(heatmap_model.HeatmapColorMode.SCHEME)
            .scheme("Spectral")
            .scale(heatmap_model.HeatmapColorScale.EXPONENTIAL)
            .exponent(0.5)
        )
        .with_target(query)
    )


class Board:
    """A dashboard being built: panels get ids 1, 2, 3... in the order they are added, so the
    generated JSON is the same on every run."""

    def __init__(self, uid: str, title: str, description: str, *, protocol_multi: bool) -> None:
        self._next_id = 1
        self.dashboard = (
            Dashboard(title)
            .uid(uid)
            .description(description)
            .tags([TAG])
            .editable()
            .time("now-1h", "now")
            .refresh("30s")
            .tooltip(model.DashboardCursorSync.CROSSHAIR)
            .link(
                DashboardLink("streamgate")
                .type(model.DashboardLinkType.DASHBOARDS)
                .tags([TAG])
                .as_dropdown(True)
                .include_vars(True)
                .keep_time(True)
            )
            .with_variable(DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
            .with_variable(
                QueryVariable("instance")
                .label("Instance")
                .datasource(DATASOURCE)
                .query("label_values(streamgate_build_info, instance)")
                .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
                .sort(model.VariableSort.ALPHABETICAL_ASC)
                .multi(True)
                .include_all(True)
                .all_value(".*")
            )
            .with_variable(
                QueryVariable("protocol")
                .label("Protocol")
                .datasource(DATASOURCE)
                .query(f"label_values(streamgate_connections_total{sel(INSTANCE)}, protocol)")
                .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
                .sort(model.VariableSort.ALPHABETICAL_ASC)
                .multi(protocol_multi)
                .include_all(True)
            )
        )

    def row(self, title: str, repeat: str = "") -> None:
        row = Row(title).id(self._take_id())
        if repeat:
            row = row.repeat(repeat)
        self.dashboard = self.dashboard.with_row(row)

    def add(self, panel: Builder[model.Panel]) -> None:
        panel.id(self._take_id())  # type: ignore[attr-defined]
        self.dashboard = self.dashboard.with_panel(panel)

    def _take_id(self) -> int:
        taken, self._next_id = self._next_id, self._next_id + 1
        return taken
