"""exploding_tensor: NaN or infinite values."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from mldbg.errors import TensorUnavailableForStep
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, present_rows, quiet_prefix, raw_values, selected_all
from mldbg.rules.select import needed, selected, short_list
from mldbg.rules.view import TrialView
from mldbg.store.format import DTYPES

# reductions that carry a NaN or an inf through, tried in this order when only reductions were saved
_PROBES = (
    ("max", True),
    ("max", False),
    ("min", False),
    ("mean", True),
    ("mean", False),
    ("l2", False),
    ("l1", False),
    ("sum", False),
    ("std", False),
    ("variance", False),
)

#: with more tensors than this, those of at most `_FEW_RECORDS` records that all hold their raw
#: value (a run of 100,000 scalar names) are judged together (`_raw_together`), not one by one
_MANY_TENSORS = 256
_FEW_RECORDS = 64
_CHUNK = 1 << 22  # values judged per pass of `_raw_together`


def nonfinite(
    view: TrialView, name: str, step: int, probes: dict[str, tuple[str, bool]] | None = None
) -> str | None:
    """'nan', 'inf' or None for a tensor at a step: from the raw tensor, else the saved
    `nan_count` / `inf_count` statistics, else a saved reduction that carries a NaN or an inf
    through (max |x|, mean, l2...)."""
    raw = view.raw(name, step)
    m: float | None
    if raw is not None:
        if raw.dtype.kind not in "fc" or raw.size == 0:
            return None
        m = view.reduce(name, step, "max", abs=True)
    else:
        nans = view.saved_statistic(name, step, "nan_count")
        infs = view.saved_statistic(name, step, "inf_count")
        if isinstance(nans, float) and nans > 0:
            return "nan"
        if isinstance(infs, float) and infs > 0 and nans is not None:
            return "inf"
        if nans is not None and infs is not None:
            return None
        saved = view.saved_reductions(name, step)
        m = next((saved[p] for p in _PROBES if p in saved), None)
        if m is None:
            for red, is_abs in _PROBES:  # an index this version does not read: the public API
                try:
                    m = view.tensor(name).reduction_value(step, red, is_abs)
                    break
                except TensorUnavailableForStep:
                    continue
        if m is None:
            return None
    if math.isnan(m):
        return "nan"
    if math.isinf(m):
        return "inf"
    return None


@register
class ExplodingTensor(Rule):
    """A tensor holds NaN (or +-inf, unless `only_nan`).

    Once a value is NaN or infinite, every update that touches it is too: training is lost
    from that step on. Unless only the loss is: a NaN loss whose step's gradients were
    recorded finite has a term no gradient sees (a hand-written `t * log t` at t = 0), and the
    finding says so (the training may be sound; its loss cannot be judged). The usual cause is a learning rate that is too high (the updates grow
    until they overflow), then log(0) or a division by zero in the loss. All tensors are
    inspected unless `collection_names` / `tensor_regex` narrow it; it works from saved
    reductions too (a NaN or inf shows in max, mean or norm), and from the `nan_count` and
    `inf_count` statistics a two-line hook records every step.
    """

    reads = {"all": ("nan_count", "inf_count")}
    collection_names: list[str] | None = None
    tensor_regex: list[str] | None = None
    only_nan: bool = False
    suggestion = (
        "Lower the learning rate (try 10x smaller), clip gradients (e.g. "
        "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)), normalize the inputs, and look "
        "for log(0), sqrt of negatives or division by zero in the loss."
    )

    def needed_collections(self) -> tuple[str, ...]:
        return needed(self.collection_names, self.tensor_regex, ())

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The leading `steps` where no inspected tensor is NaN or inf, from the saved
        `nan_count` / `inf_count` statistics or reductions (and a small raw tensor's values,
        such as the loss's); a step with a tensor that only its raw value can judge ends them."""
        if None in self._fired:  # reported already (once per run): nothing more to find
            return len(steps)
        interesting = np.zeros(len(steps), dtype=bool)
        names = selected_all(trial, self.collection_names, self.tensor_regex, None)
        if len(names) > _MANY_TENSORS and len(steps):
            names = self._raw_together(trial, names, steps, interesting)
        for name in names:
            # judged at the steps where it has a record only (a gradient saved at 10^4 of
            # 10^6 steps: arrays of 10^4, not 10^6, per statistic)
            rows = present_rows(trial, name, steps)
            if not len(rows):
                continue
            at = steps[rows]
            over = Over(trial, name, at)
            nans, infs = over.stat("nan_count"), over.stat("inf_count")
            counted = ~np.isnan(nans) & ~np.isnan(infs)
            bad = counted & ((nans > 0) | (infs > 0)) & ~over.raw
            probed = over.present & ~counted & ~over.raw
            if probed.any():  # records without both counts: a saved reduction carries a NaN or inf
                probe = np.full(len(at), np.nan)
                for red, is_abs in _PROBES:
                    probe = np.where(np.isnan(probe), over.reduction(red, is_abs), probe)
                # a record with neither counts nor a probe and no raw value: nothing to judge
                bad |= probed & ~np.isnan(probe) & ~np.isfinite(probe)
            if over.raw.any():  # judged from the raw value, as check() does
                bad |= self._raw_nonfinite(trial, name, at, over.raw)
            interesting[rows] |= bad
        return quiet_prefix(interesting)

    @staticmethod
    def _raw_together(
        trial: TrialView, names: list[str], steps: np.ndarray, interesting: np.ndarray
    ) -> list[str]:
        """Judge together the tensors of `names` with at most `_FEW_RECORDS` records, all
        holding their raw value, of a real or integer dtype (`Columns.values`, read together
        for many tensors): `interesting` is set at the steps where one holds a NaN or an inf,
        as the loop over tensors judges them (a raw record is judged by its value alone, as
        float64). Returns the names left to that loop. A tensor with no record among `steps`
        is left out, as the loop leaves it."""
        columns = trial.columns
        names = _one_numbers_together(trial, names, steps, interesting)
        lo, hi = int(steps[0]), int(steps[-1])
        rest: list[str] = []
        have: list[np.ndarray] = []  # per tensor judged: its steps,
        flat: list[np.ndarray] = []  # its values, flat,
        count: list[int] = []  # its records' number,
        width: list[int] = []  # and each one's number of values
        size = 0

        def judge() -> None:
            if not have:
                return
            nonfinite = ~np.isfinite(np.concatenate(flat, dtype=np.float64))
            upto = np.concatenate(([0], np.cumsum(nonfinite, dtype=np.int64)))
            k = np.repeat(np.asarray(width, dtype=np.int64), count)  # per record
            start = np.concatenate(([0], np.cumsum(k)[:-1])).astype(np.int64)
            bad = upto[start + k] > upto[start]
            at = np.concatenate(have)[bad]
            pos = np.searchsorted(steps, at)
            inside = pos < len(steps)
            pos, at = pos[inside], at[inside]
            interesting[pos[steps[pos] == at]] = True
            for done in (have, flat, count, width):
                done.clear()

        for name in names:
            cols = columns.tensor(name)
            if cols is None:
                continue
            own = cols.steps
            n = len(own)
            if not n or own.item(0) > hi or own.item(n - 1) < lo:
                continue
            found = columns.values(name) if n <= _FEW_RECORDS else None
            # `values` is None unless every record holds its raw value of one shape and dtype
            if found is None:
                rest.append(name)
                continue
            saved, values = found
            kind = values.dtype
            if not (kind.kind in "biu" or (kind.kind == "f" and kind.itemsize <= 8)):
                rest.append(name)
                continue
            if kind.kind != "f":
                continue  # integers and booleans: always finite
            have.append(saved)
            flat.append(values.reshape(-1))
            count.append(len(values))
            width.append(values[0].size)
            size += values.size
            if size > _CHUNK:
                judge()
                size = 0
        judge()
        return rest

    @staticmethod
    def _raw_nonfinite(trial: TrialView, name: str, steps: np.ndarray, raw: np.ndarray) -> np.ndarray:
        """At the `raw` ones of `steps`, whether the saved value holds a NaN or an inf, as
        `check` judges it (`nonfinite`: max |x| of a float value, the saved statistic where
        the record has one); True where only `check` can say (a value too large to stack)."""
        values = raw_values(trial, name, steps)
        if values is not None:
            return raw & ~np.isfinite(values).all(axis=1)
        at = steps[raw]
        stacked = trial.columns.values_at(name, at)
        if stacked is None:
            return raw.copy()
        out = np.zeros(len(steps), dtype=bool)
        if stacked.dtype.kind in "fc" and stacked[0].size:
            flat = stacked.reshape(len(at), -1)
            # the maximum |x| check() takes: the saved statistic where the record has one (a
            # NaN in the column is a NaN saved or none saved: the record says which)
            saved = Over(trial, name, at).stat("max_abs")
            for i in np.flatnonzero(np.isnan(saved)).tolist():
                found = trial.saved_statistic(name, int(at[i]), "max_abs")
                if isinstance(found, float):  # saved (NaN: the value holds one, as check() says)
                    saved[i] = np.inf if math.isnan(found) else found
            with np.errstate(invalid="ignore"):
                m = np.where(np.isnan(saved), np.max(np.abs(flat), axis=1), saved)
            out[raw] = ~np.isfinite(m)
        return out

    def check(self, trial: TrialView, step: int) -> Finding | None:
        nans, infs = [], []
        kinds: Iterable[tuple[str, str | None]] | None
        kinds = _nonfinite_together(trial, step, self.collection_names, self.tensor_regex)
        if kinds is None:
            kinds = (
                (name, nonfinite(trial, name, step))
                for name in selected(trial, step, self.collection_names, self.tensor_regex, None)
            )
        for name, kind in kinds:
            if kind == "nan":
                nans.append(name)
            elif kind == "inf" and not self.only_nan:
                infs.append(name)
        if not (nans or infs) or not self.first():
            return None
        parts = []
        if nans:
            parts.append(f"NaN in {len(nans)} tensor{'s' if len(nans) > 1 else ''} ({short_list(nans)})")
        if infs:
            parts.append(f"+-inf in {len(infs)} tensor{'s' if len(infs) > 1 else ''} ({short_list(infs)})")
        bad = nans + infs
        finite = 0 if self.collection_names or self.tensor_regex else _finite_parameters(trial, step, bad)
        if finite:  # only the loss: a term of it that no gradient sees
            return self.finding(
                trial, step,
                f"{' and '.join(parts)} from step {step} on{_ranks(trial, step, bad)}, while the {finite} weight "
                "and gradient tensors recorded there are finite: the loss as computed has a term with no "
                "finite value (0 * log 0, a log of 0, a division by 0) that does not reach the gradients",
                tensors=bad,
                suggestion="Fix the loss's formula where it can take no value: torch.xlogy(t, t) or "
                "torch.special.entr for t * log t, a clamp or an epsilon before a log or a division, "
                "nn.KLDivLoss instead of a hand-written KL; the training may be sound while its logged "
                "loss is not, and the loss rules cannot judge it.",
            )  # fmt: skip
        return self.finding(
            trial, step,
            f"{' and '.join(parts)} from step {step} on{_ranks(trial, step, bad)}: the values "
            "overflowed, training is lost from here",
            tensors=bad,
        )  # fmt: skip


