"""StopTraining acts on diagnoses (issue 26, item 3): an error diagnosis of high confidence
stops the training; a warning, or a diagnosis resting on one weak finding, does not, unless
asked (`on="finding"`, `warnings=True`, `min_confidence`)."""

import pytest
from action_helpers import finding

from mldbg.actions import Context, StopTraining
from mldbg.errors import InvalidConfig
from mldbg.rules.base import Finding
from mldbg.rules.diagnosis import STOP_CONFIDENCE
from mldbg.store import layout, open_store


def warning(step=4):
    return Finding(
        "step_outlier", step, "TRAIN", "5 steps took 3x the median", [], "look", severity="warning"
    )


def context(tmp_path):
    return Context(run=str(tmp_path), store=open_store(tmp_path))


def test_a_warning_never_stops_by_default(tmp_path):
    ctx = context(tmp_path)
    stop = StopTraining()
    assert stop([warning(), warning(9)], ctx) == 0
    assert not ctx.store.exists(layout.STOP_REQUEST) and ctx.stop_requested is None
    # asked for: warnings that confident stop too, and on="finding" stops on anything
    assert StopTraining(warnings=True, min_confidence=0.5)([warning()], context(tmp_path / "a")) == 1
    ctx = context(tmp_path / "b")
    assert StopTraining(on="finding")([warning()], ctx) == 1 and ctx.store.exists(layout.STOP_REQUEST)


def test_a_low_confidence_diagnosis_does_not_stop_and_a_confident_one_does(tmp_path):
    ctx = context(tmp_path)
    stop = StopTraining()
    # one loss spike: a bad batch, not a reason to kill the job
    assert stop([finding("loss_spike", 30, "the loss jumped 4x")], ctx) == 0
    assert stop([finding("confusion", 40, "class 3 taken for 5")], ctx) == 0
    assert not ctx.store.exists(layout.STOP_REQUEST)
    # then the gradients turn NaN: the learning rate is too high, for sure
    assert stop([finding("exploding_tensor", 41)], ctx) == 1
    assert stop.diagnosis.cause == "learning_rate_too_high" and stop.diagnosis.confidence >= STOP_CONFIDENCE
    assert "diagnosis: learning_rate_too_high" in ctx.stop_requested
    assert ctx.store.exists(layout.STOP_REQUEST)
    # one stop per run
    assert stop([finding("exploding_tensor", 50)], ctx) == 0


def test_the_bar_is_an_option(tmp_path):
    ctx = context(tmp_path)
    assert StopTraining(min_confidence=0.5)([finding("loss_spike", 30, "jump")], ctx) == 1
    assert StopTraining(min_confidence=1.0)([finding()], context(tmp_path / "b")) == 0
    with pytest.raises(InvalidConfig):
        StopTraining(min_confidence=2)
    with pytest.raises(InvalidConfig):
        StopTraining(on="everything")
    assert StopTraining().describe() == "StopTraining"  # the default keeps the name a saved place knows
    assert StopTraining(on="finding").describe() == "StopTraining on finding"


def test_a_finding_that_did_not_stop_does_not_take_the_stop_s_place(tmp_path):
    """The watcher journals each finding with the action's key before acting; a restarted
    watcher takes those keys as done. A finding that did not stop the run must not take the
    key of the stop, or a restart could never stop it."""
    stop = StopTraining()
    spike = finding("loss_spike", 30, "jump")
    assert stop.key(spike) != "stop"
    stop([spike], context(tmp_path))
    nan = finding("exploding_tensor", 31)
    assert stop([nan], context(tmp_path)) == 1 and stop.key(nan) == "stop"
