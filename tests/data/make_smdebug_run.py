"""Record tests/data/smdebug_run/ with the real smdebug 1.0.34, and what smdebug's own trial
reads back from it (the reference mldbg's reader is tested against).

Run it with the benchmarks' smdebug environment (`python benchmarks/run_all.py --setup`
creates `.bench-venvs/smdebug`), never with mldbg's:

    .bench-venvs/smdebug/bin/python tests/data/make_smdebug_run.py [OUT] [--shapes]

OUT defaults to tests/data/smdebug_run (tests/data/smdebug_run_shapes with --shapes, the
second variant: see record_shapes). It writes OUT/run/ (the smdebug output directory:
events/, index/, collections/, training_job_end.ts), OUT/reference.npz (every value smdebug's
trial returns, keyed `<tensor>|<step>`) and OUT/reference.json (names, steps per mode, modes,
mode steps, workers, collections and the saved reductions).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import smdebug.pytorch as smd
import torch
from smdebug.core.modes import ModeKeys
from smdebug.trials import create_trial
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


def record(run: Path) -> None:
    torch.manual_seed(0)
    model = Net()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = smd.Hook(
        out_dir=str(run),
        save_config=smd.SaveConfig(save_interval=1),
        include_collections=["weights", "biases", "gradients", "losses", "relu_activations", "norms"],
    )
    # a collection saved as reductions only, as smdebug's "norms" and rule defaults do
    hook.get_collection("norms").include("^gradient")
    hook.get_collection("norms").reduction_config = smd.ReductionConfig(
        reductions=["min", "max", "mean"], abs_reductions=["max"], norms=["l2"]
    )
    # layer outputs as reductions only (no raw tensor): smdebug's trial answers reduction_value
    hook.get_collection("relu_activations").include("relu_output")
    hook.get_collection("relu_activations").reduction_config = smd.ReductionConfig(
        reductions=["min", "max", "mean"], norms=["l2"]
    )
    hook.register_module(model)
    hook.register_loss(loss_fn)
    x = torch.randn(32, 6)
    y = torch.randint(0, 3, (32,))
    for _epoch in range(2):
        hook.set_mode(smd.modes.TRAIN)
        model.train()
        for i in range(0, 32, 8):
            opt.zero_grad()
            loss = loss_fn(model(x[i : i + 8]), y[i : i + 8])
            loss.backward()
            opt.step()
        hook.set_mode(smd.modes.EVAL)
        model.eval()
        with torch.no_grad():
            for i in range(0, 16, 8):
                loss_fn(model(x[i : i + 8]), y[i : i + 8])
    hook.close()  # writes training_job_end.ts


def record_shapes(run: Path) -> None:
    """The second variant: a conv net under nn.Sequential, every 2nd step, gradients as their
    mean and shape only (`save_shape=True`), a scalar and a tensor of the script's own (int64),
    PREDICT steps."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 4 * 4, 3))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = smd.Hook(
        out_dir=str(run),
        save_config=smd.SaveConfig(save_interval=2),
        include_collections=["weights", "losses", "shapes", "scalars"],
    )
    hook.get_collection("shapes").include("^gradient")
    hook.get_collection("shapes").reduction_config = smd.ReductionConfig(save_shape=True, reductions=["mean"])
    hook.get_collection("custom").reduction_config = smd.ReductionConfig(save_raw_tensor=True)
    hook.get_collection("custom").include("my_tensor")
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for step in range(6):
        hook.set_mode(smd.modes.TRAIN)
        x, y = torch.randn(4, 1, 6, 6), torch.randint(0, 3, (4,))
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        hook.save_scalar("my_scalar", float(step) * 1.5)
        hook.save_tensor(
            "my_tensor", np.arange(6, dtype=np.int64).reshape(2, 3) + step, collections_to_write="custom"
        )
    hook.set_mode(smd.modes.PREDICT)
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(4, 1, 6, 6))
    hook.close()


def reference(run: Path, out: Path) -> None:
    trial = create_trial(str(run))
    values: dict[str, np.ndarray] = {}
    names = trial.tensor_names()
    info: dict = {
        "tensor_names": names,
        "steps": trial.steps(),
        "steps_by_mode": {
            m.name: trial.steps(mode=m) for m in (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT)
        },
        "modes": {str(s): trial.mode(s).name for s in trial.steps()},
        "mode_steps": {str(s): trial.mode_step(s) for s in trial.steps()},
        "workers": sorted(trial.workers()),
        "collections": {
            c.name: sorted(trial.tensor_names(collection=c.name))
            for c in trial.collection_manager.collections.values()
        },
        "tensor_steps": {},
        "shapes": {},
        "reductions": {},
    }
    for name in names:
        t = trial.tensor(name)
        info["tensor_steps"][name] = t.steps()
        for step in t.steps():
            with contextlib.suppress(Exception):  # saved with save_shape=True
                info["shapes"][f"{name}|{step}"] = list(t.shape(step))
            with contextlib.suppress(Exception):  # reductions only: no value
                values[f"{name}|{step}"] = np.asarray(t.value(step))
            for red in ("min", "max", "mean", "l2"):
                for ab in (False, True):
                    try:
                        v = t.reduction_value(step, red, abs=ab)
                    except Exception:
                        continue
                    if v is not None:
                        info["reductions"][f"{name}|{step}|{red}|{int(ab)}"] = float(v)
    np.savez(out / "reference.npz", **values)
    (out / "reference.json").write_text(json.dumps(info, indent=1, sort_keys=True))


def main() -> None:
    """`make_smdebug_run.py [OUT] [--shapes]`: the first variant into OUT (default
    tests/data/smdebug_run), or with --shapes the second (default tests/data/smdebug_run_shapes)."""
    args = [a for a in sys.argv[1:] if a != "--shapes"]
    shapes = "--shapes" in sys.argv[1:]
    default = Path(__file__).parent / ("smdebug_run_shapes" if shapes else "smdebug_run")
    out = Path(args[0]) if args else default
    run = out / "run"
    shutil.rmtree(run, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    (record_shapes if shapes else record)(run)
    reference(run, out)
    print(f"wrote {run} and the reference beside it")


if __name__ == "__main__":
    main()
