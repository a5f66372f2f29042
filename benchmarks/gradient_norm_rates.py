"""The false-alarm rate of `gradient_norm_spike` per 10^6 healthy training steps, measured by
replaying healthy gradient-norm series through the rule's one decision (`_space`, `_spike`,
`_push`: what both of its paths run) at the two-line hook's statistics schedule (every
step for the first 20 training steps, then every 100th).

    .venv/bin/python benchmarks/gradient_norm_rates.py [--runs 40] [--steps 1000000] [--layers 3]

Each run is `--layers` weight-gradient norm series and the global norm over them (so the
rule judges layers + 1 series, as on a model of that many weights), generated from a seed
with one of the healthy kinds of `KINDS` (log-normal batch noise, Pareto-tailed batch noise,
an autocorrelated norm, a near-converged classifier whose batches holding a hard sample
have 20-60x the norm, often or rarely, a norm that falls 100x over the run, a warm-up then
cosine decay, and log-t noise, a tail beyond the rule's model).
A run alarms if any of its saved steps fires. Prints one markdown table: runs alarmed and
alarms per 10^6 steps for each kind, with the 95% upper bound where none fired.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from mldbg.rules.builtin.gradient_norm_spike import GLOBAL, GradientNormSpike  # noqa: E402


def schedule(steps: int) -> np.ndarray:
    """The training steps the two-line hook saves statistics at (its default budget)."""
    return np.concatenate([np.arange(min(20, steps)), np.arange(100, steps, 100)])


def _lognormal(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return rng.normal(0.0, rng.uniform(0.1, 0.5), len(t))


def lognormal(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Log-normal batch noise around a level, 10-50% (the log of the norm)."""
    return _lognormal(t, rng)


def heavy(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Heavy-tailed batch noise: the norm times a Pareto factor of tail index 2-3 (its log is
    exponential, the tail the rule's Laplace model assumes) on log-normal noise."""
    return _lognormal(t, rng) + rng.exponential(1 / rng.uniform(2.0, 3.0), len(t))


def log_t(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Beyond the rule's model: Student-t (3 degrees of freedom) noise on the log-norm, a
    tail heavier than any power law of the norm."""
    return rng.uniform(0.1, 0.3) * rng.standard_t(3, len(t))


def autocorrelated(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """An AR(1) log-norm (rho 0.5-0.95 from one saved step to the next): a norm that wanders."""
    rho, sigma = rng.uniform(0.5, 0.95), rng.uniform(0.05, 0.3)
    out = np.empty(len(t))
    out[0] = rng.normal(0, sigma / math.sqrt(1 - rho**2))
    eps = rng.normal(0, sigma, len(t))
    for i in range(1, len(t)):
        out[i] = rho * out[i - 1] + eps[i]
    return out


def _hard(t: np.ndarray, rng: np.random.Generator, lo: float, hi: float) -> np.ndarray:
    base = _lognormal(t, rng)
    hit = rng.random(len(t)) < rng.uniform(lo, hi)
    return base + np.where(hit, np.log(rng.uniform(20, 60, len(t))), 0.0)


def hard_samples(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A classifier near convergence: most of its gradient comes from the few samples it still
    gets wrong, so a batch holding one has 20-60x the norm of one without; with 0.5-2% of
    samples wrong and batches of 32-128, 15-90% of batches hold one (here 20-60%)."""
    return _hard(t, rng, 0.2, 0.6)


def rare_hard_samples(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The same, with 1-10% of batches holding a hard sample (fewer than 1 in 50 saved steps
    at times: the run's own history may hold none when the next comes)."""
    return _hard(t, rng, 0.01, 0.1)


def falling(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A norm that falls 100x over the run (a power law in the step), with log-normal noise."""
    return -math.log(100) * np.log1p(t) / math.log1p(t[-1]) + _lognormal(t, rng)


def warmup_cosine(t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The norm rises 10x through a warm-up of 1-5% of the run, then follows a cosine decay
    of the learning rate down to a tenth, with log-normal noise."""
    n = t[-1] + 1
    warm = n * rng.uniform(0.01, 0.05)
    lr = np.where(t < warm, (t + 1) / warm, 0.55 + 0.45 * np.cos(math.pi * (t - warm) / (n - warm)))
    return np.log(np.maximum(lr, 1e-3)) + _lognormal(t, rng)


KINDS: dict[str, Callable[[np.ndarray, np.random.Generator], np.ndarray]] = {
    "lognormal": lognormal,
    "heavy": heavy,
    "autocorrelated": autocorrelated,
    "hard_samples": hard_samples,
    "rare_hard_samples": rare_hard_samples,
    "log_t": log_t,
    "falling": falling,
    "warmup_cosine": warmup_cosine,
}


def replay(kind: str, seed: int, steps: int, layers: int) -> int:
    """The alarms of one healthy run: `layers` weight-gradient norms of this kind (each its
    own level and noise) and their global norm, fed to the rule at the hook's schedule."""
    rng = np.random.default_rng([seed, list(KINDS).index(kind)])
    t = schedule(steps)
    logs = np.stack([KINDS[kind](t, rng) + rng.uniform(-3, 1) for _ in range(layers)])
    norms = np.exp(logs)
    total = np.sqrt((norms * norms).sum(axis=0))
    rule = GradientNormSpike()
    rule.reset()
    names = [f"layer{i}.weight" for i in range(layers)]
    alarms = 0
    for j, step in enumerate(t.tolist()):
        values = {n: float(norms[i, j]) for i, n in enumerate(names)}
        values[GLOBAL] = float(total[j])
        fired = False
        for name, value in values.items():
            rule._space(name, step)
            fired = rule._spike(name, value) is not None or fired
        for name, value in values.items():
            rule._push(name, value)
        alarms += fired
    return alarms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40, help="runs per kind")
    ap.add_argument("--steps", type=int, default=1_000_000, help="training steps per run")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--kinds", nargs="*", default=list(KINDS))
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(
        f"`gradient_norm_spike` on replayed healthy gradient norms: {args.runs} runs of {args.steps:,} training "
        f"steps per kind, {args.layers} layers + the global norm, saved at the two-line hook's schedule "
        f"({len(schedule(args.steps)):,} saved steps a run)\n"
    )
    print("| kind | runs alarmed | alarms per 10^6 steps |")
    print("| --- | --- | --- |")
    total_runs = total_alarms = 0
    for kind in args.kinds:
        alarms = [replay(kind, seed, args.steps, args.layers) for seed in range(args.runs)]
        hit, count = sum(a > 0 for a in alarms), sum(alarms)
        total_runs, total_alarms = total_runs + hit, total_alarms + count
        per = count / (args.runs * args.steps / 1e6)
        bound = 3.0 / (args.runs * args.steps / 1e6)  # 95% upper bound of a Poisson rate with 0 seen
        print(
            f"| {kind} | {hit}/{args.runs} | {per:.3g}"
            + (f" (< {bound:.2g}, 95%)" if count == 0 else "")
            + " |"
        )
    n = args.runs * len(args.kinds)
    steps = n * args.steps / 1e6
    print(
        f"| all | {total_runs}/{n} | {total_alarms / steps:.3g}"
        + (f" (< {3.0 / steps:.2g}, 95%)" if total_alarms == 0 else "")
        + " |"
    )
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
