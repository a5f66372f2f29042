"""The twenty-eighth blind held-out set (issue 26), part AI: trainings of kinds the corpus did not
have yet, from medical imaging, sparse retrieval, robot imitation, model-based reinforcement
learning, graph and text self-supervision, click-through prediction, time-series anomaly
detection, domain adaptation, boosting, speech enhancement, image restoration and conditional
computation, each written in the shape of the public code its practitioners train it with (its
loop, loss, optimizer, schedule and evaluation habits), shrunk to a tiny model on data generated
in-process, fixed seeds, one CPU thread. Plain PyTorch loops with the README's two lines
(`register_loss` where the script has one loss module) and one training each through
Lightning, the Hugging Face `Trainer` and Keras 3 with their one callback.

Plain PyTorch: nnU-Net v2's `nnUNetTrainer` on CT-like volumes (the CT normalization, 16^3
patches with foreground oversampling and mirroring, a `PlainConvUNet` with instance norm and
LeakyReLU, `DC_and_CE_loss` under the deep-supervision wrapper, SGD 0.99 Nesterov with the
poly schedule per epoch, pseudo-Dice validation; the loss goes below zero as the Dice grows);
SPLADE (max-pooled `log(1 + relu)` MLM logits as sparse vectors, the in-batch-negatives
cross-entropy with BM25 hard negatives, the FLOPS regularizer ramped up quadratically, AdamW
with warm-up and linear decay, an MRR@10 pass); Diffusion Policy's low-dimensional U-Net
workspace on a 2-D reaching task with an obstacle and bimodal demonstrations (FiLM-conditioned
`ConditionalUnet1D`, the squared-cosine DDPM noise's MSE, min-max normalizers, AdamW with
warm-up and cosine, the workspace's accumulation branch, an `EMAModel` with its power warm-up,
DDIM action chunks of the EMA policy at the end); PETS on gym's pendulum (a five-network
probabilistic ensemble with bounded log-variances and per-layer decays trained on bootstrap
resamples by the Gaussian NLL, which falls far below zero; CEM planning with trajectory
sampling); GraphMAE on a Cora-like graph (masked node features with a learned mask token, a GAT
encoder, re-masking, the scaled cosine error, a cosine `LambdaLR`, a linear probe); data2vec
text pre-training (an EMA teacher made at the first update with the embeddings copied, targets
the instance-normalized average of its top layers, the smooth L1 at the masked positions, the
decay annealed); DIEN ported from TensorFlow (a GRU interest extractor with the auxiliary
click/no-click loss, DIN attention, the AUGRU, the click cross-entropy plus the auxiliary loss,
a test AUC); the Anomaly Transformer on SMD-like server metrics (series and Gaussian-prior
associations, the minimax strategy with two backward passes a step, a loss below zero that
falls as the association discrepancy grows, the lr halved each epoch); MCD domain adaptation
(a generator and two classifiers with three Adam optimizers, each iteration's three steps with
`reset_grad()` after each, `train(epoch)` and `test(epoch)` functions); GrowNet on a
credit-default-like table (shallow weak learners added one by one on the second-order functional
gradient, each registered as it is made, a corrective step over the whole ensemble with a fresh
Adam, a learned boost rate); facebookresearch/denoiser's causal Demucs on synthetic speech in
hum, fan and coloured noise (the L1 plus the multi-resolution STFT loss, `Remix`, SI-SNR
validation); NAFNet through BasicSR's loop on SIDD-like uint8 pairs (NAF blocks with the
SimpleGate, simplified channel attention and a LayerNorm whose backward is a hand-written
`autograd.Function`, the `PSNRLoss` below zero, AdamW with betas (0.9, 0.9) and cosine
annealing, validation PSNR); a Mixture-of-Depths character language model (every other block
routed to the top 12.5 % of tokens by a linear router, the block's update scaled by the router's
sigmoid, an auxiliary router loss, AdamW with decay groups, warm-up and cosine).

Through tools: Lightning (`mldbg.lightning.DebuggerCallback`): SpeechBrain's ECAPA-TDNN
speaker-embedding recipe (log-mel filterbanks of synthetic speakers, SE-Res2Net blocks,
attentive statistics pooling, the additive angular margin softmax under `NLLLoss`, Adam under a
`CyclicLR` rising over the run at `interval="step"`, an equal error rate of unseen speakers'
trials in `on_validation_epoch_end`). Hugging Face `Trainer`
(`mldbg.transformers.DebuggerCallback`): form understanding with a tiny random
`LayoutLMForTokenClassification` on FUNSD-like forms (word boxes on a 0-1000 page, labels on
first sub-tokens, the user's own collator padding `bbox`, `compute_metrics`). Keras 3
(`mldbg.keras.Hook`): keras.io's Compact Convolutional Transformer (a convolutional tokenizer,
stochastic depth, sequence pooling, `Rescaling(1/255)` inside the model, label smoothing,
`AdamW`, `validation_split`).

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: the Mixture-of-Depths config's `learning_rate = 3e-1` typed for 3e-3 (lr_x100);
Diffusion Policy's loop rewritten with `optimizer.step()` and `lr_scheduler.step()` in the
accumulation branch but without its `optimizer.zero_grad()` (no_zero_grad); SPLADE's qrels
rows sorted by passage id when loaded and then zipped with the queries in their own order
(shuffled_labels); NAFNet's pairs read by the user's own loader as `.float()` of the uint8
arrays, without `imfrombytes`' division by 255 (inputs_x255); the DIEN port's forward returning
the original's `y_hat = softmax(dnn3) + 1e-8` while the training script gives it to
`nn.CrossEntropyLoss` (softmax_before_ce); GrowNet's weak learners under an init helper meant to
start the output at the prior's log-odds, applied with `model.apply`, so every Linear bias
(those in front of the ReLU too) starts at about -2 (dead_relu_init); the PETS port's
hand-written swish with its `x *` lost, so the ensemble's four hidden layers are sigmoids
(deep_sigmoid); data2vec's EMA-teacher freeze loop written against the student encoder instead
of its copy, after the optimizer was built, so the student stays frozen while Adam holds it
(frozen_by_mistake); the Anomaly Transformer's `my_kl_loss` without its 1e-4 "since softmax and
Gaussian kernels are never 0", whose prior underflows to 0 far from the diagonal, so `0 * log 0`
makes the loss NaN (log_zero_nan); MCD's `G.train(); C1.train(); C2.train()` moved from
`train(epoch)` into the setup while `test(epoch)` leaves the three in eval mode
(train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND27`.
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

from mldbg.torch import Hook

from . import BLIND27, buggy, healthy, installed
from ._data import text
from .blind_ag import _babble, _mel_basis, _rgb_glyphs  # speech-like audio, a mel filterbank, RGB glyphs
from .blind_ah import _citation_graph, _grammar_sentences, _photos  # a Cora-like graph, sentences, photos

SPLIT = BLIND27

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 2701)


# ============================================================================= nnU-Net: 3-D segmentation, Dice + CE


def _ct_volumes(g: torch.Generator, n: int, size: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` CT-like volumes in Hounsfield units (n, size, size, size) and their labels: air
    around an elliptic body of soft tissue (about 40 HU), a vertebra of bone (about 400 HU)
    behind, an organ (label 1, about 70 HU) of random size and place, and in most of them a
    hypodense lesion inside the organ (label 2, about 35 HU); smoothed a little (partial
    volumes) with scanner noise of 15 HU."""
    zz, yy, xx = torch.meshgrid(*[torch.linspace(-1, 1, size)] * 3, indexing="ij")
    vols, labels = torch.zeros(n, size, size, size), torch.zeros(n, size, size, size, dtype=torch.long)
    for b in range(n):
        r = 0.8 + 0.15 * torch.rand(2, generator=g)
        body = (xx / r[0]) ** 2 + (yy / r[1]) ** 2 < 1
        vol = torch.full((size, size, size), -1000.0)
        vol[body] = 40.0
        bone = (xx**2 + (yy - 0.55) ** 2 < 0.03) & body
        vol[bone] = 400.0
        c = (torch.rand(3, generator=g) - 0.5) * torch.tensor([0.6, 0.4, 0.6])
        axes = 0.3 + 0.2 * torch.rand(3, generator=g)
        organ = ((zz - c[0]) / axes[0]) ** 2 + ((yy - c[1]) / axes[1]) ** 2 + ((xx - c[2]) / axes[2]) ** 2 < 1
        organ &= body & ~bone
        vol[organ] = 70.0
        lab = organ.long()
        if torch.rand(1, generator=g) < 0.8:
            lc = c + (torch.rand(3, generator=g) - 0.5) * axes * 0.8
            lr = 0.1 + 0.1 * float(torch.rand(1, generator=g))
            lesion = ((zz - lc[0]) ** 2 + (yy - lc[1]) ** 2 + (xx - lc[2]) ** 2 < lr**2) & organ
            vol[lesion] = 35.0
            lab[lesion] = 2
        vol = F.avg_pool3d(vol[None, None], 3, stride=1, padding=1, count_include_pad=False)[0, 0]
        vols[b] = vol + 15.0 * torch.randn(vol.shape, generator=g)
        labels[b] = lab
    return vols, labels


class _ConvDropoutNormReLU(nn.Sequential):
    """nnU-Net's `ConvDropoutNormReLU`: a 3x3x3 convolution, instance norm with affine terms,
    LeakyReLU(0.01)."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__(
            nn.Conv3d(cin, cout, 3, stride, 1),
            nn.InstanceNorm3d(cout, eps=1e-5, affine=True),
            nn.LeakyReLU(0.01, inplace=True),
        )


class _PlainConvUNet(nn.Module):
    """dynamic-network-architectures' `PlainConvUNet` as nnU-Net v2 plans it for a small 3-D
    patch: four stages of two convolution blocks (8, 16, 32, 32 features), strided convolutions
    to go down, transposed convolutions to go up, the skips concatenated, and a 1x1x1
    segmentation head at each decoder stage for deep supervision (full resolution first)."""

    def __init__(self, cin: int = 1, classes: int = 3, features: tuple[int, ...] = (8, 16, 32, 32)) -> None:
        super().__init__()
        self.encoder = nn.ModuleList()
        prev = cin
        for i, f in enumerate(features):
            self.encoder.append(
                nn.Sequential(_ConvDropoutNormReLU(prev, f, 1 if i == 0 else 2), _ConvDropoutNormReLU(f, f))
            )
            prev = f
        self.transpconvs, self.decoder, self.seg_layers = nn.ModuleList(), nn.ModuleList(), nn.ModuleList()
        for i in range(len(features) - 1, 0, -1):
            self.transpconvs.append(nn.ConvTranspose3d(features[i], features[i - 1], 2, 2))
            self.decoder.append(
                nn.Sequential(
                    _ConvDropoutNormReLU(2 * features[i - 1], features[i - 1]),
                    _ConvDropoutNormReLU(features[i - 1], features[i - 1]),
                )
            )
            self.seg_layers.append(nn.Conv3d(features[i - 1], classes, 1))
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:  # nnU-Net's `InitWeights_He(1e-2)`
        if isinstance(module, (nn.Conv3d, nn.ConvTranspose3d)):
            nn.init.kaiming_normal_(module.weight, a=1e-2)
            if module.bias is not None:
                nn.init.constant_(module.bias, 0)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        skips = []
        for stage in self.encoder:
            x = stage(x)
            skips.append(x)
        x, outputs = skips[-1], []
        for i, (up, dec, seg) in enumerate(zip(self.transpconvs, self.decoder, self.seg_layers, strict=True)):
            x = dec(torch.cat([up(x), skips[-(i + 2)]], 1))
            outputs.append(seg(x))
        return outputs[::-1]  # the highest resolution first, as nnU-Net's decoder returns them


class _MemoryEfficientSoftDiceLoss(nn.Module):
    """nnU-Net's soft Dice over the foreground classes (`do_bg=False`) with `batch_dice`: the
    sums run over the batch and the voxels; returns minus the mean Dice."""

    def __init__(self, smooth: float = 1e-5) -> None:
        super().__init__()
        self.smooth = smooth

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x = torch.softmax(x, 1)[:, 1:]
        with torch.no_grad():
            y_onehot = F.one_hot(y[:, 0], x.shape[1] + 1).permute(0, 4, 1, 2, 3)[:, 1:].float()
        axes = [0, *range(2, x.ndim)]
        intersect = (x * y_onehot).sum(axes)
        sum_pred, sum_gt = x.sum(axes), y_onehot.sum(axes)
        dc = (2 * intersect + self.smooth) / torch.clip(sum_gt + sum_pred + self.smooth, 1e-8)
        return -dc.mean()


class _DCAndCELoss(nn.Module):
    """nnU-Net's `DC_and_CE_loss(weight_ce=1, weight_dice=1)`: the cross-entropy plus minus the
    soft Dice, so a good segmentation's loss is below zero (towards -1)."""

    def __init__(self) -> None:
        super().__init__()
        self.dc = _MemoryEfficientSoftDiceLoss()
        self.ce = nn.CrossEntropyLoss()

    def forward(self, net_output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.ce(net_output, target[:, 0]) + self.dc(net_output, target)


class _DeepSupervisionWrapper(nn.Module):
    """nnU-Net's `DeepSupervisionWrapper`: the loss at every decoder resolution against the
    labels downsampled by nearest neighbour, weighted 1, 1/2, 1/4, ... with the lowest weight
    set to 0 and the weights normalized to sum to 1."""

    def __init__(self, loss: nn.Module, weights: list[float]) -> None:
        super().__init__()
        self.loss, self.weights = loss, weights

    def forward(self, outputs: list[torch.Tensor], targets: list[torch.Tensor]) -> torch.Tensor:
        return sum(w * self.loss(o, t) for w, o, t in zip(self.weights, outputs, targets, strict=True) if w)


def nnunet_3d_dice_ce_deep_supervision(path: str, num_epochs: int = 5, seed: int = 0) -> list[float]:
    """nnU-Net v2's `nnUNetTrainer` (Isensee et al. 2021) on CT-like volumes, written out as
    its `run_training` does it: the CT normalization (foreground intensities clipped at their
    0.5 and 99.5 percentiles, then z-scored with their mean and standard deviation), patches of
    16^3 with a third of each batch forced onto a foreground class (`oversample_foreground_percent`
    0.33), mirroring along every axis and a multiplicative brightness augmentation, batches of
    2, `DC_and_CE_loss` under the `DeepSupervisionWrapper`, SGD at 1e-2 with momentum 0.99,
    Nesterov and weight decay 3e-5, `PolyLRScheduler` (exponent 0.9) stepped per epoch,
    clipping at 12, 20 iterations an epoch (250 in nnU-Net) and then 5 validation patches in
    `network.eval()` with the pseudo Dice per class. The loss starts near 1 and goes below zero
    as the Dice grows."""
    g = _seed(seed)
    vols, labels = _ct_volumes(g, 24)
    fg = vols[:20][labels[:20] > 0]
    lo, hi = torch.quantile(fg[::7], torch.tensor([0.005, 0.995])).tolist()
    mean, std = fg.clamp(lo, hi).mean().item(), fg.clamp(lo, hi).std().item()
    vols = (vols.clamp(lo, hi) - mean) / max(std, 1e-8)
    train_idx, val_idx = list(range(20)), list(range(20, 24))
    patch, batch_size, iters, initial_lr = 16, 2, 20, 1e-2

    def sample(idx: list[int], force_fg: bool) -> tuple[torch.Tensor, torch.Tensor]:
        k = idx[int(torch.randint(0, len(idx), (1,), generator=g))]
        hi_ = vols.shape[1] - patch
        if force_fg:
            cls = 2 if (labels[k] == 2).any() and torch.rand(1, generator=g) < 0.5 else 1
            where = torch.nonzero(labels[k] == cls)
            c = where[int(torch.randint(0, len(where), (1,), generator=g))]
            start = (c - patch // 2).clamp(0, hi_)
        else:
            start = torch.randint(0, hi_ + 1, (3,), generator=g)
        s = [slice(int(v), int(v) + patch) for v in start]
        return vols[k][s[0], s[1], s[2]], labels[k][s[0], s[1], s[2]]

    network = _PlainConvUNet()
    weights = np.array([1 / 2**i for i in range(3)])
    weights[-1] = 0
    loss = _DeepSupervisionWrapper(_DCAndCELoss(), (weights / weights.sum()).tolist())
    optimizer = torch.optim.SGD(
        network.parameters(), initial_lr, weight_decay=3e-5, momentum=0.99, nesterov=True
    )
    hook = Hook(path)
    hook.register_module(network)
    hook.register_loss(loss)
    losses: list[float] = []
    for epoch in range(num_epochs):
        for group in optimizer.param_groups:  # PolyLRScheduler.step(current_epoch)
            group["lr"] = initial_lr * (1 - epoch / num_epochs) ** 0.9
        network.train()
        for _ in range(iters):
            xs, ys = zip(*[sample(train_idx, b >= round(batch_size * (1 - 0.33))) for b in range(batch_size)],
                         strict=True)  # fmt: skip
            data, target = torch.stack(xs)[:, None], torch.stack(ys)[:, None]
            for axis in (2, 3, 4):
                if torch.rand(1, generator=g) < 0.5:
                    data, target = data.flip(axis), target.flip(axis)
            if torch.rand(1, generator=g) < 0.15:
                data = data * (0.75 + 0.5 * float(torch.rand(1, generator=g)))
            targets = [target, *(F.interpolate(target.float(), scale_factor=0.5**s, mode="nearest").long()
                                 for s in (1, 2))]  # fmt: skip
            optimizer.zero_grad(set_to_none=True)
            output = network(data)
            train_loss = loss(output, targets)
            train_loss.backward()
            nn.utils.clip_grad_norm_(network.parameters(), 12)
            optimizer.step()
            losses.append(train_loss.item())
        network.eval()
        tp, fp, fn = torch.zeros(2), torch.zeros(2), torch.zeros(2)
        with torch.no_grad():
            for _ in range(5):
                data, target = sample(val_idx, True)
                pred = network(data[None, None])[0].argmax(1)[0]
                for c in (1, 2):
                    tp[c - 1] += ((pred == c) & (target == c)).sum()
                    fp[c - 1] += ((pred == c) & (target != c)).sum()
                    fn[c - 1] += ((pred != c) & (target == c)).sum()
        dice = (2 * tp / (2 * tp + fp + fn).clamp(min=1)).tolist()
        print(f"Epoch {epoch}: train_loss {np.mean(losses[-iters:]):.4f}, Pseudo dice {[round(d, 4) for d in dice]}, "
              f"lr {optimizer.param_groups[0]['lr']:.5f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= SPLADE: sparse lexical retrieval, FLOPS


def _passages(
    g: torch.Generator, n_docs: int, n_queries: int, topics: int = 8, per_topic: int = 40, common: int = 40
) -> tuple[torch.Tensor, torch.Tensor, list[int], list[int]]:
    """A MS MARCO-like collection of token ids: `n_docs` passages of 16 words (a third common
    words, the rest drawn from their topic's 40 words with Zipf weights) and `n_queries`
    queries of 4 words drawn from one passage's own topic words (its relevant passage);
    returns the passages (n_docs, 17) after [CLS] (id 1, padding 0), the queries (n_queries, 5),
    each query's relevant passage and its hardest negative (the other passage of the topic that
    shares the most words with the query, as BM25 would rank it)."""
    first = 2  # 0 [PAD], 1 [CLS]
    zipf = 1.0 / torch.arange(1, per_topic + 1).float()
    doc_topic = torch.randint(0, topics, (n_docs,), generator=g)
    docs = torch.zeros(n_docs, 17, dtype=torch.long)
    docs[:, 0] = 1
    for d in range(n_docs):
        words = (
            torch.multinomial(zipf, 11, replacement=True, generator=g)
            + first
            + common
            + per_topic * doc_topic[d]
        )
        commons = torch.randint(first, first + common, (5,), generator=g)
        docs[d, 1:] = torch.cat([words, commons])[torch.randperm(16, generator=g)]
    positives = torch.randint(0, n_docs, (n_queries,), generator=g)
    queries = torch.zeros(n_queries, 5, dtype=torch.long)
    queries[:, 0] = 1
    bag = torch.zeros(n_docs, first + common + topics * per_topic, dtype=torch.bool)
    bag[torch.arange(n_docs)[:, None], docs] = True
    hard: list[int] = []
    for q in range(n_queries):
        own = docs[positives[q], 1:]
        own = own[own >= first + common].unique()
        queries[q, 1:] = own[torch.randint(0, len(own), (4,), generator=g)]
        overlap = bag[:, queries[q, 1:]].sum(1).float() + torch.rand(n_docs, generator=g) * 0.5
        overlap[(doc_topic != doc_topic[positives[q]]) | (torch.arange(n_docs) == positives[q])] = -1
        hard.append(int(overlap.argmax()))
    return docs, queries, positives.tolist(), hard


class _SpladeEncoder(nn.Module):
    """SPLADE's `Splade` on a tiny BERT-like masked language model: token and position
    embeddings, two post-norm transformer layers with GELU, the MLM head (a dense layer, GELU,
    LayerNorm, the decoder tied to the token embeddings with its own bias), and the SPLADE
    pooling `max_i log(1 + relu(logits_i))` over the unpadded positions: one non-negative weight
    per vocabulary word."""

    def __init__(self, vocab: int, d: int = 32, max_len: int = 32) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, d, padding_idx=0)
        self.position_embeddings = nn.Embedding(max_len, d)
        self.emb_norm = nn.LayerNorm(d)
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.transform = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d))
        self.decoder_bias = nn.Parameter(torch.zeros(vocab))
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        attention_mask = input_ids != 0
        h = self.emb_norm(
            self.word_embeddings(input_ids) + self.position_embeddings(torch.arange(input_ids.size(1)))
        )
        h = self.encoder(h, src_key_padding_mask=~attention_mask)
        logits = self.transform(h) @ self.word_embeddings.weight.T + self.decoder_bias
        values, _ = torch.max(torch.log1p(torch.relu(logits)) * attention_mask.unsqueeze(-1), dim=1)
        return values


