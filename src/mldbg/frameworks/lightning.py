"""Lightning adapter: `mldbg.lightning.DebuggerCallback`.

One line, `Trainer(callbacks=[DebuggerCallback(out_dir)])`, records the LightningModule
through the torch hook (`mldbg.frameworks.torch.Hook`, all its options): parameters,
gradients, the loss, and the statistics the default rules read.

- Steps come from Lightning's loops, not from the module's forwards (a `training_step` may
  never call `self(...)`): a training batch opens a TRAIN step, which ends at the optimizer
  step (so `accumulate_grad_batches` micro-batches are one step); each validation batch is an
  EVAL step, each test batch an EVAL step, each predict batch a PREDICT step. The sanity
  check's validation batches are not recorded.
- The loss: `training_step`'s returned loss (`outputs["loss"]`, summed over accumulated
  micro-batches: Lightning divides each by their number), else the loss given to backward
  (manual optimization), else a logged `train_loss` / `loss`, else the one logged metric
  named like a training loss (`loss/train`, `train/loss`); in EVAL the step's returned
  loss, else the logged `val_loss` / `test_loss` (or the one metric named like it,
  `loss/val`) at the end of the loop. Saved as `loss`
  in `losses`.
- The run opens when the loop starts (`on_fit_start`, `on_validation_start`...: after the
  module's `setup` and `configure_model` made its layers), on every rank under DDP: ranks are
  workers (`include_workers="all"` records each; by default rank 0 records, the others add
  their fingerprints).
- A stop action (`actions=[StopTraining()]`) ends the fit through `trainer.should_stop`: no
  traceback, and the run's END says it was stopped.
- The run closes when the fit (or test, predict...) call ends: `mldbg check` works on it
  right after. A later call with the same callback (`trainer.test()` after `trainer.fit()`,
  a second `fit()`) continues the run (`resume=True`): its global steps follow the recorded
  ones, and `mldbg check` sees them all.
- Manual optimization with several optimizers (a GAN): a batch is one TRAIN step, whatever
  the number of optimizer steps in it; each optimizer's step saves the gradients of the
  parameters it updates. Each optimizer's loss, the sum of the losses given to
  `manual_backward` before its step, is a series of its own: the first optimizer to step
  in the run saves `loss`, the next `loss/backward1`, ... (as the torch hook names the
  passes of a step that reach different parameters, `mldbg.frameworks.torch_loss`): a
  critic's loss and its generator's are the two sides of a game, each read on its own, not
  their mean. With one optimizer, the loss is the mean of the losses given to backward.
- A copy of the callback (`deepcopy`, `pickle`) carries its settings, not the open run.

Works with `lightning.pytorch` and with `pytorch_lightning`, whichever is installed (both:
the callback is a `Callback` of each).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any

import torch

from mldbg.config import Mode
from mldbg.frameworks.trainer_hook import TrainerHook, scalar

log = logging.getLogger("mldbg")


def _callback_bases() -> tuple[type, ...]:
    """Lightning's `Callback` classes that can be imported (the version differences, here)."""
    bases: list[type] = []
    try:
        from lightning.pytorch import Callback

        bases.append(Callback)
    except ImportError:
        pass
    try:
        from pytorch_lightning import Callback as LegacyCallback

        if LegacyCallback not in bases:
            bases.append(LegacyCallback)
    except ImportError:
        pass
    if not bases:
        raise ImportError(
            "mldbg.lightning needs Lightning: pip install 'mldbg[lightning]' (or pytorch_lightning)"
        )
    return tuple(bases)


def _keeps_best(callback: Any) -> bool:
    """The callback stops the fit early (`EarlyStopping`) or keeps its best model by a
    monitored metric (a `ModelCheckpoint` with `monitor`; Lightning's default one keeps the
    last). By class name: `lightning.pytorch` and `pytorch_lightning` define each apart."""
    names = {k.__name__ for k in type(callback).__mro__}
    return "EarlyStopping" in names or (
        "ModelCheckpoint" in names and getattr(callback, "monitor", None) is not None
    )


EVAL_LOSSES = {Mode.EVAL: ("val_loss", "test_loss"), Mode.PREDICT: ()}
TRAIN_LOSSES = ("train_loss", "train_loss_step", "loss")


