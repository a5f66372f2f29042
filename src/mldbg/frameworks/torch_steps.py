"""Where a PyTorch TRAIN step ends: the `StepEnds` part of `mldbg.torch.Hook`.

In TRAIN a step ends at the optimizer step (any `torch.optim` optimizer that updates a
registered parameter), or at the end of backward where no optimizer is seen (found once, at
the first backward: `optimizer_exists`). Gradients are saved as the optimizer sees them (so
gradient accumulation over several backward passes is one step). An update that was skipped
still ends its step: a model's TRAIN forward that finds its gradients reset
(`zero_grad(set_to_none=True)`, the default) since a backward of the open step that no
optimizer step consumed (AMP's GradScaler skips `optimizer.step()` when a gradient overflows)
starts the next step (`_update_skipped`, asked by the hook's forward); the forwards of an
optimizer's closure (L-BFGS) are inside its step and start none.

Several models on one hook (a GAN's generator and discriminator): a TRAIN step is one update
of every model an optimizer trains: it ends at the optimizer step that completes it (a GAN
iteration, discriminator then generator, is one step, so a save interval never sees only one
of them). Each optimizer step saves the gradients of the models it updates.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from mldbg.config import Mode
from mldbg.frameworks.torch_models import RegisteredModel
from mldbg.frameworks.torch_sharded import is_sharded
from mldbg.profiler import timeline as marks

if TYPE_CHECKING:
    from mldbg.frameworks.torch_defaults import StepStatistics
    from mldbg.frameworks.torch_eval import EvalForwards
    from mldbg.frameworks.torch_loss import LossCapture
    from mldbg.record.recorder import Recorder


class StepEnds:
    """The optimizer and backward hooks of `mldbg.torch.Hook` that end its TRAIN steps, and
    the gradients saved there. Its state is made by `_setup_step_ends`."""

    # the hook's, used here
    recorder: Recorder
    timeline: marks.Timeline
    _stats: StepStatistics | None
    _reductions: StepStatistics
    _evals: EvalForwards
    _models: list[RegisteredModel]
    _param_ids: set[int]
    _deepspeed: Any  # torch_deepspeed.DeepSpeedZero | None
    _loss: LossCapture

    def _save(self, name: str, value: Any, natural: tuple[str, ...], replace: bool = False) -> None:
        raise NotImplementedError

    def _stray_parts(self, m: RegisteredModel) -> None:
        raise NotImplementedError

    def _open_without_forward(
        self, optimizer: torch.optim.Optimizer, models: tuple[RegisteredModel, ...]
    ) -> None:
        raise NotImplementedError

    def _resets_now(self, before: dict[int, Any]) -> dict[int, Any]:
        """A backward pass begins with no step open (`LossCapture.unopened`): whether each
        model's `.grad` of `reset_param` is reset now, or was before an earlier such pass of
        the same step (`before`), by the model's id."""
        out = dict(before)
        for m in self._models:
            p = m.reset_param
            if p is not None and not is_sharded(p):
                out[id(m)] = _either(out.get(id(m), False), _was_reset(p.grad))
        return out

    def _resets_taken(self, models: tuple[RegisteredModel, ...], resets: dict[int, Any]) -> None:
        """The readings of `_resets_now` for `models`, whose step opens only now: a model whose
        `reset_param` those passes reached takes its reading as `_grads_after_backward` does."""
        for m in models:
            reset = resets.get(id(m))
            if reset is not None and m.reset_param is not None and m.reset_param.grad is not None:
                m.incoming = True
                _note_reset(m, reset)

    def _step_ended(self) -> None:
        raise NotImplementedError

    def _setup_step_ends(self) -> None:
        self._grad_handles: list[Any] = []  # per-parameter hooks until an optimizer is seen
        self._optimizer_hooks = False  # the global optimizer hooks are registered
        self._optimizers: dict[int, tuple[RegisteredModel, ...]] = {}  # the models each optimizer updates
        self._trained_searched = False  # several models: which of them an optimizer updates
        self._updated: set[int] = set()  # the models an optimizer updated in the open step
        self._optimizer_seen = False
        self._optimizer_searched = False
        self._backward_done = False
        self._backward_queued = False
        self._stepping = False  # inside an optimizer step of ours (between its pre and post hooks)
        self._forwarded_since = False  # a registered model's forward ran since our last update
        # id(optimizer) -> its last float learning rate, its peak, and whether it was rising
        self._schedules: dict[int, tuple[float, float, bool]] = {}
        # the trainer stops early or keeps its best model by a validation metric: set by the
        # Lightning and Hugging Face callbacks, recorded as `early_stopping` (the rule `overfit`)
        self.early_stopping = False

    def _on_sentinel_grad(self, m: RegisteredModel, p: torch.Tensor) -> None:
        m.backward = True
        self._evals.end_run()

    def _on_sentinel_layer(self, m: RegisteredModel, layer: nn.Module, args: Any, output: Any) -> None:
        """The layer holding `m.reset_param` ran in a TRAIN statistics step: the gradient of its
        output arrives in backward before the parameter's own (which it needs), so a hook on
        the output sees `.grad` as it was when that backward began (`gradient_reset`)."""
        if self.recorder.mode != Mode.TRAIN or self._stats is None or not self._stats.due():
            return
        hook = functools.partial(self._before_sentinel_grad, m)
        for out in _grad_tensors(output):  # the first to get its gradient tells (an RNN's (packed, h_n))
            out.register_hook(hook)

    def _before_sentinel_grad(self, m: RegisteredModel, grad: torch.Tensor) -> None:
        if not _accumulates(m.reset_param):
            return  # `torch.autograd.grad` (gradient surgery) or a backward limited by `inputs=`: no `.grad` adds up
        m.incoming = True
        if m.reset is True:
            return
        _note_reset(m, _was_reset(m.reset_param.grad if m.reset_param is not None else None))

    def _grads_before_backward(self) -> None:
        """A backward pass begins (`torch_loss`'s wrapper around `torch.autograd.backward`, in
        a TRAIN statistics step): each model's `reset_param.grad` as it is now, and whether it
        is reset. What the layer hook of `_on_sentinel_layer` reads, read where no layer hook
        can: a tied weight (BART's `shared` embedding, also the encoder's and decoder's
        `embed_tokens` and the `lm_head`) whose leaf module never runs, or that a use outside
        any leaf accumulates into before the layer's output gets its gradient."""
        rec, stats = self.recorder, self._stats
        if not rec.in_step or rec.mode != Mode.TRAIN or stats is None or not stats.due():
            return
        for m in self._models:
            p = m.reset_param
            if p is None or m.reset is True or is_sharded(p):  # a DTensor's test would be a collective
                continue
            held = p.grad
            try:
                m.before_pass = (held, -1 if held is None else held._version, _was_reset(held))
            except RuntimeError:  # a gradient without a version counter: not testable
                m.before_pass = None

    def _grads_after_backward(self) -> None:
        """The pass of `_grads_before_backward` ended: a model whose `reset_param.grad` it
        wrote (a new tensor, or the same one written in place) was reached, and its reading
        counts as `_before_sentinel_grad`'s (a pass that did not reach it, a GAN's
        discriminator pass over a detached fake, says nothing about it)."""
        for m in self._models:
            before, m.before_pass = m.before_pass, None
            if before is None or m.reset_param is None:
                continue
            held, version, reset = before
            now = m.reset_param.grad
            if now is None or (now is held and now._version == version):
                continue  # not reached
            m.incoming = True
            if m.reset is not True:
                _note_reset(m, reset)

    def _reset_seen(
        self, models: tuple[RegisteredModel, ...] | list[RegisteredModel], held: set[int] | None
    ) -> None:
        """At an update of `models`: `gradient_reset/<model>` at statistics steps, 1 where its
        gradient was reset since its last update, 0 where the update applies a `.grad` that
        still held what an earlier update had applied (a missing `zero_grad()`); only for a
        model whose `reset_param` got a gradient and is in the updating optimizer (`held`)."""
        for m in models:
            stats, sentinel = self._stats, m.reset_param
            ours = sentinel is not None and (held is None or id(sentinel) in held)
            if m.incoming and ours and stats is not None and stats.due():
                flag = m.reset if isinstance(m.reset, torch.Tensor) else torch.tensor(m.reset)
                stats.add_kinds(
                    m.record_name("gradient_reset"), flag.to(torch.uint8).reshape(1), ("sum",), ()
                )
            m.incoming, m.reset = False, False

    def _update_skipped(self, m: RegisteredModel) -> bool:
        """`m`'s gradients were reset since a backward of the open step that no optimizer
        step consumed, and no model was updated in it: its iteration ended without an update.
        (A GAN trained generator first: the generator's loss runs back through the
        discriminator, whose gradients its own `zero_grad()` then resets before its update, in
        the same iteration.)"""
        return (
            self._optimizer_seen
            and not self._stepping
            and m.backward
            and m.sentinel is not None
            and m.sentinel.grad is None
            and not self._updated
        )

    def _save_gradients(
        self, models: tuple[RegisteredModel, ...] | list[RegisteredModel], held: set[int] | None = None
    ) -> None:
        """The gradients `models` are updated with (by an optimizer holding `held`, the
        parameters' ids at a statistics step; None: no optimizer, each backward updates)."""
        self._reset_seen(models, held)
        if self._stats is not None:  # now: the optimizer is about to change the weights in place
            self._stats.before_models_step(models)
        for m in models:
            if self.recorder.saves_any(m.grad_keys):
                # not DeepSpeed ZeRO's: each rank's own .grad, before ZeRO reduces it (`torch_deepspeed`)
                elsewhere = self._deepspeed.gradients if self._deepspeed is not None else ()
                for name, p, _ in m.step_params:
                    # a frozen one's .grad is stale
                    if p.grad is not None and p.requires_grad and id(p) not in elsewhere:
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
            self._optimizer_seen = optimizer_exists(self._param_ids)
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

    def _on_optimizer_pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> Any:
        """Before an optimizer's step: the step's gradients are saved now, or, where
        `step(closure)` computes them (Lightning's automatic optimization, L-BFGS), when the
        closure first returns (the pre-hook then hands the optimizer a wrapped closure)."""
        models = self._ours(optimizer)
        self._evals.end_run()  # any optimizer: training goes on
        if not models and self._deepspeed is not None:  # DeepSpeed ZeRO's inner optimizer, maybe
            self._deepspeed.optimizer_step(optimizer)
        self._stepping = self._stepping or bool(models)  # a closure's forwards (LBFGS) are in it
        if not self._forwarded_since and not callable(kwargs.get("closure", args[0] if args else None)):
            for m in models:  # trained, but no registered model's forward ran: through a part of it
                self._stray_parts(m)
            if models and not self.recorder.in_step:  # or through no forward at all
                self._open_without_forward(optimizer, models)
        if not models or not self.recorder.in_step:
            return None
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
                m.trained = m.trained or optimizer_exists({id(p) for _, p, _ in m.params})
        if self.recorder.mode == Mode.TRAIN:
            self._loss.stepped_at = self.recorder.step  # the step updates the model (torch_loss)
            held = None
            begins = self._schedule_begins(optimizer)
            if self._stats is not None and self._stats.due():  # parameter_without_gradient
                params = [p for g in optimizer.param_groups for p in g["params"]]
                held = {id(p) for p in params}
                self._stats.optimizer_holds(held, idle=not any(p.requires_grad for p in params))
                self._learning_rate(optimizer, models)
                if self.early_stopping:
                    self._stats.add_kinds("early_stopping", torch.ones(1), ("sum",), ())
            elif self._stats is not None and begins:  # the loss rules read a new phase at once
                self._learning_rate(optimizer, models)
            closure = kwargs.get("closure", args[0] if args else None)
            if not callable(closure):
                self._save_gradients(models, held)
                return None
            return _after_first_call(closure, self._gradient_saver(models, held), args, kwargs)
        elif self._stats is not None:  # training with the model left in eval mode
            self._stats.optimizer_outside_train([(m.prefix, m.module.training) for m in models])
        return None

    def _schedule_begins(self, optimizer: torch.optim.Optimizer) -> bool:
        """Whether `optimizer` begins a new schedule at this step (`rules.losses.schedule_restarts`
        reads it from the learning rates recorded): its first step after another optimizer of
        ours had stepped (a new stage's or model's), or its learning rate rising again after
        it had decayed to half its peak (a warm-up begun anew, a warm restart). Its learning
        rate is then recorded at this step too, not only at the next statistics step, so that
        a live rule reads the jump a new phase brings as one. A float learning rate only (one
        held in a tensor is read at statistics steps: no device sync)."""
        lr = optimizer.param_groups[0].get("lr") if optimizer.param_groups else None
        if not isinstance(lr, (int, float)) or isinstance(lr, bool):
            return False
        seen = self._schedules.get(id(optimizer))
        if seen is None:
            self._schedules[id(optimizer)] = (lr, lr, False)
            return len(self._schedules) > 1
        last, peak, rising = seen
        up = lr > last * (1 + 1e-6)
        self._schedules[id(optimizer)] = (lr, max(peak, lr), up)
        return up and not rising and last <= 0.5 * peak

    def _learning_rate(self, optimizer: torch.optim.Optimizer, models: tuple[RegisteredModel, ...]) -> None:
        """`learning_rate/<model>`: the learning rate of the optimizer's first parameter group,
        at statistics steps (the loss rules read a warm-up from it, `rules.losses.warming_up`)."""
        lr = optimizer.param_groups[0].get("lr") if optimizer.param_groups else None
        if isinstance(lr, torch.Tensor) and lr.numel() == 1:
            lr = lr.detach()
        elif isinstance(lr, (int, float)) and not isinstance(lr, bool):
            lr = torch.tensor(float(lr))
        else:
            return
        assert self._stats is not None
        for m in models:
            self._stats.add_kinds(
                m.record_name("learning_rate"), lr.to(torch.float32).reshape(1), ("sum",), ()
            )

    def _gradient_saver(
        self, models: tuple[RegisteredModel, ...], held: set[int] | None
    ) -> Callable[[], None]:
        """What saves this optimizer step's gradients once a closure has computed them."""
        return lambda: self._save_gradients(models, held)

    def _on_optimizer_post(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        models = self._ours(optimizer)
        self._stepping = self._stepping and not models
        self._forwarded_since = self._forwarded_since and not models
        if not models or not self.recorder.in_step or self.recorder.mode != Mode.TRAIN:
            return
        self._updated.update(id(m) for m in models)
        if self._waiting(models):
            return  # another model's update (a GAN's generator after its discriminator) ends the step
        self._updated.clear()
        self.timeline.mark(marks.OPTIMIZER_END)
        self.timeline.step_end()
        self.recorder.end_step()
        self._step_ended()

    def _waiting(self, models: tuple[RegisteredModel, ...]) -> bool:
        """After `models` were updated: whether the open step waits for another trained model's
        update. One the loop no longer trains stops being waited for (`trained` False until an
        optimizer updates it again): a model that ran no forward in the open step while
        another model was updated twice (the previous fold's model in a k-fold loop, a teacher
        once its student trains), or that `RETIRE` updates of the others went by without
        (a teacher whose frozen forward still runs), where a GAN's generator waits for its
        critic's 5 updates a step."""
        step, waiting = self.recorder.step, False
        for m in self._models:
            if id(m) in self._updated:
                if m in models:
                    m.waits = 0
                continue
            if not m.trained:
                continue
            m.waits += 1
            if m.waits >= RETIRE or (m.waits >= 2 and m.saved_at != step):
                m.trained = False  # retired: an optimizer updating it again brings it back
                continue
            waiting = True
        return waiting


RETIRE = 64  # updates of the other models without one of a model's own: no longer trained


def _after_first_call(
    closure: Callable[[], Any], then: Callable[[], None], args: Any, kwargs: Any
) -> tuple[Any, Any]:
    """The optimizer's (args, kwargs) with `closure` replaced by one that runs `then` after its
    first call: the gradients it computed, before the optimizer uses them (L-BFGS calls it
    again at moved weights: those are not the step's gradients)."""
    done = False

    def closure_then() -> Any:
        nonlocal done
        loss = closure()
        if not done:
            done = True
            then()
        return loss

    if "closure" in kwargs:
        return args, {**kwargs, "closure": closure_then}
    return (closure_then, *args[1:]), kwargs


def _was_reset(held: torch.Tensor | None) -> bool | torch.Tensor:
    """Was this `.grad` reset: None, or all zeros (`zero_grad(set_to_none=False)`), tested on
    the device (read at the step's end, no sync)? A sparse or complex one is not tested: True."""
    if held is None or held.is_sparse or held.is_complex():
        return True
    try:
        return (held == 0).all()
    except Exception:  # noqa: BLE001 - never break the user's backward
        return True


def _note_reset(m: RegisteredModel, reset: bool | torch.Tensor) -> None:
    """One reading of whether `m`'s `.grad` was reset since its last update: it was if any
    reading says so (a later micro-batch sees the earlier ones' sum)."""
    m.reset = _either(m.reset, reset)


def _either(a: bool | torch.Tensor, b: bool | torch.Tensor) -> bool | torch.Tensor:
    """Either of two readings of a reset (a bool, or a device bool: no sync)."""
    return b if a is False or b is True else a | b


def _grad_tensors(output: Any, depth: int = 2) -> list[torch.Tensor]:
    """The tensors that require a gradient in a layer's output: itself, or inside tuples and
    lists (a PackedSequence, an RNN's (output, h_n)) down to `depth`."""
    if isinstance(output, torch.Tensor):
        return [output] if output.requires_grad else []
    if depth and isinstance(output, (tuple, list)):
        return [t for o in output for t in _grad_tensors(o, depth - 1)]
    return []


def optimizer_exists(param_ids: set[int]) -> bool:
    """Once, at the first backward: does an optimizer hold our parameters? Then steps end
    at its `step()`, even when several backward passes accumulate gradients before it."""
    return any(
        issubclass(type(o), torch.optim.Optimizer)  # type(): no __class__ properties run
        and any(id(p) in param_ids for g in o.param_groups for p in g["params"])
        for o in gc.get_objects()
    )


def time_backward(
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


def _accumulates(p: torch.Tensor | None) -> bool:
    """Whether the backward pass running now adds into `p.grad`: not `torch.autograd.grad`
    (which returns gradients and leaves `.grad` alone: a script that projects or mixes its
    gradients, then assigns `.grad`), nor a `backward(inputs=...)` that leaves `p` out. Only
    such a pass can apply a stale `.grad` again (`gradient_reset`). Unknown: True."""
    if p is None:
        return True
    try:
        node = torch.autograd.graph.get_gradient_edge(p).node
        return bool(torch._C._will_engine_execute_node(node))
    except RuntimeError:  # raised for a leaf's node inside `torch.autograd.grad`: it never accumulates
        return False
    except Exception:  # noqa: BLE001 - never break the user's backward
        return True
