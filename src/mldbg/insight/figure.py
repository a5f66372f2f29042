"""Plotly, imported only when a plot is made, and `save()`: a figure as one self-contained file."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from mldbg.errors import InvalidConfig, MldbgError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".svg", ".pdf")


def plotly() -> Any:
    """`plotly.graph_objects`, or an error that says which extra installs it."""
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise MldbgError(
            "mldbg's plots need plotly: pip install 'mldbg[dashboard]' (or pip install plotly)"
        ) from None
    return go


def subplots(**kwargs: Any) -> Any:
    plotly()
    from plotly.subplots import make_subplots

    return make_subplots(**kwargs)


def save(fig: Any, path: str | os.PathLike[str]) -> Path:
    """Write `fig` to `path`: `.html` with plotly.js inlined (opens offline, no CDN), or an image
    (`.png`, `.svg`, `.pdf`...) when kaleido is installed."""
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix in (".html", ".htm"):
        fig.write_html(target, include_plotlyjs=True, full_html=True)
    elif suffix in IMAGE_SUFFIXES:
        if importlib.util.find_spec("kaleido") is None:
            raise InvalidConfig(
                f"writing {target.name} needs kaleido (pip install kaleido); or save as .html, "
                "which needs nothing more"
            )
        fig.write_image(target)
    else:
        raise InvalidConfig(
            f"cannot save a plot as {target.name!r}: use .html (self-contained) or, with kaleido "
            f"installed, one of {', '.join(IMAGE_SUFFIXES)}"
        )
    return target
