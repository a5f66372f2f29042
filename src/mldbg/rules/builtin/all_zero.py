"""all_zero: tensors that are (almost) all zeros."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, quiet_prefix, selected_all
from mldbg.rules.select import needed, selected, short_list
from mldbg.rules.updates import Blowup, held, held_at
from mldbg.rules.view import TrialView

_DEFAULT = ("weights", "gradients", "outputs", "relu_activations", "tanh_activations", "sigmoid_activations")


def _all_zero(trial: TrialView, name: str, step: int) -> bool | None:
    """Whether a tensor is exactly 0 everywhere at `step` (None: not known)."""
    share = trial.statistic(name, step, "zero_fraction")
    if isinstance(share, float) and not math.isnan(share):
        return share >= 1.0
    l2 = trial.statistic(name, step, "l2")
    return (l2 == 0.0) if isinstance(l2, float) and not math.isnan(l2) else None


def _bias_of(name: str) -> str | None:
    """The bias beside a weight of the same layer (`fc.weight` -> `fc.bias`, Keras'
    `dense/kernel` -> `dense/bias`, `weight_ih_l0` -> `bias_ih_l0`), None where none is named."""
    for weight in ("weight", "kernel"):
        at = name.rfind(weight)
        if at >= 0 and not any(c.isalpha() for c in name[at + len(weight) :]):
            return name[:at] + "bias" + name[at + len(weight) :]
    return None


def cut_off(trial: TrialView, step: int) -> frozenset[str]:
    """The weight gradients that are exactly 0 at `step` because no gradient reaches their
    layer's output, in a run that shows no dead or zero part: the path from these layers to
    the loss is cut by design for now, not by a broken network.

    For a layer y = W x + b (a Linear, a conv, a normalization's scale and shift) the bias's
    gradient is the sum of dL/dy and the weight's that sum weighted by the input x. A weight
    gradient of 0 beside a bias gradient that is not says the layer's INPUT is 0: dead ReLUs
    below it (a bias at -10, a learning rate too high), a zero-initialized layer: a dead
    network. Both 0 say that dL/dy is 0: nothing downstream passes a gradient back. That is
    either a dead part downstream, which shows itself elsewhere in the run (a trainable weight
    all zeros, a layer output all zeros, a ReLU layer with most units active in no sample, a
    weight gradient 0 beside a bias gradient that is not), or a loss that is flat in this
    part by construction: a KL clamped at a free-nats floor (`torch.max(kl, free_nats)`,
    Dreamer's world model: below the floor the prior gets no gradient), a hinge whose margin
    is met, an MoE expert that got no token, a head whose loss term is masked out at this
    step. So these gradients are returned only when some other gradient of the step is not 0
    (a model that gets no gradient anywhere, `(0 * loss).backward()`, is broken, not cut) and
    none of the signs of a dead network above is present. Read only when a gradient is all
    zeros: nothing on most steps of most runs."""
    known = {
        n: z for n in trial.names("gradients", step=step) if (z := _all_zero(trial, n, step)) is not None
    }
    if not known or all(known.values()):
        return frozenset()
    zero = [n for n, z in known.items() if z and not n.lower().endswith("bias")]
    if not zero:
        return frozenset()
    for name in zero:  # a weight's gradient 0 beside its bias's that is not: its input is dead
        bias = _bias_of(name)
        if bias is not None and known.get(bias) is False:
            return frozenset()
    for name in trial.names("relu_activations", step=step):
        active = trial.statistic(name, step, "unit_active")
        if isinstance(active, np.ndarray) and active.size and float(np.mean(active == 0)) > 0.5:
            return frozenset()
    for name in trial.names("outputs", step=step):
        if _all_zero(trial, name, step):
            return frozenset()
    for name in trial.names("weights", step=step):
        if _all_zero(trial, name, step) and trial.statistic(name, step, "requires_grad") != 0.0:
            return frozenset()
    return frozenset(zero)


@register
class AllZero(Rule):
    """At least `threshold` % of a tensor's values are exactly 0, at `patience` consecutive
    saved steps of its mode.

    All-zero weights never learn distinct features, all-zero gradients mean no signal reaches
    the layer (dead units, a detached graph), an all-zero layer output means everything
    downstream sees nothing. By default weights, gradients and layer outputs are inspected;
    biases (often initialized at 0 on purpose), their gradients (a bias that cancels out has
    none: the last bias of a siamese net under a contrastive loss of a - b), inputs and labels
    are not. `patience` lets a
    layer initialized at zero on purpose (a common trick for the last layer) move first; in a
    run that accumulates gradients (`updates.held`: no parameter moved, within the
    run's own interval between optimizer steps) the steps with no update due do not count
    (the parameters are those of the step before: a zero-initialized head, and the zero
    gradients of the layers before it, stay so until the first step that applies an update).
    Reads the `zero_fraction` statistic (saved, or from the raw tensor); with
    `threshold=100` also saved reductions (max |x| = 0).

    A zero weight whose gradient arrives (all zeros at its previous saved step, not at this
    one) starts its streak over: it is leaving a zero init, the next update moves it. A chain
    of zero-initialized layers (Fixup's: a zero classifier, each residual branch's last
    convolution zero, scalar biases before it) passes no gradient to the layers behind a zero
    one until it has moved: each link holds its parameters at 0 for one more step, then they
    move. A weight still 0 with a gradient from its first saved step (a head the optimizer was
    not given) counts, as do weights no gradient reaches (all weights zero-initialized: a
    network with no signal).

    A weight frozen at the step (`requires_grad` 0, as the hook records it) is not judged: it
    never learns, so zeros in it are a constant, not a symmetric init (a fixed positional
    embedding, ViT-MAE's sin-cos table as some versions of transformers leave it: zeros).
    A weight gradient that is exactly 0 because the path from its layer to the loss is cut
    for now (`cut_off`: its bias's gradient 0 too, other layers learning, no dead or zero part
    anywhere in the run at that step: a KL under its free-nats floor, a hinge whose margin is
    met) does not count either; a dead network (a bias at -10, zero init) shows itself.

    Zeros that began after an update blew a weight up (a weight moved by half its size or
    more, `updates.BLOWN`: a learning rate far too high) are not reported: the
    ReLUs that update killed output zeros and pass zero gradients, and "initialize weights
    randomly" would blame an init that was fine (`dead_relu` and the loss rules report it).
    A tensor that was not all zeros at an earlier saved step and became so is reported with
    advice on what zeroes it during training, not on the init.
    """

    needs = _DEFAULT
    reads = {c: ("zero_fraction", "l2", "unit_active", "requires_grad") for c in _DEFAULT}
    needs_any = True
    collection_names: list[str] | None = None
    tensor_regex: list[str] | None = None
    threshold: float = 100.0
    patience: int = 3
    suggestion = (
        "Initialize weights randomly (not with zeros), check that biases are not negative enough "
        "to silence a ReLU layer (see dead_relu), and that the tensor is connected to the loss "
        "(no .detach() or torch.no_grad() in the training forward)."
    )

    became_suggestion: ClassVar[str] = (
        "The tensor was not zero at first, so the init is not at fault: look at what zeroed it "
        "during training: ReLUs killed by updates too large (see dead_relu: lower the learning rate, "
        "add a warm-up, clip gradients), or a part of the graph detached since (.detach(), "
        "torch.no_grad() in the training forward)."
    )

    def reset(self) -> None:
        super().reset()
        self._streak: dict[tuple[str, Mode], int] = {}  # consecutive saved steps at the threshold
        self._since: dict[tuple[str, Mode], int] = {}  # where that streak began
        self._share: dict[str, float] = {}
        self._blowup = Blowup()
        self._alive: set[str] = set()  # tensors seen below the threshold at some saved step
        self._grad_zero: dict[tuple[str, Mode], bool | None] = {}  # `_gradient_arrived`

    def needed_collections(self) -> tuple[str, ...]:
        return needed(self.collection_names, self.tensor_regex, _DEFAULT)

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading `steps` where no inspected tensor reaches the threshold, from the saved
        `zero_fraction` (or max |x| = 0); their streaks are reset as `check` resets them."""
        interesting = np.zeros(len(steps), dtype=bool)
        cold: list[tuple[str, np.ndarray, np.ndarray]] = []
        still: np.ndarray | None = None  # per step, `held` (computed once a tensor is at 0)
        for name in self._inspected(selected_all(trial, self.collection_names, self.tensor_regex, _DEFAULT)):
            over = Over(trial, name, steps)
            if not over.present.any():
                continue
            share = 100.0 * over.stat("zero_fraction")
            missing = np.isnan(share)
            if self.threshold >= 100:
                m = over.reduction("max", True)
                share = np.where(missing & ~over.raw & ~np.isnan(m), np.where(m == 0, 100.0, 0.0), share)
            interesting |= over.present & ((share >= self.threshold) | (over.raw & missing))
            if (over.present & (share >= self.threshold)).any():
                if still is None:
                    still = held_at(trial, steps)
                interesting |= over.present & still  # check() leaves them out
            cold.append((name, over.present & (share < self.threshold), over.mode))
        n = quiet_prefix(interesting)
        for name, low, modes in cold:
            if low[:n].any():
                self._alive.add(name)
            for m in np.unique(modes[:n][low[:n]]).tolist():
                key = (name, Mode(m))
                self._streak[key] = 0
                self._since.pop(key, None)
        return n

    def check(self, trial: TrialView, step: int) -> Finding | None:
        names = self._inspected(selected(trial, step, self.collection_names, self.tensor_regex, _DEFAULT))
        if not names:
            return None
        mode = trial.mode(step)
        zero = []
        still = mode == Mode.TRAIN and held(trial, step)
        cut: frozenset[str] | None = None  # `cut_off`, read once a gradient is at the threshold
        for name in names:
            share = self._zero_share(trial, name, step)
            if share is None:
                continue
            key = (name, mode)
            if share >= self.threshold and still:
                continue  # accumulating gradients: the parameters had no update to leave 0 by
            if share >= self.threshold and name.startswith("gradient/"):
                if cut is None:
                    cut = cut_off(trial, step)
                if name in cut:  # no gradient reaches the layer by design, for now
                    self._streak[key] = 0
                    self._since.pop(key, None)
                    continue
            elif share >= self.threshold and trial.statistic(name, step, "requires_grad") == 0.0:
                self._streak[key] = 0  # frozen: a constant, it does not learn
                self._since.pop(key, None)
                continue
            elif share >= self.threshold and self._gradient_arrived(trial, key, step):
                self._streak[key] = 0  # behind a zero layer until now: the next update moves it
                self._since.pop(key, None)
                continue
            if share >= self.threshold:
                self._streak[key] = self._streak.get(key, 0) + 1
                self._since.setdefault(key, step)
                self._share[name] = share
                if self._streak[key] >= self.patience:
                    zero.append(name)
            else:
                self._streak[key] = 0
                self._since.pop(key, None)
                self._alive.add(name)
        if zero and (blown := self._blowup.upto(trial, step)) is not None:
            zero = [n for n in zero if self._since[(n, mode)] < blown[0]]  # zeros the blow-up made
        zero = [n for n in zero if self.first(n)]
        if not zero:
            return None
        since = min(self._since[(n, mode)] for n in zero)
        what = "all zeros" if self.threshold >= 100 else f"at least {self.threshold:g}% zeros"
        became = [n for n in zero if n in self._alive]
        return self.finding(
            trial, step,
            f"{len(zero)} tensor{'s are' if len(zero) > 1 else ' is'} {what} at {self.patience} consecutive saved "
            f"steps since step {since}: {short_list(zero)}"
            + (f"; {short_list(became)} {'were' if len(became) > 1 else 'was'} not at first: training zeroed "
               f"{'them' if len(became) > 1 else 'it'}" if became else ""),
            tensors=zero,
            suggestion=self.became_suggestion if len(became) == len(zero) else None,
        )  # fmt: skip

    def _gradient_arrived(self, trial: TrialView, key: tuple[str, Mode], step: int) -> bool:
        """Whether the zero weight `key` gets a gradient at `step` that it did not get at its
        previous saved step (all zeros there): the chain of zero layers before it has opened.
        A weight with a gradient from its first saved step (a head the optimizer was not given,
        still 0) never is excused; nor is a gradient never all zeros."""
        name = key[0]
        if name.startswith("gradient/"):
            return False
        now = _all_zero(trial, "gradient/" + name, step)
        before = self._grad_zero.get(key)
        self._grad_zero[key] = now
        return now is False and before is True

    def _inspected(self, names: list[str]) -> list[str]:
        """The default selection leaves the biases' gradients out (see the class doc)."""
        if self.collection_names is not None or self.tensor_regex is not None:
            return names
        return [n for n in names if not (n.startswith("gradient/") and n.lower().endswith("bias"))]

    def _zero_share(self, trial: TrialView, name: str, step: int) -> float | None:
        share = trial.statistic(name, step, "zero_fraction")
        if isinstance(share, float):
            return None if math.isnan(share) else 100.0 * share  # NaN: an empty tensor
        if self.threshold < 100 or trial.raw(name, step) is not None:
            return None
        try:
            m = trial.reduce(name, step, "max", abs=True)
        except Exception:
            return None
        return 100.0 if m == 0 else 0.0
