"""Sweeps: many runs (hundreds, each with many workers) checked and compared on Dask.

`check_runs` runs rules over every run, one Dask task per run; `reduce_runs` gathers chosen
tensors' reductions of every run into one pandas table. Both take paths, URLs, glob patterns
or folders of runs (`find_runs`), and any Dask cluster: the one of a given client or
scheduler address, the current client, or a local one started for the call. Needs the
`mldbg[dask]` extra; nothing here imports Dask before a sweep starts.
"""

from mldbg.scale.reduce import reduce_runs
from mldbg.scale.sweep import SweepResult, check_runs
from mldbg.trial.runs import find_runs

__all__ = ["SweepResult", "check_runs", "find_runs", "reduce_runs"]
