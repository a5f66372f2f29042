"""The loss where a PyTorch script computes it: the `LossCapture` of `mldbg.torch.Hook`.

Without `register_loss` (which wins: with it, none of this records), the hook records each
step's loss as `loss` in `losses`, where every loss rule and the report's loss chart read it:

- the loss a registered model returns from its forward: a tuple holding one scalar floating
  tensor (nanoGPT's `logits, loss = model(x, y)`), a mapping's `"loss"`, an object's `.loss`
  (Hugging Face's `ModelOutput`), in TRAIN and in EVAL steps;
- else, in a TRAIN step, the tensor given to backward (`loss.backward()`,
  `torch.autograd.backward(loss)`): whatever computed it (`F.nll_loss`, `F.cross_entropy`, a
  sum of terms). A `GradScaler`'s scaled loss (`scaler.scale(loss).backward()`) is divided
  back by its scale. Only while a TRAIN step of a registered model is open, after one of its
  models ran its forward in that step (or, for a model trained without a forward of its own,
  in the step its optimizer opens: `unopened`), and only a one-element floating tensor;
- else, in an EVAL step, the first loss function called on what the registered model's
  output made (`F.nll_loss(output, target, reduction="sum")` in a `test()` under no_grad):
  `torch_eval_loss`, as its mean.
A TRAIN step's backward decides between the two where the loss was picked from a tuple (a
model's `"loss"` or `.loss` is its loss, whatever the script adds to it for training): the
returned scalar is the loss when the tensor given to backward is made from it by scalings alone (`loss / accumulation`, a
GradScaler's `* scale`); when it is something else (TabNet's or an MoE's `logits, aux =
model(x)` with `F.cross_entropy(logits, y) + 1e-3 * aux` given to backward), the returned
scalar is a term of the loss: the tensor given to backward is recorded, and from then on an
evaluation's returned scalar is not taken for its loss.
Several in one step: their mean when they train the same parameters (gradient accumulation:
micro-batches of one loss). Backward passes of one step that reach different parameters (a
GAN: the discriminator's loss, then the generator's, which also runs through the
discriminator) are different losses, each its own series: the first keeps `loss`, the others
are `loss/backward1`, `loss/backward2`, ... (in the order the run first gives them). So are
the single passes of steps that update different models of one hook (GAIL: blocks of
discriminator updates, then blocks of the policy's, each step one pass). What a
pass reaches is read from its autograd graph (the registered models' top-level submodules
whose parameters it accumulates into; any parameter outside them counts as one more part),
its nodes walked as the step ends: in a step of several passes, until 16 such steps
showed one loss (then never again), in every step of a run found to give different
losses, and in a step of one pass whose set of forwarding models differs from the last such
step's (a few microseconds per hundred nodes). A run of one model and one backward pass a
step is never walked. Each value stays on its device:
no wait for it, no change to the graph or the gradients (the tensor is only read, detached).

Seeing backward's tensor needs one process-wide wrapper around `torch.autograd.backward`
(which `Tensor.backward` calls): no hook on the model can see the root of a backward pass, its
graph links only towards the inputs. The wrapper is put in place at the first
`register_module` and hands the tensor to the open hooks only; it costs one Python call per
backward pass (about a microsecond) and changes nothing else. It takes itself out when no hook
listens and nothing has wrapped it since.

Predictions and labels: a loss whose autograd node saved them (`F.cross_entropy`,
`F.nll_loss`, `nn.CrossEntropyLoss` inside the model: the log-probabilities and targets; the
binary cross-entropies; MSE, L1-smooth, Huber), found from the loss through scalings and sums
(an auxiliary term added: the one classification loss of the sum, else its one regression
loss; none when a sum holds two of a kind; a cross-entropy written in plain torch ops,
`torch_lm.written_cross_entropy`), gives them at statistics steps as
`loss_input_0` (`predictions`) and `loss_input_1` (`labels`): class statistics for the
classification losses, their `samples` for the others (and a float target's `mean` and `std`), as a registered loss's inputs. An
evaluation's, under no_grad, from the loss call `torch_eval_loss` finds (`_record_inputs`).
A loss a model returned with no node to read them from (a compiled model's graph is one
node; under no_grad there is none): the class labels of its call (`labels=`, `targets=`, or
one integer 1-D argument after the first, read at every recorded forward: a few lookups)
with the (N, C) logits it returned (`class_labels`, `class_scores`).
"""

