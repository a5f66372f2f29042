"""The profiler report (`mldbg profile-report`): one self-contained static HTML page (inline
CSS and SVG, no script, no CDN) from a run's profiler series.

Sections: job summary (initialization, training loop, finalization), rule verdicts, system
usage statistics (p50/p95/p99/max per metric and node) and timelines, step durations
(timeline and histogram), phase breakdown, top operators and Python functions of the
profiling windows, then one section per profiler rule with its verdict and the chart the
rule draws (`ProfilerRule.chart`). The rules are the registered profiler rules in their
declared `order`: a new profiler rule shows here without an edit to this file.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.profiler.read import ProfilerData
from mldbg.profiler.stats import percentile
from mldbg.rules import BUILTIN, Finding
from mldbg.rules.profiler import ProfilerRule, fmt_s, svg
from mldbg.rules.profiler.overall_system_usage import OverallSystemUsage

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:#0f172a;margin:0;background:#f8fafc}
main{max-width:980px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:32px 0 8px;border-bottom:1px solid #e2e8f0;padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
.muted{color:#64748b}.small{font-size:12px}
table{border-collapse:collapse;margin:8px 0;width:100%;background:#fff}
th,td{border:1px solid #e2e8f0;padding:3px 8px;text-align:right;font-variant-numeric:tabular-nums}
th{background:#f1f5f9}td.l,th.l{text-align:left}
.chart{width:100%;height:auto;background:#fff;border:1px solid #e2e8f0;border-radius:4px}
.tick{font-size:10px;fill:#475569}.axis{font-size:11px;fill:#334155}.bar{font-size:10px;fill:#fff}
.legend{font-size:12px;margin:2px 0 10px}.key{margin-right:14px;white-space:nowrap}
.key i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px;vertical-align:-1px}
.verdict{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600}
.fired{background:#fee2e2;color:#991b1b}.ok{background:#dcfce7;color:#166534}.skip{background:#e2e8f0;color:#334155}
.finding{background:#fff;border-left:4px solid #dc2626;padding:6px 10px;margin:6px 0}
.finding .try{color:#334155;margin-top:3px}.note{background:#fffbeb;border-left:4px solid #d97706;padding:6px 10px;margin:6px 0}
section.rule{background:#fff;border:1px solid #e2e8f0;border-radius:6px;padding:4px 14px 12px;margin:14px 0}
code{font-size:12px}
"""


def profiler_rules(specs: Sequence[Any] | None = None) -> list[ProfilerRule]:
    """Every registered profiler rule with its defaults, or as given in `specs`: names,
    "name:k=v,k2=v2" strings, classes or instances (the profiler rules among them; those
    not registered, a user's own, come too). Listed by their `order`."""
    given: dict[str, ProfilerRule] = {}
    for spec in specs or ():
        if isinstance(spec, ProfilerRule):
            given[spec.name] = spec
        elif isinstance(spec, type) and issubclass(spec, ProfilerRule):
            given[spec.name] = spec()
        elif isinstance(spec, str):
            name, _, rest = spec.partition(":")
            params = dict(kv.split("=", 1) for kv in rest.split(",") if "=" in kv)
            cls = BUILTIN.get(name.strip())
            if cls is not None and issubclass(cls, ProfilerRule):
                given[cls.name] = cls(None, **{k.strip(): v.strip() for k, v in params.items()})
    rules = [
        given.pop(name) if name in given else cls()
        for name, cls in BUILTIN.items()
        if issubclass(cls, ProfilerRule)
    ]
    return sorted([*rules, *given.values()], key=lambda rule: rule.order)


def write_report(source: Any, out: str | os.PathLike[str], rules: Sequence[Any] | None = None) -> Path:
    """Render the report of a run (path, Store, Trial or ProfilerData) to `out`."""
    data = source if isinstance(source, ProfilerData) else ProfilerData(source)
    html = render(data, profiler_rules(rules))
    path = Path(out)
    path.write_text(html, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------
def render(data: ProfilerData, rules: Sequence[ProfilerRule]) -> str:
    results = []
    for rule in rules:
        rule.reset()  # the report evaluates the whole run, whatever the rule saw before
        reason = rule.missing(data)
        findings = [] if reason else rule.run(data)
        results.append((rule, reason, findings))
    t0 = _origin(data)
    body = [
        _header(data),
        _summary(data),
        _verdicts(results),
        _system(data, t0, results),
        _steps(data),
        _windows(data),
        '<h2 id="rules">Rules</h2>',
        *(_rule_section(data, t0, rule, reason, findings) for rule, reason, findings in results),
    ]
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>mldbg profiler report: {escape(data.path)}</title><style>{CSS}</style></head>"
        f"<body><main>{''.join(body)}</main></body></html>"
    )


