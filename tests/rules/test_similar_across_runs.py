"""similar_across_runs: same seed matches, another seed differs."""

from __future__ import annotations

import mldbg
from tests.tiny import train


def test_same_seed_quiet_other_seed_fires(tmp_path):
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        train(tmp_path / name, steps=5, seed=seed, eval_every=None)
    same = mldbg.check(str(tmp_path / "a"), rules=[f"similar_across_runs:other_trials={tmp_path / 'b'}"])
    assert same == []
    other = mldbg.check(str(tmp_path / "a"), rules=[f"similar_across_runs:other_trials={tmp_path / 'c'}"])
    assert len(other) == 1 and other[0].step == 0 and "fc1.weight" in other[0].tensors
