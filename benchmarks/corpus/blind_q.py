"""The tenth blind held-out set (issue 26), part Q: small trainings of kinds the corpus did not
have yet, plain PyTorch loops with the README's two lines (`register_loss` where the script has
a loss module) and trainings through tools with their one callback or hook. Data generated
in-process, fixed seeds, one CPU thread.

Plain PyTorch: R-Drop (two dropout passes, cross-entropy plus the symmetric KL between them) on
a bag-of-words classifier, snapshot ensembles (cyclic cosine restarts on SGD, a snapshot saved at
the end of each cycle, the ensemble evaluated on their averaged softmaxes), double
backpropagation (the input-gradient norm penalty through `create_graph`) on a small RGB CNN,
pseudo-labeling (Lee 2013: confident predictions on unlabeled points as targets, a ramped
weight), sparse evolutionary training (SET: a fixed-density mask, the smallest-magnitude weights
pruned and as many regrown at random after each epoch), a Linformer classifier (keys and values
projected to a fixed length) under bf16 autocast on CPU, learning from annotators' vote
histograms (soft labels, `F.kl_div` against the vote distribution, a Brier pass), a GRU
encoder-decoder forecaster with scheduled sampling (inverse-sigmoid decay of the teacher-forcing
probability, an evaluation pass per epoch), Mult-VAE collaborative filtering (multinomial
likelihood, KL annealed up to beta 0.2, input dropout, a Recall@20 pass), and noise-contrastive
estimation of an unnormalized 2-D density (a learned log-normalizer, logistic loss against
Gaussian noise).

Through tools: Keras 3 (`mldbg.keras.Hook`): an MLP on one-hot targets with
`CategoricalCrossentropy(label_smoothing=0.1)`, L2 kernel regularizers and SGD momentum on
`InverseTimeDecay`; a count model on `loss="poisson"` with Adagrad. Lightning
(`mldbg.lightning.DebuggerCallback`): heteroscedastic regression on `nn.GaussianNLLLoss` with
`ExponentialLR` and `check_val_every_n_epoch=2`. Hugging Face `Trainer`
(`mldbg.transformers.DebuggerCallback`, a tiny random config): a Funnel Transformer sequence
classifier on `cosine_with_min_lr` with `max_grad_norm=0.5`. JAX (`mldbg.jax.Hook`): a Flax
Linen RankNet (pairwise logistic loss on score differences) on `optax.rmsprop` with
`cosine_onecycle_schedule`. XGBoost (`mldbg.xgboost.Hook`): `reg:squaredlogerror` on skewed
prices with `min_child_weight` and `colsample_bytree`.

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: the Keras label-smoothing MLP's `InverseTimeDecay` starting at 1.0 typed for 0.01 (lr_x100),
R-Drop without `optimizer.zero_grad()` (no_zero_grad), the snapshot ensemble's labels read from a
shuffled copy of the table (shuffled_labels), the double-backprop CNN fed image bytes as floats
without the division by 255 (inputs_x255), the pseudo-labeling model ending in `nn.Softmax` "to
threshold the confidence" while `CrossEntropyLoss` still expects logits (softmax_before_ce), the
sparse MLP's biases initialised to -2 (dead_relu_init), the Lightning Gaussian-NLL regressor's
trunk as eight sigmoid layers (deep_sigmoid), the Linformer's token embedding frozen by a line
left from a pre-trained-embedding variant after the optimizer was built (frozen_by_mistake), the
vote-histogram KL written by hand as `target * (target.log() - log_q)` with classes nobody voted
for (log_zero_nan), the scheduled-sampling forecaster never put back in training mode after its
first evaluation pass (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND9`.
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

from . import BLIND9, buggy, healthy, installed

SPLIT = BLIND9

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 29)


def _images(
    g: torch.Generator, n: int, size: int = 16, classes: int = 6, proto_seed: int = 313
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 3, size, size) uint8 images: each class a smooth blob of its own tint, shifted a few
    pixels, on a noisy background; and labels."""
    pg = torch.Generator().manual_seed(proto_seed)
    shapes = F.avg_pool2d(torch.rand(classes, 1, size, size, generator=pg), 5, 1, 2)
    cut = shapes.flatten(1).quantile(0.65, dim=1).view(classes, 1, 1, 1)
    shapes = ((shapes - cut) * 25).sigmoid()
    tint = 0.3 + 0.7 * torch.rand(classes, 3, 1, 1, generator=pg)
    y = torch.randint(0, classes, (n,), generator=g)
    shift = torch.randint(-2, 3, (n, 2), generator=g)
    obj = torch.stack(
        [torch.roll(shapes[c], (int(a), int(b)), (1, 2)) for c, (a, b) in zip(y, shift, strict=True)]
    )
    background = 0.4 * torch.rand(n, 3, 1, 1, generator=g)
    x = background * (1 - obj) + obj * tint[y] + 0.35 * torch.randn(n, 3, size, size, generator=g)
    return (x.clamp(0, 1) * 255).round().to(torch.uint8), y


