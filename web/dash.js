/* dash.js - grit's dashboard: polls /api/run (the run view, src/obs/view.c) every
 * 2 s and draws it: uPlot charts (restarts marked as dashed lines), the node
 * grid, the incident timeline, checkpoints, goodput, cost and CO2. Loads
 * nothing but this server's files. */
"use strict";
const $ = (id) => document.getElementById(id);
const charts = {};
let view = null;

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
}
function fmt(v, d = 3) {
  if (v === null || v === undefined || Number.isNaN(v)) return "-";
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
  return v.toFixed(d);
}
function dur(s) {
  if (s === null || s === undefined) return "-";
  if (s < 120) return s.toFixed(1) + " s";
  if (s < 7200) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(2) + " h";
}

/* dashed vertical lines at the steps a run resumed from */
function restartsPlugin() {
  return {hooks: {draw: [(u) => {
    if (!view) return;
    const ctx = u.ctx;
    ctx.save();
    ctx.strokeStyle = "#c33";
    ctx.setLineDash([5, 4]);
    ctx.lineWidth = 1.5 * devicePixelRatio;
    for (const r of view.restarts) {
      const x = Math.round(u.valToPos(r.step, "x", true));
      if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
    }
    ctx.restore();
  }]}};
}

const STEP_INCRS = [];
for (let m = 1; m <= 1e9; m *= 10) STEP_INCRS.push(m, 2 * m, 5 * m);

function makeChart(id, label, color, log, extra) {
  const el = $(id);
  const opts = {
    width: Math.max(300, el.clientWidth), height: 220,
    scales: {x: {time: false}, y: log ? {distr: 3} : {}},
    // steps are whole numbers: tick only at integer increments
    axes: [{label: "step", incrs: STEP_INCRS}, {size: 75}],
    series: [{label: "step"}, {label, stroke: color, width: 1.5, spanGaps: true}, ...(extra || [])],
    plugins: [restartsPlugin()],
    legend: {live: true},
  };
  return new uPlot(opts, [[], [], ...(extra || []).map(() => [])], el);
}

function setCharts(s) {
  const x = s.step;
  // validation (eval.interval_steps) beside training: points only where it ran
  charts.loss.setData([x, s.loss, s.val_loss || x.map(() => null)]);
  charts.gnorm.setData([x, s.grad_norm]);
  charts.tps.setData([x, s.tokens_per_s]);
  charts.mfu.setData([x, s.mfu.map((v) => (v === null ? null : 100 * v))]);
}

function cards(v) {
  const s = v.summary;
  const c = [
    ["step", s.step ?? "-"], ["loss", fmt(s.loss, 4)], ["val loss", fmt(s.val_loss, 4)], ["tokens/s", fmt(s.tokens_per_s, 0)],
    ["goodput", s.wall_s > 0 ? (100 * s.goodput).toFixed(1) + " %" : "-"],
    ["restarts", s.restarts], ["incidents", s.incidents], ["wall", dur(s.wall_s)],
    ["cost", s.cost !== undefined ? fmt(s.cost, 4) : "not set"],
    ["CO\u2082", s.co2_kg !== undefined ? fmt(s.co2_kg * 1000, 2) + " g" : "not set"],
    ["tokens / $", s.tokens_per_dollar !== undefined ? fmt(s.tokens_per_dollar, 0) : "-"],
  ];
  $("cards").innerHTML = c.map(([k, v]) => `<div class="card"><span>${esc(k)}</span><b>${esc(v)}</b></div>`).join("");
}

function nodes(v) {
  $("nodes").innerHTML = v.nodes.length ? v.nodes.map((n) => `
    <div class="node ${esc(n.state)}" data-node="${esc(n.name)}" data-state="${esc(n.state)}">
      <div><b>${esc(n.name)}</b> <span class="st">${esc(n.state)}</span></div>
      ${n.reason ? `<div class="reason">${esc(n.reason)}</div>` : ""}
      ${n.step_time_s !== undefined ? `<div>step ${esc(n.step)}: ${fmt(n.step_time_s, 3)} s
        (comm ${fmt(n.comm_time_s, 3)} s)</div>` : ""}
      ${n.tokens_per_s !== undefined ? `<div>${fmt(n.tokens_per_s, 0)} tok/s</div>` : ""}
    </div>`).join("") : '<p class="empty">no cluster.json (not run under grit launch)</p>';
}

