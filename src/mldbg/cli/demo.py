"""`mldbg demo`: the embedded default job, healthy and broken, recorded and checked."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np
from tqdm import tqdm


@click.command()
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=Path("mldbg-demo"),
    show_default=True,
    help="Where the two demo runs are written.",
)
@click.option("--epochs", type=int, default=4, show_default=True)
def demo(out: Path, epochs: int) -> None:
    """Train a small network on scikit-learn's digits with mldbg recording, show what was
    recorded, then run the rules on it and on a deliberately broken twin."""
    from mldbg.frameworks.torch_demo import train_digits
    from mldbg.store import claim, open_store

    runs = {}
    for name, lr, what, stop, n_epochs in (
        ("healthy", 3e-3, "Adam, lr 3e-3; rules watch live", False, epochs),
        # planned long, as a real job is: the live watcher (a process of its own, which starts
        # in about a second, several times that on a loaded machine) stops it long before its end
        ("broken", 5.0, "Adam, lr 5.0 (far too high); rules watch live and stop it", True, 100 * epochs),
    ):
        click.secho(f"\n== {name} run: 64-32-16-10 ReLU network on digits, {what}", bold=True)
        if claim.run_workers(open_store(out / name)):
            click.echo(f"   replacing the earlier demo run in {out / name}")
        with tqdm(desc=f"training ({name})", unit="step", leave=True, disable=None) as bar:

            def progress(step: int, loss: float, bar: tqdm = bar) -> None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3f}")

            runs[name] = train_digits(
                out / name, lr=lr, epochs=n_epochs, progress=progress, stop_on_finding=stop
            )
        r = runs[name]
        planned = n_epochs * 43  # 1,347 training images in batches of 32
        if r.stopped:
            click.secho(
                f"   mldbg stopped it after {r.steps} of {planned} planned training steps: "
                f"{1 - r.steps / planned:.1%} of the compute saved",
                fg="yellow",
            )
        click.echo(
            f"   {r.steps} training steps; accuracy train {r.train_accuracy:.1%}, test {r.eval_accuracy:.1%}"
        )
        summarize(r.path)
    check_runs(runs)


def summarize(path: Path) -> None:
    import mldbg

    trial = mldbg.create_trial(path)
    colls = trial.collections()
    click.echo(
        f"   recorded in {path}: {len(trial.steps())} steps "
        f"({len(trial.steps(mldbg.Mode.TRAIN))} train, {len(trial.steps(mldbg.Mode.EVAL))} eval), "
        f"{len(trial.tensor_names())} tensors"
    )
    for c in ("weights", "gradients", "losses", "relu_activations", "labels", "predictions"):
        if c in colls:
            click.echo(f"     {c:<17} {', '.join(colls[c][:4])}{' ...' if len(colls[c]) > 4 else ''}")
    loss = trial.tensor(colls["losses"][0])
    train_steps = loss.steps(mldbg.Mode.TRAIN)
    first, last = loss.value(train_steps[0], mldbg.Mode.TRAIN), loss.value(train_steps[-1], mldbg.Mode.TRAIN)
    click.echo(f"   loss: {float(first):.4f} at the first saved train step -> {float(last):.4f} at the last")
    grad_name = colls["gradients"][0]
    g = trial.tensor(grad_name)
    steps = g.steps()
    click.echo(
        f"   mean |{grad_name}|: "
        + "  ".join(
            f"step {s}: {g.reduction_value(s, 'mean', abs=True):.2e}"
            for s in steps[:: max(1, len(steps) // 4)][:5]
        )
    )
    relu = [n for n in colls.get("relu_activations", []) if n.endswith("_output_0")]
    if relu:
        s = trial.steps(mldbg.Mode.TRAIN)[-1]
        v = trial.tensor(relu[0]).value(s, mldbg.Mode.TRAIN)
        dead = np.mean((v.reshape(v.shape[0], -1) > 0).sum(0) == 0)
        click.echo(f"   {relu[0]} at train step {s}: {dead:.0%} of units zero over the whole batch")


def check_runs(runs: dict) -> None:
    try:
        import mldbg
        from mldbg.rules.runner import check  # noqa: F401
    except ImportError:
        click.echo("\n(rules are not installed in this build)")
        return
    for name, r in runs.items():
        diagnoses = mldbg.diagnose(r.path)
        n = len(diagnoses.findings)
        click.secho(
            f"\n== rules on the {name} run: "
            + (
                f"{len(diagnoses)} diagnos{'es' if len(diagnoses) != 1 else 'is'} of {n} finding(s)"
                if n
                else "no finding"
            ),
            bold=True,
            fg="green" if not n else "red",
        )
        for d in diagnoses[:6]:
            click.echo("  " + str(d).replace("\n", "\n  "))
    click.echo(
        "\n(mldbg check PATH shows the same; --findings lists the findings flat, each with its rule's advice)"
    )
