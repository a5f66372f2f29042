"""What the two-line PyTorch hook records: the statistics the default rules read, on a budget.

`mldbg.torch.Hook(out_dir)` with no `save_config` and no `include_collections` (or any hook
given `statistics=True`) hands a step's tensors to one `StatisticsBatch`, asking for the
statistics of `mldbg.store.statistics.DEFAULTS` of their collection, and hands the batch to
the recorder once per step (`Recorder.save_statistics`): the work is enqueued on the tensors'
device, and the values are read on the writer thread after one non-blocking copy.

When (`Cadence`): the loss is saved raw every step by the recorder (`losses`). Everything else
is computed at *statistics steps*: every step for the first `warmup` steps of each mode (the
defects of initialization show at once: dead ReLUs, saturation, poor init, raw inputs, class
imbalance), then every k-th step of that mode (k = 100 by default), and the first
`AFTER_SWITCH` steps of a mode entered again (the first training steps after each evaluation
pass: bugs local to that moment, a forgotten `model.train()`) or after an optimizer stepped in
an EVAL step. The steps follow from the step numbers and the sequence of modes alone, never
from timing, so the same script records the same steps on a busy machine and a quiet one. k
is planned from `budget`, the share of the step time statistics may take, for the dear case: on a CPU the statistics are real arithmetic (each ReLU input
read about three times), a statistics step costing ~0.7 of a small ResNet's step more; on a
GPU they are launches enqueued, cheaper.

Per tensor (names as in API.md), at statistics steps:
- `<param>` (weights and biases) and `gradient/<param>`: in TRAIN steps only (weights do not
  change in EVAL); `delta_l2` is the change since the last statistics step, `requires_grad`
  0 when the parameter stayed frozen at every TRAIN step since then (the one thing looked at
  on every TRAIN step: a few attribute reads);
- `<layer>_input_0` of each ReLU, Tanh and Sigmoid module (their subclasses too; LeakyReLU is
  not a ReLU): `unit_active` / `unit_outside(...)` and the moments of `DEFAULTS`;
- `model_input_<i>`, `model_output_<i>`: `inputs`, `outputs` statistics;
- for a classification loss (`CLASSIFICATION_LOSSES`), `<Loss>_input_1` (the labels, in
  `labels`) carries `class_counts`, `class_correct` and `confusion` (up to 64 classes) and
  `<Loss>_input_0` (the predictions, in `predictions`) `class_counts` of the predicted
  classes, as vector records, and both their `samples`; any other loss, the `samples` of
  its two inputs (their shapes are in the index: `batch_dim_mismatch`) and the `mean` and
  `std` of float labels (a regression's targets: `moving_targets`);
- `model_output_<i>` of EVAL and PREDICT steps also its `fingerprint` (`nondeterministic_eval`);
- `module_training/dropout` and `module_training/norm`: one uint8 per Dropout (p > 0) or
  BatchNorm / InstanceNorm module with trainable parameters around it (its own, or its
  parent's: a frozen backbone put in eval on purpose is left out), 1 while it is in training
  mode, with `sum` and `count` (`train_in_eval_mode`, `nondeterministic_eval`); and
  `module_training/model`, the registered model's own flag (`train_in_eval_mode`: BatchNorm
  frozen on purpose leaves the model in training mode, a forgotten `model.eval()` does not);
- `optimizer_step` (`sum` 1) at an EVAL or PREDICT step in which an optimizer of the model
  stepped: the hook follows `model.training`, so training left in `model.eval()` shows there;
- `optimizer_frozen/model` (`sum`) at TRAIN statistics steps where an optimizer stepped: how
  many frozen parameters of the models that ran the stepping optimizers hold (0: none, so no
  optimizer can move a frozen one: `frozen_layer_updated`);
- `frozen_held/<param>` (`sum`: a code) at TRAIN statistics steps, for a frozen parameter the
  stepping optimizer holds with evidence that it was meant to train (`torch_frozen`,
  `frozen_parameter_in_optimizer`); `module_training/functional`: the `training` flags of the
  functional dropout calls of a model's forward (`torch_attention`, `train_in_eval_mode`).

Data-parallel jobs (world size > 1): at *fingerprint steps* (`statistics.fingerprint_step`:
every train step of the first 20, then every 10th, the same steps on every worker whatever
each worker's cadence), every worker records `statistics.REPLICA_DEFAULTS`: the `fingerprint`
of each parameter and the `sample_fingerprints` of the model inputs, as they are before the
optimizer step. With include_workers="one" the other workers record only those, through a
`ReplicaStatistics` recorder of their own (`rank_divergence`, `duplicate_batches`). Outside
the statistics steps they are outside the budget: about one pass of 12 integer operations
over the parameters every 10th step.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Sequence

import torch
from torch import nn

from mldbg.config import Mode, SaveConfig
from mldbg.errors import InvalidConfig
from mldbg.frameworks.torch_first_layer import FIRST_LAYER_INPUT, FirstLayer, learned_layers
from mldbg.frameworks.torch_frozen import FrozenHeld
from mldbg.frameworks.torch_gradient_flow import GradientFlow
from mldbg.frameworks.torch_host import dtype_of
from mldbg.frameworks.torch_models import RegisteredModel
from mldbg.frameworks.torch_statistics import StatisticsBatch, confusion_grid
from mldbg.record.recorder import Recorder
from mldbg.store import Store
from mldbg.store import statistics as st

log = logging.getLogger("mldbg")

CLASSIFICATION_LOSSES: tuple[type[nn.Module], ...] = (
    nn.CrossEntropyLoss, nn.NLLLoss, nn.BCELoss, nn.BCEWithLogitsLoss, nn.MultiMarginLoss,
)  # fmt: skip
BUDGET = 0.005  # of the training step's time, for the statistics (k = 100 with the cap)
WARMUP = 20  # steps of each mode with statistics at every step
AFTER_SWITCH = 2  # statistics steps at the start of a mode entered again (`Cadence`)
MAX_EVERY = 100  # the sparsest cadence: the rules still see a few points per thousand steps
# what a statistics step costs beyond a plain one, in plain training steps, for planning k: on
# a CPU 0.7 on benchmarks/overhead.py's small ResNet (18 of 26.6 ms), 3.3 on tests/tiny.py's MLP; on
# a GPU the statistics are enqueued, so less (docs/statistics.md, "Statistics steps")
STATISTICS_STEP = 1.0
TARGET_STATISTICS = ("samples", "mean", "std")  # a regression loss's float labels (`add_targets`)
CONFUSION_LABELS = 1024  # the latest labels whose confusion matrix a statistics step saves
CONFUSION_STEPS = 64  # ... of at most this many steps (a few MB of matrices on the device at most)


INPUTS_SCALED = "inputs_scaled/"  # a registered model scales its own input (`scales_inputs`)


def convolves_first(model: nn.Module) -> bool:
    """Whether the first of `model`'s `learned_layers` is a convolution: its input is
    channels-first, (N, C, L) for a Conv1d, whatever a 3-axis tensor would otherwise be taken
    for."""
    layers = learned_layers(model)
    return bool(layers) and isinstance(layers[0], nn.modules.conv._ConvNd)


def scales_inputs(model: nn.Module) -> bool:
    """Whether `model` standardizes its input itself, per sample, before any learned layer: it
    holds a scaler module (Hugging Face's time-series models: `TimeSeriesMeanScaler`,
    `TimeSeriesStdScaler`, `PatchTSTStdScaler`..., whose `scaling` config is "mean" or "std" by
    default, not their `...NOPScaler`) or reversible instance normalization (`RevIN`, as
    PatchTST's and most forecasters' reference code). Such a model is meant to be fed raw
    values (a demand series in the hundreds): their scale is no input left unnormalized."""
    for module in model.modules():
        kind = type(module).__name__
        if (kind.endswith("Scaler") and "NOP" not in kind) or kind.lower().startswith("revin"):
            return True
    return False


def mode_modules(model: nn.Module) -> dict[str, list[tuple[nn.Module, list[nn.Parameter]]]]:
    """The mode-dependent modules of `model` by kind: `dropout` (Dropout with p > 0, an RNN of
    several layers with `dropout` > 0 between them) and
    `norm` (BatchNorm, InstanceNorm with running statistics), each with the parameters that
    say whether it trains: its own, else its parent's."""
    groups: dict[str, list[tuple[nn.Module, list[nn.Parameter]]]] = {"dropout": [], "norm": []}
    parents: dict[str, nn.Module] = {}
    for name, module in model.named_modules():
        for child_name, _child in module.named_children():
            parents[f"{name}.{child_name}" if name else child_name] = module
        if isinstance(module, nn.modules.dropout._DropoutNd) and getattr(module, "p", 0) > 0:
            kind = "dropout"
        elif isinstance(module, nn.RNNBase) and module.dropout > 0 and module.num_layers > 1:
            kind = "dropout"  # an LSTM's or GRU's dropout between its layers, in training mode only
        elif isinstance(module, nn.modules.batchnorm._NormBase) and module.track_running_stats:
            kind = "norm"  # BatchNorm, and InstanceNorm with running statistics
        else:
            continue
        own = list(module.parameters())
        context = own or list(parents.get(name, model).parameters())
        groups[kind].append((module, context))
    return groups


