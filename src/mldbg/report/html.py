"""The HTML shell of a report: one self-contained file (inline CSS and SVG, no script, no
CDN), made of titled sections: the training report's (`mldbg report`); the profiler report keeps
its own page (`mldbg.report.profiler`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

CSS = """
:root{--ink:#111827;--muted:#6b7280;--line:#e5e7eb;--bg:#f9fafb;--card:#fff;--bad:#b91c1c;--ok:#15803d}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:14px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif}
header{background:#111827;color:#f9fafb;padding:20px 32px}
header h1{margin:0 0 4px;font-size:22px}
header p{margin:0;color:#d1d5db}
nav{position:sticky;top:0;z-index:1;background:#fff;border-bottom:1px solid var(--line);padding:8px 32px;overflow-x:auto;white-space:nowrap}
nav a{color:#1d4ed8;text-decoration:none;margin-right:16px;font-size:13px}
main{max-width:1180px;margin:0 auto;padding:16px 24px 48px}
section{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 20px;margin:16px 0}
section h2{margin:0 0 4px;font-size:17px}
section .note{color:var(--muted);margin:0 0 12px}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:12px;align-items:start}
svg.chart{width:100%;height:auto;display:block}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:600}
th.num{text-align:right}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.finding{border-left:4px solid var(--bad);background:#fef2f2;padding:8px 12px;margin:8px 0;border-radius:4px}
.finding b{color:var(--bad)}
.finding .try{color:#374151;margin-top:4px}
.diagnosis{border-left:4px solid var(--bad);background:#fff7f7;padding:8px 12px;margin:10px 0;border-radius:4px}
.diagnosis.warning{border-left-color:#d97706;background:#fffbeb}
.diagnosis .why{color:#374151;margin-top:4px}
.diagnosis .advice{margin-top:4px}
.diagnosis .finding{margin:6px 0 0 16px;background:transparent}
.quiet{border-left:4px solid var(--ok);background:#f0fdf4;padding:8px 12px;border-radius:4px}
.skipped{color:var(--muted);font-size:13px}
details summary{cursor:pointer;color:#1d4ed8}
code{background:#f3f4f6;padding:1px 4px;border-radius:4px}
footer{color:var(--muted);text-align:center;font-size:12px;padding:16px}
"""


@dataclass
class Section:
    """One titled block of the report; `body` is HTML."""

    id: str
    title: str
    body: str
    note: str = ""

    def render(self) -> str:
        note = f'<p class="note">{escape(self.note)}</p>' if self.note else ""
        return f'<section id="{escape(self.id)}"><h2>{escape(self.title)}</h2>{note}{self.body}</section>'


def page(title: str, subtitle: str, sections: Sequence[Section]) -> str:
    """A whole HTML document: header, a link bar to each section, the sections."""
    links = "".join(f'<a href="#{escape(s.id)}">{escape(s.title)}</a>' for s in sections)
    made = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p></header>"
        f"<nav>{links}</nav><main>{''.join(s.render() for s in sections)}</main>"
        f"<footer>made by mldbg on {made}; a self-contained file: no scripts, nothing loaded from the network</footer>"
        "</body></html>"
    )


def grid(items: Iterable[str]) -> str:
    """Charts side by side, wrapping on narrow screens."""
    return '<div class="grid">' + "".join(f"<div>{item}</div>" for item in items) + "</div>"


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Sequence[int] = ()) -> str:
    """A plain table; columns listed in `numeric` are right-aligned."""
    head = "".join(
        f"<th{' class=num' if i in numeric else ''}>{escape(str(h))}</th>" for i, h in enumerate(header)
    )
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cls = ' class="num"' if i in numeric else ""
            cells.append(f"<td{cls}>{escape(str(cell))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def details(summary: str, body: str) -> str:
    return f"<details><summary>{escape(summary)}</summary>{body}</details>"


def paragraph(text: str) -> str:
    return f"<p>{escape(text)}</p>"


def diagnoses(grouped: Sequence[Any], skipped: dict[str, str] | None = None, error: str | None = None) -> str:
    """Diagnoses first (cause, confidence, why, the one advice), the findings each explains
    one level down; then the rules not checked (as `findings`)."""
    if error or not grouped:
        return findings([], skipped, error)
    parts = []
    for d in grouped:
        inner = "".join(
            f'<div class="finding"><b>{escape(f.rule)}</b> at {escape(_where(f))}: {escape(f.message)}</div>'
            for f in d.findings
        )
        parts.append(
            f'<div class="diagnosis{" warning" if d.severity != "error" else ""}">'
            f"<b>{escape(d.title or d.cause)}</b> (<code>{escape(d.cause)}</code>, from step {d.step}, "
            f"confidence {d.confidence:.2f}{'' if d.severity == 'error' else ', warning'})"
            f'<div class="why">Why: {escape(d.why)}</div><div class="advice">Try: {escape(d.advice)}</div>'
            f"{inner}</div>"
        )
    return "".join(parts) + _skipped(skipped)


def _where(f: Any) -> str:
    return f"step {f.step}" + (f" ({f.mode})" if getattr(f, "mode", None) else "")


def findings(found: Sequence[Any], skipped: dict[str, str] | None = None, error: str | None = None) -> str:
    """Rule findings (objects with rule, step, mode, message, suggestion), or a quiet note."""
    parts = []
    if error:
        parts.append(f'<p class="skipped">{escape(error)}</p>')
    elif not found:
        parts.append('<div class="quiet">No rule fired.</div>')
    for f in found:
        where = f"step {f.step}" + (f" ({f.mode})" if getattr(f, "mode", None) else "")
        tip = f'<div class="try">Try: {escape(f.suggestion)}</div>' if getattr(f, "suggestion", "") else ""
        parts.append(
            f'<div class="finding"><b>{escape(f.rule)}</b> at {escape(where)}: {escape(f.message)}{tip}</div>'
        )
    return "".join(parts) + _skipped(skipped)


def _skipped(skipped: dict[str, str] | None) -> str:
    if not skipped:
        return ""
    rows = "".join(f"<li><code>{escape(k)}</code>: {escape(v)}</li>" for k, v in sorted(skipped.items()))
    return (
        f'<details class="skipped"><summary>{len(skipped)} rules not checked: their data was not '
        f"recorded (or too little of it)</summary><ul>{rows}</ul></details>"
    )
