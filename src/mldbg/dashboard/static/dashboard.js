// mldbg dashboard: polls the JSON API (documented in mldbg/dashboard/app.py) every couple of
// seconds and redraws in place with Plotly.react, so zoom, legend toggles and choices survive.
"use strict";
(() => {
  const POLL_MS = 2000;
  const OVERLAP = 8; // steps asked again on each poll: the newest steps may still be completed
  const COLORS = ["#3b5bdb", "#e8590c", "#2f9e44", "#ae3ec9", "#0c8599", "#d6336c", "#a47f00",
    "#5c7cfa", "#495057", "#f08c00", "#1098ad", "#74b816"];
  const DASH = { TRAIN: "solid", EVAL: "dot", PREDICT: "dash", GLOBAL: "dashdot" };
  const COLLECTION_ORDER = ["gradients", "weights", "biases", "outputs", "relu_activations",
    "tanh_activations", "sigmoid_activations", "inputs", "predictions", "labels", "losses", "scalars",
    "optimizer_variables"];
  const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"] };

  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;
  const encRun = (name) => name.split("/").map(enc).join("/");
  const num = (v) => (typeof v === "number" ? v : Number(v)); // "NaN", "Infinity" -> numbers
  const finite = (v) => { const x = num(v); return Number.isFinite(x) ? x : null; };
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const fmt = (x) => (x === null || x === undefined ? "–" : Math.abs(x) >= 1e4 || (Math.abs(x) < 1e-3 && x !== 0) ? x.toExponential(3) : +x.toPrecision(4));

  const state = {
    runs: [],
    color: {},
    tensorsAt: {}, // run -> step count when its tensor list was read
    tensors: {}, // run -> {names: Set, collections}
    scalars: {}, // run -> {name -> {collection, rows: Rows}}
    tensor: null, reduction: "l2", abs: false, redKey: "",
    red: {}, redErr: {}, // run -> Rows | message
    distRun: null, dist: null, // {key, rows, err}
    hist: null, histKey: "", histStep: null, followLatest: true, distMode: null,
    findings: {}, findingsSig: "", pickerSig: "", ranges: {},
    ticking: false, again: false, timer: null,
  };

  // rows: step -> [mode, value], kept in step order on demand --------------------------------------
  class Rows {
    constructor() { this.map = new Map(); this.max = null; }
    merge(steps, modes, values) {
      steps.forEach((s, i) => {
        this.map.set(s, [modes[i], values[i]]);
        if (this.max === null || s > this.max) this.max = s;
      });
    }
    since() { return this.max === null ? "" : `&since=${this.max - OVERLAP}`; }
    sorted() { return [...this.map.entries()].sort((a, b) => a[0] - b[0]); }
  }

  async function getJSON(url) {
    const r = await fetch(url, { cache: "no-store" });
    let body = null;
    try { body = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error((body && body.detail) || `${r.status} ${r.statusText} for ${url}`);
    return body;
  }

  // polling -------------------------------------------------------------------------------------
  async function tick() {
    if (state.ticking) { state.again = true; return; }
    state.ticking = true;
    clearTimeout(state.timer);
    try {
      let info;
      try {
        info = await getJSON("api/runs");
      } catch (e) {
        setLive(false, `dashboard server unreachable (${e.message}); retrying…`);
        return;
      }
      state.runs = info.runs;
      state.rulesEnabled = info.rules.enabled;
      info.runs.forEach((r, i) => { state.color[r.name] = COLORS[i % COLORS.length]; });
      const errors = [];
      await Promise.all(info.runs.filter((r) => r.steps > 0).map((r) => refreshRun(r).catch((e) => errors.push(`${r.name}: ${e.message}`))));
      try {
        state.findings = (await getJSON("api/findings")).runs;
      } catch (e) { errors.push(`findings: ${e.message}`); }
      buildPicker();
      await Promise.all([refreshReduction(), refreshDistribution()]);
      renderRuns();
      renderFindings();
      drawLosses();
      drawReduction();
      drawDistribution();
      setLive(true, errors.join("\n"));
    } finally {
      state.ticking = false;
      state.timer = setTimeout(tick, POLL_MS);
      if (state.again) { state.again = false; tick(); }
    }
  }

  async function refreshRun(r) {
    if (state.tensorsAt[r.name] !== r.steps || !state.tensors[r.name]) {
      const t = await getJSON(`api/runs/${encRun(r.name)}/tensors`);
      state.tensors[r.name] = { names: new Set(t.tensors), collections: t.collections };
      state.tensorsAt[r.name] = r.steps;
    }
    const runScalars = (state.scalars[r.name] ||= {});
    const max = Math.max(-Infinity, ...Object.values(runScalars).map((s) => s.rows.max ?? -Infinity));
    const since = Number.isFinite(max) ? `?since=${max - OVERLAP}` : "";
    const d = await getJSON(`api/runs/${encRun(r.name)}/scalars${since}`);
    for (const s of d.series) {
      const entry = (runScalars[s.name] ||= { collection: s.collection, rows: new Rows() });
      entry.rows.merge(s.steps, s.modes, s.values);
    }
  }

  async function refreshReduction() {
    const key = `${state.tensor}|${state.reduction}|${state.abs}`;
    if (key !== state.redKey) { state.red = {}; state.redErr = {}; state.redKey = key; }
    if (!state.tensor) return;
    await Promise.all(state.runs.map(async (r) => {
      const t = state.tensors[r.name];
      if (!t || !t.names.has(state.tensor)) { delete state.red[r.name]; return; }
      const rows = (state.red[r.name] ||= new Rows());
      try {
        const d = await getJSON(`api/runs/${encRun(r.name)}/reduction?tensor=${enc(state.tensor)}` +
          `&reduction=${state.reduction}&abs=${state.abs}${rows.since()}`);
        if (state.redKey !== key) return; // the choice changed meanwhile
        rows.merge(d.steps, d.modes, d.values);
        delete state.redErr[r.name];
      } catch (e) { state.redErr[r.name] = e.message; }
    }));
  }

  async function refreshDistribution() {
    const runs = state.runs.filter((r) => state.tensors[r.name]);
    const sel = $("dist-run");
    const names = state.runs.map((r) => r.name);
    if (sel.dataset.sig !== names.join("\n")) {
      sel.innerHTML = names.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join("");
      sel.dataset.sig = names.join("\n");
    }
    if (!state.distRun || !names.includes(state.distRun)) {
      const withTensor = runs.find((r) => state.tensors[r.name].names.has(state.tensor));
      state.distRun = withTensor ? withTensor.name : names[0] || null;
    }
    sel.value = state.distRun || "";
    const run = state.distRun, tensor = state.tensor;
    if (!run || !tensor) { state.dist = null; return; }
    const key = `${run}|${tensor}`;
    if (!state.dist || state.dist.key !== key) {
      state.dist = { key, rows: new Map(), max: null, err: null };
      state.hist = null; state.histKey = ""; state.followLatest = true; state.distMode = null;
    }
    const dist = state.dist;
    const t = state.tensors[run];
    if (!t || !t.names.has(tensor)) { dist.err = `run ${run} has no tensor ${tensor}${t ? "" : " (no data yet)"}`; return; }
    try {
      const since = dist.max === null ? "" : `&since=${dist.max - OVERLAP}`;
      const d = await getJSON(`api/runs/${encRun(run)}/distribution?tensor=${enc(tensor)}${since}`);
      if (state.dist !== dist) return;
      d.steps.forEach((s, i) => {
        dist.rows.set(s, { mode: d.modes[i], values: d.values[i].map(finite), nonfinite: d.nonfinite[i], size: d.size[i] });
        if (dist.max === null || s > dist.max) dist.max = s;
      });
      dist.err = null;
    } catch (e) { dist.err = e.message; return; }
    const steps = distSteps();
    if (!steps.length) return;
    const step = state.followLatest || !steps.includes(state.histStep) ? steps[steps.length - 1] : state.histStep;
    state.histStep = step;
    const hkey = `${key}|${step}`;
    if (hkey === state.histKey && state.hist) return;
    try {
      state.hist = await getJSON(`api/runs/${encRun(run)}/histogram?tensor=${enc(tensor)}&step=${step}`);
      state.histKey = hkey;
      state.hist.err = null;
    } catch (e) { state.hist = { err: e.message }; }
  }

  function distSteps() {
    if (!state.dist) return [];
    const modes = [...new Set([...state.dist.rows.values()].map((r) => r.mode))].sort();
    const sel = $("dist-mode");
    if (sel.dataset.sig !== modes.join(",")) {
      sel.innerHTML = modes.map((m) => `<option>${m}</option>`).join("");
      sel.dataset.sig = modes.join(",");
    }
    if (!modes.includes(state.distMode)) state.distMode = modes.includes("TRAIN") ? "TRAIN" : modes[0] || null;
    sel.value = state.distMode || "";
    return [...state.dist.rows.entries()].filter(([, r]) => r.mode === state.distMode).map(([s]) => s).sort((a, b) => a - b);
  }

  function setLive(ok, message) {
    const live = $("live");
    live.className = `live ${ok ? "ok" : "down"}`;
    const allDone = state.runs.length && state.runs.every((r) => r.finished);
    $("live-text").textContent = ok
      ? `${allDone ? "all runs finished" : "live"} · updated ${new Date().toLocaleTimeString()}`
      : "disconnected";
    const banner = $("banner");
    banner.hidden = !message;
    banner.textContent = message || "";
  }

  // the run cards -------------------------------------------------------------------------------
  function firstNonFinite(run) {
    for (const s of Object.values(state.scalars[run] || {})) {
      if (s.collection !== "losses") continue;
      for (const [step, [, v]] of s.rows.sorted()) if (finite(v) === null) return { step, value: v };
    }
    return null;
  }

  function renderRuns() {
    $("runs").innerHTML = state.runs.map((r) => {
      const n = (state.findings[r.name] || {}).findings?.length ?? r.findings;
      const workers = r.workers.length > 1 ? ` · ${r.workers.length} workers` : "";
      let meta;
      if (r.status === "waiting") meta = `waiting for the run to start at ${r.path}`;
      else if (r.status === "error") meta = r.path;
      else {
        meta = `${r.steps} steps · last ${r.last_step}${workers}`;
        if (r.status === "running" && r.seconds_since_new_step > 60) meta += ` · no new step for ${Math.round(r.seconds_since_new_step / 60)} min`;
      }
      const bad = firstNonFinite(r.name);
      const warn = [
        bad ? `loss is ${bad.value} from step ${bad.step}` : "",
        r.corrupt.length ? `${r.corrupt.length} damaged file(s) skipped: ${r.corrupt[0]}` : "",
      ].filter(Boolean).join(" · ");
      return `<div class="run" style="--c:${state.color[r.name]}" data-run="${esc(r.name)}" data-status="${r.status}" data-steps="${r.steps}">
        <span class="swatch"></span>
        <span class="name" title="${esc(r.path)}">${esc(r.name)}</span>
        <span class="pill ${r.status}">${r.status}</span>
        <span class="meta" title="${esc(r.path)}">${esc(meta)} · <span class="badge ${n ? "" : "zero"}" data-findings="${n}" title="findings">${n}</span> finding${n === 1 ? "" : "s"}</span>
        ${warn ? `<span class="warn">⚠ ${esc(warn)}</span>` : ""}
        ${r.error ? `<span class="err">${esc(r.error)}</span>` : ""}
      </div>`;
    }).join("");
  }

  // the findings panel --------------------------------------------------------------------------
  function renderFindings() {
    const filter = $("findings-run");
    const names = state.runs.map((r) => r.name);
    if (filter.dataset.sig !== names.join("\n")) {
      const keep = filter.value;
      filter.innerHTML = `<option value="">all runs</option>` + names.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join("");
      filter.value = names.includes(keep) ? keep : "";
      filter.dataset.sig = names.join("\n");
    }
    const shown = names.filter((n) => !filter.value || n === filter.value);
    const items = shown.flatMap((n) => (state.findings[n] || { findings: [] }).findings);
    const total = names.reduce((k, n) => k + ((state.findings[n] || {}).findings || []).length, 0);
    const badge = $("findings-count");
    badge.textContent = total;
    badge.className = `badge ${total ? "" : "zero"}`;

    const infos = shown.map((n) => state.findings[n]).filter(Boolean);
    const rules = new Set(infos.flatMap((i) => i.rules));
    const skipped = {}, failed = {};
    infos.forEach((i) => { Object.assign(skipped, i.skipped); Object.assign(failed, i.errors); });
    let info;
    if (!state.rulesEnabled) info = "rules are off (--no-rules)";
    else if (!rules.size) info = "the rules start with the first saved steps";
    else {
      const done = infos.every((i) => state.runs.find((r) => r.name === i.run)?.finished);
      info = `${rules.size} rules ${done ? "ran" : "running live"}`;
      if (infos.length === 1 && infos[0].checked_step >= 0) info += ` · checked up to step ${infos[0].checked_step}`;
      const nSkipped = Object.keys(skipped).length;
      if (nSkipped) info += ` · <span title="${esc(Object.entries(skipped).map(([k, v]) => `${k}: ${v}`).join("\n"))}">${nSkipped} skipped for lack of data</span>`;
    }
    const failedText = Object.entries(failed).map(([k, v]) => `<div class="err" style="color:var(--bad)">rule ${esc(k)} failed: ${esc(v)}</div>`).join("");
    const sig = JSON.stringify([items, info, failedText]);
    if (sig === state.findingsSig) return;
    state.findingsSig = sig;
    $("rules-info").innerHTML = (info.includes("<span") ? info : esc(info)) + failedText;
    const order = Object.fromEntries(names.map((n, i) => [n, i]));
    items.sort((a, b) => order[a.run] - order[b.run] || a.step - b.step);
    const anySteps = state.runs.some((r) => r.steps > 0);
    $("findings-list").innerHTML = items.length
      ? items.map((f) => `<li class="finding" style="--c:${state.color[f.run]}" data-run="${esc(f.run)}" data-rule="${esc(f.rule)}">
          <div class="top"><span class="rule">${esc(f.rule)}</span><span class="where">${esc(f.run)} · step ${f.step}${f.mode ? ` (${esc(f.mode)})` : ""}</span></div>
          <div class="msg">${esc(f.message)}</div>
          ${f.tensors && f.tensors.length ? `<div class="tensors">${esc(f.tensors.slice(0, 6).join(", "))}${f.tensors.length > 6 ? ` … (${f.tensors.length})` : ""}</div>` : ""}
          ${f.suggestion ? `<div class="try">${esc(f.suggestion)}</div>` : ""}
        </li>`).join("")
      : `<li class="empty ${anySteps && state.rulesEnabled ? "ok" : ""}">${anySteps ? (state.rulesEnabled ? "No findings so far." : "Rules are off.") : "Waiting for the first steps…"}</li>`;
  }

  // the tensor picker ---------------------------------------------------------------------------
  function buildPicker() {
    const groups = {};
    const placed = new Set();
    const collections = {};
    for (const t of Object.values(state.tensors)) {
      for (const [c, names] of Object.entries(t.collections)) {
        const set = (collections[c] ||= new Set());
        names.forEach((n) => set.add(n));
      }
    }
    const order = [...COLLECTION_ORDER, ...Object.keys(collections).filter((c) => !COLLECTION_ORDER.includes(c) && c !== "all").sort()];
    for (const c of order) {
      if (!collections[c]) continue;
      const names = [...collections[c]].filter((n) => !placed.has(n)).sort();
      names.forEach((n) => placed.add(n));
      if (names.length) groups[c] = names;
    }
    const rest = new Set();
    for (const t of Object.values(state.tensors)) t.names.forEach((n) => { if (!placed.has(n)) rest.add(n); });
    if (rest.size) groups.other = [...rest].sort();
    const filter = $("tensor-filter").value.trim().toLowerCase();
    const sig = JSON.stringify([groups, filter]);
    const all = Object.values(groups).flat();
    if (!state.tensor || !all.includes(state.tensor)) {
      const first = groups.gradients || groups.weights || all;
      state.tensor = first.find((n) => n.endsWith("weight")) || first[0] || null;
    }
    if (sig === state.pickerSig) return;
    state.pickerSig = sig;
    const sel = $("tensor");
    const html = Object.entries(groups).map(([c, names]) => {
      const opts = names.filter((n) => !filter || n.toLowerCase().includes(filter) || n === state.tensor)
        .map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join("");
      return opts ? `<optgroup label="${esc(c)}">${opts}</optgroup>` : "";
    }).join("");
    sel.innerHTML = html || `<option value="">no tensors yet</option>`;
    sel.value = state.tensor || "";
  }

  // plots ---------------------------------------------------------------------------------------
  function layout(ytitle, log, extra) {
    return Object.assign({
      uirevision: "keep",
      margin: { l: 60, r: 12, t: 8, b: 44 },
      xaxis: { title: { text: "step" }, zeroline: false, gridcolor: "#eef0f3" },
      yaxis: { title: { text: ytitle }, type: log ? "log" : "linear", gridcolor: "#eef0f3", exponentformat: "e" },
      legend: { orientation: "h", y: -0.22, font: { size: 11 } },
      paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "#fff",
      font: { family: "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", size: 12, color: "#1f2329" },
      hovermode: "x unified",
    }, extra || {});
  }

  function emptyLayout(text) {
    return {
      xaxis: { visible: false }, yaxis: { visible: false }, paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
      annotations: [{ text, showarrow: false, font: { size: 14, color: "#6b7280" }, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }],
      margin: { l: 10, r: 10, t: 10, b: 10 },
    };
  }

  function byMode(rows) {
    const out = {};
    for (const [step, [mode, v]] of rows.sorted()) {
      const m = (out[mode] ||= { x: [], y: [] });
      m.x.push(step); m.y.push(finite(v));
    }
    return out;
  }

  function ema(y, s) {
    // TensorBoard's smoothing: an exponential moving average, debiased at the start
    let acc = 0, n = 0;
    return y.map((v) => {
      if (v === null) return null;
      n += 1;
      acc = acc * s + (1 - s) * v;
      return acc / (1 - Math.pow(s, n));
    });
  }

  function lineTraces(run, label, rows, smoothing, meta) {
    const color = state.color[run];
    const traces = [];
    for (const [mode, d] of Object.entries(byMode(rows))) {
      const name = `${label} · ${mode.toLowerCase()}`;
      const base = { type: "scatter", x: d.x, name, legendgroup: run, meta: Object.assign({ run, mode }, meta),
        line: { color, width: 2, dash: DASH[mode] || "solid" }, marker: { size: 5, color },
        mode: mode === "TRAIN" && d.x.length > 1 ? "lines" : "lines+markers", hovertemplate: "%{y:.5g}" };
      if (smoothing > 0 && mode === "TRAIN") {
        traces.push(Object.assign({}, base, { y: d.y, opacity: 0.25, showlegend: false, hoverinfo: "skip", hovertemplate: null,
          meta: Object.assign({ raw: true }, base.meta) }));
        traces.push(Object.assign({}, base, { y: ema(d.y, smoothing) }));
      } else {
        traces.push(Object.assign({}, base, { y: d.y }));
      }
    }
    return traces;
  }

  function nanMarkers(traces) {
    // a vertical line where a run's loss first became NaN or infinite
    const shapes = [], annotations = [];
    for (const r of state.runs) {
      const bad = firstNonFinite(r.name);
      if (!bad) continue;
      const color = state.color[r.name];
      shapes.push({ type: "line", x0: bad.step, x1: bad.step, yref: "paper", y0: 0, y1: 1, line: { color, dash: "dot", width: 1.5 } });
      annotations.push({ x: bad.step, yref: "paper", y: 1, text: `${esc(r.name)}: ${bad.value}`, showarrow: false,
        xanchor: "left", yanchor: "top", font: { size: 11, color } });
    }
    return { shapes, annotations };
  }

  function robustRange(traces, key) {
    // "ignore outliers" (TensorBoard's default): leave out values orders of magnitude away from
    // the bulk, such as a loss that exploded, so the healthy runs stay readable. The range is
    // only changed when it moved by > 10%, so a zoom survives the polls.
    const ys = [];
    for (const t of traces) for (const v of t.y) if (v !== null && v !== undefined) ys.push(v);
    if (ys.length < 4) { delete state.ranges[key]; return null; }
    ys.sort((a, b) => a - b);
    const q = (p) => ys[Math.floor(p * (ys.length - 1))];
    const spread = Math.max(q(0.75) - q(0.25), Math.abs(q(0.5)), 1e-30);
    const inliers = ys.filter((v) => v >= q(0.25) - 100 * spread && v <= q(0.75) + 100 * spread);
    if (inliers.length === ys.length) { delete state.ranges[key]; return null; }
    const lo = inliers[0], hi = inliers[inliers.length - 1];
    const pad = (hi - lo) * 0.06 || Math.abs(hi) * 0.1 || 1;
    const next = [lo - pad, hi + pad];
    const prev = state.ranges[key];
    const span = next[1] - next[0];
    if (prev && Math.abs(prev[0] - next[0]) < 0.1 * span && Math.abs(prev[1] - next[1]) < 0.1 * span) return prev;
    state.ranges[key] = next;
    return next;
  }

  function yAxis(lay, traces, key, log, outliers) {
    const range = !log && outliers ? robustRange(traces, key) : null;
    if (range) Object.assign(lay.yaxis, { range, autorange: false });
    else Object.assign(lay.yaxis, { autorange: true });
    return lay;
  }

  function drawLosses() {
    const smoothing = +$("smoothing").value;
    $("smoothing-value").textContent = smoothing.toFixed(2);
    const losses = [], scalars = [];
    for (const r of state.runs) {
      const series = state.scalars[r.name] || {};
      const lossNames = Object.keys(series).filter((n) => series[n].collection === "losses");
      for (const [name, s] of Object.entries(series)) {
        if (s.collection === "losses") {
          const label = lossNames.length > 1 ? `${r.name} · ${name}` : r.name;
          losses.push(...lineTraces(r.name, label, s.rows, smoothing, { tensor: name }));
        } else {
          scalars.push(...lineTraces(r.name, `${r.name} · ${name}`, s.rows, 0, { tensor: name }));
        }
      }
    }
    const log = $("losses-log").checked;
    const anySteps = state.runs.some((r) => r.steps > 0);
    Plotly.react("plot-losses", losses, losses.length
      ? yAxis(layout("loss", log, nanMarkers(losses)), losses, "losses", log, $("losses-outliers").checked)
      : emptyLayout(anySteps ? "no losses recorded (the hook's `losses` collection)" : "waiting for the first steps…"), PLOT_CONFIG);
    $("card-scalars").hidden = !scalars.length;
    if (scalars.length) Plotly.react("plot-scalars", scalars, layout("value", false), PLOT_CONFIG);
  }

  function drawReduction() {
    const traces = [];
    const notes = [];
    const red = `${state.abs ? "|x| " : ""}${state.reduction}`;
    for (const r of state.runs) {
      if (state.redErr[r.name]) notes.push(`${r.name}: ${state.redErr[r.name]}`);
      else if (state.tensor && state.tensors[r.name] && !state.tensors[r.name].names.has(state.tensor)) notes.push(`run ${r.name} has no tensor ${state.tensor}`);
      const rows = state.red[r.name];
      if (rows && rows.map.size) traces.push(...lineTraces(r.name, r.name, rows, 0, { tensor: state.tensor }));
    }
    const note = $("tensor-note");
    note.hidden = !notes.length;
    note.textContent = notes.join("\n");
    const log = $("tensor-log").checked;
    Plotly.react("plot-reduction", traces, traces.length
      ? yAxis(layout(`${red} of ${state.tensor}`, log), traces, `red|${state.redKey}`, log, $("tensor-outliers").checked)
      : emptyLayout(state.tensor ? "no values yet" : "no tensors recorded yet"), PLOT_CONFIG);
  }

  function rgba(hex, a) {
    const n = parseInt(hex.slice(1), 16);
    return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${a})`;
  }

  function drawDistribution() {
    const note = $("dist-note");
    const dist = state.dist;
    const steps = distSteps();
    const err = dist ? dist.err : null;
    note.hidden = !err;
    note.textContent = err || "";
    const run = state.distRun;
    const color = state.color[run] || COLORS[0];
    $("dist-title").textContent = dist && state.tensor ? `of ${state.tensor} in ${run}` : "";
    if (!dist || !steps.length) {
      Plotly.react("plot-distribution", [], emptyLayout(state.tensor ? "no raw values yet" : "no tensors recorded yet"), PLOT_CONFIG);
      Plotly.react("plot-histogram", [], emptyLayout(""), PLOT_CONFIG);
      return;
    }
    const rows = steps.map((s) => dist.rows.get(s));
    const p = (k) => rows.map((r) => r.values[k]);
    const traces = [];
    const alpha = [0.12, 0.2, 0.3, 0.42];
    for (let i = 0; i < 4; i++) {
      traces.push({ type: "scatter", x: steps, y: p(i), mode: "lines", line: { width: 0, color }, showlegend: false, hoverinfo: "skip" });
      traces.push({ type: "scatter", x: steps, y: p(8 - i), mode: "lines", line: { width: 0, color }, fill: "tonexty",
        fillcolor: rgba(color, alpha[i]), showlegend: false, hoverinfo: "skip" });
    }
    traces.push({ type: "scatter", x: steps, y: p(4), mode: "lines", name: "median", line: { color, width: 2 }, showlegend: false,
      customdata: rows.map((r) => [...r.values.map(fmt), r.nonfinite]),
      hovertemplate: "max %{customdata[8]}<br>+1σ %{customdata[6]}<br>median %{customdata[4]}<br>-1σ %{customdata[2]}<br>min %{customdata[0]}<br>non-finite %{customdata[9]}<extra></extra>" });
    const mark = state.histStep;
    Plotly.react("plot-distribution", traces, layout(state.tensor, false, {
      hovermode: "x",
      shapes: mark === null ? [] : [{ type: "line", x0: mark, x1: mark, yref: "paper", y0: 0, y1: 1, line: { color: "#868e96", dash: "dot", width: 1 } }],
    }), PLOT_CONFIG);

    const slider = $("hist-step");
    slider.max = String(steps.length - 1);
    const idx = Math.max(0, steps.indexOf(state.histStep));
    slider.value = String(idx);
    slider.dataset.steps = JSON.stringify(steps);
    const h = state.hist;
    if (!h || h.err) {
      $("hist-label").textContent = h && h.err ? h.err : "";
      Plotly.react("plot-histogram", [], emptyLayout(h && h.err ? h.err : "…"), PLOT_CONFIG);
      return;
    }
    const edges = h.edges.map(num);
    const centers = h.counts.map((_, i) => (edges[i] + edges[i + 1]) / 2);
    const widths = h.counts.map((_, i) => edges[i + 1] - edges[i]);
    $("hist-label").textContent = `step ${h.step} (${h.mode})${state.followLatest ? " · latest" : ""}` +
      (h.nonfinite ? ` · ${h.nonfinite} non-finite of ${h.size}` : ` · ${h.size} values`);
    Plotly.react("plot-histogram", h.counts.length ? [{ type: "bar", x: centers, y: h.counts, width: widths,
      marker: { color: rgba(color, 0.75), line: { color, width: 0.5 } }, hovertemplate: "%{x:.4g}: %{y}<extra></extra>" }]
      : [], h.counts.length ? layout("count", false, { xaxis: { title: { text: `value at step ${h.step}` }, gridcolor: "#eef0f3" }, hovermode: "closest", bargap: 0.02 })
      : emptyLayout("every value is NaN or infinite"), PLOT_CONFIG);
  }

  // controls ------------------------------------------------------------------------------------
  function redrawSoon() { drawLosses(); drawReduction(); drawDistribution(); }
  $("tensor").addEventListener("change", (e) => { state.tensor = e.target.value || null; tick(); });
  $("tensor-filter").addEventListener("input", () => { buildPicker(); });
  $("reduction").addEventListener("change", (e) => {
    const [name, abs] = e.target.value.split("|");
    state.reduction = name; state.abs = abs === "1"; tick();
  });
  $("smoothing").addEventListener("input", drawLosses);
  $("losses-log").addEventListener("change", drawLosses);
  $("losses-outliers").addEventListener("change", drawLosses);
  $("tensor-log").addEventListener("change", drawReduction);
  $("tensor-outliers").addEventListener("change", drawReduction);
  $("dist-run").addEventListener("change", (e) => { state.distRun = e.target.value; tick(); });
  $("dist-mode").addEventListener("change", (e) => { state.distMode = e.target.value; state.followLatest = true; tick(); });
  $("findings-run").addEventListener("change", () => { state.findingsSig = ""; renderFindings(); });
  $("hist-step").addEventListener("input", (e) => {
    const steps = JSON.parse(e.target.dataset.steps || "[]");
    const i = +e.target.value;
    state.followLatest = i >= steps.length - 1;
    state.histStep = steps[i];
    tick();
  });
  $("hist-latest").addEventListener("click", () => { state.followLatest = true; tick(); });
  window.mldbgDashboard = { state, refresh: tick, redraw: redrawSoon };
  tick();
})();
