"""train_in_eval_mode: the model (or part of it) trains in eval mode."""

from __future__ import annotations

import math

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, quiet_prefix
from mldbg.rules.view import TrialView

KINDS = {"dropout": "Dropout", "norm": "BatchNorm/InstanceNorm", "functional": "functional dropout"}


@register
class TrainInEvalMode(Rule):
    """Training steps run with the model, or some of its Dropout / BatchNorm modules, in eval
    mode (`model.eval()` left on after validation): dropout is off and BatchNorm normalizes
    with its running statistics instead of the batch's, so the model trains as it would be
    evaluated and its running statistics stop following the data.

    Reads what the PyTorch two-line hook records at statistics steps: `module_training/dropout`
    and `module_training/norm` (`sum`: modules in training mode, `count`: modules), and
    `module_training/functional` (the `training` flags of functional dropout calls,
    `F.dropout(x, p, self.training)`, where no Dropout module shows the mode), counting
    only modules with trainable parameters around them (a frozen backbone kept in eval on
    purpose is left out), and `optimizer_step` at steps recorded as EVAL or PREDICT: the hook
    follows `model.training`, so an optimizer that steps while the model is in eval mode shows
    up there, when the model has such modules to train (a model without any, or a linear
    probe whose Dropout and BatchNorm sit in a frozen backbone, trains the same in eval mode).
    Fires after `patience` such steps in a row; more than `threshold` (a share) of the modules
    must be in eval mode. An evaluation forward between two such training forwards (train,
    validate, train... each epoch) neither extends nor resets the streak: it says nothing of
    the mode the model trains in. A model trained through a part of it called on its own
    (DEC's encoder, after the whole autoencoder's pretraining) has that part's forwards
    recorded as its own, in the part's mode (`mldbg.torch.Hook`): an encoder left in eval
    mode trains in EVAL steps.

    Modules in eval mode while the model itself is in training mode were put there on purpose:
    `model.train()` sets every module, so only a call on the module (`freeze_bn_stats` in
    quantization-aware training, a detector fine-tuned with frozen BatchNorm,
    `model.train(); backbone.apply(set_bn_eval)`) leaves one in eval under a model in train().
    The bug is `model.eval()` never undone: the model's own flag off too. Where the hook
    records that flag (`module_training/model`, the PyTorch hook) a TRAIN step whose model is
    in training mode is healthy whatever its modules' flags; where it does not (older runs,
    other frameworks), the modules' flags are judged alone.

    Without those statistics (weights saved raw, e.g. everything every 5 steps), the same bug
    shows as weights that change between two saved EVAL (or PREDICT) steps with only steps of
    that mode between them (the global step advanced as much as the mode's step): nothing but
    an optimizer changes a model's weights, and no TRAIN step ran. Fires at `patience` such
    pairs in a row.
    """

    patience: int = 2
    threshold: float = 0.0

    def reset(self) -> None:
        super().reset()
        self._streak = 0  # TRAIN statistics steps in a row with modules in eval mode
        self._outside = 0  # EVAL/PREDICT steps in a row in which an optimizer stepped
        self._first: int | None = None
        # mode -> (step, mode step, a fixed subsample of each weight) at its last saved raw step
        self._weights: dict[Mode, tuple[int, int, dict[str, np.ndarray]]] = {}
        self._moved = 0  # such pairs in a row in which weights changed

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`): the saved counts of all `steps` read as
        columns at once (no lookup per step of the steps without a record), the streaks
        counted as `check` counts them, up to the first step that fires or whose record holds
        a NaN where a count should be (`check` reads those)."""
        n = len(steps)
        modes, _ = trial.columns.modes(steps)
        unsure = np.zeros(n, dtype=bool)

        def column(name: str, key: str) -> np.ndarray:
            """The saved statistic (NaN where none); a NaN saved in a record is `check`'s."""
            over = Over(trial, name, steps)
            values = over.stat(key)
            cols = trial.columns.tensor(name)
            if cols is not None and cols.statistic(key) is not None:
                unsure[:] |= over.present & np.isnan(values)
            return values

        total = np.zeros(n)
        in_eval = np.zeros(n)
        relevant = np.zeros(n)
        for kind in KINDS:
            on, count = column(f"module_training/{kind}", "sum"), column(f"module_training/{kind}", "count")
            valid = np.isfinite(on) & np.isfinite(count)
            total += np.where(valid, np.trunc(np.where(valid, count, 0.0)), 0.0)
            with np.errstate(invalid="ignore"):
                off = valid & (count - on > 0)
            in_eval += np.where(off, np.trunc(np.where(off, count - on, 0.0)), 0.0)
            relevant += np.where(np.isnan(count), 0.0, count)
        stepped = column("optimizer_step", "sum")
        root_on, root_count = column("module_training/model", "sum"), column("module_training/model", "count")
        with np.errstate(invalid="ignore"):
            root_training = np.isfinite(root_on) & np.isfinite(root_count) & (root_on >= root_count)
        with np.errstate(invalid="ignore", divide="ignore"):
            bad = (in_eval / np.where(total > 0, total, 1.0) > self.threshold) & ~root_training
            outside = (stepped > 0) & (relevant > 0)
        train = modes == int(Mode.TRAIN)
        weights = trial.names("weights")
        if weights:  # raw weights at an EVAL or PREDICT step: check() compares them
            n = min(n, quiet_prefix(~train & Over(trial, weights[0], steps).raw))
        judged = total > 0
        streak, out, first = self._streak, self._outside, self._first
        fired_modules, fired_optimizer = "modules" in self._fired, "optimizer" in self._fired
        k = n
        for i, (is_train, is_judged, is_bad, is_out, doubt) in enumerate(
            zip(
                train[:n].tolist(),
                judged[:n].tolist(),
                bad[:n].tolist(),
                outside[:n].tolist(),
                unsure[:n].tolist(),
                strict=True,
            )
        ):
            if doubt:
                k = i
                break
            if is_train:
                new_out = 0
                new_streak = streak
                if is_judged:
                    new_streak = streak + 1 if is_bad else 0
                new_first = int(steps[i]) if is_judged and new_streak == 1 else first
                if new_streak >= self.patience and not fired_modules and is_judged:
                    k = i
                    break
            else:
                new_streak = streak
                new_out = out + 1 if is_out else out  # an evaluation forward says nothing
                new_first = int(steps[i]) if is_out and new_out == 1 else first
                if is_out and new_out >= self.patience and not fired_optimizer:
                    k = i
                    break
            streak, out, first = new_streak, new_out, new_first
        self._streak, self._outside, self._first = streak, out, first
        return k

    def check(self, trial: TrialView, step: int) -> Finding | None:
        mode = trial.mode(step)
        if mode == Mode.TRAIN:
            self._outside = 0
            off: list[str] = []
            total = in_eval = 0
            for kind, label in KINDS.items():
                name = f"module_training/{kind}"
                on = trial.saved_statistic(name, step, "sum")
                count = trial.saved_statistic(name, step, "count")
                if on is None or count is None or not (math.isfinite(on) and math.isfinite(count)):
                    continue
                total += int(count)
                if count - on > 0:
                    in_eval += int(count - on)
                    off.append(f"{int(count - on)} of {int(count)} {label}")
            if not total:
                return None
            root_on = trial.saved_statistic("module_training/model", step, "sum")
            root_count = trial.saved_statistic("module_training/model", step, "count")
            root_training = (
                root_on is not None and root_count is not None and math.isfinite(root_on + root_count)
                and root_on >= root_count
            )  # fmt: skip
            if in_eval / total > self.threshold and not root_training:
                self._streak += 1
                self._first = step if self._streak == 1 else self._first
            else:
                self._streak = 0
            if self._streak < self.patience or not self.first("modules"):
                return None
            return self.finding(
                trial, step,
                f"{', '.join(off)} modules were in eval mode at {self._streak} training steps in a row "
                f"(steps {self._first}-{step}): dropout off, BatchNorm on running statistics while training",
                tensors=[f"module_training/{k}" for k in KINDS if trial.has_tensor(f"module_training/{k}")],
                suggestion="Call model.train() at the start of every training epoch (after validation "
                "switched the model to eval); to keep a part of the model in eval on purpose, freeze its "
                "parameters (requires_grad=False) too.",
            )  # fmt: skip
        moved = self._moved_in(trial, step, mode)
        if moved is not None:
            return moved
        stepped = trial.saved_statistic("optimizer_step", step, "sum")
        counts = [trial.saved_statistic(f"module_training/{k}", step, "count") for k in KINDS]
        if all(c is None or math.isnan(c) for c in counts):
            return None  # not a statistics step: the streak counts statistics steps, gaps say nothing
        relevant = sum(c for c in counts if c is not None and not math.isnan(c))
        if stepped is None or not stepped > 0 or not relevant > 0:
            # an evaluation forward (no optimizer step) between two training forwards in eval
            # mode says nothing of the training's mode (train, validate, train... each epoch);
            # without Dropout or BatchNorm to train, eval mode changes nothing
            return None
        self._outside += 1
        self._first = step if self._outside == 1 else self._first
        if self._outside < self.patience or not self.first("optimizer"):
            return None
        return self.finding(
            trial, step,
            f"the optimizer stepped at {self._outside} steps in a row recorded as {mode.name} (steps "
            f"{self._first}-{step}): the model was in eval mode (model.training False) while it trained",
            tensors=["optimizer_step"],
            suggestion="Call model.train() before the training loop resumes after validation (eval mode "
            "turns dropout off and freezes BatchNorm's statistics), or hook.set_mode(mldbg.Mode.TRAIN) if "
            "eval mode during training is intended.",
        )  # fmt: skip

    def _moved_in(self, trial: TrialView, step: int, mode: Mode) -> Finding | None:
        """Weights saved raw at this EVAL/PREDICT step that differ from the last saved step of
        the mode, with only steps of that mode between (see the class doc)."""
        now: dict[str, np.ndarray] = {}
        for name in trial.names("weights", step=step):
            raw = trial.raw(name, step)
            if raw is None:
                continue
            flat = np.asarray(raw, dtype=np.float64).reshape(-1)
            now[name] = (
                flat[np.linspace(0, flat.size - 1, 4096).astype(np.int64)] if flat.size > 4096 else flat
            )
        if not now:
            return None
        mode_step = trial.mode_step(step)
        last = self._weights.get(mode)
        self._weights[mode] = (step, mode_step, now)
        if last is None or step - last[0] != mode_step - last[1]:
            return None  # another mode's steps ran between: training may have changed them
        changed = [
            n for n, v in now.items()
            if n in last[2] and last[2][n].shape == v.shape and not np.array_equal(v, last[2][n], equal_nan=True)
        ]  # fmt: skip
        self._moved = self._moved + 1 if changed else 0
        self._first = step if self._moved == 1 else self._first
        if self._moved < self.patience or not self.first("optimizer"):
            return None
        return self.finding(
            trial, step,
            f"{len(changed)} of {len(now)} weights changed between saved {mode.name} steps with no training step "
            f"between them, at {self._moved} such steps in a row ({self._first}-{step}): the model trained while "
            "in eval mode (model.training False; the hook follows it)",
            tensors=changed[:20],
            suggestion="Call model.train() before the training loop resumes after validation (eval mode "
            "turns dropout off and freezes BatchNorm's statistics), or hook.set_mode(mldbg.Mode.TRAIN) if "
            "eval mode during training is intended.",
        )  # fmt: skip
