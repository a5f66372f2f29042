"""Send findings (and, if asked, the run's losses and scalars) to a Weights & Biases run.

For each delivery, logged to the W&B run's history (x axis `mldbg/step`, the finding's global
step):
- `mldbg/findings`: how many findings so far; `mldbg/rule/<rule>`: the finding in words;
- `mldbg/findings_table`: a `wandb.Table` of every finding delivered so far (rule, step,
  mode, severity, message, tensors, suggestion);
- the run's summary: `mldbg/findings` (the count) and `mldbg/rule/<rule>` (its first finding).
Online, each delivery also raises a `wandb.alert` (W&B's e-mail or Slack notice); W&B offers
no alerts offline (`mode="offline"`, or `WANDB_MODE=offline`), where the rest is written to
the offline run files for a later `wandb sync`.

With `log_statistics=True`, every cycle also logs the new values of the run's `losses` and
`scalars` collections (`mldbg/<tensor>`, `mldbg/eval/<tensor>`) at their global steps.

The run: `run_id` resumes an existing W&B run (one the training does not hold open: W&B lets
one process write a run), else a new run in `project` named after the recorded run, finished
when the watcher ends. Where the training has its own run (`wandb.init` called before the
action is made or handed to the hook's watcher process), the new run sits beside it: its
project, entity, mode and directory, its group (`group`, default the training run's group or
id), named `<its name>-mldbg`, with `mldbg.training_run` (its id) in the config. `mode` and
`dir` are passed to `wandb.init` (None: W&B's environment, `WANDB_MODE`, `WANDB_DIR`). wandb is
imported only here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mldbg.actions.base import Action, Context, register_action, summary
from mldbg.actions.series import ScalarSeries
from mldbg.errors import MldbgError

if TYPE_CHECKING:
    from mldbg.rules.base import Finding

TABLE_COLUMNS = ["rule", "step", "mode", "severity", "message", "tensors", "suggestion"]


def _import_wandb() -> Any:
    try:
        import wandb
    except ImportError:
        raise MldbgError(
            "the WandB action needs wandb, which is not installed: pip install wandb (or mldbg[wandb])"
        ) from None
    return wandb


@register_action(aliases=("wandb",))
class WandB(Action):
    """Findings to a W&B run: history, a findings table, the summary, alerts when online."""

    def __init__(
        self,
        project: str | None = "mldbg",
        entity: str | None = None,
        run_id: str | None = None,
        name: str | None = None,
        mode: str | None = None,
        dir: str | None = None,
        log_statistics: bool = False,
        alert: bool = True,
        group: str | None = None,
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
        self.project = project
        self.entity = entity
        self.run_id = run_id
        self.name = name
        self.mode = mode
        self.dir = dir
        self.log_statistics = log_statistics
        self.alert = alert
        self.group = group
        self._training_run: str | None = None  # the training's own W&B run, beside which we log
        self._run: Any = None
        self._delivered: list[Finding] = []
        self._series: ScalarSeries | None = None
        self._last_step = -1
        self._follow_active_run()

    def _follow_active_run(self) -> None:
        """No run named: if the training has its own W&B run (`wandb.init` before the hook),
        the findings go to a run beside it: same project, entity, mode and directory, in its
        group, named after it, its id in the config (W&B lets one process write a run: the
        watcher's is its own)."""
        wandb = sys.modules.get("wandb")
        run = getattr(wandb, "run", None) if wandb is not None else None
        if self.run_id is not None or self._training_run is not None or run is None:
            return
        self._training_run = run.id
        self.project, self.entity = run.project, run.entity or self.entity
        self.mode = self.mode or ("offline" if run.offline else None)
        self.dir = self.dir or getattr(run.settings, "root_dir", None)
        self.group = self.group or run.group or run.id
        self.name = self.name or f"{run.name or run.id}-mldbg"

    def __getstate__(self) -> dict[str, Any]:
        """Handed to the hook's watcher process: the run active in the training now."""
        self._follow_active_run()
        return self.__dict__.copy()

    def describe(self) -> str:
        return f"WandB({self.entity + '/' if self.entity else ''}{self.project}, run={self.run_id or 'new'})"

    @property
    def offline(self) -> bool:
        mode = self.mode or os.environ.get("WANDB_MODE", "")
        return mode in ("offline", "dryrun", "disabled")

    def start(self, context: Context) -> None:
        wandb = _import_wandb()
        if self.dir is not None:
            os.makedirs(self.dir, exist_ok=True)
        self._run = wandb.init(
            project=self.project,
            entity=self.entity,
            id=self.run_id,
            resume="allow" if self.run_id else None,
            name=self.name or os.path.basename(context.run.rstrip("/")) or None,
            group=self.group,
            mode=self.mode,
            dir=self.dir,
            config={"mldbg.run": context.run, "mldbg.rules": context.rules}
            | ({"mldbg.training_run": self._training_run} if self._training_run else {}),
            reinit="create_new",
        )
        self.run_id = self._run.id
        self._run.define_metric("mldbg/step")
        self._run.define_metric("mldbg/*", step_metric="mldbg/step")
        if self.log_statistics:
            self._series = ScalarSeries(context.store if context.store is not None else context.run)

    def __call__(self, findings: Iterable[Finding], context: Context, final: bool = False) -> int:
        """The gate for findings (see `Action`); with `log_statistics`, the new losses and
        scalars every cycle."""
        if self._series is not None and self._run is not None:
            by_step: dict[int, dict[str, float]] = {}
            for key, step, value in self._series.new_points():
                by_step.setdefault(step, {})[f"mldbg/{key}"] = value
            for step in sorted(by_step):
                self._run.log({"mldbg/step": step, **by_step[step]})
        return super().__call__(findings, context, final)

    def act(self, findings: list[Finding], context: Context) -> None:
        wandb = _import_wandb()
        self._delivered.extend(findings)
        table = wandb.Table(
            columns=TABLE_COLUMNS,
            data=[
                [f.rule, f.step, f.mode or "", f.severity, f.message, ", ".join(f.tensors), f.suggestion]
                for f in self._delivered
            ],
        )
        row: dict[str, Any] = {
            "mldbg/step": max(f.step for f in findings),
            "mldbg/findings": len(self._delivered),
            "mldbg/findings_table": table,
        }
        for f in findings:
            row.setdefault(f"mldbg/rule/{f.rule}", _words(f))
        self._run.log(row)
        # the summary keeps each rule's first finding (the history row's value would be its last)
        self._run.summary["mldbg/findings"] = len(self._delivered)
        first: dict[str, Finding] = {}
        for f in self._delivered:
            first.setdefault(f.rule, f)
        for rule, f in first.items():
            self._run.summary[f"mldbg/rule/{rule}"] = _words(f)
        if self.alert and not self.offline:
            self._run.alert(
                title=summary(findings, context.run)[:64],
                text="\n".join(str(f) for f in findings),
                level=wandb.AlertLevel.ERROR
                if any(f.severity == "error" for f in findings)
                else wandb.AlertLevel.WARN,
            )

    def close(self) -> None:
        if self._run is not None:
            self._run.finish()
        self._run = None


def _words(f: Finding) -> str:
    return f"step {f.step}" + (f" ({f.mode})" if f.mode else "") + f": {f.message}"
