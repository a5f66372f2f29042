"""The torch hook as a trainer's callback drives it (Lightning, Hugging Face `Trainer`).

A trainer calls the model and the optimizer itself, so a stop request cannot surface as
`TrainingStopped` there: raised inside `optimizer.step()` it would end the fit with a
traceback. `TrainerHook` catches it where the torch hook ends a step (a forward, the
optimizer step, a change of mode), keeps the reason in `stop_reason`, and goes quiet; the
callback then asks the trainer to stop at its next event (`trainer.should_stop`,
`control.should_training_stop`) and closes the run (the recorder has already written END).

For a trainer whose loop calls the training step and not the model (a LightningModule's
`training_step` may call `self.encoder(x)`, never `self(x)`), `open_step(mode, args)` opens
the step from the loop's batch events instead (`driven=True`): forwards of the model then
add their outputs to the open step but open none.

A loop whose batch steps several optimizers (a LightningModule's manual optimization of a
GAN: the discriminator's optimizer, then the generator's) sets `step_at_batch_end`: its TRAIN
step then ends at `close_batch()` once some optimizer stepped in the batch (the torch hook
would end it at the first optimizer step, as the whole module is one registered model), and
each optimizer step saves the gradients of the parameters that optimizer updates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from mldbg.config import Mode
from mldbg.errors import TrainingStopped
from mldbg.frameworks.torch import Hook
from mldbg.frameworks.torch_models import RegisteredModel
from mldbg.profiler import timeline as marks


class TrainerHook(Hook):
    """A torch `Hook` whose stop ends quietly (`stop_reason`), optionally driven by a loop."""

    finds_loss = False  # the callback records the loss its trainer's loop sees

    def _setup(self) -> None:
        super()._setup()
        self.stop_reason: str | None = None
        self.driven = False  # True: steps open at `open_step` only, not at the model's forwards
        self.in_batch = False  # a loop's batch is open (driven hooks record outputs only then)
        self.step_at_batch_end = False  # several optimizers per batch: the batch is the step
        self._opening = False
        self._batch_stepped = False  # an optimizer stepped in the open batch
        self._stepping_params: set[int] | None = None  # the params of the optimizer stepping now

    # what a trainer's callback calls --------------------------------------------------------
    def open_step(self, mode: Mode, args: tuple[Any, ...] = ()) -> None:
        """A batch of `mode` begins: open its step (TRAIN: continue the open one while the
        optimizer has not stepped, e.g. under gradient accumulation)."""
        if self.stop_reason is not None or not self._models:
            return
        self.set_mode(mode)
        self.in_batch = True
        self._opening = True
        model = self._models[0]  # the trainer's module (one per trainer)
        try:
            super()._on_forward_start(model, model.module, args, {})
        except TrainingStopped as e:
            self._stopped(e)
        finally:
            self._opening = False

    def begin_forward(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A forward of the trainer's model that began before this hook took the model (its
        own pre-forward hook did not run for it): open its step now."""
        if self._models:
            model = self._models[0]
            self._on_forward_start(model, model.module, tuple(args), kwargs)

    def close_batch(self) -> None:
        """The loop's batch ended (with `step_at_batch_end`: so did its TRAIN step, if an
        optimizer stepped in it)."""
        self.in_batch = False
        if not self._batch_stepped:
            return
        self._batch_stepped = False
        if self.stop_reason is not None or self._closed or not self.recorder.in_step:
            return
        self._updated.clear()
        self.timeline.mark(marks.OPTIMIZER_END)
        self.timeline.step_end()
        try:
            self.recorder.end_step()
        except TrainingStopped as e:
            self._stopped(e)

    def set_mode(self, mode: Mode) -> None:
        if self.stop_reason is not None:
            return
        try:
            super().set_mode(mode)
        except TrainingStopped as e:
            self._stopped(e)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def step_open(self) -> bool:
        return self.stop_reason is None and not self._closed and self.recorder.in_step

    def eager_if_due(self) -> None:
        """A trainer that compiles the model itself (the Hugging Face `Trainer` with
        `torch_compile=True`) is about to run an optimizer step: when that TRAIN step will be a
        statistics step, compiled code runs eagerly until `eager_done` (`torch_compiled`)."""
        if self.stop_reason is None:
            self._eager_if_train_due(self)

    def eager_done(self) -> None:
        """The optimizer step of `eager_if_due` ended: compiled code runs compiled again."""
        self._eager.leave(self)

    def save_loss(self, value: Any, name: str = "loss") -> None:
        """The step's loss, in `losses` (at the open step, else at the one that just ended)."""
        if self.stop_reason is not None or self._closed:
            return
        if isinstance(value, torch.Tensor):
            value = value.detach().float().cpu().numpy()
        self.save_tensor(name, value, ("losses",))

    # the torch hook's points where a step ends ----------------------------------------------
    def _stopped(self, e: TrainingStopped) -> None:
        self.stop_reason = str(e)
        self.in_batch = False

    def _on_forward_start(
        self, m: RegisteredModel, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        if self.stop_reason is not None or (self.driven and not self._opening):
            return
        try:
            super()._on_forward_start(m, module, args, kwargs)
        except TrainingStopped as e:
            self._stopped(e)

    def _on_forward_end(
        self, m: RegisteredModel, module: nn.Module, args: tuple[Any, ...], output: Any
    ) -> None:
        if self.stop_reason is not None or (self.driven and not self.in_batch):
            return
        super()._on_forward_end(m, module, args, output)
        if self.driven:  # the loop's batch, not the model's forward, is the span of its layers
            m.running = True

    def _on_optimizer_pre(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> Any:
        if self.stop_reason is not None:
            return None
        if self.step_at_batch_end:  # its own parameters' gradients only (the others are stale)
            self._stepping_params = {id(p) for g in optimizer.param_groups for p in g["params"]}
        try:
            return super()._on_optimizer_pre(optimizer, args, kwargs)
        finally:
            self._stepping_params = None

    def _gradient_saver(
        self, models: tuple[RegisteredModel, ...], held: set[int] | None
    ) -> Callable[[], None]:
        only = self._stepping_params  # the closure runs after the pre-hook has reset it

        def save() -> None:
            if self.stop_reason is not None:
                return
            self._stepping_params = only
            try:
                self._save_gradients(models, held)
            finally:
                self._stepping_params = None

        return save

    def _save_gradients(
        self, models: tuple[RegisteredModel, ...] | list[RegisteredModel], held: set[int] | None = None
    ) -> None:
        only = self._stepping_params
        if only is None:
            super()._save_gradients(models, held)
            return
        self._reset_seen(models, held)
        params = [entry for m in models for entry in m.params if id(entry[1]) in only]
        if self._stats is not None:
            self._stats.before_optimizer(params)
        if not self.recorder.saving:
            self._reductions.finish()
            return
        for name, p, _ in params:
            if p.grad is not None:
                self._save(f"gradient/{name}", p.grad, ("gradients",), replace=True)
        self._reductions.finish()

    def _on_optimizer_post(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        if self.stop_reason is not None:
            return
        if self.step_at_batch_end and self.in_batch and self._ours(optimizer):
            self._stepping = False  # the step ends with the batch (`close_batch`)
            self._batch_stepped = self.recorder.in_step and self.recorder.mode == Mode.TRAIN
            return
        try:
            super()._on_optimizer_post(optimizer, args, kwargs)
        except TrainingStopped as e:
            self._stopped(e)

    def _on_backward_end(self) -> None:
        if self.stop_reason is None:
            super()._on_backward_end()


def scalar(value: Any) -> torch.Tensor | float | None:
    """A loss as a trainer hands it over: a one-element tensor or number, else None."""
    if isinstance(value, torch.Tensor):
        return value.detach() if value.numel() == 1 else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


__all__ = ["TrainerHook", "scalar"]
