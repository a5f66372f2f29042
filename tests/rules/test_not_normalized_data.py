"""not_normalized_data: fires on a real training with the defect (inputs x100 + 50), quiet on healthy ones."""

from __future__ import annotations

import pytest
import torch

import mldbg
from mldbg.rules import BUILTIN
from tests.rules.conftest import HEALTHY, assert_explains
from tests.tiny import train


def test_fires_on_defect(run):
    found = mldbg.check(run("unnormalized"), rules=["not_normalized_data"])
    assert found, "not_normalized_data did not fire on unnormalized"
    assert all(f.rule == "not_normalized_data" for f in found)
    assert "model_input_0" in found[0].tensors and "mean" in found[0].message
    assert_explains(found[0])


@pytest.mark.parametrize("name", HEALTHY)
def test_quiet_on_healthy(name, run, default_findings):
    if BUILTIN["not_normalized_data"].default:
        found = [f for f in default_findings(name) if f.rule == "not_normalized_data"]
    else:
        found = mldbg.check(run(name), rules=["not_normalized_data"])
    assert not found, "\n".join(map(str, found))


@pytest.mark.parametrize(
    ("scale", "shift", "fires"),
    [(0.15, 0.3, False), (0.001, 0.0, True)],
    ids=["[0, 1]-like inputs (ToTensor images)", "inputs divided by 255 twice"],
)
def test_small_spread(tmp_path, scale, shift, fires):
    """Inputs with a typical std near 0.15 around 0.3 train fine; a std of 0.001 does not."""
    train(tmp_path, input_scale=scale, input_shift=shift, steps=40, default_hook=True)
    found = mldbg.check(str(tmp_path), rules=["not_normalized_data"])
    assert bool(found) == fires, "\n".join(map(str, found))
    if fires:
        assert "typical feature has std" in found[0].message


def test_class_name():
    assert BUILTIN["not_normalized_data"].__name__ == "NotNormalizedData"


class _TimeConditioned(torch.nn.Module):
    """A denoiser as diffusion scripts write it: model(x, t), t one float timestep per sample."""

    def __init__(self) -> None:
        super().__init__()
        self.time = torch.nn.Linear(8, 16)
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.SiLU(), torch.nn.Linear(16, 4))

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        freqs = torch.exp(-torch.arange(4) * 2.0)
        emb = torch.cat([torch.sin(t[:, None] * freqs), torch.cos(t[:, None] * freqs)], 1)
        return self.net[2](self.net[1](self.net[0](x) + self.time(emb)))


@pytest.mark.parametrize("x_scale", [1.0, 100.0], ids=["normalized x", "x scaled by 100"])
def test_timestep_condition_is_not_a_feature(tmp_path, x_scale):
    """A (N,) timestep beside the data, values 0..99, is embedded, not standardized: only the
    data input is judged (the unscaled twin still fires, on model_input_0)."""
    from mldbg.torch import Hook

    torch.manual_seed(0)
    model = _TimeConditioned()
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(30):
        x0 = torch.randn(64, 4) * x_scale
        t = torch.randint(0, 100, (64,)).float()
        noise = torch.randn(64, 4)
        a = (1 - t / 100)[:, None]
        loss = torch.nn.functional.mse_loss(model(a.sqrt() * x0 + (1 - a).sqrt() * noise, t), noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    found = mldbg.check(str(tmp_path), rules=["not_normalized_data"])
    assert all("model_input_1" not in f.tensors for f in found), "\n".join(map(str, found))
    assert bool(found) == (x_scale > 1), "\n".join(map(str, found))


def test_features_near_one_train_fine(tmp_path):
    """A forecaster's windows divided by their level (values near 1, std 0.2): an offset the
    first layer's bias takes up, not unscaled inputs."""
    from mldbg.torch import Hook

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(24, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(20):
        x = 1.3 + 0.2 * torch.randn(64, 24).cumsum(1) / 24**0.5
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), x[:, -1] * 1.01)
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    assert not mldbg.check(str(tmp_path), rules=["not_normalized_data"])