def _finite_parameters(trial: TrialView, step: int, bad: list[str]) -> int:
    """When every tensor of `bad` is a loss and the step's gradients were recorded (judged
    with every tensor, so finite: none of them is in `bad`; a loss that overflows makes its
    gradients NaN in the same step), the number of weight and gradient tensors recorded at
    `step`; else 0."""
    if not trial.names("gradients", step=step) or not set(trial.names("losses", step=step)).issuperset(bad):
        return 0
    return len(trial.names(["weights", "gradients"], step=step))


def _one_numbers_together(
    trial: TrialView, names: list[str], steps: np.ndarray, interesting: np.ndarray
) -> list[str]:
    """`_raw_together`'s judgement of the tensors of `names` saved as one number a step
    (`Columns.one_number_rows`: a table of all their records, no columns grown per name):
    those of at most `_FEW_RECORDS` records, each record raw, of one dtype and shape, are
    judged here, at once (a record is bad when its value is not finite: an integer or a
    boolean never is), as `Columns.values` and `_raw_together` judge them one by one. Returns
    the names left to `_raw_together`'s loop, in order."""
    known, rows = trial.columns.one_number_rows(names)
    if not len(known):
        return names
    first = np.minimum(rows.starts, max(0, len(rows.step) - 1))
    lead = np.repeat(first, rows.sizes)  # each record's tensor's first record
    same = (rows.dtype == rows.dtype[lead]) & (rows.ndim == rows.ndim[lead])
    one_layout = np.ones(len(known), dtype=bool)
    held = rows.sizes > 0
    one_layout[held] = np.logical_and.reduceat(same, rows.starts[held])
    judged = rows.whole & held & (rows.sizes <= _FEW_RECORDS) & one_layout
    if not judged.any():
        return names
    of_judged = np.repeat(judged, rows.sizes)
    bad = of_judged & ~np.isfinite(rows.value)
    at = rows.step[bad]
    if len(at):
        pos = np.searchsorted(steps, at)
        inside = pos < len(steps)
        pos, at = pos[inside], at[inside]
        interesting[pos[steps[pos] == at]] = True
    done = {known[i] for i in np.flatnonzero(judged).tolist()}
    return [n for n in names if n not in done]


