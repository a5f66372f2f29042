"""Which tensors a rule inspects: its `collection_names` and `tensor_regex` parameters.

As in smdebug, the two add up: the tensors of the named collections plus every tensor whose
name matches one of the regexes. With neither given, a rule uses its own default collections.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from mldbg.rules.view import TrialView


def as_list(value: Sequence[str] | str | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def selected(
    view: TrialView,
    step: int,
    collection_names: Sequence[str] | str | None,
    tensor_regex: Sequence[str] | str | None,
    default_collections: Sequence[str] | None,
    exclude: str | None = None,
) -> list[str]:
    """Tensor names saved at `step` that the rule should look at."""
    colls = as_list(collection_names)
    regex = as_list(tensor_regex)
    if not colls and not regex:
        if default_collections is None:
            return view.names(None, step=step, exclude=exclude)
        return view.names(list(default_collections), step=step, exclude=exclude)
    names: list[str] = []
    if colls:
        names += view.names(colls, step=step, exclude=exclude)
    if regex:
        names += view.names(None, regex=regex, step=step, exclude=exclude)
    return sorted(set(names))


def needed(
    collection_names: Sequence[str] | str | None,
    tensor_regex: Sequence[str] | str | None,
    default: tuple[str, ...],
) -> tuple[str, ...]:
    """The collections a rule needs, given its parameters (a regex alone needs none)."""
    colls = as_list(collection_names)
    if colls:
        return tuple(colls)
    if as_list(tensor_regex):
        return ()
    return default


def short_list(names: Sequence[str], limit: int = 6) -> str:
    names = list(names)
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f" and {len(names) - limit} more"


def gradient_names(view: TrialView) -> dict[str, str]:
    """Parameter name -> the name of its gradient tensor (`fc1.weight` -> `gradient/fc1.weight`
    in PyTorch; any gradient whose name ends with the parameter's name elsewhere)."""
    grads = view.names("gradients")
    params = view.names(["weights", "biases"])
    out: dict[str, str] = {}
    gset = set(grads)
    for p in params:
        g = f"gradient/{p}"
        if g in gset:
            out[p] = g
            continue
        for g in grads:
            if g != p and (g.endswith("/" + p) or g.endswith(p)):
                out[p] = g
                break
    return out


def model_prefixes(view: TrialView) -> list[str]:
    """The name prefixes of the models one hook records (a GAN's generator and discriminator):
    the second and later models' inputs are `<prefix>.model_input_<i>`; the first model has
    none (""). Longest first, so that a name belongs to the longest prefix it starts with."""
    found = {m.group(1) for n in view.names("inputs") if (m := re.match(r"(.+\.)model_input_\d+$", n))}
    return sorted(found, key=len, reverse=True) + [""]


def model_of(name: str, prefixes: Sequence[str]) -> str:
    """The prefix of the model a tensor (a parameter, its gradient, a layer's output) belongs to."""
    bare = name.removeprefix("gradient/")
    return next((p for p in prefixes if bare.startswith(p)), "")


def adversarial(view: TrialView, steps: Sequence[int]) -> bool:
    """A GAN on one hook, at these training steps: two or more models trained (each one's
    gradients recorded) on a loss whose targets are made per batch (every recorded batch of
    labels holds one class: "real" for the generator's pass). The generator's loss is one
    side of a game: it is not meant to fall (it rises as the discriminator learns)."""
    prefixes = model_prefixes(view)
    if len(prefixes) < 2:
        return False
    trained: set[str] = set()
    one_class: bool | None = None
    for step in steps:
        trained |= {model_of(g, prefixes) for g in view.names("gradients", step=step)}
        for name in view.names("labels", step=step):
            got = view.class_statistics(name, None, step)
            if got is not None and got.samples >= 2:
                single = int(np.count_nonzero(got.labels)) <= 1
                one_class = single if one_class is None else one_class and single
    return len(trained) >= 2 and bool(one_class)
