"""An evaluation's loss computed by a function: the `EvalLoss` of `torch_loss.LossCapture`.

A training loss is found at backward (`torch_loss`); an evaluation has no backward, and under
`torch.no_grad()` no autograd graph either, so a validation loop that computes its loss with a
function (pytorch/examples mnist's `test()`: `F.nll_loss(output, target, reduction="sum")`; a
script's `F.cross_entropy(logits.view(-1, V), y.view(-1))`; an unregistered
`nn.CrossEntropyLoss()`, which calls it) left the validation loss unrecorded, and with it what
`overfit` and `train_eval_discrepancy` compare.

How: when a registered model's forward ends in an EVAL (or PREDICT) step without returning a
loss (`torch_loss.returned_loss`), a `TorchFunctionMode` is entered (the *window*): it passes
every torch call on, and follows what is made from the forward's output (its floating tensors,
then the result of any torch call that takes one of them: `logits.view(-1, V)`,
`logits[:, :-1].contiguous()`, `.float()`, an unregistered head's layers) as autograd would,
by identity. The first loss function of `LOSSES` called on such a tensor is the step's loss:
recorded as `loss` in that EVAL step, as a returned loss is. A loss function called on
anything else (a metric over the data, another model's output) is not.

A loss written out in torch operations (`((out - y) ** 2).mean()`, `(out - y).abs().mean()`,
`(-F.one_hot(y, C) * out.log_softmax(-1)).sum(-1).mean()`): the first mean or sum to one
floating value (`torch.mean`, `torch.sum`, their methods and `nan` forms) of a tensor made
from the output *and a tensor of the data* (a tensor met in a call with a followed one that is
not followed, not a parameter, not one requiring a gradient, not a single number: the labels)
is the step's loss, a sum divided by the number of values it sums, its sign changed where it is
negated next (`-(F.one_hot(y, C) * log_p).sum(1).mean()`): the window stays open to see that,
until the next forward or the step's end. A reduction of the output
alone (its mean, its mean square, a scale by a number or a parameter) is no loss; a metric on
ids (`(out.argmax(1) == y).float().mean()`) is not followed at all (only floating tensors
are). Where an evaluation computes a metric of the same form before its loss (a mean absolute
error, then a mean squared one) the first is taken.

Predictions and labels: the loss function's `input` and `target` (for the classification
losses, integer class ids: class statistics and the confusion matrix, as a training loss's;
else `samples`), or the output-side tensor and the tensor of the data first joined in a loss
written out (`samples`), are handed to the capture (`on_inputs`) as the loss is found: the
EVAL steps' `loss_input_0` (`predictions`) and `loss_input_1` (`labels`), which
`train_label_noise` compares with the training's, `class_imbalance` and `confusion` read. The window closes at
that loss, at the next forward of a registered model, as the step begins to end (before the
hook's own work on the step's tensors, which the window must not see), or when the hook
closes; it is left wherever it sits in the thread's mode stack (modes entered inside the
forward and still on it, the hook's attention capture, stay above it, as
`torch.utils._device.DeviceContext` does).

The value is the loss's mean over what it averages (its `reduction="mean"` value):
`reduction="sum"` is divided by the number of its valid targets (`ignore_index` left out, a
class `weight` counted as the mean weighs), `reduction="none"` summed and divided alike, so an
evaluation that sums over its batches records what a training step's mean loss records. On
the device, no wait for it. A loss function called with `reduction="none"` gives a loss per
item that the evaluation may reduce itself (a mask, the best of a permutation-invariant loss's
permutations, as EEND's; weights): the first mean or sum to one value of what is made of those
items is the loss (a sum divided next, `(loss * mask).sum() / mask.sum()`, that quotient);
where none comes, the items' mean.

A loss given to backward in the step is not an evaluation's: a model trained in eval mode
(`model.train()` forgotten after a validation, or dropout kept off on purpose) records none.

Cost: nothing in TRAIN steps, nothing until a registered model's forward ends in an
evaluation; in the window a few microseconds per torch call (usually none or a few before the
loss). An evaluation that computes no loss (a predict loop) closes the window at the next
forward; after `MISSES` such forwards in a row no window opens until a TRAIN step comes.
Not seen: a loss computed by a function not in `LOSSES` that ends in no mean or sum (a
`torch.linalg.norm` of the error), an evaluation run outside the main thread (a mode is per thread, and left by the thread that
entered it), a loss computed inside a `torch.compile`d function. A function imported before
the hook existed (`from torch.nn.functional import cross_entropy`) is seen all the same: the
mode sees the call, not the name.
"""

