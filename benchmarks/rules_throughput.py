"""Rule-runner throughput: steps per second of the default rule set over a recorded run.

    .venv/bin/python benchmarks/rules_throughput.py [--steps 2000] [--repeat 3] [--runs DIR]

Records a tiny MLP run five times: with the two-line hook and its statistics every step
(`statistics_budget=0`: the statistics the default rules read, at every step; issue 14's
target: >= 10,000 steps/s), the same with an evaluation pass every 10 training steps (the
steps are then global steps, TRAIN and EVAL), with the two-line hook as it comes (statistics on its cost
budget, the loss every step), with reductions only (the way to watch a long run cheaply:
min/max/mean/variance, |x| mean/max and the L2 norm of weights, biases, gradients and the
loss; target >= 2,000 steps/s) and once with raw tensors, then times
`RuleRunner(trial).run_available() + finish()` with the default rule set on each (opening
the trial included), with the rules' columnar fast path (`check_columns`) and, for
comparison, without it (`columns=False`: every rule's `check` at every step).

`--runs DIR` keeps the recorded runs in DIR and reuses them when they are there: an A/B of two
versions of the code (`PYTHONPATH=<other checkout>/src`) then times both on the same runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.tiny import train  # noqa: E402

import mldbg  # noqa: E402
from mldbg.rules.runner import RuleRunner  # noqa: E402

REDUCTIONS = mldbg.ReductionConfig(
    reductions=("min", "max", "mean", "variance"), abs_reductions=("mean", "max"), norms=("l2",)
)


def measure(path: str, repeat: int, columns: bool = True) -> tuple[float, float, int, int, list]:
    times, cpu = [], []
    findings: list = []
    nsteps = nrules = 0
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        runner = RuleRunner(mldbg.create_trial(path), columns=columns)
        findings = runner.run_available() + runner.finish()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        nsteps = len(runner.trial.steps())
        nrules = len(runner.rules) - len(runner.skipped)
        assert not runner.errors, runner.errors
    return statistics.median(times), statistics.median(cpu), nsteps, nrules, findings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--runs", help="keep the recorded runs here, and reuse them when present")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.runs or scratch
        rows = []
        for label, kwargs in (
            (
                "statistics every step (`Hook(out_dir, statistics_budget=0)`)",
                {"default_hook": True, "hook_kwargs": {"statistics_budget": 0}},
            ),
            (
                "statistics every step, an evaluation (2 batches) every 10 steps",
                {"default_hook": True, "hook_kwargs": {"statistics_budget": 0}, "eval_every": 10},
            ),
            ("statistics on the budget (the two lines: `Hook(out_dir)`)", {"default_hook": True}),
            (
                "reductions only (weights, biases, gradients, losses)",
                {"reduction_config": REDUCTIONS, "include_collections": None},
            ),
            ("raw tensors (weights, biases, gradients, losses)", {"include_collections": None}),
        ):
            path = f"{tmp}/{len(rows)}-{args.steps}"
            if not (args.runs and Path(path).exists()):
                train(path, steps=args.steps, **{"eval_every": None, **kwargs})
            secs, cpu, nsteps, nrules, findings = measure(path, args.repeat)
            _, ref_cpu, _, _, ref_findings = measure(path, args.repeat, columns=False)
            assert len(ref_findings) == len(findings), (label, ref_findings, findings)
            rows.append(
                (label, nsteps, nrules, secs, nsteps / secs, nsteps / cpu, nsteps / ref_cpu, len(findings))
            )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average during the run: {load:.1f} on {os.cpu_count()} cores")
    print(
        "| recorded run (tiny MLP 10-32-32-3) | steps | rules run | wall s | steps/s (wall) "
        "| steps/s (CPU time) | without the fast path: steps/s (CPU time) | findings |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, nsteps, nrules, secs, rate, cpu_rate, ref_rate, nf in rows:
        print(
            f"| {label} | {nsteps} | {nrules} | {secs:.3f} | {rate:,.0f} | {cpu_rate:,.0f} | {ref_rate:,.0f} | {nf} |"
        )
    reductions = next(r for r in rows if r[0].startswith("reductions"))
    # issue 14's target over statistics every step, with and without evaluations; 2,000 over reductions
    return 0 if min(rows[0][5], rows[1][5]) >= 10_000 and reductions[5] >= 2000 else 1


if __name__ == "__main__":
    sys.exit(main())
