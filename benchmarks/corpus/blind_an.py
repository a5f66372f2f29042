"""The thirty-third blind held-out set (issue 26), part AN: energy, industry and the environment
as practitioners in those fields write their PyTorch training scripts, plain loops with the
README's two lines (`register_loss` where the script has a loss module), each in the shape of
its field's papers, on tasks the earlier sets did not train (they had a Keras load forecaster
with embeddings, a Flax irradiance nowcaster from clear-sky features, LSTNet on electricity, a
ConvLSTM radar nowcaster, Deep SVDD on vibration features and a hurdle model of daily rainfall):
tiny models on data generated in-process with the fields' structure, fixed seeds, one CPU thread.

Energy: day-ahead probabilistic load forecasting in the GEFCom style (calendar, temperature and
its square, the loads a day and a week earlier into an MLP whose three outputs are the 10th,
50th and 90th percentiles under a `PinballLoss` module; test MAPE about 4.3 % against the
seasonal naive forecast's 8.8 %, the 80 % interval covering 76 %); non-intrusive load monitoring
by sequence-to-point learning (a CNN from 59 minutes of mains power, with a fridge, a washing
machine, a microwave and a cycling hob as confounders, to the kettle's power at the midpoint;
test MAE about 10 W against 23 W for always-off and an on-state F1 of 0.93); PV nowcasting from
pairs of 16 x 16 all-sky frames with drifting clouds (a CNN with BatchNorm and dropout to the
clear-sky index ten minutes ahead, validated in eval mode each epoch; forecast skill about 0.21
over smart persistence); a wind turbine's normal-behaviour autoencoder on eight SCADA channels
(a tapering ELU MLP with a 3-unit code under `nn.MSELoss`; its reconstruction error flags a
month of a developing gearbox-bearing fault with a six-hour AUC of 0.88, against 0.82 for three
principal components); battery cycle life from the first hundred cycles of LFP cells as
Severson et al. (a 1-D CNN on Q100(V) - Q10(V) to log10 cycle life; test error about 5.5 %,
as good as the paper's one-feature variance model and far from the mean life's 31 %).

Industry: turbofan remaining useful life on C-MAPSS-like run-to-failure histories of 14 sensors
(min-max scaled windows of 30 cycles, the piecewise-linear RUL capped at 125, a 1-D CNN in the
manner of Li, Ding and Sun; test RMSE about 20 cycles against 37 for the mean RUL); rolling-
bearing fault diagnosis on CWRU-like records (impacts at the outer-race, inner-race and ball
defect frequencies ringing a resonance in noise; squared-envelope spectra by the FFT Hilbert
transform into a 1-D CNN; test accuracy about 85 % over four classes); a debutanizer soft
sensor (seven correlated process measurements at lags 0-4, already in [0, 1] as in Fortuna's
data, to the butane content by an MLP; test R2 about 0.97 against 0.91 for a PLS-like
regression on eight principal components).

Environment and health: regional rainfall-runoff modelling in the style of Kratzert et al. (one
LSTM over eight conceptual-model basins, forcings and static attributes, the basin-normalized
`NSELoss`; median test NSE about 0.75 against 0.17 for the day-of-year climatology); six-hour
PM2.5 forecasting for six monitors with blocks of missing hours (a GRU on values, the mask and
the hours since the last reading, a `MaskedMSELoss` over the observed targets; test RMSE 15-19
ug/m3 across the leads against 18-39 for persistence); county crop yield from 23 NDVI
composites and the season's weather (a convolution and an LSTM with a county embedding and the
year; test RMSE about 0.58 t/ha, R2 0.85, against 0.72 t/ha for the county mean plus trend);
an SEIR-informed epidemic forecast (an SEIR model unrolled in torch whose transmission rate is
an MLP of mobility, stringency, temperature and the weekend, fitted to 150 days of reported
cases under `nn.PoissonNLLLoss(log_input=False)`, whose values are large and negative for
counts in the thousands, in two stages, the epidemiological parameters first with the MLP
frozen; the 30-day forecast MAE about 360 cases a day against 455 for the last week's mean).

Ten buggy twins, one each of the ten keys of `BUGS`, injected the way the mistake appears in
such a script: the turbofan CNN fed the raw sensor columns in degrees Rankine, psia and rpm
(inputs_x255; its test RMSE is no better than the mean RUL's); the bearing CNN returning
`torch.softmax` into `nn.CrossEntropyLoss` (softmax_before_ce; its loss stays near 0.85
against the healthy 0.23 while the accuracy ends close to the healthy run's); the SCADA
autoencoder with sigmoids in its nine hidden layers "for a bounded code" (deep_sigmoid; the
reconstruction error stays near 0.55, the AUC 0.60); the PV CNN's `model.train()` once above
the epoch loop while the validation pass sets eval mode, so from the second epoch it trains
without dropout and on BatchNorm's running statistics (train_in_eval_mode; a lower training
loss, a worse validation and test error); the runoff script log-transforming the skewed
precipitation, so the dry days' log(0) make every input, loss and gradient NaN (log_zero_nan);
the kettle's sub-meter on summer time while the mains are on UTC, so the targets are an hour
off the windows (shuffled_labels; the loss stays near its start, F1 zero); the PM2.5 GRU's
Adam at 2e-1 typed for 2e-3 (lr_x100; a noisier, higher loss and a worse test error at every
lead); the soft sensor initialized by an old TensorFlow script's rule with the ReLU biases'
+0.1 typed as -0.1 on weights of standard deviation 0.01, so every unit is dead from the start
(dead_relu_init; R2 below zero); the SEIR script unfreezing the transmission MLP by the name it
had before a rename (`beta_net`), so it stays frozen through the second stage
(frozen_by_mistake; the in-sample MAE four times the healthy run's); the crop-yield loop
without `optimizer.zero_grad()` (no_zero_grad; the loss ends near 0.9, test R2 below zero).

Written without ever running mldbg's rules on them; health was checked from the losses and each
field's own metrics alone. Only torch and numpy are needed. `SPLIT = BLIND32`.
"""

from __future__ import annotations

import math
import random

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from mldbg.torch import Hook

from . import BLIND32, buggy, healthy

SPLIT = BLIND32

torch.set_num_threads(1)


def _seed(seed: int) -> np.random.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return np.random.default_rng(seed + 3201)


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(a, dtype=torch.float32)


def _auc(score: np.ndarray, y: np.ndarray) -> float:
    """The area under the ROC curve by the rank-sum (Mann-Whitney) formula."""
    ranks = np.empty(len(score))
    ranks[np.argsort(score)] = np.arange(1, len(score) + 1)
    n_pos = y.sum()
    n_neg = len(y) - n_pos
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


# ============================================================================= electricity load (quantiles)


class PinballLoss(nn.Module):
    """The quantile (pinball) loss averaged over the quantiles, as GEFCom entries write it."""

    def __init__(self, quantiles: tuple[float, ...]) -> None:
        super().__init__()
        self.register_buffer("q", torch.tensor(quantiles))

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        err = target.unsqueeze(1) - pred
        return torch.maximum(self.q * err, (self.q - 1) * err).mean()


def _system_load(rng: np.random.Generator, n_days: int) -> tuple[np.ndarray, np.ndarray]:
    """Hourly system load (MW) and temperature (deg C) of a mid-latitude utility: a daily profile
    with a morning and an evening peak, lower at weekends and holidays, heating below 15 deg C
    and cooling above 22, a slow growth, and AR(1) noise."""
    hours = np.arange(n_days * 24)
    hod, day = hours % 24, hours // 24
    dow = day % 7
    season = -np.cos(2 * np.pi * (day - 15) / 365.25)
    temp = 12 - 10 * season + 5 * np.sin(2 * np.pi * (hod - 9) / 24)
    weather = np.zeros(len(hours))
    for t in range(1, len(hours)):
        weather[t] = 0.995 * weather[t - 1] + 0.35 * rng.standard_normal()
    temp = temp + weather
    profile = 0.75 + 0.18 * np.exp(-((hod - 8.5) ** 2) / 4) + 0.25 * np.exp(-((hod - 18.5) ** 2) / 6)
    profile -= 0.2 * (hod < 6)
    weekend = (dow >= 5) | (rng.random(n_days) < 0.03)[day]
    profile = profile * np.where(weekend, 0.85, 1.0)
    thermal = 0.025 * np.maximum(15 - temp, 0) + 0.03 * np.maximum(temp - 22, 0) ** 1.2
    noise = np.zeros(len(hours))
    for t in range(1, len(hours)):
        noise[t] = 0.9 * noise[t - 1] + 0.012 * rng.standard_normal()
    load = 5000 * (profile + thermal + noise) * (1 + 0.05 * day / 365)
    return load, temp


