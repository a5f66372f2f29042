"""saliency(): with the two-line recipe, the map is |x.grad| max over channels as PyTorch has it."""

import numpy as np
import pytest

import mldbg
import mldbg.torch
from mldbg import insight
from mldbg.errors import TensorUnavailable


def test_saliency_equals_the_input_gradient_max_over_channels(images_run):
    path, expected = images_run
    trial = mldbg.create_trial(path)
    assert trial.tensor("gradient/model_input_0").steps() == sorted(expected)  # the recipe records it
    for step, grad_max in expected.items():
        fig = insight.saliency(trial, step, samples=3)
        maps = {tr.name: np.asarray(tr.z, dtype=float) for tr in fig.data if tr.name.startswith("saliency")}
        assert sorted(maps) == ["saliency 0", "saliency 1", "saliency 2"]
        for i in range(3):
            assert maps[f"saliency {i}"].shape == (8, 8)
            np.testing.assert_allclose(maps[f"saliency {i}"], grad_max[i], rtol=1e-6)
        inputs = [tr for tr in fig.data if tr.name.startswith("input")]
        assert len(inputs) == 3 and inputs[0].type == "image"  # 3 channels: shown as RGB


def test_default_step_is_the_last(images_run):
    path, expected = images_run
    fig = insight.saliency(path)
    last = max(expected)
    np.testing.assert_allclose(np.asarray(fig.data[1].z, dtype=float), expected[last][0], rtol=1e-6)


def test_saliency_map_layouts():
    g = np.random.default_rng(0).normal(size=(2, 5, 6, 3))  # channels last (Keras)
    np.testing.assert_array_equal(insight.saliency_map(g), np.abs(g).max(axis=3))
    np.testing.assert_array_equal(insight.saliency_map(g, channel_axis=1), np.abs(g).max(axis=1))
    v = np.array([[1.0, -3.0], [-2.0, 0.5]])  # vectors: one row each
    np.testing.assert_array_equal(insight.saliency_map(v), np.abs(v)[:, None, :])


def test_without_the_recipe_the_error_says_what_to_add(blobs_run):
    with pytest.raises(
        TensorUnavailable, match=r"'gradient/model_input_0'.*x.requires_grad_\(\).*save_tensor"
    ):
        insight.saliency(blobs_run, 0)


@pytest.mark.parametrize("after_optimizer_step", [False, True])
def test_recipe_follows_the_hooks_schedule(tmp_path, after_optimizer_step):
    """The documented recipe, with mldbg.torch.Hook as it is: the input gradient is recorded at
    the steps the hook saves, equal to x.grad, whether saved before or after optimizer.step()."""
    import torch
    from torch import nn

    from tests.tiny import mlp

    net, loss_fn = mlp(4, 2, width=4, depth=1), nn.CrossEntropyLoss()
    hook = mldbg.torch.Hook(
        tmp_path, save_config=mldbg.SaveConfig(save_interval=2), include_collections=["inputs", "losses"]
    )
    hook.register_module(net)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    grads = {}
    for step in range(5):
        x = torch.randn(3, 4).requires_grad_()
        opt.zero_grad()
        loss_fn(net(x), torch.tensor([0, 1, 0])).backward()
        if not after_optimizer_step:
            hook.save_tensor("gradient/model_input_0", x.grad)
        opt.step()
        if after_optimizer_step:
            hook.save_tensor("gradient/model_input_0", x.grad)
        grads[step] = x.grad.numpy().copy()
    hook.close()
    trial = mldbg.create_trial(tmp_path)
    g = trial.tensor("gradient/model_input_0")
    assert g.steps() == trial.tensor("model_input_0").steps() == [0, 2, 4]
    for s in g.steps():
        np.testing.assert_array_equal(g.value(s), grads[s])
    assert "gradient/model_input_0" not in trial.tensor_names(collection="gradients")
    fig = insight.saliency(trial, 2)  # (N, F) vectors: one row of features per sample
    np.testing.assert_allclose(np.asarray(fig.data[1].z, dtype=float), np.abs(grads[2][:1]), rtol=1e-6)
