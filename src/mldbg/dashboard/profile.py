"""The dashboard's profiler panel: system utilisation, step phases and the profiler rules'
verdicts of a run, from the profiler's public reader (`mldbg.profiler.read.ProfilerData`) and
the profiler rules of the registry, as the offline profile report shows them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.profiler.read import ProfilerData
from mldbg.rules import BUILTIN
from mldbg.rules.profiler import ProfilerRule

MAX_POINTS = 2000
STEP_PHASES = ("data", "forward", "backward", "optimizer", "debugger")


def _thin(n: int) -> slice:
    return slice(None, None, max(1, math.ceil(n / MAX_POINTS)))


def _list(x: np.ndarray, t0: float = 0.0, digits: int = 4) -> list[Any]:
    out = []
    for v in np.asarray(x, dtype=np.float64).tolist():
        out.append(round(v - t0, digits) if math.isfinite(v) else None)
    return out


def profiler_rules() -> list[ProfilerRule]:
    """Every registered profiler rule with its defaults, in the profile report's order."""
    rules = [cls() for cls in BUILTIN.values() if isinstance(cls, type) and issubclass(cls, ProfilerRule)]
    return sorted(rules, key=lambda rule: rule.order)


def verdicts(data: ProfilerData) -> list[dict[str, Any]]:
    out = []
    for rule in profiler_rules():
        rule.reset()
        reason = rule.missing(data)
        findings = [] if reason else rule.run(data)
        if reason:
            verdict = "not evaluated"
        elif findings:
            verdict = "issues"
        else:
            verdict = "no issue" if rule.fires else "statistics"
        out.append(
            {
                "rule": rule.name,
                "verdict": verdict,
                "reason": reason,
                "findings": [f.to_dict() for f in findings],
            }
        )
    return out


def panel(run: str, data: ProfilerData, with_verdicts: bool = True) -> dict[str, Any]:
    """The JSON of `GET /api/runs/{run}/profiler` (docs/dashboard_api.md)."""
    if not data.has_data:
        return {
            "run": run,
            "available": False,
            "reason": "no profiler data in this run: pass profiler_config=mldbg.ProfilerConfig() to the hook",
            "t0": None,
            "system": [],
            "steps": [],
            "verdicts": [],
            "summary": {},
        }
    systems = [data.system(node) for node in data.nodes()]
    step_series = [data.steps(worker) for worker in data.workers()]
    starts = [float(np.nanmin(s.time)) for s in systems if len(s)]
    starts += [float(np.nanmin(s.start)) for s in step_series if len(s) and np.isfinite(s.start).any()]
    t0 = min(starts) if starts else 0.0
    system = []
    for s in systems:
        cut = _thin(len(s))
        system.append(
            {
                "node": s.node,
                "time": _list(s.time[cut], t0),
                "cpu_total": _list(s.cpu_total[cut], digits=2),
                "cpu_max_core": _list(s.cpu_max_core[cut], digits=2),
                "mem_percent": _list(s.mem_percent[cut], digits=2),
                "gpu_util": [_list(s.gpu_util[cut, g], digits=2) for g in range(s.gpus)],
                "gpu_mem": [_list(s.gpu_mem[cut, g], digits=2) for g in range(s.gpus)],
                "cores": s.cores,
                "gpus": s.gpus,
            }
        )
    steps = []
    for rows in step_series:
        cut = _thin(len(rows))
        item: dict[str, Any] = {
            "worker": rows.worker,
            "step": [int(x) for x in rows.step[cut]],
            "mode": [Mode(int(m)).name for m in rows.mode[cut]],
            "start": _list(rows.start[cut], t0),
            "duration": _list(rows.duration[cut], digits=6),
        }
        for phase in STEP_PHASES:
            item[phase] = _list(getattr(rows, phase)[cut], digits=6)
        steps.append(item)
    summary = {
        k: (v if not isinstance(v, float) or math.isfinite(v) else None)
        for k, v in data.job_summary().items()
    }
    return {
        "run": run,
        "available": True,
        "reason": None,
        "t0": t0,
        "system": system,
        "steps": steps,
        "verdicts": verdicts(data) if with_verdicts else [],
        "summary": summary,
    }
