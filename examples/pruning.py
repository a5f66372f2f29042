"""Iterative pruning, as in the paper, small enough for CI: a small CNN is pruned filter by
filter, ranked by the Taylor criterion computed from the activations and gradients the hook
recorded, and a custom rule stops the pruning when validation accuracy drops.

    python examples/pruning.py [--out runs/pruning] [--per-iteration 3] [--max-drop 0.05] [--json summary.json]

Each iteration is one recorded run (`<out>/iter_00`, `iter_01`, ...): a few steps of
fine-tuning, in which the hook records each conv layer's output (`conv1_output_0`) and, through
`hook.save_tensor`, the gradient of that output (`gradient/conv1_output_0`); then one
evaluation, whose accuracy is saved as the scalar `val_accuracy`. The rank of filter c of a
layer is mean |activation * gradient| over the batch and the positions of channel c (the
first-order Taylor estimate of the loss change when the filter is removed, Molchanov et al.
2017), averaged over the recorded steps and normalized per layer; the `--per-iteration`
lowest-ranked filters are cut out of the network (the conv's weights and bias, and the next
layer's input channels). `AccuracyDrop`, a custom rule, reads `val_accuracy` from the
iteration's run; when it fires, pruning stops and the network of the previous iteration is kept.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

import mldbg
from mldbg.rules import Rule
from mldbg.torch import Hook

CLASSES, SIZE = 4, 12


class AccuracyDrop(Rule):
    """Validation accuracy (`val_accuracy`, a saved scalar) fell more than `max_drop` below
    `baseline`: the last change to the model (here, pruning) cost too much."""

    needs = ("scalars",)
    default = False  # a rule of this example, not of the default set
    baseline: float = 1.0
    max_drop: float = 0.05
    tensor: str = "val_accuracy"

    def check(self, trial: Any, step: int) -> mldbg.Finding | None:
        if not trial.has_tensor(self.tensor) or step not in trial.tensor(self.tensor).steps():
            return None
        accuracy = float(trial.value(self.tensor, step))
        if accuracy < self.baseline - self.max_drop:
            return self.finding(
                trial, step,
                f"{self.tensor} {accuracy:.3f} is {self.baseline - accuracy:.3f} below the baseline "
                f"{self.baseline:.3f} (more than {self.max_drop})",
                tensors=[self.tensor],
                suggestion="Stop pruning here and keep the previous model, or fine-tune longer between pruning steps.",
            )  # fmt: skip
        return None


class Net(nn.Module):
    def __init__(self, c1: int = 16, c2: int = 16):
        super().__init__()
        self.conv1 = nn.Conv2d(1, c1, 3, padding=1)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=1)
        self.fc = nn.Linear(c2, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.relu(self.conv2(x))
        return self.fc(x.mean(dim=(2, 3)))

    def filters(self) -> dict[str, int]:
        return {"conv1": self.conv1.out_channels, "conv2": self.conv2.out_channels}


def data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Noisy 12x12 images of four patterns: a horizontal bar, a vertical bar, a diagonal, a square."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, size=n)
    x = rng.normal(0, 0.6, size=(n, 1, SIZE, SIZE))
    for i, c in enumerate(y):
        p = rng.integers(2, SIZE - 2)
        if c == 0:
            x[i, 0, p, :] += 2.0
        elif c == 1:
            x[i, 0, :, p] += 2.0
        elif c == 2:
            x[i, 0] += 2.0 * np.eye(SIZE)
        else:
            q = rng.integers(1, SIZE - 5)
            x[i, 0, q : q + 4, q : q + 4] += 1.5
    return torch.tensor(x, dtype=torch.float32), torch.tensor(y)


def record_iteration(
    run: Path, model: Net, x: torch.Tensor, y: torch.Tensor, xv: torch.Tensor, yv: torch.Tensor, steps: int
) -> float:
    """Fine-tune `steps` steps recording activations and their gradients, then evaluate once."""
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with Hook(
        run,
        include_collections=["losses", "outputs", "gradients", "scalars"],
        save_config=mldbg.SaveConfig(save_interval=1),
    ) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)

        def keep_gradient(name: str) -> Any:
            def on_forward(module: nn.Module, args: Any, output: torch.Tensor) -> None:
                if output.requires_grad:  # a training forward: record d loss / d output in backward
                    output.register_hook(
                        lambda g: hook.save_tensor(f"gradient/{name}_output_0", g, ["gradients"])
                    )

            return on_forward

        handles = [getattr(model, n).register_forward_hook(keep_gradient(n)) for n in ("conv1", "conv2")]
        model.train()
        for step in range(steps):
            batch = slice((step * 64) % len(x), (step * 64) % len(x) + 64)
            opt.zero_grad()
            loss_fn(model(x[batch]), y[batch]).backward()
            opt.step()
        for h in handles:
            h.remove()
        model.eval()
        with torch.no_grad():
            accuracy = float((model(xv).argmax(1) == yv).float().mean())
        hook.save_scalar("val_accuracy", accuracy)  # in the evaluation's step
    return accuracy


def filter_ranks(run: Path) -> dict[str, np.ndarray]:
    """Per conv layer, the Taylor rank of each filter, from the recorded activations and
    gradients: mean |a * g| over batch and positions, averaged over steps, normalized."""
    trial = mldbg.create_trial(run)
    ranks = {}
    for layer in ("conv1", "conv2"):
        act, grad = trial.tensor(f"{layer}_output_0"), trial.tensor(f"gradient/{layer}_output_0")
        steps = sorted(set(act.steps(mode=mldbg.Mode.TRAIN)) & set(grad.steps(mode=mldbg.Mode.TRAIN)))
        total = sum(
            np.abs(act.value(s, mode=mldbg.Mode.TRAIN) * grad.value(s, mode=mldbg.Mode.TRAIN)).mean(
                axis=(0, 2, 3)
            )
            for s in steps
        )
        rank = np.asarray(total, dtype=np.float64) / len(steps)
        ranks[layer] = rank / (np.linalg.norm(rank) + 1e-12)
    return ranks


def prune(model: Net, ranks: dict[str, np.ndarray], count: int) -> list[tuple[str, int]]:
    """Cut the `count` lowest-ranked filters out of `model` (each layer keeps at least one)."""
    order = sorted((float(r), layer, int(c)) for layer, rank in ranks.items() for c, r in enumerate(rank))
    cut: dict[str, list[int]] = {"conv1": [], "conv2": []}
    for _, layer, c in order:
        if sum(len(v) for v in cut.values()) == count:
            break
        if len(ranks[layer]) - len(cut[layer]) > 1:
            cut[layer].append(c)
    with torch.no_grad():
        for layer, following in (("conv1", "conv2"), ("conv2", "fc")):
            keep = [c for c in range(len(ranks[layer])) if c not in cut[layer]]
            conv, nxt = getattr(model, layer), getattr(model, following)
            new = nn.Conv2d(conv.in_channels, len(keep), 3, padding=1)
            new.weight.copy_(conv.weight[keep])
            new.bias.copy_(conv.bias[keep])
            setattr(model, layer, new)
            if isinstance(nxt, nn.Conv2d):
                nxt2 = nn.Conv2d(len(keep), nxt.out_channels, 3, padding=1)
                nxt2.weight.copy_(nxt.weight[:, keep])
                nxt2.bias.copy_(nxt.bias)
            else:
                nxt2 = nn.Linear(len(keep), nxt.out_features)
                nxt2.weight.copy_(nxt.weight[:, keep])
                nxt2.bias.copy_(nxt.bias)
            setattr(model, following, nxt2)  # conv2 rebuilt with fewer inputs: its own filters next
    return [(layer, c) for layer, cs in cut.items() for c in sorted(cs)]


def parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="runs/pruning")
    ap.add_argument("--per-iteration", type=int, default=3, help="filters cut per iteration")
    ap.add_argument("--max-drop", type=float, default=0.05, help="accuracy drop that stops pruning")
    ap.add_argument("--max-iterations", type=int, default=12)
    ap.add_argument("--steps", type=int, default=25, help="fine-tuning steps per iteration")
    ap.add_argument("--json", help="write the summary here too")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    x, y = data(1024, seed=0)
    xv, yv = data(512, seed=1)
    model = Net()
    baseline = record_iteration(
        out / "iter_00", model, x, y, xv, yv, steps=4 * args.steps
    )  # the initial training
    rule = AccuracyDrop(baseline=baseline, max_drop=args.max_drop)
    history = [
        {"iteration": 0, "filters": model.filters(), "parameters": parameters(model), "accuracy": baseline}
    ]
    print(
        f"iteration  0: {model.filters()}, {parameters(model)} parameters, accuracy {baseline:.3f} (baseline)"
    )
    kept, stopped = copy.deepcopy(model), None
    for it in range(1, args.max_iterations + 1):
        cut = prune(model, filter_ranks(out / f"iter_{it - 1:02d}"), args.per_iteration)
        accuracy = record_iteration(out / f"iter_{it:02d}", model, x, y, xv, yv, steps=args.steps)
        history.append(
            {
                "iteration": it,
                "filters": model.filters(),
                "parameters": parameters(model),
                "accuracy": accuracy,
                "cut": cut,
            }
        )
        print(
            f"iteration {it:2d}: cut {cut}; {model.filters()}, {parameters(model)} parameters, accuracy {accuracy:.3f}"
        )
        findings = mldbg.check(out / f"iter_{it:02d}", rules=[rule])
        if findings:
            stopped = {"iteration": it, "finding": findings[0].message}
            print(
                f"[{findings[0].rule}] {findings[0].message}: pruning stops, the model of iteration {it - 1} is kept"
            )
            break
        kept = copy.deepcopy(model)
    summary = {
        "baseline": baseline,
        "history": history,
        "stopped": stopped,
        "kept": {"filters": kept.filters(), "parameters": parameters(kept)},
    }
    print(f"kept: {kept.filters()}, {parameters(kept)} of {history[0]['parameters']} parameters")
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