#: the dtypes whose one number `nonfinite` judges by its value (as float64), and those it never
#: judges (an integer or a boolean is always finite); any other (bfloat16) is left to it
_FLOATS = np.isin(np.arange(len(DTYPES)), [DTYPES.index(d) for d in ("F64", "F32", "F16")])
_NEVER = np.isin(
    np.arange(len(DTYPES)),
    [DTYPES.index(d) for d in ("I64", "I32", "I16", "I8", "U8", "U16", "U32", "U64", "BOOL")],
)
#: a finite value beyond float32's range: a saved statistic of it may read infinite, and
#: `nonfinite` prefers that statistic; left to it
_WIDE = float(np.finfo(np.float32).max)


def _nonfinite_together(
    view: TrialView,
    step: int,
    collection_names: list[str] | None,
    tensor_regex: list[str] | None,
) -> list[tuple[str, str | None]] | None:
    """`check`'s judgement at `step` for a run of many names (more than `_MANY_TENSORS`
    inspected): (name, `nonfinite`) for the tensors `selected` gives at `step`, in its order,
    found from one table of their records (`Columns.one_number_rows`), not by reading each
    name's columns (100,000 scalar names: seconds); those found finite are left out. A
    tensor whose record at `step` is one raw number of a float dtype is 'nan' or 'inf' as its
    value is (what `nonfinite` finds as its max |x|), of an integer or boolean dtype never;
    any other (several records a step, a vector, only statistics saved, a sharded tensor,
    which the table never holds whole, a value past float32's range) is judged by
    `nonfinite` itself. None with few names: the loop over them judges."""
    names = selected_all(view, collection_names, tensor_regex, None)
    if len(names) <= _MANY_TENSORS:
        return None
    known, rows = view.columns.one_number_rows(names)
    owner = np.repeat(np.arange(len(known), dtype=np.int64), rows.sizes)
    at = np.flatnonzero(rows.step == step)  # the records at `step`; one per tensor when `whole`
    present = np.zeros(len(known), dtype=bool)
    present[owner[at]] = True
    code = np.full(len(known), -1, dtype=np.int64)  # per tensor: -1 ask `nonfinite`, 0 None, 1 nan, 2 inf
    mine = at[rows.whole[owner[at]]]
    value, dtype = rows.value[mine], rows.dtype[mine]
    got = np.full(len(mine), -1, dtype=np.int64)
    floats = _FLOATS[dtype]
    got[_NEVER[dtype]] = 0
    with np.errstate(invalid="ignore"):
        got[floats & (np.abs(value) <= _WIDE)] = 0
    got[floats & np.isnan(value)] = 1
    got[floats & np.isinf(value)] = 2
    code[owner[mine]] = got
    out: list[tuple[str, str | None]] = []
    for i in np.flatnonzero(present & (code != 0)).tolist():
        c = int(code[i])
        out.append((known[i], nonfinite(view, known[i], step) if c < 0 else ("nan", "inf")[c - 1]))
    return out


def _ranks(view: TrialView, step: int, names: list[str]) -> str:
    """Where a sharded tensor's NaN or inf lies (its `rank_nonfinite` vector: per rank, those
    of that rank's piece): ', in the shard of rank 1' (naming the tensors when not all of them
    are sharded that way); '' without one."""
    where: dict[tuple[int, ...], list[str]] = {}
    for name in names:
        found = view.saved_statistic(name, step, "rank_nonfinite")
        if isinstance(found, np.ndarray) and found.size and (found > 0).any():
            where.setdefault(tuple(np.flatnonzero(found > 0).tolist()), []).append(name)
    if not where:
        return ""
    ranks, tensors = min(where.items(), key=lambda item: (len(item[0]), item[0]))  # the narrowest first
    plural = "s" if len(ranks) > 1 else ""
    which = "" if len(tensors) == len(names) else f" ({short_list(tensors)})"
    return f", in the shard{plural} of rank{plural} {', '.join(str(r) for r in ranks)}{which}"


__all__ = ["ExplodingTensor", "nonfinite"]
