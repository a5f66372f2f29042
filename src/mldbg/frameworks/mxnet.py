"""MXNet (Gluon) adapter: `mldbg.mxnet.Hook`.

    hook = mldbg.mxnet.Hook(out_dir)
    hook.register_block(net)          # parameters, gradients, layer outputs, activations
    hook.register_loss(loss_fn)       # the loss, its predictions and labels

What a step is: in TRAIN (`autograd.is_training()`, as inside `autograd.record()`) a step ends
at the `step()` (or `update()`) of a `gluon.Trainer` that holds a registered parameter; the
registered block's forwards before it (gradient accumulation) are one step. A Trainer made
before the first TRAIN forward is found then; one made later counts from its first step. Until
a trainer is seen each TRAIN forward starts a new step. Outside training (`autograd.predict_mode()`,
plain `net(x)`) each forward is an EVAL step; `set_mode` fixes the mode (PREDICT too).
Weights are saved as the step's forward used them, gradients as the trainer sees them (before
its `rescale_grad`). Names follow the block tree, as the PyTorch hook's: `0.weight`,
`gradient/0.weight`, `0_output_0`, `SoftmaxCrossEntropyLoss_output_0` (MXNet's own prefixed
names, `dense3_weight`, depend on how many blocks the process made before).

A hybridized block runs as one compiled graph: the forward hooks of its children never fire
there, so their outputs and activations are lost (the hook warns once, also for a hybridized
block inside a plain `Block`); its parameters, gradients, inputs and outputs and the loss are
recorded.

Parameters: one not initialized yet (deferred, before its first forward) is skipped; a
BatchNorm's `running_mean` / `running_var` (updated by MXNet in the backward pass, not by the
trainer) are saved as the forward saw them but in no collection of their own (`include_regex`
or `save_all` asks for them), so the weight rules do not take them for frozen weights that
moved. Gradients: a stale one (not written by a backward since the trainer's last update,
`step(..., ignore_stale_grad=True)`) is not saved; on several devices (`kvstore`), the sum
over the devices, as the kvstore reduces them. Inputs and outputs: the first device's forward.
A model trained inside `autograd.record(train_mode=False)` (BatchNorm on its running
statistics, Dropout off) has EVAL steps: the hook records `optimizer_step` there and
`module_training/dropout|norm` at statistics steps (`train_in_eval_mode`), as the PyTorch hook.

A copy of a hooked block (`copy.deepcopy`, `pickle`) carries inert stand-ins for the hook's
callables: it records nothing and holds no reference to the hook.

The profiler's phases: MXNet has no backward hook, so the backward phase runs from the loss to
the trainer's step (or `allreduce_grads`); the engine is asynchronous, so the phases time what
Python issued.

The two lines (no `save_config`, no `include_collections`) also record the statistics the
default rules read (`mldbg.store.statistics.DEFAULTS`), computed with the NumPy reference on
the writer thread from host copies (`host_statistics`): every step of each mode's first `statistics_warmup` steps
(20), then every `statistics_every`-th step (10).

Threads: MXNet is called from the training thread only, and a host copy waits until no
operation of MXNet's engine still reads or writes the array (`host_copy`). The writer thread gets NumPy copies,
and what a garbage collection on it (or on another mldbg thread) finalizes of MXNet (a dropped
Gluon model's NDArrays, Symbols, CachedOps) is freed on the training thread, at the next
forward or trainer step and at `close()` (`mxnet_frees`).
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.base import _LIB, check_call
from mxnet.gluon import nn

from mldbg.config import Mode
from mldbg.errors import InvalidConfig
from mldbg.frameworks.base import Adapter
from mldbg.frameworks.host import array_source
from mldbg.frameworks.host_statistics import HostStatistics, fixed_cadence_settings
from mldbg.frameworks.mxnet_frees import DeferredFrees
from mldbg.frameworks.session import Worker
from mldbg.profiler import timeline as marks
from mldbg.store import statistics as st

log = logging.getLogger("mldbg")

ACTIVATIONS = {"relu": "relu_activations", "tanh": "tanh_activations", "sigmoid": "sigmoid_activations"}
CLASSIFICATION_LOSSES = (gluon.loss.SoftmaxCrossEntropyLoss, gluon.loss.SigmoidBinaryCrossEntropyLoss)
HYBRIDIZED = (
    "mldbg: {name} is hybridized: the outputs and activations of its inner blocks are not recorded "
    "(forward hooks do not run inside a compiled graph); parameters, gradients, the model's inputs and "
    "outputs and the loss are. Call hybridize() after debugging, or leave it off to see every layer."
)


class Hook(Adapter):
    """Records a Gluon model's tensors: `hook.register_block(net)`, `hook.register_loss(loss)`.

    Besides the keywords of every hook (API.md): `statistics` (None: on for the two lines;
    True: added to any configuration; False: off), `statistics_warmup` (20) and
    `statistics_every` (10): the steps of each mode whose statistics are recorded."""

    def _worker(self) -> Worker:
        return Worker.from_environment(f"mxnet-{mx.__version__}")

    def _recording(self) -> dict[str, Any]:
        settings, self._cadence = fixed_cadence_settings(self._settings)
        return settings

    def _setup(self) -> None:
        self._mode: Mode | None = None  # None: follow autograd.is_training()
        self._block: nn.Block | None = None
        self._params: list[tuple[str, gluon.Parameter, tuple[str, ...]]] = []
        self._param_keys: tuple[tuple[str, tuple[str, ...]], ...] = ()
        self._param_ids: set[int] = set()
        self._handles: list[Any] = []
        self._patches: list[tuple[str, Any, Any]] = []
        self._trainers: dict[int, bool] = {}
        self._trainer_seen = self._trainer_searched = False
        self._warned_hybrid = False
        self._loss_names: set[str] = set()
        self._modules: list[tuple[str, list[gluon.Parameter]]] = []  # (dropout|norm, parameters around it)
        self._params_saved_at = self._grads_saved_at = self._backward_ended_at = -1
        self._frees = DeferredFrees()  # MXNet objects the writer thread's GC finalizes

    def _open_run(self, out_dir: Any) -> None:
        super()._open_run(out_dir)
        self._stats = HostStatistics(self.recorder, *self._cadence)
        self.recorder.before_step_end.append(self._on_step_end)
        self._frees.install()  # the writer runs now: MXNet is called from the training thread only

    def close(self) -> None:
        super().close()  # the writer thread has finished: then the queued MXNet objects are freed
        self._frees.uninstall()

    # registration -----------------------------------------------------------------------
    def register_block(self, block: nn.Block) -> None:
        """Record `block`: parameters, gradients, its inputs and outputs, and (not hybridized)
        the outputs of its layers and the inputs of its ReLU/Tanh/Sigmoid activations."""
        if not isinstance(block, nn.Block):
            raise InvalidConfig(f"register_block needs a gluon Block, got {type(block).__name__}")
        if self._block is not None:
            raise InvalidConfig("register_block was already called; use one hook per model")
        self._block = block
        for name, p in block._collect_params_with_prefix().items():
            self._params.append((name, p, _natural(name, p)))
            self._param_ids.add(id(p))
        self._param_keys = tuple((name, natural) for name, _, natural in self._params)
        self._handles.append(block.register_forward_pre_hook(self._attach(self._on_forward_start)))
        self._handles.append(block.register_forward_hook(self._attach(self._on_forward_end)))
        self._modules = _train_mode_modules(block)
        cols = self.recorder.collections
        wants_layers = any(cols.may_save(c) for c in ("outputs", *ACTIVATIONS.values()))
        hybridized = _first_hybridized(block)
        if hybridized is not None:
            self._warn_hybridized(hybridized)
        if not _hybridized(block) and (wants_layers or self.recorder.statistics):
            for name, child in _children(block):
                act = (
                    ACTIVATIONS.get(getattr(child, "_act_type", ""))
                    if isinstance(child, nn.Activation)
                    else None
                )
                if wants_layers or act is not None:
                    self._handles.append(child.register_forward_hook(self._attach(self._layer(name, act))))
        # every Trainer; `_ours` keeps those of our parameters. `allreduce_grads` (before
        # `update`): the gradients are saved before it sums them over the devices
        for method in ("step", "update", "allreduce_grads"):
            original = getattr(gluon.Trainer, method)
            wrapper = self._trainer_wrapper(original, ends_step=method != "allreduce_grads")
            setattr(gluon.Trainer, method, wrapper)
            self._patches.append((method, original, wrapper))

    def register_loss(self, loss: nn.Block) -> None:
        """Record the loss (`losses`, per sample as Gluon returns it) and its inputs
        (`predictions`, `labels`) under the loss class's name."""
        if not isinstance(loss, nn.Block):
            raise InvalidConfig(
                f"register_loss needs a gluon Block such as gluon.loss.SoftmaxCrossEntropyLoss(), got "
                f"{type(loss).__name__}; for a loss value, call hook.save_scalar('loss', value) instead"
            )
        prefix, k = type(loss).__name__, 2
        while prefix in self._loss_names:  # a second loss of the same class: `<LossClass>_2`
            prefix, k = f"{type(loss).__name__}_{k}", k + 1
        self._loss_names.add(prefix)
        classes = isinstance(loss, CLASSIFICATION_LOSSES)
        kinds = (("predictions",), ("labels",))

        def on_loss(block: nn.Block, args: tuple[Any, ...], output: Any) -> None:
            if not self.recorder.in_step or not _is_array(output):
                return
            self.timeline.mark(marks.BACKWARD_START)
            if self._stats.due() and len(args) >= 2 and _is_array(args[0]) and _is_array(args[1]):
                preds, labels = host_copy(args[0]), host_copy(args[1])
                if classes:
                    self._stats.add_classes(f"{prefix}_input_1", labels, f"{prefix}_input_0", preds)
                self._stats.add(f"{prefix}_input_0", preds, ("samples",), kinds[0])
                self._stats.add(f"{prefix}_input_1", labels, ("samples",), kinds[1])
            if self.recorder.saving:
                self._save(f"{prefix}_output_0", output, ("losses",))
                for i, a in enumerate(args):
                    self._save(f"{prefix}_input_{i}", a, kinds[i] if i < 2 else ())

        self._handles.append(loss.register_forward_hook(self._attach(on_loss)))

    def set_mode(self, mode: Mode | str) -> None:
        """Fix the mode (TRAIN, EVAL, PREDICT) instead of following `autograd.is_training()`."""
        mode = Mode.parse(mode)
        if self.recorder.in_step and mode != self.recorder.mode:
            self.recorder.end_step()
        self._mode = mode

    def _to_numpy(self, value: Any) -> np.ndarray:
        return host_copy(value) if _is_array(value) else np.asarray(value)

    # lifecycle --------------------------------------------------------------------------
    def _on_forward_start(self, block: nn.Block, args: tuple[Any, ...]) -> None:
        rec = self.recorder
        self._frees.drain()
        mode = self._mode or (Mode.TRAIN if autograd.is_training() else Mode.EVAL)
        if mode == Mode.TRAIN and not self._trainer_searched:
            self._trainer_searched = True  # once: a Trainer made before the first forward
            self._trainer_seen = self._trainer_seen or _trainer_exists(self._ours)
        # forwards of one TRAIN step (gradient accumulation) continue it up to the trainer's step
        if not (mode == Mode.TRAIN and self._trainer_seen and rec.in_step and rec.mode == Mode.TRAIN):
            rec.start_step(mode)  # ends the open step
        self.timeline.forward_start(rec.step, rec.mode)
        if not self._warned_hybrid:
            hybridized = _first_hybridized(block)
            if hybridized is not None:
                self._warn_hybridized(hybridized)

    def _on_forward_end(self, block: nn.Block, args: tuple[Any, ...], output: Any) -> None:
        rec = self.recorder
        self.timeline.mark(marks.FORWARD_END)
        if not rec.in_step or self._params_saved_at == rec.step:
            return  # a block called several times per step: its first call is recorded
        self._params_saved_at = rec.step  # after the forward: deferred shapes are known now
        stats, train = self._stats.due(), rec.mode == Mode.TRAIN
        if (stats and train) or rec.saves_any(self._param_keys):
            for name, p, natural in self._params:
                if p._data is None:
                    continue  # deferred initialization: not used by a forward yet
                value = _first(p.list_data())
                self._save(name, value, natural)
                if stats and train and natural:
                    self._stats.add(
                        name, host_copy(value), st.DEFAULTS[natural[0]], natural, p.grad_req != "null"
                    )
        if stats and self._modules:
            self._module_training()
        outs = output if isinstance(output, (tuple, list)) else (output,)
        for i, a in enumerate(args):
            self._save(f"model_input_{i}", a, ("inputs",))
            if stats and _is_array(a):
                self._stats.add(f"model_input_{i}", host_copy(a), st.DEFAULTS["inputs"], ("inputs",))
        kinds = st.DEFAULTS["outputs"] + (() if train else st.EVAL_DEFAULTS["outputs"])
        for i, o in enumerate(outs):
            self._save(f"model_output_{i}", o, ("outputs",))
            if stats and _is_array(o):
                self._stats.add(f"model_output_{i}", host_copy(o), kinds, ("outputs",))

    def _layer(self, name: str, act: str | None) -> Callable[..., None]:
        natural = ("outputs", act) if act else ("outputs",)

        def hook(block: nn.Block, args: tuple[Any, ...], output: Any) -> None:
            if not self.recorder.in_step or not _is_array(output):
                return  # a Symbol: the graph being built for shape inference or hybridize
            if act is not None and args and self._stats.due():
                self._stats.add(f"{name}_input_0", host_copy(args[0]), st.DEFAULTS[act], (act,))
            if self.recorder.saving:
                for i, o in enumerate(output if isinstance(output, (tuple, list)) else (output,)):
                    self._save(f"{name}_output_{i}", o, natural)
                for i, a in enumerate(args):  # other layers' inputs: only by regex or save_all
                    self._save(f"{name}_input_{i}", a, (act,) if act else ())

        return hook

    def _trainer_wrapper(self, original: Callable[..., Any], ends_step: bool) -> Callable[..., Any]:
        @functools.wraps(original)
        def wrapper(trainer: gluon.Trainer, *args: Any, **kwargs: Any) -> Any:
            rec = self.recorder
            ours = not self._closed and self._ours(trainer) and rec.in_step
            if ours:
                self._trainer_seen = True
                if self._backward_ended_at != rec.step:
                    # no backward hook in MXNet: its backward has been issued by now (the engine
                    # is asynchronous: the phases time what Python issued, not the engine's work)
                    self._backward_ended_at = rec.step
                    self.timeline.mark(marks.BACKWARD_END)
                if rec.mode == Mode.TRAIN:
                    self._save_gradients()
                elif ends_step and self._stats.due():  # record(train_mode=False): train_in_eval_mode
                    self._stats.add("optimizer_step", np.ones(1, np.uint8), ("sum",), ())
                if ends_step:
                    self.timeline.mark(marks.OPTIMIZER_START)
            result = original(trainer, *args, **kwargs)
            if ours:
                self._frees.drain()
            if ends_step and ours and rec.in_step and rec.mode == Mode.TRAIN:
                self.timeline.mark(marks.OPTIMIZER_END)
                self.timeline.step_end()
                self.recorder.end_step()
            return result

        return wrapper

    def _ours(self, trainer: gluon.Trainer) -> bool:
        known = self._trainers.get(id(trainer))
        if known is None:
            params = getattr(trainer, "_params", ())
            known = self._trainers[id(trainer)] = any(id(p) in self._param_ids for p in params)
        return known

    def _save_gradients(self) -> None:
        rec = self.recorder
        if self._grads_saved_at == rec.step:
            return
        self._grads_saved_at = rec.step
        stats = self._stats.due()
        for name, p, _ in self._params:
            if p.grad_req == "null" or getattr(p, "_grad", None) is None or p._data is None:
                continue
            if not any(d._fresh_grad for d in p.list_data()):
                continue  # stale: no backward wrote it since the trainer's last update
            grads = p.list_grad()
            if len(grads) == 1:
                self._save(f"gradient/{name}", grads[0], ("gradients",))
                grad = host_copy(grads[0]) if stats else None
            else:  # several devices: their sum, as the kvstore reduces them
                grad = functools.reduce(np.add, (host_copy(g) for g in grads))
                self._save(f"gradient/{name}", grad, ("gradients",))
            if stats and grad is not None:
                self._stats.add(f"gradient/{name}", grad, st.DEFAULTS["gradients"], ("gradients",))

    def _on_step_end(self) -> None:
        """The step is about to end: gradients of a TRAIN step no trainer ended, then the
        step's statistics, handed to the recorder (computed on the writer thread)."""
        rec = self.recorder
        if rec.mode == Mode.TRAIN and not self._trainer_seen and self._params_saved_at == rec.step:
            self._save_gradients()
        self._stats.finish()

    # saving -------------------------------------------------------------------------------
    def _save(self, name: str, value: Any, natural: tuple[str, ...]) -> None:
        if not (_is_array(value) or isinstance(value, np.ndarray)) or self.recorder.has(name):
            return
        plan = self.recorder.plan(name, natural)
        if plan is None:
            return
        # a copy: the trainer updates in place
        source = array_source(host_copy(value) if _is_array(value) else value)
        if source is not None:
            self.recorder.save(name, source[0], plan, source[1])

    def _warn_hybridized(self, name: str) -> None:
        self._warned_hybrid = True
        warnings.warn(HYBRIDIZED.format(name=name), UserWarning, stacklevel=3)

    def _module_training(self) -> None:
        """`module_training/dropout|norm` (`sum`, `count`): MXNet's train mode is global
        (`autograd.is_training()`), so each such block is on or off with it."""
        on = autograd.is_training()
        for kind in ("dropout", "norm"):
            count = sum(
                1 for k, around in self._modules if k == kind and any(p.grad_req != "null" for p in around)
            )
            if count:
                flags = np.full(count, 1 if on else 0, dtype=np.uint8)
                self._stats.add(f"module_training/{kind}", flags, ("sum", "count"), ())

    def _attach(self, fn: Callable[..., Any]) -> Attached:
        return Attached(fn, self)

    def _release(self) -> None:
        for h in self._handles:
            h.detach()
        self._handles = []
        for method, original, wrapper in self._patches:
            if getattr(gluon.Trainer, method) is wrapper:  # else a later hook wrapped ours: it passes through
                setattr(gluon.Trainer, method, original)
        self._patches = []


