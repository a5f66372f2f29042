"""check_input_images: images far from normalized (raw pixel scale), quiet on healthy CNNs."""

from __future__ import annotations

import mldbg
from tests.tiny import train


def test_fires_on_raw_pixel_scale_and_quiet_on_normalized(tmp_path, run):
    train(tmp_path / "px", model="cnn", input_scale=255.0, input_shift=128.0, lr=1e-4, steps=20)
    found = mldbg.check(str(tmp_path / "px"), rules=["check_input_images"])
    assert found and "channel" in found[0].message and found[0].tensors == ["model_input_0"]
    assert not mldbg.check(run("healthy_cnn_sgd"), rules=["check_input_images"])
