"""`loss_at_class_prior` on the calibration corpus: the shuffled-labels twins it catches and the
healthy runs it alarms, the rule alone (the default set's other rules are `calibration.py`'s).

    .venv/bin/python benchmarks/calibration.py ...   # the whole default set
    .venv/bin/python benchmarks/class_prior.py [--healthy 90] [--seed 1] [--jobs 2] [--splits ...]

Trains every pipeline of benchmarks/corpus/ with a `shuffled_labels` twin (the twin and its
healthy base) and a random sample of `--healthy` other healthy pipelines (drawn with `--seed`),
each in its own worker process, and checks each with `mldbg.check(path,
rules=["loss_at_class_prior"])`. Prints one line per run and the counts; `--splits` keeps the
pipelines of those splits only (the blind sets measured before the rule was written are its
tuning data).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing
import random
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpus  # noqa: E402


def one(name: str) -> tuple[str, bool, bool, str]:
    """(name, healthy, fired, the finding's message or an error)."""
    import torch

    import mldbg

    torch.set_num_threads(1)
    p = corpus.pipelines()[name]
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "run")
        try:
            p.train(path)
            found = mldbg.check(path, rules=["loss_at_class_prior"])
        except Exception as e:  # a training that fails is reported, not counted
            return name, p.healthy, False, f"error: {type(e).__name__}: {e}"
    return name, p.healthy, bool(found), found[0].message[:160] if found else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--healthy", type=int, default=90, help="other healthy pipelines sampled")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--splits", nargs="*", help="only the pipelines of these splits")
    args = ap.parse_args()
    ps = corpus.pipelines()
    if args.splits:
        ps = {n: p for n, p in ps.items() if p.split in args.splits}
    shuffled = [n for n, p in ps.items() if p.bug == "shuffled_labels"]
    twins = [ps[n].twin for n in shuffled if ps[n].twin in ps]
    rest = [n for n, p in ps.items() if p.healthy and n not in twins]
    random.Random(args.seed).shuffle(rest)
    names = shuffled + twins + rest[: args.healthy]
    ctx = multiprocessing.get_context("forkserver")
    counts = {True: [0, 0], False: [0, 0]}  # healthy -> [fired, runs]
    with cf.ProcessPoolExecutor(args.jobs, mp_context=ctx, max_tasks_per_child=1) as ex:
        for name, healthy, fired, message in ex.map(one, names):
            if message.startswith("error"):
                print(f"{name}: {message}", flush=True)
                continue
            counts[healthy][0] += fired
            counts[healthy][1] += 1
            print(
                f"{'healthy' if healthy else 'shuffled'} {name}: {'FIRED ' + message if fired else '-'}",
                flush=True,
            )
    print(f"shuffled-labels twins caught: {counts[False][0]}/{counts[False][1]}")
    print(f"healthy runs alarmed: {counts[True][0]}/{counts[True][1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
