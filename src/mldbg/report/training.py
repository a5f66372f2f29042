"""The training report of a recorded run: `mldbg report PATH -o report.html`.

For an XGBoost run it holds the sections of SageMaker Debugger's XGBoost training report:
label distribution, loss per iteration, feature importance, confusion matrix, per-class
accuracy over iterations, ROC for binary tasks, residuals for regression, and the findings of
the rules. Any other run gets the sections its recorded data allows: losses on the global-step
axis with one point per evaluation pass (`mldbg.report.timeline`), labels over every recorded
batch, per-layer health (`mldbg.report.layers`), predictions, and the findings, also marked on
the charts they concern. Every section reads the trial; nothing here knows a framework.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.errors import CorruptRecord, MldbgError
from mldbg.report import html, layers, svg
from mldbg.report.svg import Series
from mldbg.report.timeline import LOSS_RULES, Timeline, finding_marks
from mldbg.store import layout, markers
from mldbg.store.markers import WorkerMeta
from mldbg.store.run_info import IMPORTANCE_TYPES, RunInfo, read_run_info
from mldbg.trial import Trial, create_trial

MODES = (Mode.TRAIN, Mode.EVAL)
TOP_FEATURES = 20


@dataclass
class Prediction:
    """Labels and predictions of one data set at one saved step."""

    labels: np.ndarray
    predictions: np.ndarray  # class indices (classification) or values (regression)
    scores: np.ndarray | None  # probability of the positive class / of each class


class _Run:
    """What the sections need to know about the run, read once."""

    def __init__(self, trial: Trial):
        self.trial = trial
        self.damaged: list[tuple[str, str]] = []  # (damaged record, what the report left out)
        self.info: RunInfo | None = read_run_info(trial)
        self.xgboost = self.info is not None
        self.x_label = "iteration" if self.xgboost else "global step"
        self.timeline = Timeline(trial)
        self.found: Sequence[Any] = ()  # the rule findings, drawn on the charts they concern
        self.meta = _meta(trial)
        self.names = {Mode.TRAIN: "train", Mode.EVAL: "validation"}
        if self.info is not None:
            self.names[Mode.TRAIN] = self.info.train_set or "train"
            self.names[Mode.EVAL] = self.info.validation_set or "validation"
        self.label_name = _first(trial, "labels", "labels")
        self.pred_name = _first(trial, "predictions", "predictions")
        self.score_name = "probabilities" if trial.has_tensor("probabilities") else None
        try:
            self.task = self._task()
        except CorruptRecord as e:
            self.damaged.append((str(e), "the task (classification or regression) is unknown"))
            self.task = "unknown"

    def _task(self) -> str:
        if self.info is not None and self.info.task != "unknown":
            return self.info.task
        steps = [(m, s) for m in MODES for s in self.prediction_steps(m)[-1:]]
        if not steps:
            return "unknown"
        mode, step = steps[0]
        assert self.label_name is not None  # prediction_steps() is empty without it
        y = np.asarray(self.trial.tensor(self.label_name).value(step, mode=mode)).ravel()
        integral = y.size > 0 and np.all(np.isfinite(y)) and np.all(y == np.round(y))
        if integral and len(np.unique(y)) <= 50:
            return "binary" if y.max() <= 1 and y.min() >= 0 else "multiclass"
        return "regression"

    def x_of(self, mode: Mode, mode_step: int) -> int:
        """Where a step of `mode` is drawn: the iteration of an XGBoost run, else the global
        step of the TRAIN step (an evaluation pass at the TRAIN step it followed)."""
        if self.xgboost:
            return mode_step
        return self.timeline.x(self.trial.global_step(mode, mode_step))

    @property
    def classification(self) -> bool:
        return self.task in ("binary", "multiclass")

    # labels and predictions ---------------------------------------------------------------
    def prediction_steps(self, mode: Mode) -> list[int]:
        if self.label_name is None or self.pred_name is None:
            return []
        labels = self._raw_steps(self.label_name, mode)
        preds = set(self._raw_steps(self.pred_name, mode))
        return [s for s in labels if s in preds]

    def _raw_steps(self, name: str, mode: Mode) -> list[int]:
        """The mode steps where `name`'s raw value was saved (a two-line hook saves only the
        class counts of labels and predictions at most steps: those are not values to plot)."""
        records = self.trial.records(name, mode=mode)
        return sorted(set(records.mode_step[records.has_raw].tolist()))

    def prediction(self, mode: Mode, mode_step: int) -> Prediction:
        t = self.trial
        # callers take mode_step from prediction_steps(), which is empty without both tensors
        assert self.label_name is not None and self.pred_name is not None
        y = np.asarray(t.tensor(self.label_name).value(mode_step, mode=mode))
        p = np.asarray(t.tensor(self.pred_name).value(mode_step, mode=mode))
        scores = None
        if self.score_name and t.tensor(self.score_name).has_step(mode_step, mode):
            scores = np.asarray(t.tensor(self.score_name).value(mode_step, mode=mode), dtype=float)
        if self.classification:
            if p.ndim == 2 and p.shape[1] > 1:  # scores or logits per class
                if scores is None:
                    z = np.exp(p - p.max(axis=1, keepdims=True))
                    scores = z / z.sum(axis=1, keepdims=True)
                p = p.argmax(axis=1)
            elif p.dtype.kind == "f" and self.task == "binary" and np.all((p >= 0) & (p <= 1)):
                scores = p if scores is None else scores
                p = (p > 0.5).astype(int)
            y = y.reshape(-1).astype(int) if y.ndim <= 1 or y.shape[-1] == 1 else y.argmax(axis=-1)
            p = p.reshape(-1).astype(int)
        return Prediction(y, p, scores)

    def last_prediction(self, mode: Mode) -> Prediction | None:
        steps = self.prediction_steps(mode)
        return self.prediction(mode, steps[-1]) if steps else None

    def modes_with_predictions(self) -> list[Mode]:
        return [m for m in MODES if self.prediction_steps(m)]


# the sections -----------------------------------------------------------------------------
def _summary(run: _Run, found: Sequence[Any], damaged: int = 0, predictions: bool = True) -> html.Section:
    t, info = run.trial, run.info
    rows: list[tuple[str, Any]] = [("run", t.path)]
    if run.meta is not None and run.meta.framework:
        rows.append(("framework", run.meta.framework))
    rows.append(("state", "finished" if t.loaded_all_steps else "still running, or ended without closing"))
    for mode in MODES:
        steps = t.steps(mode)
        if steps:
            passes = len(run.timeline.passes_of(mode)) if mode != Mode.TRAIN and not run.xgboost else 0
            rows.append(
                (
                    f"{mode.name.lower()} steps saved",
                    f"{len(steps)} ({steps[0]}..{steps[-1]})"
                    + (f" in {passes} evaluation passes" if passes else ""),
                )
            )
    if info is not None:
        rows += [
            ("objective", info.objective),
            ("task", info.task + (f" ({info.num_class} classes)" if info.num_class > 1 else "")),
            ("features", len(info.feature_names)),
            ("boosting rounds", info.rounds),
            ("training set", info.train_set or "not recorded"),
            ("validation set", info.validation_set or "none"),
        ]
        if info.best_iteration is not None:
            rows.append(("best iteration (early stopping)", info.best_iteration))
    for mode in run.modes_with_predictions() if predictions else ():
        last = run.last_prediction(mode)
        if last is not None:
            rows.append((f"{run.names[mode]} rows", last.labels.shape[0]))
    rows.append(("rule findings", len(found)))
    if damaged:
        rows.append(("damaged data", f"{damaged} files or records, left out (see Damaged data)"))
    body = html.table(["", ""], rows)
    if info is not None and info.params:
        params = sorted((k, json.dumps(v) if not isinstance(v, str) else v) for k, v in info.params.items())
        body += html.details(
            f"{len(params)} parameters passed to XGBoost", html.table(["parameter", "value"], params)
        )
    return html.Section("summary", "Summary", body)


def label_counts(
    trial: Trial, label_name: str | None, damaged: list[tuple[str, str]] | None = None
) -> dict[Mode, tuple[np.ndarray, int]]:
    """Per mode, the labels of every recorded batch counted by class (the `class_counts`
    statistic summed over all its records, every worker), with the number of batches. The
    last bucket counts labels outside the classes. Empty when the statistic was not recorded.
    A damaged record is left out and named in `damaged` (without it, it raises)."""
    if label_name is None:
        return {}
    key = trial.vector_statistics(label_name).get("class_counts")
    if key is None:
        return {}
    recs = trial.records(key)
    out: dict[Mode, tuple[np.ndarray, int]] = {}
    for i, mode in enumerate(recs.mode.tolist()):
        try:
            counts = np.asarray(trial.read(recs[i]), dtype=np.int64).ravel()
        except CorruptRecord as e:
            if damaged is None:
                raise
            damaged.append((str(e), "left out of the label distribution"))
            continue
        total, batches = out.get(Mode(mode), (np.zeros(1, dtype=np.int64), 0))
        if total.size < counts.size:  # more classes seen later: the outside bucket moves
            grown = np.zeros(counts.size, dtype=np.int64)
            grown[: total.size - 1] = total[:-1]
            grown[-1] = total[-1]
            total = grown
        total[: counts.size - 1] += counts[:-1]
        total[-1] += counts[-1]
        out[Mode(mode)] = (total, batches + 1)
    return out


def _labels(run: _Run) -> html.Section | None:
    counted = {m: c for m, c in label_counts(run.trial, run.label_name, run.damaged).items() if m in MODES}
    if counted and all(c[:-1].sum() >= c[-1] for c, _ in counted.values()):  # class ids, mostly
        return _class_shares(
            run,
            {run.names[m]: c for m, (c, _) in sorted(counted.items())},
            "; ".join(
                f"{run.names[m]}: {n} batches, {int(c.sum())} labels" for m, (c, n) in sorted(counted.items())
            ),
        )
    name = run.label_name
    modes = [m for m in MODES if name is not None and run._raw_steps(name, m)]
    if name is None or not modes:
        return None
    tensor = run.trial.tensor(name)
    if run.xgboost:  # each iteration records the whole data set: the last one is all of it
        picked = {m: run._raw_steps(name, m)[-1:] for m in modes}
        where = "the data sets at the last iteration"
    else:  # batches: every saved one
        picked = {m: run._raw_steps(name, m) for m in modes}
        where = "every saved batch: " + "; ".join(f"{run.names[m]}: {len(picked[m])} batches" for m in modes)
    sets = [
        (run.names[m], np.concatenate([_label_rows(tensor.value(s, mode=m)) for s in steps]))
        for m, steps in picked.items()
    ]
    classes_known = run.classification or (run.task == "unknown" and all(_integral(y) for _, y in sets))
    if classes_known:
        ids = [
            (n, (y.ravel() if y.ndim <= 1 or y.shape[-1] == 1 else y.argmax(axis=-1)).astype(int))
            for n, y in sets
        ]
        classes = int(max(int(y.max(initial=0)) for _, y in ids) + 1)
        counts = {n: np.r_[np.bincount(y, minlength=classes), 0] for n, y in ids}
        return _class_shares(run, counts, where)
    sets = [(n, y.ravel()) for n, y in sets]
    chart = svg.histogram(sets, title="Distribution of the labels", x_label="label")
    return html.Section("labels", "Label distribution", chart, note=f"Over {where}.")


def _label_rows(value: np.ndarray) -> np.ndarray:
    """A batch of labels as one entry per label: class ids or values flat, one-hot or
    probability rows as rows."""
    y = np.asarray(value)
    return y.reshape(-1, y.shape[-1]) if y.ndim >= 2 and y.shape[-1] > 1 else y.reshape(-1)


def _integral(y: np.ndarray) -> bool:
    y = np.asarray(y)
    if y.ndim >= 2 and y.shape[-1] > 1:  # one-hot or probabilities: classes
        return True
    return bool(y.size and np.all(np.isfinite(y)) and np.all(y == np.round(y)) and len(np.unique(y)) <= 50)


def _class_shares(run: _Run, counts: dict[str, np.ndarray], where: str) -> html.Section:
    """Bars of each class's share per data set, a table of the counts; the last entry of each
    count vector is the labels outside the classes."""
    classes = max(c.size for c in counts.values()) - 1
    counts = {
        n: np.r_[c[:-1], np.zeros(classes + 1 - c.size, dtype=c.dtype), c[-1]] for n, c in counts.items()
    }
    outside = any(c[-1] for c in counts.values())
    groups = [Series(n, [], (c[:classes] / max(c.sum(), 1)).tolist()) for n, c in counts.items()]
    chart = svg.bar_chart(
        [str(c) for c in range(classes)],
        groups,
        title="Share of each class",
        value_label="share",
        percent=True,
    )
    rows: list[list[Any]] = [[c, *(int(cnt[c]) for cnt in counts.values())] for c in range(classes)]
    if outside:
        rows.append(["outside the classes", *(int(cnt[-1]) for cnt in counts.values())])
    ratio = [
        f"{n}: largest/smallest class = {cnt[:classes].max() / max(cnt[:classes].min(), 1):.1f}"
        for n, cnt in counts.items()
    ]
    table = html.table(["class", *counts], rows, numeric=range(1, len(counts) + 1))
    body = html.grid([chart, table])
    return html.Section("labels", "Label distribution", body, note=f"Over {where}. " + "; ".join(ratio))


def _losses(run: _Run) -> html.Section | None:
    t = run.trial
    charts = []
    if run.xgboost:
        by_metric: dict[str, list[Series]] = {}
        for name in t.tensor_names(collection="metrics"):
            set_name, _, metric = name.partition("-")
            tensor = t.tensor(name)
            mode = next((m for m in MODES if tensor.steps(m)), None)
            if mode is None:
                continue
            values = tensor.values(mode)
            line = Series(set_name, list(values), [float(v) for v in values.values()])
            by_metric.setdefault(metric, []).append(line)
        for metric, lines in sorted(by_metric.items()):
            charts.append(svg.line_chart(lines, title=metric, x_label=run.x_label, y_label=metric))
        note = "Each evaluation metric per boosting iteration, one line per evaluation set."
    else:
        weights = _samples_by_step(t, run.label_name)
        for name in t.tensor_names(collection="losses"):
            by_step = scalar_by_step(t, name, run.damaged)
            train = [s for s in by_step if run.timeline.x(s) == s]
            lines = [Series("train", train, [by_step[s] for s in train])] if train else []
            for mode, label in ((Mode.EVAL, "eval"), (Mode.PREDICT, "predict")):
                xs, ys = [], []
                for p in run.timeline.passes_of(mode):
                    saved = [s for s in p.steps if s in by_step]
                    if saved:
                        w = np.array([weights.get(s, 1.0) for s in saved])
                        xs.append(p.x)
                        ys.append(float(np.dot(w, [by_step[s] for s in saved]) / w.sum()))
                if xs:
                    lines.append(Series(f"{label} (per pass)", xs, ys, points=True))
            marks = finding_marks(run.found, {name}, run.timeline, rules=LOSS_RULES)
            charts.append(svg.line_chart(lines, title=name, x_label=run.x_label, y_label="loss", marks=marks))
        note = (
            "Each tensor of the losses collection against the global step of training; an "
            "evaluation pass is one point (the mean over its batches, weighted by their samples) "
            "at the train step it followed. Dashed red lines: where a rule fired."
        )
    if not charts:
        return None
    return html.Section("loss", "Loss per iteration" if run.xgboost else "Loss", html.grid(charts), note=note)


def _importance(run: _Run) -> html.Section | None:
    t = run.trial
    kinds = [k for k in IMPORTANCE_TYPES if t.has_tensor(f"feature_importance/{k}")]
    if not kinds:
        return None
    last = t.tensor(f"feature_importance/{kinds[0]}").steps()[-1]
    vectors = {k: np.asarray(t.tensor(f"feature_importance/{k}").value(last), dtype=float) for k in kinds}
    names = run.info.feature_names if run.info else []

    def label(i: int) -> str:
        return names[i] if i < len(names) else f"f{i}"

    charts = []
    for kind in ("weight", "gain", "cover"):
        v = vectors.get(kind)
        if v is None or v.sum() <= 0:
            continue
        share = v / v.sum()
        top = [int(i) for i in np.argsort(share)[::-1][:TOP_FEATURES] if share[i] > 0]
        charts.append(
            svg.bar_chart(
                [label(i) for i in top], [Series(kind, [], share[top].tolist())],
                title=f"{kind}: share of the total", horizontal=True, percent=True,
            )
        )  # fmt: skip
    order = np.argsort(vectors[kinds[0]])[::-1]
    rows = [[label(int(i)), *(svg.fmt(float(vectors[k][i])) for k in kinds)] for i in order]
    unused = int((vectors[kinds[0]] == 0).sum())
    body = html.grid(charts) + html.details(
        f"all {len(order)} features ({unused} never used in a split)",
        html.table(["feature", *kinds], rows, numeric=range(1, len(kinds) + 1)),
    )
    note = (
        f"Importance at {run.x_label} {t.mode_step(last)}: weight = number of splits on the feature, "
        "gain = average loss reduction of its splits, cover = average number of rows its splits route."
    )
    shap = _shap(run, label)
    return html.Section(
        "feature-importance", "Feature importance", body + (html.grid([shap]) if shap else ""), note=note
    )


def _shap(run: _Run, label: Any) -> str:
    t = run.trial
    if not t.has_tensor("shap/mean_abs"):
        return ""
    tensor = t.tensor("shap/mean_abs")
    step = tensor.steps()[-1]
    v = np.asarray(tensor.value(step), dtype=float)
    v = v.reshape(-1, v.shape[-1]).mean(axis=0)[:-1]  # the last column is the bias
    top = [int(i) for i in np.argsort(v)[::-1][:TOP_FEATURES]]
    return svg.bar_chart(
        [label(i) for i in top], [Series("mean |SHAP|", [], v[top].tolist())], horizontal=True,
        title=f"mean |SHAP value| at {run.x_label} {t.mode_step(step)} ({run.names.get(t.mode(step), '')})",
    )  # fmt: skip


def _trees(run: _Run) -> html.Section | None:
    t = run.trial
    if not t.has_tensor("trees/depth"):
        return None
    depth = t.tensor("trees/depth").values()
    leaves = t.tensor("trees/leaves").values() if t.has_tensor("trees/leaves") else {}
    xs = [t.mode_step(s) for s in depth]
    lines = [Series("deepest tree", xs, [float(v.max()) if v.size else 0.0 for v in depth.values()])]
    if any(v.size > 1 for v in depth.values()):  # several trees per iteration
        lines.append(
            Series(
                "mean depth", xs, [float(v.mean()) if v.size else 0.0 for v in depth.values()], dashed=True
            )
        )
    charts = [svg.line_chart(lines, title="Tree depth", x_label=run.x_label, y_label="depth")]
    if leaves:
        charts.append(
            svg.line_chart(
                [Series("leaves per tree", [t.mode_step(s) for s in leaves], [float(v.mean()) if v.size else 0.0 for v in leaves.values()])],
                title="Leaves per tree", x_label=run.x_label, y_label="leaves",
            )
        )  # fmt: skip
    all_depths = np.concatenate([v for v in depth.values()]) if depth else np.zeros(0)
    note = f"{all_depths.size} trees; deepest {int(all_depths.max()) if all_depths.size else 0} levels."
    return html.Section("trees", "Tree structure", html.grid(charts), note=note)


def _confusion(run: _Run) -> html.Section | None:
    if not run.classification:
        return None
    modes = run.modes_with_predictions()
    if not modes:
        return None
    charts, tables = [], []
    for mode in reversed(modes):  # validation first
        steps = run.prediction_steps(mode)
        p = run.prediction(mode, steps[-1])
        k = int(max(p.labels.max(initial=0), p.predictions.max(initial=0)) + 1)
        m = np.zeros((k, k), dtype=int)
        np.add.at(m, (p.labels, p.predictions), 1)
        names = [str(i) for i in range(k)]
        charts.append(
            svg.heatmap(
                m, names, names, title=f"{run.names[mode]} at {run.x_label} {run.x_of(mode, steps[-1])}",
                row_title="label", col_title="prediction",
            )
        )  # fmt: skip
        rows = []
        for c in range(k):
            support, predicted, hit = m[c].sum(), m[:, c].sum(), m[c, c]
            recall = hit / support if support else float("nan")
            precision = hit / predicted if predicted else float("nan")
            f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else float("nan")
            rows.append([c, int(support), f"{precision:.3f}", f"{recall:.3f}", f"{f1:.3f}"])
        acc = np.trace(m) / max(m.sum(), 1)
        tables.append(
            f"<p><b>{run.names[mode]}</b>: accuracy {acc:.3f}</p>"
            + html.table(["class", "support", "precision", "recall", "F1"], rows, numeric=(1, 2, 3, 4))
        )
    body = html.grid(charts) + html.grid(tables)
    return html.Section(
        "confusion",
        "Confusion matrix",
        body,
        note="Rows are labels, columns predictions, at the last saved step.",
    )


def _per_class(run: _Run) -> html.Section | None:
    if not run.classification:
        return None
    charts = []
    for mode in reversed(run.modes_with_predictions()):
        steps = run.prediction_steps(mode)
        hits: dict[int, dict[int, list[int]]] = {}  # class -> x -> [right, seen]
        for s in steps:  # the batches of an evaluation pass add up at its x
            p, x = run.prediction(mode, s), run.x_of(mode, s)
            for c in np.unique(p.labels):
                mine = p.labels == c
                right_seen = hits.setdefault(int(c), {}).setdefault(x, [0, 0])
                right_seen[0] += int((p.predictions[mine] == c).sum())
                right_seen[1] += int(mine.sum())
        series = [
            Series(f"class {c}", list(by_x), [r / max(n, 1) for r, n in by_x.values()])
            for c, by_x in sorted(hits.items())
        ]
        charts.append(
            svg.line_chart(
                series, title=f"{run.names[mode]}: accuracy of each class", x_label=run.x_label,
                y_label="share predicted right", y_range=(0.0, 1.0),
            )
        )  # fmt: skip
    if not charts:
        return None
    note = (
        "The diagonal of the confusion matrix over the saved steps: the share of each class predicted right."
    )
    return html.Section("per-class", "Per-class accuracy over iterations", html.grid(charts), note=note)


def _roc(run: _Run) -> html.Section | None:
    if run.task != "binary":
        return None
    series = []
    for mode in reversed(run.modes_with_predictions()):
        p = run.last_prediction(mode)
        if p is None or p.scores is None:
            continue
        score = p.scores[:, 1] if p.scores.ndim == 2 else p.scores.reshape(-1)
        fpr, tpr = roc_curve(p.labels, score)
        auc = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))  # trapezoids
        series.append(Series(f"{run.names[mode]} (AUC {auc:.3f})", fpr.tolist(), tpr.tolist()))
    if not series:
        return None
    chart = svg.line_chart(
        series, title="ROC at the last saved step", x_label="false positive rate", y_label="true positive rate",
        points=False, y_range=(0.0, 1.0), diagonal=True,
    )  # fmt: skip
    return html.Section("roc", "ROC curve", html.grid([chart]), note="The dashed diagonal is a random guess.")


def _residuals(run: _Run) -> html.Section | None:
    if run.task not in ("regression", "ranking"):
        return None
    modes = run.modes_with_predictions()
    if not modes:
        return None
    sets = []
    for mode in modes:
        p = run.last_prediction(mode)
        if p is not None and p.predictions.size == p.labels.size:
            sets.append(
                (run.names[mode], (p.predictions.reshape(-1) - p.labels.reshape(-1)).astype(float), p)
            )
    if not sets:
        return None
    charts = [
        svg.histogram(
            [(n, r) for n, r, _ in sets], title="Residuals (prediction - label)", x_label="residual"
        )
    ]
    name, _, last = sets[-1]
    charts.append(
        svg.scatter(last.labels, last.predictions, title=f"{name}: prediction against label", x_label="label",
                    y_label="prediction", diagonal=True)
    )  # fmt: skip
    mae = []
    for mode in modes:
        sums: dict[int, list[float]] = {}  # x -> [sum |error|, count]
        for s in run.prediction_steps(mode):
            p = run.prediction(mode, s)
            err = np.abs(p.predictions.reshape(-1) - p.labels.reshape(-1))
            acc = sums.setdefault(run.x_of(mode, s), [0.0, 0])
            acc[0] += float(err.sum())
            acc[1] += err.size
        mae.append(Series(run.names[mode], list(sums), [e / max(n, 1) for e, n in sums.values()]))
    charts.append(
        svg.line_chart(mae, title="Mean absolute error", x_label=run.x_label, y_label="|prediction - label|")
    )
    rows = [[n, f"{r.mean():.4g}", f"{r.std():.4g}", f"{np.abs(r).mean():.4g}"] for n, r, _ in sets]
    body = html.grid(charts) + html.table(
        ["set", "mean residual", "std", "mean |residual|"], rows, numeric=(1, 2, 3)
    )
    return html.Section(
        "residuals", "Residuals", body, note="A centered, narrow distribution is what a good regressor shows."
    )


def _findings_section(
    found: Sequence[Any], skipped: dict[str, str], error: str | None, trial: Trial | None = None
) -> html.Section:
    """The findings grouped into diagnoses (one per root cause, `mldbg.diagnose`), each with its
    findings below it; the findings flat when the diagnoses cannot be made."""
    grouped = None
    if found and not error:
        try:
            from mldbg.rules.diagnosis import RunFacts, group

            grouped = group(found, RunFacts.of(trial) if trial is not None else None)
        except (ImportError, MldbgError):
            grouped = None
    if grouped is None:
        return html.Section("findings", "Rule findings", html.findings(found, skipped, error))
    n = len(grouped)
    return html.Section(
        "findings", "Rule findings", html.diagnoses(grouped, skipped, error),
        note=f"{len(found)} findings, grouped into {n} diagnos{'es' if n != 1 else 'is'}: one per root "
        "cause, with how sure it is and one advice; its findings below it.",
    )  # fmt: skip


def scalar_by_step(trial: Trial, name: str, damaged: list[tuple[str, str]] | None = None) -> dict[int, float]:
    """Global step -> the mean value of tensor `name` there (averaged over workers): its raw
    value, or its saved `mean` reduction or statistic when only that was kept. With `damaged`,
    a damaged record is left out (its saved mean used where there is one) and named there;
    without it, it raises CorruptRecord."""
    recs = trial.records(name)
    if not len(recs):
        return {}
    cols = trial.statistic_columns(name)
    raw = np.flatnonzero(recs.has_raw)
    values = np.full(len(recs), np.nan)
    if raw.size:
        try:
            stacked = trial.stacked(name, raw)
        except CorruptRecord:
            if damaged is None:
                raise
            stacked = None  # read one by one below, to keep all but the damaged
        if stacked is not None:
            values[raw] = stacked.reshape(raw.size, -1).mean(axis=1)
        else:
            for i in raw.tolist():
                try:
                    values[i] = float(np.mean(trial.read(recs[i])))
                except CorruptRecord as e:
                    if damaged is None:
                        raise
                    damaged.append((str(e), f"left out of the chart of {name}"))
    if "mean" in cols:
        values = np.where(np.isnan(values), cols["mean"], values)
    sums: dict[int, list[float]] = {}
    for step, v in zip(recs.step.tolist(), values.tolist(), strict=True):
        if not np.isnan(v):  # inf is a value to show; NaN is "not saved"
            acc = sums.setdefault(step, [0.0, 0])
            acc[0] += v
            acc[1] += 1
    return {s: total / n for s, (total, n) in sorted(sums.items())}


def _samples_by_step(trial: Trial, label_name: str | None) -> dict[int, float]:
    """Global step -> batch size, from the labels' `samples` statistic where recorded."""
    if label_name is None:
        return {}
    samples = trial.statistic_columns(label_name).get("samples")
    if samples is None:
        return {}
    steps = trial.records(label_name).step
    return {int(s): float(n) for s, n in zip(steps, samples, strict=True) if np.isfinite(n) and n > 0}


