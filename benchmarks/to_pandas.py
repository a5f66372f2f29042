"""A run's scalars as a DataFrame: `trial.to_pandas()` on a 10,000-step run.

    python benchmarks/to_pandas.py [--steps 10000 --scalars 3] [--repeat 5]

Writes a run of `--steps` TRAIN steps, each saving `--scalars` scalars (a loss and metrics),
with the Recorder (framework-free), then times, in this process: opening the trial and
`trial.to_pandas()` (every scalar, every step: steps x scalars rows), and
`to_pandas(reductions=["mean", "l2"])` on the same run. Prints medians and the min-max.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np


def write(path: str, steps: int, scalars: int) -> None:
    import mldbg
    from mldbg.record.recorder import Recorder

    names = ["loss"] + [f"metric_{i}" for i in range(scalars - 1)]
    rec = Recorder(
        path,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["scalars"],
        collection_configs=[mldbg.CollectionConfig("scalars", include_regex=[".*"])],
    )
    rng = np.random.default_rng(0)
    for _ in range(steps):
        rec.start_step(mldbg.Mode.TRAIN)
        for name in names:
            rec.save(name, np.float32(rng.random()), rec.plan(name, ()))
        rec.end_step()
    rec.close()


def main() -> None:
    import mldbg

    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--scalars", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        write(tmp, args.steps, args.scalars)
        for label, kwargs in (
            ("to_pandas()", {}),
            ("to_pandas(reductions=[mean, l2])", {"reductions": ["mean", "l2"]}),
        ):
            times, rows = [], 0
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                df = mldbg.create_trial(tmp).to_pandas(**kwargs)
                times.append(time.perf_counter() - t0)
                rows = len(df)
            print(
                f"{label}: {rows} rows from {args.steps} steps x {args.scalars} scalars, open + frame "
                f"{statistics.median(times):.3f}s (min {min(times):.3f}, max {max(times):.3f})"
            )


if __name__ == "__main__":
    main()
