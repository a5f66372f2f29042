"""Gaps drawn as gaps in the report (issue #29 item 4): with the two lines, statistics are
saved every step for the first steps and then rarely; the per-layer charts break their lines
where steps were not saved, span the whole run, and say each series' cadence."""

from __future__ import annotations

import re

import numpy as np
import pytest

import mldbg
from mldbg.config import Mode
from mldbg.report import build_report, svg
from mldbg.report.cadence import cadence, describe, of_series, with_gaps
from tests.tiny import train


def _section(page: str, id_: str) -> str:
    start = page.index(f'<section id="{id_}">')
    return page[start : page.index("</section>", start)]


def _chart(section: str, title: str) -> str:
    start = section.index(title)
    return section[section.rfind("<svg", 0, start) : section.index("</svg>", start)]


def test_cadence_in_words_and_its_breaks():
    warm = cadence([*range(20), 120, 220, 320], list(range(400)))
    assert warm.text == "every step to 19, then every 100th"
    assert warm.breaks == [120] and warm.sparse
    lone = cadence([*range(21), 120], list(range(150)))
    assert lone.text == "every step to 20, then at step 120, none after (the run goes on to 149)"
    assert cadence(list(range(48)), list(range(48))).text == "every step"
    assert cadence(list(range(0, 100, 10)), list(range(100))).breaks == []
    assert describe([]) == "not saved"
    # evaluation steps between training steps are no gap: spacing counts the mode's own steps
    train_steps = [*range(10), *range(15, 25)]
    assert cadence(train_steps, train_steps).breaks == []
    xs, ys = with_gaps([0, 1, 5], [1.0, 2.0, 3.0], [0, 1, 5], [5])
    assert xs == [0, 1, 5, 5] and ys[:2] == [1.0, 2.0] and np.isnan(ys[2]) and ys[3] == 3.0


def test_a_line_chart_breaks_at_a_gap_and_shows_a_lone_point():
    chart = svg.line_chart(
        [svg.Series("w", [0, 1, 2, 2, 50], [1.0, 2.0, 3.0, float("nan"), 4.0])], points=False
    )
    assert chart.count("<polyline") == 1  # 0-2 joined; nothing drawn from 2 to 50
    assert chart.count("<circle") == 1  # the lone point at 50, drawn as a dot


@pytest.fixture(scope="module")
def sparse(tmp_path_factory):
    """A 150-step training with the two lines: statistics every step at first, then rare."""
    path = tmp_path_factory.mktemp("gaps") / "two"
    train(path, steps=150, eval_every=None, default_hook=True)
    return path


def test_per_layer_charts_break_at_gaps_span_the_run_and_say_the_cadence(sparse):
    trial = mldbg.create_trial(sparse)
    run_steps = [s for s in trial.steps() if trial.mode(s) == Mode.TRAIN]
    saved = trial.tensor(
        next(n for n in trial.tensor_names(collection="weights") if n.endswith("weight"))
    ).steps()
    pace = of_series(trial, saved)
    assert pace.breaks, f"the two lines saved statistics without a gap: {saved}"  # what this test is about
    section = _section(build_report(trial, check=False), "layers")
    # the cadence in words, against the run's steps
    assert f"Saved {pace.text}" in section
    assert f"of {len(run_steps)} train steps ({run_steps[0]}-{run_steps[-1]})" in section
    chart = _chart(section, "Weight norm per layer")
    layers = len(re.findall(r"<polyline", chart))
    # each layer's line is cut at the gap: never one polyline from the first saved step past the gap
    xs = [
        [float(p.split(",")[0]) for p in m.split()] for m in re.findall(r'<polyline points="([^"]+)"', chart)
    ]
    assert layers and all(len(line) <= sum(1 for s in saved if s < pace.breaks[0]) for line in xs)
    # the step after the gap is drawn as a dot (a lone point, or a sparse stretch's points)
    assert f": {pace.breaks[0]} → " in chart


def test_evaluation_passes_between_training_steps_are_no_gap(tmp_path):
    """Statistics every training step, an evaluation pass every 5: one unbroken line."""
    path = tmp_path / "with_eval"
    train(path, steps=20, eval_every=5, default_hook=True)
    trial = mldbg.create_trial(path)
    name = next(n for n in trial.tensor_names(collection="weights") if n.endswith("weight"))
    saved = [s for s in trial.tensor(name).steps() if trial.mode(s) == Mode.TRAIN]
    assert len(saved) == 20 and saved[-1] - saved[0] > 19  # evaluation steps lie between them
    pace = of_series(trial, saved)
    assert pace.breaks == [] and pace.text == "every step" and not pace.sparse
    section = _section(build_report(trial, check=False), "layers")
    assert "Saved every step, of 20 train steps" in section


def test_the_report_says_why_rules_were_not_checked_for_this_run(sparse):
    """The report's list of rules not checked: XGBoost's left out of a PyTorch run, the reasons
    true for a model with nn.ReLU modules recorded with the two lines (no include_collections advice)."""
    section = _section(build_report(mldbg.create_trial(sparse)), "findings")
    assert "tree_depth" not in section and "feature_importance" not in section
    assert "include_collections" not in section
    assert "no mixture-of-experts router" in section
