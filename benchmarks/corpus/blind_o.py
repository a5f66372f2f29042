"""The ninth blind held-out set (issue 26), part O: plain PyTorch trainings of kinds the corpus
did not have yet, each written the way a practitioner of that kind writes it, with the README's
two lines (`register_loss` where the script has a loss module), data generated in-process, fixed
seeds, one CPU thread.

Positive-unlabeled learning with the non-negative risk estimator (nnPU: sigmoid loss, a known
prior, a gradient ascent step when the negative risk goes below zero), a mean teacher (an EMA
teacher, a ramped consistency cost, SGD Nesterov) and virtual adversarial training with entropy
minimization (one power iteration, a linear decay over the second half) for semi-supervised
classification, DINO self-distillation (teacher centring and sharpening, a weight-normalized
prototype layer frozen for the first steps, multi-crop views, warm-up cosine AdamW, clipping at
3), instance discrimination against a memory bank (non-parametric softmax at 0.07, momentum
updates of the bank, a kNN monitor), an input-convex network (weights clamped non-negative after
each RAdam step), the Deep Ritz method for a Poisson problem (an energy through autograd.grad and
a boundary penalty, StepLR), DDSP harmonic resynthesis (a GRU decoder, an additive synthesizer,
the multi-scale spectral loss on linear and log magnitudes), AutoInt click-through prediction
(multi-head self-attention over field embeddings, an AUC pass each epoch), discrete-time survival
with the logistic hazard likelihood over censored intervals, manifold mixup on RGB shapes (SGD
Nesterov at 0.1, MultiStepLR), deep mutual learning (two students, two optimizers, KL to each
other), outlier exposure (cross-entropy to the uniform on near outliers, cosine schedule, a
max-softmax AUROC pass), a concrete autoencoder selecting features (Gumbel-softmax selector,
exponential temperature annealing), a gated convolutional LM (GLU, weight norm, Nesterov momentum
0.99 with clipping at 0.1, embeddings from a co-occurrence SVD), an ALiBi decoder on NAdam with
warm-up and linear decay validated on longer windows, a deep Koopman autoencoder on pendulum
trajectories (multi-step prediction and linearity losses), a YOLOv1-style grid detector (sqrt
sizes, lambda_coord and lambda_noobj, a warm-up epoch, a mean-IoU pass), Poisson claim frequency
with an exposure offset under gradient accumulation over a loader with a short last window
(Adamax), and a relativistic average GAN (RaSGAN) on a banana-shaped distribution.

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: manifold mixup at lr 10 typed for 1e-1 (lr_x100), the Koopman autoencoder without
`optimizer.zero_grad()` (no_zero_grad), AutoInt's click column joined from a re-sorted log
(shuffled_labels), the YOLO detector's images normalized without the division by 255
(inputs_x255), outlier exposure's model ending in `nn.Softmax` "for the max-softmax score" while
the losses still take logits (softmax_before_ce), the logistic-hazard net with every Linear bias
set to -3 "to start from low hazards" (dead_relu_init), nnPU's classifier as eight sigmoid
layers (deep_sigmoid), the gated CNN LM's pre-trained embeddings frozen by a line left from the
fixed-embedding variant after the optimizer was built (frozen_by_mistake), DDSP's log magnitudes
taken without the 1e-7 floor on notes that end in digital silence (log_zero_nan), the mean
teacher's student left in eval mode after its first validation (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
`SPLIT = BLIND8`.
"""

from __future__ import annotations

import math
import random

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from mldbg.torch import Hook

from . import BLIND8, buggy, healthy

SPLIT = BLIND8

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 17)


