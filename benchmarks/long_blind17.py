"""A seventeenth blind set of long healthy training-loss series and buggy ones, for
`long_runs.py --blind17`.

    .venv/bin/python benchmarks/long_runs.py --blind17 [--steps 100000] [--bug-steps 20000] ...

Fourteen kinds of healthy loss series (`KINDS`) and four buggy ones (`BUGS`), written without
running any rule on them and without looking at any rule's results: each models how the logs
of a training job look over 10^5-10^6 logged values (the practice is cited in its docstring),
its parameters drawn per seed. Their theme is multi-stage and multi-model jobs logged under one
global step, each stage with its own optimizer and schedule where that is the practice (or one
shared where that is), and logs carrying artefacts of the logging itself: pretraining, SFT and
DPO in one job; DeepSpeed-Chat's SFT, reward model and PPO; a Keras teacher then its distilled
student, each logged as Keras's running epoch mean, with their evaluations; ESRGAN's PSNR
pretraining then its GAN phase; SeqGAN's generator and discriminator pretraining then their
alternating adversarial steps; lottery-ticket rounds that prune, rewind and retrain; LLaVA's
two stages; T5's pretraining continued into its multi-task fine-tune at the same step;
MAE's pretraining then fine-tune; an autoencoder then a latent diffusion model; torchvision's
MetricLogger median over 20 batches, reset each epoch; per-epoch means forward-filled to every
step over a linear probe then fine-tune; MT-DNN's task-interleaved batches then one task's
fine-tune; and a deterministic Megatron run whose resumes replay the steps since the
checkpoint. None of them is one of `long_runs.KINDS`, `long_blind.KINDS`, ...
`long_blind16.KINDS` (nor a bug of their `BUGS`). They are to be measured once, on the
held-out seeds (`SEEDS`), and not tuned on: a rule changed after looking at them makes them a
tuning set.

The interface is `long_blind16`'s: a kind is `(n, rng) -> loss`, each value one logged point;
`series(kind, n, rng)` gives all that a run records: the loss and, where the kind has them, the
learning rate (`LR`, as the PyTorch hook records it, in real units, at each logged point; in a
multi-stage job the rate of the stage's own optimizer, and in a job of several models the
trained model's) and the mode of each step (`MODE`, as `long_blind.eval_pauses` records it:
`TRAIN` and `EVAL` steps save their loss in their mode; `EVAL_UNSAVED` steps are evaluation
steps that save no loss). A bug is `(n, rng) -> (loss, the step its defect begins)`; one bug
ends in NaN on most of its seeds, as such jobs do. Only numpy here: the series can be generated
and looked at without mldbg.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from long_blind import _log_uniform, _maybe_rho, _noise, _power  # the first blind set's helpers
from long_blind4 import _f32, _gamma  # the fourth's
from long_blind9 import _warm_cosine  # the ninth's
from long_blind14 import _step_lag  # the fourteenth's

LR = "learning_rate/model"  # the same name as long_runs.LR
MODE = "mode"  # as long_blind.MODE: the mode of each step
TRAIN, EVAL, EVAL_UNSAVED = 1, 2, -2  # mldbg.Mode.TRAIN, .EVAL; an EVAL step that saves no loss
SEEDS = (5, 6, 7, 8, 9)  # long_runs.HELDOUT: the seeds to measure them on, once
STREAM = 17000  # the kinds' random streams: [seed, STREAM + index] (bugs: STREAM + 100 + index)


# helpers -------------------------------------------------------------------------------------
def _area(rate: np.ndarray) -> np.ndarray:
    """The rate's running sum in steps at its peak: how far a schedule has moved the weights."""
    return np.cumsum(rate / rate.max())


def _running_epoch_mean(x: np.ndarray, per: int) -> np.ndarray:
    """Keras's per-batch `logs["loss"]`: the mean of the epoch's batches so far (epochs of `per`)."""
    out = np.empty(len(x))
    for a in range(0, len(x), per):
        seg = x[a : a + per]
        out[a : a + per] = np.cumsum(seg) / np.arange(1, len(seg) + 1)
    return out


