"""poor_weight_initialization: an init that breaks training from the first step."""

from __future__ import annotations

import math
import re

import numpy as np

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.builtin.all_zero import cut_off
from mldbg.rules.detect import ALPHA, z_normal
from mldbg.rules.select import model_of, model_prefixes, short_list
from mldbg.rules.stats import is_input
from mldbg.rules.updates import blown_weight
from mldbg.rules.view import TrialView

_ACTIVATIONS = ("relu_activations", "tanh_activations", "sigmoid_activations")
# parameters that are not fan-in layers: embedding tables and positional embeddings
_NOT_LAYERS = r"(?i)embed|(^|[._/])(pos|wpe|wte)(_?emb\w*|itional\w*)?($|[._])"
# normalization layers (LayerNorm, BatchNorm, GroupNorm, RMSNorm; GPT-2's ln_1, ln_f; bn1):
# they restore the variance a small init takes away
_NORM = r"(?i)norm|(^|[._/])(ln|bn|gn)_?(\d+|f)?($|[._/])"
# an attention's query and key projections: the scores are bilinear in them, so each one's
# gradient is scaled by the other's weights (~1e-6 at BERT's std 0.02) by construction
_QUERY_KEY = r"(?i)(^|[._/])(query|key|[qk]_?proj|[qk]_?lin|to_[qk]|w_?[qk])($|[._/])"
# a recurrent layer's gate weights (PyTorch's LSTM, GRU, RNN and their cells: weight_ih_l0,
# weight_hh; Keras' recurrent_kernel): each layer down multiplies the gradient by the gates'
# derivatives, and the first layer's input is an embedding (the word-LM example inits it
# +-0.1), so their gradients are 10-100x below the decoder's by construction
_RECURRENT = r"(?i)(^|[._/])(weight_(ih|hh)(_l\d+)?(_reverse)?|recurrent_kernel)($|[._/])"
# a layer's weight as frameworks name it (PyTorch's `weight`, `weight_ih_l0`, `in_proj_weight`;
# Keras' and Flax's `kernel`; a hand-written `W`, `W1`, `w_q`, `W_enc`): what var(w) x fan-in is the
# gain of. Other parameters (a selective SSM's `A_log`, RWKV's `decay` and `mix_k`, `D`, a
# `cls_token`, a `logit_scale`) are used elementwise or added, not multiplied as a fan-in
# matrix: their "gain" means nothing (Mamba's A_log = log(1..16) per row: x17 "explodes")
_LAYER_WEIGHT = r"(?i)(weight|kernel)[^./]*$|(^|[._/])w(_?[a-z0-9]{1,5})?$"


#: how often identical incoming weights (a zero or constant init) mean a real defect: no
#: training is meant to start with copies of one neuron. The rule's other tests (a degenerate
#: gradient spread, a gain or a variance out of band) read a scale that many healthy designs
#: set on purpose: their lone findings weigh the rule's reliability, below the reporting bar.
IDENTICAL_RELIABILITY = 0.9
#: ... and ReLU layers whose pre-activations start shifted far below 0 (`_silenced`): a
#: default init (symmetric weights, zero or small symmetric biases, BatchNorm's beta 0) centres
#: them; most of a layer silent before any update is an init's (or a shift's) doing
SILENCED_RELIABILITY = 0.8
# a ReLU layer silenced: its pre-activations' mean below -`_SILENT_Z` of their standard
# deviations (a normal pre-activation is then <= 0 for more than 90% of its entries)
_SILENT_Z = 1.2816


def _normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2))


