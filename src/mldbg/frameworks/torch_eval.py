"""Evaluations that run in training mode, seen without `hook.set_mode`.

The PyTorch hook follows `model.training` for the mode, so an evaluation that forgot
`model.eval()` (its forwards under `torch.no_grad()`, no backward, no optimizer step) lands
inside TRAIN steps and no rule sees an evaluation. What gives it away: forwards of a
registered model with gradients disabled (`torch.no_grad()`, `torch.inference_mode()`) while
Dropout (p > 0) or BatchNorm / InstanceNorm modules with trainable parameters around them are
in training mode.

Not every such forward is an evaluation: a DQN computes its targets with the same network
under `no_grad` in train mode, a self-distillation step runs a teacher pass, a GAN samples its
generator (BatchNorm in training mode on purpose) for the discriminator's update. Those are
one forward inside a training iteration. So the forwards are counted in *runs*, which a
forward with gradients enabled, a backward of a registered model, any optimizer step or a
registered loss computed with gradients enabled ends, and a run counts as an evaluation once
it holds two such forwards (an evaluation loop over batches) or a registered loss computed
with gradients disabled (a validation loss). A single no-grad forward per training iteration
is left alone; one with no active Dropout or BatchNorm is not counted at all (nothing
differs in eval mode). Nor is a run whose forwards all take the same input (the same
object, or a view of the same memory: `_same_input`): Monte Carlo dropout samples one batch
many times in training mode on purpose (an evaluation loop takes a new batch at each forward).

Recorded at the end of the step the evaluation ran in, whatever the hook's configuration
(also with `statistics=False`: only at such steps, so a healthy run holds none of it), as
statistics records (`sum`, `count`):
- `no_grad_training/forwards`: one 1 per forward of the evaluation (`sum`: how many);
- `no_grad_training/dropout`, `no_grad_training/norm`: one uint8 per watched module of the
  models that ran, 1 when it was in training mode at one of those forwards.
`nondeterministic_eval` reads them.
"""

from __future__ import annotations

import torch
from torch import nn

from mldbg.frameworks.torch_defaults import StepStatistics, mode_modules
from mldbg.record.recorder import Recorder

PREFIX = "no_grad_training"
KINDS = ("dropout", "norm")


def _same_input(a: object, b: object) -> bool:
    """The same input data: the same object, or a view of the same memory, shape, strides and
    contents' version (MC dropout's `model(x[900:])` makes a new view at each pass; a
    buffer refilled in place has a new version)."""
    if a is b:
        return True
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.is_sparse or b.is_sparse:
        return False
    try:
        return (
            a.device == b.device and a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
            and a.data_ptr() == b.data_ptr() and a._version == b._version
        )  # fmt: skip
    except (RuntimeError, NotImplementedError):  # a tensor subclass without storage
        return False


class EvalForwards:
    """Runs of no-grad forwards in training mode, and the evaluations among them (see the
    module doc); the hook tells it of forwards, losses, backwards and optimizer steps."""

    def __init__(self, recorder: Recorder):
        self._stats = StepStatistics(recorder)  # no cadence: whichever step it happens in
        recorder.before_step_end.append(self._step_end)
        self._modules: dict[int, dict[str, list[tuple[nn.Module, list[nn.Parameter]]]]] = {}
        self._run: list[tuple[int, dict[str, list[bool]]]] = []  # (model key, flags) not yet judged
        self._evaluation = False  # the open run is an evaluation
        self._forwards = 0  # the open step's forwards of evaluations
        self._flags: dict[int, dict[str, list[bool]]] = {}  # model key -> kind -> flags, in the step
        self._last_input: object = None  # the open run's last forward's first input (held: its identity)
        self._varied = False  # a forward of the open run took another input than the one before

    def watch(self, key: int, model: nn.Module) -> None:
        """A registered model (`key`: its hook's id for it) and its mode-dependent modules."""
        self._modules[key] = mode_modules(model)

    def forward(self, key: int, first: object = None) -> bool:
        """A registered model's forward begins (outside an optimizer's closure), `first` its
        first input; True when it runs with gradients disabled and Dropout or BatchNorm in
        training mode (it may be an evaluation's)."""
        if torch.is_grad_enabled():
            self.end_run()
            return False
        groups = self._modules.get(key)
        if not groups:
            return False
        flags = {
            kind: [m.training and any(p.requires_grad for p in ctx) for m, ctx in members]
            for kind, members in groups.items()
        }
        if not any(any(f) for f in flags.values()):
            return False  # nothing differs in eval mode (or only a frozen part is in training mode)
        if self._run and not _same_input(first, self._last_input):
            self._varied = True
        self._last_input = first  # held: no other batch can take its memory while it is compared
        self._run.append((key, flags))
        if len(self._run) >= 2 and self._varied:
            self._evaluation = True
        if self._evaluation:
            self._take()
        return True

    def loss(self) -> bool:
        """A registered loss was computed: with gradients disabled, after no-grad forwards in
        training mode, it is a validation loss (True); with gradients enabled, training goes on."""
        if torch.is_grad_enabled():
            self.end_run()
            return False
        if self._run and (len(self._run) == 1 or self._varied):  # not one batch sampled again and again
            self._evaluation = True
            self._take()
        return self._evaluation

    def end_run(self) -> None:
        """Training goes on (a backward, an optimizer step, a forward with gradients)."""
        self._run = []
        self._evaluation = False
        self._last_input, self._varied = None, False

    def _take(self) -> None:
        """The open run is an evaluation: its forwards count in the open step."""
        for key, flags in self._run:
            self._forwards += 1
            seen = self._flags.setdefault(key, {k: [False] * len(v) for k, v in flags.items()})
            for kind, new in flags.items():
                seen[kind] = [a or b for a, b in zip(seen[kind], new, strict=True)]
        self._run = []

    def _step_end(self) -> None:
        if not self._forwards:
            return
        forwards, by_model = self._forwards, self._flags
        self._forwards, self._flags = 0, {}
        stats = self._stats
        stats.add_kinds(f"{PREFIX}/forwards", torch.ones(forwards, dtype=torch.uint8), ("sum", "count"), ())
        for kind in KINDS:
            flags = [f for seen in by_model.values() for f in seen.get(kind, [])]
            if flags:
                stats.add_kinds(
                    f"{PREFIX}/{kind}", torch.tensor(flags, dtype=torch.uint8), ("sum", "count"), ()
                )
        stats.finish()
