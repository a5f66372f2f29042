"""A blind held-out set (issue 26), part L: trainings recorded the way each tool's user records
them, of kinds not yet in the corpus. Written without running mldbg's rules on them; each was
checked only from its own losses (finite, going where its kind's loss goes).

Hugging Face `Trainer` (`mldbg.transformers.DebuggerCallback`, tiny random configs): ELECTRA
replaced-token detection with the user's own corrupting collator, ViT-MAE masked-autoencoder
pre-training (`run_mae.py`: normalized-pixel loss, base lr scaled by batch / 256), HuBERT keyword
classification on raw waveforms, SegFormer semantic segmentation with a polynomial schedule,
BERT pre-training (masked LM + next-sentence prediction), PatchTST multivariate forecasting,
ALBERT multi-label classification (`problem_type="multi_label_classification"`).
Lightning (`mldbg.lightning.DebuggerCallback`): WGAN-GP with manual optimization, two optimizers
and five critic steps per generator step, a U-Net segmenter under `precision="bf16-mixed"`,
Deep Sets with `CosineAnnealingWarmRestarts` at `interval="step"` and value clipping, manual
optimization with accumulation and `self.clip_gradients`, a TCN forecaster with a validation
loop. Keras 3 (`mldbg.keras.Hook`): PointNet on point clouds, the knowledge-distillation
`Distiller` with its own `train_step`, the Siamese contrastive-loss network (functional API,
`Lambda` distance), `RecommenderNet` collaborative filtering, the character-level LSTM text
generator on RMSprop. JAX (`mldbg.jax.Hook`): the Flax seq2seq addition example (LSTM encoder
and decoder, teacher forcing), full-batch `optax.lbfgs` with its zoom line search, a Flax NNX MLP
with `BatchNorm` and `Dropout` switched by `model.train()` / `model.eval()`. XGBoost
(`mldbg.xgboost.Hook`): multi-target regression with `multi_strategy="multi_output_tree"`, Cox
proportional-hazards survival, native categorical features (`enable_categorical`) in a
multi-class model with early stopping. Shapes of public PyTorch scripts (the README's two
lines): pytorch/examples super_resolution (ESPCN, `PixelShuffle`), a timm-style EfficientNet
`train_one_epoch` (RMSprop-TF, step decay every 2.4 epochs, mixup, a loss scaler, EMA),
torchvision's segmentation reference (an auxiliary head, `PolynomialLR` per iteration), an
accelerate loop under `accelerator.accumulate(model)`, the PyTorch tutorial's GRU encoder and
attention decoder translation, makemore's GRU, crnn.pytorch's CNN + BiLSTM + CTC text
recognizer.

Ten buggy twins, one per key of `BUGS`: the Lightning TCN at Adam lr 0.2 (lr_x100), ESPCN
without `optimizer.zero_grad()` (no_zero_grad), HuBERT's labels shuffled apart from the clips
(shuffled_labels), SegFormer fed 0-255 pixels normalized without the rescale (inputs_x255),
makemore's GRU returning softmax probabilities to `F.cross_entropy` (softmax_before_ce), the
segmentation reference's backbone initialised with biases of -2 (dead_relu_init), Deep Sets'
encoder as eight sigmoid layers (deep_sigmoid), the CRNN's first convolutions frozen after the
optimizer was built (frozen_by_mistake), the accelerate loop regressing `log(count)` of counts
that can be zero (log_zero_nan), the EfficientNet loop validating first and never calling
`model.train()` again (train_in_eval_mode).

A pipeline whose framework is not installed is left out of `PIPELINES`. Every framework is
imported inside its pipeline, so importing this module costs only torch. `SPLIT = BLIND6`.
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

from . import BLIND6, buggy, healthy, installed

SPLIT = BLIND6

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 47)


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


def _scenes(g: torch.Generator, n: int, size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """Segmentation scenes: (n, 3, size, size) images in [0, 1] with one to three shapes (class 1:
    reddish rectangles, class 2: bluish discs) on a textured background, and (n, size, size)
    masks of 0 (background), 1, 2."""
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    x = 0.35 * torch.rand(n, 3, 1, 1, generator=g) + 0.1 * torch.rand(n, 3, size, size, generator=g)
    mask = torch.zeros(n, size, size, dtype=torch.long)
    for i in range(n):
        for _ in range(int(torch.randint(1, 4, (1,), generator=g))):
            cy, cx = torch.randint(4, size - 4, (2,), generator=g).tolist()
            r = int(torch.randint(3, 8, (1,), generator=g))
            if float(torch.rand(1, generator=g)) < 0.5:
                region = ((yy - cy).abs() <= r) & ((xx - cx).abs() <= r // 2 + 2)
                colour, label = torch.tensor([0.9, 0.35, 0.2]), 1
            else:
                region = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
                colour, label = torch.tensor([0.2, 0.4, 0.9]), 2
            shade = 0.75 + 0.25 * float(torch.rand(1, generator=g))
            x[i][:, region] = (colour * shade)[:, None]
            mask[i][region] = label
    x = x + 0.05 * torch.randn(x.shape, generator=g)
    return x.clamp(0, 1), mask


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
    **args: Any,
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


# ============================================================================= Hugging Face Trainer


def hf_electra_replaced_token_detection(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """ELECTRA's discriminator trained on replaced-token detection with the user's own corrupting
    collator (15% of the tokens swapped for random ones, `labels` 1 where the token was
    replaced, 0 elsewhere; padding left out by the attention mask), on a tiny random
    `ElectraForPreTraining` (embedding 32, hidden 64, 2 layers); ELECTRA-Small's lr 5e-4,
    weight decay 0.01, 10% warm-up, linear decay, batch 32, 4 epochs, sequences of a Markov
    "language"."""
    from transformers import ElectraConfig, ElectraForPreTraining

    g = _seed(seed)
    vocab, length, n = 100, 32, 1344
    cls, pad = 1, 0
    stream = 4 + _markov_tokens(g, n * (length - 1), vocab - 4, order_seed=31)
    ids = torch.cat([torch.full((n, 1), cls), stream.view(n, length - 1)], 1)
    cut = torch.randint(length // 2, length + 1, (n,), generator=g)
    ids[torch.arange(length)[None] >= cut[:, None]] = pad
    gen = torch.Generator().manual_seed(seed + 5)

    def corrupt(features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        input_ids = torch.stack([f["input_ids"] for f in features])
        special = (input_ids == pad) | (input_ids == cls)
        replace = (torch.rand(input_ids.shape, generator=gen) < 0.15) & ~special
        fake = torch.randint(4, vocab, input_ids.shape, generator=gen)
        corrupted = torch.where(replace, fake, input_ids)
        labels = (corrupted != input_ids).long()  # 0 on [CLS] and padding; the mask drops padding
        return {"input_ids": corrupted, "attention_mask": (~(input_ids == pad)).long(), "labels": labels}

    config = ElectraConfig(
        vocab_size=vocab, embedding_size=32, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=length, pad_token_id=pad,
    )  # fmt: skip
    model = ElectraForPreTraining(config)
    train = _Examples(input_ids=ids[:1216])
    val = _Examples(input_ids=ids[1216:])
    return _hf_train(
        path, model, train, val, collator=corrupt, num_train_epochs=4, per_device_train_batch_size=32,
        learning_rate=5e-4, weight_decay=0.01, warmup_steps=0.1, remove_unused_columns=False,
    )  # fmt: skip


def hf_vit_mae_pretraining(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Masked-autoencoder pre-training as `run_mae.py` runs it, on a tiny random
    `ViTMAEForPreTraining` (16x16 images, 4x4 patches, 75% masked, `norm_pix_loss=True`, 2-layer
    encoder, 1-layer decoder): lr = base lr 1e-3 x batch / 256, weight decay 0.05, cosine with
    5% warm-up, batch 64, 8 epochs; images normalized with the ImageNet mean and std."""
    from transformers import ViTMAEConfig, ViTMAEForPreTraining

    g = _seed(seed)
    x, _ = _images(g, 1280, size=16, proto_seed=1313)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    pixel_values = (x - mean) / std
    config = ViTMAEConfig(
        image_size=16, patch_size=4, num_channels=3, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, decoder_hidden_size=32, decoder_num_hidden_layers=1, decoder_num_attention_heads=4,
        decoder_intermediate_size=64, mask_ratio=0.75, norm_pix_loss=True,
    )  # fmt: skip
    model = ViTMAEForPreTraining(config)
    batch = 64
    train = _Examples(pixel_values=pixel_values[:1152])
    val = _Examples(pixel_values=pixel_values[1152:])
    return _hf_train(
        path, model, train, val, num_train_epochs=8, per_device_train_batch_size=batch,
        learning_rate=1e-3 * batch / 256, weight_decay=0.05, lr_scheduler_type="cosine", warmup_steps=0.05,
        remove_unused_columns=False,
    )  # fmt: skip


