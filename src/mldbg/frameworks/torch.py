"""PyTorch adapter: `mldbg.torch.Hook`.

What a step is: in TRAIN a step ends at the optimizer step (any `torch.optim` optimizer that
updates a registered parameter), or at the end of backward where no optimizer is seen. In
EVAL and PREDICT each forward of the registered model starts a new step. Weights are saved as
they were in the step's forward; gradients as the optimizer sees them (so gradient
accumulation over several backward passes is one step). An update that was skipped still
ends its step: a model's TRAIN forward that finds its gradients reset
(`zero_grad(set_to_none=True)`, the default) since a backward of the open step that no
optimizer step consumed (AMP's GradScaler skips `optimizer.step()` when a gradient
overflows) starts the next step; the forwards of an optimizer's closure (L-BFGS) are inside
its step and start none. An evaluation that forgot `model.eval()` (forwards with gradients
disabled while Dropout or BatchNorm are in training mode) lands in a TRAIN step: `torch_eval`
records it as such, and the step records its training forward, not the evaluation's.

Several models on one hook (a GAN's generator and discriminator): the first keeps smdebug's
names, each further one records under a prefix (`discriminator.fc1.weight`). A TRAIN step is
then one update of every model an optimizer trains: it ends at the optimizer step that
completes it (a GAN iteration, discriminator then generator, is one step, so a save interval
never sees only one of them). Each optimizer step saves the gradients of the models it
updates; a model's weights are saved as they were at its first forward of the step.

The callables the hook puts on a model are `torch_models.Attached`: a copy of the model
(`deepcopy`, `pickle`, `torch.save`) holds an inert stand-in in their place, so it does not
drag the hook along and records nothing unless it is registered itself.
"""

from __future__ import annotations

import functools
import logging
import os
import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from mldbg.config import Mode
from mldbg.errors import InvalidConfig
from mldbg.frameworks.base import Adapter
from mldbg.frameworks.session import Worker
from mldbg.frameworks.torch_attention import AttentionCapture, Ending
from mldbg.frameworks.torch_attention import mha_logits as attention_logits
from mldbg.frameworks.torch_defaults import (
    BUDGET,
    CLASSIFICATION_LOSSES,
    WARMUP,
    Cadence,
    ReplicaStatistics,
    StepStatistics,
)
from mldbg.frameworks.torch_eval import EvalForwards
from mldbg.frameworks.torch_host import host_copy, nbytes, to_numpy
from mldbg.frameworks.torch_models import Attached, Names, RegisteredModel
from mldbg.frameworks.torch_trace import TorchCapture
from mldbg.profiler import timeline as marks
from mldbg.store.statistics import reduction_key

log = logging.getLogger("mldbg")

ACTIVATIONS: dict[type[nn.Module], str] = {
    nn.ReLU: "relu_activations",
    nn.Tanh: "tanh_activations",
    nn.Sigmoid: "sigmoid_activations",
}


