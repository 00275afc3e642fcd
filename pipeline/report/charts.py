"""The report's PNG charts, drawn on the driver from the per-minute aggregates with matplotlib's
Agg canvas (no pyplot: no global figure state, no display needed)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import matplotlib.dates as mdates
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

Row = Mapping[str, Any]  # a row of by_minute.parquet
MOST_SERIES: Final = 8  # lines a chart can show and a reader can still tell apart
SIZE_IN: Final = (10.0, 4.2)
DPI: Final = 100
MINUTE: Final = timedelta(minutes=1)
HALF_MINUTE: Final = MINUTE / 2
LOG_SCALE_FROM: Final = 20.0  # largest / smallest value at which the y axis goes logarithmic


@dataclass(frozen=True, slots=True)
class Chart:
    file: str
    title: str
    draw: Callable[[Axes, Sequence[Row]], bool]  # False: nothing to draw for this log


def _series(
    rows: Sequence[Row],
    name: Callable[[Row], str | None],
    value: Callable[[Row], float | None],
    zeros: Sequence[datetime] = (),
) -> dict[str, dict[datetime, float]]:
    """Values summed per series and minute; the ``MOST_SERIES`` series with the most commands.
    A count is 0 in a minute without lines (``zeros``: every minute of the log), where a line
    drawn from the minute before to the minute after would show traffic that never was."""
    sums: dict[str, dict[datetime, float]] = defaultdict(lambda: dict.fromkeys(zeros, 0.0))
    weight: dict[str, int] = defaultdict(int)
    for row in rows:
        key, v = name(row), value(row)
        if key is None or v is None:
            continue
        minute = _utc(row["minute"])
        sums[key][minute] = sums[key].get(minute, 0.0) + v
        weight[key] += row["count"]
    keep = sorted(weight, key=lambda k: (-weight[k], k))[:MOST_SERIES]
    return {k: sums[k] for k in sorted(keep)}


def _minutes(rows: Sequence[Row]) -> list[datetime]:
    """Every minute from the log's first to its last."""
    if not rows:
        return []
    seen = [_utc(r["minute"]) for r in rows]
    first, last = min(seen), max(seen)
    return [first + i * MINUTE for i in range((last - first) // MINUTE + 1)]


def _utc(minute: datetime) -> datetime:
    """Naive UTC, as matplotlib's date axis takes it (its default time zone is UTC)."""
    return minute.astimezone(UTC).replace(tzinfo=None) if minute.tzinfo else minute


def _plot(ax: Axes, series: Mapping[str, Mapping[datetime, float]], ylabel: str) -> bool:
    if not series:
        return False
    for label, points in series.items():
        xs = sorted(points)
        ax.plot(xs, [points[x] for x in xs], marker="o", markersize=3, label=label)  # type: ignore[arg-type]
    minutes = [x for points in series.values() for x in points]
    # Half a minute either side: a log of one minute still has an axis (and no warning).
    ax.set_xlim(min(minutes) - HALF_MINUTE, max(minutes) + HALF_MINUTE)  # type: ignore[arg-type]
    ax.set_ylabel(ylabel)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return True


def _command(row: Row) -> str:
    return f"{row['protocol']} {row['command']}"


def _requests(ax: Axes, rows: Sequence[Row]) -> bool:
    counts = _series(rows, lambda r: r["protocol"], lambda r: r["count"], _minutes(rows))
    return _plot(ax, counts, "commands")


def _latency(ax: Axes, rows: Sequence[Row]) -> bool:
    ms = _series(
        [r for r in rows if r["outcome"] == "ok"],
        _command,
        lambda r: None if r["duration_p99_s"] is None else r["duration_p99_s"] * 1000,
    )
    drawn = _plot(ax, ms, "p99 duration (ms)")
    values = [v for points in ms.values() for v in points.values() if v > 0]
    if values and max(values) / min(values) >= LOG_SCALE_FROM:
        ax.set_yscale("log")  # a read and a create_topic can be orders of magnitude apart
    return drawn


def _bytes(ax: Axes, rows: Sequence[Row]) -> bool:
    way = {"append": "in", "read": "out"}
    return _plot(
        ax,
        _series(
            [r for r in rows if r["command"] in way and r["outcome"] == "ok"],
            lambda r: f"{r['protocol']} {way[r['command']]}",
            lambda r: None if r["bytes"] is None else r["bytes"] / 1e6,
            _minutes(rows),
        ),
        "MB",
    )


def _errors(ax: Axes, rows: Sequence[Row]) -> bool:
    failed = [r for r in rows if r["outcome"] == "error"]
    counts = _series(failed, _command, lambda r: r["count"], _minutes(rows))
    return _plot(ax, counts, "errors")


CHARTS: Final = (
    Chart("requests.png", "Commands per minute, by protocol", _requests),
    Chart("latency_p99.png", "p99 duration per minute, by protocol and command (ok)", _latency),
    Chart("bytes.png", "MB per minute appended (in) and read (out), by protocol", _bytes),
    Chart("errors.png", "Failed commands per minute, by protocol and command", _errors),
)


def draw(chart: Chart, rows: Sequence[Row], directory: Path) -> Path:
    fig = Figure(figsize=SIZE_IN, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)  # Agg whatever MPLBACKEND says: files only, no display
    ax = fig.add_subplot()
    ax.set_title(chart.title)
    if chart.draw(ax, rows):
        locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))  # type: ignore[no-untyped-call]
        ax.set_xlabel("minute (UTC)")
        ax.grid(True, alpha=0.3)
    else:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "none in this log", ha="center", va="center", fontsize="large")
    path = directory / chart.file
    fig.savefig(path, format="png")
    return path


def draw_all(rows: Sequence[Row], directory: Path) -> list[Path]:
    return [draw(chart, rows, directory) for chart in CHARTS]


__all__ = ["CHARTS", "Chart", "draw", "draw_all"]