/* one incident's phases as a bar: fault -> detected -> diagnosed -> cordoned -> training again */
function phases(i) {
  const t0 = i.fault_ts > 0 ? i.fault_ts : i.detect_ts;
  const diag = i.diagnosis.length ? i.diagnosis[i.diagnosis.length - 1].ts : i.detect_ts;
  const cord = i.cordoned.length ? i.cordoned[i.cordoned.length - 1].ts : diag;
  const end = i.recovered ? i.recovered.ts : (view ? view.now : cord);
  const segs = [["detect", t0, i.detect_ts], ["diagnose", i.detect_ts, diag],
                ["repair", diag, Math.max(diag, cord)], ["restart", Math.max(diag, cord), end]];
  const total = Math.max(end - t0, 1e-3);
  return `<div class="phases" title="${(end - t0).toFixed(2)} s from the fault to training again">` +
    segs.map(([name, a, b]) => {
      const w = Math.max(0, (b - a) / total * 100);
      return w > 0 ? `<span class="ph ${name}" style="width:${w.toFixed(2)}%" title="${name}: ${(b - a).toFixed(2)} s"></span>` : "";
    }).join("") + `</div><small>${(end - t0).toFixed(2)} s${i.recovered ? "" : " so far"}</small>`;
}

function incidents(v) {
  const rows = v.incidents.map((i, k) => {
    const det = i.fault_ts > 0 ? `+${(i.detect_ts - i.fault_ts).toFixed(2)} s after the fault` : "at " + new Date(i.detect_ts * 1000).toLocaleTimeString();
    const diag = i.diagnosis.map((d) => `${esc(d.node)}: ${esc(d.verdict)}`).join("<br>") || "-";
    const cord = i.cordoned.map((d) => `${esc(d.node)} &rarr; ${esc(d.replacement)}`).join("<br>") || "-";
    const rec = i.recovered ? `+${i.recovered.recovery_s.toFixed(2)} s, at step ${i.recovered.resumed_at_step}` : "not yet";
    return `<tr class="incident"><td>${k + 1}</td><td>${esc(i.kind)}</td><td>${esc(i.node)}</td><td>${i.step}</td>
      <td>${phases(i)}</td><td>${det}</td><td>${diag}</td><td>${cord}</td><td>${rec}</td>
      <td>${i.recovered ? i.recovered.steps_lost : "-"}</td><td>${esc(i.detail)}</td></tr>`;
  });
  $("incidents").tBodies[0].innerHTML = rows.join("") || '<tr><td colspan="11" class="empty">no incidents</td></tr>';
}

function ckpts(v) {
  const rows = v.checkpoints.slice().sort((a, b) => b.step - a.step).map((c) => `<tr>
    <td>${c.step}</td><td>${c.bytes ? (c.bytes / 1048576).toFixed(2) + " MiB" : "-"}</td>
    <td>${fmt(c.seconds, 3)}</td><td>${fmt(c.stall_s, 3)}</td><td>${fmt(c.gb_per_s, 2)}</td>
    <td>${c.present ? "yes" : "pruned"}</td></tr>`);
  /* failed saves and checkpoints a resume rejected: red rows with the reason */
  const bad = (v.ckpt_failures || []).slice().reverse().map((f) => `<tr class="bad">
    <td>${f.step === null ? "-" : f.step}</td><td colspan="5">${f.kind === "save_failed" ? "save FAILED" :
      f.kind === "fallback" ? "rejected at resume (fell back)" : "local copy rejected"}: ${esc(f.detail)}</td></tr>`);
  $("ckpts").tBodies[0].innerHTML = bad.concat(rows).join("") || '<tr><td colspan="6" class="empty">none yet</td></tr>';
}

