"""Early warning: how many steps before a transformer LM diverges on its own does a rule fire?

    .venv/bin/python benchmarks/early_warning.py [--lr 3.5 3.0] [--steps 220]

Trains the tiny GPT of tests/rules/diverging_lm.py (SGD momentum 0.9, linear warmup over 100
steps to the peak learning rate; no injected bug) with the two-line hook, statistics every
step, and prints one markdown row per learning rate: the step where the loss diverges (first
loss above 2x its running minimum, or not finite), the first finding of the default set (and
its rule), the first divergence-related finding of the default set without loss_change_point
(the set before it; leaving out what fired before step 50, on the initialization), loss_spike
alone, and loss_change_point; each with its lead (divergence step - finding step; negative: after it). The table of docs/rules.md
("Early warning") comes from this script.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.rules.diverging_lm import diverged_at, train_lm  # noqa: E402

import mldbg  # noqa: E402


def first(findings: list, after: int = -1) -> tuple[int, str] | None:
    late = sorted((f.step, f.rule) for f in findings if f.step >= after)
    return late[0] if late else None


def cell(hit: tuple[int, str] | None, diverged: int | None, rule: bool = False) -> str:
    if hit is None:
        return "none"
    step, name = hit
    lead = f" (lead {diverged - step})" if diverged is not None else ""
    return f"{step}{lead}" + (f" `{name}`" if rule else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lr", type=float, nargs="+", default=[3.5, 3.0])
    parser.add_argument("--steps", type=int, default=220)
    args = parser.parse_args()
    print(
        "| peak lr | diverges at | first finding, default set | first divergence finding, default set without loss_change_point | loss_spike alone | loss_change_point |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for lr in args.lr:
            path = Path(tmp) / f"lr{lr}"
            losses = train_lm(path, peak_lr=lr, steps=args.steps)
            d = diverged_at(losses)
            default = mldbg.check(str(path))
            before = [f for f in default if f.rule != "loss_change_point"]
            spike = mldbg.check(str(path), rules=["loss_spike"])
            change = mldbg.check(str(path), rules=["loss_change_point"])
            print(
                f"| {lr:g} | {d if d is not None else 'no'} | {cell(first(default), d, True)} | "
                f"{cell(first(before, after=50), d, True)} | {cell(first(spike), d)} | {cell(first(change), d)} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
