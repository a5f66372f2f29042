"""The models a PyTorch hook records (`Hook.register_module`, several per hook).

- `RegisteredModel`: one model's parameters under their recorded names;
- `Names`: the prefixes that keep several models' names apart (none for the first model
  without a `name`; `<name>.` or `<ClassName>.` for the others; never a collision);
- `Attached`: each callable the hook puts on a module. The hook also finds, through them,
  which hook records a model (one hook per model);
- `Omitting`: what a module with an `Attached` holds as its own `__reduce_ex__` (in its
  `__dict__`, nothing on its class). A copy of the module (`copy.deepcopy`, `copy.copy`,
  `pickle`, `torch.save`) is what the module without mldbg would give: its hook dicts
  without mldbg's entries, no mldbg class anywhere in the pickle (so `torch.load(...,
  weights_only=True)` loads it where it loads the unhooked model). The copy carries no
  reference to the hook and records nothing unless it is registered itself; the user's own
  hooks are copied, and their `RemovableHandle`s keep working on the original (its hook dicts
  are the same objects: nothing is replaced).
"""

from __future__ import annotations

import inspect
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from mldbg.errors import InvalidConfig

Param = tuple[str, nn.Parameter, tuple[str, ...]]  # recorded name, parameter, natural collections

# keyword arguments that are a model's input, in the order they are looked for (Hugging Face's
# names first), and words of those that are not: labels, masks, positions, caches
INPUT_KEYWORDS = (
    "input_ids", "pixel_values", "input_values", "input_features", "inputs_embeds",
    "past_values",  # Hugging Face's time-series models (TimeSeriesTransformer, PatchTST, Informer)
    "x", "input", "inputs", "images", "image", "features",
)  # fmt: skip
# `past`: a cache (`past_key_values`); `future`: a time-series model's targets (`future_values`,
# the Trainer's labels) and the covariates of the horizon
NOT_INPUT_WORDS = ("label", "target", "mask", "position", "token_type", "cache", "past", "future", "decoder")


# a forward's parameters that take the targets (`forward(self, x, targets=None)`: YOLOX and
# torchvision's detectors, nanoGPT, a model that computes its own loss); not `y`, which is as
# often an input (DeepONet's query points, `forward(u, y)`)
TARGET_PARAMETERS = frozenset({"target", "targets", "label", "labels", "y_true", "gt", "gts"})


def targets_at(module: nn.Module) -> int | None:
    """The index of the first positional argument after the first that `module`'s forward
    takes as its targets (a parameter named `targets`, `labels`...); None without one or
    where the signature cannot be read."""
    try:
        names = list(inspect.signature(module.forward).parameters.items())
    except (TypeError, ValueError):
        return None
    for i, (name, p) in enumerate(names):
        if p.kind in (p.VAR_POSITIONAL, p.KEYWORD_ONLY, p.VAR_KEYWORD):
            return None
        if i > 0 and name.lower() in TARGET_PARAMETERS:
            return i
    return None


def model_inputs(
    args: tuple[Any, ...], kwargs: dict[str, Any], targets: int | None = None
) -> tuple[Any, ...]:
    """What a model call takes as its input (`model_input_<i>`): its positional arguments up
    to its targets (`targets`: the index of the first, `targets_at`: a detector's boxes, the
    labels of a model that computes its own loss are no input to judge), or for a call by
    keywords alone (`model(**batch)`: the Hugging Face Trainer, a dict batch) the
    one keyword argument that is the input: a known input name (`input_ids`,
    `pixel_values`...), else the first tensor that is no label, mask, position or cache (a
    collator may put `labels` first)."""
    if args or not kwargs:
        return args[:targets] if targets is not None else args
    for key in INPUT_KEYWORDS:
        if isinstance(kwargs.get(key), torch.Tensor):
            return (kwargs[key],)
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor) and not any(word in key.lower() for word in NOT_INPUT_WORDS):
            return (value,)
    return ()


