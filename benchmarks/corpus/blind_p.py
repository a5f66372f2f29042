"""The ninth blind held-out set (issue 26), part P: trainings recorded the way each tool's user
records them (its one callback or hook), of kinds the corpus did not have yet. Written without
running mldbg's rules on them; each was checked only from its own losses (finite, going where its
kind's loss goes).

Shapes of public PyTorch scripts (the README's two lines): the PyTorch "Training a Classifier"
CIFAR-10 tutorial (its `Net`, SGD momentum, `ToTensor` + `Normalize(0.5, 0.5)`), the "Transfer
Learning for Computer Vision" tutorial's fine-tuning (`train_model` with train/val phases,
`StepLR(7, 0.1)`, best weights kept), transformers' `run_swag_no_trainer.py` without accelerate
(`BertForMultipleChoice`, gradient accumulation, linear schedule), a sentence-transformers
`fit`-shaped loop (mean pooling, `MultipleNegativesRankingLoss` with in-batch negatives,
WarmupLinear, an evaluator every 40 steps). Hugging Face `Trainer`
(`mldbg.transformers.DebuggerCallback`, tiny random configs): BERT sentence-pair classification with
`token_type_ids`, `gradient_accumulation_steps=4`, `constant_with_warmup` and evaluation every 25
steps; `Seq2SeqTrainer` on T5 with `label_smoothing_factor` and the `reduce_lr_on_plateau` schedule;
a Mixtral mixture-of-experts causal LM with the router's load-balancing loss
(`output_router_logits=True`); token classification with the user's own `optimizers=(RAdam,
OneCycleLR)` and label smoothing. Lightning (`mldbg.lightning.DebuggerCallback`): the Lightning DQN
example (replay buffer behind an `IterableDataset`, the agent stepping inside `training_step`,
`max_steps`), a Transformer classifier on `SequentialLR` (LinearLR warm-up into cosine) at
`interval="step"` with an overridden `configure_gradient_clipping` and `val_check_interval`,
knowledge distillation from a frozen teacher held in the module (temperature-scaled KL +
cross-entropy, `MultiStepLR`), SAM written under manual optimization (two `manual_backward`s a
step). Keras 3 on TensorFlow (`mldbg.keras.Hook`): a pinball (quantile) loss function of the user's
own with per-row `sample_weight` and `ReduceLROnPlateau`, a hand-written binary focal loss as a
`keras.losses.Loss` subclass with a streaming F1 `keras.metrics.Metric` subclass on imbalanced
classes, a `tf.data` pipeline (`map` augmentation, `prefetch`) into a `SeparableConv2D` CNN on SGD
Nesterov with a staircase `ExponentialDecay`, the character-level LSTM seq2seq example (encoder
states into the decoder, RMSprop). JAX (`mldbg.jax.Hook`): a Flax Linen Conv1D waveform classifier
on `optax.chain(clip_by_global_norm, adamw)` with `warmup_exponential_decay_schedule`, a GRU written
by hand in plain JAX unrolled by `lax.scan` forecasting `log1p` of intermittent daily demand on
`optax.adabelief` behind `optax.clip`, Flax NNX LoRA fine-tuning (`nnx.LoRA` adapters,
`nnx.Optimizer(wrt=nnx.LoRAParam)`, `nnx.DiffState`), a physics-informed network for the heat
equation (`jax.grad` of the network in x and t, `vmap` over collocation points,
`exponential_decay`). XGBoost (`mldbg.xgboost.Hook`): `rank:pairwise` on a `DMatrix` with `qid`
(top-k pair method, NDCG), `reg:pseudohubererror` with `interaction_constraints` stopped by
`xgb.callback.EarlyStopping(save_best=True)`, a boosted random forest (`num_parallel_tree=4`) on
`multi:softprob`.

Ten buggy twins, one per key of `BUGS`: the Flax Conv1D's peak learning rate typed as 3e-1
(lr_x100), `run_swag_no_trainer` with its `optimizer.zero_grad()` left out of the accumulation
branch (no_zero_grad), the BERT sentence pairs' labels read from a shuffled copy of the table
(shuffled_labels), the CIFAR-10 tutorial's `ToTensor` replaced by a `float()` that keeps the 0-255
range before `Normalize(0.5, 0.5)` (inputs_x255), the Lightning distillation student whose `forward`
returns softmax probabilities to the KL and the cross-entropy (softmax_before_ce), the Lightning SAM
MLP's `_init_weights` setting the biases to -1 (dead_relu_init), the Keras pinball regressor's
hidden stack as eight sigmoid layers (deep_sigmoid), the transfer-learning tutorial's fine-tuning
keeping the "fixed feature extractor" cell's `requires_grad = False` while SGD holds every parameter
(frozen_by_mistake), the JAX demand forecaster transforming the counts (zero on many days) with
`np.log` instead of `np.log1p` (log_zero_nan), the sentence-transformers loop not putting the model
back in training mode after its evaluator (train_in_eval_mode).

A pipeline whose framework is not installed is left out of `PIPELINES`. Every framework is imported
inside its pipeline, so importing this module costs only torch. `SPLIT = BLIND8`.
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

from . import BLIND8, buggy, healthy, installed
from .rl import CartPole

SPLIT = BLIND8

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 61)


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
    trainer_cls: Any = None,
    trainer_kw: dict[str, Any] | None = None,
    args_cls: Any = None,
    **args: Any,
) -> list[float]:
    """`Trainer(model, TrainingArguments(...), callbacks=[DebuggerCallback(path)]).train()`; the
    per-step training losses from `trainer.state.log_history` (`logging_steps=1`)."""
    from transformers import PrinterCallback, Trainer, TrainingArguments

    from mldbg.transformers import DebuggerCallback

    args.setdefault("eval_strategy", "epoch" if val is not None else "no")
    targs = (args_cls or TrainingArguments)(
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
    trainer = (trainer_cls or Trainer)(
        model=model, args=targs, train_dataset=train, eval_dataset=val, callbacks=[DebuggerCallback(path)],
        **(trainer_kw or {}),
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


# ============================================================================= shapes of public PyTorch scripts


def pytorch_tutorial_cifar10_classifier(
    path: str, epochs: int = 3, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The PyTorch tutorial "Training a Classifier" (CIFAR-10): `transforms.Compose([ToTensor(),
    Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))])`, its `Net` (conv 6 and 16 of 5x5, max-pools,
    fc 120-84-10), `nn.CrossEntropyLoss()`, `optim.SGD(lr=0.001, momentum=0.9)`, batch 4 in the
    tutorial (16 here, lr 0.005), the running loss printed every 200 mini-batches; 32x32 images."""
    g = _seed(seed)
    rgb, labels = _images(g, 3200, size=32, proto_seed=1010)
    pixels = (rgb * 255).round().to(torch.uint8).permute(0, 2, 3, 1)  # the dataset's HWC uint8 images

    def transform(img: torch.Tensor) -> torch.Tensor:
        chw = img.permute(2, 0, 1).float()
        if bug != "inputs_x255":  # ToTensor(): HWC uint8 -> CHW float in [0, 1]
            chw = chw / 255
        return (chw - 0.5) / 0.5  # Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))

    inputs = torch.stack([transform(p) for p in pixels])
    trainloader = DataLoader(TensorDataset(inputs, labels), batch_size=16, shuffle=True)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 6, 5)
            self.pool = nn.MaxPool2d(2, 2)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 5 * 5, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.pool(F.relu(self.conv1(x)))
            x = self.pool(F.relu(self.conv2(x)))
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            return self.fc3(x)

    net = Net()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.005, momentum=0.9)
    hook = Hook(path)
    hook.register_module(net)
    hook.register_loss(criterion)
    losses = []
    for _epoch in range(epochs):
        running_loss = 0.0
        for i, data in enumerate(trainloader, 0):
            inputs_b, labels_b = data
            optimizer.zero_grad()
            outputs = net(inputs_b)
            loss = criterion(outputs, labels_b)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
            losses.append(loss.item())
            if i % 200 == 199:
                running_loss = 0.0
    hook.close()
    return losses


