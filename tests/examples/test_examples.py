"""The examples that retell the paper run as a user runs them (a subprocess each, small data)
and do what they say; what they print is checked against the runs they recorded.

Each takes a dozen seconds or so: the case study trains four runs in real time (the point is
the wall-clock the stopped runs give back), the pruning example a dozen short iterations."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import mldbg

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, tmp_path: Path, *args: str) -> dict:
    summary = tmp_path / "summary.json"
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--out", str(tmp_path / "runs"), "--json", str(summary), *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(summary.read_text())


def test_case_study_stops_the_bad_runs_and_finds_the_mispredicted_inputs(tmp_path: Path) -> None:
    # 250 planned steps of >= 15 ms: the watcher (a fresh interpreter) has seconds to start and
    # stop the bad runs, even on a loaded machine
    summary = run_example("case_study.py", tmp_path, "--steps", "250")
    runs = summary["runs"]
    for name in ("healthy", "healthy_lr03"):
        assert runs[name]["stopped"] is None and runs[name]["steps"] == runs[name]["planned_steps"]
        assert summary["findings"][name] == []
    for name, rule in (("imbalanced", "class_imbalance"), ("diverging", "exploding_tensor")):
        assert runs[name]["stopped"] and rule in runs[name]["stopped"], runs[name]
        assert runs[name]["steps"] < runs[name]["planned_steps"]
        assert rule in summary["findings"][name]
    # the compute saved is what the runs did not train, as their records show
    planned, ran = 0, 0
    for name, r in runs.items():
        trial = mldbg.create_trial(tmp_path / "runs" / name)
        assert trial.loaded_all_steps
        assert len(trial.steps(mode=mldbg.Mode.TRAIN)) == r["steps"], name
        planned, ran = planned + r["planned_steps"], ran + r["steps"]
    assert summary["compute_saved"]["steps"] == planned - ran > 0
    # the imbalanced run's rare classes are the mispredicted ones
    per_class = {int(c): v for c, v in summary["mispredicted"]["per_class"].items()}
    assert per_class[0]["samples"] > 5 * per_class[2]["samples"]
    rate = {c: v["wrong"] / max(v["samples"], 1) for c, v in per_class.items()}
    assert rate[2] > rate[0] and rate[1] > rate[0]
    trial = mldbg.create_trial(tmp_path / "runs" / "imbalanced")
    examples = summary["mispredicted"]["examples"]
    assert examples
    for ex in examples:
        assert ex["label"] != ex["predicted"]
        inputs = trial.tensor("model_input_0").value(ex["step"])
        assert np.isclose(inputs, np.asarray(ex["input"]), atol=0.006).all(axis=1).any()  # a recorded input


def test_pruning_stops_when_accuracy_drops(tmp_path: Path) -> None:
    summary = run_example("pruning.py", tmp_path, "--per-iteration", "4", "--steps", "20")
    history, baseline = summary["history"], summary["baseline"]
    assert baseline > 0.9
    assert summary["stopped"] is not None and len(history) >= 3
    last = history[-1]
    assert last["accuracy"] < baseline - 0.05 and summary["stopped"]["iteration"] == last["iteration"]
    assert all(h["accuracy"] >= baseline - 0.05 for h in history[:-1])
    params = [h["parameters"] for h in history]
    assert (
        params == sorted(params, reverse=True) and summary["kept"]["parameters"] == history[-2]["parameters"]
    )
    assert summary["kept"]["parameters"] < params[0] / 2
    # the ranks came from recorded activations and their gradients, of the same shape
    first = mldbg.create_trial(tmp_path / "runs" / "iter_00")
    for layer in ("conv1", "conv2"):
        step = first.steps(mode=mldbg.Mode.TRAIN)[0]
        act = first.tensor(f"{layer}_output_0").value(step)
        grad = first.tensor(f"gradient/{layer}_output_0").value(step)
        assert act.shape == grad.shape and act.shape[1] == 16 and np.abs(grad).sum() > 0
    # the custom rule: quiet on the iteration before, fires on the last
    spec = importlib.util.spec_from_file_location("pruning_example", EXAMPLES / "pruning.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rule = module.AccuracyDrop(baseline=baseline, max_drop=0.05)
    assert mldbg.check(tmp_path / "runs" / f"iter_{last['iteration'] - 1:02d}", rules=[rule]) == []
    (finding,) = mldbg.check(tmp_path / "runs" / f"iter_{last['iteration']:02d}", rules=[rule])
    assert finding.rule == "accuracy_drop" and finding.tensors == ["val_accuracy"]
