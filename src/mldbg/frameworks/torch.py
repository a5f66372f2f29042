"""PyTorch adapter: `mldbg.torch.Hook`.

What a step is: in TRAIN a step ends at the optimizer step, or at the end of backward where no
optimizer is seen (`torch_steps`). In EVAL and PREDICT each forward of the registered model
starts a new step. Weights are saved as they were in the step's forward; gradients as the
optimizer sees them. An evaluation that forgot `model.eval()` (forwards with gradients
disabled while Dropout or BatchNorm are in training mode) lands in a TRAIN step:
`torch_eval` records it as such, and the step records its training forward, not the
evaluation's. The layers' hooks (activations, outputs, attention) are `torch_layers`'; the
statistics of the two lines `torch_defaults`'. A `torch.compile`d model runs its statistics
steps eagerly, where those hooks see inside it (`torch_compiled`).

Several models on one hook (a GAN's generator and discriminator): the first keeps smdebug's
names, each further one records under a prefix (`discriminator.fc1.weight`); a model's
weights are saved as they were at its first forward of the step.

The callables the hook puts on a model are `torch_models.Attached`: a copy of the model
(`deepcopy`, `copy.copy`, `pickle`, `torch.save`) is what the model without mldbg would give
(`torch_models.Omitting`: no mldbg class in the pickle, `torch.load(..., weights_only=True)`
loads it), so it does not drag the hook along and records nothing unless it is registered
itself.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from mldbg.config import Mode
from mldbg.errors import InvalidConfig
from mldbg.frameworks.base import Adapter
from mldbg.frameworks.session import Worker
from mldbg.frameworks.torch_attention import AttentionCapture
from mldbg.frameworks.torch_compiled import EagerSteps, compiled_in_place, compiled_wrapper
from mldbg.frameworks.torch_ddp import outlive_reducer
from mldbg.frameworks.torch_deepspeed import DeepSpeedZero, is_engine
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
from mldbg.frameworks.torch_layers import LAYER_COLLECTIONS, StepLayers, end_attention_at, watch_layers
from mldbg.frameworks.torch_loss import NAME as LOSS_NAME
from mldbg.frameworks.torch_loss import LossCapture
from mldbg.frameworks.torch_models import Attached, Names, Omitting, RegisteredModel, model_inputs, take_over
from mldbg.frameworks.torch_sharded import (
    PieceRecorder,
    ShardedStatistics,
    input_replica,
    is_sharded,
    piece_and_layout,
)
from mldbg.frameworks.torch_steps import StepEnds, time_backward
from mldbg.frameworks.torch_trace import TorchCapture
from mldbg.profiler import timeline as marks
from mldbg.record.recorder import Plan
from mldbg.store.shards import layout_name
from mldbg.store.statistics import reduction_key

log = logging.getLogger("mldbg")
# collections saved from a model's layers: a compiled model runs eagerly where one saves
LAYER_SAVES = frozenset((*LAYER_COLLECTIONS, "all"))


class Hook(StepEnds, Adapter):
    """Records a PyTorch model's tensors. Two lines: `hook.register_module(model)` and
    `hook.register_loss(loss_fn)`.

    Besides the keywords of every hook (API.md): `statistics` (None: on for the two lines, no
    `save_config` and no `include_collections`; True: added to any configuration; False: off)
    records the statistics the default rules read (docs/statistics.md). The loss is saved
    every step; the other statistics at every step of each mode's first `statistics_warmup`
    steps (default 20), then every k-th: the steps follow from the step numbers alone, the
    same on any machine. k = ceil(1 / `statistics_budget`) between 1 and 100 (default 0.005:
    k = 100), the budget being the share of the step time the statistics may take when a
    statistics step costs one training step more (a CPU's case). `statistics_budget=0` (or
    None): every step; `statistics_every=k`: every k-th, any k."""

    captures = {"torch": TorchCapture}  # ProfilerConfig(torch_profiler=...) windows
    # the loss where the script computes it, without register_loss (`torch_loss`); off for the
    # trainers' callbacks, which record the loss their loop sees
    finds_loss: ClassVar[bool] = True
    own_options: ClassVar[tuple[str, ...]] = (*Adapter.own_options, "statistics_budget", "statistics_eager")

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
        # a torch.compile'd model's statistics steps run eagerly (`torch_compiled`)
        eager = settings.pop("statistics_eager", True)
        if not isinstance(eager, bool):
            raise InvalidConfig(f"statistics_eager must be True or False, got {eager!r}")
        self._eager_ok = eager
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
        rec.before_step_end.append(self._step_layers.detach)
        rec.before_step_end.append(self._record_held)  # before the statistics' `finish`
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
        # DTensors (FSDP2, tensor parallel): partial statistics merged across the ranks, on every rank
        self._sharded: ShardedStatistics | None = (
            ShardedStatistics(rec, self._cadence.due, world > 1) if rec.statistics else None
        )
        for stats in (self._stats, self._reductions):
            if stats is not None:
                stats.batch.sharded = self._sharded
        # include_workers="one" and tensors saved raw: the other ranks save their DTensor pieces
        self._pieces: PieceRecorder | None = None
        if not rec.enabled and world > 1 and _saves_raw(self._settings):
            if isinstance(self._stats, ReplicaStatistics):  # one recorder a worker
                log.info(
                    "mldbg: with statistics=True, only worker 0's pieces of sharded tensors are saved raw"
                )
            else:
                keep = ("save_config", "include_collections", "include_regex", "reduction_config", "save_all",
                        "collection_configs", "extra_collections")  # fmt: skip
                settings = {k: v for k, v in self._recording().items() if k in keep}
                self._pieces = PieceRecorder(rec, settings, rank, world, self._worker().framework)
        self._evals = EvalForwards(rec)  # evaluations left in training mode (torch_eval)
        if self.finds_loss:
            self._loss.open()
        elif self._stats is not None:  # a trainer's callback: the counts of a loss outside the model
            self._loss.listen_for_counts()

    def _setup(self) -> None:
        self._mode: Mode | None = None  # None: follow model.training
        self._models: list[RegisteredModel] = []
        self._names = Names()  # the prefixes that keep several models' names apart
        self._params: list[tuple[str, nn.Parameter, tuple[str, ...]]] = []  # of every model
        self._param_ids: set[int] = set()
        self._handles: list[Any] = []  # global and parameter hooks
        self._module_handles: list[Any] = []  # the models' and losses' module hooks (`Attached`)
        self._omitting: weakref.WeakSet[nn.Module] = weakref.WeakSet()  # modules with an `Omitting`
        self._setup_step_ends()  # optimizer and backward hooks (torch_steps)
        self._capture: AttentionCapture | None = None  # attention logits at statistics steps
        self._step_layers = StepLayers()  # layer hooks on at statistics steps only (torch_layers)
        self._unrecorded: set[int] = set()  # models in a forward of an evaluation left in training mode
        self._loss = LossCapture(self)  # the loss without register_loss (torch_loss)
        self._loss.off = not self.finds_loss
        self._sharded = None  # made with the run (`_open_run`)
        self._deepspeed: DeepSpeedZero | None = None  # DeepSpeed ZeRO, found at a model's first forward
        self._pieces = None
        self._told_shards = False
        self._eager = EagerSteps()  # a compiled model's statistics steps, run eagerly (torch_compiled)

    # registration -----------------------------------------------------------------------
    def register_module(self, model: nn.Module, name: str | None = None) -> None:
        """Record `model`: parameters, gradients and (if collected) layer inputs and outputs.

        May be called for several models (a GAN's generator and discriminator). The first
        model keeps smdebug's names (`fc1.weight`) unless given a `name`; the others record
        under `<name>.` (`discriminator.fc1.weight`, `gradient/discriminator.fc1.weight`,
        `discriminator.model_input_0`), by default their class name (`Discriminator.`, then
        `Discriminator_2.` ...). Registering a model again does nothing; a model another
        hook records is taken over: that hook is closed, with a warning. Given a
        `DistributedDataParallel` wrapper or a DeepSpeed engine, the hook records the module it
        wraps: forwards that bypass the wrapper (`model.module(x)`) are recorded too. A model
        that an optimizer updates with no registered forward run since (trained through a part
        called on its own: `autoencoder[0](x)`) has its direct parts' own calls recorded as its
        forwards from then on (`_stray_parts`)."""
        inner = getattr(model, "_orig_mod", model)  # torch.compile wraps the module
        compiled = inner is not model
        # its statistics steps run eagerly, where its layers, routers and loss node show (torch_compiled)
        eager = compiled and self._eager_ok and compiled_wrapper(model)
        ddp = _is_ddp(inner) or is_engine(inner)  # a DeepSpeed engine: the model it wraps
        wrapper, inner = inner, getattr(inner, "module", inner) if ddp else inner
        if ddp and not compiled:
            # the hooks go on the module inside a DistributedDataParallel: the wrapper's forward
            # calls it, and so does code that bypasses the wrapper (`model.module(x)`, an evaluation)
            model = inner
        if take_over(self, model):
            return
        if _is_ddp(wrapper):
            outlive_reducer(wrapper)  # freeing it at the script's end must not hang the worker
        prefix = self._names.prefix(inner, name, first=not self._models)
        params: list[tuple[str, nn.Parameter, tuple[str, ...]]] = []
        tables = {id(t.weight) for t in inner.modules() if isinstance(t, (nn.Embedding, nn.EmbeddingBag))}
        for pname, p in inner.named_parameters():
            natural: tuple[str, ...] = ("biases",) if pname.endswith("bias") else ("weights",)
            natural += ("embeddings",) if id(p) in tables else ()  # lookup tables, not fan-in layers
            params.append((prefix + pname, p, natural))
        m = RegisteredModel(model, prefix, params)
        m.eager = eager
        m.sentinel = next((p for _, p, _ in params if p.requires_grad), None)
        m.input_replica = input_replica(inner, (p for _, p, _ in params))
        if m.sentinel is not None:
            on_grad = self._attach(self._on_sentinel_grad, m.sentinel, m)
            self._handles.append(m.sentinel.register_post_accumulate_grad_hook(on_grad))
            # gradient_reset: the first trainable parameter of a leaf layer, which its own forward
            # uses (a parameter of the model itself may be used outside it: a CRF's transitions)
            layer = next(
                (
                    x for x in inner.modules()
                    if next(x.children(), None) is None and any(q.requires_grad for q in x.parameters(False))
                ),
                None,
            )  # fmt: skip
            m.reset_param = (
                None if layer is None else next(q for q in layer.parameters(False) if q.requires_grad)
            )
            if layer is not None and not is_sharded(m.reset_param):  # where its gradient comes from
                # inside the model's forward only (a compiled model's layer hooks vanish from its graph)
                on_layer = self._attach(self._on_sentinel_layer, layer, m, within=m)
                self._module_handles.append(layer.register_forward_hook(on_layer))
        if self._stats is not None:
            self._stats.watch_modules(inner, gradients=not compiled or eager, prefix=m.prefix)
        self._evals.watch(id(m), inner)
        self._models.append(m)
        self._params.extend(params)
        self._param_ids.update(id(p) for _, p, _ in params)
        self._optimizers.clear()  # an optimizer may update the new model too
        self._trained_searched = False
        # a container without a forward of its own (nn.ModuleDict, nn.ModuleList) is never called:
        # its parts are, one by one (`model["backbone"](x)`); they are hooked instead
        # (only those: a module of the user's own without a forward, CleanRL's `Agent`, whose
        # `get_value` serves rollouts and updates alike, has no one call that is its training
        # step; nor a compiled model's wrapper)
        container = not compiled and isinstance(model, (nn.ModuleDict, nn.ModuleList))
        parts = list(model.children()) if container else []
        for part in parts or [model]:
            start, end = (
                (self._on_part_start, self._on_part_end)
                if parts
                else (self._on_forward_start, self._on_forward_end)
            )
            self._module_handles.append(
                part.register_forward_pre_hook(self._attach(start, part, m), with_kwargs=True)
            )
            self._module_handles.append(part.register_forward_hook(self._attach(end, part, m)))
        watch_layers(self, m, inner, compiled and not eager)
        # the model's state taken after an evaluation: a script that keeps its best model
        self._module_handles.append(
            model.register_state_dict_pre_hook(self._attach(self._on_state_taken, model, m))
        )
        if eager or (self._eager_ok and compiled_in_place(model)):
            self._run_eager_steps(m)
        if not self._optimizer_hooks:  # global hooks: once for every model
            self._optimizer_hooks = True
            self._handles.append(register_optimizer_step_pre_hook(self._on_optimizer_pre))
            self._handles.append(register_optimizer_step_post_hook(self._on_optimizer_post))
        if not self._optimizer_seen:
            for _, p, _ in params:
                if p.requires_grad:
                    self._grad_handles.append(p.register_post_accumulate_grad_hook(self._on_grad))
        if self.timeline.active and len(self._models) == 1:  # the profiler times backward: one hook
            self._handles.extend(time_backward(params, self.timeline))

    def _attach(
        self,
        fn: Callable[..., Any],
        on: Any,
        model: RegisteredModel | None = None,
        within: RegisteredModel | None = None,
    ) -> Attached:
        """`fn` as a hook on `on` (a module or parameter), given `model` first when set;
        `within`: a layer of that model, acting only inside its forward."""
        if isinstance(on, nn.Module):
            self._omitting.add(on)  # its `Omitting` comes off with the hooks
        return Attached(fn if model is None else functools.partial(fn, model), self, on, within)

    def register_loss(self, loss_fn: nn.Module) -> None:
        """Record the loss value (`losses`) and its inputs (`predictions`, `labels`). Without it
        the hook records the loss the models return or the script gives to backward (`loss`,
        `torch_loss`); with it, only this one. A loss function (`F.nll_loss`) needs no
        registration: given one, this does nothing (its value is the one given to backward)."""
        if not isinstance(loss_fn, nn.Module):
            if callable(loss_fn):  # F.nll_loss: its value is the one given to backward, recorded as `loss`
                return
            raise InvalidConfig(
                f"register_loss needs an nn.Module such as nn.CrossEntropyLoss(), got {type(loss_fn).__name__}; "
                "a loss computed otherwise is recorded as 'loss' from the tensor given to backward"
            )
        if not self._loss.off:  # a step that trains without it records what backward is given
            self._loss.registered_at = -1
        self._loss.off = True  # the registered loss is the loss
        prefix = type(loss_fn).__name__
        kinds = (("predictions",), ("labels",))
        output_name = f"{prefix}_output_0"
        input_names = [f"{prefix}_input_{i}" for i in range(4)]  # made once: the loss runs every step
        classes = isinstance(loss_fn, CLASSIFICATION_LOSSES)

        def on_loss(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            rec = self.recorder
            if self._evals.loss() and rec.mode == Mode.TRAIN:
                return  # an evaluation's loss, in training mode (torch_eval): not the TRAIN step's
            if rec.mode == Mode.TRAIN and rec.in_step and self._loss.registered_at is not None:
                self._loss.registered_at = rec.step
            self.timeline.mark(marks.BACKWARD_START)  # the loss is computed: backward comes next
            if self._stats is not None:
                self._stats.loss(prefix, args, classes)
                self._loss.language_model(output)  # a cross-entropy's language-model statistics
            if not rec.saving:
                return
            self._save(output_name, output, ("losses",))
            for i, a in enumerate(args):
                if i == len(input_names):
                    input_names.append(f"{prefix}_input_{i}")
                self._save(input_names[i], a, kinds[i] if i < 2 else ())

        self._module_handles.append(loss_fn.register_forward_hook(self._attach(on_loss, loss_fn)))

    def save_tensor(self, name: str, value: Any, collections: Sequence[str] = ()) -> None:
        if name == LOSS_NAME:  # the script records its loss itself: that one is the loss from now on
            self._loss.off, self._loss.registered_at = True, None
        super().save_tensor(name, value, collections)

    def save_scalar(self, name: str, value: Any) -> None:
        if name == LOSS_NAME:
            self._loss.off, self._loss.registered_at = True, None
        super().save_scalar(name, value)

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
        m.running = self._forwarded_since = True
        m.inside = m.inside or module is m.module
        if not m.eager and self._eager_ok and module is m.module and compiled_in_place(module):
            self._run_eager_steps(m)  # `model.compile()` after it was registered (torch_compiled)
        self._loss.forward_begins(m)
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
        inputs = model_inputs(args, kwargs, m.targets)  # a call by keywords (`model(**batch)`): its input
        first = inputs[0] if inputs else next(iter(kwargs.values()), None)
        # an optimizer's closure (L-BFGS) trains: its no-grad forwards are no evaluation
        evaluating = not self._stepping and self._evals.forward(id(m), first)
        self.timeline.forward_start(rec.step, rec.mode)
        if evaluating and mode == Mode.TRAIN and m.trained:
            # an evaluation left in training mode (torch_eval): the TRAIN step records its training
            # forward, not the evaluation's batch (its layers' hooks stay inert: not running)
            m.running = False
            self._unrecorded.add(id(m))
            return
        # a forward with gradients disabled in a TRAIN step trains on nothing (IMLE's candidate
        # pool, a DQN's target): its inputs and outputs are not the step's batch while a forward
        # with gradients follows in the step (`RegisteredModel.held`)
        held = mode == Mode.TRAIN and not self._stepping and not torch.is_grad_enabled()
        if m.saved_at == rec.step:
            # a model called several times per step: its first call is recorded, its first
            # call with gradients for its inputs and outputs
            if m.held is not None and not held:
                m.held = None
                if m.eager and self._stats is not None and self._stats.due():
                    self._eager.enter(m, rec.step)  # the step's forward with gradients, eagerly too
                self._record_inputs(m, module, args, kwargs, inputs, again=True)
            return
        m.saved_at = rec.step
        m.held = None
        params = m.step_params = m.params if m.stray is None else m.part_params(m.stray)
        if not m.forwarded:
            m.forwarded = True
            self._sharded_since(m, module)
        if self._sharded is not None:  # on every rank, before the statistics look the values up
            self._sharded.parameters(m.params)
        if self._deepspeed is not None:  # ZeRO-3's partitioned weights, merged (on every rank)
            self._deepspeed.parameters(m.params)
        if held:  # its data held only where the step records inputs (else a mark)
            m.held = (
                (rec.step, args, kwargs, inputs, None) if self._inputs_due() else (rec.step, (), {}, (), None)
            )
            self._loss.tokens(args, kwargs, module)  # a forward with gradients replaces them
        if self._stats is not None:  # weights in TRAIN only: they do not change in EVAL / PREDICT
            self._stats.forward_start(params, (), m.prefix, module.training)
            if self._stats.due():
                if m.eager:  # a compiled model: this forward runs eagerly (torch_compiled)
                    self._eager.enter(m, rec.step)
                self._step_layers.attach()  # taken off at the step's end
                if self._capture is not None:
                    self._capture.start(m, rec.mode, module)
        if m.eager and rec.saving and not rec.collections.active.isdisjoint(LAYER_SAVES):
            self._eager.enter(m, rec.step)  # a layer collection saves at this step: its layers run eagerly
        if self._pieces is not None and self._pieces.any(m.params):
            side = self._pieces.open()
            for name, p, natural in m.params if side is not None else ():
                if is_sharded(p):
                    self._save(name, p, natural, recorder=side)
        if rec.saving and rec.saves_any(m.param_keys):
            deepspeed = self._deepspeed
            for name, p, natural in params:
                if deepspeed is None or not deepspeed.partitioned(p):  # not ZeRO-3's empty placeholder
                    self._save(name, p, natural)
        if not held:
            self._record_inputs(m, module, args, kwargs, inputs)

    def _record_inputs(
        self,
        m: RegisteredModel,
        module: nn.Module,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        inputs: tuple[Any, ...],
        again: bool = False,
        end: bool = False,
    ) -> None:
        """The inputs of `m`'s recorded forward of the open step (its outputs follow at its end;
        `again`: a forward with gradients after a held one, whose token ids replace its;
        `end`: a held forward's, at the step's end, when none with gradients came). In a TRAIN
        step, `same_input/<model>` (1) at a statistics step whose first input is the very tensor
        of the previous TRAIN step's recorded forward, alive and not written since (its
        `_version`: a static buffer refilled in place holds a new batch): the script trained on
        its batch again (IMLE's inner steps, data echoing), no loader served it again; and
        `no_grad_input/<model>` (1) at a statistics step whose recorded forward is a held one:
        no forward of the model ran with gradients in it, so no gradient came from its batch
        (evolution strategies score perturbed weights on one batch, no backward)."""
        rec = self.recorder
        if not end:
            self._loss.tokens(args, kwargs, module, again=again)
            m.outputs_due = True
        stats = self._stats
        if end and rec.mode == Mode.TRAIN and stats is not None and stats.due():
            stats.add_kinds(m.record_name("no_grad_input"), torch.ones(1, dtype=torch.uint8), ("sum",), ())
        if stats is not None and not m.input_replica:
            stats.forward_inputs(inputs, m.prefix)
        if rec.mode == Mode.TRAIN and inputs:
            first = inputs[0]
            try:
                version = first._version if isinstance(first, torch.Tensor) else None
            except RuntimeError:  # an inference tensor keeps no version: no identity kept
                version = None
            last = m.last_input[0]() if m.last_input is not None else None
            if (
                last is not None and last is first and m.last_input is not None
                and version is not None and m.last_input[1] == version and stats is not None and stats.due()
            ):  # fmt: skip
                stats.add_kinds(m.record_name("same_input"), torch.ones(1, dtype=torch.uint8), ("sum",), ())
            try:  # held weakly: a freed batch's memory may hold the next one
                m.last_input = (weakref.ref(first), version)
            except TypeError:  # not a tensor: no identity kept
                m.last_input = None
        if rec.saving:
            for i, a in enumerate(inputs):
                self._save(m.input_name(i), a, ("inputs",))

    def _inputs_due(self) -> bool:
        """Does the open step record model inputs (statistics, fingerprints or saved tensors)?"""
        stats = self._stats
        return self.recorder.saving or (stats is not None and (stats.due() or stats.fingerprints_due()))

    def _record_held(self) -> None:
        """At a step's end: the models whose forwards in it all ran with gradients disabled
        record the first one's inputs and outputs, as any first forward's."""
        rec = self.recorder
        for m in self._models:
            held, m.held = m.held, None
            if held is None or held[0] != rec.step:
                continue
            _, args, kwargs, inputs, output = held
            if not inputs:  # nothing recorded at this step: no identity to compare the next with
                m.last_input = None
                continue
            self._record_inputs(m, m.module, args, kwargs, inputs, end=True)
            if output is not None:
                self._record_outputs(m, output[0])

    def _on_part_start(
        self, m: RegisteredModel, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """A part of a container model begins: the part called first (the data's way in) starts
        the model's forward, as the model's own forward would; the others run inside the step it
        opened, their layers recorded."""
        if m.entry is None:
            m.entry = module
        if module is m.entry:
            self._on_forward_start(m, module, args, kwargs)
        elif not m.running and m.saved_at >= 0:
            m.running = m.part_open = True

    def _on_part_end(self, m: RegisteredModel, module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        if module is m.entry:
            self._on_forward_end(m, module, args, output)
        elif m.part_open:
            m.running = m.part_open = False

    def _stray_parts(self, m: RegisteredModel) -> None:
        """An optimizer updates `m` though no registered model's forward ran since the last
        update: `m` trains through a part called on its own (DEC's clustering phase trains `autoencoder[0]`, the
        encoder, after the whole autoencoder was pretrained). From now on a direct part of it
        called outside its forward is a forward of the model, its mode that part's `training`
        flag (a part left in eval mode trains in eval mode: `train_in_eval_mode`). Hooked only
        on that evidence: a part called on its own for an evaluation or generation (an
        encoder-decoder's `generate`) of a model that trains through its own forward is left
        unrecorded, as before."""
        model = m.module
        compiled = getattr(model, "_orig_mod", None) is not None  # its parts are not what runs
        # a module without a forward of its own (CleanRL's `Agent`, nn.ModuleDict) has no one call
        # that is its training step (`register_module`): left as it was
        forwardless = type(model).forward is nn.Module.forward
        if m.strays or m.entry is not None or compiled or forwardless:
            return
        m.strays = True
        for part in model.children():
            self._module_handles.append(
                part.register_forward_pre_hook(self._attach(self._on_stray_start, part, m), with_kwargs=True)
            )
            self._module_handles.append(part.register_forward_hook(self._attach(self._on_stray_end, part, m)))
            end_attention_at(self, m, part)  # a capture its forward begins ends with it

    def _open_without_forward(
        self, optimizer: torch.optim.Optimizer, models: tuple[RegisteredModel, ...]
    ) -> None:
        """An optimizer updates `models` with no step open, after a loss was given to backward
        with none open (`LossCapture.unopened`): they train without a forward of their own
        (a state-space model's `model.nll(y)`, a flow's `log_prob`, parameters used directly).
        The step opens here, as a forward would open it: their parameters (at statistics
        steps), then that loss; the optimizer's gradients follow, and its end ends the step.
        A second optimizer of a step that ran a forward (one per parameter group) finds no
        such loss: it opens nothing. Nor does an optimizer that holds only part of a model's
        trainable parameters (an ensemble's members or Forward-Forward's layers, each with its
        own optimizer): one update of the model is then several optimizer steps, and the
        calls of its parts make its steps (`_on_part_start`), as before. Whether its `.grad`
        was reset before those passes (`LossCapture.unopened`) is the step's `gradient_reset`."""
        got = self._loss.unopened()
        if got is None or any(self._current_mode(m.module) != Mode.TRAIN for m in models):
            return
        held = {id(p) for g in optimizer.param_groups for p in g["params"]}
        if any(id(p) not in held for m in models for _, p, _ in m.params if p.requires_grad):
            return
        loss, resets = got
        rec = self.recorder
        self._backward_done = False
        self._updated.clear()
        for other in self._models:
            other.backward = False
        rec.start_step(Mode.TRAIN)
        self._resets_taken(models, resets)
        for m in models:
            m.saved_at = rec.step
            if self._stats is not None:
                self._stats.forward_start(m.params, (), m.prefix, m.module.training)
            if rec.saving and rec.saves_any(m.param_keys):
                for name, p, natural in m.params:
                    self._save(name, p, natural)
        self._loss.backward(loss)

    def _on_state_taken(self, m: RegisteredModel, module: nn.Module, *_: Any) -> None:
        """`state_dict()` of a registered model was called in an evaluation step (`state_taken/
        <model>`): a script that keeps its best model (`best = copy.deepcopy(model.state_dict())`,
        `torch.save(model.state_dict(), path)` when the validation loss improves: early stopping
        written by hand), which the rule `overfit` reads as it reads a trainer's early stopping."""
        rec = self.recorder
        if self._stats is not None and rec.in_step and rec.mode == Mode.EVAL:
            self._stats.add_kinds(
                m.record_name("state_taken"), torch.ones(1, dtype=torch.uint8), ("sum",), ()
            )

    def _on_stray_start(
        self, m: RegisteredModel, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """A direct part of `m` begins (`_stray_parts`): outside the model's forward (and any other
        part's called on its own), a forward of the model."""
        if m.stray is not None or any(x.inside for x in self._models):  # (a shallow copy shares parts)
            return
        m.stray = module
        self._on_forward_start(m, module, args, kwargs)

    def _on_stray_end(
        self, m: RegisteredModel, module: nn.Module, args: tuple[Any, ...], output: Any
    ) -> None:
        if m.stray is module:
            m.stray = None
            self._on_forward_end(m, module, args, output)

    def _on_forward_end(
        self, m: RegisteredModel, module: nn.Module, args: tuple[Any, ...], output: Any
    ) -> None:
        m.running = False
        m.inside = m.inside and module is not m.module
        self.timeline.mark(marks.FORWARD_END)
        if id(m) in self._unrecorded:
            self._unrecorded.discard(id(m))
            return
        if m.outputs_due:
            m.outputs_due = False
            self._record_outputs(m, output)
        elif m.held is not None and m.held[4] is None and m.held[0] == self.recorder.step and m.held[3]:
            m.held = m.held[:4] + ((output,),)  # recorded at the step's end if no forward with gradients
        self._loss.forward_output(output, m)

    def _eager_if_train_due(self, key: Any) -> None:
        """When the open TRAIN step, or else the next one, will be a statistics step: compiled
        code runs eagerly until `key` leaves (`torch_compiled`)."""
        stats, rec = self._stats, self.recorder
        if stats is None or not self._eager_ok or self._closed:
            return
        if rec.in_step and rec.mode == Mode.TRAIN:
            due = stats.due()
        else:
            due = stats.cadence is not None and stats.cadence.peek(Mode.TRAIN, rec.mode_steps[Mode.TRAIN])
        if due:
            self._eager.enter(key, rec.mode_steps[Mode.TRAIN])

    def _step_ended(self) -> None:
        """A TRAIN step ended at an optimizer step: a model compiled in place (`model.compile()`)
        runs its hooks inside its compiled region, too late to run the forward they begin
        eagerly, so the stance is set now for the next step's forward when it is due."""
        for m in self._models:
            if m.eager and compiled_in_place(m.module):
                self._eager_if_train_due(m)
                return

    def _run_eager_steps(self, m: RegisteredModel) -> None:
        """`m` is compiled and its statistics steps run eagerly (`torch_compiled`): the stance
        they set comes back when its forward ends, or raises."""
        m.eager = True
        end = self._attach(self._on_compiled_end, m.module, m)
        self._module_handles.append(m.module.register_forward_hook(end, always_call=True))

    def _on_compiled_end(
        self, m: RegisteredModel, module: nn.Module, args: tuple[Any, ...], output: Any
    ) -> None:
        """A compiled model's forward ended (or raised): back to compiling (`torch_compiled`)."""
        self._eager.leave(m)

    def _record_outputs(self, m: RegisteredModel, output: Any) -> None:
        if self._stats is not None:
            self._stats.forward_end(output, m.prefix)
        if self.recorder.saving:
            self._save_outputs(f"{m.prefix}model", output, ("outputs",))

    def _save_outputs(self, name: str, output: Any, natural: tuple[str, ...]) -> None:
        outs = output if isinstance(output, (tuple, list)) else (output,)
        for i, o in enumerate(outs):
            self._save(_output_name(name, i), o, natural)

    def _save_gradients(
        self, models: tuple[RegisteredModel, ...] | list[RegisteredModel], held: set[int] | None = None
    ) -> None:
        if self._sharded is not None:  # on every rank, before the statistics look the values up
            self._sharded.gradients(models)
        pieces = self._pieces
        if pieces is not None and any(pieces.any(m.params) for m in models):
            side = pieces.open()  # this rank's pieces of the DTensor gradients (include_workers="one")
            for m in models if side is not None else ():
                for name, p, _ in m.params:
                    if p.grad is not None and is_sharded(p.grad):
                        self._save(m.grad_name(name), p.grad, ("gradients",), replace=True, recorder=side)
        super()._save_gradients(models, held)

    def _save(
        self, name: str, value: Any, natural: tuple[str, ...], replace: bool = False, recorder: Any = None
    ) -> None:
        rec = recorder or self.recorder
        plan = rec.plan(name, natural)  # first: at most steps it is None (a dict lookup)
        if plan is None or not (replace or not rec.has(name)):
            return
        if not isinstance(value, torch.Tensor) or value.is_complex() or value.is_sparse:
            return
        if is_sharded(value):
            self._save_shard(rec, name, value, plan)
            return
        if plan.raw or not plan.reductions:
            self.recorder.save(name, host_copy(value), plan, nbytes(value))
        else:  # reductions only: no host copy, the device computes them
            self._reductions.add_kinds(name, value, _reduction_keys(plan.reductions), natural)

    def _sharded_since(self, m: RegisteredModel, module: nn.Module) -> None:
        """At a model's first forward: a model registered before `fully_shard` or
        `parallelize_module` replaced its parameters with DTensors is recorded through the
        new ones (same names), as if it had been registered after."""
        if "deepspeed" in sys.modules:  # ZeRO's reduced gradient partitions and ZeRO-3's weights
            self._deepspeed = DeepSpeedZero.attach(
                self._deepspeed, m, self._sharded, self._stats, _saves_raw(self._settings)
            )
        if any(is_sharded(p) for _, p, _ in m.params):
            return
        inner = getattr(module, "_orig_mod", module)
        current = dict(inner.named_parameters())
        if not any(is_sharded(p) for p in current.values()):
            return
        renamed = {}
        for i, (name, p, natural) in enumerate(m.params):
            new = current.get(name[len(m.prefix) :])
            if new is not None and new is not p:
                m.params[i] = (name, new, natural)
                renamed[id(p)] = new
        self._params = [(n, renamed.get(id(p), p), c) for n, p, c in self._params]
        self._param_ids = {id(p) for _, p, _ in self._params}
        m.sentinel = next((p for _, p, _ in m.params if p.requires_grad), None)
        m.input_replica = input_replica(inner, (p for _, p, _ in m.params))
        self._optimizers.clear()

    def _save_shard(self, rec: Any, name: str, value: Any, plan: Plan) -> None:
        """A DTensor asked for raw or for reductions: this rank's piece, saved raw under its
        name, and beside it where the piece lies (`mldbg.store.shards`); readers put the global
        tensor back together (`trial.tensor(name).value(step)`) and compute its reductions from
        it (a piece's own reductions are not the tensor's: none are saved). No collective."""
        try:
            local, layout = piece_and_layout(value)
        except Exception as e:  # a layout mldbg cannot read must not stop the training
            if not self._told_shards:
                self._told_shards = True
                log.warning("mldbg: sharded tensor %r (DTensor) not saved raw: %s", name, e)
            return
        rec.save(name, host_copy(local.detach()), Plan(True, (), plan.collections), nbytes(local))
        rec.save(layout_name(name), layout, Plan(True, (), ()))

    def _release(self) -> None:
        self._eager.leave()
        if self._capture is not None:  # before the statistics it hands its records to
            self._capture.close()
        if self._stats is not None:
            self._stats.close()
        if self._pieces is not None:
            self._pieces.close()
        self._loss.close()
        for h in self._handles + self._grad_handles:
            h.remove()
        self._handles, self._grad_handles = [], []
        if not self._superseded:  # else they stay, inert, until a new hook takes the model (it warns)
            self._drop_module_hooks()

    def _drop_module_hooks(self) -> None:
        self._step_layers.detach()
        for h in self._module_handles:
            h.remove()
        self._module_handles = []
        for module in list(self._omitting):
            Omitting.remove(module)  # where no hook of mldbg is left


def _saves_raw(settings: dict[str, Any]) -> bool:
    """Does the user's configuration save tensors (raw or reduced), beyond the statistics?"""
    keys = ("save_config", "include_collections", "include_regex", "collection_configs")
    return any(settings.get(k) for k in keys) or bool(settings.get("save_all"))


@functools.lru_cache(maxsize=4096)
def _output_name(name: str, i: int) -> str:
    """`<name>_output_<i>`, made once (layers' outputs are named at every step)."""
    return f"{name}_output_{i}"


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
