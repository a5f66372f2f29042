"""`trial.to_pandas`: a tidy frame that equals what the trial's own queries return.

The runs are written by the real Recorder, two workers, TRAIN and EVAL steps interleaved:
a scalar loss, a raw tensor and a tensor saved as reductions only.
"""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import mldbg
from mldbg.config import Mode
from mldbg.errors import InvalidConfig, TensorUnavailableForStep
from mldbg.record.recorder import Recorder

REDUCED = mldbg.ReductionConfig(reductions=["mean", "max"], abs_reductions=["mean"], norms=["l2"])


def write(out, steps=8, rank=0, world_size=2):
    """A TRAIN step, then an EVAL step after every third: `loss` (a scalar), `w` raw, `r` reductions only."""
    rec = Recorder(
        out,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["losses", "raw", "reduced"],
        collection_configs=[
            mldbg.CollectionConfig("losses", include_regex=["^loss$"]),
            mldbg.CollectionConfig("raw", include_regex=["^w$"]),
            mldbg.CollectionConfig("reduced", include_regex=["^r$"], reduction_config=REDUCED),
        ],
        include_workers="all",
        rank=rank,
        world_size=world_size,
    )
    rng = np.random.default_rng(rank)
    for s in range(steps):
        rec.start_step(Mode.EVAL if (s + 1) % 4 == 0 else Mode.TRAIN)
        rec.save("loss", np.float32(1.0 / (s + 1) + rank), rec.plan("loss", ()))
        for name in ("w", "r"):
            rec.save(name, rng.normal(size=(2, 3)).astype(np.float32) * (s + 1), rec.plan(name, ()))
        rec.end_step()
    rec.close()


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("frame"))
    write(out, rank=1)  # worker_1 written first: rows still come in worker-name order
    write(out, rank=0)
    return mldbg.create_trial(out)


def test_scalars_one_row_per_step_and_worker_equal_tensor_value(trial):
    df = trial.to_pandas(regex="^loss$")
    assert list(df.columns) == ["step", "mode", "mode_step", "worker", "tensor", "value"]
    assert len(df) == 8 * 2
    assert set(df.worker) == {"worker_0", "worker_1"}
    assert list(zip(df.step, df.worker, strict=True)) == sorted(zip(df.step, df.worker, strict=True))
    assert sorted(set(df["mode"])) == ["EVAL", "TRAIN"]
    t = trial.tensor("loss")
    for row in df.itertuples():
        assert row.value == pytest.approx(float(t.value(row.step, worker=row.worker)))
        assert row.mode == trial.mode(row.step).name
        assert row.mode_step == trial.mode_step(row.step)
    # mode filter: that mode's steps only, with its own step count
    ev = trial.to_pandas(regex="^loss$", mode="eval")
    assert set(ev["mode"]) == {"EVAL"} and sorted(set(ev.mode_step)) == [0, 1]
    assert sorted(set(ev.step)) == [3, 7]


def test_reductions_saved_and_computed_equal_reduction_value(trial):
    df = trial.to_pandas(regex="^(w|r)$", reductions=["mean", "abs_mean", "l2", "max"])
    assert list(df.columns) == ["step", "mode", "mode_step", "worker", "tensor", "reduction", "value"]
    assert len(df) == 2 * 8 * 2 * 4  # tensors x steps x workers x reductions
    for row in df.itertuples():
        name, use_abs = (
            (row.reduction[4:], True) if row.reduction.startswith("abs_") else (row.reduction, False)
        )
        expect = trial.tensor(row.tensor).reduction_value(row.step, name, abs=use_abs, worker=row.worker)
        assert row.value == pytest.approx(expect, rel=1e-6)
    # `w` saved raw only: its reductions are computed; check one against NumPy directly
    first = df[(df.tensor == "w") & (df.reduction == "l2") & (df.worker == "worker_1")].iloc[0]
    raw = trial.tensor("w").value(int(first.step), worker="worker_1")
    assert first.value == pytest.approx(float(np.linalg.norm(raw)), rel=1e-6)