def _origin(data: ProfilerData) -> float:
    starts = [
        data.worker_meta(w).get("process_start") or data.worker_meta(w).get("started") for w in data.workers()
    ]
    starts += [float(data.system(n).time[0]) for n in data.nodes() if len(data.system(n))]
    known = [float(s) for s in starts if s]
    return min(known) if known else 0.0


def _header(data: ProfilerData) -> str:
    now = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    notes = "".join(f'<div class="note">{escape(n)}</div>' for n in data.notes())
    status = "complete" if data.complete else "still running (or ended without closing the profiler)"
    return (
        f"<h1>Profiler report</h1><div class='muted'>{escape(data.path)} &middot; {len(data.nodes())} node(s), "
        f"{len(data.workers())} worker(s) &middot; run {status} &middot; generated {now} by mldbg</div>{notes}"
    )


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    th = "".join(f'<th class="{"l" if i < left else ""}">{escape(h)}</th>' for i, h in enumerate(head))
    trs = []
    for r in rows:
        tds = "".join(
            f'<td class="{"l" if i < left else ""}">{c if isinstance(c, _Raw) else escape(_cell(c))}</td>'
            for i, c in enumerate(r)
        )
        trs.append(f"<tr>{tds}</tr>")
    return f"<table><tr>{th}</tr>{''.join(trs)}</table>"


class _Raw(str):
    """Already-escaped HTML for a table cell."""


def _cell(v: Any) -> str:
    if isinstance(v, float):
        if not np.isfinite(v):
            return "n/a"
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def _summary(data: ProfilerData) -> str:
    js = data.job_summary()
    out = ['<h2 id="summary">Job summary</h2>']
    parts = [
        ("initialization", js.get("initialization")),
        ("training loop", js.get("training_loop")),
        ("finalization", js.get("finalization")),
    ]
    known = [(k, v) for k, v in parts if v is not None]
    if known:
        out.append(
            svg.stacked_bars(
                [("wall-clock time", [(k, max(0.0, v)) for k, v in known])],
                "s",
                {"initialization": "#d97706", "training loop": "#2563eb", "finalization": "#7c3aed"},
            )
        )
    rows = [[k, fmt_s(v) if v is not None else "n/a"] for k, v in parts]
    rows.append(["total (process start to profiler end)", fmt_s(js["total"]) if js.get("total") else "n/a"])
    out.append(_table(["phase", "time"], rows))
    facts = []
    for w in data.workers():
        s = data.steps(w)
        modes = ", ".join(f"{int(np.sum(s.mode == int(m)))} {m.name}" for m in s.modes()) or "none"
        end = data.worker_end(w) or {}
        meta = data.worker_meta(w)
        cpu = end.get("sampler_cpu_seconds")
        began, ended = meta.get("started"), end.get("ended")
        overhead = (
            f"{100 * cpu / (ended - began):.2f}% of one core"
            if cpu is not None and began and ended and ended > began
            else "n/a"
        )
        facts.append(
            [w, meta.get("node", "?"), meta.get("framework", ""), modes, meta.get("cores", "?"), overhead]
        )
    out.append(
        _table(["worker", "node", "framework", "steps", "cores", "profiler thread CPU"], facts, left=4)
    )
    return "".join(out)


def _verdicts(results: Sequence[tuple[ProfilerRule, str | None, list[Finding]]]) -> str:
    rows = []
    for rule, reason, findings in results:
        rows.append(
            [
                _Raw(f'<a href="#rule-{rule.name}">{escape(rule.name)}</a>'),
                _Raw(_badge(reason, findings, rule)),
                len(findings) if not reason else "",
            ]
        )
    return '<h2 id="verdicts">Rule verdicts</h2>' + _table(["rule", "verdict", "findings"], rows, left=2)


def _badge(reason: str | None, findings: list[Finding], rule: ProfilerRule) -> str:
    if reason:
        return '<span class="verdict skip">not evaluated</span>'
    if findings:
        return f'<span class="verdict fired">{len(findings)} issue{"s" if len(findings) > 1 else ""}</span>'
    if not rule.fires:
        return '<span class="verdict ok">statistics</span>'
    return '<span class="verdict ok">no issue</span>'


