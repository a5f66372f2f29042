"""Frozen parameters an optimizer holds, with evidence that they were meant to train: the
`FrozenHeld` part of the two-line PyTorch hook's statistics (`torch_defaults.StepStatistics`),
for `frozen_parameter_in_optimizer`.

A parameter with `requires_grad` False gets no gradient and the optimizer skips it: it never
trains, and nothing fails. Freezing on purpose is common and healthy (fine-tuning, adapters,
LoRA, a linear probe), and many scripts hand the optimizer `model.parameters()` frozen parts
and all, so a frozen parameter in the optimizer is no evidence by itself. Three facts are, each
recorded as `frozen_held/<parameter>` (`sum`: the code) at the TRAIN statistics steps where it
holds, for a parameter of a registered model that the stepping optimizer holds and that is
frozen when the step ends:

- `SELECTED` (1): the optimizer was given a selection of the model's parameters (it leaves
  out some of the model's frozen parameters: the user chose what trains) and this frozen one
  is in it: chosen to train, frozen anyway (a freezing loop re-run after new layers were put
  in; adapters frozen with the backbone).
- `AT_INIT` (2): the parameter of a Linear, convolution or recurrent layer is still at
  PyTorch's default initialization: uniform draws on [-b, b], b = 1 / sqrt(fan_in) (a Linear's
  or convolution's weight and bias) or 1 / sqrt(hidden_size) (LSTM, GRU, RNN and their cells):
  every value within b, the largest near b, and max^2 / variance near 3, as uniform draws
  give (n >= 128 values). Any training pushes some of the values near the ends beyond b.
  Nobody freezes a layer at its random initialization in a model that trains (a pretrained
  backbone is trained); a freeze meant for a warm start and never undone does. The weight
  of an embedding (`nn.Embedding`, `nn.EmbeddingBag`; its padding row left out) likewise,
  at PyTorch's default N(0, 1) or the N(0, 0.02) of GPT/BERT-style inits: a normality test
  (mean, variance and kurtosis each within 5 standard errors of fresh draws': 0, sigma^2,
  3), and no spike: its largest singular value within the Tracy-Widom law of i.i.d. draws.
  A pretrained or trained table is not fresh draws (its rows moved together along the
  directions their gradients share, its variance and tails with them), nor is a sinusoidal
  table (kurtosis 1.5, and a few directions).

- `IDLE` (3): the optimizer that holds it stepped with every parameter it holds frozen: its
  step changes nothing (a GAN's `requires_grad` toggles for the discriminator's update pasted
  into the generator's, so the generator is frozen at its own step). A freeze for a warm-up,
  with an optimizer of its own stepped anyway, ends: `frozen_parameter_in_optimizer` judges
  this one when the run ends, as `AT_INIT`.

None is claimed of a parameter that no optimizer holds, one that trains, a pretrained
frozen part handed over with `model.parameters()` (its weights are no longer their init's
draws), norms and tables of the model's own (sinusoidal position tables are not judged).
Cost: at the statistics steps, for the frozen parameters an optimizer holds only; a parameter
found trained-looking is not looked at again.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import torch
from torch import nn

from mldbg.frameworks.torch_sharded import is_sharded

SELECTED = 1
AT_INIT = 2
IDLE = 3
_LAYERS = (nn.Linear, nn.modules.conv._ConvNd, nn.RNNBase, nn.RNNCellBase)
_MIN_VALUES = 128
_UNIFORM_RATIO = 4.0  # max^2 / variance: 3 for uniform draws (sampling: < 4 at n >= 128), ~2 ln n trained
_EMBEDDING_STDS = (1.0, 0.02)  # nn.Embedding's default N(0, 1); GPT/BERT's initializer_range
_NORMAL_Z = 5.0  # standard errors (TW scales) fresh draws may stray: a miss ~1e-4, the spike's tail
_NORMAL_MAX_VALUES = 1 << 20  # a larger table is judged on an even subsample of this many
_SPIKE_ROWS = 2048  # rows of a larger table read for its top singular value (an even subsample)
_POWER_STEPS = 100  # power iterations for it (an underestimate only ever says "at init")


class FrozenHeld:
    """Knows which module owns each parameter of the watched models; `judge` names the frozen
    parameters an optimizer holds that show one of the two facts."""

    def __init__(self) -> None:
        self._at_init: dict[int, Callable[[torch.Tensor], bool]] = {}  # parameter id -> its init's test
        self._trained: set[int] = set()  # frozen parameters found not at their initialization
        self._fresh: dict[int, int] = {}  # parameter id -> its version when found at its initialization

    def watch(self, model: nn.Module) -> None:
        for module in model.modules():
            if isinstance(module, (nn.Embedding, nn.EmbeddingBag)):
                skip = getattr(module, "padding_idx", None)  # its row is zeros, not a draw
                self._at_init.setdefault(id(module.weight), partial(_at_normal_init, skip=skip))
                continue
            bound = _default_bound(module)
            if bound is None:
                continue
            for p in module.parameters(recurse=False):
                self._at_init.setdefault(id(p), partial(_at_default_init, bound=bound))

    def judge(
        self, params: list[tuple[str, nn.Parameter]], held: set[int], idle: set[int] | None = None
    ) -> list[tuple[str, int]]:
        """(name, code) of the frozen parameters among `params` (one model's) that the
        optimizer (`held`: its parameters' ids; `idle`: those of an optimizer that stepped with
        every one frozen) holds and that show a fact of the module doc."""
        frozen = [(name, p) for name, p in params if not p.requires_grad]
        if not frozen:
            return []
        kept = [(name, p) for name, p in frozen if id(p) in held]
        if not kept:
            return []
        selected = len(kept) < len(frozen)  # other frozen parameters of the model left out
        found = []
        for name, p in kept:
            if selected:
                found.append((name, SELECTED))
            elif self._fresh_draws(p):
                found.append((name, AT_INIT))
            elif idle and id(p) in idle:
                found.append((name, IDLE))
        return found

    def _fresh_draws(self, p: nn.Parameter) -> bool:
        """Is `p` still at its layer's default initialization (`AT_INIT`)? Once found trained,
        never asked again; found fresh, not again while unchanged in place."""
        if id(p) not in self._at_init or id(p) in self._trained:
            return False
        version = getattr(p, "_version", None)  # unchanged in place since: the same verdict
        if (version is not None and self._fresh.get(id(p)) == version) or self._at_init[id(p)](p):
            if version is not None:
                self._fresh[id(p)] = version
            return True
        self._trained.add(id(p))
        return False


def _default_bound(module: nn.Module) -> float | None:
    """b of PyTorch's default init U(-b, b) of the layer's parameters (None: not such a layer)."""
    try:
        if isinstance(module, (nn.RNNBase, nn.RNNCellBase)):
            return 1 / math.sqrt(module.hidden_size) if module.hidden_size > 0 else None
        if isinstance(module, (nn.Linear, nn.modules.conv._ConvNd)):
            fan_in, _ = nn.init._calculate_fan_in_and_fan_out(module.weight)
            return 1 / math.sqrt(fan_in) if fan_in > 0 else None
    except (AttributeError, ValueError, TypeError):  # a lazy or unusual layer
        return None
    return None


def _at_default_init(p: torch.Tensor, bound: float) -> bool:
    """Do the values of `p` look like fresh uniform draws on [-bound, bound]? (A sharded
    parameter: this rank's shard, read locally; a reduction over the DTensor would be a
    collective that the other ranks, which record no statistics, never join.)"""
    try:
        with torch.no_grad():
            local = p.to_local() if is_sharded(p) else p  # type: ignore[attr-defined]
            if local.numel() < _MIN_VALUES or not local.is_floating_point() or local.is_sparse:
                return False
            x = local.detach().float().reshape(-1)
            lo, hi, var, mean = (
                float(v) for v in torch.stack([x.min(), x.max(), x.var(), x.mean()]).tolist()
            )
    except Exception:  # a sharded or meta parameter: not judged (never break the training)
        return False
    top = max(-lo, hi)
    if not (var > 0 and 0.9 * bound <= top <= bound * (1 + 1e-5)):
        return False
    return min(-lo, hi) >= 0.9 * bound and abs(mean) <= 0.1 * bound and top * top / var <= _UNIFORM_RATIO


def _at_normal_init(p: torch.Tensor, skip: int | None = None) -> bool:
    """Do the values of an embedding table `p` (without its padding row `skip`) look like
    fresh draws of N(0, s^2), s one of `_EMBEDDING_STDS`? Mean, variance and kurtosis each
    within `_NORMAL_Z` standard errors of the draws' (s / sqrt(n), s^2 sqrt(2 / (n - 1)),
    sqrt(24 / n)). A table that trained moved its rows: its variance and tails left these."""
    try:
        with torch.no_grad():
            local = p.to_local() if is_sharded(p) else p  # type: ignore[attr-defined]
            if local.dim() != 2 or not local.is_floating_point() or local.is_sparse:
                return False
            rows = local.detach()
            if skip is not None and -rows.shape[0] <= skip < rows.shape[0]:
                keep = torch.ones(rows.shape[0], dtype=torch.bool, device=rows.device)
                keep[skip] = False
                rows = rows[keep]
            x = rows.float().reshape(-1)
            if x.numel() > _NORMAL_MAX_VALUES:
                x = x[:: -(-x.numel() // _NORMAL_MAX_VALUES)]
            n = x.numel()
            if n < _MIN_VALUES:
                return False
            mean = x.mean()
            d = x - mean
            var = d.square().mean()
            mean_f, var_f, m4 = (float(v) for v in torch.stack([mean, var, d.pow(4).mean()]).tolist())
    except Exception:  # a sharded or meta parameter: not judged (never break the training)
        return False
    if not (var_f > 0 and math.isfinite(m4)):
        return False
    kurtosis = m4 / (var_f * var_f)
    if abs(kurtosis - 3) > _NORMAL_Z * math.sqrt(24 / n):
        return False
    return any(
        abs(mean_f) <= _NORMAL_Z * s / math.sqrt(n)
        and abs(var_f / (s * s) - 1) <= _NORMAL_Z * math.sqrt(2 / (n - 1))
        for s in _EMBEDDING_STDS
    ) and not _spiked(rows)


def _spiked(rows: torch.Tensor) -> bool:
    """Whether the table's largest singular value stands above what i.i.d. draws give: for a
    V x d table of independent draws, s_max^2 / variance lies within the Tracy-Widom law at
    Johnstone's centre (sqrt(V - 1) + sqrt(d))^2 and scale (sqrt(V - 1) + sqrt(d))
    (1/sqrt(V - 1) + 1/sqrt(d))^(1/3). Training puts structure into a table (rows that move
    together along the few directions their gradients share): a spike, even after a short
    training whose moments still look like the draws'. Bar: `_NORMAL_Z` scales above the
    centre (TW1 beyond 5: ~1e-4). Rows are subsampled evenly to `_SPIKE_ROWS`; s_max^2 by
    power iteration on the Gram matrix (an eigendecomposition of a 768 x 768 Gram takes seconds
    on a busy CPU; the iteration's estimate is never above it, so it errs towards "at init")."""
    x = rows.float()
    if x.shape[0] > _SPIKE_ROWS:
        x = x[:: -(-x.shape[0] // _SPIKE_ROWS)]
    if x.shape[0] < x.shape[1]:
        x = x.T
    n, p = x.shape
    if p < 2:
        return False
    try:
        with torch.no_grad():
            x = x.double()
            gram = x.T @ x
            v = torch.randn(p, 1, generator=torch.Generator().manual_seed(0), dtype=gram.dtype).to(
                gram.device
            )
            for _ in range(_POWER_STEPS):  # power iteration: a Rayleigh quotient is never above s_max^2
                v = gram @ v
                v = v / v.norm().clamp_min(1e-300)
            top2 = float((v.T @ gram @ v).squeeze())  # s_max^2 (a spike converges fast: its gap is wide)
            var = float(x.square().mean())
    except Exception:  # an unusual device or dtype: no spike shown
        return False
    if not (var > 0 and math.isfinite(top2)):
        return False
    root = math.sqrt(n - 1) + math.sqrt(p)
    scale = root * (1 / math.sqrt(n - 1) + 1 / math.sqrt(p)) ** (1 / 3)
    return top2 / var > root * root + _NORMAL_Z * scale
