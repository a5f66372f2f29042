"""nlp_sequence_ratio: input sequences made mostly of one token (padding)."""

from __future__ import annotations

import math

import numpy as np

from mldbg.errors import InvalidConfig
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import quiet_prefix
from mldbg.rules.view import TrialView
from mldbg.store.statistics import Statistic

_MIN_TOKENS = 1000


def _token_counts(trial: TrialView, name: str, step: int, tokens: list[int]) -> tuple[np.ndarray, int] | None:
    """(occurrences of each token, tokens in all) in an integer (batch, length) input at a
    step: from the raw tensor, else from its saved `equal(v)` statistics and its shape."""
    layout = trial.layout(name, step)
    if layout is None or len(layout[1]) != 2 or layout[0] not in "iu":
        return None
    x = trial.raw(name, step)
    if x is not None:
        return np.array([np.count_nonzero(x == tok) for tok in tokens], dtype=np.int64), int(x.size)
    total = math.prod(layout[1])
    shares = []
    for tok in tokens:
        share = trial.saved_statistic(name, step, Statistic("equal", (float(tok),)))
        if not isinstance(share, float) or not math.isfinite(share):
            return None
        shares.append(round(share * total))
    return np.array(shares, dtype=np.int64), total


@register
class NlpSequenceRatio(Rule):
    """The share of given token ids in the input sequences exceeds its threshold:
    `token_values` and `token_thresholds_percent` are parallel comma-separated lists
    (default: token 0, usually padding, above 50%), measured over all training inputs seen
    (after at least 1000 tokens).

    When most of every sequence is padding, the model spends its compute on nothing and, if
    padding is not masked, learns from it: sort or bucket sequences by length, or cut the
    maximum length. Integer model inputs of shape (batch, length) are read (the `inputs`
    collection, or `tensor_regex`); images and float features are not sequences. Without
    raw inputs it reads the `equal(v)` statistic of each token (the share of the batch's
    elements equal to it) that a hook records, `equal(0.0)` by default.
    """

    needs = ("inputs",)
    reads = {"inputs": ("equal(0.0)",)}
    token_values: str = "0"
    token_thresholds_percent: str = "50"
    tensor_regex: list[str] | None = None
    suggestion = (
        "Bucket or sort sequences by length so batches pad less, lower the maximum sequence length, "
        "and mask padding in attention and in the loss (ignore_index)."
    )

    def reset(self) -> None:
        super().reset()
        self._counts: dict[str, np.ndarray] = {}  # per input tensor, the count of each token
        self._totals: dict[str, int] = {}  # per input tensor, the tokens seen

    def needed_collections(self) -> tuple[str, ...]:
        return () if self.tensor_regex else self.needs

    def needed_statistics(self) -> dict[str, tuple[str, ...]]:
        return {"inputs": tuple(Statistic("equal", (float(tok),)).key for tok, _ in self._tokens())}

    def _tokens(self) -> list[tuple[int, float]]:
        """(token id, limit %) pairs of the parameters; a bad value fails the rule where it runs."""
        values = [v.strip() for v in str(self.token_values).split(",") if v.strip()]
        limits = [v.strip() for v in str(self.token_thresholds_percent).split(",") if v.strip()]
        if len(limits) == 1:
            limits *= len(values)
        if len(values) != len(limits):
            raise InvalidConfig(
                f"nlp_sequence_ratio: {len(values)} token_values but {len(limits)} token_thresholds_percent"
            )
        try:
            return [(int(v), float(t)) for v, t in zip(values, limits, strict=True)]
        except ValueError:
            raise InvalidConfig(
                f"nlp_sequence_ratio: token_values {self.token_values!r} must be integers"
            ) from None

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading `steps` where no input is an integer (batch, length) sequence (float
        features, images): `check` finds nothing to count there. Integer sequences end them."""
        names = trial.names(None, regex=self.tensor_regex) if self.tensor_regex else trial.names("inputs")
        interesting = np.zeros(len(steps), dtype=bool)
        for name in names:
            cols = trial.columns.tensor(name)
            if cols is None or not len(cols.steps):
                continue
            kinds, ndim = cols.layouts(trial.trial)
            sequence = np.isin(kinds, ("i", "u")) & (ndim == 2)
            i = cols.at(steps)
            interesting |= (i >= 0) & sequence[np.maximum(i, 0)]
        return quiet_prefix(interesting)

    def check(self, trial: TrialView, step: int) -> Finding | None:
        pairs = self._tokens()
        names = (
            trial.names(None, regex=self.tensor_regex, step=step)
            if self.tensor_regex
            else trial.names("inputs", step=step)
        )
        out = []
        for name in names:
            got = _token_counts(trial, name, step, [tok for tok, _ in pairs])
            if got is None:
                continue
            counts = self._counts.setdefault(name, np.zeros(len(pairs), dtype=np.int64))
            counts += got[0]
            self._totals[name] = self._totals.get(name, 0) + got[1]
            out += self._judge(trial, step, name)
        return out[0] if out else None

    def finish(self, trial: TrialView) -> Finding | None:
        for name in self._counts:
            found = self._judge(trial, trial.steps()[-1], name, final=True)
            if found:
                return found[0]
        return None

    def unchecked(self) -> str | None:
        if not self._counts:
            return "no integer (batch, length) input sequences were saved"
        return None

    def _judge(self, trial: TrialView, step: int, name: str, final: bool = False) -> list[Finding]:
        total = self._totals.get(name, 0)
        if total == 0 or (total < _MIN_TOKENS and not final):
            return []
        bad = [
            (tok, 100.0 * self._counts[name][i] / total, limit)
            for i, (tok, limit) in enumerate(self._tokens())
            if 100.0 * self._counts[name][i] / total > limit
        ]
        bad = [b for b in bad if self.first((name, b[0]))]
        if not bad:
            return []
        parts = ", ".join(
            f"token {t} is {share:.0f}% of the tokens (limit {limit:g}%)" for t, share, limit in bad
        )
        return [self.finding(trial, step, f"in {name} over {total} tokens: {parts}", tensors=[name])]