def pytorch_tutorial_transfer_learning_finetune(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The PyTorch "Transfer Learning for Computer Vision" tutorial, "finetuning the ConvNet":
    a "pretrained" small ResNet (trained first on other classes, not recorded) with a new
    `model_ft.fc = nn.Linear(num_ftrs, 2)`, `optim.SGD(model_ft.parameters(), lr=0.001,
    momentum=0.9)`, `lr_scheduler.StepLR(step_size=7, gamma=0.1)` stepped per epoch, and the
    tutorial's `train_model` (a train and a val phase each epoch, `model.train()` /
    `model.eval()`, `torch.set_grad_enabled(phase == "train")`, the best weights kept by
    `copy.deepcopy`); the ants-and-bees task as two of the image classes, batch 4 in the tutorial
    (16 here)."""
    g = _seed(seed)
    x_pre, y_pre = _images(g, 1536, size=16, classes=8, proto_seed=2020)
    x_new, y_new = _images(g, 480, size=16, classes=2, proto_seed=2121)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    x_pre, x_new = (x_pre - mean) / std, (x_new - mean) / std

    class Block(nn.Module):
        def __init__(self, inp: int, out: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(inp, out, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(out)
            self.conv2 = nn.Conv2d(out, out, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(out)
            self.shortcut = nn.Sequential(nn.Conv2d(inp, out, 1, stride, bias=False), nn.BatchNorm2d(out))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))) + self.shortcut(x))

    class TinyResNet(nn.Module):
        def __init__(self, classes: int) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
            self.layer1 = Block(16, 32, 2)
            self.layer2 = Block(32, 64, 2)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(64, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.flatten(self.avgpool(self.layer2(self.layer1(self.stem(x)))), 1))

    pretrained = TinyResNet(8)  # the "ImageNet" weights: trained here on eight other classes
    opt = torch.optim.Adam(pretrained.parameters(), lr=2e-3)
    for xb, yb in DataLoader(TensorDataset(x_pre, y_pre), batch_size=64, shuffle=True):
        opt.zero_grad()
        F.cross_entropy(pretrained(xb), yb).backward()
        opt.step()

    model_ft = copy.deepcopy(pretrained)
    if bug == "frozen_by_mistake":  # left from the "ConvNet as fixed feature extractor" cell
        for param in model_ft.parameters():
            param.requires_grad = False
    num_ftrs = model_ft.fc.in_features
    model_ft.fc = nn.Linear(num_ftrs, 2)
    criterion = nn.CrossEntropyLoss()
    optimizer_ft = torch.optim.SGD(model_ft.parameters(), lr=0.001, momentum=0.9)
    exp_lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer_ft, step_size=7, gamma=0.1)
    dataloaders = {
        "train": DataLoader(TensorDataset(x_new[:384], y_new[:384]), batch_size=16, shuffle=True),
        "val": DataLoader(TensorDataset(x_new[384:], y_new[384:]), batch_size=16),
    }
    hook = Hook(path)
    hook.register_module(model_ft)
    hook.register_loss(criterion)
    losses = []
    best_model_wts, best_acc = copy.deepcopy(model_ft.state_dict()), 0.0
    for _epoch in range(epochs):
        for phase in ["train", "val"]:
            if phase == "train":
                model_ft.train()
            else:
                model_ft.eval()
            running_corrects = 0
            for inputs, labels in dataloaders[phase]:
                optimizer_ft.zero_grad()
                with torch.set_grad_enabled(phase == "train"):
                    outputs = model_ft(inputs)
                    _, preds = torch.max(outputs, 1)
                    loss = criterion(outputs, labels)
                    if phase == "train":
                        loss.backward()
                        optimizer_ft.step()
                        losses.append(loss.item())
                running_corrects += int(torch.sum(preds == labels.data))
            if phase == "train":
                exp_lr_scheduler.step()
            epoch_acc = running_corrects / len(dataloaders[phase].dataset)
            if phase == "val" and epoch_acc > best_acc:
                best_acc, best_model_wts = epoch_acc, copy.deepcopy(model_ft.state_dict())
    model_ft.load_state_dict(best_model_wts)
    hook.close()
    return losses


def hf_run_swag_no_trainer(path: str, epochs: int = 2, seed: int = 0, bug: str | None = None) -> list[float]:
    """transformers' `run_swag_no_trainer.py` without accelerate: a tiny random
    `BertForMultipleChoice`, each example a context paired with its 4 endings (`input_ids` of
    shape (batch, 4, length), `token_type_ids` 0 on the context and 1 on the ending), AdamW (lr
    1e-3, weight decay 0.01 off biases and LayerNorm weights), `get_scheduler("linear")`,
    `--gradient_accumulation_steps 2` (the loss divided by 2, `optimizer.step()`,
    `lr_scheduler.step()` and `optimizer.zero_grad()` every second batch), an accuracy pass at
    each epoch's end; batch 8. The right ending continues the context's Markov chain; the three
    distractors are drawn from another chain."""
    from transformers import BertConfig, BertForMultipleChoice, get_scheduler

    g = _seed(seed)
    vocab, ctx_len, end_len, n, choices = 96, 12, 8, 1152, 4
    real = 4 + _markov_tokens(g, n * (ctx_len + end_len) + 4, vocab - 4, order_seed=3030)
    fake = 4 + _markov_tokens(g, n * end_len * 3 + 4, vocab - 4, order_seed=3131)
    cls, sep = 1, 2
    input_ids = torch.zeros(n, choices, ctx_len + end_len + 3, dtype=torch.long)
    token_type_ids = torch.zeros_like(input_ids)
    labels = torch.randint(0, choices, (n,), generator=g)
    for i in range(n):
        seq = real[i * (ctx_len + end_len) : (i + 1) * (ctx_len + end_len)]
        context, ending = seq[:ctx_len], seq[ctx_len:]
        others = fake[i * end_len * 3 : (i + 1) * end_len * 3].view(3, end_len)
        endings = list(others)
        endings.insert(int(labels[i]), ending)
        for c, e in enumerate(endings):
            input_ids[i, c] = torch.cat(
                [torch.tensor([cls]), context, torch.tensor([sep]), e, torch.tensor([sep])]
            )
            token_type_ids[i, c, ctx_len + 2 :] = 1
    attention_mask = torch.ones_like(input_ids)
    config = BertConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=64,
    )  # fmt: skip
    model = BertForMultipleChoice(config)
    train_dataset = _Examples(
        input_ids=input_ids[:1024], token_type_ids=token_type_ids[:1024], attention_mask=attention_mask[:1024],
        labels=labels[:1024],
    )  # fmt: skip
    eval_dataset = _Examples(
        input_ids=input_ids[1024:], token_type_ids=token_type_ids[1024:], attention_mask=attention_mask[1024:],
        labels=labels[1024:],
    )  # fmt: skip
    train_dataloader = DataLoader(train_dataset, shuffle=True, batch_size=8)
    eval_dataloader = DataLoader(eval_dataset, batch_size=32)
    no_decay = ["bias", "LayerNorm.weight"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]  # fmt: skip
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=1e-3)
    gradient_accumulation_steps = 2
    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / gradient_accumulation_steps)
    lr_scheduler = get_scheduler(
        name="linear", optimizer=optimizer, num_warmup_steps=10,
        num_training_steps=epochs * num_update_steps_per_epoch,
    )  # fmt: skip
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for _epoch in range(epochs):
        model.train()
        for step, batch in enumerate(train_dataloader):
            outputs = model(**batch)
            loss = outputs.loss / gradient_accumulation_steps
            loss.backward()
            losses.append(outputs.loss.item())
            if step % gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
                optimizer.step()
                lr_scheduler.step()
                if bug != "no_zero_grad":
                    optimizer.zero_grad()
        model.eval()
        correct = 0
        for batch in eval_dataloader:
            with torch.no_grad():
                predictions = model(**batch).logits.argmax(dim=-1)
            correct += int((predictions == batch["labels"]).sum())
        _accuracy = correct / len(eval_dataset)
    hook.close()
    return losses


def sentence_transformers_mnrl_fit(
    path: str, epochs: int = 3, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A sentence-transformers `model.fit`-shaped training written out: a small Transformer
    encoder with mean pooling over the attention mask (`models.Pooling`), the
    `MultipleNegativesRankingLoss` (cosine similarities of (anchor, positive) pairs times
    `scale=20`, cross-entropy against the diagonal: the other positives of the batch are the
    negatives), AdamW lr 2e-5 in the library (1e-3 for this tiny random encoder), `WarmupLinear`
    with 10% warm-up, `max_grad_norm=1`, batch 32, and an `EmbeddingSimilarityEvaluator`-style
    check (Spearman-free: the mean cosine of held-out pairs against shuffled ones) every 40
    steps under `model.eval()`. Pairs: two noisy paraphrases of one Markov "sentence"."""
    g = _seed(seed)
    vocab, length, n = 200, 16, 3072
    base = 3 + _markov_tokens(g, n * length, vocab - 3, order_seed=4141).view(n, length)

    def paraphrase(s: torch.Tensor) -> torch.Tensor:
        out = s.clone()
        drop = torch.rand(s.shape, generator=g) < 0.2
        out[drop] = 3 + torch.randint(0, vocab - 3, (int(drop.sum()),), generator=g)
        lengths = torch.randint(10, length + 1, (len(s),), generator=g)
        out[torch.arange(length)[None, :] >= lengths[:, None]] = 0  # padding
        return out

    anchors, positives = paraphrase(base), paraphrase(base)

    class SentenceEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, 64, padding_idx=0)
            self.pos = nn.Parameter(torch.randn(1, length, 64) * 0.02)
            layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            mask = ids != 0
            h = self.encoder(self.embed(ids) + self.pos, src_key_padding_mask=~mask)
            m = mask.unsqueeze(-1).float()
            return (h * m).sum(1) / m.sum(1).clamp(min=1e-9)  # mean pooling

    class MultipleNegativesRankingLoss(nn.Module):
        def __init__(self, scale: float = 20.0) -> None:
            super().__init__()
            self.scale = scale

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            scores = F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T * self.scale
            return F.cross_entropy(scores, torch.arange(len(a)))

    model = SentenceEncoder()
    train_loss = MultipleNegativesRankingLoss()
    loader = DataLoader(
        TensorDataset(anchors[:2816], positives[:2816]), batch_size=32, shuffle=True, drop_last=True
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    total = epochs * len(loader)
    warmup = int(0.1 * total)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: s / max(1, warmup) if s < warmup else max(0.0, (total - s) / max(1, total - warmup)),
    )

    def evaluator() -> float:
        model.eval()
        with torch.no_grad():
            a, b = model(anchors[2816:]), model(positives[2816:])
            pos = F.cosine_similarity(a, b).mean()
            neg = F.cosine_similarity(a, b.roll(1, 0)).mean()
        return float(pos - neg)

    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(train_loss)
    losses, global_step = [], 0
    for _epoch in range(epochs):
        model.train()
        for a_ids, b_ids in loader:
            loss = train_loss(model(a_ids), model(b_ids))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            global_step += 1
            losses.append(float(loss))
            if global_step % 40 == 0:
                _score = evaluator()
                if (
                    bug != "train_in_eval_mode"
                ):  # fit() puts the model back in training mode after its evaluator
                    model.train()
    hook.close()
    return losses