from __future__ import annotations

import gc
import logging
import threading
import weakref
from typing import TYPE_CHECKING, Any

import torch

from mldbg.config import Mode
from mldbg.frameworks import torch_lm
from mldbg.frameworks.torch_eval_loss import EvalLoss
from mldbg.frameworks.torch_modes import depth
from mldbg.profiler import timeline as marks

if TYPE_CHECKING:
    from mldbg.frameworks.torch import Hook

log = logging.getLogger("mldbg")

NAME = "loss"  # in `losses`, as the Lightning and Hugging Face callbacks record theirs
PREFIX = "loss"  # its predictions and labels: `loss_input_0`, `loss_input_1`
CLASS_NODES = frozenset(
    {
        "NllLossBackward0",
        "NllLoss2DBackward0",
        "BinaryCrossEntropyBackward0",
        "BinaryCrossEntropyWithLogitsBackward0",
    }
)
SAMPLE_NODES = frozenset({"MseLossBackward0", "SmoothL1LossBackward0", "HuberLossBackward0"})
# what a loss may go through between the model's return and backward, and stay that loss
SCALINGS = frozenset(
    {"MulBackward0", "MulBackward1", "DivBackward0", "DivBackward1", "MeanBackward0", "SumBackward0",
     "ToCopyBackward0", "ViewBackward0", "ReshapeAliasBackward0"}
)  # fmt: skip
PROBE_STEPS = 16  # steps whose backward passes are told apart by what they reach, before deciding
MAX_NODES = 100_000  # autograd nodes walked at most to tell what a backward pass reaches
OTHER = "?"  # the parts a pass reaches outside the registered models
MAX_SCANS = 4  # searches for GradScalers per hook (a scaler keeps its scale tensor for the run)


