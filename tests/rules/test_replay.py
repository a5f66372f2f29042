"""A spike finding names its batch (`Finding.samples`: the fingerprints of the model input's
samples at that step) and `mldbg.find_samples` finds those samples in the data set: 32
corrupted samples (x30) sit in one batch of a real training; the finding leads back to them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mldbg
from mldbg.errors import InvalidConfig
from mldbg.replay import sample_fingerprint
from mldbg.store import statistics as st


def _train(path, corrupt: slice | None) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(640, 10, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    if corrupt is not None:
        x[corrupt] *= 30
    data = torch.utils.data.TensorDataset(x, y)
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()
    with mldbg.torch.Hook(str(path), statistics_budget=0) as hook:
        hook.register_module(net)
        hook.register_loss(loss_fn)
        for xb, yb in torch.utils.data.DataLoader(data, batch_size=32):  # batch 15 holds 480-511
            opt.zero_grad()
            loss_fn(net(xb), yb).backward()
            opt.step()
    return data


def test_the_spike_finding_leads_back_to_the_corrupted_samples(tmp_path):
    data = _train(tmp_path / "run", corrupt=slice(480, 512))
    found = [f for f in mldbg.check(str(tmp_path / "run"), rules=["loss_spike", "gradient_norm_spike"])]
    assert found and all(f.step == 15 for f in found), [str(f) for f in found]
    for finding in found:
        assert len(finding.samples) == 32 and finding.to_dict()["samples"] == finding.samples
        assert mldbg.find_samples(data, finding.samples) == list(range(480, 512))


def test_fingerprints_are_those_of_the_hook():
    """The same number as the NumPy reference of the recorded statistic, per row of a batch."""
    batch = torch.randn(4, 3, 5, 5)
    rows = st.compute(batch.numpy(), ["sample_fingerprints"])["sample_fingerprints"]
    assert [sample_fingerprint(s) for s in batch] == [int(r) for r in rows]
    assert sample_fingerprint(batch[0].numpy()) == int(rows[0])
    half = batch.to(torch.bfloat16)
    bits = half.view(torch.int16).numpy().view(np.uint16)
    assert sample_fingerprint(half[1]) == int(
        st.compute(bits, ["sample_fingerprints"])["sample_fingerprints"][1]
    )


def test_a_finding_without_samples_says_why(tmp_path):
    with pytest.raises(InvalidConfig, match="no fingerprints"):
        mldbg.find_samples([torch.zeros(3)], [])
    healthy = mldbg.Finding(rule="r", step=0, mode=None, message="m")
    assert "samples" not in healthy.to_dict()
