"""The default rules over each adapter's two lines (issue 14, point 5): a representative part
of `benchmarks/adapter_defects.py`'s table, trained for real in one subprocess per group of
adapters (adapter_defects_job.py), each injected defect caught and each healthy twin quiet.

The scenarios are those that needed a change to pass (a healthy Keras `fit` whose running-mean
logs were read as a loss series; a corrupted batch whose loss really spikes; 8 sigmoid layers
under PyTorch's init; the gradient sum a hand-written JAX loop never resets), two healthy
twins, and the healthy ReLU MLP with SGD through JAX (a class learned last, whose errors went
to both other classes alike, was taken by `label_confusion` for a confused pair).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from adapter_defects_job import EXTRA, SCENARIOS, SUSPICIONS, applies, as_expected, run_dir
from framework_jobs import run_job

import mldbg
from mldbg import Mode

HEALTHY = ("healthy MLP ReLU, Adam", "healthy CNN tanh, Adam")
SPIKE = "one corrupted batch (inputs x30, wrong labels), Adam"
NOT_RESET = "gradients accumulated by hand, never reset"
# group -> (its adapters tested here, the scenarios); ~60 s on an idle 2-core machine
GROUPS = {
    "tensorflow": (("keras-tensorflow", "tape-graph"), (HEALTHY[0], SPIKE)),
    "keras-torch": (("keras-torch",), (HEALTHY[0], "sigmoid, 8 layers")),
    "jax": (("jax-eager", "jax-jit"), (HEALTHY[1], NOT_RESET, "healthy MLP ReLU, SGD")),
}
CASES = [
    (group, adapter, name)
    for group, (adapters, names) in GROUPS.items()
    for adapter in adapters
    for name in names
    if applies(adapter, name)
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`trained(group)`: the folder of that group's runs, trained once (one subprocess)."""
    done: dict[str, Path] = {}

    def get(group: str) -> Path:
        if group not in done:
            adapters, names = GROUPS[group]
            out = tmp_path_factory.mktemp(f"adapter_defects_{group}")
            run_job(
                "adapter_defects_job.py", out, "--group", group, "--adapters", *adapters, "--only", *names
            )
            done[group] = out
        return done[group]

    return get


@pytest.mark.parametrize(("group", "adapter", "name"), CASES)
def test_the_defect_is_caught_or_the_twin_stays_quiet(trained, group, adapter, name):
    expected = SCENARIOS[name][1]
    path = str(run_dir(trained(group), adapter, name))
    findings = mldbg.check(path, rules=["default", *EXTRA])
    fired = {f.rule for f in findings}
    if name in SUSPICIONS:  # caught as a suspicion, by design: listed, not reported
        fired |= {
            f.rule for d in mldbg.diagnose(path, rules=["default", *EXTRA]).unconfirmed for f in d.findings
        }
    assert as_expected(fired, expected), (expected, [str(f) for f in findings])


def test_keras_logs_are_saved_once_an_epoch_and_a_pass(trained):
    """Keras' running means (`metrics/loss`) land at the last step of each epoch (TRAIN) and
    of each validation pass (EVAL), not at every step: a running mean that restarts every
    epoch is no loss series."""
    trial = mldbg.create_trial(str(run_dir(trained("keras-torch"), "keras-torch", "healthy MLP ReLU, Adam")))
    steps = trial.tensor("metrics/loss").steps()
    train = [trial.mode_step(s) for s in steps if trial.mode(s) == Mode.TRAIN]
    evals = [trial.mode_step(s) for s in steps if trial.mode(s) == Mode.EVAL]
    assert train == [16 * e + 15 for e in range(7)]  # 7 epochs of 16 steps
    assert evals == [2 * e + 1 for e in range(7)]  # 2 batches of 128 a validation pass
    assert trial.tensor("loss").steps(Mode.TRAIN) == list(range(112))  # the per-batch loss: every step
