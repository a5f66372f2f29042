"""Tiny real trainings shared by every rule test: each is trained once per session, on first use."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

import mldbg
from mldbg.rules import Finding
from tests.defects import EXTRA
from tests.defects import SCENARIOS as DEFECT_TABLE
from tests.rules.silent import silent_run  # noqa: F401 - the silent bugs of issue 17 (tests/rules/silent.py)
from tests.tiny import train

# name -> train() keyword arguments. Healthy runs first; every rule must stay quiet on them.
SCENARIOS: dict[str, dict] = {
    "healthy_relu_sgd": {},
    "healthy_tanh_sgd": {"activation": "tanh"},
    "healthy_sigmoid_adam": {"activation": "sigmoid", "optimizer": "adam"},
    "healthy_relu_adam": {"optimizer": "adam", "steps": 150},
    "healthy_cnn_sgd": {"model": "cnn"},
    "healthy_cnn_adam": {"model": "cnn", "optimizer": "adam"},
    "healthy_frozen_fc1": {"freeze": ("fc1",)},
    "lr_huge": {"lr": 1e12},
    "negative_bias": {"init": "negative_bias"},
    "zero_init": {"init": "zero"},
    "constant_init": {"init": "constant"},
    "lr_tiny": {"lr": 1e-10},
    "frozen_optimizer": {"frozen_optimizer": True},
    "tanh_huge_init": {"activation": "tanh", "init": "huge"},
    "sigmoid_inputs_x100": {"activation": "sigmoid", "input_scale": 100.0},
    "deep_sigmoid": {"activation": "sigmoid", "depth": 8},
    "unnormalized": {"input_scale": 100.0, "input_shift": 50.0, "lr": 1e-5},
    "imbalanced": {"imbalance": 0.97},
    "swapped_classes": {"swap_classes": (0, 1), "optimizer": "adam"},
    "tiny_train_set": {"n_train": 16, "optimizer": "adam", "steps": 150},
    "random_labels": {"shuffle_labels": True, "optimizer": "adam", "steps": 300, "width": 64},
}
HEALTHY = [n for n in SCENARIOS if n.startswith("healthy")]
STEPS = 60


@pytest.fixture(scope="session")
def run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], str]:
    """run(name) -> path of the recorded training `name` (trained on first use)."""
    root = tmp_path_factory.mktemp("rule_runs")
    done: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in done:
            path = Path(root) / name
            train(path, **{"steps": STEPS, **SCENARIOS[name]})
            done[name] = str(path)
        return done[name]

    return get


@pytest.fixture(scope="session")
def default_findings(run: Callable[[str], str]) -> Callable[[str], list[Finding]]:
    """default_findings(name) -> what the default rule set finds on training `name` (cached)."""
    cache: dict[str, list[Finding]] = {}

    def get(name: str) -> list[Finding]:
        if name not in cache:
            cache[name] = mldbg.check(run(name))
        return cache[name]

    return get


@pytest.fixture(scope="session")
def defect_table_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str], tuple[Path, list[Finding], list[warnings.WarningMessage]]]:
    """defect_table_runs(name) -> (path, findings, warnings) of row `name` of the defect table
    (tests/defects.py) trained with the two lines for 100 steps, and checked by the default
    rules and EXTRA, as benchmarks/rule_defects.py does; `warnings`: those the check raised (a
    rule that failed). Trained on first use, for test_default_hook.py and test_diagnosis.py."""
    root = tmp_path_factory.mktemp("defect_table")
    done: dict[str, tuple[Path, list[Finding], list[warnings.WarningMessage]]] = {}

    def get(name: str) -> tuple[Path, list[Finding], list[warnings.WarningMessage]]:
        if name not in done:
            path = root / f"row{list(DEFECT_TABLE).index(name)}"
            train(path, default_hook=True, **{"steps": 100, **DEFECT_TABLE[name][0]})
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                findings = mldbg.check(str(path), rules=["default", *EXTRA])
            done[name] = (path, findings, caught)
        return done[name]

    return get


@pytest.fixture(scope="session")
def ddp_jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The real two-process gloo jobs of test_rank_divergence.py (bug -> run path), recorded
    once for it and test_columns.py."""
    from tests.rules.test_rank_divergence import record_jobs

    return record_jobs(tmp_path_factory.mktemp("ddp_silent"))


def live_findings(path: str | Path, rules: list[str], tmp: Path) -> list[Finding]:
    """What a live watcher finds on the run at `path` while it still runs: a copy of it
    without its workers' END markers (the training has not ended), checked once through
    every step a watcher would check (`RuleRunner.run_available`)."""
    import shutil

    from mldbg.rules.runner import RuleRunner

    copy = tmp / "live"
    shutil.copytree(path, copy)
    for end in copy.glob("workers/*/END"):
        end.unlink()
    runner = RuleRunner(str(copy), rules)
    found = runner.run_available()
    assert not runner.errors and not runner.trial.loaded_all_steps
    return found


def logged_loss(path: str | Path, values) -> str:
    """A loss series written through the recorder as a framework adapter drives it (as
    benchmarks/long_runs.py writes its long runs): one TRAIN step per value, the loss a scalar
    of the `losses` collection. Returns the run's path."""
    from mldbg.record.recorder import Recorder

    rec = Recorder(
        str(path),
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["losses"],
        overwrite=True,
    )
    try:
        for v in values:
            rec.start_step(mldbg.Mode.TRAIN)
            rec.save_scalar("loss", float(v), ("losses",))
            rec.end_step()
    finally:
        rec.close()
    return str(path)


def fired(findings: list[Finding]) -> dict[str, int]:
    """rule name -> the first step where it fired."""
    out: dict[str, int] = {}
    for f in findings:
        out[f.rule] = min(out.get(f.rule, f.step), f.step)
    return out


def assert_explains(f: Finding) -> None:
    """A finding names its tensors, has numbers in its message, and says what to try."""
    assert f.tensors, f
    assert any(ch.isdigit() for ch in f.message), f
    assert len(f.suggestion) > 30, f