def load_forecast_quantile_mlp(
    path: str, epochs: int = 15, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Day-ahead probabilistic load forecasting in the GEFCom style: for each hour, the hour of
    day (sine and cosine), the day of week (one-hot), a holiday-free weekend flag, the forecast
    temperature and its square, and the loads of the same hour a day and a week earlier
    (standardized) go into an MLP of 64 and 64 ReLU units that outputs the 10th, 50th and 90th
    percentiles, trained by a `PinballLoss` module, Adam 1e-3, batches of 128, 300 days to train
    and the last 60 to test. The field's metric is the median's MAPE against the seasonal naive
    forecast (the load a week earlier), and the 80 % interval's coverage."""
    rng = _seed(seed)
    n_days = 368
    load, temp = _system_load(rng, n_days)
    hours = np.arange(len(load))
    hod, dow = hours % 24, (hours // 24) % 7
    idx = np.arange(168, len(load))
    l_mu, l_sd, t_mu, t_sd = load.mean(), load.std(), temp.mean(), temp.std()
    tz = (temp - t_mu) / t_sd
    feats = np.column_stack(
        [
            np.sin(2 * np.pi * hod[idx] / 24),
            np.cos(2 * np.pi * hod[idx] / 24),
            np.eye(7)[dow[idx]],
            tz[idx],
            tz[idx] ** 2,
            (load[idx - 24] - l_mu) / l_sd,
            (load[idx - 168] - l_mu) / l_sd,
        ]
    )
    target = (load[idx] - l_mu) / l_sd
    n_tr = 300 * 24 - 168
    x, y = _t(feats), _t(target)
    quantiles = (0.1, 0.5, 0.9)
    model = nn.Sequential(
        nn.Linear(feats.shape[1], 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3)
    )
    loss_fn = PinballLoss(quantiles)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        perm = torch.randperm(n_tr)
        for i in range(0, n_tr, 128):
            b = perm[i : i + 128]
            optimizer.zero_grad()
            loss = loss_fn(model(x[b]), y[b])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: pinball {np.mean(losses[-55:]):.4f}")
    with torch.no_grad():
        q = model(x[n_tr:]).numpy() * l_sd + l_mu
    actual = load[idx][n_tr:]
    naive = load[idx - 168][n_tr:]
    mape = np.mean(np.abs(q[:, 1] - actual) / actual) * 100
    cover = np.mean((actual >= q[:, 0]) & (actual <= q[:, 2]))
    print(
        f"test MAPE {mape:.2f}% (seasonal naive {np.mean(np.abs(naive - actual) / actual) * 100:.2f}%), "
        f"80% interval coverage {cover:.3f}"
    )
    hook.close()
    return losses


# ============================================================================= turbofan RUL (C-MAPSS-like)

# 14 informative sensors of C-MAPSS FD001 with their typical raw levels and units:
# T24, T30, T50 (deg R), P30 (psia), Nf, Nc (rpm), Ps30 (psia), phi, NRf, NRc, BPR, htBleed,
# W31, W32 (lbm/s); and how each drifts as the engine degrades (in its own units)
_SENSOR_LEVEL = np.array(
    [642.7, 1590.5, 1408.9, 553.4, 2388.1, 9065.2, 47.5, 521.4, 2388.1, 8143.8, 8.44, 393.2, 38.8, 23.3]
)
_SENSOR_DRIFT = np.array([1.2, 12.0, 22.0, -2.3, 0.25, 45.0, 1.0, -2.2, 0.25, 40.0, 0.12, 4.5, -0.6, -0.35])
_SENSOR_NOISE = np.array([0.5, 6.0, 9.0, 0.9, 0.07, 22.0, 0.27, 0.7, 0.07, 19.0, 0.037, 1.5, 0.18, 0.11])


def _turbofan_fleet(rng: np.random.Generator, n_engines: int) -> list[tuple[np.ndarray, int]]:
    """Run-to-failure sensor histories: each engine's health index falls exponentially after an
    unknown onset, its sensors drift with it plus measurement noise, and the engine fails when
    the index reaches one."""
    out = []
    for _ in range(n_engines):
        life = int(rng.integers(130, 330))
        t = np.arange(life)
        rate = rng.uniform(3.0, 6.0) / life
        wear = np.exp(rate * (t - life))  # 1 at failure
        wear = (wear - wear[0]) / (1 - wear[0])
        offset = rng.normal(0, 0.3, 14) * _SENSOR_NOISE
        raw = (
            _SENSOR_LEVEL
            + offset
            + np.outer(wear, _SENSOR_DRIFT)
            + rng.standard_normal((life, 14)) * _SENSOR_NOISE
        )
        out.append((raw, life))
    return out


def turbofan_rul_cnn_windows(
    path: str, epochs: int = 10, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Remaining-useful-life regression on C-MAPSS-like run-to-failure data in the manner of Li,
    Ding and Sun's 1-D CNN: 14 sensors min-max scaled on the training engines, windows of the
    last 30 cycles, the target the piecewise-linear RUL capped at 125 cycles, three 1-D
    convolutions (10 filters of 10 cycles, tanh) and a dense head, `nn.MSELoss`, Adam 1e-3, 60
    engines to train; the test engines are cut at a random cycle and scored on their last
    window by RMSE and the PHM08 score against the mean-RUL forecast."""
    rng = _seed(seed)
    fleet = _turbofan_fleet(rng, 80)
    train, test = fleet[:60], fleet[60:]
    stacked = np.concatenate([raw for raw, _ in train])
    lo, hi = stacked.min(0), stacked.max(0)

    def scale(raw: np.ndarray) -> np.ndarray:
        if bug == "inputs_x255":  # bug: the raw sensor columns (deg R, psia, rpm) straight into the CNN
            return raw
        return 2 * (raw - lo) / (hi - lo) - 1

    win = 30
    xs, ys = [], []
    for raw, life in train:
        s = scale(raw)
        for end in range(win, life + 1):
            xs.append(s[end - win : end])
            ys.append(min(125, life - end))
    x, y = _t(np.stack(xs)).transpose(1, 2), _t(np.array(ys, dtype=float) / 125).unsqueeze(1)
    model = nn.Sequential(
        nn.Conv1d(14, 10, 9, padding=4), nn.Tanh(),
        nn.Conv1d(10, 10, 9, padding=4), nn.Tanh(),
        nn.Conv1d(10, 1, 3, padding=1), nn.Tanh(),
        nn.Flatten(), nn.Dropout(0.2), nn.Linear(win, 64), nn.Tanh(), nn.Linear(64, 1),
    )  # fmt: skip
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(x))
        for i in range(0, len(x), 256):
            b = perm[i : i + 256]
            optimizer.zero_grad()
            loss = loss_fn(model(x[b]), y[b])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(
            f"epoch {epoch}: MSE {np.mean(losses[-40:]):.4f} (RMSE {np.sqrt(np.mean(losses[-40:])) * 125:.1f} cycles)"
        )
    model.eval()
    tx, ty = [], []
    for raw, life in test:
        cut = int(rng.integers(win + 10, life))
        tx.append(scale(raw)[cut - win : cut])
        ty.append(min(125, life - cut))
    with torch.no_grad():
        pred = model(_t(np.stack(tx)).transpose(1, 2)).squeeze(1).numpy() * 125
    ty_a = np.array(ty, dtype=float)
    d = pred - ty_a
    score = np.sum(np.where(d < 0, np.exp(-d / 13) - 1, np.exp(d / 10) - 1))
    base = np.mean(ys) - ty_a
    print(
        f"test RMSE {np.sqrt(np.mean(d**2)):.1f} cycles, score {score:.0f} (mean-RUL forecast "
        f"{np.sqrt(np.mean(base**2)):.1f} cycles)"
    )
    hook.close()
    return losses


# ============================================================================= bearing faults (envelope spectra)

_FS = 12000.0  # samples per second, as the CWRU drive-end accelerometer
_SHAFT = 29.95  # Hz, 1797 rpm
_FAULT_HZ = {1: 3.585 * _SHAFT, 2: 5.415 * _SHAFT, 3: 2.357 * _SHAFT}  # BPFO, BPFI, BSF of a 6205 bearing


def _vibration(rng: np.random.Generator, label: int, n: int = 4096) -> np.ndarray:
    """A drive-end acceleration record: shaft harmonics, broadband noise and, for a faulty
    bearing, a train of impacts at the fault's characteristic frequency (with slip jitter)
    ringing a structural resonance near 3 kHz; the inner-race impacts are amplitude-modulated
    by the shaft rotation, the ball's by the cage."""
    t = np.arange(n) / _FS
    x = 0.05 * np.sin(2 * np.pi * _SHAFT * t + rng.uniform(0, 6.3)) + 0.02 * np.sin(4 * np.pi * _SHAFT * t)
    x = x + rng.uniform(0.15, 0.3) * rng.standard_normal(n)
    if label:
        f = _FAULT_HZ[label] * rng.uniform(0.98, 1.02)
        period = _FS / f
        ring = np.exp(-np.arange(120) / 18.0) * np.sin(
            2 * np.pi * rng.uniform(2800, 3400) / _FS * np.arange(120)
        )
        amp = rng.uniform(0.25, 0.6)
        pos = rng.uniform(0, period)
        while pos < n - 120:
            k = int(pos)
            a = amp * (1 + rng.normal(0, 0.1))
            if label == 2:
                a *= 1 + 0.6 * np.cos(2 * np.pi * _SHAFT * k / _FS)
            elif label == 3:
                a *= 1 + 0.6 * np.cos(2 * np.pi * 0.398 * _SHAFT * k / _FS)
            x[k : k + 120] += a * ring
            pos += period * (1 + rng.normal(0, 0.01))
    return x


def _envelope_spectrum(x: np.ndarray, n_bins: int = 256) -> np.ndarray:
    """The squared-envelope spectrum: the analytic signal by the FFT (the Hilbert transform),
    its squared magnitude less its mean, and the magnitude of its spectrum up to 750 Hz."""
    n = x.shape[-1]
    spec = np.fft.fft(x, axis=-1)
    h = np.zeros(n)
    h[0], h[n // 2] = 1, 1
    h[1 : n // 2] = 2
    env = np.abs(np.fft.ifft(spec * h, axis=-1)) ** 2
    env = env - env.mean(-1, keepdims=True)
    return np.abs(np.fft.rfft(env, axis=-1))[..., 1 : n_bins + 1] / n


class _EnvelopeCNN(nn.Module):
    def __init__(self, n_classes: int = 4, softmax_out: bool = False) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 16, 7, padding=3), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(16, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(32, 32, 3, padding=1), nn.BatchNorm1d(32), nn.ReLU(), nn.AdaptiveMaxPool1d(8),
        )  # fmt: skip
        self.head = nn.Linear(32 * 8, n_classes)
        self.softmax_out = softmax_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.head(self.features(x).flatten(1))
        return torch.softmax(out, dim=1) if self.softmax_out else out


def bearing_fault_envelope_cnn(
    path: str, epochs: int = 10, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Rolling-bearing fault diagnosis on CWRU-like drive-end records (normal, outer race, inner
    race, ball; 12 kHz, 0.34 s segments, faults of varying severity in broadband noise): each
    segment's squared-envelope spectrum up to 1.5 kHz, log-compressed and standardized, into a
    1-D CNN of three convolution blocks with BatchNorm, `nn.CrossEntropyLoss`, Adam 1e-3,
    batches of 32, 800 segments to train and 400 to test. The field's metric is the test
    accuracy and the per-class recall (chance 25 %)."""
    rng = _seed(seed)
    labels = np.repeat(np.arange(4), 300)
    rng.shuffle(labels)
    spectra = np.log1p(1e3 * _envelope_spectrum(np.stack([_vibration(rng, int(c)) for c in labels])))
    mu, sd = spectra[:800].mean(), spectra[:800].std()
    x, y = _t((spectra - mu) / sd).unsqueeze(1), torch.as_tensor(labels)
    model = _EnvelopeCNN(softmax_out=bug == "softmax_before_ce")  # bug: the probabilities into the CE loss
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(800)
        for i in range(0, 800, 32):
            b = perm[i : i + 32]
            optimizer.zero_grad()
            loss = loss_fn(model(x[b]), y[b])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: CE {np.mean(losses[-25:]):.4f}")
    model.eval()
    with torch.no_grad():
        pred = model(x[800:]).argmax(1).numpy()
    yt = labels[800:]
    recall = [np.mean(pred[yt == c] == c) for c in range(4)]
    print(f"test accuracy {np.mean(pred == yt):.3f} (chance 0.25), recall normal/outer/inner/ball "
          f"{' '.join(f'{r:.2f}' for r in recall)}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= wind-turbine SCADA (normal behaviour)


def _scada(rng: np.random.Generator, n: int, gearbox_fault: float = 0.0) -> np.ndarray:
    """Ten-minute SCADA records of a 2 MW turbine: wind speed (Weibull, diurnal), the power curve
    (cut-in 3.5, rated 12.5 m/s) with scatter, rotor speed, blade pitch above rated, ambient,
    nacelle, generator-winding and gearbox-bearing temperatures that lag the load. A gearbox
    fault adds `gearbox_fault` deg C of bearing heating at a given load."""
    k = np.arange(n)
    ws = rng.weibull(2.0, n) * 8.5 * (1 + 0.15 * np.sin(2 * np.pi * k / 144))
    ws = np.convolve(ws, np.ones(6) / 6, mode="same")
    cp = np.clip((ws - 3.5) / (12.5 - 3.5), 0, 1) ** 2.6
    power = np.where(ws > 25, 0.0, 2000 * cp) * (1 + 0.04 * rng.standard_normal(n))
    rotor = np.clip(6 + 11 * np.clip((ws - 3.5) / 8, 0, 1), 0, 16.8) + 0.2 * rng.standard_normal(n)
    pitch = np.clip((ws - 12.5) * 1.8, 0, 25) + 0.3 * rng.standard_normal(n)
    ambient = (
        10 + 8 * np.sin(2 * np.pi * k / (144 * 60)) + 3 * np.sin(2 * np.pi * k / 144) + rng.normal(0, 0.5, n)
    )
    load = np.convolve(power / 2000, np.exp(-np.arange(12) / 4) / 3.4, mode="full")[:n]
    nacelle = ambient + 8 + 6 * load + rng.normal(0, 0.6, n)
    gen = ambient + 25 + 45 * load + rng.normal(0, 1.5, n)
    gear = ambient + 20 + 30 * load + gearbox_fault * (0.5 + load) + rng.normal(0, 1.0, n)
    return np.column_stack([ws, power, rotor, pitch, ambient, nacelle, gen, gear])


def wind_scada_normal_behaviour_autoencoder(
    path: str, epochs: int = 12, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A normal-behaviour model for wind-turbine condition monitoring: an autoencoder (8 SCADA
    channels standardized on a healthy year, a tapering MLP of 32-24-16-8-3-8-16-24-32 ELU units)
    trained by `nn.MSELoss` to reconstruct healthy ten-minute records, Adam 1e-3, batches of
    128. Its reconstruction error then scores a month of the same turbine healthy and a month of
    a developing gearbox-bearing fault (+7 deg C at full load); the field's metric is the anomaly
    score's AUC against the error of three principal components."""
    rng = _seed(seed)
    train = _scada(rng, 12000)
    healthy_m, faulty_m = _scada(rng, 2000), _scada(rng, 2000, gearbox_fault=7.0)
    mu, sd = train.mean(0), train.std(0)
    x = _t((train - mu) / sd)
    act = nn.Sigmoid if bug == "deep_sigmoid" else nn.ELU  # bug: sigmoids "for a bounded code"
    widths = [8, 32, 24, 16, 8, 3, 8, 16, 24, 32]
    layers: list[nn.Module] = []
    for a, b in zip(widths[:-1], widths[1:], strict=True):
        layers += [nn.Linear(a, b), act()]
    model = nn.Sequential(*layers, nn.Linear(32, 8))
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        perm = torch.randperm(len(x))
        for i in range(0, len(x), 128):
            b = perm[i : i + 128]
            optimizer.zero_grad()
            loss = loss_fn(model(x[b]), x[b])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: reconstruction MSE {np.mean(losses[-94:]):.4f}")
    _, _, vt = np.linalg.svd(x.numpy(), full_matrices=False)
    p = vt[:3].T @ vt[:3]

    def scores(month: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        z = (month - mu) / sd
        with torch.no_grad():
            ae = ((model(_t(z)).numpy() - z) ** 2).mean(1)
        return np.convolve(ae, np.ones(36) / 36, "valid"), np.convolve(
            ((z @ p - z) ** 2).mean(1), np.ones(36) / 36, "valid"
        )

    (ae_h, pca_h), (ae_f, pca_f) = scores(healthy_m), scores(faulty_m)
    lab = np.r_[np.zeros(len(ae_h)), np.ones(len(ae_f))]
    print(
        f"healthy-month MSE {ae_h.mean():.4f}, faulty-month MSE {ae_f.mean():.4f}; 6-hour anomaly "
        f"AUC {_auc(np.r_[ae_h, ae_f], lab):.3f} (3 principal components {_auc(np.r_[pca_h, pca_f], lab):.3f}, "
        f"their MSE {pca_h.mean():.4f})"
    )
    hook.close()
    return losses


# ============================================================================= PV nowcasting from sky images


def _cloud_depth(
    clouds: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], step: float, px: np.ndarray, py: np.ndarray
) -> np.ndarray:
    """The optical depth (capped at one) at the points (px, py) of Gaussian clouds advected
    `step` five-minute steps by their common wind."""
    pos, vel, width, depth = clouds
    c = pos + step * vel
    d2 = (px[..., None] - c[:, 0]) ** 2 + (py[..., None] - c[:, 1]) ** 2
    return np.minimum(1.0, (depth * np.exp(-d2 / (2 * width**2))).sum(-1))


def _sky_frames(
    rng: np.random.Generator, n: int, size: int = 16
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs of all-sky camera frames five minutes apart (brightness, downsampled to 16 x 16),
    the clear-sky index of the PV plant now and ten minutes after the second frame. The sun
    sits near the zenith of the frame; three to six clouds (Gaussian blobs of random size and
    optical depth) drift with a common wind; the plant's clear-sky index falls with the cloud
    depth on the sun."""
    yy, xx = np.mgrid[0:size, 0:size].astype(float)
    frames = np.empty((n, 2, size, size), dtype=np.float32)
    csi_now, csi_next = np.empty(n), np.empty(n)
    for i in range(n):
        sun = rng.uniform(5, 11, 2)
        k = int(rng.integers(3, 7))
        vel = rng.normal(0, 1.3, 2)
        pos = sun + rng.uniform(-9, 9, (k, 2)) - 1.5 * vel
        width = rng.uniform(1.5, 3.5, k)
        depth = rng.uniform(0.5, 1.2, k)
        clouds = (pos, vel, width, depth)

        for j, step in enumerate((-1.0, 0.0)):
            c = _cloud_depth(clouds, step, xx, yy)
            glow = np.exp(-((xx - sun[0]) ** 2 + (yy - sun[1]) ** 2) / 6.0)
            frames[i, j] = 0.25 + 0.7 * glow * (1 - c) + 0.55 * c + 0.02 * rng.standard_normal((size, size))
        csi_now[i] = 1 - 0.8 * _cloud_depth(clouds, 0.0, sun[:1], sun[1:])[0]
        csi_next[i] = 1 - 0.8 * _cloud_depth(clouds, 2.0, sun[:1], sun[1:])[0]
    return frames, csi_now, csi_next


def pv_nowcast_sky_image_cnn(
    path: str, epochs: int = 10, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Ten-minute-ahead PV nowcasting from two all-sky frames in the manner of SUNSET (Sun,
    Venugopal and Brandt): a CNN of two convolution blocks with BatchNorm and max-pooling and a
    dense head with dropout maps the stacked frames to the plant's clear-sky index ten minutes
    ahead, `nn.MSELoss`, Adam 1e-3, batches of 64, a validation pass after each epoch in eval
    mode. The field's metric is the forecast skill, one less the RMSE over that of smart
    persistence (today's clear-sky index carried forward)."""
    rng = _seed(seed)
    frames, csi_now, csi_next = _sky_frames(rng, 2000)
    n_tr, n_va = 1500, 250
    x, y = _t(frames), _t(csi_next).unsqueeze(1)
    mu, sd = x[:n_tr].mean(), x[:n_tr].std()
    x = (x - mu) / sd
    model = nn.Sequential(
        nn.Conv2d(2, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 16, 64), nn.ReLU(), nn.Dropout(0.3), nn.Linear(64, 1),
    )  # fmt: skip
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    if bug == "train_in_eval_mode":  # bug: `model.train()` once above the loop, and eval() after epoch 0
        model.train()
    for epoch in range(epochs):
        if bug != "train_in_eval_mode":
            model.train()
        perm = torch.randperm(n_tr)
        for i in range(0, n_tr, 64):
            b = perm[i : i + 64]
            optimizer.zero_grad()
            loss = loss_fn(model(x[b]), y[b])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            val = loss_fn(model(x[n_tr : n_tr + n_va]), y[n_tr : n_tr + n_va]).item()
        print(f"epoch {epoch}: train MSE {np.mean(losses[-24:]):.4f}, validation MSE {val:.4f}")
    with torch.no_grad():
        pred = model(x[n_tr + n_va :]).squeeze(1).numpy()
    truth = csi_next[n_tr + n_va :]
    rmse = np.sqrt(np.mean((pred - truth) ** 2))
    pers = np.sqrt(np.mean((csi_now[n_tr + n_va :] - truth) ** 2))
    clim = np.sqrt(np.mean((csi_next[:n_tr].mean() - truth) ** 2))
    print(
        f"test RMSE {rmse:.4f} (smart persistence {pers:.4f}, climatology {clim:.4f}), skill {1 - rmse / pers:.3f}"
    )
    hook.close()
    return losses


# ============================================================================= rainfall-runoff (LSTM, NSE loss)


def _catchments(
    rng: np.random.Generator, n_basins: int, n_days: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Daily forcings (precipitation in mm with about half the days dry, mean temperature, PET)
    and streamflow (mm/day) of `n_basins` catchments from a conceptual bucket model (a degree-day
    snow store, a soil store with a nonlinear runoff coefficient, a fast and a slow reservoir)
    with basin-specific parameters, which are also the basins' static attributes."""
    doy = np.arange(n_days) % 365
    forcing = np.empty((n_basins, n_days, 3))
    flow = np.empty((n_basins, n_days))
    attrs = np.empty((n_basins, 4))
    for b in range(n_basins):
        wet_mean, fc, k_fast, k_slow = (
            rng.uniform(4, 10),
            rng.uniform(80, 250),
            rng.uniform(0.2, 0.5),
            rng.uniform(0.01, 0.05),
        )
        t_mean = rng.uniform(2, 12)
        attrs[b] = [wet_mean, fc, k_fast, k_slow]
        temp = t_mean - 9 * np.cos(2 * np.pi * (doy - 15) / 365) + 3 * rng.standard_normal(n_days)
        wet = np.zeros(n_days, bool)
        for t in range(1, n_days):
            wet[t] = rng.random() < (0.65 if wet[t - 1] else 0.3)
        precip = np.where(wet, rng.gamma(0.8, wet_mean / 0.8, n_days), 0.0)
        pet = np.maximum(0.0, 0.3 * (temp + 5))
        snow = soil = fast = slow = 0.0
        for t in range(n_days):
            rain = precip[t] if temp[t] > 0 else 0.0
            snow += precip[t] - rain
            melt = min(snow, max(0.0, 2.5 * temp[t]))
            snow -= melt
            water = rain + melt
            runoff = water * (soil / fc) ** 2
            soil = min(fc, soil + water - runoff)
            soil = max(0.0, soil - pet[t] * min(1.0, soil / (0.7 * fc)))
            fast += 0.7 * runoff
            slow += 0.3 * runoff + 0.02 * soil * k_slow
            soil -= 0.02 * soil * k_slow
            q = k_fast * fast + k_slow * slow
            fast -= k_fast * fast
            slow -= k_slow * slow
            flow[b, t] = q
        forcing[b] = np.column_stack([precip, temp, pet])
    return forcing, flow * (1 + 0.05 * rng.standard_normal(flow.shape)), attrs


class NSELoss(nn.Module):
    """Kratzert et al.'s basin-averaged NSE*: squared errors weighted by each sample's basin's
    streamflow standard deviation (plus eps), so every basin counts alike."""

    def __init__(self, eps: float = 0.1) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, pred: torch.Tensor, target: torch.Tensor, q_std: torch.Tensor) -> torch.Tensor:
        return ((pred - target) ** 2 / (q_std + self.eps) ** 2).mean()


class _RunoffLSTM(nn.Module):
    def __init__(self, n_in: int, hidden: int = 32) -> None:
        super().__init__()
        self.lstm = nn.LSTM(n_in, hidden, batch_first=True)
        self.dropout = nn.Dropout(0.2)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(self.dropout(out[:, -1]))


def rainfall_runoff_lstm_nse(
    path: str, epochs: int = 16, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Regional rainfall-runoff modelling in the style of Kratzert et al. (2019): one LSTM (32
    units) for eight basins, 60 days of forcings (precipitation, temperature, PET) plus the
    basins' static attributes at every step, standardized over all training basins, to the
    next day's streamflow (standardized), trained by the `NSELoss` module with each sample's
    basin's discharge standard deviation, Adam 3e-3, 2048 random windows an epoch in batches of
    128, four years to train and the next two to test. The field's metric is the per-basin test
    NSE (median) against the day-of-year climatology's."""
    rng = _seed(seed)
    n_b, n_days, win, n_tr_days = 8, 6 * 365, 60, 4 * 365
    forcing, flow, attrs = _catchments(rng, n_b, n_days)
    met = forcing.copy()
    if bug == "log_zero_nan":  # bug: the skewed precipitation log-transformed, log(0) on dry days
        met[..., 0] = np.log(met[..., 0])
    f_mu, f_sd = met[:, :n_tr_days].reshape(-1, 3).mean(0), met[:, :n_tr_days].reshape(-1, 3).std(0)
    a_mu, a_sd = attrs.mean(0), attrs.std(0)
    q_mu, q_sd = flow[:, :n_tr_days].mean(), flow[:, :n_tr_days].std()
    inputs = np.concatenate(
        [(met - f_mu) / f_sd, np.repeat(((attrs - a_mu) / a_sd)[:, None], n_days, 1)], 2
    ).astype(np.float32)
    basin_std = _t(flow[:, :n_tr_days].std(1) / q_sd)
    qz = _t((flow - q_mu) / q_sd)
    x_all = _t(inputs)
    tr = [(b, t) for b in range(n_b) for t in range(win, n_tr_days)]
    model = _RunoffLSTM(7)
    loss_fn = NSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []

    def batch(pairs: list[tuple[int, int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        bs = torch.tensor([p[0] for p in pairs])
        ts = torch.tensor([p[1] for p in pairs])
        xb = torch.stack([x_all[b, t - win + 1 : t + 1] for b, t in pairs])
        return xb, qz[bs, ts].unsqueeze(1), basin_std[bs].unsqueeze(1)

    for epoch in range(epochs):
        model.train()
        order = rng.permutation(len(tr))[:2048]
        for i in range(0, len(order), 128):
            xb, yb, sb = batch([tr[j] for j in order[i : i + 128]])
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb, sb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: NSE* loss {np.mean(losses[-16:]):.4f}")
    model.eval()
    nse, nse_clim = [], []
    for b in range(n_b):
        ts = list(range(n_tr_days, n_days))
        with torch.no_grad():
            xb, _, _ = batch([(b, t) for t in ts])
            sim = model(xb).squeeze(1).numpy() * q_sd + q_mu
        obs = flow[b, n_tr_days:]
        clim = np.array([flow[b, :n_tr_days][np.arange(n_tr_days) % 365 == t % 365].mean() for t in ts])
        nse.append(1 - np.sum((sim - obs) ** 2) / np.sum((obs - obs.mean()) ** 2))
        nse_clim.append(1 - np.sum((clim - obs) ** 2) / np.sum((obs - obs.mean()) ** 2))
    print(f"test NSE median {np.median(nse):.3f}, min {np.min(nse):.3f} (day-of-year climatology median "
          f"{np.median(nse_clim):.3f})")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= NILM (seq2point)


def _household(rng: np.random.Generator, n_min: int) -> tuple[np.ndarray, np.ndarray]:
    """One-minute mains power (W) of a house and its kettle's sub-meter: a base load that follows
    the day, a fridge cycling (about 90 W, 20 minutes on in 60), lighting and TV in the evening,
    a washing machine's heating and spin cycles some days, and kettle boils (about 2.4 kW for
    2-4 minutes) mostly around breakfast, tea time and the evening."""
    t = np.arange(n_min)
    hod = (t % 1440) / 60
    base = 150 + 60 * np.sin(2 * np.pi * (hod - 14) / 24) + 10 * rng.standard_normal(n_min)
    fridge = 90 * (((t + rng.integers(0, 60)) % 61) < 20) * (1 + 0.05 * rng.standard_normal(n_min))
    evening = 250 * ((hod > 17.5) & (hod < 23)) * (1 + 0.3 * np.sin(t / 37.0))
    kettle = np.zeros(n_min)
    for day in range(n_min // 1440):
        for centre in (7.5, 10.5, 13, 16, 19.5, 21.5):
            if rng.random() < 0.8:
                start = int(day * 1440 + (centre + rng.normal(0, 0.7)) * 60)
                dur = int(rng.integers(2, 5))
                kettle[start : start + dur] = rng.uniform(2200, 2800)
    washer = np.zeros(n_min)
    for day in range(n_min // 1440):
        if rng.random() < 0.4:
            s = int(day * 1440 + rng.uniform(9, 15) * 60)
            washer[s : s + 20] = 2000  # heating
            washer[s + 20 : s + 80] = 200 * (1 + np.sin(np.arange(60) / 2.0))
            washer[s + 80 : s + 95] = 500
    cooking = np.zeros(n_min)
    for day in range(n_min // 1440):
        for centre in (8, 12.5, 18.5):
            if rng.random() < 0.6:  # the microwave, 1-5 minutes at 1.1-1.6 kW
                s = int(day * 1440 + (centre + rng.normal(0, 0.8)) * 60)
                cooking[s : s + int(rng.integers(1, 6))] += rng.uniform(1100, 1600)
        if rng.random() < 0.5:  # the hob's thermostat cycling 2 kW for half an hour to an hour
            s = int(day * 1440 + rng.uniform(17, 19.5) * 60)
            cycle = (np.arange(int(rng.integers(30, 60))) % int(rng.integers(3, 7))) < 2
            cooking[s : s + len(cycle)] += 2000 * cycle
    mains = base + fridge + evening + kettle + washer + cooking + 15 * rng.standard_normal(n_min)
    return mains, kettle


def nilm_seq2point_kettle(path: str, epochs: int = 4, seed: int = 0, bug: str | None = None) -> list[float]:
    """Non-intrusive load monitoring by sequence-to-point learning (Zhang et al. 2018): windows
    of 59 minutes of one-minute mains power (divided by 1000, the aggregate's mean removed) to
    the kettle's sub-metered power at the window's midpoint (over 2.5 kW), a CNN of four 1-D
    convolutions and a dense layer, `nn.MSELoss`, Adam 1e-3, batches of 256; eight days to train
    and the next four to test. The field's metrics are the test MAE in watts and the F1 of
    the on-state (above 1 kW) against the always-off forecast."""
    rng = _seed(seed)
    mains, kettle = _household(rng, 12 * 1440)
    if bug == "shuffled_labels":  # bug: the sub-meter's clock on summer time, the mains on UTC: an hour apart
        kettle = np.r_[kettle[60:], np.zeros(60)]
    win, half = 59, 29
    m = mains / 1000
    mean_m = m[: 8 * 1440].mean()
    xs = np.lib.stride_tricks.sliding_window_view(m - mean_m, win).astype(np.float32)
    ys = (kettle[half : half + len(xs)] / 2500).astype(np.float32)
    n_tr = 8 * 1440 - win
    x, y = torch.from_numpy(xs).unsqueeze(1), torch.from_numpy(ys).unsqueeze(1)
    model = nn.Sequential(
        nn.Conv1d(1, 16, 9, padding=4), nn.ReLU(), nn.Conv1d(16, 16, 7, padding=3), nn.ReLU(),
        nn.Conv1d(16, 24, 5, padding=2), nn.ReLU(), nn.Conv1d(24, 24, 5, padding=2), nn.ReLU(),
        nn.Flatten(), nn.Linear(24 * win, 64), nn.ReLU(), nn.Linear(64, 1),
    )  # fmt: skip
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        perm = torch.randperm(n_tr)
        for i in range(0, n_tr, 256):
            b = perm[i : i + 256]
            optimizer.zero_grad()
            loss = loss_fn(model(x[b]), y[b])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: MSE {np.mean(losses[-45:]):.5f}")
    with torch.no_grad():
        pred = model(x[n_tr:]).squeeze(1).clamp(min=0).numpy() * 2500
    truth = ys[n_tr:] * 2500
    on_p, on_t = pred > 1000, truth > 1000
    tp = np.sum(on_p & on_t)
    f1 = 2 * tp / max(1, on_p.sum() + on_t.sum())
    print(f"test MAE {np.mean(np.abs(pred - truth)):.1f} W (always off {np.mean(truth):.1f} W), "
          f"on-state F1 {f1:.3f} ({on_t.sum()} kettle minutes)")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= air quality (PM2.5, missing values)


def _pm25_network(
    rng: np.random.Generator, n_hours: int, n_sites: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hourly PM2.5 (ug/m3) at `n_sites` monitors of one city and its meteorology (wind speed,
    relative humidity, boundary-layer height): a regional pollution level that builds up in
    stagnant weather and is flushed out by wind, a traffic and heating diurnal cycle, site
    offsets; the monitors drop out in blocks of hours (maintenance, power cuts), about 12 % of
    the values, and the feed leaves those hours blank."""
    wind = np.zeros(n_hours)
    for t in range(1, n_hours):
        wind[t] = 0.97 * wind[t - 1] + 0.25 * rng.standard_normal()
    wind = np.exp(0.6 + 0.5 * wind)
    hod = np.arange(n_hours) % 24
    blh = 300 + 700 * np.clip(np.sin(np.pi * (hod - 7) / 12), 0, None) * (0.6 + 0.2 * wind / wind.mean())
    rh = np.clip(60 + 20 * np.sin(2 * np.pi * (hod + 6) / 24) + 10 * rng.standard_normal(n_hours), 15, 100)
    regional = np.zeros(n_hours)
    regional[0] = 40
    for t in range(1, n_hours):
        regional[t] = regional[t - 1] + 1.2 - 0.012 * wind[t] * regional[t - 1] + 1.5 * rng.standard_normal()
        regional[t] = max(regional[t], 3.0)
    diurnal = 1 + 0.35 * np.exp(-((hod - 8) ** 2) / 3) + 0.5 * np.exp(-((hod - 20) ** 2) / 5)
    site = rng.uniform(0.8, 1.3, n_sites)
    pm = regional[:, None] * diurnal[:, None] * site * (500 / blh[:, None]) ** 0.3
    pm = pm * np.exp(0.1 * rng.standard_normal(pm.shape)) * (1 + 0.004 * (rh[:, None] - 60))
    observed = np.ones_like(pm, bool)
    for s in range(n_sites):
        t = 0
        while t < n_hours:
            t += int(rng.exponential(90))
            observed[t : t + int(rng.integers(3, 24)), s] = False
    return pm, observed, np.column_stack([wind, rh, blh])


class MaskedMSELoss(nn.Module):
    """The mean squared error over the observed targets only (the mask is one where observed)."""

    def forward(self, pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return ((pred - target) ** 2 * mask).sum() / mask.sum().clamp(min=1)


def pm25_forecast_gru_masked(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Six-hour PM2.5 forecasting for a monitoring network with gaps, in the manner of the
    GRU-D line of work: for each site, the last 24 hours of log PM2.5 (standardized; blanks set
    to zero), the missingness mask, the hours since the last reading and the standardized
    meteorology go into a GRU of 32 units whose head outputs the next six hours; a
    `MaskedMSELoss` module over the observed targets only, Adam 2e-3, batches of 128,
    100 days to train and the next 30 to test. The field's metric is the test RMSE in ug/m3
    by lead time against persistence of the last valid reading."""
    rng = _seed(seed)
    n_hours, n_sites, lags, lead = 130 * 24, 6, 24, 6
    pm, observed, met = _pm25_network(rng, n_hours, n_sites)
    n_tr_h = 100 * 24
    lp = np.log(pm)
    mu, sd = lp[:n_tr_h][observed[:n_tr_h]].mean(), lp[:n_tr_h][observed[:n_tr_h]].std()
    z = np.where(observed, (lp - mu) / sd, 0.0)
    since = np.zeros_like(pm)
    for t in range(1, n_hours):
        since[t] = np.where(observed[t - 1], 1.0, since[t - 1] + 1.0)
    met_z = (met - met[:n_tr_h].mean(0)) / met[:n_tr_h].std(0)
    samples = [(t, s) for t in range(lags, n_hours - lead) for s in range(n_sites)]
    x = np.stack(
        [np.column_stack([z[t - lags : t, s], observed[t - lags : t, s], since[t - lags : t, s] / 24, met_z[t - lags : t]])
         for t, s in samples]
    ).astype(np.float32)  # fmt: skip
    y = np.stack([z[t : t + lead, s] for t, s in samples]).astype(np.float32)
    mask = np.stack([observed[t : t + lead, s] for t, s in samples]).astype(np.float32)
    is_tr = np.array([t + lead <= n_tr_h for t, _ in samples])
    x_t, y_t, m_t = torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(mask)
    tr_idx = torch.from_numpy(np.flatnonzero(is_tr))

    class Forecaster(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(6, 32, batch_first=True)
            self.head = nn.Linear(32, lead)

        def forward(self, xb: torch.Tensor) -> torch.Tensor:
            _, h = self.gru(xb)
            return self.head(h[-1])

    model = Forecaster()
    loss_fn = MaskedMSELoss()
    lr = 2e-1 if bug == "lr_x100" else 2e-3  # bug: 2e-1 typed for 2e-3
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        perm = tr_idx[torch.randperm(len(tr_idx))][:4096]
        for i in range(0, len(perm), 128):
            b = perm[i : i + 128]
            optimizer.zero_grad()
            loss = loss_fn(model(x_t[b]), y_t[b], m_t[b])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: masked MSE {np.mean(losses[-32:]):.4f}")
    te = np.flatnonzero(np.array([t >= n_tr_h for t, _ in samples]))
    with torch.no_grad():
        pred = np.exp(model(x_t[te]).numpy() * sd + mu)
    truth, ok = np.exp(y[te] * sd + mu), mask[te].astype(bool)
    last = np.array([pm[:t][observed[:t, s], s][-1] for t, s in (samples[i] for i in te)])
    rmse = [np.sqrt(np.mean((pred[:, h] - truth[:, h])[ok[:, h]] ** 2)) for h in range(lead)]
    pers = [np.sqrt(np.mean((last - truth[:, h])[ok[:, h]] ** 2)) for h in range(lead)]
    print("test RMSE by lead (ug/m3) " + " ".join(f"{r:.1f}" for r in rmse)
          + "; persistence " + " ".join(f"{p:.1f}" for p in pers)
          + f"; mean PM2.5 {truth[ok].mean():.1f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= soft sensor (debutanizer-like)


def _debutanizer(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A debutanizer column's seven process measurements (top temperature, top pressure, reflux
    flow, flow to the next process, 6th-tray temperature, two bottom temperatures), sampled
    every 15 minutes and driven by three slow latent disturbances (feed composition, feed rate,
    reboiler duty), and the butane content at the bottom measured by a gas chromatograph whose
    reading reflects the process some samples earlier. As in the public data set, everything
    is already scaled to [0, 1]."""
    lat = np.zeros((n, 3))
    for t in range(1, n):
        lat[t] = 0.97 * lat[t - 1] + 0.25 * rng.standard_normal(3)
    mix = rng.normal(0, 1, (3, 7))
    u = lat @ mix + 0.3 * rng.standard_normal((n, 7))
    u = np.column_stack([u[:, :4], u[:, 4:] + 0.5 * np.tanh(u[:, :3])])
    u = (u - u.min(0)) / (u.max(0) - u.min(0))
    y = np.zeros(n)
    for t in range(4, n):
        y[t] = (
            0.9 * u[t - 1, 4] ** 2 - 0.6 * u[t - 2, 5] * u[t - 2, 6] + 0.4 * np.sin(3 * u[t - 3, 2])
            + 0.3 * u[t - 4, 0] - 0.3 * u[t, 1]
        )  # fmt: skip
    y = y + 0.02 * rng.standard_normal(n)
    y = (y - y[4:].min()) / (y[4:].max() - y[4:].min())
    return u, y


def soft_sensor_debutanizer_mlp(
    path: str, epochs: int = 60, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A data-driven soft sensor for a debutanizer's bottom butane content, as the process-
    control papers build it on Fortuna's data: the seven measurements at lags 0-4 (35 inputs in
    [0, 1]) into an MLP of 32, 32 and 16 ReLU units, `nn.MSELoss`, Adam 1e-3, batches of 64,
    the first 1600 samples to train and the last 800 to test in time order. The field's metric
    is the test R2 and RMSE against a partial least squares (PLS-like: least squares on the
    first eight principal components) model of the same lagged inputs."""
    rng = _seed(seed)
    u, yv = _debutanizer(rng, 2404)
    x_np = np.concatenate([u[4 - k : len(u) - k] for k in range(5)], 1)
    y_np = yv[4:]
    n_tr = 1600
    x, y = _t(x_np), _t(y_np).unsqueeze(1)
    model = nn.Sequential(
        nn.Linear(35, 32),
        nn.ReLU(),
        nn.Linear(32, 32),
        nn.ReLU(),
        nn.Linear(32, 16),
        nn.ReLU(),
        nn.Linear(16, 1),
    )
    if bug == "dead_relu_init":  # bug: the old TF script's init, the ReLU biases' +0.1 typed as -0.1

        def init(m: nn.Module) -> None:
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.01)
                nn.init.constant_(m.bias, -0.1)

        model.apply(init)
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        perm = torch.randperm(n_tr)
        for i in range(0, n_tr, 64):
            b = perm[i : i + 64]
            optimizer.zero_grad()
            loss = loss_fn(model(x[b]), y[b])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if epoch % 10 == 9:
            print(f"epoch {epoch}: MSE {np.mean(losses[-25:]):.5f}")
    with torch.no_grad():
        pred = model(x[n_tr:]).squeeze(1).numpy()
    yt = y_np[n_tr:]
    xm = x_np[:n_tr].mean(0)
    _, _, vt = np.linalg.svd(x_np[:n_tr] - xm, full_matrices=False)
    scores_tr = (x_np[:n_tr] - xm) @ vt[:8].T
    coef, *_ = np.linalg.lstsq(np.c_[np.ones(n_tr), scores_tr], y_np[:n_tr], rcond=None)
    pls = np.c_[np.ones(len(yt)), (x_np[n_tr:] - xm) @ vt[:8].T] @ coef

    def r2(p: np.ndarray) -> float:
        return float(1 - np.sum((p - yt) ** 2) / np.sum((yt - yt.mean()) ** 2))

    print(f"test R2 {r2(pred):.3f}, RMSE {np.sqrt(np.mean((pred - yt) ** 2)):.4f} (PLS-like R2 {r2(pls):.3f}, "
          f"RMSE {np.sqrt(np.mean((pls - yt) ** 2)):.4f})")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= epidemic forecasting (SEIR-informed)


def _epidemic(rng: np.random.Generator, n_days: int) -> tuple[np.ndarray, np.ndarray]:
    """Daily reported cases of a respiratory epidemic in a region of two million: an SEIR
    process whose transmission rate follows mobility (weekday dips, a lockdown from day 45 and
    a gradual reopening from day 95), a stringency index and temperature; about 40 % of infections are
    reported, with negative-binomial noise and fewer reports at weekends. Returns the
    covariates (mobility, stringency, temperature, weekend flag) and the cases."""
    t = np.arange(n_days)
    weekend = (t % 7) >= 5
    stringency = np.clip((t - 45) / 5, 0, 1) * np.clip(1 - (t - 95) / 50, 0.25, 1)
    mobility = 1 - 0.55 * stringency - 0.15 * weekend + 0.03 * rng.standard_normal(n_days)
    temp = 8 + 10 * np.sin(2 * np.pi * (t - 20) / 365) + 2 * rng.standard_normal(n_days)
    beta = 0.5 * mobility**1.5 * (1 - 0.012 * (temp - 8))
    pop, sigma, gamma = 2e6, 1 / 3.0, 1 / 5.0
    s, e, i, r = pop - 200.0, 100.0, 100.0, 0.0
    incid = np.empty(n_days)
    for d in range(n_days):
        new_inf = beta[d] * s * i / pop
        new_sym = sigma * e
        s, e, i, r = s - new_inf, e + new_inf - new_sym, i + new_sym - gamma * i, r + gamma * i
        incid[d] = new_sym
    mean = 0.4 * incid * np.where(weekend, 0.75, 1.05)
    cases = rng.negative_binomial(20, 20 / (20 + mean))
    cov = np.column_stack([mobility, stringency, (temp - 8) / 10, weekend])
    return cov, cases.astype(float)


class SEIRNet(nn.Module):
    """An SEIR model unrolled day by day in torch whose transmission rate is an MLP of the day's
    covariates; the incubation and infectious periods, the initial infections and the reporting
    rate are learned too."""

    def __init__(self, pop: float) -> None:
        super().__init__()
        self.pop = pop
        self.beta_mlp = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
        nn.init.constant_(self.beta_mlp[2].bias, -1.0)  # a transmission rate of about 0.3 a day to start
        self.log_sigma = nn.Parameter(torch.tensor(math.log(1 / 4.0)))
        self.log_gamma = nn.Parameter(torch.tensor(math.log(1 / 6.0)))
        self.log_i0 = nn.Parameter(torch.tensor(math.log(50.0)))
        self.logit_report = nn.Parameter(torch.tensor(0.0))

    def forward(self, cov: torch.Tensor) -> torch.Tensor:
        beta = F.softplus(self.beta_mlp(cov)).squeeze(1)
        sigma, gamma = self.log_sigma.exp(), self.log_gamma.exp()
        i0 = self.log_i0.exp()
        s, e, i = self.pop - 2 * i0, i0, i0
        out = []
        for d in range(len(cov)):
            new_inf = beta[d] * s * i / self.pop
            new_sym = sigma * e
            s, e, i = s - new_inf, e + new_inf - new_sym, i + new_sym - gamma * i
            out.append(new_sym)
        weekend = cov[:, 3]
        return torch.sigmoid(self.logit_report) * torch.stack(out) * (1.05 - 0.3 * weekend)


def seir_informed_case_forecast(
    path: str, steps: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Epidemic forecasting with an SEIR-informed network (the hybrid mechanistic-ML models of
    the COVID-19 forecast hubs): the `SEIRNet` above fitted to 150 days of reported cases by
    `nn.PoissonNLLLoss(log_input=False)` on the expected reports, in two stages as such scripts
    do: first the epidemiological parameters alone with the transmission MLP frozen (Adam 5e-2,
    60 steps), then everything (Adam 1e-2), unfreezing by parameter name. The last 30 days are
    forecast from their covariates; the field's metric is the forecast's MAE against the naive
    forecast (the last week's mean carried forward), and the fitted infectious period."""
    rng = _seed(seed)
    cov_np, cases_np = _epidemic(rng, 180)
    cov, cases = _t(cov_np), _t(cases_np)
    n_fit = 150
    model = SEIRNet(2e6)
    loss_fn = nn.PoissonNLLLoss(log_input=False)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    for p in model.beta_mlp.parameters():
        p.requires_grad_(False)
    losses: list[float] = []
    stage1 = 60
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=5e-2)
    for step in range(steps):
        if step == stage1:
            unfreeze = "beta_net" if bug == "frozen_by_mistake" else "beta_mlp"  # bug: the module's old name
            for name, p in model.named_parameters():
                if name.startswith(unfreeze):
                    p.requires_grad_(True)
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        optimizer.zero_grad()
        loss = loss_fn(model(cov[:n_fit]), cases[:n_fit])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 40 == 39:
            print(f"step {step}: Poisson NLL {np.mean(losses[-40:]):.2f}")
    with torch.no_grad():
        fc = model(cov).numpy()[n_fit:]
    truth = cases_np[n_fit:]
    naive = np.full(len(truth), cases_np[n_fit - 7 : n_fit].mean())
    fit_mae = np.mean(np.abs(model(cov[:n_fit]).detach().numpy() - cases_np[:n_fit]))
    print(
        f"fit MAE {fit_mae:.0f} cases/day; 30-day forecast MAE {np.mean(np.abs(fc - truth)):.0f} (naive "
        f"{np.mean(np.abs(naive - truth)):.0f}, mean cases {truth.mean():.0f}); infectious period "
        f"{1 / model.log_gamma.exp().item():.1f} days (5.0 true)"
    )
    hook.close()
    return losses


# ============================================================================= crop yield from NDVI


def _counties(
    rng: np.random.Generator, n_counties: int, n_years: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """County maize yields (t/ha) and their MODIS-like season: 23 sixteen-day NDVI composites
    (a double-logistic green-up and senescence whose peak and duration respond to the season's
    water and heat stress, with cloud-contaminated composites dropping toward bare soil) and
    the composites' precipitation (mm) and growing degree days. Yields carry a technology trend,
    a county level and the stress of the season, mostly around silking in July."""
    doy = 8 + 16 * np.arange(23)
    level = rng.normal(9.5, 1.2, n_counties)
    ndvi = np.empty((n_counties, n_years, 23))
    weather = np.empty((n_counties, n_years, 23, 2))
    yields = np.empty((n_counties, n_years))
    for y in range(n_years):
        regional = rng.normal(0, 1, 2)
        for c in range(n_counties):
            rain = rng.gamma(2.0, 15.0, 23) * np.exp(0.3 * regional[0] + 0.2 * rng.standard_normal())
            gdd = np.clip(150 + 120 * np.sin(np.pi * (doy - 90) / 200), 0, None) * (1 + 0.08 * regional[1])
            gdd = gdd + rng.normal(0, 10, 23)
            july = (doy > 180) & (doy < 215)
            water = rain[(doy > 150) & (doy < 230)].sum() / 150 - 1
            heat = np.clip(gdd[july] - 260, 0, None).sum() / 40
            stress = -0.6 * np.clip(-water, 0, None) - 0.4 * heat + 0.2 * np.tanh(water)
            peak = 0.82 + 0.1 * stress + 0.02 * rng.standard_normal()
            sos, eos = rng.normal(140, 6), rng.normal(260 + 10 * stress, 5)
            curve = 0.2 + (peak - 0.2) * (
                1 / (1 + np.exp(-(doy - sos) / 8)) - 1 / (1 + np.exp(-(doy - eos) / 9))
            )
            cloudy = rng.random(23) < 0.12
            ndvi[c, y] = np.where(
                cloudy, curve * rng.uniform(0.3, 0.7, 23), curve
            ) + 0.015 * rng.standard_normal(23)
            weather[c, y] = np.column_stack([rain, gdd])
            yields[c, y] = level[c] + 0.12 * y + 2.2 * stress + 0.4 * rng.standard_normal()
    return ndvi, weather, yields


def crop_yield_ndvi_cnn_lstm(
    path: str, epochs: int = 25, seed: int = 0, bug: str | None = None
) -> list[float]:
    """County crop-yield prediction from satellite time series in the manner of You et al.
    (2017) and its successors: the season's 23 NDVI composites with the composites'
    precipitation and degree days (standardized) through a 1-D convolution and an LSTM of 32
    units, with the year (for the technology trend) and a county embedding into the head,
    `nn.MSELoss` on standardized yields, Adam 3e-3, batches of 64, ten years of 150 counties to
    train and the next two years to test. The field's metric is the test RMSE in t/ha and its
    R2 against the county's mean yield plus the fitted trend."""
    rng = _seed(seed)
    n_c, n_y, n_tr_y = 150, 12, 10
    ndvi, weather, yields = _counties(rng, n_c, n_y)
    w_mu, w_sd = weather[:, :n_tr_y].reshape(-1, 2).mean(0), weather[:, :n_tr_y].reshape(-1, 2).std(0)
    seq = np.concatenate([(ndvi[..., None] - 0.5) / 0.25, (weather - w_mu) / w_sd], 3)
    y_mu, y_sd = yields[:, :n_tr_y].mean(), yields[:, :n_tr_y].std()
    county = np.repeat(np.arange(n_c), n_y)
    year = np.tile(np.arange(n_y), n_c)
    xs, ys = _t(seq.reshape(-1, 23, 3)), _t((yields.reshape(-1) - y_mu) / y_sd).unsqueeze(1)
    cs, yrs = torch.as_tensor(county), _t((year - 5.5) / 3.5).unsqueeze(1)
    tr = torch.as_tensor(np.flatnonzero(year < n_tr_y))
    te = np.flatnonzero(year >= n_tr_y)

    class YieldNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Sequential(nn.Conv1d(3, 16, 3, padding=1), nn.ReLU())
            self.lstm = nn.LSTM(16, 32, batch_first=True)
            self.county = nn.Embedding(n_c, 4)
            self.head = nn.Sequential(nn.Linear(32 + 4 + 1, 32), nn.ReLU(), nn.Linear(32, 1))

        def forward(self, s: torch.Tensor, c: torch.Tensor, yr: torch.Tensor) -> torch.Tensor:
            h = self.conv(s.transpose(1, 2)).transpose(1, 2)
            _, (hn, _) = self.lstm(h)
            return self.head(torch.cat([hn[-1], self.county(c), yr], 1))

    model = YieldNet()
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        perm = tr[torch.randperm(len(tr))]
        for i in range(0, len(perm), 64):
            b = perm[i : i + 64]
            if bug != "no_zero_grad":  # bug: `optimizer.zero_grad()` lost in a refactor of the loop
                optimizer.zero_grad()
            loss = loss_fn(model(xs[b], cs[b], yrs[b]), ys[b])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if epoch % 5 == 4:
            print(f"epoch {epoch}: MSE {np.mean(losses[-24:]):.4f}")
    with torch.no_grad():
        pred = model(xs[te], cs[te], yrs[te]).squeeze(1).numpy() * y_sd + y_mu
    truth = yields.reshape(-1)[te]
    tr_np = tr.numpy()
    cm = np.array([yields[c, :n_tr_y].mean() for c in range(n_c)])
    resid = yields.reshape(-1)[tr_np] - cm[county[tr_np]]
    slope = np.polyfit(year[tr_np] - (n_tr_y - 1) / 2, resid, 1)[0]
    base = cm[county[te]] + slope * (year[te] - (n_tr_y - 1) / 2)

    def r2(p: np.ndarray) -> float:
        return float(1 - np.sum((p - truth) ** 2) / np.sum((truth - truth.mean()) ** 2))

    print(f"test RMSE {np.sqrt(np.mean((pred - truth) ** 2)):.3f} t/ha, R2 {r2(pred):.3f} (county mean + trend "
          f"RMSE {np.sqrt(np.mean((base - truth) ** 2)):.3f}, R2 {r2(base):.3f})")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= battery cycle life (early cycles)


def _lfp_cells(rng: np.random.Generator, n_cells: int, n_v: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Fast-charged LFP/graphite cells in the manner of Severson et al. (2019): each cell's
    discharge capacity as a function of voltage, Q(V) on 100 points from 3.5 to 2.0 V, at cycle
    10 and at cycle 100, and its cycle life (to 80 % of nominal capacity). A cell's hidden
    degradation rate (from its charging policy and manufacturing) shrinks and shifts the
    voltage plateau by cycle 100, more at low voltages, and sets the log of its cycle life."""
    v = np.linspace(3.5, 2.0, n_v)
    rate = rng.lognormal(0.0, 0.45, n_cells)
    life = np.exp(np.log(800) - 0.9 * np.log(rate) + 0.08 * rng.standard_normal(n_cells))
    plateau = 1 / (1 + np.exp(-(3.3 - v) / 0.02))
    tail = 1 / (1 + np.exp(-(2.6 - v) / 0.15))
    q10 = 1.07 * (0.9 * plateau + 0.1 * tail)[None] * rng.normal(1, 0.005, (n_cells, 1))
    shift = 0.004 * rate[:, None]
    plateau_100 = 1 / (1 + np.exp(-(3.3 - shift - v[None]) / 0.02))
    loss = 1 - 0.006 * rate[:, None] * (0.5 + tail[None]) + 0.002 * rng.standard_normal((n_cells, 1))
    q100 = q10 / (0.9 * plateau + 0.1 * tail) * (0.9 * plateau_100 + 0.1 * tail) * loss
    dq = q100 - q10 + 2e-4 * rng.standard_normal((n_cells, n_v))
    return dq, life


def battery_cycle_life_early_cycles(
    path: str, epochs: int = 100, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Battery cycle-life prediction from the first hundred cycles (Severson et al. 2019, then
    the CNN versions of it): the difference of the discharge curves Q100(V) - Q10(V) of 100
    voltage points, scaled by its training standard deviation, through a 1-D CNN (two
    convolutions, global pooling of each filter's mean and log-variance) to the log10 of the
    cycle life (standardized), `nn.MSELoss`, Adam 1e-3, batches of 32, 240 cells to train and
    80 to test. The field's metric is the test RMSE in cycles and the mean percentage error,
    against the paper's one-feature 'variance model' (log life linear in log var(dQ))."""
    rng = _seed(seed)
    dq, life = _lfp_cells(rng, 320)
    n_tr = 240
    scale = dq[:n_tr].std()
    x = _t(dq / scale).unsqueeze(1)
    ll = np.log10(life)
    l_mu, l_sd = ll[:n_tr].mean(), ll[:n_tr].std()
    y = _t((ll - l_mu) / l_sd).unsqueeze(1)

    class LifeCNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Sequential(
                nn.Conv1d(1, 8, 9, padding=4), nn.ReLU(), nn.Conv1d(8, 8, 9, padding=4), nn.ReLU()
            )
            self.head = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))

        def forward(self, xb: torch.Tensor) -> torch.Tensor:
            h = self.conv(xb)
            stats = torch.cat([h.mean(2), torch.log(h.var(2) + 1e-4)], 1)
            return self.head(stats)

    model = LifeCNN()
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        perm = torch.randperm(n_tr)
        for i in range(0, n_tr, 32):
            b = perm[i : i + 32]
            optimizer.zero_grad()
            loss = loss_fn(model(x[b]), y[b])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if epoch % 20 == 19:
            print(f"epoch {epoch}: MSE {np.mean(losses[-8:]):.4f}")
    with torch.no_grad():
        pred = 10 ** (model(x[n_tr:]).squeeze(1).numpy() * l_sd + l_mu)
    truth = life[n_tr:]
    lv = np.log10(dq.var(1))
    coef = np.polyfit(lv[:n_tr], ll[:n_tr], 1)
    var_model = 10 ** np.polyval(coef, lv[n_tr:])
    mean_fc = 10**l_mu

    def report(p: np.ndarray | float) -> str:
        return f"RMSE {np.sqrt(np.mean((p - truth) ** 2)):.0f} cycles, {np.mean(np.abs(p - truth) / truth) * 100:.1f}%"

    print(f"test {report(pred)} (variance model {report(var_model)}; mean life {report(mean_fc)})")
    hook.close()
    return losses


_load = healthy(
    "load_forecast_quantile_mlp", "electricity load forecast (quantile MLP)", load_forecast_quantile_mlp
)
_rul = healthy(
    "turbofan_rul_cnn_windows", "turbofan remaining useful life (1-D CNN)", turbofan_rul_cnn_windows
)
_bearing = healthy(
    "bearing_fault_envelope_cnn", "bearing fault diagnosis (envelope spectra)", bearing_fault_envelope_cnn
)
_scada_ae = healthy(
    "wind_scada_normal_behaviour_autoencoder",
    "wind-turbine SCADA normal-behaviour autoencoder",
    wind_scada_normal_behaviour_autoencoder,
)
_pv = healthy("pv_nowcast_sky_image_cnn", "PV nowcasting from sky images (CNN)", pv_nowcast_sky_image_cnn)
_runoff = healthy("rainfall_runoff_lstm_nse", "rainfall-runoff LSTM (NSE loss)", rainfall_runoff_lstm_nse)
_nilm = healthy("nilm_seq2point_kettle", "load disaggregation (seq2point)", nilm_seq2point_kettle)
_pm25 = healthy(
    "pm25_forecast_gru_masked", "PM2.5 forecast with missing values (GRU)", pm25_forecast_gru_masked
)
_soft = healthy(
    "soft_sensor_debutanizer_mlp", "chemical-process soft sensor (MLP)", soft_sensor_debutanizer_mlp
)
_seir = healthy("seir_informed_case_forecast", "SEIR-informed epidemic forecast", seir_informed_case_forecast)
_crop = healthy(
    "crop_yield_ndvi_cnn_lstm", "crop yield from NDVI series (CNN-LSTM)", crop_yield_ndvi_cnn_lstm
)
_battery = healthy(
    "battery_cycle_life_early_cycles",
    "battery cycle life from early cycles (1-D CNN)",
    battery_cycle_life_early_cycles,
)

PIPELINES = [
    _load,
    _rul,
    buggy(_rul, "inputs_x255"),
    _bearing,
    buggy(_bearing, "softmax_before_ce"),
    _scada_ae,
    buggy(_scada_ae, "deep_sigmoid"),
    _pv,
    buggy(_pv, "train_in_eval_mode"),
    _runoff,
    buggy(_runoff, "log_zero_nan"),
    _nilm,
    buggy(_nilm, "shuffled_labels"),
    _pm25,
    buggy(_pm25, "lr_x100"),
    _soft,
    buggy(_soft, "dead_relu_init"),
    _seir,
    buggy(_seir, "frozen_by_mistake"),
    _crop,
    buggy(_crop, "no_zero_grad"),
    _battery,
]
