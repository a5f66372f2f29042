"""The paper's case study, small enough for CI: a sweep of classifiers, some of them bad,
watched by rules in real time; the bad runs are stopped early, and the compute they would
have wasted is counted; then the mispredicted inputs of the imbalanced run are inspected
from the tensors it recorded.

    python examples/case_study.py [--out runs/case_study] [--steps 150] [--step-seconds 0.015] [--json summary.json]

The sweep (3 classes of Gaussian blobs in 10 dimensions, an MLP, SGD):

    healthy        balanced classes, lr 0.1
    healthy_lr03   balanced classes, lr 0.3
    imbalanced     90% / 8% / 2% of the samples in the three classes,  -> class_imbalance
                   lr 0.01: the model ignores the 2% class (imbalanced labels alone are
                   not reported: at lr 0.1 it learns every class)
    diverging      balanced classes, lr 1e6                             -> exploding_tensor

Each run trains `--steps` steps of a batch of 32 (a step of real work is simulated by
`--step-seconds` of sleep: the point is the wall-clock a stopped run no longer uses), with
`Hook(rules=[...], actions=[StopTraining()])`: the rules run in a child process beside the
training, and a rule that fires ends the run at its next step with `mldbg.TrainingStopped`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

import mldbg
from mldbg.actions import StopTraining
from mldbg.torch import Hook

CLASSES, FEATURES, BATCH = 3, 10, 32
RULES = ["class_imbalance", "exploding_tensor"]
SWEEP: dict[str, dict[str, Any]] = {
    "healthy": {"lr": 0.1, "weights": (1 / 3, 1 / 3, 1 / 3)},
    "healthy_lr03": {"lr": 0.3, "weights": (1 / 3, 1 / 3, 1 / 3)},
    "imbalanced": {"lr": 0.01, "weights": (0.90, 0.08, 0.02)},
    "diverging": {"lr": 1e6, "weights": (1 / 3, 1 / 3, 1 / 3)},
}


def data(weights: tuple[float, ...], n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` samples of blobs around three fixed centers, classes drawn with `weights`."""
    centers = np.random.default_rng(1).normal(0, 1.5, size=(CLASSES, FEATURES))
    rng = np.random.default_rng(seed)
    y = rng.choice(CLASSES, size=n, p=np.asarray(weights) / sum(weights))
    x = centers[y] + rng.normal(0, 1.0, size=(n, FEATURES))
    return torch.tensor(x, dtype=torch.float32), torch.tensor(y)


def train(
    out_dir: Path, lr: float, weights: tuple[float, ...], steps: int, step_seconds: float
) -> dict[str, Any]:
    """One run of the sweep; returns what it did."""
    torch.manual_seed(0)
    x, y = data(weights, steps * BATCH, seed=2)
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.ReLU(), nn.Linear(32, CLASSES))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    step, done, stopped, started = 0, 0, None, time.monotonic()
    hook = Hook(
        out_dir,
        include_collections=["losses", "weights", "gradients", "inputs", "labels", "predictions"],
        save_config=mldbg.SaveConfig(save_interval=1),
        rules=RULES,
        # as in the paper, a finding of these rules stops its run (the default stops only on a
        # confident error diagnosis: a class imbalance alone is not one)
        actions=[StopTraining(on="finding")],
    )
    hook.register_module(model)
    hook.register_loss(loss_fn)
    try:
        for step in range(steps):
            batch = slice(step * BATCH, (step + 1) * BATCH)
            opt.zero_grad()
            loss_fn(model(x[batch]), y[batch]).backward()
            opt.step()
            done = step + 1
            time.sleep(step_seconds)  # the rest of a real step's work
        hook.close()
    except mldbg.TrainingStopped as e:  # raised as the step ends: its update was made, and recorded
        done, stopped = step + 1, str(e)
    return {"planned_steps": steps, "steps": done, "stopped": stopped, "seconds": time.monotonic() - started}


def mispredicted(run: Path, show: int = 5) -> dict[str, Any]:
    """The inputs a run's model got wrong, read back from its recorded tensors: per class, how
    often it was wrong, and the first few wrong samples (input, label, prediction)."""
    trial = mldbg.create_trial(run)
    inputs, labels, logits = "model_input_0", "CrossEntropyLoss_input_1", "CrossEntropyLoss_input_0"
    saved = (
        set(trial.tensor(labels).steps())
        & set(trial.tensor(logits).steps())
        & set(trial.tensor(inputs).steps())
    )
    steps = sorted(saved)[len(saved) // 2 :]  # the second half: the model has learnt what it will
    xs = np.concatenate([trial.tensor(inputs).value(s) for s in steps])
    ys = np.concatenate([trial.tensor(labels).value(s) for s in steps])
    preds = np.concatenate([trial.tensor(logits).value(s).argmax(axis=1) for s in steps])
    wrong = preds != ys
    per_class = {
        int(c): {"samples": int((ys == c).sum()), "wrong": int((wrong & (ys == c)).sum())}
        for c in range(CLASSES)
    }
    first = [
        {
            "step": int(steps[i // BATCH]),
            "input": [round(float(v), 2) for v in xs[i]],
            "label": int(ys[i]),
            "predicted": int(preds[i]),
        }
        for i in np.flatnonzero(wrong)[:show]
    ]
    return {"steps_read": steps, "per_class": per_class, "examples": first}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="runs/case_study")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--step-seconds", type=float, default=0.015)
    ap.add_argument("--json", help="write the summary here too")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    runs: dict[str, Any] = {}
    for name, cfg in SWEEP.items():
        runs[name] = train(out / name, cfg["lr"], cfg["weights"], args.steps, args.step_seconds)
        r = runs[name]
        state = f"stopped at step {r['steps']}: {r['stopped']}" if r["stopped"] else "completed"
        print(f"{name:14s} {r['steps']:4d}/{r['planned_steps']} steps, {r['seconds']:.1f}s, {state}")
    planned = sum(r["planned_steps"] for r in runs.values())
    ran = sum(r["steps"] for r in runs.values())
    saved = {"steps": planned - ran, "fraction": (planned - ran) / planned}
    print(
        f"compute saved by stopping the bad runs: {saved['steps']} of {planned} steps ({saved['fraction']:.0%})"
    )
    # what the rules say about each run, offline, from what was recorded
    findings = {name: sorted({f.rule for f in mldbg.check(out / name, rules=RULES)}) for name in runs}
    for name, fired in findings.items():
        print(f"  {name}: {', '.join(fired) or 'no rule fired'}")
    inspected = mispredicted(out / "imbalanced")
    print(
        f"imbalanced run, steps {inspected['steps_read'][0]}..{inspected['steps_read'][-1]}, per class (from the recorded labels and predictions):"
    )
    for c, counts in inspected["per_class"].items():
        print(f"  class {c}: {counts['wrong']} of {counts['samples']} mispredicted")
    for ex in inspected["examples"]:
        print(
            f"  step {ex['step']}: label {ex['label']}, predicted {ex['predicted']}, input {ex['input'][:4]}..."
        )
    summary = {"runs": runs, "compute_saved": saved, "findings": findings, "mispredicted": inspected}
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
