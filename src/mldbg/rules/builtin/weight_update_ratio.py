"""weight_update_ratio: updates far too small or too large for the weights."""

from __future__ import annotations

import math

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.select import gradient_names, short_list
from mldbg.rules.view import TrialView


@register
class WeightUpdateRatio(Rule):
    """|update| / |weight| (L2 norms) between consecutive saved training steps is below
    `small_threshold` or above `large_threshold`, at `patience` consecutive checks.

    A healthy update moves a weight by roughly 1e-4 to 1e-2 of its size per step. Far below,
    training crawls (the learning rate is orders of magnitude too small, or the optimizer
    holds other parameters); far above, it is unstable. `num_steps` checks every n-th saved
    step only. Weights that get no gradient (frozen on purpose, `requires_grad=False`) are
    skipped, and weights near 0 (|w| < `epsilon` per element) have no meaningful ratio. Reads
    raw weights, else the `delta_l2` (|update|) and `l2` statistics a two-line hook records
    every step (exact too); with only reductions saved, only "too large" is checked (from the
    change of the L2 norm, a lower bound of |update|).
    """

    needs = ("weights",)
    reads = {"weights": ("delta_l2", "l2")}
    num_steps: int | None = None
    large_threshold: float = 10.0
    small_threshold: float = 1e-8
    epsilon: float = 1e-9
    patience: int = 3

    def reset(self) -> None:
        super().reset()
        self._prev: dict[str, tuple[int, np.ndarray | float]] = {}  # per weight, its last (step, value or L2)
        self._streak: dict[tuple[str, str], int] = {}  # (weight, "small"/"large") -> checks in a row
        self._ratios: dict[str, float] = {}  # per weight, its last ratio
        self._count = 0  # training steps seen (for `num_steps`)

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN:
            return None
        names = trial.names("weights", step=step)
        if not names:
            return None
        self._count += 1
        if self.num_steps and (self._count - 1) % self.num_steps:
            return None
        grads = gradient_names(trial) if trial.has_collection("gradients") else {}
        has_grads = bool(grads) and bool(trial.names("gradients", step=step))
        small: list[str] = []
        large: list[str] = []
        for name in names:
            raw = trial.raw(name, step)
            delta = None if raw is not None else trial.saved_statistic(name, step, "delta_l2")
            if raw is not None:
                cur: np.ndarray | float = raw.astype(np.float64)
            elif isinstance(l2 := trial.statistic(name, step, "l2"), float):
                cur = l2
            else:
                continue
            prev = self._prev.get(name)
            self._prev[name] = (step, cur)
            if prev is None:
                continue
            if has_grads and (name not in grads or not trial.tensor(grads[name]).has_step(step)):
                continue  # frozen on purpose: no gradient
            old = prev[1]
            if isinstance(delta, float) and math.isfinite(delta) and not isinstance(old, np.ndarray):
                if not math.isfinite(old) or old < self.epsilon:
                    continue
                ratio = delta / (old + self.epsilon)  # |w_t - w_t-1| / |w_t-1|, from the hook
                exact = True
            elif isinstance(cur, np.ndarray) and isinstance(old, np.ndarray) and cur.shape == old.shape:
                wnorm = float(np.linalg.norm(old))
                if wnorm < self.epsilon * math.sqrt(max(1, old.size)) or not math.isfinite(wnorm):
                    continue
                ratio = float(np.linalg.norm(cur - old)) / (wnorm + self.epsilon)
                exact = True
            else:
                o = float(np.linalg.norm(old)) if isinstance(old, np.ndarray) else float(old)
                c = float(np.linalg.norm(cur)) if isinstance(cur, np.ndarray) else float(cur)
                if not (math.isfinite(o) and math.isfinite(c)) or o < self.epsilon:
                    continue
                ratio = abs(c - o) / (o + self.epsilon)
                exact = False
            if not math.isfinite(ratio):
                continue
            self._ratios[name] = ratio
            for kind, hit in (
                ("small", exact and ratio < self.small_threshold),
                ("large", ratio > self.large_threshold),
            ):
                key = (name, kind)
                self._streak[key] = self._streak.get(key, 0) + 1 if hit else 0
                if self._streak[key] >= self.patience:
                    (small if kind == "small" else large).append(name)
        small = [n for n in small if self.first((n, "small"))]
        large = [n for n in large if self.first((n, "large"))]
        if not small and not large:
            return None
        parts, tips = [], []
        if small:
            worst = max(small, key=lambda n: -self._ratios[n])
            parts.append(
                f"updates tiny for {len(small)} weight{'s' if len(small) > 1 else ''} ({short_list(small)}): "
                f"|update|/|weight| = {self._ratios[worst]:.2g} for {worst}, below {self.small_threshold:g}"
            )
            tips.append("raise the learning rate (it may be orders of magnitude too small) and check that "
                        "the optimizer was given the model's parameters")  # fmt: skip
        if large:
            worst = max(large, key=lambda n: self._ratios[n])
            parts.append(
                f"updates huge for {len(large)} weight{'s' if len(large) > 1 else ''} ({short_list(large)}): "
                f"|update|/|weight| = {self._ratios[worst]:.2g} for {worst}, above {self.large_threshold:g}"
            )
            tips.append("lower the learning rate, clip gradients, or use a warm-up")
        return self.finding(
            trial, step,
            "; ".join(parts) + f" for {self.patience} consecutive saved steps up to step {step}",
            tensors=small + large,
            suggestion="; ".join(tips).capitalize() + ".",
        )  # fmt: skip