# entry points -----------------------------------------------------------------------------
@dataclass
class Rendered:
    """A report's HTML and the damaged data it met: each CorruptRecord's message (naming the
    file and the record) -> what the report and the rules left out; empty for an intact run."""

    html: str
    damaged: dict[str, list[str]]


SECTION_TITLES = {
    _labels: ("labels", "Label distribution"), _losses: ("loss", "Loss"),
    _importance: ("feature-importance", "Feature importance"), _trees: ("trees", "Tree structure"),
    _confusion: ("confusion", "Confusion matrix"), _per_class: ("per-class", "Per-class accuracy"),
    _roc: ("roc", "ROC curve"), _residuals: ("residuals", "Residuals"),
}  # fmt: skip


def render(
    run: str | os.PathLike[str] | Trial, rules: Sequence[Any] | None = None, check: bool = True
) -> Rendered:
    """The report of a run, written around damaged data: a damaged record (a checksum
    mismatch, a truncated or missing data file) is left out of the chart it belongs to, a
    section that cannot be drawn without it says so, damaged index or marker files are read
    around (`on_corrupt="skip"`), and a "Damaged data" section names each file and record."""
    quiet = _QuietDamageLog()
    logging.getLogger("mldbg").addFilter(quiet)
    try:
        with warnings.catch_warnings():  # skipped files are listed in the report instead
            warnings.filterwarnings("ignore", message="mldbg: skipping", category=RuntimeWarning)
            trial = run if isinstance(run, Trial) else create_trial(run, on_corrupt="skip")
            return _render(trial, rules, check)
    finally:
        logging.getLogger("mldbg").removeFilter(quiet)


