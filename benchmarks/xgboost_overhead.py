"""Overhead of `mldbg.xgboost.Hook` on a real boosting run, against the same training without
it, in interleaved rounds (plain, hooked, plain, hooked, ...), plus the bytes it writes.

    python benchmarks/xgboost_overhead.py [--rows 50000] [--features 50] [--rounds 100] [--repeats 3]

The data is `make_classification` (binary, half the features informative), split 80/20 into
training and validation sets that `xgb.train` evaluates every round. The hook runs with its
defaults: metrics, losses, tree statistics and the five feature-importance vectors every
iteration, labels, predictions and probabilities of both sets every 10 iterations. One thread
(`nthread=1`) so that other jobs on a shared machine disturb the timing less; process CPU
time (all threads, the hook's writer included) is reported next to wall time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import numpy as np
import xgboost as xgb
from sklearn.datasets import make_classification

from mldbg.xgboost import Hook


def once(
    dtrain: xgb.DMatrix, dvalid: xgb.DMatrix, rounds: int, depth: int, out: str | None
) -> tuple[float, float]:
    params = {
        "objective": "binary:logistic",
        "max_depth": depth,
        "nthread": 1,
        "eval_metric": ["logloss", "auc"],
    }
    callbacks = [Hook(out)] if out else []
    wall, cpu = time.perf_counter(), time.process_time()
    xgb.train(params, dtrain, rounds, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=callbacks,
              verbose_eval=False)  # fmt: skip
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--features", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    X, y = make_classification(args.rows, args.features, n_informative=args.features // 2, random_state=0)
    cut = int(0.8 * args.rows)
    dtrain, dvalid = xgb.DMatrix(X[:cut], y[:cut]), xgb.DMatrix(X[cut:], y[cut:])
    once(dtrain, dvalid, 5, args.depth, None)  # warm-up: quantile sketch, caches
    plain, hooked, plain_cpu, hooked_cpu, sizes = [], [], [], [], []
    for _ in range(args.repeats):
        w, c = once(dtrain, dvalid, args.rounds, args.depth, None)
        plain.append(w)
        plain_cpu.append(c)
        out = tempfile.mkdtemp(prefix="mldbg-xgb-bench-")
        w, c = once(dtrain, dvalid, args.rounds, args.depth, out)
        hooked.append(w)
        hooked_cpu.append(c)
        sizes.append(sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs))
        shutil.rmtree(out)
    p, h = float(np.median(plain)), float(np.median(hooked))
    pc, hc = float(np.median(plain_cpu)), float(np.median(hooked_cpu))
    print(f"xgboost {xgb.__version__}: {args.rows} rows x {args.features} features, {args.rounds} rounds, "
          f"max_depth={args.depth}, nthread=1, median of {args.repeats}")  # fmt: skip
    print(f"  plain   {p:7.2f} s wall  {pc:7.2f} s CPU  ({1000 * p / args.rounds:.1f} ms/round)")
    print(f"  hooked  {h:7.2f} s wall  {hc:7.2f} s CPU  ({1000 * h / args.rounds:.1f} ms/round)")
    print(f"  overhead {100 * (h / p - 1):+.1f}% wall, {100 * (hc / pc - 1):+.1f}% CPU, "
          f"{1000 * (h - p) / args.rounds:.2f} ms per round; {np.median(sizes) / 1e6:.2f} MB written")  # fmt: skip


if __name__ == "__main__":
    main()
