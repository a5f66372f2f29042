"""What an XGBoost training holds, read into NumPy for `mldbg.xgboost.Hook`.

The adapter decides when to save and under which names; this module knows XGBoost's objects:
where the running `xgb.train` / `xgb.cv` call keeps its data sets, what a booster's config
says about the task, and how to get importance, tree sizes, metrics, labels and predictions
out of a booster. Kept apart so that the hook reads as the lifecycle it follows, and so that
what depends on XGBoost's internals (call frames, config JSON, text dumps) is in one place.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import numpy as np
import xgboost

from mldbg.config import Mode
from mldbg.store.run_info import RunInfo

log = logging.getLogger("mldbg")

# built-in evaluation metrics that are losses (lower is better, and not a rate such as `error`)
LOSS_METRICS = frozenset({
    "rmse", "rmsle", "mae", "mape", "mphe", "logloss", "mlogloss", "poisson-nloglik",
    "gamma-nloglik", "cox-nloglik", "gamma-deviance", "tweedie-nloglik", "aft-nloglik",
    "quantile", "expectile", "interval-regression-nloglik",
})  # fmt: skip
_TRAIN_CODE = inspect.unwrap(xgboost.training.train).__code__
_CV_CODE = inspect.unwrap(xgboost.training.cv).__code__
_TREE_BOOSTERS = ("gbtree", "dart")

Data = Any  # an xgboost.DMatrix, or (X, y)
Score = float | tuple[float, float]  # xgb.cv scores are (mean, std) over the folds
Pairs = list[tuple[xgboost.Booster, xgboost.DMatrix]]


@dataclass
class TrainingSets:
    """The data of one training: its training and validation sets, or `xgb.cv`'s folds, and
    the sets `xgb.train` does not evaluate itself (the hook evaluates them)."""

    dtrain: xgboost.DMatrix | None = None
    dvalid: xgboost.DMatrix | None = None
    folds: list[Any] | None = None  # xgb.cv's folds (CVPack: .bst, .dtrain, .dtest)
    computed: list[tuple[xgboost.DMatrix, str]] = field(default_factory=list)

    def find(
        self,
        info: RunInfo,
        model: Any,
        train_data: Data | None,
        validation_data: Data | None,
        hyper: Mapping[str, Any],
    ) -> None:
        """Find the sets of the running `xgb.train` or `xgb.cv` call (`model` is what the
        callback was given); note in `info` which evaluation set is which, and the parameters
        (the call's, overridden by the hook's `hyperparameters`)."""
        if is_cv(model):
            if train_data is not None or validation_data is not None:
                log.info(
                    "mldbg: xgb.cv: train_data= and validation_data= ignored; the folds' sets are recorded"
                )
            self._find_folds(info, model, hyper)
        else:
            self._find_sets(info, train_data, validation_data, hyper)

    def _find_sets(
        self, info: RunInfo, train_data: Data | None, validation_data: Data | None, hyper: Mapping[str, Any]
    ) -> None:
        """`xgb.train`'s `dtrain` and `evals` (or the hook's `train_data`, `validation_data`)."""
        call = _training_call(_TRAIN_CODE)
        self.dtrain = dmatrix(train_data) if train_data is not None else call.get("dtrain")
        evals: list[tuple[xgboost.DMatrix, str]] = list(call.get("evals") or [])
        info.eval_sets = [name for _, name in evals]
        info.train_set = next((n for d, n in evals if d is self.dtrain), None)
        if info.train_set is None and "train" in info.eval_sets:
            info.train_set = "train"
        if info.train_set is None and self.dtrain is not None:
            info.train_set = "train"
            self.computed.append((self.dtrain, "train"))
        if validation_data is not None:
            self.dvalid = dmatrix(validation_data)
            info.validation_set = next((n for d, n in evals if d is self.dvalid), None)
            if info.validation_set is None:
                info.validation_set = "validation"
                self.computed.append((self.dvalid, "validation"))
        else:
            others = [(d, n) for d, n in evals if n != info.train_set]
            if others:
                self.dvalid, info.validation_set = others[-1]
        if info.train_set not in info.eval_sets and info.train_set is not None:
            info.eval_sets.insert(0, info.train_set)
        if info.validation_set is not None and info.validation_set not in info.eval_sets:
            info.eval_sets.append(info.validation_set)
        _params(info, dict(call.get("params") or {}), hyper, call)

    def _find_folds(self, info: RunInfo, model: Any, hyper: Mapping[str, Any]) -> None:
        """`xgb.cv` passes a `_PackedBooster` whose `cvfolds` each hold a booster, a training
        set and a test set, the two names its evaluation log uses."""
        self.folds = list(model.cvfolds)
        call = _training_call(_CV_CODE)
        info.cv_folds = len(self.folds)
        info.train_set, info.validation_set, info.eval_sets = "train", "test", ["train", "test"]
        params = dict(call.get("params") or {})  # xgb.cv moved eval_metric into `metrics`
        if call.get("metrics"):
            params.setdefault("eval_metric", list(call["metrics"]))
        _params(info, params, hyper, call)
        info.params.setdefault("nfold", len(self.folds))

    def evaluate(self, model: xgboost.Booster, epoch: int) -> dict[str, dict[str, float]]:
        """Metrics of the sets that `xgb.train` does not evaluate itself."""
        out: dict[str, dict[str, float]] = {}
        for item in model.eval_set(self.computed, epoch).split("\t")[1:]:
            key, _, value = item.rpartition(":")
            set_name, _, metric = key.partition("-")
            out.setdefault(set_name, {})[metric] = float(value)
        return out

    def pairs(self, model: Any, mode: Mode) -> Pairs:
        """The (booster, data) pairs whose labels and predictions a step holds: one, or under
        `xgb.cv` one per fold (its training set in TRAIN, its test set in EVAL)."""
        if self.folds is not None:
            return [(f.bst, f.dtrain if mode == Mode.TRAIN else f.dtest) for f in self.folds]
        data = self.dtrain if mode == Mode.TRAIN else self.dvalid
        return [] if data is None else [(model, data)]

    def boosters(self, model: Any) -> list[xgboost.Booster]:
        return [f.bst for f in self.folds] if self.folds is not None else [model]


def _params(info: RunInfo, params: dict[str, Any], hyper: Mapping[str, Any], call: Mapping[str, Any]) -> None:
    """The call's parameters, overridden by the hook's `hyperparameters`, and the rounds."""
    info.params = {**params, **hyper}
    if "num_boost_round" in call:
        info.params.setdefault("num_boost_round", call["num_boost_round"])


def describe(info: RunInfo, booster: xgboost.Booster, model: Any) -> None:
    """Fill `info` from a booster's config (`model` is what the callback was given)."""
    config = json.loads(booster.save_config())
    learner = config.get("learner", {})
    info.config = config
    info.objective = learner.get("learner_train_param", {}).get("objective", "")
    info.num_class = int(learner.get("learner_model_param", {}).get("num_class", "0") or 0)
    info.task = task_of(info.objective, info.num_class)
    info.feature_names = list(booster.feature_names or [f"f{i}" for i in range(booster.num_features())])
    info.rounds = booster.num_boosted_rounds()
    best = model.attr("best_iteration")
    info.best_iteration = int(best) if best is not None else None