def test_collection_selects_and_non_scalar_is_refused_with_what_to_do(trial):
    df = trial.to_pandas(collection="losses")
    assert set(df.tensor) == {"loss"}
    with pytest.raises(InvalidConfig, match=r"'w' holds 6 numbers.*reductions="):
        trial.to_pandas(regex="^w$")
    with pytest.raises(InvalidConfig, match="'r' holds 6 numbers"):
        trial.to_pandas(regex="^r$")
    with pytest.raises(TensorUnavailableForStep, match="'prod' of 'r' was not saved"):
        trial.to_pandas(regex="^r$", reductions=["prod"])
    with pytest.raises(InvalidConfig, match="unknown reduction 'median'"):
        trial.to_pandas(reductions=["median"])


def test_empty_selection_is_an_empty_frame_with_the_columns(trial):
    df = trial.to_pandas(regex="^nothing$")
    assert len(df) == 0 and list(df.columns) == ["step", "mode", "mode_step", "worker", "tensor", "value"]


def test_torch_run_losses_equal_the_recorded_losses(tmp_path):
    from tests.tiny import train

    run = train(str(tmp_path / "run"), steps=12)
    trial = mldbg.create_trial(run.path)
    df = trial.to_pandas(collection="losses")
    name = trial.tensor_names(collection="losses")[0]
    got = df[df.tensor == name].sort_values("step")
    expect = [float(trial.tensor(name).value(s)) for s in trial.tensor(name).steps()]
    assert got.value.tolist() == pytest.approx(expect)
    grads = trial.to_pandas(collection="gradients", reductions=["l2"])
    assert len(grads) > 0 and np.isfinite(grads.value).all()


def test_the_bare_package_imports_without_pandas_and_to_pandas_says_what_to_install(tmp_path):
    write(str(tmp_path), rank=0, world_size=1)
    code = (
        "import sys; sys.modules['pandas'] = None\n"
        "import mldbg\n"
        f"t = mldbg.create_trial({str(tmp_path)!r})\n"
        "try:\n    t.to_pandas()\nexcept mldbg.errors.MldbgError as e:\n    print('ERR', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "ERR trial.to_pandas needs pandas" in out.stdout and "pip install pandas" in out.stdout


def test_frame_types(trial):
    df = trial.to_pandas(regex="^loss$")
    assert df.step.dtype == np.int64 and df.mode_step.dtype == np.int64
    assert df.value.dtype == np.float64
    assert isinstance(df, pd.DataFrame)


def test_no_arguments_gives_the_one_number_series_and_says_what_it_left_out(trial):
    """The first call one types (issue #29): never refused on a run that holds arrays."""
    with pytest.warns(
        UserWarning, match=r"left out 2 tensors holding more than one number \('r', 'w'\)"
    ) as seen:
        df = trial.to_pandas()
    assert len(seen) == 1 and len(str(seen[0].message).splitlines()) == 1
    assert "reductions=" in str(seen[0].message)
    assert set(df.tensor) == {"loss"} and len(df) == 8 * 2
    pd.testing.assert_frame_equal(df, trial.to_pandas(regex="^loss$"))
    with pytest.warns(UserWarning, match="left out 2 tensors"):
        assert set(trial.to_pandas(mode="eval")["mode"]) == {"EVAL"}


def test_a_torch_run_with_weights_without_arguments(tmp_path):
    from tests.tiny import train

    run = train(str(tmp_path / "run"), steps=6, eval_every=3)
    trial = mldbg.create_trial(run.path)
    with pytest.warns(UserWarning, match="left out .* holding more than one number") as seen:
        df = trial.to_pandas()
    assert len(seen) == 1
    weights = trial.tensor_names(collection="weights")
    assert weights and not set(weights) & set(df.tensor)
    losses = trial.tensor_names(collection="losses")
    assert losses and set(losses) <= set(df.tensor)  # the one-number series are all there
    assert f"'{sorted(set(trial.tensor_names()) - set(df.tensor))[0]}'" in str(seen[0].message)
    assert np.isfinite(df.value).all()
