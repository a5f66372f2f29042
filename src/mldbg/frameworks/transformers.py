"""Hugging Face adapter: `mldbg.transformers.DebuggerCallback`.

One line, `Trainer(..., callbacks=[DebuggerCallback(out_dir)])`, records the `Trainer`'s
model through the torch hook (`mldbg.frameworks.torch.Hook`, all its options): parameters,
gradients, the loss, and the statistics the default rules read.

- Steps: the `Trainer` calls the model, so the torch hook's own steps hold. A TRAIN step
  ends at the optimizer step: the micro-batches of `gradient_accumulation_steps` are one
  step, as `on_step_end` counts them. Evaluation runs the model in eval mode: each batch of
  `evaluate()` (and of the evaluations during training) is an EVAL step.
- The loss: the `loss` of the model's outputs (the `Trainer` passes `labels`), one value per
  step: over accumulated micro-batches, the mean of their losses as the model returns them
  (a model that divides its loss by the `Trainer`'s `num_items_in_batch` returns shares of
  the step's loss, so its recorded loss is that divided by the number of micro-batches: the
  trend the rules read is the same); where the outputs hold none (a custom `compute_loss`),
  the `loss` / `eval_loss` of the `Trainer`'s logs. Saved as `loss` in `losses`.
- The run opens when the `Trainer` is made (`on_init_end`), or at the first event that
  names the model (a callback added later), and closes at `on_train_end`: `mldbg check`
  works on it right after `train()`. Ranks of a distributed job are workers.
- A stop action (`actions=[StopTraining()]`) sets `control.should_training_stop`: `train()`
  returns early, with no traceback, and the run's END says it was stopped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from transformers import TrainerCallback

from mldbg.config import Mode
from mldbg.frameworks.trainer_hook import TrainerHook, scalar

log = logging.getLogger("mldbg")


class DebuggerCallback(TrainerCallback):
    """Records a Hugging Face `Trainer`'s model with mldbg; `hook_options` are the torch
    hook's (`save_config`, `include_collections`, `rules`, `actions`, ...). `self.hook` is
    the `mldbg.torch.Hook` once the run is open."""

    def __init__(self, out_dir: str | os.PathLike[str], **hook_options: Any):
        self.out_dir = out_dir
        self.hook_options = TrainerHook.check_options(hook_options)  # now, not when the fit starts
        self.hook: TrainerHook | None = None
        self._handle: Any = None
        self._pending: list[torch.Tensor] = []  # micro-batch losses of the open TRAIN step
        self._seen = {Mode.TRAIN: False, Mode.EVAL: False}  # a loss came from the model's outputs

    # the run -------------------------------------------------------------------------------
    def _open(self, model: nn.Module | None) -> TrainerHook | None:
        if self.hook is None and model is not None:
            self.hook = TrainerHook(self.out_dir, **self.hook_options)
            self.hook.register_module(model)
            self._handle = model.register_forward_hook(self._on_model_output)
        return self.hook

    def _live(self, control: Any, model: nn.Module | None = None) -> TrainerHook | None:
        hook = self._open(model)
        if hook is None or hook.closed:
            return None
        if hook.stop_reason is not None:  # a stop action fired: the training ends here
            control.should_training_stop = True
            log.warning("%s", hook.stop_reason)  # "mldbg stopped the training at step N: ..."
            self.close()
            return None
        return hook

    def close(self) -> None:
        """Write the run's END (also done at the end of `train()`)."""
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        if self.hook is not None:
            self.hook.close()

    @property
    def stopped(self) -> bool:
        """True once a stop action ended the training."""
        return self.hook is not None and self.hook.stop_reason is not None

    def on_init_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self._live(control, model)

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self._live(control, model)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.close()

    # the loss ------------------------------------------------------------------------------
    def _on_model_output(self, module: nn.Module, args: Any, output: Any) -> None:
        hook = self.hook
        if hook is None or not hook.step_open:
            return
        loss = scalar(output.get("loss") if isinstance(output, Mapping) else getattr(output, "loss", None))
        if loss is None or not isinstance(loss, torch.Tensor):
            return
        if hook.recorder.mode == Mode.TRAIN:
            self._pending.append(loss)
        else:
            hook.save_loss(loss)
        self._seen[Mode.TRAIN if hook.recorder.mode == Mode.TRAIN else Mode.EVAL] = True

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        hook = self._live(control, model)
        if hook is None:
            return
        if self._pending:  # the optimizer stepped: the step just ended
            hook.save_loss(torch.stack([p.float() for p in self._pending]).mean())
        self._pending = []

    def on_substep_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._live(control)

    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._live(control)

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        hook = self._live(control)
        if hook is None or not logs or self._seen[Mode.TRAIN]:
            return
        loss = scalar(logs.get("loss"))
        if loss is not None and hook.recorder.mode == Mode.TRAIN:
            hook.save_loss(loss)  # a custom compute_loss: the logged loss, at the step that ended

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any) -> None:
        hook = self._live(control)
        if hook is None or not metrics or self._seen[Mode.EVAL]:
            return
        loss = scalar(metrics.get("eval_loss"))
        if loss is not None and hook.recorder.mode != Mode.TRAIN:
            hook.save_loss(loss)


__all__ = ["DebuggerCallback"]
