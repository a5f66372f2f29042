"""A model called by keywords alone (`model(**batch)`, as the Hugging Face Trainer calls it, or
a dict batch): the two-line hook takes the keyword argument that is the input as
`model_input_0` (a known input name, else the first tensor that is no label, mask or
position; a collator may put `labels` first), so the input rules judge it: images left in
0-255 are found, the normalized twin is quiet."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

import mldbg
import mldbg.torch
from mldbg.frameworks.torch_models import model_inputs
from mldbg.store.statistics import vector_name


class Classifier(nn.Module):
    """A Hugging Face-style image classifier: `forward(pixel_values, labels)` returns the loss."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(self.net(pixel_values), labels)


def train(path, scale: float, steps: int = 40) -> list[torch.Tensor]:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    images = torch.rand(512, 3, 8, 8, generator=g)
    labels = (images[:, 0].mean((1, 2)) * 4).long().clamp(max=3)
    pixels = (images - 0.5) / 0.25 if scale == 1 else images * scale  # normalized, or left in 0-255
    model = Classifier()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = []
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(model)
        for step in range(steps):
            idx = torch.arange(step * 32, step * 32 + 32) % 512
            batch = {"labels": labels[idx], "pixel_values": pixels[idx]}  # labels first, as a collator may
            batches.append(batch["pixel_values"])
            opt.zero_grad()
            model(**batch).backward()
            opt.step()
    return batches


def test_the_keyword_input_is_model_input_0(tmp_path):
    batches = train(tmp_path / "run", scale=1)
    trial = mldbg.create_trial(str(tmp_path / "run"))
    channel_mean = trial.tensor(vector_name("model_input_0", "channel_mean"))
    for step in (0, 7):
        assert trial.record("model_input_0", step).statistics["samples"] == 32
        want = batches[step].double().mean((0, 2, 3)).numpy()
        np.testing.assert_allclose(channel_mean.value(step), want, rtol=1e-5)
    assert not [f for f in mldbg.check(str(tmp_path / "run")) if f.rule == "not_normalized_data"]


def test_images_left_in_0_255_are_found_when_passed_by_keyword(tmp_path):
    train(tmp_path / "run", scale=255.0)
    found = [f for f in mldbg.check(str(tmp_path / "run")) if f.rule == "not_normalized_data"]
    assert found and "model_input_0" in found[0].tensors, found


def test_which_keyword_is_the_input():
    x, y, mask = torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), torch.ones(2, 3)
    assert model_inputs((x,), {"labels": y}) == (x,)  # positional arguments as they are
    assert model_inputs((), {"labels": y, "attention_mask": mask, "input_ids": y})[0] is y
    assert model_inputs((), {"labels": y, "attention_mask": mask, "src": x})[0] is x
    assert model_inputs((), {"labels": y, "position_ids": y}) == ()
    assert np.array_equal(model_inputs((), {"x": x})[0], x)
