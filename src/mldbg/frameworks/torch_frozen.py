"""Frozen parameters an optimizer holds, with evidence that they were meant to train: the
`FrozenHeld` part of the two-line PyTorch hook's statistics (`torch_defaults.StepStatistics`),
for `frozen_parameter_in_optimizer`.

A parameter with `requires_grad` False gets no gradient and the optimizer skips it: it never
trains, and nothing fails. Freezing on purpose is common and healthy (fine-tuning, adapters,
LoRA, a linear probe), and many scripts hand the optimizer `model.parameters()` frozen parts
and all, so a frozen parameter in the optimizer is no evidence by itself. Two facts are, each
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
  backbone is trained); a freeze meant for a warm start and never undone does.

Neither is claimed of a parameter that no optimizer holds, one that trains, a pretrained
frozen part handed over with `model.parameters()` (its weights are no longer uniform draws),
embeddings, norms and tables of the model's own (sinusoidal position tables are not judged).
Cost: at the statistics steps, for the frozen parameters an optimizer holds only; a parameter
found trained-looking is not looked at again.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from mldbg.frameworks.torch_sharded import is_sharded

SELECTED = 1
AT_INIT = 2
_LAYERS = (nn.Linear, nn.modules.conv._ConvNd, nn.RNNBase, nn.RNNCellBase)
_MIN_VALUES = 128
_UNIFORM_RATIO = 4.0  # max^2 / variance: 3 for uniform draws (sampling: < 4 at n >= 128), ~2 ln n trained


class FrozenHeld:
    """Knows which module owns each parameter of the watched models; `judge` names the frozen
    parameters an optimizer holds that show one of the two facts."""

    def __init__(self) -> None:
        self._bound: dict[int, float] = {}  # parameter id -> its layer's default init bound
        self._trained: set[int] = set()  # frozen parameters found not at their initialization

    def watch(self, model: nn.Module) -> None:
        for module in model.modules():
            bound = _default_bound(module)
            if bound is None:
                continue
            for p in module.parameters(recurse=False):
                self._bound.setdefault(id(p), bound)

    def judge(self, params: list[tuple[str, nn.Parameter]], held: set[int]) -> list[tuple[str, int]]:
        """(name, code) of the frozen parameters among `params` (one model's) that the
        optimizer (`held`: its parameters' ids) holds and that show a fact of the module doc."""
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
            elif id(p) in self._bound and id(p) not in self._trained:
                if _at_default_init(p, self._bound[id(p)]):
                    found.append((name, AT_INIT))
                else:
                    self._trained.add(id(p))
        return found


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
