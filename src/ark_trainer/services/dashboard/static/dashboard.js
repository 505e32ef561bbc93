// ark-trainer dashboard: polls /api/runs and /api/run?key=... and redraws in place (charts: uPlot).
"use strict";

const POLL_RUN_MS = 2000, POLL_LIST_MS = 5000;
const COLORS = ["#2f80ed", "#d64545", "#27ae60", "#f0b429", "#9b51e0", "#00a3a3", "#e67e22", "#7b8794"];
// Charts per stage: [id, title, keys(data) -> metric names, fixed y range]. Shown when one of its keys was logged.
const graders = (d) => Object.keys(d).filter((k) => /^rewards\/.+\/mean$/.test(k) && k !== "rewards/total/mean");
const CHARTS = [
  ["reward", "reward (and each grader)", (d) => ["reward", ...graders(d)]],
  ["loss", "loss", () => ["loss"]],
  ["kl", "KL to reference", () => ["kl"]],
  ["entropy", "entropy", () => ["entropy"]],
  ["zero_std", "share of zero-std groups", () => ["frac_reward_zero_std"], [0, 1]],
  ["length", "completion length (tokens)", () => ["completions/mean_length", "completions/max_length"]],
  ["clipped", "share of truncated completions", () => ["completions/clipped_ratio"], [0, 1]],
  ["accuracy", "token accuracy", () => ["mean_token_accuracy"]],
  ["lr", "learning rate", () => ["learning_rate"]],
  ["time", "step time (s)", () => ["step_time", "generation_time"]],
];

const state = { key: decodeURIComponent((location.hash.match(/key=([^&]+)/) || [])[1] || ""), plots: {} };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  Object.entries(attrs || {}).forEach(([k, v]) => (k === "class" ? (node.className = v) : node.setAttribute(k, v)));
  children.flat().forEach((c) => node.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c))));
  return node;
}

function fmt(v) {
  if (v == null) return "—";
  if (typeof v !== "number") return String(v);
  return Math.abs(v) >= 1000 || v === Math.round(v) ? String(v) : v.toPrecision(4);
}

function tick(v) {  // short y-axis labels: 3 significant digits, exponent for tiny values
  if (v === 0) return "0";
  return Math.abs(v) < 1e-3 || Math.abs(v) >= 1e5 ? v.toExponential(1) : String(Number(v.toPrecision(3)));
}

async function getJSON(url) {
  const response = await fetch(url, { cache: "no-store" });
  if (!response.ok) {
    let why = String(response.status);
    try { why = (await response.json()).error || why; } catch (err) { /* not JSON: the status says it */ }
    throw new Error(why);
  }
  return response.json();
}

async function pollList() {
  try {
    const { runs } = await getJSON("/api/runs");
    if (!state.key && runs.length) select(runs[0].key);
    const list = document.getElementById("runs");
    list.replaceChildren(...runs.map((r) => {
      const item = el("li", { class: r.key === state.key ? "selected" : "", "data-key": r.key },
        r.name, " ", el("span", { class: "state " + r.state }, r.state),
        el("small", {}, r.stage ? `${r.stage} ${r.step}/${r.total}` : r.path));
      item.onclick = () => select(r.key);
      return item;
    }));
  } catch (err) {
    document.getElementById("runs").replaceChildren(el("li", {}, "server unreachable"));
  }
}

function select(key) {
  state.key = key;
  location.hash = "key=" + encodeURIComponent(key);
  Object.values(state.plots).forEach((p) => p.plot.destroy());
  state.plots = {};
  document.getElementById("charts").replaceChildren();
  pollList();
  pollRun();
}

async function pollRun() {
  if (!state.key) return;
  try {
    const run = await getJSON("/api/run?key=" + encodeURIComponent(state.key));
    if (run.key !== state.key) return;
    drawHead(run);
    drawDiagnosis(run.diagnosis);
    drawCharts(run.stages);
    drawTimeline(run.timeline);
    drawEvals(run.evals);
  } catch (err) {
    document.getElementById("head").replaceChildren(el("h2", {}, "run not reachable: " + err.message));
  }
}

function drawHead(run) {
  const eta = run.eta_seconds != null ? `, ETA ${Math.round(run.eta_seconds)}s` : "";
  const left = run.run_left_seconds != null ? `, run left about ${Math.round(run.run_left_seconds / 60)} min` : "";
  document.getElementById("head").replaceChildren(
    el("h2", {}, run.name, " ", el("span", { class: "state " + run.state, id: "run-state" }, run.state)),
    el("p", { class: "muted" }, `${run.path} — stage ${run.stage || "—"}, step ${run.step ?? "—"}/${run.total ?? "—"}${eta}${left}, last beat ${run.updated_at || "—"}`));
}

function drawDiagnosis(diagnosis) {
  const findings = (diagnosis && diagnosis.findings) || [];
  const items = findings.map((f) => el("div", { class: "finding " + f.severity, "data-code": f.code },
    el("b", {}, `${f.severity} ${f.code}`), ` (${f.stage}): ${f.evidence}`, el("div", { class: "fix" }, "fix: " + f.fix)));
  document.getElementById("diagnosis").replaceChildren(el("h3", {}, "Diagnosis"),
    ...(items.length ? items : [el("p", { class: "muted" }, "No findings.")]));
}

function drawCharts(stages) {
  const root = document.getElementById("charts");
  for (const [stage, data] of Object.entries(stages || {})) {
    let grid = document.getElementById("grid-" + stage);
    if (!grid) {
      grid = el("div", { class: "grid", id: "grid-" + stage });
      root.append(el("h3", {}, stage.toUpperCase() + " curves"), grid);
    }
    for (const [id, title, keysOf, range] of CHARTS) {
      const keys = keysOf(data).filter((k) => Array.isArray(data[k]) && data[k].some((v) => v != null));
      if (keys.length) drawChart(grid, `${stage}-${id}`, title, data.step, keys.map((k) => [k, data[k]]), range);
    }
  }
}