from __future__ import annotations

import inspect
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.nn import functional as F
from torch.nn._reduction import legacy_get_string
from torch.overrides import TorchFunctionMode

from mldbg.frameworks.torch_modes import depth, take_off

log = logging.getLogger("mldbg")

CLASS_LOSSES: frozenset[Any] = frozenset(
    {F.nll_loss, F.cross_entropy}
)  # integer targets, ignore_index, class weights
SAMPLE_LOSSES: frozenset[Any] = frozenset(
    {
        F.mse_loss,
        F.l1_loss,
        F.smooth_l1_loss,
        F.huber_loss,
        F.binary_cross_entropy,
        F.binary_cross_entropy_with_logits,
    }
)
LOSSES = CLASS_LOSSES | SAMPLE_LOSSES
# whose inputs are class scores and labels (class statistics), as `torch_loss.CLASS_NODES`
CLASS_INPUTS: frozenset[Any] = CLASS_LOSSES | {F.binary_cross_entropy, F.binary_cross_entropy_with_logits}
# a loss written out in torch operations (`((out - y) ** 2).mean()`) ends in one of these
MEANS: frozenset[Any] = frozenset({torch.mean, torch.Tensor.mean, torch.nanmean, torch.Tensor.nanmean})
SUMS: frozenset[Any] = frozenset({torch.sum, torch.Tensor.sum, torch.nansum, torch.Tensor.nansum})
NEGATIONS: frozenset[Any] = frozenset({torch.neg, torch.negative, torch.Tensor.neg, torch.Tensor.__neg__})
DIVISIONS: frozenset[Any] = frozenset(
    {torch.div, torch.true_divide, torch.Tensor.div, torch.Tensor.__truediv__}
)
MISSES = 32  # evaluation forwards in a row without a loss: no window until a TRAIN step
MAX_FOLLOWED = 256  # tensors followed from one forward's output
_SIGNATURES = {f: inspect.signature(f) for f in LOSSES}


Inputs = Callable[[str, torch.Tensor, torch.Tensor], None]


