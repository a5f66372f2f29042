"""Which rule fires on which injected defect, and where: the default rule set of `mldbg check`
over tiny real PyTorch trainings, healthy ones and ones with a defect injected.

    .venv/bin/python benchmarks/rule_defects.py [--steps 100] [--markdown] [--only NAME...] [--default-hook]

Prints one row per training: the rules expected to fire, every rule that fired with the step
(global step) where it first fired, and whether the row passes (healthy: no rule of the
default set fired; defect: an expected rule fired). The model rules outside the default set
(confusion, overtraining, saturated_activation, check_input_images) are run by name too and
marked with *. Exit status 1 if a row fails. The table in docs/rules.md comes from `--markdown`.
`--default-hook` records each training with the two lines of the README (`Hook(out_dir)`: the
default statistics every step, raw tensors on the default save config) instead of every
collection saved every step.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.tiny import train  # noqa: E402

import mldbg  # noqa: E402

# name -> (train keyword arguments, rules any of which must fire; () means healthy: none may)
SCENARIOS: dict[str, tuple[dict, tuple[str, ...]]] = {
    "healthy MLP ReLU, SGD": ({}, ()),
    "healthy MLP tanh, SGD": ({"activation": "tanh"}, ()),
    "healthy MLP sigmoid, Adam": ({"activation": "sigmoid", "optimizer": "adam"}, ()),
    "healthy MLP sigmoid, SGD lr 1": ({"activation": "sigmoid", "lr": 1.0}, ()),
    "healthy MLP ReLU, Adam": ({"optimizer": "adam"}, ()),
    "healthy MLP ReLU, Adam, 300 steps": ({"optimizer": "adam", "steps": 300}, ()),
    "healthy MLP ReLU, SGD momentum, xavier": ({"momentum": 0.9, "lr": 0.02, "init": "xavier"}, ()),
    "healthy MLP 4 layers ReLU, kaiming": ({"depth": 4, "init": "kaiming", "lr": 0.05}, ()),
    "healthy CNN, SGD": ({"model": "cnn"}, ()),
    "healthy CNN, Adam": ({"model": "cnn", "optimizer": "adam"}, ()),
    "healthy CNN without BatchNorm": ({"model": "cnn", "batchnorm": False}, ()),
    "healthy CNN tanh, Adam": ({"model": "cnn", "activation": "tanh", "optimizer": "adam"}, ()),
    "healthy, fc1 frozen on purpose": ({"freeze": ("fc1",)}, ()),
    "healthy regression (MSE)": ({"task": "regression", "lr": 0.02}, ()),
    "healthy, 10 classes": ({"n_classes": 10, "optimizer": "adam", "n_train": 1024}, ()),
    "lr 1e12 (explodes)": ({"lr": 1e12}, ("exploding_tensor", "tensor_variance")),
    "bias init -10 (kills ReLUs)": ({"init": "negative_bias"}, ("dead_relu",)),
    "zero init": ({"init": "zero"}, ("poor_weight_initialization", "all_zero", "dead_relu")),
    "constant init": ({"init": "constant"}, ("poor_weight_initialization",)),
    "lr 1e-10": ({"lr": 1e-10}, ("weight_update_ratio", "loss_not_decreasing")),
    "optimizer frozen (lr 0)": ({"frozen_optimizer": True}, ("unchanged_tensor",)),
    "tanh, init std 10": ({"activation": "tanh", "init": "huge"}, ("tanh_saturation",)),
    "sigmoid, inputs x100": ({"activation": "sigmoid", "input_scale": 100.0}, ("sigmoid_saturation",)),
    "tanh, inputs x100": ({"activation": "tanh", "input_scale": 100.0}, ("tanh_saturation",)),
    "sigmoid, 8 layers": ({"activation": "sigmoid", "depth": 8}, ("vanishing_gradient",)),
    "inputs x100 + 50": ({"input_scale": 100.0, "input_shift": 50.0, "lr": 1e-5}, ("not_normalized_data",)),
    "CNN, inputs x255": (
        {"model": "cnn", "input_scale": 255.0, "input_shift": 128.0, "lr": 1e-4},
        ("not_normalized_data",),
    ),
    "97% of labels one class": ({"imbalance": 0.97}, ("class_imbalance",)),
    "classes 0 and 1 swapped in training labels": (
        {"swap_classes": (0, 1), "optimizer": "adam"},
        ("confusion", "overfit"),
    ),
    "random labels, Adam": (
        {"shuffle_labels": True, "optimizer": "adam", "steps": 300, "width": 64},
        ("overfit",),
    ),
    "16 training samples, Adam": ({"n_train": 16, "optimizer": "adam", "steps": 300}, ("overfit",)),
    "tiny init std 1e-5": ({"init": "tiny"}, ("poor_weight_initialization",)),
}


# model rules outside the default set, run by name too (marked * in the table; they do not
# count against a healthy row)
EXTRA = ("confusion", "overtraining", "saturated_activation", "check_input_images")


def run(name: str, kwargs: dict, steps: int, root: Path, default_hook: bool = False) -> tuple[list, float]:
    kw = {"steps": steps, "default_hook": default_hook, **kwargs}
    path = root / name.replace(" ", "_").replace(",", "").replace("/", "_")
    train(path, **kw)
    t = time.perf_counter()
    findings = mldbg.check(str(path), rules=["default", *EXTRA])
    return findings, time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--verbose", "-v", action="store_true")
    ap.add_argument("--default-hook", action="store_true", help="record with Hook(out_dir) defaults")
    args = ap.parse_args()
    failures = 0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (kwargs, expected) in SCENARIOS.items():
            if args.only and not any(o.lower() in name.lower() for o in args.only):
                continue
            findings, secs = run(name, kwargs, args.steps, Path(tmp), args.default_hook)
            first: dict[str, int] = {}
            for f in findings:
                first[f.rule] = min(first.get(f.rule, f.step), f.step)
            default = [r for r in first if r not in EXTRA]
            ok = not default if not expected else any(r in first for r in expected)
            failures += not ok
            fired = (
                ", ".join(
                    f"{r}{'*' if r in EXTRA else ''} @{s}"
                    for r, s in sorted(first.items(), key=lambda kv: kv[1])
                )
                or "-"
            )
            rows.append((name, ", ".join(expected) or "nothing", fired, "yes" if ok else "NO"))
            if not args.markdown:
                print(
                    f"{'ok ' if ok else 'BAD'} {name:40s} expect {', '.join(expected) or 'nothing':45s} fired {fired}  ({secs:.2f}s)"
                )
                if args.verbose or not ok:
                    for f in findings:
                        print("      ", str(f).replace("\n", "\n       "))
    if args.markdown:
        print("| training (tiny PyTorch run) | expected | fired (rule @ first step) | ok |")
        print("| --- | --- | --- | --- |")
        for r in rows:
            print("| " + " | ".join(r) + " |")
    print(f"\n{len(rows) - failures}/{len(rows)} as expected", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
