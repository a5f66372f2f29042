"""Actions: what happens when a rule fires (stop the job, tell people, export metrics, send
findings to MLflow or W&B).

Each action is one class over `Action` (see `mldbg.actions.base`); the built-ins register
under their snake_case name (`ACTIONS`), other packages under the `mldbg.actions` entry
point group. `resolve_actions` and `from_config` build them from names and plain dicts such
as `{"type": "email", "to": "me@example.com"}` (watch config files, `Hook(actions=...)`).
"""

from __future__ import annotations

from mldbg.actions.base import ACTIONS, Action, Context, register_action
from mldbg.actions.email import Email
from mldbg.actions.log import Log
from mldbg.actions.metrics import Metrics
from mldbg.actions.mlflow import MLflow
from mldbg.actions.recovery import Rollback, SkipBatch
from mldbg.actions.specs import action_class, from_config, resolve_actions
from mldbg.actions.stop import StopTraining
from mldbg.actions.wandb import WandB
from mldbg.actions.webhook import Webhook

__all__ = [
    "ACTIONS",
    "Action",
    "Context",
    "Email",
    "Log",
    "MLflow",
    "Metrics",
    "Rollback",
    "SkipBatch",
    "StopTraining",
    "WandB",
    "Webhook",
    "action_class",
    "from_config",
    "register_action",
    "resolve_actions",
]
