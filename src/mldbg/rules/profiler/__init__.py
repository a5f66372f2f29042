"""`ProfilerRule`: the base of the rules over the profiler's series (one per module here).

They run through the same runner as the model rules. A profiler rule looks at the series,
not at a step's tensors, so:

- `poll(trial, now)`, which the runner calls on every pass, re-evaluates the whole series
  when new chunks arrived since its last look (live: about once per `flush_seconds`);
  `check(trial, step)` does nothing: tensor steps say nothing about the system;
- `finish(trial)` evaluates the complete run;
- each condition is reported once (per node, GPU, worker...), however often it is seen;
- `unchecked()` (after `finish`) and `unavailable(trial)` say why the rule could not run
  (no profiler data, no GPU series): the runner lists it in `skipped`, as for a missing
  collection.

A subclass overrides `evaluate(data, final)` and returns `(key, Finding)` pairs, and
`chart(data, t0)` to show its chart in the profiler report (`mldbg profile-report`), which
lists the registered profiler rules by their `order`: a new rule is one new file here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np

from mldbg.config import Mode
from mldbg.profiler.read import ProfilerData, SystemSeries, profiler_data
from mldbg.rules.base import Finding, Rule
from mldbg.rules.params import NON_NEGATIVE, Range

MIN_SAMPLES = 10  # fewer samples after warm-up than this: too little to judge

NO_DATA = "no profiler data in this run (pass profiler_config=mldbg.ProfilerConfig() to the hook)"


class ProfilerRule(Rule):
    needs: ClassVar[tuple[str, ...]] = ()
    needs_steps: ClassVar[bool] = False  # the system series exist before the first step
    #: what the rule reads: "system" (node samples), "gpu" (GPU samples), "steps" (step
    #: timeline), "any" (whatever profiler data there is)
    requires: ClassVar[str] = "any"
    #: where the profiler report lists the rule (ascending; the built-ins in RULES.md order)
    order: ClassVar[int] = 1000
    #: False for a rule that only gathers statistics for the report: it never fires
    fires: ClassVar[bool] = True
    #: what a profiler rule sees depends on the machine (a busy shared host, a slow disk):
    #: its findings are warnings, which fail `mldbg check` only with --strict
    severity: ClassVar[str] = "warning"
    #: `patience` here counts samples to skip at the start, and may be 0
    bounds: ClassVar[dict[str, Range]] = {"patience": NON_NEGATIVE}

    def reset(self) -> None:
        super().reset()
        self._version = -1  # the profiler data version last evaluated
        self._emitted: set[Any] = set()  # keys of the conditions already reported
        self._unchecked: str | None = None  # after `finish`: why the rule could not run

    # what the runner calls ----------------------------------------------------------------
    def unavailable(self, trial: Any) -> str | None:
        """Why this rule cannot run on `trial` (None: it can)."""
        data = profiler_data(trial)
        return self.missing(data)

    def missing(self, data: ProfilerData) -> str | None:
        if not data.has_data:
            return NO_DATA
        if self.requires in ("system", "gpu") and data.complete and not data.has_system:
            return "no system metrics were recorded (ProfilerConfig.system_interval_ms is None, or psutil is missing)"
        if self.requires == "gpu" and data.complete and not data.has_gpus:
            notes = [n.removeprefix("no GPU metrics: ") for n in data.notes() if "GPU" in n]
            return "no GPU series in this run" + (f": {notes[0]}" if notes else "")
        if self.requires == "steps" and data.complete and not data.has_steps:
            return "no step timeline in this run (ProfilerConfig.step_phases=False, or no hook step was seen)"
        return None

    def check(self, trial: Any, step: int) -> list[Finding]:
        """Tensor steps say nothing to a profiler rule: the work is in `poll` and `finish`."""
        return []

    def check_columns(self, trial: Any, steps: Any) -> int:
        """The runner's fast path (`mldbg.rules.columns`): `check` has nothing to do at any step."""
        return len(steps)

    def poll(self, trial: Any, now: float | None = None) -> list[Finding]:
        """The runner calls this on every pass: evaluate again when new chunks arrived."""
        data = profiler_data(trial)
        if data.version == self._version:
            return []
        self._version = data.version
        return self._run(data, final=data.complete)

    def finish(self, trial: Any) -> list[Finding]:
        data = profiler_data(trial, max_age=0.0)
        self._version = data.version
        self._unchecked = self.missing(data)
        return self._run(data, final=True)

    def unchecked(self) -> str | None:
        """After `finish`: why the rule could not run (no profiler data, no GPU series)."""
        return self._unchecked

    def run(self, data: ProfilerData) -> list[Finding]:
        """Evaluate a complete run's data directly (the report does this)."""
        return self._run(data, final=True)

    def _run(self, data: ProfilerData, final: bool) -> list[Finding]:
        if self.missing(data) is not None:
            return []
        out = []
        for key, finding in self.evaluate(data, final):
            if key not in self._emitted:
                self._emitted.add(key)
                out.append(finding)
        return out

    def evaluate(self, data: ProfilerData, final: bool) -> Iterable[tuple[Any, Finding]]:
        raise NotImplementedError

    def chart(self, data: ProfilerData, t0: float) -> str | None:
        """The rule's chart in the profiler report: an HTML fragment (inline SVG, drawn with
        `mldbg.rules.profiler.svg`) of the series it judges, with its thresholds; times in
        seconds since `t0`. None: no chart."""
        return None

    # helpers ------------------------------------------------------------------------------
    def make(
        self,
        data: ProfilerData,
        message: str,
        *,
        t: float | None = None,
        step: int | None = None,
        mode: int | None = None,
        series: Iterable[str] = (),
        suggestion: str | None = None,
        worker: str | None = None,
    ) -> Finding:
        """A finding at wall-clock time `t` (mapped to the step then running) or at `step`."""
        if step is None:
            step, mode = data.step_at(t, worker) if t is not None else (0, None)
        return Finding(
            rule=self.name,
            step=int(step),
            mode=Mode(mode).name if mode is not None else None,
            message=message,
            tensors=list(series),
            suggestion=self.suggestion if suggestion is None else suggestion,
            worker=worker,
            severity=self.severity,
        )

    def after_warmup(self, data: ProfilerData, sys: SystemSeries, warmup_steps: int = 0) -> SystemSeries:
        """The samples after initialization: from the first training step (the end of the
        first `warmup_steps` of them), and at most `patience` samples in."""
        patience = int(getattr(self, "patience", 0) or 0)
        if not len(sys):
            return sys
        cut = float(sys.time[patience]) if patience < len(sys) else float("inf")
        first = data.training_start(warmup_steps)
        if first is not None:
            cut = min(cut, first)
        return sys.where(sys.time >= cut)


def fmt_pct(x: float) -> str:
    return "n/a" if not np.isfinite(x) else f"{x:.0f}%"


def fmt_s(x: float) -> str:
    if not np.isfinite(x):
        return "n/a"
    if x < 1e-3:
        return f"{x * 1e6:.0f} us"
    if x < 1:
        return f"{x * 1e3:.1f} ms"
    if x < 120:
        return f"{x:.1f} s"
    return f"{x / 60:.1f} min"
