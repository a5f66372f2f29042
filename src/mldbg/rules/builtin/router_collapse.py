"""router_collapse: one expert of a mixture-of-experts layer takes (nearly) all the tokens."""

from __future__ import annotations

import math

import numpy as np

from mldbg.config import Mode
from mldbg.errors import MldbgError
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over
from mldbg.rules.view import TrialView

_TOL = 1e-12  # a share this close to max_share is check()'s to judge


def expert_counts(value: np.ndarray) -> np.ndarray | None:
    """Tokens per expert: a 1-D tensor is the counts themselves; a tensor of 2 or more axes
    holds router logits (or probabilities) over its last axis, and each row goes to its top-1
    expert. None when there is nothing to count (fewer than 2 experts, no finite row)."""
    v = np.asarray(value, dtype=np.float64)
    if v.ndim == 0 or v.shape[-1] < 2:
        return None
    if v.ndim == 1:
        counts = np.where(np.isfinite(v) & (v > 0), v, 0.0)
    else:
        rows = v.reshape(-1, v.shape[-1])
        rows = rows[np.isfinite(rows).all(axis=1)]
        counts = np.bincount(rows.argmax(axis=1), minlength=v.shape[-1]).astype(np.float64)
    return counts if counts.sum() > 0 else None


def expert_shares(values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """`expert_counts` over a stack of values (one row per step): (the counts have a token,
    the top expert's share) per row; None when no row has anything to count."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim < 2 or v.shape[-1] < 2:
        return None
    if v.ndim == 2:
        counts = np.where(np.isfinite(v) & (v > 0), v, 0.0)
    else:
        rows = v.reshape(len(v), -1, v.shape[-1])
        finite = np.asarray(np.isfinite(rows).all(axis=2), dtype=bool)
        top = np.where(finite, np.where(finite[:, :, None], rows, 0.0).argmax(axis=2), -1)
        counts = (top[..., None] == np.arange(v.shape[-1])).sum(axis=1).astype(np.float64)
    total = counts.sum(axis=1)
    valid = total > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(valid, counts.max(axis=1) / np.where(valid, total, 1.0), np.nan)
    return valid, share


@register
class RouterCollapse(Rule):
    """In a mixture-of-experts layer one expert takes (nearly) all the tokens: the largest
    expert's share of the top-1 routed tokens is above `max_share` at `patience` consecutive
    saved steps (per router tensor and mode).

    A router trained without a load-balancing loss (or with too small a coefficient) feeds
    the expert that is already best, which gets better and takes more tokens: the other
    experts stop learning and the layer is one dense FFN at the cost of many. Reads what you
    save in the `router` collection each step (`tensor_regex` reads other names): the
    router's logits or probabilities (any shape, experts on the last axis; each token counts
    for its top-1 expert) or the per-expert token counts (1-D). docs/rules.md, "Mixture of
    experts", shows how to save them.
    """

    needs = ("router",)
    max_share: float = 0.9
    patience: int = 5
    tensor_regex: list[str] | None = None
    suggestion = (
        "Add (or raise the coefficient of) a load-balancing auxiliary loss (Switch Transformer: "
        "n_experts x sum(token share x mean router probability), coefficient ~0.01-0.1), or a "
        "router z-loss; add jitter or noise to the router logits, cap expert capacity so excess "
        "tokens overflow to others, and check the router's bias init and learning rate."
    )

    def reset(self) -> None:
        super().reset()
        self._runs: dict[tuple[str, str], list[int]] = {}  # (name, mode) -> steps collapsed in a row
        self._seen = False

    def needed_collections(self) -> tuple[str, ...]:
        return () if self.tensor_regex else self.needs

    def unchecked(self) -> str | None:
        if not self._seen:
            return (
                "no router outputs (save the router's logits or the per-expert token counts in the "
                "'router' collection: hook.save_tensor('moe.router', logits, collections=['router']))"
            )
        return None

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`): the router tensors' saved values at all
        `steps` stacked (`Columns.values`), the top expert's share of each counted at once,
        the runs kept per tensor and mode as `check` keeps them, up to the first step where a
        run reaches `patience` (or a share lies at `max_share`). Declines when a value is
        missing or too large to stack."""
        names = trial.names("router") if not self.tensor_regex else []
        if self.tensor_regex:
            names += trial.names(None, regex=self.tensor_regex)
        modes, _ = trial.columns.modes(steps)
        judged: list[tuple[str, np.ndarray, np.ndarray]] = []
        for name in sorted(set(names)):
            over = Over(trial, name, steps)
            if not over.present.any():
                continue
            found = trial.columns.values(name)
            if found is None:
                return 0
            have, values = found
            rows = over._idx  # its row of `values` at each step (-1: not saved there)
            shares = expert_shares(values)
            if shares is None:  # a scalar, or fewer than 2 experts: nothing to count in check() either
                continue
            valid = over.present & shares[0][np.maximum(rows, 0)]
            judged.append((name, valid, np.where(valid, shares[1][np.maximum(rows, 0)], np.nan)))
        cut = len(steps)
        for name, valid, share in judged:
            cut = min(cut, self._scan(name, valid, share, modes, steps, cut, commit=False))
        for name, valid, share in judged:
            self._scan(name, valid, share, modes, steps, cut, commit=True)
        return cut

    def _scan(
        self,
        name: str,
        valid: np.ndarray,
        share: np.ndarray,
        modes: np.ndarray,
        steps: np.ndarray,
        upto: int,
        commit: bool,
    ) -> int:
        """The runs of one tensor over `steps[:upto]` as `check` keeps them: the index of the
        first step that may fire (`upto` when none); the state kept when `commit`."""
        runs: dict[str, list[int]] = {}
        for i in np.flatnonzero(valid[:upto]).tolist():
            mode = Mode(int(modes[i])).name
            run = runs.get(mode)
            if run is None:
                run = runs[mode] = list(self._runs.get((name, mode), []))
            value = float(share[i])
            if abs(value - self.max_share) <= _TOL:
                return i
            if value > self.max_share:
                run.append(int(steps[i]))
            else:
                run.clear()
            if len(run) >= max(1, self.patience) and (name, mode) not in self._fired:
                return i
            if commit:
                self._seen = True
        if commit:
            for mode, run in runs.items():
                self._runs[(name, mode)] = run
        return upto

    def check(self, trial: TrialView, step: int) -> Finding | None:
        names = trial.names("router", step=step) if not self.tensor_regex else []
        if self.tensor_regex:
            names += trial.names(None, regex=self.tensor_regex, step=step)
        mode = trial.mode(step).name
        collapsed = []
        for name in sorted(set(names)):
            try:
                counts = expert_counts(trial.value(name, step))
            except MldbgError:
                continue
            if counts is None:
                continue
            self._seen = True
            total = counts.sum()
            top = int(counts.argmax())
            share = float(counts[top] / total)
            run = self._runs.setdefault((name, mode), [])
            if share > self.max_share:
                run.append(step)
            else:
                run.clear()
            if len(run) >= max(1, self.patience) and self.first((name, mode)):
                p = counts[counts > 0] / total
                entropy = float(-(p * np.log(p)).sum() / math.log(len(counts)))
                collapsed.append((name, top, share, len(counts), entropy, run[0]))
        if not collapsed:
            return None
        name, top, share, n, entropy, since = collapsed[0]
        return self.finding(
            trial, step,
            f"expert {top} of {n} in {name} ({mode}) takes {100 * share:.1f}% of the tokens (more than "
            f"{100 * self.max_share:g}% at {max(1, self.patience)} consecutive saved steps since step {since}; "
            f"routing entropy {entropy:.2f} of 1): the router collapsed onto one expert",
            tensors=[c[0] for c in collapsed],
        )  # fmt: skip