class DebuggerCallback(*_callback_bases()):  # type: ignore[misc]
    """Records a LightningModule's training with mldbg; `hook_options` are the torch hook's
    (`save_config`, `include_collections`, `rules`, `actions`, ...). `self.hook` is the
    `mldbg.torch.Hook` once the run is open (when the Trainer's loop starts)."""

    def __init__(self, out_dir: str | os.PathLike[str], **hook_options: Any):
        super().__init__()
        self.out_dir = out_dir
        self.hook_options = TrainerHook.check_options(hook_options)  # now, not when the fit starts
        self.hook: TrainerHook | None = None
        self._used = False
        self._in_call = False  # between a Trainer call's loop start and its teardown
        self._pending: list[torch.Tensor | float] = []  # micro-batch losses of the open TRAIN step
        self._backward: list[torch.Tensor] = []  # losses given to backward (manual optimization)
        # manual optimization with several optimizers: each optimizer's losses of the open step
        # (by its index in `trainer.optimizers`), and the loss name of each, in the order of
        # their first steps in the run
        self._passes: dict[int, list[torch.Tensor]] = {}
        self._pass_names: dict[int, str] = {}
        self._eval_loss_seen = False

    # the run -------------------------------------------------------------------------------
    def _open(self, trainer: Any, pl_module: Any) -> None:
        """At the start of the loop: after `setup` and `configure_model` made the module's
        layers, and on every rank once the process group exists. A later Trainer call with
        the same callback (`trainer.test()` after `fit()`, a second `fit()`) continues the
        run: its steps follow the ones recorded."""
        if self._in_call:
            return  # opened for this Trainer call (and maybe closed since, by a stop)
        self._in_call = True
        options = self.hook_options
        if self._used:  # the run this callback wrote goes on
            options = {**options, "overwrite": False, "resume": True}
        self._used = True
        self.hook = TrainerHook(self.out_dir, **options)
        self.hook.register_module(pl_module)
        self.hook.driven = True
        self.hook.early_stopping = any(_keeps_best(c) for c in getattr(trainer, "callbacks", ()))

    def __getstate__(self) -> dict[str, Any]:
        """A copy (`deepcopy`, `pickle`: a checkpoint, a spawned process) carries the settings,
        not the open run: it records nothing until a Trainer call opens its own."""
        state = self.__dict__.copy()
        state.update(hook=None, _pending=[], _backward=[], _passes={}, _pass_names={}, _in_call=False)
        return state

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        hook = self.hook
        if hook is not None and not pl_module.automatic_optimization:
            hook.step_at_batch_end = len(trainer.optimizers) > 1  # a GAN: the batch is the step

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        self._open(trainer, pl_module)

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._open(trainer, pl_module)

    def on_test_start(self, trainer: Any, pl_module: Any) -> None:
        self._open(trainer, pl_module)

    def on_predict_start(self, trainer: Any, pl_module: Any) -> None:
        self._open(trainer, pl_module)

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self.close()
        self._in_call = False

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.close()
        self._in_call = False  # Lightning calls no teardown hook after an exception

    def close(self) -> None:
        """Write the run's END (also done when the Trainer call ends)."""
        if self.hook is not None:
            self.hook.close()

    @property
    def stopped(self) -> bool:
        """True once a stop action ended the training."""
        return self.hook is not None and self.hook.stop_reason is not None

    def _live(self, trainer: Any) -> TrainerHook | None:
        hook = self.hook
        if hook is None or hook.closed or trainer.sanity_checking:
            return None
        if hook.stop_reason is not None:  # a stop action fired: the fit ends here
            trainer.should_stop = True
            log.warning("%s", hook.stop_reason)  # "mldbg stopped the training at step N: ..."
            hook.close()
            return None
        return hook

    # training ------------------------------------------------------------------------------
    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        hook = self._live(trainer)
        if hook is not None:
            hook.open_step(Mode.TRAIN, _inputs(batch))
            if getattr(pl_module, "_compiler_ctx", None) is not None:  # `trainer.fit(torch.compile(module))`:
                hook.eager_if_due()  # a statistics step's batch runs eagerly (torch_compiled)

    def on_before_backward(self, trainer: Any, pl_module: Any, loss: torch.Tensor) -> None:
        if self.hook is not None and not self.hook.closed:
            self.hook._loss.language_model(loss)  # its cross-entropy's language-model statistics (torch_lm)
        if self.hook is not None and not pl_module.automatic_optimization:
            self._backward.append(loss.detach())

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        """Manual optimization with several optimizers: the losses given to backward since
        the last optimizer step are this optimizer's (a player's pass)."""
        if self.hook is None or pl_module.automatic_optimization or len(trainer.optimizers) < 2:
            return
        if self._backward:
            index = next((i for i, o in enumerate(trainer.optimizers) if o is optimizer), -1)
            self._passes.setdefault(index, []).extend(self._backward)
            self._backward = []

    def _save_passes(self, hook: TrainerHook) -> None:
        """Each optimizer's loss of the step that ended (`on_before_optimizer_step`), under
        its own name; losses given to backward after the last step join the last pass."""
        if self._backward and self._passes:
            self._passes[next(reversed(self._passes))].extend(self._backward)
        for index, losses in self._passes.items():
            name = self._pass_names.setdefault(
                index, f"loss/backward{len(self._pass_names)}" if self._pass_names else "loss"
            )
            hook.save_loss(torch.stack(losses).float().sum(), name)

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        hook = self.hook
        if hook is None or hook.closed:
            return
        hook.eager_done()
        hook.close_batch()
        loss = scalar(outputs.get("loss") if isinstance(outputs, Mapping) else outputs)
        if loss is not None:
            self._pending.append(loss)
        if not hook.step_open and hook.stop_reason is None:  # the optimizer stepped: the step ended
            if self._pending:
                hook.save_loss(sum(self._pending))  # each is divided by the accumulated batches
            elif self._passes:
                self._save_passes(hook)
            elif self._backward:
                hook.save_loss(torch.stack(self._backward).float().mean())
            else:
                logged = _logged(trainer, TRAIN_LOSSES, Mode.TRAIN)
                if logged is not None:
                    hook.save_loss(logged)
            self._pending, self._backward, self._passes = [], [], {}
        self._live(trainer)  # a stop: trainer.should_stop now

    # evaluation ------------------------------------------------------------------------------
    def _eval_batch_start(self, trainer: Any, batch: Any, mode: Mode) -> None:
        hook = self._live(trainer)
        if hook is not None:
            hook.open_step(mode, _inputs(batch))

    def _eval_batch_end(self, trainer: Any, outputs: Any) -> None:
        hook = self._live(trainer)
        if hook is None:
            return
        hook.close_batch()
        loss = scalar(outputs.get("loss") if isinstance(outputs, Mapping) else outputs)
        if loss is not None and hook.step_open:
            hook.save_loss(loss)
            self._eval_loss_seen = True

    def _eval_end(self, trainer: Any, mode: Mode) -> None:
        hook = self._live(trainer)
        if hook is not None and not self._eval_loss_seen:  # the loss was logged, not returned
            logged = _logged(trainer, EVAL_LOSSES[mode], mode)
            if logged is not None:
                hook.save_loss(logged)
        self._eval_loss_seen = False

    def on_validation_batch_start(self, trainer: Any, pl_module: Any, batch: Any, *args: Any) -> None:
        self._eval_batch_start(trainer, batch, Mode.EVAL)

    def on_validation_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        self._eval_batch_end(trainer, outputs)

    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._eval_end(trainer, Mode.EVAL)

    def on_test_batch_start(self, trainer: Any, pl_module: Any, batch: Any, *args: Any) -> None:
        self._eval_batch_start(trainer, batch, Mode.EVAL)

    def on_test_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        self._eval_batch_end(trainer, outputs)

    def on_test_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._eval_end(trainer, Mode.EVAL)

    def on_predict_batch_start(self, trainer: Any, pl_module: Any, batch: Any, *args: Any) -> None:
        self._eval_batch_start(trainer, batch, Mode.PREDICT)

    def on_predict_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        hook = self._live(trainer)
        if hook is not None:
            hook.close_batch()


