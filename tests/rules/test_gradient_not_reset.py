"""gradient_not_reset: no `optimizer.zero_grad()`, so `.grad` sums every gradient since the
start and its norm grows step after step; the healthy twin (zero_grad at every step) is quiet."""

from __future__ import annotations

import pytest

import mldbg
from tests.rules.conftest import assert_explains, fired
from tests.tiny import train


# A BatchNorm CNN without zero_grad() shows only a slow rise (2x over 16 steps), which a
# healthy language model's gradient norm shows too (tests/rules/test_healthy_pipelines.py):
# norms alone cannot tell them apart, and the rule does not report it.
@pytest.mark.parametrize(
    ("kwargs", "by"), [({}, 8), ({"optimizer": "adam"}, 8), ({"width": 64, "depth": 3}, 8)]
)
def test_fires_when_zero_grad_is_missing(tmp_path, kwargs, by):
    run = train(
        tmp_path / "run", default_hook=True, steps=30, eval_every=None, missing_zero_grad=True, **kwargs
    )
    found = mldbg.check(run.path, rules=["gradient_not_reset"])
    assert fired(found).get("gradient_not_reset", 10**9) < by, [str(f) for f in found]
    assert_explains(found[0])
    assert "optimizer.zero_grad()" in found[0].suggestion


@pytest.mark.parametrize(
    "kwargs", [{}, {"optimizer": "adam"}, {"model": "cnn"}, {"momentum": 0.9, "lr": 0.02}]
)
def test_quiet_on_the_healthy_twin(tmp_path, kwargs):
    run = train(tmp_path / "run", default_hook=True, steps=30, eval_every=None, **kwargs)
    assert not mldbg.check(run.path, rules=["gradient_not_reset"])


def test_the_default_set_says_zero_grad(tmp_path):
    """The hint reaches the user through `mldbg.check` with the default set."""
    run = train(tmp_path / "run", default_hook=True, steps=30, eval_every=None, missing_zero_grad=True)
    found = [f for f in mldbg.check(run.path) if f.rule == "gradient_not_reset"]
    assert found and "zero_grad" in found[0].message