def _render(trial: Trial, rules: Sequence[Any] | None, check: bool) -> Rendered:
    if not trial.workers():
        raise MldbgError(f"no mldbg run at {trial.path} (no workers/ folder with records)")
    found, skipped, error, met = (
        run_rules(trial, rules) if check else ([], {}, "rules were not run (--no-rules)", [])
    )
    r = _Run(trial)
    r.found = found
    r.damaged += met
    parts = []
    for make, (key, title) in SECTION_TITLES.items():
        try:
            section = make(r)
        except CorruptRecord as e:
            r.damaged.append((str(e), f"section {title!r} not drawn"))
            section = _not_drawn(key, title, e)
        if section is not None:
            parts.append(section)
        if make is _losses and not r.xgboost:
            try:
                per_layer = layers.section(trial, r.timeline, found, r.damaged)
            except CorruptRecord as e:
                r.damaged.append((str(e), "section 'Per-layer health' not drawn"))
                per_layer = _not_drawn("layers", "Per-layer health", e)
            if per_layer is not None:
                parts.append(per_layer)
    r.damaged += [(text, "skipped when the run was read") for text in trial.corrupt_files]
    try:
        summary = _summary(r, found, len({text for text, _ in r.damaged}))
    except CorruptRecord as e:  # the rows counting predictions read values
        r.damaged.append((str(e), "rows of the summary left out"))
        summary = _summary(r, found, len({text for text, _ in r.damaged}), predictions=False)
    damaged: dict[str, list[str]] = {}
    for text, what in r.damaged:
        if what not in damaged.setdefault(text, []):
            damaged[text].append(what)
    head = [summary] + ([_damaged_section(damaged)] if damaged else [])
    parts = [*head, _findings_section(found, skipped, error, trial), *parts]
    kind = "XGBoost training report" if r.xgboost else "Training report"
    return Rendered(html.page(f"mldbg: {kind}", str(trial.path), parts), damaged)


