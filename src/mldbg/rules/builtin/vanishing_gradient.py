"""vanishing_gradient: gradients too small for the layers to learn."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, quiet_prefix
from mldbg.rules.select import short_list
from mldbg.rules.updates import LR_TOO_HIGH, Blowup, gate_opening, mean_nonzero, over_nonzero
from mldbg.rules.view import TrialView


def loss_scale(trial: TrialView) -> float | None:
    """The run's own gradient unit: |the first saved training loss| (the median over the
    losses saved at the first training step that has one), 1.0 when there is none. Gradients
    scale with the loss: a loss multiplied by c multiplies every gradient by c, and Adam or
    LAMB train exactly as before, so a rule that judges a gradient's size judges it in this
    unit. The first loss, not the current one: a converged loss near 0 does not shrink the
    gradients with it. None while no training loss is saved (the unit is then 1)."""
    firsts = []
    for name in trial.names("losses"):
        train = trial.tensor(name).steps(Mode.TRAIN)
        if train:
            firsts.append((train[0], name))
    if not firsts:
        return None
    first = min(at for at, _ in firsts)
    values = [
        abs(v) for at, name in firsts if at == first
        for v in (trial.statistic(name, at, "mean"),) if isinstance(v, float) and math.isfinite(v) and v != 0
    ]  # fmt: skip
    return float(np.median(values)) if values else None


@register
class VanishingGradient(Rule):
    """The mean absolute value of a weight's gradient stays below `threshold` x the run's
    first training loss (`loss_scale`: 1 when no loss was saved).

    Scale-free: a loss multiplied by 1e-4 (or 1e-6) multiplies every gradient by it, and a
    model trained with Adam learns as well; in units of the run's own first loss its gradients
    are what they were. A cross-entropy starts near ln(classes), so the threshold is the old
    absolute 1e-7 there.

    Such a layer barely moves: with sigmoid or tanh stacked deep, or a bad init, the signal
    shrinks at every layer on its way back, and the first layers stop learning. To see
    through the first, noisy steps the condition must hold at `patience` consecutive saved
    training steps, without the gradient waking up: a gradient that grew `waking` times above
    the smallest of its streak starts the streak over. Modern blocks start their residual
    branches at (nearly) 0 on purpose (ConvNeXt's and CaiT's layer scale 1e-6, ReZero,
    adaLN-Zero in DiT, ResNet's `zero_init_residual`): the branch's weights get (almost) no
    gradient until the scale has moved, which one optimizer step does (Adam moves it by about
    the learning rate), and then their gradients grow by orders of magnitude in a few steps;
    a vanishing gradient (deep sigmoids) stays small. Under a learning-rate warm-up (SGD,
    torchvision's LinearLR from 0.01x) the gate opens slowly, and the gradient behind it
    grows for tens of steps before it crosses the threshold: a gradient exactly 0 at its
    first saved step and above 0 now is such a gate's (`gate_opening`; a sigmoid stack's is
    never exactly 0, a dead ReLU's stays 0), judged after 10 saved steps and then only once
    it is no longer rising (a significant upward trend over its last 10 saved steps that at
    least doubled it).

    And the layer must not be learning: a small gradient is harmless where the optimizer
    rescales it (Adam, AdamW, LAMB divide by its running size: a branch behind a layer scale
    of 1e-6 is updated at full speed). So a weight is reported only where the hook measured
    its change (`delta_l2`, since the previous saved step) to be below `learning_share` of the
    typical weight's, relative to their sizes (the median of delta_l2 / l2 over the weights):
    under SGD a gradient 10^6 times too small moves its layer 10^6 times too little. Where no
    change is measured (raw gradients only) the gradient alone decides, as before; so does a
    gradient 100 times below the threshold (or 0: dead ReLUs), past what an optimizer's eps
    lets it rescale: such a weight may still coast on Adam's momentum, but it learns nothing. Bias gradients are left out unless `include_biases`: a bias followed by
    BatchNorm has a gradient of (almost) zero by construction, which is healthy. Reads the
    `mean_abs` statistic (saved, or from the raw gradient).

    The mean is over the entries that got a gradient (`mean_abs / (1 - zero_fraction)` where
    `zero_fraction` is saved): an embedding's gradient is zero on every row not in the batch,
    so its plain mean shrinks with the vocabulary (a word2vec or language-model embedding of
    10^4 rows touched by 10^2 tokens) while each looked-up row learns at full size. A gradient
    that is zero everywhere stays 0.

    The advice follows the evidence: when the run's ReLU layers are dead (most units active
    in no sample, from `unit_active`), it points at what kills ReLUs (learning rate, init),
    not at "use ReLU"; with sigmoid or tanh layers, at ReLU-family activations; otherwise at
    normalization and init.
    """

    needs = ("gradients",)
    reads = {"gradients": ("mean_abs", "zero_fraction")}
    threshold: float = 1e-7
    patience: int = 3
    waking: float = 10.0
    learning_share: float = 0.01
    include_biases: bool = False
    tensor_regex: list[str] | None = None
    suggestion = (
        "Use ReLU-family activations (ReLU, LeakyReLU, GELU) instead of sigmoid/tanh in deep stacks, "
        "add BatchNorm/LayerNorm or residual connections, and use a variance-preserving init "
        "(torch.nn.init.kaiming_normal_ for ReLU, xavier_uniform_ for tanh)."
    )
    dead_relu_suggestion: ClassVar[str] = (
        "The ReLUs are dead, not saturated: lower the learning rate (a too large step pushes "
        "pre-activations below 0 for good), check the init (biases 0 or slightly positive, "
        "torch.nn.init.kaiming_normal_ weights), normalize the inputs, or use LeakyReLU/GELU so "
        "dead units still pass a gradient."
    )
    died_suggestion: ClassVar[str] = (
        "The ReLUs died during training (they were alive at the first saved step), so the init is "
        "not at fault: updates too large pushed their pre-activations below 0 for good. Lower the "
        "learning rate (or add a warm-up, clip gradients), or use LeakyReLU/GELU."
    )
    generic_suggestion: ClassVar[str] = (
        "Add BatchNorm/LayerNorm or residual connections, use a variance-preserving init "
        "(kaiming_normal_ for ReLU, xavier_uniform_ for tanh/sigmoid), and check the learning rate "
        "and the inputs' scale."
    )

    def reset(self) -> None:
        super().reset()
        self._streak: dict[str, int] = {}  # consecutive saved steps below the threshold
        self._first: dict[str, int] = {}  # where that streak began
        self._least: dict[str, float] = {}  # the smallest mean |g| of that streak
        self._scale: float | None = None  # `loss_scale`, once read
        self._blowup = Blowup()

    def _limit(self, trial: TrialView) -> float:
        if self._scale is None:
            self._scale = loss_scale(trial)
        return self.threshold * (self._scale or 1.0)

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading `steps` where every inspected gradient's saved mean |g| is at or above
        the threshold; their streaks are reset as `check` resets them."""
        exclude = None if self.include_biases else r"(?i)bias"
        interesting = np.zeros(len(steps), dtype=bool)
        known: list[tuple[str, np.ndarray]] = []
        for name in trial.names("gradients", regex=self.tensor_regex, exclude=exclude):
            over = Over(trial, name, steps)
            m = over_nonzero(over.stat("mean_abs"), over.stat("zero_fraction"))
            nan = np.isnan(m)  # not saved (no verdict), or a NaN gradient (resets a streak)
            hot = (m < self._limit(trial)) | (over.raw & nan) | (nan & (self._streak.get(name, 0) > 0))
            interesting |= over.present & hot
            known.append((name, over.present & ~nan))
        n = quiet_prefix(interesting)
        for name, seen in known:
            if seen[:n].any():
                self._streak[name] = 0
                self._first.pop(name, None)
                self._least.pop(name, None)
        return n

    def check(self, trial: TrialView, step: int) -> Finding | None:
        names = trial.names("gradients", regex=self.tensor_regex, step=step,
                            exclude=None if self.include_biases else r"(?i)bias")  # fmt: skip
        if not names:
            return None
        means = {n: m for n in names if isinstance(m := mean_nonzero(trial, n, step), float)}
        if not means:
            return None
        low = []
        limit = self._limit(trial)
        for n, m in means.items():
            if not math.isnan(m) and m < limit:
                least = self._least.get(n)
                if least is not None and m > self.waking * least:  # waking up: a new streak from here
                    self._streak[n] = 0
                    self._first.pop(n, None)
                self._least[n] = m if least is None or n not in self._first else min(least, m)
                self._streak[n] = self._streak.get(n, 0) + 1
                self._first.setdefault(n, step)
                if self._streak[n] >= self.patience:
                    low.append(n)
            else:
                self._streak[n] = 0
                self._first.pop(n, None)
                self._least.pop(n, None)
        low = self._not_learning(trial, step, low, names, means, limit)
        low = [
            n for n in low if n in self._fired or not gate_opening(trial, n, step)
        ]  # waking: judged once it stops
        low = [n for n in low if self.first(n)]
        if not low:
            return None
        low.sort(key=lambda n: means[n])
        finite = [m for m in means.values() if not math.isnan(m)]
        top = max(means, key=lambda n: -1 if math.isnan(means[n]) else means[n])
        since = min(self._first[n] for n in low)
        contrast = (
            f", while the largest ({top}) is {max(finite):.2g}"
            if finite and max(finite) >= limit
            else " (all of them)"
        )
        dead = self._dead_relus(trial, step)
        blown = self._blowup.upto(trial, step)
        if blown is not None and blown[0] <= since:
            suggestion = LR_TOO_HIGH
            contrast += (
                f"; after the update at step {blown[0]} moved {blown[1]} by {blown[2]:.3g}x its size before it "
                "(the learning rate is far too high)"
            )
        elif dead and self._alive_at_first(trial, [n for n, _ in dead]):
            suggestion = self.died_suggestion
            contrast += f"; the ReLUs are dead ({', '.join(f'{n}: {100 * d:.0f}% of units' for n, d in dead[:4])} never active, alive at first)"
        elif dead:
            suggestion = self.dead_relu_suggestion
            contrast += f"; the ReLUs are dead ({', '.join(f'{n}: {100 * d:.0f}% of units' for n, d in dead[:4])} never active)"
        elif trial.has_collection("sigmoid_activations") or trial.has_collection("tanh_activations"):
            suggestion = self.suggestion
        else:
            suggestion = self.generic_suggestion
        return self.finding(
            trial, step,
            f"mean |gradient| below {limit:.3g} ({self.threshold:g} x the first loss {self._scale or 1.0:.3g}) in "
            f"{len(low)} of {len(names)} weight gradients "
            f"({short_list(low)}; smallest {means[low[0]]:.2g}) for {self.patience} saved steps since step {since}"
            f"{contrast}: these layers are not learning",
            tensors=low,
            suggestion=suggestion,
        )  # fmt: skip

    def _not_learning(
        self,
        trial: TrialView,
        step: int,
        low: list[str],
        names: list[str],
        means: dict[str, float],
        limit: float,
    ) -> list[str]:
        """The gradients of `low` whose weights are not learning: moved less than
        `learning_share` of the typical weight's relative change at `step` (all of `low` when no
        change was measured). A gradient 100x below the threshold (or 0: dead ReLUs) is past
        what an adaptive optimizer rescales (its eps, 1e-8): its weight may still coast on
        momentum, but it does not learn, whatever it moved."""
        if all(means[n] < 0.01 * limit for n in low):  # nothing to measure
            return low
        moved: dict[str, float] = {}
        for grad in names:
            weight = grad.removeprefix("gradient/")
            delta = trial.statistic(weight, step, "delta_l2")
            size = trial.statistic(weight, step, "l2")
            if isinstance(delta, float) and isinstance(size, float) and math.isfinite(delta) and size > 0:
                moved[grad] = delta / size
        if not moved:
            return low
        typical = float(np.median(list(moved.values())))
        # `<=`: where the typical weight does not move either (a net dead throughout), neither
        # does a weight that stands still learn
        return [
            n for n in low
            if means[n] < 0.01 * limit or n not in moved or moved[n] <= self.learning_share * typical
        ]  # fmt: skip

    @staticmethod
    def _alive_at_first(trial: TrialView, names: list[str]) -> bool:
        """Whether these ReLU tensors had most units active (no more than half dead) at their
        first saved training step: then training, not the init, killed them."""
        for name in names:
            first = trial.tensor(name).steps(Mode.TRAIN)
            active = trial.statistic(name, first[0], "unit_active") if first else None
            if not isinstance(active, np.ndarray) or not active.size or float(np.mean(active == 0)) > 0.5:
                return False
        return True

    @staticmethod
    def _dead_relus(trial: TrialView, step: int) -> list[tuple[str, float]]:
        """ReLU layers at `step` where more than half of the units were active in no sample
        (`unit_active`, saved or from the raw tensor), with that share."""
        dead = []
        for name in trial.names("relu_activations", step=step):
            active = trial.statistic(name, step, "unit_active")
            if isinstance(active, np.ndarray) and active.size:
                share = float(np.mean(np.asarray(active) == 0))
                if share > 0.5:
                    dead.append((name, share))
        return dead