# system ---------------------------------------------------------------------------------
def _system(
    data: ProfilerData, t0: float, results: Sequence[tuple[ProfilerRule, str | None, list[Finding]]]
) -> str:
    out = ['<h2 id="system">System usage</h2>']
    usage = next((r for r, _, _ in results if isinstance(r, OverallSystemUsage)), None)
    stats = usage.statistics(data) if usage is not None else []
    if not data.nodes():
        return (
            out[0]
            + '<p class="muted">No system metrics were recorded (ProfilerConfig.system_interval_ms=None, or psutil missing).</p>'
        )
    rows = [[r["where"], r["metric"], r["p50"], r["p95"], r["p99"], r["max"], r["n"]] for r in stats]
    out.append(
        "<h3>Statistics per metric and node</h3>"
        + _table(["node / worker", "metric", "p50", "p95", "p99", "max", "samples"], rows, left=2)
    )
    spans = svg.loop_span(data, t0)
    for node in data.nodes():
        sys = data.system(node)
        meta = data.node_meta(node)
        x = sys.time - t0
        out.append(
            f"<h3>{escape(node)}</h3><div class='muted small'>{sys.cores} cores, {sys.gpus} GPU(s), "
            f"{len(sys)} samples every {meta.get('interval_ms', '?')} ms; the shaded span is the training loop</div>"
        )
        out.append(
            svg.line_chart(
                [
                    ("CPU, mean of cores", x, sys.cpu_total),
                    ("busiest core", x, sys.cpu_max_core),
                    ("I/O wait", x, sys.iowait),
                    ("memory", x, sys.mem_percent),
                ],
                "seconds since start",
                "%",
                y_max=100,
                spans=spans,
            )
        )
        if sys.gpus:
            out.append(
                svg.line_chart(
                    [(f"GPU {g} utilization", x, sys.gpu_util[:, g]) for g in range(sys.gpus)],
                    "seconds since start",
                    "%",
                    y_max=100,
                    spans=spans,
                )
            )
            out.append(
                svg.line_chart(
                    [(f"GPU {g} memory", x, sys.gpu_mem[:, g]) for g in range(sys.gpus)],
                    "seconds since start",
                    "% of GPU memory",
                    y_max=100,
                    spans=spans,
                )
            )
        m = sys.metrics()
        out.append(
            svg.line_chart(
                [
                    (k.replace("_mb_s", "").replace("_", " "), x, m[k])
                    for k in ("disk_read_mb_s", "disk_write_mb_s", "net_recv_mb_s", "net_sent_mb_s")
                ],
                "seconds since start",
                "MB/s",
                spans=spans,
            )
        )
    for w in data.workers():
        p = data.process(w)
        if len(p):
            out.append(f"<h3>{escape(w)} process</h3>")
            out.append(
                svg.line_chart(
                    [
                        ("CPU (with children), % of one core", p.time - t0, p.cpu),
                        ("data-loader / child processes x 100", p.time - t0, p.children * 100.0),
                    ],
                    "seconds since start",
                    "%",
                    spans=spans,
                )
            )
    return "".join(out)


# steps ----------------------------------------------------------------------------------
def _steps(data: ProfilerData) -> str:
    out = ['<h2 id="steps">Steps</h2>']
    if not data.has_steps:
        return (
            out[0]
            + '<p class="muted">No step timeline was recorded (ProfilerConfig.step_phases=False, or no step ran).</p>'
        )
    for w in data.workers():
        all_steps = data.steps(w)
        if not len(all_steps):
            continue
        out.append(f"<h3>{escape(w)}: step duration</h3>")
        series = []
        for m in all_steps.modes():
            s = all_steps.select(m)
            series.append((m.name, s.step.astype(float), s.duration * 1e3))
        out.append(svg.line_chart(series, "step", "ms (data wait included)", markers=True))
        train = all_steps.select(Mode.TRAIN) if Mode.TRAIN in all_steps.modes() else all_steps
        p50 = percentile(train.duration, 50) * 1e3
        out.append(
            svg.histogram_chart(
                train.duration * 1e3, "step duration, ms", vline=(p50, f"median {p50:.3g} ms")
            )
        )
        out.append(f"<h3>{escape(w)}: phase breakdown</h3>")
        bars, rows = [], []
        for m in all_steps.modes():
            s = all_steps.select(m)
            phases = {
                "data": s.data, "forward": s.forward, "backward": s.backward, "optimizer": s.optimizer, "other": s.other,
            }  # fmt: skip
            med = {
                k: (float(np.nanmedian(v)) * 1e3 if np.isfinite(v).any() else 0.0) for k, v in phases.items()
            }
            bars.append((f"{m.name} (median)", list(med.items())))
            total = float(np.median(s.duration)) * 1e3
            for k, v in phases.items():
                if np.isfinite(v).any():
                    rows.append(
                        [
                            m.name,
                            k,
                            med[k],
                            percentile(v, 95) * 1e3,
                            f"{100 * med[k] / total:.0f}%" if total else "n/a",
                        ]
                    )
        out.append(svg.stacked_bars(bars, "ms", svg.PHASE_COLORS))
        out.append(_table(["mode", "phase", "median ms", "p95 ms", "share of median step"], rows, left=2))
        out.append(
            '<p class="muted small">data: waiting for the next batch (end of the previous step to the first forward); '
            "backward: from the end of the loss (or of the forward, when no loss is registered) to the end of backward; "
            "other: the rest of the step (zero_grad, clipping, logging, the hook itself).</p>"
        )
    return "".join(out)


