"""StatisticsBatch equals the NumPy reference on the raw tensors: every statistic, every dtype
(fp16 and bf16 included), empty and 0-d tensors, NaN and inf, 2-D and 4-D activations, labels,
and the tensors of tiny real trainings. `sync_free=True` runs the code path of a GPU (no
data-dependent shortcut, fused fp16/bf16 norms, whole-tensor conversion) on the CPU."""

from __future__ import annotations

import importlib
import math
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.tiny import SmallCNN, apply_init, make_data, mlp
from torch import nn

from mldbg.errors import InvalidConfig
from mldbg.frameworks import torch_statistics as ts
from mldbg.frameworks.torch_attention import mha_logits as attention_logits
from mldbg.frameworks.torch_statistics import StatisticsBatch
from mldbg.store import statistics as st

SCALARS = [
    *st.REDUCTIONS, *(f"{r}_abs" for r in st.REDUCTIONS), "count", "nan_count", "inf_count", "zero_fraction",
    "samples", "fingerprint", "row_range", "col_range", "outside(-0.5,0.5)", "outside(-1e30,1e-3)", "equal(0)",
    "equal(0.1)", "quantile(5)", "quantile(95)",
]  # fmt: skip
VECTORS = [
    "unit_active",
    "unit_outside(-0.5,0.5)",
    "channel_count",
    "channel_mean",
    "channel_std",
    "sample_fingerprints",
]
DTYPES = [
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.int64,
    torch.int32,
    torch.uint8,
    torch.bool,
]
SHAPES = [(6, 4, 3, 3), (5, 7), (4, 6, 3), (9,), (), (0, 3), (2, 0, 4)]
PATHS = [None, True]  # the CPU's path, the GPU's path


def reference(x: torch.Tensor, kinds, **kw) -> dict:
    """The NumPy definition on the raw tensor (bf16 as its exact float32 values, its bits for
    fingerprints)."""
    if x.dtype == torch.bfloat16:
        out = st.compute(x.float().numpy(), kinds, **kw)
        bits = x.view(torch.int16).numpy().view(np.uint16)
        fp = st.compute(bits, ["fingerprint", "sample_fingerprints"])
        return {k: fp.get(k, v) for k, v in out.items()}
    return st.compute(x.numpy(), kinds, **kw)


def tolerance(dtype: torch.dtype) -> float:
    return 1e-12 if dtype == torch.float64 else 2e-5  # float32 accumulation otherwise


def assert_same(got: dict, want: dict, rtol: float, what: str = "") -> None:
    assert set(got) == set(want), what
    for key, w in want.items():
        g = got[key]
        assert np.shape(g) == np.shape(w), f"{what} {key}: shape {np.shape(g)} != {np.shape(w)}"
        if isinstance(w, np.ndarray):
            assert g.dtype == w.dtype, f"{what} {key}: {g.dtype} != {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6, equal_nan=True, err_msg=f"{what} {key}")


def sample(shape, dtype, special: bool, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * 3
    if dtype.is_floating_point:
        x = x.to(dtype)
        if x.numel() > 4:
            x.view(-1)[0] = 0
            x.view(-1)[3] = 0.5  # on a bound of outside(-0.5, 0.5)
            if special:
                x.view(-1)[1] = math.nan
                x.view(-1)[2] = -math.inf
        return x
    if dtype == torch.bool:
        return x > 0
    return x.round().clamp(min=0 if dtype == torch.uint8 else -100).to(dtype)


@pytest.mark.parametrize("sync_free", PATHS)
@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan-inf"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_statistic_equals_the_reference(dtype, special, sync_free):
    batch = StatisticsBatch(sync_free=sync_free)
    tensors = {f"t{i}": sample(shape, dtype, special, seed=i) for i, shape in enumerate(SHAPES)}
    for name, x in tensors.items():
        batch.add(name, x, SCALARS + VECTORS)
    got = batch.finish()()
    for name, x in tensors.items():
        assert_same(got[name], reference(x, SCALARS + VECTORS), tolerance(dtype), f"{dtype} {tuple(x.shape)}")


@pytest.mark.parametrize("sync_free", PATHS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int32])
def test_large_tensors_go_through_chunks_and_the_subsample(dtype, sync_free):
    """More elements than a conversion chunk and a fingerprint chunk; a quantile subsample."""
    n = ts.CHUNK * 2 + 1234
    x = (torch.randn(n, generator=torch.Generator().manual_seed(1)) * 50 + 7).to(dtype).reshape(-1, 2)
    kinds = ["mean", "sum", "std", "variance", "l1", "l2", "mean_abs", "max_abs", "std_abs", "fingerprint",
             "quantile(5)", "quantile(95)", "nan_count", "zero_fraction"]  # fmt: skip
    batch = StatisticsBatch(sync_free=sync_free)
    batch.add("big", x, kinds)
    # float32 accumulation over half a million elements: ~sqrt(n) * 6e-8 relative
    assert_same(batch.finish()()["big"], reference(x, kinds), 1e-4, str(dtype))


