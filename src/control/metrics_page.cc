#include "control/metrics_page.h"

namespace ps {

namespace {

// Kept free of anything fetched from elsewhere: the page must work on a cluster without a
// route to the internet. Rates are differences of /stats counters between polls.
const char kPage[] = R"PAGE(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ps job</title>
<style>
body{font:14px/1.35 system-ui,sans-serif;margin:16px;color:#222;background:#fafafa}
h1{font-size:20px;margin:0 0 4px}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:14px}
.panel{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px}
.panel h2{font-size:15px;margin:0 0 8px}
#summary{margin:4px 0 12px;font-size:15px}
.dead{color:#b00020;font-weight:bold}
.ring{color:#0b5cad}
table{border-collapse:collapse;width:100%}
td,th{padding:3px 6px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child{text-align:left}
#events div{padding:2px 0;border-bottom:1px solid #f0f0f0}
.legend span{display:inline-block;margin-right:10px}
.sw{display:inline-block;width:10px;height:10px;margin-right:3px;vertical-align:middle}
small{color:#666}
</style></head><body>
<h1>ps job</h1>
<div id="summary">waiting for the scheduler&hellip;</div>
<div class="grid">
<div class="panel"><h2>Throughput per node (MB/s sent)</h2><svg id="tput" width="560" height="220"></svg>
<div class="legend" id="legend"></div></div>
<div class="panel"><h2>Worker steps</h2><div id="steps"></div></div>
<div class="panel"><h2>Servers: keys and load</h2><div id="servers"></div></div>
<div class="panel"><h2>Failures and ring changes</h2><div id="events"><small>none yet</small></div></div>
</div>
<p><small id="status"></small></p>
<script>
"use strict";
const palette = ["#1f77b4","#ff7f0e","#2ca02c","#d62728","#9467bd","#8c564b","#e377c2",
                 "#7f7f7f","#bcbd22","#17becf"];
function color(id) { return palette[id % palette.length]; }
function esc(s) {
  return String(s).replace(/[&<>"]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;","\"":"&quot;"}[c]));
}
// Sum of a family over its labels (apps, ops), or null when the node has none.
function sum(m, name) {
  let s = 0, any = false;
  for (const k in m) if (k === name || k.startsWith(name + "{")) { s += m[k]; any = true; }
  return any ? s : null;
}
function max(m, name) {
  let s = null;
  for (const k in m) if (k === name || k.startsWith(name + "{")) s = s === null ? m[k] : Math.max(s, m[k]);
  return s;
}
// history rows: [ms ago, bytes sent, bytes received, pulls, requests], oldest first, one per
// set of counters the node sent (about one a second): rates between consecutive rows.
const SENT = 1, RECV = 2, PULLS = 3;
function rates(n, col) {
  const h = n.history || [], out = [];
  for (let i = 1; i < h.length; ++i) {
    const dt = (h[i - 1][0] - h[i][0]) / 1000;
    if (dt > 0) out.push([-h[i][0] / 1000, Math.max(0, (h[i][col] - h[i - 1][col]) / dt)]);
  }
  return out;
}
function rate(n, col) {
  const r = rates(n, col);
  return r.length && !n.dead ? r[r.length - 1][1] : 0;
}
function name(n) { return n.role + " " + n.rank + " (node " + n.id + ")"; }
function render(s) {
  const j = s.job;
  const dead = s.nodes.filter(n => n.dead);
  document.getElementById("summary").innerHTML =
    '<span class="ring">ring epoch ' + (j["ps_job_ring_epoch"] || 0) + "</span> &middot; " +
    (j['ps_job_nodes{role="server"}'] || 0) + " servers, " +
    (j['ps_job_nodes{role="worker"}'] || 0) + " workers live &middot; " +
    (dead.length ? '<span class="dead">' + dead.length + " dead: " +
                   dead.map(n => esc(name(n))).join(", ") + "</span>" : "none dead") +
    " &middot; tasks done " + (j["ps_job_tasks_done"] || 0);
  // Throughput: one line per node over the last polls.
  const W = 560, H = 200, series = [];
  let top = 0.001;
  for (const n of s.nodes) {
    const pts = rates(n, SENT).map(p => [p[0], p[1] / 1e6]);
    for (const p of pts) top = Math.max(top, p[1]);
    series.push([n, pts]);
  }
  // The window: the history there is, at least 20 s and at most the 2 minutes kept.
  let oldest = 20;
  for (const [n, pts] of series) if (pts.length) oldest = Math.max(oldest, -pts[0][0]);
  const t1 = 0, t0 = -Math.min(120, Math.ceil(oldest / 10) * 10);
  const x = t => 40 + (t - t0) / (t1 - t0) * (W - 40);
  let svg = '<rect x="40" y="0" width="' + (W - 40) + '" height="' + H + '" fill="#fff" stroke="#ccc"/>';
  for (let k = 0; k <= 4; ++k) {
    const y = H - k * H / 4;
    svg += '<line x1="40" x2="' + W + '" y1="' + y + '" y2="' + y + '" stroke="#eee"/>' +
           '<text x="36" y="' + (y + 4) + '" font-size="10" text-anchor="end">' +
           (top * k / 4).toFixed(top < 4 ? 1 : 0) + "</text>";
  }
  for (const [n, pts] of series) {
    if (!pts.length) continue;
    const p = pts.filter(q => q[0] >= t0).map(q =>
      x(q[0]).toFixed(1) + "," + (H - q[1] / top * H).toFixed(1));
    svg += '<polyline class="node-line" data-node="' + n.id + '" fill="none" stroke-width="2" stroke="' +
           color(n.id) + '"' + (n.dead ? ' stroke-dasharray="4 3"' : "") + ' points="' + p.join(" ") + '"/>';
  }
  // Failures and ring changes where they happened.
  const up = j["ps_job_uptime_seconds"] || 0;
  for (const e of s.events) {
    const t = e.ms / 1000 - up;
    if (t < t0) continue;
    const bad = /dead|abort|left/.test(e.what);
    svg += '<line class="event-mark" x1="' + x(t).toFixed(1) + '" x2="' + x(t).toFixed(1) +
           '" y1="0" y2="' + H + '" stroke="' + (bad ? "#b00020" : "#0b5cad") +
           '" stroke-dasharray="' + (bad ? "none" : "3 3") + '"><title>' + esc(e.what) +
           "</title></line>";
  }
  svg += '<text x="' + W + '" y="' + (H + 16) + '" font-size="10" text-anchor="end">now</text>' +
         '<text x="40" y="' + (H + 16) + '" font-size="10">' + (-t0) + ' s ago</text>';
  document.getElementById("tput").innerHTML = svg;
  document.getElementById("legend").innerHTML = s.nodes.map(n =>
    '<span><i class="sw" style="background:' + color(n.id) + '"></i>' + esc(name(n)) +
    (n.dead ? ' <b class="dead">dead</b>' : "") + " " + (rate(n, SENT) / 1e6).toFixed(1) +
    "</span>").join("");
  // Worker steps: the spread the barrier policy allows.
  const ws = s.nodes.filter(n => n.role === "worker");
  const steps = ws.map(n => max(n.metrics, "ps_worker_step") || 0);
  const hi = Math.max(1, ...steps);
  const spread = steps.length ? Math.max(...steps) - Math.min(...steps) : 0;
  let st = '<div><small>slowest to fastest: ' + spread + " steps</small></div><svg width='520' height='" +
           (ws.length * 22 + 4) + "'>";
  ws.forEach((n, i) => {
    const w = steps[i] / hi * 280, lag = max(n.metrics, "ps_worker_read_lag");
    st += '<text x="0" y="' + (i * 22 + 15) + '" font-size="12">' + esc(name(n)) + "</text>" +
          '<rect class="step-bar" x="130" y="' + (i * 22 + 3) + '" height="16" width="' + w.toFixed(1) +
          '" fill="' + (n.dead ? "#ccc" : color(n.id)) + '"/>' +
          '<text x="' + (136 + w) + '" y="' + (i * 22 + 15) + '" font-size="12">' + steps[i] +
          (lag !== null ? " (lag " + lag + ")" : "") + (n.dead ? " dead" : "") + "</text>";
  });
  document.getElementById("steps").innerHTML = st + "</svg>";
  // Servers.
  let tb = "<table><tr><th>server</th><th>keys</th><th>mastered</th><th>pulls/s</th>" +
           "<th>MB/s in</th><th>copies</th><th>pending ranges</th></tr>";
  for (const n of s.nodes.filter(n => n.role === "server")) {
    tb += "<tr" + (n.dead ? ' class="dead"' : "") + "><td>" + esc(name(n)) + (n.dead ? " dead" : "") +
          "</td><td>" + (sum(n.metrics, "ps_server_keys") || 0) + "</td><td>" +
          (sum(n.metrics, "ps_server_mastered_keys") || 0) + "</td><td>" +
          rate(n, PULLS).toFixed(0) + "</td><td>" + (rate(n, RECV) / 1e6).toFixed(1) + "</td><td>" +
          (sum(n.metrics, "ps_server_copies_total") || 0) + "</td><td>" +
          (sum(n.metrics, "ps_server_pending_ranges") || 0) + "</td></tr>";
  }
  document.getElementById("servers").innerHTML = tb + "</table>";
  // Events, newest first.
  if (s.events.length) {
    document.getElementById("events").innerHTML = s.events.slice().reverse().map(e =>
      '<div class="' + (/dead|abort|left/.test(e.what) ? "dead" : "ring") + '">' +
      (e.ms / 1000).toFixed(1) + " s: " + esc(e.what) + "</div>").join("");
  }
}
async function poll() {
  try {
    const r = await fetch("/stats", {cache: "no-store"});
    render(await r.json());
    document.getElementById("status").textContent = "live: /stats polled every second; " +
      "Prometheus text at /metrics";
  } catch (e) {
    document.getElementById("status").textContent = "no answer from the scheduler (the job ended?)";
  }
  setTimeout(poll, 1000);
}
poll();
</script></body></html>
)PAGE";

}  // namespace

const char* LivePageHtml() { return kPage; }

}  // namespace ps
