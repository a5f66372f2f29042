"""A `torch.compile`d model's statistics steps, run eagerly.

Inside a compiled graph no module hook, torch function mode or autograd node of the model's own
shows: a layer's input (`relu_activations`, `dead_relu`), a router's logits (`router_collapse`),
the attention and functional calls `torch_attention` captures, the modules whose gradient was
cut (`parameter_without_gradient`) and the cross-entropy node the language-model counts and
the causal probe read (`torch_lm`, `missing_causal_mask`) are all inside the one compiled node.
So at a statistics step, and at a step where a layer collection saves (`outputs`, the
activations', `all`: `save_config` with `include_collections`, `mldbg run`), the hook runs the
compiled model's forward eagerly: `torch.compiler.set_stance("force_eager")` from the
wrapper's forward pre-hook until its forward ends (`always_call`: also when it raises), the
prior stance restored. The same model, the same operations, run by PyTorch's eager kernels:
its values are the compiled forward's up to rounding (bit for bit with the `eager` and
`aot_eager` backends; inductor fuses and may round otherwise); its gradients flow as usual.
Every other step runs the compiled graph, whose layer hooks are inert (`Attached`: nothing of
mldbg's enters a graph) and which is not recompiled when the hooks of a statistics step come
and go (dynamo does not guard on module hooks: `skip_nnmodule_hook_guards`).

What it costs: a statistics step runs at eager speed and memory (an inductor graph that
recomputes activations keeps fewer of them: a model that fits only compiled may not fit
eagerly), and a compiled function called inside the forward (flex attention) runs eagerly
too. On a GPU the hook never risks the training's memory for it: the first statistics step
runs compiled, and the later ones run eagerly only while the device's peak allocation so far
(`torch.cuda.max_memory_allocated`, a compiled training step included) is at most half its
memory (`HEADROOM`); above, they stay compiled and one line says so. The first compilation waits for the first step that is not a statistics step (step 20
of the default cadence). `statistics_eager=False` keeps every step compiled, and these
statistics unrecorded.

A model compiled in place (`model.compile()`: its `_call_impl` compiled, hooks and all) runs
the hook's own forward hooks inside its compiled region, at a graph break, where setting the
stance no longer changes the frame that runs: for it the stance is set when the TRAIN step
before a statistics step ends (`Hook._step_ended`), until its forward ends.

The Hugging Face `Trainer` compiles the model itself (`torch_compile=True`: accelerate wraps the
registered model after the callback registered it), so the wrapper's hooks are not mldbg's:
the callback sets the stance for the whole optimizer step, from `on_step_begin` to
`on_step_end`, when that step will be a statistics step (`Hook.next_train_step_due`).
"""

from __future__ import annotations

import logging
from typing import Any

import torch

log = logging.getLogger("mldbg")

HEADROOM = 0.5  # on a GPU: the share of its memory a compiled step may peak at for eager steps


class EagerSteps:
    """The `force_eager` stance of one hook: entered at most once at a time (by `key`: a
    registered model, the callback), left by the same key, or by anyone with none."""

    def __init__(self) -> None:
        self._held: Any = None  # the `set_stance` object that holds the prior stance
        self._key: Any = None
        self._failed = False
        self._first_step: int | None = None  # a GPU's first statistics step (run compiled)
        self._told = False

    @property
    def active(self) -> bool:
        return self._held is not None

    def enter(self, key: Any = None, step: int = 0) -> None:
        """Run compiled code eagerly from now on, until `leave` (a no-op while already in, or
        on a GPU without room for it: `_room`); `step`: the training step it is asked at."""
        if self._held is not None or self._failed or torch.compiler.is_compiling() or not self._room(step):
            return
        try:
            self._held = torch.compiler.set_stance("force_eager")
            self._key = key
        except Exception as e:  # a PyTorch without stances, or inside a compiled region
            self._failed = True
            log.info("mldbg: a torch.compile'd model's statistics steps run compiled: %s", e)

    def _room(self, step: int) -> bool:
        """Whether an eager step cannot take the memory the training needs: on the CPU, yes;
        on a GPU, not at the first statistics step (it runs compiled, and so measures a
        compiled step), then while the peak allocation so far is at most `HEADROOM` of it."""
        if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
            return True
        if self._first_step is None:
            self._first_step = step
        if step == self._first_step:
            return False
        device = torch.cuda.current_device()
        peak, total = (
            torch.cuda.max_memory_allocated(device),
            torch.cuda.get_device_properties(device).total_memory,
        )
        room = peak <= HEADROOM * total
        if not room and not self._told:
            self._told = True
            log.warning(
                "mldbg: a torch.compile'd model's statistics steps stay compiled: its training peaked at "
                "%.1f of %.1f GB, and an eager step may need more (layer, router and causal-mask checks are off)",
                peak / 1e9,
                total / 1e9,
            )
        return room

    def leave(self, key: Any = None) -> None:
        """Back to the stance before `enter` (given a `key`: only if that key entered)."""
        if self._held is None or (key is not None and key is not self._key):
            return
        held, self._held, self._key = self._held, None, None
        try:
            held.__exit__(None, None, None)
        except Exception as e:  # never in the way of the training
            log.warning("mldbg: the torch.compile stance was not restored: %s", e)


def compiled_wrapper(model: Any) -> bool:
    """Is `model` a `torch.compile(module)` wrapper (an `OptimizedModule`)?"""
    return getattr(model, "_orig_mod", None) is not None and isinstance(model, torch.nn.Module)


def compiled_in_place(model: Any) -> bool:
    """Was `model` compiled in place (`model.compile()`: its `_call_impl`, hooks and all)?"""
    return isinstance(model, torch.nn.Module) and getattr(model, "_compiled_call_impl", None) is not None


__all__ = ["EagerSteps", "compiled_in_place", "compiled_wrapper"]