def _topic_docs(
    g: torch.Generator, n: int, vocab: int = 400, topics: int = 5, length: int = 40, proto_seed: int = 5
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, vocab) word counts of documents drawn from `topics` sparse topic distributions mixed
    with a shared background; and the topic."""
    pg = torch.Generator().manual_seed(proto_seed)
    topic_words = torch.softmax(3.0 * torch.randn(topics, vocab, generator=pg), 1)
    background = torch.softmax(torch.randn(vocab, generator=pg), 0)
    y = torch.randint(0, topics, (n,), generator=g)
    probs = 0.12 * topic_words[y] + 0.88 * background
    words = torch.multinomial(probs, length, replacement=True, generator=g)
    counts = torch.zeros(n, vocab).scatter_add_(1, words, torch.ones(n, length))
    return counts, y


# ============================================================================= plain PyTorch


def rdrop_bow_classifier(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """Liang et al. 2021 (R-Drop): each batch goes through the dropout network twice (the batch
    concatenated with itself), the loss is the mean cross-entropy of the two passes plus alpha
    times the symmetric KL between their predictive distributions; a log1p bag-of-words MLP on
    5 topics, AdamW 1e-3, batch 64."""
    g = _seed(seed)
    counts, y = _topic_docs(g, 5000)
    x = torch.log1p(counts)
    x_tr, y_tr, x_te, y_te = x[:4000], y[:4000], x[4000:], y[4000:]
    model = nn.Sequential(
        nn.Linear(x.shape[1], 256), nn.ReLU(), nn.Dropout(0.3),
        nn.Linear(256, 128), nn.ReLU(), nn.Dropout(0.3),
        nn.Linear(128, 5),
    )  # fmt: skip
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    alpha = 1.0
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        model.train()
        idx = torch.randint(0, 4000, (64,), generator=g)
        xb, yb = x_tr[idx], y_tr[idx]
        logits = model(torch.cat([xb, xb]))
        l1, l2 = logits.chunk(2)
        ce = 0.5 * (criterion(l1, yb) + criterion(l2, yb))
        lp1, lp2 = F.log_softmax(l1, -1), F.log_softmax(l2, -1)
        kl = 0.5 * (
            F.kl_div(lp1, lp2, log_target=True, reduction="batchmean")
            + F.kl_div(lp2, lp1, log_target=True, reduction="batchmean")
        )
        loss = ce + alpha * kl
        if bug != "no_zero_grad":
            opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            with torch.no_grad():
                acc = (model(x_te).argmax(1) == y_te).float().mean().item()
            print(f"step {step + 1}: loss {loss.item():.4f} test acc {acc:.3f}")
    hook.close()
    return losses


class _SmallCNN(nn.Module):
    def __init__(self, classes: int = 6) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        )  # fmt: skip
        self.fc = nn.Linear(32 * 16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x).flatten(1))


def snapshot_ensemble_cnn(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """Huang et al. 2017 (snapshot ensembles): SGD momentum whose learning rate follows a
    per-iteration cosine from 0.1 to 0 restarted M=4 times; the weights at the end of each cycle
    are kept, and the ensemble of snapshots is evaluated on its averaged softmax."""
    g = _seed(seed)
    images, labels = _images(g, 3500)
    x = (images.float() / 255 - 0.5) / 0.25
    y_tr = labels[:3000]
    if bug == "shuffled_labels":  # the label column read from a shuffled copy of the table
        y_tr = y_tr[torch.randperm(3000, generator=g)]
    train = DataLoader(TensorDataset(x[:3000], y_tr), batch_size=64, shuffle=True, generator=g)
    x_te, y_te = x[3000:], labels[3000:]
    model = _SmallCNN()
    criterion = nn.CrossEntropyLoss()
    lr0, cycles = 0.1, 4
    opt = torch.optim.SGD(model.parameters(), lr=lr0, momentum=0.9, weight_decay=5e-4)
    total = epochs * len(train)
    per_cycle = total // cycles
    snapshots: list[dict[str, torch.Tensor]] = []
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    it = 0
    for epoch in range(epochs):
        model.train()
        for xb, yb in train:
            lr = lr0 / 2 * (math.cos(math.pi * (it % per_cycle) / per_cycle) + 1)
            for group in opt.param_groups:
                group["lr"] = lr
            loss = criterion(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            it += 1
            if it % per_cycle == 0:
                snapshots.append({k: v.clone() for k, v in model.state_dict().items()})
        print(f"epoch {epoch}: loss {losses[-1]:.4f}")
    probe = _SmallCNN()
    probe.eval()
    probs = torch.zeros(len(x_te), 6)
    with torch.no_grad():
        for state in snapshots:
            probe.load_state_dict(state)
            probs += F.softmax(probe(x_te), 1)
    print(f"ensemble of {len(snapshots)}: acc {(probs.argmax(1) == y_te).float().mean().item():.3f}")
    hook.close()
    return losses


def double_backprop_cnn(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """Drucker & LeCun 1992 / Ross & Doshi-Velez 2018 (input-gradient regularization): the loss
    is the cross-entropy plus lambda times the squared norm of its gradient with respect to the
    input, taken with `create_graph=True` and backpropagated through; Adam 1e-3, batch 64."""
    g = _seed(seed)
    images, labels = _images(g, 3000, proto_seed=414)
    pixels = images.float() if bug == "inputs_x255" else images.float() / 255  # bug: the division forgotten
    x = (pixels - 0.5) / 0.25
    model = _SmallCNN()
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    lam = 0.1
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for step in range(steps):
        idx = torch.randint(0, 2500, (64,), generator=g)
        xb = x[idx].clone().requires_grad_(True)
        ce = criterion(model(xb), labels[idx])
        (grad_x,) = torch.autograd.grad(ce, xb, create_graph=True)
        loss = ce + lam * grad_x.pow(2).sum(dim=(1, 2, 3)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            with torch.no_grad():
                acc = (model(x[2500:]).argmax(1) == labels[2500:]).float().mean().item()
            model.train()
            print(f"step {step + 1}: loss {loss.item():.4f} val acc {acc:.3f}")
    hook.close()
    return losses


def _blobs(
    g: torch.Generator, n: int, d: int, k: int, proto_seed: int = 21, spread: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    pg = torch.Generator().manual_seed(proto_seed)
    centres = torch.randn(k, d, generator=pg) * 1.6
    y = torch.randint(0, k, (n,), generator=g)
    x = centres[y] + spread * torch.randn(n, d, generator=g)
    return x + 0.4 * torch.tanh(x.roll(1, 1) * x.roll(2, 1)), y


def pseudo_label_mlp(path: str, steps: int = 500, seed: int = 0, bug: str | None = None) -> list[float]:
    """Lee 2013 (pseudo-label): 100 labeled points, the rest unlabeled; the class the network
    predicts with confidence above 0.9 on an unlabeled batch is used as its target, weighted by
    alpha(t) ramped linearly from 0 (step 100) to 3 (step 400); Adam 1e-3."""
    g = _seed(seed)
    x, y = _blobs(g, 6000, 8, 4, spread=1.3)
    x_l, y_l = x[:100], y[:100]
    x_u = x[100:5000]
    x_te, y_te = x[5000:], y[5000:]
    layers: list[nn.Module] = [
        nn.Linear(8, 128),
        nn.ReLU(),
        nn.Linear(128, 128),
        nn.ReLU(),
        nn.Linear(128, 4),
    ]
    if bug == "softmax_before_ce":  # softmax in the model "to threshold the confidence"
        layers.append(nn.Softmax(dim=1))
    model = nn.Sequential(*layers)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for step in range(steps):
        il = torch.randint(0, 100, (32,), generator=g)
        xu = x_u[torch.randint(0, len(x_u), (128,), generator=g)]
        loss = criterion(model(x_l[il]), y_l[il])
        alpha = 3.0 * min(max((step - 100) / 300, 0.0), 1.0)
        if alpha > 0:
            out_u = model(xu)
            with torch.no_grad():
                probs = out_u if bug == "softmax_before_ce" else F.softmax(out_u, 1)
                conf, pseudo = probs.max(1)
                keep = conf > 0.9
            if keep.any():
                loss = loss + alpha * criterion(out_u[keep], pseudo[keep])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                acc = (model(x_te).argmax(1) == y_te).float().mean().item()
            print(f"step {step + 1}: loss {loss.item():.4f} test acc {acc:.3f}")
    hook.close()
    return losses


def sparse_evolutionary_mlp(
    path: str, epochs: int = 10, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Mocanu et al. 2018 (SET): every hidden Linear keeps an Erdos-Renyi mask of density
    eps (n_in + n_out) / (n_in n_out), applied to weights and gradients; after each epoch the
    fraction zeta = 0.3 of active weights of smallest magnitude is pruned and as many inactive
    connections regrown at random with small weights; SGD momentum 0.9, lr 0.05, batch 100."""
    g = _seed(seed)
    x, y = _blobs(g, 5000, 20, 5, proto_seed=23, spread=1.5)
    x = (x - x[:4000].mean(0)) / x[:4000].std(0)
    train = DataLoader(TensorDataset(x[:4000], y[:4000]), batch_size=100, shuffle=True, generator=g)
    model = nn.Sequential(nn.Linear(20, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 5))
    if bug == "dead_relu_init":  # every bias set to -2 "so that activations start sparse too"
        for m in model.modules():
            if isinstance(m, nn.Linear):
                nn.init.constant_(m.bias, -2.0)
    sparse = [model[0], model[2]]
    eps, zeta = 20, 0.3
    masks = []
    for layer in sparse:
        n_out, n_in = layer.weight.shape
        density = min(1.0, eps * (n_in + n_out) / (n_in * n_out))
        mask = (torch.rand(n_out, n_in, generator=g) < density).float()
        layer.weight.data *= mask
        masks.append(mask)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=2e-4)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train:
            loss = criterion(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            for layer, mask in zip(sparse, masks, strict=True):
                layer.weight.grad *= mask
            opt.step()
            with torch.no_grad():
                for layer, mask in zip(sparse, masks, strict=True):
                    layer.weight *= mask
            losses.append(loss.item())
        with torch.no_grad():  # prune the weakest, regrow as many at random
            for layer, mask in zip(sparse, masks, strict=True):
                active = mask.bool()
                n_prune = int(zeta * active.sum())
                magnitude = layer.weight.abs().masked_fill(~active, float("inf"))
                drop = magnitude.flatten().topk(n_prune, largest=False).indices
                mask.view(-1)[drop] = 0.0
                inactive = (mask.view(-1) == 0).nonzero().squeeze(1)
                grow = inactive[torch.randperm(len(inactive), generator=g)[:n_prune]]
                mask.view(-1)[grow] = 1.0
                layer.weight.view(-1)[drop] = 0.0
                layer.weight.view(-1)[grow] = 0.01 * torch.randn(len(grow), generator=g)
                state = opt.state.get(layer.weight)
                if state and "momentum_buffer" in state:
                    state["momentum_buffer"] *= mask
            model.eval()
            acc = (model(x[4000:]).argmax(1) == y[4000:]).float().mean().item()
        print(f"epoch {epoch}: loss {losses[-1]:.4f} acc {acc:.3f}")
    hook.close()
    return losses


def _class_markov(
    g: torch.Generator, y: torch.Tensor, length: int, vocab: int, proto_seed: int = 41
) -> torch.Tensor:
    """One token sequence per label: each class its own sparse first-order Markov chain."""
    classes = int(y.max()) + 1
    pg = torch.Generator().manual_seed(proto_seed)
    trans = torch.softmax(4.0 * torch.randn(classes, vocab, vocab, generator=pg), -1)
    tok = torch.randint(0, vocab, (len(y),), generator=g)
    out = [tok]
    for _ in range(length - 1):
        tok = torch.multinomial(trans[y, tok], 1, generator=g).squeeze(1)
        out.append(tok)
    return torch.stack(out, 1)


class _LinformerLayer(nn.Module):
    def __init__(self, d: int, heads: int, length: int, k: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj_e = nn.Parameter(torch.randn(k, length) / math.sqrt(k))  # keys: n -> k
        self.proj_f = nn.Parameter(torch.randn(k, length) / math.sqrt(k))  # values: n -> k
        self.out = nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, -1)
        k, v = self.proj_e @ k, self.proj_f @ v  # (b, k, d)
        q = q.view(b, n, self.heads, -1).transpose(1, 2)
        k = k.view(b, -1, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, -1, self.heads, d // self.heads).transpose(1, 2)
        att = F.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // self.heads), -1)
        h = (self.drop(att) @ v).transpose(1, 2).reshape(b, n, d)
        x = x + self.drop(self.out(h))
        return x + self.drop(self.ff(self.ln2(x)))


def linformer_bf16_classifier(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Wang et al. 2020 (Linformer): self-attention whose keys and values are projected along
    the sequence from n=64 to k=16 by learned matrices; two pre-LN layers, a mean-pooled head,
    bf16 autocast on CPU, AdamW 5e-4 with 30 warm-up steps then linear decay, clipping at 1."""
    g = _seed(seed)
    vocab, length, d = 50, 64, 64
    y = torch.randint(0, 4, (3000,), generator=g)
    x = _class_markov(g, y, length, vocab)

    class Linformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(0.02 * torch.randn(1, length, d))
            self.layers = nn.ModuleList([_LinformerLayer(d, 4, length, 16) for _ in range(2)])
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, 4)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            h = self.embed(ids) + self.pos
            for layer in self.layers:
                h = layer(h)
            return self.head(self.norm(h).mean(1))

    model = Linformer()
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
    warmup = 30
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warmup if s < warmup else max(0.0, (steps - s) / (steps - warmup))
    )
    if bug == "frozen_by_mistake":  # left from the variant with pre-trained embeddings
        model.embed.weight.requires_grad_(False)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for step in range(steps):
        idx = torch.randint(0, 2500, (32,), generator=g)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = criterion(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                acc = (model(x[2500:]).argmax(1) == y[2500:]).float().mean().item()
            model.train()
            print(f"step {step + 1}: loss {loss.item():.4f} val acc {acc:.3f}")
    hook.close()
    return losses


def annotator_vote_kl(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """Learning from crowd labels kept as distributions (CIFAR-10H-style soft labels): ten
    annotators vote on each item, mistaking its class by a fixed confusion matrix; the target is the vote histogram and
    the loss the KL from it to the model's prediction (`nn.KLDivLoss(reduction="batchmean")` on
    log-probabilities); Adam 1e-3, a Brier-score pass every 100 steps."""
    g = _seed(seed)
    k, n = 6, 5000
    x, y = _blobs(g, n, 10, k, proto_seed=27, spread=1.2)
    pg = torch.Generator().manual_seed(28)
    confusion = torch.softmax(torch.randn(k, k, generator=pg) + 3.0 * torch.eye(k), 1)
    votes = torch.multinomial(confusion[y], 10, replacement=True, generator=g)
    target = torch.zeros(n, k).scatter_add_(1, votes, torch.ones(n, 10)) / 10
    model = nn.Sequential(nn.Linear(10, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, k))
    criterion = nn.KLDivLoss(reduction="batchmean")
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    model.train()
    for step in range(steps):
        idx = torch.randint(0, 4000, (64,), generator=g)
        log_q = F.log_softmax(model(x[idx]), 1)
        t = target[idx]
        # bug: the KL written out by hand, where classes nobody voted for give 0 * log 0
        loss = (t * (t.log() - log_q)).sum(1).mean() if bug == "log_zero_nan" else criterion(log_q, t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            with torch.no_grad():
                brier = (F.softmax(model(x[4000:]), 1) - target[4000:]).pow(2).sum(1).mean().item()
            print(f"step {step + 1}: kl {loss.item():.4f} brier {brier:.4f}")
    hook.close()
    return losses


def scheduled_sampling_forecaster(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Bengio et al. 2015 (scheduled sampling) for multi-step forecasting: a GRU encoder over 48
    past values, a two-layer GRU decoder (dropout 0.2) rolled over 12 future steps whose next
    input is the true value with probability eps_i = k / (k + exp(i / k)) (inverse-sigmoid decay
    in the batch index i, k=50) and its own prediction otherwise; MSE, Adam 1e-3, a free-running
    evaluation pass after each epoch."""
    g = _seed(seed)
    n, past, horizon = 3600, 48, 12
    t = torch.arange(past + horizon).float()
    period = 12 + 12 * torch.rand(n, 1, generator=g)
    phase = 2 * math.pi * torch.rand(n, 1, generator=g)
    amp = 0.5 + torch.rand(n, 1, generator=g)
    series = amp * torch.sin(2 * math.pi * t / period + phase) + 0.3 * torch.sin(2 * math.pi * t / 7 + phase)
    series = series + 0.1 * torch.randn(n, past + horizon, generator=g)
    src, tgt = series[:, :past, None], series[:, past:, None]
    train = DataLoader(TensorDataset(src[:3200], tgt[:3200]), batch_size=64, shuffle=True, generator=g)

    class Seq2Seq(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.GRU(1, 64, num_layers=2, dropout=0.2, batch_first=True)
            self.decoder = nn.GRU(1, 64, num_layers=2, dropout=0.2, batch_first=True)
            self.out = nn.Linear(64, 1)

        def forward(
            self, s: torch.Tensor, target: torch.Tensor | None = None, tf_prob: float = 0.0
        ) -> torch.Tensor:
            _, h = self.encoder(s)
            inp = s[:, -1:]
            preds = []
            for i in range(horizon):
                o, h = self.decoder(inp, h)
                pred = self.out(o)
                preds.append(pred)
                if target is not None and random.random() < tf_prob:
                    inp = target[:, i : i + 1]
                else:
                    inp = pred.detach()
            return torch.cat(preds, 1)

    model = Seq2Seq()
    criterion = nn.MSELoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    k = 50.0
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    i = 0
    for epoch in range(epochs):
        if bug != "train_in_eval_mode":
            model.train()
        for xb, yb in train:
            eps = k / (k + math.exp(i / k))
            loss = criterion(model(xb, yb, eps), yb)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
            i += 1
        model.eval()
        with torch.no_grad():
            val = criterion(model(src[3200:]), tgt[3200:]).item()
        print(f"epoch {epoch}: train {losses[-1]:.4f} free-running val {val:.4f} eps {eps:.2f}")
    hook.close()
    return losses


def mult_vae_recommender(path: str, epochs: int = 20, seed: int = 0) -> list[float]:
    """Liang et al. 2018 (Mult-VAE): users' click vectors L2-normalized and dropped out at 0.5,
    a tanh encoder to a Gaussian, a decoder to item logits, the multinomial log-likelihood
    -sum(log_softmax(logits) * x) plus beta * KL with beta annealed linearly up to 0.2; Adam 1e-3,
    batch 100, a Recall@20 pass on held-out clicks every 5 epochs."""
    g = _seed(seed)
    users, items, factors = 2000, 300, 8
    pg = torch.Generator().manual_seed(33)
    item_f = torch.randn(items, factors, generator=pg)
    user_f = torch.randn(users, factors, generator=g)
    pop = torch.randn(items, generator=pg)
    logits_true = user_f @ item_f.T / math.sqrt(factors) * 2.5 + pop
    clicks = torch.zeros(users, items)
    for u in range(users):
        n_u = int(torch.randint(10, 40, (1,), generator=g))
        clicks[u, torch.multinomial(torch.softmax(logits_true[u], 0), n_u, generator=g)] = 1.0
    held = (torch.rand(users, items, generator=g) < 0.2) & (clicks > 0)
    x_in = clicks * (~held).float()

    class MultVAE(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.enc = nn.Linear(items, 128)
            self.mu, self.logvar = nn.Linear(128, 32), nn.Linear(128, 32)
            self.dec = nn.Sequential(nn.Linear(32, 128), nn.Tanh(), nn.Linear(128, items))
            self.drop = nn.Dropout(0.5)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            h = torch.tanh(self.enc(self.drop(F.normalize(x))))
            mu, logvar = self.mu(h), self.logvar(h)
            z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar) if self.training else mu
            return self.dec(z), mu, logvar

    model = MultVAE()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=0.0)
    total_anneal, anneal_cap = 200, 0.2
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    update = 0
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(1800, generator=g)
        for b in range(0, 1800, 100):
            xb = x_in[perm[b : b + 100]]
            logits, mu, logvar = model(xb)
            nll = -(F.log_softmax(logits, 1) * xb).sum(1).mean()
            kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1).mean()
            beta = min(anneal_cap, update / total_anneal)
            loss = nll + beta * kl
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            update += 1
        if epoch % 5 == 4:
            model.eval()
            with torch.no_grad():
                scores = model(x_in[1800:])[0].masked_fill(x_in[1800:] > 0, -1e9)
                top = scores.topk(20, 1).indices
                hits = held[1800:].float().gather(1, top).sum(1)
                recall = (hits / held[1800:].sum(1).clamp(min=1).clamp(max=20)).mean().item()
            print(f"epoch {epoch}: loss {loss.item():.3f} recall@20 {recall:.3f}")
    hook.close()
    return losses


def nce_density_2d(path: str, steps: int = 600, seed: int = 0) -> list[float]:
    """Gutmann & Hyvarinen 2010 (noise-contrastive estimation): an unnormalized log-density
    f(x) + c with a learned log-normalizer c, trained by logistic regression of data samples
    (a ring of eight Gaussians) against as many samples of a wide Gaussian noise, whose known
    log-density enters the logit G(x) = f(x) + c - log p_noise(x); Adam 1e-3."""
    g = _seed(seed)
    angles = torch.arange(8) * (2 * math.pi / 8)
    centres = torch.stack([torch.cos(angles), torch.sin(angles)], 1) * 2.0
    noise_dist = torch.distributions.MultivariateNormal(torch.zeros(2), 4.0 * torch.eye(2))

    class EnergyNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.f = nn.Sequential(
                nn.Linear(2, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(), nn.Linear(128, 1)
            )
            self.log_z = nn.Parameter(torch.zeros(()))  # c = -log Z

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.f(x).squeeze(1) + self.log_z

    model = EnergyNet()
    criterion = nn.BCEWithLogitsLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        data = centres[torch.randint(0, 8, (256,), generator=g)] + 0.2 * torch.randn(256, 2, generator=g)
        noise = 2.0 * torch.randn(256, 2, generator=g)
        both = torch.cat([data, noise])
        logit = model(both) - noise_dist.log_prob(both)
        labels = torch.cat([torch.ones(256), torch.zeros(256)])
        loss = criterion(logit, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 200 == 199:
            with torch.no_grad():  # the normalizer by importance sampling from the noise
                s = 2.0 * torch.randn(20000, 2, generator=g)
                z = torch.exp(model(s) - noise_dist.log_prob(s)).mean().item()
            print(f"step {step + 1}: loss {loss.item():.4f} integral of the model density ~ {z:.3f}")
    hook.close()
    return losses


# ============================================================================= tools: shared helpers


class _Examples(Dataset):
    """A list of feature dicts, as a `datasets.Dataset` after `.map(tokenize)` gives them."""

    def __init__(self, **columns: Any) -> None:
        self.columns = columns
        self.n = len(next(iter(columns.values())))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {k: v[i] for k, v in self.columns.items()}


def _keras_losses(key: str = "loss") -> Any:
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
            mean = float(logs[key])
            self.losses.append((batch + 1) * mean - batch * self.prev)
            self.prev = mean

    return BatchLosses()


# ============================================================================= Keras 3


def keras_label_smoothing_inverse_time(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """A Sequential MLP on one-hot targets (`keras.utils.to_categorical`) with
    `CategoricalCrossentropy(label_smoothing=0.1)`, `kernel_regularizer=regularizers.L2(1e-4)`
    and Dropout, on `SGD(momentum=0.9)` with an `InverseTimeDecay(0.01, decay_steps=100,
    decay_rate=0.5)` schedule; batch 32, 6 epochs, `validation_split=0.1`."""
    import keras
    from keras import layers, regularizers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    x, y = _blobs(g, 4000, 12, 7, proto_seed=71, spread=1.4)
    x_np = x.numpy().astype("float32")
    y_onehot = keras.utils.to_categorical(y.numpy(), 7)
    model = keras.Sequential([
        keras.Input(shape=(12,)),
        layers.Dense(128, activation="relu", kernel_regularizer=regularizers.L2(1e-4)),
        layers.Dropout(0.2),
        layers.Dense(64, activation="relu", kernel_regularizer=regularizers.L2(1e-4)),
        layers.Dense(7, activation="softmax"),
    ])  # fmt: skip
    lr = 1.0 if bug == "lr_x100" else 0.01  # the initial rate typed as 1.0
    schedule = keras.optimizers.schedules.InverseTimeDecay(lr, decay_steps=100, decay_rate=0.5)
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=schedule, momentum=0.9),
        loss=keras.losses.CategoricalCrossentropy(label_smoothing=0.1),
        metrics=["accuracy"],
    )
    history = _keras_losses()
    model.fit(
        x_np, y_onehot, batch_size=32, epochs=6, validation_split=0.1, verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_poisson_adagrad_counts(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Counts (events per shop per day) from a functional model with a `Normalization` layer
    adapted on the training features, an `exponential` output and `loss="poisson"`, on
    `Adagrad(learning_rate=0.05)`; batch 128, 8 epochs, `validation_split=0.2`."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    n, d = 8000, 8
    x = rng.normal(size=(n, d)).astype("float32")
    rate = np.exp(0.6 * x[:, 0] - 0.4 * x[:, 1] + 0.3 * np.sin(2 * x[:, 2]) + 0.2 * x[:, 3] * x[:, 4] + 0.5)
    y = rng.poisson(rate).astype("float32")
    norm = layers.Normalization()
    norm.adapt(x[:6400])
    inputs = keras.Input(shape=(d,))
    h = layers.Dense(64, activation="relu")(norm(inputs))
    h = layers.Dense(32, activation="relu")(h)
    outputs = layers.Dense(1, activation="exponential")(h)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adagrad(learning_rate=0.05), loss="poisson")
    history = _keras_losses()
    model.fit(
        x, y[:, None], batch_size=128, epochs=8, validation_split=0.2, verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


# ============================================================================= Lightning


def lit_gaussian_nll_regressor(
    path: str, epochs: int = 10, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Heteroscedastic regression as a LightningModule: a trunk with a mean head and a variance
    head (softplus), `nn.GaussianNLLLoss()`, Adam 2e-3 with `ExponentialLR(gamma=0.8)` stepped
    each epoch, a validation loop every second epoch (`check_val_every_n_epoch=2`), batch 64."""
    import lightning.pytorch as pl

    g = _seed(seed)
    n = 4000
    x = torch.rand(n, 4, generator=g) * 4 - 2
    mean = torch.sin(2 * x[:, 0]) + 0.5 * x[:, 1] ** 2 - x[:, 2]
    std = 0.1 + 0.4 * (x[:, 3] + 2) / 4 + 0.2 * x[:, 0].abs()
    yv = (mean + std * torch.randn(n, generator=g)).unsqueeze(1)

    class HeteroscedasticNet(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            if bug == "deep_sigmoid":  # the trunk written as eight sigmoid layers
                layers: list[nn.Module] = [nn.Linear(4, 64), nn.Sigmoid()]
                for _ in range(7):
                    layers += [nn.Linear(64, 64), nn.Sigmoid()]
                self.trunk = nn.Sequential(*layers)
            else:
                self.trunk = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
            self.mean_head, self.var_head = nn.Linear(64, 1), nn.Linear(64, 1)
            self.criterion = nn.GaussianNLLLoss()

        def forward(self, xb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.trunk(xb)
            return self.mean_head(h), F.softplus(self.var_head(h)) + 1e-6

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            mu, var = self(xb)
            loss = self.criterion(mu, yb, var)
            self.log("train_nll", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            xb, yb = batch
            mu, var = self(xb)
            self.log("val_nll", self.criterion(mu, yb, var))
            self.log("val_rmse", F.mse_loss(mu, yb).sqrt())

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.Adam(self.parameters(), lr=2e-3)
            return [optimizer], [torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.8)]

    train = DataLoader(TensorDataset(x[:3200], yv[:3200]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(x[3200:], yv[3200:]), batch_size=256)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs, check_val_every_n_epoch=2)
    trainer.fit(HeteroscedasticNet(), train, val)
    return history.losses


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
    """A callback keeping each training batch's loss (`outputs["loss"]`)."""
    import lightning.pytorch as pl

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is not None:
                self.losses.append(float(loss))

    return LossHistory()


# ============================================================================= Hugging Face Trainer


def hf_funnel_cosine_min_lr(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Sequence classification with a tiny random `FunnelForSequenceClassification` (two blocks,
    the sequence pooled by 2 between them): 4 classes of token sequences from class-specific
    Markov chains, `lr_scheduler_type="cosine_with_min_lr"` (`min_lr_rate=0.1`), 8 warm-up steps,
    lr 5e-4, weight decay 0.01, `max_grad_norm=0.5`, batch 16, 2 epochs, evaluation each epoch."""
    from transformers import FunnelConfig, FunnelForSequenceClassification

    g = _seed(seed)
    n, length, vocab = 1600, 32, 60
    labels = torch.randint(0, 4, (n,), generator=g)
    ids = 4 + _class_markov(g, labels, length - 1, vocab - 4, proto_seed=47)
    input_ids = torch.cat([torch.full((n, 1), 1), ids], 1)  # [CLS] first
    config = FunnelConfig(
        vocab_size=vocab, block_sizes=[1, 1], block_repeats=[1, 1], num_decoder_layers=1, d_model=64, n_head=4,
        d_head=16, d_inner=128, max_position_embeddings=64, num_labels=4,
    )  # fmt: skip
    model = FunnelForSequenceClassification(config)
    cols = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": labels}
    train = _Examples(**{k: v[:1344] for k, v in cols.items()})
    val = _Examples(**{k: v[1344:] for k, v in cols.items()})
    return _hf_train(
        path, model, train, val, num_train_epochs=2, per_device_train_batch_size=16, learning_rate=5e-4,
        lr_scheduler_type="cosine_with_min_lr", lr_scheduler_kwargs={"min_lr_rate": 0.1}, warmup_steps=8,
        weight_decay=0.01, max_grad_norm=0.5, remove_unused_columns=False,
    )  # fmt: skip


def _hf_train(path: str, model: Any, train: Dataset, val: Dataset | None, **args: Any) -> list[float]:
    """`Trainer(model, TrainingArguments(...), callbacks=[DebuggerCallback(path)]).train()`; the
    per-step training losses from `trainer.state.log_history` (`logging_steps=1`)."""
    from transformers import PrinterCallback, Trainer, TrainingArguments

    from mldbg.transformers import DebuggerCallback

    args.setdefault("eval_strategy", "epoch" if val is not None else "no")
    targs = TrainingArguments(
        output_dir=os.path.join(path, "trainer"),
        save_strategy="no",
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
        **args,
    )
    trainer = Trainer(
        model=model, args=targs, train_dataset=train, eval_dataset=val, callbacks=[DebuggerCallback(path)]
    )
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(targs.output_dir, ignore_errors=True)
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


# ============================================================================= JAX


def flax_ranknet_rmsprop_onecycle(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """RankNet (Burges et al. 2005) in Flax Linen: a scoring MLP over query-document features,
    the pairwise logistic loss `softplus(-(s_i - s_j))` over pairs of one query's documents
    where i is more relevant than j, on `optax.rmsprop(optax.cosine_onecycle_schedule(400, 3e-3))`
    with a jitted step returning the gradients for the hook; 16 documents per query, 32 queries
    a batch."""
    import flax.linen as fnn
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    rng = np.random.default_rng(seed)
    queries, docs, d = 2000, 16, 10
    x = rng.normal(size=(queries, docs, d)).astype("float32")
    q_eff = rng.normal(size=(queries, 1, 2)).astype("float32")
    score = (
        x[..., 0]
        + np.tanh(x[..., 1] * x[..., 2])
        + q_eff[..., 0] * x[..., 3]
        + 0.3 * rng.normal(size=(queries, docs))
    )
    rel = np.digitize(score, np.quantile(score, [0.5, 0.8, 0.95])).astype("float32")

    class Scorer(fnn.Module):
        @fnn.compact
        def __call__(self, h: Any) -> Any:
            h = fnn.relu(fnn.Dense(64)(h))
            h = fnn.relu(fnn.Dense(32)(h))
            return fnn.Dense(1)(h)[..., 0]

    model = Scorer()
    params = model.init(jax.random.PRNGKey(seed), x[:1])["params"]
    tx = optax.rmsprop(optax.cosine_onecycle_schedule(steps, 3e-3), decay=0.9)
    opt_state = tx.init(params)

    @jax.jit
    def train_step(params: Any, opt_state: Any, xb: Any, rb: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            s = model.apply({"params": p}, xb)  # (queries, docs)
            diff = s[:, :, None] - s[:, None, :]
            better = (rb[:, :, None] > rb[:, None, :]).astype(jnp.float32)
            return (jax.nn.softplus(-diff) * better).sum() / jnp.maximum(better.sum(), 1.0)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    hook = mldbg.jax.Hook(path)
    losses = []
    for step in range(steps):
        idx = rng.choice(1800, 32, replace=False)
        old = params
        params, opt_state, loss, grads = train_step(params, opt_state, x[idx], rel[idx])
        hook.record(step, params=old, grads=grads, loss=loss)
        losses.append(float(loss))
    hook.close()
    return losses


# ============================================================================= XGBoost


def xgb_squared_log_error_prices(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """House-price-shaped regression on a right-skewed positive target with
    `objective="reg:squaredlogerror"` (the RMSLE a competition scores), `eval_metric="rmsle"`,
    `eta=0.05`, `max_depth=5`, `min_child_weight=5`, `colsample_bytree=0.8`, `subsample=0.8`,
    300 rounds with a validation set; losses: the training RMSLE per round."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    n, d = 5000, 10
    x = rng.normal(size=(n, d))
    log_price = (
        12 + 0.4 * x[:, 0] + 0.3 * np.tanh(x[:, 1] * x[:, 2]) + 0.2 * x[:, 3] ** 2 + 0.15 * rng.normal(size=n)
    )
    y = np.exp(log_price) / 1e5  # in hundreds of thousands
    dtrain = xgb.DMatrix(x[:4000], label=y[:4000])
    dvalid = xgb.DMatrix(x[4000:], label=y[4000:])
    params = {
        "objective": "reg:squaredlogerror", "eval_metric": "rmsle", "eta": 0.05, "max_depth": 5,
        "min_child_weight": 5, "colsample_bytree": 0.8, "subsample": 0.8, "tree_method": "hist", "nthread": 1,
        "seed": seed,
    }  # fmt: skip
    result: dict[str, Any] = {}
    xgb.train(
        params, dtrain, num_boost_round=300, evals=[(dtrain, "train"), (dvalid, "valid")], evals_result=result,
        verbose_eval=False, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    return [float(v) for v in result["train"]["rmsle"]]


# ============================================================================= the pipelines

_rdrop = healthy("rdrop_symmetric_kl_bow_mlp", "R-Drop consistency regularization", rdrop_bow_classifier)
_snapshot = healthy(
    "snapshot_ensemble_cyclic_cosine_cnn", "snapshot ensembles (cyclic cosine)", snapshot_ensemble_cnn
)
_double_bp = healthy(
    "double_backprop_input_gradient_penalty_cnn",
    "input-gradient regularization (double backprop)",
    double_backprop_cnn,
)
_pseudo = healthy("pseudo_label_confidence_ramp_mlp", "pseudo-labeling (Lee 2013)", pseudo_label_mlp)
_set = healthy("sparse_evolutionary_training_mlp", "dynamic sparse training (SET)", sparse_evolutionary_mlp)
_linformer = healthy(
    "linformer_low_rank_attention_bf16", "Linformer classifier (bf16 autocast)", linformer_bf16_classifier
)
_votes = healthy(
    "annotator_vote_histogram_kl", "learning from annotator vote distributions", annotator_vote_kl
)
_sched_sampling = healthy(
    "scheduled_sampling_gru_forecaster",
    "seq2seq forecasting with scheduled sampling",
    scheduled_sampling_forecaster,
)

PIPELINES: list[Any] = [
    _rdrop,
    _snapshot,
    _double_bp,
    _pseudo,
    _set,
    _linformer,
    _votes,
    _sched_sampling,
    healthy(
        "mult_vae_annealed_beta_recommender",
        "variational autoencoder for collaborative filtering (Mult-VAE)",
        mult_vae_recommender,
    ),
    healthy("nce_unnormalized_density_ring", "noise-contrastive estimation", nce_density_2d),
    buggy(_rdrop, "no_zero_grad"),
    buggy(_snapshot, "shuffled_labels"),
    buggy(_double_bp, "inputs_x255"),
    buggy(_pseudo, "softmax_before_ce"),
    buggy(_set, "dead_relu_init"),
    buggy(_linformer, "frozen_by_mistake"),
    buggy(_votes, "log_zero_nan"),
    buggy(_sched_sampling, "train_in_eval_mode"),
]

if installed("keras", "tensorflow"):
    _keras_ls = healthy(
        "keras_label_smoothing_l2_inverse_time_decay",
        "Keras MLP (label smoothing, InverseTimeDecay)",
        keras_label_smoothing_inverse_time,
    )
    PIPELINES += [
        _keras_ls,
        healthy(
            "keras_poisson_loss_adagrad_counts",
            "Keras Poisson count regression (Adagrad)",
            keras_poisson_adagrad_counts,
        ),
        buggy(_keras_ls, "lr_x100"),
    ]

if installed("lightning"):
    _lit_nll = healthy(
        "lightning_gaussian_nll_exponential_lr",
        "Lightning heteroscedastic regression (GaussianNLLLoss)",
        lit_gaussian_nll_regressor,
    )
    PIPELINES += [_lit_nll, buggy(_lit_nll, "deep_sigmoid")]

if installed("transformers"):
    PIPELINES += [
        healthy(
            "hf_trainer_funnel_cosine_with_min_lr",
            "HF Trainer Funnel Transformer classification",
            hf_funnel_cosine_min_lr,
        )
    ]

if installed("jax", "optax", "flax"):
    PIPELINES += [
        healthy(
            "flax_ranknet_pairwise_rmsprop_onecycle",
            "Flax RankNet (pairwise logistic)",
            flax_ranknet_rmsprop_onecycle,
        )
    ]

if installed("xgboost"):
    PIPELINES += [
        healthy(
            "xgboost_squared_log_error_skewed_prices",
            "XGBoost reg:squaredlogerror",
            xgb_squared_log_error_prices,
        )
    ]
