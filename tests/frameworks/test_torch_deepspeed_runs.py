"""DeepSpeed ZeRO's partitions as `torch_deepspeed` reads them, in one process and without
DeepSpeed: runs of a flattened tensor (crossing rows, uneven, one empty) merge into the whole
tensor's statistics, and their subsample positions (`flat_positions`) give the whole tensor's
subsample. The 2-process DeepSpeed jobs are `test_deepspeed_zero.py`'s (skipped without it)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mldbg.frameworks import torch_sharded as ts
from mldbg.frameworks import torch_sharded_merge as tsm
from mldbg.frameworks.torch_deepspeed import DeepSpeedZero, _run_piece
from mldbg.store import statistics as st

KEYS = [
    k for k in st.MERGES if k not in ("quantile", "sample_change", "requires_grad", "delta_l2", "row_range")
]


def runs_of(whole: torch.Tensor, cuts: list[int]) -> list[ts._Piece]:
    flat, bounds = whole.reshape(-1), [0, *cuts, whole.numel()]
    return [
        _run_piece("gradient/w", whole, flat[a:b], tuple(whole.shape), a, True)
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]


@pytest.mark.parametrize("shape, cuts", [((12, 16), [50, 50, 137]), ((70, 90), [1, 3001, 4093, 6299])])
def test_flat_runs_merge_into_the_whole_tensors_statistics(shape: tuple[int, int], cuts: list[int]) -> None:
    g = torch.Generator().manual_seed(0)
    whole = torch.randn(shape, generator=g)
    whole[3, 5] = 0.0
    pieces = runs_of(whole, cuts)
    sharded = ts.ShardedStatistics(None, lambda mode, step: True, False)
    rows = np.stack([sharded._partials(p, True).numpy() for p in pieces])
    summary = tsm.Summary(shape, tsm.merge(rows), 0.0, False, False)
    # the subsample as `ShardedStatistics._samples` fills it: each position from the run holding it
    n = whole.numel()
    sample = np.zeros(min(n, st.QUANTILE_SAMPLE))
    for p in pieces:
        assert p.flat is not None
        where, local = tsm.flat_positions(n, p.flat)
        sample[where] = p.local.reshape(-1).numpy()[local].astype(np.float64)
    want_sample = whole.reshape(-1).numpy()[st.subsample_index(n)].astype(np.float64)
    assert np.array_equal(sample, want_sample)
    summary.sample = sample
    want = st.compute(whole.numpy(), [*KEYS, "quantile(5.0)", "quantile(95.0)"])
    for key, value in want.items():
        got = tsm.statistic_value(st.Statistic.parse(key), summary, True)
        assert got == pytest.approx(value, rel=1e-9, abs=1e-12) or math.isnan(value) and math.isnan(got), key
    # a weight split inside its rows leaves `row_range` out
    assert tsm.statistic_value(st.Statistic.parse("row_range"), summary, True) is None


def test_nothing_is_attached_without_deepspeed() -> None:
    assert DeepSpeedZero.attach(None, object(), None, None) is None
