"""Sharded tensors saved raw (issue 31, item 4): 2-process gloo jobs on the CPU (`fsdp_job.py
OUT LAYOUT raw REFS`) save the weights, biases and gradients every other step with a
`save_config`; every rank saves its own piece of each DTensor with its layout, and
`trial.tensor(name).value(step)` puts the global tensor back together, equal to the tensor the
job gathered itself with `full_tensor()`. The arithmetic of the layouts (`mldbg.store.shards`)
is tested in one process below."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_torch_fsdp import check, run

import mldbg
from mldbg.rules.view import TrialView
from mldbg.store import shards
from mldbg.store.reductions import reduce

PARAMS = ("0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias")


def compare_global_values(run_dir: Path, refs_path: Path, names: tuple[str, ...]) -> int:
    """Every saved weight and gradient reads, without a worker, as the gathered global tensor
    (bit for bit: the pieces are copies of it); so do its reductions and the rules' view."""
    trial = mldbg.create_trial(run_dir)
    refs = np.load(refs_path)
    view = TrialView(trial)
    compared = 0
    for key in refs.files:
        step, name = key.split("/", 1)
        if int(step) % 2:  # saved every other step
            continue
        want = refs[key]
        got = trial.tensor(name).value(int(step))
        assert got.shape == want.shape and np.array_equal(got, want), (key, got, want)
        assert np.array_equal(view.value(name, int(step)), want), key
        for reduction in ("l2", "mean", "max"):
            assert trial.tensor(name).reduction_value(int(step), reduction) == pytest.approx(
                float(reduce(want, reduction)), rel=1e-6
            ), (key, reduction)
        compared += 1
    assert {k.split("/", 1)[1] for k in refs.files} == {*names, *(f"gradient/{n}" for n in names)}
    assert trial.steps() == [0, 2, 4] and compared == 3 * 2 * len(names)
    return compared


def test_fsdp2_weights_and_gradients_saved_raw_read_as_the_global_tensors(tmp_path: Path) -> None:
    """FSDP2 with the default include_workers="one": worker 1 saves its pieces of the DTensors
    (and nothing else) beside worker 0, so nothing is lost. Uneven shards: the last Linear has
    3 rows on 2 ranks (2 and 1). Each worker's own piece stays readable."""
    refs = tmp_path / "fsdp.npz"
    job = run(tmp_path / "fsdp", "fsdp", "raw", refs)
    compare_global_values(job, refs, PARAMS)
    trial = mldbg.create_trial(job)
    assert trial.tensor("4.weight").workers(2) == ["worker_0", "worker_1"]
    assert trial.tensor("4.weight").value(2, worker="worker_0").shape == (2, 12)
    assert trial.tensor("4.weight").value(2, worker="worker_1").shape == (1, 12)
    assert trial.tensor("gradient/0.weight").value(4, worker="worker_1").shape == (8, 6)
    assert trial.tensor("CrossEntropyLoss_output_0").workers(2) == ["worker_0"]  # not a DTensor
    assert "stats/0.weight/shard_layout" not in trial.tensor_names()  # the layouts are not tensors
    assert set(trial.collections()["weights"]) == {"0.weight", "2.weight", "4.weight"}
    code, findings = check(job)
    assert code == 0, findings