@dataclass(eq=False)
class RegisteredModel:
    """One registered model: its parameters under their recorded names (with the model's
    prefix), and the step whose forward already saved them."""

    module: nn.Module
    prefix: str
    params: list[Param]
    saved_at: int = -1
    # a backward reached `sentinel` (its first trainable parameter) in the open TRAIN step
    backward: bool = False
    running: bool = False  # inside its forward: the layers' hooks act only then
    sentinel: nn.Parameter | None = None
    trained: bool = False  # an optimizer updates it: a TRAIN step ends once every such model is updated
    waits: int = 0  # updates of the other models since its own last one (`StepEnds._waiting`)
    # a tensor-parallel rank other than its group's first: its inputs are that rank's by design
    input_replica: bool = False
    forwarded: bool = False  # its first forward was seen (`Hook._sharded_since`)
    eager: bool = False  # a torch.compile'd model whose statistics steps run eagerly (torch_compiled)
    # a container without a forward of its own (nn.ModuleDict): the part called first, whose
    # forwards stand for the model's; `part_open`: another part's forward runs (and set `running`)
    entry: nn.Module | None = None
    part_open: bool = False
    # its own forward runs (`inside`); its direct parts are hooked (`strays`), and the one
    # called outside its forward runs (`stray`): a model trained through a part alone
    # (`Hook._stray_parts`)
    inside: bool = False
    strays: bool = False
    stray: nn.Module | None = None
    # the parameters its recorded forward of the open step ran with: all of them, or a stray
    # part's (the others' `.grad` is stale from an earlier phase: not this step's)
    step_params: list[Param] = field(init=False)
    _part_params: dict[int, list[Param]] = field(init=False, default_factory=dict)
    # since its last update (`StepEnds._before_sentinel_grad`): a backward reached
    # `reset_param`, and its `.grad` was reset (None or zero) when one began: a bool, or a device
    # bool where a held `.grad` was tested for zeros (no sync)
    incoming: bool = False
    reset: bool | torch.Tensor = False
    reset_param: nn.Parameter | None = None  # whose `.grad` tells (a leaf layer's first trainable one)
    # the `.grad` of `reset_param` as a backward pass began (`StepEnds._grads_before_backward`):
    # (that tensor, its version, whether it was reset); None outside a pass
    before_pass: tuple[Any, int, bool | torch.Tensor] | None = None
    # a forward with gradients disabled in a TRAIN step (a candidate pool scored, a target
    # computed) is not the step's batch: its (step, args, kwargs, inputs, output) wait for the
    # step's first forward with gradients, which records its own instead, or for the step's end
    # (`Hook._record_held`); `outputs_due`: the running forward recorded its inputs
    held: tuple[int, tuple[Any, ...], dict[str, Any], tuple[Any, ...], Any] | None = None
    outputs_due: bool = False
    # the first input of its last recorded TRAIN forward, while it lives, and its `_version`
    # then (`same_input/<model>`)
    last_input: tuple[weakref.ref[Any], int | None] | None = None
    # asked once per schedule whether anything of them saves (the recorder keeps the answer)
    param_keys: tuple[tuple[str, tuple[str, ...]], ...] = field(init=False)
    grad_keys: tuple[tuple[str, tuple[str, ...]], ...] = field(init=False)
    _inputs: list[str] = field(init=False, default_factory=list)
    # the index of its forward's first positional targets argument (`targets_at`), read once
    targets: int | None = field(init=False)
    _grad_names: dict[str, str] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.targets = targets_at(self.module)
        self.param_keys = tuple((name, natural) for name, _, natural in self.params)
        self.grad_keys = tuple((f"gradient/{name}", ("gradients",)) for name, _, _ in self.params)
        self.step_params = self.params

    def part_params(self, part: nn.Module) -> list[Param]:
        """The parameters of a direct part of the model (`Hook._stray_parts`), in its order."""
        found = self._part_params.get(id(part))
        if found is None:
            ids = {id(p) for p in part.parameters()}
            found = self._part_params[id(part)] = [x for x in self.params if id(x[1]) in ids]
        return found

    def record_name(self, kind: str) -> str:
        """`<kind>/<model>` of a record about the whole model (`gradient_reset`,
        `learning_rate`): its prefix, or `model` for the first model."""
        return f"{kind}/{self.prefix.rstrip('.') or 'model'}"

    def grad_name(self, name: str) -> str:
        """`gradient/<name>` of one of its parameters, made once."""
        found = self._grad_names.get(name)
        if found is None:
            found = self._grad_names[name] = f"gradient/{name}"
        return found

    def input_name(self, i: int) -> str:
        """`model_input_<i>` with the model's prefix, made once: forwards run every step."""
        while len(self._inputs) <= i:
            self._inputs.append(f"{self.prefix}model_input_{len(self._inputs)}")
        return self._inputs[i]


class Names:
    """The name prefixes of one hook's models."""

    def __init__(self) -> None:
        self.roots: set[str] = set()  # first parts of the names taken by the registered models

    def prefix(self, model: nn.Module, name: str | None, first: bool) -> str:
        """The prefix of `model`'s names: none for the `first` model without a `name`; never
        one that collides with a name of a model registered before."""
        if name is None and first:
            self.roots |= {n.split(".")[0] for n, _ in model.named_modules() if n}
            self.roots |= {n.split(".")[0] for n, _ in model.named_parameters()}
            return ""
        if name is not None:
            if not isinstance(name, str) or not name or "/" in name or name.startswith("gradient"):
                raise InvalidConfig(
                    f"register_module(name={name!r}): a model's name is a non-empty string without '/', "
                    "not beginning with 'gradient' (its tensors are named '<name>.fc1.weight')"
                )
            if name in self.roots:
                raise InvalidConfig(
                    f"register_module(name={name!r}): names beginning with {name + '.'!r} are already "
                    "recorded for a model registered before; choose another name"
                )
            root = name
        else:
            base = root = type(model).__name__
            k = 2
            while root in self.roots:
                root, k = f"{base}_{k}", k + 1
        self.roots.add(root)
        return root + "."


class Omitted:
    """What mldbg puts in a module's hook dicts (`Attached`, the Hugging Face callback's): left
    out of the module's copies and pickles (`Omitting`)."""

    __slots__ = ()

    def __reduce__(self) -> tuple[type[Detached], tuple[()]]:
        # reached only where `Omitting` could not act (a module whose class reduces it to a
        # state that is not a dict, or the hook dicts copied on their own): an inert stand-in,
        # never the hook
        return (Detached, ())


