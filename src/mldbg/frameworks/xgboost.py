"""XGBoost adapter: `mldbg.xgboost.Hook`, a `TrainingCallback` for `xgb.train` and the
scikit-learn wrappers (`XGBClassifier(callbacks=[hook])`).

What a step is: each boosting iteration is one TRAIN step (opened before the update, closed
after it) holding the training set's values, then, when there is a validation set, one EVAL
step holding the validation set's values. Both have the iteration as their mode step, so
`trial.tensor("logloss").values(mode=Mode.EVAL)` is the validation curve by iteration.

The training and evaluation data are taken from `xgb.train`'s own arguments (the `dtrain`
and `evals` it was called with); `train_data=` / `validation_data=` name them explicitly.
The validation set is the last evaluation set that is not the training data, the one early
stopping watches. Names and layout are documented in docs/xgboost.md.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import FrameType
from typing import Any

import numpy as np
import xgboost
from xgboost.callback import TrainingCallback

from mldbg.config import CollectionConfig, Mode, ReductionConfig, SaveConfig
from mldbg.frameworks.xgboost_info import IMPORTANCE_TYPES, RunInfo, info_key
from mldbg.record.session import RecordingSession
from mldbg.store.base import Store

log = logging.getLogger("mldbg")

EXTRA_COLLECTIONS = ("metrics", "feature_importance", "trees", "hyperparameters", "probabilities", "shap")
DEFAULT_INCLUDED = (
    "losses", "scalars", "metrics", "feature_importance", "trees", "hyperparameters",
    "labels", "predictions", "probabilities",
)  # fmt: skip
# built-in evaluation metrics that are losses (lower is better, and not a rate such as `error`)
LOSS_METRICS = frozenset({
    "rmse", "rmsle", "mae", "mape", "mphe", "logloss", "mlogloss", "poisson-nloglik",
    "gamma-nloglik", "cox-nloglik", "gamma-deviance", "tweedie-nloglik", "aft-nloglik",
    "quantile", "expectile", "interval-regression-nloglik",
})  # fmt: skip
_TRAIN_CODE = inspect.unwrap(xgboost.training.train).__code__
_TREE_BOOSTERS = ("gbtree", "dart")

Data = Any  # an xgboost.DMatrix, or (X, y)


class Hook(TrainingCallback):
    """Records an XGBoost training: pass it in `callbacks=[hook]`. One hook per training run;
    it closes itself when training ends."""

    def __init__(
        self,
        out_dir: str | os.PathLike[str] | Store,
        save_config: SaveConfig | None = None,
        include_collections: Sequence[str] | None = None,
        include_regex: Sequence[str] | str | None = None,
        reduction_config: ReductionConfig | None = None,
        save_all: bool = False,
        include_workers: str = "one",
        collection_configs: Sequence[CollectionConfig] | None = None,
        *,
        train_data: Data | None = None,
        validation_data: Data | None = None,
        hyperparameters: Mapping[str, Any] | None = None,
        predictions_interval: int = 10,
        shap_steps: Sequence[int] = (),
        loss_metrics: Sequence[str] | None = None,
        profiler_config: Any = None,
        rules: Sequence[Any] | None = None,
        actions: Sequence[Any] | None = None,
        **options: Any,
    ):
        """`predictions_interval`: labels, predictions and probabilities are saved every that
        many iterations (unless `save_config` or their own `CollectionConfig` says otherwise).
        `shap_steps`: iterations at which SHAP values (`pred_contribs`) are saved.
        `loss_metrics`: evaluation metrics that go into `losses` (default: the built-in losses
        among the metrics, e.g. rmse, logloss, mlogloss; never auc, error or ndcg)."""
        configs = list(collection_configs or ())
        configured = {c.name for c in configs}
        if save_config is None:
            save_config = SaveConfig(save_interval=1)
            for name in ("labels", "predictions", "probabilities"):
                if name not in configured:
                    configs.append(
                        CollectionConfig(name, save_config=SaveConfig(save_interval=predictions_interval))
                    )
        if shap_steps and "shap" not in configured:
            configs.append(CollectionConfig("shap", save_config=SaveConfig(save_steps=tuple(shap_steps))))
        if include_collections is None:
            include_collections = [*DEFAULT_INCLUDED, *configured, *(("shap",) if shap_steps else ())]
        rank, world = _rank_and_world()
        self.session = RecordingSession(
            out_dir,
            save_config=save_config,
            include_collections=list(dict.fromkeys(include_collections)),
            include_regex=include_regex,
            reduction_config=reduction_config,
            save_all=save_all,
            collection_configs=configs,
            include_workers=include_workers,
            rank=rank,
            world_size=world,
            framework=f"xgboost-{xgboost.__version__}",
            extra_collections=EXTRA_COLLECTIONS,
            profiler_config=profiler_config,
            rules=rules,
            actions=actions,
            **options,
        )
        self.recorder = self.session.recorder
        self._timeline = self.session.timeline  # a boosting round's time, with profiler_config
        self.out_dir = self.recorder.store.url
        self.train_data = train_data
        self.validation_data = validation_data
        self.hyperparameters = dict(hyperparameters or {})
        self.loss_metrics = None if loss_metrics is None else frozenset(loss_metrics)
        self.info = RunInfo(xgboost_version=xgboost.__version__)
        self._dtrain: xgboost.DMatrix | None = None
        self._dvalid: xgboost.DMatrix | None = None
        self._computed: list[tuple[xgboost.DMatrix, str]] = []  # sets missing from `evals`
        self._tree_booster = True
        self._trees_from = 0  # first boosting round whose trees are not yet recorded
        self._hyper_saved = False
        self._closed = False

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> Hook:
        from mldbg.config_file import hook_kwargs_from_json

        return cls(**hook_kwargs_from_json(path))

    # user values --------------------------------------------------------------------------
    def save_scalar(self, name: str, value: float) -> None:
        self.recorder.save_scalar(name, float(value))

    def save_tensor(self, name: str, value: Any, collections: Sequence[str] = ("all",)) -> None:
        self.recorder.save_tensor(name, np.asarray(value), tuple(collections))

    # the callback -------------------------------------------------------------------------
    def before_training(self, model: Any) -> Any:
        if self._closed:
            log.warning("mldbg: this XGBoost hook already recorded a training; give each training a new Hook")
            return model
        if not isinstance(model, xgboost.Booster):
            log.warning("mldbg: the XGBoost hook records xgb.train and the scikit-learn wrappers, not xgb.cv")
            self.close()
            return model
        call = _training_call()
        self._dtrain = _dmatrix(self.train_data) if self.train_data is not None else call.get("dtrain")
        evals: list[tuple[xgboost.DMatrix, str]] = list(call.get("evals") or [])
        info = self.info
        info.eval_sets = [name for _, name in evals]
        info.train_set = next((n for d, n in evals if d is self._dtrain), None)
        if info.train_set is None and "train" in info.eval_sets:
            info.train_set = "train"
        if info.train_set is None and self._dtrain is not None:
            info.train_set = "train"
            self._computed.append((self._dtrain, "train"))
        if self.validation_data is not None:
            self._dvalid = _dmatrix(self.validation_data)
            info.validation_set = next((n for d, n in evals if d is self._dvalid), None)
            if info.validation_set is None:
                info.validation_set = "validation"
                self._computed.append((self._dvalid, "validation"))
        else:
            others = [(d, n) for d, n in evals if n != info.train_set]
            if others:
                self._dvalid, info.validation_set = others[-1]
        if info.train_set not in info.eval_sets and info.train_set is not None:
            info.eval_sets.insert(0, info.train_set)
        if info.validation_set is not None and info.validation_set not in info.eval_sets:
            info.eval_sets.append(info.validation_set)
        info.params = {**dict(call.get("params") or {}), **self.hyperparameters}
        if "num_boost_round" in call:
            info.params.setdefault("num_boost_round", call["num_boost_round"])
        self._describe(model)
        return model

    def before_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        if not self._closed:
            self.recorder.start_step(Mode.TRAIN)
            if self._timeline is not None:
                self._timeline.step_begin(self.recorder.step, int(Mode.TRAIN))
        return False

    def after_iteration(self, model: Any, epoch: int, evals_log: Mapping[str, Mapping[str, Any]]) -> bool:
        if self._closed:
            return False
        rec = self.recorder
        if not rec.in_step or rec.mode != Mode.TRAIN:
            rec.start_step(Mode.TRAIN)
        scores = {name: {m: _last(v) for m, v in metrics.items()} for name, metrics in evals_log.items()}
        computed = False
        if rec.saving and self._computed:
            scores.update(_evaluate(model, self._computed, epoch))
            computed = True
        train = self.info.train_set
        if rec.saving:
            self._save_metrics({k: v for k, v in scores.items() if k == train}, losses_from=train)
            self._save_data(model, self._dtrain, shap=self._dvalid is None)
            self._save_model_state(model)
        if self._timeline is not None:
            self._timeline.step_end()
        rec.end_step()
        if any(k != train for k in scores) or self._dvalid is not None:
            rec.start_step(Mode.EVAL)
            if rec.saving and self._computed and not computed:
                scores.update(_evaluate(model, self._computed, epoch))
            if rec.saving:
                self._save_metrics({k: v for k, v in scores.items() if k != train}, self.info.validation_set)
                self._save_data(model, self._dvalid, shap=True)
            rec.end_step()
        return False

    def after_training(self, model: Any) -> Any:
        if not self._closed and isinstance(model, xgboost.Booster):
            self._describe(model)
        self.close()
        return model

    # what is saved ------------------------------------------------------------------------
    def _put(self, name: str, natural: tuple[str, ...], value: np.ndarray | Callable[[], np.ndarray]) -> bool:
        """Save `name` if its collections save now; a callable value is computed only then."""
        plan = self.recorder.plan(name, natural)
        if plan is None:
            return False
        array = np.asarray(value() if callable(value) else value, order="C")
        self.recorder.save(name, array, plan, array.nbytes)
        return True

    def _save_metrics(self, scores: dict[str, dict[str, float]], losses_from: str | None) -> None:
        for set_name, metrics in scores.items():
            for metric, value in metrics.items():
                v = np.asarray(value, dtype=np.float64)
                self._put(f"{set_name}-{metric}", ("metrics",), v)
                if set_name == losses_from and self._is_loss(metric):
                    self._put(metric, ("losses",), v)
                    if metric not in self.info.losses:
                        self.info.losses.append(metric)

    def _is_loss(self, metric: str) -> bool:
        if self.loss_metrics is not None:
            return metric in self.loss_metrics
        return metric.split("@")[0] in LOSS_METRICS

    def _save_data(self, model: xgboost.Booster, data: xgboost.DMatrix | None, shap: bool) -> None:
        if data is None:
            return
        rec = self.recorder
        self._put("labels", ("labels",), lambda: self._labels(data))
        wants = [rec.plan(n, (n,)) for n in ("predictions", "probabilities")]
        if any(p is not None for p in wants):
            predictions, probabilities = self._predict(model, data)
            for name, plan, value in zip(
                ("predictions", "probabilities"), wants, (predictions, probabilities), strict=True
            ):
                if plan is not None and value is not None:
                    rec.save(name, np.asarray(value, order="C"), plan, value.nbytes)
        if shap and self._tree_booster and rec.plan("shap/values", ("shap",)) is not None:
            contribs = model.predict(data, pred_contribs=True).astype(np.float32)
            self._put("shap/values", ("shap",), contribs)
            self._put("shap/mean_abs", ("shap",), np.abs(contribs).mean(axis=0))

    def _labels(self, data: xgboost.DMatrix) -> np.ndarray:
        y = data.get_label()
        if y.size != data.num_row() and data.num_row() > 0:
            y = y.reshape(data.num_row(), -1)
        return y.astype(np.int32) if self.info.task in ("binary", "multiclass") else y.astype(np.float32)

    def _predict(self, model: xgboost.Booster, data: xgboost.DMatrix) -> tuple[np.ndarray, np.ndarray | None]:
        task = self.info.task
        if task not in ("binary", "multiclass"):
            return model.predict(data).astype(np.float32), None
        margin = model.predict(data, output_margin=True).astype(np.float64)
        if task == "binary":
            if self.info.objective == "binary:hinge":
                return (margin > 0).astype(np.int32), None
            p = 1.0 / (1.0 + np.exp(-margin))
            return (p > 0.5).astype(np.int32), p.astype(np.float32)
        z = np.exp(margin - margin.max(axis=1, keepdims=True))
        p = z / z.sum(axis=1, keepdims=True)
        return p.argmax(axis=1).astype(np.int32), p.astype(np.float32)

    def _save_model_state(self, model: xgboost.Booster) -> None:
        rec = self.recorder
        if not self._hyper_saved:  # once, at the first step that saves them
            for name, value in _numeric_hyperparameters(self.info).items():
                saved = self._put(
                    f"hyperparameters/{name}", ("hyperparameters",), np.asarray(value, np.float64)
                )
                self._hyper_saved = self._hyper_saved or saved
        if not self._tree_booster:
            return
        names = self.info.feature_names
        for kind in IMPORTANCE_TYPES:
            self._put(
                f"feature_importance/{kind}",
                ("feature_importance",),
                partial(_importance, model, kind, names),
            )
        rounds = model.num_boosted_rounds()
        if rounds > self._trees_from and rec.plan("trees/depth", ("trees",)) is not None:
            depth, leaves, nodes = tree_stats(model[self._trees_from : rounds].get_dump())
            self._trees_from = rounds
            self._put("trees/depth", ("trees",), depth)
            self._put("trees/leaves", ("trees",), leaves)
            self._put("trees/nodes", ("trees",), nodes)

    def _describe(self, model: xgboost.Booster) -> None:
        """(Re)write the run description: called before and after training."""
        info = self.info
        config = json.loads(model.save_config())
        learner = config.get("learner", {})
        info.config = config
        info.objective = learner.get("learner_train_param", {}).get("objective", "")
        info.num_class = int(learner.get("learner_model_param", {}).get("num_class", "0") or 0)
        info.task = _task(info.objective, info.num_class)
        self._tree_booster = learner.get("gradient_booster", {}).get("name", "gbtree") in _TREE_BOOSTERS
        info.feature_names = list(model.feature_names or [f"f{i}" for i in range(model.num_features())])
        info.rounds = model.num_boosted_rounds()
        best = model.attr("best_iteration")
        info.best_iteration = int(best) if best is not None else None
        rec = self.recorder
        if rec.enabled:
            rec.store.write(info_key(rec.worker), [info.to_json()])

    def close(self) -> None:
        """Flush everything and write the end marker. Also runs at interpreter exit."""
        self._closed = True
        self.session.close()

    def __enter__(self) -> Hook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


def _importance(model: xgboost.Booster, kind: str, names: Sequence[str]) -> np.ndarray:
    """`Booster.get_score` as a vector over every feature (0 where a feature is unused)."""
    index = {n: i for i, n in enumerate(names)}
    out = np.zeros(len(names), dtype=np.float64)
    for name, score in model.get_score(importance_type=kind).items():
        if name in index and not isinstance(score, list):
            out[index[name]] = score
    return out


def _task(objective: str, num_class: int) -> str:
    if objective.startswith("binary:"):
        return "binary"
    if objective.startswith("multi:") or num_class > 1:
        return "multiclass"
    if objective.startswith("rank:"):
        return "ranking"
    if objective.startswith(("reg:", "count:", "survival:")):
        return "regression"
    return "unknown"


def _numeric_hyperparameters(info: RunInfo) -> dict[str, float]:
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


def _evaluate(
    model: xgboost.Booster, sets: list[tuple[xgboost.DMatrix, str]], epoch: int
) -> dict[str, dict[str, float]]:
    """Metrics of data sets that `xgb.train` does not evaluate itself."""
    out: dict[str, dict[str, float]] = {}
    for field in model.eval_set(sets, epoch).split("\t")[1:]:
        key, _, value = field.rpartition(":")
        set_name, _, metric = key.partition("-")
        out.setdefault(set_name, {})[metric] = float(value)
    return out


def _last(values: Any) -> float:
    v = values[-1]
    return float(v[0] if isinstance(v, tuple) else v)


def _training_call() -> dict[str, Any]:
    """The arguments of the running `xgb.train` call (which the scikit-learn wrappers make)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code is _TRAIN_CODE:
            return dict(frame.f_locals)
        frame = frame.f_back
    return {}


def _dmatrix(data: Data) -> xgboost.DMatrix:
    if isinstance(data, xgboost.DMatrix):
        return data
    if isinstance(data, tuple) and len(data) == 2:
        return xgboost.DMatrix(data[0], label=data[1])
    raise TypeError(f"expected an xgboost.DMatrix or an (X, y) pair, got {type(data).__name__}")


def _rank_and_world() -> tuple[int, int]:
    try:
        from xgboost import collective

        if collective.is_distributed():
            return collective.get_rank(), collective.get_world_size()
    except Exception:  # an older or partial build: fall back to the launcher's variables
        pass
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


__all__ = ["Hook", "tree_stats"]