# ============================================================================= XGBoost


def xgb_rank_pairwise_qid(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Learning to rank with the native API: `xgb.DMatrix(x, label=relevance, qid=query_ids)`
    (rows sorted by query), `objective="rank:pairwise"`, `lambdarank_pair_method="topk"`,
    `lambdarank_num_pair_per_sample=8`, `eval_metric=["ndcg@5", "ndcg@10"]`, `eta=0.1`,
    `max_depth=6`, 200 rounds with a validation set of other queries; graded relevance 0..4 from
    a nonlinear score of 12 query-document features; losses: 1 - training NDCG@10 per round."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    queries, per_query, d = 300, 20, 12
    qid = np.repeat(np.arange(queries), per_query)
    x = rng.normal(size=(queries * per_query, d))
    query_effect = rng.normal(size=(queries, 3))[qid]
    score = (
        x[:, 0] + 0.8 * x[:, 1] * query_effect[:, 0] + np.tanh(x[:, 2] + x[:, 3]) + 0.5 * x[:, 4] ** 2
        + 0.3 * query_effect[:, 1] * x[:, 5] + 0.5 * rng.normal(size=len(x))
    )  # fmt: skip
    relevance = np.digitize(score, np.quantile(score, [0.5, 0.75, 0.9, 0.97]))
    split = 240 * per_query
    dtrain = xgb.DMatrix(x[:split], label=relevance[:split], qid=qid[:split])
    dvalid = xgb.DMatrix(x[split:], label=relevance[split:], qid=qid[split:])
    params = {
        "objective": "rank:pairwise", "lambdarank_pair_method": "topk", "lambdarank_num_pair_per_sample": 8,
        "eval_metric": ["ndcg@5", "ndcg@10"], "eta": 0.1, "max_depth": 6, "tree_method": "hist",
        "nthread": 1, "seed": seed,
    }  # fmt: skip
    result: dict[str, Any] = {}
    xgb.train(
        params, dtrain, num_boost_round=200, evals=[(dtrain, "train"), (dvalid, "valid")], evals_result=result,
        verbose_eval=False, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    return [1.0 - float(v) for v in result["train"]["ndcg@10"]]


def xgb_pseudohuber_early_stopping_save_best(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Robust regression of a target with 3% gross outliers: `objective="reg:pseudohubererror"`
    (`huber_slope=1.0`), `eval_metric="mphe"`, `tree_method="approx"`, `colsample_bynode=0.7`,
    `interaction_constraints` grouping the features, `eta=0.1`, up to 600 rounds stopped by
    `xgb.callback.EarlyStopping(rounds=25, metric_name="mphe", data_name="valid",
    save_best=True)`; losses: the training pseudo-Huber error per round."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    n, d = 5000, 8
    x = rng.normal(size=(n, d))
    y = 2 * np.sin(x[:, 0]) + x[:, 1] * x[:, 2] + 0.5 * x[:, 3] + np.abs(x[:, 4]) + 0.3 * rng.normal(size=n)
    outliers = rng.random(n) < 0.03
    y[outliers] += rng.normal(0, 25, int(outliers.sum()))
    dtrain = xgb.DMatrix(x[:4000], label=y[:4000])
    dvalid = xgb.DMatrix(x[4000:], label=y[4000:])
    params = {
        "objective": "reg:pseudohubererror", "huber_slope": 1.0, "eval_metric": "mphe", "tree_method": "approx",
        "colsample_bynode": 0.7, "interaction_constraints": "[[0], [1, 2], [3, 4, 5, 6, 7]]", "eta": 0.1,
        "max_depth": 5, "nthread": 1, "seed": seed,
    }  # fmt: skip
    result: dict[str, Any] = {}
    early = xgb.callback.EarlyStopping(rounds=25, metric_name="mphe", data_name="valid", save_best=True)
    xgb.train(
        params, dtrain, num_boost_round=600, evals=[(dtrain, "train"), (dvalid, "valid")], evals_result=result,
        verbose_eval=False, callbacks=[early, mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    return [float(v) for v in result["train"]["mphe"]]


def xgb_boosted_random_forest_softprob(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """A boosted random forest for 5 classes: `objective="multi:softprob"`, `num_parallel_tree=4`
    trees a round grown on `subsample=0.7` of the rows and `colsample_bynode=0.6` of the
    features, `eta=0.2`, `max_depth=4`, `min_child_weight=3`, `reg_lambda=2`, 80 rounds,
    `eval_metric=["mlogloss", "merror"]`; losses: the training multi-class log loss per round."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    n, d, k = 4000, 15, 5
    x = rng.normal(size=(n, d))
    centers = rng.normal(0, 1.3, size=(k, 6))
    dist = ((x[:, None, :6] - centers[None]) ** 2).sum(-1) + 0.8 * rng.normal(size=(n, k))
    y = dist.argmin(1)
    dtrain = xgb.DMatrix(x[:3200], label=y[:3200])
    dvalid = xgb.DMatrix(x[3200:], label=y[3200:])
    params = {
        "objective": "multi:softprob", "num_class": k, "num_parallel_tree": 4, "subsample": 0.7,
        "colsample_bynode": 0.6, "eta": 0.2, "max_depth": 4, "min_child_weight": 3, "lambda": 2.0,
        "eval_metric": ["merror", "mlogloss"], "tree_method": "hist", "nthread": 1, "seed": seed,
    }  # fmt: skip
    result: dict[str, Any] = {}
    xgb.train(
        params, dtrain, num_boost_round=80, evals=[(dtrain, "train"), (dvalid, "valid")], evals_result=result,
        verbose_eval=False, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    return [float(v) for v in result["train"]["mlogloss"]]


# ============================================================================= Keras 3


def keras_pinball_loss_sample_weight(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Quantile regression in Keras with a loss function of the user's own, the pinball loss of
    the 0.9 quantile (`def pinball(y_true, y_pred)` in `keras.ops`), and per-row `sample_weight`
    (recent rows weighted up) passed to `fit`; a functional MLP (Normalization adapted on the
    training data, 64-64 ReLU), `Adam(2e-3)`, `ReduceLROnPlateau(monitor="val_loss", factor=0.5,
    patience=2)`, batch 64, 8 epochs, `validation_split=0.15`."""
    import keras
    from keras import layers, ops

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    n, d = 6000, 6
    x = rng.normal(size=(n, d)).astype("float32")
    scale = 0.3 + 0.7 * np.abs(x[:, 1])
    y = (np.sin(x[:, 0]) * 2 + x[:, 2] + scale * rng.standard_t(4, size=n)).astype("float32")
    weights = np.linspace(0.5, 1.5, n).astype("float32")
    tau = 0.9

    def pinball(y_true: Any, y_pred: Any) -> Any:
        err = y_true - ops.squeeze(y_pred, -1)
        return ops.mean(ops.maximum(tau * err, (tau - 1) * err), axis=-1)

    norm = layers.Normalization()
    norm.adapt(x[:5100])
    inputs = keras.Input(shape=(d,))
    h = norm(inputs)
    if bug == "deep_sigmoid":  # the hidden stack written with eight sigmoid layers
        for _ in range(8):
            h = layers.Dense(64, activation="sigmoid")(h)
    else:
        h = layers.Dense(64, activation="relu")(h)
        h = layers.Dense(64, activation="relu")(h)
    outputs = layers.Dense(1)(h)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(2e-3), loss=pinball)
    history = _keras_losses()
    model.fit(
        x, y[:, None], sample_weight=weights, batch_size=64, epochs=8, validation_split=0.15, verbose=0,
        callbacks=[keras.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=2),
                   mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_focal_loss_custom_metric(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Imbalanced binary classification (about 8% positives) with the binary focal loss written
    by hand as a `keras.losses.Loss` subclass (alpha 0.25, gamma 2, on the sigmoid output
    clipped to [eps, 1 - eps] before the logs), a streaming F1 of the positive class of the
    user's own as a `keras.metrics.Metric` subclass (counts in `add_weight` variables,
    `update_state` / `result` / `reset_state`), a functional 128-64 MLP with dropout,
    `AdamW(1e-3)`, batch 128, 6 epochs with validation data."""
    import keras
    from keras import layers, ops

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    n, d = 6000, 20
    y = (rng.random(n) < 0.08).astype("float32")
    shift = rng.normal(0, 1.0, size=d)
    x = (np.outer(y, shift) + rng.normal(size=(n, d))).astype("float32")

    class BinaryFocalLoss(keras.losses.Loss):
        def __init__(self, alpha: float = 0.25, gamma: float = 2.0, **kw: Any) -> None:
            super().__init__(**kw)
            self.alpha, self.gamma = alpha, gamma

        def call(self, y_true: Any, y_pred: Any) -> Any:
            y_pred = ops.clip(y_pred, 1e-7, 1.0 - 1e-7)
            pos = -self.alpha * y_true * ops.power(1.0 - y_pred, self.gamma) * ops.log(y_pred)
            neg = -(1 - self.alpha) * (1 - y_true) * ops.power(y_pred, self.gamma) * ops.log(1.0 - y_pred)
            return ops.mean(pos + neg, axis=-1)

    class PositiveF1(keras.metrics.Metric):
        def __init__(self, name: str = "f1", **kw: Any) -> None:
            super().__init__(name=name, **kw)
            self.tp = self.add_weight(shape=(), initializer="zeros", name="tp")
            self.fp = self.add_weight(shape=(), initializer="zeros", name="fp")
            self.fn = self.add_weight(shape=(), initializer="zeros", name="fn")

        def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
            t = ops.cast(y_true, "float32")
            p = ops.cast(y_pred > 0.5, "float32")
            self.tp.assign_add(ops.sum(t * p))
            self.fp.assign_add(ops.sum((1 - t) * p))
            self.fn.assign_add(ops.sum(t * (1 - p)))

        def result(self) -> Any:
            return 2 * self.tp / (2 * self.tp + self.fp + self.fn + 1e-7)

        def reset_state(self) -> None:
            for v in (self.tp, self.fp, self.fn):
                v.assign(0.0)

    inputs = keras.Input(shape=(d,))
    h = layers.Dense(128, activation="relu")(inputs)
    h = layers.Dropout(0.2)(h)
    h = layers.Dense(64, activation="relu")(h)
    outputs = layers.Dense(1, activation="sigmoid")(h)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.AdamW(1e-3), loss=BinaryFocalLoss(), metrics=[PositiveF1()])
    history = _keras_losses()
    model.fit(
        x[:5000], y[:5000, None], batch_size=128, epochs=6, validation_data=(x[5000:], y[5000:, None]),
        verbose=0, callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_tf_data_separable_cnn(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """An image classifier fed by a `tf.data` pipeline as the Keras guides build it:
    `Dataset.from_tensor_slices(...).shuffle(...).map(augment, num_parallel_calls=AUTOTUNE)
    .batch(64).prefetch(AUTOTUNE)`, random flips and brightness in `augment`; a MobileNet-style
    model of `SeparableConv2D` + `BatchNormalization` + ReLU blocks and global average pooling;
    `SGD(momentum=0.9, nesterov=True)` on an `ExponentialDecay(0.05, decay_steps=100,
    decay_rate=0.8, staircase=True)` schedule, sparse categorical cross-entropy from logits, 3
    epochs."""
    import keras
    import tensorflow as tf
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images, labels = _images(g, 3200, size=16, proto_seed=6060)
    x = images.permute(0, 2, 3, 1).numpy()
    y = labels.numpy()
    autotune = tf.data.AUTOTUNE

    def augment(img: Any, label: Any) -> Any:
        img = tf.image.random_flip_left_right(img)
        img = tf.image.random_brightness(img, 0.1)
        return img, label

    train_ds = (
        tf.data.Dataset.from_tensor_slices((x[:2304], y[:2304])).shuffle(2304, seed=seed)
        .map(augment, num_parallel_calls=autotune).batch(64).prefetch(autotune)
    )  # fmt: skip
    val_ds = tf.data.Dataset.from_tensor_slices((x[2304:2816], y[2304:2816])).batch(128)

    def block(h: Any, filters: int, stride: int) -> Any:
        h = layers.SeparableConv2D(filters, 3, strides=stride, padding="same", use_bias=False)(h)
        h = layers.BatchNormalization()(h)
        return layers.ReLU()(h)

    inputs = keras.Input(shape=(16, 16, 3))
    h = layers.Rescaling(2.0, offset=-1.0)(inputs)
    h = layers.Conv2D(16, 3, padding="same", use_bias=False)(h)
    h = layers.ReLU()(layers.BatchNormalization()(h))
    h = block(h, 32, 1)
    h = block(h, 64, 2)
    h = block(h, 64, 2)
    h = layers.GlobalAveragePooling2D()(h)
    outputs = layers.Dense(10)(h)
    model = keras.Model(inputs, outputs)
    schedule = keras.optimizers.schedules.ExponentialDecay(
        0.05, decay_steps=100, decay_rate=0.8, staircase=True
    )
    model.compile(
        optimizer=keras.optimizers.SGD(schedule, momentum=0.9, nesterov=True),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
    )  # fmt: skip
    history = _keras_losses()
    model.fit(
        train_ds, epochs=3, validation_data=val_ds, verbose=0, callbacks=[mldbg.keras.Hook(path), history]
    )
    return history.losses


def keras_char_seq2seq_lstm(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras example "Character-level recurrent sequence-to-sequence model": an `LSTM(256,
    return_state=True)` encoder whose `[state_h, state_c]` start an `LSTM(return_sequences=True,
    return_state=True)` decoder, teacher forcing on one-hot characters, `Dense(softmax)` over the
    target characters, `optimizer="rmsprop"`, `loss="categorical_crossentropy"`, batch 64,
    `validation_split=0.2`; 64 latent units here, a made-up "translation" (each source word's
    letters mapped by a cipher and reversed), 6 epochs."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    letters = "abcdefghij"
    cipher = rng.permutation(len(letters))
    n, max_in = 3000, 6
    input_texts, target_texts = [], []
    for _ in range(n):
        word = "".join(rng.choice(list(letters), size=int(rng.integers(3, max_in + 1))))
        input_texts.append(word)
        target_texts.append("\t" + "".join(letters[cipher[letters.index(c)]] for c in word[::-1]) + "\n")
    target_chars = sorted(set("".join(target_texts)))
    num_encoder_tokens, num_decoder_tokens = len(letters), len(target_chars)
    max_out = max(len(t) for t in target_texts)
    encoder_input_data = np.zeros((n, max_in, num_encoder_tokens), dtype="float32")
    decoder_input_data = np.zeros((n, max_out, num_decoder_tokens), dtype="float32")
    decoder_target_data = np.zeros((n, max_out, num_decoder_tokens), dtype="float32")
    target_index = {c: i for i, c in enumerate(target_chars)}
    for i, (inp, tgt) in enumerate(zip(input_texts, target_texts, strict=True)):
        for t, c in enumerate(inp):
            encoder_input_data[i, t, letters.index(c)] = 1.0
        for t, c in enumerate(tgt):
            decoder_input_data[i, t, target_index[c]] = 1.0
            if t > 0:
                decoder_target_data[i, t - 1, target_index[c]] = 1.0
    latent_dim = 64
    encoder_inputs = keras.Input(shape=(None, num_encoder_tokens))
    _, state_h, state_c = layers.LSTM(latent_dim, return_state=True)(encoder_inputs)
    decoder_inputs = keras.Input(shape=(None, num_decoder_tokens))
    decoder_outputs, _, _ = layers.LSTM(latent_dim, return_sequences=True, return_state=True)(
        decoder_inputs, initial_state=[state_h, state_c]
    )
    decoder_outputs = layers.Dense(num_decoder_tokens, activation="softmax")(decoder_outputs)
    model = keras.Model([encoder_inputs, decoder_inputs], decoder_outputs)
    model.compile(optimizer="rmsprop", loss="categorical_crossentropy", metrics=["accuracy"])
    history = _keras_losses()
    model.fit(
        [encoder_input_data, decoder_input_data], decoder_target_data, batch_size=64, epochs=6,
        validation_split=0.2, verbose=0, callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


# ============================================================================= JAX


def flax_conv1d_clip_adamw_chain(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Flax Linen 1-D CNN classifying noisy waveforms (sine, square, sawtooth, chirp: 4
    classes; three `nn.Conv` of kernel 7 with `nn.max_pool`, global average pooling), optimized
    by `optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=1e-2))`
    with `schedule = optax.warmup_exponential_decay_schedule(0, 3e-3, 50, 100, 0.7)`, batch 64,
    a jitted step returning the gradients for the hook."""
    import flax.linen as fnn
    import jax
    import optax

    import mldbg.jax

    rng = np.random.default_rng(seed)
    n, length = 6000, 128
    t = np.linspace(0, 1, length)
    y = rng.integers(0, 4, n)
    freq = rng.uniform(3, 8, n)[:, None]
    phase = rng.uniform(0, 2 * np.pi, n)[:, None]
    arg = 2 * np.pi * freq * t[None] + phase
    waves = np.stack([
        np.sin(arg), np.sign(np.sin(arg)), 2 * ((arg / (2 * np.pi)) % 1) - 1,
        np.sin(2 * np.pi * (freq * t[None] + 6 * t[None] ** 2) + phase),
    ])  # fmt: skip
    x = waves[y, np.arange(n)] * rng.uniform(0.5, 1.5, (n, 1)) + 0.4 * rng.normal(size=(n, length))
    x = x.astype("float32")[..., None]

    class WaveCNN(fnn.Module):
        @fnn.compact
        def __call__(self, x: Any) -> Any:
            for features in (16, 32, 64):
                x = fnn.relu(fnn.Conv(features, kernel_size=(7,))(x))
                x = fnn.max_pool(x, window_shape=(2,), strides=(2,))
            x = x.mean(axis=1)
            return fnn.Dense(4)(x)

    model = WaveCNN()
    params = model.init(jax.random.PRNGKey(seed), x[:2])["params"]
    peak = 3e-1 if bug == "lr_x100" else 3e-3  # the peak learning rate typed as 3e-1
    schedule = optax.warmup_exponential_decay_schedule(0.0, peak, 50, 100, 0.7)
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=1e-2))
    opt_state = tx.init(params)

    @jax.jit
    def train_step(params: Any, opt_state: Any, xb: Any, yb: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            return optax.softmax_cross_entropy_with_integer_labels(model.apply({"params": p}, xb), yb).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    hook = mldbg.jax.Hook(path)
    losses = []
    for step in range(steps):
        idx = rng.choice(5000, 64, replace=False)
        old = params
        params, opt_state, loss, grads = train_step(params, opt_state, x[idx], y[idx])
        hook.record(step, params=old, grads=grads, loss=loss)
        losses.append(float(loss))
    hook.close()
    return losses


def jax_scan_gru_adabelief(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """A GRU written by hand in plain JAX (parameters in a dict, Glorot-initialized, the cell
    `z, r, h~` equations) unrolled by `jax.lax.scan` over 28 days of an intermittent-demand
    series (daily Poisson counts with weekly and yearly seasonality, many zero days), the counts
    log-transformed with `log1p` and the calendar as sin/cos channels, forecasting the next
    day's `log1p(count)` from the last hidden state with an MSE; `optax.adabelief(3e-3)` behind
    `optax.clip(1.0)` (clipping each gradient element), batch 64, a jitted step."""
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    rng = np.random.default_rng(seed)
    total, window, hidden = 6000, 28, 48
    day = np.arange(total)
    weekly, yearly = 2 * np.pi * day / 7, 2 * np.pi * day / 365
    rate = np.exp(0.2 + 0.8 * np.sin(weekly) + 0.6 * np.cos(yearly))
    counts = rng.poisson(rate).astype("float32")
    # the usual variance-stabilizing transform of counts; the buggy twin takes the plain log
    transform = np.log if bug == "log_zero_nan" else np.log1p
    with np.errstate(divide="ignore"):
        level = transform(counts).astype("float32")
    series = np.stack([level, np.sin(weekly), np.cos(weekly)], 1).astype("float32")
    channels = series.shape[1]

    def glorot(key: Any, shape: tuple[int, int]) -> Any:
        return jax.random.normal(key, shape) * jnp.sqrt(2.0 / sum(shape))

    keys = jax.random.split(jax.random.PRNGKey(seed), 4)
    params = {
        "w_x": glorot(keys[0], (channels, 3 * hidden)), "w_h": glorot(keys[1], (hidden, 3 * hidden)),
        "b": jnp.zeros(3 * hidden), "w_out": glorot(keys[2], (hidden, 1)), "b_out": jnp.zeros(1),
    }  # fmt: skip

    def gru_step(p: Any, h: Any, x_t: Any) -> tuple[Any, Any]:
        gx = x_t @ p["w_x"] + p["b"]
        gh = h @ p["w_h"]
        z = jax.nn.sigmoid(gx[:, :hidden] + gh[:, :hidden])
        r = jax.nn.sigmoid(gx[:, hidden : 2 * hidden] + gh[:, hidden : 2 * hidden])
        cand = jnp.tanh(gx[:, 2 * hidden :] + r * gh[:, 2 * hidden :])
        h = (1 - z) * h + z * cand
        return h, None

    def forward(p: Any, xb: Any) -> Any:
        h0 = jnp.zeros((xb.shape[0], hidden))
        h, _ = jax.lax.scan(lambda h, x_t: gru_step(p, h, x_t), h0, jnp.swapaxes(xb, 0, 1))
        return h @ p["w_out"] + p["b_out"]

    tx = optax.chain(optax.clip(1.0), optax.adabelief(3e-3))
    opt_state = tx.init(params)

    @jax.jit
    def train_step(params: Any, opt_state: Any, xb: Any, yb: Any) -> Any:
        loss, grads = jax.value_and_grad(lambda p: jnp.mean((forward(p, xb) - yb) ** 2))(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    hook = mldbg.jax.Hook(path)
    losses = []
    for step in range(steps):
        starts = rng.integers(0, 5000 - window - 1, 64)
        xb = np.stack([series[s : s + window] for s in starts])
        yb = np.stack([series[s + window, :1] for s in starts])
        old = params
        params, opt_state, loss, grads = train_step(params, opt_state, xb, yb)
        hook.record(step, params=old, grads=grads, loss=loss)
        losses.append(float(loss))
    hook.close()
    return losses


def flax_nnx_lora_finetune(path: str, steps: int = 300, seed: int = 0, bug: str | None = None) -> list[float]:
    """LoRA fine-tuning in Flax NNX: an MLP of `nnx.Linear` layers trained first on a source
    regression task (not recorded), then its hidden layers wrapped as `nnx.LoRALinear`-style
    `nnx.LoRA(base_module=..., lora_rank=4)` adapters and only the adapters optimized on a shifted
    target task (`nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.LoRAParam)`,
    `nnx.value_and_grad(loss_fn, argnums=nnx.DiffState(0, nnx.LoRAParam))`), batch 128."""
    import optax
    from flax import nnx

    import mldbg.jax

    rng = np.random.default_rng(seed)
    n, d = 6000, 10
    x = rng.normal(size=(n, d)).astype("float32")
    w = rng.normal(size=(d, 3))
    source = (np.tanh(x @ w).sum(1) + 0.1 * rng.normal(size=n)).astype("float32")[:, None]
    target = (
        np.tanh(x @ (w + 0.6 * rng.normal(size=(d, 3)))).sum(1) + 0.3 * x[:, 0] + 0.1 * rng.normal(size=n)
    )
    target = target.astype("float32")[:, None]

    class MLP(nnx.Module):
        def __init__(self, rngs: nnx.Rngs) -> None:
            self.l1 = nnx.Linear(d, 64, rngs=rngs)
            self.l2 = nnx.Linear(64, 64, rngs=rngs)
            self.out = nnx.Linear(64, 1, rngs=rngs)

        def __call__(self, x: Any) -> Any:
            return self.out(nnx.relu(self.l2(nnx.relu(self.l1(x)))))

    def loss_fn(model: Any, xb: Any, yb: Any) -> Any:
        return ((model(xb) - yb) ** 2).mean()

    model = MLP(nnx.Rngs(seed))
    pre_opt = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)

    @nnx.jit
    def pre_step(model: Any, optimizer: Any, xb: Any, yb: Any) -> Any:
        loss, grads = nnx.value_and_grad(loss_fn)(model, xb, yb)
        optimizer.update(model, grads)
        return loss

    for _ in range(400):  # the "pretrained" model
        idx = rng.choice(n, 128, replace=False)
        pre_step(model, pre_opt, x[idx], source[idx])

    lora_rngs = nnx.Rngs(seed + 1)
    model.l1 = nnx.LoRA(d, 4, 64, base_module=model.l1, rngs=lora_rngs)
    model.l2 = nnx.LoRA(64, 4, 64, base_module=model.l2, rngs=lora_rngs)
    optimizer = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.LoRAParam)
    diff = nnx.DiffState(0, nnx.LoRAParam)

    @nnx.jit
    def train_step(model: Any, optimizer: Any, xb: Any, yb: Any) -> Any:
        loss, grads = nnx.value_and_grad(loss_fn, argnums=diff)(model, xb, yb)
        optimizer.update(model, grads)
        return loss, grads

    hook = mldbg.jax.Hook(path)
    losses = []
    for step in range(steps):
        idx = rng.choice(5000, 128, replace=False)
        params = nnx.state(model, nnx.LoRAParam)
        loss, grads = train_step(model, optimizer, x[idx], target[idx])
        hook.record(step, params=params, grads=grads, loss=loss)
        losses.append(float(loss))
    hook.close()
    return losses


def jax_pinn_heat_equation(
    path: str, steps: int = 1500, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A physics-informed network in plain JAX for the 1-D heat equation u_t = 0.1 u_xx on
    [0, 1] x [0, 1] with u(x, 0) = sin(pi x) and zero boundaries: a tanh MLP (2-32-32-32-1) as a
    list of `(W, b)` pairs, the residual from `jax.grad` of the scalar network twice in x and once
    in t (`jax.vmap` over the collocation points), the loss = residual MSE + initial-condition MSE
    + boundary MSE, `optax.adam(optax.exponential_decay(1e-3, 500, 0.5))`, 256 fresh collocation
    points a step."""
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    sizes = [2, 32, 32, 32, 1]
    keys = jax.random.split(jax.random.PRNGKey(seed), len(sizes))
    params = [
        (jax.random.normal(k, (a, b)) * jnp.sqrt(1.0 / a), jnp.zeros(b))
        for k, a, b in zip(keys, sizes[:-1], sizes[1:], strict=False)
    ]
    nu = 0.1

    def u(p: Any, x: Any, t: Any) -> Any:
        h = jnp.stack([x, t])
        for w, b in p[:-1]:
            h = jnp.tanh(h @ w + b)
        w, b = p[-1]
        return (h @ w + b)[0]

    def residual(p: Any, x: Any, t: Any) -> Any:
        u_t = jax.grad(u, 2)(p, x, t)
        u_xx = jax.grad(jax.grad(u, 1), 1)(p, x, t)
        return u_t - nu * u_xx

    def loss_fn(p: Any, xc: Any, tc: Any, x0: Any, tb: Any) -> Any:
        r = jax.vmap(residual, (None, 0, 0))(p, xc, tc)
        ic = jax.vmap(u, (None, 0, None))(p, x0, 0.0) - jnp.sin(jnp.pi * x0)
        bc0 = jax.vmap(u, (None, None, 0))(p, 0.0, tb)
        bc1 = jax.vmap(u, (None, None, 0))(p, 1.0, tb)
        return jnp.mean(r**2) + jnp.mean(ic**2) + jnp.mean(bc0**2) + jnp.mean(bc1**2)

    tx = optax.adam(optax.exponential_decay(1e-3, 500, 0.5))
    opt_state = tx.init(params)

    @jax.jit
    def train_step(params: Any, opt_state: Any, key: Any) -> Any:
        k1, k2, k3, k4 = jax.random.split(key, 4)
        xc, tc = jax.random.uniform(k1, (256,)), jax.random.uniform(k2, (256,))
        x0, tb = jax.random.uniform(k3, (64,)), jax.random.uniform(k4, (64,))
        loss, grads = jax.value_and_grad(loss_fn)(params, xc, tc, x0, tb)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    hook = mldbg.jax.Hook(path)
    key = jax.random.PRNGKey(seed + 1)
    losses = []
    for step in range(steps):
        key, sub = jax.random.split(key)
        old = params
        params, opt_state, loss, grads = train_step(params, opt_state, sub)
        hook.record(step, params=old, grads=grads, loss=loss)
        losses.append(float(loss))
    hook.close()
    return losses


# ============================================================================= Hugging Face Trainer


def hf_bert_sentence_pair_constant_warmup(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Sentence-pair classification (an NLI-shaped task: premise [SEP] hypothesis,
    `token_type_ids` 0 then 1) with a tiny random `BertForSequenceClassification` of 3 labels:
    the hypothesis a piece of the premise (0), a piece of another "text" (1), a piece of the
    premise with its tokens shifted (2); `per_device_train_batch_size=8`,
    `gradient_accumulation_steps=4`, `lr_scheduler_type="constant_with_warmup"` (20 warm-up
    steps), lr 1e-3, `max_grad_norm=0.5`, `eval_strategy="steps"` every 25 steps, 3 epochs."""
    from transformers import BertConfig, BertForSequenceClassification

    g = _seed(seed)
    vocab, n, p_len, h_len = 80, 1600, 14, 6
    cls, sep = 1, 2
    stream = 4 + _markov_tokens(g, n * p_len + 8, vocab - 5, order_seed=5050)
    other = 4 + _markov_tokens(g, n * h_len + 8, vocab - 5, order_seed=5151)
    labels = torch.randint(0, 3, (n,), generator=g)
    length = p_len + h_len + 3
    input_ids = torch.zeros(n, length, dtype=torch.long)
    token_type_ids = torch.zeros(n, length, dtype=torch.long)
    for i in range(n):
        premise = stream[i * p_len : (i + 1) * p_len]
        start = int(torch.randint(0, p_len - h_len + 1, (1,), generator=g))
        piece = premise[start : start + h_len]
        hypothesis = [piece, other[i * h_len : (i + 1) * h_len], 4 + (piece - 3) % (vocab - 5)][
            int(labels[i])
        ]
        input_ids[i] = torch.cat(
            [torch.tensor([cls]), premise, torch.tensor([sep]), hypothesis, torch.tensor([sep])]
        )
        token_type_ids[i, p_len + 2 :] = 1
    if bug == "shuffled_labels":  # the label column read from the copy of the table that was shuffled
        labels = labels[torch.randperm(n, generator=torch.Generator().manual_seed(seed + 7))]
    attention_mask = torch.ones_like(input_ids)
    config = BertConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=64, num_labels=3,
    )  # fmt: skip
    model = BertForSequenceClassification(config)
    cols = {
        "input_ids": input_ids,
        "token_type_ids": token_type_ids,
        "attention_mask": attention_mask,
        "labels": labels,
    }
    train = _Examples(**{k: v[:1408] for k, v in cols.items()})
    val = _Examples(**{k: v[1408:] for k, v in cols.items()})
    return _hf_train(
        path, model, train, val, num_train_epochs=3, per_device_train_batch_size=8, gradient_accumulation_steps=4,
        learning_rate=1e-3, lr_scheduler_type="constant_with_warmup", warmup_steps=20, max_grad_norm=0.5,
        eval_strategy="steps", eval_steps=25, remove_unused_columns=False,
    )  # fmt: skip


def hf_t5_seq2seq_reduce_lr_on_plateau(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """`Seq2SeqTrainer` on a tiny random `T5ForConditionalGeneration` learning to sort a sequence
    of 5 to 10 tokens, with `label_smoothing_factor=0.1` (the Trainer's `LabelSmoother` on the
    logits), `lr_scheduler_type="reduce_lr_on_plateau"` (stepped on the evaluation loss, patience 1,
    factor 0.5), `eval_strategy="steps"` every 40 steps, `optim="adamw_torch"` at lr 2e-3, batch
    32, 4 epochs; labels padded with -100 and `decoder_input_ids` made from them as
    `DataCollatorForSeq2Seq` makes them."""
    from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments, T5Config, T5ForConditionalGeneration

    g = _seed(seed)
    n, max_len, pad, eos, first = 1600, 10, 0, 1, 2
    vocab = 32
    input_ids = torch.full((n, max_len + 1), pad)
    labels = torch.full((n, max_len + 1), -100)
    for i in range(n):
        k = int(torch.randint(5, max_len + 1, (1,), generator=g))
        seq = first + torch.randint(0, vocab - first, (k,), generator=g)
        input_ids[i, : k + 1] = torch.cat([seq, torch.tensor([eos])])
        labels[i, : k + 1] = torch.cat([seq.sort().values, torch.tensor([eos])])
    attention_mask = (input_ids != pad).long()
    config = T5Config(
        vocab_size=vocab, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
        decoder_start_token_id=pad, pad_token_id=pad, eos_token_id=eos, dropout_rate=0.1,
    )  # fmt: skip
    model = T5ForConditionalGeneration(config)
    # what `DataCollatorForSeq2Seq(model=model)` adds: the label smoother pops `labels` before the forward
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(labels=labels)
    cols = {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "decoder_input_ids": decoder_input_ids,
        "labels": labels,
    }
    train = _Examples(**{k: v[:1280] for k, v in cols.items()})
    val = _Examples(**{k: v[1280:1440] for k, v in cols.items()})
    return _hf_train(
        path, model, train, val, trainer_cls=Seq2SeqTrainer, args_cls=Seq2SeqTrainingArguments,
        num_train_epochs=4, per_device_train_batch_size=32, learning_rate=2e-3, optim="adamw_torch",
        label_smoothing_factor=0.1, lr_scheduler_type="reduce_lr_on_plateau", eval_strategy="steps",
        eval_steps=40,
        lr_scheduler_kwargs={"patience": 1, "factor": 0.5}, remove_unused_columns=False,
    )  # fmt: skip


def hf_mixtral_moe_router_aux_loss(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Causal language modelling with a tiny random `MixtralForCausalLM` (4 experts, top-2
    routing, grouped-query attention 4/2) and `output_router_logits=True`, so the loss the
    Trainer backpropagates includes the load-balancing auxiliary loss times
    `router_aux_loss_coef=0.02`; blocks of 64 tokens of a Markov stream, `labels = input_ids`, lr
    1e-3, `lr_scheduler_type="cosine"` with `warmup_ratio`-style 10% warm-up, `weight_decay=0.1`,
    batch 16, 2 epochs."""
    from transformers import MixtralConfig, MixtralForCausalLM

    g = _seed(seed)
    vocab, block = 96, 64
    stream = _markov_tokens(g, 640 * block, vocab, order_seed=6161)
    blocks = stream.view(-1, block)
    config = MixtralConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=block, num_local_experts=4, num_experts_per_tok=2,
        output_router_logits=True, router_aux_loss_coef=0.02, pad_token_id=0,
    )  # fmt: skip
    model = MixtralForCausalLM(config)
    train = _Examples(input_ids=blocks[:576], labels=blocks[:576])
    val = _Examples(input_ids=blocks[576:], labels=blocks[576:])
    return _hf_train(
        path, model, train, val, num_train_epochs=2, per_device_train_batch_size=16, learning_rate=1e-3,
        lr_scheduler_type="cosine", warmup_steps=0.1, weight_decay=0.1, remove_unused_columns=False,
    )  # fmt: skip


def hf_token_classification_optimizers_tuple(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Part-of-speech-style tagging with a tiny random `BertForTokenClassification` under the
    Trainer, the optimizer and scheduler built by the user and passed as
    `Trainer(optimizers=(torch.optim.RAdam(lr=2e-3, decoupled_weight_decay=True),
    OneCycleLR(max_lr=2e-3, total_steps)))`, `label_smoothing_factor=0.05` (the smoother skips the
    -100 of [CLS], [SEP] and padding), batch 32, 4 epochs. Each token's tag is a function of the
    token and its left neighbour."""
    from transformers import BertConfig, BertForTokenClassification

    g = _seed(seed)
    vocab, n, max_len, tags = 120, 1600, 24, 7
    pg = torch.Generator().manual_seed(7171)
    tag_of = torch.randint(0, tags, (vocab, 4), generator=pg)
    stream = 3 + _markov_tokens(g, n * max_len, vocab - 3, order_seed=7272)
    input_ids = torch.zeros(n, max_len + 2, dtype=torch.long)
    labels = torch.full((n, max_len + 2), -100)
    for i in range(n):
        k = int(torch.randint(10, max_len + 1, (1,), generator=g))
        toks = stream[i * max_len : i * max_len + k]
        prev = torch.cat([torch.tensor([0]), toks[:-1]])
        input_ids[i, : k + 2] = torch.cat([torch.tensor([1]), toks, torch.tensor([2])])
        labels[i, 1 : k + 1] = tag_of[toks, prev % 4]
    attention_mask = (input_ids != 0).long()
    config = BertConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=64, num_labels=tags,
    )  # fmt: skip
    model = BertForTokenClassification(config)
    train = _Examples(input_ids=input_ids[:1408], attention_mask=attention_mask[:1408], labels=labels[:1408])
    val = _Examples(input_ids=input_ids[1408:], attention_mask=attention_mask[1408:], labels=labels[1408:])
    epochs, batch = 4, 32
    total_steps = epochs * math.ceil(1408 / batch)
    optimizer = torch.optim.RAdam(model.parameters(), lr=2e-3, weight_decay=0.01, decoupled_weight_decay=True)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=2e-3, total_steps=total_steps)
    return _hf_train(
        path, model, train, val, trainer_kw={"optimizers": (optimizer, scheduler)}, num_train_epochs=epochs,
        per_device_train_batch_size=batch, label_smoothing_factor=0.05, remove_unused_columns=False,
    )  # fmt: skip


# ============================================================================= Lightning


def lit_dqn_replay_iterable_dataset(
    path: str, steps: int = 1500, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The Lightning "Deep Q Network" example: a `ReplayBuffer` (deque of `Experience` tuples),
    an `RLDataset(IterableDataset)` sampling 200 transitions from it per epoch, an `Agent` that
    plays one epsilon-greedy step in `training_step` (epsilon decayed linearly from 1.0 to 0.01
    over 1000 frames), the DQN MSE loss against `r + gamma * max target(s')` on batches of 32,
    the target net copied every `sync_rate=10` steps, Adam lr 1e-3 (the example's 1e-2 scaled
    down), a 200-step warm start of the buffer; the hand-written cart-pole; `max_steps`."""
    from collections import deque

    import lightning.pytorch as pl
    from torch.utils.data import IterableDataset

    g = _seed(seed)
    gen = np.random.default_rng(seed)

    class DQN(nn.Module):
        def __init__(self, obs_size: int, n_actions: int, hidden_size: int = 128) -> None:
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(obs_size, hidden_size), nn.ReLU(), nn.Linear(hidden_size, n_actions)
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x.float())

    class ReplayBuffer:
        def __init__(self, capacity: int) -> None:
            self.buffer: deque[tuple[Any, ...]] = deque(maxlen=capacity)

        def __len__(self) -> int:
            return len(self.buffer)

        def append(self, experience: tuple[Any, ...]) -> None:
            self.buffer.append(experience)

        def sample(self, batch_size: int) -> tuple[np.ndarray, ...]:
            indices = gen.choice(len(self.buffer), batch_size, replace=False)
            states, actions, rewards, dones, next_states = zip(
                *(self.buffer[idx] for idx in indices), strict=True
            )
            return (
                np.array(states, dtype="float32"), np.array(actions), np.array(rewards, dtype="float32"),
                np.array(dones, dtype=bool), np.array(next_states, dtype="float32"),
            )  # fmt: skip

    class RLDataset(IterableDataset):
        def __init__(self, buffer: ReplayBuffer, sample_size: int = 200) -> None:
            self.buffer, self.sample_size = buffer, sample_size

        def __iter__(self) -> Any:
            states, actions, rewards, dones, new_states = self.buffer.sample(self.sample_size)
            for i in range(len(dones)):
                yield states[i], actions[i], rewards[i], dones[i], new_states[i]

    class Agent:
        def __init__(self, env: CartPole, replay_buffer: ReplayBuffer) -> None:
            self.env, self.replay_buffer = env, replay_buffer
            self.reset()

        def reset(self) -> None:
            self.state = self.env.reset()

        def get_action(self, net: nn.Module, epsilon: float) -> int:
            if float(torch.rand(1, generator=g)) < epsilon:
                return int(torch.randint(0, 2, (1,), generator=g))
            with torch.no_grad():
                return int(net(torch.tensor(np.array([self.state]))).argmax(1))

        def play_step(self, net: nn.Module, epsilon: float = 0.0) -> tuple[float, bool]:
            action = self.get_action(net, epsilon)
            new_state, reward, done = self.env.step(action)
            self.replay_buffer.append(
                (self.state, action, reward, done and self.env.t < self.env.limit, new_state)
            )
            self.state = new_state
            if done:
                self.reset()
            return reward, done

    class DQNLightning(pl.LightningModule):
        def __init__(
            self, batch_size: int = 32, lr: float = 1e-3, gamma: float = 0.99, sync_rate: int = 10
        ) -> None:
            super().__init__()
            self.batch_size, self.lr, self.gamma, self.sync_rate = batch_size, lr, gamma, sync_rate
            self.net, self.target_net = DQN(4, 2), DQN(4, 2)
            self.target_net.load_state_dict(self.net.state_dict())
            self.buffer = ReplayBuffer(1000)
            self.agent = Agent(CartPole(seed), self.buffer)
            for _ in range(200):  # warm start: fill the buffer before the first sample
                self.agent.play_step(self.net, epsilon=1.0)

        def dqn_mse_loss(self, batch: Any) -> torch.Tensor:
            states, actions, rewards, dones, next_states = batch
            state_action_values = self.net(states).gather(1, actions.long().unsqueeze(-1)).squeeze(-1)
            with torch.no_grad():
                next_state_values = self.target_net(next_states).max(1)[0]
                next_state_values[dones] = 0.0
            expected_state_action_values = next_state_values * self.gamma + rewards
            return nn.MSELoss()(state_action_values, expected_state_action_values)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            epsilon = max(0.01, 1.0 - self.global_step / 1000)
            self.agent.play_step(self.net, epsilon)
            loss = self.dqn_mse_loss(batch)
            if self.global_step % self.sync_rate == 0:
                self.target_net.load_state_dict(self.net.state_dict())
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.net.parameters(), lr=self.lr)

        def train_dataloader(self) -> DataLoader:
            return DataLoader(RLDataset(self.buffer, 200), batch_size=self.batch_size)

    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_steps=steps)
    trainer.fit(DQNLightning())
    return history.losses


def lit_sequential_lr_clip_hook_transformer(
    path: str, epochs: int = 3, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Transformer-encoder sequence classifier as a LightningModule whose
    `configure_optimizers` returns AdamW with a `SequentialLR` (a `LinearLR` warm-up of 40 steps
    then `CosineAnnealingLR`) at `"interval": "step"`, and which overrides
    `configure_gradient_clipping` to clip by norm (0.5) only after the warm-up, through
    `self.clip_gradients`; validation every 30 training batches (`val_check_interval=30`),
    `torchmetrics.Accuracy`; 4 Markov "topics", batch 32."""
    import lightning.pytorch as pl
    import torchmetrics

    g = _seed(seed)
    vocab, length, n, topics = 64, 32, 3072, 4
    y = torch.randint(0, topics, (n,), generator=g)
    x = torch.stack([
        _markov_tokens(g, length, vocab, order_seed=8080 + int(t)) for t in y
    ])  # fmt: skip
    steps_per_epoch = 2816 // 32

    class TopicTransformer(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, 64)
            self.pos = nn.Parameter(torch.zeros(1, length, 64))
            layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2)
            self.head = nn.Linear(64, topics)
            self.val_acc = torchmetrics.Accuracy(task="multiclass", num_classes=topics)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.encoder(self.embed(ids) + self.pos).mean(1))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            ids, yb = batch
            loss = F.cross_entropy(self(ids), yb)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            ids, yb = batch
            self.val_acc(self(ids), yb)
            self.log("val_acc", self.val_acc)

        def configure_gradient_clipping(
            self, optimizer: Any, gradient_clip_val: Any = None, gradient_clip_algorithm: Any = None
        ) -> None:
            if self.global_step > 40:
                self.clip_gradients(optimizer, gradient_clip_val=0.5, gradient_clip_algorithm="norm")

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.AdamW(self.parameters(), lr=1e-3, weight_decay=0.05)
            warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.05, total_iters=40)
            cosine = torch.optim.lr_scheduler.CosineAnnealingLR(
                optimizer, T_max=epochs * steps_per_epoch - 40
            )
            scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, cosine], milestones=[40])
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    train = DataLoader(TensorDataset(x[:2816], y[:2816]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(x[2816:], y[2816:]), batch_size=128)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs, val_check_interval=30)
    trainer.fit(TopicTransformer(), train, val)
    return history.losses


def lit_distillation_frozen_teacher(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Knowledge distillation as a LightningModule: a wider CNN teacher trained first (not
    recorded) held in the module frozen (`requires_grad_(False)`, kept in `eval()` by
    `on_train_epoch_start`), a small CNN student, the loss `alpha * T^2 * KL(softmax(s / T) ||
    softmax(t / T)) + (1 - alpha) * CE(s, y)` with T = 4, alpha = 0.7, SGD momentum 0.9 lr 0.02
    with `MultiStepLR([3, 4])` per epoch, batch 64."""
    import lightning.pytorch as pl

    g = _seed(seed)
    x, y = _images(g, 2560, size=16, proto_seed=9191)
    x = (x - 0.45) / 0.25

    def cnn(width: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(2 * width * 16, 10),
        )  # fmt: skip

    teacher = cnn(32)
    opt = torch.optim.Adam(teacher.parameters(), lr=2e-3)
    for _ in range(2):
        for xb, yb in DataLoader(TensorDataset(x[:2304], y[:2304]), batch_size=64, shuffle=True):
            opt.zero_grad()
            F.cross_entropy(teacher(xb), yb).backward()
            opt.step()

    class Student(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = cnn(8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            logits = self.net(x)
            if bug == "softmax_before_ce":  # the forward written for serving, returning probabilities
                return F.softmax(logits, dim=-1)
            return logits

    class Distillation(pl.LightningModule):
        def __init__(self, teacher: nn.Module, temperature: float = 4.0, alpha: float = 0.7) -> None:
            super().__init__()
            self.student = Student()
            self.teacher = teacher.requires_grad_(False)
            self.temperature, self.alpha = temperature, alpha

        def on_train_epoch_start(self) -> None:
            self.teacher.eval()

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            s = self.student(xb)
            with torch.no_grad():
                t = self.teacher(xb)
            tt = self.temperature
            kd = F.kl_div(F.log_softmax(s / tt, -1), F.softmax(t / tt, -1), reduction="batchmean") * tt * tt
            loss = self.alpha * kd + (1 - self.alpha) * F.cross_entropy(s, yb)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            xb, yb = batch
            self.log("val_acc", (self.student(xb).argmax(1) == yb).float().mean())

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.student.parameters(), lr=0.02, momentum=0.9)
            return [optimizer], [torch.optim.lr_scheduler.MultiStepLR(optimizer, [3, 4], 0.1)]

    train = DataLoader(TensorDataset(x[:2304], y[:2304]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(x[2304:], y[2304:]), batch_size=256)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(Distillation(teacher), train, val)
    return history.losses


def lit_sam_manual_optimization(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Sharpness-aware minimization under Lightning's manual optimization
    (`self.automatic_optimization = False`): the first `manual_backward`, the ascent step
    `e_w = rho * g / ||g||` added to the weights, `opt.zero_grad()`, the second forward and
    `manual_backward` at the perturbed weights, `e_w` taken back, `opt.step()` of the base SGD
    (momentum 0.9, lr 0.05), a `CosineAnnealingLR` stepped by hand in `on_train_epoch_end`; a
    4-layer ReLU MLP with the module's own `_init_weights` (Kaiming normal, zero biases) on a
    12-class tabular task, batch 128."""
    import lightning.pytorch as pl

    g = _seed(seed)
    n, d, k = 6144, 24, 12
    w1 = torch.randn(d, 48, generator=g)
    w2 = torch.randn(48, k, generator=g)
    x = torch.randn(n, d, generator=g)
    y = (torch.tanh(x @ w1 / 4) @ w2 + 0.3 * torch.randn(n, k, generator=g)).argmax(1)

    class SAMClassifier(pl.LightningModule):
        def __init__(self, rho: float = 0.05) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.rho = rho
            self.net = nn.Sequential(
                nn.Linear(d, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                nn.Linear(64, k),
            )  # fmt: skip
            self.net.apply(self._init_weights)

        def _init_weights(self, m: nn.Module) -> None:
            if isinstance(m, nn.Linear):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.constant_(m.bias, -1.0 if bug == "dead_relu_init" else 0.0)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            opt = self.optimizers()
            loss = F.cross_entropy(self.net(xb), yb)
            self.manual_backward(loss)
            params = [p for p in self.parameters() if p.grad is not None]
            grad_norm = torch.norm(torch.stack([p.grad.norm(2) for p in params]), 2)
            scale = self.rho / (grad_norm + 1e-12)
            e_ws = []
            with torch.no_grad():
                for p in params:
                    e_w = p.grad * scale
                    p.add_(e_w)
                    e_ws.append(e_w)
            opt.zero_grad()
            self.manual_backward(F.cross_entropy(self.net(xb), yb))
            with torch.no_grad():
                for p, e_w in zip(params, e_ws, strict=True):
                    p.sub_(e_w)
            opt.step()
            opt.zero_grad()
            self.log("train_loss", loss)
            return loss.detach()

        def on_train_epoch_end(self) -> None:
            self.lr_schedulers().step()

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)
            return [optimizer], [torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)]

    train = DataLoader(TensorDataset(x[:5632], y[:5632]), batch_size=128, shuffle=True)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(SAMClassifier(), train)
    return history.losses


_cifar = healthy(
    "pytorch_tutorial_cifar10_training_a_classifier",
    "PyTorch CIFAR-10 tutorial",
    pytorch_tutorial_cifar10_classifier,
)
_transfer = healthy(
    "pytorch_tutorial_transfer_learning_finetune_steplr",
    "PyTorch transfer-learning tutorial (fine-tuning)",
    pytorch_tutorial_transfer_learning_finetune,
)
_mnrl = healthy(
    "sentence_transformers_mnrl_mean_pooling",
    "sentence-transformers MultipleNegativesRankingLoss",
    sentence_transformers_mnrl_fit,
)
PIPELINES: list[Any] = [
    _cifar,
    _transfer,
    _mnrl,
    buggy(_cifar, "inputs_x255"),
    buggy(_transfer, "frozen_by_mistake"),
    buggy(_mnrl, "train_in_eval_mode"),
]

if installed("transformers"):
    _swag = healthy(
        "hf_run_swag_no_trainer_multiple_choice_accumulation",
        "transformers run_swag_no_trainer (multiple choice)",
        hf_run_swag_no_trainer,
    )
    _pair = healthy(
        "hf_trainer_bert_sentence_pair_constant_with_warmup_accumulation",
        "HF Trainer sentence-pair classification",
        hf_bert_sentence_pair_constant_warmup,
    )
    PIPELINES += [
        _swag,
        _pair,
        healthy(
            "hf_seq2seq_trainer_t5_reduce_lr_on_plateau_label_smoothing",
            "HF Seq2SeqTrainer T5 (reduce_lr_on_plateau)",
            hf_t5_seq2seq_reduce_lr_on_plateau,
        ),
        healthy(
            "hf_trainer_mixtral_moe_router_aux_loss",
            "HF Trainer Mixtral MoE causal LM",
            hf_mixtral_moe_router_aux_loss,
        ),
        healthy(
            "hf_trainer_token_classification_optimizers_radam_onecycle",
            "HF Trainer token classification (user optimizers)",
            hf_token_classification_optimizers_tuple,
        ),
        buggy(_swag, "no_zero_grad"),
        buggy(_pair, "shuffled_labels"),
    ]

if installed("lightning", "torchmetrics"):
    _lit_kd = healthy(
        "lightning_distillation_frozen_teacher_kl",
        "Lightning knowledge distillation",
        lit_distillation_frozen_teacher,
    )
    _lit_sam = healthy(
        "lightning_sam_manual_optimization_mlp",
        "Lightning SAM (manual optimization)",
        lit_sam_manual_optimization,
    )
    PIPELINES += [
        healthy(
            "lightning_dqn_replay_iterable_dataset",
            "Lightning DQN (replay IterableDataset)",
            lit_dqn_replay_iterable_dataset,
        ),
        healthy(
            "lightning_sequential_lr_clip_hook_transformer",
            "Lightning Transformer (SequentialLR, configure_gradient_clipping)",
            lit_sequential_lr_clip_hook_transformer,
        ),
        _lit_kd,
        _lit_sam,
        buggy(_lit_kd, "softmax_before_ce"),
        buggy(_lit_sam, "dead_relu_init"),
    ]

if installed("keras", "tensorflow"):
    _keras_pinball = healthy(
        "keras_pinball_loss_sample_weight_reduce_lr",
        "Keras custom pinball loss (sample_weight)",
        keras_pinball_loss_sample_weight,
    )
    PIPELINES += [
        _keras_pinball,
        healthy(
            "keras_binary_focal_loss_subclass_f1_metric",
            "Keras hand-written focal loss and metric",
            keras_focal_loss_custom_metric,
        ),
        healthy(
            "keras_tf_data_separable_conv_exponential_decay",
            "Keras tf.data SeparableConv2D CNN",
            keras_tf_data_separable_cnn,
        ),
        healthy(
            "keras_char_level_lstm_seq2seq", "Keras character-level LSTM seq2seq", keras_char_seq2seq_lstm
        ),
        buggy(_keras_pinball, "deep_sigmoid"),
    ]

if installed("jax", "optax", "flax"):
    _flax_wave = healthy(
        "flax_conv1d_waveforms_clip_global_norm_adamw",
        "Flax Conv1D (optax chain: clip + AdamW)",
        flax_conv1d_clip_adamw_chain,
    )
    _jax_gru = healthy(
        "jax_lax_scan_gru_adabelief_demand_forecaster", "JAX lax.scan GRU (AdaBelief)", jax_scan_gru_adabelief
    )
    PIPELINES += [
        _flax_wave,
        _jax_gru,
        healthy("flax_nnx_lora_adapter_finetune", "Flax NNX LoRA fine-tuning", flax_nnx_lora_finetune),
        healthy(
            "jax_pinn_heat_equation_exponential_decay", "JAX physics-informed network", jax_pinn_heat_equation
        ),
        buggy(_flax_wave, "lr_x100"),
        buggy(_jax_gru, "log_zero_nan"),
    ]

if installed("xgboost"):
    PIPELINES += [
        healthy("xgboost_rank_pairwise_qid_topk", "XGBoost rank:pairwise", xgb_rank_pairwise_qid),
        healthy(
            "xgboost_pseudohuber_early_stopping_save_best",
            "XGBoost pseudo-Huber (early stopping)",
            xgb_pseudohuber_early_stopping_save_best,
        ),
        healthy(
            "xgboost_boosted_random_forest_softprob",
            "XGBoost boosted random forest (multi:softprob)",
            xgb_boosted_random_forest_softprob,
        ),
    ]
