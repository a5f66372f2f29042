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
XGBoost's objects are read in `xgboost_model`, copies numbered in `xgboost_copies`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import xgboost
from xgboost.callback import TrainingCallback

from mldbg.config import CollectionConfig, Mode, SaveConfig
from mldbg.errors import TrainingStopped
from mldbg.frameworks import xgboost_model
from mldbg.frameworks.base import Adapter
from mldbg.frameworks.session import Worker
from mldbg.frameworks.xgboost_copies import SubRuns
from mldbg.frameworks.xgboost_model import Data, Pairs, Score, TrainingSets, tree_stats
from mldbg.record.recorder import Recorder
from mldbg.store.base import Store
from mldbg.store.run_info import IMPORTANCE_TYPES, RunInfo, info_key

log = logging.getLogger("mldbg")

EXTRA_COLLECTIONS = ("metrics", "feature_importance", "trees", "hyperparameters", "probabilities", "shap")
DEFAULT_INCLUDED = (
    "losses", "scalars", "metrics", "feature_importance", "trees", "hyperparameters",
    "labels", "predictions", "probabilities",
)  # fmt: skip
# XGBoost's own keywords, beside every hook's
OWN_SETTINGS = (
    "train_data", "validation_data", "hyperparameters", "predictions_interval", "shap_steps", "loss_metrics",
)  # fmt: skip