KERAS_NORMALIZATION = """
import sys
import keras
import numpy as np
import mldbg.keras

keras.utils.set_random_seed(0)
out, normalize = sys.argv[1], sys.argv[2] == "1"
rng = np.random.default_rng(0)
x = (rng.standard_normal((512, 8)) * np.logspace(-1, 2, 8) + np.linspace(0, 300, 8)).astype("float32")
y = (x / np.logspace(-1, 2, 8)).sum(1, keepdims=True).astype("float32") / 8
inputs = keras.Input((8,))
h = inputs
if normalize:  # the Keras tabular recipe: the model standardizes its raw inputs first
    norm = keras.layers.Normalization()
    norm.adapt(x)
    h = norm(h)
h = keras.layers.Dense(16, activation="relu")(h)
model = keras.Model(inputs, keras.layers.Dense(1)(h))
model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse")
model.fit(x, y, batch_size=32, epochs=2, verbose=0, callbacks=[mldbg.keras.Hook(out)])
"""


def train_keras_normalization(path, normalize: bool) -> str:
    """A Keras regressor on raw features (stds 0.1 to 100, means up to 300), with or without
    a `Normalization` layer adapted on them as its first layer (TensorFlow backend, in its
    own process: Keras picks its backend at import)."""
    return _keras_script(path, KERAS_NORMALIZATION, "1" if normalize else "0")


