"""Where the copies of an XGBoost hook record: `<out_dir>/fit-<k>`, one run per copy.

scikit-learn clones an estimator's parameters (`GridSearchCV`, `cross_val_score`, ...) and
joblib pickles them into worker processes, so one `Hook` given to `XGBClassifier(callbacks=)`
becomes many trainings. Each copy takes the next free number here; the numbering survives
threads, other processes (a local run is claimed by creating its folder) and reruns (the
`fit-<k>` already there are skipped). The hook's copy and pickle methods use this module.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence

from mldbg.store import open_store

_SUB_RUN = re.compile(r"fit-(\d+)")


class SubRuns:
    """Where the copies of one hook record: `<base>/fit-<k>`, k from 0 in the order they are
    numbered, after the `fit-<k>` already in `base` (a rerun adds runs, never overwrites)."""

    def __init__(self, base: str):
        self.base = base
        self.runs: list[str] = []
        self._next: int | None = None
        self._lock = threading.Lock()  # copies may start in threads (joblib's threading backend)

    def take(self) -> str:
        with self._lock:
            if self._next is None:
                self._next = _first_free(self.base)
            while True:
                run = _join(self.base, f"fit-{self._next}")
                self._next += 1
                if _claim(run):
                    break
            self.runs.append(run)
            return run


def _first_free(base: str) -> int:
    try:
        store = open_store(base)
        try:
            names: Sequence[str] = store.children("")
            taken = [int(m.group(1)) for c in names if (m := _SUB_RUN.fullmatch(c))]
        finally:
            store.close()
    except Exception:  # nothing there yet, or unreadable: numbering starts at 0
        return 0
    return max(taken, default=-1) + 1


def _claim(run: str) -> bool:
    """A local run is claimed by creating its folder, which only one process can do; a URL's
    numbering is this process's alone."""
    if "://" in run:
        return True
    try:
        os.makedirs(os.path.dirname(run), exist_ok=True)
    except OSError:  # no folder can be made there: the recorder says so when it opens the run
        return True
    try:
        os.mkdir(run)
    except FileExistsError:  # another copy has it, or an earlier search
        return False
    except OSError:
        return True
    return True


def _join(base: str, name: str) -> str:
    return f"{base.rstrip('/')}/{name}" if "://" in base else os.path.join(base, name)