class EvalLoss:
    """The window of one hook's loss capture (see the module doc); `on_inputs(kind,
    predictions, labels)` is told the predictions and labels of the loss found ("classes"
    or "samples", as `torch_loss.saved_inputs` gives a training loss's)."""

    def __init__(self, on_inputs: Inputs | None = None) -> None:
        self._on_inputs = on_inputs
        self._window: _Window | None = None
        self._found: torch.Tensor | None = None  # the open step's evaluation loss
        self._misses = 0
        self._stale: list[_Window] = []  # closed windows still on the stack

    def open(self, output: Any, at: int) -> None:
        """A registered model's forward ended in an evaluation step with `output` and no loss
        returned; `at`: the depth of the thread's torch function mode stack as it began."""
        self.close()
        if self._misses >= MISSES or torch.compiler.is_compiling():
            return
        if threading.current_thread() is not threading.main_thread():
            return  # a window is left by the thread that entered it: evaluations of the main one
        window = _Window(self)
        for t in _tensors(output):
            window.follow(t)
        if not window.followed:
            return
        self._misses += 1  # until a loss is found
        window.enter(at)
        self._window = window

    def take(self) -> torch.Tensor | None:
        """The open step's evaluation loss (then forgotten), closing the window."""
        self.close()
        found, self._found = self._found, None
        return found

    def trained_on(self) -> None:
        """A backward pass in the evaluation step: a model trained in eval mode (dropout off on
        purpose, or `model.train()` forgotten): its loss is not an evaluation's."""
        self.close()
        self._found = None

    def trained(self) -> None:
        """A TRAIN step: windows may open again."""
        self._misses = 0

    def close(self) -> None:
        """Close the open window: out of the mode stack, unless it is handling a call (torch
        has taken it off the stack meanwhile, and puts it back after): then inert until the
        next close."""
        window, self._window = self._window, None
        if window is not None:
            window.owner = None
            self._stale.append(window)
        self._stale = [w for w in self._stale if w.handling or not w.leave()]

    def seen(
        self, window: _Window, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
    ) -> None:
        """A torch call in the window: follow what it makes from the output; the first loss
        on a followed tensor is the step's: a loss function's, or a mean or sum to one value
        of a tensor made from the output and something else (the labels)."""
        if window.loss is not None:  # a loss written out was found: only its sign may follow
            if args and args[0] is window.loss and isinstance(out, torch.Tensor):
                if func in NEGATIONS:
                    window.loss = out
                    self._found = None if self._found is None else -self._found
                elif func in DIVISIONS and window.summed and _is_scalar(out):  # `.sum() / mask.sum()`
                    window.loss, window.summed = out, False
                    self._found = out.detach().float()
            return
        if func in LOSSES:
            bound = _SIGNATURES[func].bind(*args, **kwargs).arguments
            inp, target = bound.get("input"), bound.get("target")
            if window.followed_tensor(inp) and isinstance(out, torch.Tensor):
                self._misses = 0
                if isinstance(inp, torch.Tensor) and isinstance(target, torch.Tensor) and window.pair is None:
                    classes = func in CLASS_INPUTS and not (
                        func in CLASS_LOSSES and target.is_floating_point()
                    )
                    window.pair = (inp, target)
                    self._give("classes" if classes else "samples", inp, target)
                if out.dim() == 0:
                    self._found = mean_loss(func, bound, out)
                    self.close()
                    return
                # reduction="none": a loss per item, reduced further (masked, the best of
                # the permutations of a permutation-invariant loss, weighted): the first mean
                # or sum of it to one value is the loss; if none comes, its mean
                if self._found is None:
                    self._found = mean_loss(func, bound, out)
                window.per_item = True
                window.follow(out, True)
                return
        if not isinstance(out, (torch.Tensor, tuple, list)):
            return
        flat = _flat(args, kwargs)
        made = [a for a in flat if window.followed_tensor(a)]
        if not made:
            return
        joined = any(window.joined(a) for a in made)
        if not joined:  # the output (or what is made of it) against a tensor of the data
            other = next((a for a in flat if _labels_like(a) and not window.followed_tensor(a)), None)
            if other is not None:
                joined = True
                window.pair = window.pair or (made[0], other)
        if joined and (func in MEANS or func in SUMS) and _is_scalar(out) and window.pair is not None:
            assert isinstance(out, torch.Tensor)
            value = out.detach().float()
            if func in SUMS:  # as its mean over what it sums, unless divided next
                value = value / max(made[0].numel(), 1)
                window.summed = True
            self._found = value
            self._misses = 0
            window.loss = out  # open until the step ends: `-(y * log_p).sum(1).mean()`
            if not window.per_item:  # a loss function's items: given already
                self._give("samples", *window.pair)
            return
        for t in _tensors(out):
            window.follow(t, joined)

    def _give(self, kind: str, predictions: torch.Tensor, labels: torch.Tensor) -> None:
        if self._on_inputs is not None:
            self._on_inputs(kind, predictions, labels)


