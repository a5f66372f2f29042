"""The twenty-ninth blind held-out set (issue 26), part AJ: trainings run through the trainers'
one-callback integrations, since the users of a trainer add mldbg as one callback and nothing
more: five through PyTorch Lightning (`mldbg.lightning.DebuggerCallback(path)` in
`Trainer(callbacks=[...])`), five through the Hugging Face `Trainer`
(`mldbg.transformers.DebuggerCallback(path)`, tiny randomly initialized models built from
configs, no downloads) and five through Keras 3 on TensorFlow (`mldbg.keras.Hook(path)` as a
callback of `model.fit`). Each uses its trainer's own features as that trainer's users do
(gradient accumulation, clipping, validation intervals, schedulers in `configure_optimizers`,
manual optimization with two optimizers, bf16 mixed precision, early stopping and checkpoints;
warm-up schedules, accumulation, step-wise evaluation, label smoothing, a `compute_loss`
subclass, padding and masking collators, generation in evaluation; class weights, sample
weights, a custom `train_step`, two outputs with loss weights, `validation_split`, plateau
schedules), on models and tasks the earlier sets did not train through these trainers. Data
generated in-process, fixed seeds, one CPU thread.

Lightning: ADDA, adversarial discriminative domain adaptation from clean glyphs to MNIST-M-like
blended ones (a source LeNet trained by a first `Trainer` without the callback, then the
adaptation under `automatic_optimization = False` with a critic and a target encoder on two
Adam optimizers, the frozen source parts put in eval mode in `on_train_epoch_start`; the losses
are the critic's, hovering around log 2); a SchNet force field on Morse-potential molecules
(continuous-filter convolutions over all atom pairs, forces as the negative gradient of the
energy with `create_graph=True`, schnetpack's 0.01 / 0.99 energy and force loss weights,
`accumulate_grad_batches=2`, `gradient_clip_val`, `ReduceLROnPlateau` on the validation loss
through the `configure_optimizers` dict, validation under `enable_grad`); BERT4Rec on synthetic
watch histories (the cloze task, item embeddings initialized from item2vec vectors by
`nn.Embedding.from_pretrained(..., freeze=False)`, a tied output, `precision="bf16-mixed"`,
`val_check_interval=0.5`, a per-step `LambdaLR` warm-up and linear decay, a `ModelCheckpoint` on
NDCG@10); three-state protein secondary structure (one-hot and profile features, a multi-scale
CNN into a BiGRU, padded batches with `ignore_index=-100`, `EarlyStopping` and `ModelCheckpoint`
on the validation loss, `ReduceLROnPlateau`, clipping, `trainer.test(ckpt_path="best")`); and
GraphSAGE link prediction on a community graph (mean aggregation, dot-product decoding, a fresh
negative sample per batch of supervision edges, `CosineAnnealingLR`,
`check_val_every_n_epoch=5`; the first loss is high, 15, from the dot products of unnormalized
embeddings).

Hugging Face `Trainer`: transfer-learning-conv-ai's `GPT2DoubleHeadsModel` on PERSONA-CHAT-like
dialogues (four candidate replies, LM labels on the gold one, a `Trainer` subclass whose
`compute_loss` returns `2 * lm_loss + mc_loss` with `loss_is_scaled_for_ga = False`, a padding
collator, `gradient_accumulation_steps=2`, linear decay after warm-up); SimMIM pre-training of a
`ViTForMaskedImageModeling` as `run_mim.py` runs it (its `MaskGenerator`, transforms written by
hand, `remove_unused_columns=False`, `label_names=["bool_masked_pos"]`, cosine after warm-up,
`eval_strategy="steps"`; an L1 loss that falls slowly from 0.43 to 0.35); speaker
identification with `Wav2Vec2ForSequenceClassification` on synthetic voices (clips listed by
file name, speakers looked up in a metadata table, `Wav2Vec2FeatureExtractor` normalization and
padding with its attention mask, SpecAugment time masks, `compute_metrics`); LayoutLM key
information extraction from receipts (words with their 0-1000 boxes, BIO labels, the user's own
collator padding the boxes, `label_smoothing_factor=0.1`, so the loss floors near 0.5,
`eval_strategy="steps"`); and ByT5-style grapheme-to-phoneme conversion with the
`Seq2SeqTrainer` (`ByT5Tokenizer` on UTF-8 bytes, IPA targets, `DataCollatorForSeq2Seq`, a T5
with a deeper encoder than decoder, `predict_with_generate=True` for the word accuracy and the
phone error rate).

Keras 3: sleep staging from band powers in decibels (YASA-like features of EEG and EOG epochs
with two epochs of context either side, quality control of flat channels, a `Normalization`
layer, `class_weight` balanced over the stages, `validation_split=0.2`, `ReduceLROnPlateau` and
`EarlyStopping`); used-car log prices with `sample_weight` halving every 180 days of a listing's
age (the unscaled log price makes the first losses about 80); the Pi-model of Laine and Aila in
a `keras.Model` subclass with its own `train_step` (two stochastic passes under one
`tf.GradientTape`, the labelled cross-entropy plus a ramped consistency term, its own `Mean`
trackers, a `test_step`, a `tf.data` zip of labelled and unlabelled batches); single-object
localization with a class head and a box head (`loss_weights={"class_label": 1.0,
"bounding_box": 5.0}`, targets as a dict by output name); and a CNN-LSTM recognizing activities
from accelerometer windows (`ReduceLROnPlateau` with `min_lr`, `EarlyStopping`,
`validation_split`).

Ten buggy twins, one of each bug of `BUGS`, spread over the three trainers and injected the way
the mistake appears in such a trainer script: LayoutLM's `learning_rate=1e-1` typed for 1e-3,
after which no entity token is tagged right and the loss stays near 1.2 (lr_x100); ADDA's
`training_step` ported from automatic optimization without the `zero_grad()` calls Lightning
used to make, so the critic and the target encoder step on gradients summed since the fit
began (no_zero_grad); the speaker corpus'
metadata column taken in recording order for clips listed by file name (shuffled_labels); the
SimMIM transforms rewritten by hand with `ToTensor`'s division by 255 lost before the `Normalize`
(inputs_x255); the protein model's `forward` returning softmax probabilities "so that
`predict_step` and the Q3 metric read them" to `F.cross_entropy` (softmax_before_ce); GraphSAGE's
`reset_parameters` copied from a sparse-coding layer, every bias starting at -1 (dead_relu_init);
the car-price network made "deeper" as eight sigmoid layers (deep_sigmoid); BERT4Rec's
`nn.Embedding.from_pretrained` without `freeze=False`, which freezes the item embeddings while
AdamW holds them (frozen_by_mistake); the sleep-staging quality control left out, so the
decibels of a flat channel's zero power are -inf, the `Normalization` layer adapts to them and
every loss is NaN (log_zero_nan); the Pi-model's `train_step` calling its classifier without
`training=True`, which a custom `train_step` does not get from `fit`, so BatchNorm, dropout and
the input noise run in inference mode throughout (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND28`.
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

from . import BLIND28, buggy, healthy, installed
from .blind_ag import _rgb_glyphs  # uint8 RGB glyphs of k classes
from .blind_ah import _photos  # uint8 RGB "photos" (n, size, size, 3)

SPLIT = BLIND28

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 2801)


# ============================================================================= Lightning: shared pieces


def _lightning_history() -> Any:
    """A callback keeping each training batch's loss: `outputs["loss"]`, or under manual
    optimization the `self.last_loss` the module keeps."""
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


def _trainer_kwargs(path: str) -> dict[str, Any]:
    """What every script here passes to `pl.Trainer` besides its own settings: CPU, no progress
    bar, no logger (the loss history is a callback), runs under `path`."""
    return dict(
        accelerator="cpu", devices=1, enable_progress_bar=False, enable_model_summary=False, logger=False,
        default_root_dir=path,
    )  # fmt: skip


# ============================================================================= Lightning: ADDA domain adaptation


def _two_domain_glyphs(
    g: torch.Generator, n_source: int, n_target: int, k: int = 10, size: int = 20
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Glyphs of `k` classes (random 5x5 shapes shared by both domains, upscaled, at a random
    offset and scale) in two styles, as in MNIST -> MNIST-M: the source domain white strokes on
    black with a little noise (grey, three equal channels), the target domain blended as MNIST-M
    is, `|texture - glyph|` over a random smooth colour texture, with more noise.
    Returns float images in [0, 1] (n, 3, size, size) and labels for each domain."""
    protos = (torch.rand(k, 5, 5, generator=g) < 0.45).float()
    protos[:, 2, 2] = 1.0

    def render(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, k, (n,), generator=g)
        masks = torch.zeros(n, size, size)
        for i in range(n):
            inner = int(torch.randint(11, 16, (1,), generator=g))
            big = F.interpolate(protos[y[i]][None, None], size=(inner, inner), mode="nearest")[0, 0]
            oy, ox = torch.randint(0, size - inner + 1, (2,), generator=g).tolist()
            masks[i, oy : oy + inner, ox : ox + inner] = big
        return masks, y

    src_mask, src_y = render(n_source)
    source = src_mask[:, None].expand(-1, 3, -1, -1) + 0.05 * torch.randn(
        n_source, 3, size, size, generator=g
    )
    tgt_mask, tgt_y = render(n_target)
    texture = 0.45 * F.interpolate(
        torch.rand(n_target, 3, 5, 5, generator=g), size=(size, size), mode="bilinear"
    )
    target = (texture - tgt_mask[:, None]).abs()  # MNIST-M's blend: |patch - digit|
    target = target + 0.08 * torch.randn(n_target, 3, size, size, generator=g)
    return source.clamp(0, 1), src_y, target.clamp(0, 1), tgt_y


class _LeNetEncoder(nn.Module):
    """ADDA's `LeNetEncoder` (corenel/pytorch-adda) for 20x20 RGB: conv 5x5 (20) - max pool -
    ReLU - conv 5x5 (50) - Dropout2d - max pool - ReLU - a dense layer of 128."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 20, kernel_size=5), nn.MaxPool2d(kernel_size=2), nn.ReLU(),
            nn.Conv2d(20, 50, kernel_size=5), nn.Dropout2d(), nn.MaxPool2d(kernel_size=2), nn.ReLU(),
        )  # fmt: skip
        self.fc1 = nn.Linear(50 * 2 * 2, 128)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc1(self.encoder(x).flatten(1))


class _LeNetClassifier(nn.Module):
    """ADDA's `LeNetClassifier`: ReLU, dropout, a dense layer to the class logits."""

    def __init__(self, k: int = 10) -> None:
        super().__init__()
        self.fc2 = nn.Linear(128, k)

    def forward(self, feat: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.dropout(F.relu(feat), training=self.training))


