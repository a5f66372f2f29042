"""Attention logits of a registered PyTorch model, at statistics steps (`logit_growth` reads them).

Three kinds of attention are seen, each recorded as `<module>_attention_logits` in the
`attention_logits` collection (its `max_abs` and `variance`), for the first sample of the batch:

- `nn.MultiheadAttention`: a forward pre-hook recomputes q.k / sqrt(d) per head from that
  sample's own projections (`mha_logits`);
- `F.scaled_dot_product_attention` called anywhere inside a registered model's forward (Hugging
  Face GPT-2, BERT, Llama with `attn_implementation="sdpa"`, nanoGPT, custom modules):
  q[0] @ k[0]^T * scale, with its `scale`, `enable_gqa` (key heads repeated), and the mask
  applied: `is_causal` and a boolean `attn_mask` keep the attended entries only, a float
  `attn_mask` is added (`sdpa_logits`);
- a softmax over the last axis of a 4-D (batch, heads, L, S) tensor inside a module whose class
  or attribute name says attention (Hugging Face's "eager" attention): its input, the logits
  plus the mask, with the masked entries (non-finite, or below half the dtype's lowest value,
  the mask value Hugging Face adds) left out (`softmax_logits`).

The same capture keeps the `training` flag of each functional dropout call (`F.dropout(x, p,
self.training)`, `dropout1d/2d/3d`, `alpha_dropout`, `feature_alpha_dropout`) with p > 0 made by
a module with a trainable parameter with gradients on (not by a Dropout module), handed over
when the forward ends as `module_training/functional` with the model's own flag
(`train_in_eval_mode`: a model whose only dropout is functional shows its mode there); a
forward with such a call keeps its model captured in that mode.

The same capture records the input of each ReLU applied as a function (`F.relu`,
`torch.relu`, `x.relu()`, their in-place forms) inside a module of the model, as an nn.ReLU
module's hook does: `<module>.F.relu_<n>_input_0` in `relu_activations` (the n-th such call of
that module in the forward, at most `RELU_CALLS`), so `dead_relu` judges pytorch/examples
mnist's `F.relu(self.conv1(x))`. Only a layer's activations: at least `MIN_UNITS` values per
sample (a hinge over one value per sample is left out); an nn.ReLU's own call is its hook's.

How: on a statistics step only, the hook enters an `AttentionCapture` (a `TorchFunctionMode`,
thread-local like every torch function mode) around the first forward of each registered model
in the step, and leaves it when the forward ends or raises (or the hook closes, in the same
thread; from another, the forward's end still ends it). Off statistics steps nothing is
entered. The module a call belongs to is the innermost module of the model on the Python stack
at the call (read only when an attention call is seen); its path names the record, and a
module that makes several calls in one forward numbers them (`..._attention_logits_1`). A
captured forward that met no attention, functional dropout or functional ReLU (a CNN of
modules, an MLP, a model whose only attention is `nn.MultiheadAttention`, recorded by its
hook) ends the capture of that model in that mode:
later statistics steps pay nothing for it. A `torch.compile`'d submodule: the capture steps
aside while dynamo traces (none of its code enters a graph).

Cost, on statistics steps: every torch call of the captured forward goes through Python (a few
microseconds each), plus one matmul of one sample per attention call. At most `LIMIT` logits
are kept per call: beyond, evenly spaced query rows. A boolean or float mask (padding) selects
entries by value, which waits for a GPU once per call; no mask and `is_causal` do not.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode

from mldbg.frameworks.torch_models import Attached
from mldbg.frameworks.torch_modes import take_off

log = logging.getLogger("mldbg")

LIMIT = 1 << 22  # logits kept per attention call (16 MB in float32); beyond: evenly spaced query rows
_SOFTMAX = frozenset({F.softmax, torch.softmax, torch.Tensor.softmax})
_SDPA_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
_WORDS = ("attention", "attn")  # a module whose class or name has one of them computes attention
# functional dropout: `F.dropout(x, p, training=self.training)` shows the model's mode where no
# Dropout module does (`module_training/functional`, train_in_eval_mode)
_DROPOUT = frozenset(
    {F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout}
)
_DROPOUT_ARGS = ("input", "p", "training", "inplace")
# a ReLU applied as a function (pytorch/examples mnist's `F.relu(self.conv1(x))`): its input,
# as an nn.ReLU module's (`relu_activations`, dead_relu)
_RELU = frozenset({F.relu, torch.relu, torch.relu_, torch.Tensor.relu, torch.Tensor.relu_})
MIN_UNITS = 8  # a functional ReLU's input has this many values per sample at least: a layer's
RELU_CALLS = 16  # functional ReLUs recorded per module and forward at most (an RNN cell's loop)


def mha_logits(mha: nn.MultiheadAttention, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor | None:
    """The attention logits q.k / sqrt(d) of the first sample, per head: (heads, L, S). One
    sample's projections (1 / batch of the attention's work); None for inputs it cannot read."""
    e, h = mha.embed_dim, mha.num_heads
    if query.dim() == 3:
        q, k = (query[0], key[0]) if mha.batch_first else (query[:, 0], key[:, 0])
    elif query.dim() == 2:
        q, k = query, key
    else:
        return None
    if q.shape[-1] != e or k.shape[-1] != (e if mha.in_proj_weight is not None else mha.kdim):
        return None
    with torch.no_grad():
        if mha.in_proj_weight is not None:
            w_q, w_k = mha.in_proj_weight[:e], mha.in_proj_weight[e : 2 * e]
        else:
            w_q, w_k = mha.q_proj_weight, mha.k_proj_weight
        b = mha.in_proj_bias
        b_q, b_k = (b[:e], b[e : 2 * e]) if b is not None else (None, None)
        d = e // h
        qh = F.linear(q, w_q, b_q).reshape(q.shape[0], h, d).transpose(0, 1)
        kh = F.linear(k, w_k, b_k).reshape(k.shape[0], h, d).transpose(0, 1)
        return (qh @ kh.transpose(1, 2)) * d**-0.5


def sdpa_logits(
    query: torch.Tensor,
    key: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor | None:
    """The logits `F.scaled_dot_product_attention(query, key, ...)` takes the softmax of, for
    the first sample (`query[0]` when it has a batch axis, i.e. three axes or more): its
    attended entries only, (heads, L, S) without a mask, flat with one. None for what it
    cannot read."""
    if query.dim() < 2 or key.dim() != query.dim() or query.shape[-1] != key.shape[-1]:
        return None
    if query.is_complex() or not query.is_floating_point():
        return None
    with torch.no_grad():
        # the batch axis: the first of three or more (a key's may be 1, broadcast)
        q, k = (query[0], key[0]) if query.dim() >= 3 else (query, key)
        if enable_gqa and q.dim() >= 3 and k.dim() == q.dim() and k.shape[-3] != q.shape[-3]:
            if k.shape[-3] == 0 or q.shape[-3] % k.shape[-3]:
                return None
            k = k.repeat_interleave(q.shape[-3] // k.shape[-3], dim=-3)
        length = q.shape[-2]
        rows = _rows(length, _heads(q) * k.shape[-2], q.device)
        if rows is not None:
            q = q[..., rows, :]
        factor = scale if scale is not None else q.shape[-1] ** -0.5
        logits = (q @ k.transpose(-2, -1)) * factor
        if attn_mask is None and not is_causal:
            return logits
        if attn_mask is not None:
            mask = _first_sample(attn_mask, query.dim())
            if rows is not None and mask.dim() >= 2 and mask.shape[-2] == length:
                mask = mask[..., rows, :]
            if mask.dtype != torch.bool:
                logits = logits + mask
                mask = _unmasked(logits)
            return logits.masked_select(mask)
        if rows is None:  # causal, every row: a fixed lower triangle, no wait for the device
            i, j = torch.tril_indices(length, logits.shape[-1], device=logits.device)
            return logits[..., i, j]
        cols = torch.arange(logits.shape[-1], device=logits.device)
        return logits.masked_select(cols[None, :] <= rows[:, None])


def softmax_logits(x: torch.Tensor) -> torch.Tensor:
    """The finite, unmasked entries of the first sample of a softmax's input (logits + mask)."""
    with torch.no_grad():
        first = x[0]
        rows = _rows(first.shape[-2], first.shape[0] * first.shape[-1], first.device)
        if rows is not None:
            first = first[:, rows, :]
        return first.masked_select(_unmasked(first))


