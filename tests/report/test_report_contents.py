"""What `mldbg report` draws, on real tiny trainings: the loss axis (evaluation passes at the
train step they followed), label statistics over every recorded batch, the per-layer section,
and findings marked on the charts they concern."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import mldbg
from mldbg.config import Mode
from mldbg.report import build_report
from mldbg.report.layers import layer_health
from mldbg.report.timeline import Timeline
from mldbg.report.training import label_counts
from mldbg.rules import Rule
from tests.tiny import train

STEPS = 30  # evaluation every 10 train steps, two batches of 128 each


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same training (same seed, same batches) recorded twice: with the two lines
    (statistics) and with raw labels and parameters at every step."""
    root = tmp_path_factory.mktemp("runs")
    two = train(root / "two", steps=STEPS, default_hook=True)
    raw = train(
        root / "raw", steps=STEPS, save_interval=1, include_collections=["labels", "weights", "losses"]
    )
    return root, two, raw


def _section(page: str, id_: str) -> str:
    start = page.index(f'<section id="{id_}">')
    return page[start : page.index("</section>", start)]


def test_eval_losses_are_one_point_per_pass_at_the_train_step_it_followed(runs):
    root, two, _ = runs
    trial = mldbg.create_trial(root / "two")
    timeline = Timeline(trial)
    passes = timeline.passes_of(Mode.EVAL)
    assert len(passes) == STEPS // 10
    for p in passes:
        assert trial.mode(p.x) == Mode.TRAIN and p.x == p.steps[0] - 1  # the step just before
    page = build_report(trial, check=False)
    loss = _section(page, "loss")
    points = re.findall(r"<title>eval \(per pass\): (\S+) → (\S+)</title>", loss)
    xs = [int(x) for x, _ in points]
    assert xs == [p.x for p in passes]
    assert set(xs) <= set(trial.steps()) and all(trial.mode(x) == Mode.TRAIN for x in xs)
    # the value of a pass is the evaluation loss the training loop computed over that pass
    assert [float(y) for _, y in points] == pytest.approx(two.eval_losses, rel=1e-3)
    assert "global step" in loss and "of its mode" not in loss


def test_passes_are_found_when_steps_between_were_not_saved(tmp_path):
    train(tmp_path / "run", steps=STEPS, save_interval=5, include_collections=["losses"])
    trial = mldbg.create_trial(tmp_path / "run")
    passes = Timeline(trial).passes_of(Mode.EVAL)
    # EVAL steps 0 and 5 are saved: passes 1 (after train step 9) and 3 (after 29: global 33)
    assert [(p.x, p.steps) for p in passes] == [(9, [10]), (33, [35])]


def test_label_statistics_add_up_every_recorded_batch(runs):
    root, _, _ = runs
    two, raw = mldbg.create_trial(root / "two"), mldbg.create_trial(root / "raw")
    counted = label_counts(two, "CrossEntropyLoss_input_1")
    key = two.vector_statistics("CrossEntropyLoss_input_1")["class_counts"]
    for mode in (Mode.TRAIN, Mode.EVAL):
        total, batches = counted[mode]
        steps = two.records(key, mode=mode).step.tolist()
        assert batches == len(steps) > 1
        # the same batches' raw labels, from the twin run recorded raw
        labels = np.concatenate([raw.tensor("CrossEntropyLoss_input_1").value(s).ravel() for s in steps])
        assert total[:-1].tolist() == np.bincount(labels, minlength=3).tolist() and total[-1] == 0
    page = build_report(two, check=False)
    labels_html = _section(page, "labels")
    shown = re.findall(
        r"<tr><td>(\d)</td><td class=\"num\">(\d+)</td><td class=\"num\">(\d+)</td></tr>", labels_html
    )
    train_total, eval_total = counted[Mode.TRAIN][0], counted[Mode.EVAL][0]
    assert [(int(a), int(b)) for _, a, b in shown] == list(zip(train_total[:3], eval_total[:3], strict=True))
    assert f"{counted[Mode.TRAIN][1]} batches" in labels_html


def test_raw_labels_add_up_every_saved_batch(runs):
    root, _, _ = runs
    raw = mldbg.create_trial(root / "raw")
    labels = raw.tensor("CrossEntropyLoss_input_1")
    expected = np.bincount(
        np.concatenate([v.ravel() for v in labels.values(Mode.TRAIN).values()]), minlength=3
    )
    labels_html = _section(build_report(raw, check=False), "labels")
    shown = re.findall(r"<tr><td>(\d)</td><td class=\"num\">(\d+)</td>", labels_html)
    assert [int(n) for _, n in shown] == expected.tolist()
    assert expected.sum() == 32 * STEPS  # every batch, not the last one


