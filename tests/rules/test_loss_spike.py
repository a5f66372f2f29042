"""loss_spike: one corrupted batch (inputs x30) makes the loss jump; the healthy twin is quiet."""

from __future__ import annotations

import mldbg
from tests.rules.conftest import assert_explains, fired
from tests.tiny import train


def test_fires_at_the_corrupted_batch(tmp_path):
    run = train(tmp_path / "run", default_hook=True, optimizer="adam", steps=50, eval_every=None, spike_at=30)
    found = mldbg.check(run.path, rules=["loss_spike"])
    assert fired(found) == {"loss_spike": 30}, [str(f) for f in found]
    assert_explains(found[0])
    assert "mode step 30" in found[0].message  # the batch to replay


def test_fires_on_sgd_too(tmp_path):
    run = train(tmp_path / "run", default_hook=True, steps=50, eval_every=None, spike_at=30)
    assert fired(mldbg.check(run.path, rules=["loss_spike"])) == {"loss_spike": 30}


def test_quiet_on_the_healthy_twin(tmp_path):
    run = train(tmp_path / "run", default_hook=True, optimizer="adam", steps=50, eval_every=None)
    assert not mldbg.check(run.path, rules=["loss_spike"])


def test_threshold_is_a_parameter(tmp_path):
    run = train(tmp_path / "run", default_hook=True, optimizer="adam", steps=50, eval_every=None, spike_at=30)
    assert not mldbg.check(run.path, rules=["loss_spike:threshold=1000"])
