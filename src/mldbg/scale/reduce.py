"""Chosen tensors' reductions at every step of every run, as one tidy table: `reduce_runs`.

One Dask task per run reads its reductions (saved ones, or computed from the saved tensor, as
`Tensor.reduction_value` does) and sends back plain columns; the table is assembled on the
caller's side. It is the table to compare a sweep's runs: the final loss per learning rate,
the gradient norm of each run along training, ...
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mldbg.config import Mode
from mldbg.errors import InvalidConfig, MldbgError, TensorUnavailable, TensorUnavailableForStep
from mldbg.scale.cluster import ClientSpec, dask_client, run_tasks
from mldbg.trial.runs import RunsSpec, find_runs

if TYPE_CHECKING:
    import pandas

COLUMNS = ("run", "worker", "step", "mode", "mode_step", "tensor", "reduction", "value")


@dataclass
class ReducedRun:
    """What one task sends back: the run's rows as columns, or why it could not be read."""

    run: str
    columns: dict[str, list[Any]] = field(default_factory=lambda: {c: [] for c in COLUMNS})
    matched: dict[str, list[str]] = field(default_factory=dict)  # requested name -> tensors
    missing: list[str] = field(default_factory=list)  # "tensor:reduction" never available
    error: str | None = None
    seconds: float = 0.0


def reduce_runs(
    runs: RunsSpec,
    tensors: str | Iterable[str],
    reductions: str | Iterable[str] = ("mean",),
    mode: Mode | str | None = None,
    client: ClientSpec = None,
    *,
    n_workers: int | None = None,
    progress: bool = False,
) -> pandas.DataFrame:
    """A tidy table of `tensors`' `reductions` at every saved step of every run, one row per
    (run, worker, step, tensor, reduction): columns run, worker, step (global), mode,
    mode_step, tensor, reduction, value. Computed on Dask, one task per run.

    `tensors`: names; a name a run does not hold is taken as a regex (`trial.tensor_names(regex=)`),
    so `"gradient/.*"` works. `reductions`: `min max mean std variance sum prod l1 l2`, and
    `abs_<name>` for the reduction of |x|. `mode`: only that mode's steps (default: all).
    `runs` and `client` as for `check_runs`. Runs that could not be read are listed in
    `df.attrs["errors"]` (run -> why), tensors or reductions a run lacks in
    `df.attrs["missing"]` (run -> names); a name that matches nothing in any run is an error.

    The final training loss of each run of a sweep:

        df = reduce_runs("sweep/", "CrossEntropyLoss_output_0", mode="TRAIN")
        df.sort_values("step").groupby("run").value.last()
    """
    import pandas as pd

    names = [tensors] if isinstance(tensors, str) else list(tensors)
    if not names:
        raise InvalidConfig("reduce_runs: name at least one tensor (or a regex such as 'gradient/.*')")
    for name in names:
        try:
            re.compile(name)
        except re.error as e:
            raise InvalidConfig(
                f"reduce_runs: {name!r} is neither a tensor name nor a valid regex: {e}"
            ) from None
    wanted = [_parse_reduction(r) for r in ([reductions] if isinstance(reductions, str) else reductions)]
    if not wanted:
        raise InvalidConfig("reduce_runs: name at least one reduction (mean, l2, abs_max, ...)")
    mode_name = None if mode is None else Mode.parse(mode).name
    found, unmatched = find_runs(runs)
    errors: dict[str, str] = dict(unmatched)
    parts: list[ReducedRun] = []
    if found:
        with dask_client(client, n_workers=n_workers, jobs=len(found)) as c:
            outcomes = run_tasks(
                c, _reduce_run, found, progress=progress, desc="reducing",
                tensors=names, reductions=wanted, mode=mode_name,
            )  # fmt: skip
        for run, (outcome, failure) in zip(found, outcomes, strict=True):
            if failure is not None:
                errors[run] = f"the Dask task reading {run} failed: {type(failure).__name__}: {failure}"
            elif outcome.error is not None:
                errors[run] = outcome.error
            else:
                parts.append(outcome)
    if parts:
        nowhere = [n for n in names if not any(p.matched.get(n) for p in parts)]
        if nowhere:
            example = parts[0].run
            raise TensorUnavailable(
                f"no tensor matches {', '.join(map(repr, nowhere))} in any of the {len(parts)} runs read "
                f"(see mldbg ls {example} for the names a run holds)"
            )
    columns = {c: [v for p in parts for v in p.columns[c]] for c in COLUMNS}
    df = pd.DataFrame(columns, columns=list(COLUMNS))
    df = df.astype({"run": str, "worker": str, "step": "int64", "mode": str, "mode_step": "int64",
                    "tensor": str, "reduction": str, "value": "float64"})  # fmt: skip
    df.attrs["errors"] = errors
    df.attrs["missing"] = {p.run: p.missing for p in parts if p.missing}
    return df


def _parse_reduction(text: str) -> tuple[str, bool]:
    from mldbg.store.reductions import REDUCTION_NAMES

    name = text.strip().lower()
    is_abs = name.startswith("abs_")
    base = name[4:] if is_abs else name
    if base not in REDUCTION_NAMES:
        raise InvalidConfig(
            f"unknown reduction {text!r}: choose from {', '.join(REDUCTION_NAMES)}, or abs_<name> for |x|"
        )
    return base, is_abs


def _label(reduction: tuple[str, bool]) -> str:
    return ("abs_" if reduction[1] else "") + reduction[0]


def _reduce_run(
    run: str, tensors: list[str], reductions: list[tuple[str, bool]], mode: str | None
) -> ReducedRun:
    """The task: one run's rows. Never raises: a run that cannot be read gives `error`."""
    from mldbg.trial import create_trial

    began = time.perf_counter()
    out = ReducedRun(run)
    try:
        trial = create_trial(run, missing_ok=True)  # reported below
        if not trial.steps() and not trial.workers():
            out.error = f"no recorded run at {run} (nothing written there; is the path right?)"
            return out
        for name in tensors:
            out.matched[name] = [name] if trial.has_tensor(name) else trial.tensor_names(regex=name)
        chosen = sorted({t for ts in out.matched.values() for t in ts})
        out.missing = [n for n, ts in out.matched.items() if not ts]
        only = None if mode is None else Mode.parse(mode)
        cols = out.columns
        for name in chosen:
            tensor = trial.tensor(name)
            absent: set[str] = set()
            for step in tensor.steps(only):
                g = step if only is None else trial.global_step(only, step)
                step_mode = trial.mode(g)
                for worker in tensor.workers(g):
                    for red in reductions:
                        try:
                            value = tensor.reduction_value(g, red[0], abs=red[1], worker=worker)
                        except TensorUnavailableForStep:  # only other reductions were saved
                            absent.add(f"{name}:{_label(red)}")
                            continue
                        cols["run"].append(run)
                        cols["worker"].append(worker)
                        cols["step"].append(g)
                        cols["mode"].append(step_mode.name)
                        cols["mode_step"].append(trial.mode_step(g))
                        cols["tensor"].append(name)
                        cols["reduction"].append(_label(red))
                        cols["value"].append(float(value))
            out.missing += sorted(absent)
    except MldbgError as e:
        out.error = str(e)
    except OSError as e:
        out.error = f"cannot read {run}: {e}"
    except Exception as e:  # never let one run stop the sweep
        out.error = f"reading {run} failed: {type(e).__name__}: {e}"
    finally:
        out.seconds = time.perf_counter() - began
    if out.error is not None:
        out.columns = {c: [] for c in COLUMNS}
    return out


__all__ = ["COLUMNS", "ReducedRun", "reduce_runs"]
