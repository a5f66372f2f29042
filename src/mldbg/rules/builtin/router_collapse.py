"""router_collapse: one expert of a mixture-of-experts layer takes (nearly) all the tokens, or
the router concentrates the tokens on a few experts, beyond routing noise and worsening."""

from __future__ import annotations

import copy
import math
from collections import deque
from dataclasses import dataclass, field

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


def expert_loads(values: np.ndarray) -> np.ndarray | None:
    """`expert_counts` of each row of a stack of values (one row per step): the counts
    (rows x experts), zeros where a row has nothing to count; None for fewer than 2 experts."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim < 2 or v.shape[-1] < 2:
        return None
    if v.ndim == 2:
        return np.where(np.isfinite(v) & (v > 0), v, 0.0)
    rows = v.reshape(len(v), -1, v.shape[-1])
    finite = np.asarray(np.isfinite(rows).all(axis=2), dtype=bool)
    top = np.where(finite, np.where(finite[:, :, None], rows, 0.0).argmax(axis=2), -1)
    return (top[..., None] == np.arange(v.shape[-1])).sum(axis=1).astype(np.float64)


def top_quarter(counts: np.ndarray) -> tuple[int, float, float]:
    """(k, the share of the tokens the k busiest experts take, the share they would take
    under balanced routing k / E), k = ceil(E / 4): the top expert of 4, 2 of 8, 16 of 64."""
    e = len(counts)
    k = max(1, math.ceil(e / 4))
    top = np.sort(counts)[::-1][:k].sum()
    return k, float(top / counts.sum()), k / e


def noise_nats(tokens: float, share: float, fair: float, experts: int, k: int) -> float:
    """How far the k busiest experts' share lies beyond balanced routing's noise, in nats:
    under a multinomial null (each of `tokens` tokens to an expert uniformly at random), the
    chance that some k experts take `share` or more is at most C(E, k) exp(-N KL(share||fair))
    (the Chernoff bound on the binomial tail, a union over the subsets): this returns
    N KL(share||fair) - log C(E, k), the minus log of that bound."""
    if share <= fair or tokens <= 0:
        return 0.0
    s = min(share, 1.0)
    kl = s * math.log(s / fair) + ((1 - s) * math.log((1 - s) / (1 - fair)) if s < 1 else 0.0)
    log_subsets = math.lgamma(experts + 1) - math.lgamma(k + 1) - math.lgamma(experts - k + 1)
    return tokens * kl - log_subsets


def theil_sen(values: list[float]) -> float:
    """The median of the pairwise slopes of `values` over their index (robust to outliers)."""
    n = len(values)
    slopes = [(values[j] - values[i]) / (j - i) for i in range(n) for j in range(i + 1, n)]
    return float(np.median(slopes)) if slopes else 0.0


@dataclass
class _Track:
    """One router tensor in one mode: the saved steps collapsed in a row, and the recent
    judged steps (step, share of the busiest quarter, beyond noise and above the bar)."""

    run: list[int] = field(default_factory=list)
    recent: deque[tuple[int, float, bool]] = field(default_factory=deque)


@register
class RouterCollapse(Rule):
    """In a mixture-of-experts layer the router sends the tokens to a few experts: the others
    stop learning and the layer is one dense FFN at the cost of many. A router trained
    without a load-balancing loss (or with too small a coefficient) feeds the expert that is
    already best, which gets better and takes more tokens. Two findings, each once per router
    tensor and mode:

    - collapse: the largest expert's share of the top-1 routed tokens is above `max_share` at
      `patience` consecutive saved steps;
    - concentration, judged against the number of experts E and its trend: the busiest
      quarter of the experts (k = ceil(E / 4): the top expert of 4, 16 of 64) takes at least
      `concentration` times its fair share k / E of the tokens (for E <= 3, where that share
      cannot be reached, half way from fair to all), at `patience` consecutive saved steps,
      each far beyond balanced routing's noise for the tokens routed (a multinomial null:
      the Chernoff bound on the chance that some k experts take that share, with a union
      over the subsets, below `false_alarm` / 10^6, so a run of up to 10^6 saved steps keeps
      a false-alarm chance below `false_alarm`), while the imbalance worsens (the Theil-Sen
      slope of that share over the last 2 `patience` saved steps is positive). A healthy MoE
      with a load-balancing loss keeps the busiest quarter near its fair share; a router
      whose initial imbalance the balancing loss is correcting has a falling share; a tiny
      batch's imbalance is within the noise.

    Reads the `router` collection (`tensor_regex` reads other names): the two-line PyTorch
    hook records there the tokens per expert of every router it recognises (`expert_counts/
    <router>`, every step: `mldbg.frameworks.torch_router`); else what you save there each
    step: the router's logits or probabilities (any shape, experts on the last axis; each
    token counts for its top-1 expert) or the per-expert token counts (1-D). docs/rules.md,
    "Mixture of experts", shows how.
    """

    needs = ("router",)
    max_share: float = 0.9
    patience: int = 5
    concentration: float = 2.0
    false_alarm: float = 0.01
    tensor_regex: list[str] | None = None
    suggestion = (
        "Add (or raise the coefficient of) a load-balancing auxiliary loss (Switch Transformer: "
        "n_experts x sum(token share x mean router probability), coefficient ~0.01-0.1), or a "
        "router z-loss; add jitter or noise to the router logits, cap expert capacity so excess "
        "tokens overflow to others, and check the router's bias init and learning rate."
    )

    def reset(self) -> None:
        super().reset()
        self._tracks: dict[tuple[str, str], _Track] = {}  # (name, mode) -> its track
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

    def _names(self, trial: TrialView, step: int | None = None) -> list[str]:
        names = trial.names("router", step=step) if not self.tensor_regex else []
        if self.tensor_regex:
            names += trial.names(None, regex=self.tensor_regex, step=step)
        return sorted(set(names))

    # the decision, one saved step of one tensor ----------------------------------------------
    def _bar(self, experts: int, fair: float) -> float:
        """The busiest quarter's share that counts as concentrated."""
        return min(self.concentration * fair, (1.0 + fair) / 2.0)

    def _judge(self, tracks: dict[tuple[str, str], _Track], name: str, mode: str, step: int,
               counts: np.ndarray) -> list[str]:  # fmt: skip
        """Update the track of (`name`, `mode`) with one step's counts; the kinds that fire
        ("collapse", "concentration") and did not fire before."""
        track = tracks.setdefault((name, mode), _Track())
        total = float(counts.sum())
        share = float(counts.max() / total)
        if share > self.max_share:
            track.run.append(step)
        else:
            track.run.clear()
        patience = max(1, self.patience)
        k, quarter, fair = top_quarter(counts)
        e = len(counts)
        above = quarter >= self._bar(e, fair) and noise_nats(total, quarter, fair, e, k) >= math.log(
            1e6 / max(self.false_alarm, 1e-300)
        )
        track.recent.append((step, quarter, above))
        while len(track.recent) > 2 * patience:
            track.recent.popleft()
        kinds = []
        if len(track.run) >= patience and (name, mode) not in self._fired:
            kinds.append("collapse")
        recent = list(track.recent)
        if (
            len(recent) >= patience
            and all(a for _, _, a in recent[-patience:])
            and theil_sen([q for _, q, _ in recent]) > 0
            and (name, mode, "concentration") not in self._fired
        ):
            kinds.append("concentration")
        return kinds

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`): the router tensors' saved values at all
        `steps` stacked (`Columns.values`), each step's expert counts at once, judged as
        `check` judges them on a copy of the state up to the first step that may fire (or
        whose top share lies at `max_share`), then committed up to it. Declines when a value
        is missing or too large to stack."""
        modes, _ = trial.columns.modes(steps)
        judged: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] = []
        for name in self._names(trial):
            over = Over(trial, name, steps)
            if not over.present.any():
                continue
            found = trial.columns.values(name)
            if found is None:
                return 0
            _, values = found
            loads = expert_loads(values)
            if loads is None:  # a scalar, or fewer than 2 experts: nothing to count in check() either
                continue
            rows = over._idx  # its row of `values` at each step (-1: not saved there)
            valid = over.present & (loads.sum(axis=1) > 0)[np.maximum(rows, 0)]
            judged.append((name, valid, rows, loads))
        cut = len(steps)
        trial_tracks = copy.deepcopy(self._tracks)
        for i in range(len(steps)):
            if self._scan_step(trial_tracks, judged, i, steps, modes):
                cut = i
                break
        for i in range(cut):
            self._scan_step(self._tracks, judged, i, steps, modes)
        return cut

    def _scan_step(self, tracks: dict[tuple[str, str], _Track],
                   judged: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]],
                   i: int, steps: np.ndarray, modes: np.ndarray) -> bool:  # fmt: skip
        """Judge step `i` of every tensor into `tracks`: True when it may fire (check() reads it)."""
        hit = False
        for name, valid, rows, loads in judged:
            if not valid[i]:
                continue
            counts = loads[rows[i]]
            if abs(float(counts.max() / counts.sum()) - self.max_share) <= _TOL:
                hit = True
            if self._judge(tracks, name, Mode(int(modes[i])).name, int(steps[i]), counts):
                hit = True
            if tracks is self._tracks:
                self._seen = True
        return hit

    def check(self, trial: TrialView, step: int) -> Finding | None:
        mode = trial.mode(step).name
        found: list[tuple[str, str, np.ndarray]] = []
        for name in self._names(trial, step):
            try:
                counts = expert_counts(trial.value(name, step))
            except MldbgError:
                continue
            if counts is None:
                continue
            self._seen = True
            for kind in self._judge(self._tracks, name, mode, step, counts):
                if self.first((name, mode) if kind == "collapse" else (name, mode, kind)):
                    found.append((kind, name, counts))
        if not found:
            return None
        kind, name, counts = min(found, key=lambda f: f[0] != "collapse")  # a collapse first
        track = self._tracks[(name, mode)]
        n, total = len(counts), counts.sum()
        top = int(counts.argmax())
        share = float(counts[top] / total)
        p = counts[counts > 0] / total
        entropy = float(-(p * np.log(p)).sum() / math.log(n))
        patience = max(1, self.patience)
        if kind == "collapse":
            return self.finding(
                trial, step,
                f"expert {top} of {n} in {name} ({mode}) takes {100 * share:.1f}% of the tokens (more than "
                f"{100 * self.max_share:g}% at {patience} consecutive saved steps since step {track.run[0]}; "
                f"routing entropy {entropy:.2f} of 1): the router collapsed onto one expert",
                tensors=[f[1] for f in found],
            )  # fmt: skip
        k, quarter, fair = top_quarter(counts)
        recent = list(track.recent)
        busiest = "expert" if k == 1 else f"{k} experts"
        return self.finding(
            trial, step,
            f"the busiest {busiest} of {n} in {name} ({mode}) take{'s' if k == 1 else ''} {100 * quarter:.1f}% of "
            f"the {int(total)} "
            f"tokens routed, {quarter / fair:.1f} times their fair share {100 * fair:.0f}% (at least "
            f"{100 * self._bar(n, fair):.0f}% at {patience} consecutive saved steps since step "
            f"{recent[-patience][0]}, far beyond balanced routing's noise), and rising: from "
            f"{100 * recent[0][1]:.1f}% at step {recent[0][0]} (routing entropy {entropy:.2f} of 1): the "
            "router is concentrating the tokens on a few experts",
            tensors=[f[1] for f in found],
        )  # fmt: skip
