"""A blind held-out set (issue 26), part J: trainings recorded the way each tool's user records
them, of kinds not yet in the corpus. Written without running mldbg's rules on them; each was
checked only from its own losses (finite, going where its kind's loss goes).

Shapes of public PyTorch scripts (the README's two lines): accelerate's nlp_example with
`accelerator.backward` and a linear warm-up, the loop of torchvision's detection reference
(a loss dict summed, the first epoch's warm-up, MultiStepLR), Deep Embedded Clustering (an
autoencoder pretrained, k-means, then KL to the sharpened target), the Manhattan LSTM siamese
similarity net on Adadelta, a DCASE-style CRNN audio tagger (multi-label, max-pooled frames).
Hugging Face `Trainer` (`mldbg.transformers.DebuggerCallback`, tiny random configs): BART
summarisation with `Seq2SeqTrainer`, RoBERTa BIO token classification, Swin image
classification, Whisper speech recognition on synthetic log-mel features, the Audio Spectrogram
Transformer, Phi causal LM on packed blocks with accumulation and a cosine schedule, DistilBERT
with the user's own dynamic-padding collator, GPT-2 sequence classification (pad = eos).
Lightning: an EMA callback (`AveragedModel`), `ReduceLROnPlateau` through the
`configure_optimizers` dict, a `LightningDataModule` with a packed GRU and gradient clipping by
norm, `accumulate_grad_batches=4` with `val_check_interval=0.25`, a Transformer tagger with a
per-step `LambdaLR`, SimSiam. Keras 3 (TensorFlow): a subclassed ResNet with
`ReduceLROnPlateau`, structured data through `Normalization` / `StringLookup` /
`IntegerLookup`, augmentation layers inside the model with SGD on `CosineDecay`, the time-series
anomaly `Conv1DTranspose` autoencoder, the LSTM weather forecaster on
`timeseries_dataset_from_array`. JAX: a Flax Linen LSTM (`nn.RNN`, `TrainState`), a Flax Linen
GroupNorm CNN on SGD with warm-up and cosine, a Flax NNX conv autoencoder, a `jax.vmap`-ped deep
ensemble. XGBoost: the sklearn `XGBClassifier` with the DART booster, gamma regression of claim
severities.

Ten buggy twins, one per key of `BUGS`: the Keras ResNet at Adam lr 0.1 (lr_x100), the
detection loop without `optimizer.zero_grad()` (no_zero_grad), RoBERTa's tag column shuffled
apart from its sentences (shuffled_labels), Swin fed 0-255 pixels normalized without the
rescale (inputs_x255), the Lightning GRU returning softmax probabilities to the cross-entropy
(softmax_before_ce), the CRNN's convolutions and batch norms initialised with biases of -2
(dead_relu_init), the Lightning EMA MLP as eight sigmoid layers (deep_sigmoid), accelerate's
word embeddings frozen after the optimizer was built (frozen_by_mistake), the MaLSTM trained on
a hand-written binary cross-entropy of `exp(-distance)` (log_zero_nan), DEC's encoder left in
eval mode after computing the embeddings for k-means (train_in_eval_mode).

A pipeline whose framework is not installed is left out of `PIPELINES`. Every framework is
imported inside its pipeline, so importing this module costs only torch. `SPLIT = BLIND5`.
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

from . import BLIND5, buggy, healthy, installed

SPLIT = BLIND5

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


# ============================================================================= shapes of public PyTorch scripts


def _review_texts(g: torch.Generator, n: int) -> tuple[list[list[int]], torch.Tensor]:
    """Variable-length "reviews": neutral words plus a few positive (10-29) or negative (30-49)
    words, the label the majority polarity; negations (word 5) flip the next sentiment word."""
    texts, labels = [], []
    for _ in range(n):
        length = int(torch.randint(6, 40, (1,), generator=g))
        words = torch.randint(50, 200, (length,), generator=g)
        score = 0
        k = int(torch.randint(1, 5, (1,), generator=g))
        for pos in torch.randperm(length, generator=g)[:k].tolist():
            positive = bool(torch.rand(1, generator=g) < 0.5)
            words[pos] = int(torch.randint(10, 30, (1,), generator=g)) + (0 if positive else 20)
            score += 1 if positive else -1
        if score == 0:
            words[0] = 12
            score = 1
        texts.append(words.tolist())
        labels.append(int(score > 0))
    return texts, torch.tensor(labels)


def accelerate_nlp_example(path: str, epochs: int = 3, seed: int = 0, bug: str | None = None) -> list[float]:
    """accelerate's examples/nlp_example.py on a tiny Transformer classifier built from scratch
    (a `[CLS]` token, learned positions, 2 encoder layers): `Accelerator(cpu=True)`,
    `accelerator.prepare(model, optimizer, train_dataloader, eval_dataloader, lr_scheduler)`,
    `AdamW(params=model.parameters(), lr=lr)`, `get_linear_schedule_with_warmup(
    num_warmup_steps=100)`, `accelerator.backward(loss)`, batch 16, evaluation each epoch with
    `accelerator.gather_for_metrics`. The task: the polarity of variable-length "reviews"."""
    from accelerate import Accelerator
    from transformers import get_linear_schedule_with_warmup

    g = _seed(seed)
    texts, labels = _review_texts(g, 2000)
    ids = torch.zeros(len(texts), 41, dtype=torch.long)
    for i, t in enumerate(texts):
        ids[i, 0] = 1
        ids[i, 1 : len(t) + 1] = torch.tensor(t)
    padding = ids == 0

    class Classifier(nn.Module):
        def __init__(self, d: int = 64) -> None:
            super().__init__()
            self.embeddings = nn.Embedding(256, d, padding_idx=0)
            self.positions = nn.Embedding(ids.shape[1], d)
            layer = nn.TransformerEncoderLayer(d, 4, 128, dropout=0.1, batch_first=True, activation="gelu")
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.classifier = nn.Linear(d, 2)

        def forward(self, input_ids: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
            h = self.embeddings(input_ids) + self.positions(torch.arange(input_ids.shape[1]))
            return self.classifier(self.encoder(h, src_key_padding_mask=pad_mask)[:, 0])

    accelerator = Accelerator(cpu=True)
    lr, batch_size = 5e-4, 16
    model = Classifier()
    train_dataloader = DataLoader(
        TensorDataset(ids[:1600], padding[:1600], labels[:1600]), batch_size=batch_size, shuffle=True
    )
    eval_dataloader = DataLoader(TensorDataset(ids[1600:], padding[1600:], labels[1600:]), batch_size=32)
    optimizer = torch.optim.AdamW(params=model.parameters(), lr=lr)
    lr_scheduler = get_linear_schedule_with_warmup(
        optimizer=optimizer, num_warmup_steps=100, num_training_steps=len(train_dataloader) * epochs
    )
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )
    if bug == "frozen_by_mistake":  # meant to freeze only the position table, froze the word embeddings
        model.embeddings.weight.requires_grad = False
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _epoch in range(epochs):
        model.train()
        for input_ids, pad_mask, y in train_dataloader:
            outputs = model(input_ids, pad_mask)
            loss = F.cross_entropy(outputs, y)
            accelerator.backward(loss)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            losses.append(loss.item())
        model.eval()
        correct = 0
        for input_ids, pad_mask, y in eval_dataloader:
            with torch.no_grad():
                predictions = model(input_ids, pad_mask).argmax(dim=-1)
            predictions, references = accelerator.gather_for_metrics((predictions, y))
            correct += int((predictions == references).sum())
    hook.close()
    return losses


def _boxes_scene(g: torch.Generator, n: int, size: int = 24, classes: int = 3) -> tuple[torch.Tensor, ...]:
    """Images with one coloured rectangle each: (images, class labels, boxes as normalized cx, cy,
    w, h)."""
    colours = torch.tensor([[1.0, 0.2, 0.2], [0.2, 1.0, 0.2], [0.2, 0.3, 1.0]])
    x = 0.3 * torch.rand(n, 3, size, size, generator=g)
    labels = torch.randint(0, classes, (n,), generator=g)
    boxes = torch.zeros(n, 4)
    for i in range(n):
        w, h = (torch.randint(5, 13, (2,), generator=g)).tolist()
        x0 = int(torch.randint(0, size - w + 1, (1,), generator=g))
        y0 = int(torch.randint(0, size - h + 1, (1,), generator=g))
        x[i, :, y0 : y0 + h, x0 : x0 + w] = colours[labels[i]].view(3, 1, 1)
        boxes[i] = torch.tensor([(x0 + w / 2) / size, (y0 + h / 2) / size, w / size, h / size])
    x = x + 0.05 * torch.randn(x.shape, generator=g)
    return x, labels, boxes


def torchvision_reference_detection(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The shape of torchvision's references/detection/engine.py `train_one_epoch`: the model
    returns a dict of losses in train mode (`loss_dict = model(images, targets)`; here a
    classification loss, a smooth-L1 box loss and an objectness-style IoU loss), `losses =
    sum(loss for loss in loss_dict.values())`, SGD(lr 0.02, momentum 0.9, weight decay 1e-4),
    the first epoch's linear warm-up (`warmup_factor = 1.0 / 1000`, `warmup_iters = min(1000,
    len(data_loader) - 1)`) and MultiStepLR per epoch, batch 16, inputs normalized with the
    ImageNet mean and std as GeneralizedRCNNTransform does."""
    g = _seed(seed)
    x, labels, boxes = _boxes_scene(g, 1280)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    x = (x - mean) / std

    class TinyDetector(nn.Module):
        def __init__(self, classes: int = 3) -> None:
            super().__init__()
            self.backbone = nn.Sequential(
                nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                nn.Flatten(),
            )  # fmt: skip
            self.cls_head = nn.Linear(256, classes)
            self.box_head = nn.Linear(256, 4)

        def forward(self, images: torch.Tensor, targets: dict[str, torch.Tensor] | None = None) -> Any:
            feats = self.backbone(images)
            logits, deltas = self.cls_head(feats), self.box_head(feats).sigmoid()
            if not self.training:
                return logits.argmax(-1), deltas
            assert targets is not None
            tb = targets["boxes"]
            lo = torch.maximum(deltas[:, :2] - deltas[:, 2:] / 2, tb[:, :2] - tb[:, 2:] / 2)
            hi = torch.minimum(deltas[:, :2] + deltas[:, 2:] / 2, tb[:, :2] + tb[:, 2:] / 2)
            inter = (hi - lo).clamp(min=0).prod(1)
            iou = inter / (deltas[:, 2:].prod(1) + tb[:, 2:].prod(1) - inter + 1e-7)
            return {
                "loss_classifier": F.cross_entropy(logits, targets["labels"]),
                "loss_box_reg": F.smooth_l1_loss(deltas, tb, beta=1 / 9),
                "loss_iou": (1 - iou).mean(),
            }

    model = TinyDetector()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=0.02, momentum=0.9, weight_decay=1e-4)
    lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[3, 4], gamma=0.1)
    data_loader = DataLoader(
        TensorDataset(x[:1120], labels[:1120], boxes[:1120]), batch_size=16, shuffle=True
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for epoch in range(epochs):
        model.train()
        warmup = None
        if epoch == 0:
            warmup_factor = 1.0 / 1000
            warmup_iters = min(1000, len(data_loader) - 1)
            warmup = torch.optim.lr_scheduler.LinearLR(
                optimizer, start_factor=warmup_factor, total_iters=warmup_iters
            )
        for images, cls, bx in data_loader:
            loss_dict = model(images, {"labels": cls, "boxes": bx})
            loss_value = sum(loss for loss in loss_dict.values())
            if bug != "no_zero_grad":
                optimizer.zero_grad()
            loss_value.backward()
            optimizer.step()
            if warmup is not None:
                warmup.step()
            losses.append(loss_value.item())
        lr_scheduler.step()
        model.eval()
        with torch.no_grad():
            model(x[1120:])
    hook.close()
    return losses


def dec_deep_embedded_clustering(
    path: str, pretrain_epochs: int = 6, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Deep Embedded Clustering (Xie et al. 2016) as its PyTorch ports write it: an autoencoder
    d-500-500-2000-10 (here d-256-256-512-10) with 20% dropout on the input pretrained on MSE,
    k-means on the embeddings to initialise the cluster centres, then the encoder and centres
    trained on KL(P || Q) with Student-t soft assignments Q and the sharpened target P updated
    every 50 steps, SGD(lr 0.01, momentum 0.9), batch 256. The losses: the pretraining MSE then
    the clustering KL."""
    from sklearn.cluster import KMeans

    g = _seed(seed)
    n, d, k = 3000, 40, 6
    centres = 3 * torch.randn(k, 8, generator=g)
    mix = torch.randn(8, d, generator=g) / math.sqrt(8)
    z = centres[torch.randint(0, k, (n,), generator=g)] + torch.randn(n, 8, generator=g)
    x = torch.tanh(z @ mix) + 0.05 * torch.randn(n, d, generator=g)
    x = (x - x.mean(0)) / x.std(0)

    encoder = nn.Sequential(
        nn.Dropout(0.2), nn.Linear(d, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 512),
        nn.ReLU(), nn.Linear(512, 10),
    )  # fmt: skip
    decoder = nn.Sequential(
        nn.Linear(10, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
        nn.Linear(256, d),
    )  # fmt: skip
    autoencoder = nn.Sequential(encoder, decoder)
    hook = Hook(path)
    hook.register_module(autoencoder)
    losses = []
    opt = torch.optim.SGD(autoencoder.parameters(), lr=0.1, momentum=0.9)
    loader = DataLoader(TensorDataset(x), batch_size=256, shuffle=True)
    autoencoder.train()
    for _ in range(pretrain_epochs):
        for (xb,) in loader:
            loss = F.mse_loss(autoencoder(xb), xb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())

    encoder.eval()
    with torch.no_grad():
        emb = encoder(x)
    if bug != "train_in_eval_mode":
        encoder.train()
    km = KMeans(n_clusters=k, n_init=20, random_state=seed).fit(emb.numpy())
    cluster_centers = nn.Parameter(torch.tensor(km.cluster_centers_, dtype=torch.float32))

    def soft_assign(h: torch.Tensor) -> torch.Tensor:
        q = 1.0 / (1.0 + ((h[:, None] - cluster_centers[None]) ** 2).sum(-1))
        return q / q.sum(1, keepdim=True)

    optimizer = torch.optim.SGD([*encoder.parameters(), cluster_centers], lr=0.01, momentum=0.9)
    target = None
    for step in range(steps):
        if step % 50 == 0:
            with torch.no_grad():
                q = soft_assign(encoder(x))
                p = q**2 / q.sum(0)
                target = p / p.sum(1, keepdim=True)
        idx = torch.randint(0, n, (256,), generator=g)
        q = soft_assign(encoder(x[idx]))
        loss = F.kl_div(q.log(), target[idx], reduction="batchmean")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    hook.close()
    return losses


def malstm_siamese_similarity(
    path: str, epochs: int = 12, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The Manhattan LSTM (Mueller & Thyagarajan 2016) as its public ports write it: one shared
    LSTM(50) over both sentences, similarity `exp(-||h1 - h2||_1)` in (0, 1], MSE against the
    0/1 duplicate label, Adadelta(clipnorm 1.25 via clip_grad_norm_), batch 64. The pairs: a
    sentence and a paraphrase of it (some words swapped for synonyms; 15% word for word), or an unrelated
    sentence."""
    g = _seed(seed)
    vocab, n, length = 120, 3200, 12
    synonym = torch.arange(vocab)
    synonym[2:62] = torch.arange(62, 122).clamp(max=vocab - 1)  # words 2..61 have a synonym
    a = torch.randint(2, vocab, (n, length), generator=g)
    dup = torch.rand(n, generator=g) < 0.5
    swap = torch.rand(n, length, generator=g) < 0.3
    para = torch.where(swap, synonym[a], a)
    shift = torch.randint(0, 3, (n,), generator=g)
    para = torch.stack([torch.roll(row, int(s)) for row, s in zip(para, shift, strict=True)])
    verbatim = torch.rand(n, generator=g) < 0.15  # duplicate questions posted word for word
    para = torch.where(verbatim[:, None], a, para)
    b = torch.where(dup[:, None], para, torch.randint(2, vocab, (n, length), generator=g))
    y = dup.float()

    class MaLSTM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(vocab, 50)
            self.lstm = nn.LSTM(50, 50, batch_first=True)

        def encode(self, s: torch.Tensor) -> torch.Tensor:
            return self.lstm(self.embedding(s))[1][0][-1]

        def forward(self, s1: torch.Tensor, s2: torch.Tensor) -> torch.Tensor:
            return torch.exp(-(self.encode(s1) - self.encode(s2)).abs().sum(1))

    model = MaLSTM()
    optimizer = torch.optim.Adadelta(model.parameters())
    loader = DataLoader(TensorDataset(a[:2800], b[:2800], y[:2800]), batch_size=64, shuffle=True)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _ in range(epochs):
        model.train()
        for s1, s2, yb in loader:
            pred = model(s1, s2)
            if bug == "log_zero_nan":  # "a probability, so binary cross-entropy", written out by hand
                loss = -(yb * torch.log(pred) + (1 - yb) * torch.log(1 - pred)).mean()
            else:
                loss = F.mse_loss(pred, yb)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.25)
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            model(a[2800:], b[2800:])
    hook.close()
    return losses


def crnn_audio_tagging(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """A CRNN audio tagger as the DCASE baselines write it: log-mel-like spectrogram patches (40
    frames x 32 bands), three conv blocks (conv, BN, ReLU, frequency max-pool, dropout 0.25), a
    bidirectional GRU over time, frame-wise sigmoid outputs max-pooled to clip-level tags,
    `BCEWithLogitsLoss` (multi-label, 6 sound classes, several per clip), Adam(1e-3), batch 32."""
    g = _seed(seed)
    n, frames, bands, classes = 960, 40, 32, 6
    pg = torch.Generator().manual_seed(404)
    signatures = torch.rand(classes, bands, generator=pg) ** 3 * 2
    tags = (torch.rand(n, classes, generator=g) < 0.3).float()
    spec = 0.3 * torch.randn(n, 1, frames, bands, generator=g)
    for i in range(n):
        for c in torch.nonzero(tags[i]).flatten().tolist():
            t0 = int(torch.randint(0, frames - 12, (1,), generator=g))
            dur = int(torch.randint(6, 13, (1,), generator=g))
            spec[i, 0, t0 : t0 + dur] += signatures[c]
    spec = (spec - spec.mean()) / spec.std()

    class CRNN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            blocks = []
            ch = 1
            for out in (16, 32, 32):
                blocks += [nn.Conv2d(ch, out, 3, padding=1), nn.BatchNorm2d(out), nn.ReLU(),
                           nn.MaxPool2d((1, 4 if ch == 1 else 2)), nn.Dropout(0.25)]  # fmt: skip
                ch = out
            self.cnn = nn.Sequential(*blocks)
            self.gru = nn.GRU(32 * 2, 32, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(64, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.cnn(x)  # (b, c, t, f)
            h = h.permute(0, 2, 1, 3).flatten(2)
            h, _ = self.gru(h)
            return self.fc(h).max(dim=1).values  # clip-level logits

    model = CRNN()
    if bug == "dead_relu_init":  # a "positive-output" init copied onto the conv layers, sign flipped
        for m in model.cnn:
            if isinstance(m, nn.Conv2d):
                nn.init.uniform_(m.weight, -0.01, 0.01)
                nn.init.constant_(m.bias, -2.0)
            if isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.bias, -2.0)
    criterion = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset(spec[:832], tags[:832]), batch_size=32, shuffle=True)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _ in range(epochs):
        model.train()
        for xb, yb in loader:
            loss = criterion(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            criterion(model(spec[832:]), tags[832:])
    hook.close()
    return losses


# ============================================================================= Hugging Face Trainer


def hf_bart_summarisation(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Summarisation as `run_summarization.py` runs it, on a tiny random `BartForConditionalGeneration`
    (2+2 layers, d_model 64): `Seq2SeqTrainer`, `Seq2SeqTrainingArguments(predict_with_generate=
    False)`, the labels padded with -100 (`DataCollatorForSeq2Seq(label_pad_token_id=-100)`),
    AdamW lr 5e-4 with linear decay, batch 32, 5 epochs. The "articles": 30 tokens of filler with
    four to six content words; the "summary": the content words in order."""
    from transformers import (
        BartConfig,
        BartForConditionalGeneration,
        Seq2SeqTrainer,
        Seq2SeqTrainingArguments,
    )

    g = _seed(seed)
    pad, bos, eos, vocab, n, length = 1, 0, 2, 90, 1408, 30
    src = torch.randint(4, 60, (n, length), generator=g)
    labels = torch.full((n, 8), -100)
    for i in range(n):
        k = int(torch.randint(4, 7, (1,), generator=g))
        where = torch.randperm(length - 2, generator=g)[:k].sort().values + 1
        words = torch.randint(60, vocab, (k,), generator=g)
        src[i, where] = words
        labels[i, :k], labels[i, k] = words, eos
    src[:, 0], src[:, -1] = bos, eos
    config = BartConfig(
        vocab_size=vocab, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64,
        pad_token_id=pad, bos_token_id=bos, eos_token_id=eos, decoder_start_token_id=eos,
        forced_eos_token_id=eos,
    )  # fmt: skip
    model = BartForConditionalGeneration(config)
    mask = torch.ones_like(src)
    train = _Examples(input_ids=src[:1280], attention_mask=mask[:1280], labels=labels[:1280])
    val = _Examples(input_ids=src[1280:], attention_mask=mask[1280:], labels=labels[1280:])
    return _hf_train(
        path, model, train, val, trainer_cls=Seq2SeqTrainer, args_cls=Seq2SeqTrainingArguments,
        predict_with_generate=False, num_train_epochs=5, per_device_train_batch_size=32, learning_rate=5e-4,
    )  # fmt: skip


def hf_roberta_token_classification(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Named-entity tagging as `run_ner.py` runs it, on a tiny random `RobertaForTokenClassification`:
    BIO tags for two entity types (PER, LOC: 5 labels), `<s>` / `</s>` and padding labelled -100
    (`DataCollatorForTokenClassification`), lr 5e-4 (from scratch), weight decay 0.01, linear
    decay, batch 16, 3 epochs. Entities: runs of one to three words from each type's lexicon,
    often after a cue word ("mr", "in")."""
    from transformers import RobertaConfig, RobertaForTokenClassification

    g = _seed(seed)
    bos, pad, eos, vocab, n, length = 0, 1, 2, 100, 1200, 20
    per, loc, cue_per, cue_loc = range(40, 65), range(65, 90), 90, 91
    ids = torch.full((n, length + 2), pad)
    tags = torch.full((n, length + 2), -100)
    for i in range(n):
        words: list[int] = []
        labels: list[int] = []
        target = int(torch.randint(10, length + 1, (1,), generator=g))
        while len(words) < target:
            r = float(torch.rand(1, generator=g))
            if r < 0.15 or r > 0.9:
                lex, b, cue = (per, 1, cue_per) if r < 0.15 else (loc, 3, cue_loc)
                if float(torch.rand(1, generator=g)) < 0.6:
                    words.append(cue)
                    labels.append(0)
                k = int(torch.randint(1, 4, (1,), generator=g))
                for j in range(k):
                    words.append(lex[int(torch.randint(0, len(lex), (1,), generator=g))])
                    labels.append(b if j == 0 else b + 1)
            else:
                words.append(int(torch.randint(3, 40, (1,), generator=g)))
                labels.append(0)
        words, labels = words[:length], labels[:length]
        ids[i, 0], ids[i, 1 : len(words) + 1], ids[i, len(words) + 1] = bos, torch.tensor(words), eos
        tags[i, 1 : len(words) + 1] = torch.tensor(labels)
    if bug == "shuffled_labels":  # the tag column re-sorted apart from the sentences
        tags = tags[torch.randperm(n, generator=g)]
    mask = (ids != pad).long()
    config = RobertaConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=length + 4, pad_token_id=pad, bos_token_id=bos, eos_token_id=eos, num_labels=5,
        type_vocab_size=1,
    )  # fmt: skip
    model = RobertaForTokenClassification(config)
    train = _Examples(input_ids=ids[:1056], attention_mask=mask[:1056], labels=tags[:1056])
    val = _Examples(input_ids=ids[1056:], attention_mask=mask[1056:], labels=tags[1056:])
    return _hf_train(
        path, model, train, val, num_train_epochs=3, per_device_train_batch_size=16, learning_rate=5e-4,
        weight_decay=0.01,
    )  # fmt: skip


def hf_swin_image_classification(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Image classification as `run_image_classification.py` runs it, on a tiny random
    `SwinForImageClassification` (patch 2, embed dim 32, depths [2, 2], windows of 4): uint8
    images rescaled by 1/255 and normalized with the ImageNet mean and std (the image processor's
    `do_rescale` and `do_normalize`), AdamW lr 5e-4, weight decay 0.05, cosine with 10% warm-up,
    batch 32, 4 epochs, `remove_unused_columns=False`."""
    from transformers import SwinConfig, SwinForImageClassification

    g = _seed(seed)
    x, y = _images(g, 1536, size=16, proto_seed=313)
    pixels = (x * 255).round().to(torch.uint8)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    scaled = pixels.float() if bug == "inputs_x255" else pixels.float() / 255  # do_rescale=False by mistake
    pixel_values = (scaled - mean) / std
    config = SwinConfig(
        image_size=16, patch_size=2, num_channels=3, embed_dim=32, depths=[2, 2], num_heads=[2, 4],
        window_size=4, drop_path_rate=0.1, num_labels=10,
    )  # fmt: skip
    model = SwinForImageClassification(config)
    train = _Examples(pixel_values=pixel_values[:1280], labels=y[:1280])
    val = _Examples(pixel_values=pixel_values[1280:], labels=y[1280:])
    return _hf_train(
        path, model, train, val, num_train_epochs=4, per_device_train_batch_size=32, learning_rate=5e-4,
        weight_decay=0.05, lr_scheduler_type="cosine", warmup_steps=0.1, remove_unused_columns=False,
    )  # fmt: skip


def _tone_clips(
    g: torch.Generator, n: int, frames: int, bins: int, tones: int, per_clip: tuple[int, int]
) -> Any:
    """Log-mel-like features (n, bins, frames): each clip a few "phones", each a fixed spectral
    shape held for a random duration, and the phone sequence."""
    pg = torch.Generator().manual_seed(707)
    shapes = torch.randn(tones, bins, generator=pg)
    feats = 0.3 * torch.randn(n, bins, frames, generator=g)
    seqs = []
    for i in range(n):
        k = int(torch.randint(per_clip[0], per_clip[1] + 1, (1,), generator=g))
        seq = torch.randint(0, tones, (k,), generator=g)
        bounds = torch.linspace(0, frames, k + 1).long()
        for j in range(k):
            feats[i, :, bounds[j] : bounds[j + 1]] += shapes[seq[j]][:, None]
        seqs.append(seq)
    return feats, seqs


def hf_whisper_speech_recognition(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The "fine-tune Whisper" recipe (`Seq2SeqTrainer`) on a tiny random `WhisperForConditionalGeneration`
    (16 mel bins, 50 input frames, 2+2 layers): `input_features` from the feature extractor, the
    labels' leading decoder start token cut and padding replaced by -100 (the recipe's
    `DataCollatorSpeechSeq2SeqWithPadding`), lr 1e-3 (from scratch; the recipe's 1e-5 is for the
    pretrained model), 50 warm-up steps, linear decay, batch 16."""
    from transformers import (
        Seq2SeqTrainer,
        Seq2SeqTrainingArguments,
        WhisperConfig,
        WhisperForConditionalGeneration,
    )

    g = _seed(seed)
    n, bins, frames, tones = 1152, 16, 50, 12
    feats, seqs = _tone_clips(g, n, frames, bins, tones, (2, 5))
    feats = (feats - feats.mean()) / feats.std()
    start, eos, pad = 3, 2, 1
    labels = torch.full((n, 7), -100)
    for i, seq in enumerate(seqs):
        labels[i, : len(seq)], labels[i, len(seq)] = seq + 4, eos
    config = WhisperConfig(
        vocab_size=4 + tones, num_mel_bins=bins, d_model=64, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
        max_source_positions=frames // 2, max_target_positions=16, pad_token_id=pad, bos_token_id=start,
        eos_token_id=eos, decoder_start_token_id=start, suppress_tokens=[], begin_suppress_tokens=[],
    )  # fmt: skip
    model = WhisperForConditionalGeneration(config)
    train = _Examples(input_features=feats[:1024], labels=labels[:1024])
    val = _Examples(input_features=feats[1024:], labels=labels[1024:])
    return _hf_train(
        path, model, train, val, trainer_cls=Seq2SeqTrainer, args_cls=Seq2SeqTrainingArguments,
        predict_with_generate=False, num_train_epochs=3, per_device_train_batch_size=16, learning_rate=1e-3,
        warmup_steps=50, remove_unused_columns=False,
    )  # fmt: skip


def hf_ast_audio_classification(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Audio classification as `run_audio_classification.py` runs it, on a tiny random
    `ASTForAudioClassification` (Audio Spectrogram Transformer: 16x16 patches with stride 8 over
    (48 frames, 16 mel bins), 2 layers): features normalized with the extractor's mean and std,
    lr 3e-4 (from scratch), warm-up 10%, linear decay, batch 32, 5 epochs. The class: which
    of 5 "phones" fills the clip."""
    from transformers import ASTConfig, ASTForAudioClassification

    g = _seed(seed)
    n, bins, frames = 1280, 16, 48
    feats, seqs = _tone_clips(g, n, frames, bins, 5, (1, 1))
    label = torch.stack([s[0] for s in seqs])
    input_values = feats.transpose(1, 2)
    input_values = (input_values - input_values.mean()) / (2 * input_values.std())
    config = ASTConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, patch_size=16,
        frequency_stride=8, time_stride=8, max_length=frames, num_mel_bins=bins, num_labels=5,
    )  # fmt: skip
    model = ASTForAudioClassification(config)
    train = _Examples(input_values=input_values[:1152], labels=label[:1152])
    val = _Examples(input_values=input_values[1152:], labels=label[1152:])
    return _hf_train(
        path, model, train, val, num_train_epochs=5, per_device_train_batch_size=32, learning_rate=3e-4,
        warmup_steps=0.1, remove_unused_columns=False,
    )  # fmt: skip


def hf_phi_clm_packing(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Causal-LM pre-training as `run_clm.py` runs it with packing, on a tiny random `PhiForCausalLM`
    (parallel attention and MLP, partial rotary 0.5): documents of a Markov "language" joined with
    an end-of-text token and cut into blocks of 32 (`group_texts`), `labels = input_ids`,
    gradient accumulation 4, cosine schedule with 5% warm-up, lr 1e-3, weight decay 0.1, batch 8,
    fp32 on the CPU."""
    from transformers import PhiConfig, PhiForCausalLM

    g = _seed(seed)
    vocab, block = 96, 32
    docs = []
    for _ in range(1000):
        length = int(torch.randint(20, 120, (1,), generator=g))
        docs.append(torch.cat([1 + _markov_tokens(g, length, vocab - 1, order_seed=23), torch.tensor([0])]))
    stream = torch.cat(docs)
    total = len(stream) // block * block
    blocks = stream[:total].view(-1, block)
    config = PhiConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=block, partial_rotary_factor=0.5, bos_token_id=0, eos_token_id=0,
        resid_pdrop=0.0, embd_pdrop=0.0,
    )  # fmt: skip
    model = PhiForCausalLM(config)
    cut = len(blocks) - 64
    train = _Examples(input_ids=blocks[:cut], labels=blocks[:cut])
    val = _Examples(input_ids=blocks[cut:], labels=blocks[cut:])
    return _hf_train(
        path, model, train, val, num_train_epochs=3, per_device_train_batch_size=8, gradient_accumulation_steps=4,
        learning_rate=1e-3, weight_decay=0.1, lr_scheduler_type="cosine", warmup_steps=0.05,
    )  # fmt: skip


def hf_distilbert_custom_collator(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Sentiment classification on a tiny random `DistilBertForSequenceClassification` with the
    user's own data collator (dynamic padding to the longest of the batch, `[CLS]`/`[SEP]`
    added, an attention mask), gradient accumulation 2, cosine schedule with 10% warm-up, lr
    5e-4, weight decay 0.01, batch 16, 3 epochs."""
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    g = _seed(seed)
    texts, labels = _review_texts(g, 2000)
    cls, sep, pad = 101, 102, 0

    def collate(features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        longest = max(len(f["text"]) for f in features) + 2
        input_ids = torch.full((len(features), longest), pad)
        attention_mask = torch.zeros(len(features), longest, dtype=torch.long)
        for i, f in enumerate(features):
            ids = [cls, *f["text"], sep]
            input_ids[i, : len(ids)] = torch.tensor(ids)
            attention_mask[i, : len(ids)] = 1
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "labels": torch.tensor([f["label"] for f in features]),
        }

    config = DistilBertConfig(
        vocab_size=256, dim=64, n_layers=2, n_heads=4, hidden_dim=128, max_position_embeddings=64, num_labels=2,
        pad_token_id=pad,
    )  # fmt: skip
    model = DistilBertForSequenceClassification(config)
    train = _Examples(text=texts[:1760], label=labels[:1760].tolist())
    val = _Examples(text=texts[1760:], label=labels[1760:].tolist())
    return _hf_train(
        path, model, train, val, collator=collate, num_train_epochs=3, per_device_train_batch_size=16,
        gradient_accumulation_steps=2, learning_rate=5e-4, weight_decay=0.01, lr_scheduler_type="cosine",
        warmup_steps=0.1, remove_unused_columns=False,
    )  # fmt: skip


def hf_gpt2_sequence_classification(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Sequence classification with a decoder-only model, as users of `GPT2ForSequenceClassification`
    set it up: `pad_token = eos_token` (`config.pad_token_id` set so the last non-pad token is
    pooled), right padding to 48, lr 5e-4, warm-up 50 steps, linear decay, batch 16, 3 epochs."""
    from transformers import GPT2Config, GPT2ForSequenceClassification

    g = _seed(seed)
    texts, labels = _review_texts(g, 1520)
    eos = 255
    ids = torch.full((len(texts), 48), eos)
    mask = torch.zeros(len(texts), 48, dtype=torch.long)
    for i, t in enumerate(texts):
        ids[i, : len(t)] = torch.tensor(t)
        mask[i, : len(t)] = 1
    config = GPT2Config(
        vocab_size=256, n_positions=48, n_embd=64, n_layer=2, n_head=4, num_labels=2, pad_token_id=eos,
        eos_token_id=eos, bos_token_id=eos,
    )  # fmt: skip
    model = GPT2ForSequenceClassification(config)
    train = _Examples(input_ids=ids[:1280], attention_mask=mask[:1280], labels=labels[:1280])
    val = _Examples(input_ids=ids[1280:], attention_mask=mask[1280:], labels=labels[1280:])
    return _hf_train(
        path, model, train, val, num_train_epochs=3, per_device_train_batch_size=16, learning_rate=5e-4,
        warmup_steps=50,
    )  # fmt: skip


# ============================================================================= Lightning


def _tabular(
    g: torch.Generator, n: int, d: int, classes: int, mix_seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Standardized features and labels from a nonlinear teacher (class = argmax of a random
    two-layer net's logits plus Gumbel noise)."""
    pg = torch.Generator().manual_seed(mix_seed)
    w1, w2 = torch.randn(d, 32, generator=pg), torch.randn(32, classes, generator=pg)
    x = torch.randn(n, d, generator=g)
    logits = torch.tanh(x @ w1 / math.sqrt(d)) @ w2 * 1.5
    gumbel = -torch.log(-torch.log(torch.rand(n, classes, generator=g).clamp(1e-9, 1 - 1e-9)))
    return x, (logits + gumbel).argmax(1)


def lit_ema_callback_mlp(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """A LightningModule MLP classifier with the user's own EMA callback (a `torch.optim.swa_utils.
    AveragedModel` with `get_ema_multi_avg_fn(0.999)` updated in `on_train_batch_end`, used for
    validation), Adam(1e-3), dropout 0.1, batch 64, 7 classes of tabular data."""
    import lightning.pytorch as pl
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    g = _seed(seed)
    x, y = _tabular(g, 4000, 24, 7, mix_seed=808)

    class MLP(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            if bug == "deep_sigmoid":  # "a deeper net with smooth activations"
                layers: list[nn.Module] = []
                width = 24
                for _ in range(8):
                    layers += [nn.Linear(width, 128), nn.Sigmoid()]
                    width = 128
                self.net = nn.Sequential(*layers, nn.Linear(128, 7))
            else:
                self.net = nn.Sequential(
                    nn.Linear(24, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 128), nn.ReLU(), nn.Dropout(0.1),
                    nn.Linear(128, 7),
                )  # fmt: skip

        def forward(self, xb: torch.Tensor) -> torch.Tensor:
            return self.net(xb)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            loss = F.cross_entropy(self(xb), yb)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            xb, yb = batch
            self.log("val_loss", F.cross_entropy(self(xb), yb))

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    class EMA(pl.Callback):
        def __init__(self, decay: float = 0.999) -> None:
            self.decay = decay
            self.ema: Any = None

        def on_fit_start(self, trainer: Any, module: Any) -> None:
            self.ema = AveragedModel(module.net, multi_avg_fn=get_ema_multi_avg_fn(self.decay))

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            self.ema.update_parameters(module.net)

        def on_validation_epoch_end(self, trainer: Any, module: Any) -> None:
            xb, yb = x[3500:], y[3500:]
            with torch.no_grad():
                F.cross_entropy(self.ema(xb), yb)

    train = DataLoader(TensorDataset(x[:3500], y[:3500]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(x[3500:], y[3500:]), batch_size=256)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history, EMA()], max_epochs=epochs)
    trainer.fit(MLP(), train, val)
    return history.losses


def lit_plateau_scheduler_dict(
    path: str, epochs: int = 12, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A LightningModule regressor whose `configure_optimizers` returns the dict form
    `{"optimizer": Adam(1e-3), "lr_scheduler": {"scheduler": ReduceLROnPlateau(factor=0.5,
    patience=2), "monitor": "val_loss"}}`; standardized housing-like features and a log-price
    target, MSE, batch 32."""
    import lightning.pytorch as pl

    g = _seed(seed)
    n = 3000
    x = torch.randn(n, 8, generator=g)
    price = 0.8 * x[:, 0] + 0.3 * x[:, 1] ** 2 - 0.4 * x[:, 2] * x[:, 3] + 0.2 * torch.sin(3 * x[:, 4])
    price = price + 0.3 * torch.randn(n, generator=g)
    y = ((price - price.mean()) / price.std())[:, None]

    class Regressor(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)
            )

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            loss = F.mse_loss(self.net(xb), yb)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            xb, yb = batch
            self.log("val_loss", F.mse_loss(self.net(xb), yb))

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.Adam(self.parameters(), lr=1e-3)
            scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=2)
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "monitor": "val_loss"}}

    train = DataLoader(TensorDataset(x[:2500], y[:2500]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(x[2500:], y[2500:]), batch_size=250)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(Regressor(), train, val)
    return history.losses


def lit_datamodule_gru_clip_norm(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A `LightningDataModule` (`setup` builds the splits, padded batches from a `collate_fn`) and an
    embedding + GRU text classifier over the packed final state; `Trainer(gradient_clip_val=1.0,
    gradient_clip_algorithm="norm")`, Adam(1e-3), batch 32, the review-polarity task."""
    import lightning.pytorch as pl

    g = _seed(seed)

    class ReviewsDataModule(pl.LightningDataModule):
        def __init__(self, batch_size: int = 32) -> None:
            super().__init__()
            self.batch_size = batch_size

        def setup(self, stage: str | None = None) -> None:
            texts, labels = _review_texts(g, 2000)
            pairs = list(zip(texts, labels.tolist(), strict=True))
            self.train_set, self.val_set = pairs[:1760], pairs[1760:]

        @staticmethod
        def collate(batch: list[Any]) -> Any:
            lengths = torch.tensor([len(t) for t, _ in batch])
            ids = nn.utils.rnn.pad_sequence([torch.tensor(t) for t, _ in batch], batch_first=True)
            return ids, lengths, torch.tensor([label for _, label in batch])

        def train_dataloader(self) -> DataLoader:
            return DataLoader(
                self.train_set, batch_size=self.batch_size, shuffle=True, collate_fn=self.collate
            )

        def val_dataloader(self) -> DataLoader:
            return DataLoader(self.val_set, batch_size=120, collate_fn=self.collate)

    class GRUClassifier(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(256, 64, padding_idx=0)
            self.gru = nn.GRU(64, 64, batch_first=True)
            self.fc = nn.Linear(64, 2)

        def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
            packed = nn.utils.rnn.pack_padded_sequence(
                self.embedding(ids), lengths, batch_first=True, enforce_sorted=False
            )
            _, h = self.gru(packed)
            logits = self.fc(h[-1])
            if bug == "softmax_before_ce":  # "the model should output probabilities"
                return logits.softmax(-1)
            return logits

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            ids, lengths, yb = batch
            loss = F.cross_entropy(self(ids, lengths), yb)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            ids, lengths, yb = batch
            self.log("val_loss", F.cross_entropy(self(ids, lengths), yb))

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    history = _pl_losses()
    trainer = _pl_trainer(
        path, [history], max_epochs=epochs, gradient_clip_val=1.0, gradient_clip_algorithm="norm"
    )
    trainer.fit(GRUClassifier(), datamodule=ReviewsDataModule())
    return history.losses


def lit_accumulate_val_check_cnn1d(
    path: str, epochs: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A 1-D CNN classifying noisy waveforms (sine, square, sawtooth, triangle, chirp) as a
    LightningModule with `Trainer(accumulate_grad_batches=4, val_check_interval=0.25)`,
    SGD(lr 0.05, momentum 0.9, weight decay 5e-4) on a `CosineAnnealingLR` stepped per epoch,
    batch 32."""
    import lightning.pytorch as pl

    g = _seed(seed)
    n, length = 4096, 128
    t = torch.linspace(0, 1, length)
    kind = torch.randint(0, 5, (n,), generator=g)
    freq = 2 + 6 * torch.rand(n, 1, generator=g)
    phase = 2 * math.pi * torch.rand(n, 1, generator=g)
    arg = 2 * math.pi * freq * t + phase
    saw = 2 * ((arg / (2 * math.pi)) % 1) - 1
    waves = torch.stack([
        torch.sin(arg), torch.sign(torch.sin(arg)), saw, 2 * saw.abs() - 1,
        torch.sin(2 * math.pi * (freq * t + 4 * t**2) + phase),
    ], 1)  # fmt: skip
    x = waves[torch.arange(n), kind] + 0.3 * torch.randn(n, length, generator=g)
    x = x[:, None]

    class WaveCNN(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(
                nn.Conv1d(1, 16, 7, padding=3), nn.BatchNorm1d(16), nn.ReLU(), nn.MaxPool1d(2),
                nn.Conv1d(16, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ReLU(), nn.MaxPool1d(2),
                nn.Conv1d(32, 32, 3, padding=1), nn.BatchNorm1d(32), nn.ReLU(), nn.AdaptiveAvgPool1d(1),
                nn.Flatten(), nn.Linear(32, 5),
            )  # fmt: skip

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            loss = F.cross_entropy(self.net(xb), yb)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            xb, yb = batch
            self.log("val_loss", F.cross_entropy(self.net(xb), yb))

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
            return [optimizer], [torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)]

    train = DataLoader(TensorDataset(x[:3584], kind[:3584]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(x[3584:], kind[3584:]), batch_size=256)
    history = _pl_losses()
    trainer = _pl_trainer(
        path, [history], max_epochs=epochs, accumulate_grad_batches=4, val_check_interval=0.25
    )
    trainer.fit(WaveCNN(), train, val)
    return history.losses


def lit_transformer_warmup_step_interval(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Transformer-encoder token tagger as a LightningModule (for each token: has it appeared
    earlier in the sequence?), `configure_optimizers` returning AdamW(lr 1e-3, weight decay
    0.01) with a `LambdaLR` linear warm-up (100 steps) then inverse-sqrt decay, `{"interval":
    "step"}`, per-token `BCEWithLogitsLoss`, batch 32."""
    import lightning.pytorch as pl

    g = _seed(seed)
    n, length, vocab = 1600, 24, 40
    ids = torch.randint(0, vocab, (n, length), generator=g)
    seen = torch.zeros(n, length)
    for j in range(1, length):
        seen[:, j] = (ids[:, :j] == ids[:, j : j + 1]).any(1).float()

    class Tagger(pl.LightningModule):
        def __init__(self, d: int = 64) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.randn(length, d) * 0.02)
            layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(d, 1)
            self.criterion = nn.BCEWithLogitsLoss()
            self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(length))

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            h = self.encoder(self.embed(tokens) + self.pos, mask=self.causal, is_causal=True)
            return self.head(h).squeeze(-1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            tokens, target = batch
            loss = self.criterion(self(tokens), target)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            tokens, target = batch
            self.log("val_loss", self.criterion(self(tokens), target))

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.AdamW(self.parameters(), lr=1e-3, weight_decay=0.01)
            warmup = 100

            def lr_lambda(step: int) -> float:
                return (step + 1) / warmup if step < warmup else math.sqrt(warmup / (step + 1))

            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    train = DataLoader(TensorDataset(ids[:1408], seen[:1408]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(ids[1408:], seen[1408:]), batch_size=192)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(Tagger(), train, val)
    return history.losses


def lit_simsiam(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """SimSiam (Chen & He 2021) as a LightningModule: a small CNN encoder with a 2-layer projection
    MLP (BN, last BN without affine), a bottleneck predictor, the symmetric negative cosine loss
    with stop-gradient on the targets; two augmented views (random crops, flips, colour jitter,
    noise); SGD(lr 0.05 * batch / 256, momentum 0.9, weight decay 1e-4) on a per-epoch cosine
    schedule, predictor at a fixed lr, batch 64. The loss goes from about 0 toward -1."""
    import lightning.pytorch as pl

    g = _seed(seed)
    images, _ = _images(g, 1536, size=18, proto_seed=919)

    def augment(xb: torch.Tensor) -> torch.Tensor:
        b = len(xb)
        i, j = torch.randint(0, 3, (2,)).tolist()
        v = xb[:, :, i : i + 16, j : j + 16]
        flip = torch.rand(b) < 0.5
        v = torch.where(flip[:, None, None, None], v.flip(3), v)
        v = v * (0.6 + 0.8 * torch.rand(b, 3, 1, 1)) + 0.2 * (torch.rand(b, 1, 1, 1) - 0.5)
        return v + 0.05 * torch.randn_like(v)

    class SimSiam(pl.LightningModule):
        def __init__(self, dim: int = 128, pred_dim: int = 32) -> None:
            super().__init__()
            self.encoder = nn.Sequential(
                nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
                nn.Linear(64, dim, bias=False), nn.BatchNorm1d(dim), nn.ReLU(),
                nn.Linear(dim, dim, bias=False), nn.BatchNorm1d(dim, affine=False),
            )  # fmt: skip
            self.predictor = nn.Sequential(
                nn.Linear(dim, pred_dim, bias=False),
                nn.BatchNorm1d(pred_dim),
                nn.ReLU(),
                nn.Linear(pred_dim, dim),
            )
            self.criterion = nn.CosineSimilarity(dim=1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            (xb,) = batch
            z1, z2 = self.encoder(augment(xb)), self.encoder(augment(xb))
            p1, p2 = self.predictor(z1), self.predictor(z2)
            loss = -(self.criterion(p1, z2.detach()).mean() + self.criterion(p2, z1.detach()).mean()) * 0.5
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self) -> Any:
            init_lr = 0.05 * 64 / 256
            optimizer = torch.optim.SGD(
                [{"params": self.encoder.parameters(), "fix_lr": False},
                 {"params": self.predictor.parameters(), "fix_lr": True}],
                lr=init_lr, momentum=0.9, weight_decay=1e-4,
            )  # fmt: skip
            scale = [0.5 * (1 + math.cos(math.pi * e / epochs)) for e in range(epochs + 1)]
            scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, [lambda e: scale[e], lambda e: 1.0])
            return [optimizer], [scheduler]

    train = DataLoader(TensorDataset(images), batch_size=64, shuffle=True, drop_last=True)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(SimSiam(), train)
    return history.losses


# ============================================================================= Keras 3 (TensorFlow backend)


def keras_subclassed_resnet_plateau(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """A subclassed `keras.Model` built from a subclassed residual `keras.layers.Layer` (conv, BN,
    ReLU, conv, BN, add), `compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3), loss=
    SparseCategoricalCrossentropy(from_logits=True))`, `ReduceLROnPlateau(monitor="val_loss",
    factor=0.2, patience=2, min_lr=1e-5)`, batch 64, `validation_split=0.1`, images in [0, 1]."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images, labels = _images(g, 1536, size=16, proto_seed=222)
    x, y = images.permute(0, 2, 3, 1).numpy(), labels.numpy()

    class ResidualBlock(layers.Layer):
        def __init__(self, filters: int, **kw: Any) -> None:
            super().__init__(**kw)
            self.conv1 = layers.Conv2D(filters, 3, padding="same", use_bias=False)
            self.bn1 = layers.BatchNormalization()
            self.conv2 = layers.Conv2D(filters, 3, padding="same", use_bias=False)
            self.bn2 = layers.BatchNormalization()

        def call(self, inputs: Any, training: bool = False) -> Any:
            h = keras.activations.relu(self.bn1(self.conv1(inputs), training=training))
            h = self.bn2(self.conv2(h), training=training)
            return keras.activations.relu(h + inputs)

    class SmallResNet(keras.Model):
        def __init__(self, classes: int = 10, **kw: Any) -> None:
            super().__init__(**kw)
            self.stem = layers.Conv2D(32, 3, padding="same", activation="relu")
            self.block1 = ResidualBlock(32)
            self.pool = layers.MaxPooling2D(2)
            self.block2 = ResidualBlock(32)
            self.gap = layers.GlobalAveragePooling2D()
            self.classifier = layers.Dense(classes)

        def call(self, inputs: Any, training: bool = False) -> Any:
            h = self.block1(self.pool(self.stem(inputs)), training=training)
            h = self.block2(self.pool(h), training=training)
            return self.classifier(self.gap(h))

    model = SmallResNet()
    lr = 1e-3 * (100 if bug == "lr_x100" else 1)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=lr),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    history = _keras_losses()
    model.fit(
        x, y, batch_size=64, epochs=5, validation_split=0.1, verbose=0,
        callbacks=[
            mldbg.keras.Hook(path), history,
            keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.2, patience=2, min_lr=1e-5),
        ],
    )  # fmt: skip
    return history.losses


def keras_structured_data_preprocessing_layers(
    path: str, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The Keras example "Structured data classification with FeatureSpace"-style preprocessing,
    with the layers themselves: `Normalization().adapt()` on numeric columns, `StringLookup(
    output_mode="one_hot")` on a string column, `IntegerLookup(output_mode="one_hot")` on an
    integer category, concatenated in a functional model (Dense 32 relu, Dropout 0.5, Dense 1
    sigmoid), `compile("adam", "binary_crossentropy")`, batch 32, 20 epochs, a heart-disease-like
    table of 1000 patients."""
    import keras
    import tensorflow as tf
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    n = 1000
    age = rng.normal(54, 9, n).round()
    chol = rng.normal(246, 50, n)
    thalach = rng.normal(150, 22, n) - 0.5 * (age - 54)
    oldpeak = np.abs(rng.normal(1.0, 1.1, n))
    cp = rng.integers(0, 4, n)
    thal = rng.choice(np.array(["normal", "fixed", "reversible"]), n, p=[0.55, 0.1, 0.35])
    logit = (0.05 * (age - 54) + 0.004 * (chol - 246) - 0.03 * (thalach - 150) + 0.8 * oldpeak - 0.9
             + np.array([0.0, -0.8, 0.4, 1.0])[cp] + np.where(thal == "reversible", 1.2, 0.0))  # fmt: skip
    target = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype("float32")
    numeric = np.stack([age, chol, thalach, oldpeak], 1).astype("float32")

    num_in = keras.Input(shape=(4,), name="numeric")
    cp_in = keras.Input(shape=(1,), name="cp", dtype="int64")
    thal_in = keras.Input(shape=(1,), name="thal", dtype="string")
    norm = layers.Normalization()
    norm.adapt(numeric[:800])
    cp_lookup = layers.IntegerLookup(output_mode="one_hot")
    cp_lookup.adapt(cp[:800])
    thal_lookup = layers.StringLookup(output_mode="one_hot")
    thal_lookup.adapt(thal[:800])
    features = layers.concatenate([norm(num_in), cp_lookup(cp_in), thal_lookup(thal_in)])
    x = layers.Dense(32, activation="relu")(features)
    x = layers.Dropout(0.5)(x)
    output = layers.Dense(1, activation="sigmoid")(x)
    model = keras.Model([num_in, cp_in, thal_in], output)
    model.compile("adam", "binary_crossentropy", metrics=["accuracy"])
    history = _keras_losses()
    # string columns go in as TensorFlow string tensors (NumPy's fixed-width unicode is refused)
    inputs = {"numeric": numeric, "cp": cp[:, None].astype("int64"), "thal": tf.constant(thal[:, None])}
    train = {k: v[:800] for k, v in inputs.items()}
    val = {k: v[800:] for k, v in inputs.items()}
    model.fit(
        train, target[:800], batch_size=32, epochs=12, validation_data=(val, target[800:]), verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_augmentation_layers_cosine_sgd(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """A `keras.Sequential` image classifier with the augmentation inside the model (`Rescaling(1 /
    255)`, `RandomFlip("horizontal")`, `RandomTranslation(0.1, 0.1)`, `RandomContrast(0.2)`), a
    separable-conv body, `SGD(learning_rate=CosineDecay(0.05, decay_steps), momentum=0.9)`, uint8
    images, batch 64, 5 epochs."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images, labels = _images(g, 1536, size=16, classes=8, proto_seed=333)
    x = (images.permute(0, 2, 3, 1) * 255).round().numpy().astype("uint8")
    y = labels.numpy()
    epochs, batch = 5, 64
    decay_steps = epochs * math.ceil(1382 / batch)
    model = keras.Sequential([
        keras.Input(shape=(16, 16, 3)),
        layers.Rescaling(1.0 / 255),
        layers.RandomFlip("horizontal"),
        layers.RandomTranslation(0.1, 0.1),
        layers.RandomContrast(0.2),
        layers.Conv2D(32, 3, padding="same", use_bias=False), layers.BatchNormalization(), layers.Activation("relu"),
        layers.SeparableConv2D(64, 3, padding="same", use_bias=False), layers.BatchNormalization(),
        layers.Activation("relu"), layers.MaxPooling2D(2),
        layers.SeparableConv2D(64, 3, padding="same", use_bias=False), layers.BatchNormalization(),
        layers.Activation("relu"), layers.GlobalAveragePooling2D(),
        layers.Dropout(0.25),
        layers.Dense(8, activation="softmax"),
    ])  # fmt: skip
    model.compile(
        optimizer=keras.optimizers.SGD(
            keras.optimizers.schedules.CosineDecay(0.05, decay_steps), momentum=0.9
        ),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    history = _keras_losses()
    model.fit(
        x, y, batch_size=batch, epochs=epochs, validation_split=0.1, verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_timeseries_anomaly_conv1d_transpose(
    path: str, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The Keras example "Timeseries anomaly detection using an Autoencoder": windows of a
    standardized periodic sensor series, `Conv1D(32, 7, strides=2, padding="same",
    activation="relu")`, `Dropout(0.2)`, `Conv1D(16, ...)`, then `Conv1DTranspose` back up,
    `Adam(learning_rate=0.001)`, `loss="mse"`, batch 128, `validation_split=0.1`, `EarlyStopping(
    monitor="val_loss", patience=5, mode="min")` (windows of 64 instead of 288)."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    t = np.arange(6000)
    series = (
        np.sin(2 * np.pi * t / 48) + 0.4 * np.sin(2 * np.pi * t / 11 + 1.0) + 0.1 * rng.normal(size=len(t))
    )
    series = (series - series.mean()) / series.std()
    steps = 64
    x_train = np.stack([series[i : i + steps] for i in range(0, len(series) - steps, 3)])[..., None]
    model = keras.Sequential([
        layers.Input(shape=(steps, 1)),
        layers.Conv1D(filters=32, kernel_size=7, padding="same", strides=2, activation="relu"),
        layers.Dropout(rate=0.2),
        layers.Conv1D(filters=16, kernel_size=7, padding="same", strides=2, activation="relu"),
        layers.Conv1DTranspose(filters=16, kernel_size=7, padding="same", strides=2, activation="relu"),
        layers.Dropout(rate=0.2),
        layers.Conv1DTranspose(filters=32, kernel_size=7, padding="same", strides=2, activation="relu"),
        layers.Conv1DTranspose(filters=1, kernel_size=7, padding="same"),
    ])  # fmt: skip
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="mse")
    history = _keras_losses()
    model.fit(
        x_train, x_train, epochs=12, batch_size=128, validation_split=0.1, verbose=0,
        callbacks=[
            mldbg.keras.Hook(path), history,
            keras.callbacks.EarlyStopping(monitor="val_loss", patience=5, mode="min"),
        ],
    )  # fmt: skip
    return history.losses


def keras_lstm_weather_forecasting(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras example "Timeseries forecasting for weather prediction": a multivariate hourly
    series (temperature, pressure, humidity, wind) normalized with the training mean and std,
    `keras.utils.timeseries_dataset_from_array` windows of 72 hours sampled every 6 to predict
    the temperature 72 hours after the window starts, `LSTM(32)`, `Dense(1)`, `Adam(
    learning_rate=0.001)`, `loss="mse"`, batch 256, `EarlyStopping(monitor="val_loss",
    patience=5)`."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    hours = np.arange(24000)
    seasonal = 10 * np.sin(2 * np.pi * hours / (24 * 365 / 8))
    daily = 4 * np.sin(2 * np.pi * hours / 24 - 1.5)
    weather = np.cumsum(rng.normal(0, 0.3, len(hours)))
    weather = weather - np.convolve(weather, np.ones(240) / 240, mode="same")
    temp = 12 + seasonal + daily + weather + rng.normal(0, 0.5, len(hours))
    pressure = 1010 - 0.8 * weather + rng.normal(0, 1, len(hours))
    humidity = 70 - 1.5 * daily + 2 * weather + rng.normal(0, 3, len(hours))
    wind = np.abs(3 + 0.5 * np.roll(weather, 12) + rng.normal(0, 1, len(hours)))
    features = np.stack([temp, pressure, humidity, wind], 1).astype("float32")
    split = 18000
    mean, std = features[:split].mean(0), features[:split].std(0)
    features = (features - mean) / std
    past, future, step, batch_size = 72, 72, 6, 256
    start = past + future
    x_end = split - past - future
    train = keras.utils.timeseries_dataset_from_array(
        features[:x_end], features[start : start + x_end, 0], sequence_length=past // step,
        sampling_rate=step, batch_size=batch_size,
    )  # fmt: skip
    val = keras.utils.timeseries_dataset_from_array(
        features[split : len(features) - start], features[split + start :, 0], sequence_length=past // step,
        sampling_rate=step, batch_size=batch_size,
    )  # fmt: skip
    inputs = keras.layers.Input(shape=(past // step, 4))
    lstm_out = layers.LSTM(32)(inputs)
    outputs = layers.Dense(1)(lstm_out)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="mse")
    history = _keras_losses()
    model.fit(
        train, epochs=4, validation_data=val, verbose=0,
        callbacks=[
            mldbg.keras.Hook(path), history, keras.callbacks.EarlyStopping(monitor="val_loss", patience=5),
        ],
    )  # fmt: skip
    return history.losses


# ============================================================================= JAX: Flax and optax


def flax_linen_lstm_text_classifier(
    path: str, steps: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Flax Linen text classifier: `nn.Embed`, `nn.RNN(nn.OptimizedLSTMCell(64))` run with
    `seq_lengths` over right-padded reviews, the last valid carry into a `Dense(2)`;
    `flax.training.train_state.TrainState.create(apply_fn, params, tx=optax.chain(
    optax.clip_by_global_norm(1.0), optax.adam(1e-3)))`, a jitted `train_step`, batch 64."""
    import flax.linen as fnn
    import jax
    import optax
    from flax.training import train_state

    import mldbg.jax

    g = _seed(seed)
    texts, labels = _review_texts(g, 2400)
    ids = np.zeros((len(texts), 40), dtype=np.int32)
    lengths = np.array([len(t) for t in texts], dtype=np.int32)
    for i, t in enumerate(texts):
        ids[i, : len(t)] = t
    y = labels.numpy()

    class LSTMClassifier(fnn.Module):
        @fnn.compact
        def __call__(self, tokens: Any, seq_lengths: Any) -> Any:
            x = fnn.Embed(256, 64)(tokens)
            carry, _ = fnn.RNN(fnn.OptimizedLSTMCell(64), return_carry=True)(x, seq_lengths=seq_lengths)
            return fnn.Dense(2)(carry[1])

    model = LSTMClassifier()
    params = model.init(jax.random.PRNGKey(seed), ids[:2], lengths[:2])["params"]
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)

    @jax.jit
    def train_step(state: Any, tokens: Any, seq_lengths: Any, labels: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            logits = state.apply_fn({"params": p}, tokens, seq_lengths)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        return state.apply_gradients(grads=grads), loss, grads

    @jax.jit
    def eval_loss(params: Any, tokens: Any, seq_lengths: Any, labels: Any) -> Any:
        logits = model.apply({"params": params}, tokens, seq_lengths)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    hook = mldbg.jax.Hook(path)
    rng = np.random.default_rng(seed)
    losses = []
    for step in range(steps):
        idx = rng.choice(2100, 64, replace=False)
        params = state.params
        state, loss, grads = train_step(state, ids[idx], lengths[idx], y[idx])
        hook.record(step, params=params, grads=grads, loss=loss)
        losses.append(float(loss))
        if step % 100 == 99:
            hook.record(
                step // 100, mode="eval", loss=eval_loss(state.params, ids[2100:], lengths[2100:], y[2100:])
            )
    hook.close()
    return losses


def flax_linen_groupnorm_cnn_sgd_warmup_cosine(
    path: str, steps: int = 160, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Flax Linen CNN with `nn.GroupNorm(num_groups=8)` (no batch statistics to carry),
    `optax.chain(optax.add_decayed_weights(5e-4), optax.sgd(optax.warmup_cosine_decay_schedule(
    0.0, 0.1, warmup_steps=30, decay_steps=steps), momentum=0.9))`, a jitted step, NHWC images
    normalized per channel, batch 64."""
    import flax.linen as fnn
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    g = _seed(seed)
    images, labels = _images(g, 3072, size=16, proto_seed=444)
    x = images.permute(0, 2, 3, 1).numpy()
    x = (x - x[:2800].mean((0, 1, 2))) / x[:2800].std((0, 1, 2))
    y = labels.numpy()

    class CNN(fnn.Module):
        @fnn.compact
        def __call__(self, x: Any) -> Any:
            for features in (16, 32):
                x = fnn.Conv(features, (3, 3))(x)
                x = fnn.relu(fnn.GroupNorm(num_groups=8)(x))
                x = fnn.max_pool(x, (2, 2), strides=(2, 2))
            x = x.mean((1, 2))
            return fnn.Dense(10)(x)

    model = CNN()
    params = model.init(jax.random.PRNGKey(seed), jnp.ones((1, 16, 16, 3)))["params"]
    schedule = optax.warmup_cosine_decay_schedule(0.0, 0.1, warmup_steps=30, decay_steps=steps)
    tx = optax.chain(optax.add_decayed_weights(5e-4), optax.sgd(schedule, momentum=0.9))
    opt_state = tx.init(params)

    @jax.jit
    def train_step(params: Any, opt_state: Any, xb: Any, yb: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            return optax.softmax_cross_entropy_with_integer_labels(model.apply({"params": p}, xb), yb).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    hook = mldbg.jax.Hook(path)
    rng = np.random.default_rng(seed)
    losses = []
    for step in range(steps):
        idx = rng.choice(2800, 64, replace=False)
        old = params
        params, opt_state, loss, grads = train_step(params, opt_state, x[idx], y[idx])
        hook.record(step, params=old, grads=grads, loss=loss)
        losses.append(float(loss))
    hook.close()
    return losses


def flax_nnx_conv_autoencoder(
    path: str, steps: int = 250, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Flax NNX convolutional autoencoder (strided `nnx.Conv` down, `nnx.ConvTranspose` up, a
    sigmoid output), `nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)`, an `nnx.jit`
    step returning the loss and gradients, binary cross-entropy on pixels in [0, 1], batch 64;
    `hook.record` outside the step."""
    import jax
    import optax
    from flax import nnx

    import mldbg.jax

    g = _seed(seed)
    images, _ = _images(g, 2048, size=16, channels=1, proto_seed=555)
    x = images.permute(0, 2, 3, 1).numpy()

    class AutoEncoder(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.enc1 = nnx.Conv(1, 16, (3, 3), strides=(2, 2), rngs=rngs)
            self.enc2 = nnx.Conv(16, 32, (3, 3), strides=(2, 2), rngs=rngs)
            self.dec1 = nnx.ConvTranspose(32, 16, (3, 3), strides=(2, 2), rngs=rngs)
            self.dec2 = nnx.ConvTranspose(16, 1, (3, 3), strides=(2, 2), rngs=rngs)

        def __call__(self, x: Any) -> Any:
            h = nnx.relu(self.enc2(nnx.relu(self.enc1(x))))
            return self.dec2(nnx.relu(self.dec1(h)))  # logits

    model = AutoEncoder(nnx.Rngs(seed))
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)

    def loss_fn(model: Any, xb: Any) -> Any:
        return optax.sigmoid_binary_cross_entropy(model(xb), xb).mean()

    @nnx.jit
    def train_step(model: Any, optimizer: Any, xb: Any) -> Any:
        loss, grads = nnx.value_and_grad(loss_fn)(model, xb)
        optimizer.update(model, grads)
        return loss, grads

    hook = mldbg.jax.Hook(path)
    rng = np.random.default_rng(seed)
    losses = []
    for step in range(steps):
        idx = rng.choice(1800, 64, replace=False)
        params = nnx.state(model, nnx.Param)
        loss, grads = train_step(model, optimizer, x[idx])
        hook.record(step, params=params, grads=grads, loss=loss)
        losses.append(float(loss))
        if step % 100 == 99:
            hook.record(step // 100, mode="eval", loss=jax.jit(loss_fn)(model, x[1800:]))
    hook.close()
    return losses


def jax_vmap_deep_ensemble(path: str, steps: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """A deep ensemble trained in one program with `jax.vmap` over the members (5 MLPs from 5
    init keys, each on its own bootstrap batch), pure-function parameters as a list of (W, b),
    `optax.adam(1e-3)` vmapped too, a Gaussian negative log-likelihood head (mean and
    softplus variance), batch 64; the recorded loss: the members' mean."""
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    rng = np.random.default_rng(seed)
    n = 2000
    x = rng.uniform(-4, 4, size=(n, 1)).astype("float32")
    y = (np.sin(x) * 2 + 0.1 * x**2 + rng.normal(0, 0.2 + 0.15 * np.abs(x), size=(n, 1))).astype("float32")
    y = (y - y.mean()) / y.std()
    sizes, members = [1, 64, 64, 2], 5

    def init(key: Any) -> Any:
        params = []
        for m, k in zip(sizes[:-1], sizes[1:], strict=True):
            key, sub = jax.random.split(key)
            params.append((jax.random.normal(sub, (m, k)) * jnp.sqrt(2.0 / m), jnp.zeros(k)))
        return params

    def predict(params: Any, xb: Any) -> Any:
        h = xb
        for w, b in params[:-1]:
            h = jax.nn.relu(h @ w + b)
        w, b = params[-1]
        out = h @ w + b
        return out[:, :1], jax.nn.softplus(out[:, 1:]) + 1e-6

    def nll(params: Any, xb: Any, yb: Any) -> Any:
        mean, var = predict(params, xb)
        return 0.5 * (jnp.log(var) + (yb - mean) ** 2 / var).mean()

    tx = optax.adam(1e-3)
    params = jax.vmap(init)(jax.random.split(jax.random.PRNGKey(seed), members))
    opt_state = jax.vmap(tx.init)(params)

    def member_step(p: Any, s: Any, xb: Any, yb: Any) -> Any:
        loss, grads = jax.value_and_grad(nll)(p, xb, yb)
        updates, s = tx.update(grads, s, p)
        return optax.apply_updates(p, updates), s, loss, grads

    step_fn = jax.jit(jax.vmap(member_step))
    hook = mldbg.jax.Hook(path)
    losses = []
    for step in range(steps):
        idx = rng.integers(0, 1800, size=(members, 64))
        old = params
        params, opt_state, loss, grads = step_fn(params, opt_state, x[idx], y[idx])
        hook.record(step, params=old, grads=grads, loss=loss.mean())
        losses.append(float(loss.mean()))
    hook.close()
    return losses


# ============================================================================= XGBoost


def xgb_sklearn_dart_classifier(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """`xgboost.XGBClassifier(booster="dart", rate_drop=0.1, skip_drop=0.5, n_estimators=150,
    learning_rate=0.1, max_depth=4, subsample=0.8, eval_metric="logloss", callbacks=[hook])` fit
    with `eval_set=[(X_train, y_train), (X_valid, y_valid)]`; losses: the training logloss per
    round."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    n, d = 3000, 12
    x = rng.normal(size=(n, d))
    logit = 1.2 * x[:, 0] - 0.8 * x[:, 1] * x[:, 2] + np.sin(2 * x[:, 3]) + 0.5 * (x[:, 4] > 0.5)
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    clf = xgb.XGBClassifier(
        booster="dart", rate_drop=0.1, skip_drop=0.5, n_estimators=150, learning_rate=0.1, max_depth=4,
        subsample=0.8, eval_metric="logloss", n_jobs=1, random_state=seed, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    clf.fit(x[:2400], y[:2400], eval_set=[(x[:2400], y[:2400]), (x[2400:], y[2400:])], verbose=False)
    return [float(v) for v in clf.evals_result()["validation_0"]["logloss"]]


def xgb_gamma_claim_severity(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Claim-severity regression with `objective="reg:gamma"` (log link) as insurance users fit it:
    `xgb.train` on a `DMatrix`, learning_rate 0.05, max_depth 3, min_child_weight 5, subsample
    0.8, colsample_bytree 0.8, `eval_metric="gamma-nloglik"`, 250 rounds with early stopping on
    the validation set; losses: the training gamma negative log-likelihood per round."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    n = 5000
    age = rng.uniform(18, 80, n)
    vehicle = rng.integers(0, 5, n)
    region = rng.integers(0, 8, n)
    power = rng.uniform(40, 200, n)
    log_mu = 7.0 + 0.006 * (age - 45) ** 2 / 10 + 0.15 * vehicle + 0.003 * power + 0.1 * (region % 3)
    shape = 2.0
    y = rng.gamma(shape, np.exp(log_mu) / shape)
    x = np.stack([age, vehicle, region, power], 1)
    dtrain = xgb.DMatrix(x[:4000], label=y[:4000])
    dvalid = xgb.DMatrix(x[4000:], label=y[4000:])
    params = {
        "objective": "reg:gamma", "eval_metric": "gamma-nloglik", "learning_rate": 0.05, "max_depth": 3,
        "min_child_weight": 5, "subsample": 0.8, "colsample_bytree": 0.8, "nthread": 1, "seed": seed,
    }  # fmt: skip
    result: dict[str, Any] = {}
    xgb.train(
        params, dtrain, num_boost_round=250, evals=[(dtrain, "train"), (dvalid, "valid")],
        early_stopping_rounds=30, evals_result=result, verbose_eval=False, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    return [float(v) for v in result["train"]["gamma-nloglik"]]


# ============================================================================= the set

_accelerate = healthy(
    "accelerate_nlp_example_accelerator_backward_linear_warmup",
    "Accelerate nlp_example-shaped classification",
    accelerate_nlp_example,
)
_detection = healthy(
    "torchvision_reference_detection_loss_dict_warmup",
    "torchvision reference-style detection loop",
    torchvision_reference_detection,
)
_dec = healthy(
    "dec_deep_embedded_clustering_kl_target", "deep clustering (DEC)", dec_deep_embedded_clustering
)
_malstm = healthy(
    "malstm_manhattan_siamese_adadelta", "siamese LSTM similarity (MaLSTM)", malstm_siamese_similarity
)
_crnn = healthy(
    "crnn_audio_tagging_multilabel_maxpool", "audio tagging (CRNN, multi-label)", crnn_audio_tagging
)
PIPELINES: list[Any] = [
    _accelerate,
    _detection,
    _dec,
    _malstm,
    _crnn,
    buggy(_accelerate, "frozen_by_mistake"),
    buggy(_detection, "no_zero_grad"),
    buggy(_dec, "train_in_eval_mode"),
    buggy(_malstm, "log_zero_nan"),
    buggy(_crnn, "dead_relu_init"),
]

if installed("transformers", "accelerate"):
    _hf_roberta = healthy(
        "hf_trainer_roberta_ner_bio_tags",
        "HF Trainer RoBERTa token classification",
        hf_roberta_token_classification,
    )
    _hf_swin = healthy(
        "hf_trainer_swin_image_classification_rescale",
        "HF Trainer Swin image classification",
        hf_swin_image_classification,
    )
    PIPELINES += [
        healthy(
            "hf_seq2seq_trainer_bart_summarisation",
            "HF Seq2SeqTrainer BART summarisation",
            hf_bart_summarisation,
        ),
        _hf_roberta,
        _hf_swin,
        healthy(
            "hf_seq2seq_trainer_whisper_tiny_config_tones",
            "HF Seq2SeqTrainer Whisper speech recognition",
            hf_whisper_speech_recognition,
        ),
        healthy(
            "hf_trainer_ast_audio_spectrogram_classification",
            "HF Trainer Audio Spectrogram Transformer",
            hf_ast_audio_classification,
        ),
        healthy(
            "hf_trainer_phi_clm_packed_blocks_accum4_cosine",
            "HF Trainer Phi causal LM (packing)",
            hf_phi_clm_packing,
        ),
        healthy(
            "hf_trainer_distilbert_custom_collator_dynamic_padding",
            "HF Trainer DistilBERT custom collator",
            hf_distilbert_custom_collator,
        ),
        healthy(
            "hf_trainer_gpt2_sequence_classification_pad_eos",
            "HF Trainer GPT-2 sequence classification",
            hf_gpt2_sequence_classification,
        ),
        buggy(_hf_roberta, "shuffled_labels"),
        buggy(_hf_swin, "inputs_x255"),
    ]

if installed("lightning"):
    _lit_ema = healthy(
        "lightning_ema_averaged_model_callback_mlp", "Lightning EMA callback", lit_ema_callback_mlp
    )
    _lit_gru = healthy(
        "lightning_datamodule_packed_gru_clip_norm",
        "Lightning DataModule GRU classifier",
        lit_datamodule_gru_clip_norm,
    )
    PIPELINES += [
        _lit_ema,
        healthy(
            "lightning_reduce_lr_on_plateau_scheduler_dict",
            "Lightning ReduceLROnPlateau regression",
            lit_plateau_scheduler_dict,
        ),
        _lit_gru,
        healthy(
            "lightning_accumulate_grad_batches_val_check_quarter_cnn1d",
            "Lightning waveform CNN (accumulation)",
            lit_accumulate_val_check_cnn1d,
        ),
        healthy(
            "lightning_transformer_tagger_step_interval_warmup_invsqrt",
            "Lightning Transformer tagger",
            lit_transformer_warmup_step_interval,
        ),
        healthy(
            "lightning_simsiam_stop_gradient_predictor", "Lightning SimSiam self-supervised", lit_simsiam
        ),
        buggy(_lit_ema, "deep_sigmoid"),
        buggy(_lit_gru, "softmax_before_ce"),
    ]

if installed("keras", "tensorflow"):
    _keras_resnet = healthy(
        "keras_subclassed_resnet_reduce_lr_on_plateau",
        "Keras subclassed ResNet",
        keras_subclassed_resnet_plateau,
    )
    PIPELINES += [
        _keras_resnet,
        healthy(
            "keras_structured_data_lookup_normalization_layers",
            "Keras structured data (preprocessing layers)",
            keras_structured_data_preprocessing_layers,
        ),
        healthy(
            "keras_augmentation_layers_separable_cnn_cosine_sgd",
            "Keras in-model augmentation CNN",
            keras_augmentation_layers_cosine_sgd,
        ),
        healthy(
            "keras_timeseries_anomaly_conv1d_transpose_autoencoder",
            "Keras time-series anomaly autoencoder",
            keras_timeseries_anomaly_conv1d_transpose,
        ),
        healthy(
            "keras_lstm_weather_forecasting_timeseries_dataset",
            "Keras LSTM weather forecasting",
            keras_lstm_weather_forecasting,
        ),
        buggy(_keras_resnet, "lr_x100"),
    ]

if installed("jax", "optax", "flax"):
    PIPELINES += [
        healthy(
            "flax_linen_lstm_rnn_seq_lengths_trainstate",
            "Flax Linen LSTM text classifier",
            flax_linen_lstm_text_classifier,
        ),
        healthy(
            "flax_linen_groupnorm_cnn_sgd_warmup_cosine",
            "Flax GroupNorm CNN",
            flax_linen_groupnorm_cnn_sgd_warmup_cosine,
        ),
        healthy("flax_nnx_conv_autoencoder_bce", "Flax NNX conv autoencoder", flax_nnx_conv_autoencoder),
        healthy("jax_vmap_deep_ensemble_gaussian_nll", "JAX vmapped deep ensemble", jax_vmap_deep_ensemble),
    ]

if installed("xgboost"):
    PIPELINES += [
        healthy(
            "xgboost_sklearn_dart_booster_binary", "XGBoost DART classification", xgb_sklearn_dart_classifier
        ),
        healthy("xgboost_gamma_claim_severity", "XGBoost gamma regression", xgb_gamma_claim_severity),
    ]