class Cadence:
    """Which steps are statistics steps: each mode's first `warmup` steps, then every k-th.

    A function of the step numbers only, set once when the hook is made: a rerun of a seeded
    script records statistics at the same steps on any machine, busy or quiet (a cadence
    measured as the run went made findings depend on the machine's load). Step s of a mode is
    a statistics step when it is one of the first `warmup` steps of that mode the hook sees, or
    when (s - warmup) is a multiple of k, counted from the mode's step 0 (a resumed run keeps
    the grid of the run it continues, after a warmup of its own).

    k: `every` when given; else from `budget`, the share of the training step's time the
    statistics may take, planned with a statistics step costing `STATISTICS_STEP` training
    steps more than a plain one (about a CPU's cost, the dearest case measured; on a GPU it is
    enqueueing, cheaper): k = ceil(STATISTICS_STEP / budget), between 1 and `max_every`.
    `budget` None or 0: every step.

    Bursts, where step-local bugs show: the first `after_switch` steps of a mode entered from
    another (the first training steps after each evaluation pass: a forgotten `model.train()`,
    a module left in eval), and the `after_switch` steps of a mode that follow an `alert` (an
    optimizer that stepped in an EVAL step: training resumed with the model in eval mode) are
    statistics steps too, at most one burst of each kind per mode every k of its steps (the
    first always): at most 2 `after_switch` / k more statistics steps. Still a function of the
    step numbers and the sequence of modes alone."""

    def __init__(
        self,
        budget: float | None = BUDGET,
        warmup: int = WARMUP,
        max_every: int = MAX_EVERY,
        every: int | None = None,
        after_switch: int = AFTER_SWITCH,
    ):
        if budget is not None and not (
            isinstance(budget, (int, float)) and not isinstance(budget, bool) and budget >= 0
        ):
            raise InvalidConfig(
                f"statistics_budget must be a fraction >= 0 of the step time or None, got {budget!r}"
            )
        if not (isinstance(warmup, int) and warmup >= 0):
            raise InvalidConfig(f"statistics_warmup must be a number of steps >= 0, got {warmup!r}")
        if every is not None and not (isinstance(every, int) and every >= 1):
            raise InvalidConfig(f"statistics_every must be a number of steps >= 1 or None, got {every!r}")
        self.warmup = warmup
        if every is not None:
            self.k = every
        elif not budget:
            self.k = 1
        else:
            self.k = min(max(1, max_every), max(1, math.ceil(STATISTICS_STEP / budget)))
        self.after_switch = max(0, int(after_switch))
        self._first: dict[Mode, int] = {}  # the first mode step of each mode the hook saw
        self._last: Mode | None = None  # the mode of the last step asked about
        # (mode, "switch" or "alert") -> the first mode step of the last such burst of the mode
        self._bursts: dict[tuple[Mode, str], int] = {}

    def due(self, mode: Mode, mode_step: int) -> bool:
        """Is this step of `mode` a statistics step? (Asked once per step, in step order: a
        change of mode since the last step asked about opens a burst.)"""
        first = self._first.setdefault(mode, mode_step)
        if self._last is not None and mode != self._last:
            self._open_burst(mode, mode_step, "switch")
        self._last = mode
        return self._regular(mode_step, first) or self._in_burst(mode, mode_step)

    def peek(self, mode: Mode, mode_step: int) -> bool:
        """Would `due(mode, mode_step)`, asked next, say yes? (Nothing changes: a trainer that
        compiled the model itself asks before the step opens, `torch_compiled`.)"""
        if self._regular(mode_step, self._first.get(mode, mode_step)):
            return True
        if self._last is not None and mode != self._last and self.k != 1 and self.after_switch:
            last = self._bursts.get((mode, "switch"))
            if last is None or mode_step - last >= self.k:
                return True  # a burst would open at this step
        return self._in_burst(mode, mode_step)

    def alert(self, mode: Mode, mode_step: int) -> None:
        """Something a rule needs seen at once happened at this step of `mode` (an optimizer
        stepped in an EVAL step): the next `after_switch` steps of the mode are statistics steps."""
        self._open_burst(mode, mode_step + 1, "alert")

    def _regular(self, mode_step: int, first: int) -> bool:
        return mode_step - first < self.warmup or (mode_step - self.warmup) % self.k == 0

    def _open_burst(self, mode: Mode, mode_step: int, why: str) -> None:
        if self.k == 1 or not self.after_switch:
            return
        last = self._bursts.get((mode, why))
        if last is None or mode_step - last >= self.k:
            self._bursts[(mode, why)] = mode_step

    def _in_burst(self, mode: Mode, mode_step: int) -> bool:
        for why in ("switch", "alert"):
            start = self._bursts.get((mode, why))
            if start is not None and 0 <= mode_step - start < self.after_switch:
                return True
        return False

    def every(self, mode: Mode) -> int:
        """The k of `mode` after its warmup (1 before it, and before its first step)."""
        first = self._first.get(mode)
        return 1 if first is None else self.k

    def steps(self, mode_steps: int, first: int = 0, switches: Sequence[int] = ()) -> list[int]:
        """The statistics steps among mode steps `first` .. `mode_steps - 1` of a mode whose
        first step under the hook is `first` and which was entered again from another mode at
        its steps `switches` (after each evaluation pass): what a run records, known before it
        runs."""
        plan = Cadence(every=self.k, warmup=self.warmup, after_switch=self.after_switch)
        entered = set(switches)
        found = []
        for s in range(first, mode_steps):
            if s in entered:
                plan._open_burst(Mode.TRAIN, s, "switch")
            if plan._regular(s, first) or plan._in_burst(Mode.TRAIN, s):
                found.append(s)
        return found


