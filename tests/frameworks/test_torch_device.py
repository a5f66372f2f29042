"""The two-line hook on the device the tensors live on: what it records equals what torch
computes from the same tensors (fp32, bf16 autocast, `torch.compile`), and on a GPU it adds no
host synchronisation to the training step. On a CPU machine the CUDA cases skip; the CPU case
keeps the comparison itself working."""

from __future__ import annotations

import contextlib
import threading
import warnings

import numpy as np
import pytest
import torch
from tests.tiny import SmallCNN
from torch import nn

import mldbg
from mldbg.torch import Hook

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")


def _train(out, device: str, precision: str, steps: int, hook: bool = True, watch=None):
    """A small CNN trained `steps` steps with (or without) the README's two lines; returns the
    per-step reference: the loss and every gradient's l2, from the tensors torch holds.
    `watch(i)`, if given, is entered around each training step `i`."""
    torch.manual_seed(0)
    model = SmallCNN(3, 5).to(device)
    loss_fn = nn.CrossEntropyLoss()
    h = None
    if hook:
        h = Hook(str(out))
        h.register_module(model)
        h.register_loss(loss_fn)
    # inductor on the GPU; on a CPU the eager backend (the same tracing, no C++ build)
    backend = "inductor" if device == "cuda" else "eager"
    net = torch.compile(model, backend=backend) if precision == "compile" else model
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x = torch.randn(steps, 32, 3, 8, 8, device=device)
    y = torch.randint(0, 5, (steps, 32), device=device)
    losses, grads = [], []
    for i in range(steps):
        with watch(i) if watch else contextlib.nullcontext():
            opt.zero_grad()
            with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=precision == "bf16"):
                loss = loss_fn(net(x[i]), y[i])
            loss.backward()
            losses.append(loss.detach().clone())
            grads.append({n: p.grad.detach().clone() for n, p in model.named_parameters()})
            opt.step()
    if h is not None:
        h.close()
    ref_loss = [float(v) for v in losses]
    ref_l2 = [{n: float(g.double().norm()) for n, g in step.items()} for step in grads]
    return ref_loss, ref_l2


# dynamo, at the graph break where the registered model's hook runs eagerly, reads `.grad` of
# the tensors it hands over and warns (UserWarning) when one is not a leaf: harmless
COMPILE_WARNING = pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
DEVICES = [
    pytest.param("cpu", "fp32", id="cpu-fp32"),
    pytest.param("cpu", "compile", id="cpu-compile", marks=COMPILE_WARNING),
    pytest.param("cuda", "fp32", id="cuda-fp32", marks=needs_cuda),
    pytest.param("cuda", "bf16", id="cuda-bf16-autocast", marks=needs_cuda),
    pytest.param("cuda", "compile", id="cuda-compile", marks=[needs_cuda, COMPILE_WARNING]),
]


@pytest.mark.parametrize(("device", "precision"), DEVICES)
def test_recorded_statistics_equal_torch_on_the_same_tensors(tmp_path, device, precision):
    steps = 8
    ref_loss, ref_l2 = _train(tmp_path / "run", device, precision, steps)
    trial = mldbg.create_trial(str(tmp_path / "run"))
    loss = trial.tensor("CrossEntropyLoss_output_0")
    assert loss.steps() == list(range(steps))
    got = np.array([float(np.asarray(loss.value(s)).reshape(())) for s in range(steps)])
    np.testing.assert_allclose(got, ref_loss, rtol=1e-6)
    compared = 0
    for name in ref_l2[0]:
        tensor = trial.tensor(f"gradient/{name}")
        for s in tensor.steps():
            assert tensor.reduction_value(s, "l2") == pytest.approx(ref_l2[s][name], rel=1e-4), (name, s)
            compared += 1
    assert compared >= len(ref_l2[0]) * 2  # every gradient, at several statistics steps


def _training_thread_syncs(device: str, hook: bool, tmp_path) -> int:
    """Host synchronisations the training thread makes in training steps 10-29, counted by
    torch's sync debug mode (the hook's writer thread may wait for its copies: that does not
    stall training; the hook's first steps and its close() are not training steps)."""
    me = threading.get_ident()
    count = 0

    def show(message, category, filename, lineno, file=None, line=None):
        nonlocal count
        if threading.get_ident() == me and "synchroniz" in str(message):
            count += 1

    @contextlib.contextmanager
    def counted(i: int):
        if i < 10:
            yield
            return
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode("default")

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        _train(tmp_path, device, "fp32", 30, hook=hook, watch=counted)
    return count


@needs_cuda
def test_the_hook_adds_no_host_synchronisation_to_the_training_step(tmp_path):
    _training_thread_syncs("cuda", False, tmp_path / "warm")  # CUDA, cuBLAS and cuDNN set up once
    plain = _training_thread_syncs("cuda", False, tmp_path / "plain")
    hooked = _training_thread_syncs("cuda", True, tmp_path / "hooked")
    print(f"training-thread syncs over 30 steps: plain {plain}, hooked {hooked}")
    assert hooked <= plain