class Hook(Adapter, TrainingCallback):
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
        *settings: Any,
        train_data: Data | None = None,
        validation_data: Data | None = None,
        hyperparameters: Mapping[str, Any] | None = None,
        predictions_interval: int = 10,
        shap_steps: Sequence[int] = (),
        loss_metrics: Sequence[str] | None = None,
        **options: Any,
    ):
        """`settings`, `options`: every hook's (`save_config`, `include_collections`, ...,
        `profiler_config`, `rules`, `actions`: `mldbg.frameworks.base.Adapter`).
        `predictions_interval`: labels, predictions and probabilities are saved every that
        many iterations (unless `save_config` or their own `CollectionConfig` says otherwise).
        `shap_steps`: iterations at which SHAP values (`pred_contribs`) are saved.
        `loss_metrics`: evaluation metrics that go into `losses` (default: the built-in losses
        among the metrics, e.g. rmse, logloss, mlogloss; never auc, error or ndcg)."""
        self._own: dict[str, Any] = dict(
            train_data=train_data, validation_data=validation_data, hyperparameters=hyperparameters,
            predictions_interval=predictions_interval, shap_steps=shap_steps, loss_metrics=loss_metrics,
        )  # fmt: skip
        super().__init__(out_dir, *settings, **options)

    def _worker(self) -> Worker:
        return Worker(f"xgboost-{xgboost.__version__}", *xgboost_model.rank_and_world())

    def _setup(self) -> None:
        """The state of a hook that has not started recording: cheap, no store, no thread."""
        self._planned: str | None = None  # where a pickled copy records
        self._family: SubRuns | None = None  # the numbering of the copies, shared by all of them
        own = self._own
        self.train_data = own["train_data"]
        self.validation_data = own["validation_data"]
        self.hyperparameters = dict(own["hyperparameters"] or {})
        loss_metrics = own["loss_metrics"]
        self.loss_metrics = None if loss_metrics is None else frozenset(loss_metrics)
        self.info = RunInfo(xgboost_version=xgboost.__version__)
        self._sets = TrainingSets()
        self._trees_from = 0  # first boosting round whose trees are not yet recorded
        self._hyper_saved = False
        self._failed: set[str] = set()  # optional parts that failed once (logged once)

    def _recording(self) -> dict[str, Any]:
        """XGBoost's defaults: every round saved, labels and predictions every
        `predictions_interval` rounds, SHAP at `shap_steps`, its own collections."""
        s = dict(self._settings)
        save_config, include_collections = s.pop("save_config"), s.pop("include_collections")
        interval, shap_steps = self._own["predictions_interval"], tuple(self._own["shap_steps"])
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
        return dict(
            s, save_config=save_config, include_collections=list(dict.fromkeys(include_collections)),
            collection_configs=configs, extra_collections=EXTRA_COLLECTIONS,
        )  # fmt: skip

    @property
    def recorder(self) -> Recorder:
        """The recorder of this hook's run; a copy opens its run here, at its first use."""
        if self.session is None:
            self._open_run(self._planned or self._family_of().take())
        return self._recorder

    @recorder.setter
    def recorder(self, recorder: Recorder) -> None:
        self._recorder = recorder

    @property
    def sub_runs(self) -> list[str]:
        """The runs of this hook's copies (`<out_dir>/fit-<k>`), in the order they were numbered."""
        return list(self._family.runs) if self._family is not None else []

    # copies -------------------------------------------------------------------------------
    def _family_of(self) -> SubRuns:
        if self._family is None:
            assert self.out_dir is not None  # every copy shares its original's numbering
            self._family = SubRuns(self.out_dir)
        return self._family

    def __copy__(self) -> Hook:
        return _idle_hook(self._all_settings(), self._family_of(), None)

    def __deepcopy__(self, memo: dict[int, Any]) -> Hook:
        """`sklearn.base.clone` deep-copies an estimator's parameters, this hook among them:
        the copy records its own run when it trains (see the class docstring)."""
        return self.__copy__()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (for joblib's worker processes, say): a copy. One that has not trained yet
        is numbered here, in the process that made it, so that copies trained in different
        processes never share a run; a pickled running or finished hook is numbered when its
        copy trains."""
        family = self._family_of()
        planned = family.take() if self.session is None else None
        return (_unpickled_hook, (self._all_settings(), planned, family.base))

    def _all_settings(self) -> dict[str, Any]:
        """Everything this hook was given but `out_dir`: what a copy is made from."""
        return {**self._settings, **self._own}

    def __repr__(self) -> str:
        if self.out_dir is not None:
            return f"Hook({self.out_dir!r})"
        where = self._planned or f"{self._family_of().base}/fit-<k>"
        return f"Hook({where!r}, not started)"

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
        cv = xgboost_model.is_cv(model)
        what = "the cross-validation folds" if cv else "the training and evaluation sets"
        data, hyper = (self.train_data, self.validation_data), self.hyperparameters
        self._guarded(what, self._sets.find, self.info, model, *data, hyper)
        self._guarded("the run description", self._describe, model)
        return model

    def before_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
        if not self._closed:
            self.recorder.start_step(Mode.TRAIN)
            self.timeline.step_begin(self.recorder.step, int(Mode.TRAIN))
        return False

    def after_iteration(self, model: Any, epoch: int, evals_log: Mapping[str, Mapping[str, Any]]) -> bool:
        if self._closed:
            return False
        rec = self.recorder
        if not rec.in_step or rec.mode != Mode.TRAIN:
            rec.start_step(Mode.TRAIN)
        sets = self._sets
        scores = {name: {m: xgboost_model.last(v) for m, v in ms.items()} for name, ms in evals_log.items()}
        computed = False
        if rec.saving and sets.computed:
            scores.update(self._guarded("metrics", sets.evaluate, model, epoch) or {})
            computed = True
        train = self.info.train_set
        has_validation = sets.dvalid is not None or sets.folds is not None
        if rec.saving:
            training = {k: v for k, v in scores.items() if k == train}
            self._guarded("metrics", self._save_metrics, training, train)
            self._guarded("predictions", self._save_data, sets.pairs(model, Mode.TRAIN), not has_validation)
            self._guarded("the model state", self._save_model_state, model)
        self.timeline.step_end()
        rec.end_step()
        if any(k != train for k in scores) or has_validation:
            rec.start_step(Mode.EVAL)
            if rec.saving and sets.computed and not computed:
                scores.update(self._guarded("metrics", sets.evaluate, model, epoch) or {})
            if rec.saving:
                validation = {k: v for k, v in scores.items() if k != train}
                self._guarded("metrics", self._save_metrics, validation, self.info.validation_set)
                self._guarded("predictions", self._save_data, sets.pairs(model, Mode.EVAL), True)
            rec.end_step()
        if self.info.best_iteration is None:
            self._guarded("the run description", self._early_stopping, model)
        return False

    def _early_stopping(self, model: Any) -> None:
        """Early stopping is on once its callback marks the booster's best iteration: say so
        in the run description then, not only at the end, so that rules judging live know it."""
        if model.attr("best_iteration") is not None:
            self._describe(model)

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
                if set_name == losses_from and xgboost_model.is_loss(metric, self.loss_metrics):
                    self._put(metric, ("losses",), v)
                    if metric not in self.info.losses:
                        self.info.losses.append(metric)

    def _save_data(self, pairs: Pairs, shap: bool) -> None:
        """Labels, predictions (and SHAP values) of `pairs`, one set after the other."""
        if not pairs:
            return
        info = self.info
        self._put("labels", ("labels",), lambda: xgboost_model.labels(pairs, info.task))
        if any(self.recorder.plan(n, (n,)) is not None for n in ("predictions", "probabilities")):
            predicted = xgboost_model.predictions(pairs, info.task, info.objective)
            for name, value in zip(("predictions", "probabilities"), predicted, strict=True):
                if value is not None:
                    self._put(name, (name,), value)
        if (
            shap
            and xgboost_model.has_trees(info)
            and self.recorder.plan("shap/values", ("shap",)) is not None
        ):
            contribs = xgboost_model.shap_values(pairs)
            self._put("shap/values", ("shap",), contribs)
            self._put("shap/mean_abs", ("shap",), np.abs(contribs).mean(axis=0))

    def _save_model_state(self, model: Any) -> None:
        rec = self.recorder
        if not self._hyper_saved:  # once, at the first step that saves them
            for name, value in xgboost_model.numeric_hyperparameters(self.info).items():
                saved = self._put(
                    f"hyperparameters/{name}", ("hyperparameters",), np.asarray(value, np.float64)
                )
                self._hyper_saved = self._hyper_saved or saved
        if not xgboost_model.has_trees(self.info):
            return
        folds, boosters = self._sets.folds, self._sets.boosters(model)
        names = self.info.feature_names
        for kind in IMPORTANCE_TYPES:
            plan = rec.plan(f"feature_importance/{kind}", ("feature_importance",))
            if plan is None:
                continue
            per_booster = np.stack([xgboost_model.importance(b, kind, names) for b in boosters])
            self._put(f"feature_importance/{kind}", ("feature_importance",), per_booster.mean(axis=0))
            if folds is not None:
                self._put(f"feature_importance/{kind}/folds", ("feature_importance",), per_booster)
        rounds = boosters[0].num_boosted_rounds()
        if rounds > self._trees_from and rec.plan("trees/depth", ("trees",)) is not None:
            dump = [tree for b in boosters for tree in b[self._trees_from : rounds].get_dump()]
            self._trees_from = rounds
            for what, counts in zip(("depth", "leaves", "nodes"), tree_stats(dump), strict=True):
                self._put(f"trees/{what}", ("trees",), counts)

    def _describe(self, model: Any) -> None:
        """(Re)write the run description: called before and after training, and when early
        stopping first marks a best iteration."""
        xgboost_model.describe(self.info, self._sets.boosters(model)[0], model)
        rec = self.recorder
        if rec.enabled:
            rec.store.write(info_key(rec.worker), [self.info.to_json()])


def _idle_hook(settings: dict[str, Any], family: SubRuns, planned: str | None) -> Hook:
    """A copy: it records nothing until it trains, then into `planned` or `family`'s next run."""
    hook = Hook.__new__(Hook)
    hook._own = {k: settings[k] for k in OWN_SETTINGS}
    hook._settings = {k: v for k, v in settings.items() if k not in OWN_SETTINGS}
    hook._closed = False
    hook._setup()
    hook._family, hook._planned = family, planned
    return hook


def _unpickled_hook(settings: dict[str, Any], planned: str | None, base: str) -> Hook:
    """What `Hook.__reduce__` rebuilds, with this process's own numbering of base's copies.
    Kept here, under this name: pickled hooks (a fitted estimator saved with joblib) refer to it."""
    return _idle_hook(settings, SubRuns(base), planned)


__all__ = ["Hook", "tree_stats"]
