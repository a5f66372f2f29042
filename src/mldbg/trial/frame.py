"""A trial as a tidy pandas DataFrame: one row per tensor, step, worker (and reduction).

`to_pandas` reads through the trial's public index API (`Trial.records`, `Record.reductions`,
`Trial.read`): the step, mode, mode step and worker columns come straight from the index's
NumPy columns, the values from the saved reductions (no data file is opened for them) or from
the raw tensors, and the frame is built once at the end. pandas is imported here only: the
bare package works without it.

Values:
- `reductions=None`: a `value` column, for tensors that hold one number (losses, scalars,
  metrics). With no selection either (no `regex`, no `collection`: the first call one types),
  every one-number series, and one warning naming what was left out (weights, gradients...)
  and how to get it; a tensor with more than one element that a `regex` or `collection`
  selects is refused, naming it and what to ask instead (`reductions=["mean", "l2"]`, or a
  `regex` that leaves it out): a frame of arrays is neither tidy nor fast; read those with
  `trial.tensor(name).value(step)`.
- `reductions=["mean", "l2", "abs_mean", ...]`: a `reduction` column and a `value` column,
  one row per reduction; a saved reduction is taken as saved, another is computed from the
  saved raw tensor (as `Tensor.reduction_value`). `abs_<name>` (or `<name>_abs`) is the
  reduction of |x|.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from mldbg.config import Mode
from mldbg.errors import InvalidConfig, MldbgError, TensorUnavailableForStep, did_you_mean
from mldbg.store.reductions import REDUCTION_NAMES, reduce

if TYPE_CHECKING:
    import pandas

    from mldbg.trial.records import Record
    from mldbg.trial.trial import Trial

COLUMNS = ("step", "mode", "mode_step", "worker", "tensor")


def parse_reduction(text: str) -> tuple[str, bool]:
    """`"mean"` -> ("mean", False); `"abs_mean"` or `"mean_abs"` -> ("mean", True)."""
    name = text.strip().lower()
    use_abs = False
    if name.startswith("abs_"):
        name, use_abs = name[4:], True
    elif name.endswith("_abs"):
        name, use_abs = name[:-4], True
    if name not in REDUCTION_NAMES:
        raise InvalidConfig(
            f"unknown reduction {text!r}; choose from {', '.join(REDUCTION_NAMES)} "
            "(abs_<name> for the reduction of |x|)" + did_you_mean(name, REDUCTION_NAMES)
        )
    return name, use_abs


def reduction_label(name: str, use_abs: bool) -> str:
    return f"abs_{name}" if use_abs else name


def import_pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise MldbgError(
            "trial.to_pandas needs pandas, which is not installed: pip install pandas (or mldbg[tables])"
        ) from None
    return pandas


def to_pandas(
    trial: Trial,
    regex: str | list[str] | None = None,
    collection: str | None = None,
    mode: Mode | str | None = None,
    reductions: Iterable[str] | None = None,
    left_out: list[str] | None = None,
) -> pandas.DataFrame:
    """See `Trial.to_pandas` and the module's docstring. `left_out`: given a list, the names
    of the tensors left out without a selection are put in it instead of a warning (the CLI
    says it in its own options)."""
    pd = import_pandas()
    of_mode = None if mode is None else Mode.parse(mode)
    if of_mode == Mode.GLOBAL:
        of_mode = None
    wanted = None if reductions is None else [parse_reduction(r) for r in _as_list(reductions)]
    if wanted is not None and not wanted:
        raise InvalidConfig("to_pandas: reductions=[] asks for nothing; give reduction names or None")
    names = trial.tensor_names(regex=regex, collection=collection)
    everything = wanted is None and regex is None and collection is None
    skipped: list[str] = []
    mode_names = {int(m): m.name for m in Mode}
    k = 1 if wanted is None else len(wanted)
    parts: dict[str, list[np.ndarray]] = {c: [] for c in (*COLUMNS, "reduction")}
    selected: list[tuple[str, list[Record]]] = []
    for name in names:
        recs = trial.records(name, mode=of_mode)
        n = len(recs)
        if n == 0:
            continue
        if everything and not all(_one_number(rec) for rec in recs):
            skipped.append(name)
            continue
        # rows in (step, worker name) order: the index keeps load order, which interleaves
        # workers, and numbers them in the order they were seen
        by_name = np.argsort(np.argsort(np.asarray(recs.workers, dtype=object)))
        order = np.lexsort((by_name[recs.worker], recs.step))
        steps, modes, msteps, workers = (
            c[order] for c in (recs.step, recs.mode, recs.mode_step, recs.worker)
        )
        worker_names = np.asarray(recs.workers, dtype=object)[workers]
        mode_col = np.asarray([mode_names[m] for m in modes.tolist()], dtype=object)
        selected.append((name, [recs[i] for i in order.tolist()]))
        if wanted is not None:
            labels = np.asarray([reduction_label(r, a) for r, a in wanted], dtype=object)
            parts["reduction"].append(np.tile(labels, n))
        parts["step"].append(np.repeat(steps, k))
        parts["mode"].append(np.repeat(mode_col, k))
        parts["mode_step"].append(np.repeat(msteps, k))
        parts["worker"].append(np.repeat(worker_names, k))
        parts["tensor"].append(np.full(n * k, name, dtype=object))
    if skipped and left_out is not None:
        left_out.extend(skipped)
    elif skipped:
        warnings.warn(
            left_out_line(skipped, "regex=... with reductions=['mean', 'l2']"), UserWarning, stacklevel=3
        )
    values = _values(trial, selected, wanted)
    columns = list(COLUMNS) + (["reduction"] if wanted is not None else []) + ["value"]
    data: dict[str, Any] = {"value": values}
    for col in columns[:-1]:
        if parts[col]:
            data[col] = np.concatenate(parts[col])
        else:
            data[col] = np.empty(0, dtype=np.int64 if col in ("step", "mode_step") else object)
    return pd.DataFrame(data, columns=columns)


def _values(
    trial: Trial, selected: list[tuple[str, list[Record]]], wanted: list[tuple[str, bool]] | None
) -> np.ndarray:
    """The value column: per tensor, per record, per wanted reduction (or the one number).
    Saved reductions are taken from the index; raw tensors are read grouped by the file that
    holds them (one pass per data file, not one per tensor: a run of 10,000 steps has more
    data files than a reader keeps open)."""
    k = 1 if wanted is None else len(wanted)
    total = sum(len(records) for _, records in selected) * k
    out = np.empty(total, dtype=np.float64)
    reads: list[tuple[str, int, str, Record]] = []  # (data file, row in `out`, tensor, record)
    at = 0
    for name, records in selected:
        for rec in records:
            if wanted is None:
                if _scalar_layout(name, rec):
                    reads.append((rec.index_file, at, name, rec))
                else:
                    out[at] = rec.reductions[("mean", False)]
            else:
                saved = rec.reductions
                missing = False
                for j, key in enumerate(wanted):
                    value = saved.get(key)
                    if value is None:
                        missing = True
                    else:
                        out[at + j] = value
                if missing:
                    if not rec.has_raw:
                        absent = next(reduction_label(*w) for w in wanted if w not in saved)
                        raise TensorUnavailableForStep(
                            f"to_pandas: reduction {absent!r} of {name!r} was not saved at step "
                            f"{rec.step} and neither was the raw tensor; saved: "
                            f"{', '.join(reduction_label(*r) for r in saved) or 'none'}"
                        )
                    reads.append((rec.index_file, at, name, rec))
            at += k
    reads.sort(key=lambda r: r[0])  # stable: within a file, in row order
    for _, row, _name, rec in reads:
        raw = trial.read(rec)
        if wanted is None:
            out[row] = float(np.asarray(raw).reshape(-1)[0])
            continue
        for j, key in enumerate(wanted):
            value = rec.reductions.get(key)
            out[row + j] = value if value is not None else reduce(raw, key[0], key[1])
    return out


def left_out_line(names: list[str], how: str) -> str:
    """One line: which tensors a frame without a selection left out, and how to get them."""
    shown = ", ".join(repr(n) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (
        f"mldbg: left out {len(names)} tensor{'s' if len(names) != 1 else ''} holding more than one "
        f"number ({shown}); get them with {how}"
    )


def _one_number(rec: Record) -> bool:
    """A record a frame without reductions can put in its `value` column."""
    return math.prod(rec.shape) == 1 and (rec.has_raw or ("mean", False) in rec.reductions)


class NotOneNumber(InvalidConfig):
    """A tensor asked for without reductions holds no single number to put in the table;
    `name` says which (`mldbg export` says it in its own options)."""

    def __init__(self, message: str, name: str, why: str):
        super().__init__(message)
        self.name = name
        self.why = why


def _scalar_layout(name: str, rec: Record) -> bool:
    """True: read the record's one number from its raw tensor; False: take its saved mean
    (a one-number tensor saved as reductions only). Anything else is refused."""
    size = math.prod(rec.shape)
    if size != 1:
        why = f"holds {size} numbers (shape {rec.shape}), not one"
        raise NotOneNumber(
            f"to_pandas: tensor {name!r} {why}; ask for reductions=['mean', 'l2', ...], or leave "
            "it out with regex= or collection= (read whole arrays with trial.tensor(name).value(step))",
            name,
            why,
        )
    if rec.has_raw:
        return True
    if ("mean", False) not in rec.reductions:
        why = f"has only reductions saved at step {rec.step}, not its value"
        raise NotOneNumber(
            f"to_pandas: only reductions of {name!r} were saved at step {rec.step}, not its "
            "value; ask for them with reductions=[...] (e.g. reductions=['mean', 'l2'])",
            name,
            why,
        )
    return False


def _as_list(reductions: Iterable[str]) -> list[str]:
    if isinstance(reductions, str):
        return [r for r in reductions.split(",") if r.strip()]
    return list(reductions)