def splade_flops_in_batch_negatives(
    path: str, steps: int = 160, seed: int = 0, bug: str | None = None
) -> list[float]:
    """naver/splade's training (Formal et al. 2021, SPLADE v2) on a synthetic passage
    collection: (query, relevant passage, BM25 hard negative) triples, the in-batch negatives'
    cross-entropy over the dot products of sparse representations (each query against every
    positive and hard negative of the batch), the FLOPS regularizer `sum_j mean_i(w_ij)^2` on the
    queries (lambda 3e-3) and the passages (1e-3) with its weights ramped up quadratically over
    the first half of training (`RegWeightScheduler`), AdamW with linear warm-up over 6 % of the
    steps and linear decay, batches of 32, and an MRR@10 and the mean number of non-zero
    passage terms on held-out queries before and after. The ranking loss falls while the
    regularizer's part of the loss grows with its weight."""
    g = _seed(seed)
    vocab = 2 + 40 + 8 * 40
    docs, queries, positives, hard = _passages(g, 600, 1100)
    n_train = 1000
    qrels_rows = [(qid, positives[qid]) for qid in range(n_train)]  # the qrels file, one row a query
    if bug == "shuffled_labels":
        # bug: the qrels rows sorted by passage id when loaded, then zipped with the queries' order
        qrels_rows = sorted(qrels_rows, key=lambda r: r[1])
    train_triples = [(qid, pid, hard[qid]) for qid, (_, pid) in enumerate(qrels_rows)]
    model = _SpladeEncoder(vocab)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    warmup = int(0.06 * steps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup else max(0.0, (steps - s) / (steps - warmup))
    )
    lambda_q, lambda_d, reg_t = 1e-2, 5e-3, steps // 2
    hook = Hook(path)
    hook.register_module(model)

    def flops(reps: torch.Tensor) -> torch.Tensor:
        return torch.sum(torch.mean(torch.abs(reps), dim=0) ** 2)

    def evaluate() -> tuple[float, float]:
        model.eval()
        with torch.no_grad():
            d_reps = torch.cat([model(docs[i : i + 200]) for i in range(0, len(docs), 200)])
            q_reps = model(queries[n_train:])
            ranks = (q_reps @ d_reps.T).argsort(1, descending=True)
        target = torch.tensor(positives[n_train:])
        pos = (ranks == target[:, None]).float().argmax(1)
        mrr = torch.where(pos < 10, 1.0 / (pos + 1), torch.zeros(())).mean().item()
        return mrr, (d_reps > 0).sum(1).float().mean().item()

    mrr, terms = evaluate()
    print(f"before: MRR@10 {mrr:.3f}, non-zero passage terms {terms:.0f}")
    losses: list[float] = []
    step = 0
    while step < steps:
        order = torch.randperm(n_train, generator=g).tolist()
        for i in range(0, n_train - 31, 32):
            if step == steps:
                break
            model.train()
            batch = [train_triples[j] for j in order[i : i + 32]]
            q = queries[[b[0] for b in batch]]
            d = docs[[b[1] for b in batch] + [b[2] for b in batch]]
            q_rep, d_rep = model(q), model(d)
            scores = q_rep @ d_rep.T
            rank_loss = F.cross_entropy(scores, torch.arange(len(batch)))
            ramp = min(1.0, (step / reg_t) ** 2)
            loss = rank_loss + ramp * (lambda_q * flops(q_rep) + lambda_d * flops(d_rep))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            if step % 50 == 0:
                print(f"step {step} loss {loss.item():.4f} rank {rank_loss.item():.4f} "
                      f"flops q {flops(q_rep).item():.2f} d {flops(d_rep).item():.2f}")  # fmt: skip
            step += 1
    mrr, terms = evaluate()
    print(f"after: MRR@10 {mrr:.3f}, non-zero passage terms {terms:.0f}")
    hook.close()
    return losses


# ============================================================================= Diffusion Policy: a denoised action sequence


def _reach_demos(g: torch.Generator, n: int, steps: int = 40) -> tuple[torch.Tensor, torch.Tensor]:
    """`n` expert demonstrations of a 2-D reaching task with a round obstacle (radius 0.3) in the
    middle of the plane: the agent starts on the left, its goal lies on the right, and the
    expert goes around the obstacle above or below at random (the multimodality a diffusion
    policy is for), its path a smooth curve through a waypoint beside the obstacle, with a
    little hand tremor. Returns the observations (n, steps, 4: position, goal) and the
    actions (n, steps, 2: the position commanded next)."""
    obs, act = torch.zeros(n, steps, 4), torch.zeros(n, steps, 2)
    t = torch.linspace(0, 1, steps + 1)
    for i in range(n):
        start = torch.tensor(
            [-0.9 + 0.3 * float(torch.rand(1, generator=g)), float(torch.rand(1, generator=g)) - 0.5]
        )
        goal = torch.tensor(
            [0.6 + 0.3 * float(torch.rand(1, generator=g)), float(torch.rand(1, generator=g)) - 0.5]
        )
        side = 1.0 if torch.rand(1, generator=g) < 0.5 else -1.0
        mid = torch.tensor([0.0, side * (0.5 + 0.1 * float(torch.rand(1, generator=g)))])
        # a quadratic Bezier through the waypoint: B(1/2) = mid
        ctrl = 2 * mid - (start + goal) / 2
        path = ((1 - t) ** 2)[:, None] * start + (2 * (1 - t) * t)[:, None] * ctrl + (t**2)[:, None] * goal
        path = path + 0.01 * torch.randn(path.shape, generator=g).cumsum(0) / math.sqrt(steps)
        obs[i, :, :2], obs[i, :, 2:] = path[:-1], goal
        act[i] = path[1:]
    return obs, act


