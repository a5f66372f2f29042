"""The new points of a run's losses and scalars, for the trackers' `log_statistics`.

A tracker action that mirrors the run's curves asks `ScalarSeries.new_points()` each cycle:
the values of the `losses` and `scalars` collections saved since the last call, read through
the trial's public index API (records only grow, so it keeps how many it has seen of each).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from mldbg.config import Mode

if TYPE_CHECKING:
    from mldbg.store.base import Store
    from mldbg.trial import Trial

COLLECTIONS = ("losses", "scalars")


class ScalarSeries:
    """The run's one-number tensors of `collections`, as (key, global step, value) points.

    The key is the tensor's name, `eval/<name>` (`predict/<name>`) for the steps of those
    modes, and `<name>/<worker>` when several workers saved it. A tensor of more than one
    number is left out; one saved as reductions only gives its saved mean.
    """

    def __init__(self, run: str | os.PathLike[str] | Store, collections: tuple[str, ...] = COLLECTIONS):
        self.run = run
        self.collections = collections
        self._trial: Trial | None = None
        self._seen: dict[str, int] = {}

    def _open(self) -> Trial:
        if self._trial is None:
            from mldbg.trial import create_trial

            self._trial = create_trial(self.run, missing_ok=True, on_corrupt="skip")
        return self._trial

    def new_points(self) -> list[tuple[str, int, float]]:
        trial = self._open()
        trial.refresh()
        names: set[str] = set()
        for collection in self.collections:
            names.update(trial.tensor_names(collection=collection))
        several = len(trial.workers()) > 1
        points: list[tuple[str, int, float]] = []
        for name in sorted(names):
            records = trial.records(name)
            start = self._seen.get(name, 0)
            self._seen[name] = len(records)
            for i in range(start, len(records)):
                rec = records[i]
                if int(np.prod(rec.shape)) != 1:
                    continue
                if rec.has_raw:
                    value = float(np.asarray(trial.read(rec)).reshape(-1)[0])
                elif ("mean", False) in rec.reductions:
                    value = rec.reductions[("mean", False)]
                else:
                    continue
                key = name if rec.mode in (Mode.TRAIN, Mode.GLOBAL) else f"{rec.mode.name.lower()}/{name}"
                if several:
                    key = f"{key}/{rec.worker}"
                points.append((key, rec.step, value))
        return points
