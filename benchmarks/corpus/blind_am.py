"""The thirty-second blind held-out set (issue 26), part AM: quantitative finance, econometrics
and actuarial machine learning as practitioners in those fields write it, plain PyTorch loops
with the README's two lines (`register_loss` where the script has a loss module), each in the
shape of its field's papers and desk code, on models and tasks the earlier sets did not train
(they had deep hedging of a call under GBM, a portfolio LSTM on the Sharpe ratio, a monotonic
credit-scoring network, a stock-price LSTM on min-max windows, Optiver's realized volatility by
RMSPE, M5 and Tweedie claims, a Poisson frequency model with an exposure offset, gamma severity
in XGBoost, focal-loss and class-weighted fraud, a temporal fusion transformer): tiny models on
data generated in-process with the fields' structure, fixed seeds, one CPU thread.

Markets: cross-sectional next-day return prediction in the manner of Gu, Kelly and Xiu's NN3
(five characteristics of 200 stocks as daily z-scores, BatchNorm, `MSELoss` on z-scored
returns; the signal-to-noise ratio is a market's, so the loss falls only from about 1.1 to about
0.99, the zero forecast's 1.0, while the out-of-sample rank IC is about 0.05 with a t of 7);
realized-volatility forecasting on HAR features (logs of the daily, weekly and monthly realized
variance, holidays' zero realized variances dropped from the calendar first) by a mean and a
softplus variance under `nn.GaussianNLLLoss`, about as good out of sample as the HAR regression
and with 95 % coverage; mid-price direction from a ten-level limit order book by a narrowed
DeepLOB (convolutions over price and volume, sides and levels, an inception module, an LSTM;
FI-2010 labelling into three equal classes; the loss falls from 1.10 to about 1.05 and the test
accuracy is about 42 %, nine points over chance); an optimal-execution agent in an
Almgren-Chriss market trained by REINFORCE (the logit of the fraction of the holding to sell,
shortfall plus a risk penalty; its mean schedule's cost goes from 0.97 to about 0.72-0.74, near
the closed-form schedule's 0.71 and below TWAP's 0.78; the returned losses are the surrogate).

Pricing and curves: a neural Black-Scholes pricer in the manner of Culkin and Das (moneyness,
years, rate and volatility as decimals to the price over spot, test RMSE about 35 bp of spot
against a price standard deviation of 1050); differential machine learning (Huge and Savine) on
a seven-asset Bachelier basket option, payoffs and pathwise derivatives as labels, the
derivative loss through `autograd.grad(create_graph=True)`, `OneCycleLR` (the value error against
the analytic price is about 0.0014 on a payoff standard deviation of 0.036); a yield-curve
autoencoder on dynamic Nelson-Siegel curves (eleven maturities, a three-factor ELU bottleneck;
about 2.2 bp test error against 1.7 bp for three principal components and 2 bp of noise).

Econometrics and actuarial: GDP nowcasting from eight monthly indicators by an LSTM with
dropout, evaluated walk-forward on expanding windows (model carried over and refitted on each
window, `model.eval()` for the next ten quarters; out-of-sample RMSE about 0.77 pp against 1.38
for the historical mean); an application scorecard (24000 loans at a 4 % default rate in date
order for an out-of-time split, decile weights of evidence, a logistic regression under
`BCEWithLogitsLoss(pos_weight=goods/bads)`; Gini about 0.52, KS 0.40, points at 600 for odds of
50 and 20 to double); claim frequency by a CANN (Schelldorfer and Wuthrich: a Poisson GLM with
the exposure offset fitted first by L-BFGS, then a ReLU network with a region embedding added to
its linear predictor from a zero output layer, `nn.PoissonNLLLoss(log_input=True)`; the test
deviance goes from the GLM's 30.12 toward the true frequencies' 29.59, to about 29.8); claim
severity by a log-link Gamma network (a `GammaDeviance` loss module, the output bias at the log
mean claim; about half the null deviance explained, the true means 0.750 against its 0.759);
mortality by a neural Lee-Carter model (age and population embeddings and the year, Richman and
Wuthrich) fitted on ten populations to 2004 and then transferred to an eleventh with fifteen
years observed by training only its embedding row and a level, the body frozen; the test errors
on log rates are about 0.09 and 0.15, worse than the Lee-Carter model's 0.03 and 0.05 on data
that has exactly its form, but sensible).

Ten buggy twins, one each of the ten keys of `BUGS`, injected the way the mistake appears in
such a script: the HAR script without the holiday filter, so the forward-filled days' zero
realized variances go into `np.log` and every feature, loss and gradient is NaN (log_zero_nan);
the option pricer fed the quote sheet's columns as they are, strikes in dollars, maturities in
days, rates and volatilities in percent (inputs_x255); the differential-ML loop without
`optimizer.zero_grad()` (no_zero_grad); DeepLOB's public PyTorch port returning
`torch.softmax(x, dim=1)` into `nn.CrossEntropyLoss` (softmax_before_ce; with three classes and a
weak signal its loss and accuracy end close to the healthy run's); the scorecard's
applications put in date order for the out-of-time split while the default flags stay in
account order (shuffled_labels); the CANN's zero start applied by `model.apply` to every Linear
instead of the output layer only, so every ReLU unit is dead for good (dead_relu_init); the
yield-curve autoencoder with sigmoids in its eight hidden layers (deep_sigmoid); the execution
agent's Adam at 1e-1 typed for 1e-3 (lr_x100); the nowcaster's `model.train()` above the
walk-forward loop, so after the first window's nowcasts it refits in eval mode without dropout
(train_in_eval_mode); the mortality transfer setting `model.pop.requires_grad = True` on the
module (an attribute, not its parameters) after freezing the embedding, so only the level is
fitted to the new population (frozen_by_mistake).

Written without ever running mldbg's rules on them; health was checked from the losses and each
field's own metrics alone. Only torch and numpy are needed. `SPLIT = BLIND31`.
"""

from __future__ import annotations

import math
import random

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from mldbg.torch import Hook

from . import BLIND31, buggy, healthy

SPLIT = BLIND31

torch.set_num_threads(1)


def _seed(seed: int) -> np.random.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return np.random.default_rng(seed + 3101)


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.as_tensor(a, dtype=torch.float32)


def _rank_ic(pred: np.ndarray, target: np.ndarray) -> float:
    """Spearman's rank correlation of one cross-section."""
    rp = np.argsort(np.argsort(pred))
    rt = np.argsort(np.argsort(target))
    return float(np.corrcoef(rp, rt)[0, 1])


def _auc(score: np.ndarray, y: np.ndarray) -> float:
    """The area under the ROC curve by the rank-sum (Mann-Whitney) formula."""
    ranks = np.empty(len(score))
    ranks[np.argsort(score)] = np.arange(1, len(score) + 1)
    n_pos = y.sum()
    n_neg = len(y) - n_pos
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


# ============================================================================= next-day returns


def _equity_panel(rng: np.random.Generator, n_stocks: int, n_days: int) -> tuple[np.ndarray, np.ndarray]:
    """Daily returns of `n_stocks` over `n_days` and five characteristics known at each close:
    value, size, momentum and low-volatility scores (persistent AR(1) processes) and the day's
    own return. The expected next-day return is a small nonlinear function of them (about 0.1 %
    a day, against 1.5 % idiosyncratic volatility and a market factor of 1 %)."""
    phi = np.array([0.995, 0.998, 0.97, 0.99])
    chars = np.empty((n_days, n_stocks, 4))
    c = rng.standard_normal((n_stocks, 4))
    for t in range(n_days):
        c = phi * c + np.sqrt(1 - phi**2) * rng.standard_normal((n_stocks, 4))
        chars[t] = c
    beta = 0.7 + 0.6 * rng.random(n_stocks)
    market = 0.01 * rng.standard_normal(n_days)
    vol = 0.015 * np.exp(0.3 * chars[..., 3])
    mu = 0.0016 * (
        0.5 * chars[..., 0]
        - 0.3 * chars[..., 1]
        + 0.4 * chars[..., 2]
        + 0.4 * np.tanh(chars[..., 0]) * chars[..., 2]
    )
    ret = np.zeros((n_days, n_stocks))
    ret[1:] = beta * market[1:, None] + mu[:-1] + vol[:-1] * rng.standard_normal((n_days - 1, n_stocks))
    ret[1:] -= 0.05 * (ret[:-1] - ret[:-1].mean(1, keepdims=True))  # a short-term reversal
    feats = np.concatenate([chars, ret[..., None]], axis=2)
    return feats, ret