def _silenced(trial: TrialView, step: int) -> list[tuple[str, float, float]] | None:
    """The ReLU layers whose recorded inputs (pre-activations) at `step` have a mean below 0
    by more than `_SILENT_Z` of their standard deviation, and beyond what an init symmetric
    about 0 gives by chance (`dead_relu`'s one-sided z-test: under i.i.d. units symmetric
    about 0 the mean over the n units, n the smallest axis but the batch, is 0 within
    sqrt(var / n), at `detect.ALPHA` shared by the layers): (name, mean, variance) each.
    None when no ReLU input has its mean and variance at `step` (nothing judged)."""
    names = [n for n in trial.names("relu_activations", step=step) if is_input(n)]
    found: list[tuple[str, float, float]] = []
    judged = False
    for name in names:
        m, v = trial.statistic(name, step, "mean"), trial.statistic(name, step, "variance")
        layout = trial.layout(name, step)
        if not isinstance(m, float) or not isinstance(v, float) or layout is None or len(layout[1]) < 2:
            continue
        if not (math.isfinite(m) and math.isfinite(v)) or v <= 0:
            continue
        judged = True
        n = max(1, min(layout[1][1:]))
        if m < -_SILENT_Z * math.sqrt(v) and m < -z_normal(ALPHA / len(names)) * math.sqrt(v / n):
            found.append((name, m, v))
    return found if judged else None


def _variance(trial: TrialView, name: str, step: int) -> float | None:
    """A tensor's variance at `step`: its `variance`, else from its per-channel means and
    standard deviations (what the hook records of model inputs)."""
    v = trial.statistic(name, step, "variance")
    if isinstance(v, float):
        return v
    mean, std = (
        trial.saved_statistic(name, step, "channel_mean"),
        trial.saved_statistic(name, step, "channel_std"),
    )
    if isinstance(mean, np.ndarray) and isinstance(std, np.ndarray) and mean.size and mean.size == std.size:
        return float(np.mean(np.square(std, dtype=np.float64)) + np.var(mean.astype(np.float64)))
    return None


def _module(name: str) -> str:
    return name.rsplit(".", 1)[0]


def _below_zeroed(name: str, zeroed: set[str]) -> bool:
    """A parameter of a module that holds a factor zeroed on purpose (`lora_A` beside a zero
    `lora_B`): its gradient passes through that factor."""
    return any(z != name and _module(z) == _module(name) for z in zeroed)


def _fans(w: np.ndarray) -> tuple[float, float] | None:
    """(smaller, larger) of the two fan-in candidates: frameworks put the input axis first
    (Keras, JAX) or second (PyTorch), so a layer's gain is bounded with both."""
    if w.ndim < 2 or w.shape[0] < 2 or w.shape[-1] < 2:
        return None
    c1, c2 = w.size / w.shape[0], w.size / w.shape[-1]
    return min(c1, c2), max(c1, c2)


def _identical(w: np.ndarray) -> bool:
    """Every neuron's incoming weights are one repeated value, or all neurons are the same."""
    if w.ndim < 2 or w.shape[0] < 2:
        return False
    rows = w.reshape(w.shape[0], -1)
    if rows.shape[1] > 1 and bool(np.all(rows.max(axis=1) == rows.min(axis=1))):
        return True
    return bool(np.all(rows == rows[0]))


def _is_norm_scale(trial: TrialView, name: str, step: int) -> bool:
    """A normalization layer's scale: named like one, or a 1-D weight of several elements
    (BatchNorm, LayerNorm, GroupNorm, RMSNorm in an `nn.Sequential` are named `1.weight`)."""
    if re.search(_NORM, name):
        return True
    layout = trial.layout(name, step)
    if layout is not None:
        return len(layout[1]) == 1 and layout[1][0] > 1
    w = trial.raw(name, step)
    return w is not None and w.ndim == 1 and w.size > 1


def _gain_from_statistics(trial: TrialView, name: str, step: int) -> tuple[float, float] | None:
    """(smaller, larger) var(w) x fan-in of a weight from its saved `l2` and shape (the
    mean square is l2^2 / size); None without them or for a weight of fewer than 2 axes."""
    layout = trial.layout(name, step)
    l2 = trial.saved_statistic(name, step, "l2")
    if layout is None or layout[0] != "f" or not isinstance(l2, float) or not math.isfinite(l2):
        return None
    shape = layout[1]
    if len(shape) < 2 or shape[0] < 2 or shape[-1] < 2:
        return None
    size = math.prod(shape)
    mean_sq = l2 * l2 / size
    c1, c2 = size / shape[0], size / shape[-1]
    return mean_sq * min(c1, c2), mean_sq * max(c1, c2)


