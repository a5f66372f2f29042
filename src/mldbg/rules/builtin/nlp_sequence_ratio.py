"""nlp_sequence_ratio: input sequences made mostly of one token (padding)."""

from __future__ import annotations

import math

import numpy as np

from mldbg.errors import InvalidConfig
from mldbg.rules import detect
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import quiet_prefix
from mldbg.rules.stats import binomial_tail
from mldbg.rules.view import TrialView
from mldbg.store.statistics import Statistic, sample_fingerprint

_MIN_TOKENS = 1000
_FIRST_TEST_ROWS = 32  # the start-token test runs when the rows read pass 32, 64, 128, ...
_INT_DTYPES = (np.int64, np.int32, np.int16, np.int8, np.uint8, np.uint16, np.uint32, np.uint64)


def _filled_rows(
    trial: TrialView, name: str, step: int, tokens: list[int]
) -> tuple[np.ndarray, int, int] | None:
    """(rows made only of each token, rows, row length) of an integer (batch, length) input at
    a step: from the raw tensor, else from its `sample_fingerprints` (a row of one repeated
    token has a known fingerprint, per integer dtype); None when neither was recorded."""
    layout = trial.layout(name, step)
    if layout is None or len(layout[1]) != 2 or layout[0] not in "iu":
        return None
    rows, length = layout[1]
    x = trial.raw(name, step)
    if x is not None:
        x = np.asarray(x).reshape(rows, length)
        return (
            np.array([np.count_nonzero((x == tok).all(axis=1)) for tok in tokens], dtype=np.int64),
            rows,
            length,
        )
    found = trial.statistic(name, step, "sample_fingerprints")
    if not isinstance(found, np.ndarray) or len(found.reshape(-1)) != rows:
        return None
    found = found.reshape(-1).astype(np.int64)
    counts = []
    for tok in tokens:
        marks = {
            sample_fingerprint(np.full(length, tok, dtype=dt))
            for dt in _INT_DTYPES
            if np.iinfo(dt).min <= tok <= np.iinfo(dt).max
        }
        counts.append(int(np.isin(found, list(marks)).sum()))
    return np.array(counts, dtype=np.int64), rows, length


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


