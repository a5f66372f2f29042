"""What the two-line PyTorch hook records every step: the statistics the default rules read.

`mldbg.torch.Hook(out_dir)` with no `save_config` and no `include_collections` (or any hook
given `statistics=True`) hands each step's tensors to one `StatisticsBatch`, asking for the
statistics of `mldbg.store.statistics.DEFAULTS` of their collection, and hands the batch to
the recorder once per step (`Recorder.save_statistics`): the work is enqueued on the tensors'
device, and the values are read on the writer thread after one non-blocking copy.

Per tensor (names as in API.md):
- `<param>` (weights and biases) and `gradient/<param>`: in TRAIN steps only (weights do not
  change in EVAL); the statistics that read every element of every parameter once more, or
  sort (`_SLOW`: `delta_l2`, `row_range`, moments, `zero_fraction`, NaN/inf counts, quantiles)
  at TRAIN steps whose mode step is a multiple of `PARAMETER_EVERY` (0, 10, 20...), the norms
  (`l2`; `mean_abs`, `max_abs` of gradients) every step;
- `<layer>_input_0` of each ReLU, Tanh and Sigmoid module (their subclasses too; LeakyReLU is
  not a ReLU): `unit_active` / `unit_outside(...)` and the moments of `DEFAULTS`;
- `model_input_<i>`, `model_output_<i>`: `inputs`, `outputs` statistics;
- for a classification loss (`CLASSIFICATION_LOSSES`), `<Loss>_input_1` (the labels) carries
  `class_counts`, `class_correct` and `confusion` (up to 64 classes) and `<Loss>_input_0` (the
  predictions) `class_counts` of the predicted classes, as vector records;
- the loss itself (`<Loss>_output_0`) is saved raw every step by the recorder (`losses`).
"""

from __future__ import annotations

import functools
import logging

import torch
from torch import nn

from mldbg.frameworks.torch_host import dtype_of
from mldbg.frameworks.torch_statistics import StatisticsBatch
from mldbg.record.recorder import Recorder
from mldbg.store import statistics as st

log = logging.getLogger("mldbg")

CLASSIFICATION_LOSSES: tuple[type[nn.Module], ...] = (
    nn.CrossEntropyLoss, nn.NLLLoss, nn.BCELoss, nn.BCEWithLogitsLoss, nn.MultiMarginLoss,
)  # fmt: skip
# the statistics of the parameters and gradients that cost one more pass over every element of
# every parameter, or a sort: every `PARAMETER_EVERY` TRAIN steps; the others every step
PARAMETER_EVERY = 10
_SLOW = {
    "weights": ("mean", "variance", "zero_fraction", "delta_l2", "row_range", "nan_count", "inf_count"),
    "biases": ("mean", "variance", "zero_fraction", "delta_l2", "nan_count", "inf_count"),
    "gradients": ("nan_count", "inf_count", "quantile(5.0)", "quantile(95.0)"),
}  # every step: the norms (`l2`, `mean_abs`, `max_abs`: NaN or inf when the tensor holds one)


class StepStatistics:
    """One step's statistics requests, handed to the recorder at `finish()`."""

    def __init__(self, recorder: Recorder, parameter_every: int = PARAMETER_EVERY):
        self.recorder = recorder
        self.batch = StatisticsBatch()
        self.parameter_every = max(1, parameter_every)
        self._tensors: dict[str, tuple[str, tuple[int, ...], tuple[str, ...]]] = {}
        self._classes = False
        self._nbytes = 0
        self._failed = False
        self._cheap = {c: tuple(k for k in st.DEFAULTS[c] if k not in slow) for c, slow in _SLOW.items()}
        recorder.before_step_end.append(self.finish)

    def parameters_due(self) -> bool:
        """Do the costly parameter statistics run at this step?"""
        return self.recorder.mode_step % self.parameter_every == 0

    def add(self, name: str, tensor: object, collection: str, full: bool = True) -> None:
        """Ask for the `DEFAULTS` statistics of `collection` of a tensor (its first value in
        the step); `full=False`: those of every step (parameters between their due steps)."""
        kinds = st.DEFAULTS[collection] if full else self._cheap.get(collection, ())
        self.add_kinds(name, tensor, kinds, (collection,))

    def add_kinds(self, name: str, tensor: object, kinds: tuple[str, ...], natural: tuple[str, ...]) -> None:
        """Ask for statistics `kinds` of a tensor of the natural collections `natural`."""
        if not kinds or name in self._tensors or not _usable(tensor):
            return
        assert isinstance(tensor, torch.Tensor)
        self.batch.add(name, tensor, kinds)
        self._tensors[name] = (dtype_of(tensor), tuple(tensor.shape), natural)
        self._nbytes += 16 * len(kinds) + _vector_bytes(tensor, kinds)

    def add_classes(self, loss: str, predictions: object, labels: object) -> None:
        """Class statistics of a classification loss's labels and predictions."""
        if not (_usable(predictions) and _usable(labels)):
            return
        assert isinstance(predictions, torch.Tensor) and isinstance(labels, torch.Tensor)
        if predictions.device != labels.device:
            return
        self.batch.add_classes(f"{loss}_input_1", labels, f"{loss}_input_0", predictions)
        self._classes = True
        c = predictions.shape[1] if predictions.dim() > 1 else 2
        self._nbytes += 8 * (c + 1) * 3 + 4 * min(c, st.MAX_CONFUSION_CLASSES) ** 2

    def finish(self) -> None:
        """Enqueue the step's work and hand it to the recorder (no wait for the device)."""
        if not self._tensors and not self._classes:
            return
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