def _trainer_exists(ours: Callable[[gluon.Trainer], bool]) -> bool:
    """Once, at the first TRAIN forward: does a Trainer hold our parameters already? Then
    steps end at its `step()`, even when several forwards accumulate gradients before it."""
    import gc

    return any(issubclass(type(o), gluon.Trainer) and ours(o) for o in gc.get_objects())


def _children(block: nn.Block, prefix: str = "") -> Iterator[tuple[str, nn.Block]]:
    """Every block under `block` by its path (`0`, `0.act`, `encoder.fc1`); not inside a
    hybridized one, whose children never run their hooks."""
    for name, child in block._children.items():
        yield f"{prefix}{name}", child
        if not _hybridized(child):
            yield from _children(child, f"{prefix}{name}.")


def _first_hybridized(block: nn.Block) -> str | None:
    """The first hybridized block of the tree, by name (`HybridSequential`, or
    `Net.encoder (HybridSequential)` below a plain block), or None."""
    if _hybridized(block):
        return type(block).__name__
    for path, child in _children(block):
        if _hybridized(child):
            return f"{type(block).__name__}.{path} ({type(child).__name__})"
    return None


def _natural(name: str, p: gluon.Parameter) -> tuple[str, ...]:
    """A parameter's collection: `biases`, `weights`; none for a BatchNorm's running
    statistics (no trainer moves them: not frozen weights that changed)."""
    if p.grad_req == "null" and name.rsplit(".", 1)[-1] in ("running_mean", "running_var"):
        return ()
    return ("biases",) if name.endswith("bias") else ("weights",)