def lit_adda_adversarial_adaptation(
    path: str, max_epochs: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Adversarial discriminative domain adaptation (Tzeng et al. 2017) in Lightning, the two
    stages of corenel/pytorch-adda: a source `LeNetEncoder` and classifier trained on the labelled
    source glyphs by a first `Trainer` (automatic optimization, Adam 1e-3, no callback), then the
    adaptation by a second `Trainer` with `DebuggerCallback`: `automatic_optimization = False`,
    the source encoder and the classifier frozen (`requires_grad_(False)`, put in eval mode in
    `on_train_epoch_start` as Lightning's docs advise for frozen parts), a target encoder
    initialized from the source encoder, a critic (128-256-256-2 ReLU MLP, `LogSoftmax`, `NLLLoss`)
    telling source features from target ones, and two Adam optimizers (1e-4, betas (0.5, 0.999))
    from `configure_optimizers`: each batch the critic's step on the detached features of both
    domains, then the target encoder's step with the labels flipped; `manual_backward` and the
    `zero_grad()` calls written out; the target accuracy in `validation_step`, 4 epochs of 32
    paired batches of 64. The returned losses are the critic's: they hover around log 2 (0.69),
    dipping while the critic tells the domains apart and rising as the target encoder catches up
    (the target accuracy goes from about 0.52 with the source encoder to 0.55-0.65)."""
    import lightning.pytorch as pl

    from mldbg.lightning import DebuggerCallback

    g = _seed(seed)
    src_x, src_y, tgt_x, tgt_y = _two_domain_glyphs(g, 2048, 2304)
    tgt_train, tgt_val, tgt_val_y = tgt_x[:2048], tgt_x[2048:], tgt_y[2048:]

    class SourceOnly(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.encoder, self.classifier = _LeNetEncoder(), _LeNetClassifier()

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            images, labels = batch
            loss = F.cross_entropy(self.classifier(self.encoder(images)), labels)
            self.log("src_loss", loss)
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=1e-3, betas=(0.5, 0.999))

    source = SourceOnly()
    pretrain = pl.Trainer(max_epochs=3, enable_checkpointing=False, **_trainer_kwargs(path))
    pretrain.fit(source, DataLoader(TensorDataset(src_x, src_y), batch_size=64, shuffle=True, generator=g))

    def accuracy(encoder: nn.Module, classifier: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
        encoder.eval()
        classifier.eval()
        with torch.no_grad():
            return (classifier(encoder(x)).argmax(1) == y).float().mean().item()

    print(
        f"source only: target accuracy {accuracy(source.encoder, source.classifier, tgt_val, tgt_val_y):.3f}"
    )

    class ADDA(pl.LightningModule):
        def __init__(self, src_encoder: nn.Module, classifier: nn.Module) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.src_encoder = src_encoder.requires_grad_(False)
            self.classifier = classifier.requires_grad_(False)
            self.tgt_encoder = copy.deepcopy(src_encoder).requires_grad_(True)
            self.critic = nn.Sequential(
                nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 2), nn.LogSoftmax(1)
            )  # fmt: skip
            self.criterion = nn.NLLLoss()
            self.last_loss = torch.tensor(0.0)

        def on_train_epoch_start(self) -> None:
            self.src_encoder.eval()
            self.classifier.eval()

        def training_step(self, batch: Any, batch_idx: int) -> None:
            images_src, images_tgt = batch
            optimizer_tgt, optimizer_critic = self.optimizers()
            # train the critic
            if bug != "no_zero_grad":  # bug: the `zero_grad()` calls automatic optimization made, left out
                optimizer_critic.zero_grad()
            feat_src = self.src_encoder(images_src)
            feat_tgt = self.tgt_encoder(images_tgt)
            feat_concat = torch.cat((feat_src, feat_tgt), 0)
            pred_concat = self.critic(feat_concat.detach())
            label_src = torch.ones(feat_src.size(0), dtype=torch.long)
            label_tgt = torch.zeros(feat_tgt.size(0), dtype=torch.long)
            label_concat = torch.cat((label_src, label_tgt), 0)
            loss_critic = self.criterion(pred_concat, label_concat)
            self.manual_backward(loss_critic)
            optimizer_critic.step()
            acc = (pred_concat.argmax(1) == label_concat).float().mean()
            # train the target encoder
            if bug != "no_zero_grad":
                optimizer_critic.zero_grad()
                optimizer_tgt.zero_grad()
            pred_tgt = self.critic(self.tgt_encoder(images_tgt))
            loss_tgt = self.criterion(pred_tgt, torch.ones(feat_tgt.size(0), dtype=torch.long))
            self.manual_backward(loss_tgt)
            optimizer_tgt.step()
            self.log_dict({"d_loss": loss_critic, "g_loss": loss_tgt, "d_acc": acc})
            self.last_loss = loss_critic.detach()

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            images, labels = batch
            logits = self.classifier(self.tgt_encoder(images))
            self.log("val_loss", F.cross_entropy(logits, labels))
            self.log("val_acc", (logits.argmax(1) == labels).float().mean())

        def configure_optimizers(self) -> Any:
            optimizer_tgt = torch.optim.Adam(self.tgt_encoder.parameters(), lr=1e-4, betas=(0.5, 0.999))
            optimizer_critic = torch.optim.Adam(self.critic.parameters(), lr=1e-4, betas=(0.5, 0.999))
            return optimizer_tgt, optimizer_critic

        def on_validation_epoch_end(self) -> None:
            m = self.trainer.callback_metrics
            print(f"epoch {self.current_epoch}: d_loss {float(m.get('d_loss', 0)):.3f} "
                  f"d_acc {float(m.get('d_acc', 0)):.3f} target val acc {float(m['val_acc']):.3f}")  # fmt: skip

    model = ADDA(source.encoder, source.classifier)
    history = _lightning_history()
    trainer = pl.Trainer(
        max_epochs=max_epochs, enable_checkpointing=False, num_sanity_val_steps=0,
        callbacks=[DebuggerCallback(path), history], **_trainer_kwargs(path),
    )  # fmt: skip
    perm = torch.randperm(len(tgt_train), generator=g)
    trainer.fit(
        model,
        DataLoader(
            TensorDataset(src_x, tgt_train[perm]), batch_size=64, shuffle=True, drop_last=True, generator=g
        ),
        DataLoader(TensorDataset(tgt_val, tgt_val_y), batch_size=256),
    )
    print(f"adapted: target accuracy {accuracy(model.tgt_encoder, model.classifier, tgt_val, tgt_val_y):.3f}")
    return history.losses


# ============================================================================= Lightning: SchNet energies and forces


def _molecules(g: torch.Generator, n: int) -> list[dict[str, torch.Tensor]]:
    """`n` small organic-like molecules of 5 to 12 atoms (H, C, N, O with QM9-like shares),
    atoms placed one by one 0.95 to 1.6 A from an earlier atom and at least 0.9 A from all,
    labelled by a Morse potential with a pair-dependent well depth and length, a short-range
    repulsion and per-element reference energies (eV): the energy and its forces (by autograd)."""
    elements = torch.tensor([1, 6, 7, 8])
    share = torch.tensor([0.5, 0.35, 0.08, 0.07])
    ref, radius, depth = torch.zeros(10), torch.zeros(10), torch.zeros(10)
    ref[elements] = torch.tensor([-13.6, -1029.8, -1485.3, -2042.6])
    radius[elements] = torch.tensor([0.35, 0.75, 0.7, 0.65])
    depth[elements] = torch.tensor([1.2, 2.6, 2.2, 2.0])
    out = []
    for _ in range(n):
        count = int(torch.randint(5, 13, (1,), generator=g))
        z = elements[torch.multinomial(share, count, replacement=True, generator=g)]
        z[0] = 6
        pos = torch.zeros(count, 3)
        for i in range(1, count):
            for _attempt in range(50):
                anchor = pos[int(torch.randint(0, i, (1,), generator=g))]
                direction = F.normalize(torch.randn(3, generator=g), dim=0)
                cand = anchor + direction * (0.95 + 0.65 * torch.rand(1, generator=g))
                if (pos[:i] - cand).norm(dim=1).min() > 0.9:
                    break
            pos[i] = cand
        pos = pos - pos.mean(0)
        r0 = radius[z][:, None] + radius[z][None]
        de = (depth[z][:, None] * depth[z][None]).sqrt()
        p = pos.clone().requires_grad_(True)
        d = (p[:, None] - p[None]).norm(dim=-1)
        iu = torch.triu_indices(count, count, 1)
        d, r0, de = d[iu[0], iu[1]], r0[iu[0], iu[1]], de[iu[0], iu[1]]
        morse = de * ((1 - torch.exp(-1.8 * (d - r0))) ** 2 - 1)
        energy = morse.sum() + (0.3 / d**6).sum() + ref[z].sum()
        (grad,) = torch.autograd.grad(energy, p)
        out.append({"z": z, "pos": pos, "energy": energy.detach().reshape(1), "forces": -grad})
    return out


def _collate_atoms(mols: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """schnetpack's `collate_atoms`: the atoms of a batch concatenated, `idx_m` the molecule of
    each atom, and the neighbour pairs (`idx_i`, `idx_j`) of every two atoms of a molecule."""
    z, pos, energy, forces, idx_m, idx_i, idx_j = [], [], [], [], [], [], []
    offset = 0
    for m, mol in enumerate(mols):
        count = len(mol["z"])
        z.append(mol["z"])
        pos.append(mol["pos"])
        energy.append(mol["energy"])
        forces.append(mol["forces"])
        idx_m.append(torch.full((count,), m))
        ii, jj = torch.meshgrid(torch.arange(count), torch.arange(count), indexing="ij")
        keep = ii != jj
        idx_i.append(ii[keep] + offset)
        idx_j.append(jj[keep] + offset)
        offset += count
    return {
        "z": torch.cat(z), "pos": torch.cat(pos), "energy": torch.cat(energy), "forces": torch.cat(forces),
        "idx_m": torch.cat(idx_m), "idx_i": torch.cat(idx_i), "idx_j": torch.cat(idx_j),
        "n_molecules": torch.tensor(len(mols)),
    }  # fmt: skip


def _ssp(x: torch.Tensor) -> torch.Tensor:
    """SchNet's shifted softplus, `softplus(x) - log 2`."""
    return F.softplus(x) - math.log(2.0)


class _SchNetInteraction(nn.Module):
    """A SchNet interaction block: atom features to filter space, a continuous-filter
    convolution whose filters a dense network makes from the radial basis of each pair's
    distance (times the cosine cutoff), and two dense layers back, the second without
    activation."""

    def __init__(self, n_atom_basis: int, n_rbf: int, n_filters: int) -> None:
        super().__init__()
        self.in2f = nn.Linear(n_atom_basis, n_filters, bias=False)
        self.filter1, self.filter2 = nn.Linear(n_rbf, n_filters), nn.Linear(n_filters, n_filters)
        self.f2out1, self.f2out2 = nn.Linear(n_filters, n_atom_basis), nn.Linear(n_atom_basis, n_atom_basis)

    def forward(self, x: torch.Tensor, f_ij: torch.Tensor, idx_i: torch.Tensor, idx_j: torch.Tensor,
                rcut_ij: torch.Tensor) -> torch.Tensor:  # fmt: skip
        w_ij = self.filter2(_ssp(self.filter1(f_ij))) * rcut_ij[:, None]
        x_ij = self.in2f(x)[idx_j] * w_ij
        x = torch.zeros(x.size(0), x_ij.size(1), dtype=x_ij.dtype).index_add_(0, idx_i, x_ij)
        return self.f2out2(_ssp(self.f2out1(x)))


class _SchNet(nn.Module):
    """schnetpack's `SchNet` representation with an `Atomwise` sum and `Forces`: an embedding
    of the nuclear charge, Gaussian radial basis functions between 0 and the cutoff, residual
    interaction blocks, a two-layer atomwise output summed per molecule, scaled and shifted by
    the training set's statistics (per-atom mean and standard deviation after the element
    references), and the forces as the negative gradient of the energy."""

    def __init__(self, n_atom_basis: int = 32, n_interactions: int = 3, n_rbf: int = 20, cutoff: float = 5.0):
        super().__init__()
        self.cutoff = cutoff
        self.embedding = nn.Embedding(10, n_atom_basis, padding_idx=0)
        self.register_buffer("offsets", torch.linspace(0, cutoff, n_rbf))
        self.width = float(self.offsets[1] - self.offsets[0])
        self.interactions = nn.ModuleList(
            [_SchNetInteraction(n_atom_basis, n_rbf, n_atom_basis) for _ in range(n_interactions)]
        )
        self.out1, self.out2 = nn.Linear(n_atom_basis, n_atom_basis // 2), nn.Linear(n_atom_basis // 2, 1)
        self.register_buffer("atomref", torch.zeros(10))
        self.register_buffer("mean", torch.tensor(0.0))
        self.register_buffer("stddev", torch.tensor(1.0))

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        pos = inputs["pos"].requires_grad_(True)
        idx_i, idx_j, idx_m = inputs["idx_i"], inputs["idx_j"], inputs["idx_m"]
        d_ij = (pos[idx_j] - pos[idx_i]).norm(dim=1)
        f_ij = torch.exp(-0.5 / self.width**2 * (d_ij[:, None] - self.offsets) ** 2)
        rcut_ij = 0.5 * (torch.cos(d_ij * math.pi / self.cutoff) + 1.0) * (d_ij < self.cutoff).float()
        x = self.embedding(inputs["z"])
        for interaction in self.interactions:
            x = x + interaction(x, f_ij, idx_i, idx_j, rcut_ij)
        y = self.out2(_ssp(self.out1(x))).squeeze(-1)
        y = y.float() * self.stddev + self.mean + self.atomref[inputs["z"]]
        n_mol = int(inputs["n_molecules"])
        energy = torch.zeros(n_mol, dtype=y.dtype).index_add_(0, idx_m, y)
        (grad,) = torch.autograd.grad(energy.sum(), pos, create_graph=self.training)
        return {"energy": energy, "forces": -grad}


def lit_schnet_energy_forces(path: str, max_epochs: int = 6, seed: int = 0) -> list[float]:
    """A SchNet force field trained the way schnetpack's `AtomisticTask` does it, written as a
    `LightningModule` on small Morse-potential molecules: the energy and the forces (the
    negative gradient of the energy by autograd, `create_graph=True` in training) fitted
    together with the loss weights of schnetpack's MD17 configuration (0.01 x MSE of the energy,
    0.99 x MSE of the forces, in eV and eV/A), the element references fitted by least squares
    and the per-atom mean and standard deviation of the rest taken from the training split
    (`RemoveOffsets` / `AddOffsets`), AdamW 1e-3 (5e-4 in the configuration), `ReduceLROnPlateau`
    (factor 0.5, patience 2) on the validation loss through the `configure_optimizers` dict,
    batches of 8 molecules with `accumulate_grad_batches=2`, `gradient_clip_val=5.0`, the energy
    and force MAEs in `validation_step` (under `torch.enable_grad()`: the forces need autograd)."""
    import lightning.pytorch as pl

    from mldbg.lightning import DebuggerCallback

    g = _seed(seed)
    mols = _molecules(g, 400)
    train, val = mols[:320], mols[320:]
    counts = torch.stack([torch.bincount(m["z"], minlength=10).float() for m in train])
    energies = torch.cat([m["energy"] for m in train])
    used = counts.sum(0) > 0
    atomref = torch.zeros(10)
    atomref[used] = torch.linalg.lstsq(counts[:, used], energies[:, None]).solution[:, 0]
    per_atom = (energies - counts @ atomref) / counts.sum(1)
    model = _SchNet()
    model.atomref.copy_(atomref)
    model.mean.copy_(per_atom.mean())
    model.stddev.copy_(per_atom.std())

    class AtomisticTask(pl.LightningModule):
        def __init__(self, model: nn.Module) -> None:
            super().__init__()
            self.model = model

        def loss_fn(self, pred: dict[str, torch.Tensor], batch: dict[str, torch.Tensor]) -> torch.Tensor:
            return 0.01 * F.mse_loss(pred["energy"], batch["energy"]) + 0.99 * F.mse_loss(
                pred["forces"], batch["forces"]
            )

        def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
            loss = self.loss_fn(self.model(batch), batch)
            self.log("train_loss", loss, batch_size=int(batch["n_molecules"]))
            return loss

        def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
            with torch.enable_grad():
                pred = self.model(batch)
            n = int(batch["n_molecules"])
            self.log("val_loss", self.loss_fn(pred, batch), batch_size=n)
            self.log("val_energy_MAE", (pred["energy"] - batch["energy"]).abs().mean(), batch_size=n)
            self.log("val_forces_MAE", (pred["forces"] - batch["forces"]).abs().mean(), batch_size=n)

        def on_validation_epoch_end(self) -> None:
            m = self.trainer.callback_metrics
            print(f"epoch {self.current_epoch}: val_loss {float(m['val_loss']):.4f} energy MAE "
                  f"{float(m['val_energy_MAE']):.3f} eV forces MAE {float(m['val_forces_MAE']):.3f} eV/A "
                  f"lr {self.optimizers().param_groups[0]['lr']:.1e}")  # fmt: skip

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.AdamW(self.parameters(), lr=1e-3)
            scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=2)
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "monitor": "val_loss"}}

    history = _lightning_history()
    trainer = pl.Trainer(
        max_epochs=max_epochs, accumulate_grad_batches=2, gradient_clip_val=5.0, enable_checkpointing=False,
        num_sanity_val_steps=0, inference_mode=False, callbacks=[DebuggerCallback(path), history],
        **_trainer_kwargs(path),
    )  # fmt: skip
    trainer.fit(
        AtomisticTask(model),
        DataLoader(train, batch_size=8, shuffle=True, collate_fn=_collate_atoms, generator=g),
        DataLoader(val, batch_size=40, collate_fn=_collate_atoms),
    )
    return history.losses


# ============================================================================= Lightning: BERT4Rec


