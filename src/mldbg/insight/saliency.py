"""Saliency maps: |d loss / d input|, the largest over the channels, beside the input.

Hooks record parameter gradients, not the input's. Two lines in the training loop record it
(PyTorch; see docs/insight.md):

    x.requires_grad_()                                     # before the forward
    hook.save_tensor("gradient/model_input_0", x.grad)     # after loss.backward()
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.errors import InvalidConfig, TensorUnavailable
from mldbg.insight.data import RunLike, open_trial, parse_mode, raw, step_label, steps_of
from mldbg.insight.figure import plotly, subplots

RECIPE = (
    "hooks do not record input gradients by themselves: in the training loop call "
    "x.requires_grad_() before the forward and hook.save_tensor('gradient/model_input_0', x.grad) "
    "after loss.backward() (see docs/insight.md)"
)


def channel_axis_of(shape: tuple[int, ...]) -> int | None:
    """The channel axis of a batch: 1 for (N, C, H, W) (PyTorch), 3 for (N, H, W, C) (Keras),
    None for (N, H, W) images and (N, F) vectors."""
    if len(shape) != 4:
        return None
    return 3 if shape[1] > 4 and shape[3] <= 4 else 1


def saliency_map(gradient: np.ndarray, channel_axis: int | None = None) -> np.ndarray:
    """|gradient|, the largest over the channel axis: (N, H, W) for a batch of images, (N, 1, F)
    for a batch of vectors. `channel_axis=None` guesses it from the shape."""
    g = np.abs(np.asarray(gradient, dtype=np.float64))
    if g.ndim < 2:
        raise InvalidConfig(f"a saliency map needs a batch (N, ...); the gradient has shape {g.shape}")
    axis = _axis(channel_axis, g.shape)
    if axis is not None:
        g = g.max(axis=axis)
    if g.ndim == 2:
        g = g[:, None, :]  # vectors: one row of features
    elif g.ndim > 3:
        g = g.reshape(g.shape[0], g.shape[1], -1)
    return g


def saliency(
    run: RunLike,
    step: int | None = None,
    input: str = "model_input_0",
    gradient: str | None = None,
    mode: Mode | str | None = None,
    worker: str | None = None,
    samples: int = 4,
    channel_axis: int | None = None,
) -> Any:
    """The inputs of a few samples at `step` (left) beside their saliency maps (right):
    bright where a small change of the input moves the loss most. `gradient` defaults to
    `gradient/<input>`; `step=None` is the last step it was saved at. The saliency heatmaps
    are the traces named `saliency <i>`."""
    trial = open_trial(run)
    m = parse_mode(mode)
    gradient = gradient or f"gradient/{input}"
    if not trial.has_tensor(gradient):
        raise TensorUnavailable(f"no tensor {gradient!r} in {trial.path}: {RECIPE}")
    if step is None:
        step = steps_of(trial, gradient, m)[-1]
    g = raw(trial, gradient, step, m, worker)
    x = raw(trial, input, step, m, worker)
    where = step_label(trial, step, m)
    if g is None or x is None:
        raise InvalidConfig(
            f"only reductions of {input!r} or {gradient!r} were saved at {where}; raw values needed"
        )
    if g.shape != x.shape:
        raise InvalidConfig(f"{gradient!r} has shape {g.shape} but {input!r} has {x.shape} at {where}")
    axis = _axis(channel_axis, x.shape)
    sal = saliency_map(g, axis)
    k = max(1, min(samples, x.shape[0]))
    fig = subplots(
        rows=k, cols=2, horizontal_spacing=0.06, vertical_spacing=0.04 if k > 1 else 0.1,
        subplot_titles=[t for i in range(k) for t in (f"sample {i}: {input}", f"sample {i}: |gradient|")],
    )  # fmt: skip
    go = plotly()
    for i in range(k):
        fig.add_trace(_input_trace(go, x[i], None if axis is None else axis - 1, i), row=i + 1, col=1)
        fig.add_trace(
            go.Heatmap(
                z=sal[i], name=f"saliency {i}", colorscale="Hot", coloraxis="coloraxis",
                hovertemplate="x %{x}, y %{y}<br>|grad| %{z:.3g}<extra></extra>",
            ),
            row=i + 1, col=2,
        )  # fmt: skip
    fig.update_yaxes(autorange="reversed", showticklabels=False, showgrid=False, zeroline=False)
    fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
    for i in range(1, 2 * k + 1):  # square pixels
        fig.update_yaxes(scaleanchor=f"x{'' if i == 1 else i}", row=(i - 1) // 2 + 1, col=(i - 1) % 2 + 1)
    fig.update_layout(
        title=f"Saliency |d loss / d {input}| at {where}",
        coloraxis={"colorscale": "Hot", "colorbar": {"title": "|grad|"}},
        height=max(320, 230 * k),
        template="plotly_white",
    )
    return fig


def _axis(channel_axis: int | None, shape: tuple[int, ...]) -> int | None:
    """The batch's channel axis, as a non-negative index: given, or guessed from the shape."""
    if channel_axis is None:
        return channel_axis_of(shape)
    if not -len(shape) < channel_axis < len(shape) or channel_axis % len(shape) == 0:
        raise InvalidConfig(f"channel_axis {channel_axis} is not a feature axis of a batch of shape {shape}")
    return channel_axis % len(shape)


def _input_trace(go: Any, sample: np.ndarray, channel_axis: int | None, i: int) -> Any:
    """One input: an RGB image for 3 channels, else the mean over channels in grey."""
    v = np.asarray(sample, dtype=np.float64)
    if channel_axis is not None and v.shape[channel_axis] == 3:
        rgb = np.moveaxis(v, channel_axis, -1)
        lo, hi = np.nanmin(rgb), np.nanmax(rgb)
        rgb = (rgb - lo) / (hi - lo) * 255 if hi > lo else np.zeros_like(rgb)
        return go.Image(z=rgb.astype(np.uint8), name=f"input {i}")
    if channel_axis is not None:
        v = v.mean(axis=channel_axis)
    if v.ndim == 1:
        v = v[None, :]
    elif v.ndim > 2:
        v = v.reshape(v.shape[0], -1)
    return go.Heatmap(
        z=v, name=f"input {i}", colorscale="Greys", reversescale=True, showscale=False,
        hovertemplate="x %{x}, y %{y}<br>value %{z:.3g}<extra></extra>",
    )  # fmt: skip
