"""How often a series was saved, and where its line must break: the report's and the
dashboard's charts draw gaps as gaps.

A hook saves statistics every step for the first steps of a run and then more rarely (the
two lines' budget: steps 0-19, then every ~100th on a CPU), or every N steps, or on steps of
its own choice. A line drawn straight across an unsaved stretch looks like a measurement.
Here a series is cut into stretches of a steady spacing; the line joins the points of one
stretch and breaks where the next saved step is farther away than that stretch's own
spacing (a sparser stretch starts there, or a lone point). `Cadence.text` says it in words,
e.g. "every step to 19, then every 100th".

Spacings are counted in the run's own steps of the series' mode (its index among the run's
saved steps of that mode), so evaluation passes between training steps are no gap in a
training curve.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SLACK = 1.5  # a spacing within this factor of a stretch's own is the same cadence (budget jitter)
MAX_STRETCHES = 3  # more stretches than this are said as "then irregularly"


@dataclass
class Stretch:
    """Saved steps `first`..`last` (global steps), `count` of them, `every` run steps apart
    (0 for a lone point)."""

    first: int
    last: int
    count: int
    every: float


@dataclass
class Cadence:
    """`breaks`: the global steps whose point must not be joined to the previous one (a gap
    before them); `stretches`; `text`: the cadence in words."""

    breaks: list[int] = field(default_factory=list)
    stretches: list[Stretch] = field(default_factory=list)
    run_last: int | None = None  # the run's last step of the mode, where the series may stop before

    @property
    def text(self) -> str:
        text = describe(self.stretches)
        last = self.stretches[-1] if self.stretches else None
        if last is not None and self.run_last is not None and self.run_last > last.last + max(last.every, 1):
            if last.count > 1 and not text.endswith(f" to {last.last}"):
                text += f" to {last.last}"
            text += f", none after (the run goes on to {self.run_last})"
        return text

    @property
    def sparse(self) -> bool:
        """Is any stretch saved less often than every step, or a lone point? (Then draw points.)"""
        return any(s.every != 1 for s in self.stretches)


def of_series(trial: Any, steps: Sequence[int]) -> Cadence:
    """The cadence of a series of `trial` saved at global `steps` (sorted, of one mode):
    counted in the steps of that mode the run saved (`trial.steps(mode)`, mode steps), so
    the steps of other modes between them are no gap; breaks and words in global steps."""
    if not len(steps):
        return Cadence()
    mode = trial.mode(steps[0])
    mode_steps = [trial.mode_step(s) for s in steps]
    run_steps = trial.steps(mode)
    everything = trial.steps()
    last = next((s for s in reversed(everything) if trial.mode(s) == mode), None)
    return cadence(mode_steps, run_steps, names=steps, run_last=last)


def cadence(
    steps: Sequence[int],
    run_steps: Sequence[int] | None = None,
    names: Sequence[int] | None = None,
    run_last: int | None = None,
) -> Cadence:
    """The cadence of a series saved at `steps` (sorted), in a run whose saved steps in the
    same count are `run_steps` (sorted; default: every step is one of the run's). `names`: the
    global step of each of `steps`, used in the breaks and the words (default: `steps`);
    `run_last`: the run's last step (a global step; default: the last of `run_steps`)."""
    steps_a = np.asarray(steps, dtype=np.int64)
    if steps_a.size == 0:
        return Cadence()
    if run_steps is None or not len(run_steps):
        pos = steps_a
    else:
        pos = np.searchsorted(np.asarray(run_steps, dtype=np.int64), steps_a)  # index among the run's steps
    if run_last is None and run_steps is not None and len(run_steps):
        run_last = int(run_steps[-1])
    steps_a = steps_a if names is None else np.asarray(names, dtype=np.int64)
    gaps = np.diff(pos)
    out = Cadence(run_last=run_last)
    if gaps.size and (gaps == gaps[0]).all():  # one steady cadence (a loss every step): no loop
        out.stretches.append(Stretch(int(steps_a[0]), int(steps_a[-1]), int(steps_a.size), float(gaps[0])))
        return out
    start = 0  # index of the stretch's first point
    every = 0.0  # its spacing (0: not known yet: one point)
    for i, gap in enumerate(gaps.tolist()):
        if every == 0:
            every = float(gap)
            continue
        if gap > every * SLACK:  # farther than this stretch's cadence: a gap
            out.stretches.append(Stretch(int(steps_a[start]), int(steps_a[i]), i - start + 1, every))
            out.breaks.append(int(steps_a[i + 1]))
            start, every = i + 1, 0.0
        elif gap * SLACK < every:  # denser from here: a new stretch, joined (no gap)
            out.stretches.append(Stretch(int(steps_a[start]), int(steps_a[i]), i - start + 1, every))
            start, every = i, float(gap)
        else:
            n = i - start  # running mean of the stretch's spacings (budget jitter)
            every = (every * n + gap) / (n + 1)
    out.stretches.append(Stretch(int(steps_a[start]), int(steps_a[-1]), int(steps_a.size) - start, every))
    return out


def _every(every: float) -> str:
    n = round(every)
    if n <= 1:
        return "every step"
    word = "about every" if abs(every - n) > 0.05 else "every"
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{word} {n}{suffix}"


def describe(stretches: Sequence[Stretch]) -> str:
    """In words: "every step", "every 10th", "every step to 19, then every 100th", "every step
    to 20, then at step 120"."""
    if not stretches:
        return "not saved"
    if len(stretches) == 1:
        s = stretches[0]
        if s.count == 1:
            return f"at step {s.first} only"
        return _every(s.every) if s.every > 1 else "every step"
    parts = []
    shown = stretches[:MAX_STRETCHES]
    for k, s in enumerate(shown):
        last = k == len(stretches) - 1
        if s.count == 1:
            part = f"at step {s.first}"
        elif s.count == 2 and s.every > 1:
            part = f"at steps {s.first} and {s.last}"
        else:
            part = _every(s.every) + ("" if last else f" to {s.last}")
        parts.append(part if k == 0 else f"then {part}")
    text = ", ".join(parts)
    if len(stretches) > MAX_STRETCHES:
        rest = stretches[MAX_STRETCHES:]
        n = sum(s.count for s in rest)
        text += f", then irregularly ({n} more saved step{'s' if n != 1 else ''} to {rest[-1].last})"
    return text


def with_gaps(xs: Sequence[float], ys: Sequence[float], steps: Sequence[int], breaks: Sequence[int]
              ) -> tuple[list[float], list[float]]:  # fmt: skip
    """`xs`, `ys` with a NaN point before each step of `breaks`: a line drawn through them
    stops at each gap."""
    cut = set(breaks)
    out_x: list[float] = []
    out_y: list[float] = []
    for x, y, s in zip(xs, ys, steps, strict=True):
        if s in cut and out_x:
            out_x.append(x)
            out_y.append(float("nan"))
        out_x.append(x)
        out_y.append(y)
    return out_x, out_y
