// mldbg dashboard: listens to the server's events (/api/events, SSE) and falls back to polling
// the JSON API (docs/dashboard_api.md); redraws in place with Plotly.react, so zoom, legend
// toggles and choices survive. The page's state (runs, tensors, axis, view...) lives in the
// address's hash: a reload or a shared link restores it.
"use strict";
(() => {
  const POLL_MS = 2000; // without server-sent events
  const SLOW_POLL_MS = 10000; // with them: a safety net only
  const OVERLAP = 8; // steps asked again on each poll: the newest steps may still be completed
  const MAX_TENSORS = 8;
  // the series of a run's `scalars` collection asked at once (its losses always all of them):
  // a run of 100,000 names sends the first 100 in name order; the filter over the Scalars chart
  // asks the server for those whose name holds its text (the same as SCALARS_PAGE in data.py)
  const SCALARS_PAGE = 100;
  const PICKER_OPTIONS = 2000; // tensors listed in the picker at most (the filter box narrows it)
  const DASH = { TRAIN: "solid", EVAL: "dot", PREDICT: "dash", GLOBAL: "dashdot" };
  const TENSOR_DASH = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"];
  const COLLECTION_ORDER = ["gradients", "weights", "biases", "outputs", "relu_activations",
    "tanh_activations", "sigmoid_activations", "inputs", "predictions", "labels", "losses", "scalars",
    "optimizer_variables"];
  const PLOT_CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["select2d", "lasso2d"] };
  const LIVE_STATUS = new Set(["running", "stalled"]);

  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;
  const encRun = (name) => name.split("/").map(enc).join("/");
  const num = (v) => (typeof v === "number" ? v : Number(v)); // "NaN", "Infinity" -> numbers
  const finite = (v) => { if (v === null || v === undefined) return null; const x = num(v); return Number.isFinite(x) ? x : null; };
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  const fmt = (x) => (x === null || x === undefined ? "–" : Math.abs(x) >= 1e4 || (Math.abs(x) < 1e-3 && x !== 0) ? x.toExponential(3) : +x.toPrecision(4));

  // a run's colour: a hash of its name (FNV-1a), so it is the same on every start and does not
  // depend on which runs are listed or in which order
  function runColor(name) {
    let h = 0x811c9dc5;
    for (let i = 0; i < name.length; i++) { h ^= name.charCodeAt(i); h = Math.imul(h, 0x01000193) >>> 0; }
    const hue = h % 360, light = 38 + ((h >>> 9) % 3) * 6;
    return hslHex(hue, 62, light);
  }
  function hslHex(h, s, l) {
    s /= 100; l /= 100;
    const k = (n) => (n + h / 30) % 12, a = s * Math.min(l, 1 - l);
    const f = (n) => Math.round(255 * (l - a * Math.max(-1, Math.min(k(n) - 3, 9 - k(n), 1))));
    return "#" + [f(0), f(8), f(4)].map((v) => v.toString(16).padStart(2, "0")).join("");
  }

  // the page's state in the address: #runs=a,b&tensors=x,y&red=l2|0&axis=wall&view=layers...
  const URL_KEYS = ["view", "axis", "runs", "tensors", "red", "dist", "layers", "metric", "profiler", "finding"];
  function readHash() {
    const p = new URLSearchParams(location.hash.replace(/^#/, ""));
    const list = (k) => (p.get(k) ? p.get(k).split(",").map(decodeURIComponent).filter(Boolean) : null);
    return {
      view: p.get("view") || "training", axis: p.get("axis") || "step", runs: list("runs"), tensors: list("tensors"),
      red: p.get("red"), dist: p.get("dist"), layers: p.get("layers"), metric: p.get("metric"), profiler: p.get("profiler"),
    };
  }
  // the address as this page last wrote it: another value is a change from outside (a link,
  // the back button, a test) whose hashchange event is still queued; it is applied, not undone
  let writtenHash = location.hash;
  function writeHash() {
    if (location.hash !== writtenHash) return;
    const parts = [];
    const put = (k, v) => { if (v !== null && v !== undefined && v !== "") parts.push(`${k}=${v}`); };
    put("view", state.view !== "training" ? state.view : null);
    put("axis", state.axis !== "step" ? state.axis : null);
    put("runs", state.chosen ? [...state.chosen].map(enc).join(",") : null);
    put("tensors", state.tensorList.length ? state.tensorList.map(enc).join(",") : null);
    put("red", `${state.reduction}|${state.abs ? 1 : 0}` !== "l2|0" ? `${state.reduction}|${state.abs ? 1 : 0}` : null);
    put("dist", state.distRun ? enc(state.distRun) : null);
    put("layers", state.layersRun ? enc(state.layersRun) : null);
    put("metric", state.layersMetric !== "grad_l2" ? state.layersMetric : null);
    put("profiler", state.profilerRun ? enc(state.profilerRun) : null);
    const hash = parts.length ? "#" + parts.join("&") : "";
    if (hash !== location.hash) history.replaceState(null, "", location.pathname + location.search + hash);
    writtenHash = location.hash;
  }

  const fromUrl = readHash();
  const state = {
    runs: [], runsInfo: null, color: {},
    chosen: fromUrl.runs ? new Set(fromUrl.runs) : null, // null: every run
    view: fromUrl.view, axis: fromUrl.axis,
    tensorsAt: {}, tensors: {}, // run -> {steps, time} when its tensor list was read; {names: Set, collections}
    scalars: {}, // run -> {name -> {collection, rows: Rows}}
    scalarsMatch: "", scalarsTotal: {}, // the Scalars chart's filter; run -> how many scalars match it
    scalarsAgain: new Set(), // runs whose scalars are asked again from their first step (the filter changed)
    tensorList: fromUrl.tensors || [], autoTensor: false, reduction: "l2", abs: false, redKey: "",
    red: {}, redErr: {}, // `${run}\n${tensor}` -> Rows | message
    distRun: fromUrl.dist ? decodeURIComponent(fromUrl.dist) : null, dist: null,
    hist: null, histKey: "", histStep: null, followLatest: true, distMode: null,
    layersRun: fromUrl.layers ? decodeURIComponent(fromUrl.layers) : null, layersMetric: fromUrl.metric || "grad_l2", layers: null,
    profilerRun: fromUrl.profiler ? decodeURIComponent(fromUrl.profiler) : null, profiler: null,
    findings: {}, findingsSig: "", pickerSig: "", ranges: {}, configs: {}, openConfig: new Set(),
    stopArmed: null, stopping: {}, focus: null, evidence: null,
    ticking: false, again: false, timer: null, sse: false, sseSeen: false, tickNo: 0,
  };
  if (fromUrl.red) { const [r, a] = fromUrl.red.split("|"); state.reduction = r; state.abs = a === "1"; }
  $("reduction").value = `${state.reduction}|${state.abs ? 1 : 0}`;

  // rows: step -> [mode, value, wall, epoch], kept in step order on demand -------------------------
  class Rows {
    constructor() { this.map = new Map(); this.max = null; this._sorted = null; this.pace = null; }
    // how often the series was saved (the server's cadence): steps with a gap before them,
    // the cadence in words per mode, whether its points are apart
    setPace(d) { if (d && d.breaks) this.pace = { breaks: new Set(d.breaks), cadence: d.cadence || {}, sparse: !!d.sparse }; }
    merge(steps, modes, values, wall, epochs) {
      steps.forEach((s, i) => {
        this.map.set(s, [modes[i], values[i], wall ? wall[i] : null, epochs ? epochs[i] : null]);
        if (this.max === null || s > this.max) this.max = s;
      });
      this._sorted = null;
    }
    since() { return this.max === null ? "" : `&since=${this.max - OVERLAP}`; }
    sorted() { return (this._sorted ||= [...this.map.entries()].sort((a, b) => a[0] - b[0])); }
  }

  function authHeaders() {
    // the page was opened with ?token=... (which also set a cookie): send it along explicitly too
    const token = new URLSearchParams(location.search).get("token");
    return token ? { Authorization: `Bearer ${token}` } : {};
  }

  async function getJSON(url) {
    const r = await fetch(url, { cache: "no-store", headers: authHeaders() });
    let body = null;
    try { body = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) { const e = new Error((body && body.detail) || `${r.status} ${r.statusText} for ${url}`); e.status = r.status; throw e; }
    return body;
  }

  async function postJSON(url, content) {
    const r = await fetch(url, {
      method: "POST", cache: "no-store",
      headers: Object.assign({ "Content-Type": "application/json", "X-Mldbg": "1" }, authHeaders()),
      body: JSON.stringify(content),
    });
    let body = null;
    try { body = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error((body && body.detail) || `${r.status} ${r.statusText} for ${url}`);
    return body;
  }

  const shownRuns = () => state.runs.filter((r) => !state.chosen || state.chosen.has(r.name));

  // server-sent events: each event schedules a refresh, so what changed is drawn within a second --
  let soon = null;
  let lastTick = 0;
  function refreshSoon() {
    // at most about two refreshes a second, however many runs report steps
    if (!soon) soon = setTimeout(() => { soon = null; tick(); }, Math.max(100, lastTick + 500 - Date.now()));
  }
  function listen() {
    // ?events=off: polling only. A headless screenshot with a virtual-time budget
    // (chromium --headless --virtual-time-budget=...) waits for open connections; the event
    // stream never closes, so the budget would never run out (docs/dashboard.md)
    if (!window.EventSource || new URLSearchParams(location.search).get("events") === "off") return;
    const es = new EventSource("api/events");
    es.onopen = () => { state.sse = true; state.sseSeen = true; };
    es.onerror = () => { state.sse = false; if (es.readyState === EventSource.CLOSED) setTimeout(listen, 5000); };
    for (const name of ["hello", "run", "step", "status", "finding", "stop", "removed"]) {
      es.addEventListener(name, () => { state.sse = true; refreshSoon(); });
    }
  }

  // polling -------------------------------------------------------------------------------------
  async function tick() {
    if (state.ticking) { state.again = true; return; }
    state.ticking = true;
    lastTick = Date.now();
    clearTimeout(state.timer);
    try {
      let info;
      try {
        info = await getJSON("api/runs");
      } catch (e) {
        setLive(false, `dashboard server unreachable (${e.message}); retrying…`);
        return;
      }
      state.runsInfo = info;
      state.runs = info.runs;
      state.rulesEnabled = info.rules.enabled;
      info.runs.forEach((r) => { state.color[r.name] = runColor(r.name); });
      const errors = [];
      const withSteps = shownRuns().filter((r) => r.steps > 0);
      await Promise.all([
        ...withSteps.map((r) => refreshTensors(r).catch((e) => errors.push(`${r.name}: ${e.message}`))),
        refreshScalars(withSteps, errors),
      ]);
      try {
        state.findings = (await getJSON("api/findings")).runs;
      } catch (e) { errors.push(`findings: ${e.message}`); }
      buildPicker();
      const work = [];
      if (state.view === "training") work.push(refreshReduction(), refreshDistribution());
      if (state.view === "layers") work.push(refreshLayers());
      if (state.view === "profiler") work.push(refreshProfiler());
      await Promise.all(work.map((p) => p.catch((e) => errors.push(e.message))));
      for (const run of state.openConfig) {
        const c = state.configs[run], r = state.runs.find((x) => x.name === run);
        if (r && c && !c.loading && r.steps !== c.steps && Date.now() - (c.at || 0) > 3000) { c.loading = true; loadConfig(run); }
      }
      renderRuns();
      renderFindings();
      draw();
      writeHash();
      setLive(true, errors.join("\n"));
      // drawn from the server's data at least once: what a screenshot or a test waits for
      if (state.runs.length) document.body.dataset.filled = state.runs.some((r) => r.steps > 0) ? "data" : "empty";
    } finally {
      state.ticking = false;
      state.timer = setTimeout(tick, state.sse ? SLOW_POLL_MS : POLL_MS);
      if (state.again) { state.again = false; tick(); }
    }
  }

  function draw() {
    state.tickNo = (state.tickNo || 0) + 1; // the step -> wall-clock maps are rebuilt once per draw
    if (state.view === "training") { drawLosses(); drawReduction(); drawDistribution(); }
    if (state.view === "layers") drawLayers();
    if (state.view === "profiler") drawProfiler();
  }

  async function refreshTensors(r) {
    // a run's tensor names: again when it has new steps, at most every 10 s (names seldom change
    // after the first steps, and a sweep of 200 runs would otherwise ask 200 times a second)
    const at = state.tensorsAt[r.name];
    if (state.tensors[r.name] && (at.steps === r.steps || Date.now() - at.time < 10000)) return;
    const t = await getJSON(`api/runs/${encRun(r.name)}/tensors`);
    state.tensors[r.name] = { names: new Set(t.tensors), collections: t.collections };
    state.tensorsAt[r.name] = { steps: r.steps, time: Date.now() };
  }

  function mergeScalars(run, d) {
    state.scalarsAgain.delete(run);
    if (d.scalars_total !== undefined) state.scalarsTotal[run] = d.scalars_total;
    const runScalars = (state.scalars[run] ||= {});
    for (const s of d.series) {
      const entry = (runScalars[s.name] ||= { collection: s.collection, rows: new Rows() });
      entry.rows.merge(s.steps, s.modes, s.values, s.wall_time, s.epochs);
    }
  }

  async function refreshScalars(runs, errors) {
    // the losses and scalars of every chosen run in (at most) two calls: the runs not read yet,
    // and the others since the oldest newest step among them
    const newest = (run) => Math.max(-Infinity, ...Object.values(state.scalars[run] || {}).map((s) => s.rows.max ?? -Infinity));
    const again = (r) => state.scalarsAgain.has(r.name) || !Number.isFinite(newest(r.name));
    const fresh = runs.filter(again);
    const known = runs.filter((r) => !again(r));
    const groups = [[fresh, ""]];
    if (known.length) groups.push([known, `&since=${Math.min(...known.map((r) => newest(r.name))) - OVERLAP}`]);
    // a page of each run's scalars (its losses whole), those matching the filter when one is set
    const match = state.scalarsMatch;
    const page = `&limit=${SCALARS_PAGE}${match ? `&match=${enc(match)}` : ""}`;
    const current = () => state.scalarsMatch === match; // the filter did not change meanwhile
    await Promise.all(groups.filter(([g]) => g.length).map(async ([g, since]) => {
      try {
        const d = await getJSON(`api/scalars?${g.map((r) => `run=${enc(r.name)}`).join("&")}${since}${page}`);
        if (!current()) return;
        for (const [run, body] of Object.entries(d.runs)) {
          if (body.detail) errors.push(`${run}: ${body.detail}`); else mergeScalars(run, body);
        }
      } catch (e) {
        if (e.status !== 404) { errors.push(`scalars: ${e.message}`); return; }
        // a server without the several-runs endpoint: one call per run
        await Promise.all(g.map(async (r) => {
          const n = newest(r.name);
          try {
            const d = await getJSON(`api/runs/${encRun(r.name)}/scalars?${Number.isFinite(n) ? `since=${n - OVERLAP}` : ""}${page}`);
            if (current()) mergeScalars(r.name, d);
          }
          catch (e2) { errors.push(`${r.name}: ${e2.message}`); }
        }));
      }
    }));
  }

  async function refreshReduction() {
    const key = `${state.reduction}|${state.abs}`;
    if (key !== state.redKey) { state.red = {}; state.redErr = {}; state.redKey = key; }
    const tensors = chartTensors();
    const jobs = [];
    for (const r of shownRuns()) {
      const t = state.tensors[r.name];
      for (const tensor of tensors) {
        const k = `${r.name}\n${tensor}`;
        if (!t || !t.names.has(tensor)) { delete state.red[k]; continue; }
        const rows = (state.red[k] ||= new Rows());
        jobs.push((async () => {
          try {
            const d = await getJSON(`api/runs/${encRun(r.name)}/reduction?tensor=${enc(tensor)}` +
              `&reduction=${state.reduction}&abs=${state.abs}${rows.since()}`);
            if (state.redKey !== key) return; // the choice changed meanwhile
            rows.merge(d.steps, d.modes, d.values, d.wall_time);
            rows.setPace(d);
            delete state.redErr[k];
          } catch (e) { state.redErr[k] = e.message; }
        })());
      }
    }
    await Promise.all(jobs);
  }

  // the tensors on the Tensors chart: the picker's one first, then the ones added
  function chartTensors() {
    const list = [...state.tensorList];
    return list.filter((t, i) => t && list.indexOf(t) === i).slice(0, MAX_TENSORS);
  }
  const primaryTensor = () => chartTensors()[0] || null;

  async function refreshDistribution() {
    const runs = shownRuns().filter((r) => state.tensors[r.name]);
    const sel = $("dist-run");
    const names = shownRuns().map((r) => r.name);
    fillSelect(sel, names);
    const tensor = primaryTensor();
    if (!state.distRun || !names.includes(state.distRun)) {
      const withTensor = runs.find((r) => state.tensors[r.name].names.has(tensor));
      state.distRun = withTensor ? withTensor.name : names[0] || null;
    }
    sel.value = state.distRun || "";
    const run = state.distRun;
    if (!run || !tensor) { state.dist = null; return; }
    const key = `${run}|${tensor}`;
    if (!state.dist || state.dist.key !== key) {
      state.dist = { key, rows: new Map(), max: null, err: null, pace: null, withoutRaw: 0 };
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
      if (d.breaks) dist.pace = { breaks: new Set(d.breaks), cadence: d.cadence || {} };
      dist.withoutRaw = d.without_raw || 0;
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

  function fillSelect(sel, names) {
    if (sel.dataset.sig === names.join("\n")) return;
    sel.innerHTML = names.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join("");
    sel.dataset.sig = names.join("\n");
  }

  function pickRun(sel, current, usable) {
    const names = shownRuns().map((r) => r.name);
    fillSelect(sel, names);
    const run = current && names.includes(current) ? current : (shownRuns().find(usable) || {}).name || names[0] || null;
    sel.value = run || "";
    return run;
  }

  // per-layer health: layers x steps ------------------------------------------------------------
  async function refreshLayers() {
    const run = (state.layersRun = pickRun($("layers-run"), state.layersRun, (r) => r.steps > 0));
    if (!run) { state.layers = null; return; }
    if (!state.layers || state.layers.run !== run) state.layers = { run, items: {}, max: null, err: null };
    const L = state.layers;
    try {
      const since = L.max === null ? "" : `?since=${L.max - OVERLAP}`;
      const d = await getJSON(`api/runs/${encRun(run)}/layers${since}`);
      if (state.layers !== L) return;
      const add = (kind, item, fields) => {
        const it = (L.items[`${kind}\n${item.name}`] ||= { kind, name: item.name, gradient: item.gradient, rows: new Map() });
        item.steps.forEach((s, i) => {
          const row = it.rows.get(s) || { mode: item.modes[i] };
          for (const f of fields) if (item[f]) row[f] = item[f][i] === null ? null : num(item[f][i]); // NaN stays NaN: drawn apart
          it.rows.set(s, row);
          if (L.max === null || s > L.max) L.max = s;
        });
      };
      if (d.breaks) { L.breaks = new Set(d.breaks); L.cadence = d.cadence || ""; }
      d.parameters.forEach((p) => add("parameter", p, ["grad_l2", "update_ratio", "weight_l2"]));
      d.activations.forEach((a) => add("activation", a, ["dead_fraction", "saturated_fraction"]));
      L.err = null;
    } catch (e) { L.err = e.status === 404 && /no endpoint/.test(e.message) ? "this server has no per-layer view (/api/runs/RUN/layers)" : e.message; }
  }

  function blankGaps(x, steps, z, raw, breaks) {
    // a heatmap stretches each cell half way to its neighbours: across a gap in the saved steps
    // (the server's `breaks`) one value would fill it. Two empty columns at the gap's edges,
    // one spacing from the values either side, keep each cell as wide as its cadence.
    if (!breaks || !breaks.size) return { x, z, raw, gaps: 0 };
    const ox = [], oz = z.map(() => []), oraw = raw ? raw.map(() => []) : null;
    let gaps = 0;
    const push = (col, xv, k) => { ox.push(xv); z.forEach((row, r) => oz[r].push(k === null ? null : row[k])); if (raw) raw.forEach((row, r) => oraw[r].push(k === null ? "not saved" : row[k])); };
    steps.forEach((s, k) => {
      if (k && breaks.has(s) && x[k] !== null && x[k - 1] !== null) {
        const before = k > 1 && x[k - 2] !== null ? x[k - 1] - x[k - 2] : 1;
        const after = k + 1 < steps.length && x[k + 1] !== null ? x[k + 1] - x[k] : before;
        if (x[k] - x[k - 1] > before + after) { push(null, x[k - 1] + before, null); push(null, x[k] - after, null); gaps += 1; }
      }
      push(null, x[k], k);
    });
    return { x: ox, z: oz, raw: oraw, gaps };
  }

  function drawLayers() {
    const L = state.layers, metric = state.layersMetric;
    $("layers-metric").value = metric;
    const note = $("layers-note");
    const label = $("layers-metric").selectedOptions[0]?.textContent || metric;
    const layerKey = (n) => n.replace(/\.(weight|bias)$/, "").replace(/\d+/g, (d) => d.padStart(6, "0"));
    const items = L ? Object.values(L.items).sort((a, b) => (a.kind === b.kind ? 0 : a.kind === "parameter" ? -1 : 1) ||
      layerKey(a.name).localeCompare(layerKey(b.name)) || a.name.localeCompare(b.name) * -1).filter((it) => [...it.rows.values()].some((r) => r[metric] !== undefined && r[metric] !== null)) : [];
    const stepSet = new Set();
    items.forEach((it) => it.rows.forEach((r, s) => { if (r.mode === "TRAIN" && r[metric] !== undefined) stepSet.add(s); }));
    const steps = [...stepSet].sort((a, b) => a - b);
    const paced = L && !L.err && items.length && L.cadence && L.cadence !== "every step"
      ? `${L.run}: layers saved ${L.cadence}; steps that were not saved are left blank` : "";
    note.hidden = !(L && L.err) && !(L && !items.length) && !paced;
    note.textContent = L && L.err ? L.err : L && !items.length ? `run ${L.run} has no ${label} recorded (see docs/dashboard.md: what the layer view reads)` : paced;
    $("layers-title").textContent = L ? `${label} in ${L.run}` : "";
    if (!items.length || !steps.length) {
      Plotly.react("plot-layers", [], emptyLayout(L ? "no per-layer data yet" : "no runs yet"), PLOT_CONFIG);
      return;
    }
    const names = items.map((it) => it.name).reverse(); // first layer at the top
    const logScale = ["grad_l2", "update_ratio", "weight_l2"].includes(metric);
    const z = items.map((it) => steps.map((s) => {
      const v = (it.rows.get(s) || {})[metric];
      if (v === null || v === undefined || !Number.isFinite(v)) return null;
      return logScale ? (v > 0 ? Math.log10(v) : null) : v;
    })).reverse();
    const raw = items.map((it) => steps.map((s) => fmt((it.rows.get(s) || {})[metric] ?? null))).reverse();
    let x = steps.map((s) => xAt(L.run, s, null));
    const gapped = blankGaps(x, steps, z, raw, L.breaks);
    x = gapped.x;
    const traces = [{
      type: "heatmap", x, y: names, z: gapped.z, customdata: gapped.raw, meta: { layers: true, metric, gaps: gapped.gaps },
      colorscale: metric === "dead_fraction" || metric === "saturated_fraction" ? "YlOrRd" : "Viridis",
      zmin: logScale ? undefined : 0, zmax: logScale ? undefined : 1,
      colorbar: { title: { text: logScale ? "log10" : "share" }, thickness: 12 },
      hovertemplate: `%{y}<br>step %{x}: %{customdata}<extra></extra>`, xgap: steps.length < 80 ? 1 : 0, ygap: 1,
    }];
    // NaN or infinite values: their own colour, so a blow-up does not look like missing data
    const bad = blankGaps(steps.map((s) => xAt(L.run, s, null)), steps, items.map((it) => steps.map((s) => { const v = (it.rows.get(s) || {})[metric]; return typeof v === "number" && !Number.isFinite(v) ? 1 : null; })).reverse(), null, L.breaks).z;
    if (bad.some((row) => row.some((v) => v !== null))) {
      traces.push({ type: "heatmap", x, y: names, z: bad, meta: { layers: true, nonfinite: true }, showscale: false, xgap: traces[0].xgap, ygap: 1,
        colorscale: [[0, "#c92a2a"], [1, "#c92a2a"]], hovertemplate: "%{y}<br>step %{x}: NaN or infinite<extra></extra>" });
    }
    // findings on a layer: a marker at (step, layer)
    const fx = [], fy = [], ftext = [], fids = [];
    for (const f of runFindings(L.run)) {
      const it = items.find((i) => (f.tensors || []).some((t) => t === i.name || t === i.gradient));
      if (!it) continue;
      fx.push(xAt(L.run, f.step, null)); fy.push(it.name); ftext.push(`${f.rule}: ${f.message}`); fids.push([L.run, f.id]);
    }
    if (fx.length) traces.push({ type: "scatter", mode: "markers", x: fx, y: fy, text: ftext, customdata: fids, meta: { findings: true, run: L.run },
      marker: { symbol: "x-thin-open", size: 12, color: "#e03131", line: { width: 2.5, color: "#e03131" } }, hovertemplate: "%{text}<extra></extra>", showlegend: false });
    const lay = layout("", false, { hovermode: "closest", margin: { l: 170, r: 12, t: 8, b: 44 } });
    lay.yaxis = { automargin: true, type: "category", tickfont: { size: 11 } };
    Plotly.react("plot-layers", traces, lay, PLOT_CONFIG);
  }

  // the profiler panel --------------------------------------------------------------------------
  async function refreshProfiler() {
    const run = (state.profilerRun = pickRun($("profiler-run"), state.profilerRun, (r) => r.steps > 0));
    if (!run) { state.profiler = null; return; }
    try {
      state.profiler = Object.assign(await getJSON(`api/runs/${encRun(run)}/profiler`), { run });
    } catch (e) { state.profiler = { run, available: false, reason: e.message, system: [], steps: [], verdicts: [] }; }
  }

  function drawProfiler() {
    const P = state.profiler;
    const note = $("profiler-note");
    note.hidden = !P || P.available;
    note.textContent = P && !P.available ? `no profiler data for ${P.run}: ${P.reason || "none recorded"} (record it with profiler_config=mldbg.ProfilerConfig())` : "";
    $("profiler-title").textContent = P ? `of ${P.run}` : "";
    const util = [];
    const colors = ["#1971c2", "#e8590c", "#2f9e44", "#ae3ec9", "#0c8599", "#d6336c"];
    for (const node of (P && P.system) || []) {
      const sfx = P.system.length > 1 ? ` · ${node.node}` : "";
      const line = (y, name, color, dash) => y && y.length && util.push({ type: "scatter", mode: "lines", x: node.time, y: y.map(finite), name: name + sfx, line: { color, width: 1.8, dash: dash || "solid" } });
      line(node.cpu_total, "CPU (all cores)", colors[0]);
      line(node.cpu_max_core, "busiest core", colors[0], "dot");
      line(node.mem_percent, "memory", colors[2]);
      (node.gpu_util || []).forEach((g, i) => line(g, `GPU ${i}`, colors[1 + (i % 3) * 2]));
      (node.gpu_mem || []).forEach((g, i) => line(g, `GPU ${i} memory`, colors[1 + (i % 3) * 2], "dot"));
    }
    Plotly.react("plot-utilisation", util, util.length ? layout("%", false, { xaxis: { title: { text: "seconds since the start" }, gridcolor: "#eef0f3" }, yaxis: { title: { text: "%" }, range: [0, 105], gridcolor: "#eef0f3" } })
      : emptyLayout(P && P.available ? "no system samples yet" : "no system samples"), PLOT_CONFIG);
    const phases = [];
    const PH = [["data", "#868e96"], ["forward", "#1971c2"], ["backward", "#e8590c"], ["optimizer", "#2f9e44"], ["debugger", "#ae3ec9"]];
    const w = P && P.steps && P.steps.find((x) => x.step && x.step.length);
    if (w) {
      for (const [name, color] of PH) {
        if (!w[name]) continue;
        phases.push({ type: "bar", x: w.step, y: w[name].map((v) => (finite(v) === null ? null : 1000 * finite(v))), name, marker: { color } });
      }
      const known = w.duration.map((d, i) => (finite(d) === null ? null : 1000 * (finite(d) - PH.reduce((a, [n]) => a + (w[n] ? finite(w[n][i]) || 0 : 0), 0))));
      phases.push({ type: "bar", x: w.step, y: known.map((v) => (v !== null && v > 0 ? v : 0)), name: "other", marker: { color: "#dee2e6" } });
    }
    Plotly.react("plot-phases", phases, phases.length ? layout("ms", false, { barmode: "stack", hovermode: "x unified",
      xaxis: { title: { text: `step${w && P.steps.length > 1 ? ` (${w.worker})` : ""}` }, gridcolor: "#eef0f3" } }) : emptyLayout("no step phases"), PLOT_CONFIG);
    const verdicts = (P && P.verdicts) || [];
    $("verdicts").innerHTML = verdicts.length
      ? `<tr><th>rule</th><th>verdict</th><th>details</th></tr>` + verdicts.map((v) => `<tr data-rule="${esc(v.rule)}" class="v-${esc(v.verdict.replace(/ /g, "-"))}">
          <td class="rule">${esc(v.rule)}</td><td><span class="verdict">${esc(v.verdict)}</span></td>
          <td>${v.findings && v.findings.length ? v.findings.slice(0, 3).map((f) => esc(`step ${f.step}: ${f.message}`)).join("<br>") : esc(v.reason || "")}</td></tr>`).join("")
      : `<tr><td class="muted">no profiler rules evaluated</td></tr>`;
  }

  function setLive(ok, message) {
    const live = $("live");
    live.className = `live ${ok ? "ok" : "down"}`;
    const allDone = state.runs.length && state.runs.every((r) => r.finished || r.status === "stopped" || r.status === "finished");
    $("live-text").textContent = ok
      ? `${allDone ? "all runs finished" : state.sse ? "live (events)" : "live (polling)"} · updated ${new Date().toLocaleTimeString()}`
      : "disconnected";
    const banner = $("banner");
    banner.hidden = !message;
    banner.textContent = message || "";
  }

  // the run cards -------------------------------------------------------------------------------
  function firstNonFinite(run) {
    for (const s of Object.values(state.scalars[run] || {})) {
      if (s.collection !== "losses") continue;
      for (const [step, [, v]] of s.rows.sorted()) if (finite(v) === null && v !== null) return { step, value: v };
    }
    return null;
  }

  function lastEpoch(run) {
    for (const s of Object.values(state.scalars[run] || {})) {
      const rows = s.rows.sorted();
      for (let i = rows.length - 1; i >= 0; i--) if (rows[i][1][3] !== null && rows[i][1][3] !== undefined) return rows[i][1][3];
    }
    return null;
  }

  function renderRuns() {
    const filter = $("runs-filter").value.trim().toLowerCase();
    const visible = state.runs.filter((r) => !filter || r.name.toLowerCase().includes(filter));
    $("runs-count").textContent = `${shownRuns().length} of ${state.runs.length} run${state.runs.length === 1 ? "" : "s"} shown`;
    const html = visible.map((r) => {
      const n = (state.findings[r.name] || {}).findings?.length ?? r.findings;
      const workers = r.workers.length > 1 ? ` · ${r.workers.length} workers` : "";
      let meta;
      if (r.status === "waiting") meta = `waiting for the run to start at ${r.path}`;
      else if (r.status === "error") meta = r.path;
      else {
        meta = `step ${r.last_step} · ${r.steps} steps${workers}`;
        const epoch = lastEpoch(r.name);
        if (epoch !== null) meta += ` · epoch ${fmt(finite(epoch))}`;
        if (r.framework) meta += ` · ${r.framework}`;
        if (r.status === "stalled" || (r.status === "running" && r.seconds_since_new_step > 60)) meta += ` · no new step for ${Math.round(r.seconds_since_new_step / 60)} min`;
      }
      const bad = firstNonFinite(r.name);
      const warn = [
        bad ? `loss is ${bad.value} from step ${bad.step}` : "",
        r.corrupt.length ? `${r.corrupt.length} damaged file(s) skipped: ${r.corrupt[0]}` : "",
        r.stop_requested ? `stop requested: ${r.stop_requested}` : "",
      ].filter(Boolean).join(" · ");
      const live = LIVE_STATUS.has(r.status);
      const armed = state.stopArmed === r.name;
      const stop = live ? `<button type="button" class="stop ${armed ? "armed" : ""}" data-stop="${esc(r.name)}" ${state.stopping[r.name] ? "disabled" : ""}
          title="Ask the training to stop at its next step (as mldbg watch --stop does)">${state.stopping[r.name] ? "stopping…" : armed ? "confirm stop" : "stop"}</button>` : "";
      const open = state.openConfig.has(r.name);
      const chosen = !state.chosen || state.chosen.has(r.name);
      return `<div class="run ${chosen ? "" : "off"}" style="--c:${state.color[r.name]}" data-run="${esc(r.name)}" data-status="${r.status}" data-steps="${r.steps}" data-last-step="${r.last_step ?? ""}">
        <input type="checkbox" class="choose" data-choose="${esc(r.name)}" ${chosen ? "checked" : ""} title="draw this run" aria-label="draw ${esc(r.name)}">
        <span class="name" title="${esc(r.path)}">${esc(r.name)}</span>
        <span class="pill ${r.status}">${r.status}</span>
        <span class="meta" title="${esc(r.path)}"><span class="steps">${esc(meta)}</span> · <span class="badge ${n ? "" : "zero"}" data-findings="${n}" title="findings">${n}</span> finding${n === 1 ? "" : "s"}</span>
        <span class="actions">${stop}<button type="button" class="cfg" data-config="${esc(r.name)}" aria-expanded="${open}">config</button></span>
        ${warn ? `<span class="warn">⚠ ${esc(warn)}</span>` : ""}
        ${r.error ? `<span class="err">${esc(r.error)}</span>` : ""}
        ${open ? `<div class="config">${renderConfig(r.name)}</div>` : ""}
      </div>`;
    }).join("");
    if (html !== state.runsHtml) { $("runs").innerHTML = html; state.runsHtml = html; } // unchanged: a click in progress survives
  }

  function renderConfig(run) {
    const c = state.configs[run];
    if (!c) return `<span class="muted">loading…</span>`;
    if (c.err) return `<span class="err">${esc(c.err)}</span>`;
    const rows = [];
    const row = (k, v) => v !== undefined && v !== null && v !== "" && rows.push(`<tr><th>${esc(k)}</th><td>${v}</td></tr>`);
    row("framework", esc(`${c.framework || "?"}${c.framework_version ? " " + c.framework_version : ""}`));
    row("format", esc(c.mldbg_format));
    row("workers", esc(`${(c.workers || []).length} of ${c.world_size ?? "?"}`) + ((c.workers || []).length ? ` <span class="muted">(${esc(c.workers.map((w) => `${w.worker}${w.host ? "@" + w.host : ""}${w.stopped ? " stopped" : ""}`).join(", "))})</span>` : ""));
    const hp = Object.entries(c.hyperparameters || {});
    row("hyper-parameters", hp.length ? hp.map(([k, v]) => `<code>${esc(k)}=${esc(typeof v === "object" ? JSON.stringify(v) : v)}</code>`).join(" ") : `<span class="muted">none recorded</span>`);
    row("saved", Object.entries(c.save_steps || {}).map(([m, s]) => esc(`${m}: ${s.count} steps ${s.first}…${s.last}${s.interval ? `, every ${s.interval}` : ""}`)).join("<br>"));
    row("collections", esc(Object.entries(c.collections || {}).map(([k, v]) => `${k} (${v})`).join(", ")));
    row("tensors", esc(`${c.tensors}${c.raw_tensors ? " (raw values saved)" : " (statistics / reductions only)"}`));
    row("statistics", c.statistics && c.statistics.length ? `<code>${esc(c.statistics.join(" "))}</code>` : null);
    return `<table>${rows.join("")}</table>`;
  }

  async function loadConfig(run) {
    const r = state.runs.find((x) => x.name === run);
    try { state.configs[run] = Object.assign(await getJSON(`api/runs/${encRun(run)}/config`), { at: Date.now(), steps: r ? r.steps : null }); }
    catch (e) { state.configs[run] = { err: e.message, at: Date.now() }; }
    renderRuns();
  }

  async function stopRun(run) {
    state.stopping[run] = true;
    state.stopArmed = null;
    renderRuns();
    try {
      await postJSON(`api/runs/${encRun(run)}/stop`, { reason: "stopped from the dashboard" });
    } catch (e) {
      $("banner").hidden = false;
      $("banner").textContent = `stop ${run}: ${e.message}`;
    }
    delete state.stopping[run];
    tick();
  }

  $("runs").addEventListener("click", (e) => {
    const stop = e.target.closest("[data-stop]");
    if (stop) {
      const run = stop.dataset.stop;
      if (state.stopArmed === run) stopRun(run);
      else { state.stopArmed = run; renderRuns(); setTimeout(() => { if (state.stopArmed === run) { state.stopArmed = null; renderRuns(); } }, 5000); }
      return;
    }
    const cfg = e.target.closest("[data-config]");
    if (cfg) {
      const run = cfg.dataset.config;
      if (state.openConfig.has(run)) state.openConfig.delete(run);
      else { state.openConfig.add(run); if (!state.configs[run] || state.configs[run].err) loadConfig(run); }
      renderRuns();
    }
  });
  $("runs").addEventListener("change", (e) => {
    const box = e.target.closest("[data-choose]");
    if (!box) return;
    const all = state.runs.map((r) => r.name);
    const chosen = state.chosen ? new Set(state.chosen) : new Set(all);
    if (box.checked) chosen.add(box.dataset.choose); else chosen.delete(box.dataset.choose);
    state.chosen = all.every((n) => chosen.has(n)) ? null : chosen;
    writeHash();
    tick();
  });
  $("runs-filter").addEventListener("input", renderRuns);
  $("runs-all").addEventListener("click", () => { state.chosen = null; writeHash(); tick(); });

  // the findings panel --------------------------------------------------------------------------
  const runFindings = (run) => ((state.findings[run] || {}).findings || []).map((f, i) => (f.id === undefined ? Object.assign({ id: i }, f) : f));

  function renderFindings() {
    const filter = $("findings-run");
    const names = shownRuns().map((r) => r.name);
    if (filter.dataset.sig !== names.join("\n")) {
      const keep = filter.value;
      filter.innerHTML = `<option value="">all runs</option>` + names.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join("");
      filter.value = names.includes(keep) ? keep : "";
      filter.dataset.sig = names.join("\n");
    }
    const shown = names.filter((n) => !filter.value || n === filter.value);
    const items = shown.flatMap((n) => runFindings(n));
    const total = names.reduce((k, n) => k + runFindings(n).length, 0);
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
    const sig = JSON.stringify([items, info, failedText, names.map((n) => state.color[n])]);
    if (sig === state.findingsSig) return;
    state.findingsSig = sig;
    $("rules-info").innerHTML = (info.includes("<span") ? info : esc(info)) + failedText;
    const order = Object.fromEntries(names.map((n, i) => [n, i]));
    items.sort((a, b) => order[a.run] - order[b.run] || a.step - b.step);
    const anySteps = state.runs.some((r) => r.steps > 0);
    $("findings-list").innerHTML = items.length
      ? items.map((f) => `<li class="finding ${esc(f.severity || "error")}" style="--c:${state.color[f.run]}" data-run="${esc(f.run)}" data-rule="${esc(f.rule)}" data-id="${f.id}" data-step="${f.step}"
            tabindex="0" role="button" title="open the evidence: the tensors and steps that show it">
          <div class="top"><span class="rule">${esc(f.rule)}</span><span class="where">${esc(f.run)} · step ${f.step}${f.mode ? ` (${esc(f.mode)})` : ""}</span></div>
          <div class="msg">${esc(f.message)}</div>
          ${f.tensors && f.tensors.length ? `<div class="tensors">${esc(f.tensors.slice(0, 6).join(", "))}${f.tensors.length > 6 ? ` … (${f.tensors.length})` : ""}</div>` : ""}
          ${f.suggestion ? `<div class="try">${esc(f.suggestion)}</div>` : ""}
        </li>`).join("")
      : `<li class="empty ${anySteps && state.rulesEnabled ? "ok" : ""}">${anySteps ? (state.rulesEnabled ? "No findings so far." : "Rules are off.") : "Waiting for the first steps…"}</li>`;
  }

  $("findings-list").addEventListener("click", (e) => {
    const li = e.target.closest("li.finding");
    if (li) openEvidence(li.dataset.run, +li.dataset.id);
  });
  $("findings-list").addEventListener("keydown", (e) => {
    const li = e.target.closest("li.finding");
    if (li && (e.key === "Enter" || e.key === " ")) { e.preventDefault(); openEvidence(li.dataset.run, +li.dataset.id); }
  });

  // a finding's evidence: its tensors over the steps around it, the loss, the histogram ---------
  async function openEvidence(run, id) {
    const f = runFindings(run).find((x) => x.id === id);
    if (!f) return;
    state.evidence = { finding: f, data: null, err: null };
    const dlg = $("evidence");
    dlg.dataset.run = run; dlg.dataset.id = String(id); dlg.dataset.loaded = "";
    $("evidence-title").innerHTML = `<span class="rule">${esc(f.rule)}</span> <span class="muted">${esc(run)} · step ${f.step}${f.mode ? ` (${esc(f.mode)})` : ""}</span>`;
    $("evidence-text").innerHTML = `<p class="msg">${esc(f.message)}</p>` +
      (f.tensors && f.tensors.length ? `<p class="tensors">${esc(f.tensors.join(", "))}</p>` : "") +
      (f.suggestion ? `<p class="try">${esc(f.suggestion)}</p>` : "");
    if (!dlg.open) dlg.showModal();
    showFindingOnCharts(f); // the Tensors chart behind the dialog shows it too
    try {
      state.evidence.data = await getJSON(`api/runs/${encRun(run)}/findings/${id}/evidence`);
    } catch (e) {
      // a server without the evidence endpoint: the finding's first tensor from the reduction API
      try {
        const series = [];
        for (const t of (f.tensors || []).slice(0, 4)) {
          const d = await getJSON(`api/runs/${encRun(run)}/reduction?tensor=${enc(t)}&reduction=l2`);
          series.push(Object.assign({ kind: "reduction" }, d));
        }
        state.evidence.data = { finding: f, series, loss: null, histogram: null };
      } catch (e2) { state.evidence.err = e.message; }
    }
    drawEvidence();
    dlg.dataset.loaded = "yes";
  }

  function drawEvidence() {
    const ev = state.evidence;
    if (!ev) return;
    const f = ev.finding, d = ev.data;
    if (!d) {
      Plotly.react("plot-evidence", [], emptyLayout(ev.err || "…"), PLOT_CONFIG);
      Plotly.react("plot-evidence-hist", [], emptyLayout(""), PLOT_CONFIG);
      return;
    }
    const color = state.color[f.run];
    const traces = (d.series || []).filter((s) => s.steps).map((s, i) => ({
      type: "scatter", mode: s.steps.length > 40 ? "lines" : "lines+markers", x: s.steps, y: s.values.map(finite),
      name: `${s.tensor}${s.reduction ? ` (${s.reduction})` : ""}`, meta: { evidence: true, tensor: s.tensor },
      line: { color: i ? TENSOR_COLORS[i % TENSOR_COLORS.length] : color, width: 2 }, marker: { size: 4 },
    }));
    const lossShown = d.loss && (d.series || []).some((x) => x.tensor === d.loss.name);
    if (d.loss && d.loss.steps && !lossShown) {
      traces.push({ type: "scatter", mode: "lines", x: d.loss.steps, y: d.loss.values.map(finite), name: d.loss.name, yaxis: "y2",
        line: { color: "#868e96", width: 1.5, dash: "dot" }, meta: { evidence: true, loss: true } });
    }
    const lay = layout(traces.length && d.series.length === 1 ? d.series[0].tensor : "value", false, {
      shapes: [{ type: "line", x0: f.step, x1: f.step, yref: "paper", y0: 0, y1: 1, line: { color: "#e03131", width: 2, dash: "dot" } }],
      annotations: [{ x: f.step, yref: "paper", y: 1, text: `${esc(f.rule)} · step ${f.step}`, showarrow: false, xanchor: "left", yanchor: "top", font: { size: 11, color: "#e03131" } }],
      hovermode: "x unified",
    });
    lay.yaxis.type = traces.some((t) => !t.meta.loss && t.y.some((v) => v !== null && v > 0)) && spansDecades(traces) ? "log" : "linear";
    if (d.loss && !lossShown) { lay.yaxis2 = { overlaying: "y", side: "right", title: { text: "loss" }, showgrid: false, exponentformat: "e" }; lay.margin.r = 70; }
    Plotly.react("plot-evidence", traces, traces.length ? lay : emptyLayout("no values of the finding's tensors were saved"), PLOT_CONFIG);
    const h = d.histogram;
    if (h && h.counts && h.counts.length) {
      const edges = h.edges.map(num);
      Plotly.react("plot-evidence-hist", [{ type: "bar", x: h.counts.map((_, i) => (edges[i] + edges[i + 1]) / 2), y: h.counts,
        width: h.counts.map((_, i) => edges[i + 1] - edges[i]), marker: { color: rgba(color, 0.75) } }],
      layout("count", false, { xaxis: { title: { text: `${h.tensor} at step ${h.step}${h.nonfinite ? ` (${h.nonfinite} of ${h.size} non-finite)` : ""}` } }, hovermode: "closest" }), PLOT_CONFIG);
    } else {
      Plotly.react("plot-evidence-hist", [], emptyLayout(h && h.nonfinite ? "every value is NaN or infinite" : "no raw values at this step"), PLOT_CONFIG);
    }
  }

  function spansDecades(traces) {
    const ys = traces.filter((t) => !t.meta.loss).flatMap((t) => t.y).filter((v) => v !== null && v > 0);
    return ys.length > 1 && Math.max(...ys) / Math.min(...ys) > 1e3;
  }

  function showFindingOnCharts(f) {
    // its tensors on the Tensors chart (a loss it names is on the Losses chart already)
    const losses = new Set(Object.values(state.scalars).flatMap((s) => Object.keys(s).filter((n) => s[n].collection === "losses")));
    const tensors = (f.tensors || []).filter((t) => !losses.has(t));
    if (tensors.length) {
      state.tensorList = [...new Set(tensors)].slice(0, 4);
      state.autoTensor = false;
      if (state.chosen && !state.chosen.has(f.run)) state.chosen.add(f.run);
      state.distRun = f.run;
    }
    state.focus = { run: f.run, step: f.step };
    setView("training");
    tick();
  }
  $("evidence-close").addEventListener("click", () => $("evidence").close());
  $("evidence-show").addEventListener("click", () => {
    $("evidence").close();
    if (state.evidence) showFindingOnCharts(state.evidence.finding);
    $("card-tensor").scrollIntoView({ block: "start" });
  });

  // the tensor picker ---------------------------------------------------------------------------
  // the shown runs' tensor names grouped by collection, grouped again only when a run's list was
  // read again or the runs shown changed (100,000 names: a grouping is a fair part of a second)
  let pickerFrom = null, pickerGroups = {}, pickerVersion = 0, autoPickedAt = -1;
  function pickerGroupsOf(runs) {
    const from = runs.map((r) => state.tensors[r.name] || null);
    if (pickerFrom && from.length === pickerFrom.length && from.every((t, i) => t === pickerFrom[i])) return pickerGroups;
    const groups = {};
    const placed = new Set();
    const collections = {};
    for (const r of runs) {
      const t = state.tensors[r.name];
      if (!t) continue;
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
    for (const r of runs) if (state.tensors[r.name]) state.tensors[r.name].names.forEach((n) => { if (!placed.has(n)) rest.add(n); });
    if (rest.size) groups.other = [...rest].sort();
    pickerFrom = from;
    pickerGroups = groups;
    pickerVersion += 1;
    return groups;
  }

  function buildPicker() {
    const runs = shownRuns();
    const groups = pickerGroupsOf(runs);
    const filter = $("tensor-filter").value.trim().toLowerCase();
    const all = Object.values(groups).flat();
    const autoAgain = state.autoTensor && autoPickedAt !== pickerVersion; // the names changed since
    if (all.length && (!state.tensorList.length || !all.includes(state.tensorList[0]) || autoAgain)) {
      // nothing chosen yet, or chosen by the page rather than by you: a gradient of a weight that
      // most runs have (re-picked as runs appear, until you pick one)
      const have = (n) => runs.filter((r) => state.tensors[r.name] && state.tensors[r.name].names.has(n)).length;
      const first = groups.gradients || groups.weights || all;
      const best = Math.max(...first.map(have));
      const pick = first.find((n) => n.endsWith("weight") && have(n) === best) || first.find((n) => have(n) === best);
      if (!state.tensorList.length || state.autoTensor) { state.tensorList = [pick, ...state.tensorList.slice(1)]; state.autoTensor = true; }
      else state.tensorList[0] = pick;
      autoPickedAt = pickerVersion;
    }
    const primary = primaryTensor();
    const sig = JSON.stringify([pickerVersion, filter, primary]);
    renderChips();
    if (sig === state.pickerSig) return;
    state.pickerSig = sig;
    const sel = $("tensor");
    // at most PICKER_OPTIONS options (and the chosen tensor): a list of 100,000 is seconds of
    // the browser's time and no use to scroll; the filter box reaches the others
    let left = PICKER_OPTIONS, more = 0;
    const html = Object.entries(groups).map(([c, names]) => {
      const shown = [];
      for (const n of names) {
        if (filter && n !== primary && !n.toLowerCase().includes(filter)) continue;
        if (left > 0 || n === primary) { shown.push(n); left -= 1; } else more += 1;
      }
      const opts = shown.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join("");
      return opts ? `<optgroup label="${esc(c)}">${opts}</optgroup>` : "";
    }).join("");
    sel.innerHTML = (html || `<option value="">no tensors yet</option>`) +
      (more ? `<option value="" disabled>… ${more.toLocaleString()} more: type part of a name in the filter</option>` : "");
    sel.value = primary || "";
  }

  function renderChips() {
    const list = chartTensors();
    $("tensor-chips").innerHTML = list.length > 1 ? list.map((t, i) => `<span class="chip" data-tensor="${esc(t)}">
        <svg width="22" height="6"><line x1="0" y1="3" x2="22" y2="3" stroke="#495057" stroke-width="2" stroke-dasharray="${dashArray(TENSOR_DASH[i % TENSOR_DASH.length])}"/></svg>
        ${esc(t)}<button type="button" data-unpin="${esc(t)}" aria-label="remove ${esc(t)}">×</button></span>`).join("") : "";
  }
  const dashArray = (d) => ({ solid: "", dash: "6,3", dot: "2,2", dashdot: "6,2,2,2", longdash: "10,3", longdashdot: "10,2,2,2" })[d] || "";

  // time axes -------------------------------------------------------------------------------------
  function wallOf(run) {
    // step -> unix seconds, from the run's scalars (recorded at every step they were saved)
    const out = new Map();
    for (const s of Object.values(state.scalars[run] || {})) for (const [step, row] of s.rows.map) if (row[2] !== null && row[2] !== undefined) out.set(step, row[2]);
    return out;
  }
  const wallCache = {};
  function wallAt(run, step) {
    const c = wallCache[run];
    if (!c || c.at !== state.tickNo) wallCache[run] = { at: state.tickNo, map: wallOf(run) };
    return wallCache[run].map.get(step) ?? null;
  }
  function runStart(run) {
    const r = state.runs.find((x) => x.name === run);
    if (r && r.started) return r.started;
    let lo = null;
    for (const s of Object.values(state.scalars[run] || {})) for (const row of s.rows.map.values()) if (row[2] !== null && (lo === null || row[2] < lo)) lo = row[2];
    return lo;
  }
  function xAt(run, step, wall) {
    if (state.axis === "step") return step;
    const w = wall ?? wallAt(run, step);
    if (w === null || w === undefined) return null;
    if (state.axis === "wall") return num(w) * 1000;
    const t0 = runStart(run);
    return t0 === null ? null : num(w) - t0;
  }
  function xaxis() {
    if (state.axis === "wall") return { title: { text: "wall clock" }, type: "date" };
    if (state.axis === "relative") return { title: { text: "seconds since the run started" }, type: "linear" };
    return { title: { text: "step" }, type: "linear" };
  }

  // plots ---------------------------------------------------------------------------------------
  function layout(ytitle, log, extra) {
    return Object.assign({
      uirevision: `${state.axis}`,
      margin: { l: 60, r: 12, t: 8, b: 44 },
      xaxis: Object.assign({ zeroline: false, gridcolor: "#eef0f3" }, xaxis()),
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

  function byMode(run, rows) {
    // TRAIN (and any mode recorded alone) per step; EVAL and PREDICT per pass: a maximal block
    // of consecutive steps of that mode is one pass, drawn at its last step with the mean of its
    // batches (not one dot per batch)
    const out = {};
    const sorted = rows.sorted();
    const modes = new Set(sorted.map(([, r]) => r[0]));
    const perPass = modes.has("TRAIN");
    const gaps = rows.pace ? rows.pace.breaks : null; // a gap before these steps: the line breaks
    let i = 0;
    while (i < sorted.length) {
      const [step, [mode, v, wall]] = sorted[i];
      const m = (out[mode] ||= { x: [], y: [], steps: [], batches: [] });
      if (!perPass || mode === "TRAIN") {
        const x = xAt(run, step, wall);
        if (x !== null && gaps && gaps.has(step) && m.x.length) { m.x.push(x); m.y.push(null); m.steps.push(step); m.batches.push(0); }
        if (x !== null) { m.x.push(x); m.y.push(finite(v)); m.steps.push(step); m.batches.push(1); }
        i += 1;
        continue;
      }
      let j = i, sum = 0, n = 0, bad = false;
      while (j < sorted.length && sorted[j][1][0] === mode) {
        const x = finite(sorted[j][1][1]);
        if (x === null) bad = true; else { sum += x; n += 1; }
        j += 1;
      }
      const [last, [, , lastWall]] = sorted[j - 1];
      const x = xAt(run, last, lastWall);
      if (x !== null) { m.x.push(x); m.y.push(bad || !n ? null : sum / n); m.steps.push(last); m.batches.push(j - i); }
      i = j;
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

  function lineTraces(run, label, rows, smoothing, meta, dash) {
    const color = state.color[run];
    const traces = [];
    for (const [mode, d] of Object.entries(byMode(run, rows))) {
      const name = `${label} · ${mode.toLowerCase()}`;
      const pass = mode !== "TRAIN" && d.batches.some((b) => b > 1);
      const base = { type: "scatter", x: d.x, name, legendgroup: run, meta: Object.assign({ run, mode }, meta),
        line: { color, width: 2, dash: dash || DASH[mode] || "solid" }, marker: { size: 6, color },
        customdata: d.steps.map((s, k) => [s, d.batches[k]]),
        mode: mode === "TRAIN" && d.x.length > 1 && !(rows.pace && rows.pace.sparse) ? "lines" : "lines+markers",
        hovertemplate: pass ? "%{y:.5g} (step %{customdata[0]}, mean of %{customdata[1]} batches)" : "%{y:.5g} (step %{customdata[0]})" };
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

  function nanMarkers() {
    // a vertical line where a run's loss first became NaN or infinite
    const shapes = [], annotations = [];
    for (const r of shownRuns()) {
      const bad = firstNonFinite(r.name);
      if (!bad) continue;
      const x = xAt(r.name, bad.step, null);
      if (x === null) continue;
      const color = state.color[r.name];
      shapes.push({ type: "line", x0: x, x1: x, yref: "paper", y0: 0, y1: 1, line: { color, dash: "dot", width: 1.5 } });
      annotations.push({ x, yref: "paper", y: 1, text: `${esc(r.name)}: ${bad.value}`, showarrow: false,
        xanchor: "left", yanchor: "top", font: { size: 11, color } });
    }
    return { shapes, annotations };
  }

  function epochMarks(lay) {
    // where the epoch changes (a scalar named `epoch`), on the first run that records one
    for (const r of shownRuns()) {
      const rows = Object.values(state.scalars[r.name] || {}).map((s) => s.rows.sorted()).find((rs) => rs.some(([, row]) => row[3] !== null && row[3] !== undefined));
      if (!rows) continue;
      let prev = null;
      for (const [step, row] of rows) {
        const e = row[3];
        if (e === null || e === undefined || e === prev) continue;
        if (prev !== null) {
          const x = xAt(r.name, step, row[2]);
          if (x !== null) {
            lay.shapes.push({ type: "line", x0: x, x1: x, yref: "paper", y0: 0, y1: 1, line: { color: "#ced4da", width: 1 }, layer: "below" });
            lay.annotations.push({ x, yref: "paper", y: 0, text: `epoch ${fmt(finite(e))}`, showarrow: false, xanchor: "left", yanchor: "bottom", font: { size: 10, color: "#868e96" } });
          }
        }
        prev = e;
      }
      return;
    }
  }

  function findingMarks(lay, traces, wanted) {
    // the findings that `wanted(finding)` places on this chart: a dotted vertical line at their
    // step and a marker on top (on an overlay axis, so a NaN value still gets one); click: evidence
    const byRun = {};
    for (const r of shownRuns()) {
      for (const f of runFindings(r.name)) {
        if (!wanted(f)) continue;
        const x = xAt(r.name, f.step, null);
        if (x === null) continue;
        const color = state.color[r.name];
        lay.shapes.push({ type: "line", x0: x, x1: x, yref: "paper", y0: 0, y1: 0.94, line: { color: "#e03131", dash: "dot", width: 1.2 } });
        const t = (byRun[r.name] ||= { x: [], text: [], ids: [], steps: [], color });
        t.x.push(x); t.text.push(`${f.rule} · step ${f.step}: ${f.message}`); t.ids.push(f.id); t.steps.push(f.step);
      }
    }
    const runs = Object.keys(byRun);
    for (const run of runs) {
      const t = byRun[run];
      traces.push({ type: "scatter", mode: "markers", x: t.x, y: t.x.map(() => 0.97), yaxis: "y2", name: `${run} · findings`,
        legendgroup: run, showlegend: false, text: t.text, customdata: t.ids.map((id, k) => [run, id, t.steps[k]]),
        meta: { run, finding: true, ids: t.ids, steps: t.steps }, line: { color: t.color },
        marker: { symbol: "triangle-down", size: 13, color: "#e03131", line: { color: t.color, width: 2 } },
        hovertemplate: "%{text}<extra>click: evidence</extra>" });
    }
    if (runs.length) lay.yaxis2 = { overlaying: "y", range: [0, 1], visible: false, fixedrange: true };
  }

  function onFindingClick(id) {
    $(id).on("plotly_click", (ev) => {
      const p = (ev.points || []).find((q) => q.data && q.data.meta && (q.data.meta.finding || q.data.meta.findings));
      if (p) openEvidence(p.customdata[0], p.customdata[1]);
    });
  }

  function robustRange(traces, key) {
    // "ignore outliers" (TensorBoard's default): leave out values orders of magnitude away from
    // the bulk, such as a loss that exploded, so the healthy runs stay readable. The range is
    // only changed when it moved by > 10%, so a zoom survives the polls.
    const ys = [];
    for (const t of traces) if (!t.meta.finding) for (const v of t.y) if (v !== null && v !== undefined) ys.push(v);
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

  function focusRange(lay) {
    // after "show on the charts": the steps around the finding
    const f = state.focus;
    if (!f) return;
    const r = state.runs.find((x) => x.name === f.run);
    const half = Math.max(10, Math.round(0.1 * ((r && r.last_step) || 0)));
    const lo = xAt(f.run, Math.max(0, f.step - half), null), hi = xAt(f.run, f.step + half, null);
    if (state.axis === "step") lay.xaxis.range = [f.step - half, f.step + half];
    else if (lo !== null && hi !== null) lay.xaxis.range = [lo, hi];
    lay.uirevision = `${state.axis}|focus|${f.run}|${f.step}`;
  }

  function drawLosses() {
    const smoothing = +$("smoothing").value;
    $("smoothing-value").textContent = smoothing.toFixed(2);
    const losses = [], scalars = [];
    const lossNames = new Set();
    for (const r of shownRuns()) {
      const series = state.scalars[r.name] || {};
      const names = Object.keys(series).filter((n) => series[n].collection === "losses");
      names.forEach((n) => lossNames.add(n));
      for (const [name, s] of Object.entries(series)) {
        if (s.collection === "losses") {
          const label = names.length > 1 ? `${r.name} · ${name}` : r.name;
          losses.push(...lineTraces(r.name, label, s.rows, smoothing, { tensor: name }));
        } else if (name !== "epoch" && !/^(hp|hyperparameters)\//.test(name)) { // those are in the run's config
          scalars.push(...lineTraces(r.name, `${r.name} · ${name}`, s.rows, 0, { tensor: name }));
        }
      }
    }
    const log = $("losses-log").checked;
    const anySteps = state.runs.some((r) => r.steps > 0);
    if (!losses.length) {
      Plotly.react("plot-losses", [], emptyLayout(anySteps ? "no losses recorded (the hook's `losses` collection)" : "waiting for the first steps…"), PLOT_CONFIG);
    } else {
      const lay = yAxis(layout("loss", log, nanMarkers()), losses, "losses", log, $("losses-outliers").checked);
      epochMarks(lay);
      // findings of a loss, or of no tensor (loss_not_decreasing...): on the losses chart
      findingMarks(lay, losses, (f) => !f.tensors || !f.tensors.length || f.tensors.some((t) => lossNames.has(t)));
      Plotly.react("plot-losses", losses, lay, PLOT_CONFIG);
    }
    // a page of each run's scalars is read: say when there are more, and how to reach them
    let got = 0, total = 0;
    for (const r of shownRuns()) {
      const mine = Object.values(state.scalars[r.name] || {}).filter((s) => s.collection !== "losses").length;
      got += mine;
      total += Math.max(mine, state.scalarsTotal[r.name] ?? mine);
    }
    const match = state.scalarsMatch;
    const note = $("scalars-note");
    note.hidden = !(total > got || (match && !total));
    note.textContent = match && !total ? `no scalar's name holds “${match}”`
      : `${got.toLocaleString()} of ${total.toLocaleString()} scalars${match ? ` whose name holds “${match}”` : ""} shown` +
        ` (the first ${SCALARS_PAGE} of each run, in name order): type part of a name in the filter to see others`;
    $("card-scalars").hidden = !scalars.length && !match && note.hidden;
    if (!$("card-scalars").hidden) Plotly.react("plot-scalars", scalars, layout("value", false), PLOT_CONFIG);
  }

  function drawReduction() {
    const traces = [];
    const notes = [];
    const missing = new Map(); // run -> the chart's tensors it does not have
    const red = `${state.abs ? "|x| " : ""}${state.reduction}`;
    const tensors = chartTensors();
    for (const r of shownRuns()) {
      tensors.forEach((tensor, i) => {
        const k = `${r.name}\n${tensor}`;
        if (state.redErr[k]) notes.push(`${r.name}: ${state.redErr[k]}`);
        else if (state.tensors[r.name] && !state.tensors[r.name].names.has(tensor)) (missing.get(r.name) || missing.set(r.name, []).get(r.name)).push(tensor);
        const rows = state.red[k];
        const label = tensors.length > 1 ? `${r.name} · ${tensor}` : r.name;
        if (rows && rows.map.size) traces.push(...lineTraces(r.name, label, rows, 0, { tensor }, tensors.length > 1 ? TENSOR_DASH[i % TENSOR_DASH.length] : null));
      });
    }
    const paced = [];
    for (const r of shownRuns()) {
      tensors.forEach((tensor) => {
        const rows = state.red[`${r.name}\n${tensor}`];
        if (!rows || !rows.pace || !rows.map.size) return;
        for (const [mode, words] of Object.entries(rows.pace.cadence)) {
          if (words !== "every step") paced.push(`${tensors.length > 1 ? `${tensor} · ` : ""}${r.name}${Object.keys(rows.pace.cadence).length > 1 ? ` (${mode.toLowerCase()})` : ""}: saved ${words}`);
        }
      });
    }
    const cad = $("tensor-cadence");
    cad.hidden = !paced.length;
    cad.textContent = paced.length ? `${paced.join("\n")}\nLines break where steps were not saved; each dot is a saved step.` : "";
    const note = $("tensor-note");
    note.hidden = !notes.length && !missing.size;
    note.textContent = [...[...missing].map(([run, ts]) => `run ${run} has no tensor ${ts.join(", ")}`), ...notes].join("\n");
    const log = $("tensor-log").checked;
    const title = tensors.length === 1 ? `${red} of ${tensors[0]}` : red;
    if (!traces.length) {
      Plotly.react("plot-reduction", [], emptyLayout(tensors.length ? "no values yet" : "no tensors recorded yet"), PLOT_CONFIG);
      return;
    }
    const lay = yAxis(layout(title, log, { shapes: [], annotations: [] }), traces, `red|${state.redKey}|${tensors.join(",")}`, log, $("tensor-outliers").checked);
    findingMarks(lay, traces, (f) => (f.tensors || []).some((t) => tensors.includes(t)));
    if (traces.length > 6) lay.legend = { orientation: "v", x: 1.02, y: 1, font: { size: 11 } };
    focusRange(lay);
    Plotly.react("plot-reduction", traces, lay, PLOT_CONFIG);
  }

  function rgba(hex, a) {
    const n = parseInt(hex.slice(1), 16);
    return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${a})`;
  }
  const TENSOR_COLORS = ["#1971c2", "#e8590c", "#2f9e44", "#ae3ec9", "#0c8599", "#d6336c"];

  function drawDistribution() {
    const note = $("dist-note");
    const dist = state.dist;
    const steps = distSteps();
    const err = dist ? dist.err : null;
    const raw = dist && !err && dist.pace ? dist.pace.cadence[state.distMode] : null;
    const partial = raw && (dist.withoutRaw > 0 || raw !== "every step")
      ? `raw values saved ${raw}` + (dist.withoutRaw ? `; ${dist.withoutRaw} other saved step${dist.withoutRaw === 1 ? "" : "s"} hold statistics only (no raw values to draw a distribution; their reductions are on the Tensors chart)` : "")
      : "";
    note.hidden = !err && !partial;
    note.textContent = err || partial;
    const run = state.distRun;
    const tensor = primaryTensor();
    const color = state.color[run] || "#3b5bdb";
    $("dist-title").textContent = dist && tensor ? `of ${tensor} in ${run}` : "";
    if (!dist || !steps.length) {
      Plotly.react("plot-distribution", [], emptyLayout(tensor ? "no raw values yet" : "no tensors recorded yet"), PLOT_CONFIG);
      Plotly.react("plot-histogram", [], emptyLayout(""), PLOT_CONFIG);
      return;
    }
    // a null row before each step after a gap: the bands stop there instead of spanning it
    const cut = dist.pace ? dist.pace.breaks : new Set();
    const rows = [], xs = [];
    steps.forEach((s, i) => {
      const x = xAt(run, s, null);
      if (i && cut.has(s)) { rows.push(null); xs.push(x); }
      rows.push(dist.rows.get(s)); xs.push(x);
    });
    const p = (k) => rows.map((r) => (r ? r.values[k] : null));
    const lone = steps.length < 2 || (dist.pace && dist.pace.breaks.size) ? "lines+markers" : "lines";
    const traces = [];
    const alpha = [0.12, 0.2, 0.3, 0.42];
    for (let i = 0; i < 4; i++) {
      traces.push({ type: "scatter", x: xs, y: p(i), mode: "lines", line: { width: 0, color }, showlegend: false, hoverinfo: "skip" });
      traces.push({ type: "scatter", x: xs, y: p(8 - i), mode: "lines", line: { width: 0, color }, fill: "tonexty",
        fillcolor: rgba(color, alpha[i]), showlegend: false, hoverinfo: "skip" });
    }
    traces.push({ type: "scatter", x: xs, y: p(4), mode: lone, name: "median", line: { color, width: 2 }, marker: { size: 5, color }, showlegend: false,
      customdata: rows.map((r) => (r ? [...r.values.map(fmt), r.nonfinite] : [])),
      hovertemplate: "max %{customdata[8]}<br>+1σ %{customdata[6]}<br>median %{customdata[4]}<br>-1σ %{customdata[2]}<br>min %{customdata[0]}<br>non-finite %{customdata[9]}<extra></extra>" });
    const mark = state.histStep === null ? null : xAt(run, state.histStep, null);
    Plotly.react("plot-distribution", traces, layout(tensor, false, {
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

  // views and controls --------------------------------------------------------------------------
  function setView(view) {
    if (!["training", "layers", "profiler"].includes(view)) view = "training";
    state.view = view;
    document.querySelectorAll(".views button").forEach((b) => b.classList.toggle("on", b.dataset.view === view));
    document.querySelectorAll(".view").forEach((v) => { v.hidden = v.dataset.view !== view; });
    document.body.dataset.view = view;
  }
  function setAxis(axis) {
    if (!["step", "wall", "relative"].includes(axis)) axis = "step";
    state.axis = axis;
    document.querySelectorAll(".axis button").forEach((b) => b.classList.toggle("on", b.dataset.axis === axis));
    document.body.dataset.axis = axis;
  }
  document.querySelectorAll(".views button").forEach((b) => b.addEventListener("click", () => {
    setView(b.dataset.view); writeHash(); tick();
    setTimeout(() => document.querySelectorAll(`.view[data-view="${b.dataset.view}"] .plot`).forEach((p) => p.data && Plotly.Plots.resize(p)), 0);
  }));
  document.querySelectorAll(".axis button").forEach((b) => b.addEventListener("click", () => { setAxis(b.dataset.axis); writeHash(); draw(); }));

  $("tensor").addEventListener("change", (e) => {
    const t = e.target.value || null;
    state.focus = null;
    state.autoTensor = false;
    if (t) { state.tensorList = [t, ...state.tensorList.slice(1).filter((x) => x !== t)]; }
    writeHash(); tick();
  });
  $("tensor-pin").addEventListener("click", () => {
    // keep the current tensor on the chart: the next pick is added beside it
    const t = primaryTensor();
    if (!t) return;
    state.autoTensor = false;
    state.tensorList = ["", t, ...state.tensorList.slice(1).filter((x) => x !== t)].slice(0, MAX_TENSORS);
    const sel = $("tensor");
    const next = [...sel.options].map((o) => o.value).find((v) => v && !state.tensorList.includes(v));
    state.tensorList[0] = next || t;
    state.tensorList = state.tensorList.filter((x, i, a) => x && a.indexOf(x) === i);
    state.pickerSig = "";
    writeHash(); tick();
  });
  $("tensor-chips").addEventListener("click", (e) => {
    const b = e.target.closest("[data-unpin]");
    if (!b) return;
    state.tensorList = state.tensorList.filter((x) => x !== b.dataset.unpin);
    state.pickerSig = "";
    writeHash(); tick();
  });
  $("tensor-filter").addEventListener("input", () => { state.pickerSig = ""; buildPicker(); });
  let scalarsTyping = null;
  $("scalars-filter").addEventListener("input", () => {
    // asked again from the server (a page of the matching names), once typing pauses
    clearTimeout(scalarsTyping);
    scalarsTyping = setTimeout(() => {
      const match = $("scalars-filter").value.trim();
      if (match === state.scalarsMatch) return;
      state.scalarsMatch = match;
      // the losses stay (they do not depend on the filter); the scalars are asked again, whole
      for (const [run, series] of Object.entries(state.scalars)) {
        for (const [name, s] of Object.entries(series)) if (s.collection !== "losses") delete series[name];
        state.scalarsAgain.add(run);
      }
      state.scalarsTotal = {};
      tick();
    }, 250);
  });
  $("reduction").addEventListener("change", (e) => {
    const [name, abs] = e.target.value.split("|");
    state.reduction = name; state.abs = abs === "1"; writeHash(); tick();
  });
  $("smoothing").addEventListener("input", drawLosses);
  $("losses-log").addEventListener("change", drawLosses);
  $("losses-outliers").addEventListener("change", drawLosses);
  $("tensor-log").addEventListener("change", drawReduction);
  $("tensor-outliers").addEventListener("change", drawReduction);
  $("dist-run").addEventListener("change", (e) => { state.distRun = e.target.value; writeHash(); tick(); });
  $("dist-mode").addEventListener("change", (e) => { state.distMode = e.target.value; state.followLatest = true; tick(); });
  $("layers-run").addEventListener("change", (e) => { state.layersRun = e.target.value; writeHash(); tick(); });
  $("layers-metric").addEventListener("change", (e) => { state.layersMetric = e.target.value; writeHash(); drawLayers(); });
  $("profiler-run").addEventListener("change", (e) => { state.profilerRun = e.target.value; writeHash(); tick(); });
  $("findings-run").addEventListener("change", () => { state.findingsSig = ""; renderFindings(); });
  $("hist-step").addEventListener("input", (e) => {
    const steps = JSON.parse(e.target.dataset.steps || "[]");
    const i = +e.target.value;
    state.followLatest = i >= steps.length - 1;
    state.histStep = steps[i];
    tick();
  });
  $("hist-latest").addEventListener("click", () => { state.followLatest = true; tick(); });
  window.addEventListener("hashchange", () => {
    writtenHash = location.hash;
    const h = readHash();
    setView(h.view); setAxis(h.axis);
    state.chosen = h.runs ? new Set(h.runs) : null;
    if (h.tensors) state.tensorList = h.tensors;
    state.pickerSig = "";
    tick();
  });

  ["plot-losses", "plot-reduction", "plot-layers"].forEach((id) => { Plotly.newPlot(id, [], emptyLayout("…"), PLOT_CONFIG); onFindingClick(id); });
  setView(state.view);
  setAxis(state.axis);
  window.mldbgDashboard = { state, refresh: tick, redraw: draw, openEvidence, runColor };
  listen();
  tick();
})();
