"""vanishing_gradient: gradients too small for the layers to learn."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.builtin.all_zero import cut_off
from mldbg.rules.columns import Over, quiet_prefix
from mldbg.rules.select import short_list
from mldbg.rules.stacks import indices
from mldbg.rules.updates import (
    LR_TOO_HIGH,
    Blowup,
    gate_opening,
    last_train_steps,
    mean_nonzero,
    over_nonzero,
)
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
        # its first training step (`tensor.steps(Mode.TRAIN)[0]`), without a list of them all
        train = trial.trial.records(name, mode=Mode.TRAIN).mode_step
        if len(train):
            firsts.append((int(train.min()), name))
    if not firsts:
        return None
    first = min(at for at, _ in firsts)
    values = [
        abs(v) for at, name in firsts if at == first
        for v in (trial.statistic(name, at, "mean"),) if isinstance(v, float) and math.isfinite(v) and v != 0
    ]  # fmt: skip
    return float(np.median(values)) if values else None


def stack_families(names: list[str], shape: Callable[[str], tuple[int, ...] | None]) -> list[list[str]]:
    """The plain stacks among weight gradients `names`: the names that differ only in one
    integer component (`mldbg.rules.stacks.indices`: `hidden.0.weight` .. `hidden.5.weight`, `backbone.0.weight` ..
    `backbone.15.weight`, `Dense_1/kernel` .. `Dense_7/kernel`) and have as many axes, in the
    order of that index (the order they were built in, which is the forward's in a
    ModuleList, a Sequential or a Flax compact module), at least `DEPTH_LAYERS` of them. Where
    their shapes differ the first is left out: it may be the layer fed by the data, whose
    gradient has the data's scale (inputs x 1e-3: a gradient 1000x smaller), not the depth's."""
    groups: dict[tuple[str, int], list[tuple[int, str]]] = {}
    for name in names:
        shp = shape(name)
        if shp is None:
            continue
        for part in indices(name):
            groups.setdefault((part.family, len(shp)), []).append((part.number, name))
    stacks = []
    for members in groups.values():
        if len({i for i, _ in members}) < len(members):
            continue
        stack = [n for _, n in sorted(members)]
        if len({shape(n) for n in stack}) > 1:
            stack = stack[1:]
        if len(stack) >= DEPTH_LAYERS:
            stacks.append(stack)
    return stacks


#: `depth_fall`: the fewest layers of a stack it judges, the least fall over the stack (in
#: decades), the least fall per layer (in decades: 10^0.5 = 3.2x) and the least rank
#: correlation of the gradient's size with the depth
DEPTH_LAYERS = 4
DEPTH_DECADES = 2.0
DEPTH_PER_LAYER = 0.5
DEPTH_RHO = 0.9


def depth_fall(means: list[float]) -> float | None:
    """How many decades the mean |gradient| of a stack's layers (`means`, input side first)
    falls toward the input, where it falls through the whole stack: a least-squares line of
    log10 mean |g| over the layers' positions rising toward the output by at least
    `DEPTH_DECADES` over the stack, with a Spearman correlation of at least `DEPTH_RHO` (the
    layers nearer the input get consistently less). None where it does not (or a mean is 0,
    not finite, or missing).

    In a chain of layers the gradient of layer l's weight is (the signal into l) x (the error
    signal back from the loss to l): the forward scales the first by each layer's gain below
    l, the backward the second by each layer's gain above, so with the same gain everywhere
    every layer's weight gradient has the same size, whatever the init's scale (ReLU or tanh
    stacks, PyTorch's default init). What makes it fall toward the input is a backward gain
    the forward does not share: a sigmoid passes at most 1/4 of the error back (its slope)
    while its output keeps its size (0..1), so 8 sigmoid layers shrink the first layer's
    gradient ~4^8 times, the vanishing gradient itself.

    A healthy stack has one such gain too, milder: PyTorch's default init (weights' variance
    1 / (3 fan_in)) passes back about 1/sqrt(6) of the error through each narrow ReLU layer,
    while the biases (drawn alike) hold the forward signal up, so a deep default-initialized
    ReLU or LeakyReLU MLP falls up to ~2.5x per layer at init (8 layers: 100-400x), and Adam
    trains through it. A sigmoid falls 4x per layer with a unit-gain (Xavier) init and ~7x
    with the default. So the fall must also reach `DEPTH_PER_LAYER` decades per layer (3.2x,
    between the two in log): over a stack of 6 or more layers that bar is above 2 decades."""
    if len(means) < DEPTH_LAYERS or not all(math.isfinite(m) and m > 0 for m in means):
        return None
    y = np.log10(np.asarray(means, dtype=np.float64))
    x = np.arange(len(y), dtype=np.float64)
    # the fitted line's rise is at most (len - 1) x (max - min) / 2 x sum|x - mean| /
    # sum (x - mean)^2 (its slope is sum (x - mean)(y - c) / sum (x - mean)^2 for any c, and
    # |y - c| <= (max - min) / 2 at the middle c): no fit where that cannot reach the bar (a
    # gradient that does not fall: most steps of most runs)
    bar = max(DEPTH_DECADES, DEPTH_PER_LAYER * (len(y) - 1))
    dx = x - x.mean()
    if (len(y) - 1) * float(y.max() - y.min()) / 2 * float(np.abs(dx).sum() / (dx @ dx)) < bar * (1 - 1e-9):
        return None
    slope = float(np.polyfit(x, y, 1)[0])
    fall = slope * (len(y) - 1)
    if fall < bar:
        return None
    ranks = np.argsort(np.argsort(y)).astype(np.float64)
    rho = float(np.corrcoef(x, ranks)[0, 1])
    return fall if rho >= DEPTH_RHO else None


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
    under SGD a gradient 10^6 times too small moves its layer 10^6 times too little. The
    change is summed over the streak's `patience` saved steps (a layer LayerDrop skipped at
    one of them stood still there and learns at the others). Where no
    change is measured (raw gradients only) the gradient alone decides, as before; so does a
    gradient of exactly 0 (dead ReLUs): such a weight may still coast on Adam's momentum, but
    it learns nothing. A gradient far below the threshold but not 0 is judged by its measured
    change too (Adam's eps damps its updates; DeBERTa's relative-position projections and an
    attention's query at std 0.02 get 1e-9 and still move at a quarter of the typical speed).
    Bias gradients are left out unless `include_biases`: a bias followed by BatchNorm has a
    gradient of (almost) zero by construction, which is healthy. So are scalars and vectors
    (fewer than 2 axes longer than 1: a normalization's scale, a layer scale gamma, ReZero's
    alpha, a weight-standardized conv's per-channel gain of shape (C, 1, 1, 1)): they scale a
    layer's output, no layer behind them is starved, and behind a gate opening from 0 they
    get almost no gradient by construction. Reads the `mean_abs` statistic (saved, or from
    the raw gradient).

    The second test needs no threshold: the gradient falling through a plain stack's depth
    (`depth_fall`). The weights of as many axes whose names differ only in one index (a
    ModuleList's `hidden.0.weight` .. `hidden.5.weight`, Flax's `Dense_1/kernel` ..
    `Dense_7/kernel`, a Sequential's convs), at least 4 of them, in the order of that index,
    the first left out where their shapes differ (it may be fed by the data, whose gradient
    has the data's scale): where their mean |g| rises toward the output by at least 100x over
    the stack and 3.2x per layer (a least-squares line of log10 mean |g| over the positions)
    and consistently (Spearman >= 0.9) at `patience` consecutive saved steps, the stack's
    first layers learn from an error signal orders of magnitude weaker than its last,
    whatever the optimizer makes of it. Scale-free (a ratio of gradients at one step). In a
    chain whose layers share one gain the weight gradients have the same size at every depth
    (the forward shrinks the signal into layer l as much as the backward grows the error into
    it): ReLU stacks, residual blocks, transformers stay nearly level (a narrow ReLU MLP at
    PyTorch's default init falls up to ~2.5x per layer, its biases holding the forward up:
    `depth_fall`); a sigmoid passes back at most 1/4 of the error while its output keeps its
    size, so 6 sigmoid layers fall ~1000x or more, with Adam moving every layer at full
    speed (and a zero-initialized readout: muP) so the threshold test is blind to it.

    The mean is over the entries that got a gradient (`mean_abs / (1 - zero_fraction)` where
    `zero_fraction` is saved): an embedding's gradient is zero on every row not in the batch,
    so its plain mean shrinks with the vocabulary (a word2vec or language-model embedding of
    10^4 rows touched by 10^2 tokens) while each looked-up row learns at full size. A gradient
    that is zero everywhere stays 0.

    A gradient exactly 0 by construction is no vanishing gradient: where the path from a layer
    to the loss is cut for now (`all_zero.cut_off`: its weight's and its bias's gradients both
    exactly 0, other layers learning, no dead or zero part in the run at that step: a KL
    clamped at a free-nats floor, `torch.max(kl, free_nats)`, leaves Dreamer's prior without
    gradient while the KL is under it) the layer is not judged at that step (its streak
    starts over), nor does it count in a stack. Dead ReLUs, a zero init, `(0 * loss).backward()`
    still are: they show themselves.

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
        self._shape: dict[str, tuple[int, ...] | None] = {}  # gradient -> its shape (None: unknown)
        self._stacks: dict[tuple[str, ...], list[list[str]]] = {}  # names -> `stack_families`
        self._depth: dict[tuple[str, ...], int] = {}  # stack -> consecutive saved steps it fell
        self._depth_first: dict[tuple[str, ...], int] = {}  # where that streak began

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
        sizes: dict[str, np.ndarray] = {}
        names = self._layers(trial, trial.names("gradients", regex=self.tensor_regex, exclude=exclude))
        for name in names:
            over = Over(trial, name, steps)
            m = over_nonzero(over.stat("mean_abs"), over.stat("zero_fraction"))
            nan = np.isnan(m)  # not saved (no verdict), or a NaN gradient (resets a streak)
            hot = (m < self._limit(trial)) | (over.raw & nan) | (nan & (self._streak.get(name, 0) > 0))
            interesting |= over.present & hot
            known.append((name, over.present & ~nan))
            sizes[name] = np.where(over.present, m, np.nan)  # a raw record's NaN is interesting above
        stacks = self._stack_families(trial, names)
        for stack in stacks:  # the steps where a stack's gradient falls toward its input
            values = np.stack([sizes[s] for s in stack])
            for i in np.flatnonzero(~np.isnan(values).any(axis=0)):
                interesting[i] |= depth_fall(list(values[:, i])) is not None
        n = quiet_prefix(interesting)
        for name, seen in known:
            if seen[:n].any():
                self._streak[name] = 0
                self._first.pop(name, None)
                self._least.pop(name, None)
        for stack in stacks:
            if all(dict(known)[s][:n].any() for s in stack):
                self._depth[tuple(stack)] = 0
                self._depth_first.pop(tuple(stack), None)
        return n

    def _shape_of(self, trial: TrialView, name: str) -> tuple[int, ...] | None:
        """A gradient's shape, from its first saved step (None: unknown). Found once."""
        if name not in self._shape:
            steps = trial.tensor(name).steps()
            layout = trial.layout(name, steps[0]) if steps else None
            self._shape[name] = None if layout is None else tuple(layout[1])
        return self._shape[name]

    def _layers(self, trial: TrialView, names: list[str]) -> list[str]:
        """The gradients of `names` that are a layer's weights: of 2 or more axes longer than 1
        (or of unknown shape). A scalar or a vector (a normalization's scale, a layer scale, a
        weight-standardized conv's per-channel gain of shape (C, 1, 1, 1), ReZero's alpha, a
        skip-init gain) scales what a layer computes, as a bias shifts it: no layer behind it
        learns less when its gradient is small (behind a gate opening from 0, a scale of 1
        gets almost none, by construction)."""
        out = []
        for name in names:
            shape = self._shape_of(trial, name)
            if shape is None or sum(d > 1 for d in shape) >= 2:
                out.append(name)
        return out

    def _stack_families(self, trial: TrialView, names: list[str]) -> list[list[str]]:
        key = tuple(names)
        if key not in self._stacks:
            self._stacks[key] = stack_families(names, lambda n: self._shape_of(trial, n))
        return self._stacks[key]

    def check(self, trial: TrialView, step: int) -> Finding | None:
        names = trial.names("gradients", regex=self.tensor_regex, step=step,
                            exclude=None if self.include_biases else r"(?i)bias")  # fmt: skip
        names = self._layers(trial, names)
        if not names:
            return None
        means = {n: m for n in names if isinstance(m := mean_nonzero(trial, n, step), float)}
        if any(m == 0 for m in means.values()):  # exactly 0: a dead layer, or a path cut by design
            cut = cut_off(trial, step)
            means = {n: m for n, m in means.items() if n not in cut}
            for n in cut:  # not judged here: its streak starts over
                self._streak[n] = 0
                self._first.pop(n, None)
                self._least.pop(n, None)
        if not means:
            return None
        stack = self._falling_stack(trial, step, names, means)
        if stack is not None:
            return stack
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
        `learning_share` of the typical weight's relative change over the last `patience` saved
        training steps up to `step`, the streak's (the sum of each step's change over its size;
        all of `low` when no change was measured). Over the streak, not at its last step alone:
        a layer that LayerDrop skipped in the step before (`encoder_layerdrop`, the default of
        Hugging Face's seq2seq and time-series configs: no gradient, no update) stood still at
        one step and learns at the others. A gradient 100x below the threshold (or 0: dead
        ReLUs) is past what an adaptive optimizer rescales (its eps, 1e-8): its weight may
        still coast on momentum, but it does not learn, whatever it moved."""
        if all(means[n] == 0 for n in low):  # nothing to measure
            return low
        window = last_train_steps(trial, low[0].removeprefix("gradient/"), step, self.patience) or [step]
        moved: dict[str, float] = {}
        for grad in names:
            weight = grad.removeprefix("gradient/")
            total, measured = 0.0, False
            for s in window:
                delta = trial.statistic(weight, s, "delta_l2")
                size = trial.statistic(weight, s, "l2")
                if isinstance(delta, float) and isinstance(size, float) and math.isfinite(delta) and size > 0:
                    total, measured = total + delta / size, True
            if measured:
                moved[grad] = total
        if not moved:
            return low
        typical = float(np.median(list(moved.values())))
        # `<=`: where the typical weight does not move either (a net dead throughout), neither
        # does a weight that stands still learn
        return [
            n for n in low
            if means[n] == 0 or n not in moved or moved[n] <= self.learning_share * typical
        ]  # fmt: skip

    def _falling_stack(
        self, trial: TrialView, step: int, names: list[str], means: dict[str, float]
    ) -> Finding | None:
        """A finding where a plain stack's weight gradients have fallen toward its input
        (`depth_fall`) at `patience` consecutive saved steps; counts the streaks."""
        hit: tuple[list[str], float] | None = None
        for stack in self._stack_families(trial, names):
            key = tuple(stack)
            if not all(n in means for n in stack):
                continue  # not saved here: no verdict
            fall = depth_fall([means[n] for n in stack])
            if fall is None:
                self._depth[key] = 0
                self._depth_first.pop(key, None)
                continue
            self._depth[key] = self._depth.get(key, 0) + 1
            self._depth_first.setdefault(key, step)
            if (
                self._depth[key] >= self.patience
                and (hit is None or fall > hit[1])
                and key not in self._fired
            ):
                hit = (stack, fall)
        if hit is None:
            return None
        stack, fall = hit
        self.first(tuple(stack))
        top = means[stack[-1]]
        starved = [n for n in stack if means[n] < top / 10]
        per_layer = 10 ** (fall / (len(stack) - 1))
        return self.finding(
            trial, step,
            f"the weight gradients of a stack of {len(stack)} layers ({stack[0]} .. {stack[-1]}) fall toward "
            f"its input by {10**fall:.3g}x ({per_layer:.2g}x per layer; {stack[0]}: {means[stack[0]]:.2g}, "
            f"{stack[-1]}: {top:.2g}) at {self._depth[tuple(stack)]} saved steps since step "
            f"{self._depth_first[tuple(stack)]}: the error signal vanishes on its way back, and the "
            "first layers learn from a gradient orders of magnitude weaker than the last",
            tensors=starved,
            suggestion=self.suggestion,
        )  # fmt: skip

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
