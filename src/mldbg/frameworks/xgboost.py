"""XGBoost adapter: `mldbg.xgboost.Hook`, a `TrainingCallback` for `xgb.train`, `xgb.cv` and
the scikit-learn wrappers (`XGBClassifier(callbacks=[hook])`).

What a step is: each boosting iteration is one TRAIN step (opened before the update, closed
after it) holding the training set's values, then, when there is a validation set, one EVAL
step holding the validation set's values. Both have the iteration as their mode step, so
`trial.tensor("logloss").values(mode=Mode.EVAL)` is the validation curve by iteration.

The training and evaluation data are taken from `xgb.train`'s own arguments (the `dtrain`
and `evals` it was called with); `train_data=` / `validation_data=` name them explicitly.
The validation set is the last evaluation set that is not the training data, the one early
stopping watches. Under `xgb.cv` the folds' training sets are the training data and their
test sets the validation data; metrics are the mean and standard deviation over the folds.

A copy of a hook (`copy.deepcopy`, which `sklearn.base.clone` makes for `GridSearchCV`,
`cross_val_score`, ...; or a pickled hook) records its own run, `<out_dir>/fit-<k>`,
numbered in the order the copies start training. Names and layout: docs/xgboost.md.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any

import numpy as np
import xgboost
from xgboost.callback import TrainingCallback

from mldbg.config import CollectionConfig, Mode, ReductionConfig, SaveConfig
from mldbg.errors import TrainingStopped
from mldbg.frameworks.xgboost_info import IMPORTANCE_TYPES, RunInfo, info_key
from mldbg.record.recorder import Recorder
from mldbg.record.session import RecordingSession
from mldbg.store import open_store
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
_CV_CODE = inspect.unwrap(xgboost.training.cv).__code__
_TREE_BOOSTERS = ("gbtree", "dart")
_SUB_RUN = re.compile(r"fit-(\d+)")

Data = Any  # an xgboost.DMatrix, or (X, y)
Score = float | tuple[float, float]  # xgb.cv scores are (mean, std) over the folds


class Hook(TrainingCallback):
    """Records an XGBoost training (`xgb.train`, `xgb.cv`, the scikit-learn wrappers): pass
    it in `callbacks=[hook]`. One hook per training run; it closes itself when training ends.

    A copy records its own run. `copy.deepcopy(hook)`, which `sklearn.base.clone` makes for
    `GridSearchCV`, `cross_val_score` and `Pipeline`, and a pickled hook (joblib's worker
    processes) give a hook that, when it trains, records into `<out_dir>/fit-<k>`: k counts
    the copies in the order they start training (a copy pickled before training: in the order
    they were pickled), after any `fit-<k>` already there. A copy is cheap: it opens nothing
    and starts no thread until it trains. The hook itself keeps recording into `out_dir`;
    `hook.sub_runs` lists its copies' runs."""

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
        settings = dict(
            save_config=save_config, include_collections=include_collections, include_regex=include_regex,
            reduction_config=reduction_config, save_all=save_all, include_workers=include_workers,
            collection_configs=collection_configs, train_data=train_data, validation_data=validation_data,
            hyperparameters=hyperparameters, predictions_interval=predictions_interval, shap_steps=shap_steps,
            loss_metrics=loss_metrics, profiler_config=profiler_config, rules=rules, actions=actions,
            **options,
        )  # fmt: skip
        self._setup(settings)
        self._start(out_dir)

    def _setup(self, settings: dict[str, Any]) -> None:
        """The state of a hook that has not started recording: cheap, no store, no thread."""
        self._settings = settings
        self.session: RecordingSession | None = None  # None until this hook records
        self.out_dir: str | None = None  # the run's location once it records
        self._timeline: Any = None  # a boosting round's time, with profiler_config
        self._planned: str | None = None  # where a pickled copy records
        self._family: _SubRuns | None = None  # the numbering of the copies, shared by all of them
        self.train_data = settings["train_data"]
        self.validation_data = settings["validation_data"]
        self.hyperparameters = dict(settings["hyperparameters"] or {})
        loss_metrics = settings["loss_metrics"]
        self.loss_metrics = None if loss_metrics is None else frozenset(loss_metrics)
        self.info = RunInfo(xgboost_version=xgboost.__version__)
        self._dtrain: xgboost.DMatrix | None = None
        self._dvalid: xgboost.DMatrix | None = None
        self._folds: list[Any] | None = None  # xgb.cv's folds (CVPack: .bst, .dtrain, .dtest)
        self._computed: list[tuple[xgboost.DMatrix, str]] = []  # sets missing from `evals`
        self._tree_booster = True
        self._trees_from = 0  # first boosting round whose trees are not yet recorded
        self._hyper_saved = False
        self._closed = False
        self._failed: set[str] = set()  # optional parts that failed once (logged once)

    def _start(self, out_dir: str | os.PathLike[str] | Store) -> None:
        s = dict(self._settings)
        for name in ("train_data", "validation_data", "hyperparameters", "loss_metrics"):
            del s[name]
        save_config, include_collections = s.pop("save_config"), s.pop("include_collections")
        interval, shap_steps = s.pop("predictions_interval"), tuple(s.pop("shap_steps"))
        configs = list(s.pop("collection_configs") or ())
        configured = {c.name for c in configs}
        if save_config is None:
            save_config = SaveConfig(save_interval=1)
            for name in ("labels", "predictions", "probabilities"):
                if name not in configured:
                    configs.append(CollectionConfig(name, save_config=SaveConfig(save_interval=interval)))
        if shap_steps and "shap" not in configured:
            configs.append(CollectionConfig("shap", save_config=SaveConfig(save_steps=shap_steps)))
        if include_collections is None:
            include_collections = [*DEFAULT_INCLUDED, *configured, *(("shap",) if shap_steps else ())]
        rank, world = _rank_and_world()
        self.session = RecordingSession(
            out_dir,
            save_config=save_config,
            include_collections=list(dict.fromkeys(include_collections)),
            collection_configs=configs,
            rank=rank,
            world_size=world,
            framework=f"xgboost-{xgboost.__version__}",
            extra_collections=EXTRA_COLLECTIONS,
            **s,
        )
        self._timeline = self.session.timeline
        self.out_dir = self.session.recorder.store.url

    @property
    def recorder(self) -> Recorder:
        """The recorder of this hook's run; a copy opens its run here, at its first use."""
        if self.session is None:
            self._start(self._planned or self._family_of().take())
        assert self.session is not None
        return self.session.recorder

    @property
    def sub_runs(self) -> list[str]:
        """The runs of this hook's copies (`<out_dir>/fit-<k>`), in the order they were numbered."""
        return list(self._family.runs) if self._family is not None else []

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> Hook:
        from mldbg.config_file import hook_kwargs_from_json

        return cls(**hook_kwargs_from_json(path))

    # copies -------------------------------------------------------------------------------
    def _family_of(self) -> _SubRuns:
        if self._family is None:
            assert self.out_dir is not None  # every copy shares its original's numbering
            self._family = _SubRuns(self.out_dir)
        return self._family

    def _copy(self) -> Hook:
        twin = Hook.__new__(Hook)
        twin._setup(self._settings)
        twin._family = self._family_of()
        return twin

    def __copy__(self) -> Hook:
        return self._copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> Hook:
        """`sklearn.base.clone` deep-copies an estimator's parameters, this hook among them:
        the copy records its own run when it trains (see the class docstring)."""
        return self._copy()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (for joblib's worker processes, say): a copy. One that has not trained yet
        is numbered here, in the process that made it, so that copies trained in different
        processes never share a run; a pickled running or finished hook is numbered when its
        copy trains."""
        family = self._family_of()
        planned = family.take() if self.session is None else None
        return (_unpickled_hook, (self._settings, planned, family.base))

    def __repr__(self) -> str:
        if self.out_dir is not None:
            return f"Hook({self.out_dir!r})"
        where = self._planned or f"{self._family_of().base}/fit-<k>"
        return f"Hook({where!r}, not started)"

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
        if self.session is None:
            try:
                self.recorder  # noqa: B018 - a copy opens its own run now
            except Exception as e:  # the copy's run cannot be opened: train without recording
                log.error("mldbg: cannot record this XGBoost training (%s); it runs unrecorded", e)
                self._closed = True
                return model
        if _is_cv(model):
            self._guarded("the cross-validation folds", self._find_folds, model)
        else:
            self._guarded("the training and evaluation sets", self._find_data)
        self._guarded("the run description", self._describe, model)
        return model

    def _find_data(self) -> None:
        call = _training_call(_TRAIN_CODE)
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

    def _find_folds(self, model: Any) -> None:
        """`xgb.cv` passes a `_PackedBooster` whose `cvfolds` each hold a booster, a training
        set and a test set, the two names its evaluation log uses."""
        self._folds = list(model.cvfolds)
        if self.train_data is not None or self.validation_data is not None:
            log.info("mldbg: xgb.cv: train_data= and validation_data= ignored; the folds' sets are recorded")
        call = _training_call(_CV_CODE)
        info = self.info
        info.cv_folds = len(self._folds)
        info.train_set, info.validation_set, info.eval_sets = "train", "test", ["train", "test"]
        params = dict(call.get("params") or {})  # xgb.cv moved eval_metric into `metrics`
        if call.get("metrics"):
            params.setdefault("eval_metric", list(call["metrics"]))
        info.params = {**params, **self.hyperparameters}
        if "num_boost_round" in call:
            info.params.setdefault("num_boost_round", call["num_boost_round"])
        info.params.setdefault("nfold", len(self._folds))

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
            scores.update(self._guarded("metrics", _evaluate, model, self._computed, epoch) or {})
            computed = True
        train = self.info.train_set
        has_validation = self._dvalid is not None or self._folds is not None
        if rec.saving:
            training = {k: v for k, v in scores.items() if k == train}
            self._guarded("metrics", self._save_metrics, training, train)
            self._guarded("predictions", self._save_data, self._sets(model, Mode.TRAIN), not has_validation)
            self._guarded("the model state", self._save_model_state, model)
        if self._timeline is not None:
            self._timeline.step_end()
        rec.end_step()
        if any(k != train for k in scores) or has_validation:
            rec.start_step(Mode.EVAL)
            if rec.saving and self._computed and not computed:
                scores.update(self._guarded("metrics", _evaluate, model, self._computed, epoch) or {})
            if rec.saving:
                validation = {k: v for k, v in scores.items() if k != train}
                self._guarded("metrics", self._save_metrics, validation, self.info.validation_set)
                self._guarded("predictions", self._save_data, self._sets(model, Mode.EVAL), True)
            rec.end_step()
        return False

    def after_training(self, model: Any) -> Any:
        if not self._closed and self.session is not None:
            self._guarded("the run description", self._describe, model)
        self.close()
        return model

    # what is saved ------------------------------------------------------------------------
    def _guarded(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run an optional part of the recording: a failure is logged once, never raised into
        the training."""
        try:
            return fn(*args)
        except TrainingStopped:
            raise
        except Exception as e:
            if what not in self._failed:
                self._failed.add(what)
                log.warning(
                    "mldbg: could not record %s of this XGBoost training (%s: %s); training goes on without it",
                    what, type(e).__name__, e,
                )  # fmt: skip
            return None

    def _sets(self, model: Any, mode: Mode) -> list[tuple[xgboost.Booster, xgboost.DMatrix]]:
        """The (booster, data) pairs whose labels and predictions a step holds: one, or under
        `xgb.cv` one per fold (its training set in TRAIN, its test set in EVAL)."""
        if self._folds is not None:
            return [(f.bst, f.dtrain if mode == Mode.TRAIN else f.dtest) for f in self._folds]
        data = self._dtrain if mode == Mode.TRAIN else self._dvalid
        return [] if data is None else [(model, data)]

    def _put(self, name: str, natural: tuple[str, ...], value: np.ndarray | Callable[[], np.ndarray]) -> bool:
        """Save `name` if its collections save now; a callable value is computed only then."""
        plan = self.recorder.plan(name, natural)
        if plan is None:
            return False
        array = np.asarray(value() if callable(value) else value, order="C")
        self.recorder.save(name, array, plan, array.nbytes)
        return True

    def _save_metrics(self, scores: dict[str, dict[str, Score]], losses_from: str | None) -> None:
        for set_name, metrics in scores.items():
            for metric, score in metrics.items():
                if isinstance(score, tuple):  # xgb.cv: named as in the table it returns
                    mean, std = (np.asarray(s, dtype=np.float64) for s in score)
                    self._put(f"{set_name}-{metric}-mean", ("metrics",), mean)
                    self._put(f"{set_name}-{metric}-std", ("metrics",), std)
                    v = mean
                else:
                    v = np.asarray(score, dtype=np.float64)
                    self._put(f"{set_name}-{metric}", ("metrics",), v)
                if set_name == losses_from and self._is_loss(metric):
                    self._put(metric, ("losses",), v)
                    if metric not in self.info.losses:
                        self.info.losses.append(metric)

    def _is_loss(self, metric: str) -> bool:
        if self.loss_metrics is not None:
            return metric in self.loss_metrics
        return metric.split("@")[0] in LOSS_METRICS

    def _save_data(self, sets: list[tuple[xgboost.Booster, xgboost.DMatrix]], shap: bool) -> None:
        """Labels, predictions (and SHAP values) of `sets`, one after the other."""
        if not sets:
            return
        rec = self.recorder
        self._put("labels", ("labels",), lambda: _concat([self._labels(d) for _, d in sets]))
        wants = [rec.plan(n, (n,)) for n in ("predictions", "probabilities")]
        if any(p is not None for p in wants):
            predicted = [self._predict(b, d) for b, d in sets]
            predictions = _concat([p for p, _ in predicted])
            probabilities = (
                None if predicted[0][1] is None else _concat([q for _, q in predicted if q is not None])
            )
            for name, plan, value in zip(
                ("predictions", "probabilities"), wants, (predictions, probabilities), strict=True
            ):
                if plan is not None and value is not None:
                    rec.save(name, np.asarray(value, order="C"), plan, value.nbytes)
        if shap and self._tree_booster and rec.plan("shap/values", ("shap",)) is not None:
            contribs = _concat([b.predict(d, pred_contribs=True).astype(np.float32) for b, d in sets])
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

    def _save_model_state(self, model: Any) -> None:
        rec = self.recorder
        if not self._hyper_saved:  # once, at the first step that saves them
            for name, value in _numeric_hyperparameters(self.info).items():
                saved = self._put(
                    f"hyperparameters/{name}", ("hyperparameters",), np.asarray(value, np.float64)
                )
                self._hyper_saved = self._hyper_saved or saved
        if not self._tree_booster:
            return
        boosters = [f.bst for f in self._folds] if self._folds is not None else [model]
        names = self.info.feature_names
        for kind in IMPORTANCE_TYPES:
            plan = rec.plan(f"feature_importance/{kind}", ("feature_importance",))
            if plan is None:
                continue
            per_booster = np.stack([_importance(b, kind, names) for b in boosters])
            self._put(f"feature_importance/{kind}", ("feature_importance",), per_booster.mean(axis=0))
            if self._folds is not None:
                self._put(f"feature_importance/{kind}/folds", ("feature_importance",), per_booster)
        rounds = boosters[0].num_boosted_rounds()
        if rounds > self._trees_from and rec.plan("trees/depth", ("trees",)) is not None:
            dump = [tree for b in boosters for tree in b[self._trees_from : rounds].get_dump()]
            depth, leaves, nodes = tree_stats(dump)
            self._trees_from = rounds
            self._put("trees/depth", ("trees",), depth)
            self._put("trees/leaves", ("trees",), leaves)
            self._put("trees/nodes", ("trees",), nodes)

    def _describe(self, model: Any) -> None:
        """(Re)write the run description: called before and after training."""
        info = self.info
        booster = self._folds[0].bst if self._folds is not None else model
        config = json.loads(booster.save_config())
        learner = config.get("learner", {})
        info.config = config
        info.objective = learner.get("learner_train_param", {}).get("objective", "")
        info.num_class = int(learner.get("learner_model_param", {}).get("num_class", "0") or 0)
        info.task = _task(info.objective, info.num_class)
        self._tree_booster = learner.get("gradient_booster", {}).get("name", "gbtree") in _TREE_BOOSTERS
        info.feature_names = list(booster.feature_names or [f"f{i}" for i in range(booster.num_features())])
        info.rounds = booster.num_boosted_rounds()
        best = model.attr("best_iteration")
        info.best_iteration = int(best) if best is not None else None
        rec = self.recorder
        if rec.enabled:
            rec.store.write(info_key(rec.worker), [info.to_json()])

    def close(self) -> None:
        """Flush everything and write the end marker. Also runs at interpreter exit."""
        self._closed = True
        if self.session is not None:
            self.session.close()

    def __enter__(self) -> Hook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _SubRuns:
    """Where the copies of one hook record: `<base>/fit-<k>`, k from 0 in the order they are
    numbered, after the `fit-<k>` already in `base` (a rerun adds runs, never overwrites)."""

    def __init__(self, base: str):
        self.base = base
        self.runs: list[str] = []
        self._next: int | None = None
        self._lock = threading.Lock()  # copies may start in threads (joblib's threading backend)

    def take(self) -> str:
        with self._lock:
            if self._next is None:
                self._next = _first_free(self.base)
            while True:
                run = _join(self.base, f"fit-{self._next}")
                self._next += 1
                if _claim(run):
                    break
            self.runs.append(run)
            return run


def _unpickled_hook(settings: dict[str, Any], planned: str | None, base: str) -> Hook:
    hook = Hook.__new__(Hook)
    hook._setup(settings)
    hook._planned = planned
    hook._family = _SubRuns(base)  # this process's numbering of base's copies
    return hook


def _first_free(base: str) -> int:
    try:
        store = open_store(base)
        try:
            names: Sequence[str] = store.children("")
            taken = [int(m.group(1)) for c in names if (m := _SUB_RUN.fullmatch(c))]
        finally:
            store.close()
    except Exception:  # nothing there yet, or unreadable: numbering starts at 0
        return 0
    return max(taken, default=-1) + 1


def _claim(run: str) -> bool:
    """A local run is claimed by creating its folder, which only one process can do; a URL's
    numbering is this process's alone."""
    if "://" in run:
        return True
    try:
        os.makedirs(os.path.dirname(run), exist_ok=True)
    except OSError:  # no folder can be made there: the recorder says so when it opens the run
        return True
    try:
        os.mkdir(run)
    except FileExistsError:  # another copy has it, or an earlier search
        return False
    except OSError:
        return True
    return True


def _join(base: str, name: str) -> str:
    return f"{base.rstrip('/')}/{name}" if "://" in base else os.path.join(base, name)


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


def _last(values: Any) -> Score:
    """The latest score of an evaluation log: a float, or xgb.cv's (mean, std)."""
    v = values[-1]
    return (float(v[0]), float(v[1])) if isinstance(v, tuple) else float(v)


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _is_cv(model: Any) -> bool:
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
