"""The status page (``/`` on the admin port): one HTML document, its style and script inline,
no build step and no asset from anywhere. The script fetches ``status.json`` (relative, so the
page works behind a path prefix such as ``kubectl proxy``'s) every few seconds and fills the
tables with ``textContent`` only: nothing it receives is parsed as HTML.

``CONTENT_SECURITY_POLICY`` allows exactly the inline style and script below (by hash) and
fetches from the admin port itself; a browser refuses anything else the page might try.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Final

REFRESH_MS: Final = 3000

STYLE: Final = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1d2330;background:#f7f8fa}
h1{font-size:1.3em;margin:0 0 .2em}h2{font-size:1.05em;margin:1.4em 0 .4em}
table{border-collapse:collapse;background:#fff;box-shadow:0 1px 2px #0002}
th,td{padding:.3em .8em;border-bottom:1px solid #e3e6eb;text-align:right}
th{background:#eef1f5;font-weight:600}th:first-child,td:first-child{text-align:left}
.left th,.left td,.two th:nth-child(2),.two td:nth-child(2){text-align:left}
code{font-size:.95em}.meta{color:#5b6475}.badge{padding:.15em .6em;border-radius:.8em;color:#fff}
.ok{background:#1f8a4c}.bad{background:#c0392b}#stale{color:#c0392b;font-weight:600}
.err{color:#c0392b}.none td{color:#8a93a3;font-style:italic}
"""

SCRIPT: Final = """
"use strict";
const $ = (id) => document.getElementById(id);
const rate = (v) => v == null ? "-" : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1)
  : v.toFixed(2);
const secs = (s) => s == null ? "-" : s < 1e-3 ? (s * 1e6).toFixed(0) + " \\u00b5s"
  : s < 1 ? (s * 1e3).toFixed(2) + " ms" : s.toFixed(2) + " s";
const bytes = (v) => v == null ? "-" : v >= 1e6 ? (v / 1e6).toFixed(1) + " MB/s"
  : v >= 1e3 ? (v / 1e3).toFixed(1) + " kB/s" : v.toFixed(0) + " B/s";
const ago = (s) => s == null ? "-" : s >= 3600 ? Math.floor(s / 3600) + " h "
  + Math.floor(s % 3600 / 60) + " min" : s >= 60 ? Math.floor(s / 60) + " min "
  + Math.floor(s % 60) + " s" : Math.floor(s) + " s";
function fill(id, items, cells, data) {
  const body = $(id), rows = items.map((item) => {
    const tr = document.createElement("tr");
    for (const [k, v] of Object.entries(data(item))) tr.dataset[k] = v;
    for (const text of cells(item)) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.append(td);
    }
    return tr;
  });
  if (!rows.length) {
    const tr = document.createElement("tr"), td = document.createElement("td");
    tr.className = "none"; td.colSpan = body.parentNode.rows[0].cells.length;
    td.textContent = "none"; tr.append(td); rows.push(tr);
  }
  body.replaceChildren(...rows);
}
function render(s) {
  $("version").textContent = s.version;
  $("ready").textContent = s.ready ? "ready" : "not ready";
  $("ready").className = "badge " + (s.ready ? "ok" : "bad");
  $("reason").textContent = s.reason;
  $("reason").className = s.ready ? "" : "err";
  $("scope").textContent = s.scope;
  $("uptime").textContent = ago(s.uptime_s);
  $("window").textContent = ago(s.window_s);
  $("updated").textContent = new Date().toLocaleTimeString();
  $("backend-name").textContent = s.backend.name;
  $("backend-url").textContent = s.backend.url;
  $("backend-up").textContent = s.backend.up == null ? "-" : s.backend.up ? "yes" : "no";
  fill("listeners", s.listeners, (l) => [l.protocol, l.address], (l) => ({protocol: l.protocol}));
  fill("protocols", s.protocols, (p) => [p.protocol, p.active.toFixed(0),
    p.accepted_total.toFixed(0), rate(p.connection_errors_per_s), rate(p.messages_in_per_s),
    rate(p.messages_out_per_s), bytes(p.bytes_in_per_s), bytes(p.bytes_out_per_s)],
    (p) => ({protocol: p.protocol}));
  fill("commands", s.commands, (c) => [c.protocol, c.command, c.count.toFixed(0), rate(c.per_s),
    rate(c.errors_per_s), secs(c.p99_s)], (c) => ({protocol: c.protocol, command: c.command}));
  $("workers-section").hidden = s.workers == null;
  if (s.workers != null) fill("workers", s.workers, (w) => [String(w.index), String(w.pid),
    w.running ? "yes" : "no", String(w.starts)], (w) => ({worker: w.index}));
}
async function refresh() {
  try {
    const r = await fetch("status.json", {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status);
    render(await r.json());
    $("stale").hidden = true;
  } catch (e) {
    $("stale").textContent = "cannot reach the gateway (" + e.message + "): showing the last"
      + " numbers it sent";
    $("stale").hidden = false;
  }
  setTimeout(refresh, REFRESH_MS);
}
refresh();
""".replace("REFRESH_MS", str(REFRESH_MS))