function cost(v) {
  const s = v.summary, c = v.config;
  const r = [
    ["wall time", dur(s.wall_s)], ["productive (kept steps)", dur(s.productive_s)],
    ["lost to failures and restarts", dur(s.lost_s)],
    ["goodput", s.wall_s > 0 ? (100 * s.goodput).toFixed(2) + " %" : "-"],
    ["checkpoint stall", dur(s.ckpt_stall_s)],
    ["nodes allocated", `${s.allocated_nodes} (${s.nodes} active + ${s.spares} spare)`],
    ["node-hours", fmt(s.node_hours, 4)],
    ["energy", s.energy_source === "unknown" ? "unknown (set --node-watts)" : `${fmt(s.energy_kwh, 4)} kWh (${s.energy_source}${s.energy_hosts ? ` on ${s.energy_hosts} host${s.energy_hosts === 1 ? "" : "s"} measured` : ""}, ${fmt(s.power_w, 0)} W)`],
    ["CO\u2082", s.co2_kg !== undefined ? `${fmt(s.co2_kg, 4)} kg at ${c.grid_gco2_kwh} g/kWh` : "unknown (set --grid-gco2-kwh and power)"],
    ["cost", s.cost !== undefined ? `${fmt(s.cost, 4)} at ${c.price_node_hour} per node-hour` : "unknown (set --price-node-hour)"],
    ["cost of failures", s.failure_cost !== undefined ? fmt(s.failure_cost, 4) : "-"],
    ["tokens per dollar", s.tokens_per_dollar !== undefined ? fmt(s.tokens_per_dollar, 0) : "-"],
  ];
  $("cost").tBodies[0].innerHTML = r.map(([k, x]) => `<tr><th>${esc(k)}</th><td>${esc(x)}</td></tr>`).join("");
}

async function refresh() {
  try {
    const r = await fetch("/api/run", {cache: "no-store"});
    if (!r.ok) throw new Error(await r.text());
    view = await r.json();
  } catch (e) {
    $("state").textContent = "unreachable";
    $("state").className = "badge GAVE_UP";
    $("updated").textContent = String(e.message || e);
    return;
  }
  $("run").textContent = view.run_dir;
  $("state").textContent = view.state + (view.gave_up_reason ? ": " + view.gave_up_reason : "");
  $("state").className = "badge " + view.state;
  $("updated").textContent = (view.finished ? "finished; " : "live; ") + "updated " + new Date().toLocaleTimeString();
  setCharts(view.series);
  $("mfu-note").textContent = view.config.peak_tflops > 0 ? `% of ${view.config.peak_tflops} TFLOP/s per node` : "set --peak-tflops for MFU";
  cards(view); nodes(view); incidents(view); ckpts(view); cost(view);
  document.body.dataset.loaded = "1";
}

function start() {
  if (typeof uPlot === "undefined") {
    document.body.innerHTML = "<h1>uPlot did not load</h1><p>/uplot.js is missing: run <code>make deps</code> (npm install in web/).</p>";
    return;
  }
  charts.loss = makeChart("c-loss", "loss", "#1f5fbf", false,
                          [{label: "validation", stroke: "#d03030", width: 2, dash: [6, 4], spanGaps: true,
                            points: {show: true, size: 6}}]);
  charts.gnorm = makeChart("c-gnorm", "grad norm", "#bf6f1f", false);
  charts.tps = makeChart("c-tps", "tokens/s", "#2f9f4f", false);
  charts.mfu = makeChart("c-mfu", "MFU %", "#7f3fbf", false);
  window.gritDash = {charts, get view() { return view; }};
  refresh();
  setInterval(refresh, 2000);
  addEventListener("resize", () => {
    for (const [id, u] of Object.entries({"c-loss": charts.loss, "c-gnorm": charts.gnorm, "c-tps": charts.tps, "c-mfu": charts.mfu}))
      u.setSize({width: Math.max(300, $(id).clientWidth), height: 220});
  });
}
start();
