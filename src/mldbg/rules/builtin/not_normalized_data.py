"""not_normalized_data: model inputs far from zero mean and unit variance."""

from __future__ import annotations

import copy
import math

import numpy as np

from mldbg.config import Mode
from mldbg.rules import detect
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, quiet_prefix
from mldbg.rules.view import TrialView
from mldbg.store.statistics import vector_name

INPUTS_SCALED = "inputs_scaled/"  # `mldbg.frameworks.torch_defaults.INPUTS_SCALED`: a model scales its input
INPUTS_RESCALED = "inputs_rescaled/"  # `mldbg.frameworks.keras.INPUTS_RESCALED`: ... by a fixed scale first
# `mldbg.frameworks.torch_first_layer.FIRST_LAYER_INPUT`: what a model's first learned layer saw
# of its input, where the model transformed it first
FIRST_LAYER_INPUT = "first_layer_input/"

# `_noise_scaled`: the steps whose variances test the noise model (a sequential judgement waits
# for them), and the level of its two-sided t interval on the data part's variance
_NOISE_STEPS = 5
_NOISE_LEVEL = 0.01

# below this root-mean-square L2 norm a whole sample carries next to no signal into the first
# layer (MNIST divided by 255 twice: ~0.035); row-normalized bag-of-words features (L1 norm 1,
# L2 norm 1/sqrt(words): 0.07 at 200 words) stay above it
_TINY_SAMPLE = 0.05
_CHANNEL_KEYS = ("channel_count", "channel_mean", "channel_std")
# `_model_normalizes`: a state vector matches the inputs' measured per-feature means when
# within this many of each feature's std of them (the state was adapted on the whole training
# set, the rule measures the first samples), their variance (or std) within this factor; it
# reads back over this many saved steps for a raw value of the state
_STATE_MEAN = 0.5
_STATE_SCALE = 2.0
_STATE_TRIES = 64
# a feature whose std is below this share of its |mean| (8 float32 ulps) is constant: float32
# values cannot differ by less, and the std the moments give a constant feature (log(eps) on
# zero padding, a fill value) is their rounding, not a spread
_CONSTANT = 2.0**-20


class _Moments:
    def __init__(self) -> None:
        self.n = 0  # samples (batch rows)
        self.count: np.ndarray | None = None
        self.total: np.ndarray | None = None
        self.total_sq: np.ndarray | None = None


