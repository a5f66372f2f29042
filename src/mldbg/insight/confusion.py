"""Confusion matrix of the recorded labels and predictions, at a step or over steps.

Labels and predictions are the first tensors of the `labels` and `predictions` collections
(for PyTorch, the registered loss's inputs); class ids come from them as the `confusion` rule
reads them (`mldbg.rules.labels`): logits or probabilities are reduced by argmax, one-hot
labels too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.errors import InvalidConfig
from mldbg.insight.data import RunLike, evenly, global_step, open_trial, parse_mode, step_label
from mldbg.insight.figure import plotly
from mldbg.rules.labels import pairs
from mldbg.rules.view import TrialView
from mldbg.trial import Trial

MAX_SLIDER_STEPS = 50


def prediction_steps(run: RunLike, mode: Mode | str | None = None) -> list[int]:
    """Steps (global, or `mode`'s own) where both labels and predictions were saved."""
    trial = open_trial(run)
    m = parse_mode(mode)
    labels = trial.tensor_names(collection="labels")
    preds = trial.tensor_names(collection="predictions")
    if not labels or not preds:
        raise InvalidConfig(
            f"{trial.path} has no "
            + ("labels" if not labels else "predictions")
            + " collection: record it with include_collections=[..., 'labels', 'predictions'] "
            "(PyTorch: and hook.register_loss(loss_fn))"
        )
    found: set[int] = set()
    for name in labels:
        found.update(trial.tensor(name).steps(m))
    have_pred: set[int] = set()
    for name in preds:
        have_pred.update(trial.tensor(name).steps(m))
    return sorted(found & have_pred)


def confusion_matrix(
    run: RunLike, step: int, mode: Mode | str | None = None, classes: int | None = None
) -> np.ndarray:
    """Counts (classes x classes): row = label, column = predicted class, at `step`."""
    trial = open_trial(run)
    m = parse_mode(mode)
    y, p, k = _class_ids(trial, TrialView(trial), global_step(trial, step, m))
    return _matrix(y, p, max(k, classes or 0))


def confusion(
    run: RunLike,
    step: int | None = None,
    mode: Mode | str | None = None,
    slider: bool = False,
    normalize: bool = False,
) -> Any:
    """A heatmap of the confusion matrix at `step` (default: the last step with labels and
    predictions). `slider=True` adds a step slider over the saved steps (up to 50 of them),
    starting at `step`. `normalize=True` shows each row's shares (recall on the diagonal)."""
    go = plotly()
    trial = open_trial(run)
    m = parse_mode(mode)
    steps = prediction_steps(trial, m)
    if not steps:
        raise InvalidConfig(
            f"no step of {trial.path} has both labels and predictions" + (f" in mode {m.name}" if m else "")
        )
    if step is None:
        step = steps[-1]
    elif step not in set(steps):
        raise InvalidConfig(
            f"labels and predictions were not both saved at step {step}" + (f" of mode {m.name}" if m else "")
            + f"; they were at {steps[:8]}{' ...' if len(steps) > 8 else ''}"
        )  # fmt: skip
    shown = sorted(set(evenly(steps, MAX_SLIDER_STEPS)) | {step}) if slider else [step]
    view = TrialView(trial)
    ids = {s: _class_ids(trial, view, global_step(trial, s, m)) for s in shown}
    k = max(c for _, _, c in ids.values())
    names = [str(c) for c in range(k)]
    fig = go.Figure()
    titles = []
    for s in shown:
        mat = _matrix(ids[s][0], ids[s][1], k)
        acc = np.trace(mat) / max(int(mat.sum()), 1)
        z = mat / np.maximum(mat.sum(axis=1, keepdims=True), 1) if normalize else mat
        titles.append(f"Confusion at {step_label(trial, s, m)}: accuracy {acc:.1%} of {int(mat.sum())}")
        fig.add_trace(
            go.Heatmap(
                z=z, x=names, y=names, customdata=mat, text=mat, name=f"step {s}", visible=s == step,
                colorscale="Blues", texttemplate="%{text}", zmin=0,
                hovertemplate="label %{y}, predicted %{x}<br>count %{customdata}<extra></extra>",
            )
        )  # fmt: skip
    fig.update_layout(
        title=titles[shown.index(step)],
        xaxis={"title": "predicted class", "type": "category", "side": "bottom"},
        yaxis={"title": "label", "type": "category", "autorange": "reversed", "scaleanchor": "x"},
        template="plotly_white",
    )
    if slider:
        x_title = f"{m.name.lower()} step" if m else "step"
        fig.update_layout(
            sliders=[
                {
                    "active": shown.index(step),
                    "pad": {"t": 60},
                    "currentvalue": {"prefix": f"{x_title}: "},
                    "steps": [
                        {
                            "label": str(s),
                            "method": "update",
                            "args": [{"visible": [j == i for j in range(len(shown))]}, {"title": titles[i]}],
                        }
                        for i, s in enumerate(shown)
                    ],  # fmt: skip
                }
            ]
        )
    return fig


def _class_ids(trial: Trial, view: TrialView, step: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(label ids, predicted ids, number of classes) at a global step."""
    got = pairs(
        view, step, trial.tensor_names(collection="labels", step=step),
        trial.tensor_names(collection="predictions", step=step),
    )  # fmt: skip
    if got is None or got[1] is None:
        raise InvalidConfig(
            f"no class labels with matching predictions at step {step} of {trial.path} "
            "(regression targets, or labels and predictions of different sizes)"
        )
    y, p, c = got
    k = int(max(y.max(initial=-1), p.max(initial=-1))) + 1
    return y, p, max(k, c or 0)


def _matrix(y: np.ndarray, p: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((k, k), dtype=np.int64)
    keep = (y >= 0) & (p >= 0) & (y < k) & (p < k)
    np.add.at(out, (y[keep], p[keep]), 1)
    return out