def test_per_layer_section_lists_each_layer_with_finite_values(runs):
    root, _, _ = runs
    two, raw = mldbg.create_trial(root / "two"), mldbg.create_trial(root / "raw")
    health = {h.name: h for h in layer_health(two)}
    assert set(health) == {"fc1", "fc2", "out", "relu1", "relu2"}
    for name in ("fc1", "fc2", "out"):
        for metric in ("weight l2", "gradient l2", "update ratio"):
            xs, ys = health[name].curves[metric]
            assert len(xs) > 10 and all(math.isfinite(y) and y > 0 for y in ys), (name, metric)
            assert all(two.mode(x) == Mode.TRAIN for x in xs)
    for name in ("relu1", "relu2"):
        xs, ys = health[name].curves["dead units"]
        assert len(xs) > 10 and all(0.0 <= y <= 1.0 for y in ys)
    # the statistics agree with the raw weights of the twin run (read by the raw fallback)
    from_raw = {h.name: h for h in layer_health(raw)}
    for name in ("fc1", "fc2", "out"):
        xs, ys = health[name].curves["weight l2"]
        raw_l2 = dict(zip(*from_raw[name].curves["weight l2"], strict=True))
        assert ys == pytest.approx([raw_l2[x] for x in xs], rel=1e-5)
        xs, ys = health[name].curves["update ratio"]
        raw_ratio = dict(zip(*from_raw[name].curves["update ratio"], strict=True))
        consecutive = [
            (x, y) for x, y in zip(xs, ys, strict=True) if x - 1 in raw_l2 and two.mode(x - 1) == Mode.TRAIN
        ]
        assert consecutive and [y for _, y in consecutive] == pytest.approx(
            [raw_ratio[x] for x, _ in consecutive], rel=1e-3
        )
    table = _section(build_report(two, check=False), "layers").split("<table>")[1]
    for name in health:
        row = re.search(rf"<tr><td>{name}</td>(.*?)</tr>", table)
        assert row, name
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
        numbers = [c for c in cells if c and c[0].isdigit()]
        assert numbers and all(math.isfinite(float(c.split("%")[0])) for c in numbers), (name, cells)


def test_findings_are_marked_on_the_charts_they_concern(tmp_path):
    train(tmp_path / "dead", steps=STEPS, default_hook=True, init="negative_bias")
    page = build_report(mldbg.create_trial(tmp_path / "dead"), rules=["dead_relu"])
    layers = _section(page, "layers")
    dead_chart = layers[layers.index("Dead ReLU units per layer") :].split("</svg>")[0]
    assert re.search(r'<g class="mark"><title>dead_relu at step \d+: ', dead_chart)
    weight_chart = layers[layers.index("Weight norm per layer") :].split("</svg>")[0]
    assert 'class="mark"' not in weight_chart  # dead_relu names the ReLU tensors only


class EvalLossSeen(Rule):
    """Fires at the first EVAL step with a loss: a finding at an evaluation step."""

    needs = ("losses",)
    default = False

    def reset(self) -> None:
        super().reset()
        self._done = False

    def check(self, trial, step):
        if self._done or trial.mode(step) != Mode.EVAL:
            return None
        self._done = True
        return self.finding(trial, step, "an evaluation loss", tensors=["CrossEntropyLoss_output_0"])


def test_an_evaluation_finding_is_marked_at_the_train_step_its_pass_followed(runs):
    root, _, _ = runs
    trial = mldbg.create_trial(root / "two")
    page = build_report(trial, rules=[EvalLossSeen()])
    loss = _section(page, "loss")
    mark = re.search(
        r'<g class="mark"><title>eval_loss_seen at step (\d+): [^<]*</title><line x1="([\d.]+)"', loss
    )
    assert mark and int(mark.group(1)) == 10  # global step 10: the first batch of the first pass
    first = Timeline(trial).passes_of(Mode.EVAL)[0]
    assert first.x == 9 and int(mark.group(1)) in first.steps
    # drawn where train step 9 (and the pass's point) is, not at 10 nor at the EVAL step count
    at_9 = re.search(r'<circle cx="([\d.]+)"[^>]*><title>train: 9 → ', loss)
    assert at_9 and mark.group(2) == at_9.group(1)
