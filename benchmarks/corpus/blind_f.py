"""A blind held-out set (issue 26), part F: trainings recorded the way each tool's user records
them, of kinds and practices not yet in the corpus. Written without running mldbg's rules on
them; each was checked only from its own losses (finite, going where its kind's loss goes).

Lightning (`mldbg.lightning.DebuggerCallback`): a LightningDataModule with an RGB ResNet, SGD
Nesterov and a per-step warm-up cosine; a GRU seq2seq with value clipping; a VAE with a KL
warm-up read from `global_step`; `BackboneFinetuning` unfreezing a pretrained backbone; the
`StochasticWeightAveraging` callback. Hugging Face `Trainer` (`mldbg.transformers.
DebuggerCallback`; tiny randomly initialized configs): RoBERTa with label smoothing, ALBERT
masked LM with `DataCollatorForLanguageModeling`, BART denoising seq2seq, GPT-NeoX causal LM
with a polynomial schedule, Qwen2 with gradient checkpointing and accumulation, ELECTRA
multiple choice. Keras 3 (`mldbg.keras.Hook`): the Conv1D time-series classification example,
the convolutional denoising autoencoder, the imbalanced-classification example with
`class_weight`, a multi-input multi-output functional model with `loss_weights`. JAX: a Flax
Linen CNN with BatchNorm in a `TrainState` subclass, a Flax NNX VAE, a `lax.scan` RNN with
`optax.MultiSteps` whose statistics are computed inside the jitted step
(`mldbg.jax.statistics`). XGBoost (`mldbg.xgboost.Hook`): `XGBRanker` (rank:ndcg), Poisson
counts on a `QuantileDMatrix`, the custom softmax objective demo. Shapes of public scripts (the
README's two lines): pytorch/examples word_language_model (Transformer), imagenet, gcn (sparse
adjacency), mnist_forward_forward, regression, snli; the PyTorch spatial transformer and
char-RNN name classification tutorials; nanoGPT fine-tuning from a checkpoint; minGPT's adder
project; timm-style ViT training with mixup/cutmix, drop path and EMA; a run_glue_no_trainer
loop without accelerate.

Ten buggy twins, one per key of `BUGS`: imagenet with the ToTensor scaling dropped
(inputs_x255), gcn without the `model.train()` after evaluation (train_in_eval_mode), snli's
MLP with negative biases (dead_relu_init), the char-RNN without `rnn.zero_grad()`
(no_zero_grad), the timm-style ViT at lr 0.1 (lr_x100), minGPT taking the softmax before the
cross-entropy (softmax_before_ce), the run_glue loop with embeddings frozen after the
optimizer was built (frozen_by_mistake), RoBERTa with shuffled labels (shuffled_labels), the
Lightning VAE taking the log of a ReLU'd std squared (log_zero_nan), the Lightning SWA
regressor with 8 sigmoid layers (deep_sigmoid).

A pipeline whose framework is not installed is left out of `PIPELINES`. Every framework is
imported inside its pipeline, so importing this module costs only torch. `SPLIT = BLIND3`.
"""

from __future__ import annotations

import copy
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

from . import BLIND3, buggy, healthy, installed

SPLIT = BLIND3

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 29)