def _inputs(batch: Any) -> tuple[Any, ...]:
    """The model's input in a batch, for the `inputs` statistics: a tensor batch, or the first
    tensor of an `(x, y)` batch; a dict batch (Hugging Face style) gives none."""
    if isinstance(batch, torch.Tensor):
        return (batch,)
    if isinstance(batch, (tuple, list)) and batch and isinstance(batch[0], torch.Tensor):
        return (batch[0],)
    return ()


def _logged(trainer: Any, names: tuple[str, ...], mode: Mode) -> torch.Tensor | float | None:
    """The loss the module logged: one of `names`, else the one logged metric named like a
    loss of `mode` (`loss/train`, `train/loss`, `val/loss_epoch`...)."""
    metrics = trainer.callback_metrics
    for name in names:
        value = scalar(metrics.get(name))
        if value is not None:
            return value
    found = [name for name in metrics if _loss_of(name) == mode]
    if len(found) > 1:  # `loss/train_step` and `loss/train_epoch`: the step's
        found = [name for name in found if not name.endswith("epoch")] or found
    return scalar(metrics[found[0]]) if len(found) == 1 else None


_EVAL_WORDS = ("val", "valid", "validation", "test", "eval")


def _loss_of(name: str) -> Mode | None:
    """The mode whose loss a logged metric's name says it is (None: not a loss)."""
    words = set(re.split(r"[^a-z0-9]+", name.lower()))
    if not any(w == "loss" or w.endswith("loss") for w in words):
        return None
    if words & set(_EVAL_WORDS):
        return Mode.EVAL
    return Mode.PREDICT if "predict" in words else Mode.TRAIN


__all__ = ["DebuggerCallback"]