class Detached:
    """An inert stand-in (`Omitted.__reduce__`, and what checkpoints written by earlier
    versions of mldbg hold): nothing happens."""

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return None


class Attached(Omitted):
    """A hook's callable on `module`; `owner` is the hook. A module it is put on copies and
    pickles without it (`Omitting`, installed here).

    It acts only when called for `module` itself (a shallow copy shares its original's hook
    dicts, so its forwards call these too) and, for a layer of a registered model (`within`),
    only while that model's forward runs (a shallow copy shares the layers themselves)."""

    __slots__ = ("fn", "owner", "module", "within")

    def __init__(
        self, fn: Callable[..., Any], owner: Any, module: nn.Module, within: RegisteredModel | None = None
    ):
        self.fn = fn
        self.owner = owner
        self.module = module
        self.within = within
        if isinstance(module, nn.Module):
            Omitting.install(module)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # a model compiled after it was registered calls these inside the traced region: a
        # layer's hook vanishes from the graph (layer outputs of a compiled model are not
        # recorded, as for a model compiled first), the model's own runs eagerly (`_eager`)
        if torch.compiler.is_compiling():
            return None if self.within is not None else self._eager(*args, **kwargs)
        return self._run(*args, **kwargs)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        if self.owner._closed:  # left on the model until a new hook takes it
            return None
        if args[0] is not self.module or (self.within is not None and not self.within.running):
            return None  # a shallow copy's forward, or a layer called outside its model's forward
        return self.fn(*args, **kwargs)

    # mldbg's code is never traced: dynamo cannot trace time.perf_counter, and the statistics
    # must not join the user's graph (one graph break where the model's forward begins and ends)
    _eager = torch.compiler.disable(_run)


# the hook dicts of an nn.Module, and the dicts of flags keyed by the same hook ids
_HOOKS = (
    "_forward_pre_hooks",
    "_forward_hooks",
    "_backward_pre_hooks",
    "_backward_hooks",
    "_state_dict_pre_hooks",
)
_FLAGS = ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs", "_forward_hooks_always_called")
_KEY = "__reduce_ex__"


class Omitting:
    """A module's `__reduce_ex__` while mldbg has hooks on it: what the module's class would
    reduce it to (its own `__reduce_ex__`, `__getstate__`), its state without mldbg's hooks.
    `copy`, `pickle` and `torch.save` look `__reduce_ex__` up on the instance first."""

    __slots__ = ("module",)

    def __init__(self, module: nn.Module):
        self.module = weakref.ref(module)

    @classmethod
    def install(cls, module: nn.Module) -> None:
        if not isinstance(module.__dict__.get(_KEY), cls):
            module.__dict__[_KEY] = cls(module)

    @staticmethod
    def remove(module: nn.Module) -> None:
        """Taken off once no `Attached` is left on `module`."""
        if isinstance(module.__dict__.get(_KEY), Omitting) and not _ours(module.__dict__):
            del module.__dict__[_KEY]

    def __call__(self, protocol: int) -> Any:
        module = self.module()
        assert module is not None  # reached through the module
        reduced = type(module).__reduce_ex__(module, protocol)
        if not isinstance(reduced, tuple) or len(reduced) < 3 or not isinstance(reduced[2], dict):
            return reduced
        return (*reduced[:2], without_hooks(reduced[2]), *reduced[3:])


def _ours(state: dict[str, Any]) -> set[int]:
    """The ids of mldbg's entries in a module's hook dicts."""
    return {k for name in _HOOKS for k, v in (state.get(name) or {}).items() if isinstance(v, Omitted)}


def without_hooks(state: dict[str, Any]) -> dict[str, Any]:
    """A module's state (its `__dict__`) as it would be without mldbg: a new dict, the
    module's own left as it is."""
    ours = _ours(state)
    out: dict[str, Any] = {}
    for name, value in state.items():
        if name == _KEY and isinstance(value, Omitting):
            continue
        if ours and (name in _HOOKS or name in _FLAGS) and isinstance(value, dict):
            kept = type(value)()
            kept.update((k, v) for k, v in value.items() if k not in ours)
            value = kept
        out[name] = value
    return out


def take_over(hook: Any, model: nn.Module) -> bool:
    """True when `hook` already records `model`. A model another hook records (open, or
    closed when a newer hook opened its run) is taken from it by `hook`, with a warning: that hook is
    closed and its hooks come off the model."""
    for attached in list(model._forward_pre_hooks.values()):
        if not isinstance(attached, Attached) or attached.module is not model:
            continue  # not ours, or its original's (a shallow copy shares the hook dicts)
        owner = attached.owner
        if owner is hook:
            return True
        warnings.warn(
            f"mldbg: {type(model).__name__} was recorded by another hook (into {owner.out_dir}); "
            "that hook is closed and this one records it (one hook per model)",
            stacklevel=3,
        )
        owner.close()
        owner._drop_module_hooks()
    return False
