"""What `diagnose` reads from the run itself to tell causes apart: never a finding.

Findings say what is wrong; several causes can explain the same finding (ReLUs die from a
negative bias init or from a learning rate so high that one step pushes every pre-activation
below zero). A few plain facts of the run, read through the trial's public API and bounded in
cost (the first saved training steps, two windows of the loss), decide between them:

- `loss_jump`: the training loss rose far above its first value within its first saved steps
  (or became NaN/inf there): the mark of a step far too large;
- `loss_rise`: the training loss ends well above where it started;
- `saturating`: the model's activations are sigmoid/tanh (no ReLU), where vanishing gradients
  come from the activation rather than from the init or dead units;
- `weights`: the parameter names, to tell a weight that is all zeros (the init) from a
  gradient or an output that is;
- `growth(tensors, step)`: how much a weight's norm changed at a step (a large update ratio
  grows the norm; a tiny one does not);
- `first_step`: the first saved training step. What is true there is true before any update:
  non-finite values there are not the learning rate's doing (`numerical_instability`), a
  condition that holds there can be the init's, one that appears only later cannot;
- `dead_at_start(tensors)`: whether ReLU layers were (mostly) dead at their first saved step,
  before any update (the init killed them), or alive there (updates killed them later);
- `init_at_start()`: whether poor_weight_initialization's test holds at the first saved
  training step alone, before any update (an init fault shows there; a gain or gradient that
  leaves its band only after updates is the updates' doing);
- `blowup`: an update moved a weight by half its size or more and left it with a gain that
  explodes the signal (`updates.blown_weight`, the test dead_relu and
  poor_weight_initialization use): steps far too large, whatever else the findings blame;
- `at_prior`: the training loss fell from its start to the entropy of the labels' class
  distribution and stays there: the model learned which classes are common (the optimizer
  works) and nothing from the inputs, as when labels do not belong to their inputs;
- `unmoved(tensors, step)`: whether the parameters of gradient tensors never changed from
  the first saved step to `step` (the optimizer does not step them).

A fact never makes a diagnosis on its own: it only weighs between the causes that could explain
the findings a rule made, and adds to a diagnosis's confidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.rules.labels import class_prior

EARLY = 20  # saved training steps that count as the start of training
JUMP = 3.0  # how many times its first value the loss's level must reach for a jump
JUMP_HELD = 5  # saved values from the peak on whose median is that level
MAX_LOSSES = 4  # loss tensors looked at
# a ReLU layer's first saved step tells dead from alive when it holds this many samples: a
# unit active for a share p of the inputs is silent on all 16 with probability (1 - p)^16,
# under 1% for p >= 25%; and the layer is dead when more than half of its units are silent
DEAD_MIN_SAMPLES = 16
DEAD_SHARE = 0.5


@dataclass(frozen=True)
class Fact:
    """One observation about the run: a sentence with its numbers, and how strongly (0-1) it
    speaks for the cause it supports."""

    text: str
    strength: float


@dataclass
class RunFacts:
    """The facts of one run (see the module doc); `RunFacts()` knows nothing."""

    loss_jump: Fact | None = None
    loss_rise: Fact | None = None
    saturating: bool = False
    weights: frozenset[str] = frozenset()
    first_step: int | None = None
    at_prior: Fact | None = None
    blowup: Fact | None = None
    dead_init: Fact | None = None  # a ReLU layer dead at its first saved step (`dead_at_start`)
    _trial: Any = field(default=None, repr=False, compare=False)
    _growth: dict[tuple[str, int], float | None] = field(default_factory=dict, repr=False, compare=False)
    _init: list[bool | None] = field(default_factory=list, repr=False, compare=False)
    _dead: dict[str, float | None] = field(default_factory=dict, repr=False, compare=False)
    _moved: dict[tuple[str, int], bool | None] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, trial: Any) -> RunFacts:
        """The facts of `trial` (a `mldbg.trial.Trial`); what cannot be read stays unknown."""
        try:
            colls = trial.collections()
        except Exception:
            return cls()
        names = lambda c: colls.get(c) or ()  # noqa: E731
        facts = cls(
            saturating=bool(names("sigmoid_activations") or names("tanh_activations"))
            and not names("relu_activations"),
            weights=frozenset(names("weights")) | frozenset(names("biases")),
            _trial=trial,
        )
        try:
            # the trial's sorted array where it has one: not a list of 10^6 ints for the first
            of_mode = getattr(trial, "_sorted_steps", None)
            train_steps = of_mode(Mode.TRAIN) if of_mode is not None else trial.steps(mode=Mode.TRAIN)
            facts.first_step = int(train_steps[0]) if len(train_steps) else None
        except Exception:
            pass
        facts.blowup = _blowup(trial)
        labels = _label_entropy(trial, list(names("labels")))
        for name in list(names("losses"))[:MAX_LOSSES]:
            try:
                values = _train_values(trial, name)
            except Exception:
                continue
            prior = _at_prior(name, values, labels) if labels is not None else None
            if prior is not None and facts.at_prior is None:
                facts.at_prior = prior
            jump, rise = _jump(name, values), _rise(name, values)
            if jump is not None and (facts.loss_jump is None or jump.strength > facts.loss_jump.strength):
                facts.loss_jump = jump
            if rise is not None and (facts.loss_rise is None or rise.strength > facts.loss_rise.strength):
                facts.loss_rise = rise
        return facts

    def growth(self, tensors: list[str], step: int) -> float | None:
        """The largest factor by which the norm of one of `tensors` (parameters) changed from
        its previous saved step to `step` (>= 1: grown or shrunk alike); None when unknown."""
        best = None
        for name in tensors:
            if name not in self.weights or self._trial is None:
                continue
            key = (name, step)
            if key not in self._growth:
                try:
                    self._growth[key] = _norm_change(self._trial, name, step)
                except Exception:  # unreadable (damaged, not saved): unknown, as without the run
                    self._growth[key] = None
            g = self._growth[key]
            if g is not None:
                best = g if best is None else max(best, g)
        return best

    def at_start(self, step: int) -> bool:
        """`step` is the first saved training step: nothing was updated before it."""
        return self.first_step is not None and step <= self.first_step

    def init_at_start(self) -> bool | None:
        """Whether poor_weight_initialization, judging the first saved training step alone
        (patience 1), fires there: what it blames was there before any update. None: unknown."""
        if not self._init:
            self._init.append(_init_at_start(self._trial, self.first_step))
        return self._init[0]

    def dead_at_start(self, tensors: list[str]) -> bool | None:
        """True when one of the ReLU `tensors` had more than half of its units silent on every
        sample of its first saved step (before any update: the init killed them), False when
        all were alive there, None when unknown (too few samples, not saved)."""
        shares = []
        for name in tensors:
            if name not in self._dead:
                try:
                    got = _dead_share(self._trial, name) if self._trial is not None else None
                except Exception:  # unreadable: unknown, as without the run
                    got = None
                self._dead[name] = None if got is None else got[0]
                if got is not None and got[0] > DEAD_SHARE and self.dead_init is None:
                    self.dead_init = Fact(
                        f"{got[0]:.0%} of the units of the ReLU layer {name} were silent on all {got[1]} "
                        f"samples of its first saved step {got[2]}, before any update: the "
                        "initialization killed them",
                        0.8,
                    )
            shares.append(self._dead[name])
        known = [s for s in shares if s is not None]
        if not known:
            return None
        if any(s > DEAD_SHARE for s in known):
            return True
        return False if len(known) == len(shares) else None

    def unmoved(self, tensors: list[str], step: int) -> bool | None:
        """True when the parameter of every gradient in `tensors` (`gradient/<param>`) has
        exactly the norm at `step` it had at its first saved step: the optimizer never moved
        it; False when one moved; None when unknown (not parameters, not saved)."""
        params = [t.removeprefix("gradient/") for t in tensors]
        params = [p for p in params if p in self.weights]
        if not params or self._trial is None:
            return None
        out = []
        for name in params:
            key = (name, step)
            if key not in self._moved:
                try:
                    self._moved[key] = _moved(self._trial, name, step)
                except Exception:
                    self._moved[key] = None
            out.append(self._moved[key])
        if any(m for m in out):
            return False
        return True if all(m is False for m in out) else None


def _init_at_start(trial: Any, first: int | None) -> bool | None:
    if trial is None or first is None:
        return None
    import warnings

    from mldbg.rules.builtin.poor_weight_initialization import PoorWeightInitialization
    from mldbg.rules.runner import check

    try:
        weights = trial.collections().get("weights") or ()
        if not any(first in trial.tensor(w).steps() for w in weights):
            return None  # nothing to judge at the first step: unknown, not "in band"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rule = PoorWeightInitialization(patience=1, steps=first + 1)
            return bool(check(trial, [rule], start_step=first, end_step=first + 1))
    except Exception:
        return None


def _dead_share(trial: Any, name: str) -> tuple[float, int, int] | None:
    """The share of `name`'s units active in no sample of its first saved training step, the
    samples and the step."""
    from mldbg.rules.builtin.dead_relu import _activity
    from mldbg.rules.view import TrialView

    steps = trial.tensor(name).steps(mode=Mode.TRAIN)
    if not steps:
        return None
    got = _activity(TrialView(trial), name, steps[0])
    if got is None:
        return None
    counts, samples = got
    if samples < DEAD_MIN_SAMPLES or not counts.size:
        return None
    return float(np.mean(counts == 0)), int(samples), int(steps[0])


def _moved(trial: Any, name: str, step: int) -> bool | None:
    """Whether parameter `name`'s norm changed from its first saved step to its last saved
    step up to `step` (relative 1e-6: any optimizer step moves it by far more)."""
    tensor = trial.tensor(name)
    steps = [s for s in tensor.steps() if s <= step]
    if len(steps) < 2:
        return None
    a = tensor.reduction_value(steps[0], "l2")
    b = tensor.reduction_value(steps[-1], "l2")
    if not (math.isfinite(a) and math.isfinite(b)):
        return True if math.isfinite(a) != math.isfinite(b) else None
    return abs(b - a) > 1e-6 * max(abs(a), 1e-30)


def _train_values(trial: Any, name: str) -> tuple[list[int], np.ndarray]:
    """(training steps, values) of a scalar loss: the first `EARLY` and, in a long run, a
    window at its end (enough for both facts without reading a 10^6-step series)."""
    tensor = trial.tensor(name)
    records = getattr(trial, "records", None)
    if records is not None:  # `tensor.steps(mode=TRAIN)` as an array: no list of 10^6 ints
        own = records(name, mode=Mode.TRAIN).mode_step
        every = own if len(own) < 2 or bool((own[1:] > own[:-1]).all()) else np.unique(own)
    else:
        every = np.asarray(tensor.steps(mode=Mode.TRAIN), dtype=np.int64)
    if len(every) > 4 * EARLY:
        w = max(EARLY, len(every) // 10)
        w = min(w, 1000)
        # the start holds what `_jump` reads past its EARLY values too
        steps = every[: max(EARLY + JUMP_HELD, w)].tolist() + every[-w:].tolist()
    else:
        steps = every.tolist()
    values = []
    for s in steps:
        v = np.asarray(tensor.value(s, mode=Mode.TRAIN), dtype=np.float64)
        values.append(float(v.mean()) if v.size else math.nan)
    return steps, np.asarray(values)


def _jump(name: str, series: tuple[list[int], np.ndarray]) -> Fact | None:
    """The training loss's level rose to many times its first value within its first saved
    steps: its peak at least `JUMP` x the first value, and the median of the `JUMP_HELD` saved
    values from the peak on too (a value that is not finite counts as high). One batch far
    above the rest is the batch noise of a heavy-tailed loss (a regression on turbulence data
    logs 0.02, 0.006, 0.01, 0.22, 0.02 at its first steps, and trains well), not steps too
    large: these hold the loss up (2.3 -> 40,000, 9,000, 3,000, ...) or end it in NaN."""
    steps, values = series
    early = values[:EARLY]
    finite = early[np.isfinite(early)]
    if len(early) < 2 or not len(finite) or not np.isfinite(early[0]) or early[0] <= 0 or finite.min() < 0:
        return None  # a loss that can be negative (a log-likelihood, a GAN's) has no ratio
    first = float(early[0])
    bad = np.flatnonzero(~np.isfinite(early))
    if len(bad):
        return Fact(
            f"the training loss {name} went from {first:.4g} to {early[bad[0]]} by training step {steps[bad[0]]}",
            0.95,
        )
    peak = int(np.argmax(early))
    ratio = float(early[peak]) / first
    held = values[peak : peak + JUMP_HELD]
    if ratio < JUMP or float(np.median(np.where(np.isfinite(held), held, np.inf))) < JUMP * first:
        return None
    return Fact(
        f"the training loss {name} jumped {ratio:.3g}x at its start ({first:.4g} at training step "
        f"{steps[0]} -> {early[peak]:.4g} at training step {steps[peak]})",
        round(min(0.95, 0.9 * math.log10(ratio)), 2),
    )


MAX_BLOWUP_STEPS = 2000  # saved training steps scanned for an update that blew a weight up


def _blowup(trial: Any) -> Fact | None:
    """The first saved training step (of the first `MAX_BLOWUP_STEPS`) where an update blew a
    weight up (`updates.Blowup`)."""
    from mldbg.rules.updates import Blowup
    from mldbg.rules.view import TrialView

    try:
        steps = trial.steps(mode=Mode.TRAIN)
        if not steps:
            return None
        found = Blowup().upto(TrialView(trial), steps[min(len(steps), MAX_BLOWUP_STEPS) - 1])
    except Exception:
        return None
    if found is None:
        return None
    step, name, ratio = found
    return Fact(
        f"the update of training step {step} moved {name} by {ratio:.3g}x its size and left it "
        "amplifying its input's variance 10x or more: steps far too large",
        0.8,
    )


# the loss at the prior: its end within PRIOR_TOLERANCE of the labels' entropy (relative),
# after a start at least PRIOR_DROP above it (the model learned the prior: updates work)
PRIOR_TOLERANCE = 0.03
PRIOR_DROP = 0.15


def _label_entropy(trial: Any, names: list[str]) -> tuple[str, float, int] | None:
    """(labels tensor, entropy in nats of its class distribution over the saved training
    steps, classes) for a run with one labels tensor whose class counts were saved."""
    if len(names) != 1:
        return None
    from mldbg.rules.view import TrialView

    try:
        prior = class_prior(TrialView(trial), names[0])
    except Exception:
        return None
    return None if prior is None else (names[0], prior[0], prior[1])


def _at_prior(name: str, series: tuple[list[int], np.ndarray], labels: tuple[str, float, int]) -> Fact | None:
    """The training loss (a mean cross-entropy in nats) fell from well above the entropy of
    the labels' class distribution to it and ends there: predicting each class at its
    frequency, whatever the input."""
    steps, values = series
    if len(values) < 20 or not np.all(np.isfinite(values)):
        return None
    w = max(10, min(len(values) // 10, 1000))
    tail = values[-w:]
    start, end = float(np.median(values[:5])), float(np.median(tail))
    # the tail's median is noisy by about 1.25 x its robust std / sqrt(w): a loss within three
    # of those (or PRIOR_TOLERANCE, when less noisy) of the entropy is at it
    noise = 1.253 * 1.4826 * float(np.median(np.abs(tail - end))) / math.sqrt(len(tail))
    tensor, h, k = labels
    if h <= 0 or start < (1 + PRIOR_DROP) * h or abs(end - h) > max(PRIOR_TOLERANCE * h, 3 * noise):
        return None
    return Fact(
        f"the training loss {name} fell from {start:.4g} to {end:.4g}, the entropy of the class "
        f"distribution of {tensor} ({h:.4g} nats over {k} classes), and stays there: the model "
        "predicts each class at its frequency and learned nothing from the inputs",
        0.5,
    )


def _rise(name: str, series: tuple[list[int], np.ndarray]) -> Fact | None:
    """The training loss ends well above where it started (medians of its first and last
    tenth): training moves away from the minimum."""
    steps, values = series
    if len(values) < 20:
        return None
    w = max(5, min(len(values) // 10, 1000))
    head, tail = values[:w], values[-w:]
    head, finite_tail = head[np.isfinite(head)], tail[np.isfinite(tail)]
    if len(head) < w // 2 + 1 or np.any(values[np.isfinite(values)] < 0):
        return None
    a = float(np.median(head))
    b = float(np.median(finite_tail)) if len(finite_tail) > w // 2 else math.inf
    if a <= 0:
        return None
    ratio = b / a
    if ratio < 1.5:
        return None
    return Fact(
        f"the training loss {name} ends {ratio:.3g}x above where it started "
        f"(median {a:.4g} over its first {w} saved training steps, {b:.4g} over its last {w})",
        round(min(0.7, 0.3 * math.log2(ratio)), 2),
    )


def _norm_change(trial: Any, name: str, step: int) -> float | None:
    tensor = trial.tensor(name)
    steps = tensor.steps()
    try:
        i = steps.index(step)
    except ValueError:
        i = int(np.searchsorted(steps, step, side="right")) - 1
    if i < 1:
        return None
    a = tensor.reduction_value(steps[i - 1], "l2")
    b = tensor.reduction_value(steps[i], "l2")
    if not (math.isfinite(a) and a > 0):
        return None
    if not math.isfinite(b):
        return math.inf
    if b <= 0:
        return None
    return max(b / a, a / b)
