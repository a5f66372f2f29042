"""The merge of partial statistics (`torch_sharded_merge.merge`) against the NumPy reference of the
whole tensor, in one process: uneven pieces, an empty piece, NaN, inf, zeros, a replica that
must not count twice. The multi-process jobs are `test_torch_fsdp.py`'s."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mldbg.frameworks import torch_sharded as ts
from mldbg.frameworks import torch_sharded_merge as tsm
from mldbg.store import statistics as st

KEYS = [k for k in st.MERGES if k not in ("quantile", "sample_change", "requires_grad", "delta_l2")]


def pieces_of(whole: torch.Tensor, cuts: list[int]) -> list[ts._Piece]:
    bounds = [0, *cuts, whole.shape[0]]
    return [
        ts._Piece("w", whole, whole, whole[a:b], None, True, False, None, True, False)
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]


def merged_values(whole: torch.Tensor, pieces: list[ts._Piece]) -> dict[str, float]:
    sharded = ts.ShardedStatistics(None, lambda mode, step: True, False)
    rows = np.stack([sharded._partials(p, True).numpy() for p in pieces])
    summary = tsm.Summary(tuple(whole.shape), tsm.merge(rows), 0.0, False, True)
    out = {}
    for key in KEYS:
        value = tsm.statistic_value(st.Statistic.parse(key), summary, True)
        assert value is not None, key
        out[key] = value
    return out


CASES = {
    "uneven": (torch.randn(7, 5, generator=torch.Generator().manual_seed(0)), [3]),
    "empty piece": (torch.randn(3, 4, generator=torch.Generator().manual_seed(1)), [3]),
    "four pieces, zeros": (torch.tensor([[0.0, 1.0], [2.0, 0.0], [-3.0, 4.0], [0.5, -0.5]]), [1, 2, 3]),
    "nan": (torch.tensor([[1.0, float("nan")], [2.0, 3.0]]), [1]),
    "inf": (torch.tensor([[1.0, float("inf")], [-2.0, 3.0]]), [1]),
    "large mean, tiny spread": (1e4 + 1e-3 * torch.randn(64, 3, dtype=torch.float64,
                                                         generator=torch.Generator().manual_seed(2)), [20, 41]),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_merged_statistics_equal_those_of_the_whole_tensor(case: str) -> None:
    whole, cuts = CASES[case]
    got = merged_values(whole, pieces_of(whole, cuts))
    want = st.compute(whole.numpy(), KEYS)
    want["fingerprint"] = float(st.fingerprint(whole.numpy()))
    for key in KEYS:
        w, g = float(want[key]), got[key]
        if math.isnan(w):
            assert math.isnan(g), (key, g)
        else:
            assert g == w or abs(g - w) <= 1e-9 * abs(w), (key, g, w)


def test_a_replica_counts_once() -> None:
    whole = torch.arange(6.0).reshape(3, 2)
    own, copy = pieces_of(whole, [])[0], pieces_of(whole, [])[0]
    copy.owner = False  # the same piece on a second rank of a replicated mesh dimension
    sharded = ts.ShardedStatistics(None, lambda mode, step: True, False)
    rows = np.stack([sharded._partials(p, False).numpy() for p in (own, copy)])
    merged = tsm.merge(rows)
    assert merged["count"] == 6 and merged["sum"] == 15 and merged["max"] == 5


def test_delta_l2_adds_the_pieces_changes() -> None:
    before, after = torch.zeros(4, 3), torch.ones(4, 3)
    sharded = ts.ShardedStatistics(None, lambda mode, step: True, False)
    rows = []
    for i, (a, b) in enumerate(((0, 1), (1, 4))):
        piece = ts._Piece(f"w{i}", after, after, after[a:b], None, True, False, None, True, False)
        sharded._previous[f"w{i}"] = before[a:b]
        rows.append(sharded._partials(piece, True).numpy())
    summary = tsm.Summary((4, 3), tsm.merge(np.stack(rows)), 0.0, False, True)
    assert tsm.statistic_value(st.Statistic("delta_l2"), summary, True) == pytest.approx(math.sqrt(12))


def test_the_per_rank_view_is_indexed_by_global_rank() -> None:
    """`rank_nonfinite`: per rank of the job, the NaN and inf of its own piece; a mesh of ranks
    2 and 3 of 4 fills their places; nothing (None) when no piece holds one."""
    assert tsm.by_rank(np.array([0.0, 0.0]), [0, 1], 2) is None
    assert tsm.by_rank(np.array([0.0, 2.0]), [0, 1], 2).tolist() == [0, 2]
    assert tsm.by_rank(np.array([1.0, 0.0]), [2, 3], 4).tolist() == [0, 0, 1, 0]
    whole = torch.tensor([[1.0, 2.0], [float("nan"), float("inf")]])
    own, copy = pieces_of(whole, [1])
    copy.owner = False  # a replica's own NaN and inf are counted for its rank, not in the merge
    sharded = ts.ShardedStatistics(None, lambda mode, step: True, False)
    rows = np.stack([sharded._partials(p, False).numpy() for p in (own, copy)])
    assert tsm.merge(rows)["nan_count"] == 0
    assert rows[:, tsm.INDEX["local_nonfinite"]].tolist() == [0, 2]
