"""rank_divergence: parameters that data parallelism keeps identical differ across workers."""

from __future__ import annotations

import numpy as np

from mldbg.config import Mode
from mldbg.errors import MldbgError
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import quiet_prefix
from mldbg.rules.select import short_list
from mldbg.rules.view import TrialView


@register
class RankDivergence(Rule):
    """Parameters that data parallelism keeps identical differ across workers: the replicas
    have drifted apart, and from then on each worker trains its own model (a rank that updates
    a parameter outside DistributedDataParallel, parameters rebound after wrapping, the wrapper
    bypassed, a lossy or skipped all-reduce, clipping or an optimizer step that runs on some
    ranks only).

    Reads the `fingerprint` (an exact hash of the bits) of each parameter, which every worker
    of a data-parallel PyTorch job records at the same *fingerprint steps* (every train step of
    the first 20, then every 10th), with include_workers="one" too. A parameter is compared
    once its fingerprints agreed on every worker at an earlier step (DistributedDataParallel
    broadcasts them at wrapping; sharded or model-parallel parameters never agree and are left
    alone); it fires at the first step where they differ. Needs the whole run: under
    `per_worker` checking each worker is alone and the rule has nothing to compare.
    """

    needs = ("weights",)
    reads = {"weights": ("fingerprint",), "biases": ("fingerprint",)}

    def reset(self) -> None:
        super().reset()
        self._replicated: set[str] = set()  # parameters seen identical on every worker

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`): every step of a run of one worker (nothing to
        compare), else the leading steps that are not training steps with a record of a
        weight or bias saved by two workers or more (where `check` has nothing to compare)."""
        if len(trial.workers()) < 2:
            return len(steps)
        modes, _ = trial.columns.modes(steps)
        saved = np.zeros(len(steps), dtype=bool)
        for name in trial.names(("weights", "biases")):
            records = trial.trial.records(name)
            pairs = np.unique(np.stack([records.step, records.worker]), axis=1)  # (step, worker) once
            at, count = np.unique(pairs[0], return_counts=True)
            saved |= np.isin(steps, at[count >= 2])
        return quiet_prefix(saved & (modes == int(Mode.TRAIN)))

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN or len(trial.workers()) < 2:
            return None
        diverged: list[tuple[str, dict[str, float]]] = []
        for name in trial.names(("weights", "biases"), step=step):
            try:
                records = trial.trial.records(name, step=step)
            except MldbgError:
                continue
            prints: dict[str, float] = {}
            for rec in records:
                value = rec.statistics.get("fingerprint")
                if value is not None:
                    prints.setdefault(rec.worker, value)
            if len(prints) < 2:
                continue
            if len(set(prints.values())) == 1:
                self._replicated.add(name)
            elif name in self._replicated:
                diverged.append((name, prints))
        diverged = [d for d in diverged if self.first(d[0])]
        if not diverged:
            return None
        name, prints = diverged[0]
        groups: dict[float, list[str]] = {}
        for worker, value in sorted(prints.items()):
            groups.setdefault(value, []).append(worker)
        parts = "; ".join(f"{', '.join(ws)}: {int(v)}" for v, ws in groups.items())
        return self.finding(
            trial, step,
            f"{len(diverged)} replicated parameter{'s' if len(diverged) > 1 else ''} differ across workers "
            f"at step {step} ({short_list([d[0] for d in diverged])}), identical at an earlier step: "
            f"fingerprints of {name}: {parts}",
            tensors=[d[0] for d in diverged],
            suggestion="Update replicated parameters only through the DistributedDataParallel model and the "
            "optimizer, on every rank alike: call the wrapped model (not model.module) in training, wrap "
            "after moving and rebinding parameters, build the optimizer from the wrapped model's "
            "parameters, and make clipping and any manual all-reduce cover every parameter on every rank.",
        )  # fmt: skip