class AttentionCapture:
    """Records the attention logits of a hook's registered models (see the module's docstring).

    `add(name, logits)` hands a record over (the hook's statistics of the step). `watch` is
    told each registered model and its name prefix; `start(key, mode)` and `stop(key)` bracket
    a model's forward at a statistics step (`key`: the model, whatever identifies it)."""

    def __init__(
        self,
        add: Callable[[str, torch.Tensor], None],
        flags: Callable[[Any, list[bool]], None] | None = None,
        relu: Callable[[str, torch.Tensor], None] | None = None,
    ):
        self._add = add
        self._flags = flags  # (key, the `training` flags of its functional dropout calls)
        self._relu = relu  # (name, the input of a functional ReLU)
        self._objects: dict[int, nn.Module] = {}  # id(module) -> module, of the watched models
        self._params: dict[int, list[nn.Parameter]] = {}  # a dropout call's module: its parameters
        self._names: dict[int, tuple[str, bool]] = {}  # id(module) -> (its path, says attention)
        self._skip: set[int] = set()  # nn.MultiheadAttention: its own hook records it
        self._keys: set[int] = set()  # the models watched (their keys)
        self._quiet: set[tuple[int, Any]] = set()  # (model, mode) whose forward met no attention
        self._local = threading.local()
        self._active: set[int] = set()  # the threads with a capture on
        self.handles: list[Any] = []  # the `Ending` hooks on the models: removed by `close`
        self.closed = False

    def watch(self, model: nn.Module, prefix: str, key: Any) -> None:
        """Know the modules of `model` (its qualified names, after `prefix`); `key` names it
        to `start` and `stop`."""
        self._keys.add(id(key))
        for qualname, module in model.named_modules():
            if isinstance(module, nn.MultiheadAttention):
                self._skip.add(id(module))
            last = qualname.rsplit(".", 1)[-1].lower()
            says = any(w in last or w in type(module).__name__.lower() for w in _WORDS)
            self._names.setdefault(id(module), (prefix + qualname if qualname else f"{prefix}model", says))
            self._objects.setdefault(id(module), module)

    def start(self, key: Any, mode: Any, opener: Any) -> None:
        """A registered model's forward begins, at a statistics step: capture its attention
        (unless a forward of it in `mode` met none, or a capture is already on in this thread)
        until the forward of `opener` ends (the model, or the part of it that was called:
        the first part of a container, a part trained on its own)."""
        local = self._local
        if self.closed or id(key) not in self._keys or (id(key), mode) in self._quiet:
            return
        if getattr(local, "mode", None) is not None:
            return
        capture = _Mode(self)
        capture.__enter__()
        local.mode, local.key, local.model_mode, local.counts, local.found = capture, key, mode, {}, False
        local.opener = opener
        local.dropout = []
        self._active.add(threading.get_ident())

    def stop(self, key: Any, opener: Any, failed: bool = False) -> None:
        """The forward of `opener` (of `key`) ended (or raised: `failed`): leave the capture it
        started (off the mode stack where it sits: `torch_modes.take_off`)."""
        local = self._local
        capture = getattr(local, "mode", None)
        if capture is None or local.key is not key or local.opener is not opener:
            return
        local.mode = local.opener = None
        take_off(capture)
        self._active.discard(threading.get_ident())
        if not local.found and not failed:
            self._quiet.add((id(key), local.model_mode))
        if local.dropout and self._flags is not None and not failed:
            self._flags(key, local.dropout)
        if self.closed and not self._active and not failed:  # closed by another thread meanwhile
            self._remove_handles()  # (not while torch walks the hooks of a failed forward)

    def close(self) -> None:
        """The hook closes: end this thread's capture, capture nothing more, and take the
        `Ending` hooks off the models (at once, or when the forwards that other threads are
        capturing end)."""
        self.closed = True
        local = self._local
        if getattr(local, "mode", None) is not None:
            self.stop(local.key, local.opener)
        if not self._active:
            self._remove_handles()

    def _remove_handles(self) -> None:
        handles, self.handles = self.handles, []
        for h in handles:
            h.remove()

    # inside a captured forward --------------------------------------------------------------
    def seen(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A torch call inside a captured forward: record it if it is attention."""
        if self.closed:
            return
        if func in _DROPOUT:
            self._dropout(args, kwargs)
            return
        if func in _RELU:
            self._functional_relu(args, kwargs)
            return
        sdpa = func is F.scaled_dot_product_attention
        if not sdpa and func not in _SOFTMAX:
            return
        if not sdpa and not _last_axis_of_4d(args, kwargs):
            return
        where = self._module()
        if where is None:
            return
        path, says = where
        if not (sdpa or says):
            return
        try:
            if sdpa:
                bound = dict(zip(_SDPA_ARGS, args, strict=False), **kwargs)
                if not all(isinstance(bound.get(a), torch.Tensor) for a in ("query", "key")):
                    return
                logits = sdpa_logits(
                    bound["query"],
                    bound["key"],
                    bound.get("attn_mask"),
                    bool(bound.get("is_causal", False)),
                    bound.get("scale"),
                    bool(bound.get("enable_gqa", False)),
                )
            else:
                logits = softmax_logits(args[0] if args else kwargs["input"])
        except (RuntimeError, ValueError, IndexError, TypeError) as e:  # never break the training
            log.debug("mldbg: attention logits of %s not computed: %s", path, e)
            return
        if logits is None:
            return
        local = self._local
        local.found = True
        n = local.counts.get(path, 0)
        local.counts[path] = n + 1
        self._add(f"{path}_attention_logits" + (f"_{n}" if n else ""), logits)

    def _dropout(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A functional dropout call: keep its `training` flag when it can change what trains
        (p > 0, gradients on, called by a module with a trainable parameter: a frozen backbone
        kept in eval on purpose is left out, as its Dropout modules are), and not by a Dropout
        module (`module_training/dropout` has those)."""
        bound = dict(zip(_DROPOUT_ARGS, args, strict=False), **kwargs)
        p, training = bound.get("p", 0.5), bound.get("training", True)
        if not isinstance(p, (int, float)) or not p > 0 or not isinstance(training, bool):
            return
        owner = self._owner()
        if owner is None or isinstance(owner, nn.modules.dropout._DropoutNd):
            return
        local = self._local
        local.found = True  # the model's mode shows here: keep capturing it in this mode
        if not torch.is_grad_enabled():
            return  # an evaluation under no_grad trains nothing
        params = self._params.get(id(owner))
        if params is None:
            params = self._params[id(owner)] = list(owner.parameters())
        if any(q.requires_grad for q in params):
            local.dropout.append(training)

    def _functional_relu(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A ReLU applied as a function inside a module of the model (not by an nn.ReLU
        module, whose hook records it): its input as `<module>.F.relu_<n>_input_0`, the n-th
        such call of that module in the forward. A layer's activations only: at least
        `MIN_UNITS` values per sample (a hinge `F.relu(margin - d)` over one value per sample
        is no layer, and rightly mostly 0)."""
        if self._relu is None:
            return
        x = args[0] if args else kwargs.get("input")
        if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.numel() < MIN_UNITS * x.shape[0]:
            return
        owner = self._owner()
        if owner is None or isinstance(owner, nn.ReLU):
            return
        path = self._names[id(owner)][0]
        local = self._local
        local.found = True  # the model's activations show here: keep capturing it in this mode
        key = f"{path}.F.relu"
        n = local.counts.get(key, 0)
        if n >= RELU_CALLS:
            return
        local.counts[key] = n + 1
        self._relu(f"{key}_{n}_input_0", x)

    def _owner(self) -> nn.Module | None:
        """The innermost module of a watched model on the Python stack (None: none). The
        frames of this capture's own calls are skipped alike: their `self` is no module."""
        frame = sys._getframe(2)
        objects = self._objects
        while frame is not None:
            code = frame.f_code
            if code.co_argcount and code.co_varnames[0] == "self":
                owner = frame.f_locals.get("self")
                if owner is not None and id(owner) in objects:
                    return objects[id(owner)]
            frame = frame.f_back  # type: ignore[assignment]
        return None

    def _module(self) -> tuple[str, bool] | None:
        """The innermost module of a registered model on the stack (None: an
        nn.MultiheadAttention's own work, or none of ours)."""
        owner = self._owner()
        if owner is None or id(owner) in self._skip:
            return None
        return self._names[id(owner)]


class Ending(Attached):
    """The forward hook that ends a capture (`always_call`): it runs even once its hook is
    closed, since a capture begun before the close must still end; only for its own module
    (not a shallow copy's forward). Copied or pickled with the model: inert, as every
    `Attached`."""

    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args[0] is not self.module or torch.compiler.is_compiling():
            return None  # a shallow copy's forward, or a traced one: no capture of ours began there
        return self.fn(*args, **kwargs)


class _Mode(TorchFunctionMode):
    """The torch function mode of a capture: every torch call of the forward passes here."""

    def __init__(self, capture: AttentionCapture):
        super().__init__()
        self.capture = capture

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not torch.compiler.is_compiling():  # a compiled submodule traces through: nothing of ours
            self.capture.seen(func, args, kwargs)
        return out


def _heads(q: torch.Tensor) -> int:
    """The number of (head) rows of L x S logits one sample's query makes."""
    n = 1
    for size in q.shape[:-2]:
        n *= size
    return n


def _rows(length: int, per_row: int, device: torch.device) -> torch.Tensor | None:
    """Evenly spaced query rows that keep at most `LIMIT` logits (None: every row)."""
    if length * per_row <= LIMIT:
        return None
    keep = min(length, max(1, LIMIT // max(per_row, 1)))
    return torch.linspace(0, length - 1, keep, device=device).round().long()


def _first_sample(mask: torch.Tensor, query_dims: int) -> torch.Tensor:
    """The first sample's part of a mask that broadcasts against a query of `query_dims` axes."""
    if query_dims >= 3 and mask.dim() == query_dims:
        return mask[0]
    return mask


def _unmasked(x: torch.Tensor) -> torch.Tensor:
    """Entries that are not masked: finite and above half the dtype's lowest value (the mask
    value Hugging Face adds; adding it twice gives -inf). One comparison: |x| below half the
    largest value (a logit beyond 1e38 does not occur)."""
    return x.abs() < torch.finfo(x.dtype).max / 2


def _last_axis_of_4d(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """A softmax over the last axis of a 4-D (batch, heads, L, S) floating tensor."""
    x = args[0] if args else kwargs.get("input")
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or not x.is_floating_point():
        return False
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    return dim in (-1, 3)
