"""dead_relu: ReLU layers whose units never activate."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, quiet_prefix
from mldbg.rules.detect import ALPHA, z_normal
from mldbg.rules.select import model_of, model_prefixes
from mldbg.rules.stats import UnitWindow, is_input, layer_of, pick_per_layer, unit_fraction
from mldbg.rules.updates import LR_TOO_HIGH, Blowup
from mldbg.rules.view import TrialView
from mldbg.store.statistics import vector_name


def _activity(trial: TrialView, name: str, step: int) -> tuple[np.ndarray, int] | None:
    """Per unit, the samples where it is active, and the samples: from the raw tensor (a unit
    per position), else from the saved `unit_active` and `samples` statistics."""
    x = trial.raw(name, step)
    if x is not None:
        return None if x.size == 0 else unit_fraction(np.asarray(x) > 0)
    active = trial.saved_statistic(name, step, "unit_active")
    samples = trial.saved_statistic(name, step, "samples")
    if not isinstance(active, np.ndarray) or not isinstance(samples, float) or samples < 1 or not active.size:
        return None
    return active.astype(np.int64).reshape(-1), int(samples)


# samples (and different inputs, where the inputs tell) a layer's window must hold before its
# units are called dead: a unit silent on 32 different inputs is active on fewer than 1 in 10
# of them (97% confidence); 3 samples of one state say nothing
_MIN_SAMPLES = 32


@register
class DeadRelu(Rule):
    """More than `threshold_layer` % of a ReLU layer's units are active (> 0) in fewer than
    `threshold_inactivity` % of the samples, over the last `patience` saved steps.

    A dead unit outputs 0 for every input, so its gradient is 0 and it never recovers: the
    layer shrinks. A unit counts as dead only when it stays at zero across the whole batch
    (and the window of steps), not when it is zero for half the samples, which is how a
    healthy ReLU behaves. A "unit" is every coordinate but the batch axis (a neuron, or one
    position of a feature map). Inputs or outputs of the layers in `relu_activations`
    (or `tensor_regex`) are read; x > 0 is "active" for both. Without the raw tensor, the
    `unit_active` statistic (out of `samples`) a two-line hook records every step: there a
    unit of a conv layer is its channel (a dead filter). The window reaches further back than
    `patience` saved steps until it holds 32 samples, and a layer is called dead only when
    those are 32 different inputs of its model (by the inputs' per-sample fingerprints, or
    the raw inputs; unchecked when neither was recorded): a policy net fed one state per
    forward, the same start state at each step, would look dead after 3 samples.

    When an update blew a weight up before (a weight moved by half its size or more,
    `updates.BLOWN`), the finding names that update and advises the learning
    rate alone: the init was not at fault; so does a layer whose window was alive at an
    earlier saved step (the units died during training: updates too large), while a layer
    dead from its first window keeps the init advice (biases initialized negative).

    Units dead in the layer's first full window were never alive on this data (inputs that
    barely vary, a near-constant feature: some units sit on one side of 0 for every sample):
    a layer more than `threshold_layer` % dead is reported when its first window was too and
    the init is to blame: the layer's pre-activations (its ReLU's recorded input) started
    shifted below 0 beyond what an init symmetric about 0 gives (a one-sided z-test at the
    false-alarm budget `detect.ALPHA` shared by the layers: a negative bias), or the layer was
    nearly all dead (`threshold_collapse` %), or the pre-activations were not recorded. With
    pre-activations centred at 0, half the units start dead wherever the layer's input barely
    varies yet, each unit's sign then its bias's: a CapsNet's reconstruction decoder fed the
    masked capsules, near 0 at the start, is 55% "dead" at step 2, by chance, not by its init.
    A layer is also reported when more than `threshold_layer` % of the units alive in its first
    window died since AND the run shows why (training killed them). A layer 40% dead from the
    start that drifts to 55% (an N-BEATS stack on windows divided by their level) has lost a
    quarter of its live units, not most of them.

    Units that die during training are no defect by themselves: a healthy ReLU net trained by
    SGD or Adam often ends with half the units of some layer silent on its data (a VGG's
    last conv under MixUp 55%, an N-BEATS block 67%, a VQ-VAE decoder whose codes change
    at the first update 53%: all healthy), and the layer still passes what its live units
    carry. Units killed in training are a defect only where they hurt, or where their cause
    is in the run's evidence:
    - an update blew a weight up before (`updates.BLOWN`): the learning rate
      killed them; reported at `threshold_layer` % as before, with that update named;
    - else the layer is (nearly) all dead, more than `threshold_collapse` % of its units
      (90: it passes almost nothing, whatever killed them).
    Between the two, a layer that lost half its units without an event is quiet.
    """

    needs = ("relu_activations",)
    absent = (  # the skip message of a run with the two lines' statistics (runner)
        "the model has no ReLU layer the hook sees (in PyTorch an nn.ReLU module, or F.relu / torch.relu "
        "called on a layer's activations in a registered model's forward; a torch.compile'd model's "
        "only where its statistics steps run eagerly, as they do unless the hook has statistics_eager=False)"
    )
    reads = {"relu_activations": ("unit_active", "samples")}
    threshold_inactivity: float = 1.0
    threshold_layer: float = 50.0
    threshold_collapse: float = 90.0  # % of a layer dead, killed in training without a blown-up update
    patience: int = 3
    tensor_regex: list[str] | None = None
    suggestion = (
        "Initialize biases at 0 or slightly positive (not negative), lower the learning rate, "
        "use LeakyReLU/GELU instead of ReLU, add BatchNorm before the ReLU, and check that "
        "inputs are normalized."
    )

    died_suggestion: ClassVar[str] = (
        "These units were alive at first, so the init is not at fault: updates too large pushed "
        "their pre-activations below 0 for good. Lower the learning rate (or add a warm-up, clip "
        "gradients), or use LeakyReLU/GELU so that a unit still passes a gradient."
    )

    def _min_samples(self) -> int:
        return _MIN_SAMPLES

    def _few_inputs(self, trial: TrialView, name: str, steps: list[int]) -> bool:
        """The window's samples are fewer than `_MIN_SAMPLES` different inputs of the model
        the layer belongs to (a REINFORCE policy fed the same start state at every step): no
        evidence that its units never activate. Counted from the inputs' per-sample
        fingerprints, else from raw inputs; unknown (False) when neither was recorded."""
        prefixes = model_prefixes(trial)
        model = model_of(name, prefixes)
        seen: set[int] = set()
        for step in steps:
            inputs = sorted(n for n in trial.names("inputs", step=step) if model_of(n, prefixes) == model)
            if not inputs:
                return False
            found = trial.saved_statistic(inputs[0], step, "sample_fingerprints")
            if isinstance(found, np.ndarray) and found.size:
                seen.update(int(v) for v in found.reshape(-1))
                continue
            x = trial.raw(inputs[0], step)
            if x is None or x.ndim == 0:
                return False
            seen.update(hash(r.tobytes()) for r in np.ascontiguousarray(x.reshape(len(x), -1)))
        return len(seen) < _MIN_SAMPLES

    def reset(self) -> None:
        super().reset()
        self._windows: dict[str, UnitWindow] = {}  # per layer, the last `patience` saved steps
        self._since: dict[str, int] = {}
        self._blowup = Blowup()  # an update that blew a weight up: the cause to name
        self._alive: set[str] = set()  # layers whose window was full and not dead at some step
        self._first: dict[str, np.ndarray] = {}  # per layer, the units dead in its first full window
        self._shift: dict[str, bool | None] = {}  # per layer, `_shifted_below`

    def needed_collections(self) -> tuple[str, ...]:
        return () if self.tensor_regex else self.needs

    def _names(self, trial: TrialView, step: int | None = None) -> list[str]:
        if self.tensor_regex:
            return trial.names(None, regex=self.tensor_regex, step=step)
        return trial.names("relu_activations", step=step)

    def _shifted_below(self, trial: TrialView, layer: str) -> bool | None:
        """Whether the layer's pre-activations (its ReLU's recorded input) started shifted
        below 0 beyond what an init symmetric about 0 gives: a negative bias (or a shifted
        input) put the units under. Under i.i.d. rows symmetric about 0 (PyTorch's, Keras',
        JAX's default weights and biases) each unit's mean pre-activation over the samples is
        symmetric about 0, so their mean over the n units is 0 within sqrt(var / n), var (the
        variance over samples and units) bounding their spread from above: a one-sided z-test
        at `ALPHA` shared by the layers (n: the smallest axis but the batch, so that a conv
        layer's positions are not counted as independent units). From the layer's first
        `patience` saved steps; None where the input is not recorded (only its output)."""
        if layer in self._shift:
            return self._shift[layer]
        names = sorted(n for n in self._names(trial) if is_input(n) and layer_of(n) == layer)
        shifted = None
        if names:
            tensor = trial.tensor(names[0])
            steps = (tensor.steps(Mode.TRAIN) or tensor.steps())[: max(1, self.patience)]
            means, variances, rows = [], [], []
            for step in steps:
                m, v = trial.statistic(names[0], step, "mean"), trial.statistic(names[0], step, "variance")
                layout = trial.layout(names[0], step)
                if not isinstance(m, float) or not isinstance(v, float) or layout is None:
                    continue
                if not (math.isfinite(m) and math.isfinite(v)) or len(layout[1]) < 2:
                    continue
                means.append(m)
                variances.append(v)
                rows.append(min(layout[1][1:]))
            if means:
                m, v, n = float(np.mean(means)), float(np.mean(variances)), min(rows)
                layers = max(1, len({layer_of(x) for x in self._names(trial)}))
                shifted = m < 0 and (v == 0 or m < -z_normal(ALPHA / layers) * math.sqrt(v / n))
        self._shift[layer] = shifted
        return shifted

    def _dead_from_start(self, trial: TrialView, layer: str, first: np.ndarray) -> bool:
        """More than `threshold_layer` % of the layer's units dead in its first window is a
        broken init (a bias set far below 0) where the pre-activations started shifted below 0
        (`_shifted_below`), or where the layer is nearly all dead (`threshold_collapse` %: it
        passes almost nothing). With pre-activations centred at 0 it is not: there half the
        units start dead wherever the layer's input barely varies yet, each unit's sign then
        its bias's (a CapsNet's reconstruction decoder fed the true class's capsule, near 0 at
        the start: 55% of 128 units "dead" at step 2, alive as the capsules grow). Without the
        pre-activations recorded, as before: dead from the start is the init's doing."""
        share = float(first.mean()) if first.size else 0.0
        if share <= self.threshold_layer / 100:
            return False
        if share > self.threshold_collapse / 100:
            return True
        return self._shifted_below(trial, layer) is not False

    def _reportable(
        self,
        trial: TrialView,
        layer: str,
        dead: np.ndarray,
        first: np.ndarray,
        blown: np.ndarray | bool = False,
    ) -> np.ndarray:
        """Per row of `dead` (windows x units): the layer is dead beyond the threshold, and was
        from its first window (`first`) by a broken init (`_dead_from_start`), or lost most of
        the units alive there after a blown-up update (`blown`, per row), or lost nearly all
        of its units (`threshold_collapse`)."""
        dead = np.atleast_2d(dead)
        t = self.threshold_layer / 100
        share = dead.mean(axis=1)
        alive_first = ~first
        killed = (dead & alive_first).sum(axis=1) / max(1, int(alive_first.sum()))
        died = (killed > t) & (np.asarray(blown) | (share > self.threshold_collapse / 100))
        return (share > t) & (self._dead_from_start(trial, layer, first) | died)

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading `steps` at which no layer's window is dead, from the saved
        `unit_active` and `samples` columns; their counts join the windows as in `check`. A
        raw activation, a layer saved under two names, or units that change in number end
        them (or decline)."""
        if self.tensor_regex:
            names = trial.names(None, regex=self.tensor_regex)
        else:
            names = trial.names("relu_activations")
        layers: dict[str, list[str]] = {}
        for name in names:
            layers.setdefault(layer_of(name), []).append(name)
        interesting = np.zeros(len(steps), dtype=bool)
        adds: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        firsts: list[tuple[str, int, np.ndarray]] = []  # (layer, the row of its first full window, dead)
        for layer, tensors in sorted(layers.items()):
            if len(tensors) > 1:
                return 0  # check() picks one of them per step
            name = tensors[0]
            over = Over(trial, name, steps)
            if not over.present.any():
                continue
            interesting |= over.raw
            samples = over.stat("samples")
            vname = vector_name(name, "unit_active")
            stacked = trial.columns.values(vname)
            if stacked is None:
                if trial.has_tensor(vname):
                    return 0  # shapes that differ, a record without its values: check() reads them
                continue  # no unit_active saved: check() finds nothing to add either
            have, active = stacked
            i = np.minimum(np.searchsorted(have, steps), len(have) - 1)
            valid = over.present & ~over.raw & (have[i] == steps) & (samples >= 1) & (active.size > 0)
            rows = np.flatnonzero(valid)
            if not len(rows):
                continue
            counts = active[i[rows]].reshape(len(rows), -1).astype(np.int64)
            win = self._windows.get(layer)
            old = [] if win is None else win.counts
            if any(c.shape != counts.shape[1:] for c in old):
                return 0  # the layer changed shape: UnitWindow starts over, check() does it
            p = max(1, self.patience)
            seq = np.concatenate([np.stack(old).astype(np.int64), counts]) if old else counts
            smp = np.concatenate(
                [
                    np.asarray([] if win is None else win.samples, dtype=np.int64),
                    samples[rows].astype(np.int64),
                ]
            )
            cs = np.concatenate([np.zeros((1, seq.shape[1]), dtype=np.int64), np.cumsum(seq, axis=0)])
            cn = np.concatenate([[0], np.cumsum(smp)])
            end = np.arange(len(old) + 1, len(seq) + 1)
            # as UnitWindow: the last `patience` steps, further back until `min_samples`
            enough = np.searchsorted(cn, cn[end] - self._min_samples(), side="right") - 1
            start = np.minimum(end - p, enough)
            full = start >= 0
            start = np.maximum(0, start)
            fraction = (cs[end] - cs[start]) / np.maximum(1, cn[end] - cn[start])[:, None]
            dead = fraction * 100 < self.threshold_inactivity
            share = 100.0 * dead.sum(axis=1) / dead.shape[1]
            first = self._first.get(layer)
            at = np.flatnonzero(full)
            first_row = None if first is not None or not len(at) else int(at[0])
            if first is None and first_row is not None:
                first = dead[first_row]
            if layer not in self._fired and first is not None:
                blown = self._blowup.upto(trial, int(steps[rows[-1]]))
                after = np.zeros(len(rows), dtype=bool) if blown is None else steps[rows] >= blown[0]
                interesting[rows[full & self._reportable(trial, layer, dead, first, after)]] = True
            adds.append((layer, rows, counts, samples[rows], full & (share <= self.threshold_layer)))
            if first_row is not None:
                firsts.append((layer, int(rows[first_row]), dead[first_row]))
        n = quiet_prefix(interesting)
        for layer, row, dead_first in firsts:
            if row < n:
                self._first[layer] = dead_first
        for layer, rows, counts, samples, alive in adds:
            take = rows < n
            if not take.any():
                continue
            if (alive & take).any():
                self._alive.add(layer)
            win = self._windows.setdefault(layer, UnitWindow(self.patience, self._min_samples()))
            self._since.setdefault(layer, int(steps[rows[take][0]]))
            for c, smp, at in zip(
                counts[take], samples[take].tolist(), steps[rows[take]].tolist(), strict=True
            ):
                win.add(c, int(smp), int(at))
        return n

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if self.tensor_regex:
            names = trial.names(None, regex=self.tensor_regex, step=step)
        else:
            names = trial.names("relu_activations", step=step)
        if not names:
            return None
        dead_layers = []
        for layer, name in sorted(pick_per_layer(names, prefer="output").items()):
            got = _activity(trial, name, step)
            if got is None:
                continue
            counts, samples = got
            win = self._windows.setdefault(layer, UnitWindow(self.patience, self._min_samples()))
            win.add(counts, samples, step)
            self._since.setdefault(layer, step)
            if not win.full:
                continue
            active = win.fraction() * 100
            dead = active < self.threshold_inactivity
            share = 100.0 * dead.sum() / dead.size
            first = self._first.setdefault(layer, dead.copy())
            if first.shape != dead.shape:
                first = self._first[layer] = dead.copy()  # the layer changed shape: its window started over
            after_blowup = self._blowup.upto(trial, step) is not None
            if self._reportable(trial, layer, dead, first, after_blowup)[0] and not self._few_inputs(
                trial, name, win.steps
            ):
                dead_layers.append((layer, name, share, int(dead.sum()), dead.size, sum(win.samples)))
            elif share <= self.threshold_layer:
                self._alive.add(layer)
        dead_layers = [d for d in dead_layers if self.first(d[0])]
        if not dead_layers:
            return None
        parts = [
            f"{layer}: {k} of its {n} units ({share:.0f}%) active in < {self.threshold_inactivity:g}% of {samples} samples"
            for layer, _, share, k, n, samples in dead_layers
        ]
        blown = self._blowup.upto(trial, step)
        died = all(d[0] in self._alive for d in dead_layers)  # alive at first: training killed them
        cause = (
            f"; they died after the update at step {blown[0]} moved {blown[1]} by {blown[2]:.3g}x its size before it: "
            "the learning rate is far too high"
            if blown is not None
            else "; they were alive at first: training killed them"
            if died
            else ""
        )
        return self.finding(
            trial, step,
            f"dead ReLUs over the last {self.patience} saved steps: {'; '.join(parts)} "
            f"(more than {self.threshold_layer:g}% dead): these units output 0 and get no gradient{cause}",
            tensors=[d[1] for d in dead_layers],
            suggestion=LR_TOO_HIGH if blown is not None else self.died_suggestion if died else None,
        )  # fmt: skip