@pytest.mark.parametrize("sync_free", PATHS)
@pytest.mark.parametrize("case", ["nan", "inf", "ties", "small"])
def test_quantiles_equal_numpy_s_with_nan_inf_and_ties(case, sync_free):
    """The CPU selects the order statistics (`np.partition`), the GPU path sorts: both give
    NumPy's percentiles of the subsample exactly, NaN when the sample holds a NaN."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(9000, generator=g)
    if case == "nan":
        x[int(st.subsample_index(9000)[2047])] = math.nan  # one NaN in the subsample
    elif case == "inf":
        x[::7] = math.inf
    elif case == "ties":
        x = torch.randint(0, 3, (9000,), generator=g).float()
    else:
        x = x[:17]
    kinds = ["quantile(0)", "quantile(5)", "quantile(50)", "quantile(95)", "quantile(100)"]
    batch = StatisticsBatch(sync_free=sync_free)
    batch.add("x", x, kinds)
    got, want = batch.finish()()["x"], reference(x, kinds)
    assert set(got) == set(want) and len(want) == len(kinds)
    assert math.isnan(want["quantile(50.0)"]) == (case == "nan")
    for k in want:
        assert got[k] == want[k] or (math.isnan(got[k]) and math.isnan(want[k])), (k, got[k], want[k])


def test_fp16_values_beyond_its_range_accumulate_in_float32():
    x = torch.full((1000,), 60000.0, dtype=torch.float16)  # every sum overflows fp16
    batch = StatisticsBatch()
    batch.add("x", x, ["l1", "l2", "sum", "mean", "std"])
    got = batch.finish()()["x"]
    assert got["l1"] == pytest.approx(6e7) and got["sum"] == pytest.approx(6e7)
    assert got["l2"] == pytest.approx(60000 * math.sqrt(1000)) and got["std"] == 0


@pytest.mark.parametrize("sync_free", PATHS)
def test_non_contiguous_and_channels_last_tensors(sync_free):
    x = torch.randn(4, 5, 6, 3)
    kinds = [
        "mean",
        "l2",
        "fingerprint",
        "quantile(50)",
        "unit_active",
        "channel_mean",
        "sample_fingerprints",
    ]
    batch = StatisticsBatch(sync_free=sync_free)
    batch.add("t", x.transpose(1, 2), kinds)
    batch.add("nhwc", x, kinds, unit_axis=-1)
    batch.add("cl", x.permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last), kinds)
    got = batch.finish()()
    assert_same(got["t"], reference(x.transpose(1, 2).contiguous(), kinds), 1e-5)
    assert_same(got["nhwc"], st.compute(x.numpy(), kinds, unit_axis=-1), 1e-5)
    assert_same(got["cl"], st.compute(x.permute(0, 3, 1, 2).numpy(), kinds), 1e-5)
    np.testing.assert_array_equal(got["nhwc"]["unit_active"], got["cl"]["unit_active"])


def test_bounds_compare_exactly_in_the_tensors_dtype():
    """-9.4999 is not a float16 or float32 value: x <= lo must still mean the real number lo."""
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        grid = torch.linspace(-9.6, -9.4, 2001, dtype=torch.float64).to(dtype).unique()
        x = torch.cat([grid, -grid])
        batch = StatisticsBatch()
        batch.add("x", x, ["outside(-9.4999,9.4999)", "unit_outside(-9.4999,9.4999)"])
        got = batch.finish()()["x"]
        assert_same(
            got, reference(x, ["outside(-9.4999,9.4999)", "unit_outside(-9.4999,9.4999)"]), 0, str(dtype)
        )
    batch = StatisticsBatch()
    batch.add(
        "ids", torch.tensor([0, 1, 2, 3]), ["outside(0.5,2.5)", "equal(2)", "equal(2.5)", "outside(-inf,inf)"]
    )
    got = batch.finish()()["ids"]
    assert got["outside(0.5,2.5)"] == 0.5 and got["equal(2.0)"] == 0.25 and got["equal(2.5)"] == 0
    assert got["outside(-inf,inf)"] == 0


@pytest.mark.parametrize("sync_free", PATHS)
def test_delta_l2_follows_a_real_optimizer(sync_free):
    torch.manual_seed(0)
    model = mlp(6, 3, width=8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
    batch = StatisticsBatch(sync_free=sync_free)
    before = None
    for _ in range(3):
        for name, p in model.named_parameters():
            batch.add(name, p, ["delta_l2", "l2"])
        batch.add("half", model.fc1.weight.half(), ["delta_l2"])
        got = batch.finish()()
        now = {n: p.detach().clone() for n, p in model.named_parameters()}
        for name in now:
            if before is None:
                assert math.isnan(got[name]["delta_l2"])
            else:
                want = st.compute(now[name].numpy(), ["delta_l2"], previous=before[name].numpy())["delta_l2"]
                assert got[name]["delta_l2"] == pytest.approx(want, rel=1e-5) and want > 0
        if before is not None:
            want = st.compute(
                now["fc1.weight"].half().numpy(), ["delta_l2"], previous=before["fc1.weight"].half().numpy()
            )
            assert got["half"]["delta_l2"] == pytest.approx(want["delta_l2"], rel=1e-3)
        before = now
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    batch.add("fc1.weight", torch.zeros(2, 2), ["delta_l2"])  # another shape: starts over
    batch.add("out.bias", model.out.bias, ["delta_l2"])  # unchanged since last time (no step)
    got = batch.finish()()
    assert math.isnan(got["fc1.weight"]["delta_l2"])
    assert got["out.bias"]["delta_l2"] > 0  # the last optimizer step moved it
    batch.add("out.bias", model.out.bias, ["delta_l2"])
    assert batch.finish()()["out.bias"]["delta_l2"] == 0
    batch.forget()
    batch.add("out.bias", model.out.bias, ["delta_l2"])
    assert math.isnan(batch.finish()()["out.bias"]["delta_l2"])


@pytest.mark.parametrize("sync_free", PATHS)
@pytest.mark.parametrize("model_kind", ["mlp", "cnn"])
def test_a_tiny_training_step_parameters_gradients_activations(model_kind, sync_free):
    """What a hook will ask for: every parameter and gradient, ReLU outputs (2-D and 4-D),
    model inputs, labels and logits, equal to the reference on the raw tensors."""
    torch.manual_seed(0)
    if model_kind == "mlp":
        model = mlp(10, 4, width=16)
        x, y = make_data(64, model="mlp", n_features=10, n_classes=4, channels=1, seed=0, teacher_seed=1,
                         imbalance=None, task="classification")  # fmt: skip
    else:
        model = SmallCNN(3, 4)
        x, y = make_data(32, model="cnn", n_features=0, n_classes=4, channels=3, seed=0, teacher_seed=1,
                         imbalance=None, task="classification")  # fmt: skip
    apply_init(model, "negative_bias" if model_kind == "mlp" else None)  # dead ReLUs in the MLP
    acts: dict[str, torch.Tensor] = {}
    for name, m in model.named_modules():
        if isinstance(m, nn.ReLU):
            m.register_forward_hook(
                lambda mod, args, out, name=name: acts.__setitem__(f"{name}_output_0", out)
            )
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    logits = model(x)
    nn.functional.cross_entropy(logits, y).backward()
    param_kinds = ["l2", "mean_abs", "max_abs", "max", "nan_count", "inf_count", "variance", "zero_fraction",
                   "quantile(5)", "quantile(95)", "row_range", "col_range", "fingerprint", "delta_l2"]  # fmt: skip
    act_kinds = ["unit_active", "unit_outside(-0.5,0.5)", "zero_fraction", "mean_abs", "variance"]
    input_kinds = ["channel_count", "channel_mean", "channel_std", "sample_fingerprints"]
    batch = StatisticsBatch(sync_free=sync_free)
    raw = {}
    for name, p in model.named_parameters():
        batch.add(name, p, param_kinds)
        batch.add(f"gradient/{name}", p.grad, param_kinds)
        raw[name], raw[f"gradient/{name}"] = p.detach().clone(), p.grad.clone()
    for name, a in acts.items():
        batch.add(name, a, act_kinds)
    batch.add("inputs", x, input_kinds)
    batch.add_classes("labels", y, "predictions", logits)
    pending = batch.finish()
    opt.step()  # the pending values were taken before: the optimizer may now change the tensors
    got = pending()
    for name, value in raw.items():
        assert_same(got[name], st.compute(value.numpy(), param_kinds), 2e-5, name)
    for name, a in acts.items():
        assert_same(got[name], st.compute(a.detach().numpy(), act_kinds), 2e-5, name)
    assert_same(got["inputs"], st.compute(x.numpy(), input_kinds), 1e-5, "inputs")
    on_labels, on_preds = st.class_statistics(y.numpy(), logits.detach().numpy())
    assert_same({k: v for k, v in got["labels"].items()}, on_labels, 0, "labels")
    assert_same(got["predictions"], on_preds, 0, "predictions")
    if model_kind == "mlp":  # the injected defect shows: every unit of relu1 silent in every sample
        assert got["relu1_output_0"]["unit_active"].sum() == 0 and got["relu1_output_0"]["samples"] == 64
    else:
        assert got["relu1_output_0"]["unit_active"].shape == (8,)


@pytest.mark.parametrize("sync_free", PATHS)
def test_class_statistics_equal_the_reference(sync_free):
    g = torch.Generator().manual_seed(0)
    n = 60
    cases = [
        (torch.randint(0, 10, (n,), generator=g), torch.randn(n, 10, generator=g), {}),
        (torch.randint(-1, 10, (n,), generator=g), torch.randn(n, 10, generator=g).half(), {}),
        (torch.randint(0, 3, (4, 5, 6), generator=g), torch.randn(4, 3, 5, 6, generator=g), {}),
        (
            torch.randint(0, 3, (4, 5, 6), generator=g),
            torch.randn(4, 5, 6, 3, generator=g),
            {"class_axis": -1},
        ),
        (nn.functional.one_hot(torch.randint(0, 4, (n,), generator=g), 4).float(), torch.randn(n, 4), {}),
        (torch.randint(0, 2, (n, 1), generator=g).float(), torch.randn(n, 1, generator=g), {}),
        (torch.randint(0, 2, (n,), generator=g).float(), torch.rand(n, generator=g).bfloat16(), {}),
        (torch.randint(0, 7, (n,), generator=g), torch.randint(0, 7, (n,), generator=g), {}),
        (torch.randint(0, 7, (n,), generator=g), torch.randint(0, 7, (n,), generator=g), {"classes": 9}),
        (torch.tensor([0.0, 1.5, math.nan, 2.0]), torch.randn(4, 3, generator=g), {}),
        (torch.randint(0, 100, (n,), generator=g), torch.randn(n, 100, generator=g), {}),
        (None, torch.randn(n, 5, generator=g), {}),
        (torch.randint(0, 5, (n,), generator=g), None, {}),
        (torch.zeros(0, dtype=torch.int64), torch.zeros(0, 3), {}),
        (torch.randint(0, 3, (n,), generator=g), torch.randn(n, st.MAX_CLASSES + 1, generator=g), {}),
    ]
    for i, (y, p, kw) in enumerate(cases):
        batch = StatisticsBatch(sync_free=sync_free)
        batch.add_classes(None if y is None else "y", y, None if p is None else "p", p, **kw)
        got = batch.finish()()

        def numpy(t):
            return (
                None
                if t is None
                else (t.float() if t.dtype in (torch.float16, torch.bfloat16) else t).numpy()
            )

        on_labels, on_preds = st.class_statistics(numpy(y), numpy(p), **kw)
        assert_same(got.get("y", {}), on_labels, 0, f"case {i} labels")
        assert_same(got.get("p", {}), on_preds, 0, f"case {i} predictions")


def test_requests_merge_per_name_and_the_batch_is_reusable():
    batch = StatisticsBatch()
    y = torch.tensor([0, 1, 1])
    batch.add("labels", y, ["count", "max"])
    batch.add_classes("labels", y, "logits", torch.eye(3)[[0, 1, 2]])
    got = batch.finish()()
    assert set(got["labels"]) == {"count", "max", "class_counts", "class_correct", "confusion"}
    assert got["labels"]["class_correct"].tolist() == [1, 1, 0, 0]
    assert batch.finish()() == {}  # cleared by finish()


def test_pending_values_are_read_once_from_any_thread():
    batch = StatisticsBatch()
    batch.add("x", torch.arange(10.0), ["mean", "unit_active"])
    pending = batch.finish()
    seen = []
    t = threading.Thread(target=lambda: seen.append(pending()))
    t.start()
    t.join()
    assert seen[0]["x"]["mean"] == 4.5 and pending() is seen[0]


def test_bad_requests_are_refused_when_made():
    batch = StatisticsBatch()
    with pytest.raises(InvalidConfig, match="unknown name"):
        batch.add("x", torch.ones(3), ["nonsense"])
    with pytest.raises(InvalidConfig, match="batch axis"):
        batch.add("x", torch.ones(3, 4), ["unit_active"], unit_axis=0)
    with pytest.raises(InvalidConfig, match="complex"):
        batch.add("x", torch.ones(3, dtype=torch.complex64), ["mean"])
    with pytest.raises(InvalidConfig, match="torch.Tensor"):
        batch.add("x", np.ones(3), ["mean"])  # type: ignore[arg-type]
    with pytest.raises(InvalidConfig, match="labels and predictions"):
        batch.add("x", torch.ones(3), ["class_counts"])


def test_gradients_are_not_tracked_and_inputs_are_not_modified():
    w = torch.randn(4, 4, requires_grad=True)
    before = w.detach().clone()
    version = w._version
    batch = StatisticsBatch()
    batch.add("w", w, ["l2", "delta_l2", "fingerprint", "std"])
    batch.add("w2", w * 2, ["unit_active"])
    got = batch.finish()()
    assert torch.equal(w.detach(), before) and w._version == version
    assert got["w"]["l2"] == pytest.approx(float(before.norm()))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_ship_through_pinned_memory_without_sync():  # pragma: no cover - GPU machines
    x = torch.randn(64, 32, 8, 8, device="cuda").half()
    kinds = SCALARS + VECTORS
    batch = StatisticsBatch()
    batch.add("x", x, kinds)
    batch.add_classes(
        "y", torch.randint(0, 10, (64,), device="cuda"), "p", torch.randn(64, 10, device="cuda")
    )
    pending = batch.finish()
    got = pending()
    assert_same(got["x"], reference(x.cpu(), kinds), 2e-5, "cuda fp16")
    assert got["y"]["class_counts"].sum() == 64


def test_the_gpu_overhead_benchmark_runs_its_logic_on_a_cpu(monkeypatch, tmp_path, capsys):
    """benchmarks/gpu_overhead.py uses StatisticsBatch as a hook will (forward hooks, a reader
    thread): its CPU smoke run keeps that path working, and without a GPU it says so."""
    bench = Path(__file__).resolve().parents[2] / "benchmarks"
    monkeypatch.syspath_prepend(str(bench))
    monkeypatch.chdir(tmp_path)
    gpu_overhead = importlib.import_module("gpu_overhead")
    gpu_overhead.main(["--device", "cpu", "--model", "tiny", "--steps", "3", "--warmup", "1", "--rounds", "1",
                       "--images", "32", "--batch", "4", "--threads", "1", "--inprocess", "--no-save",
                       "--configs", "default,stats-norms,stats-rules,pinned"])  # fmt: skip
    out = capsys.readouterr().out
    assert "| stats-rules (" in out and "| none (" in out and "Command: `python" in out
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="no CUDA GPU here"):
            gpu_overhead.main(["--steps", "1"])


@pytest.mark.parametrize("sync_free", PATHS)
def test_sample_change_follows_gradients_as_the_reference_does(sync_free):
    """`sample_change` of real gradients equals NumPy's over the same subsample (a 6,000-element
    weight is subsampled, fp16 too); without zero_grad() the sum of gradients barely changes."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(60, 100), nn.ReLU(), nn.Linear(100, 3))
    x, y = torch.randn(32, 60), torch.randint(0, 3, (32,))
    batch = StatisticsBatch(sync_free=sync_free)
    before: dict[str, np.ndarray] | None = None
    changes = []
    for step in range(6):
        model.zero_grad() if step < 3 else None  # then gradients pile up
        nn.functional.cross_entropy(model(x[step::2]), y[step::2]).backward()
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        for name, g in grads.items():
            batch.add(name, g, ["sample_change"])
        batch.add("half", grads["0.weight"].half(), ["sample_change"])
        got = batch.finish()()
        for name, g in grads.items():
            prev = None if before is None else before[name]
            want = st.compute(g.numpy(), ["sample_change"], previous=prev)["sample_change"]
            if prev is None:
                assert math.isnan(got[name]["sample_change"]) and math.isnan(want)
            else:
                assert got[name]["sample_change"] == pytest.approx(want, rel=1e-9), name
        if before is not None:
            half = grads["0.weight"].half().numpy()
            want = st.compute(half, ["sample_change"], previous=before["0.weight"].astype(np.float16))
            assert got["half"]["sample_change"] == pytest.approx(want["sample_change"], rel=1e-3)
            changes.append(got["0.weight"]["sample_change"])
        before = {n: g.numpy() for n, g in grads.items()}
    assert grads["0.weight"].numel() > st.QUANTILE_SAMPLE
    assert min(changes[:2]) > 0.5 and changes[-1] < 0.5 * min(changes[:2]), changes  # fresh vs summed
    batch.add("2.bias", torch.zeros(3), ["sample_change"])  # all zeros: no ratio
    batch.add("2.weight", torch.ones(2, 2), ["sample_change"])  # another size: starts over
    got = batch.finish()()
    assert math.isnan(got["2.bias"]["sample_change"]) and math.isnan(got["2.weight"]["sample_change"])