def hf_hubert_keyword_classification(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Keyword spotting as `run_audio_classification.py` runs it, on a tiny random
    `HubertForSequenceClassification` (a 3-layer conv feature encoder over raw 16 kHz audio,
    2 Transformer layers, mean pooling): 0.05 s clips, each "word" a class-specific pair of
    tones with a rising or falling glide, zero-mean unit-variance per clip (the feature
    extractor's `do_normalize`), lr 3e-4 (from scratch), 10% warm-up, linear decay, batch 32, 5
    epochs."""
    from transformers import HubertConfig, HubertForSequenceClassification

    g = _seed(seed)
    n, samples, classes, rate = 736, 800, 6, 16000
    pg = torch.Generator().manual_seed(2024)
    base = 300 + 2500 * torch.rand(classes, 2, generator=pg)
    glide = torch.randn(classes, generator=pg).sign() * 400
    y = torch.randint(0, classes, (n,), generator=g)
    t = torch.arange(samples) / rate
    jitter = 1 + 0.05 * torch.randn(n, 1, generator=g)
    f0 = base[y, :1] * jitter + glide[y, None] * t
    f1 = base[y, 1:] * jitter
    phase = 2 * math.pi * torch.rand(n, 2, generator=g)
    audio = torch.sin(2 * math.pi * f0 * t + phase[:, :1]) + 0.6 * torch.sin(
        2 * math.pi * f1 * t + phase[:, 1:]
    )
    audio = audio * (0.3 + torch.rand(n, 1, generator=g)) + 0.3 * torch.randn(n, samples, generator=g)
    audio = (audio - audio.mean(1, keepdim=True)) / (audio.std(1, keepdim=True) + 1e-7)
    labels = y[torch.randperm(n, generator=g)] if bug == "shuffled_labels" else y  # a re-sorted label column
    config = HubertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4, num_labels=classes, mask_time_length=4, use_weighted_layer_sum=False,
    )  # fmt: skip
    model = HubertForSequenceClassification(config)
    train = _Examples(input_values=audio[:640], labels=labels[:640])
    val = _Examples(input_values=audio[640:], labels=labels[640:])
    return _hf_train(
        path, model, train, val, num_train_epochs=5, per_device_train_batch_size=32, learning_rate=3e-4,
        warmup_steps=0.1, remove_unused_columns=False,
    )  # fmt: skip


def hf_segformer_semantic_segmentation(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Semantic segmentation as `run_semantic_segmentation.py` runs it, on a tiny random
    `SegformerForSemanticSegmentation` (two Mix Transformer stages, hidden sizes 16 and 32,
    spatial-reduction attention, the all-MLP decode head; the logits upsampled to the labels):
    uint8 images rescaled by 1/255 and normalized with the ImageNet mean and std, AdamW lr 6e-4
    (from scratch), weight decay 0.01, polynomial decay, batch 16, 4 epochs; 3 labels."""
    from transformers import SegformerConfig, SegformerForSemanticSegmentation

    g = _seed(seed)
    x, mask = _scenes(g, 1088, size=32)
    pixels = (x * 255).round().to(torch.uint8)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    scaled = pixels.float() if bug == "inputs_x255" else pixels.float() / 255  # do_rescale=False by mistake
    pixel_values = (scaled - mean) / std
    config = SegformerConfig(
        num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
        patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[4, 4], decoder_hidden_size=32,
        num_labels=3, semantic_loss_ignore_index=255,
    )  # fmt: skip
    model = SegformerForSemanticSegmentation(config)
    train = _Examples(pixel_values=pixel_values[:960], labels=mask[:960])
    val = _Examples(pixel_values=pixel_values[960:], labels=mask[960:])
    return _hf_train(
        path, model, train, val, num_train_epochs=4, per_device_train_batch_size=16, learning_rate=6e-4,
        weight_decay=0.01, lr_scheduler_type="polynomial", remove_unused_columns=False,
    )  # fmt: skip


def hf_bert_pretraining_mlm_nsp(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """BERT pre-training with both heads (`BertForPreTraining`: masked LM + next-sentence
    prediction), the user's collator masking 15% of the tokens the BERT way (80% `[MASK]`, 10%
    random, 10% kept; other labels -100): sentence pairs `[CLS] A [SEP] B [SEP]` with
    `token_type_ids`, B the true continuation half the time, else a segment of a document on
    another "topic" (its own Markov chain); lr 5e-4 (the ELECTRA paper's BERT-Small), weight decay
    0.01, 10% warm-up, linear decay, batch 32, 4 epochs (BERT's recipe, shortened)."""
    from transformers import BertConfig, BertForPreTraining

    g = _seed(seed)
    vocab, seg, n, topics = 120, 14, 1472, 4
    pad, cls, sep, mask_id = 0, 1, 2, 3
    chains = [
        5 + _markov_tokens(g, n * 2 * seg // topics + 64, vocab - 5, order_seed=50 + t) for t in range(topics)
    ]
    ids = torch.zeros(n, 3 + 2 * seg, dtype=torch.long)
    types = torch.zeros_like(ids)
    nsp = torch.zeros(n, dtype=torch.long)
    for i in range(n):
        t = i % topics
        start = int(torch.randint(0, len(chains[t]) - 2 * seg, (1,), generator=g))
        a, b = chains[t][start : start + seg], chains[t][start + seg : start + 2 * seg]
        if float(torch.rand(1, generator=g)) < 0.5:
            other = (t + int(torch.randint(1, topics, (1,), generator=g))) % topics
            s = int(torch.randint(0, len(chains[other]) - seg, (1,), generator=g))
            b, nsp[i] = chains[other][s : s + seg], 1
        ids[i] = torch.cat([torch.tensor([cls]), a, torch.tensor([sep]), b, torch.tensor([sep])])
        types[i, seg + 2 :] = 1
    gen = torch.Generator().manual_seed(seed + 9)

    def mask_tokens(features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        input_ids = torch.stack([f["input_ids"] for f in features])
        labels = input_ids.clone()
        special = input_ids < 5
        chosen = (torch.rand(input_ids.shape, generator=gen) < 0.15) & ~special
        labels[~chosen] = -100
        r = torch.rand(input_ids.shape, generator=gen)
        input_ids = input_ids.clone()
        input_ids[chosen & (r < 0.8)] = mask_id
        rand = chosen & (r >= 0.8) & (r < 0.9)
        input_ids[rand] = torch.randint(5, vocab, (int(rand.sum()),), generator=gen)
        return {
            "input_ids": input_ids,
            "token_type_ids": torch.stack([f["token_type_ids"] for f in features]),
            "attention_mask": torch.ones_like(input_ids),
            "labels": labels,
            "next_sentence_label": torch.stack([f["next_sentence_label"] for f in features]),
        }

    config = BertConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=64, pad_token_id=pad,
    )  # fmt: skip
    model = BertForPreTraining(config)
    train = _Examples(input_ids=ids[:1344], token_type_ids=types[:1344], next_sentence_label=nsp[:1344])
    val = _Examples(input_ids=ids[1344:], token_type_ids=types[1344:], next_sentence_label=nsp[1344:])
    return _hf_train(
        path, model, train, val, collator=mask_tokens, num_train_epochs=4, per_device_train_batch_size=32,
        learning_rate=5e-4, weight_decay=0.01, warmup_steps=0.1, remove_unused_columns=False,
    )  # fmt: skip


def hf_patchtst_forecasting(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Multivariate forecasting as the PatchTST blog's recipe runs it, on a tiny random
    `PatchTSTForPrediction` (context 64, horizon 16, patches of 8 with stride 8, channel
    independence, `scaling="std"`, d_model 32, 2 layers): windows of 3 series (daily and weekly
    cycles, a trend, noise), `past_values` / `future_values`, lr 2.5e-3 (the PatchTST scripts' rate
    for their smallest data set), batch 64, 6 epochs."""
    from transformers import PatchTSTConfig, PatchTSTForPrediction

    g = _seed(seed)
    length, channels, context, horizon = 6000, 3, 64, 16
    t = torch.arange(length, dtype=torch.float32)
    amp = 1 + torch.rand(channels, generator=g)
    series = (
        amp * torch.sin(2 * math.pi * t[:, None] / 24 + torch.rand(channels, generator=g) * 6)
        + 0.5 * torch.sin(2 * math.pi * t[:, None] / 168)
        + 0.0003 * t[:, None] * torch.randn(channels, generator=g)
        + 0.3 * torch.randn(length, channels, generator=g)
    )
    starts = torch.arange(0, length - context - horizon, 4)
    past = torch.stack([series[s : s + context] for s in starts])
    future = torch.stack([series[s + context : s + context + horizon] for s in starts])
    config = PatchTSTConfig(
        num_input_channels=channels, context_length=context, prediction_length=horizon, patch_length=8,
        patch_stride=8, d_model=32, num_hidden_layers=2, num_attention_heads=4, ffn_dim=64, dropout=0.1,
        head_dropout=0.1, scaling="std", loss="mse",
    )  # fmt: skip
    model = PatchTSTForPrediction(config)
    cut = int(0.85 * len(starts))
    train = _Examples(past_values=past[:cut], future_values=future[:cut])
    val = _Examples(past_values=past[cut:], future_values=future[cut:])
    return _hf_train(
        path, model, train, val, num_train_epochs=6, per_device_train_batch_size=64, learning_rate=2.5e-3,
        remove_unused_columns=False,
    )  # fmt: skip


def hf_albert_multilabel(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Multi-label topic tagging on a tiny random `AlbertForSequenceClassification` with
    `problem_type="multi_label_classification"` (`BCEWithLogitsLoss` on float multi-hot labels):
    5 topics, each with its lexicon, a text carrying one to three topics; ALBERT's factorized
    embedding (32) and shared layers (hidden 64, 3 layers), lr 5e-4, weight decay 0.01, 10%
    warm-up, linear decay, batch 32, 4 epochs."""
    from transformers import AlbertConfig, AlbertForSequenceClassification

    g = _seed(seed)
    vocab, length, n, topics = 160, 32, 1408, 5
    ids = torch.randint(40, vocab, (n, length), generator=g)
    labels = torch.zeros(n, topics)
    for i in range(n):
        k = int(torch.randint(1, 4, (1,), generator=g))
        chosen = torch.randperm(topics, generator=g)[:k]
        labels[i, chosen] = 1.0
        for c in chosen.tolist():
            where = torch.randperm(length - 1, generator=g)[: int(torch.randint(1, 4, (1,), generator=g))] + 1
            ids[i, where] = 5 + 7 * c + torch.randint(0, 7, (len(where),), generator=g)
    ids[:, 0] = 2  # [CLS]
    config = AlbertConfig(
        vocab_size=vocab, embedding_size=32, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=length, num_labels=topics,
        problem_type="multi_label_classification", hidden_dropout_prob=0.1, classifier_dropout_prob=0.1,
    )  # fmt: skip
    model = AlbertForSequenceClassification(config)
    mask = torch.ones_like(ids)
    train = _Examples(input_ids=ids[:1280], attention_mask=mask[:1280], labels=labels[:1280])
    val = _Examples(input_ids=ids[1280:], attention_mask=mask[1280:], labels=labels[1280:])
    return _hf_train(
        path, model, train, val, num_train_epochs=4, per_device_train_batch_size=32, learning_rate=5e-4,
        weight_decay=0.01, warmup_steps=0.1,
    )  # fmt: skip


# ============================================================================= Lightning


def lit_wgan_gp_manual_optimization(
    path: str, epochs: int = 3, seed: int = 0, bug: str | None = None
) -> list[float]:
    """WGAN-GP (Gulrajani et al. 2017) as a LightningModule with `automatic_optimization = False`:
    two optimizers from `configure_optimizers`, Adam(lr 1e-4, betas (0.0, 0.9)) each, the critic
    stepped every batch and the generator every fifth (`n_critic = 5`), the gradient penalty
    with lambda 10 on random interpolates, `self.manual_backward`; the paper's toy data, a ring
    of 8 Gaussians, MLPs of 3 x 256 ReLU units, batch 256. The loss (the critic's) stays in a
    band around zero."""
    import lightning.pytorch as pl

    g = _seed(seed)
    n = 256 * 60
    angle = torch.randint(0, 8, (n,), generator=g).float() * (2 * math.pi / 8)
    data = 2 * torch.stack([angle.cos(), angle.sin()], 1) + 0.05 * torch.randn(n, 2, generator=g)
    data = data / 1.414

    def mlp(inp: int, out: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Linear(inp, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
            nn.Linear(256, out),
        )  # fmt: skip

    class WGANGP(pl.LightningModule):
        def __init__(self, n_critic: int = 5, lambda_gp: float = 10.0) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.generator = mlp(2, 2)
            self.critic = mlp(2, 1)
            self.n_critic, self.lambda_gp = n_critic, lambda_gp
            self.last_loss = torch.tensor(0.0)

        def gradient_penalty(self, real: torch.Tensor, fake: torch.Tensor) -> torch.Tensor:
            alpha = torch.rand(len(real), 1)
            mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
            grads = torch.autograd.grad(self.critic(mixed).sum(), mixed, create_graph=True)[0]
            return ((grads.norm(2, dim=1) - 1) ** 2).mean()

        def training_step(self, batch: Any, batch_idx: int) -> None:
            (real,) = batch
            opt_g, opt_d = self.optimizers()
            fake = self.generator(torch.randn(len(real), 2))
            d_loss = (
                self.critic(fake.detach()).mean() - self.critic(real).mean()
                + self.lambda_gp * self.gradient_penalty(real, fake.detach())
            )  # fmt: skip
            opt_d.zero_grad()
            self.manual_backward(d_loss)
            opt_d.step()
            self.last_loss = d_loss.detach()
            self.log("d_loss", d_loss)
            if (batch_idx + 1) % self.n_critic == 0:
                g_loss = -self.critic(self.generator(torch.randn(len(real), 2))).mean()
                opt_g.zero_grad()
                self.manual_backward(g_loss)
                opt_g.step()
                self.log("g_loss", g_loss)

        def configure_optimizers(self) -> Any:
            opt_g = torch.optim.Adam(self.generator.parameters(), lr=1e-4, betas=(0.0, 0.9))
            opt_d = torch.optim.Adam(self.critic.parameters(), lr=1e-4, betas=(0.0, 0.9))
            return [opt_g, opt_d]

    train = DataLoader(TensorDataset(data), batch_size=256, shuffle=True, drop_last=True)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(WGANGP(), train)
    return history.losses


def lit_unet_bf16_mixed_segmentation(
    path: str, epochs: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A small U-Net (two down blocks, a bottleneck, two up blocks with skip connections,
    transposed-conv upsampling) as a LightningModule segmenting 3-class scenes under
    `Trainer(precision="bf16-mixed")`, cross-entropy plus soft Dice, Adam(1e-3) on a per-epoch
    `CosineAnnealingLR`, a validation loop logging the mean IoU, batch 16."""
    import lightning.pytorch as pl

    g = _seed(seed)
    x, mask = _scenes(g, 832, size=32)
    x = (x - 0.4) / 0.3

    def block(inp: int, out: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Conv2d(inp, out, 3, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU(inplace=True),
            nn.Conv2d(out, out, 3, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU(inplace=True),
        )  # fmt: skip

    class UNet(pl.LightningModule):
        def __init__(self, classes: int = 3) -> None:
            super().__init__()
            self.down1, self.down2, self.mid = block(3, 16), block(16, 32), block(32, 64)
            self.up2, self.dec2 = nn.ConvTranspose2d(64, 32, 2, stride=2), block(64, 32)
            self.up1, self.dec1 = nn.ConvTranspose2d(32, 16, 2, stride=2), block(32, 16)
            self.head = nn.Conv2d(16, classes, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            d1 = self.down1(x)
            d2 = self.down2(F.max_pool2d(d1, 2))
            m = self.mid(F.max_pool2d(d2, 2))
            u2 = self.dec2(torch.cat([self.up2(m), d2], 1))
            u1 = self.dec1(torch.cat([self.up1(u2), d1], 1))
            return self.head(u1)

        def loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            probs = logits.float().softmax(1)
            onehot = F.one_hot(target, 3).permute(0, 3, 1, 2).float()
            inter = (probs * onehot).sum((0, 2, 3))
            dice = 1 - (2 * inter + 1) / (probs.sum((0, 2, 3)) + onehot.sum((0, 2, 3)) + 1)
            return F.cross_entropy(logits.float(), target) + dice.mean()

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            loss = self.loss(self(xb), yb)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            xb, yb = batch
            logits = self(xb)
            pred = logits.argmax(1)
            ious = [((pred == c) & (yb == c)).sum() / (((pred == c) | (yb == c)).sum() + 1) for c in range(3)]
            self.log("val_loss", self.loss(logits, yb))
            self.log("val_miou", torch.stack(ious).mean())

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.Adam(self.parameters(), lr=1e-3)
            return [optimizer], [torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)]

    train = DataLoader(TensorDataset(x[:704], mask[:704]), batch_size=16, shuffle=True)
    val = DataLoader(TensorDataset(x[704:], mask[704:]), batch_size=64)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs, precision="bf16-mixed")
    trainer.fit(UNet(), train, val)
    return history.losses


def lit_deep_sets_warm_restarts(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Deep Sets (Zaheer et al. 2017) as a LightningModule: a per-element encoder phi (3 x 64
    ELU units), sum pooling, a decoder rho, regressing a permutation-invariant target of sets of
    5 to 20 elements (the count of elements in a region plus the spread of the set) with masks
    for the padding; Adam(1e-3) on `CosineAnnealingWarmRestarts(T_0=100)` stepped with
    `"interval": "step"`, `Trainer(gradient_clip_val=0.5, gradient_clip_algorithm="value")`, a
    validation loop, batch 64."""
    import lightning.pytorch as pl

    g = _seed(seed)
    n, most = 3072, 20
    sizes = torch.randint(5, most + 1, (n,), generator=g)
    pts = torch.randn(n, most, 2, generator=g)
    mask = (torch.arange(most)[None] < sizes[:, None]).float()
    inside = ((pts.norm(dim=-1) < 0.8).float() * mask).sum(1)
    mean = (pts * mask[..., None]).sum(1) / sizes[:, None]
    spread = (((pts - mean[:, None]) ** 2).sum(-1) * mask).sum(1) / sizes
    y = inside / 4 + spread
    y = ((y - y.mean()) / y.std())[:, None]

    class DeepSets(pl.LightningModule):
        def __init__(self, d: int = 64) -> None:
            super().__init__()
            if bug == "deep_sigmoid":  # "smooth" activations, and deeper
                layers: list[nn.Module] = [nn.Linear(2, d), nn.Sigmoid()]
                for _ in range(7):
                    layers += [nn.Linear(d, d), nn.Sigmoid()]
                self.phi = nn.Sequential(*layers)
            else:
                self.phi = nn.Sequential(
                    nn.Linear(2, d), nn.ELU(), nn.Linear(d, d), nn.ELU(), nn.Linear(d, d)
                )
            self.rho = nn.Sequential(nn.Linear(d, d), nn.ELU(), nn.Linear(d, 1))

        def forward(self, pts: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return self.rho((self.phi(pts) * mask[..., None]).sum(1))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            pb, mb, yb = batch
            loss = F.mse_loss(self(pb, mb), yb)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            pb, mb, yb = batch
            self.log("val_loss", F.mse_loss(self(pb, mb), yb))

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.Adam(self.parameters(), lr=1e-3)
            scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=100)
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    train = DataLoader(TensorDataset(pts[:2560], mask[:2560], y[:2560]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(pts[2560:], mask[2560:], y[2560:]), batch_size=256)
    history = _pl_losses()
    trainer = _pl_trainer(
        path, [history], max_epochs=epochs, gradient_clip_val=0.5, gradient_clip_algorithm="value"
    )
    trainer.fit(DeepSets(), train, val)
    return history.losses


def lit_manual_accumulate_clip_gradients(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Manual optimization as Lightning's docs write it with gradient accumulation: the loss
    divided by N, `self.manual_backward(loss)`, and every N = 4 batches
    `self.clip_gradients(opt, gradient_clip_val=1.0, gradient_clip_algorithm="norm")`,
    `opt.step()`, `opt.zero_grad()` and the `StepLR` scheduler from `self.lr_schedulers()`
    stepped at the epoch's end; a CNN image classifier, SGD(lr 0.05, momentum 0.9, nesterov),
    batch 16."""
    import lightning.pytorch as pl

    g = _seed(seed)
    x, y = _images(g, 1792, size=16, proto_seed=818)
    x = (x - 0.5) / 0.25
    accumulate = 4

    class ManualClassifier(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.net = nn.Sequential(
                nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                nn.Flatten(), nn.Dropout(0.3), nn.Linear(64 * 16, 10),
            )  # fmt: skip
            self.last_loss = torch.tensor(0.0)

        def training_step(self, batch: Any, batch_idx: int) -> None:
            opt = self.optimizers()
            xb, yb = batch
            loss = F.cross_entropy(self.net(xb), yb)
            self.manual_backward(loss / accumulate)
            if (batch_idx + 1) % accumulate == 0:
                self.clip_gradients(opt, gradient_clip_val=1.0, gradient_clip_algorithm="norm")
                opt.step()
                opt.zero_grad()
            self.last_loss = loss.detach()
            self.log("train_loss", loss)

        def on_train_epoch_end(self) -> None:
            self.lr_schedulers().step()

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            xb, yb = batch
            self.log("val_loss", F.cross_entropy(self.net(xb), yb))

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9, nesterov=True)
            return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.1)]

    train = DataLoader(TensorDataset(x[:1536], y[:1536]), batch_size=16, shuffle=True)
    val = DataLoader(TensorDataset(x[1536:], y[1536:]), batch_size=256)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(ManualClassifier(), train, val)
    return history.losses


def lit_tcn_forecasting(path: str, epochs: int = 6, seed: int = 0, bug: str | None = None) -> list[float]:
    """A temporal convolutional network (Bai et al. 2018, the locuslab TCN repo's
    `TemporalBlock`: two weight-normed dilated causal convolutions with chomping, ReLU, dropout
    0.2, a 1x1 residual downsample; dilations 1, 2, 4, 8) as a LightningModule forecasting the
    next 12 steps of a load-like series from 96 past steps, Adam(lr 2e-3), `StepLR`, MSE, a
    validation loop, batch 64."""
    import lightning.pytorch as pl
    from torch.nn.utils.parametrizations import weight_norm

    g = _seed(seed)
    length, past, horizon = 9000, 96, 12
    t = torch.arange(length, dtype=torch.float32)
    series = (
        torch.sin(2 * math.pi * t / 24) + 0.5 * torch.sin(2 * math.pi * t / 168 + 1)
        + 0.4 * torch.sin(2 * math.pi * t / 12) * (torch.sin(2 * math.pi * t / 168) > 0)
        + 0.2 * torch.randn(length, generator=g)
    )  # fmt: skip
    series = (series - series.mean()) / series.std()
    starts = torch.arange(0, length - past - horizon, 4)
    xw = torch.stack([series[s : s + past] for s in starts])[:, None]
    yw = torch.stack([series[s + past : s + past + horizon] for s in starts])

    class TemporalBlock(nn.Module):
        def __init__(self, inp: int, out: int, k: int, dilation: int, dropout: float = 0.2) -> None:
            super().__init__()
            pad = (k - 1) * dilation
            self.conv1 = weight_norm(nn.Conv1d(inp, out, k, padding=pad, dilation=dilation))
            self.conv2 = weight_norm(nn.Conv1d(out, out, k, padding=pad, dilation=dilation))
            self.pad, self.dropout = pad, nn.Dropout(dropout)
            self.downsample = nn.Conv1d(inp, out, 1) if inp != out else None
            for conv in (self.conv1, self.conv2):
                conv.weight.data.normal_(0, 0.01)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.dropout(F.relu(self.conv1(x)[..., : -self.pad]))
            h = self.dropout(F.relu(self.conv2(h)[..., : -self.pad]))
            res = x if self.downsample is None else self.downsample(x)
            return F.relu(h + res)

    class TCNForecaster(pl.LightningModule):
        def __init__(self, channels: int = 32) -> None:
            super().__init__()
            self.tcn = nn.Sequential(*[
                TemporalBlock(1 if i == 0 else channels, channels, 3, 2**i) for i in range(4)
            ])  # fmt: skip
            self.head = nn.Linear(channels, horizon)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.tcn(x)[:, :, -1])

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            loss = F.mse_loss(self(xb), yb)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            xb, yb = batch
            self.log("val_loss", F.mse_loss(self(xb), yb))

        def configure_optimizers(self) -> Any:
            lr = 2e-3 * (100 if bug == "lr_x100" else 1)
            optimizer = torch.optim.Adam(self.parameters(), lr=lr)
            return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)]

    cut = int(0.85 * len(starts))
    train = DataLoader(TensorDataset(xw[:cut], yw[:cut]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(xw[cut:], yw[cut:]), batch_size=256)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(TCNForecaster(), train, val)
    return history.losses


# ============================================================================= Keras 3 (TensorFlow backend)


def _point_clouds(rng: np.random.Generator, n: int, points: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Point clouds of 5 shapes (sphere, cube surface, cylinder, cone, torus) with random
    scales, rotations about the vertical axis and jitter; and their labels."""
    y = rng.integers(0, 5, n)
    clouds = np.empty((n, points, 3), dtype="float32")
    for i in range(n):
        u, v = rng.uniform(0, 2 * np.pi, points), rng.uniform(-1, 1, points)
        if y[i] == 0:
            p = rng.normal(size=(points, 3))
            p /= np.linalg.norm(p, axis=1, keepdims=True)
        elif y[i] == 1:
            p = rng.uniform(-1, 1, (points, 3))
            face = rng.integers(0, 3, points)
            p[np.arange(points), face] = rng.choice([-1.0, 1.0], points)
        elif y[i] == 2:
            p = np.stack([np.cos(u), np.sin(u), v], 1)
        elif y[i] == 3:
            r = (1 - v) / 2
            p = np.stack([r * np.cos(u), r * np.sin(u), v], 1)
        else:
            w = rng.uniform(0, 2 * np.pi, points)
            p = np.stack(
                [(1 + 0.4 * np.cos(w)) * np.cos(u), (1 + 0.4 * np.cos(w)) * np.sin(u), 0.4 * np.sin(w)], 1
            )
        a = rng.uniform(0, 2 * np.pi)
        rot = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
        clouds[i] = (p @ rot.T) * rng.uniform(0.7, 1.3) + rng.normal(0, 0.02, (points, 3))
    return clouds, y


def keras_pointnet_classification(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras example "Point cloud classification with PointNet": `conv_bn` (a kernel-1
    `Conv1D`, `BatchNormalization(momentum=0.0)`, ReLU) and `dense_bn` blocks, two T-nets whose
    last `Dense` starts at the identity and carries the `OrthogonalRegularizer(0.001)`,
    `GlobalMaxPooling1D`, `Dropout(0.3)`, a softmax `Dense`, `loss="sparse_categorical_crossentropy"`,
    `Adam(learning_rate=0.001)`, batch 32, validation data (32 points per cloud, filters
    halved)."""
    import keras
    from keras import layers, ops

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    x, y = _point_clouds(rng, 1024, points=32)

    def conv_bn(h: Any, filters: int) -> Any:
        h = layers.Conv1D(filters, kernel_size=1, padding="valid")(h)
        h = layers.BatchNormalization(momentum=0.0)(h)
        return layers.Activation("relu")(h)

    def dense_bn(h: Any, filters: int) -> Any:
        h = layers.Dense(filters)(h)
        h = layers.BatchNormalization(momentum=0.0)(h)
        return layers.Activation("relu")(h)

    class OrthogonalRegularizer(keras.regularizers.Regularizer):
        def __init__(self, num_features: int, l2reg: float = 0.001) -> None:
            self.num_features, self.l2reg = num_features, l2reg
            self.eye = ops.eye(num_features)

        def __call__(self, h: Any) -> Any:
            h = ops.reshape(h, (-1, self.num_features, self.num_features))
            xxt = ops.tensordot(h, h, axes=(2, 2))
            xxt = ops.reshape(xxt, (-1, self.num_features, self.num_features))
            return ops.sum(self.l2reg * ops.square(xxt - self.eye))

    def tnet(inputs: Any, num_features: int) -> Any:
        bias = keras.initializers.Constant(np.eye(num_features).flatten())
        reg = OrthogonalRegularizer(num_features)
        h = conv_bn(inputs, 16)
        h = conv_bn(h, 32)
        h = conv_bn(h, 256)
        h = layers.GlobalMaxPooling1D()(h)
        h = dense_bn(h, 128)
        h = dense_bn(h, 64)
        h = layers.Dense(num_features * num_features, kernel_initializer="zeros", bias_initializer=bias,
                         activity_regularizer=reg)(h)  # fmt: skip
        feat_t = layers.Reshape((num_features, num_features))(h)
        return layers.Dot(axes=(2, 1))([inputs, feat_t])

    inputs = keras.Input(shape=(32, 3))
    h = tnet(inputs, 3)
    h = conv_bn(h, 16)
    h = conv_bn(h, 16)
    h = tnet(h, 16)
    h = conv_bn(h, 16)
    h = conv_bn(h, 32)
    h = conv_bn(h, 256)
    h = layers.GlobalMaxPooling1D()(h)
    h = dense_bn(h, 128)
    h = layers.Dropout(0.3)(h)
    h = dense_bn(h, 64)
    h = layers.Dropout(0.3)(h)
    outputs = layers.Dense(5, activation="softmax")(h)
    model = keras.Model(inputs=inputs, outputs=outputs, name="pointnet")
    model.compile(
        loss="sparse_categorical_crossentropy",
        optimizer=keras.optimizers.Adam(learning_rate=0.001),
        metrics=["sparse_categorical_accuracy"],
    )
    history = _keras_losses()
    model.fit(
        x[:896], y[:896], batch_size=32, epochs=3, validation_data=(x[896:], y[896:]), verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_knowledge_distillation_train_step(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras example "Knowledge Distillation": a `Distiller(keras.Model)` holding a trained
    teacher and a student, its own `compile(optimizer, metrics, student_loss_fn,
    distillation_loss_fn, alpha=0.1, temperature=10)` and its own `train_step` (the teacher's
    softened predictions, `KLDivergence` x T^2 mixed with the student's cross-entropy under a
    `tf.GradientTape`, `self.optimizer.apply` on the student's variables, a `Mean` loss
    tracker) and `test_step`; the teacher (a wider CNN) fit first for 2 epochs; `Adam()`,
    batch 32, 2 epochs."""
    import keras
    import tensorflow as tf
    from keras import layers, ops

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images, labels = _images(g, 1536, size=16, proto_seed=616)
    x, y = images.permute(0, 2, 3, 1).numpy(), labels.numpy()

    def cnn(filters: tuple[int, int], name: str) -> Any:
        return keras.Sequential([
            keras.Input(shape=(16, 16, 3)),
            layers.Conv2D(filters[0], (3, 3), strides=(2, 2), padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.MaxPooling2D(pool_size=(2, 2), strides=(1, 1), padding="same"),
            layers.Conv2D(filters[1], (3, 3), strides=(2, 2), padding="same"),
            layers.Flatten(),
            layers.Dense(10),
        ], name=name)  # fmt: skip

    class Distiller(keras.Model):
        def __init__(self, student: Any, teacher: Any) -> None:
            super().__init__()
            self.teacher, self.student = teacher, student
            self.loss_tracker = keras.metrics.Mean(name="loss")

        def compile(self, optimizer: Any, metrics: Any, student_loss_fn: Any, distillation_loss_fn: Any,
                    alpha: float = 0.1, temperature: float = 3) -> None:  # fmt: skip
            super().compile(optimizer=optimizer, metrics=metrics)
            self.student_loss_fn, self.distillation_loss_fn = student_loss_fn, distillation_loss_fn
            self.alpha, self.temperature = alpha, temperature

        @property
        def metrics(self) -> list[Any]:
            return [self.loss_tracker, *super().metrics]

        def call(self, inputs: Any) -> Any:
            return self.student(inputs)

        def train_step(self, data: Any) -> dict[str, Any]:
            x, y = data
            teacher_predictions = self.teacher(x, training=False)
            with tf.GradientTape() as tape:
                student_predictions = self.student(x, training=True)
                student_loss = self.student_loss_fn(y, student_predictions)
                distillation_loss = self.distillation_loss_fn(
                    ops.softmax(teacher_predictions / self.temperature, axis=1),
                    ops.softmax(student_predictions / self.temperature, axis=1),
                ) * (self.temperature**2)
                loss = self.alpha * student_loss + (1 - self.alpha) * distillation_loss
            trainable_vars = self.student.trainable_variables
            gradients = tape.gradient(loss, trainable_vars)
            self.optimizer.apply(gradients, trainable_vars)
            self.loss_tracker.update_state(loss)
            return {"loss": self.loss_tracker.result(), "student_loss": student_loss,
                    "distillation_loss": distillation_loss}  # fmt: skip

        def test_step(self, data: Any) -> dict[str, Any]:
            x, y = data
            y_prediction = self.student(x, training=False)
            self.loss_tracker.update_state(self.student_loss_fn(y, y_prediction))
            return {"loss": self.loss_tracker.result()}

    teacher = cnn((64, 128), "teacher")
    student = cnn((8, 16), "student")
    teacher.compile(
        optimizer=keras.optimizers.Adam(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    teacher.fit(x[:1408], y[:1408], epochs=2, batch_size=32, verbose=0)
    distiller = Distiller(student=student, teacher=teacher)
    distiller.compile(
        optimizer=keras.optimizers.Adam(),
        metrics=None,
        student_loss_fn=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        distillation_loss_fn=keras.losses.KLDivergence(),
        alpha=0.1,
        temperature=10,
    )
    history = _keras_losses()
    distiller.fit(
        x[:1408], y[:1408], epochs=2, batch_size=32, validation_data=(x[1408:], y[1408:]), verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_siamese_contrastive_loss(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras example "Image similarity estimation using a Siamese Network with a contrastive
    loss": pairs labelled 0 (same class) or 1 (different), a shared embedding network
    (`BatchNormalization`, tanh `Conv2D`s, `AveragePooling2D`, a tanh `Dense(10)`), a
    `Lambda(euclidean_distance)`, `BatchNormalization`, a sigmoid `Dense(1)`, the contrastive loss
    with margin 1, `optimizer="RMSprop"`, batch 16, validation pairs; grey 20x20 images."""
    import keras
    from keras import layers, ops

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images, labels = _images(g, 700, size=20, channels=1, proto_seed=717)
    x, y = images.permute(0, 2, 3, 1).numpy(), labels.numpy()
    rng = np.random.default_rng(seed)
    by_class = [np.flatnonzero(y == c) for c in range(10)]
    left, right, same = [], [], []
    for i in range(len(x)):
        j = rng.choice(by_class[y[i]])
        k = rng.choice(by_class[(y[i] + rng.integers(1, 10)) % 10])
        left += [i, i]
        right += [j, k]
        same += [0.0, 1.0]
    pair_l, pair_r, pair_y = x[left], x[right], np.array(same, dtype="float32")

    def euclidean_distance(vects: Any) -> Any:
        x, y = vects
        sum_square = ops.sum(ops.square(x - y), axis=1, keepdims=True)
        return ops.sqrt(ops.maximum(sum_square, keras.backend.epsilon()))

    def loss(margin: float = 1) -> Any:
        def contrastive_loss(y_true: Any, y_pred: Any) -> Any:
            square_pred = ops.square(y_pred)
            margin_square = ops.square(ops.maximum(margin - y_pred, 0))
            return ops.mean((1 - y_true) * square_pred + y_true * margin_square)

        return contrastive_loss

    inp = keras.Input((20, 20, 1))
    h = layers.BatchNormalization()(inp)
    h = layers.Conv2D(4, (5, 5), activation="tanh")(h)
    h = layers.AveragePooling2D(pool_size=(2, 2))(h)
    h = layers.Conv2D(16, (5, 5), activation="tanh")(h)
    h = layers.AveragePooling2D(pool_size=(2, 2))(h)
    h = layers.Flatten()(h)
    h = layers.BatchNormalization()(h)
    h = layers.Dense(10, activation="tanh")(h)
    embedding_network = keras.Model(inp, h)
    input_1, input_2 = layers.Input((20, 20, 1)), layers.Input((20, 20, 1))
    merge_layer = layers.Lambda(euclidean_distance, output_shape=(1,))(
        [embedding_network(input_1), embedding_network(input_2)]
    )
    normal_layer = layers.BatchNormalization()(merge_layer)
    output_layer = layers.Dense(1, activation="sigmoid")(normal_layer)
    siamese = keras.Model(inputs=[input_1, input_2], outputs=output_layer)
    siamese.compile(loss=loss(margin=1), optimizer="RMSprop", metrics=["accuracy"])
    history = _keras_losses()
    cut = 1200
    siamese.fit(
        [pair_l[:cut], pair_r[:cut]], pair_y[:cut], batch_size=16, epochs=2, verbose=0,
        validation_data=([pair_l[cut:], pair_r[cut:]], pair_y[cut:]),
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_recommender_net_collaborative_filtering(
    path: str, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The Keras example "Collaborative Filtering for Movie Recommendations": a subclassed
    `RecommenderNet` (user and movie `Embedding`s of 50 with `he_normal` init and an L2(1e-6)
    regularizer, per-user and per-movie bias embeddings, the dot product plus the biases through
    a sigmoid), ratings min-max scaled to [0, 1], `keras.losses.BinaryCrossentropy()`,
    `Adam(learning_rate=0.001)`, batch 64, validation data; ratings of a low-rank "taste"
    model (300 users, 400 movies)."""
    import keras
    from keras import layers, ops

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    num_users, num_movies, n = 300, 400, 6000
    tu, tm = rng.normal(size=(num_users, 4)), rng.normal(size=(num_movies, 4))
    bias_u, bias_m = rng.normal(0, 0.5, num_users), rng.normal(0, 0.5, num_movies)
    users, movies = rng.integers(0, num_users, n), rng.integers(0, num_movies, n)
    score = (tu[users] * tm[movies]).sum(1) / 2 + bias_u[users] + bias_m[movies] + rng.normal(0, 0.4, n)
    ratings = np.clip(np.round((3.25 + 0.8 * score) * 2) / 2, 0.5, 5.0)
    x = np.stack([users, movies], 1)
    y = ((ratings - ratings.min()) / (ratings.max() - ratings.min())).astype("float32")

    class RecommenderNet(keras.Model):
        def __init__(self, num_users: int, num_movies: int, embedding_size: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.user_embedding = layers.Embedding(
                num_users, embedding_size, embeddings_initializer="he_normal",
                embeddings_regularizer=keras.regularizers.l2(1e-6),
            )  # fmt: skip
            self.user_bias = layers.Embedding(num_users, 1)
            self.movie_embedding = layers.Embedding(
                num_movies, embedding_size, embeddings_initializer="he_normal",
                embeddings_regularizer=keras.regularizers.l2(1e-6),
            )  # fmt: skip
            self.movie_bias = layers.Embedding(num_movies, 1)

        def call(self, inputs: Any) -> Any:
            user_vector = self.user_embedding(inputs[:, 0])
            user_bias = self.user_bias(inputs[:, 0])
            movie_vector = self.movie_embedding(inputs[:, 1])
            movie_bias = self.movie_bias(inputs[:, 1])
            dot_user_movie = ops.sum(user_vector * movie_vector, axis=1, keepdims=True)
            return ops.nn.sigmoid(dot_user_movie + user_bias + movie_bias)

    model = RecommenderNet(num_users, num_movies, 50)
    model.compile(
        loss=keras.losses.BinaryCrossentropy(), optimizer=keras.optimizers.Adam(learning_rate=0.001)
    )
    history = _keras_losses()
    cut = int(0.9 * n)
    model.fit(
        x[:cut], y[:cut], batch_size=64, epochs=2, verbose=0, validation_data=(x[cut:], y[cut:]),
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_char_lstm_text_generation(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras example "Character-level text generation with LSTM": windows of `maxlen`
    characters every 3, one-hot inputs and next-character targets, `LSTM(128)`, a softmax
    `Dense(len(chars))`, `RMSprop(learning_rate=0.01)`, `loss="categorical_crossentropy"`, batch
    128 (maxlen 24 instead of 40); the text: sentences of a small word grammar."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    subjects = ["the cat", "a dog", "my friend", "the old man", "she", "he", "the bird"]
    verbs = ["sees", "likes", "walks to", "runs past", "finds", "eats near"]
    objects = ["the house", "a tree", "the river", "my garden", "the red door", "a small boat"]
    words = []
    for _ in range(900):
        s = f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}"
        words.append(s + (", and " if rng.random() < 0.3 else ". "))
    text = "".join(words)[:12000]
    chars = sorted(set(text))
    char_indices = {c: i for i, c in enumerate(chars)}
    maxlen, step = 24, 3
    sentences = [text[i : i + maxlen] for i in range(0, len(text) - maxlen, step)]
    next_chars = [text[i + maxlen] for i in range(0, len(text) - maxlen, step)]
    x = np.zeros((len(sentences), maxlen, len(chars)), dtype="bool")
    y = np.zeros((len(sentences), len(chars)), dtype="bool")
    for i, sentence in enumerate(sentences):
        for t, char in enumerate(sentence):
            x[i, t, char_indices[char]] = 1
        y[i, char_indices[next_chars[i]]] = 1
    model = keras.Sequential([
        keras.Input(shape=(maxlen, len(chars))),
        layers.LSTM(128),
        layers.Dense(len(chars), activation="softmax"),
    ])  # fmt: skip
    model.compile(loss="categorical_crossentropy", optimizer=keras.optimizers.RMSprop(learning_rate=0.01))
    history = _keras_losses()
    model.fit(x, y, batch_size=128, epochs=3, verbose=0, callbacks=[mldbg.keras.Hook(path), history])
    return history.losses


# ============================================================================= JAX: Flax and optax


def flax_seq2seq_addition(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Flax example `seq2seq` (learning to add: "123+45" -> "168"): one-hot characters, an
    `nn.RNN(nn.LSTMCell)` encoder whose final carry starts an `nn.RNN(nn.LSTMCell)` decoder fed
    the teacher-forced answer, a `Dense` over the vocabulary, cross-entropy, `optax.adam(0.003)`,
    batch 128, a jitted step (hidden 128 instead of 512)."""
    import flax.linen as fnn
    import jax
    import optax

    import mldbg.jax

    rng = np.random.default_rng(seed)
    chars = " +=0123456789"
    vocab, q_len = len(chars), 7

    def batch(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a, b = rng.integers(0, 1000, size), rng.integers(0, 1000, size)
        queries = [f"{x}+{y}".ljust(q_len) for x, y in zip(a, b, strict=True)]
        answers = [f"{x + y:04d}" for x, y in zip(a, b, strict=True)]
        q = np.array([[chars.index(c) for c in s] for s in queries])
        ans = np.array([[chars.index(c) for c in s] for s in answers])
        dec_in = np.concatenate([np.full((size, 1), chars.index("=")), ans[:, :-1]], 1)
        eye = np.eye(vocab, dtype="float32")
        return eye[q], eye[dec_in], ans

    class Seq2seq(fnn.Module):
        hidden: int = 128

        @fnn.compact
        def __call__(self, encoder_inputs: Any, decoder_inputs: Any) -> Any:
            carry, _ = fnn.RNN(fnn.LSTMCell(self.hidden), return_carry=True, name="encoder")(encoder_inputs)
            h = fnn.RNN(fnn.LSTMCell(self.hidden), name="decoder")(decoder_inputs, initial_carry=carry)
            return fnn.Dense(vocab)(h)

    model = Seq2seq()
    q, d, _ = batch(2)
    params = model.init(jax.random.PRNGKey(seed), q, d)["params"]
    tx = optax.adam(0.003)
    opt_state = tx.init(params)

    @jax.jit
    def train_step(params: Any, opt_state: Any, q: Any, d: Any, ans: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            logits = model.apply({"params": p}, q, d)
            return optax.softmax_cross_entropy_with_integer_labels(logits, ans).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    hook = mldbg.jax.Hook(path)
    losses = []
    for step in range(steps):
        q, d, ans = batch(128)
        old = params
        params, opt_state, loss, grads = train_step(params, opt_state, q, d, ans)
        hook.record(step, params=old, grads=grads, loss=loss)
        losses.append(float(loss))
    hook.close()
    return losses


def optax_lbfgs_full_batch(path: str, steps: int = 150, seed: int = 0, bug: str | None = None) -> list[float]:
    """Full-batch L-BFGS as optax's docs run it: `opt = optax.lbfgs()` (memory 10, zoom line
    search), `value_and_grad = optax.value_and_grad_from_state(loss_fn)`, each iteration
    `opt.update(grad, state, params, value=value, grad=grad, value_fn=loss_fn)`; a tanh MLP
    (1-32-32-1) fitting a noisy damped oscillation on 400 points."""
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    rng = np.random.default_rng(seed)
    x = np.linspace(-3, 3, 400, dtype="float32")[:, None]
    y = (np.exp(-0.3 * x**2) * np.sin(3 * x) + 0.05 * rng.normal(size=x.shape)).astype("float32")
    key = jax.random.PRNGKey(seed)
    params = []
    for m, k in [(1, 32), (32, 32), (32, 1)]:
        key, sub = jax.random.split(key)
        params.append({"w": jax.random.normal(sub, (m, k)) * jnp.sqrt(1.0 / m), "b": jnp.zeros(k)})

    def loss_fn(params: Any) -> Any:
        h = jnp.asarray(x)
        for layer in params[:-1]:
            h = jnp.tanh(h @ layer["w"] + layer["b"])
        pred = h @ params[-1]["w"] + params[-1]["b"]
        return jnp.mean((pred - y) ** 2)

    opt = optax.lbfgs()
    state = opt.init(params)
    value_and_grad = optax.value_and_grad_from_state(loss_fn)

    @jax.jit
    def step_fn(params: Any, state: Any) -> Any:
        value, grad = value_and_grad(params, state=state)
        updates, state = opt.update(grad, state, params, value=value, grad=grad, value_fn=loss_fn)
        return optax.apply_updates(params, updates), state, value, grad

    hook = mldbg.jax.Hook(path)
    losses = []
    for step in range(steps):
        old = params
        params, state, value, grad = step_fn(params, state)
        hook.record(step, params=old, grads=grad, loss=value)
        losses.append(float(value))
    hook.close()
    return losses


def flax_nnx_batchnorm_dropout_mlp(
    path: str, steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Flax NNX tabular classifier with `nnx.BatchNorm` and `nnx.Dropout(0.2)` switched by
    `model.train()` / `model.eval()` (an evaluation every 100 steps, then back to training),
    `nnx.Optimizer(model, optax.adamw(optax.warmup_cosine_decay_schedule(0, 3e-3, 30, steps),
    weight_decay=1e-4), wrt=nnx.Param)`, an `nnx.jit` step, batch 128; 3 classes of a
    covertype-like table (12 standardized features)."""
    import optax
    from flax import nnx

    import mldbg.jax

    rng = np.random.default_rng(seed)
    n, d = 6000, 12
    x = rng.normal(size=(n, d)).astype("float32")
    score = np.stack([
        x[:, 0] + 0.5 * x[:, 1] * x[:, 2], np.sin(2 * x[:, 3]) + x[:, 4], 0.8 * x[:, 5] ** 2 - x[:, 0] * 0.3,
    ], 1)  # fmt: skip
    y = (score + 0.4 * rng.normal(size=score.shape)).argmax(1).astype("int32")

    class MLP(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.linear1 = nnx.Linear(d, 128, rngs=rngs)
            self.bn1 = nnx.BatchNorm(128, rngs=rngs)
            self.dropout = nnx.Dropout(0.2, rngs=rngs)
            self.linear2 = nnx.Linear(128, 128, rngs=rngs)
            self.bn2 = nnx.BatchNorm(128, rngs=rngs)
            self.linear3 = nnx.Linear(128, 3, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            h = self.dropout(nnx.relu(self.bn1(self.linear1(x))))
            h = self.dropout(nnx.relu(self.bn2(self.linear2(h))))
            return self.linear3(h)

    model = MLP(nnx.Rngs(params=seed, dropout=seed + 1))
    schedule = optax.warmup_cosine_decay_schedule(0.0, 3e-3, 30, steps)
    optimizer = nnx.Optimizer(model, optax.adamw(schedule, weight_decay=1e-4), wrt=nnx.Param)

    def loss_fn(model: Any, xb: Any, yb: Any) -> Any:
        return optax.softmax_cross_entropy_with_integer_labels(model(xb), yb).mean()

    @nnx.jit
    def train_step(model: Any, optimizer: Any, xb: Any, yb: Any) -> Any:
        loss, grads = nnx.value_and_grad(loss_fn)(model, xb, yb)
        optimizer.update(model, grads)
        return loss, grads

    eval_loss = nnx.jit(loss_fn)
    hook = mldbg.jax.Hook(path)
    losses = []
    model.train()
    for step in range(steps):
        idx = rng.choice(5000, 128, replace=False)
        params = nnx.state(model, nnx.Param)
        loss, grads = train_step(model, optimizer, x[idx], y[idx])
        hook.record(step, params=params, grads=grads, loss=loss)
        losses.append(float(loss))
        if step % 100 == 99:
            model.eval()
            hook.record(step // 100, mode="eval", loss=eval_loss(model, x[5000:], y[5000:]))
            model.train()
    hook.close()
    return losses


# ============================================================================= XGBoost


def xgb_multi_output_tree_regression(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Multi-target regression as xgboost's `multioutput_regression.py` demo fits it:
    `XGBRegressor(tree_method="hist", n_estimators=128, max_depth=8, subsample=0.6,
    multi_strategy="multi_output_tree")` (one vector-leaf tree per round for all 3 targets),
    eval_set with training and validation data; losses: the training RMSE per round."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    n = 3000
    x = rng.uniform(-3, 3, size=(n, 5))
    t = x[:, 0] + 0.5 * x[:, 1]
    y = np.stack([np.sin(t) * 2, np.cos(t) * 2, x[:, 2] * x[:, 3]], 1) + 0.2 * rng.normal(size=(n, 3))
    reg = xgb.XGBRegressor(
        tree_method="hist", n_estimators=128, max_depth=8, subsample=0.6, multi_strategy="multi_output_tree",
        n_jobs=1, random_state=seed, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    reg.fit(x[:2500], y[:2500], eval_set=[(x[:2500], y[:2500]), (x[2500:], y[2500:])], verbose=False)
    return [float(v) for v in reg.evals_result()["validation_0"]["rmse"]]


def xgb_cox_survival(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Cox proportional-hazards survival with `objective="survival:cox"` (labels: the time for an
    event, minus the time for a censored patient), `xgb.train` on a `DMatrix`,
    `eval_metric="cox-nloglik"`, learning_rate 0.05, max_depth 3, subsample 0.8,
    colsample_bytree 0.8, 400 rounds with early stopping (30) on the validation set; losses: the
    training negative partial log-likelihood per round."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    n = 3000
    x = np.column_stack([rng.normal(60, 10, n), rng.integers(0, 2, n), rng.normal(size=(n, 4))])
    risk = 0.04 * (x[:, 0] - 60) + 0.6 * x[:, 1] + 0.5 * x[:, 2] - 0.4 * np.maximum(x[:, 3], 0)
    event_time = rng.exponential(10 * np.exp(-risk))
    censor_time = rng.exponential(12, n)
    time = np.minimum(event_time, censor_time)
    label = np.where(event_time <= censor_time, time, -time)
    dtrain = xgb.DMatrix(x[:2400], label=label[:2400])
    dvalid = xgb.DMatrix(x[2400:], label=label[2400:])
    params = {
        "objective": "survival:cox", "eval_metric": "cox-nloglik", "learning_rate": 0.05, "max_depth": 3,
        "subsample": 0.8, "colsample_bytree": 0.8, "nthread": 1, "seed": seed,
    }  # fmt: skip
    result: dict[str, Any] = {}
    xgb.train(
        params, dtrain, num_boost_round=400, evals=[(dtrain, "train"), (dvalid, "valid")],
        early_stopping_rounds=30, evals_result=result, verbose_eval=False, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    return [float(v) for v in result["train"]["cox-nloglik"]]


def xgb_native_categorical_multiclass(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Native categorical splits as xgboost's categorical demo fits them: a pandas frame with
    `category` columns, `XGBClassifier(tree_method="hist", enable_categorical=True,
    max_cat_to_onehot=1, n_estimators=300, learning_rate=0.1, max_depth=5,
    early_stopping_rounds=20, eval_metric="mlogloss")`, 4 classes; losses: the training
    multi-class log loss per round."""
    import pandas as pd
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    n = 4000
    city = rng.integers(0, 30, n)
    device = rng.integers(0, 6, n)
    plan = rng.integers(0, 4, n)
    usage = rng.gamma(2.0, 1.5, n)
    tenure = rng.uniform(0, 60, n)
    city_effect = rng.normal(0, 1.2, (30, 4))
    device_effect = rng.normal(0, 0.8, (6, 4))
    logits = city_effect[city] + device_effect[device]
    logits[:, 1] += 0.5 * usage - 1
    logits[:, 2] += 0.04 * tenure - 1.2 + 0.6 * (plan == 3)
    logits[:, 3] += 0.8 * (plan == 0) - 0.02 * tenure
    p = np.exp(logits - logits.max(1, keepdims=True))
    y = np.array([rng.choice(4, p=row / row.sum()) for row in p])
    frame = pd.DataFrame({
        "city": pd.Categorical(city), "device": pd.Categorical(device), "plan": pd.Categorical(plan),
        "usage": usage, "tenure": tenure,
    })  # fmt: skip
    clf = xgb.XGBClassifier(
        tree_method="hist", enable_categorical=True, max_cat_to_onehot=1, n_estimators=300, learning_rate=0.1,
        max_depth=5, early_stopping_rounds=20, eval_metric="mlogloss", n_jobs=1, random_state=seed,
        callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    train, valid = frame.iloc[:3200], frame.iloc[3200:]
    clf.fit(train, y[:3200], eval_set=[(train, y[:3200]), (valid, y[3200:])], verbose=False)
    return [float(v) for v in clf.evals_result()["validation_0"]["mlogloss"]]


# ============================================================================= shapes of public PyTorch scripts


def pytorch_examples_super_resolution_espcn(
    path: str, epochs: int = 2, seed: int = 0, bug: str | None = None
) -> list[float]:
    """pytorch/examples `super_resolution` (ESPCN, Shi et al. 2016) as its README runs it
    (`--upscale_factor 3 --batchSize 4 --lr 0.001`): the luminance channel cropped to 24x24,
    the input downscaled to 8x8, `Net` = conv 5x5 (64), 3x3 (64), 3x3 (32), 3x3 (9) with ReLU
    and `nn.PixelShuffle(3)`, orthogonal init with the ReLU gain, `nn.MSELoss()`, Adam."""
    g = _seed(seed)
    rgb, _ = _scenes(g, 1200, size=24)
    target = (0.299 * rgb[:, :1] + 0.587 * rgb[:, 1:2] + 0.114 * rgb[:, 2:]).clamp(0, 1)
    inputs = F.interpolate(target, size=(8, 8), mode="bicubic", align_corners=False).clamp(0, 1)

    class Net(nn.Module):
        def __init__(self, upscale_factor: int) -> None:
            super().__init__()
            self.relu = nn.ReLU()
            self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
            self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1))
            self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1))
            self.conv4 = nn.Conv2d(32, upscale_factor**2, (3, 3), (1, 1), (1, 1))
            self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
            nn.init.orthogonal_(self.conv1.weight, nn.init.calculate_gain("relu"))
            nn.init.orthogonal_(self.conv2.weight, nn.init.calculate_gain("relu"))
            nn.init.orthogonal_(self.conv3.weight, nn.init.calculate_gain("relu"))
            nn.init.orthogonal_(self.conv4.weight)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.relu(self.conv1(x))
            x = self.relu(self.conv2(x))
            x = self.relu(self.conv3(x))
            return self.pixel_shuffle(self.conv4(x))

    model = Net(upscale_factor=3)
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    training_data_loader = DataLoader(TensorDataset(inputs[:1000], target[:1000]), batch_size=4, shuffle=True)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses = []
    for _epoch in range(epochs):
        model.train()
        for input, target_b in training_data_loader:
            if bug != "no_zero_grad":
                optimizer.zero_grad()
            loss = criterion(model(input), target_b)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            criterion(model(inputs[1000:]), target[1000:])
    hook.close()
    return losses


def timm_efficientnet_train_one_epoch(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """timm's `train.py` / `train_one_epoch` shape with its EfficientNet recipe: a tiny
    EfficientNet (MBConv blocks with squeeze-excitation, SiLU, drop path 0.2, dropout 0.2),
    `Mixup(mixup_alpha=0.2, label_smoothing=0.1)` with `SoftTargetCrossEntropy`, RMSprop-TF
    (alpha 0.9, eps 1e-3, momentum 0.9, weight decay 1e-5) at lr 0.016 x batch / 256, a warm-up
    epoch from 1e-6 then step decay x0.97 every 2.4 epochs, `ModelEmaV2(decay=0.9998)`, a
    `NativeScaler`-shaped loss scaler (`scaler.scale(loss).backward()`, `scaler.step`,
    `scaler.update`: timm's `--amp` path kept on fp32 here), `validate` each epoch; batch 64."""
    g = _seed(seed)
    x, y = _images(g, 1280, size=16, proto_seed=999)
    mean, std = x[:1024].mean((0, 2, 3), keepdim=True), x[:1024].std((0, 2, 3), keepdim=True)
    x = (x - mean) / std

    class SqueezeExcite(nn.Module):
        def __init__(self, ch: int, rd: int) -> None:
            super().__init__()
            self.conv_reduce, self.conv_expand = nn.Conv2d(ch, rd, 1), nn.Conv2d(rd, ch, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            s = self.conv_expand(F.silu(self.conv_reduce(x.mean((2, 3), keepdim=True))))
            return x * s.sigmoid()

    class MBConv(nn.Module):
        def __init__(self, inp: int, out: int, stride: int, expand: int, drop_path: float) -> None:
            super().__init__()
            mid = inp * expand
            self.conv_pw = nn.Conv2d(inp, mid, 1, bias=False) if expand > 1 else nn.Identity()
            self.bn1 = nn.BatchNorm2d(mid) if expand > 1 else nn.Identity()
            self.conv_dw = nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False)
            self.bn2 = nn.BatchNorm2d(mid)
            self.se = SqueezeExcite(mid, max(1, inp // 4))
            self.conv_pwl = nn.Conv2d(mid, out, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(out)
            self.has_skip, self.drop_path = stride == 1 and inp == out, drop_path

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = F.silu(self.bn1(self.conv_pw(x))) if not isinstance(self.conv_pw, nn.Identity) else x
            h = self.se(F.silu(self.bn2(self.conv_dw(h))))
            h = self.bn3(self.conv_pwl(h))
            if self.has_skip:
                if self.training and self.drop_path > 0:
                    keep = (torch.rand(len(h), 1, 1, 1) > self.drop_path).float() / (1 - self.drop_path)
                    h = h * keep
                h = h + x
            return h

    class EfficientNet(nn.Module):
        def __init__(self, classes: int = 10, drop_rate: float = 0.2, drop_path_rate: float = 0.2) -> None:
            super().__init__()
            self.conv_stem, self.bn1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
            cfg = [(16, 16, 1, 1), (16, 24, 2, 6), (24, 24, 1, 6), (24, 40, 2, 6), (40, 40, 1, 6)]
            self.blocks = nn.Sequential(*[
                MBConv(i, o, s, e, drop_path_rate * k / len(cfg)) for k, (i, o, s, e) in enumerate(cfg)
            ])  # fmt: skip
            self.conv_head, self.bn2 = nn.Conv2d(40, 128, 1, bias=False), nn.BatchNorm2d(128)
            self.drop_rate = drop_rate
            self.classifier = nn.Linear(128, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.blocks(F.silu(self.bn1(self.conv_stem(x))))
            h = F.silu(self.bn2(self.conv_head(h))).mean((2, 3))
            return self.classifier(F.dropout(h, self.drop_rate, self.training))

    def mixup_fn(xb: torch.Tensor, yb: torch.Tensor, alpha: float = 0.2, smoothing: float = 0.1) -> Any:
        lam = float(np.random.beta(alpha, alpha))
        off, on = smoothing / 10, 1 - smoothing + smoothing / 10
        y1 = torch.full((len(yb), 10), off).scatter_(1, yb[:, None], on)
        return lam * xb + (1 - lam) * xb.flip(0), lam * y1 + (1 - lam) * y1.flip(0)

    class SoftTargetCrossEntropy(nn.Module):
        def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1).mean()

    class NativeScaler:
        def __init__(self, device: str = "cpu") -> None:
            self._scaler = torch.amp.GradScaler(device)

        def __call__(self, loss: torch.Tensor, optimizer: Any, parameters: Any = None) -> None:
            self._scaler.scale(loss).backward()
            self._scaler.step(optimizer)
            self._scaler.update()

    model = EfficientNet()
    model_ema = copy.deepcopy(model).eval()
    batch_size = 64
    lr = 0.016 * batch_size / 256
    optimizer = torch.optim.RMSprop(
        model.parameters(), lr=lr, alpha=0.9, eps=1e-3, momentum=0.9, weight_decay=1e-5
    )
    loss_scaler = NativeScaler("cpu")
    train_loss_fn, validate_loss_fn = SoftTargetCrossEntropy(), nn.CrossEntropyLoss()
    loader_train = DataLoader(
        TensorDataset(x[:1024], y[:1024]), batch_size=batch_size, shuffle=True, drop_last=True
    )
    steps_per_epoch = len(loader_train)

    def lr_at(epoch: float) -> float:
        if epoch < 1:
            return 1e-6 + (lr - 1e-6) * epoch
        return lr * 0.97 ** math.floor(epoch / 2.4)

    def validate() -> float:
        model.eval()
        with torch.no_grad():
            return validate_loss_fn(model(x[1024:]), y[1024:]).item()

    def train_one_epoch(epoch: int) -> None:
        if bug != "train_in_eval_mode":
            model.train()
        for batch_idx, (input, target) in enumerate(loader_train):
            for group in optimizer.param_groups:
                group["lr"] = lr_at(epoch + batch_idx / steps_per_epoch)
            input, target = mixup_fn(input, target)
            output = model(input)
            loss = train_loss_fn(output, target)
            optimizer.zero_grad()
            loss_scaler(loss, optimizer, parameters=model.parameters())
            with torch.no_grad():
                for e, m in zip(model_ema.state_dict().values(), model.state_dict().values(), strict=True):
                    e.copy_(e * 0.9998 + (1 - 0.9998) * m) if e.is_floating_point() else e.copy_(m)
            losses.append(loss.item())

    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(train_loss_fn)
    losses: list[float] = []
    validate()  # a sanity check of the untrained model
    for epoch in range(epochs):
        train_one_epoch(epoch)
        validate()
    hook.close()
    return losses


def torchvision_reference_segmentation(
    path: str, epochs: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The loop of torchvision's references/segmentation/train.py: an FCN-shaped model returning
    `{"out": ..., "aux": ...}` (an `FCNHead` on the backbone's last and third-to-last stages,
    both upsampled bilinearly to the input), `criterion` = cross-entropy (`ignore_index=255`) on
    "out" plus 0.5 x on "aux", SGD(lr 0.02, momentum 0.9, weight decay 1e-4) with the auxiliary
    head at 10x lr, `PolynomialLR(total_iters=iters_per_epoch * epochs, power=0.9)` stepped
    every iteration, batch 16, inputs normalized with the ImageNet mean and std, `evaluate`
    each epoch."""
    g = _seed(seed)
    x, mask = _scenes(g, 800, size=32)
    mask[:, :, :1] = 255  # a border left unlabelled, as VOC's outlines are
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    x = (x - mean) / std

    def stage(inp: int, out: int, stride: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Conv2d(inp, out, 3, stride, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU(inplace=True),
            nn.Conv2d(out, out, 3, 1, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU(inplace=True),
        )  # fmt: skip

    def fcn_head(inp: int, classes: int) -> nn.Sequential:
        mid = inp // 4
        return nn.Sequential(
            nn.Conv2d(inp, mid, 3, padding=1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(), nn.Dropout(0.1),
            nn.Conv2d(mid, classes, 1),
        )  # fmt: skip

    class FCN(nn.Module):
        def __init__(self, classes: int = 3) -> None:
            super().__init__()
            self.backbone = nn.ModuleList(
                [stage(3, 16, 1), stage(16, 32, 2), stage(32, 64, 2), stage(64, 64, 1)]
            )
            self.classifier = fcn_head(64, classes)
            self.aux_classifier = fcn_head(64, classes)

        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
            h = x
            feats = []
            for s in self.backbone:
                h = s(h)
                feats.append(h)
            size = x.shape[-2:]
            return {
                "out": F.interpolate(
                    self.classifier(feats[-1]), size=size, mode="bilinear", align_corners=False
                ),
                "aux": F.interpolate(
                    self.aux_classifier(feats[-2]), size=size, mode="bilinear", align_corners=False
                ),
            }

    def criterion(inputs: dict[str, torch.Tensor], target: torch.Tensor) -> torch.Tensor:
        losses = {name: F.cross_entropy(v, target, ignore_index=255) for name, v in inputs.items()}
        if len(losses) == 1:
            return losses["out"]
        return losses["out"] + 0.5 * losses["aux"]

    model = FCN()
    if bug == "dead_relu_init":  # a "sparse activations" init from a blog post, applied to the backbone
        for m in model.backbone.modules():
            if isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.bias, -2.0)
    params_to_optimize = [
        {"params": [p for p in model.backbone.parameters() if p.requires_grad]},
        {"params": [p for p in model.classifier.parameters() if p.requires_grad]},
        {"params": [p for p in model.aux_classifier.parameters() if p.requires_grad], "lr": 0.02 * 10},
    ]
    optimizer = torch.optim.SGD(params_to_optimize, lr=0.02, momentum=0.9, weight_decay=1e-4)
    data_loader = DataLoader(TensorDataset(x[:704], mask[:704]), batch_size=16, shuffle=True)
    iters_per_epoch = len(data_loader)
    lr_scheduler = torch.optim.lr_scheduler.PolynomialLR(
        optimizer, total_iters=iters_per_epoch * epochs, power=0.9
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _epoch in range(epochs):
        model.train()
        for image, target in data_loader:
            output = model(image)
            loss = criterion(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            lr_scheduler.step()
            losses.append(loss.item())
        model.eval()
        with torch.inference_mode():
            model(x[704:])["out"].argmax(1)
    hook.close()
    return losses


def accelerate_gradient_accumulation_counts(
    path: str, epochs: int = 3, seed: int = 0, bug: str | None = None
) -> list[float]:
    """accelerate's `by_feature/gradient_accumulation.py` loop: `Accelerator(cpu=True,
    gradient_accumulation_steps=4)`, `with accelerator.accumulate(model):` around forward,
    `accelerator.backward(loss)`, `optimizer.step()`, `lr_scheduler.step()`,
    `optimizer.zero_grad()`; an MLP regressing hourly bike-rental counts (hour and weekday
    one-hot, weather, temperature, humidity) on `log1p(count)` with MSE, AdamW(lr 1e-3),
    `get_linear_schedule_with_warmup(num_warmup_steps=100)`, batch 32."""
    from accelerate import Accelerator
    from transformers import get_linear_schedule_with_warmup

    g = _seed(seed)
    n = 4000
    hour = torch.randint(0, 24, (n,), generator=g)
    weekday = torch.randint(0, 7, (n,), generator=g)
    temp = 15 + 10 * torch.randn(n, generator=g)
    humidity = (60 + 15 * torch.randn(n, generator=g)).clamp(10, 100)
    rain = (torch.rand(n, generator=g) < 0.15).float()
    commute = ((hour == 8) | (hour == 17) | (hour == 18)).float() * (weekday < 5).float()
    daylight = torch.exp(-((hour.float() - 14) ** 2) / 30)
    rate = torch.exp(
        -0.7 + 3.2 * daylight + 1.2 * commute + 0.03 * temp - 0.01 * (humidity - 60) - 1.0 * rain
    )  # fmt: skip
    count = torch.poisson(rate, generator=g)
    features = torch.cat([
        F.one_hot(hour, 24).float(), F.one_hot(weekday, 7).float(),
        torch.stack([(temp - 15) / 10, (humidity - 60) / 15, rain], 1),
    ], 1)  # fmt: skip
    # "a log target for counts": log1p keeps the zero counts of the night hours finite
    target = torch.log(count) if bug == "log_zero_nan" else torch.log1p(count)

    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=4)
    model = nn.Sequential(
        nn.Linear(features.shape[1], 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 1)
    )
    optimizer = torch.optim.AdamW(params=model.parameters(), lr=1e-3)
    train_dataloader = DataLoader(TensorDataset(features[:3520], target[:3520]), batch_size=32, shuffle=True)
    eval_dataloader = DataLoader(TensorDataset(features[3520:], target[3520:]), batch_size=240)
    lr_scheduler = get_linear_schedule_with_warmup(
        optimizer=optimizer, num_warmup_steps=100, num_training_steps=len(train_dataloader) * epochs
    )
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _epoch in range(epochs):
        model.train()
        for xb, yb in train_dataloader:
            with accelerator.accumulate(model):
                output = model(xb).squeeze(-1)
                loss = F.mse_loss(output, yb)
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            losses.append(loss.item())
        model.eval()
        for xb, yb in eval_dataloader:
            with torch.no_grad():
                predictions = model(xb).squeeze(-1)
            accelerator.gather_for_metrics((predictions, yb))
    hook.close()
    return losses


def pytorch_tutorial_seq2seq_attention(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The PyTorch tutorial "NLP From Scratch: Translation with a Sequence to Sequence Network
    and Attention" (its batched version): `EncoderRNN` (embedding, dropout 0.1, GRU),
    `AttnDecoderRNN` with `BahdanauAttention`, greedy decoding for `MAX_LENGTH` steps with teacher
    forcing from `target_tensor`, `log_softmax` outputs into `nn.NLLLoss()`, one Adam(lr 0.001)
    per network, `train_epoch` zeroing both, batch 32, hidden 64 (the tutorial's 128). The
    "language pair": a word-for-word lexicon with each adjacent pair of words swapped."""
    g = _seed(seed)
    SOS_token, EOS_token, MAX_LENGTH = 0, 1, 10
    in_vocab, out_vocab, n = 40, 40, 1600
    pg = torch.Generator().manual_seed(4242)
    lexicon = 2 + torch.randperm(out_vocab - 2, generator=pg)
    src = torch.zeros(n, MAX_LENGTH, dtype=torch.long)
    tgt = torch.zeros(n, MAX_LENGTH, dtype=torch.long)
    for i in range(n):
        k = int(torch.randint(3, MAX_LENGTH, (1,), generator=g))
        words = torch.randint(2, in_vocab, (k,), generator=g)
        out = lexicon[words - 2]
        for j in range(0, k - 1, 2):
            out[j], out[j + 1] = out[j + 1].clone(), out[j].clone()
        src[i, :k], src[i, k] = words, EOS_token
        tgt[i, :k], tgt[i, k] = out, EOS_token

    class EncoderRNN(nn.Module):
        def __init__(self, input_size: int, hidden_size: int, dropout_p: float = 0.1) -> None:
            super().__init__()
            self.embedding = nn.Embedding(input_size, hidden_size)
            self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
            self.dropout = nn.Dropout(dropout_p)

        def forward(self, input: torch.Tensor) -> Any:
            embedded = self.dropout(self.embedding(input))
            return self.gru(embedded)

    class BahdanauAttention(nn.Module):
        def __init__(self, hidden_size: int) -> None:
            super().__init__()
            self.Wa = nn.Linear(hidden_size, hidden_size)
            self.Ua = nn.Linear(hidden_size, hidden_size)
            self.Va = nn.Linear(hidden_size, 1)

        def forward(self, query: torch.Tensor, keys: torch.Tensor) -> Any:
            scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys))).squeeze(2).unsqueeze(1)
            weights = F.softmax(scores, dim=-1)
            return torch.bmm(weights, keys), weights

    class AttnDecoderRNN(nn.Module):
        def __init__(self, hidden_size: int, output_size: int, dropout_p: float = 0.1) -> None:
            super().__init__()
            self.embedding = nn.Embedding(output_size, hidden_size)
            self.attention = BahdanauAttention(hidden_size)
            self.gru = nn.GRU(2 * hidden_size, hidden_size, batch_first=True)
            self.out = nn.Linear(hidden_size, output_size)
            self.dropout = nn.Dropout(dropout_p)

        def forward(
            self, encoder_outputs: torch.Tensor, encoder_hidden: torch.Tensor, target_tensor: Any = None
        ) -> Any:
            batch_size = encoder_outputs.size(0)
            decoder_input = torch.empty(batch_size, 1, dtype=torch.long).fill_(SOS_token)
            decoder_hidden = encoder_hidden
            decoder_outputs = []
            for i in range(MAX_LENGTH):
                decoder_output, decoder_hidden = self.forward_step(
                    decoder_input, decoder_hidden, encoder_outputs
                )
                decoder_outputs.append(decoder_output)
                if target_tensor is not None:
                    decoder_input = target_tensor[:, i].unsqueeze(1)  # teacher forcing
                else:
                    decoder_input = decoder_output.topk(1)[1].squeeze(-1).detach()
            return F.log_softmax(torch.cat(decoder_outputs, dim=1), dim=-1), decoder_hidden

        def forward_step(
            self, input: torch.Tensor, hidden: torch.Tensor, encoder_outputs: torch.Tensor
        ) -> Any:
            embedded = self.dropout(self.embedding(input))
            context, _ = self.attention(hidden.permute(1, 0, 2), encoder_outputs)
            output, hidden = self.gru(torch.cat((embedded, context), dim=2), hidden)
            return self.out(output), hidden

    hidden_size = 64
    encoder, decoder = EncoderRNN(in_vocab, hidden_size), AttnDecoderRNN(hidden_size, out_vocab)
    encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=0.001)
    decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=0.001)
    criterion = nn.NLLLoss()
    dataloader = DataLoader(TensorDataset(src[:1440], tgt[:1440]), batch_size=32, shuffle=True)
    hook = Hook(path)
    hook.register_module(encoder)
    hook.register_module(decoder)
    hook.register_loss(criterion)
    losses = []
    for _epoch in range(epochs):
        encoder.train()
        decoder.train()
        for input_tensor, target_tensor in dataloader:
            encoder_optimizer.zero_grad()
            decoder_optimizer.zero_grad()
            encoder_outputs, encoder_hidden = encoder(input_tensor)
            decoder_outputs, _ = decoder(encoder_outputs, encoder_hidden, target_tensor)
            loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), target_tensor.view(-1))
            loss.backward()
            encoder_optimizer.step()
            decoder_optimizer.step()
            losses.append(loss.item())
        encoder.eval()
        decoder.eval()
        with torch.no_grad():
            encoder_outputs, encoder_hidden = encoder(src[1440:])
            decoder(encoder_outputs, encoder_hidden)
    hook.close()
    return losses


def makemore_gru(path: str, steps: int = 500, seed: int = 0, bug: str | None = None) -> list[float]:
    """Karpathy's makemore with `--type gru`: the `RNN` module with a `GRUCell` written out
    (`xh_to_z`, `xh_to_r`, `xh_to_hbar`), a learned start state, `forward(idx, targets)` returning
    `(logits, loss)` with `ignore_index=-1`, `AdamW(lr 5e-4, weight_decay 0.01, betas (0.9,
    0.99), eps 1e-8)`, `model.zero_grad(set_to_none=True)`, batch 32, n_embd 64, n_embd2 64, an
    evaluation every 100 steps; the "names": words of a syllable grammar."""
    g = _seed(seed)
    onsets = ["b", "k", "l", "m", "n", "r", "s", "t", "v", "sh", "ch", "d"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ia"]
    codas = ["", "", "n", "l", "r", "s"]
    words = []
    for _ in range(4000):
        k = int(torch.randint(1, 4, (1,), generator=g))
        w = "".join(
            onsets[int(torch.randint(0, len(onsets), (1,), generator=g))]
            + vowels[int(torch.randint(0, len(vowels), (1,), generator=g))]
            + codas[int(torch.randint(0, len(codas), (1,), generator=g))]
            for _ in range(k)
        )
        words.append(w[:12])
    chars = sorted(set("".join(words)))
    stoi = {ch: i + 1 for i, ch in enumerate(chars)}
    vocab_size, block_size = len(chars) + 1, max(len(w) for w in words) + 1
    X = torch.zeros(len(words), block_size, dtype=torch.long)
    Y = torch.full((len(words), block_size), -1, dtype=torch.long)
    for i, w in enumerate(words):
        ix = torch.tensor([stoi[c] for c in w])
        X[i, 1 : 1 + len(ix)] = ix
        Y[i, : len(ix)] = ix
        Y[i, len(ix)] = 0

    class GRUCell(nn.Module):
        def __init__(self, n_embd: int, n_embd2: int) -> None:
            super().__init__()
            self.xh_to_z = nn.Linear(n_embd + n_embd2, n_embd2)
            self.xh_to_r = nn.Linear(n_embd + n_embd2, n_embd2)
            self.xh_to_hbar = nn.Linear(n_embd + n_embd2, n_embd2)

        def forward(self, xt: torch.Tensor, hprev: torch.Tensor) -> torch.Tensor:
            xh = torch.cat([xt, hprev], dim=1)
            r = F.sigmoid(self.xh_to_r(xh))
            hprev_reset = r * hprev
            xhr = torch.cat([xt, hprev_reset], dim=1)
            hbar = F.tanh(self.xh_to_hbar(xhr))
            z = F.sigmoid(self.xh_to_z(xh))
            return (1 - z) * hprev + z * hbar

    class RNN(nn.Module):
        def __init__(self, n_embd: int = 64, n_embd2: int = 64) -> None:
            super().__init__()
            self.start = nn.Parameter(torch.zeros(1, n_embd2))
            self.wte = nn.Embedding(vocab_size, n_embd)
            self.cell = GRUCell(n_embd, n_embd2)
            self.lm_head = nn.Linear(n_embd2, vocab_size)

        def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> Any:
            b, t = idx.size()
            emb = self.wte(idx)
            hprev = self.start.expand((b, -1))
            hiddens = []
            for i in range(t):
                hprev = self.cell(emb[:, i, :], hprev)
                hiddens.append(hprev)
            logits = self.lm_head(torch.stack(hiddens, 1))
            if bug == "softmax_before_ce":  # probabilities out of the model, as sampling wants them
                logits = F.softmax(logits, dim=-1)
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss

    model = RNN()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(steps):
        ix = torch.randint(0, 3600, (32,), generator=g)
        logits, loss = model(X[ix], Y[ix])
        model.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 100 == 99:
            model.eval()
            with torch.no_grad():
                model(X[3600:], Y[3600:])
            model.train()
    hook.close()
    return losses


def _digit_strings(g: torch.Generator, n: int, height: int = 16, width: int = 48) -> Any:
    """Images of 3 to 5 "digits" (fixed 10x5 random glyphs, jittered, on noise) and their label
    sequences (1-10; 0 is CTC's blank)."""
    pg = torch.Generator().manual_seed(5150)
    glyphs = (torch.rand(10, 10, 5, generator=pg) < 0.5).float()
    images = 0.15 * torch.rand(n, 1, height, width, generator=g)
    labels = []
    for i in range(n):
        k = int(torch.randint(3, 6, (1,), generator=g))
        digits = torch.randint(0, 10, (k,), generator=g)
        x0 = int(torch.randint(0, 4, (1,), generator=g))
        for d in digits.tolist():
            y0 = int(torch.randint(1, height - 11, (1,), generator=g))
            images[i, 0, y0 : y0 + 10, x0 : x0 + 5] += 0.8 * glyphs[d]
            x0 += 5 + int(torch.randint(1, 4, (1,), generator=g))
        labels.append(digits + 1)
    images = images + 0.05 * torch.randn(images.shape, generator=g)
    return (images - 0.5) / 0.5, labels


def crnn_ctc_text_recognition(
    path: str, epochs: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """crnn.pytorch (Shi et al. 2015) with its `--adam` options: a VGG-style CNN (conv, ReLU,
    max-pool; batch norm on the deeper convolutions; pools of (2, 1) that keep the width) down to
    a height of 1, two `BidirectionalLSTM` layers, `nn.CTCLoss()` over the width as time (log
    softmax over 11 classes, blank 0), Adam(lr 1e-3, betas (0.5, 0.999)), batch 32."""
    g = _seed(seed)
    images, labels = _digit_strings(g, 1760)
    targets = torch.cat(labels)
    target_lengths = torch.tensor([len(t) for t in labels])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), target_lengths.cumsum(0)])

    class BidirectionalLSTM(nn.Module):
        def __init__(self, nIn: int, nHidden: int, nOut: int) -> None:  # noqa: N803
            super().__init__()
            self.rnn = nn.LSTM(nIn, nHidden, bidirectional=True)
            self.embedding = nn.Linear(nHidden * 2, nOut)

        def forward(self, input: torch.Tensor) -> torch.Tensor:
            recurrent, _ = self.rnn(input)
            T, b, h = recurrent.size()  # noqa: N806
            return self.embedding(recurrent.view(T * b, h)).view(T, b, -1)

    class CRNN(nn.Module):
        def __init__(self, nclass: int = 11, nh: int = 64) -> None:
            super().__init__()
            self.cnn = nn.Sequential(
                nn.Conv2d(1, 32, 3, 1, 1), nn.ReLU(True), nn.MaxPool2d(2, 2),  # 8 x 24
                nn.Conv2d(32, 64, 3, 1, 1), nn.ReLU(True), nn.MaxPool2d(2, 2),  # 4 x 12
                nn.Conv2d(64, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.ReLU(True),
                nn.MaxPool2d((2, 1), (2, 1)),  # 2 x 12
                nn.Conv2d(64, 64, (2, 1), 1, 0), nn.BatchNorm2d(64), nn.ReLU(True),  # 1 x 12
            )  # fmt: skip
            self.rnn = nn.Sequential(BidirectionalLSTM(64, nh, nh), BidirectionalLSTM(nh, nh, nclass))

        def forward(self, input: torch.Tensor) -> torch.Tensor:
            conv = self.cnn(input).squeeze(2).permute(2, 0, 1)  # [w, b, c]
            return F.log_softmax(self.rnn(conv), dim=2)

    crnn = CRNN()
    criterion = nn.CTCLoss()
    optimizer = torch.optim.Adam(crnn.parameters(), lr=1e-3, betas=(0.5, 0.999))
    if (
        bug == "frozen_by_mistake"
    ):  # meant to keep the first block's pretrained filters, after building the optimizer
        for p in crnn.cnn[:6].parameters():
            p.requires_grad = False
    train_idx = torch.arange(1600)
    hook = Hook(path)
    hook.register_module(crnn)
    hook.register_loss(criterion)
    losses = []
    for _epoch in range(epochs):
        crnn.train()
        for idx in DataLoader(train_idx, batch_size=32, shuffle=True):
            cpu_images = images[idx]
            text = torch.cat([targets[offsets[i] : offsets[i + 1]] for i in idx.tolist()])
            length = target_lengths[idx]
            preds = crnn(cpu_images)
            preds_size = torch.full((len(idx),), preds.size(0), dtype=torch.long)
            cost = criterion(preds, text, preds_size, length)
            crnn.zero_grad()
            cost.backward()
            optimizer.step()
            losses.append(cost.item())
        crnn.eval()
        with torch.no_grad():
            crnn(images[1600:])
    hook.close()
    return losses


# ============================================================================= the set

_espcn = healthy(
    "pytorch_examples_super_resolution_espcn_pixel_shuffle",
    "pytorch/examples super-resolution (ESPCN)",
    pytorch_examples_super_resolution_espcn,
)
_timm_effnet = healthy(
    "timm_style_efficientnet_rmsproptf_mixup_scaler_ema",
    "timm-style EfficientNet",
    timm_efficientnet_train_one_epoch,
)
_tv_seg = healthy(
    "torchvision_reference_segmentation_aux_head_poly_lr",
    "torchvision reference segmentation",
    torchvision_reference_segmentation,
)
_crnn_ctc = healthy(
    "crnn_pytorch_cnn_bilstm_ctc_text_recognition", "CRNN + CTC text recognition", crnn_ctc_text_recognition
)
_makemore = healthy("makemore_gru_cell_adamw_names", "makemore GRU", makemore_gru)
PIPELINES: list[Any] = [
    _espcn,
    _timm_effnet,
    _tv_seg,
    _crnn_ctc,
    healthy(
        "pytorch_tutorial_seq2seq_gru_bahdanau_attention",
        "PyTorch tutorial seq2seq with attention",
        pytorch_tutorial_seq2seq_attention,
    ),
    _makemore,
    buggy(_espcn, "no_zero_grad"),
    buggy(_timm_effnet, "train_in_eval_mode"),
    buggy(_tv_seg, "dead_relu_init"),
    buggy(_crnn_ctc, "frozen_by_mistake"),
    buggy(_makemore, "softmax_before_ce"),
]

if installed("transformers", "accelerate"):
    _accelerate_accum = healthy(
        "accelerate_accumulate_context_bike_counts_log1p",
        "Accelerate gradient accumulation (accumulate context)",
        accelerate_gradient_accumulation_counts,
    )
    _hf_hubert = healthy(
        "hf_trainer_hubert_keyword_spotting_raw_audio",
        "HF Trainer HuBERT audio classification",
        hf_hubert_keyword_classification,
    )
    _hf_segformer = healthy(
        "hf_trainer_segformer_semantic_segmentation_polynomial",
        "HF Trainer SegFormer segmentation",
        hf_segformer_semantic_segmentation,
    )
    PIPELINES += [
        _accelerate_accum,
        healthy(
            "hf_trainer_electra_replaced_token_detection_collator",
            "HF Trainer ELECTRA replaced-token detection",
            hf_electra_replaced_token_detection,
        ),
        healthy(
            "hf_trainer_vit_mae_norm_pix_pretraining",
            "HF Trainer ViT-MAE pre-training",
            hf_vit_mae_pretraining,
        ),
        _hf_hubert,
        _hf_segformer,
        healthy(
            "hf_trainer_bert_pretraining_mlm_nsp",
            "HF Trainer BERT pre-training (MLM + NSP)",
            hf_bert_pretraining_mlm_nsp,
        ),
        healthy(
            "hf_trainer_patchtst_multivariate_forecasting",
            "HF Trainer PatchTST forecasting",
            hf_patchtst_forecasting,
        ),
        healthy(
            "hf_trainer_albert_multi_label_bce",
            "HF Trainer ALBERT multi-label classification",
            hf_albert_multilabel,
        ),
        buggy(_accelerate_accum, "log_zero_nan"),
        buggy(_hf_hubert, "shuffled_labels"),
        buggy(_hf_segformer, "inputs_x255"),
    ]

if installed("lightning"):
    _lit_deep_sets = healthy(
        "lightning_deep_sets_warm_restarts_step_clip_value",
        "Lightning Deep Sets",
        lit_deep_sets_warm_restarts,
    )
    _lit_tcn = healthy(
        "lightning_tcn_weight_norm_forecasting", "Lightning TCN forecasting", lit_tcn_forecasting
    )
    PIPELINES += [
        healthy(
            "lightning_wgan_gp_manual_two_optimizers_n_critic5",
            "Lightning WGAN-GP",
            lit_wgan_gp_manual_optimization,
        ),
        healthy(
            "lightning_unet_bf16_mixed_segmentation",
            "Lightning U-Net segmentation (bf16-mixed)",
            lit_unet_bf16_mixed_segmentation,
        ),
        _lit_deep_sets,
        healthy(
            "lightning_manual_optimization_accumulate_clip_gradients",
            "Lightning manual optimization (accumulation)",
            lit_manual_accumulate_clip_gradients,
        ),
        _lit_tcn,
        buggy(_lit_deep_sets, "deep_sigmoid"),
        buggy(_lit_tcn, "lr_x100"),
    ]

if installed("keras", "tensorflow"):
    _keras_pointnet = healthy(
        "keras_pointnet_tnet_orthogonal_regularizer",
        "Keras PointNet point clouds",
        keras_pointnet_classification,
    )
    PIPELINES += [
        _keras_pointnet,
        healthy(
            "keras_distiller_custom_train_step",
            "Keras knowledge distillation (custom train_step)",
            keras_knowledge_distillation_train_step,
        ),
        healthy(
            "keras_siamese_contrastive_loss_lambda_distance",
            "Keras Siamese contrastive",
            keras_siamese_contrastive_loss,
        ),
        healthy(
            "keras_recommender_net_collaborative_filtering",
            "Keras collaborative filtering",
            keras_recommender_net_collaborative_filtering,
        ),
        healthy(
            "keras_char_lstm_text_generation_rmsprop",
            "Keras char-LSTM text generation",
            keras_char_lstm_text_generation,
        ),
    ]

if installed("jax", "optax", "flax"):
    PIPELINES += [
        healthy("flax_linen_seq2seq_addition_lstm", "Flax seq2seq addition", flax_seq2seq_addition),
        healthy(
            "optax_lbfgs_full_batch_mlp_zoom_linesearch",
            "Optax L-BFGS full-batch regression",
            optax_lbfgs_full_batch,
        ),
        healthy(
            "flax_nnx_batchnorm_dropout_train_eval_modes",
            "Flax NNX BatchNorm/Dropout MLP",
            flax_nnx_batchnorm_dropout_mlp,
        ),
    ]

if installed("xgboost"):
    PIPELINES += [
        healthy(
            "xgboost_multi_output_tree_regression",
            "XGBoost multi-target regression",
            xgb_multi_output_tree_regression,
        ),
        healthy("xgboost_cox_survival_early_stopping", "XGBoost Cox survival", xgb_cox_survival),
    ]

if installed("xgboost", "pandas"):
    PIPELINES += [
        healthy(
            "xgboost_native_categorical_multiclass",
            "XGBoost native categorical",
            xgb_native_categorical_multiclass,
        ),
    ]
