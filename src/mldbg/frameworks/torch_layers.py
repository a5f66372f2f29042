"""The layer hooks of `mldbg.torch.Hook`: what a registered model's layers hand over.

- the input of each ReLU, Tanh and Sigmoid module (their subclasses too), for the statistics
  of the activations at statistics steps and for the `*_activations` collections;
- each layer's outputs (and, by regex or `save_all`, inputs) when `outputs` or an
  activation collection may save;
- the attention logits of `nn.MultiheadAttention`, `F.scaled_dot_product_attention` and eager
  attention inside the model's forward, at statistics steps (torch_attention);
- the tokens per expert of each mixture-of-experts router it recognises (torch_router).

Each callable is an `Attached` acting only inside its model's forward (`within`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from mldbg.frameworks.torch_attention import AttentionCapture, Ending
from mldbg.frameworks.torch_attention import mha_logits as attention_logits
from mldbg.frameworks.torch_models import Attached, RegisteredModel
from mldbg.frameworks.torch_router import watch_routers

if TYPE_CHECKING:
    from mldbg.frameworks.torch import Hook

log = logging.getLogger("mldbg")

ACTIVATIONS: dict[type[nn.Module], str] = {
    nn.ReLU: "relu_activations",
    nn.Tanh: "tanh_activations",
    nn.Sigmoid: "sigmoid_activations",
}
LAYER_COLLECTIONS = ("outputs", *ACTIVATIONS.values())


def watch_layers(hook: Hook, m: RegisteredModel, inner: nn.Module, compiled: bool) -> None:
    """Put the layer hooks on `inner`, the module of registered model `m` (`compiled`: inside
    a `torch.compile` wrapper, whose graph hooks would break: none)."""
    wants_layers = any(hook.recorder.collections.may_save(c) for c in LAYER_COLLECTIONS)
    stats = hook._stats
    if compiled:
        if wants_layers or stats is not None:
            log.info(
                "mldbg: layer outputs of a torch.compile'd model are not recorded (hooks would break the graph)"
            )
        return
    watch_routers(hook, m, inner)  # a mixture of experts' routers: the tokens per expert
    if not (wants_layers or stats is not None):
        return
    if stats is not None:  # F.scaled_dot_product_attention and eager attention
        watch_attention(hook, m, inner)
    # without a layer collection, the activations' and attentions' hooks act at statistics
    # steps only: they are on the layers only then (`StepLayers`)
    layers = None if wants_layers else hook._step_layers
    for qualname, module in inner.named_modules():
        if not qualname:
            continue
        name = m.prefix + qualname
        if isinstance(module, nn.MultiheadAttention) and stats is not None:
            h = hook._attach(attention(hook, name), module, within=m)
            if layers is not None:
                layers.add(module, h, with_kwargs=True)
            else:
                hook._module_handles.append(module.register_forward_pre_hook(h, with_kwargs=True))
        act = next((c for t, c in ACTIVATIONS.items() if isinstance(module, t)), None)
        if act is not None:
            h = hook._attach(layer_input(hook, name, act), module, within=m)
            if layers is not None:
                layers.add(module, h)
            else:
                hook._module_handles.append(module.register_forward_pre_hook(h))
        if wants_layers:  # statistics need only the activations' inputs
            h = hook._attach(layer_output(hook, name, act), module, within=m)
            hook._module_handles.append(module.register_forward_hook(h))


class StepLayers:
    """Layer hooks put on at a statistics step and taken off at its end.

    A module with a hook takes PyTorch's slow path at every call (the hook dicts, the
    `Attached` guard, the hook's own test for a statistics step), on every step; the small CPU
    ResNet of the benchmarks calls its ReLU modules 17 times a step. The hooks that act only at
    statistics steps (the activations' inputs and the attention logits when no layer
    collection saves) are put on by the model's forward pre-hook when the step is a
    statistics step (`attach`), and taken off when the step ends (`detach`, before the
    recorder ends the step); other steps call the layers bare."""

    def __init__(self) -> None:
        self.hooks: list[tuple[nn.Module, Attached, bool]] = []
        self.handles: list[Any] = []

    def add(self, module: nn.Module, hook: Attached, with_kwargs: bool = False) -> None:
        self.hooks.append((module, hook, with_kwargs))

    def attach(self) -> None:
        if self.handles or not self.hooks:
            return
        for module, hook, with_kwargs in self.hooks:
            self.handles.append(module.register_forward_pre_hook(hook, with_kwargs=with_kwargs))

    def detach(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []


def watch_attention(hook: Hook, m: RegisteredModel, inner: nn.Module) -> None:
    """Attention logits of `F.scaled_dot_product_attention` and eager attention inside the
    model's forward, at statistics steps (torch_attention)."""
    if hook._capture is None:
        stats = hook._stats
        assert stats is not None
        hook._capture = AttentionCapture(
            lambda name, x: stats.add(name, x, "attention_logits"),
            functional_dropout(stats),
            lambda name, x: stats.add(name, x, "relu_activations"),  # F.relu's input
        )
    hook._capture.watch(inner, m.prefix, m)
    container = isinstance(m.module, (nn.ModuleDict, nn.ModuleList))  # its parts are called, one by one
    for opener in m.module.children() if container else [m.module]:
        end_attention_at(hook, m, opener)


