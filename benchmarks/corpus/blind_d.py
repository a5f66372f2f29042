"""A blind held-out set (issue 26), part D: trainings recorded the way a new user records them
for their trainer or framework, not with a plain PyTorch loop. Written without running mldbg's
rules on them.

Lightning (`mldbg.lightning.DebuggerCallback` in `Trainer(callbacks=...)`): a CNN with
torchmetrics and a validation loop, a transformer classifier in bf16-mixed with OneCycleLR and
gradient clipping, a denoising autoencoder stopped by EarlyStopping, a GAN with manual
optimization, a tabular MLP with `accumulate_grad_batches` and ReduceLROnPlateau, an LSTM
forecaster with norm clipping and StepLR. Hugging Face `Trainer`
(`mldbg.transformers.DebuggerCallback`; tiny models built from a config, no download): GPT-2
causal LM with cosine warm-up and accumulation, BERT sequence classification, T5 with
Adafactor, ViT image classification, DistilBERT token classification, Llama in bf16 on CPU.
Keras 3 (`mldbg.keras.Hook` in `fit(callbacks=...)`, the installed backend): a CNN with
EarlyStopping, a functional tabular regressor with BatchNorm and ReduceLROnPlateau, an
Embedding-LSTM sentiment model, a transformer block with AdamW and CosineDecay warm-up.
JAX (`mldbg.jax.Hook`, `hook.record` in or outside `jax.jit`): Flax Linen with Optax AdamW and
warm-up cosine, Flax NNX CNN with clipped SGD momentum, a plain-JAX MLP with optax.adam.
XGBoost (`mldbg.xgboost.Hook`): `xgb.train` with early stopping, XGBRegressor, multi-class
XGBClassifier. Third-party-shaped PyTorch scripts (README's two lines): pytorch/examples' dcgan,
vae, mnist_rnn, siamese_network, time_sequence_prediction (LBFGS), fast_neural_style (lite),
reinforcement_learning's reinforce and actor_critic, a nanoGPT shakespeare_char-shaped model,
and the torchvision classification reference's train_one_epoch.

A pipeline whose framework is not installed is left out of `PIPELINES`. Every framework is
imported inside its pipeline, so importing this module costs only torch. `SPLIT = BLIND2`.
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

from . import BLIND2, buggy, healthy, installed

SPLIT = BLIND2

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 11)


def _digits(
    g: torch.Generator, n: int, size: int = 12, classes: int = 10
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 1, size, size) images in [0, 1]: strokes from `classes` smooth random prototypes on a
    dark background, shifted by up to a pixel, with varied ink and noise; and their labels."""
    pg = torch.Generator().manual_seed(1234)
    protos = F.avg_pool2d(torch.rand(classes, 1, size, size, generator=pg), 3, 1, 1)
    cut = protos.flatten(1).quantile(0.75, dim=1).view(classes, 1, 1, 1)
    protos = ((protos - cut) * 40).sigmoid()
    y = torch.randint(0, classes, (n,), generator=g)
    shift = torch.randint(-1, 2, (n, 2), generator=g)
    x = torch.stack(
        [torch.roll(protos[c], (int(a), int(b)), (1, 2)) for c, (a, b) in zip(y, shift, strict=True)]
    )
    x = x * (0.6 + 0.4 * torch.rand(n, 1, 1, 1, generator=g)) + 0.1 * torch.randn(x.shape, generator=g)
    return x.clamp(0, 1), y


def _tabular(g: torch.Generator, n: int, d: int = 16) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Features with mixed scales, a nonlinear regression target and a 3-class label from it."""
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, generator=torch.Generator().manual_seed(99))
    t = x @ w / math.sqrt(d) + 0.5 * torch.sin(2 * x[:, 0]) + 0.5 * x[:, 1] * x[:, 2]
    t = t + 0.1 * torch.randn(n, generator=g)
    q = t.quantile(torch.tensor([1 / 3, 2 / 3]))
    return x, t, torch.bucketize(t, q)


def _markov_tokens(g: torch.Generator, n: int, vocab: int, order_seed: int = 5) -> torch.Tensor:
    """A token stream from a sparse random first-order Markov chain (each token has 3 likely
    successors): learnable structure for a language model."""
    pg = torch.Generator().manual_seed(order_seed)
    nxt = torch.randint(0, vocab, (vocab, 3), generator=pg)
    out = torch.empty(n, dtype=torch.long)
    t = int(torch.randint(0, vocab, (1,), generator=g))
    r = torch.rand(n, generator=g)
    u = torch.randint(0, vocab, (n,), generator=g)
    k = torch.randint(0, 3, (n,), generator=g)
    for i in range(n):
        t = int(u[i]) if r[i] < 0.1 else int(nxt[t, k[i]])
        out[i] = t
    return out


def _sines(g: torch.Generator, n: int, length: int) -> torch.Tensor:
    """(n, length) sums of two sines with random phases and periods."""
    t = torch.arange(length).float()
    p1 = 10 + 10 * torch.rand(n, 1, generator=g)
    p2 = 25 + 15 * torch.rand(n, 1, generator=g)
    ph = 2 * math.pi * torch.rand(n, 2, generator=g)
    s = torch.sin(2 * math.pi * t / p1 + ph[:, :1]) + 0.5 * torch.sin(2 * math.pi * t / p2 + ph[:, 1:])
    return s + 0.05 * torch.randn(n, length, generator=g)


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
    import lightning.pytorch as pl

    class LossHistory(pl.Callback):
        """One loss per optimizer step: the sum of its micro-batches' losses (Lightning hands
        each batch's loss divided by `accumulate_grad_batches`)."""

        def __init__(self) -> None:
            self.losses: list[float] = []
            self.micro: list[float] = []
            self.step = 0

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is None:  # manual optimization: the module keeps its last loss
                loss = module.last_loss
            self.micro.append(float(loss))
            if trainer.global_step != self.step:
                self.step = trainer.global_step
                self.losses.append(sum(self.micro))
                self.micro = []

    return LossHistory()