def _train_mode_modules(block: nn.Block) -> list[tuple[str, list[gluon.Parameter]]]:
    """Each Dropout (rate > 0) and BatchNorm block with the parameters around it (its own
    and its parent's): those that train differently outside `autograd.train_mode()`."""
    found = []

    def walk(parent: nn.Block) -> None:
        for child in parent._children.values():
            kind = None
            if isinstance(child, nn.Dropout) and getattr(child, "_rate", 0) > 0:
                kind = "dropout"
            elif isinstance(child, nn.BatchNorm):
                kind = "norm"
            if kind is not None:
                around = list(child.collect_params().values()) + list(parent.collect_params().values())
                found.append((kind, around))
            walk(child)

    walk(block)
    return found


class Attached:
    """A hook's callable on a block; `owner` is the hook. Copied or pickled: a `Detached`."""

    __slots__ = ("fn", "owner")

    def __init__(self, fn: Callable[..., Any], owner: Hook):
        self.fn = fn
        self.owner = owner

    def __call__(self, *args: Any) -> Any:
        if self.owner._closed:
            return None
        return self.fn(*args)

    def __reduce__(self) -> tuple[type[Detached], tuple[()]]:
        return (Detached, ())


class Detached:
    """What a copied or unpickled block holds where its original had a hook: nothing happens.
    Kept here, under this name: pickled blocks refer to it."""

    def __call__(self, *args: Any) -> None:
        return None