class Hook(Adapter):
    """Records a PyTorch model's tensors. Two lines: `hook.register_module(model)` and
    `hook.register_loss(loss_fn)`.

    Besides the keywords of every hook (API.md): `statistics` (None: on for the two lines, no
    `save_config` and no `include_collections`; True: added to any configuration; False: off)
    records the statistics the default rules read (docs/statistics.md). The loss is saved
    every step; the other statistics at every step of each mode's first `statistics_warmup`
    steps (default 20), then every k-th, k chosen from measurement so they take at most
    `statistics_budget` (default 0.02) of the training step's time, between 1 and 100.
    `statistics_budget=0` (or None): every step; `statistics_every=k`: every k-th, whatever
    the cost."""

    captures = {"torch": TorchCapture}  # ProfilerConfig(torch_profiler=...) windows
    own_options: ClassVar[tuple[str, ...]] = (*Adapter.own_options, "statistics_budget")

    def _worker(self) -> Worker:
        return Worker(f"torch-{torch.__version__}", *_rank_and_world())

    def _recording(self) -> dict[str, Any]:
        """Two lines (no `save_config`, no `include_collections`): statistics every step,
        unless `statistics=False`; `statistics=True` adds them to any configuration."""
        settings = dict(self._settings)
        self._cadence = Cadence(
            settings.pop("statistics_budget", BUDGET),
            settings.pop("statistics_warmup", WARMUP),
            every=settings.pop("statistics_every", None),
        )
        if settings.get("statistics") is None:
            settings["statistics"] = (
                settings["save_config"] is None and settings["include_collections"] is None
            )
        # nn.Embedding weights (besides `weights`), and the attention logits of the statistics
        settings["extra_collections"] = ("embeddings", "attention_logits")
        return settings

    def _open_run(self, out_dir: Any) -> None:
        super()._open_run(out_dir)
        rec = self.recorder
        rank, world = _rank_and_world()
        self._stats: StepStatistics | None = None
        if rec.statistics and rec.enabled:
            self._stats = StepStatistics(
                rec, self._cadence, on_spent=self.timeline.debugger, world_size=world
            )
        elif rec.statistics and world > 1:  # include_workers="one": this worker's fingerprints only
            self._stats = ReplicaStatistics(rec, rec.store, rank, world, self._worker().framework)
        # `ReductionConfig` reductions of tensors not saved raw: computed where the tensor lives
        self._reductions = StepStatistics(rec)
        self._evals = EvalForwards(rec)  # evaluations left in training mode (torch_eval)

    def _setup(self) -> None:
        self._mode: Mode | None = None  # None: follow model.training
        self._models: list[RegisteredModel] = []
        self._names = Names()  # the prefixes that keep several models' names apart
        self._params: list[tuple[str, nn.Parameter, tuple[str, ...]]] = []  # of every model
        self._param_ids: set[int] = set()
        self._handles: list[Any] = []  # global and parameter hooks
        self._module_handles: list[Any] = []  # the models' and losses' module hooks (`Attached`)
        self._grad_handles: list[Any] = []
        self._optimizers: dict[int, tuple[RegisteredModel, ...]] = {}  # the models each optimizer updates
        self._optimizer_hooks = False
        self._trained_searched = False  # several models: which of them an optimizer updates
        self._updated: set[int] = set()  # the models an optimizer updated in the open step
        self._optimizer_seen = False
        self._optimizer_searched = False
        self._backward_done = False
        self._backward_queued = False
        self._stepping = False  # inside an optimizer step of ours (between its pre and post hooks)
        self._capture: AttentionCapture | None = None  # attention logits at statistics steps
        self._unrecorded: set[int] = set()  # models in a forward of an evaluation left in training mode

    # registration -----------------------------------------------------------------------
    def register_module(self, model: nn.Module, name: str | None = None) -> None:
        """Record `model`: parameters, gradients and (if collected) layer inputs and outputs.

        May be called for several models (a GAN's generator and discriminator). The first
        model keeps smdebug's names (`fc1.weight`) unless given a `name`; the others record
        under `<name>.` (`discriminator.fc1.weight`, `gradient/discriminator.fc1.weight`,
        `discriminator.model_input_0`), by default their class name (`Discriminator.`, then
        `Discriminator_2.` ...). Registering a model again does nothing; a model another
        hook records is taken over: that hook is closed, with a warning."""
        if self._takes_over(model):
            return
        inner = getattr(model, "_orig_mod", model)  # torch.compile wraps the module
        compiled = inner is not model
        inner = getattr(inner, "module", inner) if _is_ddp(inner) else inner
        prefix = self._names.prefix(inner, name, first=not self._models)
        params: list[tuple[str, nn.Parameter, tuple[str, ...]]] = []
        tables = {id(t.weight) for t in inner.modules() if isinstance(t, (nn.Embedding, nn.EmbeddingBag))}
        for pname, p in inner.named_parameters():
            natural: tuple[str, ...] = ("biases",) if pname.endswith("bias") else ("weights",)
            natural += ("embeddings",) if id(p) in tables else ()  # lookup tables, not fan-in layers
            params.append((prefix + pname, p, natural))
        m = RegisteredModel(model, prefix, params)
        m.sentinel = next((p for _, p, _ in params if p.requires_grad), None)
        if m.sentinel is not None:
            on_grad = self._attach(self._on_sentinel_grad, m.sentinel, m)
            self._handles.append(m.sentinel.register_post_accumulate_grad_hook(on_grad))
        if self._stats is not None:
            self._stats.watch_modules(inner)
        self._evals.watch(id(m), inner)
        self._models.append(m)
        self._params.extend(params)
        self._param_ids.update(id(p) for _, p, _ in params)
        self._optimizers.clear()  # an optimizer may update the new model too
        self._trained_searched = False
        self._module_handles.append(
            model.register_forward_pre_hook(self._attach(self._on_forward_start, model, m), with_kwargs=True)
        )
        self._module_handles.append(model.register_forward_hook(self._attach(self._on_forward_end, model, m)))
        rec = self.recorder
        wants_layers = any(
            rec.collections.may_save(c)
            for c in ("outputs", "relu_activations", "tanh_activations", "sigmoid_activations")
        )
        if (wants_layers or self._stats is not None) and compiled:
            log.info(
                "mldbg: layer outputs of a torch.compile'd model are not recorded (hooks would break the graph)"
            )
        elif wants_layers or self._stats is not None:
            if self._stats is not None:  # F.scaled_dot_product_attention and eager attention
                self._watch_attention(m, inner)
            for qualname, module in inner.named_modules():
                if not qualname:
                    continue
                if isinstance(module, nn.MultiheadAttention) and self._stats is not None:
                    hook = self._attach(self._attention(prefix + qualname), module, within=m)
                    self._module_handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))
                act = next((c for t, c in ACTIVATIONS.items() if isinstance(module, t)), None)
                if act is not None:
                    hook = self._attach(self._layer_input(prefix + qualname, act), module, within=m)
                    self._module_handles.append(module.register_forward_pre_hook(hook))
                if wants_layers:  # statistics need only the activations' inputs
                    hook = self._attach(self._layer_output(prefix + qualname, act), module, within=m)
                    self._module_handles.append(module.register_forward_hook(hook))
        if not self._optimizer_hooks:  # global hooks: once for every model
            self._optimizer_hooks = True
            self._handles.append(register_optimizer_step_pre_hook(self._on_optimizer_pre))
            self._handles.append(register_optimizer_step_post_hook(self._on_optimizer_post))
        if not self._optimizer_seen:
            for _, p, _ in params:
                if p.requires_grad:
                    self._grad_handles.append(p.register_post_accumulate_grad_hook(self._on_grad))
        if self.timeline.active and len(self._models) == 1:  # the profiler times backward: one hook
            self._handles.extend(_time_backward(params, self.timeline))

    def _attach(
        self,
        fn: Callable[..., Any],
        on: Any,
        model: RegisteredModel | None = None,
        within: RegisteredModel | None = None,
    ) -> Attached:
        """`fn` as a hook on `on` (a module or parameter), given `model` first when set;
        `within`: a layer of that model, acting only inside its forward."""
        return Attached(fn if model is None else functools.partial(fn, model), self, on, within)

    def _takes_over(self, model: nn.Module) -> bool:
        """True when this hook already records `model`. A model another hook records (open, or
        closed when a newer hook opened its run) is taken from it, with a warning: that hook is
        closed and its hooks come off the model."""
        for attached in list(model._forward_pre_hooks.values()):
            if not isinstance(attached, Attached) or attached.module is not model:
                continue  # not ours, or its original's (a shallow copy shares the hook dicts)
            owner = attached.owner
            if owner is self:
                return True
            warnings.warn(
                f"mldbg: {type(model).__name__} was recorded by another hook (into {owner.out_dir}); "
                "that hook is closed and this one records it (one hook per model)",
                stacklevel=3,
            )
            owner.close()
            owner._drop_module_hooks()
        return False

    def register_loss(self, loss_fn: nn.Module) -> None:
        """Record the loss value (`losses`) and its inputs (`predictions`, `labels`)."""
        if not isinstance(loss_fn, nn.Module):
            raise InvalidConfig(
                f"register_loss needs an nn.Module such as nn.CrossEntropyLoss(), got {type(loss_fn).__name__}; "
                "for a loss function, call hook.save_scalar('loss', loss.item()) instead"
            )
        prefix = type(loss_fn).__name__
        kinds = (("predictions",), ("labels",))
        output_name = f"{prefix}_output_0"
        classes = isinstance(loss_fn, CLASSIFICATION_LOSSES)

        def on_loss(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            rec = self.recorder
            if self._evals.loss() and rec.mode == Mode.TRAIN:
                return  # an evaluation's loss, in training mode (torch_eval): not the TRAIN step's
            self.timeline.mark(marks.BACKWARD_START)  # the loss is computed: backward comes next
            if self._stats is not None:
                self._stats.loss(prefix, args, classes)
            if not rec.saving:
                return
            self._save(output_name, output, ("losses",))
            for i, a in enumerate(args):
                self._save(f"{prefix}_input_{i}", a, kinds[i] if i < 2 else ())

        self._module_handles.append(loss_fn.register_forward_hook(self._attach(on_loss, loss_fn)))

    def set_mode(self, mode: Mode) -> None:
        """Fix the mode (TRAIN, EVAL, PREDICT) instead of following `model.training`."""
        mode = Mode.parse(mode)
        if self.recorder.in_step and mode != self.recorder.mode:
            self.recorder.end_step()
        self._mode = mode

    def _to_numpy(self, value: Any) -> np.ndarray:
        return to_numpy(value) if isinstance(value, torch.Tensor) else np.asarray(value)

    # lifecycle --------------------------------------------------------------------------
    def _current_mode(self, module: nn.Module) -> Mode:
        if self._mode is not None:
            return self._mode
        return Mode.TRAIN if module.training else Mode.EVAL

    def _on_forward_start(
        self, m: RegisteredModel, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        m.running = True
        rec = self.recorder
        mode = self._current_mode(module)
        if mode == Mode.TRAIN:
            stale = rec.in_step and (
                rec.mode != Mode.TRAIN
                or (self._backward_done and not self._optimizer_seen)
                or self._update_skipped(m)
            )
            if stale:
                rec.end_step()
            if not rec.in_step:
                self._backward_done = False
                self._updated.clear()
                for other in self._models:
                    other.backward = False
                rec.start_step(Mode.TRAIN)
        else:
            self._updated.clear()
            rec.start_step(mode)  # each eval/predict forward is a step
        evaluating = not self._stepping and self._evals.forward(id(m))  # (an optimizer's closure trains)
        self.timeline.forward_start(rec.step, rec.mode)
        if evaluating and mode == Mode.TRAIN and m.trained:
            # an evaluation left in training mode (torch_eval): the TRAIN step records its training
            # forward, not the evaluation's batch (its layers' hooks stay inert: not running)
            m.running = False
            self._unrecorded.add(id(m))
            return
        if m.saved_at == rec.step:
            return  # a model called several times per step: its first call is recorded
        m.saved_at = rec.step
        if self._stats is not None:  # weights in TRAIN only: they do not change in EVAL / PREDICT
            self._stats.forward_start(m.params, args, m.prefix)
            if self._capture is not None and self._stats.due():
                self._capture.start(m, rec.mode)
        if not rec.saving:
            return
        if rec.saves_any(m.param_keys):
            for name, p, natural in m.params:
                self._save(name, p, natural)
        for i, a in enumerate(args):
            self._save(m.input_name(i), a, ("inputs",))

    def _on_sentinel_grad(self, m: RegisteredModel, p: torch.Tensor) -> None:
        m.backward = True
        self._evals.end_run()

    def _update_skipped(self, m: RegisteredModel) -> bool:
        """`m`'s gradients were reset since a backward of the open step that no optimizer
        step consumed: its iteration ended without an update."""
        return (
            self._optimizer_seen
            and not self._stepping
            and m.backward
            and m.sentinel is not None
            and m.sentinel.grad is None
            and id(m) not in self._updated
        )

    def _on_forward_end(
        self, m: RegisteredModel, module: nn.Module, args: tuple[Any, ...], output: Any
    ) -> None:
        m.running = False
        self.timeline.mark(marks.FORWARD_END)
        if id(m) in self._unrecorded:
            self._unrecorded.discard(id(m))
            return
        if self._stats is not None:
            self._stats.forward_end(output, m.prefix)
        if self.recorder.saving:
            self._save_outputs(f"{m.prefix}model", output, ("outputs",))

    def _watch_attention(self, m: RegisteredModel, inner: nn.Module) -> None:
        """Attention logits of `F.scaled_dot_product_attention` and eager attention inside the
        model's forward, at statistics steps (torch_attention)."""
        if self._capture is None:
            stats = self._stats
            assert stats is not None
            self._capture = AttentionCapture(lambda name, x: stats.add(name, x, "attention_logits"))
        self._capture.watch(inner, m.prefix, m)
        capture = self._capture

        def end(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            capture.stop(m, failed=output is None)  # also when the forward raised (always_call)

        capture.handles.append(m.module.register_forward_hook(Ending(end, self, m.module), always_call=True))

    def _layer_input(self, name: str, act: str) -> Callable[..., None]:
        input_name, natural = f"{name}_input_0", (act,)  # made once: the hook runs every step

        def hook(module: nn.Module, args: tuple[Any, ...]) -> None:
            stats = self._stats  # outside statistics steps: two attribute reads and a call
            if stats is not None and stats.due() and args:
                stats.add(input_name, args[0], act)
            if self.recorder.saving and args:
                self._save(input_name, args[0], natural)

        return hook

    def _attention(self, name: str) -> Callable[..., None]:
        logits_name = f"{name}_attention_logits"

        def hook(module: nn.MultiheadAttention, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            stats = self._stats
            if stats is not None and stats.due():
                inputs = [*args, *(kwargs.get(k) for k in ("query", "key")[len(args) :])]
                if len(inputs) >= 2 and all(isinstance(x, torch.Tensor) for x in inputs[:2]):
                    logits = attention_logits(module, inputs[0], inputs[1])
                    if logits is not None:
                        stats.add(logits_name, logits, "attention_logits")

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
        if plan is None or not (replace or not self.recorder.has(name)):
            return
        if plan.raw or not plan.reductions:
            self.recorder.save(name, host_copy(value), plan, nbytes(value))
        else:  # reductions only: no host copy, the device computes them
            self._reductions.add_kinds(name, value, _reduction_keys(plan.reductions), natural)

    # gradients and step ends --------------------------------------------------------------
    def _save_gradients(self, models: tuple[RegisteredModel, ...] | list[RegisteredModel]) -> None:
        if self._stats is not None:  # now: the optimizer is about to change the weights in place
            self._stats.before_optimizer([param for m in models for param in m.params])
        for m in models:
            if self.recorder.saves_any(m.grad_keys):
                for name, p, _ in m.params:
                    if p.grad is not None and p.requires_grad:  # a frozen one's .grad is stale
                        self._save(f"gradient/{name}", p.grad, ("gradients",), replace=True)
        self._reductions.finish()  # the weights' reductions too, before the optimizer's step

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
            self._save_gradients(self._models)

    def _ours(self, optimizer: torch.optim.Optimizer) -> tuple[RegisteredModel, ...]:
        """The registered models whose parameters `optimizer` updates (none: not ours)."""
        known = self._optimizers.get(id(optimizer))
        if known is None:
            ids = {id(p) for g in optimizer.param_groups for p in g["params"]}
            known = self._optimizers[id(optimizer)] = tuple(
                m for m in self._models if any(id(p) in ids for _, p, _ in m.params)
            )
        return known

    def _on_optimizer_pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        models = self._ours(optimizer)
        self._evals.end_run()  # any optimizer: training goes on
        self._stepping = self._stepping or bool(models)  # a closure's forwards (LBFGS) are in it
        if not models or not self.recorder.in_step:
            return
        self.timeline.mark(marks.OPTIMIZER_START)
        if not self._optimizer_seen:
            self._optimizer_seen = True
            for h in self._grad_handles:  # steps now end at the optimizer: no per-grad hooks
                h.remove()
            self._grad_handles = []
        for m in models:
            m.trained = True
        if not self._trained_searched and len(self._models) > 1:
            self._trained_searched = True  # which models some optimizer updates: a step updates them all
            for m in self._models:
                m.trained = m.trained or _optimizer_exists({id(p) for _, p, _ in m.params})
        if self.recorder.mode == Mode.TRAIN:
            self._save_gradients(models)
        elif self._stats is not None:  # training with the model left in eval mode
            self._stats.optimizer_outside_train()

    def _on_optimizer_post(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        models = self._ours(optimizer)
        self._stepping = self._stepping and not models
        if not models or not self.recorder.in_step or self.recorder.mode != Mode.TRAIN:
            return
        self._updated.update(id(m) for m in models)
        if any(m.trained and id(m) not in self._updated for m in self._models):
            return  # another model's update (a GAN's generator after its discriminator) ends the step
        self._updated.clear()
        self.timeline.mark(marks.OPTIMIZER_END)
        self.timeline.step_end()
        self.recorder.end_step()

    def _release(self) -> None:
        if self._capture is not None:  # before the statistics it hands its records to
            self._capture.close()
        if self._stats is not None:
            self._stats.close()
        for h in self._handles + self._grad_handles:
            h.remove()
        self._handles, self._grad_handles = [], []
        if not self._superseded:  # else they stay, inert, until a new hook takes the model (it warns)
            self._drop_module_hooks()

    def _drop_module_hooks(self) -> None:
        for h in self._module_handles:
            h.remove()
        self._module_handles = []


def _optimizer_exists(param_ids: set[int]) -> bool:
    """Once, at the first backward: does an optimizer hold our parameters? Then steps end
    at its `step()`, even when several backward passes accumulate gradients before it."""
    import gc

    return any(
        issubclass(type(o), torch.optim.Optimizer)  # type(): no __class__ properties run
        and any(id(p) in param_ids for g in o.param_groups for p in g["params"])
        for o in gc.get_objects()
    )


def _time_backward(
    params: list[tuple[str, nn.Parameter, tuple[str, ...]]], timeline: marks.Timeline
) -> list[Any]:
    """Profiler: backward ends with the autograd engine's final callback, queued when the
    first trainable parameter's gradient is accumulated (one hook, registered once)."""
    first = next((p for _, p, _ in params if p.requires_grad), None)
    if first is None:
        return []
    engine = torch.autograd.Variable._execution_engine
    end = functools.partial(timeline.mark, marks.BACKWARD_END)
    return [first.register_post_accumulate_grad_hook(lambda p: engine.queue_callback(end))]


@functools.lru_cache(maxsize=64)
def _reduction_keys(reductions: tuple[tuple[str, bool], ...]) -> tuple[str, ...]:
    return tuple(reduction_key(name, is_abs) for name, is_abs in reductions)


def _is_ddp(module: nn.Module) -> bool:
    return isinstance(module, nn.parallel.DistributedDataParallel)


def _rank_and_world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


__all__ = ["Hook"]
