"""batch_dim_mismatch: a loss's predictions and labels broadcast to a bigger tensor."""

from __future__ import annotations

import math

import numpy as np

from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import quiet_prefix
from mldbg.rules.select import as_list
from mldbg.rules.view import TrialView


def class_pattern(pred: tuple[int, ...], labels: tuple[int, ...]) -> bool:
    """Class scores against class ids: the labels' shape is the predictions' without one class
    axis (axis 1 or the last: (N, C) vs (N,), (N, C, T) vs (N, T)). A class axis of size 1 is
    not one: (N, 1) against (N,) is the broadcast this rule looks for."""
    if len(pred) != len(labels) + 1:
        return False
    return any(pred[a] > 1 and pred[:a] + pred[a + 1 :] == labels for a in {1, len(pred) - 1})


def broadcast(ps: tuple[int, ...], ys: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape predictions `ps` and labels `ys` broadcast to, when it is bigger than both
    (the mismatch this rule reports); None otherwise."""
    if ps == ys or not ps or not ys or class_pattern(ps, ys):
        return None
    try:
        both = tuple(np.broadcast_shapes(ps, ys))
    except ValueError:
        return None  # not broadcastable: the loss handles these shapes some other way
    return both if math.prod(both) > max(math.prod(ps), math.prod(ys)) else None


@register
class BatchDimMismatch(Rule):
    """The predictions and labels of a loss have shapes that broadcast to a bigger tensor than
    either, e.g. `MSELoss()(pred[N, 1], target[N])` computes an N x N matrix of differences:
    every prediction is compared with every label, and the loss is wrong without any error
    (PyTorch only warns). Class scores against class ids ((N, C) vs (N,)) are fine.

    Reads the shapes of the registered loss's inputs (`<Loss>_input_0` in `predictions`,
    `<Loss>_input_1` in `labels`) from the index: the two-line PyTorch hook records their
    `samples` at statistics steps, which keeps their shape; raw tensors have theirs.
    `tensor_regex`: the predictions' names to look at (default: every one).
    """

    needs = ("predictions", "labels")
    tensor_regex: list[str] | None = None

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`): the leading steps at which no loss's
        predictions and labels (not reported yet) have shapes that broadcast, from the
        shapes the index keeps (no record built). A raw record (`check` reads its shape from
        the value) ends the prefix."""
        cut = len(steps)
        for pred_name in trial.names("predictions", as_list(self.tensor_regex) or None):
            if not pred_name.endswith("_input_0") or pred_name in self._fired:
                continue
            pred, label = trial.columns.tensor(pred_name), trial.columns.tensor(pred_name[: -len("0")] + "1")
            if pred is None or label is None or not len(pred.steps) or not len(label.steps):
                continue
            ip, iy = pred.at(steps), label.at(steps)
            both = (ip >= 0) & (iy >= 0)
            cut = min(cut, quiet_prefix(both & (pred.has_raw[ip] | label.has_raw[iy])))
            if not both[:cut].any():
                continue
            ps, ys = pred.shapes(trial.trial), label.shapes(trial.trial)
            seen: dict[tuple[tuple[int, ...], tuple[int, ...]], bool] = {}
            at = np.flatnonzero(both[:cut])
            for j, a, b in zip(at.tolist(), ip[at].tolist(), iy[at].tolist(), strict=True):
                pair = (ps[a], ys[b])
                hit = seen.get(pair)
                if hit is None:
                    hit = seen[pair] = broadcast(*pair) is not None
                if hit:
                    cut = j
                    break
        return cut

    def check(self, trial: TrialView, step: int) -> Finding | None:
        for pred_name in trial.names("predictions", as_list(self.tensor_regex) or None, step=step):
            if not pred_name.endswith("_input_0"):
                continue
            label_name = pred_name[: -len("0")] + "1"
            p, y = trial.layout(pred_name, step), trial.layout(label_name, step)
            if p is None or y is None:
                continue
            ps, ys = tuple(p[1]), tuple(y[1])
            both = broadcast(ps, ys)
            if both is None or not self.first(pred_name):
                continue
            size = math.prod(both)
            return self.finding(
                trial, step,
                f"the loss compares predictions of shape {list(ps)} ({pred_name}) with labels of shape "
                f"{list(ys)} ({label_name}): they broadcast to {list(both)}, {size} elements instead of "
                f"{max(math.prod(ps), math.prod(ys))}, so every sample is compared with every other one",
                tensors=[pred_name, label_name],
                suggestion="Give predictions and labels the same shape before the loss: squeeze the "
                "prediction (pred.squeeze(-1)) or unsqueeze the labels (y.unsqueeze(-1)), e.g. "
                "loss_fn(pred.view_as(y), y).",
            )  # fmt: skip
        return None