def _keras_script(path, script: str, *args: str) -> str:
    """Run a Keras training script (its run at `path`) on the TensorFlow backend in its own
    process."""
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "KERAS_BACKEND": "tensorflow",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "CUDA_VISIBLE_DEVICES": "",
    }
    env.update(TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-c", script, str(path), *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return str(path)


def test_quiet_on_a_model_that_normalizes_its_inputs_first(tmp_path):
    """Raw features fed to a model whose first layer is a `Normalization` adapted on them:
    the model holds their own means and variances and standardizes them itself (the rule
    fired on it before). Without that layer the same inputs are reported."""
    path = train_keras_normalization(tmp_path / "normalizes", normalize=True)
    found = mldbg.check(path, rules=["not_normalized_data"])
    assert not found, "\n".join(map(str, found))
    raw = train_keras_normalization(tmp_path / "raw", normalize=False)
    found = mldbg.check(raw, rules=["not_normalized_data"])
    assert found and "model_input_0" in found[0].tensors, found


KERAS_IMAGES = """
import sys
import keras
import numpy as np
import mldbg.keras

keras.utils.set_random_seed(0)
out, fed, rescaled = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
rng = np.random.default_rng(0)
y = rng.integers(0, 3, 600)
x = rng.uniform(0, 120, (600, 8, 8, 3)) + 120 * (y[:, None, None, None] == np.arange(3))
# raw: floats 0..255; divided: already scaled to [0, 1]; uint8: the bytes themselves
x = {"raw": x.astype("float32"), "divided": x.astype("float32") / 255, "uint8": x.astype("uint8")}[fed]
layers = [keras.Input((8, 8, 3))] + ([keras.layers.Rescaling(1 / 255)] if rescaled else [])
model = keras.Sequential(layers + [  # Rescaling first: keras.io's image classification examples
    keras.layers.Conv2D(8, 3, activation="relu"),
    keras.layers.GlobalAveragePooling2D(),
    keras.layers.Dense(3),
])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=[mldbg.keras.Hook(out)])
"""


def _keras_images(path, fed: str, rescaled: bool) -> list:
    """The findings of `not_normalized_data` on a Keras CNN fed pixels as `fed` says, with or
    without `Rescaling(1 / 255)` as its first layer."""
    return mldbg.check(
        _keras_script(path, KERAS_IMAGES, fed, "1" if rescaled else "0"), rules=["not_normalized_data"]
    )


def test_judges_images_as_a_rescaling_layer_passes_them_on(tmp_path):
    """Raw pixels (0..255) fed to a Keras model whose first layer is `Rescaling(1 / 255)`, as
    keras.io's image examples do: its first learned layer sees [0, 1] (the rule fired on
    the raw pixels before). The same model fed pixels already divided by 255 sees them
    divided twice: reported."""
    found = _keras_images(tmp_path / "raw", "raw", rescaled=True)
    assert not found, "\n".join(map(str, found))
    found = _keras_images(tmp_path / "twice", "divided", rescaled=True)
    assert found and "model_input_0" in found[0].tensors and "std" in found[0].message, found


@pytest.mark.parametrize("scale", [1.0, 255.0], ids=["images in [0, 1]", "images fed as 0..255"])
def test_registered_module_dict_records_its_parts(tmp_path, scale):
    """A detector kept in an nn.ModuleDict (no forward of its own) whose parts the script calls
    one by one (`backbone(x)`, then the heads): the hook records through the part called first,
    so the 0..255 images are caught (nothing was recorded at all before) and [0, 1] ones are not;
    the heads' layers still record inside the step."""
    from mldbg.torch import Hook

    g = torch.Generator().manual_seed(0)
    images = (torch.rand(256, 1, 8, 8, generator=g) < 0.3).float()  # blobs on black, [0, 1]
    target = images.mean((1, 2, 3))[:, None]
    backbone = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU()
    )
    head = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8 * 64, 1))
    model = torch.nn.ModuleDict(dict(backbone=backbone, head=head))
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(40):
        i = torch.randint(0, 256, (16,), generator=g)
        loss = torch.nn.functional.mse_loss(head(backbone(images[i] * scale)), target[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    trial = mldbg.create_trial(str(tmp_path))
    assert "model_input_0" in trial.tensor_names(collection="inputs")
    assert len(trial.steps()) >= 30
    found = mldbg.check(str(tmp_path), rules=["not_normalized_data"])
    assert bool(found) == (scale > 1), "\n".join(map(str, found))


@pytest.mark.parametrize("spread", [0.0, 0.01], ids=["constant fill", "fill with a spread"])
@pytest.mark.parametrize("default_hook", [False, True], ids=["raw inputs", "the hook's channel statistics"])
def test_a_constant_fill_value_is_not_a_feature_to_standardize(tmp_path, default_hook, spread):
    """Log-magnitudes of signals zero-padded after a burst: the padded positions hold log(1e-3)
    = -6.9 in every sample, a constant the moments give a std of rounding (~1e-7), not a spread:
    quiet. The same positions holding the -6.9 plus a real spread of 0.01 are judged and fire."""
    from mldbg import SaveConfig
    from mldbg.torch import Hook

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    raw = dict(save_config=SaveConfig(save_interval=1), include_collections=["inputs"])
    hook = Hook(str(tmp_path), **({} if default_hook else raw))
    hook.register_module(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(30):
        signal = torch.randn(32, 10)
        fill = torch.full((32, 6), 1e-3).log() + spread * torch.randn(32, 6)
        loss = torch.nn.functional.cross_entropy(
            model(torch.cat([signal, fill], 1)), (signal[:, 0] > 0).long()
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    found = mldbg.check(str(tmp_path), rules=["not_normalized_data"])
    assert bool(found) == (spread > 0), "\n".join(map(str, found))


class _Denoiser(torch.nn.Module):
    """EDM's preconditioned denoiser (Karras et al. 2022): D(x, sigma) = c_skip x + c_out
    F(c_in x, log sigma), c_in = 1 / sqrt(sigma^2 + sigma_data^2): it scales its input itself."""

    def __init__(self, sigma_data: float = 0.5) -> None:
        super().__init__()
        self.sigma_data = sigma_data
        self.net = torch.nn.Sequential(torch.nn.Linear(3, 32), torch.nn.SiLU(), torch.nn.Linear(32, 2))

    def forward(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        sd = self.sigma_data
        c_in = 1 / (sigma**2 + sd**2).sqrt()
        c_skip, c_out = sd**2 / (sigma**2 + sd**2), sigma * sd / (sigma**2 + sd**2).sqrt()
        return c_skip * x + c_out * self.net(torch.cat([c_in * x, sigma.log() / 4], 1))


@pytest.mark.parametrize("data_scale", [0.5, 100.0], ids=["data std 0.5", "data x100"])
def test_inputs_noised_to_a_given_noise_level_are_the_design(tmp_path, data_scale):
    """x + sigma z with sigma from 0.002 to 80 (Karras' schedule, rho = 7) and sigma given to
    the model as a (N, 1) input (blind5's consistency model): the noisy input's std is ~25-60,
    its variance at each step the data's plus the batch's mean sigma^2; the model scales it by
    c_in. Quiet (the old rule fired on it: 'std > 5', and would on sigma too). The same noise
    on data scaled by 100 leaves a data part far above unit variance: fires, on the data input."""
    from mldbg.torch import Hook

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = _Denoiser()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    ramp = torch.linspace(0, 1, 40)
    sigmas = (0.002 ** (1 / 7) + ramp * (80 ** (1 / 7) - 0.002 ** (1 / 7))) ** 7
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    for _ in range(20):
        angle = torch.rand(128, generator=g) * 3.14
        x0 = data_scale * torch.stack([angle.cos(), angle.sin() - 0.5], 1)
        sigma = sigmas[torch.randint(0, 40, (128, 1), generator=g)]
        loss = ((model(x0 + sigma * torch.randn(128, 2, generator=g), sigma) - x0) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    found = mldbg.check(str(tmp_path), rules=["not_normalized_data"])
    if data_scale < 1:
        assert not found, "\n".join(map(str, found))
    else:
        assert found and found[0].tensors == ["model_input_0"], "\n".join(map(str, found))


def _forecaster(path, scaling: str | None, steps: int = 30):
    """A tiny Hugging Face `TimeSeriesTransformerForPrediction` trained as its docs show: raw
    demand series (levels 100-300) as `past_values`, the horizon as `future_values` (its
    labels), called by keywords with the README's two lines. `scaling`: the config's ("mean",
    its default: the model divides each series by its mean before any layer; None: no
    scaler, the raw values reach the first layer)."""
    from transformers import TimeSeriesTransformerConfig, TimeSeriesTransformerForPrediction

    import mldbg.torch

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    context, horizon, lags = 14, 7, [1, 2, 7]
    past = context + max(lags)
    t = torch.arange(past + horizon).float()
    level = 100 + 200 * torch.rand(64, 1, generator=g)
    series = level * (1 + 0.3 * torch.sin(2 * torch.pi * t / 7)) + 5 * torch.randn(64, len(t), generator=g)
    features = (t / len(t)).expand(64, len(t)).unsqueeze(-1)
    config = TimeSeriesTransformerConfig(
        prediction_length=horizon, context_length=context, lags_sequence=lags, num_time_features=1,
        scaling=scaling, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16,
    )  # fmt: skip
    model = TimeSeriesTransformerForPrediction(config)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with mldbg.torch.Hook(str(path)) as hook:
        hook.register_module(model)
        for step in range(steps):
            idx = torch.arange(step * 16, step * 16 + 16) % 64
            out = model(
                past_values=series[idx, :past], past_time_features=features[idx, :past],
                past_observed_mask=torch.ones(16, past), future_values=series[idx, past:],
                future_time_features=features[idx, past:],
            )  # fmt: skip
            opt.zero_grad()
            out.loss.backward()
            opt.step()
    return mldbg.create_trial(str(path))


@pytest.mark.parametrize("scaling", ["mean", None], ids=["scaled by the model", "no scaler"])
def test_a_time_series_model_that_scales_its_raw_input_is_not_reported(tmp_path, scaling):
    """The model's input is `past_values` (not `future_values`, its labels, which the hook
    took for its input before), raw as the model expects them: it divides each series by its
    mean first (`inputs_scaled/model`), so nothing is reported. Without its scaler the same
    raw values reach the first layer: reported."""
    trial = _forecaster(tmp_path / "run", scaling)
    assert tuple(trial.record("model_input_0", 0).shape) == (16, 21)  # past_values, not the horizon's 7
    assert trial.has_tensor("inputs_scaled/model") == (scaling is not None)
    found = mldbg.check(str(tmp_path / "run"), rules=["not_normalized_data"])
    assert bool(found) == (scaling is None), "\n".join(map(str, found))


def test_judges_uint8_images_a_keras_model_takes_as_they_are(tmp_path):
    """uint8 pixels fed to a Keras CNN reach its first convolution as they are (Keras casts
    them to floats): without a `Rescaling` layer they are reported (integer inputs had all
    been taken for token ids); with `Rescaling(1 / 255)` first they are not."""
    found = _keras_images(tmp_path / "raw", "uint8", rescaled=False)
    assert found and "model_input_0" in found[0].tensors and "std" in found[0].message, found
    found = _keras_images(tmp_path / "scaled", "uint8", rescaled=True)
    assert not found, "\n".join(map(str, found))


class _Detector(torch.nn.Module):
    """A detector in YOLOX's and torchvision's shape: `forward(images, targets)` computes its
    own loss from the boxes it is given, in pixels (centre, size: 2-30)."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, 2, 1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()
        )
        self.head = torch.nn.Linear(8, 4)

    def forward(self, images: torch.Tensor, targets: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        boxes = self.head(self.backbone(images))
        if targets is None:
            return {"boxes": boxes}
        return {"total_loss": torch.nn.functional.smooth_l1_loss(boxes, targets / 32)}


@pytest.mark.parametrize("pixels", [1.0, 255.0], ids=["images in [0, 1]", "images 0-255"])
def test_the_targets_a_model_is_given_are_no_input_to_standardize(tmp_path, pixels):
    """The boxes a detector takes in its forward (`model(images, targets)`: a parameter named
    `targets`) are its labels, in pixels: not recorded as an input, not judged; the images
    are (the twin fed raw 0-255 pixels still fires, on model_input_0)."""
    from mldbg.torch import Hook

    torch.manual_seed(0)
    model = _Detector()
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    for _ in range(30):
        images = torch.rand(16, 3, 16, 16) * pixels
        targets = torch.cat([torch.rand(16, 2) * 28 + 2, torch.rand(16, 2) * 20 + 4], 1)
        loss = model(images, targets)["total_loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    assert not mldbg.create_trial(str(tmp_path)).has_tensor("model_input_1")
    found = mldbg.check(str(tmp_path), rules=["not_normalized_data"])
    assert [f.tensors for f in found] == ([["model_input_0"]] if pixels > 1 else []), "\n".join(
        map(str, found)
    )


class _SeriesModel(torch.nn.Module):
    """A forecaster of raw demand series (levels 100-500) that does `inside` to them before its
    first learned layer: "level" divides each by its mean (ES-RNN, RevIN written inline),
    "pad" only pads them (a copy, the same scale), "batchnorm" starts with a BatchNorm, "none"
    feeds them as they are."""

    def __init__(self, inside: str):
        super().__init__()
        self.inside = inside
        self.norm = torch.nn.BatchNorm1d(24) if inside == "batchnorm" else None
        self.net = torch.nn.Sequential(
            torch.nn.Linear(25 if inside == "pad" else 24, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)
        )

    def forward(self, x):
        if self.inside == "level":
            x = x / x.mean(1, keepdim=True) - 1
        elif self.inside == "pad":
            x = torch.nn.functional.pad(x, (0, 1))
        elif self.norm is not None:
            x = self.norm(x)
        return self.net(x)


@pytest.mark.parametrize("inside", ["level", "batchnorm", "pad", "none"])
def test_judged_as_the_first_learned_layer_sees_the_input(tmp_path, inside):
    """A model that standardizes its raw input itself before its first learned layer is fine
    (blind25's ES-RNN and learned optimizer were reported on their raw inputs); a copy of the
    raw values (padded) or the raw values themselves are still reported."""
    from mldbg.torch import Hook

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = _SeriesModel(inside)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    t = torch.arange(25).float()
    with Hook(str(tmp_path)) as hook:
        hook.register_module(model)
        for _ in range(20):
            level = 100 + 400 * torch.rand(64, 1, generator=g)
            series = level * (1 + 0.2 * torch.sin(t / 3 + torch.rand(64, 1, generator=g) * 6))
            loss = ((model(series[:, :24]) - series[:, 24:] / level) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    found = mldbg.check(str(tmp_path), rules=["not_normalized_data"])
    assert bool(found) == (inside in ("pad", "none")), "\n".join(map(str, found))
    if inside == "pad":
        assert "first learned layer" in found[0].message and found[0].tensors == ["model_input_0"]


@pytest.mark.parametrize("units", [1.0, 1000.0], ids=["scaled curves", "raw units x1000"])
def test_a_conv1d_input_is_judged_per_channel_not_per_position(tmp_path, units):
    """A battery's discharge curves, dQ(V) at 100 voltages, fed to a 1-D CNN as (N, 1, 100)
    after dividing by one global std (Severson et al.): the curve's shape moves its mean from
    -3.7 to +1 along the voltages, which read as 100 features of a sequence (N, T, F) was one
    feature off by 3.7 std. The first learned layer is a Conv1d: the input is channels-first,
    one channel of mean ~-0.7 and std ~1.5: quiet. The same curves in raw units (x1000) fire.
    Recorded with the two lines, whose per-channel statistics follow the first layer."""
    from mldbg.torch import Hook

    torch.manual_seed(0)
    volts = torch.linspace(0, 1, 100)
    shape = -3.7 * torch.exp(-(((volts - 0.3) / 0.08) ** 2)) + torch.sin(6 * volts)  # the curve's form
    model = torch.nn.Sequential(
        torch.nn.Conv1d(1, 8, 5), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool1d(1), torch.nn.Flatten(),
        torch.nn.Linear(8, 1),
    )  # fmt: skip
    hook = Hook(str(tmp_path))
    hook.register_module(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(30):
        life = torch.rand(32, 1)
        x = (shape * (1 + 0.3 * life) + 0.1 * torch.randn(32, 100)).unsqueeze(1) * units
        loss = torch.nn.functional.mse_loss(model(x), life)
        opt.zero_grad()
        loss.backward()
        opt.step()
    hook.close()
    found = mldbg.check(str(tmp_path), rules=["not_normalized_data"])
    assert bool(found) == (units > 1), "\n".join(map(str, found))
