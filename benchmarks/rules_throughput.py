"""Rule-runner throughput: steps per second of the default rule set over a recorded run.

    .venv/bin/python benchmarks/rules_throughput.py [--steps 2000] [--repeat 3]

Records a tiny MLP run three times: with the two-line hook (the statistics the default rules
read, every step; issue 14's target: >= 10,000 steps/s), with reductions only (the way to watch
a long run cheaply: min/max/mean/variance, |x| mean/max and the L2 norm of weights, biases,
gradients and the loss) and once with raw tensors (the hook's defaults), then times
`RuleRunner(trial).run_available() + finish()` with the default rule set on each (opening
the trial included). Target: >= 2,000 steps/s on reductions.
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


def measure(path: str, repeat: int) -> tuple[float, float, int, int, list]:
    times, cpu = [], []
    findings: list = []
    nsteps = nrules = 0
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        runner = RuleRunner(mldbg.create_trial(path))
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
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for label, kwargs in (
            ("statistics (the two-line hook: `Hook(out_dir)`)", {"default_hook": True}),
            (
                "reductions only (weights, biases, gradients, losses)",
                {"reduction_config": REDUCTIONS, "include_collections": None},
            ),
            ("raw tensors (weights, biases, gradients, losses)", {"include_collections": None}),
        ):
            path = f"{tmp}/{len(rows)}"
            train(path, steps=args.steps, eval_every=None, **kwargs)
            secs, cpu, nsteps, nrules, findings = measure(path, args.repeat)
            rows.append((label, nsteps, nrules, secs, nsteps / secs, nsteps / cpu, len(findings)))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average during the run: {load:.1f} on {os.cpu_count()} cores")
    print(
        "| recorded run (tiny MLP 10-32-32-3, every step saved) | steps | rules run | wall s | steps/s (wall) | steps/s (CPU time) | findings |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, nsteps, nrules, secs, rate, cpu_rate, nf in rows:
        print(f"| {label} | {nsteps} | {nrules} | {secs:.3f} | {rate:,.0f} | {cpu_rate:,.0f} | {nf} |")
    return 0 if rows[1][5] >= 2000 else 1


if __name__ == "__main__":
    sys.exit(main())
