"""The run description the XGBoost adapter writes beside its tensors, and its reader.

Tensors hold numbers; what gives them meaning (feature names, the objective, which evaluation
set is the training set and which the validation set) is one small JSON object per worker at
``workers/<worker>/xgboost.json``. It is part of the run's contract, so it lives with the
store: the adapter writes it, rules and the report read it, and none of them imports XGBoost.
"""

from __future__ import annotations

import json
import logging
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

import numpy as np

from mldbg.store import layout
from mldbg.store.base import Store

log = logging.getLogger("mldbg")


class RunReader(Protocol):
    """What the readers below need of an open run (a `Trial` is one): the store has no
    trial of its own to import."""

    store: Store

    def workers(self) -> list[str]: ...

    def has_tensor(self, name: str) -> bool: ...

    def tensor(self, name: str) -> Any: ...


IMPORTANCE_TYPES = ("weight", "gain", "cover", "total_gain", "total_cover")


def info_key(worker: str) -> str:
    return f"{layout.worker_prefix(worker)}xgboost.json"


@dataclass
class RunInfo:
    """What an XGBoost run was: its task, features, evaluation sets and parameters."""

    task: str = "unknown"  # binary, multiclass, regression, ranking, unknown
    objective: str = ""
    num_class: int = 0
    feature_names: list[str] = field(default_factory=list)
    train_set: str | None = None  # evaluation-set name of the training data (TRAIN steps)
    validation_set: str | None = None  # the one recorded in EVAL steps
    eval_sets: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)  # metric names put into `losses`
    params: dict[str, Any] = field(default_factory=dict)  # the user's parameters
    config: dict[str, Any] = field(default_factory=dict)  # Booster.save_config()
    xgboost_version: str = ""
    rounds: int = 0  # boosted rounds so far (final once training ended)
    best_iteration: int | None = None
    cv_folds: int = 0  # xgb.cv: the number of folds (metrics are their mean and std); else 0

    def feature(self, index: int) -> str:
        if 0 <= index < len(self.feature_names):
            return self.feature_names[index]
        return f"f{index}"

    def to_json(self) -> bytes:
        return json.dumps(self.__dict__, default=str).encode()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunInfo:
        """Raises ValueError naming the first field whose value is not of its type."""
        hints = typing.get_type_hints(cls)
        known = {}
        for f in fields(cls):
            if f.name in data and data[f.name] is not None:
                value = data[f.name]
                if not _fits(value, hints[f.name]):
                    raise ValueError(f"{f.name!r} should be {hints[f.name]}, got {type(value).__name__}")
                known[f.name] = value
        return cls(**known)


def _fits(value: Any, hint: Any) -> bool:
    """Is a JSON value of a field's type (`int`, `str | None`, `list[str]`, `dict[str, Any]`)?"""
    for kind in typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,):
        origin = typing.get_origin(kind) or kind
        if origin is type(None) or (origin is int and isinstance(value, bool)):
            continue
        if isinstance(value, origin) and (origin is not list or all(isinstance(v, str) for v in value)):
            return True
    return False


def read_run_info(trial: RunReader) -> RunInfo | None:
    """The run description of the first worker that wrote one; None for other runs (and for
    a damaged description, with a warning naming it: the rules that need it then stay quiet)."""
    workers = trial.workers() or ["worker_0"]
    for worker in workers:
        key = info_key(worker)
        try:
            data = json.loads(trial.store.read(key))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            return RunInfo.from_dict(data)
        except FileNotFoundError:
            continue
        except (OSError, ValueError, RecursionError) as e:  # a folder, not JSON, a field of the wrong type
            log.warning("mldbg: %s/%s is damaged, read as no run description: %s", trial.store.url, key, e)
            return None
    return None


def importance_at(trial: RunReader, step: int, kind: str = "weight") -> np.ndarray | None:
    """The `feature_importance/<kind>` vector saved at a global step, or None."""
    name = f"feature_importance/{kind}"
    if not trial.has_tensor(name):
        return None
    tensor = trial.tensor(name)
    if not tensor.has_step(step):
        return None
    return np.asarray(tensor.value(step), dtype=np.float64)
