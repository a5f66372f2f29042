"""A blind held-out set (issue 26), part H: trainings recorded the way each tool's user records
them, of kinds not yet in the corpus. Written without running mldbg's rules on them; each was
checked only from its own losses (finite, going where its kind's loss goes).

Shapes of public PyTorch scripts (the README's two lines): karpathy's makemore (the bigram
neural net, the Bengio MLP, the WaveNet), a fairseq-shaped translation Transformer with the
label-smoothed cross-entropy and the inverse-sqrt schedule, CleanRL's PPO on a vectorized
CartPole, lucidrains' SimpleViT, accelerate's cv_example loop without Accelerate (a frozen
pretrained backbone, OneCycleLR), the PyTorch tutorial's LSTM part-of-speech tagger.
Hugging Face `Trainer` (`mldbg.transformers.DebuggerCallback`, tiny random configs):
Marian translation with `Seq2SeqTrainer`, Wav2Vec2 CTC, DeBERTa regression, BERT with a
subclassed `compute_loss` (class weights) and accumulation, Mistral causal LM, ConvNeXt image
classification, BERT extractive question answering, CLIP contrastive training. Lightning: an
adversarial autoencoder with three optimizers (manual optimization), the
`GradientAccumulationScheduler` callback, validation every 50 steps under `max_steps`,
`precision="bf16-mixed"`, a triplet embedding net on OneCycleLR, truncated BPTT by manual
optimization. Keras 3: the VAE example (subclassed model, custom `train_step`), a
`mixed_bfloat16` policy CNN, the LSTM addition example, a BiGRU tagger, a wide-and-deep
functional model on `PiecewiseConstantDecay`. JAX: a Flax NNX Transformer LM, a Flax Linen
dropout MLP with an rng stream, JAX's `stax` mnist_classifier MLP. XGBoost: AFT survival and
multi-quantile regression.

Ten buggy twins, one per key of `BUGS`: fairseq at lr 0.1 (lr_x100), the POS tagger without
`model.zero_grad()` (no_zero_grad), ConvNeXt with shuffled labels, the Keras bf16 CNN fed raw
0-255 pixels (inputs_x255), the Lightning accumulation-scheduler classifier taking the softmax
before the cross-entropy, the Lightning triplet net with negative biases (dead_relu_init), the
Flax dropout MLP with eight sigmoid layers (deep_sigmoid), SimpleViT with its patch embedding
frozen after the optimizer was built (frozen_by_mistake), the Keras VAE taking the log of a
ReLU'd std squared (log_zero_nan), makemore's WaveNet left in eval mode after its first
evaluation (train_in_eval_mode).

A pipeline whose framework is not installed is left out of `PIPELINES`. Every framework is
imported inside its pipeline, so importing this module costs only torch. `SPLIT = BLIND4`.
"""

from __future__ import annotations

import math
import os
import random
import shutil
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

from mldbg.torch import Hook

from . import BLIND4, buggy, healthy, installed

SPLIT = BLIND4

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 31)


def _images(
    g: torch.Generator, n: int, size: int = 16, classes: int = 10, channels: int = 3, proto_seed: int = 77
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, channels, size, size) images in [0, 1]: each class a smooth random blob pattern with
    its own tint, shifted by a few pixels, on a noisy background; and labels."""
    pg = torch.Generator().manual_seed(proto_seed)
    shapes = F.avg_pool2d(torch.rand(classes, 1, size, size, generator=pg), 5, 1, 2)
    cut = shapes.flatten(1).quantile(0.65, dim=1).view(classes, 1, 1, 1)
    shapes = ((shapes - cut) * 25).sigmoid()
    tint = 0.3 + 0.7 * torch.rand(classes, channels, 1, 1, generator=pg)
    y = torch.randint(0, classes, (n,), generator=g)
    shift = torch.randint(-2, 3, (n, 2), generator=g)
    obj = torch.stack(
        [torch.roll(shapes[c], (int(a), int(b)), (1, 2)) for c, (a, b) in zip(y, shift, strict=True)]
    )
    background = 0.4 * torch.rand(n, channels, 1, 1, generator=g)
    x = background * (1 - obj) + obj * tint[y] + 0.08 * torch.randn(n, channels, size, size, generator=g)
    return x.clamp(0, 1), y


def _names(seed: int, n: int) -> list[str]:
    """Name-like words built from syllables with a skewed frequency (makemore's names.txt in
    spirit)."""
    rng = random.Random(seed)
    syll = ["an", "el", "ma", "ri", "jo", "ka", "li", "na", "sa", "th", "or", "ie", "ey", "de", "la", "mi",
            "be", "ro", "sh", "ty", "ar", "en", "is", "ch", "ly", "va", "zo", "qu", "ph", "ux"]  # fmt: skip
    weights = [1.0 / (i + 1) ** 0.8 for i in range(len(syll))]
    return ["".join(rng.choices(syll, weights, k=rng.choice([2, 2, 3, 3, 4]))) for _ in range(n)]


def _markov_tokens(g: torch.Generator, n: int, vocab: int, order_seed: int = 9) -> torch.Tensor:
    """A token stream of a sparse random first-order Markov chain (3 likely successors per
    token, 10% uniform noise)."""
    pg = torch.Generator().manual_seed(order_seed)
    nxt = torch.randint(0, vocab, (vocab, 3), generator=pg).numpy()
    r = torch.rand(n, generator=g).numpy()
    u = torch.randint(0, vocab, (n,), generator=g).numpy()
    k = torch.randint(0, 3, (n,), generator=g).numpy()
    out = np.empty(n, dtype=np.int64)
    t = int(u[0])
    for i in range(n):
        t = int(u[i]) if r[i] < 0.1 else int(nxt[t, k[i]])
        out[i] = t
    return torch.from_numpy(out)


# ============================================================================= shapes of public PyTorch scripts


def _makemore_data(seed: int, block_size: int, n: int = 2000) -> tuple[torch.Tensor, ...]:
    words = _names(seed + 100, n)
    chars = sorted(set("".join(words)))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi["."] = 0

    def build(ws: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        xs, ys = [], []
        for w in ws:
            context = [0] * block_size
            for ch in w + ".":
                ix = stoi[ch]
                xs.append(context)
                ys.append(ix)
                context = context[1:] + [ix]
        return torch.tensor(xs), torch.tensor(ys)

    n1 = int(0.9 * n)
    xtr, ytr = build(words[:n1])
    xva, yva = build(words[n1:])
    return xtr, ytr, xva, yva, torch.tensor(len(stoi))


def makemore_bigram_nn(path: str, steps: int = 150, seed: int = 0, bug: str | None = None) -> list[float]:
    """makemore part 1, the neural bigram: one-hot of the previous character times a 27x27 weight
    (here one bias-free `nn.Linear`), softmax by hand (`counts = logits.exp()`), the negative
    log-likelihood of the next character over ALL bigrams at once plus 0.01 * mean(W^2), `W.grad
    = None`, the update by hand at lr 50."""
    _seed(seed)
    xs, ys, _, _, vocab = _makemore_data(seed, 1)
    xs = xs[:, 0]
    v = int(vocab)
    model = nn.Linear(v, v, bias=False)
    nn.init.normal_(model.weight)
    hook = Hook(path)
    hook.register_module(model)
    xenc = F.one_hot(xs, num_classes=v).float()
    losses = []
    for _k in range(steps):
        logits = model(xenc)  # log-counts
        counts = logits.exp()
        probs = counts / counts.sum(1, keepdim=True)
        loss = -probs[torch.arange(len(ys)), ys].log().mean() + 0.01 * (model.weight**2).mean()
        model.weight.grad = None
        loss.backward()
        model.weight.data += -50 * model.weight.grad
        losses.append(loss.item())
    hook.close()
    return losses


def makemore_mlp_bengio(path: str, steps: int = 800, seed: int = 0, bug: str | None = None) -> list[float]:
    """makemore part 2 (Bengio et al. 2003): block size 3, a 10-dim character embedding `C`,
    a 200-unit tanh hidden layer, 27 logits, `F.cross_entropy`, minibatches of 32 drawn with
    `torch.randint`, the SGD update by hand (`p.data += -lr * p.grad`, `p.grad = None`) at 0.1
    then 0.01 for the last quarter."""
    g = _seed(seed)
    xtr, ytr, xva, yva, vocab = _makemore_data(seed, 3)
    v = int(vocab)
    model = nn.Sequential(nn.Embedding(v, 10), nn.Flatten(), nn.Linear(30, 200), nn.Tanh(), nn.Linear(200, v))
    parameters = list(model.parameters())
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for i in range(steps):
        ix = torch.randint(0, xtr.shape[0], (32,), generator=g)
        logits = model(xtr[ix])
        loss = F.cross_entropy(logits, ytr[ix])
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.1 if i < steps * 3 // 4 else 0.01
        for p in parameters:
            p.data += -lr * p.grad
        losses.append(loss.item())
    with torch.no_grad():
        F.cross_entropy(model(xva), yva)
    hook.close()
    return losses


class _FlattenConsecutive(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        x = x.reshape(b, t // self.n, c * self.n)
        return x.squeeze(1) if x.shape[1] == 1 else x


class _BatchNormLast(nn.BatchNorm1d):
    """BatchNorm over the last dimension of (B, C) or (B, T, C), as makemore's own layer."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim == 3:
            return super().forward(x.transpose(1, 2)).transpose(1, 2)
        return super().forward(x)


def makemore_wavenet(path: str, steps: int = 600, seed: int = 0, bug: str | None = None) -> list[float]:
    """makemore part 5, the WaveNet-like hierarchy: block size 8, a 24-dim embedding, three
    (FlattenConsecutive(2), Linear(bias=False), BatchNorm, Tanh) stages of 128 units, the last
    layer's weight scaled by 0.1, SGD by hand at 0.1 then 0.01, batch 32; the split losses
    evaluated in `model.eval()` every 200 steps."""
    g = _seed(seed)
    xtr, ytr, xva, yva, vocab = _makemore_data(seed, 8)
    v, n_embd, n_hidden = int(vocab), 24, 128
    model = nn.Sequential(
        nn.Embedding(v, n_embd),
        _FlattenConsecutive(2), nn.Linear(n_embd * 2, n_hidden, bias=False), _BatchNormLast(n_hidden), nn.Tanh(),
        _FlattenConsecutive(2), nn.Linear(n_hidden * 2, n_hidden, bias=False), _BatchNormLast(n_hidden), nn.Tanh(),
        _FlattenConsecutive(2), nn.Linear(n_hidden * 2, n_hidden, bias=False), _BatchNormLast(n_hidden), nn.Tanh(),
        nn.Linear(n_hidden, v),
    )  # fmt: skip
    with torch.no_grad():
        model[-1].weight *= 0.1
    parameters = list(model.parameters())
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for i in range(steps):
        ix = torch.randint(0, xtr.shape[0], (32,), generator=g)
        loss = F.cross_entropy(model(xtr[ix]), ytr[ix])
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.1 if i < steps * 3 // 4 else 0.01
        for p in parameters:
            p.data += -lr * p.grad
        losses.append(loss.item())
        if i % 200 == 199:
            model.eval()
            with torch.no_grad():
                F.cross_entropy(model(xva), yva)
            if bug != "train_in_eval_mode":  # the twin never switches back
                model.train()
    hook.close()
    return losses