def lit_cnn_digits(path: str, epochs: int = 4, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Lightning "image classifier" tutorial shape: a LightningModule with a small CNN,
    `F.cross_entropy`, torchmetrics Accuracy logged in training and validation, Adam(1e-3),
    a validation loop every epoch."""
    import lightning.pytorch as pl
    import torchmetrics

    g = _seed(seed)
    x, y = _digits(g, 1152)
    if bug == "inputs_x255":  # images kept as 0..255 bytes: the ToTensor() got dropped
        x = (x * 255).round()

    class LitCNN(pl.LightningModule):
        def __init__(self, lr: float = 1e-3) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.features = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            )  # fmt: skip
            self.classifier = nn.Sequential(
                nn.Flatten(), nn.Linear(32 * 3 * 3, 64), nn.ReLU(), nn.Linear(64, 10)
            )
            self.train_acc = torchmetrics.Accuracy(task="multiclass", num_classes=10)
            self.val_acc = torchmetrics.Accuracy(task="multiclass", num_classes=10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.classifier(self.features(x))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            logits = self(x)
            loss = F.cross_entropy(logits, y)
            self.train_acc(logits, y)
            self.log("train_loss", loss)
            self.log("train_acc", self.train_acc, on_step=True, on_epoch=False)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            logits = self(x)
            self.val_acc(logits, y)
            self.log("val_loss", F.cross_entropy(logits, y), prog_bar=True)
            self.log("val_acc", self.val_acc, prog_bar=True)

        def configure_optimizers(self) -> Any:
            lr = self.hparams.lr * (100 if bug == "lr_x100" else 1)
            return torch.optim.Adam(self.parameters(), lr=lr)

    train = DataLoader(TensorDataset(x[:1024], y[:1024]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(x[1024:], y[1024:]), batch_size=64)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(LitCNN(), train, val)
    return history.losses


def lit_transformer_bf16_onecycle(
    path: str, epochs: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A transformer-encoder sequence classifier in Lightning with `precision="bf16-mixed"` on
    CPU, `gradient_clip_val=1.0`, AdamW and OneCycleLR stepped every batch (`"interval":
    "step"`, total steps from `trainer.estimated_stepping_batches`)."""
    import lightning.pytorch as pl

    g = _seed(seed)
    vocab, length, n = 32, 16, 1280
    ids = torch.randint(1, vocab, (n, length), generator=g)
    y = ((ids < 8).sum(1) > (ids >= 24).sum(1)).long()  # more low tokens than high ones
    if bug == "shuffled_labels":  # the labels were shuffled separately from the texts
        y = y[torch.randperm(n, generator=g)]

    class LitTransformer(pl.LightningModule):
        def __init__(self, d: int = 64) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(torch.zeros(1, length, d))
            layer = nn.TransformerEncoderLayer(d, 4, 128, dropout=0.1, batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(d, 2)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.encoder(self.emb(ids) + self.pos).mean(1))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            ids, y = batch
            loss = F.cross_entropy(self(ids), y)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            ids, y = batch
            self.log("val_loss", F.cross_entropy(self(ids), y))

        def configure_optimizers(self) -> Any:
            opt = torch.optim.AdamW(self.parameters(), lr=1e-3, weight_decay=0.01)
            sched = torch.optim.lr_scheduler.OneCycleLR(
                opt, max_lr=1e-3, total_steps=self.trainer.estimated_stepping_batches
            )
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    train = DataLoader(TensorDataset(ids[:1024], y[:1024]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(ids[1024:], y[1024:]), batch_size=128)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs, precision="bf16-mixed", gradient_clip_val=1.0)
    trainer.fit(LitTransformer(), train, val)
    return history.losses


def lit_denoising_ae_early_stopping(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """A denoising autoencoder on sensor windows in Lightning, `EarlyStopping(monitor="val_loss",
    patience=3)`, max_epochs 30, Adam(1e-3), MSE on the clean signal."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import EarlyStopping

    g = _seed(seed)
    x = _sines(g, 1200, 32)

    class LitDenoiser(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
            self.decoder = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 32))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.decoder(self.encoder(x))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            (x,) = batch
            loss = F.mse_loss(self(x + 0.2 * torch.randn_like(x)), x)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            (x,) = batch
            self.log("val_loss", F.mse_loss(self(x + 0.2 * torch.randn_like(x)), x))

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    train = DataLoader(TensorDataset(x[:1024]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(x[1024:]), batch_size=176)
    history = _pl_losses()
    stop = EarlyStopping(monitor="val_loss", patience=3, mode="min")
    trainer = _pl_trainer(path, [history, stop], max_epochs=30)
    trainer.fit(LitDenoiser(), train, val)
    return history.losses


def lit_gan_manual_optimization(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Lightning's GAN tutorial shape: `automatic_optimization = False`, two Adam(2e-4, betas
    (0.5, 0.999)) optimizers, `toggle_optimizer`, `manual_backward`, discriminator then
    generator each batch; 8x8 glyph-like images in [-1, 1] with a tanh generator."""
    import lightning.pytorch as pl

    g = _seed(seed)
    x, _ = _digits(g, 1024, size=8)
    x = x.flatten(1) * 2 - 1

    class LitGAN(pl.LightningModule):
        def __init__(self, latent: int = 16) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.latent = latent
            self.generator = nn.Sequential(
                nn.Linear(latent, 128), nn.LeakyReLU(0.2), nn.Linear(128, 128), nn.BatchNorm1d(128),
                nn.LeakyReLU(0.2), nn.Linear(128, 64), nn.Tanh(),
            )  # fmt: skip
            self.discriminator = nn.Sequential(
                nn.Linear(64, 128), nn.LeakyReLU(0.2), nn.Linear(128, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1)
            )
            self.last_loss = 0.0

        def training_step(self, batch: Any, batch_idx: int) -> None:
            (real,) = batch
            opt_g, opt_d = self.optimizers()
            z = torch.randn(len(real), self.latent, device=self.device)
            ones = torch.ones(len(real), 1)
            zeros = torch.zeros(len(real), 1)
            # discriminator
            self.toggle_optimizer(opt_d)
            fake = self.generator(z).detach()
            d_loss = 0.5 * (
                F.binary_cross_entropy_with_logits(self.discriminator(real), ones)
                + F.binary_cross_entropy_with_logits(self.discriminator(fake), zeros)
            )
            self.manual_backward(d_loss)
            opt_d.step()
            if bug != "no_zero_grad":
                opt_d.zero_grad()
            self.untoggle_optimizer(opt_d)
            # generator
            self.toggle_optimizer(opt_g)
            g_loss = F.binary_cross_entropy_with_logits(self.discriminator(self.generator(z)), ones)
            self.manual_backward(g_loss)
            opt_g.step()
            if bug != "no_zero_grad":
                opt_g.zero_grad()
            self.untoggle_optimizer(opt_g)
            self.log_dict({"d_loss": d_loss, "g_loss": g_loss})
            self.last_loss = float(d_loss)

        def configure_optimizers(self) -> Any:
            opt_g = torch.optim.Adam(self.generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
            opt_d = torch.optim.Adam(self.discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
            return [opt_g, opt_d]

    train = DataLoader(TensorDataset(x), batch_size=64, shuffle=True, drop_last=True)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(LitGAN(), train)
    return history.losses


def lit_tabular_accumulate_plateau(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A tabular classifier in Lightning: Linear-BatchNorm-ReLU-Dropout blocks, SGD(0.01,
    momentum 0.9, weight decay 1e-4), `accumulate_grad_batches=4`, ReduceLROnPlateau on
    `val_loss` in the scheduler config."""
    import lightning.pytorch as pl

    g = _seed(seed)
    x, _, y = _tabular(g, 2304, 16)
    act = nn.Sigmoid if bug == "deep_sigmoid" else nn.ReLU

    class LitTabular(pl.LightningModule):
        def __init__(self, width: int = 64, depth: int = 3) -> None:
            super().__init__()
            blocks: list[nn.Module] = []
            d = 16
            for _ in range(depth if bug != "deep_sigmoid" else 8):
                blocks += [nn.Linear(d, width), nn.BatchNorm1d(width), act(), nn.Dropout(0.1)]
                d = width
            self.net = nn.Sequential(*blocks, nn.Linear(width, 3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            loss = F.cross_entropy(self(x), y)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            self.log("val_loss", F.cross_entropy(self(x), y))

        def configure_optimizers(self) -> Any:
            opt = torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
            sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=2)
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "monitor": "val_loss"}}

    train = DataLoader(TensorDataset(x[:2048], y[:2048]), batch_size=16, shuffle=True)
    val = DataLoader(TensorDataset(x[2048:], y[2048:]), batch_size=256)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs, accumulate_grad_batches=4)
    trainer.fit(LitTabular(), train, val)
    return history.losses


def lit_lstm_forecaster(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """A one-step-ahead LSTM forecaster in Lightning: 24 steps of history -> the next 4,
    Adam(1e-3) with StepLR(step 3, gamma 0.5), `gradient_clip_val=0.5` (norm)."""
    import lightning.pytorch as pl

    g = _seed(seed)
    s = _sines(g, 960, 28)
    x, y = s[:, :24, None], s[:, 24:]

    class LitForecaster(pl.LightningModule):
        def __init__(self, hidden: int = 32) -> None:
            super().__init__()
            self.lstm = nn.LSTM(1, hidden, num_layers=2, batch_first=True, dropout=0.1)
            self.head = nn.Linear(hidden, 4)
            if bug == "frozen_by_mistake":  # meant to freeze only for a warm start, never undone
                for p in self.lstm.parameters():
                    p.requires_grad_(False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out, _ = self.lstm(x)
            return self.head(out[:, -1])

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            loss = F.mse_loss(self(x), y)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            x, y = batch
            self.log("val_loss", F.mse_loss(self(x), y))

        def configure_optimizers(self) -> Any:
            opt = torch.optim.Adam(self.parameters(), lr=1e-3)
            return [opt], [torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)]

    train = DataLoader(TensorDataset(x[:832], y[:832]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(x[832:], y[832:]), batch_size=128)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs, gradient_clip_val=0.5)
    trainer.fit(LitForecaster(), train, val)
    return history.losses


# ============================================================================= Hugging Face Trainer


class _Examples(Dataset):
    """A list of feature dicts, as a `datasets.Dataset` after `.map(tokenize)` gives them."""

    def __init__(self, **columns: torch.Tensor) -> None:
        self.columns = columns
        self.n = len(next(iter(columns.values())))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {k: v[i] for k, v in self.columns.items()}


def _hf_train(path: str, model: Any, train: Dataset, val: Dataset | None, **args: Any) -> list[float]:
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
        model=model, args=targs, train_dataset=train, eval_dataset=val, callbacks=[DebuggerCallback(path)]
    )
    trainer.remove_callback(PrinterCallback)  # no log line per step on stdout
    trainer.train()
    shutil.rmtree(targs.output_dir, ignore_errors=True)  # nothing saved there (save_strategy="no")
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


def hf_gpt2_clm_cosine_accumulate(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The HF course's "train a causal language model from scratch" recipe scaled down: a
    2-layer GPT-2 from `GPT2Config`, `labels = input_ids` (the model shifts them), lr 5e-4,
    weight decay 0.1, cosine schedule with warm-up, gradient accumulation 2, an evaluation each
    epoch."""
    from transformers import GPT2Config, GPT2LMHeadModel

    g = _seed(seed)
    vocab, block = 64, 32
    stream = _markov_tokens(g, 1408 * block, vocab).view(1408, block)
    config = GPT2Config(vocab_size=vocab, n_positions=block, n_embd=64, n_layer=2, n_head=2)
    model = GPT2LMHeadModel(config)
    train = _Examples(input_ids=stream[:1280], labels=stream[:1280])
    val = _Examples(input_ids=stream[1280:], labels=stream[1280:])
    lr = 5e-4 * (100 if bug == "lr_x100" else 1)
    return _hf_train(
        path, model, train, val, num_train_epochs=3, per_device_train_batch_size=8,
        per_device_eval_batch_size=64, gradient_accumulation_steps=2, learning_rate=lr,
        weight_decay=0.1, lr_scheduler_type="cosine", warmup_steps=20,
    )  # fmt: skip


def hf_bert_sequence_classification(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """`BertForSequenceClassification` from a 2-layer `BertConfig`, token ids and attention
    masks of variable length (padding), RoBERTa's fine-tuning schedule (warm-up 6% of the steps,
    linear decay, weight decay 0.01) at lr 5e-4 for a model trained from scratch; the labels
    come from sentiment-like cue words."""
    from transformers import BertConfig, BertForSequenceClassification

    g = _seed(seed)
    n, length, vocab = 1280, 24, 100
    ids = torch.randint(25, vocab, (n, length), generator=g)
    lengths = torch.randint(12, length + 1, (n,), generator=g)
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    y = torch.randint(0, 2, (n,), generator=g)  # sentiment: cue words 5..14 or 15..24 among neutral ones
    cue = torch.where(y[:, None] == 1, 5, 15) + torch.randint(0, 10, (n, length), generator=g)
    ids = torch.where(torch.rand(n, length, generator=g) < 0.12, cue, ids)
    ids = ids * mask  # [PAD] = 0
    ids[:, 0] = 2  # [CLS]
    if bug == "shuffled_labels":  # labels joined to the texts after a separate shuffle
        y = y[torch.randperm(n, generator=g)]
    config = BertConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=128, max_position_embeddings=length, num_labels=2,
    )  # fmt: skip
    model = BertForSequenceClassification(config)
    train = _Examples(input_ids=ids[:1024], attention_mask=mask[:1024], labels=y[:1024])
    val = _Examples(input_ids=ids[1024:], attention_mask=mask[1024:], labels=y[1024:])
    return _hf_train(
        path, model, train, val, num_train_epochs=3, per_device_train_batch_size=16,
        learning_rate=5e-4, weight_decay=0.01, warmup_steps=0.06,
    )  # fmt: skip


def hf_t5_adafactor_reverse(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """`T5ForConditionalGeneration` from a 2+2-layer `T5Config` on a sequence-reversal task,
    trained the T5 way: `optim="adafactor"` at a constant lr 1e-3, labels ending in </s> (the
    model shifts them right for the decoder)."""
    from transformers import T5Config, T5ForConditionalGeneration

    g = _seed(seed)
    n, length, vocab = 1152, 8, 32
    src = torch.randint(2, vocab, (n, length), generator=g)
    labels = torch.cat([src.flip(1), torch.ones(n, 1, dtype=torch.long)], 1)
    config = T5Config(
        vocab_size=vocab, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, dropout_rate=0.1,
    )  # fmt: skip
    model = T5ForConditionalGeneration(config)
    train = _Examples(input_ids=src[:1024], labels=labels[:1024])
    val = _Examples(input_ids=src[1024:], labels=labels[1024:])
    return _hf_train(
        path, model, train, val, num_train_epochs=4, per_device_train_batch_size=16,
        optim="adafactor", learning_rate=1e-3, lr_scheduler_type="constant",
    )  # fmt: skip


def hf_vit_image_classification(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """`ViTForImageClassification` from a small `ViTConfig` (12x12 images, 4x4 patches), pixel
    values normalized as `ViTImageProcessor` does (rescale 1/255, mean 0.5, std 0.5), AdamW
    weight decay 0.05, warm-up over 10% of the steps then cosine, lr 1e-3."""
    from transformers import ViTConfig, ViTForImageClassification

    g = _seed(seed)
    x, y = _digits(g, 1152)
    pixels = (x * 255).round()  # the dataset's uint8 images
    pixel_values = pixels if bug == "inputs_x255" else (pixels / 255 - 0.5) / 0.5
    config = ViTConfig(
        image_size=12, patch_size=4, num_channels=1, hidden_size=64, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=128, num_labels=10,
    )  # fmt: skip
    model = ViTForImageClassification(config)
    train = _Examples(pixel_values=pixel_values[:1024], labels=y[:1024])
    val = _Examples(pixel_values=pixel_values[1024:], labels=y[1024:])
    return _hf_train(
        path, model, train, val, num_train_epochs=6, per_device_train_batch_size=32,
        learning_rate=1e-3, weight_decay=0.05, warmup_steps=0.1, lr_scheduler_type="cosine",
    )  # fmt: skip


def hf_distilbert_token_classification(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """`DistilBertForTokenClassification` (NER-style B/I/O tags, -100 on padding as
    `DataCollatorForTokenClassification` pads them) from a 2-layer `DistilBertConfig`, lr 2e-4,
    linear decay, weight decay 0.01."""
    from transformers import DistilBertConfig, DistilBertForTokenClassification

    g = _seed(seed)
    n, length, vocab = 1152, 20, 60
    ids = torch.randint(5, 60, (n, length), generator=g)
    tags = torch.zeros(n, length, dtype=torch.long)
    for i in range(n):
        j = 0
        while j < length:
            if random.random() < 0.15:
                span = random.randint(1, 3)
                ids[i, j] = random.randint(30, 39)
                tags[i, j] = 1
                for k in range(j + 1, min(length, j + span)):
                    ids[i, k] = random.randint(40, 59)
                    tags[i, k] = 2
                j += span
            else:
                if ids[i, j] >= 30:  # an I-like token outside a span is O: context decides
                    ids[i, j] = random.randint(40, 59) if random.random() < 0.3 else random.randint(5, 29)
                j += 1
    lengths = torch.randint(10, length + 1, (n,), generator=g)
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    ids = ids * mask
    labels = tags.masked_fill(mask == 0, -100)
    config = DistilBertConfig(
        vocab_size=vocab, max_position_embeddings=length, dim=64, n_layers=2, n_heads=2, hidden_dim=128,
        num_labels=3,
    )  # fmt: skip
    model = DistilBertForTokenClassification(config)
    train = _Examples(input_ids=ids[:1024], attention_mask=mask[:1024], labels=labels[:1024])
    val = _Examples(input_ids=ids[1024:], attention_mask=mask[1024:], labels=labels[1024:])
    return _hf_train(
        path, model, train, val, num_train_epochs=4, per_device_train_batch_size=16,
        learning_rate=2e-4, weight_decay=0.01,
    )  # fmt: skip


def hf_llama_bf16_cpu(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """`LlamaForCausalLM` from a 2-layer `LlamaConfig` (grouped-query attention, RoPE, SwiGLU)
    with `bf16=True` on CPU, AdamW betas (0.9, 0.95), weight decay 0.1, lr 1e-3 with warm-up and
    cosine decay, `max_grad_norm=1.0`, no evaluation."""
    from transformers import LlamaConfig, LlamaForCausalLM

    g = _seed(seed)
    vocab, block = 64, 32
    stream = _markov_tokens(g, 1024 * block, vocab, order_seed=8).view(1024, block)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=172, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=block,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    train = _Examples(input_ids=stream, labels=stream)
    return _hf_train(
        path, model, train, None, num_train_epochs=3, per_device_train_batch_size=16, bf16=True,
        learning_rate=1e-3, adam_beta2=0.95, weight_decay=0.1, warmup_steps=20,
        lr_scheduler_type="cosine", max_grad_norm=1.0,
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


def keras_cnn_digits_early_stopping(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras "simple MNIST convnet" example: Conv2D(32)-MaxPool-Conv2D(64)-MaxPool-Flatten-
    Dropout(0.5)-Dense(softmax), `sparse_categorical_crossentropy`, Adam, batch 32 (fit's
    default), `validation_split=0.1`, `EarlyStopping(patience=2, restore_best_weights=True)`."""
    import keras

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    x, y = _digits(g, 1152)
    images = (x * 255).round().permute(0, 2, 3, 1).numpy().astype("uint8")  # the dataset's uint8
    x_train = images.astype("float32") if bug == "inputs_x255" else images.astype("float32") / 255
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input((12, 12, 1)),
            layers.Conv2D(16, 3, activation="relu", padding="same"),
            layers.MaxPooling2D(2),
            layers.Conv2D(32, 3, activation="relu", padding="same"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dropout(0.5),
            layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = _keras_losses()
    stop = keras.callbacks.EarlyStopping(patience=2, restore_best_weights=True)
    model.fit(
        x_train, y.numpy(), batch_size=32, epochs=6, validation_split=0.1, verbose=0,
        callbacks=[mldbg.keras.Hook(path), history, stop],
    )  # fmt: skip
    return history.losses


def keras_functional_tabular_regression(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """A functional-API regressor with a `Normalization` layer adapted on the training set,
    Dense-BatchNorm-ReLU-Dropout blocks, MSE, Adam(1e-3), `ReduceLROnPlateau(factor 0.5,
    patience 2)`, validation data."""
    import keras

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    x, t, _ = _tabular(g, 2304, 16)
    x = x * torch.logspace(-1, 2, 16)  # raw features on very different scales
    x_np, t_np = x.numpy(), t.numpy()
    layers = keras.layers
    norm = layers.Normalization()
    norm.adapt(x_np[:2048])
    inputs = keras.Input((16,))
    h = norm(inputs)
    for width in (64, 32):
        h = layers.Dense(width)(h)
        h = layers.BatchNormalization()(h)
        h = layers.Activation("relu")(h)
        h = layers.Dropout(0.1)(h)
    model = keras.Model(inputs, layers.Dense(1)(h))
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="mse", metrics=["mae"])
    history = _keras_losses()
    plateau = keras.callbacks.ReduceLROnPlateau(factor=0.5, patience=2)
    model.fit(
        x_np[:2048], t_np[:2048], batch_size=32, epochs=5, validation_data=(x_np[2048:], t_np[2048:]),
        verbose=0, callbacks=[mldbg.keras.Hook(path), history, plateau],
    )  # fmt: skip
    return history.losses


def keras_lstm_sentiment(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras IMDB LSTM example's shape: Embedding(vocab, 32, mask_zero=True)-LSTM(32)-
    Dense(1, sigmoid), `binary_crossentropy`, Adam, batch 64, padded integer sequences."""
    import keras

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    n, length, vocab = 1536, 40, 200
    ids = torch.randint(3, vocab, (n, length), generator=g)
    y = torch.randint(0, 2, (n,), generator=g)
    cue = torch.where(
        y[:, None] == 1,
        torch.randint(3, 23, (n, length), generator=g),
        torch.randint(23, 43, (n, length), generator=g),
    )
    ids = torch.where(torch.rand(n, length, generator=g) < 0.15, cue, ids)  # sentiment words
    lengths = torch.randint(15, length + 1, (n,), generator=g)
    ids = torch.where(torch.arange(length)[None] >= length - lengths[:, None], ids, 0)  # pre-padding
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input((length,), dtype="int32"),
            layers.Embedding(vocab, 32, mask_zero=True),
            layers.LSTM(32),
            layers.Dense(1, activation="sigmoid"),
        ]
    )
    lr = 1e-3 * (100 if bug == "lr_x100" else 1)
    model.compile(optimizer=keras.optimizers.Adam(lr), loss="binary_crossentropy", metrics=["accuracy"])
    history = _keras_losses()
    model.fit(
        ids[:1280].numpy(), y[:1280].numpy().astype("float32"), batch_size=64, epochs=8, verbose=0,
        validation_data=(ids[1280:].numpy(), y[1280:].numpy().astype("float32")),
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_transformer_block_adamw_cosine(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras "text classification with Transformer" example: token + position embeddings,
    one MultiHeadAttention block with LayerNorm and a feed-forward, GlobalAveragePooling1D,
    Dropout, softmax over 2 classes; here AdamW with a `CosineDecay` schedule and linear warm-up
    (`warmup_target`), `sparse_categorical_crossentropy`."""
    import keras

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    n, length, vocab = 1024, 20, 50
    ids = torch.randint(11, vocab, (n, length), generator=g)
    y = torch.randint(0, 2, (n,), generator=g)  # sentiment-like: cue words 1..5 or 6..10
    cue = torch.where(y[:, None] == 1, 1, 6) + torch.randint(0, 5, (n, length), generator=g)
    ids = torch.where(torch.rand(n, length, generator=g) < 0.1, cue, ids)
    layers = keras.layers

    class TokenAndPosition(layers.Layer):
        def __init__(self, maxlen: int, vocab: int, dim: int) -> None:
            super().__init__()
            self.tok = layers.Embedding(vocab, dim)
            self.pos = layers.Embedding(maxlen, dim)

        def call(self, x: Any) -> Any:
            positions = keras.ops.arange(0, keras.ops.shape(x)[-1], 1)
            return self.tok(x) + self.pos(positions)

    dim = 32
    inputs = keras.Input((length,), dtype="int32")
    h = TokenAndPosition(length, vocab, dim)(inputs)
    att = layers.MultiHeadAttention(num_heads=2, key_dim=dim)(h, h)
    h = layers.LayerNormalization(epsilon=1e-6)(h + layers.Dropout(0.1)(att))
    ff = layers.Dense(dim)(layers.Dense(64, activation="relu")(h))
    h = layers.LayerNormalization(epsilon=1e-6)(h + layers.Dropout(0.1)(ff))
    h = layers.Dropout(0.1)(layers.GlobalAveragePooling1D()(h))
    h = layers.Dropout(0.1)(layers.Dense(20, activation="relu")(h))
    model = keras.Model(inputs, layers.Dense(2, activation="softmax")(h))
    steps = 5 * (768 // 32)
    schedule = keras.optimizers.schedules.CosineDecay(0.0, steps - 20, warmup_target=1e-3, warmup_steps=20)
    model.compile(
        optimizer=keras.optimizers.AdamW(schedule, weight_decay=0.01),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    history = _keras_losses()
    model.fit(
        ids[:768].numpy(), y[:768].numpy(), batch_size=32, epochs=5, verbose=0,
        validation_data=(ids[768:].numpy(), y[768:].numpy()), callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


# ============================================================================= JAX / Flax / Optax


def _spirals(g: torch.Generator, n: int, classes: int = 3) -> tuple[np.ndarray, np.ndarray]:
    y = torch.randint(0, classes, (n,), generator=g)
    r = torch.rand(n, generator=g)
    theta = 4 * r + 2 * math.pi * y / classes + 0.2 * torch.randn(n, generator=g)
    x = torch.stack([r * torch.cos(theta), r * torch.sin(theta)], 1)
    return x.numpy().astype("float32"), y.numpy()


def flax_linen_mlp_adamw_warmup_cosine(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """A Flax Linen MLP on 3-arm spirals, Optax `adamw` with `warmup_cosine_decay_schedule`
    (peak 1e-2... the Flax examples' 0.1 scaled to Adam), a `jax.jit` train step that calls
    `hook.record(step, params=, grads=, loss=, opt_state=)` inside it, as docs/frameworks.md
    shows; `optax.softmax_cross_entropy_with_integer_labels`."""
    import flax.linen as fnn
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    g = _seed(seed)
    x, y = _spirals(g, 2048)

    class MLP(fnn.Module):
        @fnn.compact
        def __call__(self, x: Any) -> Any:
            for width in (128, 128, 64):
                x = fnn.relu(fnn.Dense(width)(x))
            return fnn.Dense(3)(x)

    model = MLP()
    params = model.init(jax.random.PRNGKey(seed), jnp.zeros((1, 2)))
    steps = 300
    peak = 1e-2 * (100 if bug == "lr_x100" else 1)
    schedule = optax.warmup_cosine_decay_schedule(0.0, peak, 30, steps, end_value=peak * 0.01)
    tx = optax.adamw(schedule, weight_decay=1e-4)
    opt_state = tx.init(params)
    hook = mldbg.jax.Hook(path)

    def loss_fn(params: Any, xb: Any, yb: Any) -> Any:
        logits = model.apply(params, xb)
        return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()

    @jax.jit
    def train_step(step: Any, params: Any, opt_state: Any, xb: Any, yb: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(params, xb, yb)
        hook.record(step, params=params, grads=grads, loss=loss, opt_state=opt_state)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    rng = np.random.default_rng(seed)
    losses = []
    for step in range(steps):
        idx = rng.choice(len(x), 64, replace=False)
        params, opt_state, loss = train_step(step, params, opt_state, x[idx], y[idx])
        losses.append(float(loss))
    hook.close()
    return losses


def flax_nnx_cnn_sgd_clip(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Flax NNX "MNIST tutorial" shape: an `nnx.Module` CNN (Conv-relu-avg_pool twice,
    Linear-relu-Linear), `nnx.Optimizer` over `optax.chain(clip_by_global_norm(1.0),
    sgd(0.05, momentum=0.9))`, an `nnx.jit` train step returning the loss and gradients, and
    `hook.record(step, params=nnx.state(model, nnx.Param), grads=grads, loss=loss)` outside it."""
    import jax
    import optax
    from flax import nnx

    import mldbg.jax

    g = _seed(seed)
    x, y = _digits(g, 2048)
    images = x.permute(0, 2, 3, 1).numpy()
    labels = y.numpy()

    class CNN(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.conv1 = nnx.Conv(1, 16, kernel_size=(3, 3), rngs=rngs)
            self.conv2 = nnx.Conv(16, 32, kernel_size=(3, 3), rngs=rngs)
            self.linear1 = nnx.Linear(32 * 3 * 3, 64, rngs=rngs)
            self.linear2 = nnx.Linear(64, 10, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            x = nnx.avg_pool(nnx.relu(self.conv1(x)), window_shape=(2, 2), strides=(2, 2))
            x = nnx.avg_pool(nnx.relu(self.conv2(x)), window_shape=(2, 2), strides=(2, 2))
            x = x.reshape(x.shape[0], -1)
            return self.linear2(nnx.relu(self.linear1(x)))

    model = CNN(nnx.Rngs(seed))
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.05, momentum=0.9))
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    hook = mldbg.jax.Hook(path)

    def loss_fn(model: Any, xb: Any, yb: Any) -> Any:
        logits = model(xb)
        return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()

    @nnx.jit
    def train_step(model: Any, optimizer: Any, xb: Any, yb: Any) -> Any:
        loss, grads = nnx.value_and_grad(loss_fn)(model, xb, yb)
        optimizer.update(model, grads)
        return loss, grads

    rng = np.random.default_rng(seed)
    losses = []
    step = 0
    for _epoch in range(4):
        perm = rng.permutation(len(images))
        for i in range(0, len(perm) - 31, 32):
            idx = perm[i : i + 32]
            params = nnx.state(model, nnx.Param)
            loss, grads = train_step(model, optimizer, images[idx], labels[idx])
            hook.record(step, params=params, grads=grads, loss=loss)
            losses.append(float(loss))
            step += 1
    jax.block_until_ready(loss)
    hook.close()
    return losses


def jax_mlp_regression_optax_adam(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """A plain-JAX MLP written by hand (a list of (W, b) dicts, LeCun-normal init), MSE,
    `optax.adam(1e-3)`, a jitted update, `hook.record(step, params=, grads=, loss=)` outside it,
    and a validation loss recorded with `mode="eval"` every 50 steps."""
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    g = _seed(seed)
    x, t, _ = _tabular(g, 2304, 16)
    xs, ts = x.numpy(), t.numpy()[:, None]
    key = jax.random.PRNGKey(seed)
    sizes = [16, 64, 64, 1]
    params = []
    for din, dout in zip(sizes[:-1], sizes[1:], strict=True):
        key, sub = jax.random.split(key)
        w = jax.random.normal(sub, (din, dout)) / jnp.sqrt(din)
        # dead_relu_init: "start sparse": a large negative bias on every hidden unit
        b = jnp.full((dout,), -3.0) if bug == "dead_relu_init" and dout != 1 else jnp.zeros(dout)
        params.append({"w": w, "b": b})

    def predict(params: Any, xb: Any) -> Any:
        h = xb
        for layer in params[:-1]:
            h = jax.nn.relu(h @ layer["w"] + layer["b"])
        return h @ params[-1]["w"] + params[-1]["b"]

    def loss_fn(params: Any, xb: Any, tb: Any) -> Any:
        return jnp.mean((predict(params, xb) - tb) ** 2)

    tx = optax.adam(1e-3)
    opt_state = tx.init(params)

    @jax.jit
    def update(params: Any, opt_state: Any, xb: Any, tb: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(params, xb, tb)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    eval_loss = jax.jit(loss_fn)
    hook = mldbg.jax.Hook(path)
    rng = np.random.default_rng(seed)
    losses = []
    for step in range(400):
        idx = rng.choice(2048, 32, replace=False)
        new_params, opt_state, loss, grads = update(params, opt_state, xs[idx], ts[idx])
        hook.record(step, params=params, grads=grads, loss=loss)
        params = new_params
        losses.append(float(loss))
        if step % 50 == 49:
            hook.record(step // 50, mode="eval", loss=eval_loss(params, xs[2048:], ts[2048:]))
    hook.close()
    return losses


# ============================================================================= XGBoost


def _churn(g: torch.Generator, n: int, d: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """Tabular features (a few informative, interactions, noise) and a binary label drawn from a
    logistic model of them: not separable, so the log-loss has a floor."""
    x = torch.randn(n, d, generator=g)
    z = 1.2 * x[:, 0] - 0.8 * x[:, 1] + 0.9 * x[:, 2] * x[:, 3] + torch.where(x[:, 4] > 0.5, 1.0, -0.5)
    y = (torch.rand(n, generator=g) < torch.sigmoid(z)).long()
    return x.numpy(), y.numpy()


def xgb_train_binary_early_stopping(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """`xgb.train` as the XGBoost docs show it: binary:logistic, eta 0.3, max_depth 6 (the
    defaults), `eval_metric=["logloss", "auc"]`, `evals=[(dtrain, "train"), (dvalid,
    "validation")]`, 300 rounds with `early_stopping_rounds=20`; losses: train logloss per round."""
    import xgboost as xgb

    import mldbg.xgboost

    g = _seed(seed)
    x, y = _churn(g, 3000)
    if bug == "shuffled_labels":  # labels from a table sorted differently than the features
        y = y[np.random.default_rng(seed).permutation(len(y))]
    names = [f"f{i}" for i in range(x.shape[1])]
    dtrain = xgb.DMatrix(x[:2400], y[:2400], feature_names=names)
    dvalid = xgb.DMatrix(x[2400:], y[2400:], feature_names=names)
    result: dict[str, Any] = {}
    xgb.train(
        {"objective": "binary:logistic", "eta": 0.3, "max_depth": 6, "eval_metric": ["logloss", "auc"],
         "nthread": 1, "seed": seed},
        dtrain, 300, evals=[(dtrain, "train"), (dvalid, "validation")], early_stopping_rounds=20,
        evals_result=result, verbose_eval=False, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    return [float(v) for v in result["train"]["logloss"]]


def xgb_sklearn_regressor_subsample(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """`XGBRegressor(n_estimators=400, learning_rate=0.05, max_depth=5, subsample=0.8,
    colsample_bytree=0.8, tree_method="hist")` with `eval_set=[(train), (valid)]` and the hook in
    `callbacks=`; losses: the training RMSE per round from `evals_result()`."""
    import xgboost as xgb

    import mldbg.xgboost

    g = _seed(seed)
    x, t, _ = _tabular(g, 3000, 16)
    x, t = x.numpy(), t.numpy()
    model = xgb.XGBRegressor(
        n_estimators=400, learning_rate=0.05, max_depth=5, subsample=0.8, colsample_bytree=0.8,
        tree_method="hist", n_jobs=1, random_state=seed, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    model.fit(x[:2400], t[:2400], eval_set=[(x[:2400], t[:2400]), (x[2400:], t[2400:])], verbose=False)
    return [float(v) for v in model.evals_result()["validation_0"]["rmse"]]


def xgb_sklearn_multiclass_softprob(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """`XGBClassifier` on a 4-class problem (multi:softprob, mlogloss), learning_rate 0.1,
    max_depth 4, min_child_weight 1, `early_stopping_rounds=25` in the constructor, a
    validation set; losses: the training mlogloss per round."""
    import xgboost as xgb

    import mldbg.xgboost

    g = _seed(seed)
    x = torch.randn(3200, 10, generator=g)
    score = torch.stack([x[:, 0] + x[:, 1], x[:, 2] - x[:, 0], x[:, 3] * x[:, 4], -x[:, 1] - x[:, 2]], 1)
    y = torch.distributions.Categorical(logits=2 * score).sample().numpy()
    x = x.numpy()
    model = xgb.XGBClassifier(
        n_estimators=250, learning_rate=0.1, max_depth=4, eval_metric="mlogloss", early_stopping_rounds=25,
        n_jobs=1, random_state=seed, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    model.fit(x[:2560], y[:2560], eval_set=[(x[:2560], y[:2560]), (x[2560:], y[2560:])], verbose=False)
    return [float(v) for v in model.evals_result()["validation_0"]["mlogloss"]]


# ============================================================================= third-party-shaped PyTorch


def _weights_init(m: nn.Module) -> None:
    """pytorch/examples dcgan's custom init: conv N(0, 0.02), batch norm N(1, 0.02) and 0."""
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


def pytorch_examples_dcgan(path: str, epochs: int = 10, seed: int = 0, bug: str | None = None) -> list[float]:
    """pytorch/examples dcgan/main.py at 16x16: ConvTranspose2d-BatchNorm-ReLU generator with a
    Tanh, Conv2d-BatchNorm-LeakyReLU(0.2) discriminator with a Sigmoid, `nn.BCELoss`, the
    custom weights_init, Adam(2e-4, betas (0.5, 0.999)) for both, real label 1 / fake 0,
    images normalized to [-1, 1]; the loop's errD per iteration."""
    g = _seed(seed)
    x, _ = _digits(g, 1024, size=16)
    data = x * 2 - 1
    nz, ngf, ndf = 16, 16, 16
    netG = nn.Sequential(  # noqa: N806
        nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, 1, 4, 2, 1, bias=False), nn.Tanh(),
    )  # fmt: skip
    netD = nn.Sequential(  # noqa: N806
        nn.Conv2d(1, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid(),
    )  # fmt: skip
    netG.apply(_weights_init)
    netD.apply(_weights_init)
    criterion = nn.BCELoss()
    hook = Hook(path)
    hook.register_module(netG)
    hook.register_module(netD)
    hook.register_loss(criterion)
    optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))  # noqa: N806
    optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))  # noqa: N806
    loader = DataLoader(TensorDataset(data), batch_size=64, shuffle=True, drop_last=True)
    real_label, fake_label = 1.0, 0.0
    losses = []
    for _epoch in range(epochs):
        for (real,) in loader:
            # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
            if bug != "no_zero_grad":
                netD.zero_grad()
            b = real.size(0)
            label = torch.full((b,), real_label)
            errD_real = criterion(netD(real).view(-1), label)  # noqa: N806
            errD_real.backward()
            noise = torch.randn(b, nz, 1, 1)
            fake = netG(noise)
            label.fill_(fake_label)
            errD_fake = criterion(netD(fake.detach()).view(-1), label)  # noqa: N806
            errD_fake.backward()
            errD = errD_real + errD_fake  # noqa: N806
            optimizerD.step()
            # (2) Update G network: maximize log(D(G(z)))
            if bug != "no_zero_grad":
                netG.zero_grad()
            label.fill_(real_label)
            errG = criterion(netD(fake).view(-1), label)  # noqa: N806
            errG.backward()
            optimizerG.step()
            losses.append(errD.item())
    hook.close()
    return losses


class _VAE(nn.Module):
    def __init__(self, bug: str | None = None) -> None:
        super().__init__()
        self.fc1 = nn.Linear(144, 128)
        self.fc21 = nn.Linear(128, 16)
        self.fc22 = nn.Linear(128, 16)
        self.fc3 = nn.Linear(16, 128)
        self.fc4 = nn.Linear(128, 144)
        self.bug = bug

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h1 = F.relu(self.fc1(x))
        if self.bug == "log_zero_nan":  # the encoder gives the std, kept >= 0 by a ReLU; log of its square
            return self.fc21(h1), torch.log(F.relu(self.fc22(h1)) ** 2)
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
        std = torch.exp(0.5 * logvar)
        return mu + torch.randn_like(std) * std

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mu, logvar = self.encode(x.view(-1, 144))
        return self.decode(self.reparameterize(mu, logvar)), mu, logvar


def pytorch_examples_vae(path: str, epochs: int = 10, seed: int = 0, bug: str | None = None) -> list[float]:
    """pytorch/examples vae/main.py on 12x12 images: 144-128-(16, 16)-128-144, ReLU, sigmoid
    output, `F.binary_cross_entropy(reduction="sum") + KLD`, Adam(1e-3), batch 128; the loop's
    `loss.item() / len(data)`."""
    g = _seed(seed)
    x, _ = _digits(g, 2048)
    model = _VAE(bug)
    hook = Hook(path)
    hook.register_module(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader(TensorDataset(x), batch_size=128, shuffle=True)
    losses = []
    model.train()
    for _epoch in range(epochs):
        for (data,) in loader:
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(data)
            bce = F.binary_cross_entropy(recon_batch, data.view(-1, 144), reduction="sum")
            kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
            loss = bce + kld
            loss.backward()
            optimizer.step()
            losses.append(loss.item() / len(data))
    hook.close()
    return losses


def pytorch_examples_mnist_rnn(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """pytorch/examples mnist_rnn/main.py: an LSTM reads the image row by row, Linear on the
    last hidden state, `F.log_softmax` + `F.nll_loss`, Adadelta(lr 0.1), StepLR(1, gamma 0.7),
    batch 64, a test pass each epoch."""
    g = _seed(seed)
    x, y = _digits(g, 4352)
    x = (x - 0.1307) / 0.3081  # transforms.Normalize((0.1307,), (0.3081,))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.LSTM(input_size=12, hidden_size=64, batch_first=True)
            self.batchnorm = nn.BatchNorm1d(64)
            self.dropout1 = nn.Dropout2d(0.25)
            self.dropout2 = nn.Dropout2d(0.5)
            self.fc1 = nn.Linear(64, 32)
            self.fc2 = nn.Linear(32, 10)

        def forward(self, input: torch.Tensor) -> torch.Tensor:
            input = input.reshape(-1, 12, 12)
            output, _hidden = self.rnn(input)
            output = output[:, -1, :]
            output = self.batchnorm(output)
            output = self.dropout1(output)
            output = F.relu(self.fc1(output))
            output = self.dropout2(output)
            return F.log_softmax(self.fc2(output), dim=1)

    model = Net()
    if bug == "frozen_by_mistake":  # a leftover from loading a pretrained encoder
        for p in model.rnn.parameters():
            p.requires_grad = False
    hook = Hook(path)
    hook.register_module(model)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    train = DataLoader(TensorDataset(x[:4096], y[:4096]), batch_size=64, shuffle=True)
    test = DataLoader(TensorDataset(x[4096:], y[4096:]), batch_size=256)
    losses = []
    for _epoch in range(epochs):
        model.train()
        for data, target in train:
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            for data, _target in test:
                model(data)
        scheduler.step()
    hook.close()
    return losses


def pytorch_examples_siamese(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """pytorch/examples siamese_network/main.py with a small CNN in place of ResNet-18: the two
    images' features concatenated, Linear-ReLU-Linear, Sigmoid, `nn.BCELoss`, Xavier-uniform
    Linear init with bias 0.01, Adadelta(lr 1.0), StepLR(1, gamma 0.7); pairs of the same class
    or not, half each."""
    g = _seed(seed)
    x, y = _digits(g, 2048)
    by_class = [torch.nonzero(y == c).flatten() for c in range(10)]

    def pairs(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        i = torch.randint(0, len(x), (n,), generator=g)
        same = torch.rand(n, generator=g) < 0.5
        j = torch.empty(n, dtype=torch.long)
        for k in range(n):
            c = int(y[i[k]])
            if same[k]:
                pool = by_class[c]
            else:
                pool = by_class[(c + int(torch.randint(1, 10, (1,), generator=g))) % 10]
            j[k] = pool[int(torch.randint(0, len(pool), (1,), generator=g))]
        return x[i], x[j], same.float()

    class SiameseNetwork(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cnn = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True), nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
                nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            )  # fmt: skip
            self.fc = nn.Sequential(nn.Linear(64, 64), nn.ReLU(inplace=True), nn.Linear(64, 1))
            self.sigmoid = nn.Sigmoid()
            self.fc.apply(self.init_weights)

        def init_weights(self, m: nn.Module) -> None:
            if isinstance(m, nn.Linear):
                torch.nn.init.xavier_uniform_(m.weight)
                m.bias.data.fill_(0.01)

        def forward(self, input1: torch.Tensor, input2: torch.Tensor) -> torch.Tensor:
            output = torch.cat((self.cnn(input1), self.cnn(input2)), 1)
            return self.sigmoid(self.fc(output))

    model = SiameseNetwork()
    criterion = nn.BCELoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    a, b, t = pairs(1536)
    ta, tb, tt = pairs(256)
    train = DataLoader(TensorDataset(a, b, t), batch_size=32, shuffle=True)
    losses = []
    for _epoch in range(epochs):
        model.train()
        for images_1, images_2, targets in train:
            optimizer.zero_grad()
            outputs = model(images_1, images_2).squeeze()
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            criterion(model(ta, tb).squeeze(), tt)
        scheduler.step()
    hook.close()
    return losses


def pytorch_examples_time_sequence_lbfgs(
    path: str, steps: int = 10, seed: int = 0, bug: str | None = None
) -> list[float]:
    """pytorch/examples time_sequence_prediction: two stacked LSTMCell(51) and a Linear, in
    float64, trained on sine waves with `optim.LBFGS(lr=0.8)` and a closure, `nn.MSELoss`, 10
    steps (the script's 15, shorter waves), a test prediction (with future steps) after each; the closure's first loss per step."""
    g = _seed(seed)
    n, length = 48, 50
    t = torch.arange(length).double()
    shift = torch.randint(-40, 40, (n, 1), generator=g).double()
    data = torch.sin((t + shift) / 20.0)
    inp, target = data[6:, :-1], data[6:, 1:]
    test_input, _test_target = data[:6, :-1], data[:6, 1:]

    class Sequence(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm1 = nn.LSTMCell(1, 51)
            self.lstm2 = nn.LSTMCell(51, 51)
            self.linear = nn.Linear(51, 1)

        def forward(self, input: torch.Tensor, future: int = 0) -> torch.Tensor:
            outputs = []
            h_t = torch.zeros(input.size(0), 51, dtype=torch.double)
            c_t = torch.zeros(input.size(0), 51, dtype=torch.double)
            h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
            c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
            output = torch.zeros(input.size(0), 1, dtype=torch.double)
            for input_t in input.split(1, dim=1):
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            for _i in range(future):
                h_t, c_t = self.lstm1(output, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            return torch.cat(outputs, dim=1)

    seq = Sequence().double()
    criterion = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(seq)
    hook.register_loss(criterion)
    optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8)
    losses = []
    for _i in range(steps):
        first: list[float] = []

        def closure(first: list[float] = first) -> torch.Tensor:
            optimizer.zero_grad()
            loss = criterion(seq(inp), target)
            if not first:
                first.append(loss.item())
            loss.backward()
            return loss

        optimizer.step(closure)
        losses.append(first[0])
        with torch.no_grad():
            seq(test_input, future=20)
    hook.close()
    return losses


class _ConvLayer(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int) -> None:
        super().__init__()
        self.reflection_pad = nn.ReflectionPad2d(kernel // 2)
        self.conv2d = nn.Conv2d(cin, cout, kernel, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2d(self.reflection_pad(x))


class _ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = _ConvLayer(channels, channels, 3, 1)
        self.in1 = nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = _ConvLayer(channels, channels, 3, 1)
        self.in2 = nn.InstanceNorm2d(channels, affine=True)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.in1(self.conv1(x)))
        return self.in2(self.conv2(out)) + x


class _TransformerNet(nn.Module):
    """fast_neural_style's TransformerNet with 8/16/32 channels instead of 32/64/128 and two
    residual blocks instead of five; upsampling by nearest interpolation then a conv."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = _ConvLayer(3, 8, 9, 1)
        self.in1 = nn.InstanceNorm2d(8, affine=True)
        self.conv2 = _ConvLayer(8, 16, 3, 2)
        self.in2 = nn.InstanceNorm2d(16, affine=True)
        self.conv3 = _ConvLayer(16, 32, 3, 2)
        self.in3 = nn.InstanceNorm2d(32, affine=True)
        self.res1 = _ResidualBlock(32)
        self.res2 = _ResidualBlock(32)
        self.deconv1 = _ConvLayer(32, 16, 3, 1)
        self.in4 = nn.InstanceNorm2d(16, affine=True)
        self.deconv2 = _ConvLayer(16, 8, 3, 1)
        self.in5 = nn.InstanceNorm2d(8, affine=True)
        self.deconv3 = _ConvLayer(8, 3, 9, 1)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.in1(self.conv1(x)))
        y = self.relu(self.in2(self.conv2(y)))
        y = self.relu(self.in3(self.conv3(y)))
        y = self.res2(self.res1(y))
        y = self.relu(self.in4(self.deconv1(F.interpolate(y, scale_factor=2, mode="nearest"))))
        y = self.relu(self.in5(self.deconv2(F.interpolate(y, scale_factor=2, mode="nearest"))))
        return self.deconv3(y)


def _gram_matrix(y: torch.Tensor) -> torch.Tensor:
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    return features.bmm(features.transpose(1, 2)) / (ch * h * w)


def _normalize_batch(batch: torch.Tensor) -> torch.Tensor:
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    return (batch.div(255.0) - mean) / std


def fast_neural_style_lite(path: str, steps: int = 160, seed: int = 0, bug: str | None = None) -> list[float]:
    """pytorch/examples fast_neural_style's training loop, lite: TransformerNet (reflection
    padding, InstanceNorm, residual blocks, upsample-conv), a frozen feature extractor as the
    loss network (four conv stages; VGG-16 would be downloaded), content loss on the second
    stage, style loss on Gram matrices of all four, content weight 1e5, style weight 1e10,
    Adam(1e-3), images in 0..255 normalized with ImageNet statistics as the script does."""
    g = _seed(seed)
    n, size = 512, 32
    smooth = F.avg_pool2d(torch.rand(n, 3, size, size, generator=g), 5, 1, 2)
    images = ((smooth - smooth.mean((2, 3), keepdim=True)) * 4 + 0.5).clamp(0, 1) * 255
    style = (
        torch.sin(torch.arange(size).float() / 2)[None, :]
        * torch.cos(torch.arange(size).float() / 3)[:, None]
    )
    style = ((style[None].expand(3, -1, -1) * torch.tensor([0.5, 0.3, 0.4]).view(3, 1, 1) + 0.5) * 255)[None]

    torch.manual_seed(seed + 100)  # the loss network's fixed weights
    stages = nn.ModuleList(
        [
            nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU()),
            nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU()),
            nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU()),
            nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU()),
        ]
    ).eval()
    for p in stages.parameters():
        p.requires_grad = False

    def vgg(x: torch.Tensor) -> list[torch.Tensor]:
        out = []
        for stage in stages:
            x = stage(x)
            out.append(x)
        return out

    torch.manual_seed(seed)
    transformer = _TransformerNet()
    optimizer = torch.optim.Adam(transformer.parameters(), 1e-3)
    mse_loss = nn.MSELoss()
    hook = Hook(path)
    hook.register_module(transformer)
    gram_style = [_gram_matrix(f) for f in vgg(_normalize_batch(style))]
    content_weight, style_weight = 1e5, 1e10
    losses = []
    batch_size = 4
    perm = torch.randperm(n, generator=g)
    for it in range(steps):
        x = images[perm[(it * batch_size) % n : (it * batch_size) % n + batch_size]]
        optimizer.zero_grad()
        y = transformer(x)
        y = _normalize_batch(y)
        x = _normalize_batch(x)
        features_y = vgg(y)
        features_x = vgg(x)
        content_loss = content_weight * mse_loss(features_y[1], features_x[1])
        style_loss = 0.0
        for ft_y, gm_s in zip(features_y, gram_style, strict=True):
            gm_y = _gram_matrix(ft_y)
            style_loss += mse_loss(gm_y, gm_s[: len(x), :, :].expand_as(gm_y))
        style_loss *= style_weight
        total_loss = content_loss + style_loss
        total_loss.backward()
        optimizer.step()
        losses.append(total_loss.item())
    hook.close()
    return losses


def pytorch_examples_reinforce(
    path: str, episodes: int = 150, seed: int = 0, bug: str | None = None
) -> list[float]:
    """pytorch/examples reinforcement_learning/reinforce.py on an in-process CartPole (200-step
    limit): Linear(4, 128)-Dropout(0.6)-ReLU-Linear(128, 2)-softmax, Adam(1e-2), gamma 0.99,
    returns standardized with eps, `policy_loss = torch.cat(-log_prob * R).sum()` per episode."""
    from .rl import CartPole

    _seed(seed)
    env = CartPole(seed, limit=200)

    class Policy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.affine1 = nn.Linear(4, 128)
            self.dropout = nn.Dropout(p=0.6)
            self.affine2 = nn.Linear(128, 2)
            self.saved_log_probs: list[torch.Tensor] = []
            self.rewards: list[float] = []

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = F.relu(self.dropout(self.affine1(x)))
            return F.softmax(self.affine2(x), dim=1)

    policy = Policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
    eps = np.finfo(np.float32).eps.item()
    hook = Hook(path)
    hook.register_module(policy)
    losses = []
    for _episode in range(episodes):
        state = env.reset()
        done = False
        while not done:
            probs = policy(torch.from_numpy(state).float().unsqueeze(0))
            m = torch.distributions.Categorical(probs)
            action = m.sample()
            policy.saved_log_probs.append(m.log_prob(action))
            state, reward, done = env.step(int(action))
            policy.rewards.append(reward)
        R = 0.0  # noqa: N806
        returns: list[float] = []
        for r in policy.rewards[::-1]:
            R = r + 0.99 * R  # noqa: N806
            returns.insert(0, R)
        ret = torch.tensor(returns)
        ret = (ret - ret.mean()) / (ret.std() + eps) if len(ret) > 1 else ret * 0
        policy_loss = torch.cat([-lp * r for lp, r in zip(policy.saved_log_probs, ret, strict=True)]).sum()
        optimizer.zero_grad()
        policy_loss.backward()
        optimizer.step()
        losses.append(policy_loss.item())
        del policy.rewards[:]
        del policy.saved_log_probs[:]
    hook.close()
    return losses


def pytorch_examples_actor_critic(
    path: str, episodes: int = 150, seed: int = 0, bug: str | None = None
) -> list[float]:
    """pytorch/examples reinforcement_learning/actor_critic.py on an in-process CartPole: a
    shared Linear(4, 128) with action and value heads, Adam(3e-2), gamma 0.99, standardized
    returns, advantage = R - value, `F.smooth_l1_loss` for the critic, the sum of both losses
    per episode."""
    from .rl import CartPole

    _seed(seed)
    env = CartPole(seed, limit=200)

    class Policy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.affine1 = nn.Linear(4, 128)
            self.action_head = nn.Linear(128, 2)
            self.value_head = nn.Linear(128, 1)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            x = F.relu(self.affine1(x))
            return F.softmax(self.action_head(x), dim=-1), self.value_head(x)

    model = Policy()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
    eps = np.finfo(np.float32).eps.item()
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _episode in range(episodes):
        state = env.reset()
        saved: list[tuple[torch.Tensor, torch.Tensor]] = []
        rewards: list[float] = []
        done = False
        while not done:
            probs, state_value = model(torch.from_numpy(state).float())
            m = torch.distributions.Categorical(probs)
            action = m.sample()
            saved.append((m.log_prob(action), state_value))
            state, reward, done = env.step(int(action))
            rewards.append(reward)
        R = 0.0  # noqa: N806
        returns: list[float] = []
        for r in rewards[::-1]:
            R = r + 0.99 * R  # noqa: N806
            returns.insert(0, R)
        ret = torch.tensor(returns)
        ret = (ret - ret.mean()) / (ret.std() + eps) if len(ret) > 1 else ret * 0
        policy_losses, value_losses = [], []
        for (log_prob, value), r in zip(saved, ret, strict=True):
            advantage = r - value.item()
            policy_losses.append(-log_prob * advantage)
            value_losses.append(F.smooth_l1_loss(value, torch.tensor([r])))
        optimizer.zero_grad()
        loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    hook.close()
    return losses


class _CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=False)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head, self.dropout = n_head, dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0, is_causal=True
        )
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c)))


class _Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, bias=False)
        self.attn = _CausalSelfAttention(n_embd, n_head, dropout)
        self.ln_2 = nn.LayerNorm(n_embd, bias=False)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd, bias=False), nn.GELU(), nn.Linear(4 * n_embd, n_embd, bias=False),
            nn.Dropout(dropout),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class _NanoGPT(nn.Module):
    """nanoGPT's model.py in miniature: tied token embedding / lm_head, learned positions,
    pre-LayerNorm blocks without biases, N(0, 0.02) init with c_proj scaled by 1/sqrt(2 n_layer),
    `forward(idx, targets)` returning `(logits, loss)`."""

    def __init__(
        self, vocab: int, block: int, n_layer: int, n_head: int, n_embd: int, dropout: float
    ) -> None:
        super().__init__()
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(vocab, n_embd),
                "wpe": nn.Embedding(block, n_embd),
                "drop": nn.Dropout(dropout),
                "h": nn.ModuleList([_Block(n_embd, n_head, dropout) for _ in range(n_layer)]),
                "ln_f": nn.LayerNorm(n_embd, bias=False),
            }
        )
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> tuple[torch.Tensor, Any]:
        t = idx.size(1)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t)))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = (
            None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        )
        return logits, loss


def nanogpt_shakespeare_char_shape(
    path: str, max_iters: int = 250, seed: int = 0, bug: str | None = None
) -> list[float]:
    """nanoGPT's config/train_shakespeare_char.py, scaled down: dropout 0.2, lr 1e-3, min_lr
    1e-4, beta2 0.99, warm-up 25, cosine to `lr_decay_iters = max_iters`, weight decay 0.1 on
    matrices, grad_clip 1.0, no gradient accumulation, `estimate_loss()` every 50 iterations
    under `model.eval()`; model(x, y) returns the loss."""
    g = _seed(seed)
    vocab, block, batch = 48, 32, 16
    data = _markov_tokens(g, 40000, vocab, order_seed=21)
    train_data, val_data = data[:36000], data[36000:]

    def get_batch(split: str) -> tuple[torch.Tensor, torch.Tensor]:
        d = train_data if split == "train" else val_data
        ix = torch.randint(len(d) - block, (batch,), generator=g)
        return torch.stack([d[i : i + block] for i in ix]), torch.stack(
            [d[i + 1 : i + 1 + block] for i in ix]
        )

    model = _NanoGPT(vocab, block, n_layer=2, n_head=4, n_embd=64, dropout=0.2)
    learning_rate, min_lr, warmup_iters = 1e-3, 1e-4, 25

    def get_lr(it: int) -> float:
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        ratio = (it - warmup_iters) / (max_iters - warmup_iters)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=learning_rate, betas=(0.9, 0.99),
    )  # fmt: skip
    hook = Hook(path)
    hook.register_module(model)

    @torch.no_grad()
    def estimate_loss() -> dict[str, float]:
        out = {}
        model.eval()
        for split in ("train", "val"):
            out[split] = float(torch.stack([model(*get_batch(split))[1] for _ in range(4)]).mean())
        if bug != "train_in_eval_mode":  # the model.train() that ends estimate_loss, forgotten
            model.train()
        return out

    losses = []
    x, y = get_batch("train")
    for it in range(max_iters):
        for group in optimizer.param_groups:
            group["lr"] = get_lr(it)
        if it % 50 == 0:
            estimate_loss()
        _, loss = model(x, y)
        x, y = get_batch("train")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    hook.close()
    return losses


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


def torchvision_reference_train_one_epoch(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """torchvision's references/classification/train.py in miniature: a ResNet-style net
    (BasicBlocks, kaiming init, zero-init of the last BN's gamma), SGD(0.1, momentum 0.9,
    weight decay 1e-4, no decay on norms), a LinearLR warm-up (start factor 0.01) chained with
    CosineAnnealingLR through SequentialLR (stepped each epoch), `train_one_epoch` with
    `model.train()` and a functional `F.cross_entropy(..., label_smoothing=0.1)`, `evaluate`
    under `model.eval()` and `torch.inference_mode()`; RandomHorizontalFlip-like augmentation."""
    g = _seed(seed)
    x, y = _digits(g, 2304, size=16)
    x = (x - 0.5) / 0.25

    class ResNet(nn.Module):
        def __init__(self, num_classes: int = 10) -> None:
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(1, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True)
            )
            self.layer1 = _BasicBlock(16, 16, 1)
            self.layer2 = _BasicBlock(16, 32, 2)
            self.layer3 = _BasicBlock(32, 64, 2)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(64, num_classes)
            self.softmax = nn.Softmax(dim=1) if bug == "softmax_before_ce" else nn.Identity()
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
            for m in self.modules():
                if isinstance(m, _BasicBlock):
                    nn.init.constant_(m.bn2.weight, 0)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.layer3(self.layer2(self.layer1(self.stem(x))))
            return self.softmax(self.fc(torch.flatten(self.avgpool(x), 1)))

    model = ResNet()
    norm_params = [p for m in model.modules() if isinstance(m, nn.BatchNorm2d) for p in m.parameters()]
    norm_ids = {id(p) for p in norm_params}
    other = [p for p in model.parameters() if id(p) not in norm_ids]
    optimizer = torch.optim.SGD(
        [{"params": other, "weight_decay": 1e-4}, {"params": norm_params, "weight_decay": 0.0}],
        lr=0.1, momentum=0.9,
    )  # fmt: skip
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=1)
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs - 1)
    scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, cosine], milestones=[1])
    hook = Hook(path)
    hook.register_module(model)
    train = DataLoader(TensorDataset(x[:2048], y[:2048]), batch_size=32, shuffle=True)
    test = DataLoader(TensorDataset(x[2048:], y[2048:]), batch_size=128)
    losses: list[float] = []

    def train_one_epoch() -> None:
        model.train()
        for image, target in train:
            flip = torch.rand(len(image), 1, 1, 1) < 0.5
            image = torch.where(flip, image.flip(3), image)
            output = model(image)
            loss = F.cross_entropy(output, target, label_smoothing=0.1)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())

    def evaluate() -> None:
        model.eval()
        with torch.inference_mode():
            for image, target in test:
                F.cross_entropy(model(image), target)

    for _epoch in range(epochs):
        train_one_epoch()
        scheduler.step()
        evaluate()
    hook.close()
    return losses


# ============================================================================= the set

PIPELINES = []

if installed("lightning", "torchmetrics"):
    _lit_cnn = healthy(
        "lightning_cnn_torchmetrics_adam_val", "Lightning image classification", lit_cnn_digits
    )
    _lit_gan = healthy("lightning_gan_manual_optimization", "Lightning GAN", lit_gan_manual_optimization)
    _lit_tab = healthy(
        "lightning_tabular_accumulate4_plateau", "Lightning tabular", lit_tabular_accumulate_plateau
    )
    _lit_lstm = healthy("lightning_lstm_forecaster_clip_steplr", "Lightning forecasting", lit_lstm_forecaster)
    PIPELINES += [
        _lit_cnn,
        healthy(
            "lightning_transformer_bf16_onecycle_clip",
            "Lightning text classification",
            lit_transformer_bf16_onecycle,
        ),
        healthy(
            "lightning_denoising_ae_early_stopping", "Lightning autoencoder", lit_denoising_ae_early_stopping
        ),
        _lit_gan,
        _lit_tab,
        _lit_lstm,
        buggy(_lit_cnn, "lr_x100"),
        buggy(_lit_gan, "no_zero_grad"),
        buggy(_lit_tab, "deep_sigmoid"),
        buggy(_lit_lstm, "frozen_by_mistake"),
    ]

if installed("transformers", "accelerate"):
    _hf_gpt2 = healthy(
        "hf_trainer_gpt2_clm_cosine_accum2", "HF Trainer causal LM", hf_gpt2_clm_cosine_accumulate
    )
    _hf_bert = healthy(
        "hf_trainer_bert_sequence_classification",
        "HF Trainer text classification",
        hf_bert_sequence_classification,
    )
    _hf_vit = healthy("hf_trainer_vit_image_classification", "HF Trainer ViT", hf_vit_image_classification)
    PIPELINES += [
        _hf_gpt2,
        _hf_bert,
        healthy("hf_trainer_t5_adafactor_reverse", "HF Trainer seq2seq", hf_t5_adafactor_reverse),
        _hf_vit,
        healthy(
            "hf_trainer_distilbert_token_classification",
            "HF Trainer token classification",
            hf_distilbert_token_classification,
        ),
        healthy("hf_trainer_llama_bf16_cpu", "HF Trainer causal LM bf16", hf_llama_bf16_cpu),
        buggy(_hf_gpt2, "lr_x100"),
        buggy(_hf_bert, "shuffled_labels"),
        buggy(_hf_vit, "inputs_x255"),
    ]

if installed("keras"):
    _keras_cnn = healthy(
        "keras_cnn_early_stopping", "Keras image classification", keras_cnn_digits_early_stopping
    )
    PIPELINES += [
        _keras_cnn,
        healthy(
            "keras_functional_tabular_bn_plateau", "Keras regression", keras_functional_tabular_regression
        ),
        healthy("keras_embedding_lstm_sentiment", "Keras text classification", keras_lstm_sentiment),
        healthy(
            "keras_transformer_block_adamw_cosine", "Keras transformer", keras_transformer_block_adamw_cosine
        ),
        buggy(_keras_cnn, "inputs_x255"),  # (a softmax + from_logits=True: Keras on TF uses the logits)
    ]

if installed("jax", "optax", "flax"):
    _jax_mlp = healthy("jax_mlp_regression_optax_adam", "JAX regression", jax_mlp_regression_optax_adam)
    PIPELINES += [
        healthy(
            "flax_linen_mlp_adamw_warmup_cosine_jit",
            "Flax classification",
            flax_linen_mlp_adamw_warmup_cosine,
        ),
        healthy("flax_nnx_cnn_sgd_momentum_clip", "Flax NNX image classification", flax_nnx_cnn_sgd_clip),
        _jax_mlp,
        buggy(_jax_mlp, "dead_relu_init"),
    ]

if installed("xgboost", "sklearn"):
    _xgb = healthy(
        "xgboost_train_binary_early_stopping", "XGBoost classification", xgb_train_binary_early_stopping
    )
    PIPELINES += [
        _xgb,
        healthy("xgboost_sklearn_regressor_subsample", "XGBoost regression", xgb_sklearn_regressor_subsample),
        healthy(
            "xgboost_sklearn_multiclass_softprob", "XGBoost multi-class", xgb_sklearn_multiclass_softprob
        ),
        buggy(_xgb, "shuffled_labels"),
    ]

_vae = healthy("pytorch_examples_vae_bce_kld", "pytorch/examples VAE", pytorch_examples_vae)
_nanogpt = healthy("nanogpt_shakespeare_char_shape", "nanoGPT-shaped LM", nanogpt_shakespeare_char_shape)
_tv_ref = healthy(
    "torchvision_reference_train_one_epoch",
    "torchvision reference classification",
    torchvision_reference_train_one_epoch,
)
PIPELINES += [
    healthy("pytorch_examples_dcgan_bce", "pytorch/examples DCGAN", pytorch_examples_dcgan),
    _vae,
    healthy(
        "pytorch_examples_mnist_rnn_adadelta", "pytorch/examples RNN classifier", pytorch_examples_mnist_rnn
    ),
    healthy("pytorch_examples_siamese_bce_adadelta", "pytorch/examples siamese", pytorch_examples_siamese),
    healthy(
        "pytorch_examples_time_sequence_lbfgs",
        "pytorch/examples LBFGS sequence",
        pytorch_examples_time_sequence_lbfgs,
    ),
    healthy(
        "pytorch_examples_fast_neural_style_lite", "pytorch/examples style transfer", fast_neural_style_lite
    ),
    healthy("pytorch_examples_reinforce_cartpole", "pytorch/examples REINFORCE", pytorch_examples_reinforce),
    healthy(
        "pytorch_examples_actor_critic_cartpole",
        "pytorch/examples actor-critic",
        pytorch_examples_actor_critic,
    ),
    _nanogpt,
    _tv_ref,
    buggy(_vae, "log_zero_nan"),
    buggy(_nanogpt, "train_in_eval_mode"),
    buggy(_tv_ref, "softmax_before_ce"),
]
