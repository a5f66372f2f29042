"""nondeterministic_eval: two evaluations of the same inputs with the same weights differ."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, quiet_prefix
from mldbg.rules.view import TrialView
from mldbg.store.statistics import combined_fingerprint, vector_name

_MERSENNE = (1 << 61) - 1  # `_keys` folds several inputs' keys modulo this prime
NO_GRAD = "no_grad_training"  # forwards with gradients disabled in training mode (the PyTorch hook)


def _key(rows: np.ndarray) -> int | None:
    """The inputs' fingerprint, the key under which their outputs are compared, or None when
    it names no particular inputs: two samples of the batch share a fingerprint (the same
    sample twice). Each sample's fingerprint hashes its values and their positions
    (`statistics.sample_fingerprint`): a flipped image (test-time augmentation), a one-hot row
    with its one elsewhere, a maze with its agent elsewhere is another input."""
    flat = np.asarray(rows).reshape(-1)
    if len(np.unique(flat)) < len(flat):
        return None
    return combined_fingerprint(flat)


def _keys(per_input: Iterable[np.ndarray]) -> int | None:
    """The fingerprint of a forward's inputs, all of them (an RNN stepped through a sequence
    feeds the same first input with another letter and hidden state: another input), or
    None when one of them names no particular inputs (`_key`)."""
    out = 0
    for i, rows in enumerate(per_input):
        key = _key(rows)
        if key is None:
            return None
        out = key if i == 0 else (out * 1_000_003 + key) % _MERSENNE  # in order: input 1 is not input 2
    return out


@register
class NondeterministicEval(Rule):
    """Two EVAL forwards of the same inputs, with no training step between them (the same
    weights), give different outputs: dropout (or another random layer) is active in
    evaluation, as with `F.dropout(x, p)` (whose `training` defaults to True) or a model not
    switched to `eval()`; the validation metrics are then noisy and biased.

    Reads, at EVAL and PREDICT statistics steps, the inputs' fingerprint (the sum of their
    `sample_fingerprints`, over every input of the model: `model_input_0`, `model_input_1`...,
    so an RNN fed the same first input with another letter and hidden state has other
    inputs) and the output's `fingerprint`, `mean` and `variance`, as the two-line
    PyTorch hook records them (or computed from raw tensors). Two outputs differ when their
    fingerprints differ and their mean or variance moved by more than `rtol` (relative): a
    GPU kernel that sums in another order changes the last bits, not the moments. An input
    fingerprint names its inputs only when it tells their samples apart: a batch in which two
    samples share one (the hash is blind to positions, so every one-hot row of a batch hashes
    alike, and two different one-hot batches too) is not compared. Also fires
    when the hook saw Dropout modules in training mode during an EVAL step
    (`module_training/dropout`, with `hook.set_mode(EVAL)` while the model stayed in train()).

    Without `hook.set_mode` the hook follows `model.training`, so an evaluation that forgot
    `model.eval()` is recorded inside TRAIN steps: the hook then records
    `no_grad_training/forwards` (and which Dropout / BatchNorm modules were in training mode,
    `no_grad_training/dropout|norm`) at the step where forwards with gradients disabled ran
    as an evaluation (two in a row, or with the loss computed, with no backward or optimizer
    step between: `mldbg.frameworks.torch_eval`), whatever the recording configuration; it
    fires on the first such step.
    """

    needs = ("inputs", "outputs")
    reads = {"inputs": ("sample_fingerprints",), "outputs": ("fingerprint", "mean", "variance")}
    input_name: str = "model_input_0"
    output_name: str = "model_output_0"
    rtol: float = 1e-4

    def reset(self) -> None:
        super().reset()
        # input fingerprint -> (step, output fingerprint, mean, variance, weights version)
        self._seen: dict[int, tuple[int, float, float, float, int]] = {}
        self._version = 0  # bumped by every TRAIN step and every gap in the steps
        self._previous: int | None = None

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`): the leading steps where `check` finds
        nothing, with the weight versions it counts (one per training step, per gap in the
        steps, per evaluation step where an optimizer stepped) and the evaluation outputs it
        remembers, from the saved statistics: the first step with an evaluation in training
        mode (`no_grad_training/forwards`), Dropout in training mode during an evaluation,
        an evaluation whose statistics are not all saved, or outputs that differ, is `check`'s."""
        if not len(steps):
            return 0
        modes, _ = trial.columns.modes(steps)
        train = modes == int(Mode.TRAIN)
        inputs = self._inputs(trial)
        interesting = Over(trial, f"{NO_GRAD}/forwards", steps).present
        evals = ~train
        if evals.any():
            with np.errstate(invalid="ignore"):
                drop = Over(trial, "module_training/dropout", steps)
                interesting |= evals & drop.present & ~(drop.stat("sum") <= 0)
                opt = Over(trial, "optimizer_step", steps)
                interesting |= evals & opt.present & opt.raw
                stepped = (evals & opt.present & (opt.stat("sum") > 0)).tolist()
                out = Over(trial, self.output_name, steps)
                fp, mean, var = out.stat("fingerprint"), out.stat("mean"), out.stat("variance")
                ok = out.present & ~out.raw & np.isfinite(fp) & np.isfinite(mean) & np.isfinite(var)
                for name in inputs:
                    ok &= Over(trial, vector_name(name, "sample_fingerprints"), steps).raw
            interesting |= evals & ~ok
        k = quiet_prefix(interesting)
        at = np.flatnonzero(evals[:k])
        keys: dict[int, int | None] = {}
        if len(at):
            per_input = [
                trial.columns.values_at(vector_name(name, "sample_fingerprints"), steps[at])
                for name in inputs
            ]
            if any(rows is None for rows in per_input):  # inputs of several sizes: read one by one by check()
                k = int(at[0])
            else:
                keys = {
                    int(i): _keys(rows[j] for rows in per_input)  # type: ignore[index]
                    for j, i in enumerate(at.tolist())
                }
                fps, means, vars_ = fp.tolist(), mean.tolist(), var.tolist()
        for i, step in enumerate(steps[:k].tolist()):
            version = self._version + (self._previous is not None and step != self._previous + 1)
            if train[i]:
                self._version, self._previous = version + 1, step
                continue
            key = keys[i]
            if key is not None:
                now = (step, fps[i], means[i], vars_[i], version)
                before = self._seen.get(key)
                if "outputs" not in self._fired and self._differs(before, now):
                    return i  # outputs that differ: check()'s step
                self._seen[key] = now
            self._version, self._previous = version + stepped[i], step
        return k

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if self._previous is not None and step != self._previous + 1:
            self._version += 1  # a step not recorded: the weights may have changed
        self._previous = step
        mode = trial.mode(step)
        in_training = self._in_training(trial, step, mode)
        if mode == Mode.TRAIN:
            self._version += 1
            return in_training
        if in_training is not None:
            return in_training
        on = trial.saved_statistic("module_training/dropout", step, "sum")
        if isinstance(on, float) and on > 0 and self.first("dropout"):
            count = trial.saved_statistic("module_training/dropout", step, "count")
            return self.finding(
                trial, step,
                f"{on:.0f} of {count or on:.0f} Dropout modules were in training mode during a {mode.name} step",
                tensors=["module_training/dropout"],
                suggestion="Call model.eval() before evaluating (and model.train() after); use nn.Dropout "
                "modules, or F.dropout(x, p, training=self.training), never F.dropout(x, p) alone.",
            )  # fmt: skip
        found = self._compare(trial, step, mode)
        stepped = trial.saved_statistic("optimizer_step", step, "sum")
        if isinstance(stepped, float) and stepped > 0:
            self._version += 1  # trained in eval mode: the weights changed after this step's forward
        return found

    def _differs(
        self, before: tuple[int, float, float, float, int] | None, now: tuple[int, float, float, float, int]
    ) -> bool:
        """Whether an evaluation's outputs `now` differ from `before`, those of the same inputs
        through the same weights ((step, output fingerprint, mean, variance, weights version))."""
        if before is None or before[4] != now[4] or before[1] == now[1]:
            return False
        _, _, mean0, var0, _ = before
        _, _, mean, var, _ = now
        scale = math.sqrt(max(var0, 0.0)) + abs(mean0)
        moved = abs(mean - mean0) / max(scale, 1e-12)
        spread = abs(var - var0) / max(abs(var0), 1e-12)
        return moved > self.rtol or spread > self.rtol or not math.isfinite(moved + spread)

    def _in_training(self, trial: TrialView, step: int, mode: Mode) -> Finding | None:
        """Forwards with gradients disabled ran as an evaluation at this step while Dropout or
        BatchNorm modules were in training mode (`no_grad_training/*`)."""
        forwards = trial.saved_statistic(f"{NO_GRAD}/forwards", step, "sum")
        if not (isinstance(forwards, float) and forwards > 0) or "dropout" in self._fired:
            return None
        active: list[str] = []
        kinds: list[str] = []
        for kind, label in (("dropout", "Dropout"), ("norm", "BatchNorm")):
            on = trial.saved_statistic(f"{NO_GRAD}/{kind}", step, "sum")
            count = trial.saved_statistic(f"{NO_GRAD}/{kind}", step, "count")
            if isinstance(on, float) and on > 0:
                active.append(f"{on:.0f} of {count or on:.0f} {label}")
                kinds.append(kind)
        if not active or not self.first("dropout"):
            return None
        effects = {
            "dropout": "its outputs are random (dropout)",
            "norm": "its outputs depend on the batch (BatchNorm) and the running statistics move",
        }
        return self.finding(
            trial, step,
            f"your evaluation runs with dropout/BatchNorm in training mode: {forwards:.0f} "
            f"forward{'s' if forwards != 1 else ''} with gradients disabled and no backward or optimizer "
            f"step (an evaluation, recorded as {mode.name}) ran with {' and '.join(active)} modules in "
            f"training mode, so {', and '.join(effects[k] for k in kinds)}",
            tensors=[f"{NO_GRAD}/forwards", *(f"{NO_GRAD}/{k}" for k in kinds)],
            suggestion="Call model.eval() before the evaluation loop and model.train() after it (and "
            "hook.set_mode(mldbg.Mode.EVAL) to record it as an evaluation); a pass with gradients off "
            "that must run in training mode (a target or teacher pass) is one forward per iteration, "
            "which this rule leaves alone.",
        )  # fmt: skip

    def _inputs(self, trial: TrialView) -> list[str]:
        """The model's inputs: `input_name` and the others of its model recorded beside it
        (`model_input_1`, ...: an RNN's hidden state, a mask, a condition), in order."""
        at = self.input_name.rfind("model_input_")
        if at < 0:
            return [self.input_name]
        pattern = f"^{re.escape(self.input_name[:at])}model_input_[0-9]+$"
        others = [n for n in trial.names(None, regex=pattern) if n != self.input_name]
        return [self.input_name, *sorted(others)]

    def _compare(self, trial: TrialView, step: int, mode: Mode) -> Finding | None:
        inputs = self._inputs(trial)
        per_input = [trial.statistic(name, step, "sample_fingerprints") for name in inputs]
        out = trial.statistic(self.output_name, step, "fingerprint")
        if (
            any(rows is None or isinstance(rows, float) for rows in per_input)
            or not isinstance(out, float)
            or not math.isfinite(out)
        ):
            self._version += 1  # not a statistics step: whether an optimizer stepped is unknown
            return None
        mean = trial.statistic(self.output_name, step, "mean")
        var = trial.statistic(self.output_name, step, "variance")
        mean = mean if isinstance(mean, float) else math.nan
        var = var if isinstance(var, float) else math.nan
        key = _keys(per_input)  # type: ignore[arg-type]
        if key is None:
            return None  # the fingerprint does not tell these samples apart: no identity to compare
        before = self._seen.get(key)
        self._seen[key] = (step, out, mean, var, self._version)
        if not self._differs(before, self._seen[key]) or not self.first("outputs"):
            return None
        assert before is not None
        first, _, mean0, var0, _ = before
        return self.finding(
            trial, step,
            f"{mode.name} steps {first} and {step} ran the same inputs ({', '.join(inputs)}, fingerprint {key}) "
            f"through the same weights and gave different outputs ({self.output_name}: mean "
            f"{mean0:.4g} -> {mean:.4g}, variance {var0:.4g} -> {var:.4g})",
            tensors=[*inputs, self.output_name],
            suggestion="Dropout or another random layer is active in evaluation: call model.eval() before "
            "evaluating; replace F.dropout(x, p) by nn.Dropout or F.dropout(x, p, training=self.training); "
            "seed or remove sampling in the forward pass.",
        )  # fmt: skip
