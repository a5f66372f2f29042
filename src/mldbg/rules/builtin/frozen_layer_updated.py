"""frozen_layer_updated: a parameter declared frozen changes."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.errors import MldbgError
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, quiet_prefix
from mldbg.rules.select import as_list, short_list
from mldbg.rules.updates import blown_weight
from mldbg.rules.view import TrialView

HELD = "optimizer_frozen/model"  # the frozen parameters the stepping optimizers hold (PyTorch hook)


@register
class FrozenLayerUpdated(Rule):
    """A parameter declared frozen changes between two consecutive training steps.

    Declared frozen: `requires_grad=False` when the hook recorded it (the two-line PyTorch
    hook records each parameter's `requires_grad` with its statistics: 0 when it was frozen at
    every training step since the previous statistics step), or a name matching
    `tensor_regex` (for a freeze that did not take: `model.backbone.requires_grad = False`
    sets an attribute and freezes nothing). Classic causes: freezing in the middle of training
    while the optimizer keeps its momentum (SGD momentum, Adam moments) and the gradients are
    zeroed rather than set to None, so the frozen weights keep moving; weight decay applied to
    every parameter; a parameter left in the optimizer. Each is an optimizer moving a frozen
    parameter it holds: where the PyTorch hook saw the stepping optimizers hold no frozen
    parameter at the step (`optimizer_frozen/model` is 0), a parameter frozen by its flag that
    changed was written by the script itself on purpose (ReLoRA merging its adapters into the frozen base,
    an EMA teacher, a pruning mask), and it is not reported.

    The change is `delta_l2` (|w - w_prev|, from the hook, or computed from raw weights) between
    two saved training steps with the parameter frozen at both and, by the hook's flag, at
    every step between (so a GAN that freezes its discriminator for the generator's step, and
    trains it the next step, is healthy; a name matched by `tensor_regex` is frozen
    throughout); a change above `atol` + `rtol` * |w| fires. The flag is read at the model's
    first forward of the step; a parameter whose gradient the hook saved at the step's
    optimizer step (it saves none for `requires_grad=False`) was thawed for that update and
    trained: not frozen at that step. Alternating optimization does exactly that within one
    step (CycleGAN's `set_requires_grad(netD, False)` for the generators' update, then True
    for the discriminators' own: the hook's step is one update of every model). Buffers (BatchNorm's running
    statistics) are not parameters and do not count: a frozen backbone left in training mode
    updates them, which is PyTorch's documented behaviour (see `train_in_eval_mode`).

    Where no flag was recorded (gradients and weights saved raw, e.g. everything every 5
    steps), a parameter whose saved gradient is exactly zero, or no longer saved while other
    gradients are (the hook saves none for a frozen parameter), at `zero_gradient_steps`
    consecutive saved training steps counts as frozen (`requires_grad_(False)` after a
    backward, with `zero_grad(set_to_none=False)`, leaves a zero gradient the optimizer still
    reads); the change between its last two saved training steps is judged as above. A zero
    gradient is evidence of a freeze only while no update has blown the weights up (a weight
    moved by half its size or more, `updates.BLOWN`) and no ReLU layer is silent
    on the whole batch (`unit_active` all 0): after a learning rate too high, whole layers of
    dead ReLUs pass exactly zero gradients to the weights around them, which nobody froze and
    which momentum or Adam's moments still move. A freeze leaves the layers alive.
    """

    needs = ("weights",)
    reads = {"weights": ("delta_l2", "l2", "requires_grad"), "biases": ("delta_l2", "l2", "requires_grad")}
    tensor_regex: list[str] | None = None
    rtol: float = 0.0
    atol: float = 0.0
    zero_gradient_steps: int = 2

    def reset(self) -> None:
        super().reset()
        self._last: dict[str, tuple[int, bool]] = {}  # per parameter: (its TRAIN mode step, frozen then)
        self._patterns: list[re.Pattern[str]] | None = None
        self._gradients_here: set[str] | None = None
        self._zero: dict[
            str, int
        ] = {}  # per parameter: saved training steps in a row with a zero raw gradient
        self._blown: int | None = None  # the first step where an update blew a weight up
        self._blown_looked = -1  # the last step looked at for it
        self._silent_at: tuple[int, bool] = (-1, False)  # (step, a ReLU layer silent there)

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`): per parameter, its `requires_grad` flag at
        all `steps` at once; a training step where it is frozen, and was at its previous known
        training step, may fire unless its saved `delta_l2` (and `l2`) say it did not move:
        the leading steps before the first such one, with each parameter's last known
        (mode step, frozen) kept as `check` keeps it."""
        if self._patterns is None:
            self._patterns = [re.compile(r) for r in as_list(self.tensor_regex)]
        modes, mode_steps = trial.columns.modes(steps)
        train = modes == int(Mode.TRAIN)
        n = len(steps)
        interesting = np.zeros(n, dtype=bool)
        known_of: list[tuple[str, np.ndarray, np.ndarray]] = []
        unheld = self._unheld(Over(trial, HELD, steps).stat("sum"))
        for name in trial.names(("weights", "biases")):
            over = Over(trial, name, steps)
            declared = any(p.search(name) for p in self._patterns)
            flag = over.stat("requires_grad")
            trained = np.zeros(n, dtype=bool)
            if trial.has_tensor(f"gradient/{name}"):  # check() reads the raw gradients, or their absence
                grad = Over(trial, f"gradient/{name}", steps)
                interesting |= train & ~np.isfinite(flag) & (grad.raw | (over.present & ~grad.present))
                trained = grad.present  # its gradient saved at the step's update: it trained then
            known = train & over.present & (declared | np.isfinite(flag))
            if not known.any():
                continue
            frozen = np.full(n, declared) | ((flag == 0.0) & ~trained)
            idx = np.flatnonzero(known)
            last = self._last.get(name)
            prev = np.empty(len(idx), dtype=bool)
            prev[0] = last is not None and last[1]
            prev[1:] = frozen[idx[:-1]]
            judged = np.zeros(n, dtype=bool)
            judged[idx] = frozen[idx] & prev
            if name not in self._fired and judged.any():
                delta, size = over.stat("delta_l2"), over.stat("l2")
                scale = np.where(np.isfinite(size), size, 0.0)
                with np.errstate(invalid="ignore"):
                    still = np.isfinite(delta) & (delta <= self.atol + self.rtol * scale)
                if self.rtol != 0.0:
                    still &= np.isfinite(size)  # l2 from the raw tensor otherwise: check()'s
                interesting |= judged & ~still & (declared | ~unheld)
            known_of.append((name, known, frozen))
        k = quiet_prefix(interesting)
        for name, known, frozen in known_of:
            idx = np.flatnonzero(known[:k])
            if len(idx):
                self._last[name] = (int(mode_steps[idx[-1]]), bool(frozen[idx[-1]]))
        return k

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN:
            return None
        if self._patterns is None:
            self._patterns = [re.compile(r) for r in as_list(self.tensor_regex)]
        mode_step = trial.mode_step(step)
        moved: list[tuple[str, float, float]] = []
        unheld = self._unheld(trial.saved_statistic(HELD, step, "sum"))
        self._gradients_here = None  # the gradients saved at this step, read once when needed
        for name in trial.names(("weights", "biases"), step=step):
            declared = any(p.search(name) for p in self._patterns)
            flag = trial.saved_statistic(name, step, "requires_grad")
            if not declared and (flag is None or not math.isfinite(flag)):
                flag = self._zero_gradient(trial, name, step)
            elif not declared and flag == 0.0 and self._trained_here(trial, name, step):
                flag = 1.0  # frozen at its forward, thawed for the update (a GAN's discriminator)
            if not declared and flag is None:
                continue  # not known at this step (a fingerprint-only record, a raw run)
            frozen = declared or flag == 0.0
            last = self._last.get(name)
            self._last[name] = (mode_step, frozen)
            if not frozen or last is None or not last[1]:
                continue
            delta = trial.statistic(name, step, "delta_l2")
            size = trial.statistic(name, step, "l2")
            if not isinstance(delta, float) or not math.isfinite(delta):
                continue
            scale = size if isinstance(size, float) and math.isfinite(size) else 0.0
            if delta > self.atol + self.rtol * scale and (declared or not unheld):
                moved.append((name, delta, scale))
        moved = [m for m in moved if self.first(m[0])]
        if not moved:
            return None
        name, delta, scale = max(moved, key=lambda m: m[1] / (m[2] or 1.0))
        why = (
            "matches tensor_regex"
            if any(p.search(name) for p in self._patterns)
            else f"its gradient was exactly 0, or not saved, at {self._zero[name]} saved training steps in a row"
            if name in self._zero
            else "requires_grad=False"
        )
        return self.finding(
            trial, step,
            f"{len(moved)} frozen parameter{'s' if len(moved) > 1 else ''} changed up to training step "
            f"{step} ({short_list([m[0] for m in moved])}): {name} ({why}) moved by "
            f"|dw| = {delta:.3g} (|w| = {scale:.3g})",
            tensors=[m[0] for m in moved],
            suggestion="Leave frozen parameters out of the optimizer (build it from the parameters with "
            "requires_grad=True, or rebuild it after freezing): momentum, Adam's moments and weight decay "
            "move them even with zero gradients; zero gradients with optimizer.zero_grad(set_to_none=True); "
            "freeze with p.requires_grad_(False) on each parameter, not an attribute on the module.",
        )  # fmt: skip

    @staticmethod
    def _unheld(count: Any) -> Any:
        """Whether the hook saw the stepping optimizers hold no frozen parameter (`HELD` is 0;
        an array of counts gives a mask): a parameter frozen by its flag that changed then was
        written by the script itself, as ReLoRA merges its adapters, not moved by an optimizer."""
        return np.asarray(count, dtype=np.float64) == 0.0 if count is not None else np.False_

    def _trained_here(self, trial: TrialView, name: str, step: int) -> bool:
        """Whether the hook saved the parameter's gradient at `step`: it saves one at the
        optimizer's step only for a parameter that requires a gradient then."""
        if self._gradients_here is None:
            self._gradients_here = set(trial.names("gradients", step=step))
        return f"gradient/{name}" in self._gradients_here

    def _silent_layer(self, trial: TrialView, step: int) -> bool:
        """Whether a ReLU layer had no unit active on any sample of the batch at `step`
        (`unit_active`, saved or from the raw tensor): no gradient flows through it, so the
        weights before it and after it get exactly zero gradients that nobody froze."""
        if self._silent_at[0] != step:
            silent = False
            for name in trial.names("relu_activations", step=step):
                active = trial.statistic(name, step, "unit_active")
                if isinstance(active, np.ndarray) and active.size and not np.any(active):
                    silent = True
                    break
            self._silent_at = (step, silent)
        return self._silent_at[1]

    def _blown_by(self, trial: TrialView, step: int) -> bool:
        """Whether an update blew the weights up at a step up to `step` that had raw gradients."""
        if self._blown is None and self._blown_looked != step:
            self._blown_looked = step
            if blown_weight(trial, step) is not None:
                self._blown = step
        return self._blown is not None

    def _zero_gradient(self, trial: TrialView, name: str, step: int) -> float | None:
        """0.0 (frozen) when the parameter's raw gradient was exactly zero, or no longer saved
        while other gradients were (the hook saves none for `requires_grad=False`), at the last
        `zero_gradient_steps` saved training steps; 1.0 when not; None without raw gradients."""
        key = f"gradient/{name}"
        if not trial.has_tensor(key):
            self._zero.pop(name, None)
            return None
        if self._gradients_here is None:
            self._gradients_here = set(trial.names("gradients", step=step))
        if key not in self._gradients_here:
            if not self._gradients_here:  # no gradient saved at this step: nothing known
                return None
            zero = True
        else:
            try:
                grad = trial.raw(key, step)
            except MldbgError:
                grad = None
            if grad is None:
                self._zero.pop(name, None)
                return None
            blown = self._blown_by(trial, step)  # looked at every step with raw gradients
            zero = grad.size > 0 and not np.any(grad) and not blown and not self._silent_layer(trial, step)
        self._zero[name] = self._zero.get(name, 0) + 1 if zero else 0
        return 0.0 if self._zero[name] >= self.zero_gradient_steps else 1.0
