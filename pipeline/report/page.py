"""``index.html``: the report a person opens. One file with its own style and no script, the
charts beside it in the same directory (relative ``img`` links: the directory can be copied or
served as it is), every value from the log escaped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Any, Final

from .charts import Chart

Row = Mapping[str, Any]

STYLE: Final = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f3f3f3; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.error td { background: #fff0f0; }
img { max-width: 100%; display: block; margin: 0.5em 0 1.5em; }
code, pre { background: #f6f6f6; }
pre { padding: 0.5em; overflow-x: auto; }
"""


@dataclass(frozen=True, slots=True)
class BadLine:
    file: str
    text: str


@dataclass(frozen=True, slots=True)
class Page:
    generated: datetime
    files: Sequence[str]
    lines: int  # non-empty lines read
    bad: int
    bad_samples: Sequence[BadLine]
    first: datetime | None  # minute of the earliest command
    last: datetime | None
    summary: Sequence[Row]
    errors: Sequence[Row]
    charts: Sequence[Chart]
    tables: Sequence[str]  # the Parquet files, relative to the page


def _when(t: datetime | None) -> str:
    return "-" if t is None else t.strftime("%Y-%m-%d %H:%M:%S UTC")


def _int(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


def _bytes(v: int | None) -> str:
    if v is None:
        return "-"
    size = float(v)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{v:,} B" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:,.3f}"


def _table(head: Sequence[str], rows: Sequence[tuple[str, Sequence[tuple[str, bool]]]]) -> str:
    """``rows``: (css class, cells as (text, numeric))."""
    out = ["<table><tr>", *(f"<th>{escape(h)}</th>" for h in head), "</tr>"]
    for css, cells in rows:
        out.append(f'<tr class="{css}">' if css else "<tr>")
        out += [
            f'<td class="n">{escape(t)}</td>' if n else f"<td>{escape(t)}</td>" for t, n in cells
        ]
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def _summary(rows: Sequence[Row]) -> str:
    head = ["protocol", "command", "outcome", "count", "messages", "bytes",
            "p50 ms", "p95 ms", "p99 ms", "max ms", "backend p99 ms"]  # fmt: skip
    return _table(head, [
        ("error" if r["outcome"] == "error" else "", [
            (r["protocol"], False), (r["command"], False), (r["outcome"], False),
            (_int(r["count"]), True), (_int(r["messages"]), True), (_bytes(r["bytes"]), True),
            (_ms(r["duration_p50_s"]), True), (_ms(r["duration_p95_s"]), True),
            (_ms(r["duration_p99_s"]), True), (_ms(r["duration_max_s"]), True),
            (_ms(r["backend_p99_s"]), True),
        ]) for r in rows
    ])  # fmt: skip


def _errors(rows: Sequence[Row]) -> str:
    if not rows:
        return "<p>No command failed.</p>"
    head = ["protocol", "command", "error type", "count", "first", "last"]
    return _table(head, [
        ("", [(r["protocol"], False), (r["command"], False), (r["error_type"] or "-", False),
              (_int(r["count"]), True), (_when(r["first_seen"]), False),
              (_when(r["last_seen"]), False)])
        for r in rows
    ])  # fmt: skip


def _bad(page: Page) -> str:
    if not page.bad:
        return ""
    shown = "".join(
        f"<li><code>{escape(b.file)}</code>: <code>{escape(b.text[:300])}</code></li>"
        for b in page.bad_samples
    )
    return (
        f"<h2>Bad lines</h2><p>{page.bad:,} lines were not access log lines (not JSON, cut "
        f"short, or a field missing or of the wrong type) and are left out. The first:</p>"
        f"<ul>{shown}</ul>"
    )


def render(page: Page) -> str:
    commands = page.lines - page.bad
    files = "".join(f"<li><code>{escape(f)}</code></li>" for f in page.files)
    charts = "".join(
        f'<h3>{escape(c.title)}</h3><img src="{escape(c.file)}" alt="{escape(c.title)}">'
        for c in page.charts
    )
    tables = ", ".join(f'<a href="{escape(t)}"><code>{escape(t)}</code></a>' for t in page.tables)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>streamgate traffic report {escape(_when(page.first))} - {escape(_when(page.last))}</title>
<style>{STYLE}</style></head><body>
<h1>streamgate traffic report</h1>
<p>From <b>{escape(_when(page.first))}</b> to <b>{escape(_when(page.last))}</b> (minutes):
<b>{commands:,}</b> commands in {page.lines:,} lines, {page.bad:,} bad lines.
Generated {escape(_when(page.generated))} from:</p>
<ul>{files}</ul>
<h2>Charts</h2>
{charts}
<h2>Per protocol, command and outcome</h2>
<p>Durations in milliseconds: <i>p50/p95/p99/max</i> of the time the client's request spent in
the gateway (translation, backend, encoding; long-poll waits excluded), <i>backend p99</i> of the
command's own execution by the backend. Percentiles are values that occurred (nearest rank),
exact up to about 5,000 commands per row and within 0.01 % of the row's count in rank past
that (Spark's percentile_approx, accuracy 10,000).</p>
{_summary(page.summary)}
<h2>Errors</h2>
{_errors(page.errors)}
{_bad(page)}
<h2>Data</h2>
<p>Parquet: {tables}. Per minute, per protocol, command and outcome:
<code>spark.read.parquet("by_minute.parquet")</code> or
<code>pyarrow.parquet.read_table("by_minute.parquet")</code>.</p>
</body></html>
"""


__all__ = ["BadLine", "Page", "render"]