function drawChart(grid, id, title, steps, series, range) {
  const points = steps.length, names = series.map((s) => s[0]).join(",");
  const data = [steps, ...series.map((s) => s[1])];
  let box = document.getElementById("chart-" + id);
  const known = state.plots[id];
  if (known && known.names === names) {
    if (known.points !== points) {
      known.plot.setData(data);
      showLatest(known.plot);
    }
  } else {
    if (known) known.plot.destroy();
    if (!box) {
      box = el("div", { class: "chart", id: "chart-" + id }, el("div", { class: "title" }, title));
      grid.append(box);
    }
    const opts = {
      width: Math.max(box.clientWidth - 10, 300), height: 200,
      scales: range ? { x: { time: false }, y: { range } } : { x: { time: false } },
      series: [{ label: "step" }, ...series.map((s, i) => ({ label: s[0], stroke: COLORS[i % COLORS.length], spanGaps: true, points: { show: points < 40 } }))],
      axes: [{}, { size: 60, values: (u, splits) => splits.map(tick) }],
      hooks: { ready: [showLatest], setCursor: [showLatest] },
    };
    state.plots[id] = { plot: new uPlot(opts, data, box), names, points };
  }
  state.plots[id].points = points;
  // what the chart holds (read back from uPlot), for a test to compare with the logged steps
  document.getElementById("chart-" + id).setAttribute("data-points", String(state.plots[id].plot.data[0].length));
}

// The legend shows the step under the cursor, and the latest step when the cursor is off the chart
// (uPlot's own legend reads "step: --" then).
function showLatest(u) {
  if (u.cursor.idx == null && u.data[0].length) u.setLegend({ idx: u.data[0].length - 1 });
}

function drawTimeline(rows) {
  const now = Date.now() / 1000;
  const secs = rows.map((r) => r.seconds ?? (r.start ? now - r.start : 0));
  const longest = Math.max(1, ...secs);
  const table = el("table", {}, el("tr", {}, el("th", {}, "stage"), el("th", {}, "status"), el("th", {}, "time"), el("th", { style: "width:300px" }, "")),
    ...rows.map((r, i) => el("tr", { "data-stage": r.stage }, el("td", {}, r.stage), el("td", {}, r.status), el("td", {}, secs[i].toFixed(1) + " s"),
      el("td", {}, el("div", { class: "bar", style: `width:${(100 * secs[i]) / longest}%` })))));
  document.getElementById("timeline").replaceChildren(el("h3", {}, "Stage timeline"), rows.length ? table : el("p", { class: "muted" }, "No stage yet."));
}

// Each stage against the one before it (and the final model against the base), paired prompt by prompt:
// the change with its 95% interval, n and p, as the report and the diagnosis give them (stats.py).
function drawChanges(changes) {
  if (!changes.length) return [];
  const head = el("tr", {}, ...["models", "metric", "change [95% interval]", "n", "p", "verdict"].map((h) => el("th", {}, h)));
  const rows = changes.map((c) => c.untested
    ? el("tr", {}, el("td", {}, c.models), el("td", {}, c.metric), el("td", { colspan: "4", class: "muted" }, `no paired test: ${c.untested}`))
    : el("tr", {}, el("td", {}, c.models), el("td", {}, c.metric), el("td", {}, c.change),
      el("td", {}, String(c.n)), el("td", {}, c.p_text), el("td", {}, c.verdict)));
  return [el("h3", {}, "Stage to stage (paired tests)"), el("table", { class: "eval" }, head, ...rows)];
}

function drawEvals(evals) {
  const models = Object.keys(evals.models || {});
  const section = document.getElementById("evals");
  if (!models.length) return section.replaceChildren(el("h3", {}, "Evaluation"), el("p", { class: "muted" }, "No evaluation yet."));
  const table = (rowsOf, names) => el("table", { class: "eval" }, el("tr", {}, el("th", {}, "metric"), ...models.map((m) => el("th", {}, m))),
    ...names.map((name) => el("tr", {}, el("td", {}, name), ...models.map((m) => el("td", {}, fmt((rowsOf(m) || {})[name]))))));
  const metricNames = Object.keys(evals.models[models[0]]);
  const graderNames = [...new Set(models.flatMap((m) => Object.keys(evals.graders[m] || {})))];
  section.replaceChildren(el("h3", {}, "Evaluation per stage"), table((m) => evals.models[m], metricNames),
    ...(evals.splits ? [el("p", { class: "muted" }, evals.splits)] : []),
    ...drawChanges(evals.changes || []),
    ...(graderNames.length ? [el("h3", {}, "Graders (mean per stage)"), table((m) => evals.graders[m], graderNames)] : []));
  const examples = (evals.examples || []).map((x) => el("tr", {}, el("td", {}, fmt(x.reward)), el("td", {}, el("pre", {}, x.prompt)), el("td", {}, el("pre", {}, x.completion))));
  document.getElementById("examples").replaceChildren(el("h3", {}, `Example answers (${evals.final})`),
    examples.length ? el("table", { class: "examples" }, el("tr", {}, el("th", {}, "reward"), el("th", {}, "prompt"), el("th", {}, "answer")), ...examples) : el("p", { class: "muted" }, "None."));
}

pollList();
pollRun();
setInterval(pollList, POLL_LIST_MS);
setInterval(pollRun, POLL_RUN_MS);