def end_attention_at(hook: Hook, m: RegisteredModel, opener: nn.Module) -> None:
    """End the attention capture that a forward of `opener` began (the model, or a part of it
    called on its own) when that forward ends, or raises."""
    capture = hook._capture
    if capture is None:
        return

    def end(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        capture.stop(m, module, failed=output is None)  # also when the forward raised (always_call)

    capture.handles.append(opener.register_forward_hook(Ending(end, hook, opener), always_call=True))


def functional_dropout(stats: Any) -> Callable[[Any, list[bool]], None]:
    """Where a registered model's forward called functional dropout (`F.dropout(x, p,
    self.training)`, no Dropout module to show the mode): the calls' `training` flags as
    `module_training/functional`, with the model's own flag (`train_in_eval_mode`)."""

    def flags(m: RegisteredModel, training: list[bool]) -> None:
        stats.add_kinds(
            "module_training/functional", torch.tensor(training, dtype=torch.uint8), ("sum", "count"), ()
        )
        root = torch.tensor([m.module.training], dtype=torch.uint8)
        stats.add_kinds("module_training/model", root, ("sum", "count"), ())

    return flags


def layer_input(hook: Hook, name: str, act: str) -> Callable[..., None]:
    """The hook on an activation module's input (statistics steps; `*_activations`)."""
    input_name, natural = f"{name}_input_0", (act,)  # made once: the hook runs every step

    def on_input(module: nn.Module, args: tuple[Any, ...]) -> None:
        stats = hook._stats  # outside statistics steps: two attribute reads and a call
        if stats is not None and stats.due() and args:
            stats.add(input_name, args[0], act)
        if hook.recorder.saving and args:
            hook._save(input_name, args[0], natural)

    return on_input


def attention(hook: Hook, name: str) -> Callable[..., None]:
    """The hook on an `nn.MultiheadAttention`: its logits at statistics steps."""
    logits_name = f"{name}_attention_logits"

    def on_attention(module: nn.MultiheadAttention, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        stats = hook._stats
        if stats is not None and stats.due():
            inputs = [*args, *(kwargs.get(k) for k in ("query", "key")[len(args) :])]
            if len(inputs) >= 2 and all(isinstance(x, torch.Tensor) for x in inputs[:2]):
                logits = attention_logits(module, inputs[0], inputs[1])
                if logits is not None:
                    stats.add(logits_name, logits, "attention_logits")

    return on_attention


def layer_output(hook: Hook, name: str, act: str | None) -> Callable[..., None]:
    """The hook on a layer's output (`outputs`, `*_activations`; other inputs by regex)."""
    natural = ("outputs", act) if act else ("outputs",)
    inputs_natural = () if act is None else None

    def on_output(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        if not hook.recorder.saving:
            return
        hook._save_outputs(name, output, natural)
        if inputs_natural is not None:  # other layers' inputs: only by regex or save_all
            for i, a in enumerate(args):
                hook._save(f"{name}_input_{i}", a, inputs_natural)

    return on_output
