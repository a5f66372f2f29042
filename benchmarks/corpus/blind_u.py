"""The fourteenth blind held-out set (issue 26), part U: the everyday training scripts people copy
from public examples, written the way those examples are written (their loops, their defaults,
their idioms), shrunk to tiny data generated in-process, fixed seeds, one CPU thread. Plain
PyTorch loops with the README's two lines (`register_loss` where the script has a loss module),
trainings through tools with their one callback or hook.

Plain PyTorch: the PyTorch "Quickstart" tutorial (Fashion-MNIST-like images, `nn.Flatten` and a
512-512 ReLU stack, plain SGD at lr 1e-3 with `zero_grad` after the step, `train()` and `test()`
functions), d2l.ai's LeNet-5 with batch normalization (sigmoid activations, average pooling,
`LazyConv2d` / `LazyLinear` / `LazyBatchNorm` materialized by a dummy pass, Xavier init, SGD at
lr 1.0, batch 256), Karpathy's build-nanogpt `train_gpt2.py` (tied embeddings and `NANOGPT_SCALE_INIT`,
a vocabulary padded to a "nice number", `DataLoaderLite`, decay and no-decay groups, `get_lr`
warm-up and cosine to a tenth, gradient accumulation with `loss / grad_accum_steps`, bf16
autocast on CPU, clipping at 1.0, a validation estimate every 50 steps), bentrevett's "Upgraded
Sentiment Analysis" (a 2-layer bidirectional LSTM over `pack_padded_sequence`, the last hidden
states of both directions through dropout 0.5, Adam defaults, `BCEWithLogitsLoss`),
machinelearningmastery's "regression model in PyTorch" (scikit-learn's
`train_test_split` and `StandardScaler`, a 24-12-6 ReLU MLP, batches of 10 sliced with
`torch.arange`, the best weights kept by `copy.deepcopy`), d2l.ai's GRU encoder-decoder (the
context concatenated to every decoder input, `MaskedSoftmaxCELoss` subclassing
`nn.CrossEntropyLoss`, `l.sum().backward()`, the hand-written `grad_clipping(net, 1)`, Adam
0.005), the UvA deep-learning course's continuous-XOR classifier (2-4-1 with tanh,
`BCEWithLogitsLoss`, SGD 0.1), and machinelearningmastery's LSTM time-series forecaster (lookback
windows predicting the shifted window, Adam defaults, batches of 8, an RMSE pass).

Through tools: Hugging Face `Trainer` (`mldbg.transformers.DebuggerCallback`, tiny random
configs, no download): Pegasus summarization with `Seq2SeqTrainer` and
`predict_with_generate=True`; OPT causal LM the way `run_clm.py` feeds it (`group_texts` blocks,
`labels = input_ids.copy()`, the default collator); MobileBERT classification with
`compute_metrics`, `load_best_model_at_end` and `EarlyStoppingCallback`. Lightning
(`mldbg.lightning.DebuggerCallback`): the "Finetune Transformers Models with PyTorch Lightning"
tutorial's `GLUETransformer` (a BERT sequence classifier inside a LightningModule, no-decay
groups, `get_linear_schedule_with_warmup` at `interval="step"`); the UvA "Transformers and
Multi-Head Attention" tutorial's reverse task (its own attention, `CosineWarmupScheduler`
subclassing `_LRScheduler` stepped in an overridden `optimizer_step`, `gradient_clip_val=5`).
Keras 3 on TensorFlow (`mldbg.keras.Hook`): the TensorFlow "basic text classification" tutorial
in its Stack Overflow multi-class form (a `TextVectorization` layer adapted on the raw strings
and mapped over a `tf.data` pipeline with `cache().prefetch()`, Embedding, global average
pooling, `SparseCategoricalCrossentropy(from_logits=True)`), the "basic regression" fuel
efficiency tutorial (a `Normalization` layer adapted on the features, a 64-64 ReLU DNN, the mean
absolute error, `validation_split=0.2`). JAX: the Flax Linen MNIST example (a `TrainState`,
`apply_model` and `update_model` jitted, SGD momentum 0.9 at lr 0.1, a permutation per epoch).

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: build-nanogpt's `max_lr` typed as 3e-1 (lr_x100), the BiLSTM's `optimizer.zero_grad()`
left out (no_zero_grad), the regression's features and targets split by two `train_test_split`
calls without a shared `random_state` (shuffled_labels), LeNet fed the images' bytes as floats
without `ToTensor`'s division (inputs_x255), the Quickstart's `nn.Softmax(dim=1)` moved from the
prediction snippet into the model while `nn.CrossEntropyLoss` stays (softmax_before_ce), the
fuel-efficiency DNN's ReLU layers built with `bias_initializer=Constant(-2.0)` (dead_relu_init),
the XOR classifier made "deeper" with eight sigmoid layers (deep_sigmoid), the Lightning GLUE
module's BERT encoder frozen in `__init__` by a feature-extraction line while the optimizer
groups still hold it (frozen_by_mistake), the sales forecaster's series log-transformed "to
stabilise the seasonal swings" although the months before the launch sold nothing
(log_zero_nan), the d2l translator monitored by `predict_seq2seq` (which calls `net.eval()`)
inside the loop while `net.train()` stays before it (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND13`.
"""

from __future__ import annotations

import copy
import inspect
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

from . import BLIND13, buggy, healthy, installed

SPLIT = BLIND13

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 67)


