"""gradient_not_reset: no `optimizer.zero_grad()`, so `.grad` sums every gradient since the
start and its norm grows step after step; the healthy twin (zero_grad at every step) is quiet."""

from __future__ import annotations

import pytest

import mldbg
from tests.rules.conftest import assert_explains, fired
from tests.tiny import train


# The MLPs show the fast, near-linear growth of the norm; the CNNs (BatchNorm or not) only a
# slow rise, which a healthy language model shows too: there `sample_change` tells (the
# summed gradient barely changes from step to step, a mini-batch gradient does).
@pytest.mark.parametrize(
    ("kwargs", "by"),
    [
        ({}, 8), ({"optimizer": "adam"}, 8), ({"width": 64, "depth": 3}, 8),
        ({"model": "cnn"}, 14), ({"model": "cnn", "optimizer": "adam"}, 14),
        ({"model": "cnn", "batchnorm": False}, 14),
    ],
)  # fmt: skip
def test_fires_when_zero_grad_is_missing(tmp_path, kwargs, by):
    run = train(
        tmp_path / "run", default_hook=True, steps=30, eval_every=None, missing_zero_grad=True, **kwargs
    )
    found = mldbg.check(run.path, rules=["gradient_not_reset"])
    assert fired(found).get("gradient_not_reset", 10**9) < by, [str(f) for f in found]
    assert_explains(found[0])
    assert "optimizer.zero_grad()" in found[0].suggestion


@pytest.mark.parametrize(
    "kwargs",
    [
        {}, {"optimizer": "adam"}, {"model": "cnn"}, {"momentum": 0.9, "lr": 0.02},
        {"model": "cnn", "optimizer": "adam", "batchnorm": False},
        # full batch: the gradient changes little from step to step, yet it is reset
        {"n_train": 32, "batch_size": 32}, {"n_train": 32, "batch_size": 32, "optimizer": "adam"},
        {"model": "cnn", "n_train": 64, "batch_size": 64},
    ],
)  # fmt: skip
def test_quiet_on_the_healthy_twin(tmp_path, kwargs):
    run = train(tmp_path / "run", default_hook=True, steps=60, eval_every=None, **kwargs)
    assert not mldbg.check(run.path, rules=["gradient_not_reset"])


def test_the_default_set_says_zero_grad(tmp_path):
    """The hint reaches the user through `mldbg.check` with the default set."""
    run = train(tmp_path / "run", default_hook=True, steps=30, eval_every=None, missing_zero_grad=True)
    found = [f for f in mldbg.check(run.path) if f.rule == "gradient_not_reset"]
    assert found and "zero_grad" in found[0].message
