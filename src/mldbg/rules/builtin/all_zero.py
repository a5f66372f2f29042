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

    Zeros that began after an update blew a weight up (a weight moved by half its size or
    more, `updates.BLOWN`: a learning rate far too high) are not reported: the
    ReLUs that update killed output zeros and pass zero gradients, and "initialize weights
    randomly" would blame an init that was fine (`dead_relu` and the loss rules report it).
    A tensor that was not all zeros at an earlier saved step and became so is reported with
    advice on what zeroes it during training, not on the init.
    """

    needs = _DEFAULT
    reads = {c: ("zero_fraction",) for c in _DEFAULT}
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
        for name in names:
            share = self._zero_share(trial, name, step)
            if share is None:
                continue
            key = (name, mode)
            if share >= self.threshold and still:
                continue  # accumulating gradients: the parameters had no update to leave 0 by
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