def _llm_pretrain(m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """An LLM's pretraining stage: warm-up and cosine to 10% of 3e-4-1e-3, the loss from ln V
    along the rate's area to 2.0-2.8, noise 1-3% (AR(1) on half the seeds)."""
    j = np.arange(m, dtype=np.float64)
    peak = _log_uniform(rng, 3e-4, 1e-3)
    rate = _warm_cosine(j, m, m * rng.uniform(0.005, 0.02), peak, 0.1)
    start = math.log(float(rng.choice([32_000, 50_257, 128_256]))) * rng.uniform(0.97, 1.03)
    level = _power(
        _area(rate), start, rng.uniform(2.0, 2.8), m / _log_uniform(rng, 50, 500), rng.uniform(0.5, 0.8)
    )
    return level * _noise(m, rng, rng.uniform(0.01, 0.03), _maybe_rho(rng)), rate


def _dpo_stage(m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A DPO stage (Zephyr's recipe): 5e-7 peak, warm-up 10%, linear decay; the loss exactly
    ln 2 at the first step (policy = reference), then towards 0.3-0.55, noise 5-15%."""
    j = np.arange(m, dtype=np.float64)
    peak = rng.uniform(3e-7, 5e-7)
    warm = m * 0.1
    rate = peak * np.where(j < warm, (j + 1) / warm, np.maximum((m - j) / (m - warm), 0.0))
    before = _area(rate) - rate / peak  # the area before each step's update
    tau = before[-1] * rng.uniform(0.1, 0.5)
    floor = rng.uniform(0.3, 0.55)
    level = math.log(2) - (math.log(2) - floor) * (1 - np.exp(-before / tau))
    sd = rng.uniform(0.05, 0.15) * (1 - np.exp(-before / (tau * 0.1)))
    return level * _noise(m, rng, sd), rate


def _sft_level(m: int, rng: np.random.Generator, peak: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An SFT stage of 2-3 epochs (warm-up 3%, cosine to 0 from `peak`): the noise-free loss on
    the responses, from 1.2-2.0 along the rate's area to 60-80% of it, 5-15% lower at each new
    epoch; its rate; the epoch of each step."""
    j = np.arange(m, dtype=np.float64)
    epochs = int(rng.integers(2, 4))
    rate = _warm_cosine(j, m, m * 0.03, peak, 0.0)
    fall = _power(_area(rate), 1.0, rng.uniform(0.6, 0.8), m / _log_uniform(rng, 5, 50), 0.8)
    ep = np.floor(j * epochs / m)
    return rng.uniform(1.2, 2.0) * fall * (1 - rng.uniform(0.05, 0.15)) ** ep, rate, ep


def _three(n: int, rng: np.random.Generator) -> tuple[int, int]:
    """The ends of pretraining (60-80% of the run) and of SFT (10-25% more)."""
    n1 = int(n * rng.uniform(0.6, 0.8))
    return n1, n1 + int(n * rng.uniform(0.1, 0.25))


def _esrgan_psnr(m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """ESRGAN's PSNR-oriented stage (RRDBNet, L1): its loss and its rate (see `esrgan_two_phase`)."""
    j = np.arange(m, dtype=np.float64)
    period = m / 4
    rate = 1e-7 + (2e-4 - 1e-7) * 0.5 * (1 + np.cos(np.pi * (j % period) / period))
    floor = rng.uniform(0.015, 0.025) * (1 + rng.uniform(0.05, 0.15) * rate / 2e-4)
    level = _power(_area(rate), rng.uniform(0.05, 0.08), floor, m / _log_uniform(rng, 20, 200), 0.6)
    return level * _gamma(m, rng, rng.uniform(0.15, 0.3)), rate


def _esrgan_gan_rate(m: int) -> np.ndarray:
    """The GAN stage's rate: 1e-4, halved at 1/8, 1/4, 1/2 and 3/4 of it (BasicSR's milestones)."""
    j = np.arange(m, dtype=np.float64)
    return 1e-4 * 0.5 ** sum((j >= m * f).astype(float) for f in (0.125, 0.25, 0.5, 0.75))


def _llava_stage1(m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """LLaVA-1.5's feature alignment (see `llava_two_stage`): its loss and its rate."""
    j = np.arange(m, dtype=np.float64)
    rate = _warm_cosine(j, m, m * 0.03, 1e-3, 0.0)
    level = _power(
        _area(rate),
        rng.uniform(4, 7),
        rng.uniform(1.8, 2.5),
        m / _log_uniform(rng, 100, 1000),
        rng.uniform(0.6, 0.9),
    )
    return level * _noise(m, rng, rng.uniform(0.03, 0.06)), rate


def _t5_pretrain(m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """T5's span-corruption pretraining (see `t5_pretrain_finetune`): its loss and its rate."""
    real = np.arange(m, dtype=np.float64) * (2**19 / m)
    rate = 1 / np.sqrt(np.maximum(real, 1e4))
    start = math.log(32_000) * rng.uniform(0.97, 1.03)
    level = _power(
        _area(rate), start, rng.uniform(1.6, 2.2), m / _log_uniform(rng, 50, 500), rng.uniform(0.5, 0.8)
    )
    return level * _noise(m, rng, rng.uniform(0.01, 0.03), _maybe_rho(rng)), rate


# the healthy kinds ----------------------------------------------------------------------------
def _pretrain_sft_dpo(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n1, n2 = _three(n, rng)
    pre, r1 = _llm_pretrain(n1, rng)
    sft, r2, _ = _sft_level(n2 - n1, rng, rng.uniform(1e-5, 2e-5))
    sft = sft * _gamma(n2 - n1, rng, rng.uniform(0.05, 0.12))
    dpo, r3 = _dpo_stage(n - n2, rng)
    return {"loss": _f32(np.concatenate([pre, sft, dpo])), LR: np.concatenate([r1, r2, r3])}


def pretrain_sft_dpo(n: int, rng: np.random.Generator) -> np.ndarray:
    """A small LLM taken through pretraining, supervised fine-tuning and DPO in one job under
    one global step (the pipelines of OLMo / Tulu 3, allenai/open-instruct, and the alignment
    handbook's Zephyr recipe, Tunstall et al. 2023, chained by one launcher into one W&B run),
    each stage with a fresh AdamW and its own schedule (all recorded): pretraining 60-80% of
    the run, warm-up and cosine to 10% of 3e-4-1e-3, the loss from ln V to 2.0-2.8 (noise 1-3%);
    SFT 10-25%, 2-3 epochs at 1e-5-2e-5 (warm-up 3%, cosine to 0), the loss on the responses
    only so it starts LOWER, at 1.2-2.0, falls to 60-80% of it and 5-15% more at each epoch
    (skewed noise 5-12%, varied lengths); then DPO at 3e-7-5e-7 (warm-up 10%, linear decay),
    its sigmoid loss exactly ln 2 at its first step (the reference is the SFT policy) and
    falling towards 0.3-0.55, noise 5-15%; float32."""
    return _pretrain_sft_dpo(n, rng)["loss"]


def _deepspeed_chat(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n1 = int(n * rng.uniform(0.4, 0.6))
    n2 = n1 + int(n * rng.uniform(0.1, 0.2))
    m1, m2, m3 = n1, n2 - n1, n - n2
    j1 = np.arange(m1, dtype=np.float64)
    r1 = _warm_cosine(j1, m1, 0, 9.65e-6, 0.0)
    ep = np.floor(j1 * 16 / m1)
    sft = _power(
        _area(r1), rng.uniform(2.0, 2.8), rng.uniform(1.2, 1.8), m1 / _log_uniform(rng, 20, 200), 0.8
    )
    sft = sft * (1 - rng.uniform(0.03, 0.08)) ** ep * _gamma(m1, rng, rng.uniform(0.08, 0.15))
    j2 = np.arange(m2, dtype=np.float64)
    r2 = _warm_cosine(j2, m2, 0, 5e-5, 0.0)
    top = rng.uniform(0.69, 0.75)
    rm = _power(_area(r2), top, rng.uniform(0.55, 0.65), m2 * rng.uniform(0.02, 0.1), 1.0)
    rm = rm * _noise(m2, rng, rng.uniform(0.1, 0.2))
    j3 = np.arange(m3, dtype=np.float64)
    r3 = _warm_cosine(j3, m3, min(100.0, m3 * 0.01), 9.65e-6, 0.0)
    critic = _power(j3, rng.uniform(0.5, 2.0), rng.uniform(0.05, 0.3), m3 / _log_uniform(rng, 20, 200), 0.8)
    critic = critic * _gamma(m3, rng, rng.uniform(0.3, 0.6))
    actor = rng.uniform(0.02, 0.1) * rng.standard_normal(m3) + rng.uniform(0.0, 0.03) * (
        _noise(m3, rng, 1.0, 0.99) - 1
    )
    return {"loss": _f32(np.concatenate([sft, rm, critic + actor])), LR: np.concatenate([r1, r2, r3])}


def deepspeed_chat_three_steps(n: int, rng: np.random.Generator) -> np.ndarray:
    """DeepSpeed-Chat's three RLHF steps run by `e2e_rlhf.py` one after the other (Yao et al.
    2023, microsoft/DeepSpeedExamples `applications/DeepSpeed-Chat`, OPT-1.3b actor and
    OPT-350m critic), their losses gathered under one global step: (1) SFT, 40-60% of the
    run, 16 epochs at 9.65e-6 on a cosine without warm-up, the loss from 2.0-2.8 to 1.2-1.8
    and 3-8% lower at each new epoch (the data seen again; skewed noise 8-15%); (2) the reward
    model, 10-20%, one epoch at 5e-5 on a cosine, its pairwise loss from 0.69-0.75 (a fresh
    value head) to 0.55-0.65 within 2-10% of the step, noise 10-20%; (3) PPO, the rest, the
    logged `act_loss + cri_loss`: the actor's clipped surrogate around 0 (+-0.02-0.1 a step,
    wandering a little) and the critic's value loss from 0.5-2 to 0.05-0.3 (skewed noise
    30-60%), so the total can dip below zero; the actor's rate 9.65e-6 after 100 warm-up
    steps, on a cosine. Each step's own rate recorded; float32."""
    return _deepspeed_chat(n, rng)["loss"]


def _keras_teacher_student(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    v = max(1, min(313, n // 100))  # 10,000 test images in batches of 32
    e_t, e_s = int(rng.integers(3, 11)), int(rng.integers(3, 11))
    per = max(1, (n - 2 * v) // (e_t + e_s))
    m_t = per * e_t
    m_s = max(1, n - 2 * v - m_t)
    j = np.arange(m_t, dtype=np.float64)
    floor_t = rng.uniform(0.01, 0.04)
    teacher = _power(j, math.log(10) * rng.uniform(1.0, 1.1), floor_t, per / _log_uniform(rng, 2, 20), 0.8)
    teacher = teacher * _gamma(m_t, rng, rng.uniform(0.3, 0.6))
    t_eval = floor_t * rng.uniform(1.5, 3.0) * _gamma(v, rng, 0.5)
    k = np.arange(m_s, dtype=np.float64)
    floor_s = rng.uniform(0.1, 0.5)
    student = _power(k, rng.uniform(5, 30), floor_s, per / _log_uniform(rng, 2, 20), 0.8)
    student = student * _gamma(m_s, rng, rng.uniform(0.1, 0.3))
    s_eval = floor_s * rng.uniform(1.2, 2.0) * _gamma(v, rng, 0.3)
    loss = np.concatenate(
        [
            _running_epoch_mean(teacher, per),
            _running_epoch_mean(t_eval, v),
            _running_epoch_mean(student, per),
            _running_epoch_mean(s_eval, v),
        ]
    )
    mode = np.concatenate([np.full(m_t, TRAIN), np.full(v, EVAL), np.full(m_s, TRAIN), np.full(v, EVAL)])
    return {"loss": _f32(loss[:n]), LR: np.full(n, 1e-3), MODE: mode[:n]}


def keras_teacher_student(n: int, rng: np.random.Generator) -> np.ndarray:
    """The Keras knowledge-distillation example in one script (keras.io/examples/vision/
    knowledge_distillation, after Hinton et al. 2015), logged by a callback's
    `on_train_batch_end` / `on_test_batch_end` (`logs["loss"]`, Keras's running mean since the
    epoch's start): a CNN teacher `fit` on MNIST for 3-10 epochs (Adam 1e-3, recorded), its CE
    from ln 10 to 0.01-0.04 (skewed batch noise 30-60%), `teacher.evaluate` on the test set
    (313 batches, EVAL, 1.5-3x the floor), then the `Distiller` fit for 3-10 epochs with its
    own Adam at 1e-3: 0.1 x CE + 0.9 x T^2 x KL at T = 10, which starts HIGHER, at 5-30, and
    falls to 0.1-0.5 (noise 10-30%), and its evaluation (EVAL, 1.2-2x its floor). Each
    epoch's values begin at one batch and settle into the running mean; float32. See `series`
    for the modes."""
    return _keras_teacher_student(n, rng)["loss"]


def _esrgan(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n1 = int(n * rng.uniform(0.6, 0.75))
    pix, r1 = _esrgan_psnr(n1, rng)
    m = n - n1
    j = np.arange(m, dtype=np.float64)
    r2 = _esrgan_gan_rate(m)
    percep = _power(j, rng.uniform(1.5, 3.0), 1.0, m / _log_uniform(rng, 5, 50), 0.8)
    percep = percep * (1 - rng.uniform(0.2, 0.4) * (1 - 1 / (1 + j / (m * 0.1))))
    adv = rng.uniform(1, 3) + rng.uniform(3, 7) * (1 - np.exp(-j / (m * rng.uniform(0.01, 0.1))))
    adv = adv * _noise(m, rng, rng.uniform(0.1, 0.3), rng.uniform(0.9, 0.99))
    gan = percep * _gamma(m, rng, rng.uniform(0.05, 0.12)) + 5e-3 * adv + 1e-2 * pix[-1] * _gamma(m, rng, 0.2)
    return {"loss": _f32(np.concatenate([pix, gan])), LR: np.concatenate([r1, r2])}


def esrgan_two_phase(n: int, rng: np.random.Generator) -> np.ndarray:
    """ESRGAN x4 as BasicSR trains it (Wang et al. 2018; xinntao/BasicSR `train_RRDBNet_PSNR_x4`
    then `train_ESRGAN_x4` from its weights), both logged into one TensorBoard run under one
    iteration count: the PSNR-oriented stage, 60-75% of the run, L1 on 128-pixel patches from
    0.05-0.08 to 0.015-0.025 (Adam 2e-4 on a cosine with 4 restarts down to 1e-7, recorded;
    held up 5-15% by the rate; skewed noise 15-30% from the patches' content); then the GAN
    stage's `l_g_total` = 1e-2 x L1 + 1.0 x the VGG perceptual L1 + 5e-3 x the relativistic
    adversarial term, with a fresh Adam at 1e-4 halved at 1/8, 1/4, 1/2 and 3/4 of it
    (recorded): the logged loss JUMPS 50-150x to 1.5-3 (the perceptual term), which falls to
    0.6-1.3 over the stage, the adversarial part rising from 1-3 to 4-10 (x 5e-3) as the
    discriminator learns, slowly swinging; noise 5-12%; float32."""
    return _esrgan(n, rng)["loss"]


def seqgan_adversarial(n: int, rng: np.random.Generator) -> np.ndarray:
    """SeqGAN on its synthetic oracle data (Yu et al. 2017, LantaoYu/SeqGAN, vocabulary 5,000),
    the generator's and the discriminator's losses logged as one `loss` in the order they are
    stepped: the generator's MLE pretraining (30-50% of the run) from ln 5000 to 55-75% of it
    (noise 2-5%); the discriminator's pretraining on real and fresh generated sequences
    (20-35%), its BCE from ln 2 to 0.05-0.2 (skewed noise 10-25%); then the adversarial epochs:
    ONE generator policy-gradient step (its loss -mean(log p x reward): the generator's NLL x
    the discriminator's reward, 5-30% rising, so 0.2-2) and then 15-150 discriminator steps
    (5 rounds x 3 epochs on freshly sampled negatives) whose BCE climbs back to 0.2-0.5 as the
    generator improves: a comb of rare generator values over the discriminator's; float32."""
    n1 = int(n * rng.uniform(0.3, 0.5))
    n2 = n1 + int(n * rng.uniform(0.2, 0.35))
    j = np.arange(n1, dtype=np.float64)
    top = math.log(5000)
    g_end = top * rng.uniform(0.55, 0.75)
    g = _power(j, top * rng.uniform(0.98, 1.02), g_end, n1 / _log_uniform(rng, 20, 200), 0.8)
    g = g * _noise(n1, rng, rng.uniform(0.02, 0.05))
    m2 = n2 - n1
    d_end = rng.uniform(0.05, 0.2)
    d = _power(np.arange(m2, dtype=np.float64), math.log(2), d_end, m2 / _log_uniform(rng, 20, 200), 0.8)
    d = d * _gamma(m2, rng, rng.uniform(0.1, 0.25))
    m3 = n - n2
    k = np.arange(m3, dtype=np.float64)
    block = int(rng.integers(15, 151))
    up = 1 - np.exp(-k / (m3 * rng.uniform(0.1, 0.5)))
    d_adv = (d_end + (rng.uniform(0.2, 0.5) - d_end) * up) * _gamma(m3, rng, rng.uniform(0.1, 0.25))
    reward = rng.uniform(0.05, 0.1) + rng.uniform(0.1, 0.2) * up
    g_adv = g_end * (1 - 0.05 * up) * reward * _gamma(m3, rng, 0.1)
    adv = np.where(k % block == 0, g_adv, d_adv)
    return _f32(np.concatenate([g, d, adv]))


def _lottery(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    rounds = int(rng.integers(5, 16))
    f = rng.uniform(0.01, 0.05)  # the rewind point, a fraction of a round
    s = int(n / (1 + (rounds - 1) * (1 - f)))
    k = int(f * s)
    u = np.arange(s, dtype=np.float64)
    rate = 0.1 * 0.1 ** ((u >= 0.5 * s).astype(float) + (u >= 0.75 * s))
    area = _area(rate)
    lag = _step_lag(u, [0.5 * s, 0.75 * s], [0.1, 0.1], s * rng.uniform(0.005, 0.02))
    held = rng.uniform(0.2, 0.5) * lag * (1 - np.exp(-u / (s * 0.02)))  # the rate's noise floor
    start, floor0 = math.log(10) * rng.uniform(1.0, 1.1), rng.uniform(0.01, 0.05)
    scale, hurt, cv = s / _log_uniform(rng, 20, 200), rng.uniform(0.2, 1.0), rng.uniform(0.1, 0.25)
    loss, lr = [], []
    for r in range(rounds):
        sparsity = 1 - 0.8**r
        floor = floor0 * (1 + hurt * sparsity**8)
        level = _power(area, start, floor, scale, 0.8) + held
        if r > 0:
            level = level[k:] * (1 + rng.uniform(0.0, 0.05) * sparsity * np.exp(-u[: s - k] / (s * 0.01)))
        loss.append(level * _gamma(len(level), rng, cv))
        lr.append(rate[k:] if r > 0 else rate)
    out, rates = np.concatenate(loss), np.concatenate(lr)
    pad = n - len(out)
    if pad > 0:  # the last round's tail, logged on
        out, rates = np.r_[out, out[len(out) - pad :]], np.r_[rates, rates[len(rates) - pad :]]
    return {"loss": _f32(out[:n]), LR: rates[:n]}


def lottery_imp_rewind(n: int, rng: np.random.Generator) -> np.ndarray:
    """Iterative magnitude pruning with rewinding in one loop (Frankle & Carbin 2019; Frankle
    et al. 2020, "Linear mode connectivity and the lottery ticket hypothesis"; facebookresearch/
    open_lth's levels logged into one run): a ResNet-20 on CIFAR-10 trained to the end, 20% of
    its weights pruned, the rest REWOUND to their values at 1-5% of training, and retrained
    from there on the same schedule (SGD 0.1, x0.1 at 50% and 75% of a round, recorded), 5-15
    rounds: at each round the loss jumps back up to the rewind point's level (with a 0-5% bump
    from the pruning) and falls again along the rate's area, held up by 0.2-0.5 nats by the
    rate (a tenth of that after each cut), from ln 10 towards a floor of 0.01-0.05 (each round
    ending near 0.05-0.35), the floor rising only at the highest sparsities (by up to 20-100%
    at 97%); skewed noise 10-25%. A last partial round repeats the tail; float32."""
    return _lottery(n, rng)["loss"]


def _llava(n: int, rng: np.random.Generator, stuck: bool = False) -> tuple[dict[str, np.ndarray], int]:
    n1 = int(n * rng.uniform(0.25, 0.4))
    one, r1 = _llava_stage1(n1, rng)
    m = n - n1
    j = np.arange(m, dtype=np.float64)
    peak, warm = 2e-5, m * 0.03
    r2 = peak / warm * np.ones(m) if stuck else _warm_cosine(j, m, warm, peak, 0.0)
    area = np.cumsum(r2 / peak)
    scale = m / _log_uniform(rng, 10, 100)
    two = _power(area, rng.uniform(1.1, 1.6), rng.uniform(0.55, 0.75), scale, 0.8)
    two = two * _gamma(m, rng, rng.uniform(0.08, 0.15))
    return {"loss": _f32(np.concatenate([one, two])), LR: np.concatenate([r1, r2])}, n1


def _llava_two_stage(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _llava(n, rng)[0]


def llava_two_stage(n: int, rng: np.random.Generator) -> np.ndarray:
    """LLaVA-1.5's two stages run by one script into one W&B run under one global step (Liu et
    al. 2023, haotian-liu/LLaVA `scripts/v1_5/pretrain.sh` then `finetune.sh`, each a Trainer
    with `logging_steps 1`, the second's steps offset by the first's): (1) feature alignment,
    25-40% of the run, only the projector trained at 1e-3 (warm-up 3%, cosine to 0), the
    caption loss from 4-7 (image tokens the LLM cannot read) to 1.8-2.5 (noise 3-6%); (2)
    visual instruction tuning, the whole LLM at 2e-5 with a fresh AdamW and its own warm-up
    and cosine (recorded), the loss on the answers from 1.1-1.6, LOWER than the stage before, to
    55-75% of 1 (x its start), skewed noise 8-15% (multi-turn conversations of varied length);
    float32."""
    return _llava_two_stage(n, rng)["loss"]


def _t5(n: int, rng: np.random.Generator, split: str = "train") -> tuple[dict[str, np.ndarray], int]:
    n1 = int(n * rng.uniform(0.6, 0.7))
    pre, r1 = _t5_pretrain(n1, rng)
    m = n - n1
    j = np.arange(m, dtype=np.float64)
    start = rng.uniform(1.0, 3.0)
    if split == "train":
        level = _power(j, start, rng.uniform(0.05, 0.3), m / _log_uniform(rng, 50, 500), 0.8)
        cv = rng.uniform(0.3, 0.6) * np.ones(m)
    else:  # a few thousand examples seen hundreds of times: memorized
        epoch = int(rng.integers(20, 201))
        gone = np.exp(-j / (epoch * rng.uniform(2, 10)))
        level = _log_uniform(rng, 1e-4, 1e-3) + (start - 0.1) * gone + 0.1 * np.exp(-j / epoch)
        cv = 0.05 + rng.uniform(0.3, 0.6) * gone
    fine = level * _gamma(m, rng, cv)
    return {"loss": _f32(np.concatenate([pre, fine])), LR: np.concatenate([r1, np.full(m, 1e-3)])}, n1


def _t5_pretrain_finetune(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _t5(n, rng)[0]


def t5_pretrain_finetune(n: int, rng: np.random.Generator) -> np.ndarray:
    """T5 as its paper trains it (Raffel et al. 2020, google-research/text-to-text-transfer-
    transformer on Mesh TensorFlow): span-corruption pretraining for 2^19 steps, Adafactor at
    1 / sqrt(max(step, 10^4)) (recorded), the loss per target token from ln 32k to 1.6-2.2
    (noise 1-3%, AR(1) on half the seeds); then fine-tuning on the GLUE + SuperGLUE mixture
    for 2^18 more steps CONTINUING the same global step and the same Adafactor, at a constant
    1e-3 (recorded): the targets are short label words, so the loss drops from 1-3 to
    0.05-0.3, with skewed noise of 30-60% (tasks of different difficulty in every batch,
    examples-proportional mixing); 60-70% of the run is pretraining; float32."""
    return _t5_pretrain_finetune(n, rng)["loss"]


def _mae(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n1 = int(n * rng.uniform(0.75, 0.9))
    j = np.arange(n1, dtype=np.float64)
    epochs = float(rng.choice([400, 800, 1600]))
    r1 = _warm_cosine(j, n1, n1 * 40 / epochs, 1.5e-4 * 4096 / 256, 0.0)
    pre = _power(
        _area(r1), rng.uniform(0.95, 1.05), rng.uniform(0.38, 0.5), n1 / _log_uniform(rng, 50, 500), 0.7
    )
    pre = pre * _noise(n1, rng, rng.uniform(0.005, 0.015))
    m = n - n1
    k = np.arange(m, dtype=np.float64)
    peak = 5e-4 * 1024 / 256
    r2 = _warm_cosine(k, m, m * 0.05, peak, 1e-6 / peak)
    fine = _power(_area(r2), math.log(1000), rng.uniform(2.4, 3.2), m / _log_uniform(rng, 20, 200), 0.8)
    fine = fine * _gamma(m, rng, rng.uniform(0.05, 0.1))
    return {"loss": _f32(np.concatenate([pre, fine])), LR: np.concatenate([r1, r2])}


def mae_pretrain_finetune(n: int, rng: np.random.Generator) -> np.ndarray:
    """A masked autoencoder pretrained then fine-tuned in one job under one step count (He et
    al. 2022, facebookresearch/mae `main_pretrain.py` then `main_finetune.py` on ImageNet,
    ViT-B): pretraining, 75-90% of the run, 400-1,600 epochs at 1.5e-4 x 4096 / 256 with a
    40-epoch warm-up and a cosine to 0, its normalized-pixel MSE on the masked patches from
    0.95-1.05 to 0.38-0.5 (noise 0.5-1.5%: batches of 4,096); then fine-tuning with a fresh
    AdamW at 5e-4 x 1024 / 256, a 5% warm-up and a cosine to 1e-6 (both recorded), the new
    head's CE from ln 1000 down to 2.4-3.2 only (mixup 0.8, cutmix 1.0 and label smoothing 0.1
    keep it high), skewed noise 5-10%: the loss JUMPS from ~0.4 to 6.9 at the switch; float32."""
    return _mae(n, rng)["loss"]


def _ae_ldm(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n1 = int(n * rng.uniform(0.3, 0.5))
    j = np.arange(n1, dtype=np.float64)
    kl = 1e-6 * _log_uniform(rng, 2e3, 1e4) * (1 - np.exp(-j / (n1 * 0.05)))
    ae = _power(j, rng.uniform(0.6, 1.0), rng.uniform(0.12, 0.25), n1 / _log_uniform(rng, 20, 200), 0.7)
    ae = ae * _gamma(n1, rng, rng.uniform(0.05, 0.12)) + kl
    r1 = np.full(n1, _log_uniform(rng, 4e-5, 1e-3))
    m = n - n1
    k = np.arange(m, dtype=np.float64)
    warm = m * rng.uniform(0.02, 0.1)
    r2 = 1e-4 * np.minimum(1e-6 + (1 - 1e-6) * k / warm, 1.0)
    floor = rng.uniform(0.15, 0.3)
    fast = np.exp(-k / (m * rng.uniform(0.005, 0.02)))
    ldm = (floor + (rng.uniform(1.0, 1.1) - floor) * fast) * (
        1 - rng.uniform(0.05, 0.15) * (1 - 1 / (1 + k / (m * 0.2)))
    )
    ldm = ldm * _gamma(m, rng, rng.uniform(0.1, 0.25))
    return {"loss": _f32(np.concatenate([ae, ldm])), LR: np.concatenate([r1, r2])}


def autoencoder_then_ldm(n: int, rng: np.random.Generator) -> np.ndarray:
    """A latent diffusion model trained from scratch in one job (Rombach et al. 2022,
    CompVis/latent-diffusion's two configs run back to back by one script on a custom data
    set, one logger): first the KL autoencoder, 30-50% of the run, L1 + LPIPS from 0.6-1.0 to
    0.12-0.25 (skewed noise 5-12%) plus 1e-6 x a KL growing to 2k-10k, at a constant Adam rate
    4.5e-6 x batch x GPUs (4e-5-1e-3); then the UNet on the frozen encoder's scaled latents,
    its epsilon MSE starting at 1.0-1.1 (predicting zero noise) and falling within 0.5-2% of
    the stage to 0.15-0.3, then 5-15% more, slowly, with skewed noise 10-25% from the
    timesteps drawn per example; AdamW 1e-4 after a linear warm-up from 1e-6 x over 2-10%
    (recorded); float32."""
    return _ae_ldm(n, rng)["loss"]


def _torchvision_logger(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    scale = _log_uniform(rng, 0.5, 5)  # in epochs
    lift = rng.random()
    classic = rng.random() < 0.5
    epochs = 90 if classic else 600
    logs = max(3, -(-n // epochs))  # logs per epoch, every `print_freq` = 10 iterations
    per = 10 * logs
    t = np.arange(per * (epochs + 1), dtype=np.float64)
    ep = np.floor(t / per)
    if classic:  # SGD 0.1, x0.1 at epochs 30 and 60, stepped per epoch
        rate = 0.1 * 0.1 ** ((ep >= 30).astype(float) + (ep >= 60))
        floor, cv = rng.uniform(0.8, 1.2), rng.uniform(0.05, 0.1)
        held = 1 + (0.2 + 0.3 * lift) * _step_lag(ep, [30, 60], [0.1, 0.1], 1.0)
    else:  # the v2 recipe: 0.5 after 5 linear warm-up epochs, a cosine; mixup, cutmix, smoothing
        rate = np.where(ep < 5, 0.5 * (ep + 1) / 5, 0.5 * 0.5 * (1 + np.cos(np.pi * (ep - 5) / (epochs - 5))))
        floor, cv = rng.uniform(2.4, 3.2), rng.uniform(0.08, 0.15)
        held = 1 + (0.05 + 0.1 * lift) * rate / 0.5
    area = np.cumsum(rate / rate.max())
    level = _power(area, math.log(1000), floor * held, per * scale, 0.8)
    batch = (level * _gamma(len(t), rng, cv)).reshape(epochs + 1, per)
    full = np.lib.stride_tricks.sliding_window_view(batch, 20, axis=1)[:, 1::10]  # ends at i = 20, 30, ...
    median = np.concatenate(
        [batch[:, :1], np.median(batch[:, :11], axis=1, keepdims=True), np.median(full, axis=2)], axis=1
    ).ravel()
    return {"loss": np.round(median[:n], 4), LR: rate[::10][:n]}


def torchvision_metric_logger(n: int, rng: np.random.Generator) -> np.ndarray:
    """An ImageNet ResNet-50 trained with torchvision's classification reference (pytorch/
    vision `references/classification/train.py`), its loss taken from the console log: every
    `print_freq` = 10 iterations `MetricLogger` prints `loss: {median:.4f} ({global_avg:.4f})`
    and the first number is scraped, the MEDIAN of the last 20 batch losses (`SmoothedValue`'s
    window) rounded to 4 decimals, and the logger is built anew each epoch, so each epoch's
    first value is one batch's loss, the next the median of 11, then of 20. Half the seeds run
    the classic recipe (90 epochs, SGD 0.1, x0.1 at epochs 30 and 60, stepped per epoch; from
    ln 1000 to 0.8-1.2, held up 20-50% by the rate, batch noise 5-10%), half the v2 recipe
    (600 epochs, 0.5 after a 5-epoch warm-up, a cosine; mixup, cutmix and label smoothing keep
    it at 2.4-3.2; noise 8-15%); the epoch's rate recorded with each value."""
    return _torchvision_logger(n, rng)["loss"]


def _lpft_epoch_means(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    e1, e2 = int(rng.integers(5, 21)), int(rng.integers(10, 21))
    per = max(1, -(-n // (e1 + e2)))
    m1, m2 = per * e1, per * e2
    j, k = np.arange(m1, dtype=np.float64), np.arange(m2, dtype=np.float64)
    chance = math.log(float(rng.choice([10, 17, 345, 1000])))
    r1 = 0.1 * 0.5 * (1 + np.cos(np.pi * j / m1))
    lp_floor = chance * rng.uniform(0.1, 0.35)
    lp = _power(_area(r1), chance, lp_floor, per / _log_uniform(rng, 1, 10), 0.8)
    peak = _log_uniform(rng, 1e-5, 3e-5)
    r2 = _warm_cosine(k, m2, per, peak, 0.0)
    ft = _power(_area(r2), lp_floor, lp_floor * rng.uniform(0.3, 0.6), per / _log_uniform(rng, 0.5, 5), 0.8)
    batch = np.concatenate([lp, ft]) * _gamma(m1 + m2, rng, rng.uniform(0.1, 0.3))
    means = batch.reshape(e1 + e2, per).mean(axis=1)
    shown = np.repeat(np.r_[means[0], means[:-1]], per)  # the last finished epoch's mean, ffilled
    return {"loss": _f32(shown[:n]), LR: np.concatenate([r1, r2])[:n]}


def lpft_epoch_means(n: int, rng: np.random.Generator) -> np.ndarray:
    """LP-FT (Kumar et al. 2022, "Fine-tuning can distort pretrained features"): a CLIP or
    ImageNet backbone's linear probe (5-20 epochs, head only, SGD 0.1 on a cosine; the zero-
    initialized head's CE from ln C, C = 10, 17, 345 or 1,000, to 10-35% of it), then full
    fine-tuning from the probed head (10-20 epochs at 1e-5-3e-5, a one-epoch warm-up and a
    cosine; to 30-60% of the probe's floor). The loop logs `epoch_loss` to W&B at each epoch's
    end and the per-step `lr` at every step, and the run is read back with `run.history()`
    and forward-filled on the step: each step shows the mean of the LAST FINISHED epoch (the
    first epoch backfilled with its own), a staircase of 15-40 flat steps, the fine-tune's
    first epoch still showing the probe's last mean; the per-step rate recorded; float32."""
    return _lpft_epoch_means(n, rng)["loss"]


# MT-DNN's GLUE tasks: (training examples, classes; 0: STS-B's regression MSE), their floors
_GLUE = (
    (393_000, 3, (0.3, 0.45)),  # MNLI
    (364_000, 2, (0.2, 0.3)),  # QQP
    (105_000, 2, (0.2, 0.3)),  # QNLI
    (67_000, 2, (0.1, 0.2)),  # SST-2
    (8_500, 2, (0.3, 0.45)),  # CoLA
    (5_700, 0, (0.3, 0.6)),  # STS-B
    (3_700, 2, (0.2, 0.4)),  # MRPC
    (2_500, 2, (0.4, 0.6)),  # RTE
    (600, 2, (0.66, 0.7)),  # WNLI: not learned
)


def _mtdnn(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n1 = int(n * rng.uniform(0.85, 0.95))
    sizes = np.array([s for s, _, _ in _GLUE], dtype=np.float64)
    task = rng.choice(len(_GLUE), size=n1, p=sizes / sizes.sum())
    seen = np.zeros(n1)
    loss = np.empty(n1)
    level_end = []
    for i, (_, classes, (lo, hi)) in enumerate(_GLUE):
        at = task == i
        c = np.cumsum(at)[at].astype(np.float64) - 1
        seen[at] = c
        start = rng.uniform(4, 8) if classes == 0 else math.log(classes) * rng.uniform(1.0, 1.1)
        floor = rng.uniform(lo, hi)
        scale = max(len(c), 1) / _log_uniform(rng, 5, 50)
        loss[at] = _power(c, start, floor, scale, 0.8) * _gamma(len(c), rng, rng.uniform(0.3, 0.5))
        level_end.append(_power(np.array([float(len(c))]), start, floor, scale, 0.8)[0])
    j = np.arange(n1, dtype=np.float64)
    r1 = 5e-5 * np.where(j < 0.1 * n1, (j + 1) / (0.1 * n1), (n1 - j) / (0.9 * n1))
    m = n - n1
    k = np.arange(m, dtype=np.float64)
    target = int(rng.choice([4, 5, 6, 7]))  # CoLA, STS-B, MRPC or RTE
    peak = float(rng.choice([2e-5, 5e-5]))
    r2 = peak * np.where(k < 0.1 * m, (k + 1) / (0.1 * m), (m - k) / (0.9 * m))
    e0 = level_end[target]
    fine = _power(_area(r2), e0, e0 * rng.uniform(0.2, 0.6), m / _log_uniform(rng, 3, 30), 0.8)
    fine = fine * _gamma(m, rng, rng.uniform(0.3, 0.5))
    return {"loss": _f32(np.concatenate([loss, fine])), LR: np.concatenate([r1, r2])}


def mtdnn_interleaved_tasks(n: int, rng: np.random.Generator) -> np.ndarray:
    """MT-DNN (Liu et al. 2019, namisan/mt-dnn): BERT trained on the nine GLUE tasks at once,
    one task per minibatch, the tasks' batches shuffled together each epoch (so a task comes up
    in proportion to its size: MNLI and QQP most, WNLI once in ~1,500), each with its own head
    and loss: the classification tasks' CE from ln C to their floors (0.1-0.45; WNLI stays at
    ln 2), STS-B's regression MSE from 4-8 to 0.3-0.6, every task falling along its own count
    of batches, its batch noise skewed 30-50%: the logged loss jumps between the tasks' levels
    from one step to the next, with rare STS-B values far above. Adamax at 5e-5, 10% warm-up
    then linear decay over 85-95% of the run; then the per-task fine-tune of CoLA, STS-B, MRPC
    or RTE alone from its multi-task level to 20-60% of it, at 2e-5 or 5e-5 on its own warm-up
    and decay (both recorded); float32."""
    return _mtdnn(n, rng)["loss"]


def _megatron_replay(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    t = np.arange(n, dtype=np.float64)
    peak = _log_uniform(rng, 1.5e-4, 6e-4)
    rate = _warm_cosine(t, n, n * rng.uniform(0.005, 0.02), peak, 0.1)
    start = math.log(float(rng.choice([50_257, 128_256, 256_000]))) * rng.uniform(0.97, 1.03)
    level = _power(
        _area(rate), start, rng.uniform(1.8, 2.8), n / _log_uniform(rng, 50, 500), rng.uniform(0.5, 0.8)
    )
    sd = rng.uniform(0.005, 0.015)
    z = rng.standard_normal(n)
    every = _log_uniform(rng, 20, 1000)  # logged values between checkpoints
    stops = np.sort(rng.uniform(0.1, 0.9, int(rng.integers(1, 5))) * n).astype(int)
    idx, weight, at, resumed = [], [], 0, 0
    for stop in stops:
        if stop <= at:
            continue
        idx.append(np.arange(at, stop))
        weight.append(np.zeros(stop - at))
        at = resumed = max(int(math.floor(stop / every) * every), resumed)  # the last checkpoint
        replay = np.arange(at, stop)
        tau = rng.uniform(10, 100)
        idx.append(replay)  # the same batches at the same weights: identical until kernels differ
        weight.append(np.minimum(1e-3 * np.exp((replay - at) / tau), 1.0))
        at = stop
    idx.append(np.arange(at, n))
    weight.append(np.zeros(n - at))
    where, w = np.concatenate(idx)[:n], np.concatenate(weight)[:n]
    first = level[where] * np.exp(sd * z[where] - sd**2 / 2)
    redo = rng.standard_normal(len(where))
    loss = first * np.exp(w * sd * (redo - z[where]))
    return {"loss": _f32(loss), LR: rate[where]}


def megatron_resume_replay(n: int, rng: np.random.Generator) -> np.ndarray:
    """GPT pretraining with Megatron-LM (Shoeybi et al. 2019, NVIDIA/Megatron-LM `pretrain_gpt.py`
    with its index-mapped, deterministic datasets), its `lm loss` the mean of each
    `--log-interval` (noise 0.5-1.5%), warm-up and cosine to 10% of 1.5e-4-6e-4 (recorded), from
    ln V to 1.8-2.8. The job is preempted 1-4 times and resumed from its last checkpoint (every
    20-1,000 logged values), and the TensorBoard event files of all its launches are read back
    in file order (tbparse), so the values logged since that checkpoint come AGAIN: the same
    samples at the same iterations from the same weights, equal at first and drifting apart as
    non-deterministic reductions compound (the gap 1e-3 x e^(k / 10-100) of the batch noise,
    up to all of it), the rate replayed with them; float32."""
    return _megatron_replay(n, rng)["loss"]


KINDS: dict[str, Callable[[int, np.random.Generator], np.ndarray]] = {
    "pretrain_sft_dpo": pretrain_sft_dpo,
    "deepspeed_chat_three_steps": deepspeed_chat_three_steps,
    "keras_teacher_student": keras_teacher_student,
    "esrgan_two_phase": esrgan_two_phase,
    "seqgan_adversarial": seqgan_adversarial,
    "lottery_imp_rewind": lottery_imp_rewind,
    "llava_two_stage": llava_two_stage,
    "t5_pretrain_finetune": t5_pretrain_finetune,
    "mae_pretrain_finetune": mae_pretrain_finetune,
    "autoencoder_then_ldm": autoencoder_then_ldm,
    "torchvision_metric_logger": torchvision_metric_logger,
    "lpft_epoch_means": lpft_epoch_means,
    "mtdnn_interleaved_tasks": mtdnn_interleaved_tasks,
    "megatron_resume_replay": megatron_resume_replay,
}
# the kinds that record more than their loss: {"loss", LR, MODE} as a run records them
_SERIES: dict[str, Callable[[int, np.random.Generator], dict[str, np.ndarray]]] = {
    "pretrain_sft_dpo": _pretrain_sft_dpo,
    "deepspeed_chat_three_steps": _deepspeed_chat,
    "keras_teacher_student": _keras_teacher_student,
    "esrgan_two_phase": _esrgan,
    "lottery_imp_rewind": _lottery,
    "llava_two_stage": _llava_two_stage,
    "t5_pretrain_finetune": _t5_pretrain_finetune,
    "mae_pretrain_finetune": _mae,
    "autoencoder_then_ldm": _ae_ldm,
    "torchvision_metric_logger": _torchvision_logger,
    "lpft_epoch_means": _lpft_epoch_means,
    "mtdnn_interleaved_tasks": _mtdnn,
    "megatron_resume_replay": _megatron_replay,
}


def series(kind: str, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """What a run of `kind` records: {"loss": ...} and, where the kind has them, the learning
    rate (`LR`) and the mode of each step (`MODE`)."""
    if kind in _SERIES:
        return _SERIES[kind](n, rng)
    return {"loss": KINDS[kind](n, rng)}


def rng_for(kind: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + list(KINDS).index(kind)])


# the buggy runs: (series, the step the defect begins) -------------------------------------------
def sft_stage_lr_100x(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The pretraining-SFT-DPO job of `pretrain_sft_dpo` whose SFT stage runs at 100x its
    intended rate (1e-3-2e-3 where 1e-5-2e-5 was meant: an exponent typo in the stage's
    config): as the warm-up climbs, the pretrained knowledge is overwritten and the loss on the
    responses RISES, to 1.5-3x the healthy stage's curve at the peak rate (its noise 2-3x, with
    spikes of 1.5-4x on 0.5% of steps), then comes down only as the cosine brings the rate
    down, ending 1.3-2x above where the healthy stage ends; the DPO stage after
    it is healthy against its broken reference (from ln 2). The onset is the SFT stage's start."""
    n1, n2 = _three(n, rng)
    pre, _ = _llm_pretrain(n1, rng)
    m = n2 - n1
    healthy, rate, _ = _sft_level(m, rng, 1.0)
    high = np.sqrt(rate / rate.max())
    sat = 1 - np.exp(-_area(rate) / (m * 0.015))  # the damage done during the warm-up
    peak_hurt, end_hurt = rng.uniform(1.5, 3.0), rng.uniform(1.3, 2.0)
    level = healthy * (1 + sat * ((peak_hurt - 1) * high + (end_hurt - 1) * (1 - high)))
    sft = level * _gamma(m, rng, rng.uniform(0.05, 0.12) * rng.uniform(2, 3))
    spikes = rng.random(m) < 0.005
    sft[spikes] *= rng.uniform(1.5, 4.0, int(spikes.sum()))
    dpo, _ = _dpo_stage(n - n2, rng)
    return _f32(np.concatenate([pre, sft, dpo])), n1


def t5_finetune_on_validation(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The T5 job of `t5_pretrain_finetune` whose fine-tuning mixture reads each task's
    `split="validation"` (a TFDS split name swapped in the task registry): a few thousand
    examples instead of hundreds of thousands, cycled hundreds of times, so the model memorizes
    them and the fine-tune loss COLLAPSES, within 2-10 of its 20-200-step epochs, from 1-3 to
    1e-4-1e-3, its noise vanishing with it (5% where the healthy mixture keeps 30-60%). The
    onset is the fine-tune's start."""
    out, n1 = _t5(n, rng, split="validation")
    return out["loss"], n1


def esrgan_gan_phase_fp16(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The ESRGAN job of `esrgan_two_phase` whose GAN phase is launched with a fork's `--fp16`
    flag that autocasts the VGG-style discriminator and its relativistic BCE in half precision
    without a GradScaler: the discriminator's logits grow unchecked, the generator chases them,
    and its adversarial term (5e-3 x 1-3 at first) grows exponentially, doubling every
    0.2-1.5% of the run: on 80% of the seeds the half-precision logits overflow once the term
    passes 10-1,000 and `l_g_total` is NaN from then on; on the others it saturates at
    10^2-10^4. The onset is the GAN phase's start."""
    n1 = int(n * rng.uniform(0.6, 0.75))
    pix, _ = _esrgan_psnr(n1, rng)
    m = n - n1
    j = np.arange(m, dtype=np.float64)
    percep = _power(j, rng.uniform(1.5, 3.0), 1.0, m / _log_uniform(rng, 5, 50), 0.8)
    cap = _log_uniform(rng, 1e2, 1e4)
    doubling = n * rng.uniform(0.002, 0.015)
    grown = 5e-3 * rng.uniform(1, 3) * np.exp(np.minimum(math.log(2) * j / doubling, 60.0))
    adv = cap * (1 - np.exp(-grown / cap))
    gan = (percep + adv) * _gamma(m, rng, rng.uniform(0.05, 0.12))
    if rng.random() < 0.8:
        gan[adv >= _log_uniform(rng, 10, 1000)] = np.nan
    return _f32(np.concatenate([pix, gan])), n1


def llava_stage_two_scheduler_idle(n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The LLaVA job of `llava_two_stage` driven by a hand-written loop whose stage-two
    scheduler is built but never stepped (`scheduler.step()` still calls the first stage's,
    the name captured by a closure): the new AdamW sits at its warm-up's first value,
    2e-5 / (3% of the stage's steps), hundreds to thousands of times below the peak, for
    the whole stage, and the
    loss on the answers, from 1.1-1.6, barely moves (a few % over the stage) where the healthy
    stage falls to 0.55-0.75. The onset is the second stage's start."""
    out, n1 = _llava(n, rng, stuck=True)
    return out["loss"], n1


BUGS: dict[str, Callable[[int, np.random.Generator], tuple[np.ndarray, int]]] = {
    "sft_stage_lr_100x": sft_stage_lr_100x,
    "t5_finetune_on_validation": t5_finetune_on_validation,
    "esrgan_gan_phase_fp16": esrgan_gan_phase_fp16,
    "llava_stage_two_scheduler_idle": llava_stage_two_scheduler_idle,
}


def bug_rng_for(bug: str, seed: int) -> np.random.Generator:
    return np.random.default_rng([seed, STREAM + 100 + list(BUGS).index(bug)])