def _clusters(
    g: torch.Generator, n: int, d: int, k: int, spread: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n points in d dims around k random centres bent by a fixed nonlinearity, with their
    cluster index; returns (x, y, centres)."""
    centres = torch.randn(k, d, generator=g) * 2.0
    y = torch.randint(0, k, (n,), generator=g)
    x = centres[y] + spread * torch.randn(n, d, generator=g)
    x = x + 0.3 * torch.sin(x.roll(1, 1))
    return x, y, centres


# ----------------------------------------------------------------------------- nnPU


def nnpu_positive_unlabeled(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Kiryo et al. 2017: a classifier from positive and unlabeled data only, with the
    non-negative risk estimator (the sigmoid loss, a known class prior, a gradient ascent step
    on the negative risk when it goes below -beta)."""
    g = _seed(seed)
    d, prior = 20, 0.4
    mu = torch.randn(d, generator=g) * 0.6

    def sample(n: int, pos: bool) -> torch.Tensor:
        x = torch.randn(n, d, generator=g)
        return x + mu if pos else x - mu

    n_u = 6000
    is_pos = torch.rand(n_u, generator=g) < prior
    x_u = torch.where(is_pos[:, None], sample(n_u, True), sample(n_u, False))
    x_p = sample(1000, True)
    x_test = torch.cat([sample(500, True), sample(500, False)])
    y_test = torch.cat([torch.ones(500), torch.zeros(500)])
    if bug == "deep_sigmoid":  # "more capacity": the old sigmoid MLP grown to eight layers
        layers: list[nn.Module] = [nn.Linear(d, 100), nn.Sigmoid()]
        for _ in range(7):
            layers += [nn.Linear(100, 100), nn.Sigmoid()]
        model = nn.Sequential(*layers, nn.Linear(100, 1))
    else:
        model = nn.Sequential(
            nn.Linear(d, 300), nn.BatchNorm1d(300), nn.ReLU(),
            nn.Linear(300, 300), nn.BatchNorm1d(300), nn.ReLU(),
            nn.Linear(300, 1),
        )  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, weight_decay=5e-3)
    beta, gamma = 0.0, 1.0

    def sigmoid_loss(z: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(-z)

    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        model.train()
        xp = x_p[torch.randint(0, len(x_p), (64,), generator=g)]
        xu = x_u[torch.randint(0, n_u, (256,), generator=g)]
        out = model(torch.cat([xp, xu])).squeeze(1)
        gp, gu = out[:64], out[64:]
        risk_p = prior * sigmoid_loss(gp).mean()
        risk_n = sigmoid_loss(-gu).mean() - prior * sigmoid_loss(-gp).mean()
        opt.zero_grad()
        if risk_n.item() < -beta:
            (-gamma * risk_n).backward()  # push the negative risk back up
            objective = risk_p
        else:
            objective = risk_p + risk_n
            objective.backward()
        opt.step()
        losses.append(objective.item())
        if step % 100 == 0:
            model.eval()
            with torch.no_grad():
                acc = ((model(x_test).squeeze(1) > 0).float() == y_test).float().mean()
            print(f"step {step}: risk {objective.item():.4f} test acc {acc.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- mean teacher


def _spirals(
    g: torch.Generator, n: int, k: int = 3, noise: float = 0.25
) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.randint(0, k, (n,), generator=g)
    t = torch.rand(n, generator=g) * 3.0 + 0.3
    ang = t * 1.6 + y * (2 * math.pi / k)
    x = torch.stack([t * torch.cos(ang), t * torch.sin(ang)], 1) + noise * torch.randn(n, 2, generator=g)
    return x, y


def mean_teacher_spirals(path: str, steps: int = 600, seed: int = 0, bug: str | None = None) -> list[float]:
    """Tarvainen & Valpola 2017: a student with dropout and input noise, a teacher that is the
    exponential moving average of the student, a consistency cost (MSE between their softmaxes)
    ramped up by exp(-5(1-t)^2); 60 labeled points, the rest unlabeled, SGD with Nesterov."""
    g = _seed(seed)
    x_all, y_all = _spirals(g, 4000)
    x_val, y_val = _spirals(g, 1000)
    labeled = torch.arange(60)
    x_l, y_l = x_all[labeled], y_all[labeled]
    x_u = x_all[60:]

    def net() -> nn.Module:
        return nn.Sequential(
            nn.Linear(2, 128), nn.ReLU(), nn.Dropout(0.2),
            nn.Linear(128, 128), nn.ReLU(), nn.Dropout(0.2),
            nn.Linear(128, 3),
        )  # fmt: skip

    student, teacher = net(), net()
    teacher.load_state_dict(student.state_dict())
    for p in teacher.parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=2e-4)
    criterion = nn.CrossEntropyLoss()
    rampup, alpha = 200, 0.99
    hook = Hook(path)
    hook.register_module(student)
    hook.register_loss(criterion)
    losses = []
    student.train()
    teacher.train()
    for step in range(steps):
        idx_l = torch.randint(0, 60, (20,), generator=g)
        xl, yl = x_l[idx_l], y_l[idx_l]
        xu = x_u[torch.randint(0, len(x_u), (100,), generator=g)]
        xb = torch.cat([xl, xu])
        s_out = student(xb + 0.1 * torch.randn(xb.shape, generator=g))
        with torch.no_grad():
            t_out = teacher(xb + 0.1 * torch.randn(xb.shape, generator=g))
        w = 10.0 * math.exp(-5 * (1 - min(step, rampup) / rampup) ** 2)
        class_loss = criterion(s_out[:20], yl)
        cons = F.mse_loss(F.softmax(s_out, 1), F.softmax(t_out, 1))
        loss = class_loss + w * cons
        opt.zero_grad()
        loss.backward()
        opt.step()
        a = min(1 - 1 / (step + 1), alpha)
        with torch.no_grad():
            for tp, sp in zip(teacher.parameters(), student.parameters(), strict=True):
                tp.mul_(a).add_(sp, alpha=1 - a)
        losses.append(loss.item())
        if step % 100 == 99:
            student.eval()
            teacher.eval()
            with torch.no_grad():
                acc_s = (student(x_val).argmax(1) == y_val).float().mean()
                acc_t = (teacher(x_val).argmax(1) == y_val).float().mean()
            print(
                f"step {step}: loss {loss.item():.4f} student {acc_s.item():.3f} teacher {acc_t.item():.3f}"
            )
            teacher.train()
            if bug != "train_in_eval_mode":
                student.train()
    hook.close()
    return losses


# ----------------------------------------------------------------------------- VAT


def _kl_logits(p_logit: torch.Tensor, q_logit: torch.Tensor) -> torch.Tensor:
    p = F.softmax(p_logit, 1)
    return (p * (F.log_softmax(p_logit, 1) - F.log_softmax(q_logit, 1))).sum(1).mean()


def vat_entmin_semi_supervised(path: str, steps: int = 500, seed: int = 0) -> list[float]:
    """Miyato et al. 2018: virtual adversarial training (one power iteration for the adversarial
    direction, xi=1e-6, eps) plus entropy minimization on unlabeled points, 10 labels per class,
    Adam with the learning rate decayed linearly over the second half."""
    g = _seed(seed)
    x, y, _ = _clusters(g, 5000, 10, 4, spread=1.3)
    x = (x - x.mean(0)) / x.std(0)
    x_val, y_val = x[4000:], y[4000:]
    lab = torch.cat([torch.nonzero(y[:4000] == c).squeeze(1)[:10] for c in range(4)])
    x_l, y_l, x_u = x[lab], y[lab], x[:4000]
    model = nn.Sequential(nn.Linear(10, 200), nn.ReLU(), nn.Linear(200, 200), nn.ReLU(), nn.Linear(200, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 if s < steps // 2 else 2 * (1 - s / steps))
    xi, eps = 1e-6, 1.0
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        model.train()
        xl, yl = x_l, y_l
        xu = x_u[torch.randint(0, len(x_u), (128,), generator=g)]
        with torch.no_grad():
            logit_u = model(xu)
        d = torch.randn(xu.shape, generator=g)
        d = xi * F.normalize(d, dim=1)
        d.requires_grad_(True)
        dist = _kl_logits(logit_u, model(xu + d))
        grad = torch.autograd.grad(dist, d)[0]
        r_adv = eps * F.normalize(grad.detach(), dim=1)
        lds = _kl_logits(logit_u, model(xu + r_adv))
        out_u = model(xu)
        ent = -(F.softmax(out_u, 1) * F.log_softmax(out_u, 1)).sum(1).mean()
        ce = F.cross_entropy(model(xl), yl)
        loss = ce + lds + ent
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 0:
            model.eval()
            with torch.no_grad():
                acc = (model(x_val).argmax(1) == y_val).float().mean()
            print(
                f"step {step}: ce {ce.item():.4f} lds {lds.item():.4f} ent {ent.item():.4f} val {acc.item():.3f}"
            )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DINO


class DINOHead(nn.Module):
    def __init__(self, d: int, out: int = 256, hidden: int = 128, bottleneck: int = 32):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, bottleneck))
        self.last_layer = nn.utils.parametrizations.weight_norm(nn.Linear(bottleneck, out, bias=False))
        self.last_layer.parametrizations.weight.original0.data.fill_(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last_layer(F.normalize(self.mlp(x), dim=-1))


def dino_self_distillation(path: str, steps: int = 400, seed: int = 0) -> list[float]:
    """Caron et al. 2021 on vectors: a student and an EMA teacher (momentum 0.996 -> 1 on a
    cosine), a weight-normalized prototype layer frozen for the first steps, teacher outputs
    centred and sharpened (0.04) against a student at 0.1, two global and four local views,
    AdamW with warm-up and cosine, clipping at 3."""
    g = _seed(seed)
    x, _, _ = _clusters(g, 4096, 32, 12)
    x = (x - x.mean(0)) / x.std(0)

    def backbone() -> nn.Module:
        return nn.Sequential(
            nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 64)
        )

    student = nn.Sequential(backbone(), DINOHead(64))
    teacher = nn.Sequential(backbone(), DINOHead(64))
    teacher.load_state_dict(student.state_dict())
    for p in teacher.parameters():
        p.requires_grad_(False)
    out_dim = 256
    center = torch.zeros(1, out_dim)
    warm, base_lr = 40, 5e-4 * 128 / 256
    opt = torch.optim.AdamW(student.parameters(), lr=base_lr, weight_decay=0.04)
    hook = Hook(path)
    hook.register_module(student)

    def view(b: torch.Tensor, local: bool) -> torch.Tensor:
        keep = 0.5 if local else 0.8
        mask = (torch.rand(b.shape, generator=g) < keep).float()
        return b * mask / keep + 0.2 * torch.randn(b.shape, generator=g)

    losses = []
    for step in range(steps):
        lr = (
            base_lr * step / warm
            if step < warm
            else base_lr * 0.5 * (1 + math.cos(math.pi * (step - warm) / (steps - warm)))
        )
        for group in opt.param_groups:
            group["lr"] = lr
        b = x[torch.randint(0, len(x), (128,), generator=g)]
        globals_ = [view(b, False) for _ in range(2)]
        locals_ = [view(b, True) for _ in range(4)]
        with torch.no_grad():
            t_out = [F.softmax((teacher(v) - center) / 0.04, -1) for v in globals_]
        s_out = [student(v) / 0.1 for v in globals_ + locals_]
        loss = torch.zeros(())
        n_terms = 0
        for i, t in enumerate(t_out):
            for j, s in enumerate(s_out):
                if i == j:
                    continue
                loss = loss + (-t * F.log_softmax(s, -1)).sum(-1).mean()
                n_terms += 1
        loss = loss / n_terms
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(student.parameters(), 3.0)
        if step < 30:  # freeze_last_layer
            for n, p in student.named_parameters():
                if "last_layer" in n:
                    p.grad = None
        opt.step()
        m = 1 - (1 - 0.996) * (math.cos(math.pi * step / steps) + 1) / 2
        with torch.no_grad():
            for tp, sp in zip(teacher.parameters(), student.parameters(), strict=True):
                tp.mul_(m).add_(sp.detach(), alpha=1 - m)
            batch_center = torch.cat([teacher(v) for v in globals_]).mean(0, keepdim=True)
            center = center * 0.9 + batch_center * 0.1
        losses.append(loss.item())
        if step % 100 == 0:
            print(f"step {step}: loss {loss.item():.4f} lr {lr:.2e} momentum {m:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- memory bank


def instance_discrimination_memory_bank(path: str, steps: int = 400, seed: int = 0) -> list[float]:
    """Wu et al. 2018: every training example is its own class; a memory bank of L2-normalized
    128-d features stands in for the classifier weights (non-parametric softmax at temperature
    0.07), and each sampled example's entry is updated with momentum 0.5 after the step;
    SGD momentum 0.9 on a cosine, a weighted kNN on the bank as the monitor."""
    g = _seed(seed)
    n = 2048
    x, y, _ = _clusters(g, n, 24, 10, spread=0.8)
    x = (x - x.mean(0)) / x.std(0)
    encoder = nn.Sequential(
        nn.Linear(24, 256), nn.BatchNorm1d(256), nn.ReLU(),
        nn.Linear(256, 256), nn.BatchNorm1d(256), nn.ReLU(),
        nn.Linear(256, 128),
    )  # fmt: skip
    bank = F.normalize(torch.randn(n, 128, generator=g), dim=1)
    opt = torch.optim.SGD(encoder.parameters(), lr=0.03, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    criterion = nn.CrossEntropyLoss()
    tau, mom = 0.07, 0.5
    hook = Hook(path)
    hook.register_module(encoder)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        encoder.train()
        idx = torch.randint(0, n, (128,), generator=g)
        xb = x[idx] + 0.3 * torch.randn(128, 24, generator=g)
        feat = F.normalize(encoder(xb), dim=1)
        logits = feat @ bank.T / tau
        loss = criterion(logits, idx)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        with torch.no_grad():
            bank[idx] = F.normalize(mom * bank[idx] + (1 - mom) * feat.detach(), dim=1)
        losses.append(loss.item())
        if step % 100 == 99:
            encoder.eval()
            with torch.no_grad():
                q = F.normalize(encoder(x[:256]), dim=1)
                sim = q @ bank.T
                sim[torch.arange(256), torch.arange(256)] = -1
                top = sim.topk(10, dim=1).indices
                pred = torch.mode(y[top], dim=1).values
                acc = (pred == y[:256]).float().mean()
            print(f"step {step}: loss {loss.item():.4f} kNN acc {acc.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- ICNN


class ICNN(nn.Module):
    """Amos et al. 2017: a fully input-convex network: non-negative weights on the hidden path
    (clamped after every step), passthrough layers from the input, convex non-decreasing
    activations."""

    def __init__(self, d: int, hidden: int = 64, depth: int = 3):
        super().__init__()
        self.wx = nn.ModuleList([nn.Linear(d, hidden) for _ in range(depth)] + [nn.Linear(d, 1)])
        self.wz = nn.ModuleList([nn.Linear(hidden, hidden, bias=False) for _ in range(depth - 1)]
                                + [nn.Linear(hidden, 1, bias=False)])  # fmt: skip
        for layer in self.wz:
            layer.weight.data.abs_().mul_(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = F.softplus(self.wx[0](x))
        for wx, wz in zip(self.wx[1:-1], self.wz[:-1], strict=True):
            z = F.softplus(wx(x) + wz(z))
        return (self.wx[-1](x) + self.wz[-1](z)).squeeze(-1)

    def clamp(self) -> None:
        with torch.no_grad():
            for layer in self.wz:
                layer.weight.clamp_(min=0)


def icnn_convex_regression(path: str, steps: int = 500, seed: int = 0) -> list[float]:
    """An ICNN fitted to a convex target (a log-sum-exp of affine pieces plus a quadratic) by
    RAdam with an exponential decay, weights projected onto the non-negative orthant."""
    g = _seed(seed)
    d = 6
    a, b = torch.randn(8, d, generator=g), torch.randn(8, generator=g)
    q = torch.randn(d, d, generator=g)
    q = q @ q.T / d

    def target(x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(x @ a.T + b, 1) + 0.1 * ((x @ q) * x).sum(1)

    x_val = torch.randn(1000, d, generator=g)
    y_val = target(x_val)
    model = ICNN(d)
    opt = torch.optim.RAdam(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.995)
    criterion = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        xb = torch.randn(256, d, generator=g)
        loss = criterion(model(xb), target(xb))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        model.clamp()
        losses.append(loss.item())
        if step % 100 == 0:
            with torch.no_grad():
                val = criterion(model(x_val), y_val)
            print(f"step {step}: mse {loss.item():.4f} val {val.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Deep Ritz


class RitzNet(nn.Module):
    """E & Yu 2018: residual blocks of two width-m layers with the activation max(x, 0)^3."""

    def __init__(self, m: int = 20, blocks: int = 3):
        super().__init__()
        self.inp = nn.Linear(2, m)
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(m, m), nn.Linear(m, m)) for _ in range(blocks)])
        self.out = nn.Linear(m, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for blk in self.blocks:
            h = h + F.relu(blk[1](F.relu(blk[0](h)) ** 3)) ** 3
        return self.out(h).squeeze(-1)


def deep_ritz_poisson(path: str, steps: int = 500, seed: int = 0) -> list[float]:
    """The Deep Ritz method for -laplace(u) = 1 on the square (-1, 1)^2 with u = 0 on the
    boundary: minimise the Ritz energy mean(|grad u|^2 / 2 - f u) over fresh interior samples
    plus a boundary penalty beta * mean(u^2); Adam with a step decay."""
    g = _seed(seed)
    model = RitzNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, 200, gamma=0.5)
    beta = 500.0
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        xi = (torch.rand(1000, 2, generator=g) * 2 - 1).requires_grad_(True)
        t = torch.rand(200, generator=g) * 2 - 1
        side = torch.randint(0, 4, (200,), generator=g)
        ones = torch.ones(200)
        xb = torch.stack([
            torch.where(side == 0, -ones, torch.where(side == 1, ones, t)),
            torch.where(side == 2, -ones, torch.where(side == 3, ones, t)),
        ], 1)  # fmt: skip
        u = model(xi)
        du = torch.autograd.grad(u.sum(), xi, create_graph=True)[0]
        energy = (0.5 * (du**2).sum(1) - 1.0 * u).mean() * 4.0  # times the area of the square
        penalty = beta * (model(xb) ** 2).mean()
        loss = energy + penalty
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 0:
            with torch.no_grad():
                u0 = model(torch.zeros(1, 2)).item()
            print(f"step {step}: energy {energy.item():.4f} penalty {penalty.item():.4f} u(0,0) {u0:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- DDSP


def _exp_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """DDSP's scaled sigmoid: 2 * sigmoid(x) ** log(10) + 1e-7."""
    return 2.0 * torch.sigmoid(x) ** math.log(10.0) + 1e-7


class HarmonicDecoder(nn.Module):
    """DDSP (Engel et al. 2020), reduced: a GRU over frames of (f0, loudness) predicts an
    overall amplitude and a distribution over harmonics; an additive synthesizer renders them."""

    def __init__(self, n_harmonics: int = 16, hidden: int = 64):
        super().__init__()
        self.n_harmonics = n_harmonics
        self.inp = nn.Sequential(nn.Linear(2, hidden), nn.LayerNorm(hidden), nn.LeakyReLU())
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Sequential(nn.Linear(hidden + 2, hidden), nn.LayerNorm(hidden), nn.LeakyReLU(),
                                 nn.Linear(hidden, 1 + n_harmonics))  # fmt: skip

    def forward(self, f0: torch.Tensor, loud: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        feats = torch.stack([f0 / 500.0, loud], -1)
        h, _ = self.gru(self.inp(feats))
        p = _exp_sigmoid(self.out(torch.cat([h, feats], -1)))
        return p[..., 0], p[..., 1:]


def _harmonic_synth(
    amp: torch.Tensor, dist: torch.Tensor, f0: torch.Tensor, sr: int, hop: int
) -> torch.Tensor:
    k = torch.arange(1, dist.shape[-1] + 1)
    dist = dist * (f0[..., None] * k < sr / 2)  # drop harmonics above Nyquist
    dist = dist / dist.sum(-1, keepdim=True).clamp_min(1e-7)
    harm = amp[..., None] * dist  # b, frames, n
    up = lambda t: F.interpolate(t.transpose(1, 2), scale_factor=hop, mode="linear").transpose(1, 2)  # noqa: E731
    f0_s = up(f0[..., None])[..., 0]
    phase = 2 * math.pi * torch.cumsum(f0_s / sr, 1)
    return (up(harm) * torch.sin(phase[..., None] * k)).sum(-1)


def ddsp_harmonic_resynthesis(
    path: str, steps: int = 250, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Resynthesis of notes from their pitch and loudness with the multi-scale spectral loss (L1
    on linear and log magnitudes at FFT sizes 256, 128, 64); the notes end in digital silence."""
    g = _seed(seed)
    sr, hop, frames, n_h = 8000, 64, 32, 16
    model = HarmonicDecoder(n_h)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.995)
    k = torch.arange(1, n_h + 1).float()

    def batch(b: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        f0 = (110 * 2 ** (torch.randint(0, 24, (b, 1), generator=g) / 12)).expand(b, frames).clone()
        f0 = f0 * (1 + 0.01 * torch.sin(torch.linspace(0, 6, frames)))  # vibrato
        env = torch.linspace(1, 0, frames) ** 2 * (0.5 + 0.5 * torch.rand(b, 1, generator=g))
        off = torch.randint(frames // 2, frames - 4, (b,), generator=g)
        env = env * (torch.arange(frames) < off[:, None])  # note off: silence to the end
        loud = torch.log10(env + 1e-4) / 4 + 1
        bright = 1.0 + 3.0 * (1 - env[..., None])
        dist = torch.exp(-k * bright / 4)  # brighter when loud
        with torch.no_grad():
            audio = _harmonic_synth(env, dist, f0, sr, hop)
        return f0, loud, audio

    def spectral_loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = torch.zeros(())
        for n_fft in (256, 128, 64):
            w = torch.hann_window(n_fft)
            sx = torch.stft(x, n_fft, n_fft // 4, window=w, return_complex=True).abs()
            sy = torch.stft(y, n_fft, n_fft // 4, window=w, return_complex=True).abs()
            loss = loss + (sx - sy).abs().mean()
            if bug == "log_zero_nan":
                loss = loss + (torch.log(sx) - torch.log(sy)).abs().mean()
            else:
                loss = loss + (torch.log(sx + 1e-7) - torch.log(sy + 1e-7)).abs().mean()
        return loss

    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        f0, loud, target = batch(16)
        amp, dist = model(f0, loud)
        audio = _harmonic_synth(amp, dist, f0, sr, hop)
        loss = spectral_loss(audio, target)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 3.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 50 == 0:
            print(f"step {step}: spectral loss {loss.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- AutoInt


class AutoInt(nn.Module):
    """Song et al. 2019: every field embedded, two interacting layers of multi-head
    self-attention with residual projections, a linear output on the flattened fields."""

    def __init__(self, vocab: list[int], d: int = 16, heads: int = 2, layers: int = 2):
        super().__init__()
        self.offsets = torch.tensor([0, *np.cumsum(vocab)[:-1].tolist()])
        self.emb = nn.Embedding(int(sum(vocab)), d)
        nn.init.xavier_uniform_(self.emb.weight)
        self.att = nn.ModuleList([nn.MultiheadAttention(d, heads, batch_first=True) for _ in range(layers)])
        self.res = nn.ModuleList([nn.Linear(d, d, bias=False) for _ in range(layers)])
        self.out = nn.Linear(d * len(vocab), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.emb(x + self.offsets)
        for att, res in zip(self.att, self.res, strict=True):
            a, _ = att(h, h, h, need_weights=False)
            h = F.relu(a + res(h))
        return self.out(h.flatten(1)).squeeze(1)


def _auc(score: torch.Tensor, y: torch.Tensor) -> float:
    order = score.argsort()
    ranks = torch.empty_like(order, dtype=torch.float)
    ranks[order] = torch.arange(1, len(score) + 1, dtype=torch.float)
    n_pos = y.sum()
    n_neg = len(y) - n_pos
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def autoint_ctr(path: str, epochs: int = 3, seed: int = 0, bug: str | None = None) -> list[float]:
    """Click-through prediction on a synthetic log of 10 categorical fields whose clicks come
    from pairwise field interactions; BCEWithLogitsLoss, Adam, batch 512, AUC on a held-out day
    after each epoch."""
    g = _seed(seed)
    vocab = [50, 30, 20, 100, 10, 40, 25, 60, 15, 35]
    n = 40000
    cols = torch.stack([torch.randint(0, v, (n,), generator=g) for v in vocab], 1)
    lat = [torch.randn(v, 4, generator=g) for v in vocab]
    bias = [0.7 * torch.randn(v, generator=g) for v in vocab]
    logit = (
        -1.5
        + sum(bias[i][cols[:, i]] for i in range(len(vocab))) * 0.5
        + sum(
            (lat[i][cols[:, i]] * lat[j][cols[:, j]]).sum(1) * 0.5
            for i, j in [(0, 3), (1, 7), (2, 5), (4, 9), (3, 7)]
        )
    )
    clicks = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    if bug == "shuffled_labels":  # the click column joined from the log after it was re-sorted by time
        clicks = clicks[torch.randperm(n, generator=g)]
    x_tr, y_tr, x_te, y_te = cols[:32000], clicks[:32000], cols[32000:], clicks[32000:]
    model = AutoInt(vocab)
    criterion = nn.BCEWithLogitsLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(x_tr), generator=g)
        for i in range(0, len(x_tr), 512):
            idx = perm[i : i + 512]
            loss = criterion(model(x_tr[idx]), y_tr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            auc = _auc(model(x_te), y_te)
        print(f"epoch {epoch}: loss {losses[-1]:.4f} test AUC {auc:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- logistic hazard


def logistic_hazard_survival(
    path: str, epochs: int = 40, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Discrete-time survival (Gensheimer & Narasimhan's Nnet-survival, pycox's LogisticHazard):
    follow-up cut into 20 intervals, an MLP gives one hazard logit per interval, the likelihood
    is a binary cross-entropy over the intervals each subject was at risk, with the event in the
    last one unless censored; AdamW, a validation likelihood each epoch."""
    g = _seed(seed)
    n, d, bins = 3000, 12, 20
    x = torch.randn(n, d, generator=g)
    beta = torch.randn(d, generator=g) * 0.5
    risk = x @ beta + 0.5 * torch.sin(2 * x[:, 0]) * x[:, 1]
    t_event = (-torch.log(torch.rand(n, generator=g)) / torch.exp(risk)) ** (1 / 1.5)
    t_cens = torch.rand(n, generator=g) * 3.0
    time = torch.minimum(t_event, t_cens)
    event = (t_event <= t_cens).float()
    cuts = torch.quantile(time, torch.linspace(0, 1, bins + 1))[1:-1]
    idx_t = torch.bucketize(time, cuts)
    at_risk = (torch.arange(bins) <= idx_t[:, None]).float()
    target = F.one_hot(idx_t, bins).float() * event[:, None]
    net = nn.Sequential(
        nn.Linear(d, 64), nn.ReLU(), nn.BatchNorm1d(64), nn.Dropout(0.1),
        nn.Linear(64, 64), nn.ReLU(), nn.BatchNorm1d(64), nn.Dropout(0.1),
        nn.Linear(64, bins),
    )  # fmt: skip
    if bug == "dead_relu_init":  # "start from low hazards": meant for the output bias only
        for m in net.modules():
            if isinstance(m, nn.Linear):
                nn.init.constant_(m.bias, -3.0)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-4)

    def nll(phi: torch.Tensor, tgt: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        bce = F.binary_cross_entropy_with_logits(phi, tgt, reduction="none")
        return (bce * mask).sum(1).mean()

    tr, va = torch.arange(0, 2400), torch.arange(2400, n)
    hook = Hook(path)
    hook.register_module(net)
    losses = []
    for epoch in range(epochs):
        net.train()
        perm = tr[torch.randperm(len(tr), generator=g)]
        for i in range(0, len(perm), 256):
            b = perm[i : i + 256]
            loss = nll(net(x[b]), target[b], at_risk[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        net.eval()
        with torch.no_grad():
            val = nll(net(x[va]), target[va], at_risk[va])
        if epoch % 10 == 0:
            print(f"epoch {epoch}: train {losses[-1]:.4f} val {val.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- image data


def _shapes(g: torch.Generator, n: int, size: int = 16, k: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 RGB images (n, 3, size, size) of k shapes (a filled square, a ring, a plus, a bar, a
    triangle) at random places and colours on a noisy background, with their class."""
    s = size
    yy, xx = torch.meshgrid(torch.arange(s), torch.arange(s), indexing="ij")
    y = torch.randint(0, k, (n,), generator=g)
    cy = torch.randint(5, s - 5, (n,), generator=g)
    cx = torch.randint(5, s - 5, (n,), generator=g)
    imgs = torch.empty(n, 3, s, s)
    for i in range(n):
        dy, dx = yy - cy[i], xx - cx[i]
        r = torch.sqrt((dy**2 + dx**2).float())
        c = int(y[i])
        if c == 0:
            m = (dy.abs() <= 3) & (dx.abs() <= 3)
        elif c == 1:
            m = (r > 2.0) & (r < 4.0)
        elif c == 2:
            m = ((dy.abs() <= 1) & (dx.abs() <= 4)) | ((dx.abs() <= 1) & (dy.abs() <= 4))
        elif c == 3:
            m = (dy.abs() <= 1) & (dx.abs() <= 4)
        else:
            m = (dy >= -3) & (dy <= 3) & (dx.abs() <= (dy + 3) // 2)
        colour = 0.5 + 0.5 * torch.rand(3, 1, 1, generator=g)
        imgs[i] = 0.15 * torch.rand(3, s, s, generator=g) + m.float() * colour
    return (imgs.clamp(0, 1) * 255).round().to(torch.uint8), y


# ----------------------------------------------------------------------------- manifold mixup


class MixupCNN(nn.Module):
    """A small conv net whose forward mixes the batch at one of its layers (input, after the
    first block, after the second) as in manifold mixup (Verma et al. 2019)."""

    def __init__(self, k: int = 5):
        super().__init__()
        self.blocks = nn.ModuleList([
            nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2)),
            nn.Sequential(nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2)),
            nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten()),
        ])  # fmt: skip
        self.fc = nn.Linear(64, k)

    def forward(
        self, x: torch.Tensor, mix_layer: int = -1, lam: float = 1.0, perm: torch.Tensor | None = None
    ) -> torch.Tensor:
        for i, blk in enumerate(self.blocks):
            if i == mix_layer and perm is not None:
                x = lam * x + (1 - lam) * x[perm]
            x = blk(x)
        return self.fc(x)


def manifold_mixup_shapes(path: str, epochs: int = 4, seed: int = 0, bug: str | None = None) -> list[float]:
    """Manifold mixup on RGB shapes: a layer drawn from {0, 1, 2} per batch, lambda ~ Beta(2, 2),
    the mixed cross-entropy; SGD with Nesterov momentum at lr 0.1, weight decay, MultiStepLR;
    an evaluation pass each epoch."""
    g = _seed(seed)
    imgs, y = _shapes(g, 3000)
    mean = torch.tensor([0.2, 0.2, 0.2]).view(1, 3, 1, 1)
    std = torch.tensor([0.3, 0.3, 0.3]).view(1, 3, 1, 1)
    x = (imgs.float() / 255 - mean) / std
    x_tr, y_tr, x_te, y_te = x[:2500], y[:2500], x[2500:], y[2500:]
    model = MixupCNN()
    lr = 10.0 if bug == "lr_x100" else 0.1  # lr_x100: "lr = 10" typed for "lr = 1e-1"
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [2, 3], gamma=0.1)
    criterion = nn.CrossEntropyLoss()
    beta = torch.distributions.Beta(2.0, 2.0)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for epoch in range(epochs):
        model.train()
        perm_all = torch.randperm(len(x_tr), generator=g)
        for i in range(0, len(x_tr), 64):
            idx = perm_all[i : i + 64]
            xb, yb = x_tr[idx], y_tr[idx]
            lam = float(beta.sample())
            layer = int(torch.randint(0, 3, (1,), generator=g))
            perm = torch.randperm(len(idx), generator=g)
            out = model(xb, layer, lam, perm)
            loss = lam * criterion(out, yb) + (1 - lam) * criterion(out, yb[perm])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        sched.step()
        model.eval()
        with torch.no_grad():
            acc = (model(x_te).argmax(1) == y_te).float().mean()
        print(f"epoch {epoch}: loss {losses[-1]:.4f} test acc {acc.item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- deep mutual learning


def deep_mutual_learning(path: str, steps: int = 400, seed: int = 0) -> list[float]:
    """Zhang et al. 2018: two students of different widths trained together, each on its
    cross-entropy plus KL(other's detached prediction || its own), each with its own SGD
    optimizer, stepped in turn (the second sees the first's updated prediction)."""
    g = _seed(seed)
    x, y, _ = _clusters(g, 6000, 16, 8, spread=1.6)
    x = (x - x.mean(0)) / x.std(0)
    x_tr, y_tr, x_te, y_te = x[:5000], y[:5000], x[5000:], y[5000:]
    nets = [
        nn.Sequential(nn.Linear(16, 256), nn.ReLU(), nn.Dropout(0.2), nn.Linear(256, 8)),
        nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8)),
    ]
    opts = [torch.optim.SGD(n.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4) for n in nets]
    hook = Hook(path)
    hook.register_module(nets[0], name="student1")
    hook.register_module(nets[1], name="student2")
    losses = []
    for step in range(steps):
        for n in nets:
            n.train()
        idx = torch.randint(0, len(x_tr), (128,), generator=g)
        xb, yb = x_tr[idx], y_tr[idx]
        total = 0.0
        for i in range(2):
            logits = [n(xb) for n in nets]
            other = F.softmax(logits[1 - i].detach(), 1)
            kl = F.kl_div(F.log_softmax(logits[i], 1), other, reduction="batchmean")
            loss = F.cross_entropy(logits[i], yb) + kl
            opts[i].zero_grad()
            loss.backward()
            opts[i].step()
            total += loss.item()
        losses.append(total / 2)
        if step % 100 == 99:
            accs = []
            for n in nets:
                n.eval()
                with torch.no_grad():
                    accs.append((n(x_te).argmax(1) == y_te).float().mean().item())
            print(f"step {step}: loss {total / 2:.4f} acc {accs[0]:.3f} / {accs[1]:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- outlier exposure


def outlier_exposure_ood(path: str, epochs: int = 10, seed: int = 0, bug: str | None = None) -> list[float]:
    """Hendrycks et al. 2019: a classifier trained on its in-distribution classes plus, on a batch
    of auxiliary outliers, the cross-entropy to the uniform distribution (weight 0.5); SGD Nesterov
    on a cosine schedule; an evaluation pass each epoch scores the max-softmax OOD detector."""
    g = _seed(seed)
    x, y, centres = _clusters(g, 6000, 32, 10, spread=3.0)
    pair = torch.randint(0, 10, (6000, 2), generator=g)  # near outliers: between two classes
    x_out = 0.5 * (centres[pair[:, 0]] + centres[pair[:, 1]]) + 3.0 * torch.randn(6000, 32, generator=g)
    mu, sd = x.mean(0), x.std(0)
    x, x_out = (x - mu) / sd, (x_out - mu) / sd
    x_tr, y_tr, x_te, y_te = x[:5000], y[:5000], x[5000:], y[5000:]
    o_tr, o_te = x_out[:5000], x_out[5000:]
    layers: list[nn.Module] = [
        nn.Linear(32, 256), nn.BatchNorm1d(256), nn.ReLU(),
        nn.Linear(256, 256), nn.BatchNorm1d(256), nn.ReLU(),
        nn.Linear(256, 10),
    ]  # fmt: skip
    if bug == "softmax_before_ce":  # the model returns probabilities "for the max-softmax score"
        layers.append(nn.Softmax(dim=1))
    model = nn.Sequential(*layers)
    n_batches = len(x_tr) // 128
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs * n_batches)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(x_tr), generator=g)
        perm_o = torch.randperm(len(o_tr), generator=g)
        for i in range(n_batches):
            idx, idx_o = perm[i * 128 : (i + 1) * 128], perm_o[i * 128 : (i + 1) * 128]
            out = model(torch.cat([x_tr[idx], o_tr[idx_o]]))
            loss = F.cross_entropy(out[:128], y_tr[idx])
            loss = loss + 0.5 * -(out[128:].mean(1) - torch.logsumexp(out[128:], dim=1)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            acc = (model(x_te).argmax(1) == y_te).float().mean()
            s_in = F.softmax(model(x_te), 1).max(1).values
            s_out = F.softmax(model(o_te), 1).max(1).values
            auroc = _auc(
                torch.cat([s_in, s_out]), torch.cat([torch.ones(len(s_in)), torch.zeros(len(s_out))])
            )
        if epoch % 3 == 0:
            print(f"epoch {epoch}: loss {losses[-1]:.4f} acc {acc.item():.3f} OOD AUROC {auroc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- concrete autoencoder


class ConcreteSelector(nn.Module):
    """Abid et al. 2019: k concrete (Gumbel-softmax) selector nodes over the d input features;
    the temperature is set from outside."""

    def __init__(self, d: int, k: int):
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(k, d))
        nn.init.xavier_normal_(self.logits)
        self.temperature = 10.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            u = torch.rand(self.logits.shape).clamp(1e-10, 1.0)
            w = F.softmax((self.logits - torch.log(-torch.log(u))) / self.temperature, dim=1)
        else:
            w = F.one_hot(self.logits.argmax(1), self.logits.shape[1]).float()
        return x @ w.T


def concrete_autoencoder_selection(path: str, epochs: int = 40, seed: int = 0) -> list[float]:
    """Unsupervised feature selection: pick 8 of 60 correlated features through a concrete
    selector layer and reconstruct all 60 with an MLP decoder; the temperature annealed
    exponentially from 10 to 0.01 over training, Adam at 1e-2, MSE; the discrete selection evaluated at
    the end of every epoch."""
    g = _seed(seed)
    n, d, k = 4000, 60, 8
    z = torch.randn(n, k, generator=g)
    mix = torch.randn(k, d, generator=g)
    x = z @ mix / math.sqrt(k) + 0.1 * torch.sin(z @ mix) + 0.1 * torch.randn(n, d, generator=g)
    x = (x - x.mean(0)) / x.std(0)
    x_tr, x_te = x[:3500], x[3500:]
    selector = ConcreteSelector(d, k)
    model = nn.Sequential(selector, nn.Linear(k, 128), nn.LeakyReLU(0.2), nn.Dropout(0.1), nn.Linear(128, 128),
                          nn.LeakyReLU(0.2), nn.Dropout(0.1), nn.Linear(128, d))  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    criterion = nn.MSELoss()
    n_steps, t0, t1 = epochs * (len(x_tr) // 100), 10.0, 0.01
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    step = 0
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(x_tr), generator=g)
        for i in range(0, len(x_tr) - 99, 100):
            selector.temperature = t0 * (t1 / t0) ** (step / n_steps)
            xb = x_tr[perm[i : i + 100]]
            loss = criterion(model(xb), xb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            step += 1
        model.eval()
        with torch.no_grad():
            test = criterion(model(x_te), x_te)
            chosen = selector.logits.argmax(1).unique().numel()
        if epoch % 10 == 0:
            print(
                f"epoch {epoch}: T {selector.temperature:.3f} train {losses[-1]:.4f} test {test.item():.4f} distinct {chosen}"
            )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- token data


def _tokens(g: torch.Generator, n_seq: int, length: int, vocab: int = 48) -> torch.Tensor:
    """Sequences from a sparse random bigram chain with copied spans: local and long-range
    structure for a language model to pick up."""
    trans = torch.zeros(vocab, vocab)
    for a in range(vocab):
        nxt = torch.randint(0, vocab, (3,), generator=g)
        trans[a, nxt] = torch.tensor([0.6, 0.3, 0.1])
    seqs = torch.empty(n_seq, length, dtype=torch.long)
    cur = torch.randint(0, vocab, (n_seq,), generator=g)
    for t in range(length):
        seqs[:, t] = cur
        cur = torch.multinomial(trans[cur], 1, generator=g).squeeze(1)
    span = length // 4
    src = torch.randint(0, length // 2 - span, (n_seq,), generator=g)
    for i in range(n_seq):  # the second half repeats a span of the first
        s = int(src[i])
        seqs[i, length - span :] = seqs[i, s : s + span]
    return seqs


# ----------------------------------------------------------------------------- gated CNN LM


class GatedConvLM(nn.Module):
    """Dauphin et al. 2017: causal convolutions with gated linear units, residual every layer,
    weight normalization."""

    def __init__(self, vocab: int, d: int = 64, layers: int = 4, width: int = 4):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.width = width
        self.convs = nn.ModuleList(
            [nn.utils.parametrizations.weight_norm(nn.Conv1d(d, 2 * d, width)) for _ in range(layers)]
        )
        self.out = nn.Linear(d, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens).transpose(1, 2)
        for conv in self.convs:
            h = h + F.glu(conv(F.pad(h, (self.width - 1, 0))), dim=1)
        return self.out(h.transpose(1, 2))


def gated_cnn_lm(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """A GCNN language model started from (in-script pre-trained) skip-gram-like embeddings:
    Nesterov momentum 0.99, clipping at 0.1, as in the paper; the validation perplexity every 100
    steps."""
    g = _seed(seed)
    vocab = 48
    data = _tokens(g, 600, 64, vocab)
    train, valid = data[:500], data[500:]
    model = GatedConvLM(vocab, d=32)
    with torch.no_grad():  # "pre-trained" vectors: co-occurrence SVD of the training text
        co = torch.zeros(vocab, vocab)
        co.index_put_((train[:, :-1].reshape(-1), train[:, 1:].reshape(-1)), torch.ones(train[:, 1:].numel()),
                      accumulate=True)  # fmt: skip
        u, s, _ = torch.linalg.svd(torch.log1p(co))
        model.embed.weight.copy_(u[:, :32] * s[:32].sqrt() / 4)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.99, nesterov=True)
    if bug == "frozen_by_mistake":  # left from the "keep the pre-trained embeddings fixed" variant
        model.embed.weight.requires_grad = False
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for step in range(steps):
        model.train()
        b = train[torch.randint(0, len(train), (32,), generator=g)]
        logits = model(b[:, :-1])
        loss = criterion(logits.reshape(-1, vocab), b[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            with torch.no_grad():
                v = criterion(model(valid[:, :-1]).reshape(-1, vocab), valid[:, 1:].reshape(-1))
            print(f"step {step}: loss {loss.item():.4f} valid ppl {math.exp(v.item()):.2f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- ALiBi LM


class ALiBiBlock(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class ALiBiLM(nn.Module):
    """Press et al. 2022: no position embeddings; each head adds -m * distance to its attention
    scores, with slopes m = 2^(-8h/H), and a causal mask."""

    def __init__(self, vocab: int, d: int = 64, heads: int = 4, layers: int = 2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([ALiBiBlock(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.slopes = torch.tensor([2 ** (-8 * (h + 1) / heads) for h in range(heads)])

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.shape[1]
        pos = torch.arange(t)
        dist = (pos[None, :] - pos[:, None]).float()  # j - i, <= 0 in the past
        bias = self.slopes[:, None, None] * dist
        bias = bias.masked_fill(dist > 0, float("-inf"))
        x = self.tok(tokens)
        for blk in self.blocks:
            x = blk(x, bias)
        return self.head(self.ln(x))


def alibi_lm_nadam(path: str, steps: int = 240, seed: int = 0) -> list[float]:
    """A small ALiBi decoder trained on 48-token windows and validated on 96-token ones (the
    extrapolation ALiBi is for), NAdam with a linear warm-up and linear decay, clipping at 1."""
    g = _seed(seed)
    vocab = 48
    data = _tokens(g, 600, 96, vocab)
    train, valid = data[:500], data[500:]
    model = ALiBiLM(vocab)
    opt = torch.optim.NAdam(model.parameters(), lr=2e-3, weight_decay=0.0)
    warm = 30
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, (steps - s) / (steps - warm))
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        model.train()
        b = train[torch.randint(0, len(train), (32,), generator=g)]
        start = int(torch.randint(0, 96 - 49, (1,), generator=g))
        w = b[:, start : start + 49]
        logits = model(w[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), w[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            with torch.no_grad():
                v = F.cross_entropy(model(valid[:, :-1]).reshape(-1, vocab), valid[:, 1:].reshape(-1))
            print(f"step {step}: loss {loss.item():.4f} valid (96 tokens) {v.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Koopman autoencoder


def _pendulum(g: torch.Generator, n: int, length: int, dt: float = 0.1) -> torch.Tensor:
    """Trajectories (n, length, 2) of a damped nonlinear pendulum, integrated with RK4."""

    def f(s: torch.Tensor) -> torch.Tensor:
        return torch.stack([s[:, 1], -torch.sin(s[:, 0]) - 0.05 * s[:, 1]], 1)

    s = torch.stack([(torch.rand(n, generator=g) * 2 - 1) * 2.0, (torch.rand(n, generator=g) * 2 - 1)], 1)
    out = [s]
    for _ in range(length - 1):
        k1 = f(s)
        k2 = f(s + dt / 2 * k1)
        k3 = f(s + dt / 2 * k2)
        k4 = f(s + dt * k3)
        s = s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        out.append(s)
    return torch.stack(out, 1)


class KoopmanAE(nn.Module):
    """Lusch et al. 2018, reduced: an encoder to observables where the dynamics are linear (a
    learned matrix K), a decoder back."""

    def __init__(self, latent: int = 8, hidden: int = 64):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(2, hidden), nn.ELU(), nn.Linear(hidden, hidden), nn.ELU(),
                                 nn.Linear(hidden, latent))  # fmt: skip
        self.dec = nn.Sequential(nn.Linear(latent, hidden), nn.ELU(), nn.Linear(hidden, hidden), nn.ELU(),
                                 nn.Linear(hidden, 2))  # fmt: skip
        self.K = nn.Linear(latent, latent, bias=False)
        nn.init.eye_(self.K.weight)


def koopman_autoencoder_pendulum(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Reconstruction + multi-step prediction in state space + linearity in latent space over 10
    steps ahead, a small L2 on the weights; Adam, clipping at 1."""
    g = _seed(seed)
    traj = _pendulum(g, 1200, 11)
    train, valid = traj[:1000], traj[1000:]
    model = KoopmanAE()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    horizon = 10
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        model.train()
        b = train[torch.randint(0, len(train), (64,), generator=g)]
        z = model.enc(b.reshape(-1, 2)).reshape(64, horizon + 1, -1)
        recon = F.mse_loss(model.dec(z[:, 0]), b[:, 0])
        zk, pred, lin = z[:, 0], torch.zeros(()), torch.zeros(())
        for t in range(1, horizon + 1):
            zk = model.K(zk)
            pred = pred + F.mse_loss(model.dec(zk), b[:, t])
            lin = lin + F.mse_loss(zk, z[:, t])
        l2 = sum((p**2).sum() for n, p in model.named_parameters() if "weight" in n)
        loss = recon + pred / horizon + lin / horizon + 1e-6 * l2
        if bug != "no_zero_grad":
            opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            with torch.no_grad():
                zv = model.enc(valid[:, 0])
                for _ in range(horizon):
                    zv = model.K(zv)
                err = F.mse_loss(model.dec(zv), valid[:, -1])
            print(f"step {step}: loss {loss.item():.4f} 10-step valid mse {err.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- YOLO-style detector


def _boxes_scene(g: torch.Generator, n: int, s: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    """uint8 RGB scenes (n, 3, s, s) with one object each (class 0: a filled rectangle, class 1:
    a hollow one) and its box (cx, cy, w, h in [0, 1], class)."""
    imgs = (torch.rand(n, 3, s, s, generator=g) * 40).round()
    boxes = torch.zeros(n, 5)
    yy, xx = torch.meshgrid(torch.arange(s), torch.arange(s), indexing="ij")
    for i in range(n):
        w, h = (int(v) for v in torch.randint(5, 13, (2,), generator=g))
        x0 = int(torch.randint(0, s - w + 1, (1,), generator=g))
        y0 = int(torch.randint(0, s - h + 1, (1,), generator=g))
        c = int(torch.randint(0, 2, (1,), generator=g))
        inside = (xx >= x0) & (xx < x0 + w) & (yy >= y0) & (yy < y0 + h)
        if c == 1:
            inside = inside & ~((xx >= x0 + 2) & (xx < x0 + w - 2) & (yy >= y0 + 2) & (yy < y0 + h - 2))
        colour = 120 + torch.rand(3, 1, 1, generator=g) * 135
        imgs[i] = torch.where(inside, colour, imgs[i])
        boxes[i] = torch.tensor([(x0 + w / 2) / s, (y0 + h / 2) / s, w / s, h / s, c])
    return imgs.to(torch.uint8), boxes


def yolo_grid_detector(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """YOLOv1's loss on a 3x3 grid: the cell holding an object's centre regresses its offset and
    the square roots of its size (lambda_coord 5), objectness everywhere (lambda_noobj 0.5),
    class scores in the responsible cell; SGD momentum with a warm-up epoch, an evaluation of
    mean IoU each epoch."""
    g = _seed(seed)
    grid = 3
    imgs, boxes = _boxes_scene(g, 2400)
    mean = torch.tensor([0.45, 0.45, 0.45]).view(1, 3, 1, 1)
    std = torch.tensor([0.25, 0.25, 0.25]).view(1, 3, 1, 1)

    def to_input(u8: torch.Tensor) -> torch.Tensor:
        x = u8.float() if bug == "inputs_x255" else u8.float() / 255.0  # inputs_x255: ToTensor's scaling lost
        return (x - mean) / std

    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.LeakyReLU(0.1), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.LeakyReLU(0.1), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.LeakyReLU(0.1), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 9, 256), nn.LeakyReLU(0.1), nn.Dropout(0.3),
        nn.Linear(256, grid * grid * 7),
    )  # fmt: skip

    def yolo_loss(out: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        out = out.view(-1, grid, grid, 7)
        gx = (tgt[:, 0] * grid).long().clamp(max=grid - 1)
        gy = (tgt[:, 1] * grid).long().clamp(max=grid - 1)
        obj = torch.zeros(len(tgt), grid, grid)
        obj[torch.arange(len(tgt)), gy, gx] = 1
        cell = out[torch.arange(len(tgt)), gy, gx]
        xy = torch.sigmoid(cell[:, 0:2])
        txy = torch.stack([tgt[:, 0] * grid - gx, tgt[:, 1] * grid - gy], 1)
        wh = torch.sigmoid(cell[:, 2:4])
        coord = ((xy - txy) ** 2).sum(1) + ((wh - tgt[:, 2:4].sqrt()) ** 2).sum(1)
        conf = torch.sigmoid(out[..., 4])
        obj_l = ((conf - 1) ** 2 * obj).sum((1, 2))
        noobj_l = (conf**2 * (1 - obj)).sum((1, 2))
        cls = F.cross_entropy(cell[:, 5:7], tgt[:, 4].long(), reduction="none")
        return (5.0 * coord + obj_l + 0.5 * noobj_l + cls).mean()

    tr, te = slice(0, 2000), slice(2000, 2400)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    n_batches = 2000 // 32
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    it = 0
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(2000, generator=g)
        for i in range(n_batches):
            lr = 0.01 * min(1.0, (it + 1) / n_batches)  # warm-up over the first epoch
            for group in opt.param_groups:
                group["lr"] = lr
            idx = perm[i * 32 : (i + 1) * 32]
            loss = yolo_loss(model(to_input(imgs[tr][idx])), boxes[tr][idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            it += 1
        model.eval()
        with torch.no_grad():
            out = model(to_input(imgs[te])).view(-1, grid, grid, 7)
            t = boxes[te]
            flat = torch.sigmoid(out[..., 4]).flatten(1).argmax(1)
            gy, gx = flat // grid, flat % grid
            cell = out[torch.arange(len(t)), gy, gx]
            cxy = (torch.sigmoid(cell[:, :2]) + torch.stack([gx, gy], 1)) / grid
            wh = torch.sigmoid(cell[:, 2:4]) ** 2
            lo = torch.maximum(cxy - wh / 2, t[:, :2] - t[:, 2:4] / 2)
            hi = torch.minimum(cxy + wh / 2, t[:, :2] + t[:, 2:4] / 2)
            inter = (hi - lo).clamp(min=0).prod(1)
            iou = inter / (wh.prod(1) + t[:, 2:4].prod(1) - inter)
        print(f"epoch {epoch}: loss {losses[-1]:.4f} mean IoU {iou.mean().item():.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- Poisson with exposure


class ClaimsNet(nn.Module):
    """Claim frequency: a log-rate from the policy's features, plus the log exposure as an
    offset (the GLM practice carried into a network)."""

    def __init__(self, d: int):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d, 64), nn.Tanh(), nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x: torch.Tensor, exposure: torch.Tensor) -> torch.Tensor:
        return self.body(x).squeeze(1) + torch.log(exposure)


def poisson_claims_accumulation(path: str, epochs: int = 8, seed: int = 0) -> list[float]:
    """Poisson claim counts with an exposure offset, `PoissonNLLLoss(log_input=True)`; micro-
    batches of 100 accumulated 4 at a time over a DataLoader whose last window is short (the
    loss scaled by each micro-batch's share of its window's rows), Adamax."""
    g = _seed(seed)
    n, d = 9050, 8
    x = torch.randn(n, d, generator=g)
    exposure = torch.rand(n, generator=g) * 0.9 + 0.1
    log_rate = -0.7 + 0.5 * x[:, 0] - 0.4 * x[:, 1] + 0.5 * torch.tanh(x[:, 2] * x[:, 3]) + 0.2 * x[:, 4] ** 2
    counts = torch.poisson(exposure * log_rate.exp(), generator=g)
    ds = torch.utils.data.TensorDataset(x[:8050], exposure[:8050], counts[:8050])
    loader = torch.utils.data.DataLoader(ds, batch_size=100, shuffle=True, generator=g)
    model = ClaimsNet(d)
    with torch.no_grad():
        model.body[-1].bias.fill_(math.log(counts.sum().item() / exposure.sum().item()))
    criterion = nn.PoissonNLLLoss(log_input=True)
    opt = torch.optim.Adamax(model.parameters(), lr=2e-3)
    accum = 4
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    n_batches = len(loader)
    for epoch in range(epochs):
        model.train()
        opt.zero_grad()
        window_rows = 0
        for i, (xb, eb, yb) in enumerate(loader):
            start = i - i % accum
            if i % accum == 0:
                window_rows = sum(
                    min(100, len(ds) - 100 * j) for j in range(start, min(start + accum, n_batches))
                )
            loss = criterion(model(xb, eb), yb)
            (loss * len(xb) / window_rows).backward()
            losses.append(loss.item())
            if (i + 1) % accum == 0 or i + 1 == n_batches:
                opt.step()
                opt.zero_grad()
        model.eval()
        with torch.no_grad():
            dev = 2 * (
                torch.xlogy(counts[8050:], counts[8050:]) - counts[8050:]
                - counts[8050:] * model(x[8050:], exposure[8050:]) + model(x[8050:], exposure[8050:]).exp()
            ).mean()  # fmt: skip
        print(f"epoch {epoch}: loss {losses[-1]:.4f} test deviance {dev.item():.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- RaGAN


def relativistic_gan_banana(path: str, steps: int = 2000, seed: int = 0) -> list[float]:
    """Jolicoeur-Martineau 2019: the relativistic average GAN (RaSGAN): each side's logits are
    judged relative to the mean logit of the other batch, for the discriminator and for the
    generator alike; two Adam optimizers (0.0002, betas 0.5, 0.999), a generator and a
    discriminator step in turn, on a banana-shaped 2-D distribution."""
    g = _seed(seed)
    gen = nn.Sequential(nn.Linear(8, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 2))
    disc = nn.Sequential(nn.Linear(2, 128), nn.LeakyReLU(0.2), nn.Linear(128, 128), nn.LeakyReLU(0.2),
                         nn.Linear(128, 1))  # fmt: skip
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()

    def real_batch(b: int) -> torch.Tensor:
        u = torch.randn(b, generator=g) * 1.5
        return torch.stack([u, 0.5 * u**2 - 1.0 + 0.2 * torch.randn(b, generator=g)], 1)

    hook = Hook(path)
    hook.register_module(gen, name="generator")
    hook.register_module(disc, name="discriminator")
    hook.register_loss(bce)
    losses = []
    ones, zeros = torch.ones(128, 1), torch.zeros(128, 1)
    for step in range(steps):
        real = real_batch(128)
        fake = gen(torch.randn(128, 8, generator=g))
        d_real, d_fake = disc(real), disc(fake.detach())
        loss_d = (bce(d_real - d_fake.mean(), ones) + bce(d_fake - d_real.mean(), zeros)) / 2
        opt_d.zero_grad()
        loss_d.backward()
        opt_d.step()
        d_real, d_fake = disc(real), disc(fake)
        loss_g = (bce(d_real - d_fake.mean(), zeros) + bce(d_fake - d_real.mean(), ones)) / 2
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
        losses.append(loss_g.item())
        if step % 400 == 0:
            with torch.no_grad():
                s = gen(torch.randn(2000, 8, generator=g))
                on_curve = ((s[:, 1] - (0.5 * s[:, 0] ** 2 - 1.0)).abs() < 0.4).float().mean()
            print(
                f"step {step}: D {loss_d.item():.4f} G {loss_g.item():.4f} on curve {on_curve:.2f} "
                f"x std {s[:, 0].std():.2f} (1.5)"
            )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- the pipelines

_nnpu = healthy("nnpu_nonnegative_risk_pu", "positive-unlabeled learning (nnPU)", nnpu_positive_unlabeled)
_mean_teacher = healthy(
    "mean_teacher_ema_consistency", "semi-supervised learning (mean teacher)", mean_teacher_spirals
)
_ddsp = healthy(
    "ddsp_harmonic_multiscale_spectral", "differentiable audio synthesis (DDSP)", ddsp_harmonic_resynthesis
)
_autoint = healthy("autoint_multihead_field_attention", "click-through prediction (AutoInt)", autoint_ctr)
_hazard = healthy(
    "logistic_hazard_discrete_survival", "discrete-time survival (logistic hazard)", logistic_hazard_survival
)
_mixup = healthy(
    "manifold_mixup_nesterov_multistep", "hidden-state mixup (manifold mixup)", manifold_mixup_shapes
)
_oe = healthy(
    "outlier_exposure_uniform_ce", "out-of-distribution training (outlier exposure)", outlier_exposure_ood
)
_gcnn = healthy("gated_cnn_lm_glu_nesterov", "gated convolutional language model", gated_cnn_lm)
_koopman = healthy(
    "koopman_autoencoder_multistep",
    "Koopman operator learning (deep Koopman autoencoder)",
    koopman_autoencoder_pendulum,
)
_yolo = healthy("yolo_v1_grid_loss", "single-shot grid detection (YOLOv1 loss)", yolo_grid_detector)

PIPELINES = [
    _nnpu,
    _mean_teacher,
    healthy("vat_entropy_min_power_iteration", "semi-supervised learning (VAT)", vat_entmin_semi_supervised),
    healthy("dino_centering_sharpening_ema", "self-distillation (DINO)", dino_self_distillation),
    healthy(
        "instance_discrimination_memory_bank",
        "contrastive learning with a memory bank (instance discrimination)",
        instance_discrimination_memory_bank,
    ),
    healthy("icnn_nonnegative_clamp_radam", "input-convex neural network", icnn_convex_regression),
    healthy("deep_ritz_poisson_energy", "variational PDE solver (Deep Ritz)", deep_ritz_poisson),
    _ddsp,
    _autoint,
    _hazard,
    _mixup,
    healthy(
        "deep_mutual_learning_two_students",
        "mutual distillation (deep mutual learning)",
        deep_mutual_learning,
    ),
    _oe,
    healthy(
        "concrete_autoencoder_feature_selection",
        "feature selection (concrete autoencoder)",
        concrete_autoencoder_selection,
    ),
    _gcnn,
    healthy(
        "alibi_decoder_nadam_extrapolation",
        "language model with linear attention biases (ALiBi)",
        alibi_lm_nadam,
    ),
    _koopman,
    _yolo,
    healthy(
        "poisson_exposure_offset_accumulation",
        "claim frequency (Poisson with exposure offset)",
        poisson_claims_accumulation,
    ),
    healthy("relativistic_average_gan_banana", "relativistic average GAN (RaSGAN)", relativistic_gan_banana),
    buggy(_mixup, "lr_x100"),
    buggy(_koopman, "no_zero_grad"),
    buggy(_autoint, "shuffled_labels"),
    buggy(_yolo, "inputs_x255"),
    buggy(_oe, "softmax_before_ce"),
    buggy(_hazard, "dead_relu_init"),
    buggy(_nnpu, "deep_sigmoid"),
    buggy(_gcnn, "frozen_by_mistake"),
    buggy(_ddsp, "log_zero_nan"),
    buggy(_mean_teacher, "train_in_eval_mode"),
]