def test_tensor_parallel_weights_and_gradients_saved_raw_read_as_the_global_tensors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ColwiseParallel (Shard(0)), RowwiseParallel (Shard(1)) and a replicated layer
    (Replicate: its replicas read once), with include_workers="all"."""
    monkeypatch.setenv("INCLUDE_WORKERS", "all")
    refs = tmp_path / "tp.npz"
    job = run(tmp_path / "tp", "tp", "raw", refs)
    names = ("0.weight", "0.bias", "2.weight", "2.bias", "4.inner.weight", "4.inner.bias")
    compare_global_values(job, refs, names)
    trial = mldbg.create_trial(job)
    assert trial.tensor("2.weight").value(0, worker="worker_1").shape == (12, 8)  # columns 8..15
    replica = trial.tensor("4.inner.weight")
    assert np.array_equal(replica.value(0, worker="worker_1"), replica.value(0))
    code, findings = check(job)
    assert code == 0, findings


def test_fsdp2_with_tensor_parallel_pieces_interleaved_on_a_2d_mesh(tmp_path: Path) -> None:
    """4 ranks, a (dp 2, tp 2) mesh: FSDP2 shards TP's pieces again (`_StridedShard`), so the
    pieces of `0.weight` lie out of rank order (rank 1 holds rows 8-11, rank 2 rows 4-7);
    reassembled exactly."""
    refs = tmp_path / "2d.npz"
    job = run(tmp_path / "2d", "fsdp_tp", "raw", refs)
    compare_global_values(job, refs, PARAMS)
    trial = mldbg.create_trial(job)
    assert trial.tensor("0.weight").workers(0) == [f"worker_{r}" for r in range(4)]
    whole = trial.tensor("0.weight").value(0)
    assert np.array_equal(trial.tensor("0.weight").value(0, worker="worker_1"), whole[8:12])
    assert np.array_equal(trial.tensor("0.weight").value(0, worker="worker_2"), whole[4:8])


# the layouts, in one process -------------------------------------------------------------------
def pieces_along(whole: np.ndarray, dim: int, cuts: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    bounds = [0, *cuts, whole.shape[dim]]
    out = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        index = [np.arange(n) for n in whole.shape]
        index[dim] = np.arange(a, b)
        out.append((shards.encode(whole.shape, index), np.take(whole, index[dim], axis=dim)))
    return out


def test_uneven_pieces_and_an_empty_one_reassemble() -> None:
    whole = np.arange(7 * 3, dtype=np.float32).reshape(7, 3)
    pieces = pieces_along(whole, 0, [4, 7])  # 4 rows, 3 rows, and an empty piece
    got = shards.assemble("w", [(f"worker_{i}", lay, p) for i, (lay, p) in enumerate(pieces)])
    assert np.array_equal(got, whole) and got.dtype == whole.dtype
    columns = pieces_along(whole, 1, [1])
    assert np.array_equal(shards.assemble("w", [(str(i), *lp) for i, lp in enumerate(columns)]), whole)


def test_replicas_are_read_once_and_a_missing_piece_is_said() -> None:
    whole = np.arange(12.0).reshape(4, 3)
    (a, pa), (b, pb) = pieces_along(whole, 0, [2])
    got = shards.assemble("w", [("worker_0", a, pa), ("worker_1", a, pa + 100), ("worker_2", b, pb)])
    assert np.array_equal(got, whole)  # worker_1's replica (drifted) is not added: the first one counts
    with pytest.raises(shards.Unassembled, match="cover 6 of its 12"):
        shards.assemble("w", [("worker_0", a, pa)])


def test_interleaved_indices_and_partial_values() -> None:
    """A `_StridedShard`'s piece (rows 0, 1, 4, 5 of 8) and `Partial` pieces (sum, avg)."""
    whole = np.arange(8.0 * 2).reshape(8, 2)
    rows = [np.array([0, 1, 4, 5]), np.array([2, 3, 6, 7])]
    layouts = [shards.encode(whole.shape, [r, np.arange(2)]) for r in rows]
    assert shards.runs(rows[0]) == [(0, 2), (4, 2)]
    got = shards.assemble(
        "w", [(str(i), lay, whole[r]) for i, (lay, r) in enumerate(zip(layouts, rows, strict=True))]
    )
    assert np.array_equal(got, whole)
    full = [np.arange(2), np.arange(2)]
    summands = [np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[10.0, 20.0], [30.0, 40.0]])]
    for combine, want in (("sum", summands[0] + summands[1]), ("avg", (summands[0] + summands[1]) / 2)):
        parts = [(str(i), shards.encode((2, 2), full, combine, 2, i), s) for i, s in enumerate(summands)]
        assert np.array_equal(shards.assemble("g", parts), want), combine
    with pytest.raises(shards.Unassembled, match="1 of the 2 partial values"):
        shards.assemble("g", [("0", shards.encode((2, 2), full, "sum", 2, 0), summands[0])])
    unknown = shards.encode((2, 2), None)
    with pytest.raises(shards.Unassembled, match="not known"):
        shards.assemble("g", [("worker_0", unknown, summands[0])])