def has_trees(info: RunInfo) -> bool:
    """Does the booster grow trees (not gblinear)? True until its config is read."""
    booster = info.config.get("learner", {}).get("gradient_booster", {})
    return booster.get("name", "gbtree") in _TREE_BOOSTERS


def task_of(objective: str, num_class: int) -> str:
    if objective.startswith("binary:"):
        return "binary"
    if objective.startswith("multi:") or num_class > 1:
        return "multiclass"
    if objective.startswith("rank:"):
        return "ranking"
    if objective.startswith(("reg:", "count:", "survival:")):
        return "regression"
    return "unknown"


def numeric_hyperparameters(info: RunInfo) -> dict[str, float]:
    """The effective tree and learner parameters, then the user's, that are numbers."""
    learner = info.config.get("learner", {})
    sources = [
        learner.get("gradient_booster", {}).get("tree_train_param", {}),
        learner.get("learner_model_param", {}),
        info.params,
    ]
    out: dict[str, float] = {}
    for source in sources:
        for key, value in source.items():
            if isinstance(value, bool):
                value = float(value)
            try:
                out[str(key)] = float(value)
            except (TypeError, ValueError):
                continue
    return out


def tree_stats(dump: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Depth (edges from the root to the deepest leaf), leaves and nodes of each dumped tree.

    Reads XGBoost's text dump, where a node's line is indented by one tab per level.
    """
    depth, leaves, nodes = [], [], []
    for tree in dump:
        lines = [line for line in tree.split("\n") if line.strip()]
        leaf_depths = [len(line) - len(line.lstrip("\t")) for line in lines if ":leaf=" in line]
        depth.append(max(leaf_depths, default=0))
        leaves.append(len(leaf_depths))
        nodes.append(len(lines))
    return (np.asarray(depth, np.int32), np.asarray(leaves, np.int32), np.asarray(nodes, np.int32))


def importance(model: xgboost.Booster, kind: str, names: Sequence[str]) -> np.ndarray:
    """`Booster.get_score` as a vector over every feature (0 where a feature is unused)."""
    index = {n: i for i, n in enumerate(names)}
    out = np.zeros(len(names), dtype=np.float64)
    for name, score in model.get_score(importance_type=kind).items():
        if name in index and not isinstance(score, list):
            out[index[name]] = score
    return out


def is_loss(metric: str, chosen: frozenset[str] | None) -> bool:
    """Does `metric` go into `losses`? `chosen`: the hook's `loss_metrics`, else the built-in losses."""
    if chosen is not None:
        return metric in chosen
    return metric.split("@")[0] in LOSS_METRICS


def last(values: Any) -> Score:
    """The latest score of an evaluation log: a float, or xgb.cv's (mean, std)."""
    v = values[-1]
    return (float(v[0]), float(v[1])) if isinstance(v, tuple) else float(v)


def labels(pairs: Pairs, task: str) -> np.ndarray:
    """The labels of every pair's data, one set after the other (int32 for classifiers)."""
    return _concat([_labels(d, task) for _, d in pairs])


def _labels(data: xgboost.DMatrix, task: str) -> np.ndarray:
    y = data.get_label()
    if y.size != data.num_row() and data.num_row() > 0:
        y = y.reshape(data.num_row(), -1)
    return y.astype(np.int32) if task in ("binary", "multiclass") else y.astype(np.float32)


def predictions(pairs: Pairs, task: str, objective: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Every pair's predictions, one set after the other, and for classifiers their class
    probabilities (None for regression, ranking and `binary:hinge`)."""
    predicted = [_predict(b, d, task, objective) for b, d in pairs]
    probabilities = None if predicted[0][1] is None else _concat([q for _, q in predicted if q is not None])
    return _concat([p for p, _ in predicted]), probabilities


def _predict(
    model: xgboost.Booster, data: xgboost.DMatrix, task: str, objective: str
) -> tuple[np.ndarray, np.ndarray | None]:
    if task not in ("binary", "multiclass"):
        return model.predict(data).astype(np.float32), None
    margin = model.predict(data, output_margin=True).astype(np.float64)
    if task == "binary":
        if objective == "binary:hinge":
            return (margin > 0).astype(np.int32), None
        p = 1.0 / (1.0 + np.exp(-margin))
        return (p > 0.5).astype(np.int32), p.astype(np.float32)
    z = np.exp(margin - margin.max(axis=1, keepdims=True))
    p = z / z.sum(axis=1, keepdims=True)
    return p.argmax(axis=1).astype(np.int32), p.astype(np.float32)


def shap_values(pairs: Pairs) -> np.ndarray:
    """SHAP values (`pred_contribs`) of every pair's data, one set after the other."""
    return _concat([b.predict(d, pred_contribs=True).astype(np.float32) for b, d in pairs])


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def rank_and_world() -> tuple[int, int]:
    """This process's rank and the number of workers of a distributed training."""
    try:
        from xgboost import collective

        if collective.is_distributed():
            return collective.get_rank(), collective.get_world_size()
    except Exception:  # an older or partial build: fall back to the launcher's variables
        pass
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def is_cv(model: Any) -> bool:
    """xgb.cv's `_PackedBooster`, told apart the way XGBoost's own CallbackContainer does."""
    return not isinstance(model, xgboost.Booster) and isinstance(getattr(model, "cvfolds", None), list)


def _training_call(code: Any) -> dict[str, Any]:
    """The arguments of the running `xgb.train` (which the scikit-learn wrappers make) or
    `xgb.cv` call: the frame running `code`."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            return dict(frame.f_locals)
        frame = frame.f_back
    return {}


def dmatrix(data: Data) -> xgboost.DMatrix:
    if isinstance(data, xgboost.DMatrix):
        return data
    if isinstance(data, tuple) and len(data) == 2:
        return xgboost.DMatrix(data[0], label=data[1])
    raise TypeError(f"expected an xgboost.DMatrix or an (X, y) pair, got {type(data).__name__}")
