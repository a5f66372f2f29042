"""Hugging Face adapter: `mldbg.transformers.DebuggerCallback`.

One line, `Trainer(..., callbacks=[DebuggerCallback(out_dir)])`, records the `Trainer`'s
model through the torch hook (`mldbg.frameworks.torch.Hook`, all its options): parameters,
gradients, the loss, and the statistics the default rules read.

- Steps: the `Trainer` calls the model, so the torch hook's own steps hold. A TRAIN step
  ends at the optimizer step: the micro-batches of `gradient_accumulation_steps` are one
  step, as `on_step_end` counts them. Evaluation runs the model in eval mode: each batch of
  `evaluate()` (and of the evaluations during training) is an EVAL step, each batch of
  `predict()` a PREDICT step (the mode is read from the `Trainer` method the forward runs in:
  `predict`, else `evaluate` / `evaluation_loop`, else `train`).
- Only the `Trainer`'s own loops are recorded: a forward of the model outside `train()`,
  `evaluate()` and `predict()` (a `model.generate()` after training, a call of the model
  before `train()`) records nothing and does not reopen a closed run.
- The loss: the `loss` of the model's outputs (the `Trainer` passes `labels`; with
  `return_dict=False`, the first element of the outputs' tuple), one value per
  step: over accumulated micro-batches, the mean of their losses as the model returns them
  (a model that divides its loss by the `Trainer`'s `num_items_in_batch` returns shares of
  the step's loss, so its recorded loss is that divided by the number of micro-batches: the
  trend the rules read is the same); where the outputs hold none (a custom `compute_loss`),
  the `loss` / `eval_loss` (`test_loss` of a `predict()`) of the `Trainer`'s logs. Saved
  as `loss` in `losses`.
- The run opens when the `Trainer` is made (`on_init_end`), or at the first event that
  names the model (a callback added later), and closes at `on_train_end`: `mldbg check`
  works on it right after `train()`. Ranks of a distributed job are workers. An
  `evaluate()` / `predict()` outside `train()` continues the run (resumed at the model's
  first forward inside it after the run closed) and closes it at its end (`on_evaluate`,
  `on_predict`); after a stop it stays closed.
- A stop action (`actions=[StopTraining()]`) sets `control.should_training_stop`: `train()`
  returns early, with no traceback, and the run's END says it was stopped.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
from collections.abc import Mapping
from functools import cache
from types import CodeType, FrameType
from typing import Any

import torch
from torch import nn
from transformers import Trainer, TrainerCallback

from mldbg.config import Mode
from mldbg.frameworks.torch_models import Omitted, Omitting, RegisteredModel
from mldbg.frameworks.trainer_hook import TrainerHook, scalar

log = logging.getLogger("mldbg")


class DebuggerCallback(TrainerCallback):
    """Records a Hugging Face `Trainer`'s model with mldbg; `hook_options` are the torch
    hook's (`save_config`, `include_collections`, `rules`, `actions`, ...). `self.hook` is
    the `mldbg.torch.Hook` once the run is open."""

    def __init__(self, out_dir: str | os.PathLike[str], **hook_options: Any):
        self.out_dir = out_dir
        self.hook_options = TrainerHook.check_options(hook_options)  # now, not when the fit starts
        self.hook: _LoopHook | None = None
        self._handles: list[Any] = []  # the callback's own hooks on the model (the loss)
        self._training = False  # inside `train()`
        self._pending: list[torch.Tensor] = []  # micro-batch losses of the open TRAIN step
        self._seen = {Mode.TRAIN: False, Mode.EVAL: False}  # a loss came from the model's outputs

    # the run -------------------------------------------------------------------------------
    def _open(self, model: nn.Module | None, resume: bool = False) -> _LoopHook | None:
        if model is not None and (self.hook is None or (resume and self._reopens)):
            options = (
                {**self.hook_options, "overwrite": False, "resume": True} if self.hook else self.hook_options
            )
            self.hook = _LoopHook(self.out_dir, **options)
            self.hook.register_module(model)
            if not self._handles:  # kept for the callback's life: a closed run reopens at a forward
                self._handles = [
                    model.register_forward_pre_hook(_Live(self._on_model_input, model), with_kwargs=True),
                    model.register_forward_hook(_Live(self._on_model_output, model), with_kwargs=True),
                ]
        return self.hook

    @property
    def _reopens(self) -> bool:
        """The run closed at the end of a `train()` or `evaluate()`, not by a stop: a later
        call of the `Trainer` continues it."""
        return self.hook is not None and self.hook.closed and self.hook.stop_reason is None

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
        """Write the run's END (also done at the end of `train()`, and of an `evaluate()` or
        `predict()` outside it)."""
        if self.hook is not None:
            self.hook.close()

    @property
    def stopped(self) -> bool:
        """True once a stop action ended the training."""
        return self.hook is not None and self.hook.stop_reason is not None

    def __getstate__(self) -> dict[str, Any]:
        """A copy (`deepcopy`, `pickle`) carries the settings, not the open run."""
        return {**self.__dict__, "hook": None, "_handles": [], "_pending": [], "_training": False}

    def on_init_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self._live(control, model)

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self._training = True
        hook = self._open(model, resume=True)  # after an evaluate() that closed the run
        if hook is not None:  # keeps the best checkpoint by its metric (`EarlyStoppingCallback` needs it)
            hook.early_stopping = bool(getattr(args, "load_best_model_at_end", False))
        self._live(control, model)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._training = False
        self.close()

    def _on_model_input(self, module: nn.Module, args: Any, kwargs: dict[str, Any]) -> None:
        """An evaluation after the run closed (`trainer.evaluate()` after `train()`): its first
        forward reopens the run, and opens its step."""
        if self._training or module.training or not self._reopens or trainer_loop() is None:
            return
        hook = self._open(module, resume=True)
        if hook is not None:
            hook.begin_forward(args, kwargs)

    # the loss ------------------------------------------------------------------------------
    def _on_model_output(self, module: nn.Module, args: Any, kwargs: dict[str, Any], output: Any) -> None:
        hook = self.hook
        if hook is None or not hook.step_open or hook.outside:
            return
        raw = _loss(output, kwargs.get("labels") is not None)
        loss = scalar(raw)
        if loss is None or not isinstance(loss, torch.Tensor):
            return
        hook._loss.language_model(raw)  # its cross-entropy's language-model statistics (torch_lm)
        if hook.recorder.mode == Mode.TRAIN:
            self._pending.append(loss)
        else:
            hook.save_loss(loss)
        self._seen[Mode.TRAIN if hook.recorder.mode == Mode.TRAIN else Mode.EVAL] = True

    def on_step_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if self._live(control, model) is not None and self.hook is not None:
            self.hook.reset_seen_at_step_begin()
            if getattr(args, "torch_compile", False):  # the Trainer compiles the model: a
                self.hook.eager_if_due()  # statistics step runs eagerly (torch_compiled)

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if self.hook is not None:
            self.hook.eager_done()
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

    def _evaluated(self, control: Any, metrics: Any) -> None:
        hook = self._live(control)
        if hook is None or not metrics or self._seen[Mode.EVAL]:
            return
        # `eval_loss`; `test_loss` from predict(); `<prefix>_loss` for a metric_key_prefix
        named = [k for k in metrics if k.endswith("_loss")]
        key = next(
            (k for k in ("eval_loss", "test_loss") if k in metrics), named[0] if len(named) == 1 else None
        )
        loss = scalar(metrics.get(key)) if key is not None else None
        if loss is not None and hook.recorder.mode != Mode.TRAIN:
            hook.save_loss(loss)

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any) -> None:
        self._evaluated(control, metrics)
        if not self._training:
            self.close()

    def on_predict(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any) -> None:
        self._evaluated(control, metrics)
        if not self._training:
            self.close()


@cache
def _loop_codes() -> dict[CodeType, Mode]:
    """The code of the `Trainer` methods that run the model, with the mode of their forwards
    (TRAIN: the model's own `training` flag decides, as in the torch hook)."""
    methods = {
        "train": Mode.TRAIN, "evaluate": Mode.EVAL, "evaluation_loop": Mode.EVAL,
        "prediction_loop": Mode.EVAL, "predict": Mode.PREDICT,
    }  # fmt: skip
    codes = {}
    for name, mode in methods.items():
        method = getattr(Trainer, name, None)
        code = getattr(inspect.unwrap(method), "__code__", None) if method is not None else None
        if code is not None:
            codes[code] = mode
    return codes


def trainer_loop() -> Mode | None:
    """The `Trainer` loop the caller runs in: PREDICT inside `predict()`, EVAL inside
    `evaluate()` (also during `train()`), TRAIN inside `train()` only, None outside them all
    (a subclass's override that calls the `Trainer`'s method counts as that method)."""
    codes = _loop_codes()
    found: set[Mode] = set()
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        mode = codes.get(frame.f_code)
        if mode is Mode.PREDICT:
            return mode
        if mode is not None:
            found.add(mode)
        frame = frame.f_back
    return Mode.EVAL if Mode.EVAL in found else (Mode.TRAIN if found else None)


class _LoopHook(TrainerHook):
    """The torch hook as the `Trainer` drives it: a forward inside `predict()` is a PREDICT
    step, one outside the `Trainer`'s loops is not recorded (`outside` while it runs)."""

    def _setup(self) -> None:
        super()._setup()
        self.outside = False  # the forward running now is outside the Trainer's loops
        self._loop: Mode | None = None

    def _on_forward_start(
        self, m: RegisteredModel, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        self._loop = trainer_loop()
        self.outside = self._loop is None
        if self.outside:
            m.running = False  # its layers' hooks stay inert
            return
        super()._on_forward_start(m, module, args, kwargs)

    def _on_forward_end(
        self, m: RegisteredModel, module: nn.Module, args: tuple[Any, ...], output: Any
    ) -> None:
        if self.outside:
            m.running = False
            return
        super()._on_forward_end(m, module, args, output)

    def reset_seen_at_step_begin(self) -> None:
        """Whether each model's `.grad` was reset, read where the `Trainer` begins an optimizer
        step (before its first micro-batch's forward): what the torch hook reads when the
        backward reaches the layer of `reset_param` (`gradient_reset`), read here too because
        that layer's own forward may never run: a tied embedding (BART's, T5's `shared`, whose
        weight the encoder's and decoder's `embed_tokens` use) gets its gradient through other
        modules. Tested on the device, no sync; written at the update of a statistics step."""
        for m in self._models:
            if m.reset_param is None:
                continue
            held = m.reset_param.grad
            m.incoming = True
            if held is None or held.is_sparse or held.is_complex():
                m.reset = True
            else:
                m.reset = (held == 0).all()

    def _current_mode(self, module: nn.Module) -> Mode:
        if self._mode is None and self._loop == Mode.PREDICT:
            return Mode.PREDICT
        return super()._current_mode(module)


class _Live(Omitted):
    """The callback's callable on the model: live for the callback's life (a closed run
    reopens through it); left out of the model's copies (`deepcopy`, `pickle`,
    `torch.save`: torch_models.Omitting)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Any, model: nn.Module):
        self.fn = fn
        Omitting.install(model)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


def _loss(output: Any, labelled: bool) -> Any:
    """The loss in a model's outputs: its `loss`, or (`return_dict=False`, called with
    labels) the first element of the tuple, as Hugging Face models return it."""
    if isinstance(output, Mapping):
        return output.get("loss")
    if isinstance(output, tuple) and not hasattr(output, "_fields"):
        first = output[0] if output else None
        is_loss = labelled and isinstance(first, torch.Tensor) and first.dim() == 0
        return first if is_loss else None
    return getattr(output, "loss", None)


__all__ = ["DebuggerCallback"]