def _watch_histories(
    g: torch.Generator, n_users: int, n_items: int = 200, n_genres: int = 10
) -> list[list[int]]:
    """Users' item histories (ids from 1): every item has a genre and a Zipf popularity, every
    user a Dirichlet taste over genres; a next item is one of the last item's three "sequels"
    with probability 0.45, else drawn by the user's taste and the items' popularity; 12 to 30
    items a user."""
    genre = torch.randint(0, n_genres, (n_items,), generator=g)
    popularity = 1.0 / (1 + torch.randperm(n_items, generator=g).float()) ** 0.8
    sequels = torch.stack(
        [torch.where(genre == genre[i])[0][torch.randint(0, int((genre == genre[i]).sum()), (3,), generator=g)]
         for i in range(n_items)]
    )  # fmt: skip
    taste = torch.distributions.Dirichlet(torch.full((n_genres,), 0.3)).sample((n_users,))
    weights = taste[:, genre] * popularity
    items = [torch.multinomial(weights, 1, generator=g)[:, 0]]
    for _ in range(29):
        sequel = sequels[items[-1], torch.randint(0, 3, (n_users,), generator=g)]
        fresh = torch.multinomial(weights, 1, generator=g)[:, 0]
        items.append(torch.where(torch.rand(n_users, generator=g) < 0.45, sequel, fresh))
    lengths = torch.randint(12, 31, (n_users,), generator=g)
    seqs = torch.stack(items, 1) + 1
    histories = [seqs[u, : lengths[u]].tolist() for u in range(n_users)]
    return histories