def _fashion(
    g: torch.Generator, n: int, size: int = 28, classes: int = 10, proto_seed: int = 907
) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 1, size, size) uint8 "Fashion-MNIST" images: each class a smooth random silhouette,
    shifted a couple of pixels, of random brightness, on noise; and the labels."""
    pg = torch.Generator().manual_seed(proto_seed)
    blobs = F.avg_pool2d(torch.rand(classes, 1, size, size, generator=pg), 7, 1, 3)
    blobs = (blobs - blobs.mean((2, 3), keepdim=True)) / blobs.std((2, 3), keepdim=True)
    protos = torch.sigmoid(6 * (blobs - 0.2))  # silhouettes on a dark background
    y = torch.randint(0, classes, (n,), generator=g)
    shift = torch.randint(-2, 3, (n, 2), generator=g)
    obj = torch.stack(
        [torch.roll(protos[c], (int(a), int(b)), (1, 2)) for c, (a, b) in zip(y, shift, strict=True)]
    )
    x = obj * (0.6 + 0.4 * torch.rand(n, 1, 1, 1, generator=g)) + 0.1 * torch.randn(
        n, 1, size, size, generator=g
    )
    return (x.clamp(0, 1) * 255).round().to(torch.uint8), y


def _markov_tokens(g: torch.Generator, n: int, length: int, vocab: int, proto_seed: int = 79) -> torch.Tensor:
    """(n, length) token sequences from a random second-order Markov chain over `vocab` tokens."""
    pg = torch.Generator().manual_seed(proto_seed)
    logits = 3.0 * torch.randn(1, vocab, vocab, generator=pg) + 1.5 * torch.randn(
        vocab, vocab, vocab, generator=pg
    )
    probs = torch.softmax(logits, -1)
    seqs = torch.zeros(n, length, dtype=torch.long)
    seqs[:, 0] = torch.randint(0, vocab, (n,), generator=g)
    seqs[:, 1] = torch.randint(0, vocab, (n,), generator=g)
    for t in range(2, length):
        seqs[:, t] = torch.multinomial(probs[seqs[:, t - 2], seqs[:, t - 1]], 1, generator=g).squeeze(1)
    return seqs


def _topic_tokens(
    g: torch.Generator, n: int, length: int, vocab: int, classes: int, cue: float = 0.25, proto_seed: int = 83
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token documents of a few topics: each token drawn from the topic's own word distribution
    with probability `cue`, else from a shared Zipf background; variable lengths. Returns the
    (n, length) ids (0 = padding, ids from 1), the lengths and the labels."""
    pg = torch.Generator().manual_seed(proto_seed)
    background = 1.0 / torch.arange(1, vocab).float()
    topics = torch.softmax(2.5 * torch.randn(classes, vocab - 1, generator=pg), -1)
    y = torch.randint(0, classes, (n,), generator=g)
    lengths = torch.randint(length // 3, length + 1, (n,), generator=g)
    bg = torch.multinomial(background / background.sum(), n * length, replacement=True, generator=g).view(
        n, length
    )
    tp = torch.stack([torch.multinomial(topics[c], length, replacement=True, generator=g) for c in y])
    ids = torch.where(torch.rand(n, length, generator=g) < cue, tp, bg) + 1
    ids[torch.arange(length)[None, :] >= lengths[:, None]] = 0
    return ids, lengths, y


# ============================================================================= plain PyTorch


def pytorch_quickstart_mlp(path: str, epochs: int = 5, seed: int = 0, bug: str | None = None) -> list[float]:
    """The PyTorch "Quickstart" tutorial: `NeuralNetwork` (`nn.Flatten`, Linear 784-512-512-10
    with ReLUs), `nn.CrossEntropyLoss`, `torch.optim.SGD(lr=1e-3)` without momentum, batch 64
    from an unshuffled `DataLoader`, `train()` (`loss.backward()`, `optimizer.step()`,
    `optimizer.zero_grad()`) and `test()` (`model.eval()`, accuracy) functions, 5 epochs."""
    g = _seed(seed)
    images, labels = _fashion(g, 16000)
    x = images.float() / 255  # transforms.ToTensor()
    training_data = TensorDataset(x[:15000], labels[:15000])
    test_data = TensorDataset(x[15000:], labels[15000:])
    train_dataloader = DataLoader(training_data, batch_size=64)
    test_dataloader = DataLoader(test_data, batch_size=64)

    class NeuralNetwork(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.flatten = nn.Flatten()
            self.linear_relu_stack = nn.Sequential(
                nn.Linear(28 * 28, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
            )
            if bug == "softmax_before_ce":  # bug: the tutorial's `nn.Softmax(dim=1)` moved into the model
                self.linear_relu_stack.append(nn.Softmax(dim=1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear_relu_stack(self.flatten(x))

    model = NeuralNetwork()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses: list[float] = []

    def train(dataloader: DataLoader, model: nn.Module, loss_fn: nn.Module, optimizer: Any) -> None:
        size = len(dataloader.dataset)  # type: ignore[arg-type]
        model.train()
        for batch, (X, y) in enumerate(dataloader):  # noqa: N806
            pred = model(X)
            loss = loss_fn(pred, y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            if batch % 100 == 0:
                print(f"loss: {loss.item():>7f}  [{(batch + 1) * len(X):>5d}/{size:>5d}]")

    def test(dataloader: DataLoader, model: nn.Module, loss_fn: nn.Module) -> None:
        model.eval()
        test_loss, correct = 0.0, 0.0
        with torch.no_grad():
            for X, y in dataloader:  # noqa: N806
                pred = model(X)
                test_loss += loss_fn(pred, y).item()
                correct += (pred.argmax(1) == y).float().sum().item()
        print(f"Test: Accuracy {100 * correct / 1000:>0.1f}%, Avg loss: {test_loss / len(dataloader):>8f}")

    for _t in range(epochs):
        train(train_dataloader, model, loss_fn, optimizer)
        test(test_dataloader, model, loss_fn)
    hook.close()
    return losses


def d2l_lenet_batchnorm_lazy(
    path: str, num_epochs: int = 10, seed: int = 0, bug: str | None = None
) -> list[float]:
    """d2l.ai's LeNet-5 with batch normalization ("Batch Normalization", the concise version):
    LeNet's sigmoid activations and average pooling with `nn.LazyConv2d` / `nn.LazyLinear` and
    `LazyBatchNorm2d` / `LazyBatchNorm1d` after every layer but the last, shapes inferred by a
    dummy forward pass, then Xavier-uniform weights via `net.apply(init_weights)`;
    `nn.CrossEntropyLoss`, SGD lr 1.0, batch 256, 10 epochs, `train_ch6`'s loop with an accuracy
    pass under `net.eval()` each epoch."""
    g = _seed(seed)
    images, labels = _fashion(g, 10800, proto_seed=911)
    x = images.float() / 255  # transforms.ToTensor()
    if bug == "inputs_x255":  # bug: the bytes read straight into float tensors, no ToTensor scaling
        x = torch.tensor(images.numpy(), dtype=torch.float32)
    train_iter = DataLoader(
        TensorDataset(x[:10000], labels[:10000]), batch_size=256, shuffle=True, generator=g
    )
    test_iter = DataLoader(TensorDataset(x[10000:], labels[10000:]), batch_size=256)
    net = nn.Sequential(
        nn.LazyConv2d(6, kernel_size=5, padding=2), nn.LazyBatchNorm2d(), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2),
        nn.LazyConv2d(16, kernel_size=5), nn.LazyBatchNorm2d(), nn.Sigmoid(), nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Flatten(), nn.LazyLinear(120), nn.LazyBatchNorm1d(), nn.Sigmoid(),
        nn.LazyLinear(84), nn.LazyBatchNorm1d(), nn.Sigmoid(), nn.LazyLinear(10),
    )  # fmt: skip
    net(x[:2])  # materialize the lazy parameters

    def init_weights(m: nn.Module) -> None:
        if type(m) is nn.Linear or type(m) is nn.Conv2d:
            nn.init.xavier_uniform_(m.weight)

    net.apply(init_weights)
    optimizer = torch.optim.SGD(net.parameters(), lr=1.0)
    loss = nn.CrossEntropyLoss()
    hook = Hook(path)
    hook.register_module(net)
    hook.register_loss(loss)
    losses = []
    for epoch in range(num_epochs):
        net.train()
        for X, y in train_iter:  # noqa: N806
            optimizer.zero_grad()
            y_hat = net(X)
            l = loss(y_hat, y)  # noqa: E741
            l.backward()
            optimizer.step()
            losses.append(l.item())
        net.eval()
        with torch.no_grad():
            acc = sum((net(X).argmax(1) == y).sum().item() for X, y in test_iter) / 800  # noqa: N806
        print(f"epoch {epoch + 1}: loss {losses[-1]:.3f}, test acc {acc:.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- build-nanogpt


class _CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.c_proj.NANOGPT_SCALE_INIT = 1  # type: ignore[assignment]
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()  # noqa: N806
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class _NanoBlock(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = _CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.ModuleDict(
            {
                "c_fc": nn.Linear(n_embd, 4 * n_embd),
                "gelu": nn.GELU(approximate="tanh"),
                "c_proj": nn.Linear(4 * n_embd, n_embd),
            }
        )
        self.mlp.c_proj.NANOGPT_SCALE_INIT = 1  # type: ignore[assignment]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp.c_proj(self.mlp.gelu(self.mlp.c_fc(self.ln_2(x))))


class _GPT(nn.Module):
    """build-nanogpt's GPT: tied token embedding and head, N(0, 0.02) init with the residual
    projections scaled by (2 n_layer)^-0.5; `forward(idx, targets)` returns (logits, loss)."""

    def __init__(self, vocab_size: int, block_size: int, n_layer: int, n_head: int, n_embd: int) -> None:
        super().__init__()
        self.n_layer = n_layer
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(vocab_size, n_embd),
                "wpe": nn.Embedding(block_size, n_embd),
                "h": nn.ModuleList([_NanoBlock(n_embd, n_head) for _ in range(n_layer)]),
                "ln_f": nn.LayerNorm(n_embd),
            }
        )
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight sharing scheme
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            std = 0.02
            if hasattr(module, "NANOGPT_SCALE_INIT"):
                std *= (2 * self.n_layer) ** -0.5
            torch.nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> Any:
        _, T = idx.size()  # noqa: N806
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(0, T, dtype=torch.long))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def configure_optimizers(
        self, weight_decay: float, learning_rate: float, device_type: str = "cpu"
    ) -> torch.optim.Optimizer:
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for p in param_dict.values() if p.dim() >= 2]
        nodecay_params = [p for p in param_dict.values() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == "cuda"
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=(0.9, 0.95), eps=1e-8, fused=use_fused)


class _DataLoaderLite:
    def __init__(self, tokens: torch.Tensor, B: int, T: int) -> None:  # noqa: N803
        self.tokens, self.B, self.T = tokens, B, T
        self.reset()

    def reset(self) -> None:
        self.current_position = 0

    def next_batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        B, T = self.B, self.T  # noqa: N806
        buf = self.tokens[self.current_position : self.current_position + B * T + 1]
        x, y = buf[:-1].view(B, T), buf[1:].view(B, T)
        self.current_position += B * T
        if self.current_position + (B * T + 1) > len(self.tokens):
            self.current_position = 0
        return x, y


def build_nanogpt_train_gpt2(
    path: str, max_steps: int = 200, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Karpathy's build-nanogpt `train_gpt2.py` shrunk: GPT (2 layers, 4 heads, 64 wide, block
    32), the vocabulary of 50 tokens padded to 64 ("a nice number"), `DataLoaderLite` walking a
    token stream, `total_batch_size = 2 * B * T` so two micro-steps of accumulation with
    `loss / grad_accum_steps` under `torch.autocast("cpu", torch.bfloat16)`, `clip_grad_norm_`
    at 1.0, `get_lr` (linear warm-up 20 steps, cosine to `min_lr = max_lr * 0.1`; max_lr 3e-3
    for the tiny model) written into every param group, a validation estimate every 50 steps."""
    g = _seed(seed)
    stream = _markov_tokens(g, 1, 60000, 50, proto_seed=131).view(-1)
    train_loader = _DataLoaderLite(stream[:54000], B=16, T=32)
    val_loader = _DataLoaderLite(stream[54000:], B=16, T=32)
    total_batch_size = 2 * 16 * 32
    grad_accum_steps = total_batch_size // (16 * 32)
    model = _GPT(vocab_size=64, block_size=32, n_layer=2, n_head=4, n_embd=64)
    max_lr = 3e-1 if bug == "lr_x100" else 3e-3  # bug: 3e-1 typed for 3e-3
    min_lr = max_lr * 0.1
    warmup_steps = 20

    def get_lr(it: int) -> float:
        if it < warmup_steps:
            return max_lr * (it + 1) / warmup_steps
        if it > max_steps:
            return min_lr
        decay_ratio = (it - warmup_steps) / (max_steps - warmup_steps)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (max_lr - min_lr)

    optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=6e-4)
    hook = Hook(path)
    hook.register_module(model)
    losses = []
    for step in range(max_steps):
        last_step = step == max_steps - 1
        if step % 50 == 0 or last_step:
            model.eval()
            val_loader.reset()
            with torch.no_grad():
                val_loss_accum = 0.0
                for _ in range(5):
                    x, y = val_loader.next_batch()
                    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                        _, loss = model(x, y)
                    val_loss_accum += loss.item() / 5
            print(f"validation loss: {val_loss_accum:.4f}")
        model.train()
        optimizer.zero_grad()
        loss_accum = 0.0
        for _micro_step in range(grad_accum_steps):
            x, y = train_loader.next_batch()
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                logits, loss = model(x, y)
            loss = loss / grad_accum_steps
            loss_accum += loss.detach().item()
            loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        lr = get_lr(step)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        optimizer.step()
        losses.append(loss_accum)
        if step % 50 == 0:
            print(f"step {step:5d} | loss: {loss_accum:.6f} | lr {lr:.4e} | norm: {norm:.4f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- packed BiLSTM sentiment


def bentrevett_packed_bilstm_sentiment(
    path: str, n_epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """bentrevett's pytorch-sentiment-analysis "Upgraded Sentiment Analysis": an `RNN` module with
    an `Embedding` whose padding row is zeroed, a 2-layer bidirectional LSTM over
    `nn.utils.rnn.pack_padded_sequence(embedded, text_lengths, enforce_sorted=False)`, the last
    forward and backward hidden states concatenated through dropout 0.5 into one logit;
    `optim.Adam` with its defaults, `nn.BCEWithLogitsLoss`, `binary_accuracy` from
    `torch.round(torch.sigmoid(preds))`, `train()` under `model.train()` and `evaluate()` under
    `model.eval()` each epoch, batch 64 of padded reviews."""
    g = _seed(seed)
    ids, lengths, y = _topic_tokens(g, 2304, 40, 400, 2, cue=0.15, proto_seed=101)
    pad_idx = 0

    class RNN(nn.Module):
        def __init__(self, vocab_size: int, embedding_dim: int, hidden_dim: int, output_dim: int, n_layers: int,
                     bidirectional: bool, dropout: float, pad_idx: int) -> None:  # fmt: skip
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_idx)
            self.rnn = nn.LSTM(
                embedding_dim, hidden_dim, num_layers=n_layers, bidirectional=bidirectional, dropout=dropout
            )
            self.fc = nn.Linear(hidden_dim * 2, output_dim)
            self.dropout = nn.Dropout(dropout)

        def forward(self, text: torch.Tensor, text_lengths: torch.Tensor) -> torch.Tensor:
            embedded = self.dropout(self.embedding(text))
            packed_embedded = nn.utils.rnn.pack_padded_sequence(
                embedded, text_lengths.to("cpu"), enforce_sorted=False
            )
            packed_output, (hidden, cell) = self.rnn(packed_embedded)
            hidden = self.dropout(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1))
            return self.fc(hidden)

    model = RNN(401, 32, 64, 1, 2, True, 0.5, pad_idx)
    model.embedding.weight.data[pad_idx] = torch.zeros(32)
    optimizer = torch.optim.Adam(model.parameters())
    criterion = nn.BCEWithLogitsLoss()
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)

    def binary_accuracy(preds: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        rounded_preds = torch.round(torch.sigmoid(preds))
        return (rounded_preds == y).float().sum() / len(y)

    def batches(lo: int, hi: int, shuffle: bool) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        order = lo + (torch.randperm(hi - lo, generator=g) if shuffle else torch.arange(hi - lo))
        return [(ids[i].T, lengths[i], y[i].float()) for i in order.split(64)]  # text: (seq len, batch)

    losses: list[float] = []

    def train() -> None:
        model.train()
        for text, text_lengths, label in batches(0, 2048, True):
            if bug != "no_zero_grad":  # the bug drops this line
                optimizer.zero_grad()
            predictions = model(text, text_lengths).squeeze(1)
            loss = criterion(predictions, label)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())

    def evaluate() -> tuple[float, float]:
        model.eval()
        epoch_loss, epoch_acc, k = 0.0, 0.0, 0
        with torch.no_grad():
            for text, text_lengths, label in batches(2048, 2304, False):
                predictions = model(text, text_lengths).squeeze(1)
                epoch_loss += criterion(predictions, label).item()
                epoch_acc += binary_accuracy(predictions, label).item()
                k += 1
        return epoch_loss / k, epoch_acc / k

    for epoch in range(n_epochs):
        train()
        valid_loss, valid_acc = evaluate()
        print(
            f"Epoch: {epoch + 1:02} | Train Loss: {losses[-1]:.3f} | Val. Loss: {valid_loss:.3f} | Val. Acc: {valid_acc * 100:.2f}%"
        )
    hook.close()
    return losses


# ----------------------------------------------------------------------------- tabular regression


def _housing(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """California-housing-like rows: income, age, rooms, bedrooms, population, occupancy,
    latitude, longitude (raw units); the median value in $100k, capped at 5."""
    inc = rng.lognormal(1.2, 0.45, n)
    age = rng.uniform(1, 52, n)
    rooms = rng.lognormal(1.65, 0.25, n)
    beds = rooms * rng.uniform(0.17, 0.25, n)
    pop = rng.lognormal(7.0, 0.7, n)
    occ = rng.lognormal(1.05, 0.3, n)
    lat = rng.uniform(32.5, 42, n)
    lon = -124 + (42 - lat) * 0.9 + rng.normal(0, 1.0, n)
    coast = np.exp(-np.abs(lon + 122 - (38 - lat) * 0.7))
    value = (
        0.45 * inc
        + 0.008 * age
        + 1.2 * coast
        - 0.15 * occ
        + 0.1 * rooms
        - 0.2 * beds
        + rng.normal(0, 0.35, n)
    )
    x = np.stack([inc, age, rooms, beds, pop, occ, lat, lon], 1)
    return x.astype(np.float64), np.clip(value, 0.15, 5.0)


def mlm_housing_regression_mlp(
    path: str, n_epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """machinelearningmastery's "Building a Regression Model in PyTorch" on California-housing-like
    rows: `train_test_split(X, y, train_size=0.7, shuffle=True)`, `StandardScaler` fitted on the
    training rows, Linear 8-24-12-6-1 with ReLUs, `nn.MSELoss`, Adam (1e-3 for the few epochs
    here, the article's 1e-4 over 100), `batch_start = torch.arange(0, len(X_train), 10)`, the
    best test MSE's weights kept with `copy.deepcopy(model.state_dict())` and restored."""
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    _seed(seed)
    X, y = _housing(np.random.default_rng(seed + 5), 1000)  # noqa: N806
    if bug == "shuffled_labels":  # bug: features and targets split by two calls, no shared random_state
        X_train_raw, X_test_raw = train_test_split(X, train_size=0.7, shuffle=True)  # noqa: N806
        y_train, y_test = train_test_split(y, train_size=0.7, shuffle=True)
    else:
        X_train_raw, X_test_raw, y_train, y_test = train_test_split(
            X, y, train_size=0.7, shuffle=True, random_state=42
        )  # noqa: N806
    scaler = StandardScaler()
    scaler.fit(X_train_raw)
    X_train = torch.tensor(scaler.transform(X_train_raw), dtype=torch.float32)  # noqa: N806
    X_test = torch.tensor(scaler.transform(X_test_raw), dtype=torch.float32)  # noqa: N806
    y_train_t = torch.tensor(y_train, dtype=torch.float32).reshape(-1, 1)
    y_test_t = torch.tensor(y_test, dtype=torch.float32).reshape(-1, 1)
    model = nn.Sequential(
        nn.Linear(8, 24),
        nn.ReLU(),
        nn.Linear(24, 12),
        nn.ReLU(),
        nn.Linear(12, 6),
        nn.ReLU(),
        nn.Linear(6, 1),
    )
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    batch_size = 10
    batch_start = torch.arange(0, len(X_train), batch_size)
    best_mse = np.inf
    best_weights = None
    history = []
    losses = []
    for _epoch in range(n_epochs):
        model.train()
        for start in batch_start:
            X_batch = X_train[start : start + batch_size]  # noqa: N806
            y_batch = y_train_t[start : start + batch_size]
            y_pred = model(X_batch)
            loss = loss_fn(y_pred, y_batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        model.eval()
        y_pred = model(X_test)
        mse = loss_fn(y_pred, y_test_t).item()
        history.append(mse)
        if mse < best_mse:
            best_mse = mse
            best_weights = copy.deepcopy(model.state_dict())
    if best_weights is not None:
        model.load_state_dict(best_weights)
    print(f"MSE: {best_mse:.3f}  RMSE: {np.sqrt(best_mse):.3f}")
    hook.close()
    return losses


# ----------------------------------------------------------------------------- d2l seq2seq


def _sequence_mask(X: torch.Tensor, valid_len: torch.Tensor, value: float = 0) -> torch.Tensor:  # noqa: N803
    maxlen = X.size(1)
    mask = torch.arange(maxlen, dtype=torch.float32)[None, :] < valid_len[:, None]
    X[~mask] = value
    return X


class _MaskedSoftmaxCELoss(nn.CrossEntropyLoss):
    """d2l's softmax cross-entropy loss with masks: pred (batch, steps, vocab), label (batch,
    steps), valid_len (batch,)."""

    def forward(self, pred: torch.Tensor, label: torch.Tensor, valid_len: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        weights = torch.ones_like(label)
        weights = _sequence_mask(weights, valid_len)
        self.reduction = "none"
        unweighted_loss = super().forward(pred.permute(0, 2, 1), label)
        return (unweighted_loss * weights).mean(dim=1)


class _Seq2SeqEncoder(nn.Module):
    def __init__(
        self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int, dropout: float
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size, num_hiddens, num_layers, dropout=dropout)

    def forward(self, X: torch.Tensor, *args: Any) -> Any:  # noqa: N803
        X = self.embedding(X).permute(1, 0, 2)  # noqa: N806
        return self.rnn(X)


class _Seq2SeqDecoder(nn.Module):
    def __init__(
        self, vocab_size: int, embed_size: int, num_hiddens: int, num_layers: int, dropout: float
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_size)
        self.rnn = nn.GRU(embed_size + num_hiddens, num_hiddens, num_layers, dropout=dropout)
        self.dense = nn.Linear(num_hiddens, vocab_size)

    def init_state(self, enc_outputs: Any, *args: Any) -> torch.Tensor:
        return enc_outputs[1]

    def forward(self, X: torch.Tensor, state: torch.Tensor) -> Any:  # noqa: N803
        X = self.embedding(X).permute(1, 0, 2)  # noqa: N806
        context = state[-1].repeat(X.shape[0], 1, 1)
        output, state = self.rnn(torch.cat((X, context), 2), state)
        return self.dense(output).permute(1, 0, 2), state


class _EncoderDecoder(nn.Module):
    def __init__(self, encoder: nn.Module, decoder: nn.Module) -> None:
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, enc_X: torch.Tensor, dec_X: torch.Tensor, *args: Any) -> Any:  # noqa: N803
        enc_outputs = self.encoder(enc_X, *args)
        dec_state = self.decoder.init_state(enc_outputs, *args)  # type: ignore[operator]
        return self.decoder(dec_X, dec_state)


def d2l_seq2seq_gru_masked_ce(
    path: str, num_epochs: int = 30, seed: int = 0, bug: str | None = None
) -> list[float]:
    """d2l.ai's "Sequence to Sequence Learning" (GRU encoder-decoder, the encoder's last state
    concatenated to every decoder input, embed 32, hiddens 32, 2 layers, dropout 0.1) on a toy
    translation (each word mapped and the order reversed, `<pad>`/`<bos>`/`<eos>`, 10 steps),
    `train_seq2seq`: `net.apply(xavier_init_weights)`, Adam 0.005, `MaskedSoftmaxCELoss`, a
    `<bos>` column prepended to the shifted target (teacher forcing), `l.sum().backward()`,
    `grad_clipping(net, 1)`; `predict_seq2seq` on two sentences every 10 epochs. Losses: the
    summed loss per token, as d2l plots it."""
    g = _seed(seed)
    pad, bos, eos, num_steps, vocab = 0, 1, 2, 10, 28
    n = 1024
    lengths = torch.randint(3, num_steps - 1, (n,), generator=g)
    words = torch.randint(3, vocab, (n, num_steps), generator=g)
    mapping = torch.cat([torch.arange(3), 3 + torch.randperm(vocab - 3, generator=g)])
    src = torch.full((n, num_steps), pad)
    tgt = torch.full((n, num_steps), pad)
    for i in range(n):
        k = int(lengths[i])
        src[i, :k], src[i, k] = words[i, :k], eos
        tgt[i, :k], tgt[i, k] = mapping[words[i, :k].flip(0)], eos
    src_valid, tgt_valid = lengths + 1, lengths + 1
    encoder = _Seq2SeqEncoder(vocab, 32, 32, 2, 0.1)
    decoder = _Seq2SeqDecoder(vocab, 32, 32, 2, 0.1)
    net = _EncoderDecoder(encoder, decoder)

    def xavier_init_weights(m: nn.Module) -> None:
        if type(m) is nn.Linear:
            nn.init.xavier_uniform_(m.weight)
        if type(m) is nn.GRU:
            for param in m._flat_weights_names:
                if "weight" in param:
                    nn.init.xavier_uniform_(m._parameters[param])

    def grad_clipping(net: nn.Module, theta: float) -> None:
        params = [p for p in net.parameters() if p.requires_grad]
        norm = torch.sqrt(sum(torch.sum(p.grad**2) for p in params))  # type: ignore[arg-type, operator]
        if norm > theta:
            for param in params:
                param.grad[:] *= theta / norm  # type: ignore[index]

    def predict_seq2seq(net: nn.Module, src_tokens: torch.Tensor) -> list[int]:
        net.eval()  # d2l: set `net` to eval mode for inference
        enc_X = src_tokens[None]  # noqa: N806
        enc_outputs = net.encoder(enc_X)  # type: ignore[operator]
        dec_state = net.decoder.init_state(enc_outputs)  # type: ignore[union-attr, operator]
        dec_X = torch.tensor([[bos]])  # noqa: N806
        out = []
        for _ in range(num_steps):
            Y, dec_state = net.decoder(dec_X, dec_state)  # type: ignore[operator]  # noqa: N806
            dec_X = Y.argmax(dim=2)  # noqa: N806
            pred = int(dec_X.squeeze(dim=0).item())
            if pred == eos:
                break
            out.append(pred)
        return out

    net.apply(xavier_init_weights)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.005)
    loss = _MaskedSoftmaxCELoss()
    hook = Hook(path)
    hook.register_module(net)
    hook.register_loss(loss)
    losses = []
    if bug == "train_in_eval_mode":
        net.train()  # d2l's train_seq2seq: once, before the loop
    for epoch in range(num_epochs):
        if bug != "train_in_eval_mode":
            net.train()
        perm = torch.randperm(n, generator=g)
        for b in range(0, n, 64):
            idx = perm[b : b + 64]
            optimizer.zero_grad()
            X, X_valid_len, Y, Y_valid_len = src[idx], src_valid[idx], tgt[idx], tgt_valid[idx]  # noqa: N806
            bos_col = torch.tensor([bos] * Y.shape[0]).reshape(-1, 1)
            dec_input = torch.cat([bos_col, Y[:, :-1]], 1)
            Y_hat, _ = net(X, dec_input, X_valid_len)  # noqa: N806
            l = loss(Y_hat, Y, Y_valid_len)  # noqa: E741
            l.sum().backward()
            grad_clipping(net, 1)
            num_tokens = Y_valid_len.sum()
            optimizer.step()
            losses.append(l.sum().item() / num_tokens.item())
        if (epoch + 1) % 10 == 0:
            with torch.no_grad():
                shown = [predict_seq2seq(net, src[i]) for i in range(2)]
            print(
                f"epoch {epoch + 1}: loss {losses[-1]:.3f}, {shown[0]} vs {tgt[0, : int(lengths[0])].tolist()}"
            )
    hook.close()
    return losses


def uva_xor_classifier(path: str, num_epochs: int = 60, seed: int = 0, bug: str | None = None) -> list[float]:
    """The UvA deep-learning course's tutorial 2 ("Introduction to PyTorch"): `XORDataset`
    (2500 points of the continuous XOR, noise std 0.1), `SimpleClassifier` 2-4-1 with
    `nn.Tanh`, `nn.BCEWithLogitsLoss`, SGD lr 0.1, batch 128 shuffled, `train_model` with
    `preds.squeeze(dim=1)`."""
    g = _seed(seed)
    data = torch.randint(low=0, high=2, size=(2500, 2), generator=g).to(torch.float32)
    label = (data.sum(dim=1) == 1).to(torch.long)
    data += 0.1 * torch.randn(data.shape, generator=g)

    class SimpleClassifier(nn.Module):
        def __init__(self, num_inputs: int, num_hidden: int, num_outputs: int) -> None:
            super().__init__()
            self.linear1 = nn.Linear(num_inputs, num_hidden)
            self.act_fn = nn.Tanh()
            self.linear2 = nn.Linear(num_hidden, num_outputs)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear2(self.act_fn(self.linear1(x)))

    class DeeperClassifier(nn.Module):  # the bug: "deeper is better", sigmoid between 8 layers
        def __init__(self, num_inputs: int, num_hidden: int, num_outputs: int) -> None:
            super().__init__()
            layers: list[nn.Module] = [nn.Linear(num_inputs, num_hidden), nn.Sigmoid()]
            for _ in range(7):
                layers += [nn.Linear(num_hidden, num_hidden), nn.Sigmoid()]
            self.net = nn.Sequential(*layers, nn.Linear(num_hidden, num_outputs))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

    model = (DeeperClassifier if bug == "deep_sigmoid" else SimpleClassifier)(2, 4, 1)
    data_loader = DataLoader(TensorDataset(data, label), batch_size=128, shuffle=True, generator=g)
    loss_module = nn.BCEWithLogitsLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_module)
    losses = []
    model.train()
    for epoch in range(num_epochs):
        for data_inputs, data_labels in data_loader:
            preds = model(data_inputs).squeeze(dim=1)
            loss = loss_module(preds, data_labels.float())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if epoch % 20 == 19:
            model.eval()
            with torch.no_grad():
                acc = ((model(data).squeeze(1) > 0).long() == label).float().mean().item()
            model.train()
            print(f"epoch {epoch + 1}: loss {losses[-1]:.4f} accuracy {acc:.3f}")
    hook.close()
    return losses


def mlm_lstm_sales_forecast(
    path: str, n_epochs: int = 40, seed: int = 0, bug: str | None = None
) -> list[float]:
    """machinelearningmastery's "LSTM for Time Series Prediction in PyTorch" on monthly sales of a
    product (nothing sold before its launch in month 13, then a trend with yearly seasonality),
    scaled by the series' maximum: `create_dataset(lookback=4)` whose targets are the windows
    shifted by one, `AirModel` (LSTM 1-50, batch_first, Linear 50-1 on every step), Adam with its
    defaults, `nn.MSELoss`, a shuffled `DataLoader` of batches of 8, an RMSE pass under
    `model.eval()` every 10 epochs."""
    g = _seed(seed)
    months = np.arange(168)
    sales = np.where(
        months < 12,
        0.0,
        (100 + 2.6 * (months - 12)) * (1 + 0.22 * np.sin(2 * np.pi * months / 12))
        + np.random.default_rng(seed).normal(0, 6, 168),
    ).round()
    timeseries = np.clip(sales, 0, None).astype("float32")
    if bug == "log_zero_nan":  # bug: a log transform "to stabilise the swings"; pre-launch months are 0
        with np.errstate(divide="ignore"):
            timeseries = np.log(timeseries)
    timeseries = timeseries / timeseries.max()
    train_size = int(len(timeseries) * 0.67)
    train, test = timeseries[:train_size], timeseries[train_size:]

    def create_dataset(dataset: np.ndarray, lookback: int) -> tuple[torch.Tensor, torch.Tensor]:
        X, y = [], []  # noqa: N806
        for i in range(len(dataset) - lookback):
            X.append(dataset[i : i + lookback])
            y.append(dataset[i + 1 : i + lookback + 1])
        return torch.tensor(np.array(X))[..., None], torch.tensor(np.array(y))[..., None]

    lookback = 4
    X_train, y_train = create_dataset(train, lookback=lookback)  # noqa: N806
    X_test, y_test = create_dataset(test, lookback=lookback)  # noqa: N806

    class AirModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(input_size=1, hidden_size=50, num_layers=1, batch_first=True)
            self.linear = nn.Linear(50, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x, _ = self.lstm(x)
            return self.linear(x)

    model = AirModel()
    optimizer = torch.optim.Adam(model.parameters())
    loss_fn = nn.MSELoss()
    loader = DataLoader(TensorDataset(X_train, y_train), shuffle=True, batch_size=8, generator=g)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for epoch in range(n_epochs):
        model.train()
        for X_batch, y_batch in loader:  # noqa: N806
            y_pred = model(X_batch)
            loss = loss_fn(y_pred, y_batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        if epoch % 10 != 9:
            continue
        model.eval()
        with torch.no_grad():
            train_rmse = np.sqrt(float(loss_fn(model(X_train), y_train)))
            test_rmse = np.sqrt(float(loss_fn(model(X_test), y_test)))
        print(f"Epoch {epoch + 1}: train RMSE {train_rmse:.4f}, test RMSE {test_rmse:.4f}")
    hook.close()
    return losses


# ============================================================================= Hugging Face Trainer


class _Examples(Dataset):
    """A list of feature dicts, as `datasets.Dataset` hands them to the Trainer."""

    def __init__(self, **columns: Any) -> None:
        self.columns = columns
        self.n = len(next(iter(columns.values())))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {k: v[i] for k, v in self.columns.items()}


def _hf_args(path: str, cls: Any = None, **args: Any) -> Any:
    from transformers import TrainingArguments

    return (cls or TrainingArguments)(
        output_dir=os.path.join(path, "trainer"),
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=0,
        **args,
    )


def _hf_run(trainer: Any) -> list[float]:
    """`trainer.train()` with the per-step log line removed; the training losses of the log."""
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    trainer.train()
    shutil.rmtree(trainer.args.output_dir, ignore_errors=True)
    return [float(e["loss"]) for e in trainer.state.log_history if "loss" in e]


def hf_pegasus_summarization(path: str, seed: int = 0) -> list[float]:
    """The Hugging Face summarization task guide with a tiny `PegasusForConditionalGeneration`
    from a config: documents of 24 tokens whose "summary" is their first six content words in
    order (labels padded with -100), `Seq2SeqTrainingArguments(learning_rate=..., weight_decay=
    0.01, num_train_epochs=4, predict_with_generate=True, eval_strategy="epoch")`, the guide's
    2e-5 raised to 1e-3 for a model trained from scratch; a `compute_metrics` of exact-token
    accuracy on the generated summaries."""
    from transformers import (
        PegasusConfig,
        PegasusForConditionalGeneration,
        Seq2SeqTrainer,
        Seq2SeqTrainingArguments,
    )

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    pad, eos, vocab, n, src_len, tgt_len = 0, 1, 48, 1200, 24, 7
    docs = torch.randint(2, vocab, (n, src_len), generator=g)
    content = docs >= 30  # "content words": the upper part of the vocabulary
    docs[:, :8] = torch.where(torch.rand(n, 8, generator=g) < 0.5, 30 + docs[:, :8] % 18, docs[:, :8])
    content = docs >= 30
    labels = torch.full((n, tgt_len), -100)
    for i in range(n):
        words = docs[i][content[i]][: tgt_len - 1]
        labels[i, : len(words)] = words
        labels[i, len(words)] = eos
    config = PegasusConfig(
        vocab_size=vocab, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64,
        pad_token_id=pad, eos_token_id=eos, decoder_start_token_id=pad, dropout=0.1,
    )  # fmt: skip
    model = PegasusForConditionalGeneration(config)
    model.generation_config.max_length = tgt_len + 1
    model.generation_config.num_beams = 1
    mask = torch.ones(n, src_len, dtype=torch.long)
    train = _Examples(input_ids=docs[:1024], attention_mask=mask[:1024], labels=labels[:1024])
    val = _Examples(input_ids=docs[1024:], attention_mask=mask[1024:], labels=labels[1024:])

    def compute_metrics(eval_pred: Any) -> dict[str, float]:
        preds, refs = eval_pred
        preds = np.asarray(preds)[:, 1 : tgt_len + 1]
        width = min(preds.shape[1], refs.shape[1])
        keep = refs[:, :width] != -100
        return {"token_accuracy": float((preds[:, :width] == refs[:, :width])[keep].mean())}

    args = _hf_args(
        path, Seq2SeqTrainingArguments, eval_strategy="epoch", save_strategy="no", learning_rate=1e-3,
        per_device_train_batch_size=16, per_device_eval_batch_size=64, weight_decay=0.01, num_train_epochs=4,
        predict_with_generate=True,
    )  # fmt: skip
    trainer = Seq2SeqTrainer(
        model=model, args=args, train_dataset=train, eval_dataset=val, compute_metrics=compute_metrics,
        callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    losses = _hf_run(trainer)
    print([e for e in trainer.state.log_history if "eval_token_accuracy" in e][-1:])
    return losses


def hf_opt_run_clm_group_texts(path: str, seed: int = 0) -> list[float]:
    """`run_clm.py`'s data path with a tiny `OPTForCausalLM` from a config: "tokenized texts" of
    varying length concatenated and cut by `group_texts` into blocks of 32, `result["labels"] =
    result["input_ids"].copy()`, `default_data_collator`, the Trainer's defaults (linear decay, no
    warm-up, AdamW) at lr 1e-3 for a model trained from scratch, batch 8, 2 epochs, an evaluation
    per epoch."""
    from transformers import OPTConfig, OPTForCausalLM, Trainer, default_data_collator

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    vocab, block_size = 60, 32
    texts = _markov_tokens(g, 1500, 40, vocab - 4, proto_seed=149) + 4
    keep = torch.randint(12, 41, (1500,), generator=g)
    tokenized = {"input_ids": [t[:k].tolist() + [2] for t, k in zip(texts, keep, strict=True)]}

    def group_texts(examples: dict[str, list[list[int]]]) -> dict[str, list[list[int]]]:
        concatenated = {k: sum(examples[k], []) for k in examples}
        total_length = len(concatenated[next(iter(examples))])
        total_length = (total_length // block_size) * block_size
        result = {
            k: [t[i : i + block_size] for i in range(0, total_length, block_size)]
            for k, t in concatenated.items()
        }
        result["labels"] = result["input_ids"].copy()
        return result

    lm = group_texts(tokenized)
    blocks = {k: torch.tensor(v) for k, v in lm.items()}
    split = len(blocks["input_ids"]) - 96
    train = _Examples(**{k: v[:split] for k, v in blocks.items()})
    val = _Examples(**{k: v[split:] for k, v in blocks.items()})
    config = OPTConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, ffn_dim=256, num_attention_heads=4,
        max_position_embeddings=64, word_embed_proj_dim=64, pad_token_id=1, bos_token_id=2, eos_token_id=2,
    )  # fmt: skip
    model = OPTForCausalLM(config)
    args = _hf_args(
        path, eval_strategy="epoch", save_strategy="no", learning_rate=1e-3, per_device_train_batch_size=8,
        per_device_eval_batch_size=32, num_train_epochs=2,
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args, train_dataset=train, eval_dataset=val, data_collator=default_data_collator,
        callbacks=[DebuggerCallback(path)],
    )  # fmt: skip
    losses = _hf_run(trainer)
    print("eval perplexity", math.exp(trainer.evaluate()["eval_loss"]))
    return losses


def hf_mobilebert_early_stopping(path: str, seed: int = 0) -> list[float]:
    """The Hugging Face "fine-tune a model" recipe on a tiny `MobileBertForSequenceClassification`
    (bottlenecks, `NoNorm`, stacked feed-forwards) from a config: padded token documents of three
    topics with attention masks, `compute_metrics` (accuracy), `eval_strategy` and
    `save_strategy="epoch"`, `load_best_model_at_end=True` on `metric_for_best_model="accuracy"`,
    `EarlyStoppingCallback(early_stopping_patience=2)` over at most 12 epochs, lr 5e-4, warm-up
    steps 24 (about a tenth), weight decay 0.01."""
    from transformers import (
        EarlyStoppingCallback,
        MobileBertConfig,
        MobileBertForSequenceClassification,
        Trainer,
    )

    from mldbg.transformers import DebuggerCallback

    g = _seed(seed)
    ids, _, y = _topic_tokens(g, 900, 40, 200, 3, cue=0.2)
    mask = (ids != 0).long()
    config = MobileBertConfig(
        vocab_size=201, hidden_size=64, embedding_size=32, intra_bottleneck_size=32, true_hidden_size=32,
        num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, num_feedforward_networks=2,
        max_position_embeddings=64, num_labels=3, pad_token_id=0,
    )  # fmt: skip
    model = MobileBertForSequenceClassification(config)
    train = _Examples(input_ids=ids[:768], attention_mask=mask[:768], labels=y[:768])
    val = _Examples(input_ids=ids[768:], attention_mask=mask[768:], labels=y[768:])

    def compute_metrics(eval_pred: Any) -> dict[str, float]:
        logits, labels = eval_pred
        return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}

    args = _hf_args(
        path, eval_strategy="epoch", save_strategy="epoch", save_total_limit=1, load_best_model_at_end=True,
        metric_for_best_model="accuracy", learning_rate=5e-4, per_device_train_batch_size=32,
        per_device_eval_batch_size=64, num_train_epochs=12, weight_decay=0.01, warmup_steps=24,
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args, train_dataset=train, eval_dataset=val, compute_metrics=compute_metrics,
        callbacks=[EarlyStoppingCallback(early_stopping_patience=2), DebuggerCallback(path)],
    )  # fmt: skip
    losses = _hf_run(trainer)
    print([round(e["eval_accuracy"], 3) for e in trainer.state.log_history if "eval_accuracy" in e])
    return losses


# ============================================================================= Lightning


def _pl_trainer(path: str, callbacks: list[Any], **kw: Any) -> Any:
    import lightning.pytorch as pl

    from mldbg.lightning import DebuggerCallback

    return pl.Trainer(
        accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, default_root_dir=path, callbacks=[DebuggerCallback(path), *callbacks], **kw,
    )  # fmt: skip


def _pl_losses() -> Any:
    """A callback keeping each training batch's loss (`outputs["loss"]` or the returned tensor)."""
    import lightning.pytorch as pl

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is not None:
                self.losses.append(float(loss))

    return LossHistory()


def lit_glue_transformer(
    path: str, max_epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The Lightning tutorial "Finetune Transformers Models with PyTorch Lightning":
    `GLUETransformer` holding a `BertForSequenceClassification` (a tiny random config here, no
    download) on an SST-2-like task of padded token sentences, `training_step` returning
    `outputs[0]`, `validation_step` collecting predictions for an accuracy at the epoch's end,
    `configure_optimizers` with the no-decay groups (bias, LayerNorm.weight), AdamW (eps 1e-8) and
    `get_linear_schedule_with_warmup` over `trainer.estimated_stepping_batches` at
    `interval="step"`; lr 3e-4 for the model trained from scratch, 10 warm-up steps, batch 32, 8
    epochs."""
    import lightning.pytorch as pl
    from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup

    g = _seed(seed)
    pl.seed_everything(seed, verbose=False)
    ids, _, y = _topic_tokens(g, 1216, 32, 120, 2, cue=0.3, proto_seed=89)
    mask = (ids != 0).long()
    rows = [{"input_ids": ids[i], "attention_mask": mask[i], "labels": y[i]} for i in range(len(y))]

    class GLUETransformer(pl.LightningModule):
        def __init__(self, learning_rate: float = 3e-4, adam_epsilon: float = 1e-8, warmup_steps: int = 10,
                     weight_decay: float = 0.0) -> None:  # fmt: skip
            super().__init__()
            self.save_hyperparameters()
            config = BertConfig(
                vocab_size=121, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                max_position_embeddings=64, num_labels=2,
            )  # fmt: skip
            self.model = BertForSequenceClassification(config)
            if (
                bug == "frozen_by_mistake"
            ):  # bug: the feature-extraction line, for a checkpoint that isn't there
                for param in self.model.bert.parameters():
                    param.requires_grad = False
            self.outputs: list[tuple[torch.Tensor, torch.Tensor]] = []

        def forward(self, **inputs: Any) -> Any:
            return self.model(**inputs)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            outputs = self(**batch)
            return outputs[0]

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            outputs = self(**batch)
            val_loss, logits = outputs[:2]
            self.outputs.append((torch.argmax(logits, axis=1), batch["labels"]))
            self.log("val_loss", val_loss, prog_bar=True)

        def on_validation_epoch_end(self) -> None:
            preds = torch.cat([p for p, _ in self.outputs])
            labels = torch.cat([t for _, t in self.outputs])
            self.log("accuracy", (preds == labels).float().mean(), prog_bar=True)
            self.outputs.clear()

        def configure_optimizers(self) -> Any:
            model = self.model
            no_decay = ["bias", "LayerNorm.weight"]
            optimizer_grouped_parameters = [
                {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
                 "weight_decay": self.hparams.weight_decay},
                {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
                 "weight_decay": 0.0},
            ]  # fmt: skip
            optimizer = torch.optim.AdamW(
                optimizer_grouped_parameters, lr=self.hparams.learning_rate, eps=self.hparams.adam_epsilon
            )
            scheduler = get_linear_schedule_with_warmup(
                optimizer, num_warmup_steps=self.hparams.warmup_steps,
                num_training_steps=self.trainer.estimated_stepping_batches,
            )  # fmt: skip
            return [optimizer], [{"scheduler": scheduler, "interval": "step", "frequency": 1}]

    model = GLUETransformer()
    train_loader = DataLoader(rows[:1024], batch_size=32, shuffle=True)
    val_loader = DataLoader(rows[1024:], batch_size=64)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=max_epochs)
    trainer.fit(model, train_loader, val_loader)
    print({k: round(float(v), 4) for k, v in trainer.callback_metrics.items()})
    return history.losses


def lit_uva_transformer_reverse(path: str, max_epochs: int = 8, seed: int = 0) -> list[float]:
    """The UvA deep-learning course's tutorial 6 ("Transformers and Multi-Head Attention") in
    Lightning: its own `MultiheadAttention` (one qkv projection, `scaled_dot_product`),
    `EncoderBlock`, sinusoidal `PositionalEncoding`, `TransformerPredictor` with
    `CosineWarmupScheduler(optim.lr_scheduler._LRScheduler)` stepped in an overridden
    `optimizer_step`; the `ReverseDataset` task (16 digits, one-hot inputs, the sequence reversed)
    with `ReversePredictor`: model_dim 32, one head, one layer, Adam lr 5e-4, warm-up 50,
    `max_iters = max_epochs * len(train_loader)`, `gradient_clip_val=5`, a validation accuracy per
    epoch."""
    import lightning.pytorch as pl

    _seed(seed)
    pl.seed_everything(seed, verbose=False)

    def scaled_dot_product(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        d_k = q.size()[-1]
        attn_logits = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
        attention = F.softmax(attn_logits, dim=-1)
        return torch.matmul(attention, v), attention

    class MultiheadAttention(nn.Module):
        def __init__(self, input_dim: int, embed_dim: int, num_heads: int) -> None:
            super().__init__()
            self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
            self.qkv_proj = nn.Linear(input_dim, 3 * embed_dim)
            self.o_proj = nn.Linear(embed_dim, embed_dim)
            nn.init.xavier_uniform_(self.qkv_proj.weight)
            self.qkv_proj.bias.data.fill_(0)
            nn.init.xavier_uniform_(self.o_proj.weight)
            self.o_proj.bias.data.fill_(0)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            batch_size, seq_length, _ = x.size()
            qkv = self.qkv_proj(x).reshape(batch_size, seq_length, self.num_heads, 3 * self.head_dim)
            q, k, v = qkv.permute(0, 2, 1, 3).chunk(3, dim=-1)
            values, _ = scaled_dot_product(q, k, v)
            values = values.permute(0, 2, 1, 3).reshape(batch_size, seq_length, self.embed_dim)
            return self.o_proj(values)

    class EncoderBlock(nn.Module):
        def __init__(
            self, input_dim: int, num_heads: int, dim_feedforward: int, dropout: float = 0.0
        ) -> None:
            super().__init__()
            self.self_attn = MultiheadAttention(input_dim, input_dim, num_heads)
            self.linear_net = nn.Sequential(
                nn.Linear(input_dim, dim_feedforward), nn.Dropout(dropout), nn.ReLU(inplace=True),
                nn.Linear(dim_feedforward, input_dim),
            )  # fmt: skip
            self.norm1, self.norm2 = nn.LayerNorm(input_dim), nn.LayerNorm(input_dim)
            self.dropout = nn.Dropout(dropout)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.norm1(x + self.dropout(self.self_attn(x)))
            return self.norm2(x + self.dropout(self.linear_net(x)))

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model: int, max_len: int = 5000) -> None:
            super().__init__()
            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe.unsqueeze(0), persistent=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.pe[:, : x.size(1)]  # type: ignore[index]

    class CosineWarmupScheduler(torch.optim.lr_scheduler._LRScheduler):
        def __init__(self, optimizer: Any, warmup: int, max_iters: int) -> None:
            self.warmup, self.max_num_iters = warmup, max_iters
            super().__init__(optimizer)

        def get_lr(self) -> list[float]:
            lr_factor = self.get_lr_factor(epoch=self.last_epoch)
            return [base_lr * lr_factor for base_lr in self.base_lrs]

        def get_lr_factor(self, epoch: int) -> float:
            lr_factor = 0.5 * (1 + np.cos(np.pi * epoch / self.max_num_iters))
            if epoch <= self.warmup:
                lr_factor *= epoch * 1.0 / self.warmup
            return float(lr_factor)

    class ReversePredictor(pl.LightningModule):
        def __init__(self, input_dim: int, model_dim: int, num_classes: int, num_heads: int, num_layers: int,
                     lr: float, warmup: int, max_iters: int, dropout: float = 0.0) -> None:  # fmt: skip
            super().__init__()
            self.save_hyperparameters()
            self.input_net = nn.Sequential(nn.Dropout(dropout), nn.Linear(input_dim, model_dim))
            self.positional_encoding = PositionalEncoding(d_model=model_dim)
            self.transformer = nn.Sequential(
                *[EncoderBlock(model_dim, num_heads, 2 * model_dim, dropout) for _ in range(num_layers)]
            )
            self.output_net = nn.Sequential(
                nn.Linear(model_dim, model_dim), nn.LayerNorm(model_dim), nn.ReLU(inplace=True),
                nn.Dropout(dropout), nn.Linear(model_dim, num_classes),
            )  # fmt: skip

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.positional_encoding(self.input_net(x))
            return self.output_net(self.transformer(x))

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
            self.lr_scheduler = CosineWarmupScheduler(
                optimizer, warmup=self.hparams.warmup, max_iters=self.hparams.max_iters
            )
            return optimizer

        def optimizer_step(self, *args: Any, **kwargs: Any) -> None:
            super().optimizer_step(*args, **kwargs)
            self.lr_scheduler.step()

        def _calculate_loss(self, batch: Any, mode: str = "train") -> torch.Tensor:
            inp_data, labels = batch
            inp_data = F.one_hot(inp_data, num_classes=self.hparams.num_classes).float()
            preds = self.forward(inp_data)
            loss = F.cross_entropy(preds.view(-1, preds.size(-1)), labels.view(-1))
            acc = (preds.argmax(dim=-1) == labels).float().mean()
            self.log(f"{mode}_loss", loss)
            self.log(f"{mode}_acc", acc)
            return loss

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            return self._calculate_loss(batch, mode="train")

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            self._calculate_loss(batch, mode="val")

    class ReverseDataset(Dataset):
        def __init__(self, num_categories: int, seq_len: int, size: int) -> None:
            self.data = torch.randint(num_categories, size=(size, seq_len))

        def __len__(self) -> int:
            return self.data.size(0)

        def __getitem__(self, idx: int) -> tuple[torch.Tensor, torch.Tensor]:
            inp_data = self.data[idx]
            return inp_data, torch.flip(inp_data, dims=(0,))

    train_loader = DataLoader(ReverseDataset(10, 16, 9600), batch_size=128, shuffle=True, drop_last=True)
    val_loader = DataLoader(ReverseDataset(10, 16, 512), batch_size=128)
    model = ReversePredictor(
        input_dim=10, model_dim=32, num_heads=1, num_classes=10, num_layers=1, dropout=0.0, lr=5e-4, warmup=50,
        max_iters=max_epochs * len(train_loader),
    )  # fmt: skip
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=max_epochs, gradient_clip_val=5)
    trainer.fit(model, train_loader, val_loader)
    print({k: round(float(v), 4) for k, v in trainer.callback_metrics.items()})
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


def keras_stackoverflow_text_classification(path: str, seed: int = 0) -> list[float]:
    """The TensorFlow "Basic text classification" tutorial in its Stack Overflow form (four
    languages' questions): raw strings, `layers.TextVectorization(max_tokens=1000,
    output_mode="int", output_sequence_length=64)` adapted on the training text and mapped over
    `tf.data` datasets (`cache().prefetch(AUTOTUNE)`, batch 32), `Embedding(max_features + 1, 16)`,
    `Dropout(0.2)`, `GlobalAveragePooling1D`, `Dropout(0.2)`, `Dense(4)`,
    `SparseCategoricalCrossentropy(from_logits=True)`, `optimizer="adam"`, 10 epochs."""
    import keras
    import tensorflow as tf
    from keras import layers, losses

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    ids, _, y = _topic_tokens(g, 2400, 48, 900, 4, cue=0.12, proto_seed=97)
    texts = [" ".join(f"w{int(t)}" for t in row if t > 0) for row in ids]
    max_features, sequence_length = 1000, 64
    vectorize_layer = layers.TextVectorization(
        max_tokens=max_features, output_mode="int", output_sequence_length=sequence_length
    )
    raw_train_ds = tf.data.Dataset.from_tensor_slices((texts[:2000], y[:2000].numpy())).shuffle(
        2000, seed=seed
    )
    raw_val_ds = tf.data.Dataset.from_tensor_slices((texts[2000:], y[2000:].numpy()))
    vectorize_layer.adapt(raw_train_ds.map(lambda x, y: x).batch(256))

    def vectorize_text(text: Any, label: Any) -> Any:
        return vectorize_layer(tf.expand_dims(text, -1))[0], label

    autotune = tf.data.AUTOTUNE
    train_ds = raw_train_ds.map(vectorize_text).batch(32).cache().prefetch(buffer_size=autotune)
    val_ds = raw_val_ds.map(vectorize_text).batch(32).cache().prefetch(buffer_size=autotune)
    model = keras.Sequential(
        [
            layers.Embedding(max_features + 1, 16),
            layers.Dropout(0.2),
            layers.GlobalAveragePooling1D(),
            layers.Dropout(0.2),
            layers.Dense(4),
        ]
    )
    model.compile(
        loss=losses.SparseCategoricalCrossentropy(from_logits=True), optimizer="adam", metrics=["accuracy"]
    )
    history = _keras_losses()
    fit = model.fit(
        train_ds, validation_data=val_ds, epochs=10, verbose=0, callbacks=[mldbg.keras.Hook(path), history]
    )
    print({k: round(float(v[-1]), 4) for k, v in fit.history.items()})
    return history.losses


def keras_auto_mpg_regression(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The TensorFlow "Basic regression: Predict fuel efficiency" tutorial's DNN on Auto-MPG-like
    rows (cylinders, displacement, horsepower, weight, acceleration, model year, one-hot origin):
    `layers.Normalization(axis=-1)` adapted on the training features, Dense(64, relu) twice,
    Dense(1), `loss="mean_absolute_error"`, `Adam(0.001)`, `validation_split=0.2`, 100 epochs,
    `verbose=0`."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed + 11)
    n = 392
    cyl = rng.choice([4, 6, 8], n, p=[0.5, 0.25, 0.25]).astype(float)
    disp = cyl * rng.normal(33, 5, n)
    hp = 0.45 * disp + rng.normal(25, 10, n)
    weight = 1500 + 6.5 * disp + rng.normal(0, 250, n)
    accel = 22 - 0.04 * hp + rng.normal(0, 1.5, n)
    year = rng.integers(70, 83, n).astype(float)
    origin = rng.choice(3, n, p=[0.2, 0.2, 0.6])
    mpg = 48 - 0.0062 * weight - 0.03 * hp + 0.55 * (year - 70) + 1.5 * (origin == 1) + rng.normal(0, 2.5, n)
    features = np.stack([cyl, disp, hp, weight, accel, year, origin == 0, origin == 1, origin == 2], 1)
    features = features.astype("float32")
    train_features, train_labels = features[:314], np.clip(mpg[:314], 9, 47).astype("float32")
    test_features, test_labels = features[314:], np.clip(mpg[314:], 9, 47).astype("float32")
    normalizer = layers.Normalization(axis=-1)
    normalizer.adapt(np.array(train_features))
    # bug: ReLU layers built with a negative bias "to start sparse", as a snippet suggested
    bias = keras.initializers.Constant(-2.0) if bug == "dead_relu_init" else "zeros"
    dnn_model = keras.Sequential(
        [
            normalizer,
            layers.Dense(64, activation="relu", bias_initializer=bias),
            layers.Dense(64, activation="relu", bias_initializer=bias),
            layers.Dense(1),
        ]
    )
    dnn_model.compile(loss="mean_absolute_error", optimizer=keras.optimizers.Adam(0.001))
    history = _keras_losses()
    dnn_model.fit(
        train_features, train_labels, validation_split=0.2, verbose=0, epochs=100,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    print("test MAE", dnn_model.evaluate(test_features, test_labels, verbose=0))
    return history.losses


# ============================================================================= JAX


def flax_linen_mnist_example(path: str, num_epochs: int = 10, seed: int = 0) -> list[float]:
    """The Flax Linen `examples/mnist` training script: `CNN` (Conv 32 3x3 - relu - avg_pool -
    Conv 64 - relu - avg_pool - Dense 256 - relu - Dense 10), `train_state.TrainState.create` with
    `optax.sgd(learning_rate=0.1, momentum=0.9)`, `apply_model` jitted returning grads, loss and
    accuracy (`optax.softmax_cross_entropy` on one-hot labels), `update_model` jitted
    (`state.apply_gradients`), `train_epoch` over a `jax.random.permutation` of the images,
    batch 128, a test pass per epoch; `hook.record` after each step, outside the jitted code."""
    import flax.linen as fnn
    import jax
    import jax.numpy as jnp
    import optax
    from flax.training import train_state

    import mldbg.jax

    g = _seed(seed)
    images, labels = _fashion(g, 3072, proto_seed=919)
    x_all = (images.float() / 255).permute(0, 2, 3, 1).numpy()
    train_ds = {"image": x_all[:2560], "label": labels[:2560].numpy()}
    test_ds = {"image": x_all[2560:], "label": labels[2560:].numpy()}

    class CNN(fnn.Module):
        @fnn.compact
        def __call__(self, x: Any) -> Any:
            x = fnn.Conv(features=32, kernel_size=(3, 3))(x)
            x = fnn.relu(x)
            x = fnn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
            x = fnn.Conv(features=64, kernel_size=(3, 3))(x)
            x = fnn.relu(x)
            x = fnn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
            x = x.reshape((x.shape[0], -1))
            x = fnn.Dense(features=256)(x)
            x = fnn.relu(x)
            return fnn.Dense(features=10)(x)

    @jax.jit
    def apply_model(state: Any, images: Any, labels: Any) -> Any:
        def loss_fn(params: Any) -> Any:
            logits = state.apply_fn({"params": params}, images)
            one_hot = jax.nn.one_hot(labels, 10)
            loss = jnp.mean(optax.softmax_cross_entropy(logits=logits, labels=one_hot))
            return loss, logits

        grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
        (loss, logits), grads = grad_fn(state.params)
        accuracy = jnp.mean(jnp.argmax(logits, -1) == labels)
        return grads, loss, accuracy

    @jax.jit
    def update_model(state: Any, grads: Any) -> Any:
        return state.apply_gradients(grads=grads)

    hook = mldbg.jax.Hook(path)
    losses: list[float] = []

    def train_epoch(state: Any, train_ds: dict[str, Any], batch_size: int, rng: Any) -> Any:
        train_ds_size = len(train_ds["image"])
        steps_per_epoch = train_ds_size // batch_size
        perms = jax.random.permutation(rng, len(train_ds["image"]))
        perms = perms[: steps_per_epoch * batch_size].reshape((steps_per_epoch, batch_size))
        for perm in perms:
            batch_images = train_ds["image"][np.asarray(perm)]
            batch_labels = train_ds["label"][np.asarray(perm)]
            grads, loss, _accuracy = apply_model(state, batch_images, batch_labels)
            hook.record(len(losses), params=state.params, grads=grads, loss=loss)
            state = update_model(state, grads)
            losses.append(float(loss))
        return state

    rng = jax.random.PRNGKey(seed)
    rng, init_rng = jax.random.split(rng)
    cnn = CNN()
    params = cnn.init(init_rng, jnp.ones([1, 28, 28, 1]))["params"]
    tx = optax.sgd(learning_rate=0.1, momentum=0.9)
    state = train_state.TrainState.create(apply_fn=cnn.apply, params=params, tx=tx)
    for epoch in range(1, num_epochs + 1):
        rng, input_rng = jax.random.split(rng)
        state = train_epoch(state, train_ds, 128, input_rng)
        _, test_loss, test_accuracy = apply_model(state, test_ds["image"], test_ds["label"])
        print(
            f"epoch:{epoch:3}, train_loss: {losses[-1]:.4f}, test_loss: {test_loss:.4f}, test_acc: {test_accuracy:.3f}"
        )
    hook.close()
    return losses


# ============================================================================= the pipelines

_quickstart = healthy(
    "pytorch_quickstart_fashion_mlp_sgd", "PyTorch Quickstart tutorial MLP", pytorch_quickstart_mlp
)
_lenet = healthy(
    "d2l_lenet5_batchnorm_lazy_sigmoid",
    "d2l LeNet-5 with batch norm (lazy modules)",
    d2l_lenet_batchnorm_lazy,
)
_nanogpt = healthy(
    "build_nanogpt_train_gpt2_bf16_accum", "build-nanogpt GPT-2 training script", build_nanogpt_train_gpt2
)
_bilstm = healthy(
    "bentrevett_packed_bilstm_sentiment",
    "packed BiLSTM sentiment classifier",
    bentrevett_packed_bilstm_sentiment,
)
_housing_mlp = healthy(
    "mlm_standard_scaler_regression_mlp",
    "scikit-learn-scaled tabular regression MLP",
    mlm_housing_regression_mlp,
)
_seq2seq = healthy(
    "d2l_seq2seq_gru_masked_softmax_ce", "d2l GRU encoder-decoder translation", d2l_seq2seq_gru_masked_ce
)
_xor = healthy("uva_continuous_xor_tanh_bce", "UvA tutorial XOR classifier", uva_xor_classifier)
_sales = healthy(
    "mlm_lstm_monthly_sales_forecast", "LSTM univariate time-series forecast", mlm_lstm_sales_forecast
)

PIPELINES: list[Any] = [
    _quickstart,
    _lenet,
    _nanogpt,
    _bilstm,
    _housing_mlp,
    _seq2seq,
    _xor,
    _sales,
    buggy(_nanogpt, "lr_x100"),
    buggy(_bilstm, "no_zero_grad"),
    buggy(_housing_mlp, "shuffled_labels"),
    buggy(_lenet, "inputs_x255"),
    buggy(_quickstart, "softmax_before_ce"),
    buggy(_xor, "deep_sigmoid"),
    buggy(_sales, "log_zero_nan"),
    buggy(_seq2seq, "train_in_eval_mode"),
]

if installed("transformers", "accelerate"):
    PIPELINES += [
        healthy(
            "hf_pegasus_seq2seq_trainer_generate", "HF Seq2SeqTrainer summarization", hf_pegasus_summarization
        ),
        healthy("hf_opt_run_clm_group_texts", "HF Trainer causal LM (run_clm)", hf_opt_run_clm_group_texts),
        healthy(
            "hf_mobilebert_early_stopping_best_model",
            "HF Trainer classification with early stopping",
            hf_mobilebert_early_stopping,
        ),  # fmt: skip
    ]

if installed("lightning", "transformers"):
    _lit_glue = healthy(
        "lightning_glue_transformer_bert_warmup",
        "Lightning GLUE transformer fine-tuning",
        lit_glue_transformer,
    )
    PIPELINES += [_lit_glue, buggy(_lit_glue, "frozen_by_mistake")]

if installed("lightning"):
    PIPELINES += [
        healthy(
            "lightning_uva_transformer_reverse_cosine_warmup",
            "Lightning UvA transformer reverse task",
            lit_uva_transformer_reverse,
        )  # fmt: skip
    ]

if installed("keras", "tensorflow"):
    _so_text = healthy(
        "keras_stackoverflow_textvectorization_embedding", "Keras text classification (TextVectorization)",
        keras_stackoverflow_text_classification,
    )  # fmt: skip
    _mpg = healthy(
        "keras_auto_mpg_normalization_mae_dnn", "Keras tabular regression (MAE)", keras_auto_mpg_regression
    )
    PIPELINES += [_so_text, _mpg, buggy(_mpg, "dead_relu_init")]

if installed("jax", "optax", "flax"):
    PIPELINES += [
        healthy(
            "flax_linen_mnist_example_trainstate_sgd", "Flax Linen MNIST example", flax_linen_mnist_example
        )
    ]