def _is_scalar(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.dim() == 0 and t.is_floating_point()


def _labels_like(t: Any) -> bool:
    """Could `t` be the labels a loss compares the output with? A tensor of the data: not a
    parameter, not one that requires a gradient, not a single number (`x * torch.tensor(2.)`)."""
    return (
        isinstance(t, torch.Tensor)
        and not isinstance(t, torch.nn.Parameter)
        and not t.requires_grad
        and t.dim() >= 1
    )


def mean_loss(func: Any, bound: dict[str, Any], out: torch.Tensor) -> torch.Tensor:
    """The loss as its `reduction="mean"` would give it (see the module doc), detached."""
    out = out.detach()
    size_average, reduce = bound.get("size_average"), bound.get("reduce")
    reduction = (
        legacy_get_string(size_average, reduce)
        if size_average is not None or reduce is not None
        else bound.get("reduction", "mean")
    )
    if reduction == "mean":
        return out.float()
    total = out.float().sum()
    inp, target = bound.get("input"), bound.get("target")
    if func in CLASS_LOSSES and isinstance(target, torch.Tensor) and not target.is_floating_point():
        valid = target != bound.get("ignore_index", -100)
        weight = bound.get("weight")
        if isinstance(weight, torch.Tensor) and isinstance(inp, torch.Tensor):
            picked = weight.float()[torch.where(valid, target, 0).clamp(0, weight.numel() - 1)]
            return total / (picked * valid).sum()
        return total / valid.sum()
    if reduction == "none":
        return total / max(out.numel(), 1)
    if func in CLASS_LOSSES and isinstance(inp, torch.Tensor):  # class probabilities as targets
        return total / max(inp.numel() // inp.shape[1] if inp.dim() > 1 else 1, 1)
    shapes = [t.shape for t in (inp, target) if isinstance(t, torch.Tensor)]
    n = torch.broadcast_shapes(*shapes).numel() if shapes else 1
    return total / max(n, 1)


class _Window(TorchFunctionMode):
    """The torch function mode of an evaluation's window: every torch call passes here."""

    def __init__(self, owner: EvalLoss) -> None:
        super().__init__()
        self.owner: EvalLoss | None = owner
        # id -> (the tensor, made from the output with a tensor of the data: `out - y`)
        self.followed: dict[int, tuple[weakref.ref[torch.Tensor], bool]] = {}
        self.pair: tuple[torch.Tensor, torch.Tensor] | None = None  # the first such: (made, data)
        self.loss: torch.Tensor | None = None  # the loss written out, once found
        self.summed = False  # that loss is a sum (its mean a guess until divided)
        self.per_item = False  # a loss function's per-item values are followed
        self.thread = threading.get_ident()
        self.entered = False
        self.handling = False  # inside its `__torch_function__` (off the stack meanwhile)

    def follow(self, t: torch.Tensor, joined: bool = False) -> None:
        if len(self.followed) < MAX_FOLLOWED:
            self.followed[id(t)] = (weakref.ref(t), joined)

    def followed_tensor(self, t: Any) -> bool:
        entry = self.followed.get(id(t)) if isinstance(t, torch.Tensor) else None
        return entry is not None and entry[0]() is t

    def joined(self, t: Any) -> bool:
        """Is followed `t` made from the output and a tensor of the data?"""
        return self.followed_tensor(t) and self.followed[id(t)][1]

    def enter(self, at: int) -> None:
        """Enter the mode at depth `at` of this thread's stack (modes above it stay above)."""
        above = [torch.overrides._pop_mode() for _ in range(max(depth() - at, 0))]
        torch.overrides._push_mode(self)
        for mode in reversed(above):
            torch.overrides._push_mode(mode)
        self.entered = True

    def leave(self) -> bool:
        """Out of the stack, wherever it sits; False when this thread cannot: another
        thread's stack holds it (inert, it is left there)."""
        self.owner = None
        if not self.entered:
            return True
        if threading.get_ident() != self.thread:
            return False
        self.entered = False
        if not take_off(self):  # popped by another
            log.debug("mldbg: the evaluation-loss window was not on the mode stack")
        return True

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        self.handling = True  # off the stack until this returns: whatever `func` runs (a
        try:  # `backward()` reaching the hook) must not try to take it off
            out = func(*args, **kwargs)
            owner = self.owner
            if owner is not None and not torch.compiler.is_compiling():
                try:
                    owner.seen(self, func, args, kwargs, out)
                except Exception:  # never in the way of the user's evaluation
                    log.debug("mldbg: an evaluation's loss was not recorded", exc_info=True)
                    self.owner = None
        finally:
            self.handling = False
        return out


def _flat(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The arguments of a call, with those inside lists and tuples (`torch.cat([a, b])`)."""
    out: list[Any] = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, (tuple, list)):
            out.extend(a)
        else:
            out.append(a)
    return out


def _tensors(output: Any, deep: int = 2) -> list[torch.Tensor]:
    """The floating tensors of a forward's output or a call's result: itself, in tuples and
    lists, a mapping's values (a dict, Hugging Face's `ModelOutput`), an object's attributes."""
    if isinstance(output, torch.Tensor):
        return [output] if output.is_floating_point() else []
    if deep <= 0:
        return []
    if isinstance(output, (tuple, list)):
        items: Any = output
    elif isinstance(output, dict) or (hasattr(output, "keys") and hasattr(output, "values")):
        items = list(output.values())
    elif hasattr(output, "__dict__") and not callable(output):
        items = list(vars(output).values())
    else:
        return []
    return [t for o in items for t in _tensors(o, deep - 1)]