def _constant_rows(trial: TrialView, name: str, step: int) -> bool | None:
    """`_identical` from saved statistics: every row constant (`row_range` 0, over rows of
    more than one element), or every row the same (`col_range` 0). Needs the record's shape:
    a 1-D weight (a norm layer's scale, all ones) has constant rows by construction.
    None when the step saved neither statistic: nothing to judge."""
    layout = trial.layout(name, step)
    if layout is None or layout[0] != "f" or len(layout[1]) < 2 or layout[1][0] < 2:
        return False
    rows = trial.saved_statistic(name, step, "row_range")
    cols = trial.saved_statistic(name, step, "col_range")
    if not isinstance(rows, float) and not isinstance(cols, float):
        return None
    wide = math.prod(layout[1][1:]) > 1
    return (isinstance(rows, float) and rows == 0 and wide) or (isinstance(cols, float) and cols == 0)


@register
class PoorWeightInitialization(Rule):
    """In the first `steps` training steps, for `patience` consecutive saved steps:
    - weights feeding a neuron are identical (zero or constant init: the neurons stay copies
      of each other and the layer learns like a single unit), or
    - a weight gradient's distribution is degenerate (5th to 95th percentile spread below
      `distribution_range`, and below a tenth of the median spread of the model's weight
      gradients, or exactly 0: small in absolute terms is not degenerate, the gradients'
      scale is the loss's, which a scale-free optimizer ignores: a loss multiplied by 1e-4
      under Adam gives spreads of 1e-6 and trains as well; a GAN's generator at DCGAN's init
      has spreads ~1e-4), or
    - the variance of activation inputs changes across the `L` layers by more than
      `threshold` per layer (max/min > `threshold` ** (L-1)), or a layer's weights scale
      their input's variance by more than `threshold` or less than 1/`threshold`
      (var(w) x fan-in): the signal explodes or dies on its way through the network.

    SageMaker's max/min over all layers > `threshold` fires on healthy deep nets (PyTorch's
    default init shrinks the variance ~3-6x per layer); per layer it does not. Embedding
    tables (the PyTorch hook puts the weights of `nn.Embedding` and `nn.EmbeddingBag` in the
    `embeddings` collection, whatever their name; other runs: named like "embed") and
    positional embeddings (`pos`, `pos_emb`, `wpe`...) are left out: their rows are not
    fan-in layers (PyTorch's N(0, 1) default init is healthy there). In a model with
    normalization layers (weights named like `norm`, `LayerNorm`, `ln_1`, `bn1`, or any 1-D
    weight of several elements: a BatchNorm inside an `nn.Sequential` is `1.weight`) a fading
    signal is not reported (a weight's gain below 1/`threshold`, activation inputs across
    layers): each normalization restores the variance (a transformer's std-0.02 init scales it
    by ~0.01 per layer, healthy with LayerNorm after each sublayer; so does DCGAN's N(0, 0.02)
    with BatchNorm); an exploding gain still is. Left out of the distribution check: the
    gradients of an attention's query and key projections (`query`, `key`, `q_proj`,
    `k_proj`...: the scores are bilinear in them, so at a small init each one's gradient is
    scaled by the other's weights), of a recurrent layer's gate weights (`weight_ih_l0`,
    `weight_hh_l0`, `recurrent_kernel`: each LSTM/GRU layer down scales them by the gates'
    derivatives, and PyTorch's word-LM example feeds the first one an embedding initialized
    +-0.1), of normalization scales, and of a weight of one element (a scalar kept in a
    layer, Dragonnet's epsilon `nn.Linear(1, 1)`: one value has a spread of 0 by construction). Several models on one hook (a GAN's generator and
    discriminator, told apart by their name prefix) are judged each on its own: their
    activations are not one chain of layers, their gradients have scales of their own.

    A weight gradient exactly 0 because the path from its layer to the loss is cut for now
    (`all_zero.cut_off`: its bias's gradient 0 too, other layers learning, no dead or zero
    part in the run at that step: Dreamer's KL under its free-nats floor leaves the prior
    without gradient) is left out of the distribution check: its spread says nothing of the
    init. A dead network (zero init, a bias at -10) shows itself and is still judged.

    Only the steps before the first update that blew a weight up are judged (a weight moved by
    half its size or more, `updates.BLOWN`: a learning rate far too high): what
    the layers look like after it is that update's doing, not the initialization's.

    A gradient 10x below its model's others is blamed on the init only where the init is out
    of band: some weight of that model has a gain outside 1/`threshold`..`threshold` (from the
    raw weights, or from the `l2` and shape the two-line hook records), or the gain is not
    known. In a model whose weights all preserve the variance (PyTorch's default init: gains
    of about 1/3), a small gradient is the architecture's: a noisy-gate MoE's router and its
    noise weights reach the loss only through the routing (a top-1 gate's renormalized weight
    is 1 whatever the logits), the noise weights' gradient 13x below the model's median (the
    router's 5x). A tiny init (std 1e-5: gains ~1e-9) is still found; a spread of exactly 0
    is degenerate at any init.

    What a gain or a variance says depends on what the layers do with it, so both are judged
    only where their meaning is known:
    - a fading gain (below 1/`threshold`) predicts the next layer's input variance only through
      an activation the hook knows (ReLU, Tanh, Sigmoid modules: their inputs are recorded in
      the `*_activations` collections); a model with none of them (SIREN's sin(30 x) layers,
      whose init scales the variance by x0.0022 by design, a custom activation) is not judged
      on it (an exploding gain still is);
    - the activation inputs' variance across layers is the init's doing only where the init is
      out of band, as for the gradients: in a model whose weights all have gains inside
      1/`threshold`..`threshold`, a spread across layers comes from its inputs and its head (a
      TD3 actor fed raw pendulum states, default-initialized: 1.86 at the first ReLU, 0.014 at
      the output Tanh, 133x over 3 layers).

    A gain is a fan-in layer's: only weights named as frameworks name a layer's (`weight`,
    `weight_ih_l0`, `in_proj_weight`, `kernel`, a hand-written `W`, `W1`, `w_q`) have one. A
    parameter used elementwise or added (a selective SSM's `A_log` = log(1..16) per row, RWKV's
    `decay` and `mix_k`, `D`, a `cls_token`) would show a meaningless "gain" (Mamba's A_log:
    x17), which made the model's init out of band and blamed the SSM's small decay gradients
    on it. A model of one layer (a bigram's logit table: makemore's W = torch.randn(27, 27)
    times a one-hot row) is no chain for its signal to explode through: its gain is reported
    only where its measured output's variance (`model_output_N`) is outside
    1/`threshold`..`threshold` (a one-hot input's per-feature variance is 1/27: logits of
    variance 1; the same layer on standardized dense features: 27, reported).

    Raw tensors are read when saved; without them, the statistics a two-line hook records:
    `row_range` = 0 (every neuron's incoming weights one value; `col_range` = 0 too when
    saved: all neurons the same), the gradient's `quantile(5.0)` and `quantile(95.0)` (of a
    fixed subsample), and the activation inputs' `variance`. The per-layer gain (var(w) x
    fan-in) needs the weight's shape and values: raw weights only.
    """

    needs = ("weights",)
    reads = {
        "weights": ("row_range", "col_range", "l2"),
        "gradients": ("quantile(5.0)", "quantile(95.0)"),
        **{c: ("variance",) for c in _ACTIVATIONS},
    }
    threshold: float = 10.0
    distribution_range: float = 0.001
    patience: int = 5
    steps: int = 10
    suggestion = (
        "Use a variance-preserving random init: torch.nn.init.kaiming_normal_ (ReLU) or "
        "xavier_uniform_ (tanh/sigmoid), never all zeros or one constant for weights; keep biases "
        "at 0 or small. Normalized inputs and BatchNorm/LayerNorm make training less sensitive to it."
    )

    def reset(self) -> None:
        super().reset()
        self._done = False  # judged: the first `steps` are over, or it fired
        self._streak: dict[str, int] = {}  # condition -> consecutive judged steps where it held
        # condition -> training steps that had the data to judge it (statistics such as the
        # weights' row_range may come at a slower cadence than the loss)
        self._seen: dict[str, int] = {}
        self._last: dict[str, tuple[str, list[str]]] = {}  # condition -> (message, tensors) last seen
        self._last_step = -1  # the last training step looked at (-1: none yet)
        self._zeroed: dict[str, bool] = {}  # weight -> exactly 0 at its first saved training step
        # gradient -> exactly 0 at its first saved training step (None: not recorded there)
        self._grad_zeroed: dict[str, bool | None] = {}

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """Every step once the verdict is in (`check` has nothing left to do); none before."""
        return len(steps) if self._done else 0

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN or self._done:
            return None
        if self._last_step < 0:
            self._last_step = step
        if trial.mode_step(step) >= self.steps or blown_weight(trial, step) is not None:
            return self._verdict(trial, end=True)
        self._last_step = step
        hits, judged = self._conditions(trial, step)
        for key in judged:
            self._seen[key] = self._seen.get(key, 0) + 1
            if key not in hits:
                self._streak[key] = 0
        for key, detail in hits.items():
            self._streak[key] = self._streak.get(key, 0) + 1
            self._last[key] = detail
        return self._verdict(trial, end=False)

    def finish(self, trial: TrialView) -> Finding | None:
        if self._done or self._last_step < 0:
            return None
        return self._verdict(trial, end=True)

    def _verdict(self, trial: TrialView, end: bool) -> Finding | None:
        """During the first `steps`: what held `patience` times in a row. At their end (few
        saved steps): what held at every saved step, at least twice (an init-scale problem:
        once)."""
        if end:
            self._done = True
            fired = [
                k for k, n in self._streak.items()
                if n == self._seen.get(k) and (n >= 2 or k == "scale") and n > 0
            ]  # fmt: skip
        else:
            fired = [k for k, n in self._streak.items() if n >= self.patience]
        fired = [k for k in fired if self.first(k)]
        if not fired:
            return None
        self._done = True
        messages = [self._last[k][0] for k in fired]
        tensors = sorted({t for k in fired for t in self._last[k][1]})
        return self.finding(
            trial, self._last_step,
            "; ".join(messages) + f" (at {max(self._streak[k] for k in fired)} consecutive saved steps of the first {self.steps})",
            tensors=tensors,
            reliability=IDENTICAL_RELIABILITY
            if "identical" in fired
            else SILENCED_RELIABILITY
            if "silenced" in fired
            else None,
        )  # fmt: skip

    def _zero_at_first(self, trial: TrialView, weights: list[str]) -> set[str]:
        """The weights that were exactly 0 at their first saved training step. Found once per
        weight."""
        known = self._zeroed
        for name in weights:
            if name not in known:
                steps = trial.tensor(name).steps(Mode.TRAIN)
                l2 = trial.statistic(name, steps[0], "l2") if steps else None
                known[name] = isinstance(l2, float) and l2 == 0.0
        return {n for n in weights if known[n]}

    def _zero_started(self, trial: TrialView, weights: list[str]) -> set[str]:
        """The weights that were exactly 0 at their first saved training step beside a weight
        of the same module that was not (LoRA's B beside its A): a factor zeroed on purpose,
        not a broken init. A layer whose weights all start at 0 is still judged (identical
        weights)."""
        zero = self._zero_at_first(trial, weights)
        return {n for n in zero if any(_module(o) == _module(n) for o in weights if o not in zero)}

    def _first_gradient_zero(self, trial: TrialView, name: str) -> bool | None:
        """Whether a weight's gradient was exactly 0 at its first saved training step (None:
        not recorded). Found once per weight."""
        if name not in self._grad_zeroed:
            g = f"gradient/{name}"
            steps = trial.tensor(g).steps(Mode.TRAIN) if trial.has_tensor(g) else []
            l2 = trial.statistic(g, steps[0], "l2") if steps else None
            self._grad_zeroed[name] = (l2 == 0.0) if isinstance(l2, float) else None
        return self._grad_zeroed[name]

    def _blocked_upstream(self, trial: TrialView, weights: list[str], prefixes: list[str]) -> set[str]:
        """The weights upstream of a layer zero-initialized on purpose: their gradient was
        exactly 0 at the first step, in a model where some layer's weight started at exactly 0
        and learned from the first step (its own gradient was not 0) while the others did not
        start at 0 (the PyTorch STN tutorial's localization head: weight 0, identity bias;
        adaLN-zero, a zero-initialized output head). A zero layer passes no gradient to its
        input (W^T delta = 0), so what lies before it gets none at step 0 and then gradients
        that grow with that layer's weights from 0: small by design, not a broken init. A
        model initialized to 0 throughout, or gradients stopped by dead ReLUs (no zero layer
        beside them), are not excused."""
        zero = self._zero_at_first(trial, weights)
        models: set[str] = set()
        for n in zero:
            model = model_of(n, prefixes)
            others = [o for o in weights if o not in zero and model_of(o, prefixes) == model]
            if others and self._first_gradient_zero(trial, n) is False:
                models.add(model)
        return {
            n for n in weights
            if n not in zero and model_of(n, prefixes) in models and self._first_gradient_zero(trial, n)
        }  # fmt: skip

    def _output_keeps_scale(self, trial: TrialView, step: int) -> bool:
        """The models' measured outputs keep their inputs' variance within 1/threshold**2 ..
        threshold**2 (where both are recorded at `step`): weights of low gain are compensated
        in the forward."""
        pairs = [
            (n, n.replace("model_output_", "model_input_"))
            for n in trial.names("outputs", step=step)
            if re.search(r"model_output_\d+$", n)
        ]
        for out, inp in pairs:
            vo, vi = trial.statistic(out, step, "variance"), _variance(trial, inp, step)
            if isinstance(vo, float) and isinstance(vi, float) and vi > 0 and math.isfinite(vo / vi):
                return bool(self.threshold**-2 <= vo / vi <= self.threshold**2)
        return False

    def _output_in_band(self, trial: TrialView, step: int) -> bool:
        """Every model output measured at `step` (`model_output_N`) has a variance inside
        1/`threshold`..`threshold`; False when none is measured."""
        found = False
        for out in trial.names("outputs", step=step):
            if re.search(r"model_output_\d+$", out):
                v = trial.statistic(out, step, "variance")
                if not isinstance(v, float) or not 1 / self.threshold <= v <= self.threshold:
                    return False
                found = True
        return found

    def _in_band(self, lo: float, hi: float, normalized: bool = False) -> bool:
        """A weight's gain (var(w) x fan-in, bounded with both fan-in candidates) inside
        1/`threshold`..`threshold`: it neither blows up nor kills the signal. In a model with
        normalization layers a fading gain is restored by the next normalization (a
        transformer's std-0.02 init whatever the width: BERT, GPT-2, BART), so only an
        exploding one is out of band there."""
        if normalized:
            return not lo > self.threshold
        return not (lo > self.threshold or hi < 1 / self.threshold)

    def _conditions(self, trial: TrialView, step: int) -> tuple[dict[str, tuple[str, list[str]]], set[str]]:
        """The conditions that held at `step`, and those the step had the data to judge."""
        hits: dict[str, tuple[str, list[str]]] = {}
        judged: set[str] = set()
        tables = set(trial.names("embeddings"))  # the hook's nn.Embedding weights, whatever their name
        weights = [n for n in trial.names("weights", step=step, exclude=_NOT_LAYERS) if n not in tables]
        prefixes = model_prefixes(trial)
        scales = {n for n in trial.names("weights", step=step) if _is_norm_scale(trial, n, step)}
        normalized = {model_of(n, prefixes) for n in scales}  # the models with normalization layers
        same: list[str] = []
        scale: list[tuple[str, float, str]] = []  # (weight, gain, as the message writes it)
        # per model: whether every weight whose gain is known has one inside
        # 1/threshold..threshold (a variance-preserving init), from the raw weights or the l2
        # and shape the hook records
        in_band: dict[str, bool] = {}
        zero = self._zero_started(trial, weights)
        blocked = self._blocked_upstream(trial, weights, prefixes)
        # the models whose forward runs through activations the hook knows (a gain's meaning)
        activated = {model_of(n, prefixes) for c in _ACTIVATIONS for n in trial.names(c)}
        trained = set(trial.names("gradients", step=step))
        fan_in: list[str] = []  # the fan-in layers whose gain is judged from raw weights
        for name in weights:
            if name in zero or f"gradient/{name}" not in trained:
                continue  # a factor zeroed on purpose (LoRA's B), a weight no gradient trains (an EMA codebook)
            w = trial.raw(name, step)
            if w is None:
                constant = _constant_rows(trial, name, step)
                if constant is not None:
                    judged.add("identical")
                if constant:
                    same.append(name)
                gain = _gain_from_statistics(trial, name, step) if re.search(_LAYER_WEIGHT, name) else None
                if gain is not None:
                    model = model_of(name, prefixes)
                    in_band[model] = in_band.get(model, True) and self._in_band(*gain, model in normalized)
                continue
            if w.dtype.kind != "f" or not np.all(np.isfinite(w)):
                continue
            judged.add("identical")
            if _identical(w):
                same.append(name)
                continue
            fans = _fans(w)
            if fans is None or (w.ndim == 3 and w.shape[0] == 1) or not re.search(_LAYER_WEIGHT, name):
                continue  # no fan-in layer's weight: no gain
            judged.add("scale")
            fan_in.append(name)
            mean_sq = float(np.mean(np.square(w, dtype=np.float64)))
            lo, hi = mean_sq * fans[0], mean_sq * fans[1]
            model = model_of(name, prefixes)
            in_band[model] = in_band.get(model, True) and self._in_band(lo, hi, model in normalized)
            if lo > self.threshold:
                scale.append((name, lo, f"x{lo:.3g}"))
            elif (
                hi < 1 / self.threshold
                and model_of(name, prefixes) not in normalized  # restored
                and model_of(name, prefixes) in activated  # else what follows the layer is unknown
            ):
                scale.append((name, hi, f"x{hi:.2g}"))
        if same:
            hits["identical"] = (
                f"identical weights feeding each neuron in {short_list(same)} (zero or constant init: "
                "the neurons stay copies of each other)",
                same,
            )
        fading = [n for n, gain, _ in scale if gain < 1]
        if fading and (len(fading) < 2 or self._output_keeps_scale(trial, step)):
            # one layer does not make a chain to fade through; a model whose measured output keeps
            # its input's scale multiplies inside its forward (SIREN's sin(30 x))
            scale = [s for s in scale if s[0] not in fading]
        if (
            len(scale) == 1
            and scale[0][1] > 1
            and fan_in == [scale[0][0]]
            and self._output_in_band(trial, step)
        ):
            # a model of one layer is no chain to explode through, and its measured output (that
            # layer's) has a variance inside 1/threshold..threshold: the gain met inputs of small
            # per-feature variance (makemore's bigram: W = torch.randn(27, 27) times a one-hot
            # row, an embedding lookup written as a matmul: logits of variance 1)
            scale = []
        if scale:
            hits["scale"] = (
                "weights scale their input's variance by "
                + ", ".join(f"{g} in {n}" for n, _, g in scale[:6])
                + f" (outside 1/{self.threshold:g}..{self.threshold:g}): the signal "
                + ("explodes" if any(gain > 1 for _, gain, _ in scale) else "fades")
                + " through the layers",
                [n for n, _, _ in scale],
            )
        flat: list[tuple[str, float]] = []
        spreads: dict[str, list[float]] = {}  # per model
        cut: frozenset[str] | None = None  # `cut_off`, read once
        for g in trial.names(
            "gradients",
            step=step,
            exclude=r"(?i)bias|" + "|".join(p[4:] for p in (_NOT_LAYERS, _QUERY_KEY, _RECURRENT)),
        ):
            if g.removeprefix("gradient/") in tables | scales:
                continue  # sparse by construction (tokens not in the batch); a normalization's scale
            if _below_zeroed(g.removeprefix("gradient/"), zero) or g.removeprefix("gradient/") in blocked:
                continue  # upstream of a factor or a layer zeroed on purpose (LoRA's A under B = 0): small by design
            if cut is None:
                cut = cut_off(trial, step)
            if g in cut:
                continue  # no gradient reaches the layer by design for now (a KL under its free-nats floor)
            layout = trial.layout(g, step)
            if layout is not None and (len(layout[1]) < 2 or math.prod(layout[1]) < 2):
                # a scalar or a vector (a temperature, a global bias), or one element in a layer's
                # shape (Dragonnet's epsilon, nn.Linear(1, 1)): its spread is 0 by construction
                continue
            x = trial.raw(g, step)
            if x is None:
                p5, p95 = (
                    trial.saved_statistic(g, step, "quantile(5.0)"),
                    trial.saved_statistic(g, step, "quantile(95.0)"),
                )
                if not isinstance(p5, float) or not isinstance(p95, float):
                    continue
            elif x.size < 2 or x.dtype.kind != "f":
                continue
            else:
                p5, p95 = np.percentile(x, [5, 95])
            judged.add("gradients")
            if math.isfinite(p95 - p5):
                spreads.setdefault(model_of(g, prefixes), []).append(float(p95 - p5))
            if math.isfinite(p95 - p5) and p95 - p5 < self.distribution_range:
                flat.append((g, float(p95 - p5)))
        # a gradient small in absolute terms is degenerate only next to its model's others, or
        # when all of that model's are flat (a GAN's two models have gradients of their own scale)
        kept = []
        for model, values in spreads.items():
            # scale-free: judged against the model's own gradients (a loss scaled by 1e-4 under
            # Adam scales every gradient alike, and trains as well); a spread of exactly 0 (90%
            # of the gradient one value: zero init) is degenerate at any scale
            # and a small gradient is the init's doing only where the init is out of band: in
            # a model whose weights all preserve the variance, a gradient 10x below the others
            # is the architecture's (an MoE's router and its noise reach the loss only through
            # the routing), not a broken init's
            typical = float(np.median(values))
            blame = in_band.get(model) is not True
            kept += [
                (g, r) for g, r in flat
                if model_of(g, prefixes) == model and ((blame and r < typical / 10) or r == 0)
            ]  # fmt: skip
        flat = kept
        if flat:
            hits["gradients"] = (
                "degenerate gradient distribution in "
                + ", ".join(f"{g} (5th-95th percentile spread {r:.2g})" for g, r in flat[:6])
                + f", below {self.distribution_range:g}",
                [g for g, _ in flat],
            )
        acts = [n for c in _ACTIVATIONS for n in trial.names(c, step=step) if is_input(n)]
        var: dict[str, float] = {}
        for n in acts:
            v = trial.statistic(n, step, "variance")
            if isinstance(v, float) and math.isfinite(v):
                var[n] = v
        by_model: dict[str, dict[str, float]] = {}
        for n, v in var.items():  # the layers of one model: a GAN's two models are not one chain
            by_model.setdefault(model_of(n, prefixes), {})[n] = v
        for model, layers in by_model.items():
            if len(layers) < 2 or model in normalized or in_band.get(model) is True:
                continue  # normalized, or an init in band: the spread is the inputs' and the head's
            judged.add("variance")
            hi_n, lo_n = max(layers, key=layers.__getitem__), min(layers, key=layers.__getitem__)
            ratio = layers[hi_n] / layers[lo_n] if layers[lo_n] > 0 else math.inf
            if ratio > self.threshold ** (len(layers) - 1) and "variance" not in hits:
                hits["variance"] = (
                    f"activation-input variance differs across {len(layers)} layers by {ratio:.3g}x "
                    f"({hi_n}: {layers[hi_n]:.3g}, {lo_n}: {layers[lo_n]:.3g}; more than {self.threshold:g}x per layer)",
                    [hi_n, lo_n],
                )
        silenced = _silenced(trial, step)
        if silenced is not None:
            judged.add("silenced")
        if silenced:
            hits["silenced"] = (
                "ReLU layers silenced from the start: "
                + ", ".join(
                    f"{n} (pre-activation mean {m:.3g}, {m / math.sqrt(v):.2f} standard deviations below 0: "
                    f"~{100 * _normal_cdf(-m / math.sqrt(v)):.0f}% of its outputs 0)"
                    for n, m, v in silenced[:6]
                )
                + " (a bias or a normalization's shift (BatchNorm's beta) initialized below 0)",
                [n for n, _, _ in silenced],
            )
        return hits, judged