# profiling windows ----------------------------------------------------------------------
def _windows(data: ProfilerData) -> str:
    torch_w = data.windows("torch")
    py_w = data.windows("python")
    out = ['<h2 id="windows">Profiling windows</h2>']
    if not torch_w and not py_w:
        return out[0] + (
            '<p class="muted">No window was captured. Pass ProfilerConfig(torch_profiler=(start_step, num_steps)) '
            "for the top operators and a Chrome trace, python_profiler=(start_step, num_steps) for cProfile.</p>"
        )
    for w in torch_w:
        a, b = w.get("steps", ["?", "?"])
        out.append(
            f"<h3>Top operators, torch.profiler, {escape(w['worker'])}, steps {a}-{b}</h3>"
            f"<div class='muted small'>Chrome trace: <code>{escape(data.path)}/{escape(w['data_key'])}</code> "
            "(open in ui.perfetto.dev or chrome://tracing)</div>"
        )
        rows = [
            [
                op["name"],
                op["count"],
                op["self_cpu_us"] / 1e3,
                op["cpu_total_us"] / 1e3,
                op["self_device_us"] / 1e3,
            ]
            for op in w.get("operators", [])[:25]
        ]
        out.append(_table(["operator", "calls", "self CPU ms", "CPU total ms", "self device ms"], rows))
    for w in py_w:
        a, b = w.get("steps", ["?", "?"])
        out.append(
            f"<h3>Top Python functions, cProfile, {escape(w['worker'])}, steps {a}-{b}</h3>"
            f"<div class='muted small'>stats: <code>{escape(data.path)}/{escape(w['data_key'])}</code> "
            "(python -m pstats FILE)</div>"
        )
        rows = [
            [
                f"{f['function']} ({os.path.basename(str(f['file']))}:{f['line']})",
                f["ncalls"],
                f["tottime"] * 1e3,
                f["cumtime"] * 1e3,
            ]
            for f in w.get("functions", [])[:25]
        ]
        out.append(_table(["function", "calls", "own ms", "cumulative ms"], rows))
    return "".join(out)


# rules ----------------------------------------------------------------------------------
def _rule_section(
    data: ProfilerData, t0: float, rule: ProfilerRule, reason: str | None, findings: list[Finding]
) -> str:
    doc = " ".join((type(rule).__doc__ or "").split())
    params = ", ".join(f"{k}={v!r}" for k, v in rule.params().items()) or "none"
    out = [
        f'<section class="rule" id="rule-{rule.name}"><h3>{escape(rule.name)} {_badge(reason, findings, rule)}</h3>',
        f'<div class="muted small">{escape(doc)}<br>parameters: <code>{escape(params)}</code></div>',
    ]
    if reason:
        out.append(f'<p class="muted">Not evaluated: {escape(reason)}.</p></section>')
        return "".join(out)
    for f in findings:
        where = f"step {f.step}" + (f" ({f.mode})" if f.mode else "")
        out.append(
            f'<div class="finding"><b>{escape(where)}</b>: {escape(f.message)}'
            + (f'<div class="try">Try: {escape(f.suggestion)}</div>' if f.suggestion else "")
            + "</div>"
        )
    if not findings and rule.fires:
        out.append('<p class="muted">Nothing found.</p>')
    try:
        out.append(rule.chart(data, t0) or "")
    except Exception as e:  # a chart must not take the report down
        out.append(f'<p class="muted">chart unavailable: {escape(str(e))}</p>')
    out.append("</section>")
    return "".join(out)