class _Seq2SeqTransformer(nn.Module):
    def __init__(
        self, vocab: int, d: int, heads: int, ffn: int, layers: int, dropout: float, pad: int
    ) -> None:
        super().__init__()
        self.d, self.pad = d, pad
        self.embed = nn.Embedding(vocab, d, padding_idx=pad)
        nn.init.normal_(self.embed.weight, 0, d**-0.5)
        nn.init.constant_(self.embed.weight[pad], 0)
        pos = torch.arange(64)[:, None] / torch.pow(10000, torch.arange(0, d, 2) / d)
        self.register_buffer("pos", torch.cat([pos.sin(), pos.cos()], 1))
        self.transformer = nn.Transformer(d, heads, layers, layers, ffn, dropout, batch_first=True)
        self.dropout = nn.Dropout(dropout)

    def embed_tokens(self, t: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.embed(t) * math.sqrt(self.d) + self.pos[: t.shape[1]])

    def forward(self, src: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        causal = nn.Transformer.generate_square_subsequent_mask(prev.shape[1])
        h = self.transformer(
            self.embed_tokens(src), self.embed_tokens(prev), tgt_mask=causal,
            src_key_padding_mask=src == self.pad, tgt_key_padding_mask=prev == self.pad,
            memory_key_padding_mask=src == self.pad,
        )  # fmt: skip
        return h @ self.embed.weight.T  # share_all_embeddings


def fairseq_translation_label_smoothed(
    path: str, steps: int = 250, seed: int = 0, bug: str | None = None
) -> list[float]:
    """fairseq's transformer recipe in miniature: shared source/target embeddings scaled by
    sqrt(d), sinusoidal positions, `--criterion label_smoothed_cross_entropy
    --label-smoothing 0.1` (padding ignored, summed then divided by the token count), Adam betas
    (0.9, 0.98), `--lr 1e-3` with `--lr-scheduler inverse_sqrt --warmup-updates` (scaled to 60) from
    `--warmup-init-lr 1e-7`, dropout 0.1, weight decay 1e-4, no clipping (fairseq's default).
    The "translation": each source word mapped by a fixed lexicon, the order of each 3-word
    phrase reversed; variable lengths padded."""
    g = _seed(seed)
    pad, bos, eos, vocab = 0, 1, 2, 60
    lexicon = 3 + torch.randperm(vocab - 3, generator=torch.Generator().manual_seed(3))
    zipf = 1.0 / torch.arange(1, vocab - 2).float()  # word frequencies as in text
    n = 4096
    lengths = 3 * torch.randint(2, 5, (n,), generator=g)
    src = torch.full((n, 13), pad)
    tgt = torch.full((n, 14), pad)
    for i in range(n):
        length = int(lengths[i])
        words = 3 + torch.multinomial(zipf, length, replacement=True, generator=g)
        out = lexicon[words - 3].view(-1, 3).flip(1).flatten()
        src[i, :length], src[i, length] = words, eos
        tgt[i, 0], tgt[i, 1 : length + 1], tgt[i, length + 1] = bos, out, eos
    model = _Seq2SeqTransformer(vocab, 64, 4, 128, 2, 0.1, pad)
    lr, warmup, init_lr = 1e-3, 40, 1e-7
    if bug == "lr_x100":
        lr = 1e-1
    optimizer = torch.optim.Adam(
        model.parameters(), lr=init_lr, betas=(0.9, 0.98), eps=1e-8, weight_decay=1e-4
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    eps = 0.1
    for num_updates in range(1, steps + 1):
        idx = torch.randint(0, n, (32,), generator=g)
        s, t = src[idx], tgt[idx]
        prev, target = t[:, :-1], t[:, 1:]
        lprobs = F.log_softmax(model(s, prev), -1)
        mask = target != pad
        nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)[mask].sum()
        smooth = -lprobs.sum(-1)[mask].sum()
        eps_i = eps / (vocab - 1)
        loss = (1.0 - eps - eps_i) * nll + eps_i * smooth
        ntokens = mask.sum()
        if num_updates < warmup:
            step_lr = init_lr + num_updates * (lr - init_lr) / warmup
        else:
            step_lr = lr * warmup**0.5 * num_updates**-0.5
        for group in optimizer.param_groups:
            group["lr"] = step_lr
        optimizer.zero_grad()
        (loss / ntokens).backward()
        optimizer.step()
        losses.append(loss.item() / ntokens.item() / math.log(2))  # fairseq logs base 2
    hook.close()
    return losses


class _CartPoleVec:
    """A vectorized CartPole (gym's dynamics and termination), auto-reset, numpy."""

    def __init__(self, n: int, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.n = n
        self.state = self.rng.uniform(-0.05, 0.05, (n, 4))
        self.t = np.zeros(n, dtype=int)
        self.returns = np.zeros(n)
        self.finished: list[float] = []

    def step(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x, x_dot, theta, theta_dot = self.state.T
        force = np.where(action == 1, 10.0, -10.0)
        cos, sin = np.cos(theta), np.sin(theta)
        temp = (force + 0.05 * theta_dot**2 * sin) / 1.1
        thetaacc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos**2 / 1.1))
        xacc = temp - 0.05 * thetaacc * cos / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * xacc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * thetaacc
        self.state = np.stack([x, x_dot, theta, theta_dot], 1)
        self.t += 1
        self.returns += 1.0
        done = (np.abs(x) > 2.4) | (np.abs(theta) > 12 * 2 * math.pi / 360) | (self.t >= 500)
        for i in np.flatnonzero(done):
            self.finished.append(float(self.returns[i]))
            self.state[i] = self.rng.uniform(-0.05, 0.05, 4)
            self.t[i], self.returns[i] = 0, 0.0
        return self.state.astype(np.float32), np.ones(self.n, dtype=np.float32), done.astype(np.float32)


def cleanrl_ppo_cartpole(path: str, updates: int = 12, seed: int = 0, bug: str | None = None) -> list[float]:
    """CleanRL's ppo.py: 4 vectorized CartPoles, 128 steps per rollout, an Agent of two 64-unit
    tanh MLPs with `layer_init` (orthogonal, std sqrt(2); 0.01 for the actor head, 1 for the
    critic), Adam(2.5e-4, eps 1e-5) annealed linearly, GAE (gamma 0.99, lambda 0.95), 4 update
    epochs of 4 minibatches, normalized advantages, clip 0.2, clipped value loss, entropy 0.01,
    vf 0.5, `clip_grad_norm_(0.5)`."""
    _seed(seed)
    num_envs, num_steps, epochs, minibatches = 4, 128, 4, 4
    gamma, lam, clip_coef, ent_coef, vf_coef = 0.99, 0.95, 0.2, 0.01, 0.5

    def layer_init(layer: nn.Linear, std: float = math.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
        nn.init.orthogonal_(layer.weight, std)
        nn.init.constant_(layer.bias, bias_const)
        return layer

    class Agent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.critic = nn.Sequential(
                layer_init(nn.Linear(4, 64)), nn.Tanh(), layer_init(nn.Linear(64, 64)), nn.Tanh(),
                layer_init(nn.Linear(64, 1), std=1.0),
            )  # fmt: skip
            self.actor = nn.Sequential(
                layer_init(nn.Linear(4, 64)), nn.Tanh(), layer_init(nn.Linear(64, 64)), nn.Tanh(),
                layer_init(nn.Linear(64, 2), std=0.01),
            )  # fmt: skip

        def get_value(self, x: torch.Tensor) -> torch.Tensor:
            return self.critic(x)

        def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None) -> Any:
            probs = torch.distributions.Categorical(logits=self.actor(x))
            if action is None:
                action = probs.sample()
            return action, probs.log_prob(action), probs.entropy(), self.critic(x)

    envs = _CartPoleVec(num_envs, seed)
    agent = Agent()
    optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
    hook = Hook(path)
    hook.register_module(agent)
    obs = torch.zeros((num_steps, num_envs, 4))
    actions = torch.zeros((num_steps, num_envs))
    logprobs = torch.zeros((num_steps, num_envs))
    rewards = torch.zeros((num_steps, num_envs))
    dones = torch.zeros((num_steps, num_envs))
    values = torch.zeros((num_steps, num_envs))
    next_obs = torch.tensor(envs.state, dtype=torch.float32)
    next_done = torch.zeros(num_envs)
    batch_size = num_envs * num_steps
    losses = []
    for update in range(1, updates + 1):
        optimizer.param_groups[0]["lr"] = (1.0 - (update - 1.0) / updates) * 2.5e-4
        for step in range(num_steps):
            obs[step], dones[step] = next_obs, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            values[step], actions[step], logprobs[step] = value.flatten(), action, logprob
            o, r, d = envs.step(action.numpy())
            rewards[step] = torch.from_numpy(r)
            next_obs, next_done = torch.from_numpy(o), torch.from_numpy(d)
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0.0
            for t in reversed(range(num_steps)):
                nextnonterminal = 1.0 - (next_done if t == num_steps - 1 else dones[t + 1])
                nextvalues = next_value if t == num_steps - 1 else values[t + 1]
                delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + gamma * lam * nextnonterminal * lastgaelam
            returns = advantages + values
        b_obs, b_logprobs, b_actions = obs.reshape(-1, 4), logprobs.reshape(-1), actions.reshape(-1)
        b_adv, b_returns, b_values = advantages.reshape(-1), returns.reshape(-1), values.reshape(-1)
        b_inds = np.arange(batch_size)
        mb = batch_size // minibatches
        for _epoch in range(epochs):
            np.random.shuffle(b_inds)
            for start in range(0, batch_size, mb):
                mb_inds = b_inds[start : start + mb]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_obs[mb_inds], b_actions.long()[mb_inds]
                )
                ratio = (newlogprob - b_logprobs[mb_inds]).exp()
                mb_adv = b_adv[mb_inds]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(
                    -mb_adv * ratio, -mb_adv * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
                ).mean()
                newvalue = newvalue.view(-1)
                v_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                v_clipped = b_values[mb_inds] + torch.clamp(
                    newvalue - b_values[mb_inds], -clip_coef, clip_coef
                )
                v_loss = 0.5 * torch.max(v_unclipped, (v_clipped - b_returns[mb_inds]) ** 2).mean()
                loss = pg_loss - ent_coef * entropy.mean() + v_loss * vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optimizer.step()
                losses.append(loss.item())
    hook.close()
    return losses


