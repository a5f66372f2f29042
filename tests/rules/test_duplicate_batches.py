"""duplicate_batches: a loader that serves every batch twice (an IterableDataset read by two
workers without sharding), and the same batch every step (while the evaluation reads more
samples, or with the dataset size given); the twins (a shuffled epoch-based loader,
full-batch training) are quiet."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains
from tests.rules.silent import HEALTHY_SILENT


def test_fires_when_batches_come_back_within_the_epoch(silent_run):
    found = mldbg.check(silent_run("duplicated_loader"), rules=["duplicate_batches"])
    assert len(found) == 1
    f = found[0]
    assert f.step == 2, f  # step 1 repeats step 0's batch, step 2 brings new samples
    assert "within an epoch" in f.message
    assert_explains(f)


def test_the_same_batch_every_step(silent_run):
    """Every training step reads the first batch (32 samples) while the evaluation reads 128:
    caught at the first evaluation; with the dataset size, at once."""
    path = silent_run("same_batch")
    found = mldbg.check(path, rules=["duplicate_batches"])
    assert len(found) == 1 and found[0].step == 11, (
        found
    )  # the first evaluation: 2 batches of 64 after step 9
    assert "same 32 samples" in found[0].message and "next(iter(loader))" in found[0].message
    assert_explains(found[0])
    found = mldbg.check(path, rules=["duplicate_batches:dataset_size=256"])
    assert found[0].step == 1, found
    assert "32 of the 32 samples" in found[0].message and "256" in found[0].message


@pytest.mark.parametrize("name", HEALTHY_SILENT)
def test_quiet_on_the_fixed_twins(name, silent_run):
    """Eight batches per epoch over 30 steps: later epochs repeat every sample, as they should."""
    assert BUILTIN["duplicate_batches"].default
    found = [f for f in mldbg.check(silent_run(name)) if f.rule == "duplicate_batches"]
    assert not found, "\n".join(map(str, found))


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_the_catalogue_runs(name, run):
    """Raw inputs every step."""
    assert not mldbg.check(run(name), rules=["duplicate_batches"])


def test_a_training_set_smaller_than_the_evaluation_reads_as_a_fixed_batch(run):
    """`tiny_train_set` trains on all its 16 samples at every step and evaluates on 256: from
    the inputs alone that is one batch drawn once (the finding says so, and what else it can be)."""
    found = mldbg.check(run("tiny_train_set"), rules=["duplicate_batches"])
    assert len(found) == 1 and "same 16 samples" in found[0].message, found
    assert "Full-batch training on purpose" in found[0].suggestion
