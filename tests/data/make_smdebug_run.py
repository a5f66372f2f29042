"""Record tests/data/smdebug_run/ with the real smdebug 1.0.34, and what smdebug's own trial
reads back from it (the reference mldbg's reader is tested against).

Run it with the benchmarks' smdebug environment (`python benchmarks/run_all.py --setup`
creates `.bench-venvs/smdebug`), never with mldbg's:

    .bench-venvs/smdebug/bin/python tests/data/make_smdebug_run.py [OUT]

OUT defaults to tests/data/smdebug_run. It writes OUT/run/ (the smdebug output directory:
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


def reference(run: Path, out: Path) -> None:
    trial = create_trial(str(run))
    values: dict[str, np.ndarray] = {}
    names = trial.tensor_names()
    info: dict = {
        "tensor_names": names,
        "steps": trial.steps(),
        "steps_by_mode": {m.name: trial.steps(mode=m) for m in (ModeKeys.TRAIN, ModeKeys.EVAL)},
        "modes": {str(s): trial.mode(s).name for s in trial.steps()},
        "mode_steps": {str(s): trial.mode_step(s) for s in trial.steps()},
        "workers": sorted(trial.workers()),
        "collections": {
            c.name: sorted(trial.tensor_names(collection=c.name))
            for c in trial.collection_manager.collections.values()
        },
        "tensor_steps": {},
        "reductions": {},
    }
    for name in names:
        t = trial.tensor(name)
        info["tensor_steps"][name] = t.steps()
        for step in t.steps():
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
    out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "smdebug_run")
    run = out / "run"
    shutil.rmtree(run, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    record(run)
    reference(run, out)
    print(f"wrote {run} and the reference beside it")


if __name__ == "__main__":
    main()