class LossCapture:
    """One hook's loss where the script computes it; `off` once `register_loss` is used."""

    def __init__(self, hook: Hook) -> None:
        self.hook = hook
        self.off = False
        self.counts_only = False  # listening to backward for the language-model counts only
        # with `register_loss` alone: the last TRAIN step whose registered loss ran (-1: none
        # yet); a step that trains without it records the loss given to backward (`uncovered`)
        self.registered_at: int | None = None
        self.stepped_at = -1  # the last TRAIN step an optimizer of a registered model stepped in
        self._told_uncovered = False
        self._returned: list[torch.Tensor] = []  # the registered models' returned losses, this step
        self._returned_nodes: list[Any] = []  # their autograd nodes (TRAIN: is one given to backward?)
        # is the scalar a model returns what the script trains on? None: not yet seen; False once a
        # TRAIN step gave backward something else (`F.cross_entropy(logits, y) + 1e-3 * aux` where
        # the model returns `(logits, aux)`): then the tensors given to backward are the loss, and
        # an evaluation's returned scalar is not recorded as its loss
        self._returned_is_loss: bool | None = None
        self._aside = False  # this step gave backward a tensor other than the returned losses
        self._named = False  # a returned loss of this step was named so (`"loss"`, `.loss`)
        # the tensors given to backward this step, detached, with their graphs' roots (None once
        # the run is known to give one loss): what each pass reached is read as the step ends
        self._backward: list[tuple[Any, torch.Tensor]] = []
        self._split: bool | None = None  # backward passes of different losses? (None: not yet known)
        self._probed = 0  # steps of several backward passes that were told apart
        self._series: dict[frozenset[str], str] = {}  # what a pass reaches -> its series' name
        # the registered models (ids) that ran a forward in the last step of one pass that was
        # walked, and what its pass reached: a step of one pass is walked when they change
        self._alone: tuple[frozenset[int], frozenset[str] | None] | None = None
        self._parts: dict[int, str] = {}  # id of a registered parameter -> its model's part
        self._parts_of = (0, 0)  # the registered parameters `_parts` maps: the list's id, its length
        self._classes_at = -1  # the step whose predictions and labels are recorded
        self._scalers: dict[int, bool] = {}  # data_ptr of a scale factor: a GradScaler's scale?
        self._ids: torch.Tensor | None = (
            None  # the token ids of the step's first model call (statistics steps)
        )
        self._ids_at = -1  # the step they belong to
        self._targets: torch.Tensor | None = None  # the targets of that call (`torch_lm.targets_of`)
        self._labels: torch.Tensor | None = None  # the class labels of the step's first call (`class_labels`)
        self._labels_at = -1
        self._sequences: torch.Tensor | None = None  # that call's (batch, length) `labels=` (`_per_position`)
        self._lm_at = -1  # the step whose language-model statistics are recorded
        self._probe = torch_lm.Probe()  # when the causal probe runs (TRAIN statistics steps)
        # an evaluation's loss computed by a function or written out (torch_eval_loss)
        self._eval = EvalLoss(self._record_inputs)
        self._depths: dict[int, int] = {}  # id(model) -> torch function modes as its forward began
        # the last loss given to backward while no step was open, with the recorder's step
        # then and whether each model's gradients were reset before (by id: `Hook._resets_now`,
        # over every such pass since the step): a model trained without its forward (`unopened`)
        self._unopened: tuple[int, torch.Tensor, dict[int, Any]] | None = None

    def open(self) -> None:
        """The run is open: the step's loss is saved as the step ends; listen to backward."""
        ends = self.hook.recorder.before_step_end
        ends.insert(0, self._eval.close)  # before the hook's own work on the step's tensors
        ends.append(self._step_end)
        _listen(self)

    def listen_for_counts(self) -> None:
        """A trainer's callback records its loop's loss (`off`): listen to backward only for the
        language-model counts of a loss computed outside the model (a Hugging Face
        `compute_loss` of the user's, a LightningModule's `training_step`) and the
        predictions and labels its autograd node saved (`saved_inputs`: class statistics, a
        regression's targets), not for the loss nor the gradients' reset."""
        self.counts_only = True
        _listen(self)

    def close(self) -> None:
        """Stop listening (the open step's loss is still saved as the run closes it)."""
        _unlisten(self)
        self._eval.close()

    # where the loss shows ---------------------------------------------------------------
    def tokens(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], model: Any = None, again: bool = False
    ) -> None:
        """A registered model's recorded call in the step: its token ids, at a statistics step
        (what the language-model statistics align the targets with; `again`: its first call
        with gradients after ones without, whose ids it replaces). Also when `off`: the
        trainer callbacks and `register_loss` hand their loss to `language_model`."""
        stats = self.hook._stats
        rec = self.hook.recorder
        if stats is not None and (self._labels_at != rec.step or again):  # every step: a few lookups
            self._labels_at = rec.step
            self._labels = class_labels(args, kwargs)
            self._sequences = sequence_labels(kwargs)
        if stats is None or (self._ids_at == rec.step and not again) or not stats.due():
            return
        self._ids_at = rec.step
        self._ids = torch_lm.token_ids(args, kwargs, model)
        self._targets = torch_lm.targets_of(args, kwargs, self._ids)

    def language_model(self, loss: Any, output: Any = None) -> None:
        """At a statistics step, the language-model statistics (`torch_lm`) of the step's
        first cross-entropy, as records `lm/<key>`; once per step, before its backward. A
        loss the model returned (its forward's `output`) whose cross-entropy the graph does
        not show (a compiled model): from its logits and the targets of its call."""
        stats = self.hook._stats
        rec = self.hook.recorder
        if stats is None or self._lm_at == rec.step or not stats.due() or not isinstance(loss, torch.Tensor):
            return
        if torch.compiler.is_compiling():
            return  # a callback's hook traced into a compiled model (its tensors are not values)
        ids = self._ids if self._ids_at == rec.step else None
        try:
            found = torch_lm.statistics(loss, ids, self._probe if rec.mode == Mode.TRAIN else None)
            train = rec.mode == Mode.TRAIN  # what the language-model rules judge
            if (
                found is None
                and train
                and output is not None
                and ids is not None
                and self._targets is not None
            ):
                logits = torch_lm.logits_of(output, ids)
                if logits is not None:
                    found = torch_lm.returned_statistics(loss, logits, self._targets, ids)
        except Exception as e:  # statistics must never stop training
            self._lm_at = rec.step
            log.warning("mldbg: language-model statistics of step %d failed: %s", rec.step, e)
            return
        if found is None:
            return  # no cross-entropy behind it: a later loss of the step may have one
        self._lm_at = rec.step
        for key, value in (found or {}).items():
            stats.add_kinds(f"{torch_lm.PREFIX}{key}", value, ("sum",), ())

    def forward_begins(self, model: Any) -> None:
        """A registered model's forward begins: an evaluation's window closes; the torch
        function modes on the stack now are where the next one opens (`torch_eval_loss`)."""
        if self.off:
            return
        self._eval.close()
        self._depths[id(model)] = depth()

    def forward_output(self, output: Any, model: Any = None) -> None:
        """A registered model's recorded forward ended with `output`."""
        if self.off:
            return
        evaluating = self.hook.recorder.mode != Mode.TRAIN
        loss = returned_loss(output)
        named = not isinstance(output, (tuple, list))  # a mapping's "loss", an object's `.loss`
        if loss is not None and not named and evaluating and self._returned_is_loss is False:
            loss = None  # the scalar this model returns is a term of the loss (an auxiliary loss)
        if loss is None:
            if evaluating:  # the loss a function computes from the output (torch_eval_loss)
                self._eval.open(output, self._depths.get(id(model), depth()))
            return
        self._named = self._named or named
        self._returned.append(loss.detach())
        if loss.grad_fn is not None:
            self._returned_nodes.append(loss.grad_fn)
        self._inputs(loss, output)

    def uncovered(self) -> bool:
        """The loss is left to `register_loss` alone (no trainer's loop or saved `loss` records
        it), and the registered loss has not run in the open TRAIN step: the script trains on
        a loss it computes otherwise (the registered module kept from an earlier version, a
        hand-written KL beside an unused `nn.KLDivLoss`), which is then the step's loss."""
        rec = self.hook.recorder
        return self.registered_at is not None and self.registered_at != rec.step and rec.mode == Mode.TRAIN

    def backward(self, tensor: Any) -> None:
        """`tensor` is given to backward (before the pass runs: its graph is still whole)."""
        hook = self.hook
        rec = hook.recorder
        if self.counts_only:  # a trainer's callback (`listen_for_counts`): no loss, no reset
            if not hook._closed and rec.in_step and rec.mode == Mode.TRAIN and _is_loss(tensor):
                self.language_model(tensor)
                found = saved_inputs(tensor)  # and the predictions and labels its node saved
                if found is not None:
                    self._record_inputs(*self._per_position(*found))
            return
        if rec.mode != Mode.TRAIN:
            self._eval.trained_on()  # a model trained in eval mode: its step's loss is no evaluation's
        if hook._closed or not rec.in_step or rec.mode != Mode.TRAIN:
            if not hook._closed and not rec.in_step and _is_loss(tensor) and tensor.grad_fn is not None:
                before = self._unopened[2] if self._unopened and self._unopened[0] == rec.step else {}
                # a step may open at the optimizer (`unopened`)
                self._unopened = (rec.step, tensor, hook._resets_now(before))
            return
        if not isinstance(tensor, torch.Tensor) or tensor.numel() != 1 or not tensor.is_floating_point():
            return
        if tensor.grad_fn is None or not any(m.saved_at == rec.step for m in hook._models):
            return  # not a pass through a model this hook records in the open step
        if self.off and not self.uncovered():
            # a trainer's callback (its loop's loss) or a registered loss records the loss; the
            # language-model counts of the step, if none came yet, from what backward is given
            # (a Hugging Face `compute_loss` of the user's, outside the model's forward)
            self.language_model(tensor)
            return
        hook.timeline.mark(marks.BACKWARD_START)
        if self._returned:
            if self._named:
                return  # the model names it its loss (a task loss the script may add terms to)
            if _scaled_from(tensor.grad_fn, self._returned_nodes):
                self._returned_is_loss = True  # the model's returned loss, perhaps scaled: it is the loss
                return
            # the script trains on something else (the returned scalar plus a cross-entropy the
            # script computes): what it gives to backward is the loss
            self._returned_is_loss = False
            self._aside = True
        self._backward.append((tensor.grad_fn, self._unscaled(tensor)))
        self._inputs(tensor)

    def unopened(self) -> tuple[torch.Tensor, dict[int, Any]] | None:
        """The loss given to backward since the last step ended, while no step was open, and
        whether each model's gradients were reset before those passes, or None (taken once):
        a registered model trained without a forward of its own (its parameters used by a
        method, `model.nll(y)`), whose step opens at its optimizer."""
        got, self._unopened = self._unopened, None
        return got[1:] if got is not None and got[0] == self.hook.recorder.step else None

    def _reached(self, root: Any) -> frozenset[str] | None:
        """The parts of the registered models (top-level submodules, with the model's prefix)
        whose parameters the backward pass from the autograd node `root` accumulated into;
        OTHER for any other. Read after the pass ran: it frees the graph's saved tensors, not
        its nodes."""
        if root is None:
            return None
        params = self.hook._params
        if self._parts_of != (id(params), len(params)):  # a model registered, or its shards renamed
            self._parts_of = (id(params), len(params))
            self._parts = {}
            for m in self.hook._models:
                for name, p, _ in m.params:
                    self._parts[id(p)] = m.prefix + name[len(m.prefix) :].split(".", 1)[0]
        found: set[str] = set()
        seen: set[int] = set()
        todo = [root]
        while todo and len(seen) < MAX_NODES:
            node = todo.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            variable = getattr(node, "variable", None)
            if isinstance(variable, torch.Tensor):
                found.add(self._parts.get(id(variable), OTHER))
            todo.extend(f for f, _ in node.next_functions)
        return frozenset(found)

    def _unscaled(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` detached; a GradScaler's `loss * scale` divided back by its scale."""
        node = tensor.grad_fn
        loss = tensor.detach()
        if node is not None and node.name() == "MulBackward0" and node.next_functions[1][0] is None:
            scale = getattr(node, "_saved_other", None)
            if isinstance(scale, torch.Tensor) and scale.numel() == 1 and self._is_scaler_scale(scale):
                loss = loss / scale
        return loss

    def _is_scaler_scale(self, scale: torch.Tensor) -> bool:
        """Is `scale` a `GradScaler`'s scale (kept in place for a whole run: searched once)?"""
        key = scale.data_ptr()
        found = self._scalers.get(key)
        if found is None and len(self._scalers) >= MAX_SCANS:
            return False  # a factor made anew at each step (`loss * torch.tensor(w)`): not a scaler's
        if found is None:
            # type(): no __class__ property runs (torch.distributed.reduce_op's warns)
            scalers = (o for o in gc.get_objects() if issubclass(type(o), torch.amp.GradScaler))
            found = self._scalers[key] = any(_scale_ptr(s) == key for s in scalers)
        return found

    def _inputs(self, loss: torch.Tensor, output: Any = None) -> None:
        """At a statistics step, the predictions and labels the loss's autograd node saved
        (and the language-model statistics; `output`: the forward's that returned `loss`)."""
        stats = self.hook._stats
        rec = self.hook.recorder
        if stats is None or self._classes_at == rec.step:
            return
        due = stats.due()
        if due:
            self.language_model(loss, output)
        found = saved_inputs(loss)
        if found is None and output is not None and self._labels_at == rec.step and self._labels is not None:
            scores = class_scores(output, self._labels)  # no node to read (compiled, or no_grad)
            found = None if scores is None else ("classes", scores, self._labels)
        if found is None:
            return  # a later loss of the step may have them (the one given to backward)
        self._record_inputs(*self._per_position(*found))

    def _per_position(
        self, kind: str, predictions: torch.Tensor, labels: torch.Tensor
    ) -> tuple[str, torch.Tensor, torch.Tensor]:
        """Class labels a loss flattened from the (batch, length) `labels=` of the model's call
        (a seq2seq model's `CrossEntropyLoss()(logits.view(-1, V), labels.view(-1))`) in that
        shape again, the scores as (batch, length, V): targets per position of a sequence, as
        the rules tell them (`class_imbalance` does not count tokens as a data set's classes)."""
        seq = self._sequences if self._labels_at == self.hook.recorder.step else None
        if (
            kind == "classes" and seq is not None and labels.dim() == 1
            and labels.numel() == seq.numel() and predictions.dim() == 2
            and predictions.shape[0] == labels.numel()
        ):  # fmt: skip
            return kind, predictions.reshape(*seq.shape, -1), labels.reshape(seq.shape)
        return kind, predictions, labels

    def _record_inputs(self, kind: str, predictions: torch.Tensor, labels: torch.Tensor) -> None:
        """The step's loss's predictions and labels ("classes": their class statistics, and
        the confusion matrix every step; else their `samples`), once per step: found in its
        autograd node (`saved_inputs`), or in an evaluation's loss call (`torch_eval_loss`)."""
        stats = self.hook._stats
        rec = self.hook.recorder
        if (
            stats is None
            or (self.off and not self.counts_only)  # (a registered loss that did not run: no labels)
            or self._classes_at == rec.step
            or not rec.in_step
        ):
            return
        self._classes_at = rec.step
        if kind == "classes":
            stats.confusion(PREFIX, predictions, labels)  # every step: `confusion_steps`
        if not stats.due():
            return
        if kind == "classes":
            stats.add_classes(PREFIX, predictions, labels)
        else:
            stats.add_targets(PREFIX, predictions, labels)

    def _step_end(self) -> None:
        evaluated = self._eval.take()
        if evaluated is not None:
            self._returned.append(evaluated)
        if self.hook.recorder.mode == Mode.TRAIN:
            self._eval.trained()
        returned, passes, aside = self._returned, self._backward, self._aside
        self._returned, self._backward, self._returned_nodes = [], [], []
        self._aside = self._named = False
        # a registered loss that did not run: what backward was given is the loss of a step that
        # updated the model (not of gradients taken without an update: EWC's Fisher estimate)
        stepped = self.stepped_at == self.hook.recorder.step
        if (self.off and not (passes and stepped and self.uncovered())) or not (returned or passes):
            return
        if self.off and not self._told_uncovered:  # the registered loss did not run: say so once
            self._told_uncovered = True
            log.warning(
                "mldbg: the registered loss did not run in training step %d, which trained on what it gave "
                "to backward: that is recorded as %r (register_loss only a loss module the script calls)",
                self.hook.recorder.step,
                NAME,
            )
        if returned and not (aside and passes):
            self.hook._save(NAME, _mean(returned), ("losses",))
            return
        for name, values in self._losses(passes).items():
            self.hook._save(name, _mean(values), ("losses",))

    def _losses(self, passes: list[tuple[Any, torch.Tensor]]) -> dict[str, list[torch.Tensor]]:
        """The step's backward passes by loss: one series (their mean) unless they reach
        different parts of the models, then one series per part reached. Passes of one loss
        are looked into, by their first, when other models ran in the step than in the last
        step looked into (`_one_loss`); each pass is, in the first steps of several passes and
        once the run showed different losses in one step."""
        values = [v for _, v in passes]
        if (len(passes) == 1 and not self._split) or self._split is False:
            return {self._one_loss(passes[0][0]): values}
        groups: dict[frozenset[str] | None, list[torch.Tensor]] = {}
        for root, value in passes:
            groups.setdefault(self._reached(root), []).append(value)
        if self._split is None:
            self._probed += 1
            if len(groups) > 1:
                self._split = True
            elif self._probed >= PROBE_STEPS:
                self._split = False  # one loss (accumulation): its passes are not walked any more
        if not self._split:
            (reached,) = groups
            return {self._one_loss(passes[0][0], reached): values}
        out: dict[str, list[torch.Tensor]] = {}
        for reached, group in groups.items():
            out.setdefault(self._name_of(reached), []).extend(group)
        return out

    def _one_loss(self, root: Any, reached: frozenset[str] | None = None) -> str:
        """The series of a step's passes of one loss, the first from `root` (`reached`: what
        it reached, where already walked): `loss` for a hook of one model; else what the pass
        reached names it, walked when the models that ran a forward in the step differ from
        those of the last step looked into."""
        hook = self.hook
        if len(hook._models) < 2:
            return NAME
        step = hook.recorder.step
        ran = frozenset(id(m) for m in hook._models if m.saved_at == step)
        if reached is not None or self._alone is None or self._alone[0] != ran:
            self._alone = (ran, reached if reached is not None else self._reached(root))
        return self._name_of(self._alone[1])

    def _name_of(self, reached: frozenset[str] | None) -> str:
        """The series of the passes that reach `reached`: the first loss met keeps `loss`,
        the others are numbered."""
        key = reached or frozenset()
        name = self._series.get(key)
        if name is None:
            name = f"{NAME}/backward{len(self._series)}" if self._series else NAME
            self._series[key] = name
        return name


def _scaled_from(node: Any, sources: list[Any]) -> bool:
    """Is the autograd `node` one of `sources`, or made from one by scalings alone (`loss /
    accumulation`, a GradScaler's `loss * scale`, `.mean()` of DataParallel's per-device
    losses, `.float()`)? A few nodes deep, each with one input in the graph."""
    for _ in range(torch_lm.DEPTH):
        if node is None:
            return False
        if any(node is s for s in sources):
            return True
        if node.name() not in SCALINGS:
            return False
        nexts = [f for f, _ in node.next_functions if f is not None]
        if len(nexts) != 1:
            return False
        node = nexts[0]
    return False


def _mean(values: list[torch.Tensor]) -> torch.Tensor:
    """The step's loss: its one value, or the mean of several (on the first one's device)."""
    if len(values) == 1:
        return values[0].reshape(())
    device = values[0].device
    return torch.stack([v.reshape(()).float().to(device) for v in values]).mean()


def returned_loss(output: Any) -> torch.Tensor | None:
    """The loss in a model's forward output: a mapping's `loss`, an object's `.loss`, or the
    one scalar floating tensor of a tuple or list (`(logits, loss)`, `(loss, logits)`)."""
    if isinstance(output, torch.Tensor):
        return None
    if isinstance(output, dict) or (hasattr(output, "keys") and hasattr(output, "get")):
        found = output.get("loss")
    elif isinstance(output, (tuple, list)) and not hasattr(output, "_fields"):
        scalars = [o for o in output if _is_loss(o)]
        found = scalars[0] if len(scalars) == 1 else None
    else:
        found = getattr(output, "loss", None)
    return found if _is_loss(found) else None


def class_labels(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor | None:
    """A classifier's labels handed to a model that computes its own loss: `labels=` or
    `targets=`, else one integer 1-D argument after the first (`model(x, y)`)."""
    for key in ("labels", "targets"):
        found = kwargs.get(key)
        if _is_labels(found):
            return found
    found = [a for a in args[1:] if _is_labels(a)]
    return found[0] if len(found) == 1 else None


def sequence_labels(kwargs: dict[str, Any]) -> torch.Tensor | None:
    """The (batch, length) integer `labels=` of a model's call (a seq2seq model's targets)."""
    found = kwargs.get("labels")
    if (
        isinstance(found, torch.Tensor)
        and found.dim() == 2
        and not (found.is_floating_point() or found.is_complex())
    ):
        return found
    return None


def _is_labels(value: Any) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and value.dim() == 1
        and not value.is_floating_point()
        and not value.is_complex()
        and value.dtype != torch.bool
    )


def class_scores(output: Any, labels: torch.Tensor) -> torch.Tensor | None:
    """The (N, C) class scores in a model's output that holds its loss, N the labels' number:
    `.logits`, `"logits"`, or a tuple's one such floating tensor."""
    if isinstance(output, (tuple, list)):
        items: list[Any] = list(output)
    elif isinstance(output, dict) or (hasattr(output, "keys") and hasattr(output, "get")):
        items = [output.get("logits")]
    else:
        items = [getattr(output, "logits", None)]
    found = [
        o
        for o in items
        if isinstance(o, torch.Tensor)
        and o.is_floating_point()
        and o.dim() == 2
        and o.shape[0] == labels.shape[0]
        and o.shape[1] > 1
    ]
    return found[0] if len(found) == 1 else None


def _scale_ptr(scaler: Any) -> int | None:
    scale = getattr(scaler, "_scale", None)
    return scale.data_ptr() if isinstance(scale, torch.Tensor) else None


def _is_loss(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() == 0 and value.is_floating_point()


def saved_inputs(loss: torch.Tensor) -> tuple[str, torch.Tensor, torch.Tensor] | None:
    """("classes" or "samples", predictions, labels) that the loss's node saved; else None.

    The node is searched breadth first, a few nodes deep, through scalings and sums (`loss /
    accumulation`, a GradScaler's `loss * scale`, `F.cross_entropy(logits, y) + 1e-3 * aux`,
    `(w * F.mse_loss(p, t, reduction="none")).mean()`), as `torch_lm.nll_node` finds the
    cross-entropy. The one classification loss found is taken; else the one regression loss.
    Several of one kind (two heads, a GAN's real and fake terms): which labels go with which
    predictions is not known, and None is returned."""
    classes: list[Any] = []
    samples: list[Any] = []
    # (node, weighed: below a product by a tensor of several values, where a gather of
    # log-probabilities is no cross-entropy of labels: `torch_lm.weighs`)
    frontier: list[tuple[Any, bool]] = [(loss.grad_fn, False)]
    seen: set[int] = set()
    for _ in range(torch_lm.DEPTH):
        nxt: list[tuple[Any, bool]] = []
        for node, weighed in frontier:
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            name = node.name()
            if name in CLASS_NODES:
                classes.append(node)
            elif name in SAMPLE_NODES:
                samples.append(node)
            elif not weighed and (written := torch_lm.written_cross_entropy(node)) is not None:
                classes.append(written)
            elif name in torch_lm.WRITTEN_THROUGH:
                below = weighed or torch_lm.weighs(node)
                nxt.extend((f, below) for f, _ in node.next_functions if f is not None)
        frontier = nxt[: torch_lm.WIDTH]
        if not frontier:
            break
    kind, found = ("classes", classes) if classes else ("samples", samples)
    if len(found) != 1:
        return None
    if isinstance(found[0], tuple):  # a cross-entropy written out (`torch_lm.written_cross_entropy`)
        return ("classes", *found[0])
    try:
        predictions, labels = getattr(found[0], "_saved_self"), getattr(found[0], "_saved_target")  # noqa: B009
    except RuntimeError:  # freed by a backward pass already run
        return None
    if not (isinstance(predictions, torch.Tensor) and isinstance(labels, torch.Tensor)):
        return None
    return kind, predictions, labels


# the one wrapper around torch.autograd.backward ------------------------------------------
_lock = threading.Lock()
_listeners: weakref.WeakSet[LossCapture] = weakref.WeakSet()
_original: Any = torch.autograd.backward  # what the wrapper calls (the one found when it went in)


def _backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
    if not _listeners:
        return _original(tensors, *args, **kwargs)
    one = tensors[0] if isinstance(tensors, (tuple, list)) and len(tensors) == 1 else tensors
    captures = list(_listeners)
    for capture in captures:
        try:
            capture.backward(one)
        except Exception:  # never in the way of the user's backward
            log.exception("mldbg: the loss given to backward was not recorded")
        if capture.counts_only:
            continue
        try:
            capture.hook._grads_before_backward()  # was `.grad` reset? (gradient_reset)
        except Exception:
            log.exception("mldbg: the gradients before backward were not read")
    try:
        return _original(tensors, *args, **kwargs)
    finally:
        for capture in captures:
            if capture.counts_only:
                continue
            try:
                capture.hook._grads_after_backward()
            except Exception:
                log.exception("mldbg: the gradients after backward were not read")


def _listen(capture: LossCapture) -> None:
    global _original
    with _lock:
        _listeners.add(capture)
        if torch.autograd.backward is not _backward:
            _original = torch.autograd.backward
            torch.autograd.backward = _backward


def _unlisten(capture: LossCapture) -> None:
    with _lock:
        _listeners.discard(capture)
        if not _listeners and torch.autograd.backward is _backward:  # else another wrapper is on top
            torch.autograd.backward = _original