def _posemb_sincos_2d(h: int, w: int, dim: int, temperature: int = 10000) -> torch.Tensor:
    y, x = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    omega = 1.0 / (temperature ** (torch.arange(dim // 4) / (dim // 4 - 1)))
    y = y.flatten()[:, None] * omega[None, :]
    x = x.flatten()[:, None] * omega[None, :]
    return torch.cat((x.sin(), x.cos(), y.sin(), y.cos()), dim=1).float()


class _SimpleViT(nn.Module):
    """lucidrains/vit-pytorch's SimpleViT: patches by rearrange, LayerNorm-Linear-LayerNorm patch
    embedding, fixed 2D sincos positions, pre-norm attention (bias-free qkv) and GELU
    feed-forward blocks, a final LayerNorm, mean pooling, a linear head."""

    def __init__(
        self, image: int, patch: int, classes: int, dim: int, depth: int, heads: int, mlp: int
    ) -> None:
        super().__init__()
        self.patch = patch
        patch_dim = 3 * patch * patch
        self.to_patch_embedding = nn.Sequential(
            nn.LayerNorm(patch_dim), nn.Linear(patch_dim, dim), nn.LayerNorm(dim)
        )
        self.register_buffer("pos_embedding", _posemb_sincos_2d(image // patch, image // patch, dim))
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.layers = nn.ModuleList()
        for _ in range(depth):
            attn = nn.ModuleDict(
                {"norm": nn.LayerNorm(dim), "to_qkv": nn.Linear(dim, dim * 3, bias=False), "to_out": nn.Linear(dim, dim, bias=False)}
            )  # fmt: skip
            ff = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))
            self.layers.append(nn.ModuleList([attn, ff]))
        self.norm = nn.LayerNorm(dim)
        self.linear_head = nn.Linear(dim, classes)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        b, c, hh, ww = img.shape
        p = self.patch
        x = img.view(b, c, hh // p, p, ww // p, p).permute(0, 2, 4, 3, 5, 1).reshape(b, -1, p * p * c)
        x = self.to_patch_embedding(x) + self.pos_embedding
        for attn, ff in self.layers:
            q, k, v = attn["to_qkv"](attn["norm"](x)).chunk(3, dim=-1)
            q, k, v = (
                t.view(b, -1, self.heads, t.shape[-1] // self.heads).transpose(1, 2) for t in (q, k, v)
            )
            weights = (q @ k.transpose(-1, -2) * self.scale).softmax(-1)
            out = (weights @ v).transpose(1, 2).reshape(b, -1, q.shape[-1] * self.heads)
            x = attn["to_out"](out) + x
            x = ff(x) + x
        return self.linear_head(self.norm(x).mean(dim=1))


def lucidrains_simple_vit(path: str, epochs: int = 4, seed: int = 0, bug: str | None = None) -> list[float]:
    """vit-pytorch's SimpleViT (image 16, patch 4, dim 64, depth 4, heads 4, mlp 128) trained as
    its cats-and-dogs notebook does: Adam(3e-4), `nn.CrossEntropyLoss`, StepLR(step 1, gamma
    0.7) per epoch, horizontal flips, batch 64."""
    g = _seed(seed)
    x, y = _images(g, 2304, size=16)
    model = _SimpleViT(16, 4, 10, 64, 4, 4, 128)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    if bug == "frozen_by_mistake":  # meant for a warm-up phase, never unfrozen
        for p in model.to_patch_embedding.parameters():
            p.requires_grad = False
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    loader = DataLoader(TensorDataset(x[:2048], y[:2048]), batch_size=64, shuffle=True)
    losses = []
    for _epoch in range(epochs):
        model.train()
        for data, label in loader:
            flip = torch.rand(len(data)) < 0.5
            data = torch.where(flip[:, None, None, None], data.flip(3), data)
            loss = criterion(model(data), label)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            criterion(model(x[2048:]), y[2048:])
        scheduler.step()
    hook.close()
    return losses


def accelerate_cv_example_frozen_backbone(
    path: str, epochs: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """accelerate's examples/cv_example.py without Accelerate: a pretrained backbone (here a
    small CNN pretrained in-process on other classes and loaded from its state dict), every
    parameter frozen then the new classifier unfrozen, `Adam(params=model.parameters(),
    lr=lr / 25)` over ALL parameters as the script does, OneCycleLR(max_lr=3e-2, epochs,
    steps_per_epoch), inputs normalized with the dataset mean and std, random crops, batch 64."""
    g = _seed(seed)

    def make_model(classes: int) -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
            nn.Flatten(), nn.Linear(64, classes),
        )  # fmt: skip

    # the "pretrained checkpoint": a backbone trained on another labelled set
    px, py = _images(g, 2048, size=16, classes=12, proto_seed=501)
    pre = make_model(12)
    popt = torch.optim.Adam(pre.parameters(), 1e-3)
    for _ in range(150):
        i = torch.randint(0, 2048, (64,), generator=g)
        popt.zero_grad()
        F.cross_entropy(pre(px[i]), py[i]).backward()
        popt.step()
    state = {k: v for k, v in pre.state_dict().items() if not k.startswith("13.")}

    x, y = _images(g, 1536, size=18, classes=6, proto_seed=77)
    mean, std = x[:1280].mean((0, 2, 3), keepdim=True), x[:1280].std((0, 2, 3), keepdim=True)
    x = (x - mean) / std
    model = make_model(6)
    model.load_state_dict(state, strict=False)
    for param in model.parameters():
        param.requires_grad = False
    for param in model[13].parameters():
        param.requires_grad = True
    lr = 3e-2
    optimizer = torch.optim.Adam(params=model.parameters(), lr=lr / 25)
    loader = DataLoader(TensorDataset(x[:1280], y[:1280]), batch_size=64, shuffle=True)
    lr_scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer=optimizer, max_lr=lr, epochs=epochs, steps_per_epoch=len(loader)
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _epoch in range(epochs):
        model.train()
        for inputs, labels in loader:
            a, b = torch.randint(0, 3, (2,), generator=g).tolist()
            outputs = model(inputs[:, :, a : a + 16, b : b + 16])
            loss = F.cross_entropy(outputs, labels)
            loss.backward()
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            (model(x[1280:, :, 1:17, 1:17]).argmax(-1) == y[1280:]).float().mean()
    hook.close()
    return losses


def pytorch_tutorial_lstm_pos_tagger(
    path: str, epochs: int = 30, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The PyTorch tutorial "Sequence Models and Long Short-Term Memory Networks": an LSTMTagger
    (embedding 6, hidden 6, `F.log_softmax` over tags), `nn.NLLLoss`, `optim.SGD(lr=0.1)`, one
    sentence per step, `model.zero_grad()` before each; 24 generated sentences of determiners,
    nouns and verbs (ambiguous words included)."""
    _seed(seed)
    rng = random.Random(seed)
    det = ["the", "a", "every", "that"]
    noun = ["dog", "apple", "cat", "book", "man", "park", "house", "tree"]
    verb = ["ate", "read", "saw", "likes", "runs", "sees"]
    both = ["book", "park", "saw"]  # noun or verb by position
    training_data = []
    for _ in range(24):
        words, tags = [], []
        for _phrase in range(rng.choice([1, 2])):
            words += [
                rng.choice(det),
                rng.choice(noun + both),
                rng.choice(verb + both),
                rng.choice(det),
                rng.choice(noun),
            ]
            tags += ["DET", "NN", "V", "DET", "NN"]
        training_data.append((words, tags))
    word_to_ix: dict[str, int] = {}
    for sent, _tags in training_data:
        for word in sent:
            word_to_ix.setdefault(word, len(word_to_ix))
    tag_to_ix = {"DET": 0, "NN": 1, "V": 2}

    class LSTMTagger(nn.Module):
        def __init__(self, embedding_dim: int, hidden_dim: int, vocab_size: int, tagset_size: int) -> None:
            super().__init__()
            self.word_embeddings = nn.Embedding(vocab_size, embedding_dim)
            self.lstm = nn.LSTM(embedding_dim, hidden_dim)
            self.hidden2tag = nn.Linear(hidden_dim, tagset_size)

        def forward(self, sentence: torch.Tensor) -> torch.Tensor:
            embeds = self.word_embeddings(sentence)
            lstm_out, _ = self.lstm(embeds.view(len(sentence), 1, -1))
            tag_space = self.hidden2tag(lstm_out.view(len(sentence), -1))
            return F.log_softmax(tag_space, dim=1)

    model = LSTMTagger(6, 6, len(word_to_ix), len(tag_to_ix))
    loss_function = nn.NLLLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_function)
    losses = []
    for _epoch in range(epochs):
        for sentence, tags in training_data:
            if bug != "no_zero_grad":
                model.zero_grad()
            sentence_in = torch.tensor([word_to_ix[w] for w in sentence])
            targets = torch.tensor([tag_to_ix[t] for t in tags])
            loss = loss_function(model(sentence_in), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    hook.close()
    return losses


# ============================================================================= Hugging Face Trainer


class _Examples(Dataset):
    """A list of feature dicts, as a `datasets.Dataset` after `.map(tokenize)` gives them."""

    def __init__(self, **columns: Any) -> None:
        self.columns = columns
        self.n = len(next(iter(columns.values())))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {k: v[i] for k, v in self.columns.items()}


def _hf_train(
    path: str,
    model: Any,
    train: Dataset,
    val: Dataset | None,
    collator: Any = None,
    trainer_cls: Any = None,
    args_cls: Any = None,
    callbacks: list[Any] | None = None,
    **args: Any,
) -> list[float]:
    """`Trainer(model, TrainingArguments(...), callbacks=[DebuggerCallback(path)]).train()`; the
    per-step training losses from `trainer.state.log_history` (`logging_steps=1`)."""
    from transformers import PrinterCallback, Trainer, TrainingArguments

    from mldbg.transformers import DebuggerCallback

    targs = (args_cls or TrainingArguments)(
        output_dir=os.path.join(path, "trainer"),
        save_strategy="no",
        eval_strategy="epoch" if val is not None else "no",
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
        **args,
    )
    trainer = (trainer_cls or Trainer)(
        model=model, args=targs, train_dataset=train, eval_dataset=val, data_collator=collator,
        callbacks=[DebuggerCallback(path), *(callbacks or [])],
    )  # fmt: skip
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(targs.output_dir, ignore_errors=True)
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


def hf_marian_seq2seq_trainer(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Translation fine-tuning as the `run_translation.py` example runs it: a tiny
    `MarianMTModel` (pad as decoder start, sinusoidal positions, scaled embeddings),
    `Seq2SeqTrainer` with `Seq2SeqTrainingArguments(predict_with_generate=False)`, labels padded
    with -100 and `decoder_input_ids` shifted from them as `DataCollatorForSeq2Seq(model=model)`
    adds, lr 1e-3 (from scratch) with linear decay and 4% warm-up, weight decay 0.01, label
    smoothing 0.1. The "language pair": a fixed lexicon, word for word."""
    from transformers import MarianConfig, MarianMTModel, Seq2SeqTrainer, Seq2SeqTrainingArguments

    g = _seed(seed)
    pad, eos, vocab, n = 0, 1, 80, 1536
    lexicon = 2 + torch.randperm(vocab - 2, generator=torch.Generator().manual_seed(11))
    zipf = 1.0 / torch.arange(1, vocab - 1).float()  # word frequencies as in text
    src = torch.full((n, 14), pad)
    labels = torch.full((n, 14), -100)
    for i in range(n):
        length = int(torch.randint(5, 13, (1,), generator=g))
        words = 2 + torch.multinomial(zipf, length, replacement=True, generator=g)
        src[i, :length], src[i, length] = words, eos
        labels[i, :length], labels[i, length] = lexicon[words - 2], eos
    config = MarianConfig(
        vocab_size=vocab, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=32,
        pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad, decoder_vocab_size=vocab,
    )  # fmt: skip
    model = MarianMTModel(config)
    mask = (src != pad).long()
    # what `DataCollatorForSeq2Seq(model=model)` adds: the Trainer's label smoother pops `labels`
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(labels=labels)
    train = _Examples(
        input_ids=src[:1408], attention_mask=mask[:1408], decoder_input_ids=decoder_input_ids[:1408],
        labels=labels[:1408],
    )  # fmt: skip
    val = _Examples(
        input_ids=src[1408:], attention_mask=mask[1408:], decoder_input_ids=decoder_input_ids[1408:],
        labels=labels[1408:],
    )  # fmt: skip
    return _hf_train(
        path, model, train, val, trainer_cls=Seq2SeqTrainer, args_cls=Seq2SeqTrainingArguments,
        predict_with_generate=False, num_train_epochs=4, per_device_train_batch_size=32, learning_rate=1e-3,
        warmup_steps=0.04, weight_decay=0.01, label_smoothing_factor=0.1,
    )  # fmt: skip


def hf_wav2vec2_ctc(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Hugging Face "fine-tune Wav2Vec2 for ASR" recipe on a tiny random `Wav2Vec2ForCTC`
    (three conv feature layers with group norm, 2 Transformer layers, SpecAugment-like time
    masking at 5%), `ctc_loss_reduction="mean"`, the pad id as the CTC blank, labels padded with
    -100, inputs zero-mean unit-variance per utterance (the feature extractor's `do_normalize`),
    lr 1e-3 (from scratch), warm-up 10%. The
    "speech": each phone a tone of its own pitch and length."""
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    g = _seed(seed)
    n, phones, sr = 448, 10, 1600
    freqs = torch.linspace(60, 520, phones)
    audio = torch.zeros(n, 800)
    labels = torch.full((n, 10), -100)
    mask = torch.zeros(n, 800, dtype=torch.long)
    for i in range(n):
        k = int(torch.randint(3, 6, (1,), generator=g))
        seq = []
        while len(seq) < k:
            p = int(torch.randint(0, phones, (1,), generator=g))
            if not seq or seq[-1] != p:
                seq.append(p)
        pieces = []
        for p in seq:
            dur = int(torch.randint(100, 160, (1,), generator=g))
            t = torch.arange(dur) / sr
            pieces.append(torch.sin(2 * math.pi * freqs[p] * t) * torch.hann_window(dur, periodic=False))
        wave = torch.cat(pieces)[:800]
        wave = wave + 0.1 * torch.randn(len(wave), generator=g)
        wave = (wave - wave.mean()) / (wave.std() + 1e-7)
        audio[i, : len(wave)], mask[i, : len(wave)] = wave, 1
        labels[i, : len(seq)] = torch.tensor(seq) + 1
    config = Wav2Vec2Config(
        vocab_size=phones + 1, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
        conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), feat_extract_norm="group",
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, mask_time_prob=0.05, mask_time_length=4,
        ctc_loss_reduction="mean", pad_token_id=0, layerdrop=0.0,
    )  # fmt: skip
    model = Wav2Vec2ForCTC(config)
    train = _Examples(input_values=audio[:384], attention_mask=mask[:384], labels=labels[:384])
    val = _Examples(input_values=audio[384:], attention_mask=mask[384:], labels=labels[384:])

    def collate(features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        return {
            k: torch.stack([f[k] for f in features]) for k in ("input_values", "attention_mask", "labels")
        }

    return _hf_train(
        path, model, train, val, collator=collate, num_train_epochs=8, per_device_train_batch_size=32,
        learning_rate=1e-3, warmup_steps=0.1, weight_decay=0.005, 
        remove_unused_columns=False,
    )  # fmt: skip


def hf_deberta_regression(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """STS-B-style regression with `DebertaForSequenceClassification(num_labels=1)` (MSE loss,
    `problem_type="regression"` from the float labels) on a tiny random DeBERTa (relative
    position attention, c2p|p2c), targets on a 0-5 scale: the mean "valence" of a text's words
    plus noise; lr 5e-4 (from scratch), warm-up 10%, weight decay 0.01, batch 32."""
    from transformers import DebertaConfig, DebertaForSequenceClassification

    g = _seed(seed)
    n, length, vocab = 1152, 24, 200
    valence = torch.rand(vocab, generator=torch.Generator().manual_seed(13)) * 5
    ids = torch.randint(5, vocab, (n, length), generator=g)
    lengths = torch.randint(10, length + 1, (n,), generator=g)
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    ids = torch.where(mask.bool(), ids, 0)
    ids[:, 0] = 1
    score = (valence[ids] * mask).sum(1) / mask.sum(1)
    score = ((score - 2.5) * 2.5 + 2.5 + 0.2 * torch.randn(n, generator=g)).clamp(0, 5)
    config = DebertaConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
        max_position_embeddings=64, relative_attention=True, pos_att_type=["c2p", "p2c"], max_relative_positions=-1,
        position_biased_input=False, num_labels=1, pad_token_id=0,
    )  # fmt: skip
    model = DebertaForSequenceClassification(config)
    train = _Examples(input_ids=ids[:1024], attention_mask=mask[:1024], labels=score[:1024])
    val = _Examples(input_ids=ids[1024:], attention_mask=mask[1024:], labels=score[1024:])
    return _hf_train(
        path, model, train, val, num_train_epochs=4, per_device_train_batch_size=32, learning_rate=5e-4,
        warmup_steps=0.1, weight_decay=0.01,
    )  # fmt: skip


def hf_bert_weighted_compute_loss(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """A `Trainer` subclass overriding `compute_loss` with a class-weighted `nn.CrossEntropyLoss`
    (inverse class frequencies) for an imbalanced 3-class intent task, a tiny random BERT,
    `gradient_accumulation_steps=4` in fp32, lr 1e-3 (from scratch), warm-up 10%, weight decay 0.01, batch 16."""
    from transformers import BertConfig, BertForSequenceClassification, Trainer

    g = _seed(seed)
    n, length, vocab = 2048, 20, 150
    y = torch.multinomial(torch.tensor([0.75, 0.18, 0.07]), n, replacement=True, generator=g)
    ids = torch.randint(100, vocab, (n, length), generator=g)
    cue = 10 + 30 * y[:, None] + torch.randint(0, 30, (n, length), generator=g)
    ids = torch.where(torch.rand(n, length, generator=g) < 0.3, cue, ids)
    ids[:, 0] = 2
    mask = torch.ones_like(ids)
    counts = torch.bincount(y[:1792], minlength=3).float()
    class_weights = counts.sum() / (3 * counts)

    class WeightedTrainer(Trainer):
        def compute_loss(
            self,
            model: Any,
            inputs: dict[str, Any],
            return_outputs: bool = False,
            num_items_in_batch: Any = None,
        ) -> Any:
            labels = inputs.pop("labels")
            outputs = model(**inputs)
            logits = outputs.get("logits")
            loss_fct = nn.CrossEntropyLoss(weight=class_weights.to(logits.device))
            loss = loss_fct(logits.view(-1, self.model.config.num_labels), labels.view(-1))
            return (loss, outputs) if return_outputs else loss

    config = BertConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
        max_position_embeddings=32, num_labels=3,
    )  # fmt: skip
    model = BertForSequenceClassification(config)
    train = _Examples(input_ids=ids[:1792], attention_mask=mask[:1792], labels=y[:1792])
    val = _Examples(input_ids=ids[1792:], attention_mask=mask[1792:], labels=y[1792:])
    return _hf_train(
        path, model, train, val, trainer_cls=WeightedTrainer, num_train_epochs=4, per_device_train_batch_size=16,
        gradient_accumulation_steps=4, learning_rate=1e-3, warmup_steps=0.1, weight_decay=0.01,
    )  # fmt: skip


def hf_mistral_causal_lm(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Causal-LM pretraining of a tiny random `MistralForCausalLM` (grouped-query attention with
    2 KV heads, sliding window 16, RMSNorm, SwiGLU) on packed 64-token blocks (`labels =
    input_ids`, the model shifts), AdamW betas (0.9, 0.95), lr 1e-3 with 5% warm-up and cosine
    decay, weight decay 0.1, `max_grad_norm=1.0`, plus a `TrainerCallback` that keeps the
    evaluation perplexity."""
    from transformers import MistralConfig, MistralForCausalLM, TrainerCallback

    g = _seed(seed)
    vocab = 96
    stream = _markov_tokens(g, 64 * 640, vocab, order_seed=23)
    blocks = stream.view(-1, 64)
    config = MistralConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, sliding_window=16, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, tie_word_embeddings=False,
    )  # fmt: skip
    model = MistralForCausalLM(config)

    class Perplexity(TrainerCallback):
        def __init__(self) -> None:
            self.ppl: list[float] = []

        def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None, **kw: Any) -> None:
            self.ppl.append(math.exp(metrics["eval_loss"]))

    train = _Examples(input_ids=blocks[:576], labels=blocks[:576])
    val = _Examples(input_ids=blocks[576:], labels=blocks[576:])
    return _hf_train(
        path, model, train, val, callbacks=[Perplexity()], num_train_epochs=4, per_device_train_batch_size=16,
        learning_rate=1e-3, warmup_steps=0.05, lr_scheduler_type="cosine", weight_decay=0.1, adam_beta2=0.95,
        max_grad_norm=1.0,
    )  # fmt: skip


def hf_convnext_image_classification(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Image classification as the `run_image_classification.py` example runs it, on a tiny random
    `ConvNextForImageClassification` (patchify stem 2, two stages, layer scale 1e-6, drop path
    0.1): pixels normalized with mean 0.5 and std 0.5 (the image processor's), random horizontal
    flips done offline, AdamW lr 1e-3, weight decay 0.05, cosine with 10% warm-up, batch 32,
    `remove_unused_columns=False`."""
    from transformers import ConvNextConfig, ConvNextForImageClassification

    g = _seed(seed)
    x, y = _images(g, 1792, size=16, proto_seed=91)
    flip = torch.rand(len(x), generator=g) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(3), x)
    x = (x - 0.5) / 0.5
    if bug == "shuffled_labels":  # the label column sorted apart from the images
        y = y[torch.randperm(len(y), generator=g)]
    config = ConvNextConfig(
        num_channels=3, patch_size=2, num_stages=2, hidden_sizes=[32, 64], depths=[2, 2], drop_path_rate=0.1,
        image_size=16, num_labels=10,
    )  # fmt: skip
    model = ConvNextForImageClassification(config)
    train = _Examples(pixel_values=x[:1536], labels=y[:1536])
    val = _Examples(pixel_values=x[1536:], labels=y[1536:])
    return _hf_train(
        path, model, train, val, num_train_epochs=4, per_device_train_batch_size=32, learning_rate=1e-3,
        weight_decay=0.05, lr_scheduler_type="cosine", warmup_steps=0.1, remove_unused_columns=False,
    )  # fmt: skip


def hf_bert_extractive_qa(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Extractive question answering as `run_qa.py` trains it: `BertForQuestionAnswering` (start and
    end logits, the mean of the two cross-entropies), "[CLS] question [SEP] context [SEP]" with
    token type ids, the answer span's start/end token positions; a tiny random BERT, lr 1e-3
    (from scratch), 10% warm-up, linear decay, weight decay 0.01, batch 24. The task: the question names a key
    word; the answer is the two words after it in the context."""
    from transformers import BertConfig, BertForQuestionAnswering

    g = _seed(seed)
    n, ctx_len, vocab = 1792, 28, 120
    cls, sep = 2, 3
    keys = torch.randint(10, 30, (n,), generator=g)
    context = torch.randint(30, vocab, (n, ctx_len), generator=g)
    pos = torch.randint(0, ctx_len - 2, (n,), generator=g)
    context[torch.arange(n), pos] = keys
    question = torch.stack([torch.full((n,), 5), keys, torch.full((n,), 6)], 1)  # "where is <key> ?"
    ids = torch.cat(
        [torch.full((n, 1), cls), question, torch.full((n, 1), sep), context, torch.full((n, 1), sep)], 1
    )
    types = torch.cat([torch.zeros(n, 5, dtype=torch.long), torch.ones(n, ctx_len + 1, dtype=torch.long)], 1)
    start = 5 + pos + 1
    end = start + 1
    config = BertConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
        max_position_embeddings=64,
    )  # fmt: skip
    model = BertForQuestionAnswering(config)
    mask = torch.ones_like(ids)
    cut = 1536
    train = _Examples(
        input_ids=ids[:cut], token_type_ids=types[:cut], attention_mask=mask[:cut], start_positions=start[:cut],
        end_positions=end[:cut],
    )  # fmt: skip
    val = _Examples(
        input_ids=ids[cut:], token_type_ids=types[cut:], attention_mask=mask[cut:], start_positions=start[cut:],
        end_positions=end[cut:],
    )  # fmt: skip
    return _hf_train(
        path, model, train, val, num_train_epochs=4, per_device_train_batch_size=24, learning_rate=1e-3,
        warmup_steps=0.1, weight_decay=0.01,
    )  # fmt: skip


def hf_clip_contrastive(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Contrastive image-text training with `CLIPModel(return_loss=True)` under `Trainer` (the
    `run_clip.py` example's shape): a tiny random CLIP (ViT patch 4 on 16px images, a 2-layer
    text Transformer), captions naming the image's class with filler words, a collator adding
    `return_loss=True`, lr 5e-4, warm-up 10%, weight decay 0.1, batch 64,
    `remove_unused_columns=False`."""
    from transformers import CLIPConfig, CLIPModel

    g = _seed(seed)
    n, classes, length, vocab = 2048, 10, 12, 100
    x, y = _images(g, n, size=16, classes=classes, proto_seed=131)
    x = (x - 0.5) / 0.25
    ids = torch.randint(30, vocab, (n, length), generator=g)
    ids[:, 0] = 1
    slot = torch.randint(1, length - 1, (n,), generator=g)
    ids[torch.arange(n), slot] = 10 + y
    ids[:, -1] = 2  # eos (CLIP pools the eos token)
    config = CLIPConfig(
        text_config={"vocab_size": vocab, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                     "num_attention_heads": 2, "max_position_embeddings": 16, "bos_token_id": 1, "eos_token_id": 2,
                     "pad_token_id": 0},
        vision_config={"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
                       "image_size": 16, "patch_size": 4, "num_channels": 3},
        projection_dim=32,
    )  # fmt: skip
    model = CLIPModel(config)
    train = _Examples(input_ids=ids, attention_mask=torch.ones_like(ids), pixel_values=x)

    def collate(features: list[dict[str, Any]]) -> dict[str, Any]:
        batch = {k: torch.stack([f[k] for f in features]) for k in features[0]}
        return {**batch, "return_loss": True}

    return _hf_train(
        path, model, train, None, collator=collate, num_train_epochs=4, per_device_train_batch_size=64,
        learning_rate=5e-4, warmup_steps=0.1, weight_decay=0.1, remove_unused_columns=False,
    )  # fmt: skip


# ============================================================================= Lightning


def _pl_trainer(path: str, callbacks: list[Any], **kw: Any) -> Any:
    import lightning.pytorch as pl

    from mldbg.lightning import DebuggerCallback

    return pl.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=path,
        callbacks=[DebuggerCallback(path), *callbacks],
        **kw,
    )


def _pl_losses() -> Any:
    """A callback keeping each training batch's loss (`outputs["loss"]`, or what the module
    stored as `self.last_loss` under manual optimization)."""
    import lightning.pytorch as pl

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is None:
                loss = module.last_loss
            self.losses.append(float(loss))

    return LossHistory()


def lit_adversarial_autoencoder(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """An adversarial autoencoder (Makhzani et al.) as a LightningModule with
    `automatic_optimization = False` and three optimizers: the reconstruction phase (encoder and
    decoder, MSE), the regularization phase's discriminator (a standard-normal prior against the
    codes, BCE) and generator (the encoder fooling it); `self.toggle_optimizer`,
    `self.manual_backward`, Adam(1e-3) / Adam(2e-4, betas (0.5, 0.999)) as in the paper's code;
    the loss history is the reconstruction loss."""
    import lightning.pytorch as pl

    g = _seed(seed)
    x, _ = _images(g, 2048, size=12, channels=1, proto_seed=141)
    x = x.flatten(1)

    class AAE(pl.LightningModule):
        def __init__(self, latent: int = 8) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.encoder = nn.Sequential(
                nn.Linear(144, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, latent)
            )
            self.decoder = nn.Sequential(
                nn.Linear(latent, 128),
                nn.ReLU(),
                nn.Linear(128, 256),
                nn.ReLU(),
                nn.Linear(256, 144),
                nn.Sigmoid(),
            )
            self.discriminator = nn.Sequential(nn.Linear(latent, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1))
            self.latent = latent
            self.last_loss = torch.tensor(0.0)

        def training_step(self, batch: Any, batch_idx: int) -> None:
            (xb,) = batch
            opt_ae, opt_d, opt_g = self.optimizers()
            self.toggle_optimizer(opt_ae)
            recon = F.mse_loss(self.decoder(self.encoder(xb)), xb)
            opt_ae.zero_grad()
            self.manual_backward(recon)
            opt_ae.step()
            self.untoggle_optimizer(opt_ae)

            self.toggle_optimizer(opt_d)
            z_real = torch.randn(len(xb), self.latent)
            z_fake = self.encoder(xb).detach()
            d_real, d_fake = self.discriminator(z_real), self.discriminator(z_fake)
            d_loss = F.binary_cross_entropy_with_logits(
                d_real, torch.ones_like(d_real)
            ) + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake))
            opt_d.zero_grad()
            self.manual_backward(d_loss)
            opt_d.step()
            self.untoggle_optimizer(opt_d)

            self.toggle_optimizer(opt_g)
            d_gen = self.discriminator(self.encoder(xb))
            g_loss = F.binary_cross_entropy_with_logits(d_gen, torch.ones_like(d_gen))
            opt_g.zero_grad()
            self.manual_backward(g_loss)
            opt_g.step()
            self.untoggle_optimizer(opt_g)
            self.log_dict({"recon": recon, "d_loss": d_loss, "g_loss": g_loss})
            self.last_loss = recon.detach()

        def configure_optimizers(self) -> Any:
            return (
                torch.optim.Adam([*self.encoder.parameters(), *self.decoder.parameters()], lr=1e-3),
                torch.optim.Adam(self.discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999)),
                torch.optim.Adam(self.encoder.parameters(), lr=2e-4, betas=(0.5, 0.999)),
            )

    train = DataLoader(TensorDataset(x), batch_size=64, shuffle=True)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(AAE(), train)
    return history.losses


def _topic_texts(
    g: torch.Generator, n: int, length: int, vocab: int, topics: int
) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.randint(0, topics, (n,), generator=g)
    ids = torch.randint(topics * 20 + 1, vocab, (n, length), generator=g)
    topical = 1 + 20 * y[:, None] + torch.randint(0, 20, (n, length), generator=g)
    return torch.where(torch.rand(n, length, generator=g) < 0.2, topical, ids), y


def lit_accumulation_scheduler_textcnn(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A text classifier (embedding, Conv1d widths 3/4/5 with 32 maps each, max-over-time, dropout
    0.5) as a LightningModule trained with the `GradientAccumulationScheduler(scheduling={0: 1,
    2: 2, 4: 4})` callback, Adam(1e-3), `F.cross_entropy` on the logits, batch 32, validation
    accuracy logged each epoch."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import GradientAccumulationScheduler

    g = _seed(seed)
    x, y = _topic_texts(g, 2304, 40, 400, 5)

    class TextCNN(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(400, 48, padding_idx=0)
            self.convs = nn.ModuleList([nn.Conv1d(48, 32, k) for k in (3, 4, 5)])
            self.dropout = nn.Dropout(0.5)
            self.fc = nn.Linear(96, 5)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            h = self.embed(ids).transpose(1, 2)
            h = torch.cat([F.relu(c(h)).amax(-1) for c in self.convs], 1)
            logits = self.fc(self.dropout(h))
            if bug == "softmax_before_ce":  # the model "returns probabilities"
                return logits.softmax(-1)
            return logits

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            loss = F.cross_entropy(self(xb), yb)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            xb, yb = batch
            self.log("val_acc", (self(xb).argmax(-1) == yb).float().mean())

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    train = DataLoader(TensorDataset(x[:2048], y[:2048]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(x[2048:], y[2048:]), batch_size=256)
    history = _pl_losses()
    scheduler = GradientAccumulationScheduler(scheduling={0: 1, 2: 2, 4: 4})
    trainer = _pl_trainer(path, [history, scheduler], max_epochs=epochs)
    trainer.fit(TextCNN(), train, val)
    return history.losses


def lit_val_every_50_steps_gru_lm(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A GRU language model trained by steps rather than epochs: `max_steps=300`,
    `val_check_interval=50` with `check_val_every_n_epoch=None` (validation across epoch ends),
    `limit_val_batches=4`, AdamW(2e-3, weight decay 0.01) with a per-step cosine schedule
    (`"interval": "step"`), `gradient_clip_val=0.25`, dropout 0.2, tied input/output embeddings."""
    import lightning.pytorch as pl

    g = _seed(seed)
    vocab, seq = 64, 32
    stream = _markov_tokens(g, 80000, vocab, order_seed=31)
    windows = stream[: (len(stream) // (seq + 1)) * (seq + 1)].view(-1, seq + 1)

    class GRULM(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, 64)
            self.gru = nn.GRU(64, 64, num_layers=2, batch_first=True, dropout=0.2)
            self.drop = nn.Dropout(0.2)
            self.out = nn.Linear(64, vocab)
            self.out.weight = self.embed.weight

        def loss(self, batch: torch.Tensor) -> torch.Tensor:
            h, _ = self.gru(self.drop(self.embed(batch[:, :-1])))
            return F.cross_entropy(self.out(self.drop(h)).reshape(-1, vocab), batch[:, 1:].reshape(-1))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = self.loss(batch[0])
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.log("val_ppl", self.loss(batch[0]).exp())

        def configure_optimizers(self) -> Any:
            opt = torch.optim.AdamW(self.parameters(), lr=2e-3, weight_decay=0.01)
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    train = DataLoader(TensorDataset(windows[:1500]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(windows[1500:]), batch_size=64)
    history = _pl_losses()
    trainer = _pl_trainer(
        path, [history], max_steps=steps, max_epochs=-1, val_check_interval=50, check_val_every_n_epoch=None,
        limit_val_batches=4, gradient_clip_val=0.25,
    )  # fmt: skip
    trainer.fit(GRULM(), train, val)
    return history.losses


def lit_bf16_mixed_tabular_resnet(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A tabular ResNet (Gorishniy et al.: Linear, then blocks of BatchNorm-Linear-ReLU-Dropout-
    Linear with a skip, a final BatchNorm-ReLU-Linear) for a regression target, trained with
    `Trainer(precision="bf16-mixed")` on CPU, AdamW(1e-3, weight decay 1e-5), standardized
    features and target, MSE, batch 128."""
    import lightning.pytorch as pl

    g = _seed(seed)
    n, d = 6000, 12
    x = torch.randn(n, d, generator=g)
    target = (
        x[:, 0] * x[:, 1]
        + torch.sin(2 * x[:, 2])
        + 0.5 * x[:, 3] ** 2
        - x[:, 4]
        + 0.3 * torch.randn(n, generator=g)
    )
    target = (target - target[:5000].mean()) / target[:5000].std()

    class Block(nn.Module):
        def __init__(self, width: int) -> None:
            super().__init__()
            self.net = nn.Sequential(
                nn.BatchNorm1d(width),
                nn.Linear(width, 2 * width),
                nn.ReLU(),
                nn.Dropout(0.1),
                nn.Linear(2 * width, width),
            )

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            return h + self.net(h)

    class TabResNet(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(d, 64),
                Block(64),
                Block(64),
                Block(64),
                nn.BatchNorm1d(64),
                nn.ReLU(),
                nn.Linear(64, 1),
            )

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            loss = F.mse_loss(self.net(xb).squeeze(-1).float(), yb)
            self.log("train_mse", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            xb, yb = batch
            self.log("val_rmse", F.mse_loss(self.net(xb).squeeze(-1).float(), yb).sqrt())

        def configure_optimizers(self) -> Any:
            return torch.optim.AdamW(self.parameters(), lr=1e-3, weight_decay=1e-5)

    train = DataLoader(TensorDataset(x[:5000], target[:5000]), batch_size=128, shuffle=True)
    val = DataLoader(TensorDataset(x[5000:], target[5000:]), batch_size=500)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs, precision="bf16-mixed")
    trainer.fit(TabResNet(), train, val)
    return history.losses


def lit_triplet_embedding_onecycle(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Metric learning as a LightningModule: an MLP embedding net (ReLU, L2-normalized 32-dim
    output), `nn.TripletMarginLoss(margin=0.2)` on (anchor, positive of the same class, negative
    of another class) triplets drawn offline, SGD(momentum 0.9, weight decay 5e-4) under
    OneCycleLR(max_lr 0.1) stepped per batch, batch 64."""
    import lightning.pytorch as pl

    g = _seed(seed)
    classes, d, n = 20, 48, 3000
    centers = 0.3 * torch.randn(classes, d, generator=torch.Generator().manual_seed(17))
    labels = torch.randint(0, classes, (n,), generator=g)
    feats = centers[labels] + torch.randn(n, d, generator=g)
    by_class = [torch.nonzero(labels == c).flatten() for c in range(classes)]
    anchors = torch.arange(n)
    pos = torch.stack(
        [by_class[int(c)][torch.randint(0, len(by_class[int(c)]), (1,), generator=g)][0] for c in labels]
    )
    neg_class = (labels + torch.randint(1, classes, (n,), generator=g)) % classes
    neg = torch.stack(
        [by_class[int(c)][torch.randint(0, len(by_class[int(c)]), (1,), generator=g)][0] for c in neg_class]
    )

    class EmbeddingNet(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(d, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 32)
            )
            if bug == "dead_relu_init":  # a "bias init" copied with the wrong sign and scale
                for m in self.net:
                    if isinstance(m, nn.Linear):
                        nn.init.constant_(m.bias, -3.0)
            self.criterion = nn.TripletMarginLoss(margin=0.2)

        def forward(self, v: torch.Tensor) -> torch.Tensor:
            return F.normalize(self.net(v), dim=-1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            a, p, ng = batch
            loss = self.criterion(self(a), self(p), self(ng))
            self.log("triplet", loss)
            return loss

        def configure_optimizers(self) -> Any:
            opt = torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
            sched = torch.optim.lr_scheduler.OneCycleLR(
                opt, max_lr=0.1, total_steps=self.trainer.estimated_stepping_batches
            )
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    train = DataLoader(TensorDataset(feats[anchors], feats[pos], feats[neg]), batch_size=64, shuffle=True)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(EmbeddingNet(), train)
    return history.losses


def lit_manual_tbptt_lstm(path: str, epochs: int = 10, seed: int = 0, bug: str | None = None) -> list[float]:
    """Truncated back-propagation through time as Lightning 2 documents it (manual optimization):
    each batch of 160-step sequences split into chunks of 20, the LSTM's hidden state carried
    across chunks and detached, `self.manual_backward` and `opt.step()` per chunk,
    `self.clip_gradients(opt, gradient_clip_val=1.0)`, Adam(3e-3); next-value prediction of noisy
    sums of sines, MSE."""
    import lightning.pytorch as pl

    g = _seed(seed)
    n, length = 512, 161
    t = torch.arange(length).float()
    f1 = 0.05 + 0.1 * torch.rand(n, 1, generator=g)
    f2 = 0.2 + 0.2 * torch.rand(n, 1, generator=g)
    ph = 6.28 * torch.rand(n, 2, generator=g)
    series = (
        torch.sin(f1 * t + ph[:, :1])
        + 0.5 * torch.sin(f2 * t + ph[:, 1:])
        + 0.05 * torch.randn(n, length, generator=g)
    )

    class TBPTT(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.lstm = nn.LSTM(1, 64, batch_first=True)
            self.head = nn.Linear(64, 1)
            self.last_loss = torch.tensor(0.0)

        def training_step(self, batch: Any, batch_idx: int) -> None:
            (seqs,) = batch
            opt = self.optimizers()
            hiddens = None
            total = 0.0
            for split in range(0, length - 1, 20):
                x = seqs[:, split : split + 20, None]
                y = seqs[:, split + 1 : split + 21, None]
                out, hiddens = self.lstm(x, hiddens)
                loss = F.mse_loss(self.head(out), y)
                opt.zero_grad()
                self.manual_backward(loss)
                self.clip_gradients(opt, gradient_clip_val=1.0, gradient_clip_algorithm="norm")
                opt.step()
                hiddens = tuple(h.detach() for h in hiddens)
                total += float(loss) / 8
            self.log("train_mse", total)
            self.last_loss = torch.tensor(total)

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=3e-3)

    train = DataLoader(TensorDataset(series), batch_size=32, shuffle=True)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(TBPTT(), train)
    return history.losses


# ============================================================================= Keras 3


def _keras_losses() -> Any:
    """A callback collecting each batch's loss: Keras 3 logs the epoch's running mean at every
    batch, so batch k's own loss is k * mean_k - (k - 1) * mean_{k-1}."""
    import keras

    class BatchLosses(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.losses: list[float] = []
            self.prev = 0.0

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.prev = 0.0

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            mean = float(logs["loss"])
            self.losses.append((batch + 1) * mean - batch * self.prev)
            self.prev = mean

    return BatchLosses()


def keras_vae_custom_train_step(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras example "Variational AutoEncoder": a `Sampling` layer, encoder and decoder as
    functional models, a `keras.Model` subclass whose `train_step` computes the summed binary
    cross-entropy reconstruction plus the KL term under `tf.GradientTape` and tracks them with
    `keras.metrics.Mean` (reset each epoch through the `metrics` property), `compile(
    optimizer=keras.optimizers.Adam())`, batch 128 (dense layers on 12x12 images, latent 2)."""
    import keras
    import tensorflow as tf
    from keras import layers, ops

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images, _ = _images(g, 1536, size=12, channels=1, proto_seed=151)
    data = images.permute(0, 2, 3, 1).numpy()
    latent_dim = 2

    class Sampling(layers.Layer):
        def __init__(self, **kw: Any) -> None:
            super().__init__(**kw)
            self.seed_generator = keras.random.SeedGenerator(1337)

        def call(self, inputs: Any) -> Any:
            z_mean, z_log_var = inputs
            epsilon = keras.random.normal(shape=ops.shape(z_mean), seed=self.seed_generator)
            return z_mean + ops.exp(0.5 * z_log_var) * epsilon

    encoder_inputs = keras.Input(shape=(12, 12, 1))
    x = layers.Flatten()(encoder_inputs)
    x = layers.Dense(128, activation="relu")(x)
    x = layers.Dense(16, activation="relu")(x)
    z_mean = layers.Dense(latent_dim, name="z_mean")(x)
    z_log_var = layers.Dense(latent_dim, name="z_log_var")(x)
    if bug == "log_zero_nan":  # the layer gives the std, kept >= 0 by a ReLU; the log of its square
        z_log_var = ops.log(ops.square(layers.ReLU()(z_log_var)))
    z = Sampling()([z_mean, z_log_var])
    encoder = keras.Model(encoder_inputs, [z_mean, z_log_var, z], name="encoder")
    latent_inputs = keras.Input(shape=(latent_dim,))
    x = layers.Dense(16, activation="relu")(latent_inputs)
    x = layers.Dense(128, activation="relu")(x)
    x = layers.Dense(144, activation="sigmoid")(x)
    decoder = keras.Model(latent_inputs, layers.Reshape((12, 12, 1))(x), name="decoder")

    class VAE(keras.Model):
        def __init__(self, encoder: Any, decoder: Any, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.encoder = encoder
            self.decoder = decoder
            self.total_loss_tracker = keras.metrics.Mean(name="total_loss")
            self.reconstruction_loss_tracker = keras.metrics.Mean(name="reconstruction_loss")
            self.kl_loss_tracker = keras.metrics.Mean(name="kl_loss")

        @property
        def metrics(self) -> list[Any]:
            return [self.total_loss_tracker, self.reconstruction_loss_tracker, self.kl_loss_tracker]

        def train_step(self, data: Any) -> dict[str, Any]:
            with tf.GradientTape() as tape:
                z_mean, z_log_var, z = self.encoder(data)
                reconstruction = self.decoder(z)
                reconstruction_loss = ops.mean(
                    ops.sum(keras.losses.binary_crossentropy(data, reconstruction), axis=(1, 2))
                )
                kl_loss = -0.5 * (1 + z_log_var - ops.square(z_mean) - ops.exp(z_log_var))
                kl_loss = ops.mean(ops.sum(kl_loss, axis=1))
                total_loss = reconstruction_loss + kl_loss
            grads = tape.gradient(total_loss, self.trainable_weights)
            self.optimizer.apply_gradients(zip(grads, self.trainable_weights, strict=True))
            self.total_loss_tracker.update_state(total_loss)
            self.reconstruction_loss_tracker.update_state(reconstruction_loss)
            self.kl_loss_tracker.update_state(kl_loss)
            return {
                "loss": self.total_loss_tracker.result(),
                "reconstruction_loss": self.reconstruction_loss_tracker.result(),
                "kl_loss": self.kl_loss_tracker.result(),
            }

    vae = VAE(encoder, decoder)
    vae.compile(optimizer=keras.optimizers.Adam())
    history = _keras_losses()
    vae.fit(data, epochs=16, batch_size=128, verbose=0, callbacks=[mldbg.keras.Hook(path), history])
    return history.losses


def keras_mixed_bfloat16_cnn(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras mixed-precision guide's recipe on a small convnet: `keras.mixed_precision.
    set_global_policy("mixed_bfloat16")` (restored to float32 afterwards), the softmax output
    layer kept in float32 (`dtype="float32"`), uint8 images scaled by `astype("float32") / 255`
    as the MNIST convnet example does, RMSprop, `sparse_categorical_crossentropy`, batch 64,
    `validation_split=0.1`."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images, labels = _images(g, 2048, size=16, proto_seed=161)
    x_uint8 = (images.permute(0, 2, 3, 1) * 255).round().to(torch.uint8).numpy()
    y = labels.numpy()
    x_train = x_uint8 if bug == "inputs_x255" else x_uint8.astype("float32") / 255
    if bug == "inputs_x255":
        x_train = x_train.astype("float32")  # cast, the / 255 forgotten
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        inputs = keras.Input(shape=(16, 16, 3))
        x = layers.Conv2D(32, 3, activation="relu")(inputs)
        x = layers.MaxPooling2D(2)(x)
        x = layers.Conv2D(64, 3, activation="relu")(x)
        x = layers.GlobalAveragePooling2D()(x)
        x = layers.Dense(64, activation="relu")(x)
        x = layers.Dense(10)(x)
        outputs = layers.Activation("softmax", dtype="float32")(x)
        model = keras.Model(inputs, outputs)
        model.compile(
            loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.RMSprop(), metrics=["accuracy"]
        )
        history = _keras_losses()
        model.fit(
            x_train, y, batch_size=64, epochs=8, validation_split=0.1, verbose=0,
            callbacks=[mldbg.keras.Hook(path), history],
        )  # fmt: skip
    finally:
        keras.mixed_precision.set_global_policy("float32")
    return history.losses


def keras_lstm_addition_repeatvector(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras example "Sequence to sequence learning for performing number addition": questions
    like "535+61" padded to 7 characters and reversed, one-hot; `LSTM(128)` encoder,
    `RepeatVector(4)`, `LSTM(128, return_sequences=True)` decoder, a softmax `Dense` per step,
    `categorical_crossentropy`, Adam, batch 32 (3000 questions, 2 epochs)."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    digits, chars = 3, "0123456789+ "
    maxlen = digits + 1 + digits
    index = {c: i for i, c in enumerate(chars)}
    questions, expected, seen = [], [], set()
    while len(questions) < 3000:
        a = int("".join(rng.choice(list("0123456789")) for _ in range(rng.integers(1, digits + 1))))
        b = int("".join(rng.choice(list("0123456789")) for _ in range(rng.integers(1, digits + 1))))
        key = tuple(sorted((a, b)))
        if key in seen:
            continue
        seen.add(key)
        q = f"{a}+{b}"
        questions.append((q + " " * (maxlen - len(q)))[::-1])
        ans = str(a + b)
        expected.append(ans + " " * (digits + 1 - len(ans)))
    x = np.zeros((len(questions), maxlen, len(chars)), dtype=bool)
    y = np.zeros((len(questions), digits + 1, len(chars)), dtype=bool)
    for i, sentence in enumerate(questions):
        for t, ch in enumerate(sentence):
            x[i, t, index[ch]] = 1
    for i, sentence in enumerate(expected):
        for t, ch in enumerate(sentence):
            y[i, t, index[ch]] = 1
    model = keras.Sequential()
    model.add(layers.Input((maxlen, len(chars))))
    model.add(layers.LSTM(128))
    model.add(layers.RepeatVector(digits + 1))
    model.add(layers.LSTM(128, return_sequences=True))
    model.add(layers.Dense(len(chars), activation="softmax"))
    model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
    history = _keras_losses()
    model.fit(
        x[:2700], y[:2700], batch_size=32, epochs=2, validation_data=(x[2700:], y[2700:]), verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_bigru_tagger(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """A functional sequence tagger: `Embedding(mask_zero=True)`, `Bidirectional(GRU(32,
    return_sequences=True))`, a per-token softmax `Dense`, the padding also kept out of the loss
    by a per-token `sample_weight`, `sparse_categorical_crossentropy`, Adam(1e-3), batch 32. The
    tags: a noisy hidden-Markov chain over 5 tags emitting words."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    tags, vocab, n, length = 5, 200, 1600, 24
    trans = rng.dirichlet(np.full(tags, 0.3), size=tags)
    emit_owner = rng.integers(0, tags, vocab)
    emit_owner[0] = -1
    x = np.zeros((n, length), dtype="int32")
    y = np.zeros((n, length), dtype="int32")
    for i in range(n):
        k = int(rng.integers(8, length + 1))
        t = int(rng.integers(0, tags))
        for j in range(k):
            own = np.flatnonzero(emit_owner == t)
            word = int(rng.choice(own)) if rng.random() < 0.8 else int(rng.integers(1, vocab))
            x[i, j], y[i, j] = word, t
            t = int(rng.choice(tags, p=trans[t]))

    weights = (x != 0).astype("float32")  # padding out of the loss
    inputs = keras.Input(shape=(length,), dtype="int32")
    h = layers.Embedding(vocab, 32, mask_zero=True)(inputs)
    h = layers.Bidirectional(layers.GRU(32, return_sequences=True))(h)
    model = keras.Model(inputs, layers.Dense(tags, activation="softmax")(h))
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    history = _keras_losses()
    model.fit(
        x[:1408], y[:1408], sample_weight=weights[:1408], batch_size=32, epochs=4, verbose=0,
        validation_data=(x[1408:], y[1408:], weights[1408:]),
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_wide_deep_piecewise_decay(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """A wide-and-deep click model with the functional API: a wide part (hashed crosses of two
    categorical fields, one-hot, a linear layer) and a deep part (embeddings of four categorical
    fields plus numeric features through Dense(64)-Dense(32)), summed logits, a sigmoid,
    `binary_crossentropy` and AUC, Adam on a `PiecewiseConstantDecay(boundaries=[100, 200],
    values=[1e-2, 5e-3, 1e-3])`, batch 128."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    n, card = 12000, 30
    cats = rng.integers(0, card, (n, 4))
    num = rng.normal(size=(n, 3)).astype("float32")
    eff = rng.normal(size=(4, card)) * 0.6
    cross_eff = rng.normal(size=(card, card)) * 0.8
    logit = (
        -1.0
        + eff[np.arange(4), cats].sum(1)
        + cross_eff[cats[:, 0], cats[:, 1]]
        + 0.5 * num[:, 0]
        - 0.4 * num[:, 1] * num[:, 2]
    )
    clicks = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype("float32")
    cross = (cats[:, 0] * card + cats[:, 1]) % 500
    wide_in = keras.Input(shape=(1,), dtype="int32", name="cross")
    cat_in = keras.Input(shape=(4,), dtype="int32", name="cats")
    num_in = keras.Input(shape=(3,), name="num")
    wide = layers.Flatten()(layers.Embedding(500, 1)(wide_in))  # a one-hot linear layer
    emb = layers.Flatten()(layers.Embedding(card, 8)(cat_in))
    deep = layers.Concatenate()([emb, num_in])
    deep = layers.Dense(64, activation="relu")(deep)
    deep = layers.Dense(32, activation="relu")(deep)
    logits = layers.Add()([wide, layers.Dense(1)(deep)])
    model = keras.Model([wide_in, cat_in, num_in], layers.Activation("sigmoid")(logits))
    schedule = keras.optimizers.schedules.PiecewiseConstantDecay(
        boundaries=[100, 200], values=[1e-2, 5e-3, 1e-3]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(schedule), loss="binary_crossentropy", metrics=[keras.metrics.AUC()]
    )
    inputs = {"cross": cross[:, None], "cats": cats, "num": num}
    train = {k: v[:10000] for k, v in inputs.items()}
    val = {k: v[10000:] for k, v in inputs.items()}
    history = _keras_losses()
    model.fit(
        train, clicks[:10000], batch_size=128, epochs=3, validation_data=(val, clicks[10000:]), verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


# ============================================================================= JAX / Flax / Optax


def flax_nnx_transformer_lm(
    path: str, steps: int = 150, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A decoder-only Transformer LM in Flax NNX (the Flax "miniGPT" tutorial's shape): token and
    position `nnx.Embed`, pre-LN blocks of `nnx.MultiHeadAttention` with `nnx.make_causal_mask`
    and a GELU MLP with dropout, the output tied to the token embedding (`embed.attend`),
    `optax.chain(clip_by_global_norm(1.0), adamw(warmup_cosine_decay_schedule(0, 1e-3, 30,
    steps), weight_decay=0.1))`, `nnx.Optimizer`, an `nnx.jit` step; `hook.record` outside it."""
    import jax.numpy as jnp
    import optax
    from flax import nnx

    import mldbg.jax

    g = _seed(seed)
    vocab, seq, dim = 64, 32, 64
    stream = _markov_tokens(g, 60000, vocab, order_seed=37).numpy()

    class Block(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.ln1 = nnx.LayerNorm(dim, rngs=rngs)
            self.attn = nnx.MultiHeadAttention(num_heads=4, in_features=dim, decode=False, rngs=rngs)
            self.ln2 = nnx.LayerNorm(dim, rngs=rngs)
            self.fc1 = nnx.Linear(dim, 4 * dim, rngs=rngs)
            self.fc2 = nnx.Linear(4 * dim, dim, rngs=rngs)
            self.drop = nnx.Dropout(0.1, rngs=rngs)

        def __call__(self, x: Any, mask: Any) -> Any:
            x = x + self.drop(self.attn(self.ln1(x), mask=mask))
            return x + self.drop(self.fc2(nnx.gelu(self.fc1(self.ln2(x)))))

    class MiniGPT(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.embed = nnx.Embed(vocab, dim, rngs=rngs)
            self.pos = nnx.Embed(seq, dim, rngs=rngs)
            self.blocks = nnx.List([Block(rngs) for _ in range(2)])
            self.ln_f = nnx.LayerNorm(dim, rngs=rngs)

        def __call__(self, tokens: Any) -> Any:
            x = self.embed(tokens) + self.pos(jnp.arange(tokens.shape[1]))[None]
            mask = nnx.make_causal_mask(tokens)
            for block in self.blocks:
                x = block(x, mask)
            return self.embed.attend(self.ln_f(x))

    model = MiniGPT(nnx.Rngs(params=seed, dropout=seed + 1))
    schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-3, 30, steps)
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=0.1))
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)

    def loss_fn(model: Any, inputs: Any, targets: Any) -> Any:
        logits = model(inputs)
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    @nnx.jit
    def train_step(model: Any, optimizer: Any, inputs: Any, targets: Any) -> Any:
        loss, grads = nnx.value_and_grad(loss_fn)(model, inputs, targets)
        optimizer.update(model, grads)
        return loss, grads

    hook = mldbg.jax.Hook(path)
    rng = np.random.default_rng(seed)
    losses = []
    for step in range(steps):
        starts = rng.integers(0, len(stream) - seq - 1, 32)
        batch = np.stack([stream[s : s + seq + 1] for s in starts])
        params = nnx.state(model, nnx.Param)
        loss, grads = train_step(model, optimizer, batch[:, :-1], batch[:, 1:])
        hook.record(step, params=params, grads=grads, loss=loss)
        losses.append(float(loss))
    hook.close()
    return losses


def flax_linen_dropout_mlp(path: str, steps: int = 200, seed: int = 0, bug: str | None = None) -> list[float]:
    """A Flax Linen MLP classifier with `nn.Dropout(0.2, deterministic=not train)` fed a
    `rngs={"dropout": key}` folded with the step, `optax.adamw` on
    `optax.exponential_decay(1e-3, transition_steps=100, decay_rate=0.7)`, a jitted step,
    standardized tabular features, 6 classes, batch 128; evaluation with `train=False`."""
    import flax.linen as fnn
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    g = _seed(seed)
    n, d, classes = 8000, 20, 6
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, classes, generator=torch.Generator().manual_seed(41))
    logits = x @ w * 0.7 + torch.sin(x[:, :classes] * 2) * 1.5
    y = torch.distributions.Categorical(logits=logits).sample().numpy()
    x = x.numpy()

    class MLP(fnn.Module):
        @fnn.compact
        def __call__(self, x: Any, train: bool) -> Any:
            if bug == "deep_sigmoid":  # "smoother" activations, and deeper
                for _ in range(8):
                    x = fnn.sigmoid(fnn.Dense(128)(x))
                return fnn.Dense(classes)(x)
            for _ in range(2):
                x = fnn.relu(fnn.Dense(128)(x))
                x = fnn.Dropout(0.2, deterministic=not train)(x)
            return fnn.Dense(classes)(x)

    model = MLP()
    key = jax.random.PRNGKey(seed)
    params = model.init(key, jnp.ones((1, d)), train=False)["params"]
    tx = optax.adamw(optax.exponential_decay(1e-3, transition_steps=100, decay_rate=0.7))
    opt_state = tx.init(params)
    dropout_key = jax.random.PRNGKey(seed + 1)

    @jax.jit
    def train_step(params: Any, opt_state: Any, xb: Any, yb: Any, step: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            out = model.apply(
                {"params": p}, xb, train=True, rngs={"dropout": jax.random.fold_in(dropout_key, step)}
            )
            return optax.softmax_cross_entropy_with_integer_labels(out, yb).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    @jax.jit
    def eval_loss(params: Any, xb: Any, yb: Any) -> Any:
        out = model.apply({"params": params}, xb, train=False)
        return optax.softmax_cross_entropy_with_integer_labels(out, yb).mean()

    hook = mldbg.jax.Hook(path)
    rng = np.random.default_rng(seed)
    losses = []
    for step in range(steps):
        idx = rng.choice(7000, 128, replace=False)
        old = params
        params, opt_state, loss, grads = train_step(params, opt_state, x[idx], y[idx], step)
        hook.record(step, params=old, grads=grads, loss=loss)
        losses.append(float(loss))
        if step % 100 == 99:
            hook.record(step // 100, mode="eval", loss=eval_loss(params, x[7000:], y[7000:]))
    hook.close()
    return losses


def jax_stax_mnist_classifier_momentum(
    path: str, steps: int = 250, seed: int = 0, bug: str | None = None
) -> list[float]:
    """JAX's examples/mnist_classifier.py: `stax.serial(Dense(1024), Relu, Dense(1024), Relu,
    Dense(10), LogSoftmax)`, `optimizers.momentum(step_size=0.001, mass=0.9)`, the loss
    `-jnp.mean(jnp.sum(preds * targets, axis=1))` on one-hot targets, batch 128, a jitted
    `update(i, opt_state, batch)`; flattened 16x16 images in [0, 1]."""
    import jax
    import jax.numpy as jnp
    from jax import random
    from jax.example_libraries import optimizers, stax
    from jax.example_libraries.stax import Dense, LogSoftmax, Relu

    import mldbg.jax

    g = _seed(seed)
    images, labels = _images(g, 4096, size=16, channels=1, proto_seed=171)
    train_images = images.flatten(1).numpy()
    train_labels = np.eye(10, dtype=np.float32)[labels.numpy()]
    init_random_params, predict = stax.serial(Dense(1024), Relu, Dense(1024), Relu, Dense(10), LogSoftmax)

    def loss(params: Any, batch: Any) -> Any:
        inputs, targets = batch
        preds = predict(params, inputs)
        return -jnp.mean(jnp.sum(preds * targets, axis=1))

    opt_init, opt_update, get_params = optimizers.momentum(0.001, mass=0.9)

    @jax.jit
    def update(i: Any, opt_state: Any, batch: Any) -> Any:
        params = get_params(opt_state)
        value, grads = jax.value_and_grad(loss)(params, batch)
        return opt_update(i, grads, opt_state), value, grads

    _, init_params = init_random_params(random.PRNGKey(seed), (-1, 256))
    opt_state = opt_init(init_params)
    hook = mldbg.jax.Hook(path)
    rng = np.random.default_rng(seed)
    losses = []
    num_batches = len(train_images) // 128
    for i in range(steps):
        if i % num_batches == 0:
            perm = rng.permutation(len(train_images))
        idx = perm[(i % num_batches) * 128 : (i % num_batches + 1) * 128]
        params = get_params(opt_state)
        opt_state, value, grads = update(i, opt_state, (train_images[idx], train_labels[idx]))
        hook.record(i, params=params, grads=grads, loss=value)
        losses.append(float(value))
    hook.close()
    return losses


# ============================================================================= XGBoost


def xgb_aft_survival(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """XGBoost's demo/aft_survival/aft_survival_demo.py: `objective="survival:aft"`,
    `aft_loss_distribution="normal"`, `aft_loss_distribution_scale=1.20`, tree_method hist,
    learning_rate 0.05, max_depth 2, right-censored labels as `label_lower_bound` /
    `label_upper_bound = inf`, `evals` on train and valid with early stopping; 300 rounds;
    losses: the training aft-nloglik per round."""
    import xgboost as xgb

    import mldbg.xgboost

    g = _seed(seed)
    n, d = 4000, 8
    x = torch.randn(n, d, generator=g)
    log_t = 2.0 + 0.6 * x[:, 0] - 0.4 * x[:, 1] + 0.3 * x[:, 2] * x[:, 3] + 0.5 * torch.randn(n, generator=g)
    t = log_t.exp().numpy()
    censor_at = (np.random.default_rng(seed).exponential(12.0, n)).astype(np.float64)
    observed = t <= censor_at
    lower = np.where(observed, t, censor_at)
    upper = np.where(observed, t, np.inf)
    x = x.numpy()
    dtrain = xgb.DMatrix(x[:3200])
    dtrain.set_float_info("label_lower_bound", lower[:3200])
    dtrain.set_float_info("label_upper_bound", upper[:3200])
    dvalid = xgb.DMatrix(x[3200:])
    dvalid.set_float_info("label_lower_bound", lower[3200:])
    dvalid.set_float_info("label_upper_bound", upper[3200:])
    params = {
        "verbosity": 0, "objective": "survival:aft", "eval_metric": "aft-nloglik", "tree_method": "hist",
        "learning_rate": 0.05, "aft_loss_distribution": "normal", "aft_loss_distribution_scale": 1.20,
        "max_depth": 2, "lambda": 0.01, "alpha": 0.02, "nthread": 1, "seed": seed,
    }  # fmt: skip
    result: dict[str, Any] = {}
    xgb.train(
        params, dtrain, num_boost_round=300, evals=[(dtrain, "train"), (dvalid, "valid")],
        early_stopping_rounds=50, evals_result=result, verbose_eval=False, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    return [float(v) for v in result["train"]["aft-nloglik"]]


def xgb_multi_quantile_regression(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """XGBoost's demo/guide-python/quantile_regression.py: `objective="reg:quantileerror"` with
    `quantile_alpha=[0.05, 0.5, 0.95]` (one model, three outputs), tree_method hist,
    learning_rate 0.04, max_depth 5, a `QuantileDMatrix` for train and one built with
    `ref=` for the test set, heteroscedastic noise; 150 rounds with early stopping; losses: the
    training quantile loss per round."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    n = 4000
    x = rng.uniform(0, 10, size=(n, 1))
    y = x[:, 0] * np.sin(x[:, 0]) + rng.normal(0, 0.3 + 0.3 * x[:, 0], n)
    x_train, x_test, y_train, y_test = x[:3200], x[3200:], y[:3200], y[3200:]
    xy = xgb.QuantileDMatrix(x_train, y_train)
    xy_test = xgb.QuantileDMatrix(x_test, y_test, ref=xy)
    evals_result: dict[str, Any] = {}
    xgb.train(
        {"objective": "reg:quantileerror", "tree_method": "hist", "quantile_alpha": np.array([0.05, 0.5, 0.95]),
         "learning_rate": 0.04, "max_depth": 5, "nthread": 1, "seed": seed},
        xy, num_boost_round=150, early_stopping_rounds=10, evals=[(xy, "Train"), (xy_test, "Test")],
        evals_result=evals_result, verbose_eval=False, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    return [float(v) for v in evals_result["Train"]["quantile"]]


# ============================================================================= the set

PIPELINES = []

_wavenet = healthy(
    "makemore_wavenet_flatten_consecutive_bn", "makemore WaveNet (hierarchical MLP)", makemore_wavenet
)
_fairseq = healthy(
    "fairseq_transformer_label_smoothed_inverse_sqrt",
    "fairseq-shaped translation Transformer",
    fairseq_translation_label_smoothed,
)
_simple_vit = healthy("lucidrains_simple_vit_sincos_steplr", "lucidrains SimpleViT", lucidrains_simple_vit)
_pos_tagger = healthy(
    "pytorch_tutorial_lstm_pos_tagger_batch1",
    "PyTorch tutorial LSTM POS tagger",
    pytorch_tutorial_lstm_pos_tagger,
)
PIPELINES += [
    healthy("makemore_bigram_onehot_lr50_full_batch", "makemore neural bigram", makemore_bigram_nn),
    healthy("makemore_mlp_bengio_block3_manual_sgd", "makemore MLP (Bengio 2003)", makemore_mlp_bengio),
    _wavenet,
    _fairseq,
    healthy("cleanrl_ppo_vectorized_cartpole_gae", "CleanRL PPO", cleanrl_ppo_cartpole),
    _simple_vit,
    healthy(
        "accelerate_cv_example_frozen_backbone_onecycle",
        "accelerate cv_example-shaped fine-tuning",
        accelerate_cv_example_frozen_backbone,
    ),
    _pos_tagger,
    buggy(_fairseq, "lr_x100"),
    buggy(_pos_tagger, "no_zero_grad"),
    buggy(_simple_vit, "frozen_by_mistake"),
    buggy(_wavenet, "train_in_eval_mode"),
]

if installed("transformers", "accelerate"):
    _hf_convnext = healthy(
        "hf_trainer_convnext_image_classification_drop_path",
        "HF Trainer ConvNeXt image classification",
        hf_convnext_image_classification,
    )
    PIPELINES += [
        healthy(
            "hf_seq2seq_trainer_marian_translation_label_smoothing",
            "HF Seq2SeqTrainer Marian translation",
            hf_marian_seq2seq_trainer,
        ),
        healthy("hf_trainer_wav2vec2_ctc_tone_phones", "HF Trainer Wav2Vec2 CTC", hf_wav2vec2_ctc),
        healthy(
            "hf_trainer_deberta_v1_regression_stsb_like",
            "HF Trainer DeBERTa regression",
            hf_deberta_regression,
        ),
        healthy(
            "hf_trainer_subclass_compute_loss_class_weights_accum4",
            "HF Trainer custom compute_loss",
            hf_bert_weighted_compute_loss,
        ),
        healthy(
            "hf_trainer_mistral_gqa_sliding_window_clm", "HF Trainer Mistral causal LM", hf_mistral_causal_lm
        ),
        _hf_convnext,
        healthy("hf_trainer_bert_extractive_qa_spans", "HF Trainer extractive QA", hf_bert_extractive_qa),
        healthy(
            "hf_trainer_clip_contrastive_return_loss", "HF Trainer CLIP contrastive", hf_clip_contrastive
        ),
        buggy(_hf_convnext, "shuffled_labels"),
    ]

if installed("lightning"):
    _lit_textcnn = healthy(
        "lightning_gradient_accumulation_scheduler_textcnn",
        "Lightning GradientAccumulationScheduler",
        lit_accumulation_scheduler_textcnn,
    )
    _lit_triplet = healthy(
        "lightning_triplet_margin_onecycle_sgd",
        "Lightning metric learning (triplet)",
        lit_triplet_embedding_onecycle,
    )
    PIPELINES += [
        healthy(
            "lightning_adversarial_autoencoder_three_optimizers",
            "Lightning adversarial autoencoder",
            lit_adversarial_autoencoder,
        ),
        _lit_textcnn,
        healthy(
            "lightning_max_steps_val_check_interval_gru_lm",
            "Lightning step-based GRU LM",
            lit_val_every_50_steps_gru_lm,
        ),
        healthy(
            "lightning_bf16_mixed_tabular_resnet",
            "Lightning bf16-mixed tabular ResNet",
            lit_bf16_mixed_tabular_resnet,
        ),
        _lit_triplet,
        healthy("lightning_manual_tbptt_lstm_sines", "Lightning truncated BPTT", lit_manual_tbptt_lstm),
        buggy(_lit_textcnn, "softmax_before_ce"),
        buggy(_lit_triplet, "dead_relu_init"),
    ]

if installed("keras", "tensorflow"):
    _keras_vae = healthy(
        "keras_vae_custom_train_step_gradient_tape",
        "Keras VAE custom train_step",
        keras_vae_custom_train_step,
    )
    _keras_bf16 = healthy(
        "keras_mixed_bfloat16_policy_convnet", "Keras mixed precision", keras_mixed_bfloat16_cnn
    )
    PIPELINES += [
        _keras_vae,
        _keras_bf16,
        healthy(
            "keras_lstm_addition_repeatvector", "Keras seq2seq addition", keras_lstm_addition_repeatvector
        ),
        healthy(
            "keras_functional_bigru_tagger_mask_zero",
            "Keras BiGRU sequence tagger",
            keras_bigru_tagger,
        ),
        healthy(
            "keras_wide_deep_piecewise_constant_decay", "Keras wide & deep", keras_wide_deep_piecewise_decay
        ),
        buggy(_keras_vae, "log_zero_nan"),
        buggy(_keras_bf16, "inputs_x255"),
    ]

if installed("jax", "optax", "flax"):
    _flax_dropout = healthy(
        "flax_linen_dropout_rng_mlp_exponential_decay", "Flax Linen dropout MLP", flax_linen_dropout_mlp
    )
    PIPELINES += [
        healthy(
            "flax_nnx_minigpt_causal_mask_adamw_clip", "Flax NNX Transformer LM", flax_nnx_transformer_lm
        ),
        _flax_dropout,
        healthy(
            "jax_example_libraries_stax_mnist_momentum",
            "jax.example_libraries stax MLP",
            jax_stax_mnist_classifier_momentum,
        ),
        buggy(_flax_dropout, "deep_sigmoid"),
    ]

if installed("xgboost"):
    PIPELINES += [
        healthy("xgboost_aft_survival_right_censored", "XGBoost AFT survival", xgb_aft_survival),
        healthy(
            "xgboost_multi_quantile_regression_quantileerror",
            "XGBoost multi-quantile regression",
            xgb_multi_quantile_regression,
        ),
    ]
