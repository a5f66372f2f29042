"""Every rule that reads statistics reaches the same verdict from them as from raw tensors.

A run recorded by the two-line hook holds, per tensor and step, the statistics of
`store.statistics.DEFAULTS` and no raw tensor but the loss. `StatisticsOnly` shows a raw run
of the tiny trainings that way: it hides the raw tensors, and answers `saved_statistic` with
the NumPy reference (`store.statistics.compute`, `class_statistics`) on them, only for the
keys the defaults record. The real recorder's statistics equal that reference (tested on the
store's side); here the rules' arithmetic on statistics is checked against their raw verdicts.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import mldbg
from mldbg.rules import Finding, TrialView
from mldbg.rules.labels import ClassStats
from mldbg.rules.runner import RuleRunner
from mldbg.store.statistics import DEFAULTS, Statistic, Value, class_statistics, compute, expand
from mldbg.trial import Trial
from tests.rules.conftest import HEALTHY

RAW_KEPT = ("losses",)  # the loss is saved raw every step


class StatisticsOnly(TrialView):
    """A raw run as the two-line hook records it: statistics only (see the module's text)."""

    def __init__(self, trial: Trial):
        super().__init__(trial)
        cols = trial.collections()
        kept = {n for c in RAW_KEPT for n in cols.get(c, [])}
        self.keys: dict[str, set[str]] = {}
        for collection, keys in DEFAULTS.items():
            for name in cols.get(collection, []):
                self.keys.setdefault(name, set()).update(s.key for s in expand(keys))
        hidden = set(self.keys) | {n for c in ("labels", "predictions") for n in cols.get(c, [])}
        self.hidden = hidden - kept

    def real(self, name: str, step: int) -> np.ndarray | None:
        return super().raw(name, step)

    def raw(self, name, step, mode=None, worker=None):  # type: ignore[no-untyped-def]
        return None if name in self.hidden else super().raw(name, step, mode, worker)

    def saved_statistic(self, name: str, step: int, key: str | Statistic) -> Value | None:
        stat = Statistic.parse(key)
        if name not in self.hidden or stat.key not in self.keys.get(name, set()):
            return None
        x = self.real(name, step)
        if x is None:
            return None
        previous = None
        if stat.name == "delta_l2":  # the hook's value the last time it computed it: the step before
            earlier = [s for s in self.trial.tensor(name).steps() if s < step]
            previous = self.real(name, earlier[-1]) if earlier else None
        return compute(x, [stat], previous=previous)[stat.key]

    def layout(self, name: str, step: int) -> tuple[str, tuple[int, ...]] | None:
        x = self.real(name, step)  # a statistics-only record keeps the dtype and shape (FORMAT 2)
        return None if x is None else (x.dtype.kind, tuple(x.shape))

    def _saved_classes(self, labels: str, predictions: str | None, step: int) -> ClassStats | None:
        y = self.real(labels, step)
        p = self.real(predictions, step) if predictions is not None else None
        if y is None:
            return None
        on_labels, on_preds = class_statistics(y, p)
        if "class_counts" not in on_labels:
            return None
        counts = on_labels["class_counts"].astype(np.int64)
        out = ClassStats(labels=counts, classes=len(counts) - 1)
        if "class_correct" in on_labels:
            out.predicted = on_preds["class_counts"].astype(np.int64)
            out.correct = on_labels["class_correct"].astype(np.int64)
            out.confusion = on_labels.get("confusion")
        return out


def findings(path: str, rule: str, statistics_only: bool) -> tuple[list[Finding], RuleRunner]:
    runner = RuleRunner(path, [rule])
    if statistics_only:
        runner.view = StatisticsOnly(runner.trial)
    found = runner.run_available() + runner.finish()
    assert not runner.errors, runner.errors
    return found, runner


DEFECTS = [
    ("vanishing_gradient", "deep_sigmoid"),
    ("exploding_tensor", "lr_huge"),
    ("all_zero", "zero_init"),
    ("tensor_variance", "lr_huge"),
    ("unchanged_tensor", "frozen_optimizer"),
    ("weight_update_ratio", "lr_tiny"),
    ("dead_relu", "negative_bias"),
    ("tanh_saturation", "tanh_huge_init"),
    ("sigmoid_saturation", "sigmoid_inputs_x100"),
    ("saturated_activation", "tanh_huge_init"),
    ("not_normalized_data", "unnormalized"),
    ("class_imbalance", "imbalanced"),
    ("confusion", "swapped_classes"),
    ("loss_not_decreasing", "lr_tiny"),
]


@pytest.mark.parametrize(("rule", "scenario"), DEFECTS)
def test_fires_from_statistics_as_from_raw(rule, scenario, run: Callable[[str], str]):
    raw, _ = findings(run(scenario), rule, statistics_only=False)
    stats, _ = findings(run(scenario), rule, statistics_only=True)
    assert raw, f"{rule} does not fire on {scenario} from raw tensors"
    assert stats, f"{rule} fires on {scenario} from raw tensors, not from statistics: {raw[0]}"
    assert set(stats[0].tensors) & set(raw[0].tensors), (stats[0], raw[0])


STATISTICS_RULES = sorted({rule for rule, _ in DEFECTS})


@pytest.mark.parametrize("scenario", HEALTHY)
def test_quiet_from_statistics_on_healthy_runs(scenario, run: Callable[[str], str]):
    for rule in STATISTICS_RULES:
        if not mldbg.rules.BUILTIN[rule].default:
            continue
        found, _ = findings(run(scenario), rule, statistics_only=True)
        assert not found, "\n".join(map(str, found))


def test_poor_weight_initialization_reads_identical_weights_from_row_range(run: Callable[[str], str]):
    found, _ = findings(run("constant_init"), "poor_weight_initialization", statistics_only=True)
    assert found and "identical weights" in found[0].message


def test_saturation_with_other_bounds_says_only_raw_can_answer(run: Callable[[str], str]):
    runner = RuleRunner(run("tanh_huge_init"), [{"name": "tanh_saturation", "threshold_tanh_max": 5.0}])
    runner.view = StatisticsOnly(runner.trial)
    assert not runner.run_available() + runner.finish()
    assert "unit_outside(-9.4999,5.0)" in runner.unchecked["tanh_saturation"]
    assert "only raw tensors can answer" in runner.unchecked["tanh_saturation"]


@pytest.mark.parametrize(("pad_share", "fires"), [(0.7, True), (0.2, False)])
def test_nlp_sequence_ratio_from_equal_statistics(pad_share, fires, tmp_path):
    from tests.rules.test_nlp_sequence_ratio import record

    path = record(tmp_path / "tokens", pad_share)
    raw, _ = findings(path, "nlp_sequence_ratio", statistics_only=False)
    stats, _ = findings(path, "nlp_sequence_ratio", statistics_only=True)
    assert bool(raw) == bool(stats) == fires
    assert [f.message for f in stats] == [f.message for f in raw]