def _not_drawn(key: str, title: str, error: CorruptRecord) -> html.Section:
    return html.Section(
        key, title, html.paragraph(f"Not drawn: it needs data that is damaged: {error}"),
        note="See the section Damaged data.",
    )  # fmt: skip


def _damaged_section(damaged: dict[str, list[str]]) -> html.Section:
    items = "".join(
        f"<li><code>{escape(text)}</code>: {escape('; '.join(what))}</li>" for text, what in damaged.items()
    )
    return html.Section(
        "damaged", "Damaged data", f"<ul>{items}</ul>",
        note=f"{len(damaged)} damaged files or records: the report shows everything else and "
        "leaves these out; after each, what it left out.",
    )  # fmt: skip


class _QuietDamageLog(logging.Filter):
    """Drops the rule runner's log lines about damaged records while a report is built: the
    report lists them (and `mldbg report` says so once)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("mldbg: rule %s skipped step")


def build_report(
    run: str | os.PathLike[str] | Trial, rules: Sequence[Any] | None = None, check: bool = True
) -> str:
    """The report of a run as an HTML string; `rules` as for `mldbg.check` (None: default set).
    Damaged data is left out and named in the report (see `render`)."""
    return render(run, rules, check).html


def write_report(run: str | os.PathLike[str] | Trial, out: str | os.PathLike[str], **options: Any) -> Path:
    """Write `build_report(run)` to `out` and return its path."""
    target = Path(out)
    target.write_text(build_report(run, **options), encoding="utf-8")
    return target


def run_rules(
    trial: Trial, rules: Sequence[Any] | None
) -> tuple[list[Any], dict[str, str], str | None, list[tuple[str, str]]]:
    """Findings, rules skipped (name -> why), an error note if the rules could not run, and
    the damaged records the rules met (and skipped)."""
    try:
        from mldbg.rules.runner import RuleRunner
        from mldbg.rules.specs import resolve_rules
    except ImportError as e:
        return [], {}, f"the rule engine is not available in this installation ({e})", []
    runner = RuleRunner(trial, resolve_rules(rules))
    found = list(runner.run_available())
    if trial.loaded_all_steps:
        found += list(runner.finish())
    met = [(text, f"skipped by the rule {rule}") for text, rule in runner.corrupt.items()]
    return found, _skip_reasons(runner, trial), None, met


def _skip_reasons(runner: Any, trial: Trial) -> dict[str, str]:
    """The skipped rules with the reason that holds for this run and what to do
    (`mldbg.report.skips`); rules that read only another framework's data are left out."""
    from mldbg.report.skips import explain

    skipped = dict(getattr(runner, "skipped", {}) or {})
    try:
        skips = explain(skipped, runner.rules, trial, unchecked=getattr(runner, "unchecked", {}))
    except Exception:  # the plain reasons rather than none
        return skipped
    return {s.rule: s.why + (f"; {s.advice}" if s.advice else "") for s in skips if s.kind != "framework"}


def roc_curve(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """False and true positive rates at every distinct score threshold, from (0, 0) to (1, 1)."""
    y = np.asarray(labels).reshape(-1) > 0
    s = np.asarray(scores, dtype=float).reshape(-1)
    order = np.argsort(-s, kind="stable")
    y, s = y[order], s[order]
    last = np.r_[np.flatnonzero(np.diff(s)), y.size - 1]  # the last index of each distinct score
    tp = np.cumsum(y)[last]
    fp = (last + 1) - tp
    pos, neg = max(int(y.sum()), 1), max(int((~y).sum()), 1)
    return np.r_[0.0, fp / neg], np.r_[0.0, tp / pos]


def _first(trial: Trial, preferred: str, collection: str) -> str | None:
    if trial.has_tensor(preferred):
        return preferred
    names = trial.tensor_names(collection=collection)
    return names[0] if names else None


def _meta(trial: Trial) -> WorkerMeta | None:
    """The first worker's description; a damaged one is left out of the report."""
    for worker in trial.workers():
        try:
            meta = markers.load(trial.store, layout.meta_key(worker), WorkerMeta)
        except CorruptRecord:
            continue
        if meta is not None:
            return meta
    return None