def _hybridized(block: nn.Block) -> bool:
    return (
        isinstance(block, nn.HybridBlock) and bool(getattr(block, "_active", False)) and bool(block._children)
    )


def _is_array(value: Any) -> bool:
    return isinstance(value, mx.nd.NDArray)


def host_copy(array: mx.nd.NDArray) -> np.ndarray:
    """A NumPy copy of `array` once no operation of MXNet's engine still reads or writes it.

    `asnumpy()` alone waits only for pending writes, but the engine's workers may still be
    running operations that read the array, such as the forward just issued. On CPU builds with
    oneDNN those reads change the array's oneDNN memory descriptor in place (it is made on
    first use and again after an in-place update), so a copy made alongside them can read freed
    memory: the segmentation fault inside `asnumpy()` of issue 20, which several engine
    workers (`MXNET_CPU_WORKER_NTHREADS=4`) make frequent. `MXNDArrayWaitToWrite` (the C side of
    MXNet's `WaitToWrite`) queues an empty write behind those reads and waits for it.
    """
    check_call(_LIB.MXNDArrayWaitToWrite(array.handle))
    return array.asnumpy()


def _first(values: list[Any]) -> Any:
    return values[0]  # several devices hold the same parameter: the first one's copy


__all__ = ["Hook"]