def _item2vec(histories: list[list[int]], n_items: int, dim: int, window: int = 3) -> torch.Tensor:
    """Item vectors by the SVD of the positive PMI of co-occurrences within `window` in the
    training histories (Levy and Goldberg's factorization view of item2vec): (n_items + 1, dim),
    row 0 (padding) zero."""
    counts = np.zeros((n_items + 1, n_items + 1))
    for h in histories:
        for i, a in enumerate(h):
            for b in h[max(0, i - window) : i]:
                counts[a, b] += 1
                counts[b, a] += 1
    total = counts.sum()
    row = counts.sum(1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log(counts * total / (row @ row.T))
    ppmi = np.where(np.isfinite(pmi), np.maximum(pmi, 0), 0.0)
    u, s, _ = np.linalg.svd(ppmi)
    vectors = u[:, :dim] * np.sqrt(s[:dim])
    vectors = vectors / (vectors[1:].std() + 1e-8) * 0.05
    vectors[0] = 0.0
    return torch.tensor(vectors, dtype=torch.float32)


def lit_bert4rec_cloze_bf16(
    path: str, max_epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """BERT4Rec (Sun et al. 2019) sequential recommendation as a `LightningModule`: the cloze task
    (20 % of a history's items replaced by a `[mask]` item, the cross-entropy at those positions
    over every item), leave-one-out splits (the last item for test, the one before for
    validation, the rest for training), histories truncated to their last 20 items, item
    embeddings of 64 initialized from item2vec vectors of the training histories
    (`nn.Embedding.from_pretrained(..., freeze=False)`) plus learned positions, a 2-layer
    bidirectional transformer (2 heads, GELU), the output tied to the item embeddings with a bias;
    AdamW 2e-3 (weight decay 0.01) with a linear warm-up over 10 % of the steps and a linear decay
    as a `LambdaLR` at `interval="step"` (`trainer.estimated_stepping_batches`),
    `precision="bf16-mixed"` on CPU, `val_check_interval=0.5` (two validations an epoch: the loss,
    NDCG@10 and HR@10 of the held-out item ranked among all items) and a `ModelCheckpoint` on
    `val_ndcg`."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint

    from mldbg.lightning import DebuggerCallback

    g = _seed(seed)
    n_items, max_len, dim, mask_prob = 200, 20, 64, 0.2
    mask_token = n_items + 1
    histories = _watch_histories(g, 1024, n_items)
    train_seqs = [h[:-2] for h in histories]

    class ClozeDataset(Dataset):
        def __len__(self) -> int:
            return len(train_seqs)

        def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
            seq = torch.tensor(train_seqs[i][-max_len:])
            masked = torch.rand(len(seq)) < mask_prob
            if not masked.any():
                masked[torch.randint(0, len(seq), (1,))] = True
            tokens = torch.where(masked, mask_token, seq)
            labels = torch.where(masked, seq, -100)
            pad = max_len - len(seq)
            return F.pad(tokens, (pad, 0)), F.pad(labels, (pad, 0), value=-100)

    def eval_batch(users: list[list[int]], target_index: int) -> TensorDataset:
        tokens, targets = [], []
        for h in users:
            seq = h[: len(h) + target_index][-(max_len - 1) :] + [mask_token]
            tokens.append(F.pad(torch.tensor(seq), (max_len - len(seq), 0)))
            targets.append(h[target_index])
        return TensorDataset(torch.stack(tokens), torch.tensor(targets))

    vectors = _item2vec(train_seqs, n_items, dim)
    vectors = torch.cat([vectors, 0.05 * torch.randn(1, dim, generator=g)])  # the [mask] item

    class BERT4Rec(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            if bug == "frozen_by_mistake":
                # bug: `freeze=False` left out: `from_pretrained` freezes the embedding by default
                self.item_emb = nn.Embedding.from_pretrained(vectors, padding_idx=0)
            else:
                self.item_emb = nn.Embedding.from_pretrained(vectors, freeze=False, padding_idx=0)
            self.pos_emb = nn.Embedding(max_len, dim)
            nn.init.trunc_normal_(self.pos_emb.weight, std=0.02)
            self.norm = nn.LayerNorm(dim)
            self.dropout = nn.Dropout(0.1)
            layer = nn.TransformerEncoderLayer(
                dim, 2, 4 * dim, dropout=0.1, activation="gelu", batch_first=True
            )
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.out = nn.Linear(dim, dim)
            self.out_bias = nn.Parameter(torch.zeros(n_items + 2))

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            h = self.item_emb(tokens) + self.pos_emb(torch.arange(tokens.size(1)))[None]
            h = self.encoder(self.dropout(self.norm(h)), src_key_padding_mask=tokens == 0)
            return F.gelu(self.out(h)) @ self.item_emb.weight.T + self.out_bias

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            tokens, labels = batch
            logits = self(tokens)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), labels.reshape(-1))
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            tokens, targets = batch
            scores = self(tokens)[:, -1, : n_items + 1].float()
            scores[:, 0] = -1e9
            self.log("val_loss", F.cross_entropy(scores, targets))
            rank = (scores > scores.gather(1, targets[:, None])).sum(1)
            hit = (rank < 10).float()
            self.log("val_ndcg", (hit / torch.log2(rank.float() + 2)).mean())
            self.log("val_hr", hit.mean())

        def on_validation_epoch_end(self) -> None:
            m = self.trainer.callback_metrics
            lr = self.lr_schedulers().get_last_lr()[0]
            print(f"step {self.global_step}: val_loss {float(m['val_loss']):.3f} "
                  f"NDCG@10 {float(m['val_ndcg']):.3f} HR@10 {float(m['val_hr']):.3f} lr {lr:.1e}")  # fmt: skip

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.AdamW(self.parameters(), lr=2e-3, weight_decay=0.01)
            total = self.trainer.estimated_stepping_batches
            warmup = int(0.1 * total)

            def lr_lambda(step: int) -> float:
                if step < warmup:
                    return (step + 1) / warmup
                return max(0.0, (total - step) / max(1, total - warmup))

            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    history = _lightning_history()
    checkpoint = ModelCheckpoint(dirpath=os.path.join(path, "checkpoints"), monitor="val_ndcg", mode="max")
    trainer = pl.Trainer(
        max_epochs=max_epochs, precision="bf16-mixed", val_check_interval=0.5, num_sanity_val_steps=0,
        callbacks=[DebuggerCallback(path), history, checkpoint], **_trainer_kwargs(path),
    )  # fmt: skip
    trainer.fit(
        BERT4Rec(),
        DataLoader(ClozeDataset(), batch_size=64, shuffle=True, generator=g),
        DataLoader(eval_batch(histories[:320], -2), batch_size=320),
    )
    print(f"best val NDCG@10 {float(checkpoint.best_model_score):.3f}")
    shutil.rmtree(os.path.join(path, "checkpoints"), ignore_errors=True)
    return history.losses


# ============================================================================= Lightning: protein secondary structure


_AMINO = "ARNDCQEGHILKMFPSTWYV"
_PROPENSITY = {  # Chou-Fasman-like preferences: helix, strand, coil (the rest 1.0)
    "H": {"A": 1.4, "E": 1.5, "L": 1.2, "M": 1.4, "Q": 1.1, "K": 1.1, "R": 1.0, "G": 0.5, "P": 0.4, "S": 0.8},
    "E": {"V": 1.7, "I": 1.6, "Y": 1.5, "F": 1.4, "W": 1.4, "T": 1.2, "C": 1.2, "G": 0.7, "P": 0.5, "D": 0.5},
    "C": {"G": 1.6, "P": 1.5, "N": 1.5, "D": 1.4, "S": 1.3, "T": 1.0, "A": 0.7, "V": 0.6, "I": 0.6, "L": 0.7},
}


def _protein_chains(
    g: torch.Generator, n: int, min_len: int = 30, max_len: int = 60
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`n` chains of 30 to 60 residues with their 3-state secondary structure (0 helix, 1
    strand, 2 coil): coil segments of 2 to 7 residues alternate with helices of 6 to 14 or
    strands of 3 to 8; residues drawn from state-dependent, Chou-Fasman-like amino-acid
    propensities sharpened so the state shows; the features are CB513's 20 one-hot columns plus
    a 20-column profile (the residue's state distribution mixed with Dirichlet noise, as a
    PSSM summarizes a family's alignment)."""
    emissions = torch.ones(3, 20)
    for s, state in enumerate("HEC"):
        for aa, w in _PROPENSITY[state].items():
            emissions[s, _AMINO.index(aa)] = w
    emissions = emissions**1.5
    emissions = emissions / emissions.sum(1, keepdim=True)
    labels = []
    for _ in range(n):
        length = int(torch.randint(min_len, max_len + 1, (1,), generator=g))
        states: list[int] = []
        while len(states) < length:
            states += [2] * int(torch.randint(2, 8, (1,), generator=g))
            if torch.rand(1, generator=g) < 0.55:
                states += [0] * int(torch.randint(6, 15, (1,), generator=g))
            else:
                states += [1] * int(torch.randint(3, 9, (1,), generator=g))
        labels.append(torch.tensor(states[:length]))
    y = torch.cat(labels)
    residues = torch.multinomial(emissions[y], 1, generator=g)[:, 0]
    noise = torch.distributions.Dirichlet(torch.full((20,), 0.5)).sample((len(y),))
    features = torch.cat([F.one_hot(residues, 20).float(), 0.25 * emissions[y] + 0.75 * noise], 1)
    chains = list(zip(features.split([len(t) for t in labels]), labels, strict=True))
    return chains


def _pad_chains(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    x = nn.utils.rnn.pad_sequence([b[0] for b in batch], batch_first=True)
    y = nn.utils.rnn.pad_sequence([b[1] for b in batch], batch_first=True, padding_value=-100)
    return x, y


def lit_protein_secondary_structure_q3(
    path: str, max_epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Three-state protein secondary-structure prediction as CB513 / NetSurfP-style models are
    trained in Lightning: per-residue features (one-hot plus a profile), a multi-scale 1-D CNN
    (kernels 3, 7 and 11, 32 channels each, ReLU, dropout) into a bidirectional GRU (64 a
    direction) and a per-residue linear layer, `F.cross_entropy(..., ignore_index=-100)` over
    padded batches of 32 chains, Adam 2e-3, `ReduceLROnPlateau` (factor 0.5, patience 1) on
    `val_loss` through the `configure_optimizers` dict, `gradient_clip_val=1.0`,
    `EarlyStopping(monitor="val_loss", patience=3)` and a `ModelCheckpoint` on it, the Q3
    accuracy in `validation_step`, then `trainer.test(ckpt_path="best")`."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from mldbg.lightning import DebuggerCallback

    g = _seed(seed)
    chains = _protein_chains(g, 896)
    train, val, test = chains[:640], chains[640:768], chains[768:]

    class SecondaryStructure(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.convs = nn.ModuleList([nn.Conv1d(40, 32, k, padding=k // 2) for k in (3, 7, 11)])
            self.dropout = nn.Dropout(0.3)
            self.gru = nn.GRU(96, 64, batch_first=True, bidirectional=True)
            self.head = nn.Linear(128, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.cat([F.relu(conv(x.transpose(1, 2))) for conv in self.convs], 1).transpose(1, 2)
            h, _ = self.gru(self.dropout(h))
            logits = self.head(self.dropout(h))
            if bug == "softmax_before_ce":
                # bug: probabilities "so that predict_step and the Q3 metric read them", fed to F.cross_entropy
                return F.softmax(logits, dim=-1)
            return logits

        def step(self, batch: Any, stage: str) -> torch.Tensor:
            x, y = batch
            out = self(x)
            loss = F.cross_entropy(out.transpose(1, 2), y, ignore_index=-100)
            valid = y != -100
            q3 = (out.argmax(-1)[valid] == y[valid]).float().mean()
            self.log(f"{stage}_loss", loss, batch_size=len(x))
            self.log(f"{stage}_q3", q3, batch_size=len(x))
            return loss

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self.step(batch, "train")

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self.step(batch, "val")

        def test_step(self, batch: Any, batch_idx: int) -> None:
            self.step(batch, "test")

        def on_validation_epoch_end(self) -> None:
            m = self.trainer.callback_metrics
            print(f"epoch {self.current_epoch}: val_loss {float(m['val_loss']):.4f} Q3 {float(m['val_q3']):.3f} "
                  f"lr {self.optimizers().param_groups[0]['lr']:.1e}")  # fmt: skip

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.Adam(self.parameters(), lr=2e-3)
            scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=1)
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "monitor": "val_loss"}}

    history = _lightning_history()
    checkpoint = ModelCheckpoint(dirpath=os.path.join(path, "checkpoints"), monitor="val_loss", save_top_k=1)
    trainer = pl.Trainer(
        max_epochs=max_epochs, gradient_clip_val=1.0, num_sanity_val_steps=0,
        callbacks=[DebuggerCallback(path), history, EarlyStopping(monitor="val_loss", patience=3), checkpoint],
        **_trainer_kwargs(path),
    )  # fmt: skip
    model = SecondaryStructure()
    trainer.fit(
        model,
        DataLoader(train, batch_size=32, shuffle=True, collate_fn=_pad_chains, generator=g),
        DataLoader(val, batch_size=128, collate_fn=_pad_chains),
    )
    result = trainer.test(model, DataLoader(test, batch_size=128, collate_fn=_pad_chains), ckpt_path="best",
                          verbose=False)  # fmt: skip
    print(f"test Q3 {result[0]['test_q3']:.3f} (loss {result[0]['test_loss']:.4f})")
    shutil.rmtree(os.path.join(path, "checkpoints"), ignore_errors=True)
    return history.losses


# ============================================================================= Lightning: GraphSAGE link prediction


def _community_graph(
    g: torch.Generator, n: int = 800, blocks: int = 8, features: int = 32
) -> tuple[torch.Tensor, torch.Tensor]:
    """An undirected stochastic block model (about 6 links inside a node's block and 1 outside)
    with node features that only hint at the block (a noisy block centroid in 32 dimensions,
    signal to noise about 1 : 2): returns the edges (2, E) each way once and the features."""
    block = torch.randint(0, blocks, (n,), generator=g)
    same = block[:, None] == block[None, :]
    prob = torch.where(same, 6.0 / (n / blocks), 1.0 / (n - n / blocks))
    upper = torch.triu(torch.rand(n, n, generator=g) < prob, 1)
    edges = upper.nonzero().T
    centroids = torch.randn(blocks, features, generator=g)
    x = centroids[block] + 2.0 * torch.randn(n, features, generator=g)
    return edges, x


class _SAGEConv(nn.Module):
    """PyG's `SAGEConv` with the mean aggregator: `lin_l(mean of the neighbours) + lin_r(x)`."""

    def __init__(self, in_channels: int, out_channels: int, dead_init: bool = False) -> None:
        super().__init__()
        self.lin_l = nn.Linear(in_channels, out_channels)
        self.lin_r = nn.Linear(in_channels, out_channels, bias=False)
        for lin in (self.lin_l, self.lin_r):
            nn.init.xavier_uniform_(lin.weight)
        if dead_init:
            # bug: `reset_parameters` copied from a sparse-coding layer: the bias starts at -1
            nn.init.constant_(self.lin_l.bias, -1.0)
        else:
            nn.init.zeros_(self.lin_l.bias)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        src, dst = edge_index
        agg = torch.zeros_like(x).index_add_(0, dst, x[src])
        deg = torch.zeros(x.size(0)).index_add_(0, dst, torch.ones(dst.size(0))).clamp(min=1)
        return self.lin_l(agg / deg[:, None]) + self.lin_r(x)


def lit_graphsage_link_prediction(
    path: str, max_epochs: int = 30, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Link prediction in the way of PyG's `examples/link_pred.py` and its Lightning ports: the
    graph's edges split by `RandomLinkSplit`'s rule (85 % for message passing and supervision, 5 %
    validation, 10 % test, each with as many sampled non-edges), a 3-layer GraphSAGE (mean
    aggregation, 64 channels, ReLU, dropout 0.2 between layers) over the training edges made
    undirected, the dot product of the two end nodes' embeddings as the logit, a fresh uniform
    negative sample per batch of 512 supervision edges, `BCEWithLogitsLoss`, Adam 5e-3 with
    `CosineAnnealingLR` over the epochs, `check_val_every_n_epoch=5` (the validation AUC and
    loss), then the test AUC."""
    import lightning.pytorch as pl

    from mldbg.lightning import DebuggerCallback

    g = _seed(seed)
    n = 800
    edges, x = _community_graph(g, n)
    perm = torch.randperm(edges.size(1), generator=g)
    n_val, n_test = int(0.05 * len(perm)), int(0.1 * len(perm))
    val_pos, test_pos = edges[:, perm[:n_val]], edges[:, perm[n_val : n_val + n_test]]
    train_pos = edges[:, perm[n_val + n_test :]]
    message_edges = torch.cat([train_pos, train_pos.flip(0)], 1)
    x = (x - x.mean(0)) / x.std(0)

    def negatives(count: int, gen: torch.Generator | None = None) -> torch.Tensor:
        return torch.randint(0, n, (2, count), generator=gen)

    def auc(pos: torch.Tensor, neg: torch.Tensor) -> float:
        return (pos[:, None] > neg[None, :]).float().mean().item()

    class LinkPredictor(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            dead = bug == "dead_relu_init"
            self.convs = nn.ModuleList(
                [_SAGEConv(32, 64, dead), _SAGEConv(64, 64, dead), _SAGEConv(64, 64, dead)]
            )
            self.criterion = nn.BCEWithLogitsLoss()

        def encode(self) -> torch.Tensor:
            h = x
            for i, conv in enumerate(self.convs):
                h = conv(h, message_edges)
                if i < len(self.convs) - 1:
                    h = F.dropout(F.relu(h), p=0.2, training=self.training)
            return h

        @staticmethod
        def decode(z: torch.Tensor, edge_label_index: torch.Tensor) -> torch.Tensor:
            return (z[edge_label_index[0]] * z[edge_label_index[1]]).sum(-1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            (pos,) = batch
            pos = pos.T
            edge_label_index = torch.cat([pos, negatives(pos.size(1))], 1)
            edge_label = torch.cat([torch.ones(pos.size(1)), torch.zeros(pos.size(1))])
            loss = self.criterion(self.decode(self.encode(), edge_label_index), edge_label)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            pos, neg = batch[0].T, batch[1].T
            z = self.encode()
            out_pos, out_neg = self.decode(z, pos), self.decode(z, neg)
            edge_label = torch.cat([torch.ones(len(out_pos)), torch.zeros(len(out_neg))])
            loss = self.criterion(torch.cat([out_pos, out_neg]), edge_label)
            self.log("val_loss", loss)
            self.log("val_auc", auc(out_pos, out_neg))

        def on_validation_epoch_end(self) -> None:
            m = self.trainer.callback_metrics
            print(f"epoch {self.current_epoch}: train_loss {float(m['train_loss']):.4f} val_loss "
                  f"{float(m['val_loss']):.4f} val AUC {float(m['val_auc']):.3f}")  # fmt: skip

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.Adam(self.parameters(), lr=5e-3)
            return [optimizer], [torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max_epochs)]

    model = LinkPredictor()
    history = _lightning_history()
    trainer = pl.Trainer(
        max_epochs=max_epochs, check_val_every_n_epoch=5, enable_checkpointing=False, num_sanity_val_steps=0,
        callbacks=[DebuggerCallback(path), history], **_trainer_kwargs(path),
    )  # fmt: skip
    val_set = TensorDataset(val_pos.T, negatives(val_pos.size(1), g).T)
    trainer.fit(
        model,
        DataLoader(TensorDataset(train_pos.T), batch_size=512, shuffle=True, generator=g),
        DataLoader(val_set, batch_size=len(val_set)),
    )
    model.eval()
    with torch.no_grad():
        z = model.encode()
        test_auc = auc(model.decode(z, test_pos), model.decode(z, negatives(test_pos.size(1), g)))
    print(f"test AUC {test_auc:.3f}")
    return history.losses


# ============================================================================= Hugging Face Trainer: shared pieces


class _Rows(Dataset):
    """A list of feature dicts, the way a `datasets.Dataset` after `.map(preprocess)` hands them."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.rows[i]


def _hf_args(path: str, args_cls: Any = None, **kw: Any) -> Any:
    """`TrainingArguments` as these scripts set them on a CPU: a loss logged every step, no
    checkpoints, no reporting integrations, the rest from the script."""
    from transformers import TrainingArguments

    return (args_cls or TrainingArguments)(
        output_dir=os.path.join(path, "trainer"), logging_steps=1, report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, save_strategy="no", **kw,
    )  # fmt: skip


def _hf_run(trainer: Any) -> list[float]:
    """`trainer.train()` without the console printer; the per-step training losses of the log
    history, the evaluation losses printed."""
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(trainer.args.output_dir, ignore_errors=True)
    print("eval losses", [round(e["eval_loss"], 4) for e in trainer.state.log_history if "eval_loss" in e])
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


# ============================================================================= HF Trainer: GPT-2 double heads (persona chat)


def _persona_dialogues(
    g: torch.Generator, n: int, num_candidates: int = 4
) -> tuple[list[dict[str, Any]], int]:
    """PERSONA-CHAT-like examples in word ids: a persona of two facts ("i like <noun> ."), the
    partner's last utterance (a question about a noun, or small talk), the gold reply that
    answers from the persona, and `num_candidates - 1` distractor replies of other dialogues, the
    gold one last as in the dataset. Returns the examples and the vocabulary size."""
    topics = [[f"noun{t}_{i}" for i in range(6)] for t in range(8)]
    small_talk = [["how", "are", "you", "?"], ["what", "do", "you", "do", "?"], ["hi", "there", "!"]]
    words = ["i", "like", "have", "a", "yes", "no", "too", "prefer", "do", "you", ".", "?", "!", "how",
             "are", "what", "hi", "there", "fine", "thanks", "love", "my", "is", "great", "work", "with"]  # fmt: skip
    words += [w for t in topics for w in t]
    vocab = {w: i for i, w in enumerate(["<pad>", "<bos>", "<eos>", "<speaker1>", "<speaker2>", *words])}

    def pick(seq: list[Any]) -> Any:
        return seq[int(torch.randint(0, len(seq), (1,), generator=g))]

    dialogues = []
    for _ in range(n):
        t1, t2 = torch.randperm(len(topics), generator=g)[:2].tolist()
        liked, owned = pick(topics[t1]), pick(topics[t2])
        persona = [["i", "like", liked, "."], ["i", "have", "a", owned, "."]]
        r = float(torch.rand(1, generator=g))
        if r < 0.4:
            asked = pick(topics[t1])
            history = ["do", "you", "like", asked, "?"]
            reply = (
                ["yes", "i", "love", liked, "too", "."]
                if asked != liked
                else ["yes", "i", "like", liked, "!"]
            )
        elif r < 0.75:
            t3 = pick([t for t in range(len(topics)) if t not in (t1, t2)])
            history = ["do", "you", "like", pick(topics[t3]), "?"]
            reply = ["no", "i", "prefer", liked, "."]
        else:
            history = pick(small_talk)
            replies = {
                "how": ["fine", "thanks", "i", "work", "with", "my", owned, "."],
                "what": ["i", "work", "with", "my", owned, "."],
                "hi": ["hi", "!", "my", owned, "is", "great", "."],
            }
            reply = replies[history[0]]
        dialogues.append((persona, history, reply))
    examples = []
    for i, (persona, history, reply) in enumerate(dialogues):
        others = [
            dialogues[int(j)][2]
            for j in torch.randint(0, n, (num_candidates - 1,), generator=g)
            if int(j) != i
        ]
        while len(others) < num_candidates - 1:
            others.append(dialogues[(i + 1) % n][2])
        candidates = [*others, reply]
        input_ids, token_type_ids, labels = [], [], []
        for c, candidate in enumerate(candidates):
            bos = [vocab["<bos>"]] + [vocab[w] for fact in persona for w in fact]
            s1 = [vocab["<speaker1>"]] + [vocab[w] for w in history]
            s2 = [vocab["<speaker2>"]] + [vocab[w] for w in candidate] + [vocab["<eos>"]]
            input_ids.append(bos + s1 + s2)
            speakers = [vocab["<speaker2>"], vocab["<speaker1>"], vocab["<speaker2>"]]
            token_type_ids.append(
                [speakers[0]] * len(bos) + [speakers[1]] * len(s1) + [speakers[2]] * len(s2)
            )
            gold = c == num_candidates - 1
            labels.append([-100] * (len(bos) + len(s1) + 1) + (s2[1:] if gold else [-100] * (len(s2) - 1)))
        mc_token_ids = [len(ids) - 1 for ids in input_ids]
        examples.append({"input_ids": input_ids, "token_type_ids": token_type_ids, "labels": labels,
                         "mc_token_ids": mc_token_ids, "mc_labels": num_candidates - 1})  # fmt: skip
    return examples, len(vocab)


def hf_gpt2_double_heads_persona(path: str, seed: int = 0) -> list[float]:
    """huggingface/transfer-learning-conv-ai's `train.py` on the `Trainer`: a tiny random
    `GPT2DoubleHeadsModel` (2 layers of 64) fed each dialogue as four candidate sequences
    (persona, history, reply; speaker tokens as `token_type_ids`), the language-modeling labels on
    the gold reply only, `mc_token_ids` at each candidate's last token, a `Trainer` subclass whose
    `compute_loss` returns `lm_coef * lm_loss + mc_coef * mc_loss` (2.0 and 1.0, the script's
    defaults; `loss_is_scaled_for_ga = False` as the `Trainer`'s docstring asks of such a
    subclass), a collator padding every candidate of a batch to the longest (`<pad>`, labels
    -100), `gradient_accumulation_steps=2`, `max_grad_norm=1.0`, AdamW 2e-3 (6.25e-5 for the
    pretrained model) with a linear decay after 5 % warm-up, batches of 16 dialogues, 3 epochs
    with an evaluation each; the hits@1 of the multiple-choice head on held-out dialogues."""
    from transformers import GPT2Config, GPT2DoubleHeadsModel, Trainer

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    examples, vocab_size = _persona_dialogues(g, 896)
    lm_coef, mc_coef = 2.0, 1.0

    def collate(batch: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        longest = max(len(ids) for ex in batch for ids in ex["input_ids"])

        def pad(rows: list[list[int]], value: int) -> list[list[int]]:
            return [r + [value] * (longest - len(r)) for r in rows]

        return {
            "input_ids": torch.tensor([pad(ex["input_ids"], 0) for ex in batch]),
            "token_type_ids": torch.tensor([pad(ex["token_type_ids"], 0) for ex in batch]),
            "labels": torch.tensor([pad(ex["labels"], -100) for ex in batch]),
            "mc_token_ids": torch.tensor([ex["mc_token_ids"] for ex in batch]),
            "mc_labels": torch.tensor([ex["mc_labels"] for ex in batch]),
        }

    class DoubleHeadsTrainer(Trainer):
        loss_is_scaled_for_ga = False  # a per-batch mean: the Trainer divides it by the accumulation steps

        def compute_loss(
            self,
            model: Any,
            inputs: dict[str, Any],
            return_outputs: bool = False,
            num_items_in_batch: Any = None,
        ) -> Any:
            outputs = model(**inputs)
            loss = lm_coef * outputs.loss + mc_coef * outputs.mc_loss
            return (loss, outputs) if return_outputs else loss

    config = GPT2Config(
        vocab_size=vocab_size, n_positions=64, n_embd=64, n_layer=2, n_head=2, pad_token_id=0, bos_token_id=1,
        eos_token_id=2,
    )  # fmt: skip
    model = GPT2DoubleHeadsModel(config)
    args = _hf_args(
        path, seed=seed, eval_strategy="epoch", learning_rate=2e-3, lr_scheduler_type="linear", warmup_steps=0.05,
        per_device_train_batch_size=16, per_device_eval_batch_size=32, gradient_accumulation_steps=2,
        max_grad_norm=1.0, num_train_epochs=3,
    )  # fmt: skip
    trainer = DoubleHeadsTrainer(
        model=model, args=args, train_dataset=_Rows(examples[:768]), eval_dataset=_Rows(examples[768:]),
        data_collator=collate, callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    losses = _hf_run(trainer)
    model.eval()
    with torch.no_grad():
        batch = collate(examples[768:])
        out = model(**{k: v for k, v in batch.items() if k not in ("labels", "mc_labels")})
        hits = (out.mc_logits.argmax(1) == batch["mc_labels"]).float().mean().item()
    print(f"hits@1 {hits:.3f} (chance 0.25)")
    return losses


# ============================================================================= HF Trainer: SimMIM masked image modeling (ViT)


def hf_vit_simmim_masked_image_modeling(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """SimMIM pre-training as transformers' `run_mim.py` runs it: a tiny random
    `ViTForMaskedImageModeling` (32x32 images, patches of 4, `encoder_stride` 4, 2 layers of 64,
    a learned mask token, a 1x1-convolution + pixel-shuffle decoder, the L1 loss on the masked
    pixels), the script's `MaskGenerator` (random masks of 8x8 patches, ratio 0.6, spread to the
    model's 4x4 patches), its transforms written by hand on the uint8 arrays (random resized
    crop with scale (0.67, 1) and ratio (3/4, 4/3), horizontal flip, scaling to [0, 1],
    `Normalize` with the image processor's mean and std 0.5), `remove_unused_columns=False` and
    `label_names=["bool_masked_pos"]`, AdamW 2e-3 with weight decay 0.05, a cosine schedule after
    10 % warm-up, `eval_strategy="steps"` every 20 steps, batches of 32, 4 epochs."""
    from transformers import Trainer, ViTConfig, ViTForMaskedImageModeling

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    photos = _photos(g, 704, size=40).permute(0, 3, 1, 2)  # uint8 (n, 3, 40, 40)
    image_size, patch_size, mask_patch_size, mask_ratio = 32, 4, 8, 0.6
    mean = torch.tensor([0.5, 0.5, 0.5])[:, None, None]
    std = torch.tensor([0.5, 0.5, 0.5])[:, None, None]
    aug = torch.Generator().manual_seed(seed + 2811)

    def transform(img: torch.Tensor, train: bool) -> torch.Tensor:
        if train:  # RandomResizedCrop(32, scale=(0.67, 1.0), ratio=(3/4, 4/3)) and RandomHorizontalFlip
            area = img.shape[1] * img.shape[2] * (0.67 + 0.33 * float(torch.rand(1, generator=aug)))
            ratio = math.exp(math.log(3 / 4) + math.log(16 / 9) * float(torch.rand(1, generator=aug)))
            h = min(img.shape[1], round(math.sqrt(area / ratio)))
            w = min(img.shape[2], round(math.sqrt(area * ratio)))
            top = int(torch.randint(0, img.shape[1] - h + 1, (1,), generator=aug))
            left = int(torch.randint(0, img.shape[2] - w + 1, (1,), generator=aug))
            img = img[:, top : top + h, left : left + w]
            if torch.rand(1, generator=aug) < 0.5:
                img = img.flip(2)
        else:
            img = img[:, 4:36, 4:36]
        x = img.float()
        if bug != "inputs_x255":  # bug: `ToTensor`'s division by 255 lost when the transforms were rewritten
            x = x / 255.0
        x = F.interpolate(x[None], size=(image_size, image_size), mode="bilinear", align_corners=False)[0]
        return (x - mean) / std

    class MaskGenerator:
        """run_mim.py's `MaskGenerator`: a random `mask_ratio` of the mask-patch grid, each mask
        patch spread over the model patches it covers."""

        def __init__(self) -> None:
            self.rand_size = image_size // mask_patch_size
            self.scale = mask_patch_size // patch_size
            self.token_count = self.rand_size**2
            self.mask_count = math.ceil(self.token_count * mask_ratio)

        def __call__(self) -> torch.Tensor:
            mask_idx = torch.randperm(self.token_count, generator=aug)[: self.mask_count]
            mask = torch.zeros(self.token_count, dtype=torch.long)
            mask[mask_idx] = 1
            mask = mask.reshape(self.rand_size, self.rand_size)
            return mask.repeat_interleave(self.scale, 0).repeat_interleave(self.scale, 1).flatten()

    mask_generator = MaskGenerator()

    class MIMDataset(Dataset):
        def __init__(self, images: torch.Tensor, train: bool) -> None:
            self.images, self.train = images, train

        def __len__(self) -> int:
            return len(self.images)

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            return {"pixel_values": transform(self.images[i], self.train), "mask": mask_generator()}

    def collate_fn(examples: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        return {
            "pixel_values": torch.stack([e["pixel_values"] for e in examples]),
            "bool_masked_pos": torch.stack([e["mask"] for e in examples]),
        }

    config = ViTConfig(
        image_size=image_size, patch_size=patch_size, encoder_stride=patch_size, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    model = ViTForMaskedImageModeling(config)
    args = _hf_args(
        path, seed=seed, eval_strategy="steps", eval_steps=20, learning_rate=2e-3, weight_decay=0.05,
        lr_scheduler_type="cosine", warmup_steps=0.1, per_device_train_batch_size=32, per_device_eval_batch_size=64,
        num_train_epochs=4, remove_unused_columns=False, label_names=["bool_masked_pos"],
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args, train_dataset=MIMDataset(photos[:640], True),
        eval_dataset=MIMDataset(photos[640:], False), data_collator=collate_fn, callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    return _hf_run(trainer)


# ============================================================================= HF Trainer: speaker identification (Wav2Vec2)


def _voices(
    rng: np.random.Generator, n_speakers: int, per_speaker: int, sr: int = 8000
) -> tuple[list[np.ndarray], list[int]]:
    """Vowel strings spoken by synthetic voices: each speaker a mean pitch (90 to 240 Hz), a
    vocal-tract length factor scaling the formants (0.85 to 1.2), a spectral tilt and a
    breathiness; an utterance 3 to 6 vowels (five vowels' F1 / F2 / F3) of 70 to 150 ms with a
    drifting, jittered pitch, synthesized as harmonics shaped by the formant resonances plus
    noise, 8 kHz. Returns the waveforms and the speaker of each."""
    formants = np.array([[730, 1090, 2440], [530, 1840, 2480], [270, 2290, 3010], [570, 840, 2410],
                         [300, 870, 2240]], dtype=float)  # fmt: skip
    speakers = [
        (rng.uniform(90, 240), rng.uniform(0.85, 1.2), rng.uniform(0.75, 0.95), rng.uniform(0.01, 0.08))
        for _ in range(n_speakers)
    ]
    waves, labels = [], []
    for s, (f0_mean, tract, tilt, breath) in enumerate(speakers):
        for _ in range(per_speaker):
            segments = [
                (rng.integers(0, 5), int(sr * rng.uniform(0.07, 0.15))) for _ in range(rng.integers(3, 7))
            ]
            n = sum(length for _, length in segments)
            f_track = np.concatenate(
                [np.repeat(formants[v][None] * tract, length, 0) for v, length in segments]
            )
            f_track = np.apply_along_axis(lambda c: np.convolve(c, np.ones(80) / 80, mode="same"), 0, f_track)
            f0 = f0_mean * (
                1 + 0.08 * np.sin(np.linspace(0, rng.uniform(1, 4), n)) + 0.01 * rng.standard_normal(n)
            )
            phase = 2 * np.pi * np.cumsum(f0) / sr
            harmonics = np.arange(1, int(3800 / f0_mean) + 1)[:, None]
            freq = harmonics * f0[None]
            gain = sum(1 / (1 + ((freq - f_track[None, :, k]) / (60 + 40 * k)) ** 2) for k in range(3))
            wave = (tilt**harmonics * gain * np.sin(harmonics * phase[None])).sum(0)
            wave = wave / (np.abs(wave).max() + 1e-8) + breath * rng.standard_normal(n)
            waves.append((wave * np.hanning(n) ** 0.1).astype(np.float32))
            labels.append(s)
    return waves, labels


def hf_wav2vec2_speaker_identification(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Speaker identification (SUPERB's SID task) with a tiny random
    `Wav2Vec2ForSequenceClassification` through the `Trainer`, the way the audio-classification
    example prepares a speaker corpus: 288 clips of 8 speakers listed from the audio folder
    (sorted file names), their speakers looked up in the corpus' metadata table, each
    clip run through `Wav2Vec2FeatureExtractor` (zero mean and unit variance, truncated at 0.6 s)
    in the `map` step, a collator padding a batch with `feature_extractor.pad` (and its attention
    mask); the model: a 4-layer convolutional feature encoder with layer norm (stride 160 at 8
    kHz), 2 pre-norm transformer layers of 64 with SpecAugment's time masks, a projection to 64,
    the mean over the unpadded frames and a linear layer to 8 speakers, the cross-entropy;
    AdamW 2e-3, a linear schedule after 10 % warm-up, batches of 16, 6 epochs with an
    evaluation each and the accuracy on held-out clips by `compute_metrics`."""
    from transformers import (
        Trainer,
        Wav2Vec2Config,
        Wav2Vec2FeatureExtractor,
        Wav2Vec2ForSequenceClassification,
    )

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    rng = np.random.default_rng(seed + 2812)
    n_speakers, per_speaker, sr = 8, 36, 8000
    waves, speakers = _voices(rng, n_speakers, per_speaker, sr)
    names = [f"{int(torch.randint(0, 16**8, (1,), generator=g)):08x}.wav" for _ in waves]
    audio_folder = dict(zip(names, waves, strict=True))
    metadata = list(zip(names, speakers, strict=True))  # metadata.csv: file name, speaker, in recording order
    files = sorted(audio_folder)
    if bug == "shuffled_labels":
        # bug: the metadata's speaker column taken as it is, in recording order, for clips listed by file name
        labels = [speaker for _, speaker in metadata]
    else:
        speaker_of = dict(metadata)
        labels = [speaker_of[f] for f in files]
    feature_extractor = Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=sr, padding_value=0.0, do_normalize=True, return_attention_mask=True
    )
    rows = []
    for f, label in zip(files, labels, strict=True):
        inputs = feature_extractor(
            audio_folder[f], sampling_rate=sr, max_length=int(0.6 * sr), truncation=True
        )
        rows.append({"input_values": inputs["input_values"][0], "label": label})
    order = torch.randperm(len(rows), generator=g).tolist()
    train, held_out = [rows[i] for i in order[:240]], [rows[i] for i in order[240:]]

    def collate(features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch = feature_extractor.pad(
            [{"input_values": f["input_values"]} for f in features], padding=True, return_tensors="pt"
        )
        batch["labels"] = torch.tensor([f["label"] for f in features])
        return batch

    def compute_metrics(eval_pred: Any) -> dict[str, float]:
        logits = (
            eval_pred.predictions[0] if isinstance(eval_pred.predictions, tuple) else eval_pred.predictions
        )
        return {"accuracy": float((np.argmax(logits, -1) == eval_pred.label_ids).mean())}

    config = Wav2Vec2Config(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128, conv_dim=(32, 32, 32, 32),
        conv_stride=(5, 4, 4, 2), conv_kernel=(10, 8, 8, 4), feat_extract_norm="layer", do_stable_layer_norm=True,
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, classifier_proj_size=64, num_labels=n_speakers,
        mask_time_prob=0.05, mask_time_length=5,
    )  # fmt: skip
    model = Wav2Vec2ForSequenceClassification(config)
    args = _hf_args(
        path, seed=seed, eval_strategy="epoch", learning_rate=2e-3, lr_scheduler_type="linear", warmup_steps=0.1,
        per_device_train_batch_size=16, per_device_eval_batch_size=48, num_train_epochs=6,
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args, train_dataset=_Rows(train), eval_dataset=_Rows(held_out), data_collator=collate,
        compute_metrics=compute_metrics, callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    losses = _hf_run(trainer)
    print(
        "eval accuracy",
        [round(e["eval_accuracy"], 3) for e in trainer.state.log_history if "eval_accuracy" in e],
    )
    return losses


# ============================================================================= HF Trainer: LayoutLM key information extraction


_RECEIPT_LABELS = ["O", "B-COMPANY", "I-COMPANY", "B-ADDRESS", "I-ADDRESS", "B-DATE", "B-TOTAL"]


def _receipts(g: torch.Generator, n: int) -> tuple[list[dict[str, list[Any]]], int]:
    """SROIE-like scanned receipts as OCR gives them, words in reading order with their boxes
    on LayoutLM's 0-1000 page scale: the company name (1 to 3 words, centred at the top), two
    address lines, a date line (`date : 12/03/19`-like tokens, left or right), 2 to 6 item lines
    (name words on the left, quantity and price on the right), then subtotal, tax, total, cash
    and change lines, each a keyword on the left and an amount on the right; the label of the
    amount on the total line is `B-TOTAL`, the other amounts are `O`. Page offsets, widths and
    line spacing vary. Returns the receipts (words as ids, boxes, labels) and the vocabulary
    size (ids 0 to 2: pad, CLS, SEP)."""
    words: dict[str, int] = {"[PAD]": 0, "[CLS]": 1, "[SEP]": 2}

    def wid(w: str) -> int:
        return words.setdefault(w, len(words))

    names = [f"name{i}" for i in range(40)]
    suffixes = ["mart", "cafe", "trading", "enterprise", "sdn", "bhd", "store", "restaurant"]
    streets = ["jalan", "lot", "no", "taman", "street", "road", "block", "level"]
    cities = [f"city{i}" for i in range(12)]
    items = [f"item{i}" for i in range(60)]
    amounts = [f"{i}.{j}0" for i in range(1, 60) for j in (0, 5)]
    dates = [
        f"{d:02d}/{m:02d}/{y}" for d in (1, 7, 12, 19, 25, 28) for m in (1, 3, 6, 9, 11) for y in (17, 18, 19)
    ]

    def pick(seq: list[str]) -> str:
        return seq[int(torch.randint(0, len(seq), (1,), generator=g))]

    receipts = []
    for _ in range(n):
        left = int(torch.randint(40, 160, (1,), generator=g))
        right = int(torch.randint(760, 960, (1,), generator=g))
        spacing = int(torch.randint(22, 36, (1,), generator=g))
        y = int(torch.randint(20, 60, (1,), generator=g))
        tokens: list[str] = []
        boxes: list[list[int]] = []
        labels: list[str] = []

        def line(ws: list[str], tags: list[str], x: int, page: tuple[list[Any], ...] = (tokens, boxes, labels),
                 height: int = spacing) -> None:  # fmt: skip
            nonlocal y
            for w, tag in zip(ws, tags, strict=True):
                width = 12 * len(w) + int(torch.randint(0, 10, (1,), generator=g))
                page[0].append(w)
                page[1].append([x, y, min(1000, x + width), y + height - 6])
                page[2].append(tag)
                x = min(990, x + width + 10)
            y += height

        company = [pick(names) for _ in range(int(torch.randint(0, 2, (1,), generator=g)))] + [
            pick(names),
            pick(suffixes),
        ]
        line(
            company,
            ["B-COMPANY"] + ["I-COMPANY"] * (len(company) - 1),
            (left + right) // 2 - 40 * len(company),
        )
        address = [
            pick(streets),
            str(int(torch.randint(1, 99, (1,), generator=g))),
            pick(streets),
            pick(names),
        ]
        line(address, ["B-ADDRESS"] + ["I-ADDRESS"] * 3, left)
        line(
            [pick(cities), str(int(torch.randint(10000, 99999, (1,), generator=g)) // 1000)],
            ["I-ADDRESS"] * 2,
            left,
        )
        y += spacing // 2
        date_x = left if torch.rand(1, generator=g) < 0.6 else right - 220
        line(["date", ":", pick(dates), "time", pick(["10:21", "13:05", "18:47", "09:12"])],
             ["O", "O", "B-DATE", "O", "O"], date_x)  # fmt: skip
        for _ in range(int(torch.randint(2, 7, (1,), generator=g))):
            name = [pick(items) for _ in range(int(torch.randint(1, 3, (1,), generator=g)))]
            line(name, ["O"] * len(name), left)
            y -= spacing
            line([str(int(torch.randint(1, 4, (1,), generator=g))), pick(amounts)], ["O", "O"], right - 160)
        y += spacing // 2
        for key in ["subtotal", "tax", "total", "cash", "change"]:
            if key in ("tax", "cash") and torch.rand(1, generator=g) < 0.3:
                continue
            line([key], ["O"], left)
            y -= spacing
            line([pick(amounts)], ["B-TOTAL" if key == "total" else "O"], right - 90)
        receipts.append({
            "input_ids": [1, *[wid(t) for t in tokens], 2],
            "bbox": [[0, 0, 0, 0], *boxes, [1000, 1000, 1000, 1000]],
            "labels": [-100, *[_RECEIPT_LABELS.index(t) for t in labels], -100],
        })  # fmt: skip
    return receipts, len(words)


def hf_layoutlm_receipt_key_fields(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Key information extraction from scanned receipts with a tiny random
    `LayoutLMForTokenClassification`, as the FUNSD / SROIE notebooks fine-tune LayoutLM with the
    `Trainer`: OCR words and their boxes normalized to 0-1000, `[CLS]` and `[SEP]` with the boxes
    LayoutLM expects, BIO labels (company, address, date, total) with -100 on the special tokens,
    the user's own collator padding `input_ids`, `bbox`, `attention_mask` and `labels` to the
    longest receipt (`DataCollatorForTokenClassification` pads no boxes), `label_smoothing_factor
    =0.1`, AdamW 1e-3 (from scratch) with a linear decay after 10 % warm-up,
    `eval_strategy="steps"` every 25 steps, batches of 16, 4 epochs, the entity tokens' accuracy
    and the total's accuracy by `compute_metrics`."""
    from transformers import LayoutLMConfig, LayoutLMForTokenClassification, Trainer

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    receipts, vocab_size = _receipts(g, 640)

    def collate(features: list[dict[str, list[Any]]]) -> dict[str, torch.Tensor]:
        longest = max(len(f["input_ids"]) for f in features)
        batch: dict[str, list[Any]] = {"input_ids": [], "bbox": [], "attention_mask": [], "labels": []}
        for f in features:
            pad = longest - len(f["input_ids"])
            batch["input_ids"].append(f["input_ids"] + [0] * pad)
            batch["bbox"].append(f["bbox"] + [[0, 0, 0, 0]] * pad)
            batch["attention_mask"].append([1] * len(f["input_ids"]) + [0] * pad)
            batch["labels"].append(f["labels"] + [-100] * pad)
        return {k: torch.tensor(v) for k, v in batch.items()}

    def compute_metrics(eval_pred: Any) -> dict[str, float]:
        pred, labels = np.argmax(eval_pred.predictions, -1), eval_pred.label_ids
        entity = (labels > 0) & (labels != -100)
        total = labels == _RECEIPT_LABELS.index("B-TOTAL")
        return {"entity_accuracy": float((pred[entity] == labels[entity]).mean()),
                "total_accuracy": float((pred[total] == labels[total]).mean())}  # fmt: skip

    config = LayoutLMConfig(
        vocab_size=vocab_size, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
        max_position_embeddings=128, max_2d_position_embeddings=1024, num_labels=len(_RECEIPT_LABELS),
        id2label=dict(enumerate(_RECEIPT_LABELS)), label2id={k: i for i, k in enumerate(_RECEIPT_LABELS)},
    )  # fmt: skip
    model = LayoutLMForTokenClassification(config)
    # bug (lr_x100): `learning_rate=1e-1` typed for the 1e-3 of the notes
    learning_rate = 1e-1 if bug == "lr_x100" else 1e-3
    args = _hf_args(
        path, seed=seed, eval_strategy="steps", eval_steps=25, learning_rate=learning_rate, weight_decay=0.01,
        lr_scheduler_type="linear", warmup_steps=0.1, label_smoothing_factor=0.1, per_device_train_batch_size=16,
        per_device_eval_batch_size=64, num_train_epochs=4,
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args, train_dataset=_Rows(receipts[:512]), eval_dataset=_Rows(receipts[512:]),
        data_collator=collate, compute_metrics=compute_metrics, callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    losses = _hf_run(trainer)
    evals = [e for e in trainer.state.log_history if "eval_total_accuracy" in e]
    print("entity accuracy", [round(e["eval_entity_accuracy"], 3) for e in evals],
          "total accuracy", [round(e["eval_total_accuracy"], 3) for e in evals])  # fmt: skip
    return losses


# ============================================================================= HF Trainer: ByT5-style grapheme-to-phoneme


def _g2p_words(g: torch.Generator, n: int) -> list[tuple[str, str]]:
    """`n` distinct made-up English-like words (1 or 2 syllables of onset, vowel and coda, a
    final silent `e` now and then) with their IPA pronunciations by spelling rules: digraphs
    (`ch`, `sh`, `th`, `ph`, `ng`, `ck`), soft `c` and `g` before `e` / `i`, vowel teams (`ee`,
    `oo`, `ai`, `ou`), the magic `e` lengthening the vowel before it, stress unmarked."""
    onsets = ["b", "c", "ch", "d", "f", "g", "h", "k", "l", "m", "n", "p", "ph", "r", "s", "sh", "t", "th",
              "v", "w", "y", "z", "st", "tr", "bl", ""]  # fmt: skip
    vowels = ["a", "e", "i", "o", "u", "ee", "oo", "ai", "ou"]
    codas = ["", "n", "ng", "t", "ck", "s", "ll", "r", "x", "m", "d"]
    onset_ipa = {"c": "k", "ch": "tʃ", "ph": "f", "r": "ɹ", "sh": "ʃ", "th": "θ", "y": "j", "tr": "tɹ"}
    vowel_ipa = {
        "a": "æ",
        "e": "ɛ",
        "i": "ɪ",
        "o": "ɒ",
        "u": "ʌ",
        "ee": "iː",
        "oo": "uː",
        "ai": "eɪ",
        "ou": "aʊ",
    }
    long_ipa = {"a": "eɪ", "e": "iː", "i": "aɪ", "o": "əʊ", "u": "juː"}
    coda_ipa = {"ng": "ŋ", "ck": "k", "ll": "l", "r": "ɹ", "x": "ks"}

    def pick(seq: list[str]) -> str:
        return seq[int(torch.randint(0, len(seq), (1,), generator=g))]

    out: dict[str, str] = {}
    while len(out) < n:
        spelling, sound = "", ""
        count = int(torch.randint(1, 3, (1,), generator=g))
        for k in range(count):
            onset, vowel, coda = pick(onsets), pick(vowels), pick(codas)
            last = k == count - 1
            magic = (
                last
                and len(vowel) == 1
                and coda in ("n", "t", "m", "d", "s")
                and torch.rand(1, generator=g) < 0.4
            )
            if onset in ("c", "g") and vowel[0] in "ei":
                onset_sound = "s" if onset == "c" else "dʒ"
            else:
                onset_sound = onset_ipa.get(onset, onset)
            spelling += onset + vowel + coda + ("e" if magic else "")
            sound += onset_sound + (long_ipa[vowel] if magic else vowel_ipa[vowel]) + coda_ipa.get(coda, coda)
        out.setdefault(spelling, sound)
    return list(out.items())


def hf_byt5_g2p_seq2seq(path: str, seed: int = 0) -> list[float]:
    """Grapheme-to-phoneme conversion the way CharsiuG2P fine-tunes ByT5 with the
    `Seq2SeqTrainer`: words prefixed with their language tag (`<eng-us>: word`), `ByT5Tokenizer`
    (UTF-8 bytes, no vocabulary file) for the spellings and the IPA targets (multi-byte
    characters such as `θ`, `ʃ`, `ŋ`, `ː`), `DataCollatorForSeq2Seq` padding the labels with -100
    and making the `decoder_input_ids`, a tiny random `T5ForConditionalGeneration` in ByT5's shape
    (a deeper encoder than decoder, 3 and 1 layers of 64, gated-GELU feed-forward, no dropout as
    in ByT5's pre-training), AdamW 3e-3 with a cosine schedule after 5 % warm-up, batches of 32,
    4 epochs, evaluated every 80 steps with `predict_with_generate=True` (greedy decoding) for
    the word accuracy and the phone error rate in `compute_metrics`."""
    from transformers import (
        ByT5Tokenizer,
        DataCollatorForSeq2Seq,
        Seq2SeqTrainer,
        Seq2SeqTrainingArguments,
        T5Config,
        T5ForConditionalGeneration,
    )

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    pairs = _g2p_words(g, 1344)
    tokenizer = ByT5Tokenizer()

    def preprocess(word: str, ipa: str) -> dict[str, list[int]]:
        inputs = tokenizer(f"<eng-us>: {word}", max_length=48, truncation=True)
        inputs["labels"] = tokenizer(text_target=ipa, max_length=48, truncation=True)["input_ids"]
        return dict(inputs)

    rows = [preprocess(w, p) for w, p in pairs]
    config = T5Config(
        vocab_size=len(tokenizer), d_model=64, d_kv=16, d_ff=128, num_layers=3, num_decoder_layers=1, num_heads=4,
        feed_forward_proj="gated-gelu", dropout_rate=0.0, pad_token_id=0, eos_token_id=1,
        decoder_start_token_id=0,
    )  # fmt: skip
    model = T5ForConditionalGeneration(config)

    def edit_distance(a: str, b: str) -> int:
        row = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            prev, row[0] = row[0], i
            for j, cb in enumerate(b, 1):
                prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
        return row[-1]

    def compute_metrics(eval_pred: Any) -> dict[str, float]:
        preds, labels = eval_pred.predictions, eval_pred.label_ids
        labels = np.where(labels != -100, labels, tokenizer.pad_token_id)
        decoded = tokenizer.batch_decode(preds, skip_special_tokens=True)
        targets = tokenizer.batch_decode(labels, skip_special_tokens=True)
        errors = sum(edit_distance(p, t) for p, t in zip(decoded, targets, strict=True))
        return {"word_accuracy": float(np.mean([p == t for p, t in zip(decoded, targets, strict=True)])),
                "per": errors / sum(len(t) for t in targets)}  # fmt: skip

    args = _hf_args(
        path, args_cls=Seq2SeqTrainingArguments, seed=seed, eval_strategy="steps", eval_steps=80, learning_rate=3e-3,
        lr_scheduler_type="cosine", warmup_steps=0.05, per_device_train_batch_size=32,
        per_device_eval_batch_size=64, num_train_epochs=4, predict_with_generate=True, generation_max_length=32,
        generation_num_beams=1,
    )  # fmt: skip
    trainer = Seq2SeqTrainer(
        model=model, args=args, train_dataset=_Rows(rows[:1280]), eval_dataset=_Rows(rows[1280:]),
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100),
        processing_class=tokenizer, compute_metrics=compute_metrics, callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    losses = _hf_run(trainer)
    evals = [e for e in trainer.state.log_history if "eval_per" in e]
    print("word accuracy", [round(e["eval_word_accuracy"], 3) for e in evals],
          "phone error rate", [round(e["eval_per"], 3) for e in evals])  # fmt: skip
    sample = tokenizer(["<eng-us>: " + w for w, _ in pairs[1280:1284]], return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**sample, max_length=40)
    print([(w, p, q) for (w, p), q in zip(pairs[1280:1284], tokenizer.batch_decode(out, skip_special_tokens=True),
                                          strict=True)])  # fmt: skip
    return losses


# ============================================================================= Keras 3: shared pieces


def _keras_history(key: str = "loss") -> Any:
    """A callback collecting each batch's loss: Keras 3 logs the epoch's running mean at every
    batch, so batch k's own loss is k * mean_k - (k - 1) * mean_(k-1)."""
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


# ============================================================================= Keras: sleep staging from band powers


def _sleep_recordings(
    rng: np.random.Generator, nights: int, epochs_per_night: int = 420, fs: int = 50
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Polysomnography-like nights of 30-s epochs (Sleep-EDF's Fpz-Cz EEG and horizontal EOG at
    `fs` Hz, in microvolts): a hypnogram from a Markov chain over W, N1, N2, N3 and REM that
    deepens early in the night and brings REM later, each epoch's signals drawn with random
    phases from a 1/f background plus stage-specific band power (alpha in wake, theta in N1 and
    REM, spindles and K-complex-like slow power in N2, delta in N3, eye movements on the EOG in
    wake and REM); 3 % of epochs have a channel that reads exactly zero (an electrode off).
    Returns the signals (n, 2, 30 fs), the stages and the night of each epoch."""
    transitions = np.array([
        [0.86, 0.10, 0.03, 0.00, 0.01], [0.10, 0.50, 0.35, 0.00, 0.05], [0.02, 0.04, 0.82, 0.09, 0.03],
        [0.01, 0.01, 0.12, 0.86, 0.00], [0.04, 0.04, 0.06, 0.00, 0.86],
    ])  # fmt: skip
    #           delta theta alpha sigma beta  eye movements
    bands = np.array([
        [6.0, 4.0, 14.0, 2.0, 6.0, 40.0], [8.0, 10.0, 4.0, 2.0, 3.0, 20.0], [16.0, 7.0, 3.0, 9.0, 2.0, 4.0],
        [40.0, 6.0, 2.0, 2.0, 1.5, 2.0], [8.0, 9.0, 4.0, 1.5, 4.0, 45.0],
    ])  # fmt: skip
    edges = [(0.5, 4), (4, 8), (8, 12), (12, 15), (15, 25)]
    n_samples = 30 * fs
    freqs = np.fft.rfftfreq(n_samples, 1 / fs)
    stages, night_of = [], []
    for night in range(nights):
        s = 0
        for t in range(epochs_per_night):
            p = transitions[s].copy()
            late = t / epochs_per_night
            p[3] *= 1.6 - 1.4 * late
            p[4] *= 0.4 + 1.4 * late
            s = int(rng.choice(5, p=p / p.sum()))
            stages.append(s)
            night_of.append(night)
    y = np.array(stages)
    n = len(y)
    amplitude = np.zeros((n, 2, len(freqs)))
    background = 1.0 / np.maximum(freqs, 0.5)
    amplitude[:] = 3.0 * background
    for k, (lo, hi) in enumerate(edges):
        inside = (freqs >= lo) & (freqs < hi)
        amplitude[:, 0, inside] += (
            bands[y, k][:, None] * rng.lognormal(0, 0.8, (n, 1)) / np.sqrt(inside.sum()) * 4
        )
        amplitude[:, 1, inside] += 0.3 * bands[y, k][:, None] / np.sqrt(inside.sum()) * 4
    slow = (freqs >= 0.3) & (freqs < 2)
    amplitude[:, 1, slow] += bands[y, 5][:, None] * rng.lognormal(0, 0.8, (n, 1)) / np.sqrt(slow.sum()) * 4
    spectrum = amplitude * np.exp(2j * np.pi * rng.random(amplitude.shape))
    signals = np.fft.irfft(spectrum, n=n_samples, axis=-1) * np.sqrt(n_samples)
    off = rng.random(n) < 0.03
    signals[off, rng.integers(0, 2, off.sum())] = 0.0
    return signals.astype(np.float32), y, np.array(night_of)


def keras_sleep_staging_band_powers(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Automatic sleep staging in the way of YASA's feature pipeline with a Keras classifier:
    the periodogram of each 30-s epoch per channel, the absolute power of five bands in
    decibels (`10 * log10`), the epochs two before and two after as context (50 features), the
    recording's quality control first (epochs with a flat channel rejected, their neighbours'
    windows too); a `Normalization` layer adapted on the training features, Dense(64, relu) -
    Dropout(0.3) - Dense(64, relu) - softmax over W, N1, N2, N3, REM, Adam 1e-3,
    `sparse_categorical_crossentropy`, `class_weight` balanced over the stages (N1 and N3 are
    rare), `validation_split=0.2` (the last night), `ReduceLROnPlateau` (factor 0.5, patience 2)
    and `EarlyStopping` (patience 4, best weights restored), batches of 128, at most 10 epochs;
    the per-stage recall on the validation night."""
    import keras

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 2821)
    signals, stages, night = _sleep_recordings(rng, 4, 400)
    fs, edges = 50, [(0.5, 4), (4, 8), (8, 12), (12, 15), (15, 25)]
    freqs = np.fft.rfftfreq(signals.shape[-1], 1 / fs)
    psd = np.abs(np.fft.rfft(signals, axis=-1)) ** 2 / (fs * signals.shape[-1])
    band_power = np.stack([psd[..., (freqs >= lo) & (freqs < hi)].sum(-1) for lo, hi in edges], -1)
    with np.errstate(divide="ignore"):
        features = 10 * np.log10(band_power).reshape(len(stages), -1)  # dB
    index = np.arange(len(stages))
    window = np.stack([np.clip(index + k, 0, len(stages) - 1) for k in (-2, -1, 0, 1, 2)], 1)
    same_night = (night[window] == night[:, None]).all(1)
    x = features[window].reshape(len(stages), -1)
    keep = same_night
    if bug != "log_zero_nan":  # bug: the quality-control step (flat channels rejected) left out
        flat = (signals.std(-1) < 0.5).any(1)
        keep = keep & ~flat[window].any(1)
    x, y = x[keep].astype("float32"), stages[keep]
    n_train = int(len(x) * 0.8)
    counts = np.bincount(y[:n_train], minlength=5)
    class_weight = {k: len(y[:n_train]) / (5 * max(c, 1)) for k, c in enumerate(counts)}
    normalizer = keras.layers.Normalization()
    normalizer.adapt(x[:n_train])
    model = keras.Sequential([
        keras.Input(shape=(x.shape[1],)), normalizer, keras.layers.Dense(64, activation="relu"),
        keras.layers.Dropout(0.3), keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(5, activation="softmax"),
    ])  # fmt: skip
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    history = _keras_history()
    fit = model.fit(
        x, y, batch_size=128, epochs=10, validation_split=0.2, class_weight=class_weight, verbose=0,
        callbacks=[
            mldbg.keras.Hook(path), history,
            keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=2),
            keras.callbacks.EarlyStopping(monitor="val_loss", patience=4, restore_best_weights=True),
        ],
    )  # fmt: skip
    pred = np.argmax(model.predict(x[n_train:], verbose=0), -1)
    recall = [
        float((pred[y[n_train:] == k] == k).mean()) if (y[n_train:] == k).any() else float("nan")
        for k in range(5)
    ]
    print(f"{len(fit.history['loss'])} epochs, val_loss {[round(v, 3) for v in fit.history['val_loss']]}, "
          f"recall W/N1/N2/N3/REM {[round(r, 2) for r in recall]}, stage counts {counts.tolist()}")  # fmt: skip
    return history.losses


# ============================================================================= Keras: used-car prices with recency weights


def _car_listings(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Used-car listings over two years: age (years), mileage (km), engine size (l), power (kW),
    make (8, one-hot), body (4, one-hot), owners, days since listed; the log price from a
    depreciation curve, make and body premiums, mileage and power effects and a market that
    drifts upwards over the two years (recent listings priced about 12 % higher), noise of 8 %.
    Returns the raw features, the log prices and each listing's age in days."""
    age = rng.gamma(2.0, 2.5, n).clip(0, 20)
    mileage = (age * rng.normal(14000, 4000, n)).clip(500, None)
    engine = rng.choice([1.0, 1.2, 1.4, 1.6, 2.0, 2.5, 3.0], n)
    power = engine * rng.normal(62, 8, n)
    make = rng.integers(0, 8, n)
    body = rng.integers(0, 4, n)
    owners = 1 + rng.poisson(age / 5)
    listed_days_ago = rng.uniform(0, 730, n)
    log_price = (
        10.3 + np.array([0.0, 0.1, -0.15, 0.35, 0.5, -0.05, 0.2, -0.25])[make] + np.array([0.0, 0.1, 0.2, -0.1])[body]
        - 0.11 * age + 0.0035 * age**2 - 0.25 * np.log1p(mileage / 10000) + 0.006 * power - 0.04 * (owners - 1)
        + 0.12 * (1 - listed_days_ago / 730) + rng.normal(0, 0.08, n)
    )  # fmt: skip
    x = np.column_stack([age, mileage, engine, power, np.eye(8)[make], np.eye(4)[body], owners]).astype(
        "float32"
    )
    return x, log_price.astype("float32"), listed_days_ago


def keras_car_price_recency_weights(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """A used-car price model in Keras weighted towards recent listings, as pricing teams weight
    a drifting market: `sample_weight` halving every 180 days of a listing's age (normalized to
    mean 1), the log price as the target, a `Normalization` layer adapted on the numeric
    features, Dense 128-64-32 ReLU, `mse`, Adam 3e-3, `validation_split=0.15`, `EarlyStopping`
    (patience 5, best weights restored) and `ReduceLROnPlateau` (factor 0.3, patience 2) on the
    validation loss, batches of 256, at most 12 epochs; the median absolute percentage error on
    the most recent listings."""
    import keras

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 2822)
    x, log_price, days = _car_listings(rng, 5000)
    order = np.argsort(days)[::-1]  # oldest listings first, the newest last (the validation split)
    x, log_price, days = x[order], log_price[order], days[order]
    weights = 0.5 ** (days / 180)
    weights = (weights / weights.mean()).astype("float32")
    normalizer = keras.layers.Normalization()
    normalizer.adapt(x[: int(0.85 * len(x))])
    if bug == "deep_sigmoid":
        # bug: the network made "deeper" as eight sigmoid layers, as an old course drew it
        hidden = [keras.layers.Dense(64, activation="sigmoid") for _ in range(8)]
    else:
        hidden = [keras.layers.Dense(units, activation="relu") for units in (128, 64, 32)]
    model = keras.Sequential([keras.Input(shape=(x.shape[1],)), normalizer, *hidden, keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.Adam(3e-3), loss="mse", metrics=["mae"])
    history = _keras_history()
    fit = model.fit(
        x, log_price, sample_weight=weights, batch_size=256, epochs=12, validation_split=0.15, verbose=0,
        callbacks=[
            mldbg.keras.Hook(path), history,
            keras.callbacks.EarlyStopping(monitor="val_loss", patience=5, restore_best_weights=True),
            keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.3, patience=2),
        ],
    )  # fmt: skip
    recent = slice(int(0.85 * len(x)), None)
    pred = model.predict(x[recent], verbose=0)[:, 0]
    mdape = float(np.median(np.abs(np.exp(pred - log_price[recent]) - 1)))
    print(f"{len(fit.history['loss'])} epochs, val_loss {[round(v, 4) for v in fit.history['val_loss']]}, "
          f"median APE on recent listings {mdape:.3f}")  # fmt: skip
    return history.losses


# ============================================================================= Keras: the Pi-model (custom train_step)


def keras_pi_model_semi_supervised(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Pi-model of Laine and Aila (2017) for semi-supervised classification, written as
    keras.io writes such methods: a `keras.Model` subclass whose `train_step` runs each batch
    (16 labelled and 32 unlabelled glyphs, from a `tf.data` zip of the repeated labelled set and
    the unlabelled set) twice through random translations and a CNN with Gaussian input noise,
    BatchNorm and dropout, under one `tf.GradientTape`: the cross-entropy of the labelled part
    plus the mean squared difference of the two passes' softmax over all of it, weighted by the
    paper's ramp-up `w_max * exp(-5 (1 - t)^2)` over the first 40 % of the steps (w_max 10);
    its own `Mean` trackers (`loss`, `sup_loss`, `cons_loss`), a `test_step` with the
    cross-entropy of the held-out glyphs, Adam 2e-3; 240 labels of 10 classes, 1600 unlabelled
    glyphs, 6 epochs of 20 steps."""
    import keras
    import tensorflow as tf
    from keras import layers, ops

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images, labels = _rgb_glyphs(g, 2240, 10)
    images = images.permute(0, 2, 3, 1).numpy().astype("float32")  # NHWC, 0-255
    labels = labels.numpy()
    x_lab, y_lab = images[:240], labels[:240]
    x_unl = images[240:1840]
    x_test, y_test = images[1840:], labels[1840:]
    steps_per_epoch, epochs, w_max = 20, 6, 10.0
    total_steps = steps_per_epoch * epochs
    labelled = tf.data.Dataset.from_tensor_slices((x_lab, y_lab)).shuffle(240, seed=seed).repeat().batch(16)
    unlabelled = tf.data.Dataset.from_tensor_slices(x_unl).shuffle(1600, seed=seed).repeat().batch(32)
    train_ds = tf.data.Dataset.zip((labelled, unlabelled))
    test_ds = tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(200)

    classifier = keras.Sequential([
        keras.Input(shape=(16, 16, 3)), layers.Rescaling(1 / 255.0), layers.GaussianNoise(0.15),
        layers.Conv2D(16, 3, padding="same"), layers.BatchNormalization(), layers.LeakyReLU(0.1),
        layers.MaxPooling2D(),
        layers.Conv2D(32, 3, padding="same"), layers.BatchNormalization(), layers.LeakyReLU(0.1),
        layers.MaxPooling2D(), layers.Dropout(0.25),
        layers.Conv2D(32, 3, padding="same"), layers.BatchNormalization(), layers.LeakyReLU(0.1),
        layers.GlobalAveragePooling2D(), layers.Dropout(0.5), layers.Dense(10),
    ], name="classifier")  # fmt: skip
    augmenter = keras.Sequential([layers.RandomTranslation(0.125, 0.125, fill_mode="nearest", seed=seed)],
                                 name="augmenter")  # fmt: skip

    class PiModel(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.classifier, self.augmenter = classifier, augmenter
            self.ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            self.loss_tracker = keras.metrics.Mean(name="loss")
            self.sup_tracker = keras.metrics.Mean(name="sup_loss")
            self.cons_tracker = keras.metrics.Mean(name="cons_loss")
            self.acc = keras.metrics.SparseCategoricalAccuracy(name="acc")

        @property
        def metrics(self) -> list[Any]:
            return [self.loss_tracker, self.sup_tracker, self.cons_tracker, self.acc]

        def call(self, x: Any, training: bool = False) -> Any:
            return self.classifier(x, training=training)

        def train_step(self, data: Any) -> dict[str, Any]:
            (x_l, y_l), x_u = data
            x = ops.concatenate([x_l, x_u], 0)
            n_l = ops.shape(x_l)[0]
            t = ops.minimum(ops.cast(self.optimizer.iterations, "float32") / (0.4 * total_steps), 1.0)
            weight = w_max * ops.exp(-5.0 * (1.0 - t) ** 2)
            with tf.GradientTape() as tape:
                if bug == "train_in_eval_mode":
                    # bug: `training=True` left out of the classifier's calls: a custom train_step gets no
                    # training flag from fit, so BatchNorm, dropout and the input noise run in inference mode
                    z1 = self.classifier(self.augmenter(x, training=True))
                    z2 = self.classifier(self.augmenter(x, training=True))
                else:
                    z1 = self.classifier(self.augmenter(x, training=True), training=True)
                    z2 = self.classifier(self.augmenter(x, training=True), training=True)
                sup_loss = self.ce(y_l, z1[:n_l])
                cons_loss = ops.mean(ops.square(ops.softmax(z1) - ops.softmax(z2)))
                loss = sup_loss + weight * cons_loss
            grads = tape.gradient(loss, self.classifier.trainable_weights)
            self.optimizer.apply(grads, self.classifier.trainable_weights)
            self.loss_tracker.update_state(loss)
            self.sup_tracker.update_state(sup_loss)
            self.cons_tracker.update_state(cons_loss)
            self.acc.update_state(y_l, z1[:n_l])
            return {m.name: m.result() for m in self.metrics}

        def test_step(self, data: Any) -> dict[str, Any]:
            x, y = data
            logits = self.classifier(x, training=False)
            loss = self.ce(y, logits)
            self.loss_tracker.update_state(loss)
            self.acc.update_state(y, logits)
            return {"loss": self.loss_tracker.result(), "acc": self.acc.result()}

    model = PiModel()
    model.compile(optimizer=keras.optimizers.Adam(2e-3))
    history = _keras_history()
    fit = model.fit(train_ds, epochs=epochs, steps_per_epoch=steps_per_epoch, validation_data=test_ds, verbose=0,
                    callbacks=[mldbg.keras.Hook(path), history])  # fmt: skip
    rounded = {k: [round(v, 4) for v in values] for k, values in fit.history.items()}
    print(f"sup_loss {rounded['sup_loss']} cons_loss {rounded['cons_loss']} val_loss {rounded['val_loss']} "
          f"val_acc {rounded['val_acc']}")  # fmt: skip
    bn = classifier.layers[3]
    print(f"first BatchNorm's moving variance: mean {float(ops.mean(bn.moving_variance)):.3f}")
    return history.losses


# ============================================================================= Keras: single-object localization, two outputs


def _shape_scenes(g: torch.Generator, n: int, size: int = 24) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`n` uint8 RGB scenes (n, size, size, 3), each with one bright object of four kinds
    (disc, square, triangle, cross) of a random size, place and colour over a darker background
    (a colour gradient, a random stroke, noise); returns the images, the kinds and the
    boxes as (x_min, y_min, x_max, y_max) in [0, 1]."""
    yy, xx = torch.meshgrid(torch.arange(size).float() + 0.5, torch.arange(size).float() + 0.5, indexing="ij")
    images = torch.zeros(n, size, size, 3)
    kinds = torch.randint(0, 4, (n,), generator=g)
    boxes = torch.zeros(n, 4)
    for i in range(n):
        a, b = 0.45 * torch.rand(3, generator=g), 0.45 * torch.rand(3, generator=g)
        img = a + (b - a) * (xx / size)[..., None]
        x0, y0, dx, dy = torch.rand(4, generator=g).tolist()
        stroke = ((xx / size - x0) * (dy - 0.5) - (yy / size - y0) * (dx - 0.5)).abs() < 0.015
        img = torch.where(stroke[..., None], 0.45 * torch.rand(3, generator=g), img)
        r = 4 + 4.5 * float(torch.rand(1, generator=g))
        cx, cy = (r + (size - 2 * r) * torch.rand(2, generator=g)).tolist()
        kind = int(kinds[i])
        if kind == 0:
            inside = (xx - cx) ** 2 + (yy - cy) ** 2 < r * r
        elif kind == 1:
            inside = ((xx - cx).abs() < r * 0.85) & ((yy - cy).abs() < r * 0.85)
        elif kind == 2:
            inside = (yy - cy < r * 0.8) & ((xx - cx).abs() < (yy - cy + r) * 0.55)
        else:
            inside = (
                (((xx - cx).abs() < r * 0.3) | ((yy - cy).abs() < r * 0.3))
                & ((xx - cx).abs() < r)
                & ((yy - cy).abs() < r)
            )
        img = torch.where(inside[..., None], 0.55 + 0.45 * torch.rand(3, generator=g), img)
        cols, rows = torch.where(inside.any(0))[0], torch.where(inside.any(1))[0]
        boxes[i] = torch.tensor([cols.min(), rows.min(), cols.max() + 1, rows.max() + 1]).float() / size
        images[i] = img + 0.04 * torch.randn(size, size, 3, generator=g)
    return (images.clamp(0, 1) * 255).round().to(torch.uint8).numpy(), kinds.numpy(), boxes.numpy()


def keras_localization_two_heads_loss_weights(path: str, seed: int = 0) -> list[float]:
    """Single-object localization as the "bounding box regression with Keras" tutorials build
    it: a functional model with a shared CNN trunk (`Rescaling(1/255)`, three Conv2D-MaxPooling
    blocks, Dense 128) and two named heads, `class_label` (softmax over four kinds,
    `categorical_crossentropy`) and `bounding_box` (four sigmoid coordinates, `mse`),
    `loss_weights={"class_label": 1.0, "bounding_box": 5.0}`, targets given as a dict by head
    name, Adam 1e-3, `validation_split=0.1`, `EarlyStopping` on `val_loss` (patience 3, best
    weights restored), batches of 64, 8 epochs; the accuracy and the mean IoU of the boxes on
    held-out scenes."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images, kinds, boxes = _shape_scenes(g, 1200)
    x = images.astype("float32")
    inputs = keras.Input(shape=(24, 24, 3))
    h = layers.Rescaling(1 / 255.0)(inputs)
    for filters in (16, 32, 32):
        h = layers.Conv2D(filters, 3, padding="same", activation="relu")(h)
        h = layers.MaxPooling2D()(h)
    h = layers.Dense(128, activation="relu")(layers.Flatten()(h))
    c = layers.Dropout(0.3)(layers.Dense(64, activation="relu")(h))
    class_label = layers.Dense(4, activation="softmax", name="class_label")(c)
    bounding_box = layers.Dense(4, activation="sigmoid", name="bounding_box")(
        layers.Dense(64, activation="relu")(h)
    )
    model = keras.Model(inputs, [class_label, bounding_box])
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss={"class_label": "categorical_crossentropy", "bounding_box": "mse"},
        loss_weights={"class_label": 1.0, "bounding_box": 5.0},
        metrics={"class_label": ["accuracy"]},
    )
    targets = {"class_label": np.eye(4, dtype="float32")[kinds[:1000]], "bounding_box": boxes[:1000]}
    history = _keras_history()
    fit = model.fit(
        x[:1000], targets, batch_size=64, epochs=8, validation_split=0.1, verbose=0,
        callbacks=[mldbg.keras.Hook(path), history,
                   keras.callbacks.EarlyStopping(monitor="val_loss", patience=3, restore_best_weights=True)],
    )  # fmt: skip
    probs, pred_boxes = model.predict(x[1000:], verbose=0)
    lo, hi = np.maximum(pred_boxes[:, :2], boxes[1000:, :2]), np.minimum(pred_boxes[:, 2:], boxes[1000:, 2:])
    inter = np.clip(hi - lo, 0, None).prod(1)
    area = (pred_boxes[:, 2:] - pred_boxes[:, :2]).clip(0).prod(1) + (
        boxes[1000:, 2:] - boxes[1000:, :2]
    ).prod(1)
    print(f"val_loss {[round(v, 4) for v in fit.history['val_loss']]}, held-out accuracy "
          f"{(probs.argmax(1) == kinds[1000:]).mean():.3f}, mean IoU {(inter / (area - inter)).mean():.3f}")  # fmt: skip
    return history.losses


# ============================================================================= Keras: human activity recognition (CNN-LSTM)


def _accelerometer_windows(
    rng: np.random.Generator, n: int, length: int = 128, fs: int = 50
) -> tuple[np.ndarray, np.ndarray]:
    """UCI-HAR-like windows (2.56 s at 50 Hz) of a waist phone's 3-axis accelerometer (in g)
    for six activities: walking, walking upstairs, walking downstairs (step rhythms of their
    own frequency, amplitude and impact sharpness, a per-subject cadence), sitting, standing
    and lying (gravity at their own orientations, small sway); the phone's mounting angle
    varies by up to 15 degrees, sensor noise 0.02 g."""
    t = np.arange(length) / fs
    y = rng.integers(0, 6, n)
    x = np.zeros((n, length, 3), dtype=np.float32)
    gravity = {
        0: [1, 0, 0],
        1: [1, 0, 0],
        2: [1, 0, 0],
        3: [0.8, 0.0, 0.6],
        4: [1, 0, 0],
        5: [0.05, 0.1, 0.99],
    }
    gait = {0: (1.8, 0.25, 1.0), 1: (1.5, 0.35, 1.0), 2: (2.0, 0.3, 3.0)}  # step Hz, amplitude, impact
    for i in range(n):
        k = int(y[i])
        g_vec = np.array(gravity[k], dtype=float)
        if k in gait:
            f, amp, sharp = gait[k]
            f *= rng.uniform(0.9, 1.1)
            phase = rng.uniform(0, 2 * np.pi)
            step = np.sin(2 * np.pi * f * t + phase)
            vertical = amp * np.sign(step) * np.abs(step) ** (1 / sharp)
            forward = 0.5 * amp * np.sin(2 * np.pi * f * t + phase + 1.0)
            lateral = 0.3 * amp * np.sin(np.pi * f * t + phase)
            signal = np.stack([vertical, forward, lateral], 1)
        else:
            signal = 0.02 * np.cumsum(rng.normal(0, 0.05, (length, 3)), 0)
        angle = np.deg2rad(rng.uniform(-15, 15))
        rot = np.array([[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]])
        x[i] = (g_vec[None] + signal) @ rot.T + rng.normal(0, 0.02, (length, 3))
    return x, y


def keras_har_cnn_lstm_plateau(path: str, seed: int = 0) -> list[float]:
    """Human activity recognition from a phone's accelerometer with the CNN-LSTM people copy
    from the UCI-HAR tutorials: a `Sequential` of a `Normalization` layer adapted on the
    training windows (per axis), two Conv1D(32, 5, relu), dropout 0.3 and max
    pooling, an LSTM(32), Dense(32, relu) and a softmax over six activities,
    `sparse_categorical_crossentropy`, Adam 1e-3, batches of 64, `validation_split=0.2`,
    `ReduceLROnPlateau` (factor 0.5, patience 1, `min_lr=1e-4`) and `EarlyStopping` (patience 3,
    best weights restored) on the validation loss, at most 6 epochs; the confusion between
    sitting and standing printed."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 2825)
    x, y = _accelerometer_windows(rng, 1200)
    normalizer = layers.Normalization(axis=-1)
    normalizer.adapt(x[: int(0.8 * len(x))])
    model = keras.Sequential([
        keras.Input(shape=(128, 3)), normalizer, layers.Conv1D(32, 5, activation="relu"),
        layers.Conv1D(32, 5, activation="relu"),
        layers.Dropout(0.3), layers.MaxPooling1D(2), layers.LSTM(32), layers.Dense(32, activation="relu"),
        layers.Dense(6, activation="softmax"),
    ])  # fmt: skip
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    history = _keras_history()
    fit = model.fit(
        x, y, batch_size=64, epochs=6, validation_split=0.2, verbose=0,
        callbacks=[
            mldbg.keras.Hook(path), history,
            keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=1, min_lr=1e-4),
            keras.callbacks.EarlyStopping(monitor="val_loss", patience=3, restore_best_weights=True),
        ],
    )  # fmt: skip
    val = slice(int(0.8 * len(x)), None)
    pred = model.predict(x[val], verbose=0).argmax(1)
    confusion = np.zeros((6, 6), dtype=int)
    np.add.at(confusion, (y[val], pred), 1)
    print(f"val_accuracy {[round(v, 3) for v in fit.history['val_accuracy']]}; sitting/standing rows "
          f"{confusion[3].tolist()} {confusion[4].tolist()}")  # fmt: skip
    return history.losses


# ============================================================================= PIPELINES

PIPELINES: list[Any] = []

if installed("lightning"):
    _adda = healthy(
        "lightning_adda_manual_optimization_target_encoder_critic",
        "ADDA domain adaptation (Lightning, manual optimization)",
        lit_adda_adversarial_adaptation,
    )
    _bert4rec = healthy(
        "lightning_bert4rec_cloze_bf16_val_check_interval",
        "BERT4Rec sequential recommendation (Lightning, bf16-mixed)",
        lit_bert4rec_cloze_bf16,
    )
    _protein = healthy(
        "lightning_protein_secondary_structure_cnn_bigru_early_stopping",
        "protein secondary structure Q3 (Lightning)",
        lit_protein_secondary_structure_q3,
    )
    _sage = healthy(
        "lightning_graphsage_link_prediction_negative_sampling",
        "GraphSAGE link prediction (Lightning)",
        lit_graphsage_link_prediction,
    )
    PIPELINES += [
        _adda,
        buggy(_adda, "no_zero_grad"),
        healthy(
            "lightning_schnet_energy_forces_accumulate_plateau",
            "SchNet force field (Lightning)",
            lit_schnet_energy_forces,
        ),
        _bert4rec,
        buggy(_bert4rec, "frozen_by_mistake"),
        _protein,
        buggy(_protein, "softmax_before_ce"),
        _sage,
        buggy(_sage, "dead_relu_init"),
    ]

if installed("transformers"):
    _simmim = healthy(
        "hf_vit_simmim_masked_image_modeling_mask_generator",
        "HF Trainer ViT SimMIM pre-training",
        hf_vit_simmim_masked_image_modeling,
    )
    _speaker = healthy(
        "hf_wav2vec2_speaker_identification_feature_extractor_padding",
        "HF Trainer Wav2Vec2 speaker identification",
        hf_wav2vec2_speaker_identification,
    )
    _layoutlm = healthy(
        "hf_layoutlm_receipt_key_fields_label_smoothing",
        "HF Trainer LayoutLM key information extraction",
        hf_layoutlm_receipt_key_fields,
    )
    PIPELINES += [
        healthy(
            "hf_gpt2_double_heads_persona_compute_loss",
            "HF Trainer GPT-2 double heads (custom compute_loss)",
            hf_gpt2_double_heads_persona,
        ),
        _simmim,
        buggy(_simmim, "inputs_x255"),
        _speaker,
        buggy(_speaker, "shuffled_labels"),
        _layoutlm,
        buggy(_layoutlm, "lr_x100"),
        healthy("hf_byt5_g2p_seq2seq_trainer_generate", "HF Seq2SeqTrainer ByT5 G2P", hf_byt5_g2p_seq2seq),
    ]

if installed("keras", "tensorflow"):
    _sleep = healthy(
        "keras_sleep_staging_band_powers_class_weight",
        "Keras sleep staging (class weights)",
        keras_sleep_staging_band_powers,
    )
    _cars = healthy(
        "keras_car_prices_recency_sample_weights",
        "Keras price regression (sample weights)",
        keras_car_price_recency_weights,
    )
    _pi = healthy(
        "keras_pi_model_custom_train_step_consistency",
        "Keras Pi-model semi-supervised (custom train_step)",
        keras_pi_model_semi_supervised,
    )
    PIPELINES += [
        _sleep,
        buggy(_sleep, "log_zero_nan"),
        _cars,
        buggy(_cars, "deep_sigmoid"),
        _pi,
        buggy(_pi, "train_in_eval_mode"),
        healthy(
            "keras_localization_class_and_box_heads_loss_weights",
            "Keras object localization (two heads, loss weights)",
            keras_localization_two_heads_loss_weights,
        ),
        healthy(
            "keras_har_accelerometer_cnn_lstm_plateau",
            "Keras activity recognition CNN-LSTM",
            keras_har_cnn_lstm_plateau,
        ),
    ]
