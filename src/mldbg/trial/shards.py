"""The global value of a sharded tensor saved raw (issue 31; `mldbg.store.shards`): every worker
saved its own piece with its layout; `Tensor.value(step)` without a worker puts them together.
Read through the trial's public index API only."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mldbg.config import Mode
from mldbg.errors import TensorUnavailableForStep
from mldbg.store.shards import assemble, layout_name

if TYPE_CHECKING:
    from mldbg.trial.trial import Trial


def global_value(trial: Trial, name: str, step: int, mode: Mode | None) -> np.ndarray | None:
    """The tensor `name` at `step` reassembled from the workers' pieces, or None when it was not
    saved as pieces at that step (a plain tensor: read as before). Raises
    `mldbg.store.shards.Unassembled` when the pieces saved do not make the whole tensor."""
    layouts = layout_name(name)
    if not trial.has_tensor(layouts):
        return None
    found = trial.records(layouts, step, mode)
    if not len(found):
        return None
    workers = sorted({found.workers[w] for w in found.worker.tolist()})
    pieces = []
    for worker in workers:
        try:
            piece = trial.read(trial.record(name, step, mode, worker))
        except TensorUnavailableForStep:  # its piece failed to save: `assemble` says what is missing
            continue
        pieces.append((worker, trial.read(trial.record(layouts, step, mode, worker)), piece))
    return assemble(name, pieces)
