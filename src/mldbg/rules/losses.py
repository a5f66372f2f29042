"""Loss series for the loss rules: training values per step, validation values per evaluation.

Any framework: the tensors of the `losses` collection (and scalars whose name says "loss"),
in whatever mode they were saved. A TRAIN series has one value per saved step (minibatch
noise included); an EVAL series has one value per *evaluation pass*, the mean over the
consecutive EVAL steps of that pass (each eval batch is a step in PyTorch; XGBoost writes one
metric value per round). Metrics where higher is better (accuracy, AUC, NDCG...) are turned
into "lower is better" as 1 - value, so every rule reads a series that should fall.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from mldbg.config import Mode
from mldbg.errors import MldbgError
from mldbg.rules.view import TrialView

_HIGHER_IS_BETTER = {
    "auc",
    "aucpr",
    "accuracy",
    "acc",
    "map",
    "ndcg",
    "precision",
    "recall",
    "f1",
    "r2",
    "pre",
}
_MODE_WORDS = {
    "train",
    "training",
    "validation",
    "valid",
    "val",
    "eval",
    "evaluation",
    "test",
    "dtrain",
    "dtest",
    "dvalid",
}
_TOKENS = re.compile(r"[A-Za-z]+|\d+")


def higher_is_better(name: str) -> bool:
    tokens = {t.lower() for t in _TOKENS.findall(name.split("/")[-1])}
    return bool(tokens & _HIGHER_IS_BETTER) and "loss" not in tokens and "error" not in tokens


def metric_key(name: str) -> str:
    """The metric a series measures, without its split: `train-rmse` and `validation_0-rmse`
    are both `rmse`; a PyTorch loss keeps its name in both modes."""
    tokens = [t.lower() for t in _TOKENS.findall(name)]
    kept = [t for t in tokens if t not in _MODE_WORDS and not t.isdigit()]
    return "-".join(kept) or name


@dataclass
class Evaluation:
    """One evaluation pass: consecutive EVAL steps of one loss tensor."""

    first_step: int
    last_step: int
    total: float = 0.0
    count: int = 0

    @property
    def value(self) -> float:
        return self.total / self.count if self.count else float("nan")


@dataclass
class Series:
    name: str
    mode: Mode
    steps: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)


class LossTracker:
    """Feeds on steps in order; keeps TRAIN series and EVAL passes per loss tensor."""

    def __init__(self, use_losses_collection: bool = True, tensor_regex: Sequence[str] | str | None = None):
        self.use_losses_collection = use_losses_collection
        self.tensor_regex = tensor_regex
        self.train: dict[str, Series] = {}
        self.other: dict[tuple[str, Mode], Series] = {}  # PREDICT or EVAL steps, raw
        self.evals: dict[str, list[Evaluation]] = {}
        self._open: dict[str, Evaluation] = {}
        self.seen_any = False

    def names(self, view: TrialView, step: int) -> list[str]:
        names: list[str] = []
        if self.use_losses_collection:
            names += view.names("losses", step=step)
            names += view.names("scalars", regex=r"(?i)loss", step=step)
        if self.tensor_regex:
            names += view.names(None, regex=self.tensor_regex, step=step)
        return sorted(set(names))

    def update(self, view: TrialView, step: int) -> tuple[Mode, list[str], list[tuple[str, Evaluation]]]:
        """Read the losses of `step`. Returns (mode, the tensors read, evaluations closed by it)."""
        mode = view.mode(step)
        closed: list[tuple[str, Evaluation]] = []
        for name, open_ev in list(self._open.items()):  # a pass ends at a gap or another mode
            if mode != Mode.EVAL or step != open_ev.last_step + 1:
                closed.append((name, open_ev))
                del self._open[name]
        names = self.names(view, step)
        for name in names:
            v = value_of(view, name, step)
            if v is None:
                continue
            self.seen_any = True
            if mode == Mode.TRAIN:
                s = self.train.setdefault(name, Series(name, mode))
                s.steps.append(step)
                s.values.append(v)
            elif mode == Mode.EVAL:
                ev = self._open.get(name)
                if ev is None:
                    ev = self._open[name] = Evaluation(step, step)
                    self.evals.setdefault(name, []).append(ev)
                ev.last_step = step
                ev.total += v
                ev.count += 1
            else:
                s = self.other.setdefault((name, mode), Series(name, mode))
                s.steps.append(step)
                s.values.append(v)
        return mode, names, closed

    def shortfall(self, need: int, evaluations: bool = False) -> str | None:
        """For a rule's `undecided()`: "needs N saved training losses, has n (name)" when
        every series is shorter than `need` (evaluation passes with `evaluations`); None when
        one is long enough, or there was no loss at all (`unchecked()` says that)."""
        if not self.seen_any:
            return None
        if evaluations:
            have = {name: len(evs) for name, evs in self.evals.items()}
            what = "evaluation passes (EVAL steps) with a loss"
        else:
            have = {name: len(s.values) for name, s in self.train.items()}
            what = "saved training losses"
        if not have:
            return f"needs {need} {what}, has 0"
        name = max(have, key=have.__getitem__)
        if have[name] >= need:
            return None
        return f"needs {need} {what}, has {have[name]} ({name})"

    def close_all(self) -> list[tuple[str, Evaluation]]:
        closed = list(self._open.items())
        self._open.clear()
        return closed

    def closed_evals(self, name: str) -> list[Evaluation]:
        open_ev = self._open.get(name)
        return [e for e in self.evals.get(name, []) if e is not open_ev]

    def train_for(self, eval_name: str) -> Series | None:
        """The TRAIN series that pairs with an EVAL loss tensor (same metric)."""
        if eval_name in self.train:
            return self.train[eval_name]
        key = metric_key(eval_name)
        for name, s in self.train.items():
            if metric_key(name) == key:
                return s
        return None


def value_of(view: TrialView, name: str, step: int) -> float | None:
    """The loss at a step as one number (the mean of a per-sample loss), oriented so that
    lower is better."""
    try:
        v = float(view.reduce(name, step, "mean"))
    except MldbgError:
        return None
    return 1.0 - v if higher_is_better(name) else v


def train_level(series: Series | None, before: int, window: int) -> float | None:
    """Median of the last `window` training values saved before step `before`."""
    if series is None:
        return None
    import bisect

    import numpy as np

    end = bisect.bisect_left(series.steps, before)
    vals = np.asarray(series.values[max(0, end - window) : end], dtype=np.float64)
    vals = vals[np.isfinite(vals)]
    if len(vals) == 0:
        return None
    return float(np.median(vals))
