"""Send findings (and, if asked, the run's losses and scalars) to an MLflow run as they happen.

For each delivery, on the MLflow run:
- a tag per rule that fired, `mldbg.rule.<rule>`, holding its first finding in words;
- the metric `mldbg.findings` (how many findings so far) at the finding's step, and
  `mldbg.finding.<rule>` = 1 at each step where that rule fired;
- the artifact `mldbg/findings.json` (`log_dict`): every finding delivered so far, as
  `Finding.to_dict()`, rewritten at each delivery.

With `log_statistics=True`, every cycle also logs the new values of the run's `losses` and
`scalars` collections as metrics (`mldbg/<tensor>`, `mldbg/eval/<tensor>` for EVAL steps), at
their global steps: a training that does not log to MLflow itself gets its curves there too.

The run: `run_id` (an existing run, also taken from `MLFLOW_RUN_ID`), else, unless an
`experiment` is named, the training's active run (`mlflow.start_run()` around the training:
the run active where the action is made or handed to the hook's watcher process), else a new
run in `experiment` (created if needed, default "mldbg") named after the recorded run, ended when the watcher ends. `tracking_uri`
defaults to the training's (`mlflow.set_tracking_uri`) where it has an active run, else
MLflow's own (`MLFLOW_TRACKING_URI`). mlflow (or mlflow-skinny) is imported only here, and
only looked at (not imported) in the training process.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mldbg.actions.base import Action, Context, register_action
from mldbg.actions.series import ScalarSeries
from mldbg.errors import InvalidConfig, MldbgError

if TYPE_CHECKING:
    from mldbg.rules.base import Finding

MAX_TAG = 5000  # MLflow's limit on a tag value
BATCH = 1000  # MLflow's limit on metrics per log_batch


def _import_mlflow() -> Any:
    try:
        import mlflow.entities
        import mlflow.tracking
    except ImportError:
        raise MldbgError(
            "the MLflow action needs mlflow, which is not installed: pip install mlflow-skinny "
            "(or mldbg[mlflow])"
        ) from None
    return mlflow


@register_action
class MLflow(Action):
    """Findings to an MLflow run: a tag per rule, a findings metric, a JSON artifact."""

    def __init__(
        self,
        tracking_uri: str | None = None,
        run_id: str | None = None,
        experiment: str | None = None,
        run_name: str | None = None,
        log_statistics: bool = False,
        tags: dict[str, str] | None = None,
        *,
        rules: Iterable[str] | None = None,
        once_per_rule: bool = True,
        min_interval: float = 0.0,
        max_deliveries: int | None = None,
        retries: int = 3,
    ):
        super().__init__(
            rules=rules,
            once_per_rule=once_per_rule,
            min_interval=min_interval,
            max_deliveries=max_deliveries,
            retries=retries,
        )
        self.tracking_uri = tracking_uri
        self.run_id = run_id or os.environ.get("MLFLOW_RUN_ID") or None
        self.experiment = experiment or "mldbg"
        self._own_run = experiment is not None  # a run of its own asked for: no active run taken
        self._follow_active_run()
        self.run_name = run_name
        self.log_statistics = log_statistics
        self.tags = dict(tags or {})
        self._client: Any = None
        self._created = False
        self._delivered: list[dict[str, Any]] = []
        self._series: ScalarSeries | None = None

    def _follow_active_run(self) -> None:
        """No run named: the training's active MLflow run, if the training uses MLflow."""
        mlflow = sys.modules.get("mlflow")
        if self.run_id is not None or self._own_run or mlflow is None or not hasattr(mlflow, "active_run"):
            return
        active = mlflow.active_run()
        if active is not None:
            self.run_id = active.info.run_id
            self.tracking_uri = self.tracking_uri or mlflow.get_tracking_uri()

    def __getstate__(self) -> dict[str, Any]:
        """Handed to the hook's watcher process: the run active in the training now."""
        self._follow_active_run()
        return self.__dict__.copy()

    def describe(self) -> str:
        where = self.tracking_uri or "default"
        return f"MLflow({where}, run={self.run_id or self.experiment})"

    def start(self, context: Context) -> None:
        mlflow = _import_mlflow()
        try:
            self._client = mlflow.tracking.MlflowClient(tracking_uri=self.tracking_uri)
            if self.run_id is None:
                found = self._client.get_experiment_by_name(self.experiment)
                experiment_id = (
                    found.experiment_id
                    if found is not None
                    else self._client.create_experiment(self.experiment)
                )
                name = self.run_name or os.path.basename(context.run.rstrip("/")) or "mldbg"
                run = self._client.create_run(
                    experiment_id, run_name=name, tags={"mldbg.run": context.run, **self.tags}
                )
                self.run_id = run.info.run_id
                self._created = True
            else:
                self._client.get_run(self.run_id)  # a wrong id fails now, not at the first finding
                self._client.set_tag(self.run_id, "mldbg.run", context.run)
        except mlflow.exceptions.MlflowException as e:
            raise InvalidConfig(
                f"MLflow action: cannot open the MLflow run ({self.tracking_uri or 'MLFLOW_TRACKING_URI'}, "
                f"run_id={self.run_id}, experiment={self.experiment!r}): {' '.join(str(e).split())}"
            ) from None
        if self.log_statistics:
            self._series = ScalarSeries(context.store if context.store is not None else context.run)

    def __call__(self, findings: Iterable[Finding], context: Context, final: bool = False) -> int:
        """The gate for findings (see `Action`); with `log_statistics`, the new losses and
        scalars every cycle."""
        if self._series is not None and self._client is not None:
            self._log_series()
        return super().__call__(findings, context, final)

    def act(self, findings: list[Finding], context: Context) -> None:
        mlflow = _import_mlflow()
        now = int(time.time() * 1000)
        metrics = []
        for f in findings:
            self._delivered.append(f.to_dict())
            metrics.append(mlflow.entities.Metric("mldbg.findings", float(len(self._delivered)), now, f.step))
            metrics.append(mlflow.entities.Metric(f"mldbg.finding.{_key(f.rule)}", 1.0, now, f.step))
        tags = [
            mlflow.entities.RunTag(f"mldbg.rule.{_key(f.rule)}", _first_words(f))
            for f in {f.rule: f for f in reversed(findings)}.values()
        ]
        self._client.log_batch(self.run_id, metrics=metrics, tags=tags)
        self._client.log_dict(
            self.run_id, {"run": context.run, "findings": self._delivered}, "mldbg/findings.json"
        )

    def _log_series(self) -> None:
        assert self._series is not None
        mlflow = _import_mlflow()
        now = int(time.time() * 1000)
        points = [
            mlflow.entities.Metric(f"mldbg/{_key(key)}", value, now, step)
            for key, step, value in self._series.new_points()
        ]
        for i in range(0, len(points), BATCH):
            self._client.log_batch(self.run_id, metrics=points[i : i + BATCH])

    def close(self) -> None:
        if self._client is not None and self._created and self.run_id is not None:
            self._client.set_terminated(self.run_id)
        self._client = None


def _key(name: str) -> str:
    """A name as MLflow accepts it in a metric or tag key (ASCII alphanumerics, _ - . space : /)."""
    return "".join(c if (c.isascii() and c.isalnum()) or c in "_-. :/" else "_" for c in name)


def _first_words(f: Finding) -> str:
    text = f"step {f.step}" + (f" ({f.mode})" if f.mode else "") + f": {f.message}"
    return text[:MAX_TAG]