@register
class NotNormalizedData(Rule):
    """Model inputs are far from zero mean / unit variance per feature (or per channel of
    images), measured over the first `threshold_samples` training samples: a feature's
    |mean| exceeds `threshold_mean` and twice its standard deviation (its values nearly all
    share a sign; a feature of std 1.2 around -1.3, as clustered data are, still crosses 0
    and trains fine), or its standard deviation exceeds `threshold_std`, or
    the typical (median) feature's standard deviation is below 1/`threshold_std`**2.

    Unscaled inputs (raw pixels 0-255, a feature in the thousands) make one direction of the
    loss surface far steeper than the others: training needs a tiny learning rate, saturates
    tanh/sigmoid units and can blow up. Defaults: `threshold_mean=3.0` and `threshold_std=5`
    (SageMaker's 0.2 flags images scaled to [0, 1], which train fine; features near 1 with a
    small spread, a series divided by its level or coordinates in [0.5, 2], train fine too:
    the first layer's bias takes up an offset of that size). Small spreads count
    only for the typical feature, so rare one-hot columns are not reported, and only below
    1/25 = 0.04 with samples whose whole L2 norm (RMS) is below 0.05: flattened [0, 1] images
    (MNIST through `ToTensor()`, a typical pixel std near 0.17) train fine, and so do a GCN's
    row-normalized bag-of-words features and normalized adjacency rows (a feature's std
    ~0.01-0.04, a sample's norm 0.1-0.5); inputs divided by 255 twice (std ~0.001, a sample's
    norm ~0.035) do not. Axis: the
    feature axis for (N, F), the last axis for (N, T, F) (but axis 1 of a model whose first
    learned layer is a convolution, as the PyTorch hook records it: a Conv1d's (N, C, L), whose
    positions along a signal are not features), `channel` (default 1, channels-first) for
    images (N, C, H, W); integer inputs (token ids) are left to `nlp_sequence_ratio`,
    except integer images (4 axes: uint8 pixels) fed to a model whose first learned layer
    sees them as they are, scaled as the hook knows (a Keras model casts them to floats:
    `inputs_rescaled/model/...`); a PyTorch model must convert them itself, at a scale unknown.
    Constant features (a fill value: log(eps) on zero padding) are not judged; a feature is
    constant when its std is below 2**-20 of its |mean| (8 float32 ulps): that std is the
    rounding of the moments, not a spread.
    A float input of one value per sample, shape (N,) or (N, 1), next to another input is a
    condition the model embeds (a diffusion timestep, a noise level, a class id, a length):
    not judged. An input noised to such a level, x = d + c z (consistency models and EDM:
    sigma up to 80, the model scales its input by c_in = 1 / sqrt(sigma^2 + sigma_data^2)),
    is the design: its spread is judged on the data part d, whose variance is, at each step,
    the input's minus the batch's mean c^2 (`_noise_scaled`: a t interval over >= 5 steps,
    waited for, must meet [0, `threshold_std`^2]; a far mean still fires).
    Without raw inputs it adds up the `channel_count`, `channel_mean` and `channel_std`
    statistics (and `samples`) a two-line hook records every step, on the same axes (not
    with another `channel`: then only raw inputs can answer).

    Inputs fed to a model that scales them itself, per sample, are fine: a model holding a
    scaler module or reversible instance normalization (Hugging Face's time-series models,
    which take raw `past_values` and scale them by their mean or std; RevIN), as the PyTorch
    hook records it (`inputs_scaled/<model>`), is not judged on its raw input.
    An input a Keras model rescales before its first learned layer (`Rescaling(1 / 255)` on raw
    pixels, as the Keras hook records it: `inputs_rescaled/model/scale` and `/offset`) is
    judged as that layer sees it, `input * scale + offset`: raw pixels so fed are fine, pixels
    already divided by 255 and divided again are not.
    Inputs a model transforms itself before its first learned layer are judged as that layer
    sees them too, and reported only when both views are off: the PyTorch hook records what
    the first layer with parameters saw when it is not the model's float input as it came
    (`first_layer_input/<prefix>model`: an ES-RNN divides its raw series by their level, a
    learned optimizer takes the log of the gradients it is fed; a first BatchNorm marks the
    input standardized by the model, `inputs_scaled/`). That view only clears a finding:
    raw values the model merely copies (padded, concatenated, cast) are still reported.
    Inputs fed to a model that normalizes them itself are fine: when the run holds two saved
    weights of one value per feature that are the inputs' own mean (within half a std) and
    variance or std (within a factor 2), as a Keras `Normalization` layer adapted on the
    training set keeps, the model standardizes them first; nothing is reported.
    """

    needs = ("inputs",)
    reads = {"inputs": ("channel_count", "channel_mean", "channel_std", "samples")}
    threshold_mean: float = 3.0
    threshold_std: float = 5.0
    threshold_samples: int = 500
    channel: int | None = None
    regex: list[str] | None = None
    suggestion = (
        "Standardize the inputs with statistics of the training set: x = (x - mean) / std per feature "
        "(sklearn.preprocessing.StandardScaler, or torchvision.transforms.Normalize(mean, std) per "
        "channel for images; divide raw pixels by 255 first)."
    )

    def reset(self) -> None:
        super().reset()
        self._moments: dict[str, _Moments] = {}  # per input tensor, sums over the samples seen
        self._checked: set[str] = set()  # inputs judged already
        self._deferred = False  # the last judgement waits for more steps (`_noise_scaled`)
        self._rescaled: dict[str, tuple[float, float]] = {}  # input -> `_rescaling`, once found
        self._channels_first: set[str] = set()  # 3-axis inputs the hook laid out as (N, C, L)

    def needed_collections(self) -> tuple[str, ...]:
        return () if self.regex else self.needs

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """Every step once each input was judged (`check` skips judged inputs). Before: the
        leading steps whose inputs saved only their per-channel statistics, added up as
        `check` adds them (the vectors of just those steps read together, `Columns.values_at`,
        not the whole run's) and judged where an input reaches `threshold_samples`, up to a
        step that reports there or that `check` must read (a raw input, a statistic missing)."""
        names = trial.names(None, regex=self.regex) if self.regex else trial.names("inputs")
        todo = [n for n in names if n not in self._checked]
        if not todo:
            return len(steps)
        if self.channel is not None or not len(steps):
            return 0
        every = trial.columns.steps()
        if not (trial.columns.modes(every)[0] == int(Mode.TRAIN)).any():  # no training step yet
            return 0
        modes, _ = trial.columns.modes(steps)
        train = modes == int(Mode.TRAIN)  # check() passes over the other modes' steps
        k = len(steps)
        plans = []  # (name, the steps it adds, their vectors and samples, where it is judged)
        for name in todo:
            over = Over(trial, name, steps)
            use = over.present & train
            if not use.any():
                continue
            samples = over.stat("samples")
            ok = ~over.raw & ~np.isnan(samples)
            cols = trial.columns.tensor(name)
            if cols is not None:  # a float tensor with a shape, as check() asks (`layout`)
                kinds, ndim = cols.layouts(trial.trial)
                at = np.maximum(cols.at(steps), 0)
                images = self._rescaling(trial, name) is not None  # integer images judged too
                ok &= ((kinds[at] == "f") & (ndim[at] > 0)) | (
                    images & np.isin(kinds[at], ["u", "i"]) & (ndim[at] == 4)
                )
            for key in _CHANNEL_KEYS:
                v = Over(trial, vector_name(name, key), steps)
                ok &= v.present & v.raw
            stop = quiet_prefix(use & ~ok)
            before = self._moments[name].n if name in self._moments else 0
            total = before + np.cumsum(np.where(use[:stop], samples[:stop], 0.0))
            reached = np.flatnonzero(use[:stop] & (total >= self.threshold_samples))
            upto = int(reached[0]) + 1 if len(reached) else stop
            idx = np.flatnonzero(use[:upto])
            got = [trial.columns.values_at(vector_name(name, key), steps[idx]) for key in _CHANNEL_KEYS]
            if len(idx) and any(g is None for g in got):
                return 0  # vectors of several shapes: check() reads them one by one
            judged = None
            if len(reached):  # judged at that step: check()'s if it reports, else quiet here
                m = copy.deepcopy(self._moments.get(name, _Moments()))
                for i in range(len(idx)):
                    self._accumulate(m, *self._row(got, i), samples[idx[i]])
                r = int(reached[0])
                if self._judge(trial, int(steps[r]), name, m, dry=True) is not None or self._deferred:
                    stop = r
                else:
                    judged = r
            k = min(k, stop)
            plans.append((name, idx, got, samples[idx], judged))
        # the moments are made in the order check() makes them: by step, then by name
        plans.sort(key=lambda p: (int(p[1][0]) if len(p[1]) else len(steps), names.index(p[0])))
        for name, idx, got, samples, judged in plans:
            for i in np.flatnonzero(idx < k).tolist():
                self._accumulate(self._moments.setdefault(name, _Moments()), *self._row(got, i), samples[i])
            if judged is not None and judged < k:
                self._checked.add(name)
        return k

    @staticmethod
    def _row(got: list, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row `i` of the stacked channel count, mean and std, as `check` reads them."""
        count, mean, std = (np.asarray(g[i], dtype=np.float64).reshape(-1) for g in got)
        return count, mean, std

    def check(self, trial: TrialView, step: int) -> Finding | None:
        mode = trial.mode(step)
        if mode != Mode.TRAIN and trial.steps(Mode.TRAIN):
            return None
        names = (
            trial.names(None, regex=self.regex, step=step) if self.regex else trial.names("inputs", step=step)
        )
        out = None
        for name in names:
            if name in self._checked:
                continue
            x = trial.raw(name, step)
            if x is None:
                if not self._add_statistics(trial, name, step):
                    continue
            elif not self._judged(trial, name, x.dtype.kind, x.ndim) or x.size == 0:
                continue
            else:
                m = self._moments.setdefault(name, _Moments())
                self._add(m, np.asarray(x, dtype=np.float64), self._axis(x, trial, name, step))
            m = self._moments[name]
            if m.n >= self.threshold_samples:
                found = self._judge(trial, step, name, m)
                if not self._deferred:
                    self._checked.add(name)
                out = out or found
        return out

    def finish(self, trial: TrialView) -> Finding | None:
        for name, m in self._moments.items():
            if name not in self._checked and m.n >= min(100, self.threshold_samples):
                self._checked.add(name)
                found = self._judge(trial, trial.steps()[-1], name, m, dry=None)
                if found:
                    return found
        return None

    def unchecked(self) -> str | None:
        if not self._moments:
            return "no floating-point model inputs were saved"
        return None

    def undecided(self) -> str | None:
        if self._checked or not self._moments:
            return None
        name = max(self._moments, key=lambda n: self._moments[n].n)
        return (
            f"saw {self._moments[name].n} of the {self.threshold_samples} training samples it needs "
            f"({name}; at the end of a run it judges from {min(100, self.threshold_samples)})"
        )

    def _add_statistics(self, trial: TrialView, name: str, step: int) -> bool:
        """Add a step's saved per-channel statistics to the input's moments; False when they
        were not saved, the inputs are not floats, or `channel` asks for another axis."""
        layout = trial.layout(name, step)
        if (
            self.channel is not None
            or layout is None
            or not self._judged(trial, name, layout[0], len(layout[1]))
        ):
            return False
        row = self._saved_row(trial, name, step)
        if row is None:
            return False
        self._accumulate(self._moments.setdefault(name, _Moments()), *row)
        return True

    @staticmethod
    def _saved_row(
        trial: TrialView, name: str, step: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float] | None:
        """A step's saved per-channel count, mean and std (flat float64) and `samples` of
        `name`, as `_accumulate` takes them; None when they were not saved."""
        got = [trial.saved_statistic(name, step, k) for k in _CHANNEL_KEYS]
        samples = trial.saved_statistic(name, step, "samples")
        if not all(isinstance(v, np.ndarray) for v in got) or not isinstance(samples, float):
            return None
        count, mean, std = (np.asarray(v, dtype=np.float64).reshape(-1) for v in got)
        return count, mean, std, samples

    @staticmethod
    def _accumulate(
        m: _Moments, count: np.ndarray, mean: np.ndarray, std: np.ndarray, samples: float
    ) -> None:
        """Add one step's per-channel statistics (flat float64) to an input's moments."""
        mean, std = np.where(count > 0, mean, 0.0), np.where(count > 0, std, 0.0)
        total, total_sq = mean * count, count * (std * std + mean * mean)
        if m.total is None or m.count is None or m.total_sq is None or m.total.shape != total.shape:
            m.count, m.total, m.total_sq = count, total, total_sq
        else:
            m.count, m.total, m.total_sq = m.count + count, m.total + total, m.total_sq + total_sq
        m.n += int(samples)

    def _axis(self, x: np.ndarray, trial: TrialView, name: str, step: int) -> int | None:
        """The feature axis of a raw input: (N, F) 1; (N, T, F) the last, unless the hook saved
        the input's per-channel statistics over axis 1 (the two lines' statistics of a model
        whose first learned layer is a convolution: a Conv1d's (N, C, L), whose L positions of
        a signal are not features; raw inputs alone, a custom save config, carry no such
        layout); images (N, C, ...) 1; or `channel`."""
        if x.ndim == 1:
            return None
        if x.ndim == 2:
            return 1
        if self.channel is not None:
            return self.channel % x.ndim
        if x.ndim != 3:
            return 1
        saved = trial.saved_statistic(name, step, "channel_mean")
        units = np.asarray(saved).size if isinstance(saved, np.ndarray) else None
        if units == x.shape[1] != x.shape[2]:
            self._channels_first.add(name)  # as the hook laid it out: a raw step without them too
        return 1 if name in self._channels_first else 2

    def _add(self, m: _Moments, x: np.ndarray, axis: int | None) -> None:
        flat = x.reshape(-1, 1) if axis is None else np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])
        finite = np.isfinite(flat)
        v = np.where(finite, flat, 0.0)
        count, total, total_sq = finite.sum(0), v.sum(0), (v * v).sum(0)
        if m.total is None or m.total.shape != total.shape:
            m.count, m.total, m.total_sq = count, total, total_sq
        else:
            m.count, m.total, m.total_sq = m.count + count, m.total + total, m.total_sq + total_sq
        m.n += x.shape[0] if x.ndim > 1 else x.size

    def _judge(
        self, trial: TrialView, step: int, name: str, m: _Moments, dry: bool | None = False
    ) -> Finding | None:
        """The finding on an input's moments, if any; `dry`: without marking it reported (the
        fast path asks whether `check` would report); None: the run's last judgement (`finish`),
        which no longer waits for steps. `_deferred` says whether it waits."""
        assert m.count is not None and m.total is not None
        self._deferred = False
        if self._is_condition(trial, name, step) or self._scaled_by_model(trial, name):
            return None
        what = "channel" if self._is_image(trial, name, step) else "feature"
        problems, mean, std, live, off_mean = self._problems(m, what, self._rescaling(trial, name))
        if not problems or self._model_normalizes(trial, step, mean, std, live):
            return None
        if not off_mean and self._noise_scaled(trial, step, name, live, final=dry is None):
            return None
        seen = self._first_layer_sees(trial, name, step)
        if seen is not None and not self._problems(seen, what, None)[0]:
            return None  # the model standardizes it before its first learned layer
        if not (dry or self.first(name)):
            return None
        where = (
            ""
            if seen is None
            else f", nor as the model's first learned layer sees them ({self._first_name(name)})"
        )
        return self.finding(
            trial, step,
            f"inputs {name} are not normalized over the first {m.n} samples{where}: {'; '.join(problems)} "
            f"({m.total.size} {what}(s) in all; healthy inputs have mean ~0 and std ~1)",
            tensors=[name],
        )  # fmt: skip

    def _problems(
        self, m: _Moments, what: str, rescaled: tuple[float, float] | None
    ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, bool]:
        """What is wrong with the moments `m` of an input (`rescaled`: as `x * scale + offset`):
        (the problems, per feature the mean, the std and whether it is live, whether a mean
        is off)."""
        assert m.count is not None and m.total is not None and m.total_sq is not None
        total, total_sq = m.total, m.total_sq
        if rescaled is not None:  # as the first learned layer sees it: x * scale + offset
            s, o = rescaled
            total, total_sq = s * total + o * m.count, s * s * total_sq + 2 * s * o * total + o * o * m.count
        n = np.maximum(m.count, 1)
        mean = total / n
        std = np.sqrt(np.maximum(total_sq / n - mean**2, 0.0))
        # constant features are a different problem (within rounding: `_CONSTANT`)
        live = std > _CONSTANT * np.abs(mean)
        if not live.any():
            return [], mean, std, live, False
        problems = []
        # far from zero next to its own spread too: a feature of std 1.2 around -1.3 (clustered
        # data) still crosses 0; one whose values nearly all share a sign (|mean| > 2 std) does not
        off_mean = np.flatnonzero(live & (np.abs(mean) > np.maximum(self.threshold_mean, 2 * std)))
        if off_mean.size:
            j = off_mean[np.argmax(np.abs(mean[off_mean]))]
            problems.append(
                f"{off_mean.size} {what}(s) with |mean| > {self.threshold_mean:g} and > 2 std "
                f"(up to {mean[j]:.4g} for {what} {j}, std {std[j]:.3g})"
            )
        big = np.flatnonzero(live & (std > self.threshold_std))
        if big.size:
            j = big[np.argmax(std[big])]
            problems.append(
                f"{big.size} {what}(s) with std > {self.threshold_std:g} (up to {std[j]:.4g} for {what} {j})"
            )
        typical = float(np.median(std[live]))
        # the root-mean-square L2 norm of a sample (all features and positions): row-normalized
        # bag-of-words features (L1 norm 1) and the rows of a normalized adjacency are small per
        # feature, not per sample
        rms_norm = float(np.sqrt(total_sq.sum() / max(1, m.n)))
        if typical < self.threshold_std**-2 and rms_norm < _TINY_SAMPLE:
            problems.append(
                f"the typical {what} has std {typical:.3g} < {self.threshold_std**-2:g} and a sample's "
                f"L2 norm is {rms_norm:.2g} (RMS) < {_TINY_SAMPLE:g}"
            )
        return problems, mean, std, live, bool(off_mean.size)

    @staticmethod
    def _first_name(name: str) -> str | None:
        """The name under which the PyTorch hook records what the first learned layer of the
        model of input `name` saw (`first_layer_input/<prefix>model`); None for an input that
        is no model's (`model_input_<i>`)."""
        at = name.rfind("model_input_")
        return f"{FIRST_LAYER_INPUT}{name[:at]}model" if at >= 0 else None

    def _first_layer_sees(self, trial: TrialView, name: str, step: int) -> _Moments | None:
        """The moments of what the first learned layer of the model of input `name` saw at the
        training steps up to `step`, where the model transformed its input first (the PyTorch
        hook's `first_layer_input/<prefix>model`: `torch_first_layer`); None where it did not
        (or the statistics are not there). They can only clear a finding: an ES-RNN divides
        its raw series by their level, a learned optimizer takes the log of the gradients it
        is fed; a view of raw inputs that the model left unscaled is still reported."""
        first = self._first_name(name)
        if first is None or not trial.has_tensor(first):
            return None
        train = bool(trial.steps(Mode.TRAIN))
        m = _Moments()
        for s in trial.tensor(first).steps():
            if s > step or (train and trial.mode(s) != Mode.TRAIN):
                continue
            row = self._saved_row(trial, first, s)
            if row is None:
                continue
            if m.count is not None and m.count.shape != row[0].shape:
                return None  # its features changed: not one input
            self._accumulate(m, *row)
        return m if m.n else None

    @staticmethod
    def _scaled_by_model(trial: TrialView, name: str) -> bool:
        """Whether `name` is the input of a model that scales it itself, per sample, before
        any learned layer (`inputs_scaled/<model>`, which the PyTorch hook records for a model
        holding a scaler or RevIN: `mldbg.frameworks.torch_defaults.scales_inputs`)."""
        at = name.rfind("model_input_")
        return at >= 0 and trial.has_tensor(f"{INPUTS_SCALED}{name[:at]}model")

    def _judged(self, trial: TrialView, name: str, kind: str, ndim: int) -> bool:
        """Whether an input of this dtype kind and number of axes is judged: a float tensor of
        at least one axis; an integer one of 4 axes (an image batch: uint8 pixels) where what
        the model's first learned layer sees of it is known (`_rescaling`: a Keras model, which
        casts it to floats as it is). Other integer inputs are token ids (`nlp_sequence_ratio`),
        and a PyTorch model must convert integer pixels itself, scale unknown."""
        if kind == "f":
            return ndim > 0
        return kind in "ui" and ndim == 4 and self._rescaling(trial, name) is not None

    def _rescaling(self, trial: TrialView, name: str) -> tuple[float, float] | None:
        """(scale, offset) by which the model of input `name` rescales it before its first
        learned layer (`inputs_rescaled/<model>/scale` and `/offset`, which the Keras hook
        records for `Rescaling` layers there: `mldbg.frameworks.keras_layers.input_rescaling`),
        or None (not yet recorded: asked again). Read once found: the hook records the same
        numbers at every statistics step."""
        if name in self._rescaled:
            return self._rescaled[name]
        at = name.rfind("model_input_")
        if at < 0:
            return None
        got = []
        for part in ("scale", "offset"):
            marker = f"{INPUTS_RESCALED}{name[:at]}model/{part}"
            steps = trial.tensor(marker).steps() if trial.has_tensor(marker) else []
            value = trial.statistic(marker, steps[0], "sum") if steps else None
            if not isinstance(value, float) or not math.isfinite(value):
                return None
            got.append(value)
        self._rescaled[name] = (got[0], got[1])
        return self._rescaled[name]

    @staticmethod
    def _model_normalizes(
        trial: TrialView, step: int, mean: np.ndarray, std: np.ndarray, live: np.ndarray
    ) -> bool:
        """Whether the model holds the inputs' own per-feature mean and variance (or std) as
        state, so it standardizes them first: two saved weights of one value per feature, one
        within `_STATE_MEAN` std of each live feature's measured mean, the other within a
        factor `_STATE_SCALE` of each one's variance (or std). A Keras `Normalization` layer
        adapted on the training set keeps exactly these (`mean`, `variance`); so does a
        BatchNorm on the inputs once its moving statistics have settled. Then raw features in
        the thousands are what the model is meant to be fed."""
        if not live.any():
            return False
        size = mean.size
        means: set[str] = set()  # the state vectors that match the means, and the scales
        scales: set[str] = set()
        for name in trial.names(["weights", "biases"]):
            saved = [s for s in trial.tensor(name).steps() if s <= step][-_STATE_TRIES:]
            value = None
            for at in reversed(saved):
                layout = trial.layout(name, at)
                if layout is None or layout[0] != "f" or math.prod(layout[1]) != size:
                    break
                value = trial.raw(name, at)
                if value is not None:
                    break
            if value is None:
                continue
            v = np.asarray(value, dtype=np.float64).reshape(-1)[live]
            m, sd = mean[live], std[live]
            if not np.isfinite(v).all():
                continue
            if np.all(np.abs(v - m) <= _STATE_MEAN * sd):
                means.add(name)
            with np.errstate(divide="ignore", invalid="ignore"):
                if any(np.all((v >= t / _STATE_SCALE) & (v <= t * _STATE_SCALE)) for t in (sd * sd, sd)):
                    scales.add(name)
            if any(a != b for a in means for b in scales):  # two tensors: a mean and a scale
                return True
        return False

    def _conditions(self, trial: TrialView, name: str, step: int) -> list[str]:
        """The other float inputs of one value per sample, shape (N,) or (N, 1), at a step."""
        others = trial.names(None, regex=self.regex) if self.regex else trial.names("inputs")
        out = []
        for other in others:
            layout = trial.layout(other, step) if other != name else None
            if layout is not None and layout[0] == "f" and layout[1][1:] in ((), (1,)):
                out.append(other)
        return out

    def _step_variances(self, trial: TrialView, name: str, step: int) -> np.ndarray | None:
        """Per feature (the axes of `_add`), the variance of an input at one step, from its raw
        value or its saved `channel_std`; None when neither is there."""
        x = trial.raw(name, step)
        if x is not None:
            x = np.asarray(x, dtype=np.float64)
            if x.dtype.kind != "f" or x.ndim == 0 or x.size == 0:
                return None
            axis = self._axis(x, trial, name, step)
            flat = x.reshape(-1, 1) if axis is None else np.moveaxis(x, axis, -1).reshape(-1, x.shape[axis])
            return np.var(flat, axis=0)
        if self.channel is not None:
            return None
        sd = trial.saved_statistic(name, step, "channel_std")
        return np.asarray(sd, dtype=np.float64).reshape(-1) ** 2 if isinstance(sd, np.ndarray) else None

    def _step_square(self, trial: TrialView, name: str, step: int) -> float | None:
        """The mean square of a one-value-per-sample input at one step (raw, else its saved
        `channel_mean` and `channel_std`)."""
        x = trial.raw(name, step)
        if x is not None:
            x = np.asarray(x, dtype=np.float64)
            return float(np.mean(x * x)) if x.size else None
        mean = trial.saved_statistic(name, step, "channel_mean")
        sd = trial.saved_statistic(name, step, "channel_std")
        if (
            not (isinstance(mean, np.ndarray) and isinstance(sd, np.ndarray))
            or mean.size != 1
            or sd.size != 1
        ):
            return None
        return float(mean.reshape(-1)[0] ** 2 + sd.reshape(-1)[0] ** 2)

    def _noise_scaled(self, trial: TrialView, step: int, name: str, live: np.ndarray, final: bool) -> bool:
        """Whether the input's spread is noise of the level another input gives: x = d + c z
        with c a one-value-per-sample input (a noise level sigma) and z unit-variance noise,
        as consistency models and EDM feed a denoiser (sigma up to 80: the model scales its
        input by c_in = 1 / sqrt(sigma^2 + sigma_data^2) itself). Then at every step each
        feature's variance is the data part's plus the mean of c^2 over the batch: the
        residuals r_k = var_k - mean_k(c^2) of the training steps so far estimate the data
        part's variance v. Explained when a two-sided t interval (level 1%) on v from at
        least `_NOISE_STEPS` steps meets [0, `threshold_std`^2] for every live feature: the data
        part is (or may be) normalized, and the noise level accounts for the rest. A data part
        far outside it (inputs x255 under the same noise, a timestep whose square says nothing
        of the spread) refutes it. With fewer steps the judgement waits (`_deferred`), except
        at the run's end."""
        conditions = self._conditions(trial, name, step)
        if not conditions:
            return False
        train = bool(trial.steps(Mode.TRAIN))
        steps = [
            s for s in trial.tensor(name).steps()
            if s <= step and (not train or trial.mode(s) == Mode.TRAIN)
        ]  # fmt: skip
        for cond in conditions:
            rows = []
            for s in steps:
                var = self._step_variances(trial, name, s)
                sq = self._step_square(trial, cond, s) if trial.has_tensor(cond) else None
                if var is None or sq is None or var.shape != live.shape:
                    continue
                rows.append(var - sq)
            if len(rows) < _NOISE_STEPS:
                if not final and len(rows) == len(steps):  # every step so far: wait for more
                    self._deferred = True
                    return True
                continue
            r = np.asarray(rows)[:, live]
            k = len(r)
            half = detect.t_quantile(_NOISE_LEVEL / 2, k - 1) * r.std(axis=0, ddof=1) / math.sqrt(k)
            mid = r.mean(axis=0)
            if np.all((mid - half <= self.threshold_std**2) & (mid + half >= 0)):
                return True
        return False

    def _is_condition(self, trial: TrialView, name: str, step: int) -> bool:
        """One value per sample, shape (N,) or (N, 1), beside another input: a timestep, a
        noise level, a class id."""
        layout = trial.layout(name, step)
        if layout is None or len(layout[1]) not in (1, 2) or layout[1][1:] not in ((), (1,)):
            return False
        others = trial.names(None, regex=self.regex) if self.regex else trial.names("inputs")
        return any(n != name for n in others)

    def _is_image(self, trial: TrialView, name: str, step: int) -> bool:
        layout = trial.layout(name, step)
        return layout is not None and len(layout[1]) >= 4