def _cs_zscore(a: np.ndarray) -> np.ndarray:
    """Cross-sectional z-scores: each day's values standardized across the stocks."""
    return (a - a.mean(1, keepdims=True)) / (a.std(1, keepdims=True) + 1e-12)


def next_day_returns_nn3_low_snr(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Cross-sectional next-day return prediction in the manner of Gu, Kelly and Xiu's NN3: five
    characteristics of 200 stocks ranked into cross-sectional z-scores, the target the next
    day's return z-scored across the stocks (the market removed), an MLP of 32, 16 and 8 ReLU
    units with BatchNorm, Adam 1e-3, `nn.MSELoss`, 200 days to train and the next 60 to test.
    The signal-to-noise ratio is a market's: the loss starts near 1.1 and falls only to about
    0.99; the field's metric is the out-of-sample daily rank IC (about 0.055, t about 7) and the
    Sharpe ratio of the long-short decile portfolio."""
    rng = _seed(seed)
    feats, ret = _equity_panel(rng, 200, 262)
    x = np.stack([_cs_zscore(feats[..., j]) for j in range(feats.shape[2])], 2)[1:-1]
    y = _cs_zscore(ret[2:])
    x_tr, y_tr = _t(x[:200].reshape(-1, 5)), _t(y[:200].reshape(-1, 1))
    model = nn.Sequential(
        nn.Linear(5, 32), nn.BatchNorm1d(32), nn.ReLU(),
        nn.Linear(32, 16), nn.BatchNorm1d(16), nn.ReLU(),
        nn.Linear(16, 8), nn.BatchNorm1d(8), nn.ReLU(),
        nn.Linear(8, 1),
    )  # fmt: skip
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(x_tr))
        for i in range(0, len(perm), 512):
            idx = perm[i : i + 512]
            optimizer.zero_grad()
            loss = loss_fn(model(x_tr[idx]), y_tr[idx])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: train MSE {np.mean(losses[-70:]):.4f}")
    model.eval()
    with torch.no_grad():
        pred = model(_t(x[200:].reshape(-1, 5))).numpy().reshape(-1, 200)
    test_y = y[200:]
    ics = np.array([_rank_ic(p, t) for p, t in zip(pred, test_y, strict=True)])
    raw = ret[202:]
    order = np.argsort(pred, 1)
    ls = np.take_along_axis(raw, order[:, -20:], 1).mean(1) - np.take_along_axis(raw, order[:, :20], 1).mean(
        1
    )
    print(
        f"test MSE {np.mean((pred - test_y) ** 2):.4f} (zero forecast 1.0000), rank IC {ics.mean():.3f} "
        f"(t {ics.mean() / ics.std() * math.sqrt(len(ics)):.1f}), long-short Sharpe "
        f"{ls.mean() / ls.std() * math.sqrt(252):.2f}"
    )
    hook.close()
    return losses


# ============================================================================= realized volatility


def _realized_variances(rng: np.random.Generator, n_assets: int, n_days: int) -> np.ndarray:
    """Daily realized variances (sums of 78 squared five-minute returns) whose log follows
    three AR(1) components with half-lives of a day, a week and a quarter, HAR-like long memory;
    on exchange holidays the vendor's file forward-fills the prices, so the day's realized
    variance is exactly zero for every asset."""
    level = np.log(1e-4) + 0.5 * rng.standard_normal(n_assets)
    comps = np.zeros((3, n_assets))
    phis, sds = np.array([0.5, 0.88, 0.99])[:, None], np.array([0.45, 0.2, 0.07])[:, None]
    out = np.empty((n_days, n_assets))
    for t in range(n_days):
        comps = phis * comps + sds * rng.standard_normal((3, n_assets))
        out[t] = np.exp(level + comps.sum(0))
    rv = out * rng.gamma(39.0, 1 / 39.0, size=out.shape)
    rv[rng.random(n_days) < 0.015] = 0.0
    return rv


def har_realized_vol_gaussian_nll(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Realized-volatility forecasting with HAR features: the logs of the daily, weekly and
    monthly average realized variance of ten assets predict the next day's log realized
    variance; an MLP (32, 32, tanh) outputs a mean and a softplus variance trained by
    `nn.GaussianNLLLoss`, Adam 1e-3, the first 70 % of the days to train. Holidays (zero
    realized variance: forward-filled prices) are dropped from the calendar before the logs.
    The NLL falls from about 0.3 to about 0 (standardized units, some batches below); the
    out-of-sample MSE is about the HAR regression's by least squares and the 95 % interval
    covers 95 %."""
    rng = _seed(seed)
    rv = _realized_variances(rng, 10, 1400)
    if bug != "log_zero_nan":  # bug: the holidays' zero realized variances kept, log(0) = -inf
        rv = rv[(rv > 0).all(1)]
    d = np.log(rv)
    w = np.log(np.stack([rv[t - 4 : t + 1].mean(0) for t in range(21, len(rv) - 1)]))
    m = np.log(np.stack([rv[t - 21 : t + 1].mean(0) for t in range(21, len(rv) - 1)]))
    x = np.stack([d[21:-1], w, m], 2).reshape(-1, 3)
    y = d[22:].reshape(-1)
    n_tr = int(0.7 * (len(rv) - 22)) * 10
    mu_x, sd_x, mu_y, sd_y = x[:n_tr].mean(0), x[:n_tr].std(0), y[:n_tr].mean(), y[:n_tr].std()
    x_t, y_t = _t((x - mu_x) / sd_x), _t((y - mu_y) / sd_y)
    model = nn.Sequential(nn.Linear(3, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 2))
    loss_fn = nn.GaussianNLLLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        perm = torch.randperm(n_tr)
        for i in range(0, n_tr, 256):
            idx = perm[i : i + 256]
            out = model(x_t[idx])
            mean, var = out[:, 0], F.softplus(out[:, 1]) + 1e-6
            loss = loss_fn(mean, y_t[idx], var)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: NLL {np.mean(losses[-30:]):.4f}")
    with torch.no_grad():
        out = model(x_t[n_tr:])
        mean, var = out[:, 0].numpy(), F.softplus(out[:, 1]).numpy() + 1e-6
    xs = np.c_[np.ones(n_tr), x_t[:n_tr].numpy()]
    coef = np.linalg.solve(xs.T @ xs, xs.T @ y_t[:n_tr].numpy())  # the HAR regression's normal equations
    har = np.c_[np.ones(len(x_t) - n_tr), x_t[n_tr:].numpy()] @ coef
    yt = y_t[n_tr:].numpy()
    cover = np.mean(np.abs(yt - mean) < 1.96 * np.sqrt(var))
    print(
        f"test MSE {np.mean((yt - mean) ** 2):.4f} (HAR by OLS {np.mean((yt - har) ** 2):.4f}, "
        f"random walk {np.mean((yt - x_t[n_tr:, 0].numpy()) ** 2):.4f}), 95% coverage {cover:.3f}"
    )
    hook.close()
    return losses


# ============================================================================= option pricing surrogate


def _bs_call(
    s: torch.Tensor, k: torch.Tensor, t: torch.Tensor, r: torch.Tensor, vol: torch.Tensor
) -> torch.Tensor:
    d1 = (torch.log(s / k) + (r + 0.5 * vol**2) * t) / (vol * torch.sqrt(t))
    d2 = d1 - vol * torch.sqrt(t)
    return s * torch.special.ndtr(d1) - k * torch.exp(-r * t) * torch.special.ndtr(d2)


def black_scholes_pricer_surrogate(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A neural pricer in the manner of Culkin and Das (2017): a quote sheet of 40000 European
    calls on a spot of 100 (strikes 70-130, maturities 7-730 days, rates 0-5 %, volatilities
    10-60 %) priced by Black-Scholes; the network (three layers of 64 units, LeakyReLU, ELU, ReLU)
    maps the moneyness K/S, the maturity in years, the rate and the volatility as
    decimals to the price over spot, `nn.MSELoss`, Adam 3e-3, batches of 256. The loss falls
    from about 1e-2 to about 2e-5; the test RMSE is about 40 basis points of spot (the prices'
    standard deviation is about 1050)."""
    rng = _seed(seed)
    n = 40000
    strike = rng.uniform(70, 130, n)
    days = rng.uniform(7, 730, n)
    rate_pct = rng.uniform(0, 5, n)
    vol_pct = rng.uniform(10, 60, n)
    price = _bs_call(_t(np.full(n, 100.0)), _t(strike), _t(days / 365), _t(rate_pct / 100), _t(vol_pct / 100))
    if bug == "inputs_x255":  # bug: the quote sheet's columns as they are, dollars, days and percent
        x = _t(np.stack([strike, days, rate_pct, vol_pct], 1))
    else:
        x = _t(np.stack([strike / 100, days / 365, rate_pct / 100, vol_pct / 100], 1))
    y = (price / 100).unsqueeze(1)
    n_tr = 32000
    model = nn.Sequential(
        nn.Linear(4, 64), nn.LeakyReLU(), nn.Linear(64, 64), nn.ELU(), nn.Linear(64, 64), nn.ReLU(),
        nn.Linear(64, 1),
    )  # fmt: skip
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        perm = torch.randperm(n_tr)
        for i in range(0, n_tr, 256):
            idx = perm[i : i + 256]
            optimizer.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: MSE {np.mean(losses[-125:]):.2e}")
    with torch.no_grad():
        err = (model(x[n_tr:]) - y[n_tr:]).abs()
    print(
        f"test RMSE {err.pow(2).mean().sqrt().item() * 1e4:.1f} bp of spot, max error "
        f"{err.max().item() * 1e4:.1f} bp (price std {y[n_tr:].std().item() * 1e4:.0f} bp)"
    )
    hook.close()
    return losses


# ============================================================================= differential machine learning


def differential_ml_bachelier_basket(
    path: str, epochs: int = 16, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Differential machine learning (Huge and Savine 2020) on a basket option in a correlated
    seven-asset Bachelier model: 8192 training samples, each one path from a spot drawn at an
    earlier date to the expiry, labelled by its payoff and the payoff's pathwise derivatives with
    respect to the spots; the inputs and labels normalized as in the paper, a softplus network
    of four layers of 20, the loss the value MSE plus the differentials' MSE (weighted by the
    inverse mean squares) through `autograd.grad(create_graph=True)`, Adam with `OneCycleLR`.
    The value and derivative errors fall together; against the analytic Bachelier price on
    fresh spots the error is a small fraction of the payoff noise."""
    rng = _seed(seed)
    n_assets, n, t1, t2, strike = 7, 8192, 1.0, 2.0, 1.1
    a = rng.standard_normal((n_assets, n_assets))
    corr = a @ a.T
    corr = corr / np.sqrt(np.outer(np.diag(corr), np.diag(corr)))
    vols = rng.uniform(0.1, 0.3, n_assets)
    cov = corr * np.outer(vols, vols)
    chol = np.linalg.cholesky(cov)
    weights = rng.uniform(0.5, 1.5, n_assets)
    weights /= weights.sum()
    x0 = 1.0 + (chol @ rng.standard_normal((n_assets, n))).T * math.sqrt(t1)
    xt = x0 + (chol @ rng.standard_normal((n_assets, n))).T * math.sqrt(t2 - t1)
    basket_t = xt @ weights
    payoff = np.maximum(basket_t - strike, 0.0)
    dydx = (basket_t > strike)[:, None] * weights[None]
    x_mu, x_sd, y_mu, y_sd = x0.mean(0), x0.std(0), payoff.mean(), payoff.std()
    xs, ys = _t((x0 - x_mu) / x_sd), _t((payoff - y_mu) / y_sd).unsqueeze(1)
    dys = _t(dydx / y_sd * x_sd)
    lam_j = 1.0 / torch.sqrt((dys**2).mean(0))
    alpha = 1.0 / (1.0 + n_assets)
    model = nn.Sequential(
        nn.Linear(n_assets, 20), nn.Softplus(), nn.Linear(20, 20), nn.Softplus(),
        nn.Linear(20, 20), nn.Softplus(), nn.Linear(20, 20), nn.Softplus(), nn.Linear(20, 1),
    )  # fmt: skip
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    steps_per_epoch = n // 256
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 1e-2, total_steps=epochs * steps_per_epoch)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for epoch in range(epochs):
        perm = torch.randperm(n)
        for i in range(steps_per_epoch):
            idx = perm[i * 256 : (i + 1) * 256]
            xb = xs[idx].requires_grad_(True)
            pred = model(xb)
            dpred = torch.autograd.grad(pred.sum(), xb, create_graph=True)[0]
            loss = (
                alpha * F.mse_loss(pred, ys[idx]) + (1 - alpha) * ((dpred - dys[idx]) * lam_j).pow(2).mean()
            )
            if bug != "no_zero_grad":  # bug: `optimizer.zero_grad()` left out of the loop
                optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
        if epoch % 4 == 3:
            print(f"epoch {epoch}: loss {np.mean(losses[-steps_per_epoch:]):.4f}")
    spots = 1.0 + (chol @ rng.standard_normal((n_assets, 2000))).T * math.sqrt(t1)
    b0, sb = spots @ weights, math.sqrt(weights @ cov @ weights * (t2 - t1))
    d = (b0 - strike) / sb
    true = (b0 - strike) * 0.5 * (1 + np.vectorize(math.erf)(d / math.sqrt(2))) + sb * np.exp(
        -0.5 * d**2
    ) / math.sqrt(2 * math.pi)
    with torch.no_grad():
        est = model(_t((spots - x_mu) / x_sd)).squeeze(1).numpy() * y_sd + y_mu
    print(f"value RMSE vs Bachelier {np.sqrt(np.mean((est - true) ** 2)):.5f} (payoff std {y_sd:.4f})")
    hook.close()
    return losses


# ============================================================================= limit order book (DeepLOB)


def _order_book(rng: np.random.Generator, n_events: int, tick: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    """A ten-level limit order book in the FI-2010 layout (ask price, ask volume, bid price,
    bid volume per level: 40 columns) and its mid-price. The volume imbalance at the best
    levels is a persistent process that weakly drives the next mid-price moves, which are
    otherwise noise of one tick."""
    a = np.zeros(n_events)
    for t in range(1, n_events):
        a[t] = 0.95 * a[t - 1] + 0.3 * rng.standard_normal()
    imb = np.tanh(a)
    shock = rng.standard_normal(n_events)
    m = np.zeros(n_events)  # in ticks from the open, slowly pulled back over the session
    for t in range(1, n_events):
        m[t] = m[t - 1] + 0.25 * imb[t - 1] + shock[t] - 0.003 * m[t - 1]
    mid = 100.0 + tick * m
    levels = np.arange(10)
    base = 300.0 * (1 + 0.3 * levels)
    noise = rng.lognormal(0.0, 0.3, (n_events, 10, 2))
    ask_v = base * (1 - 0.5 * imb[:, None] * np.exp(-levels / 3)) * noise[..., 0]
    bid_v = base * (1 + 0.5 * imb[:, None] * np.exp(-levels / 3)) * noise[..., 1]
    ask_p = mid[:, None] + tick * (levels + 0.5)
    bid_p = mid[:, None] - tick * (levels + 0.5)
    book = np.stack([ask_p, ask_v, bid_p, bid_v], 2).reshape(n_events, 40)
    return book, mid


class _DeepLOB(nn.Module):
    """DeepLOB (Zhang, Zohren and Roberts 2019), narrowed: convolutions pairing price and volume
    then the sides then the levels, a small inception module, an LSTM over time, three classes."""

    def __init__(self, ch: int = 8, hidden: int = 16, softmax_out: bool = False) -> None:
        super().__init__()
        self.softmax_out = softmax_out

        def block(cin: int, kernel: tuple[int, int], stride: tuple[int, int]) -> list[nn.Module]:
            return [nn.Conv2d(cin, ch, kernel, stride), nn.LeakyReLU(0.01), nn.BatchNorm2d(ch),
                    nn.Conv2d(ch, ch, (4, 1), padding="same"), nn.LeakyReLU(0.01), nn.BatchNorm2d(ch)]  # fmt: skip

        self.conv = nn.Sequential(
            *block(1, (1, 2), (1, 2)), *block(ch, (1, 2), (1, 2)), *block(ch, (1, 10), (1, 1))
        )
        self.inp1 = nn.Sequential(
            nn.Conv2d(ch, ch, 1), nn.LeakyReLU(0.01), nn.Conv2d(ch, ch, (3, 1), padding="same")
        )
        self.inp2 = nn.Sequential(
            nn.Conv2d(ch, ch, 1), nn.LeakyReLU(0.01), nn.Conv2d(ch, ch, (5, 1), padding="same")
        )
        self.inp3 = nn.Sequential(nn.MaxPool2d((3, 1), 1, (1, 0)), nn.Conv2d(ch, ch, 1), nn.LeakyReLU(0.01))
        self.lstm = nn.LSTM(3 * ch, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(x)
        h = torch.cat([self.inp1(h), self.inp2(h), self.inp3(h)], 1)  # (B, 3ch, T, 1)
        out, _ = self.lstm(h.squeeze(3).permute(0, 2, 1))
        logits = self.fc(out[:, -1])
        if self.softmax_out:  # as in the public port: `forecast_y = torch.softmax(x, dim=1)`
            return torch.softmax(logits, dim=1)
        return logits


def deeplob_mid_price_direction(
    path: str, epochs: int = 2, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Mid-price direction from the limit order book with a narrowed DeepLOB: windows of the last
    20 events of a ten-level book, z-scored with the training day's statistics, labelled down,
    stationary or up by the mean mid-price over the next 10 events against thresholds that make
    the classes about equal (the FI-2010 labelling); `nn.CrossEntropyLoss`, Adam 1e-3, batches of
    64. The loss falls from about 1.10 to about 1.05: the book says little about the next moves,
    and the test accuracy is some nine points above the 33 % of chance."""
    rng = _seed(seed)
    book, mid = _order_book(rng, 6000)
    window, horizon = 20, 10
    future = np.convolve(mid, np.ones(horizon) / horizon, "valid")[1:]  # mean of mid[t+1 : t+11]
    change = (future - mid[: len(future)]) / mid[: len(future)]
    n_train_events = 4300
    lo, hi = np.quantile(change[:n_train_events], [1 / 3, 2 / 3])
    labels = np.where(change < lo, 0, np.where(change > hi, 2, 1))
    mu, sd = book[:n_train_events].mean(0), book[:n_train_events].std(0)
    z = _t((book - mu) / sd)
    ends = np.arange(window - 1, len(change))
    train_ends = ends[ends < n_train_events - horizon]
    test_ends = ends[ends >= n_train_events]
    model = _DeepLOB(softmax_out=bug == "softmax_before_ce")  # bug: the probabilities into the CE loss
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)

    def batch(idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        rows = idx[:, None] + np.arange(-window + 1, 1)[None]
        return z[torch.as_tensor(rows)].unsqueeze(1), torch.as_tensor(labels[idx])

    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = rng.permutation(train_ends)
        for i in range(0, len(perm) - 63, 64):
            xb, yb = batch(perm[i : i + 64])
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: loss {np.mean(losses[-65:]):.4f}")
    model.eval()
    with torch.no_grad():
        preds = torch.cat(
            [model(batch(test_ends[i : i + 500])[0]).argmax(1) for i in range(0, len(test_ends), 500)]
        )
    y_test = torch.as_tensor(labels[test_ends])
    f1 = []
    for c in range(3):
        tp = ((preds == c) & (y_test == c)).sum().item()
        f1.append(2 * tp / max(1, (preds == c).sum().item() + (y_test == c).sum().item()))
    print(
        f"test accuracy {(preds == y_test).float().mean().item():.3f}, macro F1 {np.mean(f1):.3f} (chance 0.333)"
    )
    hook.close()
    return losses


# ============================================================================= credit scorecard (WoE)


def _applications(rng: np.random.Generator, n: int) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """A retail loan book: seven application fields with realistic marginals (age, income,
    debt-to-income, revolving utilization, past delinquencies, months employed, recent
    inquiries), an application date, and the default flag within twelve months (about 4 %)."""
    age = rng.uniform(21, 75, n)
    income = rng.lognormal(10.6, 0.5, n)
    dti = rng.beta(2, 5, n)
    util = rng.beta(1.5, 3, n)
    delinq = rng.poisson(0.3, n)
    employed = rng.exponential(60, n)
    inquiries = rng.poisson(1.0, n)
    logit = (
        -4.6 + 2.5 * (util - 0.33) + 0.7 * delinq + 2.0 * (dti - 0.29) - 0.4 * (np.log(income) - 10.6)
        + 0.03 * (age - 45) ** 2 / 10 - 0.004 * employed + 0.25 * inquiries
    )  # fmt: skip
    flag = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    date = rng.uniform(0, 730, n)  # days since the book opened; the file is in account order
    fields = {"age": age, "income": income, "dti": dti, "util": util, "delinq": delinq.astype(float),
              "employed": employed, "inquiries": inquiries.astype(float)}  # fmt: skip
    return fields, flag, date


def _woe_bins(x: np.ndarray, y: np.ndarray, n_bins: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Quantile bin edges of one field and the weight of evidence ln(%good / %bad) of each bin
    (half a count added to each cell)."""
    edges = np.unique(np.quantile(x, np.linspace(0, 1, n_bins + 1)[1:-1]))
    b = np.searchsorted(edges, x, side="right")
    good = np.bincount(b, weights=1 - y, minlength=len(edges) + 1) + 0.5
    bad = np.bincount(b, weights=y, minlength=len(edges) + 1) + 0.5
    return edges, np.log((good / good.sum()) / (bad / bad.sum()))


def credit_scorecard_woe_logistic(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """An application scorecard as a credit-risk team builds one: 24000 applications with a
    default rate of about 4 %, put in date order for an out-of-time split (the last quarter of
    the dates held out); each field binned into deciles and replaced by its weight of evidence
    fitted on the development sample; a logistic regression (`nn.Linear` on the WoE columns)
    trained by `nn.BCEWithLogitsLoss` with `pos_weight` = goods / bads, Adam 1e-2. The loss falls
    from about 1.26 to about 1.03; the out-of-time Gini is about 0.52 and the KS 0.40, and the
    scores are scaled to 600 points at odds of 50 with 20 points to double the odds."""
    rng = _seed(seed)
    fields, flag, date = _applications(rng, 24000)
    order = np.argsort(date, kind="stable")
    fields = {k: v[order] for k, v in fields.items()}
    y = flag if bug == "shuffled_labels" else flag[order]  # bug: the flags left in account order
    n_dev = 18000
    cols = []
    for v in fields.values():
        edges, woe = _woe_bins(v[:n_dev], y[:n_dev])
        cols.append(woe[np.searchsorted(edges, v, side="right")])
    x = _t(np.stack(cols, 1))
    yt = _t(y).unsqueeze(1)
    pos_weight = torch.tensor([(n_dev - y[:n_dev].sum()) / y[:n_dev].sum()])
    model = nn.Sequential(nn.Linear(x.shape[1], 1))
    loss_fn = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        perm = torch.randperm(n_dev)
        for i in range(0, n_dev, 512):
            idx = perm[i : i + 512]
            optimizer.zero_grad()
            loss = loss_fn(model(x[idx]), yt[idx])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: loss {np.mean(losses[-36:]):.4f}")
    with torch.no_grad():
        logit = model(x[n_dev:]).squeeze(1).numpy()
    y_oot = y[n_dev:]
    gini = 2 * _auc(logit, y_oot) - 1
    s = np.sort(logit)
    cdf_bad = np.searchsorted(np.sort(logit[y_oot == 1]), s, side="right") / max(1, y_oot.sum())
    cdf_good = np.searchsorted(np.sort(logit[y_oot == 0]), s, side="right") / (y_oot == 0).sum()
    factor = 20 / math.log(2)
    score = 600 - factor * math.log(50) - factor * logit  # the odds of good are exp(-logit)
    print(
        f"out-of-time default rate {y_oot.mean():.3f}, Gini {gini:.3f}, KS {np.max(np.abs(cdf_bad - cdf_good)):.3f}, "
        f"scores {np.percentile(score, 5):.0f}-{np.percentile(score, 95):.0f}"
    )
    hook.close()
    return losses


# ============================================================================= claim frequency (CANN)


def _motor_portfolio(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """A motor third-party liability portfolio in the shape of freMTPL2: driver age, vehicle
    age, vehicle power, bonus-malus level, log population density, one of ten regions, the
    exposure in years (40 % full years), and Poisson claim counts whose frequency (about 8 % a
    year) has a young-driver U shape, a young-driver-by-power interaction and regional effects."""
    drv = np.clip(rng.gamma(9, 5, n) + 18, 18, 90)
    veh = np.clip(rng.exponential(6, n), 0, 25)
    power = rng.integers(4, 16, n).astype(float)
    bm = np.clip(50 + rng.exponential(12, n) * (rng.random(n) < 0.35), 50, 150)
    dens = rng.normal(6.0, 1.8, n)
    region = rng.integers(0, 10, n)
    exposure = np.where(rng.random(n) < 0.4, 1.0, rng.uniform(0.05, 1.0, n))
    reg_eff = np.linspace(-0.3, 0.3, 10)[rng.permutation(10)]
    log_freq = (
        -2.65 + 0.9 * np.exp(-(drv - 18) / 6) + 0.004 * np.maximum(drv - 55, 0) ** 1.5 / 10
        + 0.02 * (bm - 50) + 0.07 * (dens - 6) - 0.02 * veh + reg_eff[region]
        + 0.9 * (drv < 30) * (power > 9) + 0.3 * np.sin(power / 2) + 0.4 * np.tanh((dens - 6) * (bm - 60) / 20)
    )  # fmt: skip
    claims = rng.poisson(exposure * np.exp(log_freq)).astype(float)
    return {"drv": drv, "veh": veh, "power": power, "bm": bm, "dens": dens, "region": region,
            "exposure": exposure, "claims": claims, "true": exposure * np.exp(log_freq)}  # fmt: skip


def _glm_design(p: dict[str, np.ndarray]) -> np.ndarray:
    """The GLM's design: driver age in six bands, vehicle age, power and bonus-malus linear, log
    density, the regions as dummies."""
    bands = np.searchsorted([21, 26, 31, 41, 51], p["drv"], side="right")
    return np.concatenate(
        [np.eye(6)[bands][:, 1:], np.stack([p["veh"] / 10, p["power"] / 10, (p["bm"] - 50) / 50, p["dens"] / 5], 1),
         np.eye(10)[p["region"]][:, 1:], np.ones((len(bands), 1))], 1,
    )  # fmt: skip


class _CANN(nn.Module):
    """Schelldorfer and Wuthrich's combined actuarial neural network: the fitted GLM's linear
    predictor enters through a skip connection and a ReLU network (with a region embedding)
    learns the correction on the log scale."""

    def __init__(self) -> None:
        super().__init__()
        self.region = nn.Embedding(10, 2)
        self.net = nn.Sequential(
            nn.Linear(7, 20), nn.ReLU(), nn.Linear(20, 15), nn.ReLU(), nn.Linear(15, 10), nn.ReLU()
        )
        self.out = nn.Linear(10, 1)

    def forward(self, x: torch.Tensor, region: torch.Tensor, glm_eta: torch.Tensor) -> torch.Tensor:
        return glm_eta + self.out(self.net(torch.cat([x, self.region(region)], 1))).squeeze(1)


def _poisson_deviance(mu: np.ndarray, y: np.ndarray) -> float:
    return float(2 * np.mean(mu - y + np.where(y > 0, y * np.log(np.maximum(y, 1e-12) / mu), 0.0)))


def cann_claim_frequency_glm_skip(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Claim frequency by a CANN: a Poisson GLM with the log exposure as offset fitted first (by
    `torch.optim.LBFGS`, before the hook), then a ReLU network of 20, 15 and 10 units on the
    standardized covariates and a two-dimensional region embedding added to the GLM's linear
    predictor, its output layer initialized at zero so that training starts from the GLM;
    `nn.PoissonNLLLoss(log_input=True)` on the log-rate plus offset, Adam 3e-3, batches of 512.
    The loss moves little below the GLM's level (under 1 %: claims are rare), and the
    out-of-sample Poisson deviance goes from the GLM's 30.12 (x100) to about 29.8, toward the true
    frequencies' 29.59."""
    rng = _seed(seed)
    p = _motor_portfolio(rng, 50000)
    n_tr = 40000
    design = _t(_glm_design(p))
    offset = _t(np.log(p["exposure"]))
    claims = _t(p["claims"])
    beta = torch.zeros(design.shape[1], requires_grad=True)
    glm_opt = torch.optim.LBFGS([beta], lr=1, max_iter=100, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        glm_opt.zero_grad()
        eta = design[:n_tr] @ beta + offset[:n_tr]
        loss = (torch.exp(eta) - claims[:n_tr] * eta).mean()
        loss.backward()
        return loss

    glm_opt.step(closure)
    glm_eta = (design @ beta).detach()
    cont = np.stack([p["drv"], p["veh"], p["power"], p["bm"], p["dens"]], 1)
    x = _t((cont - cont[:n_tr].mean(0)) / cont[:n_tr].std(0))
    region = torch.as_tensor(p["region"])
    model = _CANN()
    if bug == "dead_relu_init":  # bug: the zero start applied to every Linear by `model.apply`

        def init_weights(m: nn.Module) -> None:
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.weight)
                nn.init.zeros_(m.bias)

        model.apply(init_weights)
    else:
        nn.init.zeros_(model.out.weight)
        nn.init.zeros_(model.out.bias)
    loss_fn = nn.PoissonNLLLoss(log_input=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        perm = torch.randperm(n_tr)
        for i in range(0, n_tr, 512):
            idx = perm[i : i + 512]
            optimizer.zero_grad()
            loss = loss_fn(model(x[idx], region[idx], glm_eta[idx]) + offset[idx], claims[idx])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: Poisson NLL {np.mean(losses[-78:]):.5f}")
    with torch.no_grad():
        mu_cann = torch.exp(model(x[n_tr:], region[n_tr:], glm_eta[n_tr:]) + offset[n_tr:]).numpy()
    y, expo = p["claims"][n_tr:], p["exposure"][n_tr:]
    mu_glm = np.exp(glm_eta[n_tr:].numpy()) * expo
    mu_hom = expo * p["claims"][:n_tr].sum() / p["exposure"][:n_tr].sum()
    print(
        f"test Poisson deviance (x100): homogeneous {100 * _poisson_deviance(mu_hom, y):.3f}, "
        f"GLM {100 * _poisson_deviance(mu_glm, y):.3f}, CANN {100 * _poisson_deviance(mu_cann, y):.3f}, "
        f"true frequencies {100 * _poisson_deviance(p['true'][n_tr:], y):.3f}"
    )
    hook.close()
    return losses


# ============================================================================= claim severity (Gamma)


class GammaDeviance(nn.Module):
    """The Gamma unit deviance 2 (y / mu - log(y / mu) - 1), averaged: the loss of a log-link
    Gamma model of claim amounts."""

    def forward(self, mu: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        ratio = y / mu
        return (2 * (ratio - torch.log(ratio) - 1)).mean()


def gamma_claim_severity_log_link(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Claim severity as actuaries model it, a Gamma regression with a log link, here a network:
    20000 motor claims (collision, theft, glass, liability; vehicle value, driver age, the
    deductible, the region as a four-dimensional embedding) with Gamma amounts of shape 1.5
    about a mean between some hundreds and some tens of thousands; the amounts in thousands, an
    MLP of 32 and 16 ELU units whose output bias starts at the log of the mean claim, `exp` as
    the inverse link, the Gamma deviance as a loss module, Adam 2e-3. The deviance falls from
    about 1.4 to about 0.75; on held-out claims about half of the null deviance is explained,
    close to what the true means explain."""
    rng = _seed(seed)
    n = 20000
    kind = rng.choice(4, n, p=[0.5, 0.1, 0.25, 0.15])
    value = rng.lognormal(np.log(20000), 0.5, n)
    age = rng.uniform(18, 85, n)
    deductible = rng.choice([250.0, 500.0, 1000.0], n)
    region = rng.integers(0, 12, n)
    kind_eff = np.array([0.0, 1.0, -1.6, 0.9])
    reg_eff = rng.normal(0, 0.15, 12)
    log_mean = (
        np.log(3000) + kind_eff[kind] + 0.5 * (kind == 1) * np.log(value / 20000) + 0.3 * np.log(value / 20000)
        + 0.25 * np.exp(-(age - 18) / 8) + 0.15 * np.log(deductible / 500) + reg_eff[region]
    )  # fmt: skip
    shape = 1.5
    amount = rng.gamma(shape, np.exp(log_mean) / shape)
    cont = np.stack([np.log(value), age, np.log(deductible)], 1)
    x = _t(np.concatenate([(cont - cont[:16000].mean(0)) / cont[:16000].std(0), np.eye(4)[kind]], 1))
    region_t = torch.as_tensor(region)
    y = _t(amount / 1000)
    emb = nn.Embedding(12, 4)
    body = nn.Sequential(nn.Linear(11, 32), nn.ELU(), nn.Linear(32, 16), nn.ELU(), nn.Linear(16, 1))
    with torch.no_grad():
        body[-1].bias.fill_(math.log(y[:16000].mean().item()))
    model = nn.ModuleDict({"region": emb, "body": body})
    loss_fn = GammaDeviance()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)

    def predict(idx: torch.Tensor | slice) -> torch.Tensor:
        return torch.exp(body(torch.cat([x[idx], emb(region_t[idx])], 1)).squeeze(1))

    losses: list[float] = []
    for epoch in range(epochs):
        perm = torch.randperm(16000)
        for i in range(0, 16000, 256):
            idx = perm[i : i + 256]
            optimizer.zero_grad()
            loss = loss_fn(predict(idx), y[idx])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        print(f"epoch {epoch}: Gamma deviance {np.mean(losses[-63:]):.4f}")
    with torch.no_grad():
        mu = predict(slice(16000, None))
        yt = y[16000:]
        dev = loss_fn(mu, yt).item()
        null = loss_fn(torch.full_like(yt, y[:16000].mean().item()), yt).item()
        oracle = loss_fn(_t(np.exp(log_mean[16000:]) / 1000), yt).item()
    print(
        f"test deviance {dev:.4f}, null {null:.4f}, true means {oracle:.4f}: explained {1 - dev / null:.3f}"
    )
    hook.close()
    return losses


# ============================================================================= yield curve autoencoder

_MATURITIES = np.array([3, 6, 12, 24, 36, 60, 84, 120, 180, 240, 360], dtype=float)  # months


def _nelson_siegel_yields(rng: np.random.Generator, n_days: int, lam: float = 0.0609) -> np.ndarray:
    """Daily yield curves (in %) at eleven maturities from Diebold and Li's dynamic Nelson-Siegel
    model: level, slope and curvature factors following a VAR(1) about 4.5, -1.5 and 0.5, the
    loadings at lambda = 0.0609, and two basis points of measurement noise."""
    mean = np.array([4.5, -1.5, 0.5])
    phi = np.array([[0.998, 0.0, 0.0], [0.0, 0.995, 0.0], [0.0, 0.003, 0.99]])
    sd = np.array([0.05, 0.06, 0.12])
    f = mean.copy()
    factors = np.empty((n_days, 3))
    for t in range(n_days):
        f = mean + phi @ (f - mean) + sd * rng.standard_normal(3)
        factors[t] = f
    lt = lam * _MATURITIES
    slope = (1 - np.exp(-lt)) / lt
    loadings = np.stack([np.ones_like(lt), slope, slope - np.exp(-lt)], 1)
    return factors @ loadings.T + 0.02 * rng.standard_normal((n_days, len(lt)))


def yield_curve_autoencoder_nelson_siegel(
    path: str, epochs: int = 40, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A yield-curve autoencoder as the term-structure papers train one: 2500 days of curves at
    eleven maturities standardized per maturity, an encoder of 64, 64 and 32 units to three
    latent factors and a mirrored decoder (ELU), `nn.MSELoss`, Adam 3e-3 with cosine annealing,
    batches of 64, the first 2000 days to train. The loss falls from about 1 to under 1e-3; the
    test reconstruction error is about 2.2 bp, near the 1.7 bp of three principal components
    (the curves carry 2 bp of noise)."""
    rng = _seed(seed)
    yields = _nelson_siegel_yields(rng, 2500)
    mu, sd = yields[:2000].mean(0), yields[:2000].std(0)
    z = _t((yields - mu) / sd)
    act = nn.Sigmoid if bug == "deep_sigmoid" else nn.ELU  # bug: sigmoids "for smooth factors"
    model = nn.Sequential(
        nn.Linear(11, 64), act(), nn.Linear(64, 64), act(), nn.Linear(64, 32), act(), nn.Linear(32, 3),
        nn.Linear(3, 32), act(), nn.Linear(32, 64), act(), nn.Linear(64, 64), act(), nn.Linear(64, 11),
    )  # fmt: skip
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []
    for epoch in range(epochs):
        perm = torch.randperm(2000)
        for i in range(0, 2000, 64):
            xb = z[perm[i : i + 64]]
            optimizer.zero_grad()
            loss = loss_fn(model(xb), xb)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
        if epoch % 10 == 9:
            print(f"epoch {epoch}: MSE {np.mean(losses[-32:]):.5f}")
    with torch.no_grad():
        rec = model(z[2000:]).numpy() * sd + mu
    centered = (yields[:2000] - mu) / sd
    vt = np.linalg.svd(centered, full_matrices=False)[2][:3]
    pca = ((((yields[2000:] - mu) / sd) @ vt.T) @ vt) * sd + mu
    print(
        f"test RMSE {100 * np.sqrt(np.mean((rec - yields[2000:]) ** 2)):.2f} bp "
        f"(three principal components {100 * np.sqrt(np.mean((pca - yields[2000:]) ** 2)):.2f} bp)"
    )
    hook.close()
    return losses


# ============================================================================= optimal execution (Almgren-Chriss)


def almgren_chriss_execution_reinforce(
    path: str, iterations: int = 250, seed: int = 0, bug: str | None = None
) -> list[float]:
    """An execution agent in an Almgren-Chriss market: liquidate one block over ten periods
    with temporary impact (eta = 2.5) and permanent impact (gamma = 0.5) on an arithmetic random
    walk (sigma = 1 per period); the cost is the implementation shortfall plus the risk penalty
    lambda sigma^2 sum of squared holdings (lambda = 0.1). The policy (an MLP of 32 tanh units
    on the time left, the holding left and the price move) gives the logit of the fraction of the
    holding to sell, with a learned log standard deviation; REINFORCE with the batch's normalized
    costs as advantages, 512 episodes an iteration, Adam 1e-3; the returned losses are the
    surrogate. The cost of the policy's mean schedule falls from about 0.97 to about 0.72-0.74,
    near the closed-form Almgren-Chriss schedule's 0.71 and below TWAP's 0.78."""
    rng = _seed(seed)
    n_steps, eta, gamma, sigma, lam = 10, 2.5, 0.5, 1.0, 0.1
    policy = nn.Sequential(nn.Linear(3, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
    log_std = nn.Parameter(torch.full((1,), -0.5))
    lr = 1e-1 if bug == "lr_x100" else 1e-3  # bug: 1e-1 typed for 1e-3
    optimizer = torch.optim.Adam([*policy.parameters(), log_std], lr=lr)
    hook = Hook(path)
    hook.register_module(policy)

    def cost_of(schedule: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """The cost of fixed sales per period over paths of shocks."""
        holdings = 1 - np.cumsum(schedule)
        drift = np.cumsum(sigma * noise, 1) - gamma * np.cumsum(schedule)[None]
        prices = np.concatenate([np.zeros((len(noise), 1)), drift[:, :-1]], 1)
        received = (schedule[None] * (prices - eta * schedule[None])).sum(1)
        return -received + lam * sigma**2 * (holdings[:-1] ** 2).sum()

    eta_t = eta - 0.5 * gamma
    kappa = math.acosh(1 + 0.5 * lam * sigma**2 / eta_t)
    x_ac = np.sinh(kappa * (n_steps - np.arange(n_steps + 1))) / math.sinh(kappa * n_steps)
    bench_noise = rng.standard_normal((20000, n_steps))
    ac_cost = cost_of(-np.diff(x_ac), bench_noise).mean()
    twap_cost = cost_of(np.full(n_steps, 1 / n_steps), bench_noise).mean()
    losses: list[float] = []
    for it in range(iterations):
        holding = torch.ones(512)
        price = torch.zeros(512)
        logp = torch.zeros(512)
        cost = torch.zeros(512)
        for k in range(n_steps):
            state = torch.stack([torch.full((512,), 1 - k / n_steps), holding, price / sigma], 1)
            mean = policy(state).squeeze(1)
            if k < n_steps - 1:
                u = mean + log_std.exp() * torch.randn(512)
                u = u.detach()
                logp = logp + torch.distributions.Normal(mean, log_std.exp()).log_prob(u)
                sell = torch.sigmoid(u) * holding
            else:
                sell = holding
            cost = cost - sell * (price - eta * sell)
            holding = holding - sell
            price = price + sigma * torch.randn(512) - gamma * sell
            if k < n_steps - 1:
                cost = cost + lam * sigma**2 * holding**2
        adv = (cost - cost.mean()) / (cost.std() + 1e-8)
        loss = (logp * adv).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if it % 50 == 0 or it == iterations - 1:
            with torch.no_grad():  # the policy's mean action, a deterministic schedule here
                holding, schedule = torch.ones(1), []
                for k in range(n_steps):
                    state = torch.stack([torch.full((1,), 1 - k / n_steps), holding, torch.zeros(1)], 1)
                    sell = torch.sigmoid(policy(state).squeeze(1)) * holding if k < n_steps - 1 else holding
                    schedule.append(sell.item())
                    holding = holding - sell
            greedy = cost_of(np.array(schedule), bench_noise).mean()
            print(f"iteration {it}: batch cost {cost.mean().item():.3f}, mean schedule's {greedy:.3f} "
                  f"(Almgren-Chriss {ac_cost:.3f}, TWAP {twap_cost:.3f})")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= macro nowcasting, walk-forward


def _macro_panel(rng: np.random.Generator, n_quarters: int) -> tuple[np.ndarray, np.ndarray]:
    """Eight monthly indicators (industrial production, payrolls, PMI, retail sales...) loading on
    a latent business-cycle factor (an AR(2) with occasional recessions), each with its own noise,
    and quarterly GDP growth (annualized, in %) as the quarter's mean of the factor plus noise."""
    n_months = 3 * n_quarters
    f = np.zeros(n_months)
    for t in range(2, n_months):
        shock = rng.standard_normal() - (2.5 if rng.random() < 0.01 else 0.0)
        f[t] = 1.3 * f[t - 1] - 0.4 * f[t - 2] + 0.3 * shock
    loadings = rng.uniform(0.5, 1.0, 8)
    indicators = f[:, None] * loadings + 0.5 * rng.standard_normal((n_months, 8))
    indicators[:, 2] = np.cumsum(indicators[:, 2]) * 0.1 + 0.5 * f  # PMI-like: a level, not a change
    gdp = 2.0 + 1.5 * f.reshape(n_quarters, 3).mean(1) + 0.6 * rng.standard_normal(n_quarters)
    return indicators, gdp


class _Nowcaster(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(self.drop(out[:, -1])).squeeze(1)


def macro_nowcast_lstm_walk_forward(
    path: str, epochs: int = 25, seed: int = 0, bug: str | None = None
) -> list[float]:
    """GDP nowcasting as central-bank staff backtest it: an LSTM (16 units, dropout 0.2) reads the
    last twelve months of eight standardized monthly indicators at the end of each quarter and
    nowcasts the quarter's GDP growth; a walk-forward (expanding-window) evaluation starts from 80
    quarters and adds 10 at a time, the model carried over and refitted for 25 epochs on each
    window (`nn.MSELoss`, Adam 2e-3, batches of 16), then `model.eval()` for the next 10
    quarters' nowcasts. The loss falls within each window and across them; the out-of-sample
    RMSE is well below the historical mean's."""
    rng = _seed(seed)
    indicators, gdp = _macro_panel(rng, 160)
    mu, sd = indicators[: 3 * 80].mean(0), indicators[: 3 * 80].std(0)
    x = _t((indicators - mu) / sd)
    quarters = np.arange(4, 160)  # the first four quarters give the first twelve-month window
    windows = torch.stack([x[3 * q - 9 : 3 * q + 3] for q in quarters])
    g_mu, g_sd = gdp[:80].mean(), gdp[:80].std()
    y = _t((gdp[quarters] - g_mu) / g_sd)
    model = _Nowcaster()
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    if bug == "train_in_eval_mode":  # bug: `model.train()` above the walk-forward loop, not in it
        model.train()
    losses: list[float] = []
    errors, naive = [], []
    for end in range(76, len(quarters), 10):
        if bug != "train_in_eval_mode":
            model.train()
        for _ in range(epochs):
            perm = torch.randperm(end)
            for i in range(0, end, 16):
                idx = perm[i : i + 16]
                optimizer.zero_grad()
                loss = loss_fn(model(windows[idx]), y[idx])
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            pred = model(windows[end : end + 10])
        errors.extend(((pred - y[end : end + 10]) * g_sd).tolist())
        naive.extend(((y[:end].mean() - y[end : end + 10]) * g_sd).tolist())
        print(f"window to quarter {quarters[end]}: train MSE {np.mean(losses[-5:]):.3f}")
    rmse = math.sqrt(np.mean(np.square(errors)))
    print(f"out-of-sample RMSE {rmse:.2f} pp (historical mean {math.sqrt(np.mean(np.square(naive))):.2f} pp)")
    hook.close()
    return losses


# ============================================================================= mortality (neural Lee-Carter)


def _mortality_rates(rng: np.random.Generator, n_pops: int) -> np.ndarray:
    """Central death rates m(x, t) of `n_pops` populations (countries by gender), ages 0-99,
    years 1960-2019: a Gompertz-Makeham age pattern with an infant hump, and Lee-Carter
    improvements a_x + b_x k_t whose pace and age profile differ by population, with Poisson-like
    noise of finite exposures. Shape (n_pops, 60, 100)."""
    ages = np.arange(100)
    years = np.arange(60)
    out = np.empty((n_pops, 60, 100))
    for p in range(n_pops):
        a = np.log(5e-4 * np.exp(0.09 * (ages - 30) * (1 + 0.05 * rng.standard_normal())) + 2e-4)
        a += np.log1p(30 * np.exp(-ages / 1.5)) + 0.3 * rng.standard_normal()
        b = np.exp(-((ages - 10 - 40 * rng.random()) ** 2) / 2000)
        b /= b.sum()
        k = -(1.2 + 0.8 * rng.random()) * 100 * years / 60 + np.cumsum(rng.normal(0, 1.5, 60))
        log_m = a[None] + b[None] * k[:, None]
        exposure = 2e5 * np.exp(-ages / 60)[None] * (1 + 3 * rng.random())
        deaths = rng.poisson(np.exp(log_m) * exposure)
        out[p] = np.log(np.maximum(deaths, 0.5) / exposure)
    return out


class _NeuralLeeCarter(nn.Module):
    """Richman and Wuthrich's network for many populations: embeddings of age and population
    (the last row of the population embedding is a new population, unseen in the first fit),
    the calendar year, and a tanh body to the log death rate."""

    def __init__(self, n_pops: int) -> None:
        super().__init__()
        self.age = nn.Embedding(100, 5)
        self.pop = nn.Embedding(n_pops + 1, 5)
        self.body = nn.Sequential(
            nn.Linear(11, 64), nn.Tanh(), nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 1)
        )
        self.level = nn.Parameter(torch.zeros(1))  # a new population's level, used in the transfer

    def forward(self, age: torch.Tensor, pop: torch.Tensor, year: torch.Tensor) -> torch.Tensor:
        h = torch.cat([self.age(age), self.pop(pop), year.unsqueeze(1)], 1)
        return self.body(h).squeeze(1) + self.level


def neural_lee_carter_transfer(
    path: str, epochs: int = 14, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Mortality forecasting with a neural Lee-Carter model, then transferred to a population with
    a short history: ten populations' log death rates, ages 0-99, fitted on the years to 2004
    (`nn.MSELoss`, Adam 2e-3, batches of 512), tested on 2005-2019 against the Lee-Carter model by
    SVD with a random-walk drift; then a new population with only 1990-2004 observed: the body
    and the age embedding frozen (`requires_grad_(False)`), its embedding row and a level
    trained on its data (Adam over the trainable parameters). The loss falls in the first fit
    from about 5 to about 0.02, jumps at the new population and falls again to about 0.07; the
    test errors (about 0.09 and 0.15) are worse than those of the Lee-Carter model, the data's
    own form, but sensible."""
    rng = _seed(seed)
    n_pops = 10
    rates = _mortality_rates(rng, n_pops + 1)
    p_idx, t_idx, a_idx = np.meshgrid(np.arange(n_pops + 1), np.arange(60), np.arange(100), indexing="ij")
    pop, year, age = (torch.as_tensor(v.reshape(-1)) for v in (p_idx, t_idx, a_idx))
    target = _t(rates.reshape(-1))
    year_f = (year.float() - 30) / 20
    train = (pop < n_pops) & (year < 45)
    test = (pop < n_pops) & (year >= 45)
    new_train = (pop == n_pops) & (year >= 30) & (year < 45)
    new_test = (pop == n_pops) & (year >= 45)
    model = _NeuralLeeCarter(n_pops)
    with torch.no_grad():
        model.body[-1].bias.fill_(target[train].mean().item())
    model.level.requires_grad_(False)
    loss_fn = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []

    def fit(mask: torch.Tensor, n_epochs: int, lr: float) -> None:
        optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
        rows = torch.nonzero(mask).squeeze(1)
        for _ in range(n_epochs):
            perm = rows[torch.randperm(len(rows))]
            for i in range(0, len(perm), 512):
                idx = perm[i : i + 512]
                optimizer.zero_grad()
                loss = loss_fn(model(age[idx], pop[idx], year_f[idx]), target[idx])
                loss.backward()
                optimizer.step()
                losses.append(loss.item())

    def mse(mask: torch.Tensor) -> float:
        with torch.no_grad():
            return loss_fn(model(age[mask], pop[mask], year_f[mask]), target[mask]).item()

    def lee_carter(p: int, first: int) -> float:
        hist = rates[p, first:45]
        a = hist.mean(0)
        u, s, vt = np.linalg.svd(hist - a, full_matrices=False)
        k, b = u[:, 0] * s[0], vt[0]
        drift = (k[-1] - k[0]) / (len(k) - 1)
        fc = a + b * (k[-1] + drift * np.arange(1, 16))[:, None]
        return float(np.mean((fc - rates[p, 45:]) ** 2))

    fit(train, epochs, 2e-3)
    print(f"pooled fit: train MSE {np.mean(losses[-50:]):.4f}, test MSE {mse(test):.4f} "
          f"(Lee-Carter {np.mean([lee_carter(p, 0) for p in range(n_pops)]):.4f})")  # fmt: skip
    for p in model.parameters():
        p.requires_grad_(False)
    if bug == "frozen_by_mistake":  # bug: `requires_grad` set on the module, not on its parameters
        model.pop.requires_grad = True
    else:
        model.pop.weight.requires_grad_(True)
    model.level.requires_grad_(True)
    fit(new_train, 25, 1e-2)
    print(f"new population: train MSE {np.mean(losses[-6:]):.4f}, test MSE {mse(new_test):.4f} "
          f"(Lee-Carter on its 15 years {lee_carter(n_pops, 30):.4f})")  # fmt: skip
    hook.close()
    return losses


_returns = healthy(
    "next_day_returns_nn3_low_snr", "cross-sectional return prediction (NN3)", next_day_returns_nn3_low_snr
)
_har = healthy(
    "har_realized_vol_gaussian_nll",
    "realized-volatility forecast (HAR, Gaussian NLL)",
    har_realized_vol_gaussian_nll,
)
_bs = healthy(
    "black_scholes_pricer_surrogate", "neural option pricer (Black-Scholes)", black_scholes_pricer_surrogate
)
_dml = healthy(
    "differential_ml_bachelier_basket",
    "differential machine learning (pathwise derivatives)",
    differential_ml_bachelier_basket,
)
_lob = healthy(
    "deeplob_mid_price_direction", "limit order book CNN-LSTM (DeepLOB)", deeplob_mid_price_direction
)
_woe = healthy(
    "credit_scorecard_woe_logistic", "credit scorecard (WoE logistic)", credit_scorecard_woe_logistic
)
_cann = healthy(
    "cann_claim_frequency_glm_skip", "claim frequency CANN (Poisson, GLM skip)", cann_claim_frequency_glm_skip
)
_yield = healthy(
    "yield_curve_autoencoder_nelson_siegel", "yield-curve autoencoder", yield_curve_autoencoder_nelson_siegel
)
_exec = healthy(
    "almgren_chriss_execution_reinforce",
    "optimal execution agent (REINFORCE)",
    almgren_chriss_execution_reinforce,
)
_nowcast = healthy(
    "macro_nowcast_lstm_walk_forward", "GDP nowcasting LSTM (walk-forward)", macro_nowcast_lstm_walk_forward
)
_mortality = healthy(
    "neural_lee_carter_transfer", "neural Lee-Carter mortality (transfer)", neural_lee_carter_transfer
)

PIPELINES = [
    _returns,
    _har,
    buggy(_har, "log_zero_nan"),
    _bs,
    buggy(_bs, "inputs_x255"),
    _dml,
    buggy(_dml, "no_zero_grad"),
    _lob,
    buggy(_lob, "softmax_before_ce"),
    _woe,
    buggy(_woe, "shuffled_labels"),
    _cann,
    buggy(_cann, "dead_relu_init"),
    healthy(
        "gamma_claim_severity_log_link", "claim severity (Gamma deviance)", gamma_claim_severity_log_link
    ),
    _yield,
    buggy(_yield, "deep_sigmoid"),
    _exec,
    buggy(_exec, "lr_x100"),
    _nowcast,
    buggy(_nowcast, "train_in_eval_mode"),
    _mortality,
    buggy(_mortality, "frozen_by_mistake"),
]
