"""One recorded tensor: its steps, values and reductions, across modes and workers."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mldbg.config import Mode
from mldbg.errors import CorruptRecord, TensorUnavailableForStep
from mldbg.store.format import DTYPES, numpy_dtype, to_numpy_value
from mldbg.store.reductions import REDUCTION_NAMES, reduce, reduction_code
from mldbg.trial.index import TensorRows

if TYPE_CHECKING:
    from mldbg.trial.trial import Trial


class Tensor:
    def __init__(self, trial: Trial, name: str, rows: TensorRows):
        self.trial = trial
        self.name = name
        self._rows = rows

    def __repr__(self) -> str:
        return f"Tensor({self.name!r})"

    def _flat(self) -> dict[str, np.ndarray]:
        return self.trial._index.flat(self._rows)

    def steps(self, mode: Mode | None = None) -> list[int]:
        """Global steps where it was saved; with a mode, that mode's own steps."""
        flat = self._flat()
        if mode is None or mode == Mode.GLOBAL:
            return np.unique(flat["step"]).tolist()
        return np.unique(flat["mode_step"][flat["mode"] == int(mode)]).tolist()

    def workers(self, step: int, mode: Mode | None = None) -> list[str]:
        flat = self._flat()
        ids = {int(flat["worker"][p]) for p in self.trial._index.positions(self._rows, step, mode)}
        return sorted(self.trial._index.workers[i] for i in ids)

    def _position(self, step: int, mode: Mode | None, worker: str | None) -> int:
        index = self.trial._index
        pos = index.positions(self._rows, step, mode)
        if not pos:
            self.trial._missing_step(step, mode, tensor=self.name)
            pos = index.positions(self._rows, step, mode)  # a refresh may have brought it
            if not pos:
                raise TensorUnavailableForStep(
                    f"tensor {self.name!r} was not saved at step {step}"
                    + (f" of mode {mode.name}" if mode else "")
                    + f"; it was saved at steps {_summary(self.steps(mode))}"
                )
        if worker is None:
            flat = self._flat()
            return min(pos, key=lambda p: index.workers[int(flat["worker"][p])])
        for p in pos:
            if index.workers[int(self._flat()["worker"][p])] == worker:
                return p
        raise TensorUnavailableForStep(
            f"tensor {self.name!r} at step {step} was not saved by worker {worker!r}; "
            f"it was by {self.workers(step, mode)}"
        )

    def value(self, step: int, mode: Mode | None = None, worker: str | None = None) -> np.ndarray:
        """The tensor at `step` (a global step, or the mode's step when `mode` is given)."""
        index = self.trial._index
        p = self._position(step, mode, worker)
        flat = self._flat()
        seg = index.segments[int(flat["seg"][p])]
        row = int(flat["row"][p])
        c = seg.columns
        offset, nbytes = int(c["offset"][row]), int(c["nbytes"][row])
        if offset < 0:
            raise TensorUnavailableForStep(
                f"only reductions of {self.name!r} were saved at step {step}: use "
                "reduction_value(), or save_raw_tensor=True in its ReductionConfig"
            )
        dt = DTYPES[int(c["dtype"][row])]
        start = int(c["shape_start"][row])
        shape = tuple(c["shapes"][start : start + int(c["ndim"][row])].tolist())
        where = f"{index.store.url}/{seg.data_key}"
        try:
            blob = index.store.read(seg.data_key, offset, nbytes)
        except FileNotFoundError:
            raise CorruptRecord(f"{where}: missing, but its index {seg.key} refers to it") from None
        if len(blob) != nbytes:
            raise CorruptRecord(
                f"{where}: {self.name!r} at step {step} needs bytes {offset}..{offset + nbytes} "
                f"but the file ends at {offset + len(blob)} (truncated)"
            )
        raw = np.frombuffer(blob, dtype=numpy_dtype(dt)).reshape(shape)
        return to_numpy_value(raw, dt)

    def reduction_value(
        self,
        step: int,
        reduction: str,
        abs: bool = False,
        mode: Mode | None = None,
        worker: str | None = None,
    ) -> float:
        """A saved reduction, or one computed from the saved raw tensor."""
        if reduction not in REDUCTION_NAMES:
            from mldbg.errors import InvalidConfig

            raise InvalidConfig(f"unknown reduction {reduction!r}; choose from {', '.join(REDUCTION_NAMES)}")
        p = self._position(step, mode, worker)
        flat = self._flat()
        seg_idx, row = int(flat["seg"][p]), int(flat["row"][p])
        code = reduction_code(reduction, abs)
        saved = self.trial._index.reductions_of(seg_idx).get((row, code))
        if saved is not None:
            return saved
        return reduce(self.value(step, mode, worker), reduction, abs)

    def values(self, mode: Mode | None = None) -> dict[int, np.ndarray]:
        """Every saved value (of the first worker), by step."""
        return {s: self.value(s, mode) for s in self.steps(mode)}

    def reduction_values(
        self, reduction: str, abs: bool = False, mode: Mode | None = None
    ) -> dict[int, float]:
        return {s: self.reduction_value(s, reduction, abs, mode) for s in self.steps(mode)}

    def has_step(self, step: int, mode: Mode | None = None) -> bool:
        return bool(self.trial._index.positions(self._rows, step, mode))


def _summary(steps: list[int]) -> str:
    if len(steps) <= 8:
        return str(steps)
    return f"[{', '.join(map(str, steps[:4]))}, ..., {', '.join(map(str, steps[-3:]))}] ({len(steps)} in all)"