def _rgb_objects(
    g: torch.Generator, n: int, size: int = 16, classes: int = 10, plain: bool = False, proto_seed: int = 4321
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 3, size, size) colour images in [0, 1]: each class a smooth random texture with its
    own tint, pasted at a random offset on a noisy background of random colour; and labels.
    `plain`: white objects on black, one channel. `proto_seed` draws another set of classes."""
    pg = torch.Generator().manual_seed(proto_seed)
    shapes = F.avg_pool2d(torch.rand(classes, 1, size, size, generator=pg), 5, 1, 2)
    cut = shapes.flatten(1).quantile(0.7, dim=1).view(classes, 1, 1, 1)
    shapes = ((shapes - cut) * 30).sigmoid()
    tint = 0.3 + 0.7 * torch.rand(classes, 3, 1, 1, generator=pg)
    y = torch.randint(0, classes, (n,), generator=g)
    shift = torch.randint(-2, 3, (n, 2), generator=g)
    obj = torch.stack(
        [torch.roll(shapes[c], (int(a), int(b)), (1, 2)) for c, (a, b) in zip(y, shift, strict=True)]
    )
    if plain:
        return (obj + 0.05 * torch.randn(obj.shape, generator=g)).clamp(0, 1), y
    background = 0.5 * torch.rand(n, 3, 1, 1, generator=g)
    x = background * (1 - obj) + obj * tint[y] + 0.08 * torch.randn(n, 3, size, size, generator=g)
    return x.clamp(0, 1), y


def _markov_tokens(g: torch.Generator, n: int, vocab: int, order_seed: int = 5) -> torch.Tensor:
    """A token stream from a sparse random first-order Markov chain (each token has 3 likely
    successors, 10% uniform noise)."""
    pg = torch.Generator().manual_seed(order_seed)
    nxt = torch.randint(0, vocab, (vocab, 3), generator=pg)
    r = torch.rand(n, generator=g)
    u = torch.randint(0, vocab, (n,), generator=g)
    k = torch.randint(0, 3, (n,), generator=g)
    out = np.empty(n, dtype=np.int64)
    nxt_np, r_np, u_np, k_np = nxt.numpy(), r.numpy(), u.numpy(), k.numpy()
    t = int(u_np[0])
    for i in range(n):
        t = int(u_np[i]) if r_np[i] < 0.1 else int(nxt_np[t, k_np[i]])
        out[i] = t
    return torch.from_numpy(out)


def _sensor_windows(
    g: torch.Generator, n: int, length: int, classes: int = 3
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, length) univariate windows of three kinds (a slow sine, a square wave, a decaying
    burst) with random phase, amplitude and noise; and their kind."""
    y = torch.randint(0, classes, (n,), generator=g)
    t = torch.arange(length).float()[None]
    period = 12 + 12 * torch.rand(n, 1, generator=g)
    phase = 2 * math.pi * torch.rand(n, 1, generator=g)
    amp = 0.5 + torch.rand(n, 1, generator=g)
    wave = torch.sin(2 * math.pi * t / period + phase)
    square = torch.sign(wave)
    start = torch.randint(0, length // 2, (n, 1), generator=g).float()
    burst = torch.where(t >= start, torch.exp(-(t - start) / 8) * torch.sin(t - start), torch.zeros(1))
    s = torch.where(y[:, None] == 0, wave, torch.where(y[:, None] == 1, square, 2 * burst))
    return amp * s + 0.3 * torch.randn(n, length, generator=g), y


# ============================================================================= shapes of public PyTorch scripts


class _PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 512) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0).transpose(0, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(x + self.pe[: x.size(0), :])


class _TransformerModel(nn.Module):
    """pytorch/examples word_language_model's TransformerModel: sequence-first, a square
    subsequent mask, embeddings scaled by sqrt(ninp), uniform(-0.1, 0.1) init, log_softmax."""

    def __init__(self, ntoken: int, ninp: int, nhead: int, nhid: int, nlayers: int, dropout: float) -> None:
        super().__init__()
        self.pos_encoder = _PositionalEncoding(ninp, dropout)
        layer = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        nn.init.uniform_(self.input_emb.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, src: torch.Tensor) -> torch.Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(len(src))
        src = self.pos_encoder(self.input_emb(src) * math.sqrt(self.ninp))
        output = self.transformer_encoder(src, mask, is_causal=True)
        return F.log_softmax(self.decoder(output), dim=-1)


def pytorch_examples_word_lm_transformer(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """pytorch/examples word_language_model/main.py with `--model Transformer --lr 5`: batchify
    into 20 columns, bptt 35, `nn.NLLLoss` on log-probabilities, `model.zero_grad()`,
    `clip_grad_norm_(0.25)`, the update by hand (`p.data.add_(p.grad, alpha=-lr)`), the lr
    divided by 4 when the validation loss does not improve; a Zipf-like word stream."""
    g = _seed(seed)
    ntokens, bptt, batch_size = 200, 35, 20
    stream = _markov_tokens(g, 26000, ntokens, order_seed=31)
    stream = (stream * 7) % ntokens  # scatter the frequent words over the vocabulary

    def batchify(data: torch.Tensor, bsz: int) -> torch.Tensor:
        nbatch = data.size(0) // bsz
        return data[: nbatch * bsz].view(bsz, -1).t().contiguous()

    train_data = batchify(stream[:22000], batch_size)
    val_data = batchify(stream[22000:], 10)

    def get_batch(source: torch.Tensor, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        seq_len = min(bptt, len(source) - 1 - i)
        return source[i : i + seq_len], source[i + 1 : i + 1 + seq_len].reshape(-1)

    model = _TransformerModel(ntokens, 64, 2, 128, 2, 0.2)
    criterion = nn.NLLLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    lr, clip = 5.0, 0.25
    best_val: float | None = None
    losses = []
    for _epoch in range(epochs):
        model.train()
        for i in range(0, train_data.size(0) - 1, bptt):
            data, targets = get_batch(train_data, i)
            model.zero_grad()
            output = model(data)
            loss = criterion(output.view(-1, ntokens), targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            losses.append(loss.item())
        model.eval()
        total = 0.0
        with torch.no_grad():
            for i in range(0, val_data.size(0) - 1, bptt):
                data, targets = get_batch(val_data, i)
                total += len(data) * criterion(model(data).view(-1, ntokens), targets).item()
        val_loss = total / (len(val_data) - 1)
        if best_val is None or val_loss < best_val:
            best_val = val_loss
        else:
            lr /= 4.0
    hook.close()
    return losses


class _Bottleneck(nn.Module):
    expansion = 2

    def __init__(self, cin: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        out = planes * self.expansion
        self.downsample = (
            nn.Sequential(nn.Conv2d(cin, out, 1, stride, bias=False), nn.BatchNorm2d(out))
            if stride != 1 or cin != out
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


def pytorch_examples_imagenet(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """pytorch/examples imagenet/main.py in miniature: a bottleneck ResNet, `nn.CrossEntropyLoss`
    as `criterion`, SGD(0.1, momentum 0.9, weight decay 1e-4), StepLR (the script's 30 of 90
    epochs: 2 of 6, gamma 0.1), ImageNet's Normalize(mean, std) after ToTensor, random crops
    with padding and horizontal flips, `validate()` under `model.eval()` each epoch,
    AverageMeter of the loss."""
    g = _seed(seed)
    images, y = _rgb_objects(g, 1536, size=16)
    pixels = (images * 255).round().to(torch.uint8)  # what the JPEG decoder gives
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)

    def transform(batch: torch.Tensor, train: bool) -> torch.Tensor:
        x = batch.float() if bug == "inputs_x255" else batch.float() / 255  # ToTensor()
        if train:  # RandomResizedCrop-like: a padded random crop, then RandomHorizontalFlip
            x = F.pad(x, (2, 2, 2, 2), mode="reflect")
            i, j = (int(v) for v in torch.randint(0, 5, (2,)))
            x = x[:, :, i : i + 16, j : j + 16]
            flip = torch.rand(len(x), 1, 1, 1) < 0.5
            x = torch.where(flip, x.flip(3), x)
        return (x - mean) / std

    class ResNet(nn.Module):
        def __init__(self, num_classes: int = 10) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(16)
            self.relu = nn.ReLU(inplace=True)
            self.layer1 = _Bottleneck(16, 16, 1)
            self.layer2 = _Bottleneck(32, 32, 2)
            self.layer3 = _Bottleneck(64, 64, 2)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(128, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.relu(self.bn1(self.conv1(x)))
            x = self.layer3(self.layer2(self.layer1(x)))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    model = ResNet()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), 0.1, momentum=0.9, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    train_loader = DataLoader(TensorDataset(pixels[:1280], y[:1280]), batch_size=64, shuffle=True)
    val_loader = DataLoader(TensorDataset(pixels[1280:], y[1280:]), batch_size=128)
    losses = []
    for _epoch in range(epochs):
        model.train()
        loss_sum, count = 0.0, 0  # AverageMeter("Loss")
        for images_u8, target in train_loader:
            output = model(transform(images_u8, True))
            loss = criterion(output, target)
            loss_sum += loss.item() * len(target)
            count += len(target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            for images_u8, target in val_loader:
                criterion(model(transform(images_u8, False)), target)
        scheduler.step()
    hook.close()
    return losses


def pytorch_examples_gcn_sparse(
    path: str, epochs: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    """pytorch/examples gcn/main.py on a Cora-like citation graph (a stochastic block model with
    bag-of-words features): the renormalized adjacency D^-1/2 (A + I) D^-1/2 as a sparse tensor,
    `torch.sparse.mm` in each GraphConv, 2 layers of 16 hidden units, dropout 0.5, Adam(0.01,
    weight decay 5e-4), 200 full-batch epochs, NLL on the 140 labelled nodes, an evaluation on
    the validation nodes after each epoch under `model.eval()`."""
    g = _seed(seed)
    n, classes, words = 600, 7, 300
    y = torch.randint(0, classes, (n,), generator=g)
    same = y[:, None] == y[None, :]
    p = torch.where(same, 0.02, 0.0015)
    a = (torch.rand(n, n, generator=g) < p).float().triu(1)
    a = a + a.t()
    topic = torch.rand(classes, words, generator=torch.Generator().manual_seed(3)) < 0.08
    x = (torch.rand(n, words, generator=g) < 0.02) | (topic[y] & (torch.rand(n, words, generator=g) < 0.3))
    x = x.float()
    x = x / x.sum(1, keepdim=True).clamp_min(1)  # row-normalized features
    a_hat = a + torch.eye(n)
    d = a_hat.sum(1).pow(-0.5)
    adj = (d[:, None] * a_hat * d[None, :]).to_sparse()
    idx = torch.randperm(n, generator=g)
    idx_train, idx_val = idx[:140], idx[140:440]

    class GraphConv(nn.Module):
        def __init__(self, cin: int, cout: int) -> None:
            super().__init__()
            self.kernel = nn.Parameter(torch.empty(cin, cout))
            self.bias = nn.Parameter(torch.zeros(cout))
            nn.init.xavier_normal_(self.kernel)

        def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
            return torch.sparse.mm(adj, x @ self.kernel) + self.bias

    class GCN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gc1 = GraphConv(words, 16)
            self.gc2 = GraphConv(16, classes)
            self.dropout = nn.Dropout(0.5)

        def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
            x = self.dropout(x)
            x = F.relu(self.gc1(x, adj))
            x = self.dropout(x)
            return F.log_softmax(self.gc2(x, adj), dim=1)

    model = GCN()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        if bug != "train_in_eval_mode" or epoch == 0:  # the model.train() at the top of train(), lost
            model.train()
        optimizer.zero_grad()
        output = model(x, adj)
        loss = F.nll_loss(output[idx_train], y[idx_train])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            F.nll_loss(model(x, adj)[idx_val], y[idx_val])
    hook.close()
    return losses


def pytorch_examples_forward_forward(
    path: str, epochs: int = 150, seed: int = 0, bug: str | None = None
) -> list[float]:
    """pytorch/examples mnist_forward_forward/main.py: Hinton's forward-forward algorithm. Each
    Linear+ReLU layer has its own Adam(0.03) and is trained alone, full batch, on the goodness
    loss `log(1 + exp([-g_pos + threshold, g_neg - threshold])).mean()` with threshold 2;
    positive data carries the true label one-hot in its first pixels, negative data a wrong
    one; the inputs are L2-normalized before each layer. Layer 1 trains for its epochs, then
    layer 2 on layer 1's outputs."""
    g = _seed(seed)
    images, y = _rgb_objects(g, 1024, size=8)
    x = ((images - 0.3) / 0.3).flatten(1)

    def overlay_y_on_x(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x_ = x.clone()
        x_[:, :10] *= 0.0
        x_[range(x.shape[0]), y] = x.max()
        return x_

    class Layer(nn.Linear):
        def __init__(self, in_features: int, out_features: int) -> None:
            super().__init__(in_features, out_features)
            self.relu = nn.ReLU()
            self.opt = torch.optim.Adam(self.parameters(), lr=0.03)
            self.threshold = 2.0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
            return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

        def train_layer(self, x_pos: torch.Tensor, x_neg: torch.Tensor, losses: list[float]) -> Any:
            for _i in range(epochs):
                g_pos = self.forward(x_pos).pow(2).mean(1)
                g_neg = self.forward(x_neg).pow(2).mean(1)
                loss = torch.log(
                    1 + torch.exp(torch.cat([-g_pos + self.threshold, g_neg - self.threshold]))
                ).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                losses.append(loss.item())
            return self.forward(x_pos).detach(), self.forward(x_neg).detach()

    class Net(nn.Module):
        def __init__(self, dims: list[int]) -> None:
            super().__init__()
            self.layers = nn.ModuleList([Layer(dims[d], dims[d + 1]) for d in range(len(dims) - 1)])

        def train_net(self, x_pos: torch.Tensor, x_neg: torch.Tensor) -> list[float]:
            losses: list[float] = []
            h_pos, h_neg = x_pos, x_neg
            for layer in self.layers:
                h_pos, h_neg = layer.train_layer(h_pos, h_neg, losses)
            return losses

    net = Net([x.shape[1], 128, 128])
    hook = Hook(path)
    hook.register_module(net)
    x_pos = overlay_y_on_x(x, y)
    rnd = torch.randperm(x.size(0), generator=g)
    x_neg = overlay_y_on_x(x, y[rnd])
    losses = net.train_net(x_pos, x_neg)
    hook.close()
    return losses


def pytorch_examples_regression(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """pytorch/examples regression/main.py: fit a degree-4 polynomial with one `nn.Linear(4, 1)`
    on features [x, x^2, x^3, x^4], batches of 32 fresh samples, `F.smooth_l1_loss`,
    `fc.zero_grad()`, the update by hand (`param.add_(-0.1 * param.grad)`), until the loss
    falls under 1e-3 (at most 2000 batches)."""
    _seed(seed)
    poly_degree = 4
    w_target = torch.randn(poly_degree, 1) * 5
    b_target = torch.randn(1) * 5

    def make_features(x: torch.Tensor) -> torch.Tensor:
        x = x.unsqueeze(1)
        return torch.cat([x**i for i in range(1, poly_degree + 1)], 1)

    def get_batch(batch_size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
        random = torch.randn(batch_size)
        x = make_features(random)
        return x, x.mm(w_target) + b_target.item()

    fc = torch.nn.Linear(w_target.size(0), 1)
    hook = Hook(path)
    hook.register_module(fc)
    losses = []
    for _batch_idx in range(2000):
        batch_x, batch_y = get_batch()
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        for param in fc.parameters():
            param.data.add_(-0.1 * param.grad)
        losses.append(loss)
        if loss < 1e-3:
            break
    hook.close()
    return losses


def pytorch_examples_snli(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """pytorch/examples snli/train.py: an embedding with a ReLU projection, one shared
    bidirectional LSTM encoder for premise and hypothesis, the features [p, h, p - h, p * h]
    into a ReLU MLP with dropout, `nn.CrossEntropyLoss`, Adam(1e-3), batch 128, dev accuracy
    every few iterations; a synthetic entailment / neutral / contradiction task on token ids
    (the hypothesis copies part of the premise, adds unrelated words, or negates it)."""
    g = _seed(seed)
    n, length, vocab = 3072, 12, 120
    neg = 1
    premise = torch.randint(10, vocab, (n, length), generator=g)
    y = torch.randint(0, 3, (n,), generator=g)  # 0 entailment, 1 neutral, 2 contradiction
    hyp = torch.randint(10, vocab, (n, length), generator=g)
    keep = torch.rand(n, length, generator=g) < 0.6
    copied = torch.where(keep, premise[:, torch.randperm(length, generator=g)], hyp)
    hyp = torch.where((y == 1)[:, None], hyp, copied)
    cue = torch.rand(n, generator=g)  # cue words, not always there, sometimes misleading
    hyp[:, 0] = torch.where(((y == 2) & (cue < 0.75)) | (cue > 0.95), neg, hyp[:, 0])  # "not"
    other = torch.randint(2, 10, (n,), generator=g)  # a word of a new topic
    hyp[:, 1] = torch.where(((y == 1) & (cue < 0.7)) | (cue > 0.92), other, hyp[:, 1])

    class Encoder(nn.Module):
        def __init__(self, d_proj: int, d_hidden: int) -> None:
            super().__init__()
            self.rnn = nn.LSTM(d_proj, d_hidden, num_layers=1, batch_first=True, bidirectional=True)

        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            _, (ht, _) = self.rnn(inputs)
            return ht[-2:].transpose(0, 1).contiguous().view(inputs.size(0), -1)

    class SNLIClassifier(nn.Module):
        def __init__(self, d_embed: int = 64, d_proj: int = 64, d_hidden: int = 64) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, d_embed)
            self.projection = nn.Linear(d_embed, d_proj)
            self.encoder = Encoder(d_proj, d_hidden)
            self.dropout = nn.Dropout(p=0.2)
            self.relu = nn.ReLU()
            seq_in_size = 4 * 2 * d_hidden
            lin_config = [seq_in_size] * 2
            self.out = nn.Sequential(
                nn.Linear(*lin_config), self.relu, self.dropout,
                nn.Linear(*lin_config), self.relu, self.dropout,
                nn.Linear(seq_in_size, 3),
            )  # fmt: skip
            if bug == "dead_relu_init":  # "start the MLP sparse": a negative bias on its hidden units
                for m in list(self.out)[:-1]:
                    if isinstance(m, nn.Linear):
                        nn.init.constant_(m.bias, -2.0)

        def forward(self, premise: torch.Tensor, hypothesis: torch.Tensor) -> torch.Tensor:
            prem = self.relu(self.projection(self.embed(premise)))
            hypo = self.relu(self.projection(self.embed(hypothesis)))
            p, h = self.encoder(prem), self.encoder(hypo)
            return self.out(torch.cat([p, h, p - h, p * h], 1))

    model = SNLIClassifier()
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    train = DataLoader(TensorDataset(premise[:2816], hyp[:2816], y[:2816]), batch_size=128, shuffle=True)
    losses = []
    iterations = 0
    for _epoch in range(epochs):
        for p_batch, h_batch, label in train:
            model.train()
            opt.zero_grad()
            iterations += 1
            answer = model(p_batch, h_batch)
            loss = criterion(answer, label)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if iterations % 10 == 0:  # dev_every
                model.eval()
                with torch.no_grad():
                    criterion(model(premise[2816:], hyp[2816:]), y[2816:])
    hook.close()
    return losses


def pytorch_tutorial_spatial_transformer(
    path: str, epochs: int = 22, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The PyTorch "Spatial Transformer Networks" tutorial: a localization net regressing a 2x3
    affine matrix (its last layer initialized to the identity transform), `F.affine_grid` and
    `F.grid_sample`, then a LeNet-like classifier with Dropout2d, `F.log_softmax` + `F.nll_loss`,
    SGD(lr 0.01), batch 64; objects randomly rotated, scaled and shifted."""
    g = _seed(seed)
    x, y = _rgb_objects(g, 1792, size=16, plain=True)
    angle = (torch.rand(len(x), generator=g) - 0.5) * math.pi / 3
    scale = 0.9 + 0.2 * torch.rand(len(x), generator=g)
    shift = (torch.rand(len(x), 2, generator=g) - 0.5) * 0.3
    theta = torch.stack(
        [
            torch.stack([scale * torch.cos(angle), -scale * torch.sin(angle), shift[:, 0]], 1),
            torch.stack([scale * torch.sin(angle), scale * torch.cos(angle), shift[:, 1]], 1),
        ],
        1,
    )
    x = F.grid_sample(x, F.affine_grid(theta, list(x.shape), align_corners=False), align_corners=False)
    x = (x - 0.1307) / 0.3081

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 10, kernel_size=3, padding=1)
            self.conv2 = nn.Conv2d(10, 20, kernel_size=3, padding=1)
            self.conv2_drop = nn.Dropout2d()
            self.fc1 = nn.Linear(20 * 4 * 4, 50)
            self.fc2 = nn.Linear(50, 10)
            self.localization = nn.Sequential(
                nn.Conv2d(1, 8, kernel_size=5, padding=2), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
                nn.Conv2d(8, 10, kernel_size=3, padding=1), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
            )  # fmt: skip
            self.fc_loc = nn.Sequential(nn.Linear(10 * 4 * 4, 32), nn.ReLU(True), nn.Linear(32, 3 * 2))
            self.fc_loc[2].weight.data.zero_()
            self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

        def stn(self, x: torch.Tensor) -> torch.Tensor:
            xs = self.localization(x).view(-1, 10 * 4 * 4)
            theta = self.fc_loc(xs).view(-1, 2, 3)
            grid = F.affine_grid(theta, list(x.size()), align_corners=False)
            return F.grid_sample(x, grid, align_corners=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.stn(x)
            x = F.relu(F.max_pool2d(self.conv1(x), 2))
            x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
            x = x.view(-1, 20 * 4 * 4)
            x = F.relu(self.fc1(x))
            x = F.dropout(x, training=self.training)
            return F.log_softmax(self.fc2(x), dim=1)

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    hook = Hook(path)
    hook.register_module(model)
    train_loader = DataLoader(TensorDataset(x[:1536], y[:1536]), batch_size=64, shuffle=True)
    losses = []
    for _epoch in range(epochs):
        model.train()
        for data, target in train_loader:
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            F.nll_loss(model(x[1536:]), y[1536:], reduction="sum")
    hook.close()
    return losses


def pytorch_tutorial_char_rnn_names(
    path: str, n_iters: int = 3000, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The PyTorch "Classifying names with a character-level RNN" tutorial: an RNN written by
    hand (i2h and h2o on the concatenated input and hidden, LogSoftmax), one-hot letters fed one
    at a time, ONE name per step drawn at random (category, then a name), `nn.NLLLoss`,
    `rnn.zero_grad()`, the update by hand (`p.data.add_(p.grad.data, alpha=-0.005)`); names of
    five made-up languages from their own letter chains."""
    g = _seed(seed)
    letters = "abcdefghijklmnopqrstuvwxyz'"
    n_letters, n_categories = len(letters), 5
    chains = []
    for c in range(n_categories):
        pg = torch.Generator().manual_seed(700 + c)
        logits = 3 * torch.randn(n_letters + 1, n_letters, generator=pg)  # row n_letters: the first letter
        chains.append(torch.softmax(logits, 1))

    def random_name(c: int) -> str:
        length = int(torch.randint(3, 9, (1,), generator=g))
        prev, out = n_letters, []
        for _ in range(length):
            prev = int(torch.multinomial(chains[c][prev], 1, generator=g))
            out.append(letters[prev])
        return "".join(out)

    def line_to_tensor(line: str) -> torch.Tensor:
        tensor = torch.zeros(len(line), 1, n_letters)
        for li, letter in enumerate(line):
            tensor[li][0][letters.find(letter)] = 1
        return tensor

    class RNN(nn.Module):
        def __init__(self, input_size: int, hidden_size: int, output_size: int) -> None:
            super().__init__()
            self.hidden_size = hidden_size
            self.i2h = nn.Linear(input_size + hidden_size, hidden_size)
            self.h2o = nn.Linear(input_size + hidden_size, output_size)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, input: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            combined = torch.cat((input, hidden), 1)
            hidden = self.i2h(combined)
            output = self.softmax(self.h2o(combined))
            return output, hidden

        def init_hidden(self) -> torch.Tensor:
            return torch.zeros(1, self.hidden_size)

    rnn = RNN(n_letters, 128, n_categories)
    criterion = nn.NLLLoss()
    hook = Hook(path)
    hook.register_module(rnn)
    hook.register_loss(criterion)
    learning_rate = 0.005
    losses = []
    for _iter in range(n_iters):
        category = int(torch.randint(0, n_categories, (1,), generator=g))
        line_tensor = line_to_tensor(random_name(category))
        category_tensor = torch.tensor([category], dtype=torch.long)
        hidden = rnn.init_hidden()
        if bug != "no_zero_grad":
            rnn.zero_grad()
        for i in range(line_tensor.size()[0]):
            output, hidden = rnn(line_tensor[i], hidden)
        loss = criterion(output, category_tensor)
        loss.backward()
        for p in rnn.parameters():
            p.data.add_(p.grad.data, alpha=-learning_rate)
        losses.append(loss.item())
    hook.close()
    return losses


class _CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, dropout: float, bias: bool) -> None:
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head = n_head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class _GPTBlock(nn.Module):
    def __init__(self, n_embd: int, n_head: int, dropout: float, bias: bool) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = _CausalSelfAttention(n_embd, n_head, dropout, bias)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.ModuleDict(
            {
                "c_fc": nn.Linear(n_embd, 4 * n_embd, bias=bias),
                "c_proj": nn.Linear(4 * n_embd, n_embd, bias=bias),
                "act": nn.GELU(approximate="tanh"),
                "dropout": nn.Dropout(dropout),
            }
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        m = self.mlp
        return x + m.dropout(m.c_proj(m.act(m.c_fc(self.ln_2(x)))))


class _GPT(nn.Module):
    """The GPT of minGPT / nanoGPT (they share it): learned positions, pre-LN blocks, N(0, 0.02)
    init with every c_proj scaled by 1/sqrt(2 n_layer), `forward(idx, targets)` returning
    (logits, loss) with `ignore_index=-1`. `probs_out` (a mistake): the head's softmax is
    taken before the cross-entropy."""

    def __init__(
        self, vocab: int, block: int, n_layer: int, n_head: int, n_embd: int, dropout: float = 0.1,
        bias: bool = True, tie: bool = False, probs_out: bool = False,
    ) -> None:  # fmt: skip
        super().__init__()
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(vocab, n_embd),
                "wpe": nn.Embedding(block, n_embd),
                "drop": nn.Dropout(dropout),
                "h": nn.ModuleList([_GPTBlock(n_embd, n_head, dropout, bias) for _ in range(n_layer)]),
                "ln_f": nn.LayerNorm(n_embd),
            }
        )
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        if tie:
            self.transformer.wte.weight = self.lm_head.weight
        self.probs_out = probs_out
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> tuple[torch.Tensor, Any]:
        t = idx.size(1)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t)))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        if self.probs_out:
            logits = F.softmax(logits, dim=-1)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


def nanogpt_finetune_from_checkpoint(
    path: str, max_iters: int = 150, seed: int = 0, bug: str | None = None
) -> list[float]:
    """nanoGPT's config/finetune_shakespeare.py shape: `init_from` a checkpoint (here one
    pretrained in-process on another token chain, saved and loaded as ckpt.pt, not recorded),
    then train.py's loop on the new data: constant lr (`decay_lr = False`) 1e-4, AdamW betas
    (0.9, 0.95), weight decay 0.1 on matrices, `gradient_accumulation_steps = 4` with the loss
    divided by it, a `GradScaler` (enabled only for float16, so a no-op here), `scaler.unscale_`
    then `clip_grad_norm_(1.0)`, `estimate_loss()` every 25 iterations, `lossf = loss.item() *
    gradient_accumulation_steps`."""
    g = _seed(seed)
    vocab, block, batch_size, accum = 64, 32, 8, 4
    pretrain = _markov_tokens(g, 30000, vocab, order_seed=41)
    data = _markov_tokens(g, 30000, vocab, order_seed=42)
    train_data, val_data = data[:27000], data[27000:]

    def get_batch(source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ix = torch.randint(len(source) - block, (batch_size,), generator=g)
        return (
            torch.stack([source[i : i + block] for i in ix]),
            torch.stack([source[i + 1 : i + 1 + block] for i in ix]),
        )

    model_args = {
        "vocab": vocab,
        "block": block,
        "n_layer": 2,
        "n_head": 4,
        "n_embd": 64,
        "dropout": 0.0,
        "tie": True,
    }
    # the checkpoint being fine-tuned: a short pretraining run on other data
    base = _GPT(**model_args)
    opt = torch.optim.AdamW(base.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    for _ in range(150):
        _, loss = base(*get_batch(pretrain))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    os.makedirs(path, exist_ok=True)
    ckpt_path = os.path.join(path, "ckpt.pt")
    torch.save({"model": base.state_dict(), "model_args": model_args}, ckpt_path)
    del base, opt

    checkpoint = torch.load(ckpt_path, map_location="cpu")
    model = _GPT(**checkpoint["model_args"])
    model.load_state_dict(checkpoint["model"])
    os.remove(ckpt_path)
    learning_rate = 1e-4
    param_dict = {pn: p for pn, p in model.named_parameters() if p.requires_grad}
    decay_params = [p for p in param_dict.values() if p.dim() >= 2]
    nodecay_params = [p for p in param_dict.values() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay_params, "weight_decay": 0.1}, {"params": nodecay_params, "weight_decay": 0.0}],
        lr=learning_rate, betas=(0.9, 0.95),
    )  # fmt: skip
    dtype = "float32"  # no bfloat16/float16 autocast on this CPU run
    scaler = torch.amp.GradScaler("cpu", enabled=(dtype == "float16"))
    hook = Hook(path)
    hook.register_module(model)

    @torch.no_grad()
    def estimate_loss() -> dict[str, float]:
        out = {}
        model.eval()
        for split, source in (("train", train_data), ("val", val_data)):
            out[split] = float(torch.stack([model(*get_batch(source))[1] for _ in range(4)]).mean())
        model.train()
        return out

    losses = []
    x, y = get_batch(train_data)
    for iter_num in range(max_iters):
        if iter_num % 25 == 0:
            estimate_loss()
        for _micro_step in range(accum):
            _, loss = model(x, y)
            loss = loss / accum
            x, y = get_batch(train_data)
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item() * accum)
    hook.close()
    return losses


def mingpt_adder(path: str, max_iters: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """minGPT's projects/adder: 2-digit additions a + b = c written as digit tokens (the sum
    reversed), the loss masked with -1 on the operands, 'gpt-nano' (3 layers, 3 heads, 48
    dims), minGPT's Trainer: AdamW lr 5e-4 betas (0.9, 0.95), weight decay 0.1 on Linear
    weights only, batch 64, `model.zero_grad(set_to_none=True)`, `clip_grad_norm_(1.0)`, an
    `on_batch_end` callback that evaluates on the held-out additions every 100 iterations."""
    g = _seed(seed)
    ndigit = 2
    num = (10**ndigit) ** 2
    perm = torch.randperm(num, generator=g)
    num_test = min(int(num * 0.2), 500)
    train_idx, test_idx = perm[num_test:], perm[:num_test]

    def encode(idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        nd = 10**ndigit
        a, b = idx // nd, idx % nd
        c = a + b
        rows = []
        for ai, bi, ci in zip(a.tolist(), b.tolist(), c.tolist(), strict=True):
            astr, bstr = f"{ai:0{ndigit}d}", f"{bi:0{ndigit}d}"
            cstr = f"{ci:0{ndigit + 1}d}"[::-1]
            rows.append([int(s) for s in astr + bstr + cstr])
        dix = torch.tensor(rows)
        x, y = dix[:, :-1].clone(), dix[:, 1:].clone()
        y[:, : ndigit * 2 - 1] = -1
        return x, y

    x_train, y_train = encode(train_idx)
    x_test, y_test = encode(test_idx)
    model = _GPT(
        10, 3 * ndigit, n_layer=3, n_head=3, n_embd=48, dropout=0.1, probs_out=bug == "softmax_before_ce"
    )
    decay, no_decay = set(), set()
    for mn, m in model.named_modules():
        for pn, _p in m.named_parameters(recurse=False):
            fpn = f"{mn}.{pn}" if mn else pn
            if pn.endswith("weight") and isinstance(m, nn.Linear):
                decay.add(fpn)
            else:
                no_decay.add(fpn)
    param_dict = dict(model.named_parameters())
    optimizer = torch.optim.AdamW(
        [
            {"params": [param_dict[pn] for pn in sorted(decay)], "weight_decay": 0.1},
            {"params": [param_dict[pn] for pn in sorted(no_decay)], "weight_decay": 0.0},
        ],
        lr=5e-4, betas=(0.9, 0.95),
    )  # fmt: skip
    hook = Hook(path)
    hook.register_module(model)
    loader = DataLoader(
        TensorDataset(x_train, y_train), batch_size=64,
        sampler=torch.utils.data.RandomSampler(TensorDataset(x_train), replacement=True, num_samples=10**6),
    )  # fmt: skip

    def on_batch_end(iter_num: int) -> None:
        if iter_num % 100 == 0:
            model.eval()
            with torch.no_grad():
                model(x_test, y_test)
            model.train()

    losses = []
    model.train()
    data_iter = iter(loader)
    for iter_num in range(max_iters):
        x, y = next(data_iter)
        _logits, loss = model(x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        on_batch_end(iter_num)
    hook.close()
    return losses


class _DropPath(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.p == 0.0 or not self.training:
            return x
        keep = 1 - self.p
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
        return x * mask / keep


class _ViTBlock(nn.Module):
    def __init__(self, dim: int, heads: int, drop_path: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.drop_path1 = _DropPath(drop_path)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.drop_path2 = _DropPath(drop_path)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.drop_path1(self.attn(h, h, h, need_weights=False)[0])
        return x + self.drop_path2(self.mlp(self.norm2(x)))


def timm_style_vit_mixup_cutmix_ema(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """timm's train.py recipe for a ViT (DeiT-style) in miniature: patch embedding, a class
    token, stochastic depth rising to 0.1, `Mixup(mixup_alpha=0.8, cutmix_alpha=1.0,
    switch_prob=0.5, label_smoothing=0.1)` with `SoftTargetCrossEntropy`, AdamW(1e-3, weight
    decay 0.05 off biases and norms), a cosine schedule stepped per epoch after 2 warm-up epochs
    from 1e-6 (timm's CosineLRScheduler), `ModelEmaV2(decay=0.998)` updated after each step and
    validated under `eval()`."""
    g = _seed(seed)
    images, y = _rgb_objects(g, 1792, size=16)
    mean, std = images[:1536].mean((0, 2, 3), keepdim=True), images[:1536].std((0, 2, 3), keepdim=True)
    x = (images - mean) / std
    num_classes, dim, depth, heads, patch = 10, 64, 4, 2, 4

    class VisionTransformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.patch_embed = nn.Conv2d(3, dim, patch, patch)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(torch.randn(1, (16 // patch) ** 2 + 1, dim) * 0.02)
            dpr = [0.1 * i / (depth - 1) for i in range(depth)]
            self.blocks = nn.Sequential(*[_ViTBlock(dim, heads, dpr[i]) for i in range(depth)])
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.head = nn.Linear(dim, num_classes)
            nn.init.trunc_normal_(self.cls_token, std=0.02)
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    nn.init.trunc_normal_(m.weight, std=0.02)
                    if m.bias is not None:
                        nn.init.zeros_(m.bias)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls_token.expand(len(x), -1, -1), x], 1) + self.pos_embed
            return self.head(self.norm(self.blocks(x))[:, 0])

    def mixup_cutmix(xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """timm's Mixup in 'batch' mode: one lambda per batch, mixed with the batch flipped."""
        off, on = 0.1 / num_classes, 1 - 0.1 + 0.1 / num_classes
        target = torch.full((len(yb), num_classes), off).scatter_(1, yb[:, None], on)
        if random.random() < 0.5:  # cutmix
            lam = float(np.random.beta(1.0, 1.0))
            cut = math.sqrt(1 - lam)
            h = w = 16
            ch, cw = int(h * cut), int(w * cut)
            cy, cx = np.random.randint(h), np.random.randint(w)
            y0, y1 = np.clip(cy - ch // 2, 0, h), np.clip(cy + ch // 2, 0, h)
            x0, x1 = np.clip(cx - cw // 2, 0, w), np.clip(cx + cw // 2, 0, w)
            xb = xb.clone()
            xb[:, :, y0:y1, x0:x1] = xb.flip(0)[:, :, y0:y1, x0:x1]
            lam = 1 - (y1 - y0) * (x1 - x0) / (h * w)
        else:
            lam = float(np.random.beta(0.8, 0.8))
            xb = xb * lam + xb.flip(0) * (1 - lam)
        return xb, target * lam + target.flip(0) * (1 - lam)

    model = VisionTransformer()
    model_ema = copy.deepcopy(model).eval()
    for p in model_ema.parameters():
        p.requires_grad_(False)
    decay = [
        p for n, p in model.named_parameters() if p.ndim > 1 and "token" not in n and "pos_embed" not in n
    ]
    no_decay = [
        p
        for n, p in model.named_parameters()
        if not (p.ndim > 1 and "token" not in n and "pos_embed" not in n)
    ]
    base_lr, warmup_lr, min_lr, warmup_epochs = 1e-3, 1e-6, 1e-5, 2
    if bug == "lr_x100":  # "--lr 0.1": the SGD recipe's lr given to AdamW
        base_lr *= 100
    optimizer = torch.optim.AdamW(
        [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": 0.05}], lr=base_lr
    )

    def lr_at(epoch: int) -> float:
        if epoch < warmup_epochs:
            return warmup_lr + (base_lr - warmup_lr) * epoch / warmup_epochs
        t = (epoch - warmup_epochs) / (epochs - warmup_epochs)
        return min_lr + 0.5 * (base_lr - min_lr) * (1 + math.cos(math.pi * t))

    hook = Hook(path)
    hook.register_module(model)
    train = DataLoader(TensorDataset(x[:1536], y[:1536]), batch_size=64, shuffle=True, drop_last=True)
    losses = []
    for epoch in range(epochs):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(epoch)
        model.train()
        for xb, yb in train:
            xb, target = mixup_cutmix(xb, yb)
            output = model(xb)
            loss = torch.sum(-target * F.log_softmax(output, dim=-1), dim=-1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            with torch.no_grad():  # ModelEmaV2.update
                for e, m in zip(model_ema.state_dict().values(), model.state_dict().values(), strict=True):
                    e.copy_(e * 0.998 + (1 - 0.998) * m)
            losses.append(loss.item())
        with torch.no_grad():
            F.cross_entropy(model_ema(x[1536:]), y[1536:])
    hook.close()
    return losses


def _pairs_task(
    g: torch.Generator, n: int, vocab: int
) -> tuple[list[list[int]], list[list[int]], torch.Tensor]:
    """RTE-like sentence pairs of varied length: an entailed hypothesis (label 0) reuses most of
    the premise's words in another order; a non-entailed one (label 1) shares fewer and most
    often carries a negation word (id 3), as crowd-written hypotheses do; now and then an
    entailed one has it too."""
    s1s, s2s, labels = [], [], []
    for _ in range(n):
        len1 = int(torch.randint(6, 15, (1,), generator=g))
        s1 = torch.randint(10, vocab, (len1,), generator=g)
        label = int(torch.rand(1, generator=g) < 0.5)
        len2 = max(4, len1 + int(torch.randint(-3, 2, (1,), generator=g)))
        s2 = torch.randint(10, vocab, (len2,), generator=g)
        take = s1[torch.randperm(len1, generator=g)][:len2]
        keep = torch.rand(len(take), generator=g) < (0.4 if label else 0.8)
        s2[: len(take)] = torch.where(keep, take, s2[: len(take)])
        if torch.rand(1, generator=g) < (0.8 if label else 0.1):
            s2[int(torch.randint(0, len2, (1,), generator=g))] = 3
        s1s.append(s1.tolist())
        s2s.append(s2.tolist())
        labels.append(label)
    return s1s, s2s, torch.tensor(labels)


def run_glue_no_trainer_deberta(
    path: str, epochs: int = 3, seed: int = 0, bug: str | None = None
) -> list[float]:
    """transformers' examples/pytorch/text-classification/run_glue_no_trainer.py without
    accelerate: a tiny `DebertaV2ForSequenceClassification` from its config, RTE-like pairs
    tokenized as [CLS] a [SEP] b [SEP] with token_type_ids, `DataCollatorWithPadding`-style
    dynamic padding per batch, AdamW with no decay on "bias" and "LayerNorm.weight" (weight
    decay 0.01), `get_scheduler("linear", num_warmup_steps=0)`, lr 5e-4 (a model trained from scratch), batch 32,
    `outputs = model(**batch); loss = outputs.loss`, `model.eval()` evaluation each epoch."""
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification, get_scheduler

    g = _seed(seed)
    vocab = 120
    s1, s2, labels = _pairs_task(g, 1792, vocab)
    cls_id, sep_id, pad_id = 1, 2, 0

    def collate(idx: list[int]) -> dict[str, torch.Tensor]:
        rows = [[cls_id, *s1[i], sep_id, *s2[i], sep_id] for i in idx]
        types = [[0] * (len(s1[i]) + 2) + [1] * (len(s2[i]) + 1) for i in idx]
        width = max(len(r) for r in rows)
        input_ids = torch.tensor([r + [pad_id] * (width - len(r)) for r in rows])
        token_type_ids = torch.tensor([t + [0] * (width - len(t)) for t in types])
        attention_mask = (input_ids != pad_id).long()
        return {
            "input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
            "labels": labels[idx],
        }  # fmt: skip

    config = DebertaV2Config(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
        max_position_embeddings=64, type_vocab_size=2, num_labels=2, relative_attention=True,
        position_buckets=16, pos_att_type=["p2c", "c2p"],
    )  # fmt: skip
    model = DebertaV2ForSequenceClassification(config)
    no_decay = ["bias", "LayerNorm.weight"]
    optimizer_grouped_parameters = [
        {
            "params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
            "weight_decay": 0.01,
        },
        {
            "params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
            "weight_decay": 0.0,
        },
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=5e-4)
    if bug == "frozen_by_mistake":  # froze the embeddings "to save memory" after building the optimizer
        for p in model.deberta.embeddings.parameters():
            p.requires_grad = False
    train_dataloader = DataLoader(list(range(1536)), batch_size=32, shuffle=True, collate_fn=collate)
    eval_dataloader = DataLoader(list(range(1536, 1792)), batch_size=64, collate_fn=collate)
    max_train_steps = epochs * len(train_dataloader)
    lr_scheduler = get_scheduler(
        name="linear", optimizer=optimizer, num_warmup_steps=0, num_training_steps=max_train_steps
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _epoch in range(epochs):
        model.train()
        for batch in train_dataloader:
            outputs = model(**batch)
            loss = outputs.loss
            loss.backward()
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            losses.append(loss.item())
        model.eval()
        for batch in eval_dataloader:
            with torch.no_grad():
                model(**batch).logits.argmax(dim=-1)
    hook.close()
    return losses


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
    """A callback keeping each training batch's loss (`outputs["loss"]`)."""
    import lightning.pytorch as pl

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            self.losses.append(float(loss))

    return LossHistory()


def lit_datamodule_resnet_rgb_nesterov(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The Lightning "CIFAR-10 baseline" shape: a `LightningDataModule` (setup, per-channel
    Normalize, random crop + flip in the train dataset), a small ResNet, SGD (0.05, momentum
    0.9, Nesterov, weight decay 5e-4), a linear warm-up then cosine LambdaLR stepped each batch
    (`"interval": "step"`), `nn.CrossEntropyLoss(label_smoothing=0.1)`, accuracy logged in
    validation."""
    import lightning.pytorch as pl

    g = _seed(seed)
    images, labels = _rgb_objects(g, 2048, size=16)

    class Augmented(Dataset):
        def __init__(self, x: torch.Tensor, y: torch.Tensor, train: bool) -> None:
            self.x, self.y, self.train = x, y, train

        def __len__(self) -> int:
            return len(self.x)

        def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
            x = self.x[i]
            if self.train:
                x = F.pad(x[None], (2, 2, 2, 2), mode="reflect")[0]
                a, b = random.randint(0, 4), random.randint(0, 4)
                x = x[:, a : a + 16, b : b + 16]
                if random.random() < 0.5:
                    x = x.flip(2)
            return x, self.y[i]

    class RGBDataModule(pl.LightningDataModule):
        def __init__(self, batch_size: int = 64) -> None:
            super().__init__()
            self.batch_size = batch_size

        def setup(self, stage: str | None = None) -> None:
            mean = images[:1792].mean((0, 2, 3), keepdim=True)
            std = images[:1792].std((0, 2, 3), keepdim=True)
            x = (images - mean) / std
            self.train_set = Augmented(x[:1792], labels[:1792], True)
            self.val_set = Augmented(x[1792:], labels[1792:], False)

        def train_dataloader(self) -> DataLoader:
            return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True, drop_last=True)

        def val_dataloader(self) -> DataLoader:
            return DataLoader(self.val_set, batch_size=256)

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = (
                nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                if stride != 1 or cin != cout
                else nn.Identity()
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = F.relu(self.bn1(self.conv1(x)))
            return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))

    class LitResnet(pl.LightningModule):
        def __init__(self, lr: float = 0.05) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.model = nn.Sequential(
                nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2),
                nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
            )  # fmt: skip
            self.criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.model(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            loss = self.criterion(self(x), y)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            logits = self(x)
            self.log("val_loss", self.criterion(logits, y))
            self.log("val_acc", (logits.argmax(1) == y).float().mean())

        def configure_optimizers(self) -> Any:
            opt = torch.optim.SGD(
                self.parameters(), lr=self.hparams.lr, momentum=0.9, nesterov=True, weight_decay=5e-4
            )
            total = int(self.trainer.estimated_stepping_batches)
            warmup = int(0.1 * total)

            def schedule(step: int) -> float:
                if step < warmup:
                    return (step + 1) / warmup
                return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))

            sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(LitResnet(), datamodule=RGBDataModule())
    return history.losses


def lit_seq2seq_gru_value_clipping(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A GRU encoder-decoder in Lightning on a "sort the digits" task: inputs of varied length
    packed with `pack_padded_sequence`, teacher forcing in training, greedy decoding in
    validation, `nn.CrossEntropyLoss(ignore_index=PAD)`, Adam(1e-3),
    `gradient_clip_val=1.0, gradient_clip_algorithm="value"`."""
    import lightning.pytorch as pl
    from torch.nn.utils.rnn import pack_padded_sequence

    g = _seed(seed)
    n, max_len, pad, bos = 2304, 10, 0, 1
    vocab = 12  # 0 pad, 1 bos, 2..11 digits
    lengths = torch.randint(4, max_len + 1, (n,), generator=g)
    src = torch.randint(2, vocab, (n, max_len), generator=g)
    src = torch.where(torch.arange(max_len)[None] < lengths[:, None], src, pad)
    tgt = torch.sort(torch.where(src == pad, 99, src), dim=1).values
    tgt = tgt.masked_fill(tgt == 99, pad)

    class Seq2Seq(pl.LightningModule):
        def __init__(self, emb: int = 32, hidden: int = 64) -> None:
            super().__init__()
            self.embedding = nn.Embedding(vocab, emb, padding_idx=pad)
            self.encoder = nn.GRU(emb, hidden, batch_first=True)
            self.decoder = nn.GRU(emb, hidden, batch_first=True)
            self.out = nn.Linear(hidden, vocab)
            self.criterion = nn.CrossEntropyLoss(ignore_index=pad)

        def encode(self, src: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            packed = pack_padded_sequence(
                self.embedding(src), lengths, batch_first=True, enforce_sorted=False
            )
            _, h = self.encoder(packed)
            return h

        def forward(self, src: torch.Tensor, lengths: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
            out, _ = self.decoder(self.embedding(tgt_in), self.encode(src, lengths))
            return self.out(out)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            src, lengths, tgt = batch
            tgt_in = torch.cat([torch.full((len(tgt), 1), bos), tgt[:, :-1]], 1)
            logits = self(src, lengths, tgt_in)
            loss = self.criterion(logits.reshape(-1, vocab), tgt.reshape(-1))
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            src, lengths, tgt = batch
            h = self.encode(src, lengths)
            token = torch.full((len(src), 1), bos)
            outs = []
            for _ in range(max_len):
                o, h = self.decoder(self.embedding(token), h)
                logits = self.out(o)
                outs.append(logits)
                token = logits.argmax(-1)
            logits = torch.cat(outs, 1)
            self.log("val_loss", self.criterion(logits.reshape(-1, vocab), tgt.reshape(-1)))

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    train = DataLoader(TensorDataset(src[:2048], lengths[:2048], tgt[:2048]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(src[2048:], lengths[2048:], tgt[2048:]), batch_size=256)
    history = _pl_losses()
    trainer = _pl_trainer(
        path, [history], max_epochs=epochs, gradient_clip_val=1.0, gradient_clip_algorithm="value"
    )
    trainer.fit(Seq2Seq(), train, val)
    return history.losses


def lit_vae_kl_warmup(path: str, epochs: int = 10, seed: int = 0, bug: str | None = None) -> list[float]:
    """A VAE as a LightningModule on 12x12 object images: an MLP encoder giving the mean and the
    log-variance, the reparameterization trick, a Bernoulli decoder (BCE with logits, summed per
    image), the KL weight warmed up linearly over the first 200 steps from `self.global_step`,
    `self.log_dict` of the reconstruction and KL terms, Adam(1e-3), batch 64."""
    import lightning.pytorch as pl

    g = _seed(seed)
    x, _ = _rgb_objects(g, 1792, size=12, plain=True)
    x = x.flatten(1)

    class LitVAE(pl.LightningModule):
        def __init__(self, latent: int = 8, hidden: int = 128) -> None:
            super().__init__()
            self.encoder = nn.Sequential(
                nn.Linear(144, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU()
            )
            self.fc_mu = nn.Linear(hidden, latent)
            self.fc_var = nn.Linear(hidden, latent)
            self.decoder = nn.Sequential(
                nn.Linear(latent, hidden),
                nn.ReLU(),
                nn.Linear(hidden, hidden),
                nn.ReLU(),
                nn.Linear(hidden, 144),
            )

        def step(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            h = self.encoder(x)
            mu = self.fc_mu(h)
            log_var = self.fc_var(h)
            if (
                bug == "log_zero_nan"
            ):  # the encoder gives the std (kept >= 0 by a ReLU); the log of its square
                log_var = torch.log(F.relu(log_var) ** 2)
            z = mu + torch.exp(0.5 * log_var) * torch.randn_like(mu)
            recon = F.binary_cross_entropy_with_logits(self.decoder(z), x, reduction="sum") / len(x)
            kl = (-0.5 * (1 + log_var - mu**2 - log_var.exp()).sum(1)).mean()
            return recon, kl

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            (x,) = batch
            recon, kl = self.step(x)
            beta = min(1.0, self.global_step / 200)
            loss = recon + beta * kl
            self.log_dict({"recon": recon, "kl": kl, "beta": beta, "train_loss": loss})
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            (x,) = batch
            recon, kl = self.step(x)
            self.log("val_elbo", recon + kl)

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    train = DataLoader(TensorDataset(x[:1536]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(x[1536:]), batch_size=256)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(LitVAE(), train, val)
    return history.losses


def lit_backbone_finetuning(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """Transfer learning in Lightning with the `BackboneFinetuning` callback: a CNN backbone
    pretrained on other classes (trained in-process first, not recorded) and a new head; the
    callback freezes the backbone, then unfreezes it at epoch 2 with a tenth of the head's lr,
    which grows by 1.5x each epoch; Adam(1e-3) over `filter(lambda p: p.requires_grad, ...)`,
    MultiStepLR at epoch 4."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import BackboneFinetuning

    g = _seed(seed)
    x_pre, y_pre = _rgb_objects(g, 1536, size=16, proto_seed=1111)
    x, y = _rgb_objects(g, 1408, size=16, classes=6, proto_seed=2222)

    def make_backbone() -> nn.Module:
        return nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )  # fmt: skip

    backbone = make_backbone()  # "the pretrained weights"
    pre_head = nn.Linear(64, 10)
    opt = torch.optim.Adam([*backbone.parameters(), *pre_head.parameters()], lr=1e-3)
    for _ in range(3):
        for xb, yb in DataLoader(TensorDataset(x_pre, y_pre), batch_size=64, shuffle=True):
            loss = F.cross_entropy(pre_head(backbone(xb)), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    state = copy.deepcopy(backbone.state_dict())

    class TransferModel(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = make_backbone()
            self.backbone.load_state_dict(state)
            self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(64, 6))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.backbone(x))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            loss = F.cross_entropy(self(x), y)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            self.log("val_loss", F.cross_entropy(self(x), y))

        def configure_optimizers(self) -> Any:
            opt = torch.optim.Adam(filter(lambda p: p.requires_grad, self.parameters()), lr=1e-3)
            return [opt], [torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[4], gamma=0.1)]

    train = DataLoader(TensorDataset(x[:1152], y[:1152]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(x[1152:], y[1152:]), batch_size=256)
    history = _pl_losses()
    finetuning = BackboneFinetuning(unfreeze_backbone_at_epoch=2, lambda_func=lambda epoch: 1.5)
    trainer = _pl_trainer(path, [history, finetuning], max_epochs=epochs)
    trainer.fit(TransferModel(), train, val)
    return history.losses


def lit_swa_tabular_regression(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Lightning's `StochasticWeightAveraging(swa_lrs=1e-2, swa_epoch_start=0.75)` on a
    housing-price-like regression: standardized features, a log-price target, an MLP with
    SiLU and dropout, SGD(0.05, momentum 0.9) with CosineAnnealingLR until the averaging takes
    over, `nn.HuberLoss`."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import StochasticWeightAveraging

    g = _seed(seed)
    n, d = 2560, 8
    income = torch.distributions.Gamma(3.0, 1.0).sample((n,))
    age = 50 * torch.rand(n, generator=g)
    rooms = torch.distributions.LogNormal(1.5, 0.3).sample((n,))
    lat, lon = torch.rand(n, generator=g), torch.rand(n, generator=g)
    other = torch.randn(n, 3, generator=g)
    coast = torch.exp(-((lon - 0.2) ** 2) / 0.02)
    log_price = 0.35 * income.log() + 0.002 * age + 0.2 * rooms.log() + 0.8 * coast + 0.1 * other[:, 0]
    log_price = log_price + 0.1 * torch.randn(n, generator=g)
    feats = torch.stack([income, age, rooms, lat, lon, *other.t()], 1)
    mu, sd = feats[:2048].mean(0), feats[:2048].std(0)
    x = (feats - mu) / sd
    t = ((log_price - log_price[:2048].mean()) / log_price[:2048].std())[:, None]
    act = nn.Sigmoid if bug == "deep_sigmoid" else nn.SiLU

    class Regressor(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            layers: list[nn.Module] = []
            width, din = 64, d
            for _ in range(8 if bug == "deep_sigmoid" else 3):
                layers += [nn.Linear(din, width), act(), nn.Dropout(0.05)]
                din = width
            self.net = nn.Sequential(*layers, nn.Linear(width, 1))
            self.criterion = nn.HuberLoss()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, t = batch
            loss = self.criterion(self(x), t)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, t = batch
            self.log("val_loss", self.criterion(self(x), t))

        def configure_optimizers(self) -> Any:
            opt = torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)
            return [opt], [torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)]

    train = DataLoader(TensorDataset(x[:2048], t[:2048]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(x[2048:], t[2048:]), batch_size=512)
    history = _pl_losses()
    swa = StochasticWeightAveraging(swa_lrs=1e-2, swa_epoch_start=0.75)
    trainer = _pl_trainer(path, [history, swa], max_epochs=epochs)
    trainer.fit(Regressor(), train, val)
    return history.losses


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
    path: str, model: Any, train: Dataset, val: Dataset | None, collator: Any = None, **args: Any
) -> list[float]:
    """`Trainer(model, TrainingArguments(...), callbacks=[DebuggerCallback(path)]).train()`; the
    per-step training losses from `trainer.state.log_history` (`logging_steps=1`)."""
    from transformers import PrinterCallback, Trainer, TrainingArguments

    from mldbg.transformers import DebuggerCallback

    targs = TrainingArguments(
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
    trainer = Trainer(
        model=model, args=targs, train_dataset=train, eval_dataset=val, data_collator=collator,
        callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(targs.output_dir, ignore_errors=True)
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


def _word_tokenizer(vocab_words: list[str]) -> Any:
    """A word-level fast tokenizer trained in-process (as `tokenizers` builds one from a corpus):
    [PAD] [UNK] [CLS] [SEP] [MASK] then the words, whitespace pre-tokenization, a
    [CLS] ... [SEP] template."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {w: i for i, w in enumerate(specials + vocab_words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]",
    )  # fmt: skip


def hf_roberta_topic_label_smoothing(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """`RobertaForSequenceClassification` from a 2-layer `RobertaConfig` on a 4-topic news-like
    task (each topic raises the frequency of its own words), `label_smoothing_factor=0.1`,
    lr 1e-3 (a tiny post-LN model trained from scratch) with 6% warm-up and linear decay, weight
    decay 0.1, AdamW betas (0.9, 0.98) and eps 1e-6 (RoBERTa's), padding id 1 and positions from
    2 as RoBERTa counts them."""
    from transformers import RobertaConfig, RobertaForSequenceClassification

    g = _seed(seed)
    n, length, vocab, topics = 1536, 32, 300, 4
    y = torch.randint(0, topics, (n,), generator=g)
    ids = torch.randint(50, vocab, (n, length), generator=g)
    topical = 50 + 60 * y[:, None] + torch.randint(0, 60, (n, length), generator=g)
    ids = torch.where(torch.rand(n, length, generator=g) < 0.25, topical, ids)
    lengths = torch.randint(12, length + 1, (n,), generator=g)
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    ids = torch.where(mask.bool(), ids, 1)  # <pad> = 1
    ids[:, 0] = 0  # <s>
    if bug == "shuffled_labels":  # the label column sorted apart from the texts
        y = y[torch.randperm(n, generator=g)]
    config = RobertaConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
        max_position_embeddings=length + 2, num_labels=topics, pad_token_id=1, bos_token_id=0, eos_token_id=2,
    )  # fmt: skip
    model = RobertaForSequenceClassification(config)
    train = _Examples(input_ids=ids[:1280], attention_mask=mask[:1280], labels=y[:1280])
    val = _Examples(input_ids=ids[1280:], attention_mask=mask[1280:], labels=y[1280:])
    return _hf_train(
        path, model, train, val, num_train_epochs=3, per_device_train_batch_size=16, learning_rate=1e-3,
        warmup_steps=0.06, weight_decay=0.1, adam_beta2=0.98, adam_epsilon=1e-6, label_smoothing_factor=0.1,
    )  # fmt: skip


def hf_albert_mlm_collator(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Masked-LM pretraining of a tiny `AlbertForMaskedLM` (factorized embeddings of 32 dims,
    one layer shared 4 times) with `DataCollatorForLanguageModeling(mlm_probability=0.15)`
    (80% [MASK], 10% random, 10% kept) and a word-level tokenizer trained in-process; texts of
    varied length padded by the collator; AdamW at ALBERT's lr 1.76e-3, warm-up 10%."""
    from transformers import AlbertConfig, AlbertForMaskedLM, DataCollatorForLanguageModeling

    g = _seed(seed)
    words = [f"w{i}" for i in range(120)]
    tokenizer = _word_tokenizer(words)
    stream = _markov_tokens(g, 60000, len(words), order_seed=51)
    stream = (stream.float() ** 2 / len(words)).long()  # Zipf-like: a few words are frequent
    texts, i = [], 0
    while len(texts) < 1280:
        length = int(torch.randint(12, 31, (1,), generator=g))
        texts.append(" ".join(words[t] for t in stream[i : i + length].tolist()))
        i += length
    encoded = [tokenizer(t)["input_ids"] for t in texts]
    config = AlbertConfig(
        vocab_size=len(tokenizer), embedding_size=32, hidden_size=64, num_hidden_layers=4, num_attention_heads=2,
        intermediate_size=128, max_position_embeddings=64, pad_token_id=0,
    )  # fmt: skip
    model = AlbertForMaskedLM(config)
    collator = DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm_probability=0.15)
    train = _Examples(input_ids=encoded[:1152])
    val = _Examples(input_ids=encoded[1152:])
    return _hf_train(
        path, model, train, val, collator=collator, num_train_epochs=4, per_device_train_batch_size=32,
        learning_rate=1.76e-3, warmup_steps=0.1, weight_decay=0.01,
    )  # fmt: skip


def hf_bart_text_infilling(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """BART's text-infilling denoising objective with a tiny `BartForConditionalGeneration`:
    spans (Poisson(3) lengths) replaced by one <mask>, the encoder reads the corrupted text, the
    decoder rebuilds the original (`labels`; the model shifts them right), padding with
    attention masks and -100 labels; lr 5e-4, polynomial-free linear decay with warm-up 5%,
    `max_grad_norm=1.0`, dropout 0.1."""
    from transformers import BartConfig, BartForConditionalGeneration

    g = _seed(seed)
    pad, bos, eos, mask_id, offset = 1, 0, 2, 3, 4
    vocab = 64 + offset
    n, length = 1152, 24
    stream = _markov_tokens(g, n * length, 64, order_seed=61).view(n, length) + offset
    rng = np.random.default_rng(seed)
    inputs = []
    for row in stream.tolist():
        out, j = [bos], 0
        budget = int(0.3 * length)
        while j < length:
            if budget > 0 and rng.random() < 0.12:
                span = max(1, min(budget, int(rng.poisson(3))))
                out.append(mask_id)
                j += span
                budget -= span
            else:
                out.append(row[j])
                j += 1
        inputs.append([*out, eos])
    width = max(len(r) for r in inputs)
    input_ids = torch.tensor([r + [pad] * (width - len(r)) for r in inputs])
    attention_mask = (input_ids != pad).long()
    labels = torch.cat([stream, torch.full((n, 1), eos)], 1)
    config = BartConfig(
        vocab_size=vocab, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64,
        pad_token_id=pad, bos_token_id=bos, eos_token_id=eos, decoder_start_token_id=eos, dropout=0.1,
    )  # fmt: skip
    model = BartForConditionalGeneration(config)
    train = _Examples(input_ids=input_ids[:1024], attention_mask=attention_mask[:1024], labels=labels[:1024])
    val = _Examples(input_ids=input_ids[1024:], attention_mask=attention_mask[1024:], labels=labels[1024:])
    return _hf_train(
        path, model, train, val, num_train_epochs=3, per_device_train_batch_size=16, learning_rate=5e-4,
        warmup_steps=0.05, max_grad_norm=1.0, weight_decay=0.01,
    )  # fmt: skip


def hf_gpt_neox_group_texts_polynomial(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """run_clm.py's shape with a tiny `GPTNeoXForCausalLM` (rotary on 25% of each head, parallel
    residual): documents of varied length tokenized, joined and cut into blocks of 64
    (`group_texts`), `lr_scheduler_type="polynomial"` (power 1) after 30 warm-up steps, lr 6e-4,
    AdamW betas (0.9, 0.95), weight decay 0.1, an evaluation each epoch."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    g = _seed(seed)
    vocab, block = 96, 64
    docs, total = [], 0
    while total < 1152 * block:
        length = int(torch.randint(40, 400, (1,), generator=g))
        docs.append(
            [0, *(_markov_tokens(g, length, vocab - 1, order_seed=71) + 1).tolist()]
        )  # 0 = <|endoftext|>
        total += length + 1
    concatenated = [t for d in docs for t in d]
    n_blocks = len(concatenated) // block
    blocks = torch.tensor(concatenated[: n_blocks * block]).view(n_blocks, block)[:1152]
    config = GPTNeoXConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
        max_position_embeddings=block, rotary_pct=0.25, use_parallel_residual=True, bos_token_id=0,
        eos_token_id=0,
    )  # fmt: skip
    model = GPTNeoXForCausalLM(config)
    train = _Examples(input_ids=blocks[:1024], labels=blocks[:1024])
    val = _Examples(input_ids=blocks[1024:], labels=blocks[1024:])
    return _hf_train(
        path, model, train, val, num_train_epochs=3, per_device_train_batch_size=16, learning_rate=6e-4,
        lr_scheduler_type="polynomial", warmup_steps=30, adam_beta2=0.95, weight_decay=0.1,
    )  # fmt: skip


def hf_qwen2_sft_prompt_masking_checkpointing(
    path: str, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Supervised fine-tuning shape with a tiny `Qwen2ForCausalLM` (grouped-query attention,
    RoPE, RMSNorm, SwiGLU): prompt + response sequences whose prompt tokens are masked out of the
    loss (labels -100), right padding, `gradient_checkpointing=True`,
    `gradient_accumulation_steps=4`, lr 1e-3 cosine with 3% warm-up, weight decay 0.0; the task:
    answer with the prompt's tokens sorted."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    g = _seed(seed)
    pad, sep, eos, offset = 0, 1, 2, 3
    vocab, n, max_prompt = 32 + offset, 2048, 8
    rows, labels = [], []
    for _ in range(n):
        k = int(torch.randint(3, max_prompt + 1, (1,), generator=g))
        prompt = (torch.randint(0, 32, (k,), generator=g) + offset).tolist()
        response = [*sorted(prompt), eos]
        rows.append([*prompt, sep, *response])
        labels.append([-100] * (k + 1) + response)
    width = max(len(r) for r in rows)
    input_ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    attention_mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    label_ids = torch.tensor([lab + [-100] * (width - len(lab)) for lab in labels])
    config = Qwen2Config(
        vocab_size=vocab, hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True, pad_token_id=pad,
        eos_token_id=eos, use_cache=False,
    )  # fmt: skip
    model = Qwen2ForCausalLM(config)
    train = _Examples(
        input_ids=input_ids[:1920], attention_mask=attention_mask[:1920], labels=label_ids[:1920]
    )
    return _hf_train(
        path, model, train, None, num_train_epochs=2, per_device_train_batch_size=8,
        gradient_accumulation_steps=4, gradient_checkpointing=True, learning_rate=1e-3,
        lr_scheduler_type="cosine", warmup_steps=0.03, weight_decay=0.0,
    )  # fmt: skip


def hf_electra_multiple_choice(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """SWAG-like multiple choice with a tiny `ElectraForMultipleChoice` (embeddings of 32 dims
    projected to 64): a context and 4 candidate endings, each pair encoded as [CLS] context
    [SEP] ending [SEP] with token_type_ids, inputs shaped (batch, 4, length); the right
    ending continues the context's topic; lr 1e-3 (trained from scratch), 10% warm-up, linear
    decay, weight decay 0.01."""
    from transformers import ElectraConfig, ElectraForMultipleChoice

    g = _seed(seed)
    n, choices, ctx_len, end_len, topics = 1280, 4, 10, 6, 8
    vocab = 10 + topics * 12 + 40
    cls_id, sep_id = 1, 2

    def topical(t: torch.Tensor, length: int) -> torch.Tensor:
        words = 10 + 12 * t[:, None] + torch.randint(0, 12, (len(t), length), generator=g)
        filler = 10 + topics * 12 + torch.randint(0, 40, (len(t), length), generator=g)
        return torch.where(torch.rand(len(t), length, generator=g) < 0.7, words, filler)

    topic = torch.randint(0, topics, (n,), generator=g)
    context = topical(topic, ctx_len)
    label = torch.randint(0, choices, (n,), generator=g)
    ending_topics = (topic[:, None] + torch.randint(1, topics, (n, choices), generator=g)) % topics
    ending_topics[torch.arange(n), label] = topic
    endings = topical(ending_topics.flatten(), end_len).view(n, choices, end_len)
    ctx = context[:, None].expand(n, choices, ctx_len)
    ones = torch.ones(n, choices, 1, dtype=torch.long)
    input_ids = torch.cat([cls_id * ones, ctx, sep_id * ones, endings, sep_id * ones], 2)
    token_type_ids = torch.cat(
        [
            torch.zeros(n, choices, ctx_len + 2, dtype=torch.long),
            torch.ones(n, choices, end_len + 1, dtype=torch.long),
        ],
        2,
    )
    config = ElectraConfig(
        vocab_size=vocab, embedding_size=32, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=128, max_position_embeddings=32,
    )  # fmt: skip
    model = ElectraForMultipleChoice(config)
    train = _Examples(input_ids=input_ids[:1024], token_type_ids=token_type_ids[:1024], labels=label[:1024])
    val = _Examples(input_ids=input_ids[1024:], token_type_ids=token_type_ids[1024:], labels=label[1024:])
    return _hf_train(
        path, model, train, val, num_train_epochs=3, per_device_train_batch_size=16, learning_rate=1e-3,
        warmup_steps=0.1, weight_decay=0.01,
    )  # fmt: skip


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


def keras_conv1d_timeseries_classification(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras example "Timeseries classification from scratch" (FordA): three
    Conv1D(64, 3)-BatchNormalization-ReLU blocks, GlobalAveragePooling1D, a softmax Dense,
    `sparse_categorical_crossentropy`, Adam, batch 32, `validation_split=0.2`,
    ReduceLROnPlateau(factor 0.5, patience 20, min_lr 1e-4) and EarlyStopping(patience 50)
    (the example's 500 epochs cut to 5)."""
    import keras

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    x, y = _sensor_windows(g, 1000, 64)
    x_train, y_train = x.numpy()[..., None], y.numpy()
    layers = keras.layers
    input_layer = keras.layers.Input((64, 1))
    h = input_layer
    for _ in range(3):
        h = layers.Conv1D(filters=64, kernel_size=3, padding="same")(h)
        h = layers.BatchNormalization()(h)
        h = layers.ReLU()(h)
    gap = layers.GlobalAveragePooling1D()(h)
    model = keras.models.Model(inputs=input_layer, outputs=layers.Dense(3, activation="softmax")(gap))
    model.compile(
        optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["sparse_categorical_accuracy"]
    )
    callbacks = [
        keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=20, min_lr=0.0001),
        keras.callbacks.EarlyStopping(monitor="val_loss", patience=50, verbose=0),
    ]
    history = _keras_losses()
    model.fit(
        x_train, y_train, batch_size=32, epochs=5, validation_split=0.2, verbose=0,
        callbacks=[mldbg.keras.Hook(path), history, *callbacks],
    )  # fmt: skip
    return history.losses


def keras_conv_autoencoder_denoising(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras example "Convolutional autoencoder for image denoising": Conv2D(32, relu)-
    MaxPooling2D twice, Conv2DTranspose(32, strides 2, relu) twice, a sigmoid Conv2D,
    `binary_crossentropy`, Adam, noisy images in (noise factor 0.4, clipped to [0, 1]), clean
    images out, batch 128, shuffled, `validation_data` of noisy/clean test images."""
    import keras

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images, _ = _rgb_objects(g, 1280, size=16, plain=True)
    clean = images.permute(0, 2, 3, 1).numpy()
    noisy = np.clip(clean + 0.4 * np.random.default_rng(seed).normal(size=clean.shape), 0.0, 1.0).astype(
        "float32"
    )
    layers = keras.layers
    inp = layers.Input(shape=(16, 16, 1))
    x = layers.Conv2D(32, (3, 3), activation="relu", padding="same")(inp)
    x = layers.MaxPooling2D((2, 2), padding="same")(x)
    x = layers.Conv2D(32, (3, 3), activation="relu", padding="same")(x)
    x = layers.MaxPooling2D((2, 2), padding="same")(x)
    x = layers.Conv2DTranspose(32, (3, 3), strides=2, activation="relu", padding="same")(x)
    x = layers.Conv2DTranspose(32, (3, 3), strides=2, activation="relu", padding="same")(x)
    x = layers.Conv2D(1, (3, 3), activation="sigmoid", padding="same")(x)
    autoencoder = keras.Model(inp, x)
    autoencoder.compile(optimizer="adam", loss="binary_crossentropy")
    history = _keras_losses()
    autoencoder.fit(
        noisy[:1024], clean[:1024], epochs=12, batch_size=128, shuffle=True, verbose=0,
        validation_data=(noisy[1024:], clean[1024:]), callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_imbalanced_class_weight(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras example "Imbalanced classification: credit card fraud detection": features
    standardized with the training mean and std, Dense(256, relu) x3 with Dropout(0.3), a
    sigmoid output, Adam(1e-2), `binary_crossentropy`, `class_weight={0: 1/negatives, 1:
    1/positives}` (so the loss values are tiny), batch 2048, 30 epochs, a validation set."""
    import keras

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    n, d = 10240, 30
    x = torch.randn(n, d, generator=g) * torch.logspace(-1, 2, d)  # raw amounts on very different scales
    z = (x[:, 0] / 0.1 + x[:, 3] / 0.2 - x[:, 7] / 0.5 + 0.5 * (x[:, 11] / 1.0) ** 2) / 1.5
    y = (torch.rand(n, generator=g) < torch.sigmoid(2 * z - 8)).float()  # about 1% positives
    x_np, y_np = x.numpy(), y.numpy()
    train_x, val_x = x_np[:8192], x_np[8192:]
    train_y, val_y = y_np[:8192], y_np[8192:]
    mean, std = np.mean(train_x, axis=0), np.std(train_x, axis=0)
    train_x, val_x = (train_x - mean) / std, (val_x - mean) / std
    counts = np.bincount(train_y.astype(int))
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input(shape=(d,)),
            layers.Dense(256, activation="relu"),
            layers.Dense(256, activation="relu"),
            layers.Dropout(0.3),
            layers.Dense(256, activation="relu"),
            layers.Dropout(0.3),
            layers.Dense(1, activation="sigmoid"),
        ]
    )
    metrics = [keras.metrics.Precision(name="precision"), keras.metrics.Recall(name="recall")]
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="binary_crossentropy", metrics=metrics)
    class_weight = {0: 1.0 / counts[0], 1: 1.0 / counts[1]}
    history = _keras_losses()
    model.fit(
        train_x, train_y, batch_size=2048, epochs=30, verbose=0, validation_data=(val_x, val_y),
        class_weight=class_weight, callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_multi_input_output_loss_weights(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras functional API guide's ticket model: three inputs (title and body token ids,
    binary tags), Embedding-LSTM encoders for title and body, a priority score (one logit,
    `BinaryCrossentropy(from_logits=True)`) and a department (4 logits,
    `CategoricalCrossentropy(from_logits=True)`), `loss_weights=[1.0, 0.2]`, RMSprop(1e-3),
    inputs and targets given as dicts by layer name."""
    import keras

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    num_tags, num_words, num_departments, n = 12, 400, 4, 1536
    dept = torch.randint(0, num_departments, (n,), generator=g)
    title = torch.randint(0, num_words, (n, 10), generator=g)
    cue = 100 * dept[:, None] + torch.randint(0, 100, (n, 10), generator=g)
    title = torch.where(torch.rand(n, 10, generator=g) < 0.3, cue, title)
    body = torch.randint(0, num_words, (n, 40), generator=g)
    tags = (torch.rand(n, num_tags, generator=g) < 0.3).float()
    priority = torch.sigmoid(
        3 * (tags[:, 0] + tags[:, 1] - tags[:, 2]) - 1 + 0.5 * torch.randn(n, generator=g)
    )
    layers = keras.layers
    title_input = keras.Input(shape=(None,), name="title")
    body_input = keras.Input(shape=(None,), name="body")
    tags_input = keras.Input(shape=(num_tags,), name="tags")
    title_features = layers.LSTM(32)(layers.Embedding(num_words, 32)(title_input))
    body_features = layers.LSTM(16)(layers.Embedding(num_words, 32)(body_input))
    x = layers.concatenate([title_features, body_features, tags_input])
    priority_pred = layers.Dense(1, name="priority")(x)
    department_pred = layers.Dense(num_departments, name="department")(x)
    model = keras.Model(
        inputs=[title_input, body_input, tags_input], outputs=[priority_pred, department_pred]
    )
    model.compile(
        optimizer=keras.optimizers.RMSprop(1e-3),
        loss=[
            keras.losses.BinaryCrossentropy(from_logits=True),
            keras.losses.CategoricalCrossentropy(from_logits=True),
        ],
        loss_weights=[1.0, 0.2],
    )
    history = _keras_losses()
    model.fit(
        {"title": title.numpy(), "body": body.numpy(), "tags": tags.numpy()},
        {"priority": priority.numpy()[:, None], "department": np.eye(num_departments, dtype="float32")[dept.numpy()]},
        epochs=4, batch_size=32, verbose=0, callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


# ============================================================================= JAX / Flax / Optax


def flax_linen_cnn_batchnorm_trainstate(
    path: str, steps: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The Flax ImageNet example's shape in miniature: a Linen CNN with `nn.BatchNorm`
    (`use_running_average=not train`, momentum 0.9), a `TrainState` subclass carrying
    `batch_stats`, `mutable=["batch_stats"]` in the jitted train step, `optax.sgd(momentum=0.9,
    nesterov=True)` on a warm-up + cosine schedule from lr 0.1 with weight decay 1e-4 added to
    the loss on kernels; `hook.record(step, params=state.params, grads=grads, loss=loss)` after
    the step; an `eval_step` with the running averages every 50 steps."""
    import flax.linen as fnn
    import jax
    import jax.numpy as jnp
    import optax
    from flax.training import train_state

    import mldbg.jax

    g = _seed(seed)
    images, labels = _rgb_objects(g, 2304, size=12)
    mean, std = images[:2048].mean((0, 2, 3), keepdim=True), images[:2048].std((0, 2, 3), keepdim=True)
    x = ((images - mean) / std).permute(0, 2, 3, 1).numpy()
    y = labels.numpy()

    class CNN(fnn.Module):
        @fnn.compact
        def __call__(self, x: Any, train: bool = True) -> Any:
            norm = lambda: fnn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5)  # noqa: E731
            for features in (16, 32, 32):
                x = fnn.Conv(features, (3, 3), use_bias=False)(x)
                x = fnn.relu(norm()(x))
                x = fnn.max_pool(x, (2, 2), strides=(2, 2))
            x = jnp.mean(x, axis=(1, 2))
            return fnn.Dense(10)(x)

    class TrainState(train_state.TrainState):
        batch_stats: Any

    model = CNN()
    variables = model.init(jax.random.PRNGKey(seed), jnp.ones((1, 12, 12, 3)), train=False)
    schedule = optax.join_schedules(
        [optax.linear_schedule(0.0, 0.1, 30), optax.cosine_decay_schedule(0.1, steps - 30)], [30]
    )
    state = TrainState.create(
        apply_fn=model.apply, params=variables["params"], batch_stats=variables["batch_stats"],
        tx=optax.sgd(schedule, momentum=0.9, nesterov=True),
    )  # fmt: skip

    @jax.jit
    def train_step(state: Any, xb: Any, yb: Any) -> Any:
        def loss_fn(params: Any) -> Any:
            logits, new_model_state = state.apply_fn(
                {"params": params, "batch_stats": state.batch_stats}, xb, mutable=["batch_stats"]
            )
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()
            kernels = [p for p in jax.tree_util.tree_leaves(params) if p.ndim > 1]
            loss = loss + 0.5 * 1e-4 * sum(jnp.sum(k**2) for k in kernels)
            return loss, new_model_state

        (loss, new_model_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        new_state = state.apply_gradients(grads=grads, batch_stats=new_model_state["batch_stats"])
        return new_state, loss, grads

    @jax.jit
    def eval_step(state: Any, xb: Any, yb: Any) -> Any:
        logits = state.apply_fn({"params": state.params, "batch_stats": state.batch_stats}, xb, train=False)
        return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()

    hook = mldbg.jax.Hook(path)
    rng = np.random.default_rng(seed)
    losses = []
    for step in range(steps):
        idx = rng.choice(2048, 64, replace=False)
        params = state.params
        state, loss, grads = train_step(state, x[idx], y[idx])
        hook.record(step, params=params, grads=grads, loss=loss)
        losses.append(float(loss))
        if step % 50 == 49:
            hook.record(step // 50, mode="eval", loss=eval_step(state, x[2048:], y[2048:]))
    hook.close()
    return losses


def flax_nnx_vae_adam(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """A VAE in Flax NNX (the Flax docs' VAE example shape): `nnx.Linear` encoder to the mean and
    log-variance, reparameterization with a key from `nnx.Rngs`, a sigmoid-logit decoder,
    `optax.sigmoid_binary_cross_entropy` summed per image plus the KL term, `nnx.Optimizer`
    over `optax.adam(1e-3)`, an `nnx.jit` step; `hook.record` outside it with
    `nnx.state(model, nnx.Param)`."""
    import jax
    import jax.numpy as jnp
    import optax
    from flax import nnx

    import mldbg.jax

    g = _seed(seed)
    images, _ = _rgb_objects(g, 2048, size=12, plain=True)
    x = images.flatten(1).numpy()

    class VAE(nnx.Module):
        def __init__(self, latent: int, hidden: int, rngs: nnx.Rngs) -> None:
            self.enc = nnx.Linear(144, hidden, rngs=rngs)
            self.mean = nnx.Linear(hidden, latent, rngs=rngs)
            self.logvar = nnx.Linear(hidden, latent, rngs=rngs)
            self.dec1 = nnx.Linear(latent, hidden, rngs=rngs)
            self.dec2 = nnx.Linear(hidden, 144, rngs=rngs)
            self.rngs = rngs

        def __call__(self, x: Any) -> Any:
            h = nnx.relu(self.enc(x))
            mean, logvar = self.mean(h), self.logvar(h)
            z = mean + jnp.exp(0.5 * logvar) * jax.random.normal(self.rngs.noise(), mean.shape)
            return self.dec2(nnx.relu(self.dec1(z))), mean, logvar

    model = VAE(8, 128, nnx.Rngs(params=seed, noise=seed + 1))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)

    def loss_fn(model: Any, xb: Any) -> Any:
        logits, mean, logvar = model(xb)
        rec = optax.sigmoid_binary_cross_entropy(logits, xb).sum(-1)
        kl = -0.5 * jnp.sum(1 + logvar - mean**2 - jnp.exp(logvar), axis=-1)
        return jnp.mean(rec + kl)

    @nnx.jit
    def train_step(model: Any, optimizer: Any, xb: Any) -> Any:
        loss, grads = nnx.value_and_grad(loss_fn)(model, xb)
        optimizer.update(model, grads)
        return loss, grads

    hook = mldbg.jax.Hook(path)
    rng = np.random.default_rng(seed)
    losses = []
    step = 0
    for _epoch in range(epochs):
        perm = rng.permutation(1792)
        for i in range(0, 1792 - 63, 64):
            params = nnx.state(model, nnx.Param)
            loss, grads = train_step(model, optimizer, x[perm[i : i + 64]])
            hook.record(step, params=params, grads=grads, loss=loss)
            losses.append(float(loss))
            step += 1
    hook.close()
    return losses


def jax_scan_gru_multisteps_statistics(
    path: str, steps: int = 240, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A character-level GRU language model in plain JAX: parameters in a dict, the recurrence
    in `jax.lax.scan`, `optax.MultiSteps(optax.chain(clip_by_global_norm(1.0), adam(3e-3)),
    every_k_schedule=4)` (the update applied every 4th call: gradient accumulation), and the
    default rules' statistics computed inside the jitted step with
    `mldbg.jax.statistics(params, grads, loss, when=due)` then handed to
    `hook.record(step, statistics=stats)`."""
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    g = _seed(seed)
    vocab, hidden, seq_len, batch = 40, 64, 32, 32
    data = _markov_tokens(g, 60000, vocab, order_seed=81).numpy()
    key = jax.random.PRNGKey(seed)
    k = jax.random.split(key, 4)
    glorot = jax.nn.initializers.glorot_uniform()
    params = {
        "embed": jax.random.normal(k[0], (vocab, 32)) * 0.1,
        "w_x": glorot(k[1], (32, 3 * hidden)),
        "w_h": jax.nn.initializers.orthogonal()(k[2], (hidden, 3 * hidden)),
        "b": jnp.zeros(3 * hidden),
        "w_out": glorot(k[3], (hidden, vocab)),
        "b_out": jnp.zeros(vocab),
    }

    def forward(params: Any, tokens: Any) -> Any:
        xs = params["embed"][tokens].transpose(1, 0, 2)  # time-major

        def cell(h: Any, x: Any) -> Any:
            gx, gh = x @ params["w_x"] + params["b"], h @ params["w_h"]
            r = jax.nn.sigmoid(gx[:, :hidden] + gh[:, :hidden])
            z = jax.nn.sigmoid(gx[:, hidden : 2 * hidden] + gh[:, hidden : 2 * hidden])
            n = jnp.tanh(gx[:, 2 * hidden :] + r * gh[:, 2 * hidden :])
            h = (1 - z) * n + z * h
            return h, h

        _, hs = jax.lax.scan(cell, jnp.zeros((tokens.shape[0], hidden)), xs)
        return hs.transpose(1, 0, 2) @ params["w_out"] + params["b_out"]

    def loss_fn(params: Any, inputs: Any, targets: Any) -> Any:
        return optax.softmax_cross_entropy_with_integer_labels(forward(params, inputs), targets).mean()

    tx = optax.MultiSteps(optax.chain(optax.clip_by_global_norm(1.0), optax.adam(3e-3)), every_k_schedule=4)
    opt_state = tx.init(params)

    @jax.jit
    def train_step(params: Any, opt_state: Any, inputs: Any, targets: Any, due: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(params, inputs, targets)
        stats = mldbg.jax.statistics(params, grads, loss, when=due)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, stats, loss

    hook = mldbg.jax.Hook(path)
    rng = np.random.default_rng(seed)
    losses = []
    for step in range(steps):
        starts = rng.integers(0, len(data) - seq_len - 1, batch)
        chunk = np.stack([data[s : s + seq_len + 1] for s in starts])
        params, opt_state, stats, loss = train_step(
            params, opt_state, chunk[:, :-1], chunk[:, 1:], hook.statistics_due(step)
        )
        hook.record(step, statistics=stats)
        losses.append(float(loss))
    hook.close()
    return losses


# ============================================================================= XGBoost


def xgb_ranker_ndcg(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Learning to rank with `XGBRanker(objective="rank:ndcg", eval_metric="ndcg@10")`: queries
    of 20-60 documents with graded relevance 0-4 from a noisy score of their features, rows
    sorted by `qid`, `lambdarank_num_pair_per_sample=8`, learning_rate 0.1, max_depth 6, 200
    rounds, an evaluation set of other queries; losses: 1 - training ndcg@10 per round."""
    import xgboost as xgb

    import mldbg.xgboost

    g = _seed(seed)
    sizes = torch.randint(20, 61, (100,), generator=g)
    qid = torch.repeat_interleave(torch.arange(100), sizes).numpy()
    n, d = len(qid), 16
    x = torch.randn(n, d, generator=g)
    score = x[:, 0] + 0.7 * x[:, 1] - 0.5 * x[:, 2] * x[:, 3] + 0.5 * torch.randn(n, generator=g)
    rel = torch.bucketize(score, torch.tensor([0.5, 1.2, 1.8, 2.4])).numpy()
    x = x.numpy()
    split = int(np.searchsorted(qid, 80))
    ranker = xgb.XGBRanker(
        objective="rank:ndcg", eval_metric="ndcg@10", n_estimators=200, learning_rate=0.1, max_depth=6,
        lambdarank_num_pair_per_sample=8, lambdarank_pair_method="topk", tree_method="hist", n_jobs=1,
        random_state=seed, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    ranker.fit(
        x[:split], rel[:split], qid=qid[:split], eval_set=[(x[:split], rel[:split]), (x[split:], rel[split:])],
        eval_qid=[qid[:split], qid[split:]], verbose=False,
    )  # fmt: skip
    return [1.0 - float(v) for v in ranker.evals_result()["validation_0"]["ndcg@10"]]


def xgb_poisson_quantile_dmatrix(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Claim counts with `xgb.train({"objective": "count:poisson", "tree_method": "hist",
    "eta": 0.1, "max_depth": 4, "subsample": 0.9, "min_child_weight": 5})` on a
    `QuantileDMatrix` (256 bins) with exposure as `base_margin` (log of the years insured),
    300 rounds, `evals` on train and validation with `early_stopping_rounds=30`; losses: the
    training poisson-nloglik per round."""
    import xgboost as xgb

    import mldbg.xgboost

    g = _seed(seed)
    n, d = 6000, 10
    x = torch.randn(n, d, generator=g)
    exposure = 0.2 + 0.8 * torch.rand(n, generator=g)
    rate = torch.exp(-1.5 + 0.5 * x[:, 0] - 0.4 * x[:, 1] + 0.3 * torch.relu(x[:, 2]) * x[:, 3])
    counts = torch.poisson(rate * exposure, generator=g).numpy()
    x_np, offset = x.numpy(), np.log(exposure.numpy())
    dtrain = xgb.QuantileDMatrix(x_np[:4800], counts[:4800], base_margin=offset[:4800], max_bin=256)
    dvalid = xgb.QuantileDMatrix(
        x_np[4800:], counts[4800:], base_margin=offset[4800:], max_bin=256, ref=dtrain
    )
    result: dict[str, Any] = {}
    xgb.train(
        {"objective": "count:poisson", "tree_method": "hist", "eta": 0.1, "max_depth": 4, "subsample": 0.9,
         "min_child_weight": 5, "eval_metric": "poisson-nloglik", "nthread": 1, "seed": seed},
        dtrain, 300, evals=[(dtrain, "train"), (dvalid, "valid")], early_stopping_rounds=30,
        evals_result=result, verbose_eval=False, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    return [float(v) for v in result["train"]["poisson-nloglik"]]


def xgb_custom_softmax_objective(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """XGBoost's demo/guide-python/custom_softmax.py: a multi-class softmax written as a custom
    objective (`obj=softprob_obj` returning the gradient and a diagonal Hessian bound
    `max(2 p (1 - p), 1e-6)`), `disable_default_eval_metric`, a custom `merror` metric
    (`custom_metric=`), `num_class=5`, XGBoost's default eta 0.3 and max_depth 6, 120 rounds;
    losses: the training merror per round."""
    import xgboost as xgb

    import mldbg.xgboost

    g = _seed(seed)
    kclass, n, d = 5, 3000, 8
    x = torch.randn(n, d, generator=g)
    logits = torch.stack([x[:, k] + 0.5 * x[:, (k + 1) % d] * x[:, (k + 2) % d] for k in range(kclass)], 1)
    y = torch.distributions.Categorical(logits=2 * logits).sample().numpy().astype(np.float32)
    x = x.numpy()
    dtrain = xgb.DMatrix(x[:2400], label=y[:2400])
    dvalid = xgb.DMatrix(x[2400:], label=y[2400:])

    def softmax(z: np.ndarray) -> np.ndarray:
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def softprob_obj(predt: np.ndarray, data: Any) -> tuple[np.ndarray, np.ndarray]:
        labels = data.get_label().astype(int)
        p = softmax(predt.reshape(len(labels), kclass))
        grad = p.copy()
        grad[np.arange(len(labels)), labels] -= 1.0
        hess = np.maximum(2.0 * p * (1.0 - p), 1e-6)
        return grad, hess

    def merror(predt: np.ndarray, dmat: Any) -> tuple[str, float]:
        labels = dmat.get_label()
        predt = predt.reshape(len(labels), kclass)
        return "PyMError", float(np.sum(labels != predt.argmax(axis=1)) / len(labels))

    result: dict[str, Any] = {}
    xgb.train(
        {"num_class": kclass, "disable_default_eval_metric": True, "nthread": 1, "seed": seed},
        dtrain, num_boost_round=120, obj=softprob_obj, custom_metric=merror, evals_result=result,
        evals=[(dtrain, "train"), (dvalid, "validation")], verbose_eval=False,
        callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    return [float(v) for v in result["train"]["PyMError"]]


# ============================================================================= the set

PIPELINES = []

_word_lm = healthy(
    "pytorch_examples_word_lm_transformer_manual_sgd",
    "pytorch/examples Transformer word LM",
    pytorch_examples_word_lm_transformer,
)
_imagenet = healthy(
    "pytorch_examples_imagenet_bottleneck_steplr",
    "pytorch/examples ImageNet-shaped",
    pytorch_examples_imagenet,
)
_gcn = healthy(
    "pytorch_examples_gcn_sparse_adjacency", "pytorch/examples GCN (sparse)", pytorch_examples_gcn_sparse
)
_snli = healthy("pytorch_examples_snli_bilstm_nli", "pytorch/examples NLI", pytorch_examples_snli)
_char_rnn = healthy(
    "pytorch_tutorial_char_rnn_name_classification",
    "char-RNN classification, batch 1",
    pytorch_tutorial_char_rnn_names,
)
_nanogpt_ft = healthy(
    "nanogpt_finetune_from_checkpoint_accumulate4", "nanoGPT fine-tuning", nanogpt_finetune_from_checkpoint
)
_mingpt = healthy("mingpt_adder_gpt_nano", "minGPT addition", mingpt_adder)
_timm_vit = healthy(
    "timm_style_vit_mixup_cutmix_drop_path_ema", "timm-style ViT", timm_style_vit_mixup_cutmix_ema
)
PIPELINES += [
    _word_lm,
    _imagenet,
    _gcn,
    healthy(
        "pytorch_examples_forward_forward_goodness",
        "forward-forward (layer-local)",
        pytorch_examples_forward_forward,
    ),
    healthy(
        "pytorch_examples_regression_polynomial_until_1e-3",
        "polynomial regression",
        pytorch_examples_regression,
    ),
    _snli,
    healthy(
        "pytorch_tutorial_spatial_transformer_sgd",
        "spatial transformer",
        pytorch_tutorial_spatial_transformer,
    ),
    _char_rnn,
    _nanogpt_ft,
    _mingpt,
    _timm_vit,
    buggy(_imagenet, "inputs_x255"),
    buggy(_gcn, "train_in_eval_mode"),
    buggy(_snli, "dead_relu_init"),
    buggy(_char_rnn, "no_zero_grad"),
    buggy(_timm_vit, "lr_x100"),
    buggy(_mingpt, "softmax_before_ce"),
]

if installed("transformers"):
    _glue = healthy(
        "run_glue_no_trainer_deberta_v2_pairs", "HF manual loop sentence pairs", run_glue_no_trainer_deberta
    )
    PIPELINES += [
        _glue,
        buggy(_glue, "frozen_by_mistake"),
    ]

if installed("transformers", "accelerate", "tokenizers"):
    _hf_roberta = healthy(
        "hf_trainer_roberta_topics_label_smoothing",
        "HF Trainer RoBERTa classification",
        hf_roberta_topic_label_smoothing,
    )
    PIPELINES += [
        _hf_roberta,
        healthy("hf_trainer_albert_mlm_data_collator", "HF Trainer ALBERT masked LM", hf_albert_mlm_collator),
        healthy(
            "hf_trainer_bart_text_infilling", "HF Trainer BART denoising seq2seq", hf_bart_text_infilling
        ),
        healthy(
            "hf_trainer_gpt_neox_group_texts_polynomial",
            "HF Trainer GPT-NeoX causal LM",
            hf_gpt_neox_group_texts_polynomial,
        ),
        healthy(
            "hf_trainer_qwen2_sft_prompt_masked_grad_checkpointing",
            "HF Trainer Qwen2 SFT",
            hf_qwen2_sft_prompt_masking_checkpointing,
        ),
        healthy(
            "hf_trainer_electra_multiple_choice",
            "HF Trainer ELECTRA multiple choice",
            hf_electra_multiple_choice,
        ),
        buggy(_hf_roberta, "shuffled_labels"),
    ]

if installed("lightning"):
    _lit_vae = healthy("lightning_vae_kl_warmup_log_dict", "Lightning VAE", lit_vae_kl_warmup)
    _lit_swa = healthy(
        "lightning_swa_callback_housing_huber", "Lightning SWA regression", lit_swa_tabular_regression
    )
    PIPELINES += [
        healthy(
            "lightning_datamodule_resnet_rgb_nesterov_warmup_cosine",
            "Lightning DataModule image classification",
            lit_datamodule_resnet_rgb_nesterov,
        ),
        healthy(
            "lightning_gru_seq2seq_sort_value_clipping", "Lightning seq2seq", lit_seq2seq_gru_value_clipping
        ),
        _lit_vae,
        healthy(
            "lightning_backbone_finetuning_callback", "Lightning transfer learning", lit_backbone_finetuning
        ),
        _lit_swa,
        buggy(_lit_vae, "log_zero_nan"),
        buggy(_lit_swa, "deep_sigmoid"),
    ]

if installed("keras"):
    PIPELINES += [
        healthy(
            "keras_conv1d_timeseries_classification_plateau",
            "Keras time-series classification",
            keras_conv1d_timeseries_classification,
        ),
        healthy(
            "keras_conv_autoencoder_denoising_bce",
            "Keras denoising autoencoder",
            keras_conv_autoencoder_denoising,
        ),
        healthy(
            "keras_imbalanced_class_weight_fraud",
            "Keras imbalanced classification",
            keras_imbalanced_class_weight,
        ),
        healthy(
            "keras_multi_input_output_loss_weights",
            "Keras multi-input multi-output",
            keras_multi_input_output_loss_weights,
        ),
    ]

if installed("jax", "optax", "flax"):
    PIPELINES += [
        healthy(
            "flax_linen_cnn_batchnorm_trainstate_nesterov",
            "Flax BatchNorm CNN",
            flax_linen_cnn_batchnorm_trainstate,
        ),
        healthy("flax_nnx_vae_adam", "Flax NNX VAE", flax_nnx_vae_adam),
        healthy(
            "jax_scan_gru_optax_multisteps_in_jit_statistics",
            "JAX RNN language model",
            jax_scan_gru_multisteps_statistics,
        ),
    ]

if installed("xgboost", "sklearn"):
    PIPELINES += [
        healthy("xgboost_ranker_rank_ndcg", "XGBoost learning to rank", xgb_ranker_ndcg),
        healthy(
            "xgboost_poisson_counts_quantile_dmatrix",
            "XGBoost Poisson regression",
            xgb_poisson_quantile_dmatrix,
        ),
        healthy("xgboost_custom_softmax_objective", "XGBoost custom objective", xgb_custom_softmax_objective),
    ]