class StepStatistics:
    """One step's statistics requests, handed to the recorder at `finish()`.

    With a `cadence`, only statistics steps (`due()`) carry them; without one (the
    `ReductionConfig` reductions), every step asked. The host time of the `add` calls and of
    `finish()` is told to `on_spent` (the profiler's timeline), never used to choose steps."""

    def __init__(
        self,
        recorder: Recorder,
        cadence: Cadence | None = None,
        clock: Callable[[], float] = time.perf_counter,
        on_spent: Callable[[float], None] | None = None,
        world_size: int = 1,
    ):
        """`on_spent(seconds)`: told each time statistics took time on the training thread
        (the profiler's timeline keeps it apart from the training's own step time).
        `world_size` > 1: a data-parallel job, with fingerprints at the fingerprint steps."""
        self.recorder = recorder
        self.replicated = world_size > 1
        # a registered model's prefix -> its mode-dependent modules, by kind (`mode_modules`)
        self._modules: dict[str, list[tuple[str, list[tuple[nn.Module, list[nn.Parameter]]]]]] = {}
        # this statistics step's modes of the modules whose model ran a forward in it:
        # kind -> module id -> `training` (the first forward's), and the model's own flag
        self._mode_flags: dict[str, dict[int, bool]] = {}
        self._root_flag: bool | None = None
        self._scaling: set[str] = set()  # the prefixes of the registered models that scale their inputs
        # the prefixes of the registered models whose first learned layer is a convolution: their
        # 3-axis inputs are (N, C, L), channels first, not a sequence's (N, T, F)
        self._channels_first: set[str] = set()
        self._thawed: set[str] = (
            set()
        )  # parameters that required a gradient at a TRAIN step since the last statistics step
        self._on_spent = on_spent
        self._names: dict[int, frozenset[str]] = {}  # `_param_names`
        self.cadence = cadence
        self.batch = StatisticsBatch()
        self._clock = clock
        self._tensors: dict[str, tuple[str, tuple[int, ...], tuple[str, ...]]] = {}
        self._classes = False
        self._nbytes = 0
        self._failed = False
        self._step = -1  # the step `_due` was decided for
        self._due = False
        self._flow = GradientFlow()
        # what the first learned layer of each model sees of its input (torch_first_layer)
        self._first = FirstLayer(self._first_layer_saw)
        self._frozen = FrozenHeld()  # frozen parameters an optimizer holds (torch_frozen)
        self._held: set[int] | None = None  # the stepping optimizers' parameters (`optimizer_holds`)
        self._idle: set[int] = set()  # ... of those that stepped with every parameter frozen
        self._step_params: dict[int, list[tuple[str, nn.Parameter, tuple[str, ...]]]] = {}  # forwarded
        # parameters whose gradients are recorded elsewhere (DeepSpeed ZeRO: the reduced partitions
        # at its optimizer's step, `torch_deepspeed`), not from their `.grad` at the end of backward
        self.gradients_elsewhere: set[int] = set()
        # (mode, labels' name) -> the confusion matrix of its steps since its last statistics step
        self._confusion: dict[tuple[Mode, str], deque[tuple[torch.Tensor, int]]] = {}
        self._confused_at: tuple[int, str] | None = None  # the step and labels last counted
        recorder.before_step_end.append(self._step_end)  # before `finish`: it hands over what this adds
        recorder.before_step_end.append(self.finish)

    def _step_end(self) -> None:
        """`gradient_cut/<name>` of the stepping optimizers' parameters whose gradient was cut
        in this step (`GradientFlow`), judged when the step ends: a trainer may run the
        forward and backward inside `optimizer.step(closure)` (Lightning), after its hooks.
        And the modes of the modules that ran (`module_training/<kind>`, `/model`)."""
        flags, root, self._mode_flags, self._root_flag = self._mode_flags, self._root_flag, {}, None
        for kind, of_modules in flags.items():
            if of_modules:
                tensor = torch.tensor(list(of_modules.values()), dtype=torch.uint8)
                self.add_kinds(f"module_training/{kind}", tensor, ("sum", "count"), ())
        if root is not None:
            self.add_kinds(
                "module_training/model", torch.tensor([root], dtype=torch.uint8), ("sum", "count"), ()
            )
        held, self._held = self._held, None
        idle, self._idle = self._idle, set()
        if held is not None and self._step_params:  # frozen_layer_updated
            frozen = sum(
                1
                for ps in self._step_params.values()
                for _, p, _ in ps
                if not p.requires_grad and id(p) in held
            )
            self.add_kinds("optimizer_frozen/model", torch.tensor([frozen], dtype=torch.int32), ("sum",), ())
        for params in self._step_params.values() if held is not None else ():
            pairs = [(name, p) for name, p, _ in params]
            for name, code in self._flow.cut(pairs, held) if self._flow.attached else ():
                flag = torch.tensor([code], dtype=torch.uint8)
                self.add_kinds(f"gradient_cut/{name}", flag, ("sum",), ())
            for name, code in self._frozen.judge(pairs, held or set(), idle):  # frozen_parameter_in_optimizer
                self.add_kinds(f"frozen_held/{name}", torch.tensor([code], dtype=torch.uint8), ("sum",), ())
        self._step_params.clear()
        self._flow.detach()
        self._first.detach()

    def due(self) -> bool:
        """Is the open step a statistics step? (Decided once per step: hooks ask it often.)"""
        rec = self.recorder
        if rec.step != self._step:
            if not rec.in_step:
                return False
            self._step = rec.step
            self._due = self.cadence is None or self.cadence.due(rec.mode, rec.mode_step)
        return self._due

    def fingerprints_due(self) -> bool:
        """Is the open step a fingerprint step of a data-parallel job (the same on every worker)?"""
        rec = self.recorder
        return (
            self.replicated and rec.in_step and rec.mode == Mode.TRAIN and st.fingerprint_step(rec.mode_step)
        )

    # what the hook hands over, at each point of a step -----------------------------------------
    def watch_modules(self, model: nn.Module, gradients: bool = True, prefix: str = "") -> None:
        """Keep the mode-dependent modules of `model` (`mode_modules`), whether it scales its
        own input (`scales_inputs`: `inputs_scaled/<prefix>model` at statistics steps) and,
        unless not `gradients` (a compiled model: hooks on its layers would break its graph),
        where its parameters' gradients are cut (`GradientFlow`) and what its first learned
        layer sees of its input (`FirstLayer`)."""
        self._modules[prefix] = [(kind, members) for kind, members in mode_modules(model).items() if members]
        if scales_inputs(model):
            self._scaling.add(prefix)
        if convolves_first(model):
            self._channels_first.add(prefix)
        self._frozen.watch(model)
        if gradients:
            self._flow.watch(model)
            self._first.watch(model, prefix)

    def forward_start(
        self,
        params: list[tuple[str, nn.Parameter, tuple[str, ...]]],
        args: tuple[object, ...],
        prefix: str = "",
        root_training: bool | None = None,
    ) -> None:
        """A registered model's forward begins: its parameters (TRAIN), inputs, modules' modes
        (`prefix`: the model's name prefix, for the second and later models of a hook;
        `root_training`: the model's own `training` flag, `module_training/model`)."""
        full, fp = self.due(), self.fingerprints_due()
        train = self.recorder.mode == Mode.TRAIN
        if train and not full and not self._param_names(params) <= self._thawed:
            # a few attribute reads: `requires_grad` says "frozen throughout" (none once all are in)
            for name, p, _ in params:
                if p.requires_grad:
                    self._thawed.add(name)
        if not (full or fp):
            return
        if train:
            if full:
                self._flow.attach()  # taken off at the step's end
                self._step_params[id(params)] = params
            thawed, self._thawed = (self._thawed, set()) if full else (self._thawed, self._thawed)
            for name, p, natural in params:
                kinds = st.DEFAULTS[natural[0]] if full else ()
                kinds = (kinds + st.REPLICA_DEFAULTS[natural[0]]) if fp else kinds
                self.add_kinds(name, p, kinds, natural, p.requires_grad or name in thawed)
        self.forward_inputs(args, prefix)
        if full and prefix in self._scaling:
            self.add_kinds(f"{INPUTS_SCALED}{prefix}model", torch.ones(1, dtype=torch.uint8), ("sum",), ())
        if full:
            # the modules of the model that runs, gathered over the step's forwards (a GAN's
            # two models); a model registered once and no longer run (replaced by a rebuilt
            # one when a run resumes from its checkpoint) is not judged by its stale modes
            self._gather_modes(prefix, root_training)

    def _gather_modes(self, prefix: str, root_training: bool | None) -> None:
        """Keep the modes of the mode-dependent modules of the model of `prefix` for this step
        (`module_training/<kind>`), and its own flag `root_training` (`/model`)."""
        judged = False
        for kind, members in self._modules.get(prefix, ()):
            flags = self._mode_flags.setdefault(kind, {})
            for m, ctx in members:
                # a module whose parameters (or its parent's) are all frozen may sit in eval
                # mode on purpose (a frozen backbone, a linear probe): it is left out
                if any(p.requires_grad for p in ctx):
                    judged = True
                    flags.setdefault(id(m), m.training)
        if judged and root_training is not None and self._root_flag is None:
            # the model's own flag: a forgotten model.eval() turns it off, a part frozen on
            # purpose (BatchNorm statistics in QAT, a detector's frozen BN) leaves it on
            self._root_flag = root_training

    def forward_inputs(self, args: tuple[object, ...], prefix: str = "") -> None:
        """The inputs of a registered model's recorded forward (`model_input_<i>`), at a
        statistics or fingerprint step."""
        full, fp = self.due(), self.fingerprints_due()
        if not (full or fp):
            return
        kinds = st.DEFAULTS["inputs"] if full else st.REPLICA_DEFAULTS["inputs"]
        for i, a in enumerate(args):
            conv = prefix in self._channels_first and isinstance(a, torch.Tensor) and a.dim() == 3
            self.add_kinds(f"{prefix}model_input_{i}", a, kinds, ("inputs",), unit_axis=1 if conv else None)
        if full and self.recorder.mode == Mode.TRAIN:
            self._first.attach(prefix, args)  # taken off at the step's end

    def _first_layer_saw(self, prefix: str, x: torch.Tensor | None) -> None:
        """The first learned layer of the model of `prefix` saw `x`, not its input as it came
        (`FirstLayer`); None: a BatchNorm, which standardizes it itself."""
        if x is None:
            self.add_kinds(f"{INPUTS_SCALED}{prefix}model", torch.ones(1, dtype=torch.uint8), ("sum",), ())
        else:
            kinds = ("channel_count", "channel_mean", "channel_std", "samples")
            self.add_kinds(f"{FIRST_LAYER_INPUT}{prefix}model", x.detach(), kinds, ())

    def _param_names(self, params: list[tuple[str, nn.Parameter, tuple[str, ...]]]) -> frozenset[str]:
        """The names of a model's `params` (the hook's list of them, which lives as long as it)."""
        names = self._names.get(id(params))
        if names is None:
            names = self._names[id(params)] = frozenset(name for name, _, _ in params)
        return names

    def forward_end(self, output: object, prefix: str = "") -> None:
        """A registered model's forward ended: its outputs (and their fingerprint in EVAL)."""
        if not self.due():
            return
        kinds = st.DEFAULTS["outputs"]
        if self.recorder.mode != Mode.TRAIN:
            kinds = kinds + st.EVAL_DEFAULTS["outputs"]
        outs = output if isinstance(output, (tuple, list)) else (output,)
        for i, o in enumerate(outs):
            self.add_kinds(f"{prefix}model_output_{i}", o, kinds, ("outputs",), versioned=True)

    def loss(self, prefix: str, args: tuple[object, ...], classes: bool) -> None:
        """A registered loss was computed: class statistics of a classification loss, else the
        `samples` (and so the shapes) of its predictions and labels."""
        if len(args) < 2:
            return
        if classes:
            self.confusion(prefix, args[0], args[1])
        if not self.due():
            return
        if classes:
            self.add_classes(prefix, args[0], args[1])
        else:
            self.add_targets(prefix, args[0], args[1])

    def add_targets(self, loss: str, predictions: object, labels: object) -> None:
        """The `samples` of a loss's predictions and labels (their shapes: `batch_dim_mismatch`),
        and of float labels (a regression's targets) their `mean` and `std`: whether the
        targets move (a TD target made by the model itself grows with its values), which
        `mldbg.rules.select.moving_targets` reads."""
        self.add_kinds(f"{loss}_input_0", predictions, ("samples",), ("predictions",))
        floats = isinstance(labels, torch.Tensor) and labels.is_floating_point()
        self.add_kinds(f"{loss}_input_1", labels, TARGET_STATISTICS if floats else ("samples",), ("labels",))

    def confusion(self, loss: str, predictions: object, labels: object) -> None:
        """Every step's labels of a classification loss, not only the statistics steps': the
        confusion matrix of each step is made where they live (an argmax and a `scatter_add_`,
        no wait for the device) and those of the latest steps since the mode's last statistics
        step, up to `CONFUSION_LABELS` labels (at most `CONFUSION_STEPS` steps), are saved at
        its next one, summed, as `confusion_steps` of `<loss>_input_1` (`label_confusion`
        reads it: label noise shows in hundreds of labels, not in the few of one step; the
        latest ones, since the model's errors of a hundred steps ago are not its errors
        now). At most once per step and loss."""
        rec = self.recorder
        name = f"{loss}_input_1"
        if not rec.in_step or self._confused_at == (rec.step, name):
            return
        if not (isinstance(predictions, torch.Tensor) and isinstance(labels, torch.Tensor)):
            return
        self._confused_at = (rec.step, name)
        try:
            grid = confusion_grid(labels, predictions)
        except Exception:  # statistics must never stop training
            grid = None
        if grid is None:
            return
        key = (rec.mode, name)
        held = self._confusion.setdefault(key, deque())
        if held and (held[-1][0].shape != grid.shape or held[-1][0].device != grid.device):
            held.clear()
        held.append((grid, labels.numel()))
        while len(held) > CONFUSION_STEPS or sum(n for _, n in held) - held[0][1] >= CONFUSION_LABELS:
            held.popleft()
        if self.due():
            del self._confusion[key]
            total = held[0][0] if len(held) == 1 else torch.stack([g for g, _ in held]).sum(0)
            self.batch.add_vector(name, "confusion_steps", total)
            self._nbytes += 4 * total.numel()

    def before_optimizer(self, params: list[tuple[str, nn.Parameter, tuple[str, ...]]]) -> None:
        """The gradients are complete and the optimizer is about to change the weights in
        place: hand over the gradients (statistics steps), then the step's work (now)."""
        if self.due():
            for name, p, _ in params:
                if p.grad is not None and p.requires_grad:  # a frozen one's .grad is stale
                    self.add(f"gradient/{name}", p.grad, "gradients")
        self.finish()

    def before_models_step(self, models: Sequence[RegisteredModel]) -> None:
        """`before_optimizer` for every parameter of `models` (no list made at plain steps)."""
        if self.due():
            elsewhere = self.gradients_elsewhere
            for m in models:
                for name, p, _ in m.step_params:  # a stray part's step: only its own (`Hook._stray_parts`)
                    if p.grad is not None and p.requires_grad and id(p) not in elsewhere:
                        self.add(m.grad_name(name), p.grad, "gradients")  # a frozen one's .grad is stale
        self.finish()

    def optimizer_holds(self, held: set[int], idle: bool = False) -> None:
        """The ids of the parameters of an optimizer about to step in this statistics step:
        those of them whose gradient was cut are recorded at the step's end (`_step_end`);
        `idle`: every one of them is frozen as it steps (`torch_frozen.IDLE`)."""
        self._held = held if self._held is None else self._held | held
        if idle:  # its every parameter frozen as it stepped: the step changes nothing
            self._idle |= held

    def optimizer_outside_train(self, models: Sequence[tuple[str, bool]] = ()) -> None:
        """An optimizer of the model stepped in an EVAL or PREDICT step (the model was left in
        eval mode while training); `models`: (prefix, `training` flag) of the models it
        updates, whose modules' modes are kept for the step as a forward's are (an encoder's
        BatchNorm is trained through the decoder's step, whose forward opened it)."""
        if self.due():
            self.add_kinds("optimizer_step", torch.ones(1, dtype=torch.uint8), ("sum",), ())
            for prefix, training in models:
                self._gather_modes(prefix, training)
        elif self.cadence is not None:  # the next steps of the mode show it (train_in_eval_mode)
            self.cadence.alert(self.recorder.mode, self.recorder.mode_step)

    def close(self) -> None:
        """Nothing of its own to close (a replica's recorder has)."""

    def add(self, name: str, tensor: object, collection: str) -> None:
        """Ask for the `DEFAULTS` statistics of `collection` of a tensor (its first value in
        the step)."""
        self.add_kinds(name, tensor, st.DEFAULTS[collection], (collection,))

    def add_kinds(
        self,
        name: str,
        tensor: object,
        kinds: tuple[str, ...],
        natural: tuple[str, ...],
        requires_grad: bool | None = None,
        versioned: bool = False,
        unit_axis: int | None = None,
    ) -> None:
        """Ask for statistics `kinds` of a tensor of the natural collections `natural`
        (`requires_grad`: the flag its `requires_grad` statistic records, if not its own;
        `versioned`: left out if the script writes it in place before the statistics are
        computed, `StatisticsBatch.add`; `unit_axis`: the channel axis of its per-channel
        statistics where `statistics.feature_axis`'s guess is wrong)."""
        if not kinds or name in self._tensors or not _usable(tensor):
            return
        assert isinstance(tensor, torch.Tensor)
        start = self._clock()
        self.batch.add(
            name, tensor, kinds, requires_grad=requires_grad, versioned=versioned, unit_axis=unit_axis
        )
        self._tensors[name] = (dtype_of(tensor), tuple(tensor.shape), natural)
        self._nbytes += 16 * len(kinds) + _vector_bytes(tensor, kinds)
        self._took(start)

    def add_known(
        self,
        name: str,
        values: dict[str, st.Value],
        described: tuple[str, tuple[int, ...], tuple[str, ...]],
    ) -> None:
        """Statistics of a tensor computed elsewhere (merged across the ranks: a DeepSpeed ZeRO
        partition's, `torch_deepspeed`), recorded with the step's others; `described`: its
        (dtype, global shape, natural collections). A tensor already handed over is left as is."""
        if not values or name in self._tensors:
            return
        self.batch.add_values(name, values)
        self._tensors[name] = described
        self._nbytes += 16 * len(values)

    def add_classes(self, loss: str, predictions: object, labels: object) -> None:
        """Class statistics of a classification loss's labels and predictions; both are
        records of their collections (`labels`, `predictions`) so rules find them by it."""
        if not (_usable(predictions) and _usable(labels)):
            return
        assert isinstance(predictions, torch.Tensor) and isinstance(labels, torch.Tensor)
        if predictions.device != labels.device:
            return
        start = self._clock()
        self.batch.add_classes(f"{loss}_input_1", labels, f"{loss}_input_0", predictions)
        self._classes = True
        c = predictions.shape[1] if predictions.dim() > 1 else 2
        self._nbytes += 8 * (c + 1) * 3 + 4 * min(c, st.MAX_CONFUSION_CLASSES) ** 2
        self._took(start)
        # per-label targets (a binary cross-entropy's 0/1 or soft targets, of the predictions'
        # shape): each label's positive rate (`channel_mean` of the labels) and the mean score
        # the model gives it, which `loss_at_base_rates` weighs the loss against
        rates = labels.is_floating_point() and labels.shape == predictions.shape
        per_label = ("channel_mean", "channel_count") if rates else ()
        self.add_kinds(f"{loss}_input_1", labels, ("samples", *per_label), ("labels",))
        self.add_kinds(f"{loss}_input_0", predictions, ("samples", *per_label), ("predictions",))

    def finish(self) -> None:
        """Enqueue the step's work and hand it to the recorder (no wait for the device)."""
        if not self._tensors and not self._classes:
            return
        start = self._clock()
        tensors, nbytes = self._tensors, self._nbytes
        self._tensors, self._classes, self._nbytes = {}, False, 0
        try:
            pending = self.batch.finish()
        except Exception as e:  # statistics must never stop training
            if not self._failed:
                self._failed = True
                log.error("mldbg: statistics of step %d failed: %s", self.recorder.step, e)
            return
        self.recorder.save_statistics(pending, tensors, nbytes)
        self._took(start)

    def _took(self, start: float) -> None:
        if self._on_spent is not None:
            self._on_spent(self._clock() - start)


