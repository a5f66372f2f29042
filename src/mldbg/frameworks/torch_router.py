"""The mixture-of-experts routers of a registered model, and the tokens each expert gets.

A router is recognised by its place, as MoE layers are written (Switch, GShard, Mixtral,
Qwen-MoE, DeepSpeed-MoE, fairseq, Hugging Face): a module that holds its experts (a
`ModuleList` or `ModuleDict` of two or more named `experts`, or an int `num_experts`-like
attribute, its own or its `experts`') and a child named like a router (`router`, `gate`,
`gating`, `wg`) whose logits have that number of experts on their last axis: the output of a
`nn.Linear` inside it with that many `out_features`, else the child's own output (its first
tensor of that width: Hugging Face's routers return `(logits, scores, indices)`). A layer
that adds noise to its logits after the router (Shazeer et al.'s noisy top-k gating: a
non-zero attribute, parameter or module named `*noise*`) routes on numbers the hook does not
see: it is left out (save what it routes on in the `router` collection yourself).

Each step, the hook records `expert_counts/<router>` (the `router` collection, which the two
lines' recorder saves every step once a router is found): the tokens whose top-1 expert each
one is, counted where the logits live (an argmax and a `bincount`), one small integer vector
(`router_collapse`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from mldbg.frameworks.torch_models import RegisteredModel
from mldbg.record.collections import ROUTER

if TYPE_CHECKING:
    from mldbg.frameworks.torch import Hook

ROUTER_WORDS = ("router", "gate", "gating", "wg")
EXPERT_COUNT_ATTRIBUTES = (
    "num_experts",
    "n_experts",
    "num_local_experts",
    "n_routed_experts",
    "moe_num_experts",
)
NATURAL = (ROUTER,)


def expert_numbers(module: nn.Module) -> set[int]:
    """The numbers of experts `module` may route among (empty: it holds no experts)."""
    experts = getattr(module, "experts", None)
    found = {
        v
        for holder in (module, experts)
        for a in EXPERT_COUNT_ATTRIBUTES
        if isinstance(v := getattr(holder, a, None), int) and not isinstance(v, bool) and v >= 2
    }
    if isinstance(experts, (nn.ModuleList, nn.ModuleDict)) and len(experts) >= 2:
        found.add(len(experts))
    return found


def find_routers(model: nn.Module) -> Iterator[tuple[str, nn.Module, frozenset[int]]]:
    """(qualified name, the module whose output holds the logits, the possible numbers of
    experts) of every router in `model`."""
    for name, module in model.named_modules():
        numbers = expert_numbers(module)
        if not numbers or noisy(module):
            continue
        for child_name, child in module.named_children():
            if child_name == "experts" or not any(word in child_name.lower() for word in ROUTER_WORDS):
                continue
            sub, layer = next(
                (
                    (s, x)
                    for s, x in child.named_modules()
                    if isinstance(x, nn.Linear) and x.out_features in numbers
                ),
                ("", None),
            )
            if layer is None and not isinstance(child, nn.Linear):  # a Linear of another width is no router
                layer = child  # its own output, if it has logits of that width (`logits_of`)
            if layer is not None:
                yield ".".join(n for n in (name, child_name, sub) if n), layer, frozenset(numbers)


def noisy(module: nn.Module) -> bool:
    """Does `module` put noise on its router's logits (a non-zero `*noise*` setting, or a
    parameter or module of that name)?"""
    for key, value in vars(module).items():
        if (
            "noise" in key.lower()
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
            and value
        ):
            return True
    named = [key for key, _ in module.named_parameters(recurse=False)]
    named += [key for key, _ in module.named_children()]
    return any("noise" in key.lower() for key in named)


def logits_of(output: Any, numbers: frozenset[int]) -> torch.Tensor | None:
    """The router's logits in a module's output: the tensor itself, or the first tensor of a
    tuple or list, with a number of experts on its last axis."""
    for x in output if isinstance(output, (tuple, list)) else (output,):
        if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[-1] in numbers and x.is_floating_point():
            return x
    return None


def watch_routers(hook: Hook, m: RegisteredModel, inner: nn.Module) -> None:
    """A forward hook on each router of `inner` (the module of registered model `m`); the
    two lines' recorder saves `router` every step once a router is found."""
    routers = list(find_routers(inner))
    if routers:
        hook.recorder.include_every_step(ROUTER)
    if not hook.recorder.collections.may_save(ROUTER):
        return
    for qualname, layer, numbers in routers:
        h = hook._attach(expert_counts(hook, f"expert_counts/{m.prefix}{qualname}", numbers), layer, within=m)
        hook._module_handles.append(layer.register_forward_hook(h))


def expert_counts(hook: Hook, name: str, numbers: frozenset[int]) -> Callable[..., None]:
    """The hook on a router: its tokens per expert, at the steps `router` saves (the first
    forward of a step: one micro-batch's routing when a step has several)."""

    def on_output(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        rec = hook.recorder
        if not rec.saving or rec.plan(name, NATURAL) is None or rec.has(name):
            return
        logits = logits_of(output, numbers)
        if logits is None:
            return
        with torch.no_grad():
            top = logits.detach().reshape(-1, logits.shape[-1]).argmax(-1)
            counts = torch.bincount(top, minlength=logits.shape[-1])
        hook._save(name, counts, NATURAL)

    return on_output