class _SinusoidalPosEmb(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = self.dim // 2
        emb = torch.exp(torch.arange(half) * -(math.log(10000) / (half - 1)))
        emb = x.float()[:, None] * emb[None, :]
        return torch.cat((emb.sin(), emb.cos()), dim=-1)


class _Conv1dBlock(nn.Sequential):
    def __init__(self, cin: int, cout: int, k: int, n_groups: int = 8) -> None:
        super().__init__(nn.Conv1d(cin, cout, k, padding=k // 2), nn.GroupNorm(n_groups, cout), nn.Mish())


class _ConditionalResidualBlock1D(nn.Module):
    """Diffusion Policy's `ConditionalResidualBlock1D`: two convolution blocks with FiLM between
    them (a per-channel scale and bias predicted from the condition, `cond_predict_scale`)."""

    def __init__(self, cin: int, cout: int, cond_dim: int, k: int = 5) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([_Conv1dBlock(cin, cout, k), _Conv1dBlock(cout, cout, k)])
        self.out_channels = cout
        self.cond_encoder = nn.Sequential(nn.Mish(), nn.Linear(cond_dim, 2 * cout))
        self.residual_conv = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        out = self.blocks[0](x)
        embed = self.cond_encoder(cond).reshape(len(cond), 2, self.out_channels, 1)
        out = embed[:, 0] * out + embed[:, 1]
        return self.blocks[1](out) + self.residual_conv(x)


class _ConditionalUnet1D(nn.Module):
    """Diffusion Policy's `ConditionalUnet1D` (Chi et al. 2023) shrunk to `down_dims` (32, 64):
    the diffusion step's sinusoidal embedding through a Mish MLP, concatenated with the
    flattened observation features as the global condition of every residual block; a 1-D
    U-Net over the action horizon with strided-convolution downsampling and transposed-convolution
    upsampling."""

    def __init__(self, input_dim: int, global_cond_dim: int, dsed: int = 32, down_dims: tuple[int, ...] = (32, 64),
                 k: int = 5) -> None:  # fmt: skip
        super().__init__()
        all_dims = [input_dim, *down_dims]
        in_out = list(zip(all_dims[:-1], all_dims[1:], strict=True))
        cond_dim = dsed + global_cond_dim
        self.diffusion_step_encoder = nn.Sequential(
            _SinusoidalPosEmb(dsed), nn.Linear(dsed, 4 * dsed), nn.Mish(), nn.Linear(4 * dsed, dsed)
        )
        self.down_modules = nn.ModuleList()
        for ind, (din, dout) in enumerate(in_out):
            last = ind >= len(in_out) - 1
            self.down_modules.append(nn.ModuleList([
                _ConditionalResidualBlock1D(din, dout, cond_dim, k), _ConditionalResidualBlock1D(dout, dout, cond_dim, k),
                nn.Conv1d(dout, dout, 3, 2, 1) if not last else nn.Identity(),
            ]))  # fmt: skip
        mid = all_dims[-1]
        self.mid_modules = nn.ModuleList(
            [
                _ConditionalResidualBlock1D(mid, mid, cond_dim, k),
                _ConditionalResidualBlock1D(mid, mid, cond_dim, k),
            ]
        )
        self.up_modules = nn.ModuleList()
        for ind, (din, dout) in enumerate(reversed(in_out[1:])):
            last = ind >= len(in_out) - 1
            self.up_modules.append(nn.ModuleList([
                _ConditionalResidualBlock1D(2 * dout, din, cond_dim, k), _ConditionalResidualBlock1D(din, din, cond_dim, k),
                nn.ConvTranspose1d(din, din, 4, 2, 1) if not last else nn.Identity(),
            ]))  # fmt: skip
        self.final_conv = nn.Sequential(
            _Conv1dBlock(down_dims[0], down_dims[0], k), nn.Conv1d(down_dims[0], input_dim, 1)
        )

    def forward(
        self, sample: torch.Tensor, timestep: torch.Tensor, global_cond: torch.Tensor
    ) -> torch.Tensor:
        x = sample.moveaxis(-1, -2)
        cond = torch.cat([self.diffusion_step_encoder(timestep), global_cond], -1)
        h = []
        for resnet, resnet2, downsample in self.down_modules:
            x = resnet2(resnet(x, cond), cond)
            h.append(x)
            x = downsample(x)
        for mid_module in self.mid_modules:
            x = mid_module(x, cond)
        for resnet, resnet2, upsample in self.up_modules:
            x = torch.cat((x, h.pop()), dim=1)
            x = upsample(resnet2(resnet(x, cond), cond))
        return self.final_conv(x).moveaxis(-1, -2)


class _DiffusionUnetLowdimPolicy(nn.Module):
    """Diffusion Policy's `DiffusionUnetLowdimPolicy` with `obs_as_global_cond`: a
    `LinearNormalizer` (each observation and action dimension mapped to [-1, 1] by its range in
    the data), the `DDPMScheduler` of 100 steps on `squaredcos_cap_v2` betas with `clip_sample`
    and epsilon prediction, `compute_loss` (the noise's MSE at a random step) and
    `predict_action` (the reverse process from noise, the first `n_action_steps` actions after
    the current observation)."""

    def __init__(self, obs: torch.Tensor, act: torch.Tensor, horizon: int = 16, n_obs_steps: int = 2,
                 n_action_steps: int = 8, num_train_timesteps: int = 100) -> None:  # fmt: skip
        super().__init__()
        self.horizon, self.n_obs_steps, self.n_action_steps = horizon, n_obs_steps, n_action_steps
        self.model = _ConditionalUnet1D(act.shape[-1], n_obs_steps * obs.shape[-1])
        for name, x in (("obs", obs), ("action", act)):
            lo, hi = x.reshape(-1, x.shape[-1]).min(0).values, x.reshape(-1, x.shape[-1]).max(0).values
            self.register_buffer(f"{name}_scale", 2 / (hi - lo).clamp(min=1e-4))
            self.register_buffer(f"{name}_offset", -1 - lo * 2 / (hi - lo).clamp(min=1e-4))
        steps = torch.arange(num_train_timesteps + 1, dtype=torch.float64) / num_train_timesteps
        alpha_bar = torch.cos((steps + 0.008) / 1.008 * math.pi / 2) ** 2
        betas = (1 - alpha_bar[1:] / alpha_bar[:-1]).clamp(max=0.999).float()
        self.num_train_timesteps = num_train_timesteps
        self.register_buffer("betas", betas)
        self.register_buffer("alphas_cumprod", torch.cumprod(1 - betas, 0))

    def normalize(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return x * getattr(self, f"{name}_scale") + getattr(self, f"{name}_offset")

    def compute_loss(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        nobs, trajectory = self.normalize(obs, "obs"), self.normalize(action, "action")
        global_cond = nobs[:, : self.n_obs_steps].reshape(len(obs), -1)
        noise = torch.randn(trajectory.shape)
        timesteps = torch.randint(0, self.num_train_timesteps, (len(obs),))
        ab = self.alphas_cumprod[timesteps][:, None, None]
        noisy_trajectory = ab.sqrt() * trajectory + (1 - ab).sqrt() * noise
        pred = self.model(noisy_trajectory, timesteps, global_cond=global_cond)
        return F.mse_loss(pred, noise)

    @torch.no_grad()
    def predict_action(self, obs: torch.Tensor, num_inference_steps: int = 10) -> torch.Tensor:
        """The `DDIMScheduler` path of the real-robot configs (eta 0, the clipped x0 and the
        epsilon recomputed from it), from noise to the normalized action chunk."""
        global_cond = self.normalize(obs, "obs")[:, : self.n_obs_steps].reshape(len(obs), -1)
        x = torch.randn(len(obs), self.horizon, self.action_scale.numel())
        ratio = self.num_train_timesteps // num_inference_steps
        for t in range((num_inference_steps - 1) * ratio, -1, -ratio):
            eps = self.model(x, torch.full((len(obs),), t), global_cond=global_cond)
            ab = self.alphas_cumprod[t]
            ab_prev = self.alphas_cumprod[t - ratio] if t - ratio >= 0 else torch.tensor(1.0)
            x0 = ((x - (1 - ab).sqrt() * eps) / ab.sqrt()).clamp(-1, 1)
            eps = (x - ab.sqrt() * x0) / (1 - ab).sqrt()
            x = ab_prev.sqrt() * x0 + (1 - ab_prev).sqrt() * eps
        action = (x - self.action_offset) / self.action_scale
        start = self.n_obs_steps - 1
        return action[:, start : start + self.n_action_steps]


def diffusion_policy_unet_lowdim(
    path: str, num_epochs: int = 3, seed: int = 0, bug: str | None = None
) -> list[float]:
    """real-stanford/diffusion_policy's `TrainDiffusionUnetLowdimWorkspace` on a 2-D reaching
    task with an obstacle: 100 expert demonstrations cut by the `SequenceSampler` into windows of
    16 steps (padded at the episodes' ends by repeating their first and last steps), 2
    observation steps as the global condition, batches of 64 (256 in the config), AdamW at
    1e-3 (1e-4 in the config, for a far longer run) with betas (0.95, 0.999) and weight decay
    1e-6, diffusers' `cosine` schedule after 10 warm-up steps, the workspace's gradient
    accumulation (`gradient_accumulate_every` 1 as in the config) with `optimizer.step()`,
    `optimizer.zero_grad()` and `lr_scheduler.step()` inside it, the `EMAModel` (power 0.75, at
    most 0.9999) updated after every step; at the end the EMA policy's action chunks (DDIM, 10
    steps) on held-out states against the expert's. The losses are the noise-prediction MSEs,
    from about 1 down to around 0.1 with noise (a run of a few hundred steps: far from the
    thousands of epochs that make the policy good)."""
    g = _seed(seed)
    obs, act = _reach_demos(g, 100)
    horizon, n_obs_steps = 16, 2
    windows = []
    for e in range(len(obs)):  # SequenceSampler(pad_before=n_obs_steps - 1, pad_after=n_action_steps - 1)
        for start in range(-(n_obs_steps - 1), obs.shape[1] - horizon + 8):
            windows.append((e, start))

    def get(idx: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        o, a = [], []
        for i in idx:
            e, start = windows[i]
            rows = torch.arange(start, start + horizon).clamp(0, obs.shape[1] - 1)
            o.append(obs[e, rows])
            a.append(act[e, rows])
        return torch.stack(o), torch.stack(a)

    policy = _DiffusionUnetLowdimPolicy(obs, act, horizon=horizon, n_obs_steps=n_obs_steps)
    ema_model = copy.deepcopy(policy)
    ema_model.requires_grad_(False)
    ema_model.eval()
    optimizer = torch.optim.AdamW(
        policy.parameters(), lr=1e-3, betas=(0.95, 0.999), eps=1e-8, weight_decay=1e-6
    )
    batch_size, gradient_accumulate_every, warmup = 64, 1, 10
    total = num_epochs * (len(windows) // batch_size) // gradient_accumulate_every
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: (
            s / warmup
            if s < warmup
            else 0.5 * (1 + math.cos(math.pi * (s - warmup) / max(1, total - warmup)))
        ),
    )
    hook = Hook(path)
    hook.register_module(policy)
    losses: list[float] = []
    global_step, optimization_step = 0, 0
    for epoch in range(num_epochs):
        policy.train()
        perm = torch.randperm(len(windows), generator=g).tolist()
        for i in range(0, len(perm) - batch_size + 1, batch_size):
            batch_obs, batch_act = get(perm[i : i + batch_size])
            raw_loss = policy.compute_loss(batch_obs, batch_act)
            loss = raw_loss / gradient_accumulate_every
            loss.backward()
            if global_step % gradient_accumulate_every == 0:
                optimizer.step()
                if bug != "no_zero_grad":  # bug: the loop rewritten without the accumulation's zero_grad
                    optimizer.zero_grad()
                lr_scheduler.step()
            decay = min(0.9999, max(0.0, 1 - (1 + optimization_step) ** -0.75))
            with torch.no_grad():  # EMAModel.step
                for p_ema, p in zip(ema_model.parameters(), policy.parameters(), strict=True):
                    p_ema.mul_(decay).add_(p, alpha=1 - decay)
            optimization_step += 1
            global_step += 1
            losses.append(raw_loss.item())
        print(f"epoch {epoch} train_loss {np.mean(losses[-(len(windows) // batch_size):]):.4f} "
              f"lr {lr_scheduler.get_last_lr()[0]:.2e} ema decay {decay:.4f}")  # fmt: skip
    hook.close()
    test_obs, test_act = _reach_demos(torch.Generator().manual_seed(seed + 2711), 64)
    t0 = torch.randint(1, 30, (64,), generator=g)
    history = torch.stack([test_obs[i, t - 1 : t + 1] for i, t in enumerate(t0.tolist())])
    expert = torch.stack([test_act[i, t : t + 8] for i, t in enumerate(t0.tolist())])
    plan = ema_model.predict_action(history)
    hold = history[:, -1:, :2].expand_as(expert)
    print(f"EMA policy, 8-step action chunks on held-out states: mean error {(plan - expert).norm(dim=2).mean().item():.3f} "
          f"(holding still {(hold - expert).norm(dim=2).mean().item():.3f})")  # fmt: skip
    return losses


# ============================================================================= PETS: probabilistic ensembles and CEM


class _Pendulum:
    """Gym's `Pendulum-v1` written out (g 10, unit mass and length, dt 0.05, torque in [-2, 2],
    speed clipped at 8): the observation (cos, sin, angular velocity), the cost
    `angle^2 + 0.1 velocity^2 + 0.001 torque^2`, a random start of any angle."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.state = np.zeros(2)

    def reset(self) -> np.ndarray:
        self.state = self.rng.uniform([-np.pi, -1.0], [np.pi, 1.0])
        return self._obs()

    def _obs(self) -> np.ndarray:
        th, thdot = self.state
        return np.array([np.cos(th), np.sin(th), thdot], dtype=np.float32)

    def step(self, u: float) -> tuple[np.ndarray, float]:
        th, thdot = self.state
        u = float(np.clip(u, -2.0, 2.0))
        cost = ((th + np.pi) % (2 * np.pi) - np.pi) ** 2 + 0.1 * thdot**2 + 0.001 * u**2
        thdot = np.clip(thdot + (3 * 10.0 / 2 * np.sin(th) + 3.0 * u) * 0.05, -8.0, 8.0)
        self.state = np.array([th + thdot * 0.05, thdot])
        return self._obs(), -cost


def _swish(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


def _swish_typo(x: torch.Tensor) -> torch.Tensor:
    # bug: the port's hand-written swish with its `x *` lost, so every hidden layer is a sigmoid
    return torch.sigmoid(x)


class _PtModel(nn.Module):
    """handful-of-trials-pytorch's `PtModel`, the PETS probabilistic ensemble (Chua et al. 2018):
    five networks held as batched weights (ensemble, in, out) with truncated-normal init of std
    1 / (2 sqrt(in)), four hidden layers with swish, inputs standardized by the statistics of the
    data (`fit_input_stats`), a mean and a log-variance per output softly bounded by learned
    `max_logvar` and `min_logvar`, and per-layer L2 decays (`compute_decays`)."""

    def __init__(self, ensemble_size: int, in_features: int, out_features: int, hidden: int = 64,
                 act: Any = _swish) -> None:  # fmt: skip
        super().__init__()
        self.num_nets, self.out_features, self.act = ensemble_size, out_features, act
        dims = [in_features, hidden, hidden, hidden, hidden, 2 * out_features]
        self.weights, self.biases = nn.ParameterList(), nn.ParameterList()
        for d_in, d_out in zip(dims[:-1], dims[1:], strict=True):
            w = torch.empty(ensemble_size, d_in, d_out)
            nn.init.trunc_normal_(w, std=1.0 / (2.0 * math.sqrt(d_in)), a=-2.0 / (2.0 * math.sqrt(d_in)),
                                  b=2.0 / (2.0 * math.sqrt(d_in)))  # fmt: skip
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(torch.zeros(ensemble_size, 1, d_out)))
        self.decays = [0.000025, 0.00005, 0.000075, 0.000075, 0.0001]
        self.register_buffer("inputs_mu", torch.zeros(in_features))
        self.register_buffer("inputs_sigma", torch.ones(in_features))
        self.max_logvar = nn.Parameter(torch.ones(1, out_features) / 2.0)
        self.min_logvar = nn.Parameter(-torch.ones(1, out_features) * 10.0)

    def compute_decays(self) -> torch.Tensor:
        return sum(d * (w**2).sum() / 2.0 for d, w in zip(self.decays, self.weights, strict=True))

    def fit_input_stats(self, data: np.ndarray) -> None:
        mu, sigma = data.mean(0), data.std(0)
        sigma[sigma < 1e-12] = 1.0
        self.inputs_mu.copy_(torch.as_tensor(mu, dtype=torch.float32))
        self.inputs_sigma.copy_(torch.as_tensor(sigma, dtype=torch.float32))

    def forward(self, inputs: torch.Tensor, ret_logvar: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        x = (inputs - self.inputs_mu) / self.inputs_sigma
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            x = x.matmul(w) + b
            if i < len(self.weights) - 1:
                x = self.act(x)
        mean, logvar = x[..., : self.out_features], x[..., self.out_features :]
        logvar = self.max_logvar - F.softplus(self.max_logvar - logvar)
        logvar = self.min_logvar + F.softplus(logvar - self.min_logvar)
        return (mean, logvar) if ret_logvar else (mean, torch.exp(logvar))


def pets_pendulum_ensemble_cem(
    path: str, n_trials: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """PETS (Chua et al. 2018) as handful-of-trials-pytorch's `MBExperiment` and `MPC` run it, on
    gym's pendulum swing-up (episodes of 80 steps here, 200 in gym): one episode of random
    torques, then after each episode the ensemble trained on everything gathered (inputs the
    observation and the action, targets the change of the observation; each network on its own
    bootstrap resample, 5 epochs of batches of 32, Adam 1e-3) with the Gaussian NLL
    `(mean - target)^2 / var + log var` summed over the networks, the `0.01 (max_logvar -
    min_logvar)` term and the L2 decays; the next three episodes planned by the cross-entropy
    method (horizon 12, 2 iterations of 50 action sequences, 5 elites, alpha 0.1, the plan
    shifted each step; 5 iterations of 400 with 40 elites in the repository) with trajectory
    sampling in which each particle keeps its network (TSinf) and the known cost. The losses are the training
    losses, falling far below zero as the networks grow confident on deterministic dynamics;
    in so few episodes the returns barely improve."""
    g = _seed(seed)
    rng = np.random.default_rng(seed + 2704)
    env = _Pendulum(rng)
    ensemble = _PtModel(5, 4, 3, act=_swish_typo if bug == "deep_sigmoid" else _swish)
    optimizer = torch.optim.Adam(ensemble.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(ensemble)
    horizon, popsize, num_elites, max_iters, alpha, task_hor = 12, 50, 5, 2, 0.1, 80
    train_in, train_targs = np.zeros((0, 4), np.float32), np.zeros((0, 3), np.float32)
    losses: list[float] = []

    def cost(obs: torch.Tensor, acs: torch.Tensor) -> torch.Tensor:
        th = torch.atan2(obs[..., 1], obs[..., 0])
        return th**2 + 0.1 * obs[..., 2] ** 2 + 0.001 * acs**2

    @torch.no_grad()
    def plan(obs: np.ndarray, mean: torch.Tensor) -> torch.Tensor:
        var = torch.full((horizon,), ((2.0 - -2.0) / 4) ** 2)
        for _ in range(max_iters):
            noise = torch.randn(popsize, horizon, generator=g) * var.sqrt()
            samples = (mean + noise).clamp(-2.0, 2.0)
            cur = torch.as_tensor(obs).expand(ensemble.num_nets, popsize, 3)
            total = torch.zeros(ensemble.num_nets, popsize)
            for t in range(horizon):
                acs = samples[:, t].expand(ensemble.num_nets, popsize)
                m, v = ensemble(torch.cat([cur, acs[..., None]], -1))
                cur = cur + m + v.sqrt() * torch.randn(m.shape, generator=g)
                total += cost(cur, acs)
            elites = samples[total.mean(0).argsort()[:num_elites]]
            mean = alpha * mean + (1 - alpha) * elites.mean(0)
            var = alpha * var + (1 - alpha) * elites.var(0)
        return mean

    for trial in range(n_trials):
        obs, ep_obs, ep_acs, ret = env.reset(), [], [], 0.0
        ep_obs.append(obs)
        prev = torch.zeros(horizon)
        for _ in range(task_hor):
            if trial == 0:
                u = float(rng.uniform(-2.0, 2.0))
            else:
                prev = plan(obs, torch.cat([prev[1:], torch.zeros(1)]))
                u = float(prev[0])
            obs, r = env.step(u)
            ep_obs.append(obs)
            ep_acs.append(u)
            ret += r
        o, a = np.array(ep_obs, np.float32), np.array(ep_acs, np.float32)[:, None]
        train_in = np.concatenate([train_in, np.concatenate([o[:-1], a], 1)])
        train_targs = np.concatenate([train_targs, o[1:] - o[:-1]])
        print(f"trial {trial}: return {ret:.1f} over {task_hor} steps, {len(train_in)} transitions")
        ensemble.fit_input_stats(train_in)
        idxs = rng.integers(len(train_in), size=(ensemble.num_nets, len(train_in)))
        x_all, y_all = torch.as_tensor(train_in), torch.as_tensor(train_targs)
        for _ in range(5):
            for i in range(0, idxs.shape[1], 32):
                batch = torch.as_tensor(idxs[:, i : i + 32])
                mean, logvar = ensemble(x_all[batch], ret_logvar=True)
                inv_var = torch.exp(-logvar)
                train_loss = (((mean - y_all[batch]) ** 2) * inv_var + logvar).mean(-1).mean(-1).sum()
                train_loss += 0.01 * (ensemble.max_logvar.sum() - ensemble.min_logvar.sum())
                train_loss += ensemble.compute_decays()
                optimizer.zero_grad()
                train_loss.backward()
                optimizer.step()
                losses.append(train_loss.item())
            idxs = idxs[:, rng.permutation(idxs.shape[1])]
        with torch.no_grad():
            mse = ((ensemble(x_all)[0] - y_all) ** 2).mean().item()
        print(f"  model training loss {np.mean(losses[-10:]):.3f}, MSE on the data {mse:.5f}")
    hook.close()
    return losses


# ============================================================================= GraphMAE: masked graph autoencoder


class _DenseGATConv(nn.Module):
    """GraphMAE's `GATConv` on a dense adjacency: a shared linear map into `heads` heads,
    additive attention scores `LeakyReLU(a_l . h_i + a_r . h_j)` (slope 0.2) over the
    neighbours j of i, a softmax with attention dropout, the heads concatenated, an optional
    activation."""

    def __init__(self, cin: int, cout: int, heads: int, feat_drop: float, attn_drop: float,
                 activation: nn.Module | None) -> None:  # fmt: skip
        super().__init__()
        self.heads, self.cout = heads, cout
        self.fc = nn.Linear(cin, heads * cout, bias=False)
        self.attn_l = nn.Parameter(torch.empty(heads, cout))
        self.attn_r = nn.Parameter(torch.empty(heads, cout))
        self.bias = nn.Parameter(torch.zeros(heads * cout))
        self.feat_drop, self.attn_drop = nn.Dropout(feat_drop), nn.Dropout(attn_drop)
        self.activation = activation
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_normal_(self.fc.weight, gain=gain)
        nn.init.xavier_normal_(self.attn_l, gain=gain)
        nn.init.xavier_normal_(self.attn_r, gain=gain)

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        h = self.fc(self.feat_drop(x)).view(-1, self.heads, self.cout)
        el, er = (h * self.attn_l).sum(-1), (h * self.attn_r).sum(-1)  # (N, heads)
        e = F.leaky_relu(el.T[:, :, None] + er.T[:, None, :], 0.2)  # (heads, dst i, src j)
        e = e.masked_fill(~adj[None], float("-inf"))
        a = self.attn_drop(torch.softmax(e, -1))
        out = torch.einsum("hij,jhc->ihc", a, h).reshape(-1, self.heads * self.cout) + self.bias
        return self.activation(out) if self.activation is not None else out


class _GraphMAE(nn.Module):
    """GraphMAE's `PreModel` (Hou et al. 2022): the input features of half the nodes masked (most
    replaced by a learned `enc_mask_token` after zeroing, 5 % by another node's features), a
    two-layer GAT encoder with PReLU, `encoder_to_decoder`, the masked nodes' codes re-masked
    to zero, a one-layer GAT decoder back to the features, and the scaled cosine error
    `mean((1 - cos(x, x_rec))^alpha)` on the masked nodes."""

    def __init__(self, in_dim: int, num_hidden: int = 64, heads: int = 4, mask_rate: float = 0.5,
                 replace_rate: float = 0.05, alpha_l: float = 3.0) -> None:  # fmt: skip
        super().__init__()
        self.mask_rate, self.replace_rate, self.alpha_l = mask_rate, replace_rate, alpha_l
        self.encoder = nn.ModuleList([
            _DenseGATConv(in_dim, num_hidden // heads, heads, 0.2, 0.1, nn.PReLU()),
            _DenseGATConv(num_hidden, num_hidden // heads, heads, 0.2, 0.1, nn.PReLU()),
        ])  # fmt: skip
        self.encoder_to_decoder = nn.Linear(num_hidden, num_hidden, bias=False)
        self.decoder = _DenseGATConv(num_hidden, in_dim, 1, 0.2, 0.1, None)
        self.enc_mask_token = nn.Parameter(torch.zeros(1, in_dim))

    def embed(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        for layer in self.encoder:
            x = layer(x, adj)
        return x

    def encoding_mask_noise(self, x: torch.Tensor, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        num_nodes = x.shape[0]
        perm = torch.randperm(num_nodes, generator=g)
        mask_nodes = perm[: int(self.mask_rate * num_nodes)]
        num_noise = int(self.replace_rate * len(mask_nodes))
        perm_mask = torch.randperm(len(mask_nodes), generator=g)
        token_nodes = mask_nodes[perm_mask[: int((1 - self.replace_rate) * len(mask_nodes))]]
        noise_nodes = mask_nodes[perm_mask[-num_noise:]]
        out_x = x.clone()
        out_x[token_nodes] = 0.0
        out_x[noise_nodes] = x[torch.randperm(num_nodes, generator=g)[:num_noise]]
        out_x[token_nodes] += self.enc_mask_token
        return out_x, mask_nodes

    def forward(self, x: torch.Tensor, adj: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        use_x, mask_nodes = self.encoding_mask_noise(x, g)
        rep = self.encoder_to_decoder(self.embed(use_x, adj))
        rep[mask_nodes] = 0
        recon = self.decoder(rep, adj)
        x_init, x_rec = F.normalize(x[mask_nodes], p=2, dim=-1), F.normalize(recon[mask_nodes], p=2, dim=-1)
        return (1 - (x_init * x_rec).sum(dim=-1)).pow(self.alpha_l).mean()


def graphmae_masked_feature_sce(path: str, max_epoch: int = 150, seed: int = 0) -> list[float]:
    """THUDM/GraphMAE's `main_transductive.py` on a Cora-like graph: the features row-normalized
    as Cora's are, self loops added, `PreModel` with 4 heads of 16, mask rate 0.5, replace rate
    0.05 and alpha 3, Adam 1e-3 with weight decay 2e-4 under the cosine `LambdaLR` of its
    `--scheduler` option, full-graph steps; then the frozen encoder's embeddings probed by a
    logistic regression (Adam 0.01, weight decay 1e-4, 100 epochs) on 20 labelled nodes per
    class, its test accuracy beside the raw features'. The losses are the scaled cosine errors:
    below 1 from the start and falling slowly with noise from the random masks."""
    g = _seed(seed)
    adj, features, labels = _citation_graph(g, n=320, words=160)
    features = features / features.sum(1, keepdim=True).clamp(min=1)
    adj = (adj + torch.eye(len(adj))) > 0
    model = _GraphMAE(features.shape[1])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=2e-4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda epoch: (1 + np.cos(epoch * np.pi / max_epoch)) * 0.5
    )
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for epoch in range(max_epoch):
        model.train()
        loss = model(features, adj, g)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if epoch % 50 == 0:
            print(f"# Epoch {epoch}: train_loss: {loss.item():.4f}")
    hook.close()
    model.eval()
    with torch.no_grad():
        embeds = model.embed(features, adj)
    nb_classes = int(labels.max()) + 1
    idx_train = torch.cat([torch.where(labels == c)[0][:20] for c in range(nb_classes)])
    idx_test = torch.tensor(sorted(set(range(len(labels))) - set(idx_train.tolist())))
    for name, feats in (("GraphMAE embeddings", embeds), ("raw features", features)):
        probe = nn.Linear(feats.shape[1], nb_classes)
        opt = torch.optim.Adam(probe.parameters(), lr=0.01, weight_decay=1e-4)
        for _ in range(100):
            opt.zero_grad()
            F.cross_entropy(probe(feats[idx_train]), labels[idx_train]).backward()
            opt.step()
        acc = (probe(feats[idx_test]).argmax(1) == labels[idx_test]).float().mean().item()
        print(f"linear probe on {name}: test accuracy {acc:.3f}")
    return losses


# ============================================================================= data2vec: an EMA teacher's layer averages


class _TextEncoder(nn.Module):
    """A small RoBERTa-style encoder (token and learned position embeddings, LayerNorm, three
    post-norm transformer layers with GELU) that returns every layer's output, as fairseq's
    `TransformerEncoder` returns its `inner_states`."""

    def __init__(self, vocab: int, d: int = 48, layers: int = 3, max_len: int = 40) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d, padding_idx=0)
        self.embed_positions = nn.Embedding(max_len, d)
        self.layernorm_embedding = nn.LayerNorm(d)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, activation="gelu", batch_first=True)
            for _ in range(layers)
        )
        for m in self.modules():  # init_bert_params
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        x = self.layernorm_embedding(
            self.embed_tokens(tokens) + self.embed_positions(torch.arange(tokens.size(1)))
        )
        states = []
        for layer in self.layers:
            x = layer(x)
            states.append(x)
        return states


class _EMAModule:
    """fairseq's `EMAModule`, not an `nn.Module`: a deep copy of the model whose parameters follow
    the model's by `ema = decay * ema + (1 - decay) * param`, those in `skip_keys` (the
    embeddings, with `ema_transformer_layers_only`) copied as they are."""

    def __init__(self, model: nn.Module, decay: float, skip_keys: tuple[str, ...]) -> None:
        self.model = copy.deepcopy(model)
        self.decay, self.skip_keys = decay, skip_keys

    @torch.no_grad()
    def step(self, new_model: nn.Module) -> None:
        ema_params = dict(self.model.named_parameters())
        for key, param in new_model.named_parameters():
            if key.startswith(self.skip_keys):
                ema_params[key].copy_(param)
            else:
                ema_params[key].mul_(self.decay).add_(param, alpha=1 - self.decay)


class _Data2VecText(nn.Module):
    """fairseq's `Data2VecTextModel` (Baevski et al. 2022): the student encoder on the masked
    tokens, a regression head (`head_layers` 1), the EMA teacher made at the first update on the
    unmasked tokens, the targets the average of its top 2 layers (of 3) each instance-normalized over
    time (`instance_norm_target_layer`), a smooth L1 (`loss_beta` 4) at the masked positions
    summed over dimensions and scaled by 1 / sqrt(dim), the EMA decay annealed linearly from
    `ema_decay` to `ema_end_decay`."""

    def __init__(self, vocab: int, d: int = 48, freeze_student: bool = False) -> None:
        super().__init__()
        self.encoder = _TextEncoder(vocab, d)
        self.final_proj = nn.Linear(d, d)
        self.ema: _EMAModule | None = None
        self.average_top_k_layers, self.loss_beta, self.freeze_student = 2, 4.0, freeze_student
        self.ema_decay, self.ema_end_decay, self.ema_anneal_end_step = 0.99, 0.999, 160

    def make_ema_teacher(self) -> None:
        self.ema = _EMAModule(self.encoder, self.ema_decay, skip_keys=("embed_tokens", "embed_positions"))
        if self.freeze_student:
            # bug: the EMA copy's freeze loop written against the student (`self.encoder`), not the copy
            for p in self.encoder.parameters():
                p.requires_grad = False
        else:
            for p in self.ema.model.parameters():
                p.requires_grad = False

    def set_num_updates(self, num_updates: int) -> None:
        if self.ema is None:
            self.make_ema_teacher()
        elif self.training:
            frac = min(1.0, num_updates / self.ema_anneal_end_step)
            self.ema.decay = self.ema_decay + (self.ema_end_decay - self.ema_decay) * frac
            self.ema.step(self.encoder)

    def forward(
        self, src_tokens: torch.Tensor, target_tokens: torch.Tensor, masked: torch.Tensor
    ) -> torch.Tensor:
        x = self.final_proj(self.encoder(src_tokens)[-1][masked])
        assert self.ema is not None
        with torch.no_grad():
            self.ema.model.eval()
            layers = self.ema.model(target_tokens)[-self.average_top_k_layers :]
            y = sum(F.instance_norm(t.transpose(1, 2)).transpose(1, 2) for t in layers) / len(layers)
            y = y[masked]
        loss = F.smooth_l1_loss(x, y, reduction="none", beta=self.loss_beta).sum(dim=-1)
        return loss.sum() / math.sqrt(x.size(-1)) / len(loss)


def data2vec_text_ema_teacher(
    path: str, max_update: int = 160, seed: int = 0, bug: str | None = None
) -> list[float]:
    """fairseq's data2vec text pre-training (`examples/data2vec`, `task: masked_lm`) on sentences
    of a small grammar packed into blocks of 32 tokens: RoBERTa's masking (15 % of the tokens, 80 %
    of those to `<mask>`, 10 % to a random token), `Data2VecTextModel` as above, Adam with betas
    (0.9, 0.98), eps 1e-6 and weight decay 0.01 at 1e-3 (2e-4 in the config) under the
    `polynomial_decay` schedule with 10 % warm-up, batches of 32, `set_num_updates` after each
    update (which makes the teacher at the first one and steps it after), clipping at 1 (off in
    the config). The loss falls as the student learns to predict the teacher, with the teacher's
    own drift in the targets."""
    g = _seed(seed)
    sentences, words = _grammar_sentences(g, 1600)
    specials = ["<pad>", "<s>", "</s>", "<unk>", "<mask>"]
    stoi = {w: i for i, w in enumerate(specials + words)}
    stream = [tok for s in sentences for tok in [1, *[stoi[w] for w in s], 2]]
    blocks = torch.tensor(stream[: len(stream) // 32 * 32]).view(-1, 32)
    vocab, mask_idx = len(specials) + len(words), 4
    model = _Data2VecText(vocab, freeze_student=bug == "frozen_by_mistake")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.01)
    warmup = max_update // 10
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: (s + 1) / warmup if s < warmup else max(0.0, (max_update - s) / (max_update - warmup)),
    )
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    num_updates = 0
    model.set_num_updates(num_updates)
    while num_updates < max_update:
        perm = torch.randperm(len(blocks), generator=g)
        for i in range(0, len(perm) - 31, 32):
            if num_updates == max_update:
                break
            model.train()
            target_tokens = blocks[perm[i : i + 32]]
            masked = (torch.rand(target_tokens.shape, generator=g) < 0.15) & (target_tokens > 2)
            roll = torch.rand(target_tokens.shape, generator=g)
            src_tokens = torch.where(masked & (roll < 0.8), mask_idx, target_tokens)
            random_tokens = torch.randint(len(specials), vocab, target_tokens.shape, generator=g)
            src_tokens = torch.where(masked & (roll >= 0.8) & (roll < 0.9), random_tokens, src_tokens)
            loss = model(src_tokens, target_tokens, masked)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            num_updates += 1
            model.set_num_updates(num_updates)
            losses.append(loss.item())
            if num_updates % 50 == 0:
                print(f"update {num_updates} loss {np.mean(losses[-50:]):.4f} ema_decay {model.ema.decay:.4f} "
                      f"lr {scheduler.get_last_lr()[0]:.2e}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= DIEN: interest evolution with AUGRU


def _behaviour_logs(
    g: torch.Generator, n_users: int, n_items: int = 300, n_cats: int = 12, max_len: int = 15
) -> dict[str, torch.Tensor]:
    """Amazon-Books-like click logs as DIEN's `prepare_data` lays them out: each user's history
    of 5 to 15 clicked items (padded to 15, with its mask) follows an interest that drifts
    between categories (stay with probability 0.7, move to the next category 0.2, jump 0.1),
    items drawn within the category by popularity; a not-clicked item beside each click
    (`noclk_mid_his`, for the auxiliary loss); and two samples per user, the next item of the
    chain as a positive and a random item as a negative."""
    item_cat = torch.randint(0, n_cats, (n_items,), generator=g)
    by_cat = [torch.nonzero(item_cat == c)[:, 0] for c in range(n_cats)]
    pop = [1.0 / torch.arange(1, len(items) + 1).float() ** 0.8 for items in by_cat]

    def draw(c: int) -> int:
        return int(by_cat[c][torch.multinomial(pop[c], 1, generator=g)])

    out: dict[str, list[Any]] = {k: [] for k in ("uid", "mid", "cat", "mid_his", "cat_his", "noclk_mid_his",
                                                  "noclk_cat_his", "mask", "target")}  # fmt: skip
    for u in range(n_users):
        length = int(torch.randint(5, max_len + 1, (1,), generator=g))
        c = int(torch.randint(0, n_cats, (1,), generator=g))
        his = []
        for _ in range(length + 1):
            r = float(torch.rand(1, generator=g))
            c = (
                c
                if r < 0.7
                else (c + 1) % n_cats
                if r < 0.9
                else int(torch.randint(0, n_cats, (1,), generator=g))
            )
            his.append(draw(c))
        mids = torch.zeros(max_len, dtype=torch.long)
        mids[:length] = torch.tensor(his[:length])
        noclk = torch.randint(0, n_items, (max_len,), generator=g)
        mask = (torch.arange(max_len) < length).float()
        for mid, target in ((his[-1], 1.0), (int(torch.randint(0, n_items, (1,), generator=g)), 0.0)):
            out["uid"].append(u)
            out["mid"].append(mid)
            out["cat"].append(int(item_cat[mid]))
            out["mid_his"].append(mids)
            out["cat_his"].append(item_cat[mids] * mask.long())
            out["noclk_mid_his"].append(noclk)
            out["noclk_cat_his"].append(item_cat[noclk])
            out["mask"].append(mask)
            out["target"].append(target)
    return {k: torch.stack(v) if isinstance(v[0], torch.Tensor) else torch.tensor(v) for k, v in out.items()}


class _VecAttGRUCell(nn.Module):
    """DIEN's `VecAttGRUCell` (AUGRU): a GRU cell whose update gate is scaled by the attention
    score, `u' = (1 - a) u`, `h = u' h_prev + (1 - u') c`."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.gates = nn.Linear(2 * d, 2 * d)
        self.candidate = nn.Linear(2 * d, d)

    def forward(self, x: torch.Tensor, state: torch.Tensor, att_score: torch.Tensor) -> torch.Tensor:
        r, u = torch.sigmoid(self.gates(torch.cat([x, state], 1))).chunk(2, 1)
        c = torch.tanh(self.candidate(torch.cat([x, r * state], 1)))
        u = (1.0 - att_score) * u
        return u * state + (1 - u) * c


class _DIEN(nn.Module):
    """DIEN's `Model_DIN_V2_Gru_Vec_attGru_Neg` (Zhou et al. 2019) in PyTorch: item and category
    embeddings of 18 (an item's embedding is the two concatenated), a user embedding, the
    interest extractor GRU (36) over the history, the auxiliary network (BatchNorm, dense 100
    and 50 with sigmoids, 2 outputs, softmax) judging each hidden state against the next click
    and a not-clicked item, DIN's attention (dense 80 and 40 with sigmoids on [q, k, q - k,
    q * k], a softmax over the valid steps) of the target item over the interest states, the
    AUGRU interest evolving layer, and the final MLP (BatchNorm, 200 and 80 with PReLU, 2
    outputs)."""

    def __init__(
        self, n_users: int, n_items: int, n_cats: int, emb: int = 18, probs_out: bool = False
    ) -> None:
        super().__init__()
        d = 2 * emb
        self.probs_out = probs_out
        self.uid_embeddings = nn.Embedding(n_users, emb)
        self.mid_embeddings = nn.Embedding(n_items, emb)
        self.cat_embeddings = nn.Embedding(n_cats, emb)
        self.gru = nn.GRU(d, d, batch_first=True)
        self.auxiliary_net = nn.Sequential(
            nn.BatchNorm1d(2 * d), nn.Linear(2 * d, 100), nn.Sigmoid(), nn.Linear(100, 50), nn.Sigmoid(),
            nn.Linear(50, 2),
        )  # fmt: skip
        self.att_query = nn.Linear(d, d)
        self.attention = nn.Sequential(
            nn.Linear(4 * d, 80), nn.Sigmoid(), nn.Linear(80, 40), nn.Sigmoid(), nn.Linear(40, 1)
        )
        self.augru = _VecAttGRUCell(d)
        self.fcn = nn.Sequential(
            nn.BatchNorm1d(emb + 4 * d), nn.Linear(emb + 4 * d, 200), nn.PReLU(), nn.Linear(200, 80), nn.PReLU(),
            nn.Linear(80, 2),
        )  # fmt: skip

    def item_eb(self, mid: torch.Tensor, cat: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.mid_embeddings(mid), self.cat_embeddings(cat)], -1)

    def auxiliary_loss(self, h: torch.Tensor, click: torch.Tensor, noclick: torch.Tensor, mask: torch.Tensor):
        def prop(x: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape
            return (torch.softmax(self.auxiliary_net(x.reshape(b * t, -1)), -1) + 0.00000001)[:, 0].view(b, t)

        click_loss = -torch.log(prop(torch.cat([h, click], -1))) * mask
        noclick_loss = -torch.log(1.0 - prop(torch.cat([h, noclick], -1))) * mask
        return (click_loss + noclick_loss).mean()

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        mask = batch["mask"]
        item_eb = self.item_eb(batch["mid"], batch["cat"])
        item_his_eb = self.item_eb(batch["mid_his"], batch["cat_his"])
        noclk_his_eb = self.item_eb(batch["noclk_mid_his"], batch["noclk_cat_his"])
        lengths = mask.sum(1).long()
        packed = nn.utils.rnn.pack_padded_sequence(
            item_his_eb, lengths, batch_first=True, enforce_sorted=False
        )
        rnn_outputs = nn.utils.rnn.pad_packed_sequence(self.gru(packed)[0], batch_first=True,
                                                       total_length=mask.size(1))[0]  # fmt: skip
        aux_loss = self.auxiliary_loss(
            rnn_outputs[:, :-1], item_his_eb[:, 1:], noclk_his_eb[:, 1:], mask[:, 1:]
        )
        queries = self.att_query(item_eb)[:, None].expand_as(rnn_outputs)
        din_all = torch.cat([queries, rnn_outputs, queries - rnn_outputs, queries * rnn_outputs], -1)
        scores = self.attention(din_all).squeeze(-1).masked_fill(mask == 0, -(2**32) + 1)
        alphas = torch.softmax(scores, 1)
        state = torch.zeros_like(item_eb)
        for t in range(mask.size(1)):
            new = self.augru(rnn_outputs[:, t], state, alphas[:, t : t + 1])
            state = torch.where(mask[:, t : t + 1] > 0, new, state)
        item_his_eb_sum = (item_his_eb * mask[..., None]).sum(1)
        inp = torch.cat([self.uid_embeddings(batch["uid"]), item_eb, item_his_eb_sum, item_eb * item_his_eb_sum,
                         state], 1)  # fmt: skip
        logits = self.fcn(inp)
        if self.probs_out:
            # bug: the port returns the original's `y_hat = softmax(dnn3) + 1e-8`, while the training
            # script below gives it to `nn.CrossEntropyLoss` as scores
            return torch.softmax(logits, -1) + 0.00000001, aux_loss
        return logits, aux_loss


def dien_augru_auxiliary_loss(
    path: str, epochs: int = 3, seed: int = 0, bug: str | None = None
) -> list[float]:
    """mouna99/dien's `train.py` (`DIEN` on Amazon Books) ported to PyTorch as its users port it, on
    synthetic click logs: batches of 128, the click cross-entropy (`nn.CrossEntropyLoss` on the
    two outputs) plus the auxiliary loss with weight 1, Adam 1e-3, a test pass each epoch with
    the AUC and the accuracy in `model.eval()`. The loss sums the click loss (from log 2) and
    the auxiliary loss (from 2 log 2), both falling."""
    g = _seed(seed)
    n_users, n_items, n_cats = 2200, 300, 12
    data = _behaviour_logs(g, n_users, n_items, n_cats)
    n_train = 2 * 1900
    model = _DIEN(n_users, n_items, n_cats, probs_out=bug == "softmax_before_ce")
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(n_train, generator=g)
        for i in range(0, n_train - 127, 128):
            batch = {k: v[perm[i : i + 128]] for k, v in data.items()}
            y_hat, aux_loss = model(batch)
            loss = criterion(y_hat, batch["target"].long()) + 1.0 * aux_loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            test = {k: v[n_train:] for k, v in data.items()}
            prob = torch.softmax(model(test)[0], -1)[:, 1] if not model.probs_out else model(test)[0][:, 1]
            y = test["target"]
            pos, neg = prob[y == 1], prob[y == 0]
            auc = (pos[:, None] > neg[None, :]).float().mean().item()
            acc = ((prob > 0.5).float() == y).float().mean().item()
        print(
            f"epoch {epoch}: train loss {np.mean(losses[-40:]):.4f}, test auc {auc:.4f}, accuracy {acc:.4f}"
        )
    hook.close()
    return losses


# ============================================================================= Anomaly Transformer: association discrepancy


def _server_metrics(g: torch.Generator, length: int, channels: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """SMD-like server metrics (length, channels): daily and faster cycles of their own phases and
    mixtures, slow random walks, correlated noise; and, in the second half only, anomalies of
    10 to 40 steps (spikes, level shifts, a cycle at the wrong frequency, a frozen sensor) on a
    few channels at a time, with their point labels."""
    t = torch.arange(length).float()
    mix = torch.randn(channels, 3, generator=g)
    base = torch.stack([torch.sin(2 * math.pi * t / 96), torch.sin(2 * math.pi * t / 24 + 1.0),
                        torch.sin(2 * math.pi * t / 7 + 2.0)])  # fmt: skip
    x = (mix @ base).T + 0.1 * torch.randn(length, channels, generator=g).cumsum(0) / math.sqrt(50)
    x = x + 0.15 * torch.randn(length, 1, generator=g) + 0.1 * torch.randn(length, channels, generator=g)
    labels = torch.zeros(length)
    pos = length // 2 + 50
    while pos < length - 60:
        dur = int(torch.randint(10, 41, (1,), generator=g))
        chans = torch.randperm(channels, generator=g)[: int(torch.randint(1, 4, (1,), generator=g))]
        kind = int(torch.randint(0, 4, (1,), generator=g))
        seg = slice(pos, pos + dur)
        for c in chans.tolist():
            if kind == 0:
                x[seg, c] += 3.0 * torch.randn(dur, generator=g).sign()
            elif kind == 1:
                x[seg, c] += 2.5
            elif kind == 2:
                x[seg, c] = float(mix[c].norm()) * torch.sin(2 * math.pi * t[seg] / 5)
            else:
                x[seg, c] = x[pos, c]
        labels[seg] = 1
        pos += dur + int(torch.randint(80, 250, (1,), generator=g))
    return x, labels


class _AnomalyAttention(nn.Module):
    """thuml/Anomaly-Transformer's `AttentionLayer` around `AnomalyAttention`: the series
    association (the softmax of scaled dot products) and the prior association (a Gaussian
    kernel of the distance |i - j| with a learned scale per position and head,
    `sigma = 3^(sigmoid(5 s) + 1e-5) - 1`)."""

    def __init__(self, win_size: int, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.query_projection = nn.Linear(d_model, d_model)
        self.key_projection = nn.Linear(d_model, d_model)
        self.value_projection = nn.Linear(d_model, d_model)
        self.sigma_projection = nn.Linear(d_model, n_heads)
        self.out_projection = nn.Linear(d_model, d_model)
        idx = torch.arange(win_size).float()
        self.register_buffer("distances", (idx[:, None] - idx[None, :]).abs())

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, length, _ = x.shape
        h = self.n_heads
        q = self.query_projection(x).view(b, length, h, -1)
        k = self.key_projection(x).view(b, length, h, -1)
        v = self.value_projection(x).view(b, length, h, -1)
        sigma = self.sigma_projection(x).view(b, length, h)
        attn = torch.einsum("blhe,bshe->bhls", q, k) / math.sqrt(q.size(-1))
        sigma = torch.sigmoid(sigma.transpose(1, 2) * 5) + 1e-5
        sigma = (torch.pow(3, sigma) - 1).unsqueeze(-1)  # (b, h, l, 1)
        prior = 1.0 / (math.sqrt(2 * math.pi) * sigma) * torch.exp(-(self.distances**2) / 2 / (sigma**2))
        series = torch.softmax(attn, dim=-1)
        out = torch.einsum("bhls,bshd->blhd", series, v).reshape(b, length, -1)
        return self.out_projection(out), series, prior


class _AnomalyTransformer(nn.Module):
    """The `AnomalyTransformer` model: a circular-convolution token embedding plus sinusoidal
    positions, encoder layers of anomaly attention and a 1x1-convolution feed-forward (GELU)
    with post-norms, a final LayerNorm and a linear reconstruction of the window."""

    def __init__(
        self, win_size: int, enc_in: int, d_model: int = 64, n_heads: int = 4, e_layers: int = 2
    ) -> None:
        super().__init__()
        self.token_conv = nn.Conv1d(enc_in, d_model, 3, padding=1, padding_mode="circular", bias=False)
        nn.init.kaiming_normal_(self.token_conv.weight, mode="fan_in", nonlinearity="leaky_relu")
        pos = torch.arange(win_size).float()[:, None]
        div = torch.exp(torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model))
        pe = torch.zeros(win_size, d_model)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer("pe", pe)
        self.attentions = nn.ModuleList(
            _AnomalyAttention(win_size, d_model, n_heads) for _ in range(e_layers)
        )
        self.conv1 = nn.ModuleList(nn.Conv1d(d_model, d_model, 1) for _ in range(e_layers))
        self.conv2 = nn.ModuleList(nn.Conv1d(d_model, d_model, 1) for _ in range(e_layers))
        self.norm1 = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(e_layers))
        self.norm2 = nn.ModuleList(nn.LayerNorm(d_model) for _ in range(e_layers))
        self.norm = nn.LayerNorm(d_model)
        self.projection = nn.Linear(d_model, enc_in)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        x = self.token_conv(x.permute(0, 2, 1)).transpose(1, 2) + self.pe
        series_list, prior_list = [], []
        for attention, conv1, conv2, norm1, norm2 in zip(self.attentions, self.conv1, self.conv2, self.norm1,
                                                         self.norm2, strict=True):  # fmt: skip
            new_x, series, prior = attention(x)
            x = norm1(x + new_x)
            y = conv2(F.gelu(conv1(x.transpose(-1, 1)))).transpose(-1, 1)
            x = norm2(x + y)
            series_list.append(series)
            prior_list.append(prior)
        return self.projection(self.norm(x)), series_list, prior_list


def anomaly_transformer_minimax(
    path: str, num_epochs: int = 3, seed: int = 0, bug: str | None = None
) -> list[float]:
    """thuml/Anomaly-Transformer's `solver.py` (Xu et al. 2022) on SMD-like server metrics: the
    training half standardized by its own statistics, sliding windows of 40 (100 in the paper)
    with stride 1, batches of 32, `my_kl_loss(p, q) = p (log(p + 1e-4) - log(q + 1e-4))` summed
    over keys, the association discrepancy symmetrized, the minimax strategy (`loss1 = rec -
    k * series_loss` with the prior detached, `loss2 = rec + k * prior_loss` with the series
    detached, k 3, `loss1.backward(retain_graph=True)` then `loss2.backward()`), Adam at 1e-3
    (1e-4 in the repository, for far more steps) halved each epoch (`adjust_learning_rate`), a
    validation loss each epoch; then the anomaly score (the softmax of minus the discrepancy at
    temperature 50 times the reconstruction error) on the test half, its AUROC beside the
    reconstruction error's. The losses are `loss1`, negative from the start and falling as the
    discrepancy grows."""
    g = _seed(seed)
    series, labels = _server_metrics(g, 2400)
    train, test = series[:1200], series[1200:]
    mean, std = train.mean(0), train.std(0)
    train, test = (train - mean) / std, (test - mean) / std
    win_size, k, lr = 40, 3.0, 1e-3
    windows = train.unfold(0, win_size, 1).permute(0, 2, 1)  # (n, win, channels)
    n_val = len(windows) // 5
    train_windows, val_windows = windows[:-n_val], windows[-n_val:]
    model = _AnomalyTransformer(win_size, series.shape[1])
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    criterion = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    eps = 0.0 if bug == "log_zero_nan" else 0.0001

    def my_kl_loss(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        # bug (eps 0): the 1e-4 dropped "since softmax and Gaussian kernels are never 0"
        res = p * (torch.log(p + eps) - torch.log(q + eps))
        return torch.mean(torch.sum(res, dim=-1), dim=1)

    def association_losses(
        series: list[torch.Tensor], prior: list[torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        series_loss, prior_loss = torch.zeros(()), torch.zeros(())
        for s, p in zip(series, prior, strict=True):
            p = p / p.sum(dim=-1, keepdim=True)
            series_loss = (
                series_loss + torch.mean(my_kl_loss(s, p.detach())) + torch.mean(my_kl_loss(p.detach(), s))
            )
            prior_loss = (
                prior_loss + torch.mean(my_kl_loss(p, s.detach())) + torch.mean(my_kl_loss(s.detach(), p))
            )
        return series_loss / len(series), prior_loss / len(series)

    losses: list[float] = []
    for epoch in range(num_epochs):
        model.train()
        perm = torch.randperm(len(train_windows), generator=g)
        for i in range(0, len(perm), 32):
            x = train_windows[perm[i : i + 32]]
            optimizer.zero_grad()
            output, series_assoc, prior_assoc = model(x)
            series_loss, prior_loss = association_losses(series_assoc, prior_assoc)
            rec_loss = criterion(output, x)
            loss1 = rec_loss - k * series_loss
            loss2 = rec_loss + k * prior_loss
            loss1.backward(retain_graph=True)
            loss2.backward()
            optimizer.step()
            losses.append(loss1.item())
        model.eval()
        with torch.no_grad():
            output, series_assoc, prior_assoc = model(val_windows)
            series_loss, prior_loss = association_losses(series_assoc, prior_assoc)
            rec = criterion(output, val_windows)
        print(f"Epoch: {epoch + 1} | Train Loss: {np.mean(losses[-len(perm) // 32:]):.5f} "
              f"Vali Loss: {(rec - k * series_loss).item():.5f} {(rec + k * prior_loss).item():.5f}")  # fmt: skip
        for group in optimizer.param_groups:  # adjust_learning_rate: lr * 0.5 ** epoch
            group["lr"] = lr * (0.5 ** (epoch + 1))
    hook.close()
    with torch.no_grad():
        n = len(test) // win_size * win_size
        x = test[:n].view(-1, win_size, test.shape[1])
        output, series_assoc, prior_assoc = model(x)
        rec = ((x - output) ** 2).mean(-1)
        discrepancy = torch.zeros_like(rec)
        for s, p in zip(series_assoc, prior_assoc, strict=True):
            p = p / p.sum(dim=-1, keepdim=True)
            discrepancy += (my_kl_loss(s, p) + my_kl_loss(p, s)) * 50  # temperature 50
        score = (torch.softmax(-discrepancy, dim=-1) * rec).flatten()
        y = labels[1200 : 1200 + n]

        def auroc(v: torch.Tensor) -> float:
            pos, neg = v[y == 1], v[y == 0]
            return (pos[:, None] > neg[None, :]).float().mean().item()

        print(
            f"test AUROC: association-based score {auroc(score):.3f}, reconstruction error {auroc(rec.flatten()):.3f}"
        )
    return losses


# ============================================================================= MCD: maximum classifier discrepancy


class _MCDFeature(nn.Module):
    """MCD_DA's `svhn2mnist.Feature` shrunk for 16x16 glyphs: two 5x5 convolutions with
    BatchNorm, ReLU and 3x3 max pooling of stride 2, a third convolution, a fully connected layer
    with BatchNorm and ReLU, dropout."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 16, 5, 1, 2), nn.BatchNorm2d(16)
        self.conv2, self.bn2 = nn.Conv2d(16, 32, 5, 1, 2), nn.BatchNorm2d(32)
        self.conv3, self.bn3 = nn.Conv2d(32, 32, 5, 1, 2), nn.BatchNorm2d(32)
        self.fc1, self.bn1_fc = nn.Linear(32 * 4 * 4, 128), nn.BatchNorm1d(128)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), stride=2, kernel_size=3, padding=1)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), stride=2, kernel_size=3, padding=1)
        x = F.relu(self.bn3(self.conv3(x)))
        x = F.relu(self.bn1_fc(self.fc1(x.view(x.size(0), -1))))
        return F.dropout(x, training=self.training)


class _MCDPredictor(nn.Module):
    """MCD_DA's `svhn2mnist.Predictor`: a fully connected layer with BatchNorm and ReLU, then the
    class scores."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.fc2, self.bn2_fc = nn.Linear(128, 64), nn.BatchNorm1d(64)
        self.fc3 = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(F.relu(self.bn2_fc(self.fc2(x))))


def mcd_maximum_classifier_discrepancy(
    path: str, max_epoch: int = 2, seed: int = 0, bug: str | None = None
) -> list[float]:
    """mil-tokyo/MCD_DA's `classification/solver.py` (Saito et al. 2018) from coloured glyphs
    (the labelled source) to the same classes blurred in grey on a lighter background with
    noise (the unlabelled target): a feature generator and two classifiers, three Adam
    optimizers at 2e-4 with weight decay 5e-4, each iteration's three steps (A: both classifiers and the generator on the source
    cross-entropy; B: the classifiers on the source loss minus their discrepancy on the target,
    the mean absolute difference of their softmaxes; C: the generator `num_k` = 4 times on the
    discrepancy alone), `reset_grad()` after each, `train(epoch)` starting with `G.train();
    C1.train(); C2.train()`, and `test(epoch)` in eval mode with each classifier's and the
    ensemble's target accuracy. The losses are step A's source losses (the two classifiers'
    cross-entropies summed)."""
    g = _seed(seed)
    images, labels = _rgb_glyphs(g, 4000, 10)
    xs, ys = images[:1600].float() / 255.0, labels[:1600]
    grey = images[1600:].float().amax(1, keepdim=True) / 255.0
    grey = F.avg_pool2d(grey, 3, 1, 1) + 0.1 * torch.randn(grey.shape, generator=g)
    xt = (0.3 + 0.7 * grey).clamp(0, 1).expand(-1, 3, -1, -1).contiguous()
    xt_train, xt_test, yt_test = xt[:1800], xt[1800:], labels[3400:]
    mean, std = torch.tensor([0.5, 0.5, 0.5])[:, None, None], torch.tensor([0.5, 0.5, 0.5])[:, None, None]
    xs, xt_train, xt_test = (xs - mean) / std, (xt_train - mean) / std, (xt_test - mean) / std
    G, C1, C2 = _MCDFeature(), _MCDPredictor(), _MCDPredictor()  # noqa: N806
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, weight_decay=5e-4)
    opt_c1 = torch.optim.Adam(C1.parameters(), lr=2e-4, weight_decay=5e-4)
    opt_c2 = torch.optim.Adam(C2.parameters(), lr=2e-4, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(G, name="G")
    hook.register_module(C1, name="C1")
    hook.register_module(C2, name="C2")
    hook.register_loss(criterion)
    batch_size, num_k = 64, 4

    def reset_grad() -> None:
        opt_g.zero_grad()
        opt_c1.zero_grad()
        opt_c2.zero_grad()

    def discrepancy(out1: torch.Tensor, out2: torch.Tensor) -> torch.Tensor:
        return torch.mean(torch.abs(F.softmax(out1, dim=1) - F.softmax(out2, dim=1)))

    losses: list[float] = []
    if bug == "train_in_eval_mode":
        # bug: the three `.train()` calls moved from `train(epoch)` into the setup, run once
        G.train()
        C1.train()
        C2.train()

    def train(epoch: int) -> None:
        if bug != "train_in_eval_mode":
            G.train()
            C1.train()
            C2.train()
        perm_s, perm_t = torch.randperm(len(xs), generator=g), torch.randperm(len(xt_train), generator=g)
        for batch_idx in range(len(xs) // batch_size):
            img_s, label_s = xs[perm_s[batch_idx * batch_size : (batch_idx + 1) * batch_size]], ys[
                perm_s[batch_idx * batch_size : (batch_idx + 1) * batch_size]]  # fmt: skip
            img_t = xt_train[perm_t[batch_idx * batch_size : (batch_idx + 1) * batch_size]]
            reset_grad()
            feat_s = G(img_s)
            output_s1, output_s2 = C1(feat_s), C2(feat_s)
            loss_s = criterion(output_s1, label_s) + criterion(output_s2, label_s)
            loss_s.backward()
            opt_g.step()
            opt_c1.step()
            opt_c2.step()
            reset_grad()
            losses.append(loss_s.item())

            feat_s = G(img_s)
            output_s1, output_s2 = C1(feat_s), C2(feat_s)
            feat_t = G(img_t)
            output_t1, output_t2 = C1(feat_t), C2(feat_t)
            loss_s = criterion(output_s1, label_s) + criterion(output_s2, label_s)
            loss_dis = discrepancy(output_t1, output_t2)
            loss = loss_s - loss_dis
            loss.backward()
            opt_c1.step()
            opt_c2.step()
            reset_grad()

            for _ in range(num_k):
                feat_t = G(img_t)
                output_t1, output_t2 = C1(feat_t), C2(feat_t)
                loss_dis = discrepancy(output_t1, output_t2)
                loss_dis.backward()
                opt_g.step()
                reset_grad()
            if batch_idx % 10 == 0:
                print(f"Train Epoch: {epoch} [{batch_idx * batch_size}/{len(xs)}]\tLoss1: {losses[-1]:.6f}\t "
                      f"Discrepancy: {loss_dis.item():.6f}")  # fmt: skip

    def test(epoch: int) -> None:
        G.eval()
        C1.eval()
        C2.eval()
        with torch.no_grad():
            feat = G(xt_test)
            out1, out2 = C1(feat), C2(feat)
            accs = [(o.argmax(1) == yt_test).float().mean().item() for o in (out1, out2, out1 + out2)]
        print(f"Test set epoch {epoch}: Accuracy C1: {accs[0]:.3f} Accuracy C2: {accs[1]:.3f} "
              f"Accuracy Ensemble: {accs[2]:.3f}")  # fmt: skip

    for epoch in range(max_epoch):
        train(epoch)
        test(epoch)
    hook.close()
    return losses


# ============================================================================= GrowNet: gradient boosting of shallow nets


def _credit_table(g: torch.Generator, n: int, d: int = 20) -> tuple[torch.Tensor, torch.Tensor]:
    """A credit-default-like table: `d` correlated numeric features (some heavy-tailed like
    balances, some bounded like utilization ratios) and a default label, about 12 % positive,
    from a logit with thresholds and interactions (high utilization with late payments, young
    borrowers with large loans)."""
    z = torch.randn(n, d, generator=g) @ (torch.eye(d) + 0.3 * torch.randn(d, d, generator=g)) / 1.3
    z[:, :4] = torch.exp(0.8 * z[:, :4])  # balances, incomes
    z[:, 4:8] = torch.sigmoid(2 * z[:, 4:8])  # utilization ratios
    logit = (
        -3.0 + 2.5 * (z[:, 4] > 0.8).float() * (z[:, 9] > 0.5).float() + 1.2 * torch.tanh(z[:, 10]) - 0.8 * z[:, 11]
        + 1.5 * (z[:, 0] / (1 + z[:, 1]) > 1.0).float() + 0.6 * z[:, 12] * z[:, 13]
    )  # fmt: skip
    y = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    return z, y


class _MLP2HL(nn.Module):
    """GrowNet's `MLP_2HL` weak learner: the input (after the first learner, the raw features
    concatenated with the previous learner's penultimate features through a BatchNorm), a
    layer with LeakyReLU(0.1) and BatchNorm, a hidden layer whose output is passed on to the
    next learner, then ReLU and a scalar output."""

    def __init__(self, dim_in: int, dim_hidden1: int, dim_hidden2: int) -> None:
        super().__init__()
        self.in_layer = nn.Linear(dim_in, dim_hidden1)
        self.lrelu, self.relu = nn.LeakyReLU(0.1), nn.ReLU()
        self.hidden_layer = nn.Linear(dim_hidden1, dim_hidden2)
        self.out_layer = nn.Linear(dim_hidden2, 1)
        self.bn = nn.BatchNorm1d(dim_hidden1)
        self.bn2 = nn.BatchNorm1d(dim_in)

    def forward(self, x: torch.Tensor, lower_f: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        if lower_f is not None:
            x = self.bn2(torch.cat([x, lower_f], dim=1))
        out = self.bn(self.lrelu(self.in_layer(x)))
        out = self.hidden_layer(out)
        return out, self.out_layer(self.relu(out)).squeeze(-1)


class _DynamicNet:
    """GrowNet's `DynamicNet`, a plain object: the constant `c0`, the weak learners added one by
    one, the learned `boost_rate`; the output `c0 + boost_rate * sum of the learners' outputs`,
    each learner fed the penultimate features of the one before."""

    def __init__(self, c0: float, lr: float) -> None:
        self.models: list[_MLP2HL] = []
        self.c0 = c0
        self.boost_rate = nn.Parameter(torch.tensor(lr))

    def add(self, model: _MLP2HL) -> None:
        self.models.append(model)

    def parameters(self) -> list[nn.Parameter]:
        return [p for m in self.models for p in m.parameters()] + [self.boost_rate]

    def to_train(self) -> None:
        for m in self.models:
            m.train(True)

    def to_eval(self) -> None:
        for m in self.models:
            m.train(False)

    def forward_grad(self, x: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        if not self.models:
            return None, torch.tensor(self.c0)
        middle_feat_cum, prediction = None, 0.0
        for m in self.models:
            middle_feat_cum, pred = m(x, middle_feat_cum)
            prediction = prediction + pred
        return middle_feat_cum, self.c0 + self.boost_rate * prediction

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        with torch.no_grad():
            return self.forward_grad(x)


def grownet_boosted_shallow_nets(
    path: str, num_nets: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """sbadirli/GrowNet's `main_cls_cv.py` (Badirli et al. 2020) on a credit-default-like table:
    the features standardized, labels in {-1, 1}, `c0` the log-odds of the positive rate; for each
    of 8 stages (40 in its Higgs run) a new `MLP_2HL` (hidden 16) fitted for one epoch to the
    second-order functional gradient (the MSE of `boost_rate * out` to `y (1 + exp(-y F))`
    weighted by the Hessian term `h`), added to the ensemble, then the fully corrective step:
    every learner and the boost rate trained together for one epoch on `BCEWithLogitsLoss` with a
    fresh Adam at half the lr (5e-3); batches of 256; the test AUC after each stage. The losses are
    the corrective steps' BCEs, falling stage by stage."""
    g = _seed(seed)
    x, y = _credit_table(g, 8000)
    x_train, x_test = x[:6000], x[6000:]
    mean, std = x_train.mean(0), x_train.std(0)
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    y_train, y_test = 2 * y[:6000] - 1, y[6000:]
    pos = float((y_train > 0).sum())
    c0 = math.log(pos / (len(y_train) - pos))
    feat_d, hidden_d, lr, batch_size = x.shape[1], 16, 0.005, 256
    net_ensemble = _DynamicNet(c0, 1.0)
    loss_f1, loss_f2 = nn.MSELoss(reduction="none"), nn.BCEWithLogitsLoss()
    hook = Hook(path)
    losses: list[float] = []

    def init_weights(m: nn.Module) -> None:
        # bug: an init meant to start the learner's output at the prior's log-odds, applied to
        # every Linear by `model.apply`, so every bias (the ReLU's inputs too) starts at c0 (about -2)
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.bias, c0)

    for stage in range(num_nets):
        model = _MLP2HL(feat_d if stage == 0 else feat_d + hidden_d, hidden_d, hidden_d)
        if bug == "dead_relu_init":
            model.apply(init_weights)
        hook.register_module(model, name=f"learner{stage}")
        optimizer = torch.optim.Adam(model.parameters(), lr, weight_decay=0.0)
        net_ensemble.to_train()
        stage_mdlloss = []
        perm = torch.randperm(len(x_train), generator=g)
        for i in range(0, len(perm), batch_size):
            xb, yb = x_train[perm[i : i + batch_size]], y_train[perm[i : i + batch_size]][:, None]
            middle_feat, out = net_ensemble.forward(xb)
            out = out.view(-1, 1)
            h = 1 / ((1 + torch.exp(yb * out)) * (1 + torch.exp(-yb * out)))
            grad_direction = yb * (1.0 + torch.exp(-yb * out))
            _, out = model(xb, middle_feat)
            loss = (loss_f1(net_ensemble.boost_rate * out.view(-1, 1), grad_direction) * h).mean()
            model.zero_grad()
            loss.backward()
            optimizer.step()
            stage_mdlloss.append(loss.item())
        net_ensemble.add(model)
        if stage != 0:
            optimizer = torch.optim.Adam(net_ensemble.parameters(), lr / 2, weight_decay=0.0)
            for i in range(0, len(perm), batch_size):
                idx = perm[i : i + batch_size]
                _, out = net_ensemble.forward_grad(x_train[idx])
                loss = loss_f2(out, (y_train[idx] + 1.0) / 2.0)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
        net_ensemble.to_eval()
        _, score = net_ensemble.forward(x_test)
        auc = (score[y_test == 1][:, None] > score[y_test == 0][None, :]).float().mean().item()
        print(f"Stage {stage}: weak learner loss {np.mean(stage_mdlloss):.5f}, "
              f"corrective BCE {np.mean(losses[-len(perm) // batch_size:]) if stage else float('nan'):.5f}, "
              f"boost rate {net_ensemble.boost_rate.item():.4f}, test AUC {auc:.4f}")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= Demucs: waveform speech enhancement


def _noises(g: torch.Generator, n: int, length: int, sr: int = 8000) -> torch.Tensor:
    """`n` background noises of unit variance: white, pink-like (white noise integrated with a
    leak), mains hum with harmonics and a slow swell, or a fan's band-passed rumble."""
    t = torch.arange(length) / sr
    out = torch.zeros(n, length)
    for i in range(n):
        kind = int(torch.randint(0, 4, (1,), generator=g))
        w = torch.randn(length, generator=g)
        if kind == 0:
            x = w
        elif kind == 1:
            x = torch.zeros(length)
            acc = 0.0
            for j, v in enumerate(w.tolist()):
                acc = 0.97 * acc + v
                x[j] = acc
        elif kind == 2:
            f = 50.0 * (1 + float(torch.rand(1, generator=g)))
            x = sum(
                torch.sin(2 * math.pi * k * f * t + float(torch.rand(1, generator=g)) * 6) / k
                for k in range(1, 6)
            )
            x = x * (1 + 0.5 * torch.sin(2 * math.pi * 2 * t)) + 0.1 * w
        else:
            x = F.avg_pool1d(w[None, None], 9, 1, 4)[0, 0] * torch.sin(2 * math.pi * 900 * t) + 0.2 * w
        out[i] = (x - x.mean()) / x.std()
    return out


class _BLSTM(nn.Module):
    def __init__(self, dim: int, layers: int = 2, bi: bool = False) -> None:
        super().__init__()
        self.lstm = nn.LSTM(bidirectional=bi, num_layers=layers, hidden_size=dim, input_size=dim)
        self.linear = nn.Linear(2 * dim, dim) if bi else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.lstm(x)[0]
        return self.linear(x) if self.linear is not None else x


class _Demucs(nn.Module):
    """facebookresearch/denoiser's causal `Demucs` (Defossez et al. 2020) with `resample=1`: an
    encoder of strided convolutions (kernel 8, stride 4, ReLU, a 1x1 convolution and a GLU)
    doubling the channels from 16, a unidirectional two-layer LSTM at the bottleneck, a decoder
    of transposed convolutions fed the skips, the input divided by its standard deviation
    (`normalize`) and the output multiplied back, `rescale_module(reference=0.1)` at init."""

    def __init__(self, hidden: int = 16, depth: int = 3, kernel_size: int = 8, stride: int = 4,
                 floor: float = 1e-3) -> None:  # fmt: skip
        super().__init__()
        self.depth, self.kernel_size, self.stride, self.floor = depth, kernel_size, stride, floor
        self.encoder, self.decoder = nn.ModuleList(), nn.ModuleList()
        chin, chout = 1, 1
        for index in range(depth):
            self.encoder.append(nn.Sequential(
                nn.Conv1d(chin, hidden, kernel_size, stride), nn.ReLU(), nn.Conv1d(hidden, 2 * hidden, 1), nn.GLU(1),
            ))  # fmt: skip
            decode: list[nn.Module] = [nn.Conv1d(hidden, 2 * hidden, 1), nn.GLU(1),
                                       nn.ConvTranspose1d(hidden, chout, kernel_size, stride)]  # fmt: skip
            if index > 0:
                decode.append(nn.ReLU())
            self.decoder.insert(0, nn.Sequential(*decode))
            chout, chin, hidden = hidden, hidden, 2 * hidden
        self.lstm = _BLSTM(chin, bi=False)
        for sub in self.modules():  # rescale_module
            if isinstance(sub, (nn.Conv1d, nn.ConvTranspose1d)):
                scale = (sub.weight.std().detach() / 0.1) ** 0.5
                sub.weight.data /= scale
                if sub.bias is not None:
                    sub.bias.data /= scale

    def valid_length(self, length: int) -> int:
        for _ in range(self.depth):
            length = max(math.ceil((length - self.kernel_size) / self.stride) + 1, 1)
        for _ in range(self.depth):
            length = (length - 1) * self.stride + self.kernel_size
        return int(length)

    def forward(self, mix: torch.Tensor) -> torch.Tensor:
        mix = mix.unsqueeze(1)
        std = mix.std(dim=-1, keepdim=True)
        x = mix / (self.floor + std)
        length = x.shape[-1]
        x = F.pad(x, (0, self.valid_length(length) - length))
        skips = []
        for encode in self.encoder:
            x = encode(x)
            skips.append(x)
        x = self.lstm(x.permute(2, 0, 1)).permute(1, 2, 0)
        for decode in self.decoder:
            skip = skips.pop(-1)
            x = decode(x + skip[..., : x.shape[-1]])
        return (std * x[..., :length]).squeeze(1)


def _stft_mag(x: torch.Tensor, fft_size: int, hop_size: int, win_length: int) -> torch.Tensor:
    spec = torch.stft(x, fft_size, hop_size, win_length, torch.hann_window(win_length), return_complex=True)
    return torch.sqrt(torch.clamp(spec.real**2 + spec.imag**2, min=1e-7)).transpose(2, 1)


def demucs_denoiser_waveform(path: str, epochs: int = 6, seed: int = 0) -> list[float]:
    """facebookresearch/denoiser's `Solver` (`train.py` with `dset=debug`-sized data) on synthetic
    speech at 8 kHz mixed with hum, fans, white and pink noise at 0 to 10 dB: `Remix` (the noises
    of a batch shuffled among its utterances), the L1 loss on the waveform plus the
    multi-resolution STFT loss (`stft_sc_factor` and `stft_mag_factor` 0.5: the spectral
    convergence and the log-magnitude L1 at three resolutions scaled to 8 kHz), Adam at 3e-3
    (3e-4 in the config, for hundreds of epochs) with betas (0.9, 0.999), batches of 16, a
    validation pass each epoch in `model.eval()` with the SI-SNR improvement over the noisy
    input. The loss falls steadily; in so short a run the enhanced speech's SI-SNR is still
    climbing towards the noisy input's."""
    g = _seed(seed)
    n_train, n_valid, length = 256, 48, 1600
    clean = 0.1 * _babble(g, n_train + n_valid, length=length)
    noise = _noises(g, n_train + n_valid, length)
    snr = 10 * torch.rand(n_train + n_valid, 1, generator=g)
    noise = noise * clean.std(1, keepdim=True) / 10 ** (snr / 20)
    model = _Demucs()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.999))
    resolutions = [(256, 30, 120), (512, 60, 240), (128, 12, 60)]
    hook = Hook(path)
    hook.register_module(model)

    def mrstft(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        sc_loss, mag_loss = torch.zeros(()), torch.zeros(())
        for fft_size, hop_size, win_length in resolutions:
            x_mag, y_mag = (
                _stft_mag(x, fft_size, hop_size, win_length),
                _stft_mag(y, fft_size, hop_size, win_length),
            )
            sc_loss = sc_loss + torch.norm(y_mag - x_mag, p="fro") / torch.norm(y_mag, p="fro")
            mag_loss = mag_loss + F.l1_loss(torch.log(y_mag), torch.log(x_mag))
        return 0.5 * sc_loss / len(resolutions), 0.5 * mag_loss / len(resolutions)

    def si_snr(est: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
        est, ref = est - est.mean(-1, keepdim=True), ref - ref.mean(-1, keepdim=True)
        proj = (est * ref).sum(-1, keepdim=True) / (ref**2).sum(-1, keepdim=True) * ref
        return 10 * torch.log10((proj**2).sum(-1) / ((est - proj) ** 2).sum(-1))

    losses: list[float] = []
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(n_train, generator=g)
        for i in range(0, n_train, 16):
            idx = perm[i : i + 16]
            sources = torch.stack([noise[idx], clean[idx]])
            sources = torch.stack([sources[0][torch.randperm(len(idx), generator=g)], sources[1]])  # Remix
            noisy, target = sources.sum(0), sources[1]
            estimate = model(noisy)
            loss = F.l1_loss(target, estimate)
            sc_loss, mag_loss = mrstft(estimate, target)
            loss = loss + sc_loss + mag_loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            noisy, target = clean[n_train:] + noise[n_train:], clean[n_train:]
            estimate = model(noisy)
            improvement = (si_snr(estimate, target) - si_snr(noisy, target)).mean().item()
        print(f"Train Summary | End of Epoch {epoch + 1} | Loss {np.mean(losses[-n_train // 16:]):.5f} | "
              f"valid SI-SNR improvement {improvement:.2f} dB")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= NAFNet: image denoising, PSNR loss


class _LayerNormFunction(torch.autograd.Function):
    """NAFNet's `LayerNormFunction`: a channel LayerNorm for NCHW maps with its backward written by
    hand."""

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float
    ) -> torch.Tensor:
        ctx.eps = eps
        c = x.size(1)
        mu = x.mean(1, keepdim=True)
        var = (x - mu).pow(2).mean(1, keepdim=True)
        y = (x - mu) / (var + eps).sqrt()
        ctx.save_for_backward(y, var, weight)
        return weight.view(1, c, 1, 1) * y + bias.view(1, c, 1, 1)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[Any, ...]:
        c = grad_output.size(1)
        y, var, weight = ctx.saved_tensors
        g = grad_output * weight.view(1, c, 1, 1)
        mean_g = g.mean(dim=1, keepdim=True)
        mean_gy = (g * y).mean(dim=1, keepdim=True)
        gx = 1.0 / torch.sqrt(var + ctx.eps) * (g - y * mean_gy - mean_g)
        return gx, (grad_output * y).sum(dim=(0, 2, 3)), grad_output.sum(dim=(0, 2, 3)), None


class _LayerNorm2d(nn.Module):
    def __init__(self, channels: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _LayerNormFunction.apply(x, self.weight, self.bias, self.eps)


class _NAFBlock(nn.Module):
    """NAFNet's `NAFBlock` (Chen et al. 2022): LayerNorm, a 1x1 convolution, a depthwise 3x3, the
    SimpleGate (one half of the channels times the other), simplified channel attention, a 1x1
    convolution, a residual scaled by `beta` (zeros at init); then LayerNorm, a gated 1x1
    feed-forward and a residual scaled by `gamma` (zeros at init). No activation function."""

    def __init__(self, c: int) -> None:
        super().__init__()
        dw = 2 * c
        self.conv1 = nn.Conv2d(c, dw, 1)
        self.conv2 = nn.Conv2d(dw, dw, 3, padding=1, groups=dw)
        self.conv3 = nn.Conv2d(dw // 2, c, 1)
        self.sca = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(dw // 2, dw // 2, 1))
        self.conv4 = nn.Conv2d(c, 2 * c, 1)
        self.conv5 = nn.Conv2d(c, c, 1)
        self.norm1, self.norm2 = _LayerNorm2d(c), _LayerNorm2d(c)
        self.beta = nn.Parameter(torch.zeros((1, c, 1, 1)))
        self.gamma = nn.Parameter(torch.zeros((1, c, 1, 1)))

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        x1, x2 = self.conv2(self.conv1(self.norm1(inp))).chunk(2, dim=1)
        x = x1 * x2
        x = self.conv3(x * self.sca(x))
        y = inp + x * self.beta
        x1, x2 = self.conv4(self.norm2(y)).chunk(2, dim=1)
        return y + self.conv5(x1 * x2) * self.gamma


class _NAFNet(nn.Module):
    """NAFNet's U-shaped `NAFNet`: an intro 3x3 convolution to `width`, encoder stages of NAF
    blocks with 2x2 strided downsampling, middle blocks, decoder stages upsampled by a 1x1
    convolution and `PixelShuffle` with additive skips, an ending 3x3 convolution, and the input
    added back (the network predicts the residual)."""

    def __init__(self, width: int = 16, enc_blk_nums: tuple[int, ...] = (1, 1), middle_blk_num: int = 1,
                 dec_blk_nums: tuple[int, ...] = (1, 1)) -> None:  # fmt: skip
        super().__init__()
        self.intro = nn.Conv2d(3, width, 3, padding=1)
        self.ending = nn.Conv2d(width, 3, 3, padding=1)
        self.encoders, self.downs, self.ups, self.decoders = (
            nn.ModuleList(),
            nn.ModuleList(),
            nn.ModuleList(),
            nn.ModuleList(),
        )
        chan = width
        for num in enc_blk_nums:
            self.encoders.append(nn.Sequential(*[_NAFBlock(chan) for _ in range(num)]))
            self.downs.append(nn.Conv2d(chan, 2 * chan, 2, 2))
            chan *= 2
        self.middle_blks = nn.Sequential(*[_NAFBlock(chan) for _ in range(middle_blk_num)])
        for num in dec_blk_nums:
            self.ups.append(nn.Sequential(nn.Conv2d(chan, chan * 2, 1, bias=False), nn.PixelShuffle(2)))
            chan //= 2
            self.decoders.append(nn.Sequential(*[_NAFBlock(chan) for _ in range(num)]))

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        x = self.intro(inp)
        encs = []
        for encoder, down in zip(self.encoders, self.downs, strict=True):
            x = encoder(x)
            encs.append(x)
            x = down(x)
        x = self.middle_blks(x)
        for decoder, up, enc_skip in zip(self.decoders, self.ups, encs[::-1], strict=True):
            x = decoder(up(x) + enc_skip)
        return self.ending(x) + inp


class _PSNRLoss(nn.Module):
    """NAFNet's `PSNRLoss`: `10 log10(MSE + 1e-8)` per image, averaged: minus the PSNR of images in
    [0, 1], so the loss is below zero and falls as the PSNR grows."""

    def __init__(self, loss_weight: float = 1.0) -> None:
        super().__init__()
        self.loss_weight, self.scale = loss_weight, 10 / np.log(10)

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return (
            self.loss_weight
            * self.scale
            * torch.log(((pred - target) ** 2).mean(dim=(1, 2, 3)) + 1e-8).mean()
        )


def nafnet_psnr_loss_denoising(
    path: str, total_iter: int = 150, seed: int = 0, bug: str | None = None
) -> list[float]:
    """megvii-research/NAFNet's `options/train/SIDD/NAFNet-width32.yml` through BasicSR's loop,
    shrunk (width 16, one block per stage, two stages): SIDD-like pairs of noisy and clean uint8
    photos (signal-dependent Gaussian noise of 5 to 50 levels, quantized), read by the user's own
    paired loader (BasicSR's `imfrombytes(..., float32=True)` divides by 255), random 32x32 crops
    (`gt_size` 256 there) with flips and rotations, batches of 8, `PSNRLoss`, AdamW at 1e-3 with
    betas (0.9, 0.9) and no weight decay, `TrueCosineAnnealingLR` to 1e-7 over the iterations,
    and a validation PSNR of the full 48x48 images every 50 iterations in `model.eval()`."""
    g = _seed(seed)
    clean = _photos(g, 200).permute(0, 3, 1, 2)
    sigma = (5 + 45 * torch.rand(len(clean), 1, 1, 1, generator=g)) / 255.0
    x = clean.float() / 255.0
    noisy_f = x + torch.randn(x.shape, generator=g) * (sigma * (0.5 + x))
    noisy = (noisy_f.clamp(0, 1) * 255).round().to(torch.uint8)
    train_gt, train_lq, val_gt, val_lq = clean[:176], noisy[:176], clean[176:], noisy[176:]

    def img2tensor(img: torch.Tensor) -> torch.Tensor:
        if bug == "inputs_x255":
            # bug: the user's loader (`torch.from_numpy(cv2.imread(p)).permute(2, 0, 1).float()`) without
            # `imfrombytes`' division by 255, for the noisy and the clean image alike
            return img.float()
        return img.float() / 255.0

    net_g = _NAFNet()
    cri_pix = _PSNRLoss()
    optimizer_g = torch.optim.AdamW(net_g.parameters(), lr=1e-3, weight_decay=0.0, betas=(0.9, 0.9))
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer_g, T_max=total_iter, eta_min=1e-7)
    hook = Hook(path)
    hook.register_module(net_g)
    hook.register_loss(cri_pix)
    losses: list[float] = []
    for current_iter in range(1, total_iter + 1):
        net_g.train()
        idx = torch.randint(0, len(train_gt), (8,), generator=g)
        top, left = torch.randint(0, 17, (2,), generator=g).tolist()
        gt = img2tensor(train_gt[idx, :, top : top + 32, left : left + 32])
        lq = img2tensor(train_lq[idx, :, top : top + 32, left : left + 32])
        if torch.rand(1, generator=g) < 0.5:
            gt, lq = gt.flip(3), lq.flip(3)
        k = int(torch.randint(0, 4, (1,), generator=g))
        gt, lq = torch.rot90(gt, k, (2, 3)), torch.rot90(lq, k, (2, 3))
        optimizer_g.zero_grad()
        output = net_g(lq)
        l_pix = cri_pix(output, gt)
        l_pix.backward()
        optimizer_g.step()
        scheduler.step()
        losses.append(l_pix.item())
        if current_iter % 50 == 0:
            net_g.eval()
            with torch.no_grad():
                out = net_g(img2tensor(val_lq))
                scale = 255.0 if bug == "inputs_x255" else 1.0
                mse = ((out / scale).clamp(0, 1) - val_gt.float() / 255.0).pow(2).mean((1, 2, 3))
                noisy_mse = (val_lq.float() / 255.0 - val_gt.float() / 255.0).pow(2).mean((1, 2, 3))
            print(f"iter {current_iter}: l_pix {np.mean(losses[-50:]):.3f}, lr {scheduler.get_last_lr()[0]:.2e}, "
                  f"val psnr {(-10 * torch.log10(mse)).mean().item():.2f} dB (noisy {(-10 * torch.log10(noisy_mse)).mean().item():.2f})")  # fmt: skip
    hook.close()
    return losses


# ============================================================================= Mixture-of-Depths: tokens routed around blocks


class _CausalBlock(nn.Module):
    """A pre-norm GPT block (causal self-attention through `scaled_dot_product_attention`, a GELU
    MLP) that returns the block's update without the residual, so a router can scale it."""

    def __init__(self, d: int, n_head: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, -1).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
        attn = self.c_proj(y)
        return attn + self.mlp(self.ln_2(x + attn))


class _MoDBlock(nn.Module):
    """A Mixture-of-Depths block (Raposo et al. 2024): a linear router scores every token, the
    top `capacity` share of the sequence (12.5 %) goes through the block in their order, the
    rest skip it on the residual; the block's update is scaled by the sigmoid of the router
    weight (the gradient path to the router) and scattered back. An auxiliary binary
    cross-entropy teaches the router's logits, from the token alone, whether the token was in
    the top-k, as autoregressive sampling needs a causal decision."""

    def __init__(self, d: int, n_head: int, capacity: float = 0.125) -> None:
        super().__init__()
        self.block = _CausalBlock(d, n_head)
        self.router = nn.Linear(d, 1)
        self.capacity = capacity
        self.aux_loss = torch.zeros(())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        k = max(1, int(self.capacity * t))
        weights = self.router(x).squeeze(-1)
        idx = torch.topk(weights, k, dim=1, sorted=False).indices.sort(dim=1).values
        selected = torch.gather(x, 1, idx[..., None].expand(-1, -1, c))
        update = self.block(selected) * torch.sigmoid(torch.gather(weights, 1, idx))[..., None]
        targets = torch.zeros_like(weights).scatter_(1, idx, 1.0)
        self.aux_loss = F.binary_cross_entropy_with_logits(weights, targets)
        return x.scatter_add(1, idx[..., None].expand(-1, -1, c), update)


class _MoDGPT(nn.Module):
    """A character GPT of 4 layers (64 wide, 4 heads), the blocks alternating dense and
    Mixture-of-Depths (every other block routed, as in the paper), tied input and output
    embeddings, GPT-2's init."""

    def __init__(self, vocab: int, block_size: int, d: int = 64, n_layer: int = 4, n_head: int = 4) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block_size, d)
        self.h = nn.ModuleList(
            _MoDBlock(d, n_head) if i % 2 == 1 else _CausalBlock(d, n_head) for i in range(n_layer)
        )
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        aux = torch.zeros(())
        for block in self.h:
            if isinstance(block, _MoDBlock):
                x = block(x)
                aux = aux + block.aux_loss
            else:
                x = x + block(x)
        return self.lm_head(self.ln_f(x)), aux


def mixture_of_depths_char_lm(
    path: str, max_iters: int = 150, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Mixture-of-Depths language model trained the way open reimplementations of the paper
    train it on a nanoGPT-style loop: characters of English-looking text, windows of 64, batches
    of 16, the cross-entropy plus 0.01 times the routers' auxiliary loss, AdamW with betas (0.9, 0.95) and
    weight decay 0.1 on the matrices only, peak lr 3e-3 after 20 warm-up steps and a cosine decay
    to a tenth, clipping at 1; a validation loss every 50 steps. The loss starts near log(vocab)
    and falls towards 2 with noise."""
    g = _seed(seed)
    data_text = text(seed + 2705, 60000)
    chars = sorted(set(data_text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in data_text])
    train_data, val_data = data[: int(0.9 * len(data))], data[int(0.9 * len(data)) :]
    block_size, batch_size, warmup_iters = 64, 16, 20
    # bug: `learning_rate = 3e-1` in the config, typed for 3e-3
    learning_rate = 3e-1 if bug == "lr_x100" else 3e-3
    min_lr = learning_rate / 10
    model = _MoDGPT(len(chars), block_size)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=learning_rate, betas=(0.9, 0.95))  # fmt: skip
    hook = Hook(path)
    hook.register_module(model)

    def get_batch(split: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ix = torch.randint(len(split) - block_size - 1, (batch_size,), generator=g)
        x = torch.stack([split[i : i + block_size] for i in ix])
        return x, torch.stack([split[i + 1 : i + 1 + block_size] for i in ix])

    def get_lr(it: int) -> float:
        if it < warmup_iters:
            return learning_rate * (it + 1) / warmup_iters
        ratio = (it - warmup_iters) / (max_iters - warmup_iters)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)

    losses: list[float] = []
    for it in range(max_iters):
        for group in optimizer.param_groups:
            group["lr"] = get_lr(it)
        model.train()
        x, y = get_batch(train_data)
        logits, aux = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1)) + 0.01 * aux
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        if it % 50 == 49:
            model.eval()
            with torch.no_grad():
                xv, yv = get_batch(val_data)
                val = F.cross_entropy(model(xv)[0].view(-1, logits.size(-1)), yv.view(-1)).item()
            print(
                f"step {it + 1}: train loss {np.mean(losses[-50:]):.4f}, val loss {val:.4f}, lr {get_lr(it):.2e}"
            )
    hook.close()
    return losses


# ============================================================================= Lightning: ECAPA-TDNN speaker verification


def _speakers_utterances(
    g: torch.Generator, n_speakers: int, per_speaker: int, length: int = 4000, sr: int = 8000
) -> tuple[torch.Tensor, torch.Tensor]:
    """Utterances of synthetic speakers at 8 kHz: a speaker is a pitch (90 to 250 Hz), a
    vocal-tract length that scales every formant (0.85 to 1.15), a spectral tilt and a
    breathiness; an utterance a run of phones from a shared inventory of 16 (voiced ones the
    speaker's harmonics, with a wandering intonation, shaped by the phone's three formants
    scaled by the speaker; unvoiced ones band noise), plus room noise. Returns (n, length)
    waveforms and speaker ids."""
    inventory = 250 + 2750 * torch.rand(16, 3, generator=g)
    voiced = torch.rand(16, generator=g) < 0.75
    t = torch.arange(length) / sr
    waves, ids = torch.zeros(n_speakers * per_speaker, length), []
    k = 0
    for spk in range(n_speakers):
        f0 = 90 + 160 * float(torch.rand(1, generator=g))
        tract = 0.85 + 0.3 * float(torch.rand(1, generator=g))
        tilt = 0.5 + float(torch.rand(1, generator=g))
        breath = 0.3 * float(torch.rand(1, generator=g))
        for _ in range(per_speaker):
            intonation = f0 * (1 + 0.08 * torch.sin(2 * math.pi * (0.5 + float(torch.rand(1, generator=g))) * t
                                                    + 6 * float(torch.rand(1, generator=g))))  # fmt: skip
            phase = 2 * math.pi * torch.cumsum(intonation / sr, 0)
            pos = 0
            while pos < length - 160:
                dur = int(torch.randint(480, 1200, (1,), generator=g))
                dur = length - pos if length - pos - dur < 160 else dur
                ph = int(torch.randint(0, 16, (1,), generator=g))
                seg = slice(pos, pos + dur)
                n = seg.stop - seg.start
                if voiced[ph]:
                    h = torch.arange(1, int(3800 // f0)).float()
                    gain = torch.exp(-(((h[:, None] * f0 - tract * inventory[ph][None]) / 120.0) ** 2)).sum(1)
                    wave = ((gain + 0.02) * h**-tilt) @ torch.sin(h[:, None] * phase[seg][None])
                    wave += breath * torch.randn(n, generator=g) * wave.std()
                else:
                    wave = torch.randn(n, generator=g) * torch.sin(
                        2 * math.pi * tract * float(inventory[ph, 1]) * t[seg]
                    )
                ramp = torch.clamp(torch.arange(n) / 80.0, max=1) * torch.clamp(
                    torch.arange(n).flip(0) / 80.0, max=1
                )
                waves[k, seg] = wave / (wave.std() + 1e-6) * ramp
                pos += dur
            waves[k] += 0.05 * torch.randn(length, generator=g)
            ids.append(spk)
            k += 1
    return waves, torch.tensor(ids)


class _TDNNBlock(nn.Sequential):
    def __init__(self, cin: int, cout: int, k: int, dilation: int = 1) -> None:
        super().__init__(nn.Conv1d(cin, cout, k, dilation=dilation, padding=dilation * (k - 1) // 2, padding_mode="reflect"),
                         nn.ReLU(), nn.BatchNorm1d(cout))  # fmt: skip


class _SERes2NetBlock(nn.Module):
    """SpeechBrain's `SERes2NetBlock`: a 1x1 TDNN block, a Res2Net block (the channels split in
    `scale` groups, each group's dilated convolution fed the previous group's output), a 1x1
    TDNN block, squeeze-and-excitation, and the residual."""

    def __init__(self, c: int, dilation: int, scale: int = 4, se_channels: int = 32) -> None:
        super().__init__()
        self.tdnn1, self.tdnn2 = _TDNNBlock(c, c, 1), _TDNNBlock(c, c, 1)
        self.res2 = nn.ModuleList(_TDNNBlock(c // scale, c // scale, 3, dilation) for _ in range(scale - 1))
        self.scale = scale
        self.se = nn.Sequential(
            nn.Conv1d(c, se_channels, 1), nn.ReLU(), nn.Conv1d(se_channels, c, 1), nn.Sigmoid()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = x
        x = self.tdnn1(x)
        chunks, y = x.chunk(self.scale, dim=1), []
        for i, xi in enumerate(chunks):
            y.append(xi if i == 0 else self.res2[i - 1](xi if i == 1 else xi + y[-1]))
        x = self.tdnn2(torch.cat(y, dim=1))
        return x * self.se(x.mean(dim=2, keepdim=True)) + residual


class _ECAPA(nn.Module):
    """SpeechBrain's `ECAPA_TDNN` shrunk (channels 48 instead of 512 and 1536, embeddings of 64
    instead of 192): a TDNN block, three SE-Res2Net blocks with dilations 2, 3, 4, multi-layer
    feature aggregation, attentive statistics pooling with global context, BatchNorm and the
    embedding layer."""

    def __init__(self, n_mels: int = 40, c: int = 48, lin_neurons: int = 64, att: int = 32) -> None:
        super().__init__()
        self.block0 = _TDNNBlock(n_mels, c, 5)
        self.blocks = nn.ModuleList(_SERes2NetBlock(c, d) for d in (2, 3, 4))
        self.mfa = _TDNNBlock(3 * c, 3 * c, 1)
        self.asp_tdnn = _TDNNBlock(9 * c, att, 1)
        self.asp_conv = nn.Conv1d(att, 3 * c, 1)
        self.asp_bn = nn.BatchNorm1d(6 * c)
        self.fc = nn.Conv1d(6 * c, lin_neurons, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.block0(x.transpose(1, 2))
        xl = []
        for block in self.blocks:
            x = block(x)
            xl.append(x)
        x = self.mfa(torch.cat(xl, dim=1))
        t = x.shape[-1]
        mean, std = x.mean(2, keepdim=True), x.std(2, keepdim=True).clamp(min=1e-5)
        attn = torch.cat([x, mean.expand(-1, -1, t), std.expand(-1, -1, t)], dim=1)
        attn = torch.softmax(self.asp_conv(torch.tanh(self.asp_tdnn(attn))), dim=2)
        mu = (attn * x).sum(dim=2)
        sg = torch.sqrt(((attn * (x - mu[..., None]) ** 2).sum(dim=2)).clamp(min=1e-5))
        pooled = self.asp_bn(torch.cat([mu, sg], dim=1))
        return self.fc(pooled[..., None]).squeeze(-1)


def lit_ecapa_speaker_verification(path: str, max_epochs: int = 5, seed: int = 0) -> list[float]:
    """SpeechBrain's VoxCeleb recipe `train_speaker_embeddings.py` (ECAPA-TDNN, Desplanques et al.
    2020) written as a `LightningModule`: 40 log-mel filterbanks every 10 ms, sentence mean
    normalization, random 0.4-s crops in training, the ECAPA embedding, the `AdditiveAngularMargin`
    classifier (margin 0.2, scale 30) on the cosines to the speakers' normalized weights under
    `NLLLoss`, Adam with weight decay 2e-6 under a triangular `CyclicLR` between 1e-8 and 1e-3 at
    `interval="step"` (one rise over the run, as the recipe's `CyclicLRScheduler` rises over its
    first 65000 steps), batches of 32; `validation_step` embeds the whole utterances of unseen
    speakers and `on_validation_epoch_end` logs the equal error rate of their cosine trials. The
    loss starts high (the margin) and falls slowly while the lr is small, then quickly."""
    import lightning.pytorch as pl
    from torch.utils.data import DataLoader, TensorDataset

    from mldbg.lightning import DebuggerCallback

    g = _seed(seed)
    n_train_spk, per = 24, 16
    waves, ids = _speakers_utterances(g, n_train_spk + 8, per)
    mel = _mel_basis(8000, 256, 40, 20.0, 4000.0)

    def fbank(w: torch.Tensor) -> torch.Tensor:
        spec = torch.stft(w, 256, 80, 200, torch.hamming_window(200), return_complex=True).abs() ** 2
        feats = torch.log(torch.clamp(mel @ spec, min=1e-10)).transpose(1, 2)
        return feats - feats.mean(1, keepdim=True)

    feats = fbank(waves)
    n_train = n_train_spk * per
    train_set = TensorDataset(feats[:n_train], ids[:n_train])
    val_set = TensorDataset(feats[n_train:], ids[n_train:])
    steps = max_epochs * (n_train // 32)

    class SpeakerBrain(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.embedding_model = _ECAPA()
            self.classifier_weight = nn.Parameter(torch.empty(n_train_spk, 64))
            nn.init.xavier_uniform_(self.classifier_weight)
            self.loss = nn.NLLLoss()
            self.margin, self.scale = 0.2, 30.0
            self.val_embeddings: list[torch.Tensor] = []
            self.val_ids: list[torch.Tensor] = []

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, spk = batch
            start = int(torch.randint(0, x.shape[1] - 40 + 1, (1,), generator=g))
            emb = self.embedding_model(x[:, start : start + 40])
            cosine = F.linear(F.normalize(emb), F.normalize(self.classifier_weight))
            cos_m, sin_m = math.cos(self.margin), math.sin(self.margin)
            sine = torch.sqrt((1.0 - cosine.pow(2)).clamp(0, 1))
            phi = cosine * cos_m - sine * sin_m  # cos(theta + m)
            phi = torch.where(cosine - math.cos(math.pi - self.margin) > 0, phi,
                              cosine - math.sin(math.pi - self.margin) * self.margin)  # fmt: skip
            one_hot = F.one_hot(spk, n_train_spk).float()
            logits = self.scale * (one_hot * phi + (1.0 - one_hot) * cosine)
            loss = self.loss(F.log_softmax(logits, dim=1), spk)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, spk = batch
            self.val_embeddings.append(F.normalize(self.embedding_model(x)))
            self.val_ids.append(spk)

        def on_validation_epoch_end(self) -> None:
            emb, spk = torch.cat(self.val_embeddings), torch.cat(self.val_ids)
            self.val_embeddings, self.val_ids = [], []
            scores = emb @ emb.T
            iu = torch.triu_indices(len(spk), len(spk), 1)
            s, same = scores[iu[0], iu[1]], (spk[iu[0]] == spk[iu[1]]).float()
            order = torch.argsort(s)
            frr = torch.cumsum(same[order], 0) / same.sum()  # targets below each threshold
            far = 1 - torch.cumsum(1 - same[order], 0) / (1 - same).sum()  # non-targets above it
            eer = float(((far + frr) / 2)[(far - frr).abs().argmin()])
            self.log("ErrorRate", eer)
            print(
                f"Epoch {self.current_epoch}: valid EER {eer:.4f}, lr {self.optimizers().param_groups[0]['lr']:.2e}"
            )

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.Adam(self.parameters(), lr=0.001, weight_decay=0.000002)
            scheduler = torch.optim.lr_scheduler.CyclicLR(
                optimizer, base_lr=1e-8, max_lr=1e-3, step_size_up=steps, cycle_momentum=False
            )
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is not None:
                self.losses.append(float(loss))

    history = LossHistory()
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, enable_progress_bar=False, enable_model_summary=False, logger=False,
        enable_checkpointing=False, default_root_dir=path, max_epochs=max_epochs, num_sanity_val_steps=0,
        callbacks=[DebuggerCallback(path), history],
    )  # fmt: skip
    trainer.fit(
        SpeakerBrain(),
        DataLoader(train_set, batch_size=32, shuffle=True, drop_last=True, generator=g),
        DataLoader(val_set, batch_size=64),
    )
    return history.losses


# ============================================================================= HF Trainer: LayoutLM form understanding


def _forms(g: torch.Generator, n: int) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """FUNSD-like scanned forms as OCR gives them: words with boxes on a 0-1000 page and BIO
    labels of header, question, answer and other. A form has a header line at the top, key-value
    rows (a question such as "invoice number :" with its answer to its right or on the line
    below), and a footer ("page 1 of 2", a signature line) whose numbers and words are "other",
    so the same word is labelled differently by where it stands. Returns the forms, the words
    and the label names."""
    headers = [
        ["invoice"],
        ["application", "form"],
        ["purchase", "order"],
        ["medical", "report"],
        ["tax", "return"],
    ]
    questions = [["name"], ["date"], ["invoice", "number"], ["address"], ["phone"], ["total"], ["account", "number"],
                 ["amount", "due"], ["signature"], ["company"]]  # fmt: skip
    answers = {"name": ["john", "smith", "mary", "lee", "anna", "brown"], "date": ["12", "march", "2024", "june", "7"],
               "number": ["1234", "5678", "90", "12", "7"], "address": ["12", "main", "street", "city", "park", "road"],
               "phone": ["555", "1234", "90", "7"], "total": ["1234", "90", "12", "usd"], "due": ["5678", "90", "usd"],
               "signature": ["john", "smith", "mary"], "company": ["acme", "corp", "global", "trade", "brown"]}  # fmt: skip
    words_vocab = sorted({w for h in headers for w in h} | {w for q in questions for w in q} | {":", "page", "of", "1",
                          "2", "approved", "by", "confidential"} | {w for a in answers.values() for w in a})  # fmt: skip
    labels = ["O", "B-HEADER", "I-HEADER", "B-QUESTION", "I-QUESTION", "B-ANSWER", "I-ANSWER"]

    def pick(seq: list[Any]) -> Any:
        return seq[int(torch.randint(0, len(seq), (1,), generator=g))]

    def place(words: list[str], x: float, y: float, size: float) -> list[list[int]]:
        boxes = []
        for w in words:
            width = size * (0.6 * len(w) + 0.6)
            boxes.append([int(x), int(y), int(min(x + width, 1000)), int(min(y + 1.4 * size, 1000))])
            x += width + 0.8 * size
        return boxes

    forms = []
    for _ in range(n):
        tokens, boxes, tags = [], [], []
        header = pick(headers)
        tokens += header
        boxes += place(header, 250 + 200 * float(torch.rand(1, generator=g)), 40, 28)
        tags += [1] + [2] * (len(header) - 1)
        y = 140.0
        for q in [
            questions[int(i)]
            for i in torch.randperm(len(questions), generator=g)[
                : int(torch.randint(4, 8, (1,), generator=g))
            ]
        ]:
            qw = [*q, ":"]
            x0 = 60 + 40 * float(torch.rand(1, generator=g))
            qb = place(qw, x0, y, 14)
            aw = [pick(answers[q[-1]]) for _ in range(int(torch.randint(1, 4, (1,), generator=g)))]
            below = torch.rand(1, generator=g) < 0.3
            ab = place(aw, x0 if below else qb[-1][2] + 30, y + 30 if below else y, 14)
            tokens += qw + aw
            boxes += qb + ab
            tags += [3] + [4] * (len(qw) - 1) + [5] + [6] * (len(aw) - 1)
            y += 90 if below else 60
        footer = pick(
            [["page", "1", "of", "2"], ["approved", "by"], ["confidential"], ["page", "2", "of", "2"]]
        )
        tokens += footer
        boxes += place(footer, 400 + 100 * float(torch.rand(1, generator=g)), 940, 12)
        tags += [0] * len(footer)
        forms.append({"words": tokens, "bboxes": boxes, "ner_tags": tags})
    return forms, words_vocab, labels


def hf_layoutlm_form_token_classification(path: str, seed: int = 0) -> list[float]:
    """Form understanding with LayoutLM (Xu et al. 2020) through the Hugging Face `Trainer`, as
    the FUNSD fine-tuning notebooks set it up: the words tokenized with `is_split_into_words=True`,
    each word's box (normalized to 0-1000) given to its tokens and the label to its first token
    (-100 elsewhere and on `[CLS]` and `[SEP]`, whose boxes are [0, 0, 0, 0] and [1000] * 4), a
    collator of the user's own padding `input_ids`, `attention_mask`, `bbox` and `labels`, a tiny
    random `LayoutLMForTokenClassification` (2 layers of 64, 7 labels: O and the BIO tags of
    header, question and answer), AdamW 5e-4 with linear decay after 10 % warm-up and weight decay
    0.01, batches of 16, 4 epochs with an evaluation each reporting the token accuracy through
    `compute_metrics`. The loss starts near log 7 and falls fast while the model learns
    where answers stand."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import (
        LayoutLMConfig,
        LayoutLMForTokenClassification,
        PreTrainedTokenizerFast,
        PrinterCallback,
        Trainer,
        TrainingArguments,
    )

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    forms, vocab_words, label_list = _forms(g, 460)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(specials + vocab_words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
                                        cls_token="[CLS]", sep_token="[SEP]")  # fmt: skip

    def encode(form: dict[str, Any]) -> dict[str, Any]:
        enc = tokenizer(form["words"], is_split_into_words=True)
        bbox, labels, prev = [], [], None
        for i, word_id in enumerate(enc.word_ids()):
            if word_id is None:
                bbox.append([0, 0, 0, 0] if i == 0 else [1000, 1000, 1000, 1000])
                labels.append(-100)
            else:
                bbox.append(form["bboxes"][word_id])
                labels.append(form["ner_tags"][word_id] if word_id != prev else -100)
            prev = word_id
        return {
            "input_ids": enc["input_ids"],
            "attention_mask": enc["attention_mask"],
            "bbox": bbox,
            "labels": labels,
        }

    train_dataset = [encode(f) for f in forms[:400]]
    eval_dataset = [encode(f) for f in forms[400:]]

    def collate_fn(features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        length = max(len(f["input_ids"]) for f in features)
        batch: dict[str, list[Any]] = {"input_ids": [], "attention_mask": [], "bbox": [], "labels": []}
        for f in features:
            pad = length - len(f["input_ids"])
            batch["input_ids"].append(f["input_ids"] + [tokenizer.pad_token_id] * pad)
            batch["attention_mask"].append(f["attention_mask"] + [0] * pad)
            batch["bbox"].append(f["bbox"] + [[0, 0, 0, 0]] * pad)
            batch["labels"].append(f["labels"] + [-100] * pad)
        return {k: torch.tensor(v) for k, v in batch.items()}

    def compute_metrics(p: Any) -> dict[str, float]:
        predictions, labels = p
        mask = labels != -100
        return {"accuracy": float((predictions.argmax(-1)[mask] == labels[mask]).mean())}

    config = LayoutLMConfig(
        vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=128, max_2d_position_embeddings=1024, num_labels=len(label_list),
        id2label=dict(enumerate(label_list)), label2id={lab: i for i, lab in enumerate(label_list)},
        pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    model = LayoutLMForTokenClassification(config)
    args = TrainingArguments(
        output_dir=os.path.join(path, "trainer"), logging_steps=1, report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, seed=seed, save_strategy="no", eval_strategy="epoch", learning_rate=5e-4,
        weight_decay=0.01, warmup_steps=0.1, per_device_train_batch_size=16, per_device_eval_batch_size=32,
        num_train_epochs=4, remove_unused_columns=False,
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args, train_dataset=train_dataset, eval_dataset=eval_dataset, data_collator=collate_fn,
        compute_metrics=compute_metrics, callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(args.output_dir, ignore_errors=True)
    print("eval", [(round(e["eval_loss"], 4), round(e["eval_accuracy"], 4)) for e in trainer.state.log_history
                   if "eval_loss" in e])  # fmt: skip
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


# ============================================================================= Keras: Compact Convolutional Transformers


def keras_cct_compact_convolutional_transformer(path: str, seed: int = 0) -> list[float]:
    """keras.io's "Compact Convolutional Transformers" (Hassani et al. 2021) in Keras 3 on 16x16
    RGB glyphs of 10 classes: the uint8 images rescaled by a `Rescaling(1/255)` inside the
    model's augmentation block (with `RandomCrop` and `RandomFlip`), the `CCTTokenizer` (two
    ReLU convolutions of 16 and 32 channels without bias, He-normal init, zero padding, max
    pooling), a learned `PositionEmbedding`, two transformer layers (2 heads, projection 32,
    attention and MLP dropout 0.1) with `StochasticDepth` rising to 0.1, `SequencePooling`
    (attention weights over the tokens instead of a class token), `CategoricalCrossentropy(
    from_logits=True, label_smoothing=0.1)`, `AdamW(1e-3, weight_decay=1e-4)`, batches of 64 (128
    in the example), 3 epochs (30 there), `validation_split=0.1`. The loss starts near log 10 and, with the
    label smoothing, cannot go below about 0.5."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images, labels = _rgb_glyphs(g, 1800, 10)
    x_train = images[:1600].permute(0, 2, 3, 1).numpy()
    y_train = keras.utils.to_categorical(labels[:1600].numpy(), 10)
    x_test, y_test = (
        images[1600:].permute(0, 2, 3, 1).numpy(),
        keras.utils.to_categorical(labels[1600:].numpy(), 10),
    )
    image_size, projection_dim, num_heads, transformer_layers, stochastic_depth_rate = 16, 32, 2, 2, 0.1
    transformer_units = [projection_dim, projection_dim]

    class CCTTokenizer(layers.Layer):
        def __init__(self, kernel_size: int = 3, stride: int = 1, padding: int = 1, pooling_kernel_size: int = 3,
                     pooling_stride: int = 2, num_output_channels: tuple[int, ...] = (16, 32), **kwargs: Any) -> None:  # fmt: skip
            super().__init__(**kwargs)
            self.conv_model = keras.Sequential()
            for channels in num_output_channels:
                self.conv_model.add(layers.Conv2D(channels, kernel_size, stride, padding="valid", use_bias=False,
                                                  activation="relu", kernel_initializer="he_normal"))  # fmt: skip
                self.conv_model.add(layers.ZeroPadding2D(padding))
                self.conv_model.add(layers.MaxPooling2D(pooling_kernel_size, pooling_stride, "same"))

        def call(self, images: Any) -> Any:
            outputs = self.conv_model(images)
            shape = keras.ops.shape(outputs)
            return keras.ops.reshape(outputs, (-1, shape[1] * shape[2], shape[-1]))

    class PositionEmbedding(layers.Layer):
        def __init__(self, sequence_length: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.sequence_length = sequence_length

        def build(self, input_shape: Any) -> None:
            self.position_embeddings = self.add_weight(shape=[self.sequence_length, input_shape[-1]],
                                                       initializer="glorot_uniform", trainable=True)  # fmt: skip

        def call(self, inputs: Any) -> Any:
            return keras.ops.broadcast_to(self.position_embeddings[None], keras.ops.shape(inputs))

    class SequencePooling(layers.Layer):
        def __init__(self) -> None:
            super().__init__()
            self.attention = layers.Dense(1)

        def call(self, x: Any) -> Any:
            attention_weights = keras.ops.transpose(
                keras.ops.softmax(self.attention(x), axis=1), axes=(0, 2, 1)
            )
            return keras.ops.squeeze(keras.ops.matmul(attention_weights, x), -2)

    class StochasticDepth(layers.Layer):
        def __init__(self, drop_prop: float, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.drop_prob = drop_prop
            self.seed_generator = keras.random.SeedGenerator(1337)

        def call(self, x: Any, training: Any = None) -> Any:
            if training:
                keep_prob = 1 - self.drop_prob
                shape = (keras.ops.shape(x)[0],) + (1,) * (len(x.shape) - 1)
                random_tensor = keras.ops.floor(
                    keep_prob + keras.random.uniform(shape, 0, 1, seed=self.seed_generator)
                )
                return (x / keep_prob) * random_tensor
            return x

    def mlp(x: Any, hidden_units: list[int], dropout_rate: float) -> Any:
        for units in hidden_units:
            x = layers.Dense(units, activation=keras.ops.gelu)(x)
            x = layers.Dropout(dropout_rate)(x)
        return x

    data_augmentation = keras.Sequential([
        layers.Rescaling(scale=1.0 / 255), layers.RandomCrop(image_size, image_size), layers.RandomFlip("horizontal"),
    ], name="data_augmentation")  # fmt: skip
    inputs = layers.Input((image_size, image_size, 3))
    encoded_patches = CCTTokenizer()(data_augmentation(inputs))
    encoded_patches += PositionEmbedding(sequence_length=encoded_patches.shape[1])(encoded_patches)
    dpr = list(np.linspace(0, stochastic_depth_rate, transformer_layers))
    for i in range(transformer_layers):
        x1 = layers.LayerNormalization(epsilon=1e-5)(encoded_patches)
        attention_output = layers.MultiHeadAttention(
            num_heads=num_heads, key_dim=projection_dim, dropout=0.1
        )(x1, x1)
        x2 = layers.Add()([StochasticDepth(dpr[i])(attention_output), encoded_patches])
        x3 = mlp(
            layers.LayerNormalization(epsilon=1e-5)(x2), hidden_units=transformer_units, dropout_rate=0.1
        )
        encoded_patches = layers.Add()([StochasticDepth(dpr[i])(x3), x2])
    representation = layers.LayerNormalization(epsilon=1e-5)(encoded_patches)
    logits = layers.Dense(10)(SequencePooling()(representation))
    model = keras.Model(inputs=inputs, outputs=logits)
    model.compile(
        optimizer=keras.optimizers.AdamW(learning_rate=0.001, weight_decay=0.0001),
        loss=keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1),
        metrics=[keras.metrics.CategoricalAccuracy(name="accuracy"), keras.metrics.TopKCategoricalAccuracy(5, name="top-5-accuracy")],
    )  # fmt: skip

    class BatchLosses(keras.callbacks.Callback):
        """Each batch's own loss from the running epoch mean that `logs` carries."""

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

    history = BatchLosses()
    fit = model.fit(x=x_train, y=y_train, batch_size=64, epochs=3, validation_split=0.1, verbose=0,
                    callbacks=[mldbg.keras.Hook(path), history])  # fmt: skip
    print("loss", [round(v, 4) for v in fit.history["loss"]], "val_accuracy",
          [round(v, 4) for v in fit.history["val_accuracy"]])  # fmt: skip
    _, accuracy, top_5_accuracy = model.evaluate(x_test, y_test, verbose=0)
    print(f"Test accuracy: {round(accuracy * 100, 2)}%, top 5: {round(top_5_accuracy * 100, 2)}%")
    return history.losses


# ============================================================================= PIPELINES

_splade = healthy(
    "splade_max_flops_in_batch_negatives", "SPLADE sparse retrieval", splade_flops_in_batch_negatives
)
_dp = healthy(
    "diffusion_policy_conditional_unet1d_ddpm_ema",
    "Diffusion Policy (imitation)",
    diffusion_policy_unet_lowdim,
)
_pets = healthy("pets_probabilistic_ensemble_cem_pendulum", "PETS model-based RL", pets_pendulum_ensemble_cem)
_d2v = healthy(
    "data2vec_text_ema_teacher_top_layer_targets",
    "data2vec self-distillation (text)",
    data2vec_text_ema_teacher,
)
_dien = healthy(
    "dien_interest_evolution_augru_auxiliary_loss", "DIEN click-through prediction", dien_augru_auxiliary_loss
)
_at = healthy(
    "anomaly_transformer_minimax_association_discrepancy",
    "Anomaly Transformer (time-series anomalies)",
    anomaly_transformer_minimax,
)
_mcd = healthy(
    "mcd_two_classifier_discrepancy_domain_adaptation",
    "MCD domain adaptation",
    mcd_maximum_classifier_discrepancy,
)
_grownet = healthy(
    "grownet_boosted_shallow_nets_corrective_step",
    "GrowNet (boosted neural nets)",
    grownet_boosted_shallow_nets,
)
_naf = healthy(
    "nafnet_simplegate_psnr_loss_denoising", "NAFNet image restoration", nafnet_psnr_loss_denoising
)
_mod = healthy(
    "mixture_of_depths_char_lm_topk_router", "Mixture-of-Depths language model", mixture_of_depths_char_lm
)
PIPELINES: list[Any] = [
    healthy(
        "nnunet_3d_plainconvunet_dice_ce_deep_supervision",
        "nnU-Net 3-D segmentation",
        nnunet_3d_dice_ce_deep_supervision,
    ),
    _splade,
    buggy(_splade, "shuffled_labels"),
    _dp,
    buggy(_dp, "no_zero_grad"),
    _pets,
    buggy(_pets, "deep_sigmoid"),
    healthy(
        "graphmae_gat_masked_features_sce_loss",
        "GraphMAE masked graph autoencoder",
        graphmae_masked_feature_sce,
    ),
    _d2v,
    buggy(_d2v, "frozen_by_mistake"),
    _dien,
    buggy(_dien, "softmax_before_ce"),
    _at,
    buggy(_at, "log_zero_nan"),
    _mcd,
    buggy(_mcd, "train_in_eval_mode"),
    _grownet,
    buggy(_grownet, "dead_relu_init"),
    healthy(
        "demucs_denoiser_causal_l1_multires_stft",
        "Demucs speech enhancement (waveform)",
        demucs_denoiser_waveform,
    ),
    _naf,
    buggy(_naf, "inputs_x255"),
    _mod,
    buggy(_mod, "lr_x100"),
]

if installed("lightning"):
    PIPELINES += [
        healthy(
            "lightning_ecapa_tdnn_aam_softmax_cyclic_lr",
            "ECAPA-TDNN speaker verification (Lightning)",
            lit_ecapa_speaker_verification,
        )
    ]

if installed("transformers"):
    PIPELINES += [
        healthy(
            "hf_layoutlm_form_token_classification_bbox",
            "HF Trainer LayoutLM form understanding",
            hf_layoutlm_form_token_classification,
        )
    ]

if installed("keras", "tensorflow"):
    PIPELINES += [
        healthy(
            "keras_cct_conv_tokenizer_sequence_pooling",
            "Keras Compact Convolutional Transformer",
            keras_cct_compact_convolutional_transformer,
        )
    ]
