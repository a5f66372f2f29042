"""Plotly, imported only when a plot is made, and `save()`: a figure as a page that opens
offline, plotly.js inlined (one file) or shared by the pages of a folder."""

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


PLOTLY_JS = "plotly.min.js"
PLOTLYJS_CHOICES = ("inline", "shared")


def save(fig: Any, path: str | os.PathLike[str], plotlyjs: str = "inline") -> Path:
    """Write `fig` to `path`: `.html` that opens offline (no CDN), or an image (`.png`,
    `.svg`, `.pdf`...) when kaleido is installed.

    `plotlyjs="inline"` embeds plotly.js (about 4.8 MB) in the page: one file that works on
    its own. `"shared"` writes `plotly.min.js` once beside the page (kept when it is already
    the same bundle) and references it: several pages in one folder share one copy."""
    target = Path(path)
    suffix = target.suffix.lower()
    if plotlyjs not in PLOTLYJS_CHOICES:
        raise InvalidConfig(f"plotlyjs={plotlyjs!r}: use one of {', '.join(PLOTLYJS_CHOICES)}")
    if suffix in (".html", ".htm"):
        if plotlyjs == "shared":
            write_plotly_js(target.parent)
            fig.write_html(target, include_plotlyjs="directory", full_html=True)
        else:
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


def write_plotly_js(folder: str | os.PathLike[str]) -> Path:
    """`folder/plotly.min.js`, the bundle of the installed plotly: written when missing or
    different (a page of a newer plotly must not load an older bundle), else left alone."""
    plotly()
    from plotly.offline import get_plotlyjs

    bundle = get_plotlyjs().encode("utf-8")
    target = Path(folder) / PLOTLY_JS
    target.parent.mkdir(parents=True, exist_ok=True)
    if not (target.is_file() and target.stat().st_size == len(bundle) and target.read_bytes() == bundle):
        target.write_bytes(bundle)
    return target