class _ReplicaRecorder(Recorder):
    """The recorder of a worker that include_workers="one" leaves out, for its fingerprints
    only. Its steps follow the worker's own recorder; stop requests are that one's to act on."""

    def _check_stop(self) -> None:
        return


class ReplicaStatistics(StepStatistics):
    """A data-parallel worker other than 0, under include_workers="one": it records only
    `statistics.REPLICA_DEFAULTS` at the fingerprint steps (what `rank_divergence` and
    `duplicate_batches` compare across workers), as its own worker of the run."""

    def __init__(self, main: Recorder, store: Store, rank: int, world_size: int, framework: str):
        side = _ReplicaRecorder(
            store,
            save_config=SaveConfig(save_steps=()),
            include_workers="all",
            rank=rank,
            world_size=world_size,
            framework=framework,
        )
        super().__init__(side, None, world_size=world_size)
        self.main = main
        main.before_step_end.append(self._main_step_end)

    def due(self) -> bool:
        return False  # the statistics of the default rules are worker 0's

    def fingerprints_due(self) -> bool:
        main, side = self.main, self.recorder
        if not main.in_step or main.mode != Mode.TRAIN or not st.fingerprint_step(main.mode_step):
            return False
        if not (side.in_step and side.step == main.step):
            if side.in_step:
                side.end_step()
            side.step = main.step
            side.start_step(main.mode, mode_step=main.mode_step)
        return True

    def _main_step_end(self) -> None:
        if self.recorder.in_step:
            self.recorder.end_step()

    def close(self) -> None:
        self.recorder.close()


def _usable(value: object) -> bool:
    return isinstance(value, torch.Tensor) and not value.is_complex() and not value.is_sparse


@functools.lru_cache(maxsize=64)
def _vectors(kinds: tuple[str, ...]) -> int:
    return sum(1 for k in kinds if st.Statistic.parse(k).is_vector)


def _vector_bytes(tensor: torch.Tensor, kinds: tuple[str, ...]) -> int:
    """About what the vector statistics of `tensor` take (8 bytes a unit each)."""
    vectors = _vectors(kinds)
    if not vectors:
        return 0
    axis = st.feature_axis(tensor.dim())
    return 8 * vectors * (1 if axis is None else int(tensor.shape[axis]))
