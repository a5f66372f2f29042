"""t-SNE of a layer's activations at a step: does the layer separate the classes?

Rows are the batch's samples (the first axis), features the rest, flattened. Points are
coloured by the labels recorded at the same step (the `labels` collection), so a layer that
has learned the task shows one cluster per class.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.errors import InvalidConfig
from mldbg.insight.data import (
    RunLike,
    first_in,
    global_step,
    open_trial,
    parse_mode,
    raw,
    step_label,
    steps_of,
)
from mldbg.insight.figure import plotly
from mldbg.rules.labels import label_ids
from mldbg.trial import Trial

MIN_SAMPLES = 5  # below this, a 2-D embedding says nothing (and t-SNE's perplexity cannot fit)


def embedding(
    run: RunLike,
    name: str,
    step: int | None = None,
    labels: np.ndarray | str | None = None,
    mode: Mode | str | None = None,
    worker: str | None = None,
    perplexity: float | None = None,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray | None, str | None]:
    """(points (N, 2), class id per point or None, the labels tensor's name or None).

    `labels`: None finds the labels tensor saved at the same step; a tensor name; or an array
    of N values. `step=None` is the last step `name` was saved at. `perplexity` defaults to
    min(30, (N - 1) / 3)."""
    from sklearn.manifold import TSNE

    trial = open_trial(run)
    m = parse_mode(mode)
    if step is None:
        step = steps_of(trial, name, m)[-1]
    x = raw(trial, name, step, m, worker)
    where = f"{name!r} at {step_label(trial, step, m)}"
    if x is None:
        raise InvalidConfig(f"only reductions of {where} were saved; t-SNE needs the raw activations")
    if x.ndim < 2:
        raise InvalidConfig(
            f"t-SNE needs one row per sample, but {where} has shape {x.shape}: pick a layer's "
            "output or activation (first axis = batch)"
        )
    rows = x.reshape(x.shape[0], -1).astype(np.float64)
    n = rows.shape[0]
    if n < MIN_SAMPLES:
        raise InvalidConfig(
            f"t-SNE of {where}: only {n} samples (rows of shape {x.shape}); it needs at least "
            f"{MIN_SAMPLES}. Pick a step or mode with a larger batch, or a tensor with more rows"
        )
    if not np.all(np.isfinite(rows)):
        raise InvalidConfig(f"t-SNE of {where}: the activations hold NaN or inf")
    ids, label_name = _labels(trial, labels, step, m, worker, n, where)
    if perplexity is None:
        perplexity = float(min(30.0, max(1.0, (n - 1) / 3)))
    elif not 0 < perplexity < n:
        raise InvalidConfig(f"t-SNE perplexity must be in (0, {n}) for {n} samples, got {perplexity}")
    tsne = TSNE(
        n_components=2,
        perplexity=perplexity,
        init="pca" if rows.shape[1] >= 2 else "random",
        learning_rate="auto",
        random_state=seed,
    )
    return tsne.fit_transform(rows), ids, label_name


def tsne(
    run: RunLike,
    name: str,
    step: int | None = None,
    labels: np.ndarray | str | None = None,
    mode: Mode | str | None = None,
    worker: str | None = None,
    perplexity: float | None = None,
    seed: int = 0,
) -> Any:
    """A scatter of the t-SNE embedding of `name` at `step`, one trace per class (the recorded
    labels; one trace when there are none), at `step` (default: the last saved). Each
    point's `customdata` is its row in the batch."""
    go = plotly()
    trial = open_trial(run)
    m = parse_mode(mode)
    if step is None:
        step = steps_of(trial, name, m)[-1]
    points, ids, label_name = embedding(trial, name, step, labels, m, worker, perplexity, seed)
    fig = go.Figure()
    groups = [(f"class {c}", ids == c) for c in np.unique(ids)] if ids is not None else [("samples", None)]
    for title, mask in groups:
        idx = np.arange(len(points)) if mask is None else np.flatnonzero(mask)
        fig.add_trace(
            go.Scatter(
                x=points[idx, 0], y=points[idx, 1], mode="markers", name=title, customdata=idx,
                marker={"size": 8, "opacity": 0.85},
                hovertemplate=f"{title}<br>sample %{{customdata}}<extra></extra>",
            )
        )  # fmt: skip
    coloured = f", coloured by {label_name}" if label_name else ""
    fig.update_layout(
        title=f"t-SNE of {name} at {step_label(trial, step, m)}: {len(points)} samples{coloured}",
        xaxis={"title": "t-SNE 1", "zeroline": False},
        yaxis={"title": "t-SNE 2", "zeroline": False, "scaleanchor": "x"},
        template="plotly_white",
        legend={"title": "label"},
    )
    return fig


def _labels(
    trial: Trial,
    labels: np.ndarray | str | None,
    step: int,
    mode: Mode | None,
    worker: str | None,
    n: int,
    where: str,
) -> tuple[np.ndarray | None, str | None]:
    """Class ids for the N rows: given, or the labels recorded at the same step."""
    name = None
    if labels is None:
        name = first_in(trial, "labels", global_step(trial, step, mode))
        if name is None:
            return None, None  # nothing recorded: one colour
        y = raw(trial, name, step, mode, worker)
    elif isinstance(labels, str):
        name = labels
        y = raw(trial, name, step, mode, worker)
    else:
        y = np.asarray(labels)
    ids = label_ids(y) if y is not None else None
    if ids is None or ids.shape[0] != n:
        if labels is None:
            return None, None  # per-position or regression targets: not one class per row
        shape = None if y is None else y.shape
        raise InvalidConfig(
            f"labels {name or 'given'} (shape {shape}) do not give one class per row of {where} ({n} rows)"
        )
    return ids, name or "the given labels"