@pytest.mark.parametrize("batch_first", [True, False])
def test_attention_logits_are_those_torch_softmaxes(batch_first):
    """softmax of the hook's attention logits of the first sample equals the per-head attention
    weights nn.MultiheadAttention returns for it (separate key/value sizes too)."""
    torch.manual_seed(0)
    for kdim in (None, 6):
        mha = nn.MultiheadAttention(8, num_heads=2, batch_first=batch_first, kdim=kdim, vdim=kdim)
        q = torch.randn(3, 5, 8) if batch_first else torch.randn(5, 3, 8)
        k = torch.randn(3, 7, kdim or 8) if batch_first else torch.randn(7, 3, kdim or 8)
        _, weights = mha(q, k, k, need_weights=True, average_attn_weights=False)
        logits = attention_logits(mha, q, k)
        assert logits is not None and logits.shape == (2, 5, 7)
        torch.testing.assert_close(torch.softmax(logits, dim=-1), weights[0])


def test_small_tensors_computed_together_equal_the_reference():
    """On the CPU the small float tensors' moments, zero fraction, quantiles and sample change
    are computed together (`_small_moments`, `_small_samples`): each equals NumPy's, over steps,
    with a NaN in one tensor, an inf in another (left to the per-tensor path), all-zero ones,
    and the set of tensors changing between steps."""
    kinds = ["mean", "variance", "std", "sum", "zero_fraction", "nan_count", "inf_count",
             "quantile(5)", "quantile(95)", "sample_change"]  # fmt: skip
    g = torch.Generator().manual_seed(5)
    batch = StatisticsBatch()
    before: dict[str, np.ndarray] = {}
    for step in range(3):
        tensors = {f"s{i}": torch.randn(n, generator=g, dtype=dt) for i, (n, dt) in
                   enumerate([(16, torch.float32), (130, torch.float32), (7, torch.float64), (4093, torch.float32)])}  # fmt: skip
        tensors["zeros"] = torch.zeros(12)
        tensors["nan"] = torch.randn(20, generator=g)
        tensors["nan"][3] = math.nan
        tensors["inf"] = torch.randn(9, generator=g)
        tensors["inf"][0] = math.inf
        if step == 1:
            del tensors["s0"]  # another layout of the small tensors
        for name, x in tensors.items():
            batch.add(name, x, kinds)
        got = batch.finish()()
        for name, x in tensors.items():
            want = st.compute(x.numpy(), kinds, previous=before.get(name))
            assert_same(got[name], want, tolerance(x.dtype), f"step {step} {name}")
        before.update({n: x.numpy() for n, x in tensors.items()})  # the last time each was asked