def _t_upper(p: float, nu: int) -> float:
    """The upper `p` quantile of Student's t: exact at 1 and 2 degrees of freedom (where the
    Cornish-Fisher series is far off), that series from 3 on."""
    if nu == 1:
        return 1.0 / math.tan(math.pi * p)
    if nu == 2:
        return (1 - 2 * p) / math.sqrt(2 * p * (1 - p))
    return detect.t_quantile(p, nu)


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

    The share is the run's, not the first batches': batches are the units (a batch's rows
    share its padded length), and a token is over its limit only when the pooled share exceeds
    it by a one-sided t bound on the mean of the steps' shares (level `budget` / (j (j + 1))
    at the j-th test, at least two steps; one step alone is judged at the run's end). Dynamic
    padding (`pad_sequence` to the batch's longest) varies from batch to batch (a GRU
    classifier's first batch 52% padding, its run 40%); padding to a fixed length is nearly
    constant and confirmed within a few batches.

    A start token that fills fixed context windows is not padding: a model that predicts the
    next token from the `B` tokens before it (makemore's MLP and WaveNet, Bengio et al.
    2003, n-gram windows) reads, at the start of each text, contexts filled with the start
    token ('.' in makemore), and with texts shorter than `B` most of its input is that
    token. It is information (where the text starts), and the window's length is the
    model's, not the data's: nothing to bucket or mask. What tells it apart: padding holds a
    sequence in every row, while start contexts make whole rows of the token, one per text
    (the context of its first token). A text of any length gives at most B + (B - 1) + ...
    + 1 = B (B + 1) / 2 start tokens in windows of B, so contexts whose token share is `s`
    hold rows made only of it at a share of at least 2 s / (B + 1). The rows made only of
    the token are counted (from the raw rows, or the `sample_fingerprints`: a row of one
    repeated token has a known fingerprint), and an over-limit token fires only when they
    are too few for that: P(Bin(rows, 2 s / (B + 1)) <= count) below `budget` / (j (j + 1))
    at the j-th test (tests as the rows read pass 32, 64, 128, ...: at most `budget` per
    run). Where neither raw rows nor fingerprints were recorded it is judged as before.
    """

    needs = ("inputs",)
    reads = {"inputs": ("equal(0.0)", "sample_fingerprints")}
    token_values: str = "0"
    token_thresholds_percent: str = "50"
    tensor_regex: list[str] | None = None
    budget: float = 1e-3
    suggestion = (
        "Bucket or sort sequences by length so batches pad less, lower the maximum sequence length, "
        "and mask padding in attention and in the loss (ignore_index)."
    )

    def reset(self) -> None:
        super().reset()
        self._counts: dict[str, np.ndarray] = {}  # per input tensor, the count of each token
        self._totals: dict[str, int] = {}  # per input tensor, the tokens seen
        # per input tensor, at the steps whose rows could be read: the rows made only of each
        # token, the rows, and the sum of rows * 2 / (B + 1) (start contexts' rows per share)
        self._filled: dict[str, np.ndarray] = {}
        self._rows: dict[str, int] = {}
        self._weight: dict[str, float] = {}
        self._tests: dict[str, int] = {}  # start-token tests made (alpha spending)
        self._next_test: dict[str, int] = {}  # the rows at which the next one runs
        self._started: dict[str, set[int]] = {}  # tokens whose rows a start token explained at the last test
        self._shares: dict[str, list[np.ndarray]] = {}  # per input tensor, each step's share of each token
        self._share_tests: dict[str, int] = {}  # share tests made (alpha spending)

    def needed_collections(self) -> tuple[str, ...]:
        return () if self.tensor_regex else self.needs

    def needed_statistics(self) -> dict[str, tuple[str, ...]]:
        equal = tuple(Statistic("equal", (float(tok),)).key for tok, _ in self._tokens())
        return {"inputs": (*equal, "sample_fingerprints")}  # the rows made only of a token

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
            if got[1]:
                self._shares.setdefault(name, []).append(got[0] / got[1])
            rows = _filled_rows(trial, name, step, [tok for tok, _ in pairs])
            if rows is not None:
                filled = self._filled.setdefault(name, np.zeros(len(pairs), dtype=np.int64))
                filled += rows[0]
                self._rows[name] = self._rows.get(name, 0) + rows[1]
                self._weight[name] = self._weight.get(name, 0.0) + rows[1] * 2.0 / (rows[2] + 1)
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
        over = [
            (i, tok, 100.0 * self._counts[name][i] / total, limit)
            for i, (tok, limit) in enumerate(self._tokens())
            if 100.0 * self._counts[name][i] / total > limit
        ]
        over = self._significant(name, over, final)
        started = self._start_tokens(name, over, final)
        bad = [(i, t, share, limit) for i, t, share, limit in over if t not in started]
        bad = [b for b in bad if self.first((name, b[1]))]
        if not bad:
            return []
        parts = ", ".join(
            f"token {t} is {share:.0f}% of the tokens (limit {limit:g}%){self._rows_said(name, i, share)}"
            for i, t, share, limit in bad
        )
        return [self.finding(trial, step, f"in {name} over {total} tokens: {parts}", tensors=[name])]

    def _significant(
        self, name: str, over: list[tuple[int, int, float, float]], final: bool
    ) -> list[tuple[int, int, float, float]]:
        """The over-limit tokens whose share is over its limit for the run, not for the batches
        read so far: batches are the units (a batch's rows share its padded length), and the
        pooled share must exceed the limit by a one-sided t bound on the mean of the steps'
        shares, at level `budget` / (j (j + 1)) at the j-th test (at most `budget` per run).
        Dynamic padding makes the share vary from batch to batch (the first batch of a GRU
        classifier's reviews: 52%, the run's: 40%); padding to a fixed length makes it (nearly)
        constant, and one more batch confirms it. One batch alone is judged at the run's end only."""
        if not over:
            return over
        shares = np.asarray(self._shares.get(name, []), dtype=np.float64)
        k = len(shares)
        if k < 2:
            return over if final else []
        j = self._share_tests[name] = self._share_tests.get(name, 0) + 1
        t = _t_upper(self.budget / (j * (j + 1)), k - 1)
        kept = []
        for i, tok, share, limit in over:
            se = float(shares[:, i].std(ddof=1)) / math.sqrt(k)
            if share / 100.0 - t * se > limit / 100.0:
                kept.append((i, tok, share, limit))
        return kept

    def _start_tokens(self, name: str, over: list[tuple[int, int, float, float]], final: bool) -> set[int]:
        """The over-limit tokens whose rows made only of them are as many as start contexts of
        fixed windows give (see the class doc): tested as the rows read pass 32, 64, 128, ...,
        and at the end; between tests the last answer holds. Without rows read: none."""
        rows = self._rows.get(name, 0)
        if not over or not rows:
            return set()
        due = self._next_test.get(name, _FIRST_TEST_ROWS)
        if rows < due and not final and name in self._started:
            return self._started[name]
        if rows >= due:
            while due <= rows:
                due *= 2
            self._next_test[name] = due
        j = self._tests[name] = self._tests.get(name, 0) + 1
        alpha = self.budget / (j * (j + 1))
        started = set()
        for i, tok, share, _ in over:
            p0 = min(1.0, share / 100.0 * self._weight[name] / rows)
            if binomial_tail(int(self._filled[name][i]), rows, p0) >= alpha:
                started.add(tok)
        self._started[name] = started
        return started

    def _rows_said(self, name: str, i: int, share: float) -> str:
        rows = self._rows.get(name, 0)
        if not rows:
            return ""
        least = share / 100.0 * self._weight[name]
        return (
            f"; {int(self._filled[name][i])} of {rows} rows are made only of it, where a start token filling "
            f"fixed context windows would give at least {least:.0f}: padding"
        )