BODY: Final = """
<h1>streamgate <span id="version"></span> <span id="ready" class="badge">loading</span></h1>
<p class="meta"><span id="scope"></span> &middot; up
<span id="uptime">-</span> &middot; rates over the last <span id="window">-</span> &middot;
updated <span id="updated">never</span></p>
<p id="stale" hidden></p>
<noscript><p>This page needs JavaScript; the same numbers are at
<a href="status.json">status.json</a>.</p></noscript>
<h2>Backend</h2>
<table class="left"><tbody>
<tr><th>Backend</th><td id="backend-name">-</td></tr>
<tr><th>URL</th><td><code id="backend-url">-</code></td></tr>
<tr><th>Readiness</th><td id="reason">-</td></tr>
<tr><th>Answered its last check</th><td id="backend-up">-</td></tr>
</tbody></table>
<h2>Listeners</h2>
<table class="left"><thead><tr><th>Protocol</th><th>Address</th></tr></thead>
<tbody id="listeners"></tbody></table>
<h2>Connections and traffic</h2>
<table><thead><tr><th>Protocol</th><th>Open</th><th>Accepted</th><th>Conn. errors/s</th>
<th>Messages in/s</th><th>Messages out/s</th><th>In</th><th>Out</th></tr></thead>
<tbody id="protocols"></tbody></table>
<h2>Commands</h2>
<table class="two"><thead><tr><th>Protocol</th><th>Command</th><th>Count</th><th>Per second</th>
<th>Errors/s</th><th>p99</th></tr></thead>
<tbody id="commands"></tbody></table>
<section id="workers-section" hidden><h2>Workers</h2>
<table><thead><tr><th>Worker</th><th>PID</th><th>Running</th><th>Starts</th></tr></thead>
<tbody id="workers"></tbody></table></section>
<p class="meta">Rates and p99 (estimated from the histogram buckets, as Prometheus's
histogram_quantile does) compare the metrics now with a sample taken up to a minute ago.
Raw: <a href="metrics">metrics</a> &middot; <a href="status.json">status.json</a> &middot;
<a href="readyz">readyz</a></p>
"""


def _hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


PAGE: Final = (
    '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">\n'
    '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
    '<title>streamgate status</title><link rel="icon" href="data:,">\n'
    f"<style>{STYLE}</style></head><body>{BODY}<script>{SCRIPT}</script>\n</body></html>\n"
).encode()

CONTENT_SECURITY_POLICY: Final = (
    f"default-src 'none'; script-src {_hash(SCRIPT)}; style-src {_hash(STYLE)}; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)

__all__ = ["CONTENT_SECURITY_POLICY", "PAGE", "REFRESH_MS"]
