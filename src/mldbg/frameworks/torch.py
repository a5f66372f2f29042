"""PyTorch adapter: `mldbg.torch.Hook`.

What a step is: in TRAIN a step ends at the optimizer step (any `torch.optim` optimizer that
updates a registered parameter), or at the end of backward where no optimizer is seen. In
EVAL and PREDICT each forward of the registered model starts a new step. Weights are saved as
they were in the step's forward; gradients as the optimizer sees them (so gradient
accumulation over several backward passes is one step).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from mldbg.config import CollectionConfig, Mode, ReductionConfig, SaveConfig
from mldbg.errors import InvalidConfig
from mldbg.profiler.config import ProfilerConfig
from mldbg.profiler.timeline import BACKWARD_END, BACKWARD_START, FORWARD_END, OPTIMIZER_END, OPTIMIZER_START
from mldbg.record.session import RecordingSession
from mldbg.store.base import Store
from mldbg.store.format import dtype_name

log = logging.getLogger("mldbg")

ACTIVATIONS: dict[type[nn.Module], str] = {
    nn.ReLU: "relu_activations",
    nn.Tanh: "tanh_activations",
    nn.Sigmoid: "sigmoid_activations",
}
_BF16 = torch.bfloat16


def host_copy(t: torch.Tensor) -> Callable[[], tuple[np.ndarray, str]]:
    """Copy a tensor off its device now; convert to NumPy later, on the writer thread."""
    t = t.detach()
    if t.is_cuda:
        buf = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        buf.copy_(t, non_blocking=True)
        event = torch.cuda.Event()
        event.record()

        def ready() -> tuple[np.ndarray, str]:
            event.synchronize()
            return _to_numpy(buf)

        return ready
    copy = t.clone()
    return lambda: _to_numpy(copy)


def _to_numpy(t: torch.Tensor) -> tuple[np.ndarray, str]:
    if t.dtype == _BF16:
        return t.view(torch.int16).numpy().view(np.uint16), "BF16"
    array = t.numpy()
    return array, dtype_name(array)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Hook:
    """Records a PyTorch model's tensors. Two lines: `hook.register_module(model)` and
    `hook.register_loss(loss_fn)`."""

    def __init__(
        self,
        out_dir: str | os.PathLike[str] | Store,
        save_config: SaveConfig | None = None,
        include_collections: Sequence[str] | None = None,
        include_regex: Sequence[str] | str | None = None,
        reduction_config: ReductionConfig | None = None,
        save_all: bool = False,
        include_workers: str = "one",
        collection_configs: Sequence[CollectionConfig] | None = None,
        profiler_config: ProfilerConfig | None = None,
        rules: Sequence[Any] | None = None,
        actions: Sequence[Any] | None = None,
        **options: Any,
    ):
        rank, world = _rank_and_world()
        self.session = RecordingSession(
            out_dir,
            save_config=save_config,
            include_collections=include_collections,
            include_regex=include_regex,
            reduction_config=reduction_config,
            save_all=save_all,
            collection_configs=collection_configs,
            include_workers=include_workers,
            rank=rank,
            world_size=world,
            framework=f"torch-{torch.__version__}",
            profiler_config=profiler_config,
            rules=rules,
            actions=actions,
            **options,
        )
        self.recorder = self.session.recorder
        self.profiler = self.session.profiler  # with a profiler_config: system metrics, step phases
        self._timeline = self.session.timeline
        self.out_dir = self.recorder.store.url
        self._mode: Mode | None = None  # None: follow model.training
        self._model: nn.Module | None = None
        self._params: list[tuple[str, nn.Parameter, tuple[str, ...]]] = []
        self._param_ids: set[int] = set()
        self._handles: list[Any] = []
        self._grad_handles: list[Any] = []
        self._optimizers: dict[int, bool] = {}
        self._optimizer_seen = False
        self._optimizer_searched = False
        self._backward_done = False
        self._backward_queued = False
        self._grads_saved = False
        self._params_saved_at = -1
        self._closed = False

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> Hook:
        from mldbg.config_file import hook_kwargs_from_json

        return cls(**hook_kwargs_from_json(path))

    # registration -----------------------------------------------------------------------
    def register_module(self, model: nn.Module) -> None:
        """Record `model`: parameters, gradients and (if collected) layer inputs and outputs."""
        if self._model is not None:
            raise InvalidConfig("register_module was already called; use one hook per model")
        self._model = model
        inner = getattr(model, "_orig_mod", model)  # torch.compile wraps the module
        compiled = inner is not model
        inner = getattr(inner, "module", inner) if _is_ddp(inner) else inner
        for name, p in inner.named_parameters():
            natural = ("biases",) if name.endswith("bias") else ("weights",)
            self._params.append((name, p, natural))
            self._param_ids.add(id(p))
        rec = self.recorder
        self._handles.append(model.register_forward_pre_hook(self._on_forward_start, with_kwargs=True))
        self._handles.append(model.register_forward_hook(self._on_forward_end))
        wants_layers = any(
            rec.collections.may_save(c)
            for c in ("outputs", "relu_activations", "tanh_activations", "sigmoid_activations")
        )
        if wants_layers and compiled:
            log.info(
                "mldbg: layer outputs of a torch.compile'd model are not recorded (hooks would break the graph)"
            )
        elif wants_layers:
            for name, module in inner.named_modules():
                if not name:
                    continue
                act = next((c for t, c in ACTIVATIONS.items() if isinstance(module, t)), None)
                if act is not None:
                    self._handles.append(module.register_forward_pre_hook(self._layer_input(name, act)))
                self._handles.append(module.register_forward_hook(self._layer_output(name, act)))
        self._handles.append(register_optimizer_step_pre_hook(self._on_optimizer_pre))
        self._handles.append(register_optimizer_step_post_hook(self._on_optimizer_post))
        for _, p, _ in self._params:
            if p.requires_grad:
                self._grad_handles.append(p.register_post_accumulate_grad_hook(self._on_grad))
        if self._timeline is not None:
            self._handles.extend(_time_backward(self._params, self._timeline))

    def register_loss(self, loss_fn: nn.Module) -> None:
        """Record the loss value (`losses`) and its inputs (`predictions`, `labels`)."""
        if not isinstance(loss_fn, nn.Module):
            raise InvalidConfig(
                f"register_loss needs an nn.Module such as nn.CrossEntropyLoss(), got {type(loss_fn).__name__}; "
                "for a loss function, call hook.save_scalar('loss', loss.item()) instead"
            )
        prefix = type(loss_fn).__name__
        kinds = (("predictions",), ("labels",))

        def on_loss(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            if self._timeline is not None:  # the loss is computed: backward comes next
                self._timeline.mark(BACKWARD_START)
            rec = self.recorder
            if not rec.saving:
                return
            self._save(f"{prefix}_output_0", output, ("losses",))
            for i, a in enumerate(args):
                self._save(f"{prefix}_input_{i}", a, kinds[i] if i < 2 else ())

        self._handles.append(loss_fn.register_forward_hook(on_loss))

    def set_mode(self, mode: Mode) -> None:
        """Fix the mode (TRAIN, EVAL, PREDICT) instead of following `model.training`."""
        mode = Mode.parse(mode)
        if self.recorder.in_step and mode != self.recorder.mode:
            self.recorder.end_step()
        self._mode = mode

    # user values ------------------------------------------------------------------------
    def save_scalar(self, name: str, value: float | torch.Tensor) -> None:
        if isinstance(value, torch.Tensor):
            value = value.detach().float().item()
        self.recorder.save_scalar(name, value)

    def save_tensor(self, name: str, value: Any, collections: Sequence[str] = ()) -> None:
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu()
            value = (value.float() if value.dtype == _BF16 else value).numpy()
        self.recorder.save_tensor(name, value, tuple(collections))

    # lifecycle --------------------------------------------------------------------------
    def _current_mode(self) -> Mode:
        if self._mode is not None:
            return self._mode
        return Mode.TRAIN if self._model is None or self._model.training else Mode.EVAL

    def _on_forward_start(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        rec = self.recorder
        mode = self._current_mode()
        if mode == Mode.TRAIN:
            stale = rec.in_step and (
                rec.mode != Mode.TRAIN or (self._backward_done and not self._optimizer_seen)
            )
            if stale:
                rec.end_step()
            if not rec.in_step:
                self._backward_done = self._grads_saved = False
                rec.start_step(Mode.TRAIN)
        else:
            rec.start_step(mode)  # each eval/predict forward is a step
        if self._timeline is not None:
            self._timeline.forward_start(rec.step, rec.mode)
        if not rec.saving or self._params_saved_at == rec.step:
            return  # a model called several times per step: its first call is recorded
        self._params_saved_at = rec.step
        for name, p, natural in self._params:
            self._save(name, p, natural)
        for i, a in enumerate(args):
            self._save(f"model_input_{i}", a, ("inputs",))

    def _on_forward_end(self, module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        if self._timeline is not None:
            self._timeline.mark(FORWARD_END)
        if self.recorder.saving:
            self._save_outputs("model", output, ("outputs",))

    def _layer_input(self, name: str, act: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: tuple[Any, ...]) -> None:
            if self.recorder.saving and args:
                self._save(f"{name}_input_0", args[0], (act,))

        return hook

    def _layer_output(self, name: str, act: str | None) -> Callable[..., None]:
        natural = ("outputs", act) if act else ("outputs",)
        inputs_natural = () if act is None else None

        def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            if not self.recorder.saving:
                return
            self._save_outputs(name, output, natural)
            if inputs_natural is not None:  # other layers' inputs: only by regex or save_all
                for i, a in enumerate(args):
                    self._save(f"{name}_input_{i}", a, inputs_natural)

        return hook

    def _save_outputs(self, name: str, output: Any, natural: tuple[str, ...]) -> None:
        outs = output if isinstance(output, (tuple, list)) else (output,)
        for i, o in enumerate(outs):
            self._save(f"{name}_output_{i}", o, natural)

    def _save(self, name: str, value: Any, natural: tuple[str, ...], replace: bool = False) -> None:
        if not isinstance(value, torch.Tensor) or value.is_complex() or value.is_sparse:
            return
        plan = self.recorder.plan(name, natural)
        if plan is not None and (replace or not self.recorder.has(name)):
            self.recorder.save(name, host_copy(value), plan, _nbytes(value))

    # gradients and step ends --------------------------------------------------------------
    def _save_gradients(self) -> None:
        if not self.recorder.saving:
            return
        for name, p, _ in self._params:
            if p.grad is not None:
                self._save(f"gradient/{name}", p.grad, ("gradients",), replace=True)
        self._grads_saved = True

    def _on_grad(self, p: torch.Tensor) -> None:
        if not self._backward_queued:
            self._backward_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._on_backward_end)

    def _on_backward_end(self) -> None:
        self._backward_queued = False
        self._backward_done = True
        if not self._optimizer_seen and not self._optimizer_searched:
            self._optimizer_searched = True
            self._optimizer_seen = _optimizer_exists(self._param_ids)
            if self._optimizer_seen:  # steps end at the optimizer: the per-grad hooks have no more use
                for h in self._grad_handles:
                    h.remove()
                self._grad_handles = []
        if not self._optimizer_seen and self.recorder.mode == Mode.TRAIN:
            self._save_gradients()

    def _ours(self, optimizer: torch.optim.Optimizer) -> bool:
        known = self._optimizers.get(id(optimizer))
        if known is None:
            known = self._optimizers[id(optimizer)] = any(
                id(p) in self._param_ids for g in optimizer.param_groups for p in g["params"]
            )
        return known

    def _on_optimizer_pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if not self._ours(optimizer) or not self.recorder.in_step:
            return
        if self._timeline is not None:
            self._timeline.mark(OPTIMIZER_START)
        if not self._optimizer_seen:
            self._optimizer_seen = True
            for h in self._grad_handles:  # steps now end at the optimizer: no per-grad hooks
                h.remove()
            self._grad_handles = []
        if self.recorder.mode == Mode.TRAIN:
            self._save_gradients()

    def _on_optimizer_post(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if self._ours(optimizer) and self.recorder.in_step and self.recorder.mode == Mode.TRAIN:
            if self._timeline is not None:
                self._timeline.mark(OPTIMIZER_END)
                self._timeline.step_end()
            self.recorder.end_step()

    def close(self) -> None:
        """Flush everything and write the end marker. Also runs at interpreter exit."""
        if self._closed:
            return
        self._closed = True
        for h in self._handles + self._grad_handles:
            h.remove()
        self._handles, self._grad_handles = [], []
        self.session.close()

    def __enter__(self) -> Hook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _optimizer_exists(param_ids: set[int]) -> bool:
    """Once, at the first backward: does an optimizer hold our parameters? Then steps end
    at its `step()`, even when several backward passes accumulate gradients before it."""
    import gc

    return any(
        issubclass(type(o), torch.optim.Optimizer)  # type(): no __class__ properties run
        and any(id(p) in param_ids for g in o.param_groups for p in g["params"])
        for o in gc.get_objects()
    )


def _time_backward(params: list[tuple[str, nn.Parameter, tuple[str, ...]]], timeline: Any) -> list[Any]:
    """Profiler: backward ends with the autograd engine's final callback, queued when the
    first trainable parameter's gradient is accumulated (one hook, registered once)."""
    first = next((p for _, p, _ in params if p.requires_grad), None)
    if first is None:
        return []
    engine = torch.autograd.Variable._execution_engine
    end = functools.partial(timeline.mark, BACKWARD_END)
    return [first.register_post_accumulate_grad_hook(lambda p: engine.queue_callback(end))]


def _is_ddp(module: nn.Module) -> bool:
    return isinstance(module, nn.parallel.DistributedDataParallel)


def _rank_and_world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


__all__ = ["Hook"]
