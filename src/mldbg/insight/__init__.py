"""Insight into a recorded run: plots (Plotly figures) and export to TensorBoard.

Everything reads a run through `mldbg.create_trial` (NumPy arrays by tensor name and step),
whatever framework recorded it. Plotly, scikit-learn and tensorboard are imported only when
a plot or an export is made.

    from mldbg import insight
    fig = insight.distribution("runs/exp1", "fc1.weight")
    insight.save(fig, "fc1.html")
"""

from mldbg.insight.confusion import confusion, confusion_matrix, prediction_steps
from mldbg.insight.distribution import PERCENTILES, distribution, histograms, percentiles
from mldbg.insight.figure import save
from mldbg.insight.saliency import saliency, saliency_map
from mldbg.insight.tensorboard import TensorBoardExport, export_tensorboard
from mldbg.insight.tsne import embedding, tsne

__all__ = [
    "PERCENTILES",
    "TensorBoardExport",
    "confusion",
    "confusion_matrix",
    "distribution",
    "embedding",
    "export_tensorboard",
    "histograms",
    "percentiles",
    "prediction_steps",
    "saliency",
    "saliency_map",
    "save",
    "tsne",
]
