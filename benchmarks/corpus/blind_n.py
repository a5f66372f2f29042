"""A blind held-out set (issue 26), part N: trainings recorded the way each tool's user records
them, of kinds not yet in the corpus. Written without running mldbg's rules on them; each was
checked only from its own losses (finite, going where its kind's loss goes).

Hugging Face `Trainer` (`mldbg.transformers.DebuggerCallback`, tiny random configs): Llama
supervised fine-tuning with the prompt tokens masked out of the labels (-100) and NEFTune noise
(`neftune_noise_alpha`), ResNet image classification on plain SGD (`optim="sgd"`) with a
cosine-with-restarts schedule, `VisionEncoderDecoderModel` (ViT encoder, GPT-2 decoder with
cross-attention) captioning, a plain `nn.Module` of the user's own returning `{"loss",
"logits"}` (a tabular model with categorical embeddings) on the inverse-square-root schedule.
Lightning (`mldbg.lightning.DebuggerCallback`): the `ModelPruning` callback (L1 unstructured, an
amount by epoch), `torch.optim.LBFGS` under automatic optimization (Lightning's closure), a
`CombinedLoader` of two tasks' loaders in one `training_step`, a full-graph GCN (one batch per
epoch, train/validation masks). Keras 3 (`mldbg.keras.Hook`): the DCGAN example's `GAN` model
with its own `train_step` and two optimizers, the Switch Transformer text classifier (top-1
routing with expert capacity, the load-balancing loss through `add_loss`), Gated Residual and
Variable Selection Networks on mixed tabular features, the text-classification-from-scratch
Conv1D model on a `TextVectorization` layer. JAX (`mldbg.jax.Hook`): `optax.multi_transform`
(Adagrad on the embedding, AdamW on the rest) for a Flax Linen bag-of-words classifier,
`optax.contrib.reduce_on_plateau` chained after Adam, a Flax Linen GIN-style graph classifier
with `jax.ops.segment_sum` message passing on `optax.lion`, a Flax Linen regressor on
`optax.contrib.schedule_free_adamw` (evaluated on `schedule_free_eval_params`). XGBoost
(`mldbg.xgboost.Hook`): the linear booster (`gblinear`, coordinate descent), an imbalanced
binary `XGBClassifier` with `scale_pos_weight` and `max_delta_step`, Tweedie regression under
`xgb.callback.LearningRateScheduler` with `grow_policy="lossguide"` and monotone constraints.
Shapes of public PyTorch scripts (the README's two lines): the "Learning PyTorch with Examples"
polynomial fit of sin(x) (`MSELoss(reduction="sum")`, full batch, RMSprop), the PyTorch DQN
tutorial (AdamW amsgrad, SmoothL1, soft target updates, clipping by value) on a hand-written
cart-pole, the PyTorch char-RNN name generation tutorial (category-conditioned RNN, NLL summed
over characters, hand-written SGD), a timm `train.py`-shaped ResNet with the `--bce-loss` binary
cross-entropy on mixup targets, transformers' `run_clm_no_trainer.py` (accelerate, `group_texts`
blocks, perplexity evaluation).

Ten buggy twins, one per key of `BUGS`: the Keras text-classification-from-scratch model on
`Adam(learning_rate=0.1)` instead of `"adam"` (lr_x100), the DQN tutorial's
`optimizer.zero_grad()` left out (no_zero_grad), the imbalanced XGBoost labels read from a
re-sorted frame (shuffled_labels), the timm-shaped ResNet fed image bytes normalized with the
ImageNet mean and std without `ToTensor`'s scaling (inputs_x255), the user's own Trainer module
taking the cross-entropy of softmax probabilities (softmax_before_ce), the Lightning multi-task
trunk initialised with biases of -2 (dead_relu_init), the schedule-free regressor as eight
sigmoid layers (deep_sigmoid), the Lightning pruning CNN's features frozen by a line left from a
transfer-learning template while the optimizer holds them (frozen_by_mistake), the Flax GNN on a
hand-written binary cross-entropy of `sigmoid` probabilities (log_zero_nan),
`run_clm_no_trainer` evaluating mid-epoch and never calling `model.train()` again
(train_in_eval_mode).

A pipeline whose framework is not installed is left out of `PIPELINES`. Every framework is
imported inside its pipeline, so importing this module costs only torch. `SPLIT = BLIND7`.
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

from . import BLIND7, buggy, healthy, installed
from .rl import CartPole

SPLIT = BLIND7

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 53)


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
    """A callback keeping each training batch's loss (`outputs["loss"]`)."""
    import lightning.pytorch as pl

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
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


def pytorch_tutorial_polynomial_rmsprop(
    path: str, steps: int = 2000, seed: int = 0, bug: str | None = None
) -> list[float]:
    """ "Learning PyTorch with Examples", the `torch.optim` version: y = sin(x) on 2000 points of
    [-pi, pi] fitted by a third-order polynomial, `xx = x.unsqueeze(-1).pow(p)` for p = 1, 2, 3,
    `nn.Sequential(nn.Linear(3, 1), nn.Flatten(0, 1))`, `nn.MSELoss(reduction="sum")`,
    `RMSprop(lr=1e-3)`, full batch, 2000 iterations."""
    _seed(seed)
    x = torch.linspace(-math.pi, math.pi, 2000)
    y = torch.sin(x)
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    loss_fn = torch.nn.MSELoss(reduction="sum")
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    for _t in range(steps):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    hook.close()
    return losses


def pytorch_tutorial_dqn(path: str, episodes: int = 60, seed: int = 0, bug: str | None = None) -> list[float]:
    """The PyTorch "Reinforcement Learning (DQN) Tutorial": a 3-layer MLP (128 units) for
    policy and target nets, `ReplayMemory(10000)` of transitions, epsilon-greedy with
    `EPS_START 0.9`, `EPS_END 0.01`, `EPS_DECAY 2500`, `optimize_model()` on batches of 128 with
    `SmoothL1Loss` against `r + GAMMA * max_a target(s')` (0 for final states),
    `AdamW(lr=3e-4, amsgrad=True)`, `clip_grad_value_(100)`, the target net soft-updated with
    `TAU = 0.005` after every step; on a hand-written cart-pole."""
    from collections import deque

    g = _seed(seed)
    env = CartPole(seed)
    batch_size, gamma, eps_start, eps_end, eps_decay, tau, lr = 128, 0.99, 0.9, 0.01, 2500, 0.005, 3e-4

    class DQN(nn.Module):
        def __init__(self, n_observations: int, n_actions: int) -> None:
            super().__init__()
            self.layer1 = nn.Linear(n_observations, 128)
            self.layer2 = nn.Linear(128, 128)
            self.layer3 = nn.Linear(128, n_actions)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = F.relu(self.layer1(x))
            x = F.relu(self.layer2(x))
            return self.layer3(x)

    policy_net, target_net = DQN(4, 2), DQN(4, 2)
    target_net.load_state_dict(policy_net.state_dict())
    optimizer = torch.optim.AdamW(policy_net.parameters(), lr=lr, amsgrad=True)
    criterion = nn.SmoothL1Loss()
    memory: deque[tuple[Any, ...]] = deque([], maxlen=10000)
    hook = Hook(path)
    hook.register_module(policy_net)
    hook.register_loss(criterion)
    steps_done, losses = 0, []

    def select_action(state: torch.Tensor) -> int:
        nonlocal steps_done
        eps = eps_end + (eps_start - eps_end) * math.exp(-1.0 * steps_done / eps_decay)
        steps_done += 1
        if float(torch.rand(1, generator=g)) > eps:
            with torch.no_grad():
                return int(policy_net(state).argmax(1))
        return int(torch.randint(0, 2, (1,), generator=g))

    def optimize_model() -> None:
        if len(memory) < batch_size:
            return
        idx = torch.randperm(len(memory), generator=g)[:batch_size].tolist()
        batch = [memory[i] for i in idx]
        state = torch.cat([b[0] for b in batch])
        action = torch.tensor([[b[1]] for b in batch])
        reward = torch.tensor([b[3] for b in batch])
        non_final_mask = torch.tensor([b[2] is not None for b in batch])
        non_final_next = torch.cat([b[2] for b in batch if b[2] is not None])
        state_action_values = policy_net(state).gather(1, action)
        next_state_values = torch.zeros(batch_size)
        with torch.no_grad():
            next_state_values[non_final_mask] = target_net(non_final_next).max(1).values
        expected = (next_state_values * gamma) + reward
        loss = criterion(state_action_values, expected.unsqueeze(1))
        if bug != "no_zero_grad":
            optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
        optimizer.step()
        losses.append(float(loss))

    for _episode in range(episodes):
        state = torch.tensor(env.reset()).unsqueeze(0)
        while True:
            action = select_action(state)
            observation, reward, done = env.step(action)
            terminated = done and env.t < env.limit
            next_state = None if terminated else torch.tensor(observation).unsqueeze(0)
            memory.append((state, action, next_state, reward))
            state = next_state if next_state is not None else state
            optimize_model()
            target_sd, policy_sd = target_net.state_dict(), policy_net.state_dict()
            for key in policy_sd:
                target_sd[key] = policy_sd[key] * tau + target_sd[key] * (1 - tau)
            target_net.load_state_dict(target_sd)
            if done:
                break
    hook.close()
    return losses


def pytorch_tutorial_char_rnn_generation(
    path: str, n_iters: int = 2500, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The PyTorch tutorial "NLP From Scratch: Generating Names with a Character-Level RNN": an
    `RNN` of `i2h`, `i2o` (on category + input + hidden), `o2o`, `Dropout(0.1)` and
    `LogSoftmax`, one random (category, name) pair per iteration, `rnn.zero_grad()`, the
    `NLLLoss` summed over the characters, and the parameters updated by hand
    (`p.data.add_(p.grad.data, alpha=-learning_rate)`); 6 "languages", each a Markov chain of
    letters; learning rate 0.005 (the tutorial's 0.0005 is for 100000 iterations)."""
    g = _seed(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    n_letters = len(letters) + 1  # EOS
    n_categories, hidden_size, lr = 6, 128, 0.005
    pg = np.random.default_rng(400 + seed)
    chains = [pg.dirichlet(np.full(26, 0.15), size=27) for _ in range(n_categories)]  # row 26: start
    rng = np.random.default_rng(seed)

    def random_name(c: int) -> str:
        out, prev = [], 26
        for _ in range(int(rng.integers(3, 9))):
            prev = int(rng.choice(26, p=chains[c][prev]))
            out.append(letters[prev])
        return "".join(out)

    class RNN(nn.Module):
        def __init__(self, input_size: int, hidden_size: int, output_size: int) -> None:
            super().__init__()
            self.hidden_size = hidden_size
            self.i2h = nn.Linear(n_categories + input_size + hidden_size, hidden_size)
            self.i2o = nn.Linear(n_categories + input_size + hidden_size, output_size)
            self.o2o = nn.Linear(hidden_size + output_size, output_size)
            self.dropout = nn.Dropout(0.1)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, category: Any, inp: Any, hidden: Any) -> tuple[torch.Tensor, torch.Tensor]:
            input_combined = torch.cat((category, inp, hidden), 1)
            hidden = self.i2h(input_combined)
            output = self.i2o(input_combined)
            output = self.o2o(torch.cat((hidden, output), 1))
            output = self.softmax(self.dropout(output))
            return output, hidden

        def init_hidden(self) -> torch.Tensor:
            return torch.zeros(1, self.hidden_size)

    rnn = RNN(n_letters, hidden_size, n_letters)
    criterion = nn.NLLLoss()
    hook = Hook(path)
    hook.register_module(rnn)
    hook.register_loss(criterion)
    losses = []
    for _it in range(n_iters):
        c = int(torch.randint(0, n_categories, (1,), generator=g))
        line = random_name(c)
        category_tensor = torch.zeros(1, n_categories)
        category_tensor[0, c] = 1
        input_line_tensor = torch.zeros(len(line), 1, n_letters)
        for i, ch in enumerate(line):
            input_line_tensor[i, 0, letters.index(ch)] = 1
        target_line_tensor = torch.tensor([letters.index(ch) for ch in line[1:]] + [n_letters - 1]).unsqueeze(
            -1
        )
        hidden = rnn.init_hidden()
        rnn.zero_grad()
        loss = torch.tensor(0.0)
        for i in range(input_line_tensor.size(0)):
            output, hidden = rnn(category_tensor, input_line_tensor[i], hidden)
            loss = loss + criterion(output, target_line_tensor[i])
        loss.backward()
        for p in rnn.parameters():
            p.data.add_(p.grad.data, alpha=-lr)
        losses.append(float(loss) / input_line_tensor.size(0))
    hook.close()
    return losses


def timm_bce_loss_resnet(path: str, epochs: int = 4, seed: int = 0, bug: str | None = None) -> list[float]:
    """A timm `train.py` run as the "ResNet strikes back" recipes use it (`--bce-loss
    --bce-target-thresh 0.2 --smoothing 0.1 --mixup 0.1 --cutmix 1.0`, AdamW lr 2e-3, weight
    decay 0.02 off the norms and biases, a per-update cosine with a linear warm-up), timm's
    `BinaryCrossEntropy` loss module on the mixed one-hot targets, `train_one_epoch` with
    `lr_scheduler.step_update(num_updates)`, a validation pass per epoch; a small ResNet with
    BasicBlocks and zero-initialized last BN gammas, batch 64; images through `ToTensor` and
    `Normalize(IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD)`."""
    g = _seed(seed)
    rgb, y = _images(g, 2560, size=16, proto_seed=4040)
    pixels = (rgb * 255).round().to(torch.uint8)  # the decoded images' bytes
    scaled = pixels.float() if bug == "inputs_x255" else pixels.float() / 255  # ToTensor() replaced by hand
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)  # IMAGENET_DEFAULT_MEAN, _STD
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    x = (scaled - mean) / std
    classes = 10

    class BinaryCrossEntropy(nn.Module):
        def __init__(self, smoothing: float = 0.1, target_threshold: float | None = None) -> None:
            super().__init__()
            self.smoothing, self.target_threshold = smoothing, target_threshold

        def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            if target.ndim == 1:
                off = self.smoothing / classes
                target = torch.full_like(x, off).scatter_(1, target[:, None], 1.0 - self.smoothing + off)
            if self.target_threshold is not None:
                target = target.gt(self.target_threshold).to(dtype=target.dtype)
            return F.binary_cross_entropy_with_logits(x, target, reduction="mean")

    class BasicBlock(nn.Module):
        def __init__(self, inp: int, out: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(inp, out, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(out)
            self.conv2 = nn.Conv2d(out, out, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(out)
            nn.init.zeros_(self.bn2.weight)
            self.downsample = (
                nn.Sequential(nn.Conv2d(inp, out, 1, stride, bias=False), nn.BatchNorm2d(out))
                if stride != 1 or inp != out else None
            )  # fmt: skip

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            shortcut = x if self.downsample is None else self.downsample(x)
            h = F.relu(self.bn1(self.conv1(x)))
            return F.relu(self.bn2(self.conv2(h)) + shortcut)

    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        BasicBlock(16, 16, 1), BasicBlock(16, 32, 2), BasicBlock(32, 64, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes),
    )  # fmt: skip
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.02}, {"params": no_decay, "weight_decay": 0.0}], lr=2e-3
    )
    train_loss_fn = BinaryCrossEntropy(smoothing=0.1, target_threshold=0.2)
    loader = DataLoader(TensorDataset(x[:2304], y[:2304]), batch_size=64, shuffle=True, drop_last=True)
    updates_per_epoch, warmup = len(loader), len(loader)
    total = epochs * updates_per_epoch

    def step_update(num_updates: int) -> None:
        if num_updates < warmup:
            lr = 2e-3 * (num_updates + 1) / warmup
        else:
            lr = 1e-6 + 0.5 * (2e-3 - 1e-6) * (
                1 + math.cos(math.pi * (num_updates - warmup) / (total - warmup))
            )
        for group in optimizer.param_groups:
            group["lr"] = lr

    def mixup_cutmix(xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        off = 0.1 / classes
        target = torch.full((len(yb), classes), off).scatter_(1, yb[:, None], 1.0 - 0.1 + off)
        if float(torch.rand(1, generator=g)) < 0.5:  # mixup alpha 0.1
            lam = float(np.random.beta(0.1, 0.1))
            xb = lam * xb + (1 - lam) * xb.flip(0)
        else:  # cutmix alpha 1.0
            lam = float(np.random.beta(1.0, 1.0))
            cut = int(16 * math.sqrt(1 - lam))
            cy, cx = np.random.randint(16, size=2)
            y0, y1, x0, x1 = (
                max(cy - cut // 2, 0),
                min(cy + cut // 2, 16),
                max(cx - cut // 2, 0),
                min(cx + cut // 2, 16),
            )
            xb = xb.clone()
            xb[:, :, y0:y1, x0:x1] = xb.flip(0)[:, :, y0:y1, x0:x1]
            lam = 1 - (y1 - y0) * (x1 - x0) / 256
        return xb, lam * target + (1 - lam) * target.flip(0)

    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(train_loss_fn)
    losses, num_updates = [], 0
    for _epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            xb, target = mixup_cutmix(xb, yb)
            loss = train_loss_fn(model(xb), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            num_updates += 1
            step_update(num_updates)
            losses.append(float(loss))
        model.eval()
        with torch.no_grad():
            _top1 = (model(x[2304:]).argmax(1) == y[2304:]).float().mean()
    hook.close()
    return losses


def hf_run_clm_no_trainer(path: str, epochs: int = 2, seed: int = 0, bug: str | None = None) -> list[float]:
    """transformers' `run_clm_no_trainer.py`: `Accelerator()`, a GPT-2 built from a tiny config,
    the tokenized stream cut by `group_texts` into blocks of 64 with `labels = input_ids`,
    `default_data_collator`, AdamW (lr 5e-4, weight decay 0.01 off biases and LayerNorm
    weights), `get_scheduler("linear")` with 20 warm-up steps, `accelerator.backward(loss)`, a
    perplexity evaluation at each epoch's end under `model.eval()`, batch 16."""
    from accelerate import Accelerator
    from transformers import GPT2Config, GPT2LMHeadModel, default_data_collator, get_scheduler

    g = _seed(seed)
    vocab, block_size = 128, 64
    stream = _markov_tokens(g, 80 * 1024, vocab, order_seed=2718)
    blocks = stream[: (len(stream) // block_size) * block_size].view(-1, block_size)
    train_dataset = _Examples(input_ids=blocks[:1152], labels=blocks[:1152])
    eval_dataset = _Examples(input_ids=blocks[1152:1280], labels=blocks[1152:1280])
    accelerator = Accelerator(cpu=True)
    config = GPT2Config(vocab_size=vocab, n_positions=block_size, n_embd=64, n_layer=2, n_head=4)
    model = GPT2LMHeadModel(config)
    train_dataloader = DataLoader(
        train_dataset, shuffle=True, collate_fn=default_data_collator, batch_size=16
    )
    eval_dataloader = DataLoader(eval_dataset, collate_fn=default_data_collator, batch_size=16)
    no_decay = ["bias", "layer_norm.weight", "ln_1.weight", "ln_2.weight", "ln_f.weight"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]  # fmt: skip
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=5e-4)
    max_train_steps = epochs * len(train_dataloader)
    lr_scheduler = get_scheduler(
        name="linear", optimizer=optimizer, num_warmup_steps=20, num_training_steps=max_train_steps
    )
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )
    hook = Hook(path)
    hook.register_module(model)
    losses, completed_steps = [], 0

    def evaluate() -> float:
        model.eval()
        eval_losses = []
        for batch in eval_dataloader:
            with torch.no_grad():
                eval_losses.append(float(model(**batch).loss))
        return math.exp(sum(eval_losses) / len(eval_losses))

    for _epoch in range(epochs):
        model.train()
        for step, batch in enumerate(train_dataloader):
            outputs = model(**batch)
            loss = outputs.loss
            accelerator.backward(loss)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            completed_steps += 1
            losses.append(float(loss))
            if bug == "train_in_eval_mode" and step == 30:
                _perplexity = evaluate()  # an evaluation every 30 steps, and no model.train() after it
        _perplexity = evaluate()
    hook.close()
    return losses


# ============================================================================= XGBoost


def xgb_gblinear_coordinate_descent(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The linear booster: `xgb.train({"booster": "gblinear", "updater": "coord_descent",
    "feature_selector": "shuffle", "lambda": 0.01, "alpha": 0.001, "eta": 0.5})` (both penalties
    normalised by the number of rows) for 150 rounds
    on 20 standardized features (8 of them informative) with a validation set; losses: the
    training RMSE per round."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    n, d = 4000, 20
    x = rng.normal(size=(n, d))
    x[:, 10:15] = x[:, :5] * 0.7 + 0.3 * rng.normal(size=(n, 5))  # correlated copies
    w = np.zeros(d)
    w[:8] = rng.normal(0, 2, 8)
    y = x @ w + 3.0 + rng.normal(0, 1.0, n)
    dtrain = xgb.DMatrix(x[:3200], label=y[:3200])
    dvalid = xgb.DMatrix(x[3200:], label=y[3200:])
    params = {
        "booster": "gblinear", "updater": "coord_descent", "feature_selector": "shuffle", "lambda": 0.01,
        "alpha": 0.001, "eta": 0.5, "objective": "reg:squarederror", "eval_metric": "rmse", "nthread": 1,
        "seed": seed,
    }  # fmt: skip
    result: dict[str, Any] = {}
    xgb.train(
        params, dtrain, num_boost_round=150, evals=[(dtrain, "train"), (dvalid, "valid")], evals_result=result,
        verbose_eval=False, callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    return [float(v) for v in result["train"]["rmse"]]


def xgb_imbalanced_scale_pos_weight(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Fraud-style imbalanced binary classification (about 3% positives) as practitioners fit
    it: `XGBClassifier(scale_pos_weight=negatives / positives, max_delta_step=1,
    eval_metric=["aucpr", "logloss"], n_estimators=300, learning_rate=0.05, max_depth=4,
    subsample=0.8, early_stopping_rounds=30)` on a pandas frame; losses: the training log loss
    per round."""
    import pandas as pd
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    n = 6000
    frame = pd.DataFrame({
        "amount": rng.lognormal(3, 1, n), "hour": rng.integers(0, 24, n), "age_days": rng.exponential(300, n),
        "n_tx_24h": rng.poisson(3, n), "foreign": rng.integers(0, 2, n), "score": rng.normal(size=n),
    })  # fmt: skip
    logit = (
        -5.2 + 0.9 * np.log(frame["amount"]) * frame["foreign"] - 0.004 * frame["age_days"]
        + 0.35 * frame["n_tx_24h"] + 0.8 * ((frame["hour"] < 5) | (frame["hour"] > 22)) + 0.7 * frame["score"]
    )  # fmt: skip
    frame["is_fraud"] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    features = frame.drop(columns="is_fraud")
    labels = frame["is_fraud"]
    if bug == "shuffled_labels":  # the labels taken from a copy sorted for a look at the largest amounts
        labels = frame.sort_values("amount", ascending=False)["is_fraud"].reset_index(drop=True)
    x_train, x_valid = features.iloc[:4800], features.iloc[4800:]
    y_train, y_valid = labels.iloc[:4800], labels.iloc[4800:]
    ratio = float((y_train == 0).sum()) / max(int((y_train == 1).sum()), 1)
    clf = xgb.XGBClassifier(
        scale_pos_weight=ratio, max_delta_step=1, eval_metric=["aucpr", "logloss"], n_estimators=300,
        learning_rate=0.05, max_depth=4, subsample=0.8, early_stopping_rounds=30, n_jobs=1, random_state=seed,
        callbacks=[mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    clf.fit(x_train, y_train, eval_set=[(x_train, y_train), (x_valid, y_valid)], verbose=False)
    return [float(v) for v in clf.evals_result()["validation_0"]["logloss"]]


def xgb_tweedie_lr_scheduler_lossguide(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Insurance-style Tweedie regression (`reg:tweedie`, variance power 1.3) of claim amounts
    with many exact zeros, `xgb.train` with `tree_method="hist"`, `grow_policy="lossguide"`,
    `max_leaves=31`, monotone constraints on two features, and the learning rate decayed per
    round by `xgb.callback.LearningRateScheduler(lambda r: 0.3 * 0.99 ** r)`; 250 rounds; losses:
    the training Tweedie negative log-likelihood per round."""
    import xgboost as xgb

    import mldbg.xgboost

    rng = np.random.default_rng(seed)
    n = 5000
    x = np.column_stack([
        rng.uniform(18, 80, n), rng.uniform(0, 20, n), rng.integers(0, 5, n), rng.normal(size=n),
        rng.normal(size=n),
    ])  # fmt: skip
    mu = np.exp(-1.0 + 0.02 * np.abs(x[:, 0] - 45) + 0.06 * x[:, 1] + 0.2 * x[:, 2] + 0.3 * np.sin(x[:, 3]))
    claims = rng.poisson(0.3 * mu)
    y = np.array([rng.gamma(2.0, 400.0, k).sum() if k else 0.0 for k in claims])
    dtrain = xgb.DMatrix(x[:4000], label=y[:4000])
    dvalid = xgb.DMatrix(x[4000:], label=y[4000:])
    params = {
        "objective": "reg:tweedie", "tweedie_variance_power": 1.3, "tree_method": "hist", "grow_policy": "lossguide",
        "max_leaves": 31, "max_depth": 0, "min_child_weight": 5, "subsample": 0.9,
        "monotone_constraints": "(0,1,1,0,0)", "nthread": 1, "seed": seed,
    }  # fmt: skip
    result: dict[str, Any] = {}
    xgb.train(
        params, dtrain, num_boost_round=250, evals=[(dtrain, "train"), (dvalid, "valid")], evals_result=result,
        verbose_eval=False,
        callbacks=[xgb.callback.LearningRateScheduler(lambda r: 0.3 * 0.99**r), mldbg.xgboost.Hook(path)],
    )  # fmt: skip
    return [float(v) for v in result["train"]["tweedie-nloglik@1.3"]]


# ============================================================================= JAX


def flax_multi_transform_bag_of_words(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Flax Linen bag-of-embeddings text classifier (an `nn.Embed` of 64, the mean over
    non-padding tokens, two `Dense` layers) trained with `optax.multi_transform`: Adagrad (lr
    0.1) on the embedding table, AdamW (lr 2e-3, weight decay 1e-4) on the rest, the labels from
    a `flax.traverse_util.path_aware_map`; 4 topics, each its own Markov "language", documents of
    20 to 48 tokens padded to 48, batch 64, a jitted step."""
    import flax.linen as fnn
    import jax
    import jax.numpy as jnp
    import optax
    from flax import traverse_util

    import mldbg.jax

    g = _seed(seed)
    vocab, length, n, topics = 400, 48, 4096, 4
    docs = np.zeros((n, length), dtype="int32")
    y = torch.randint(0, topics, (n,), generator=g).numpy()
    streams = [
        1 + _markov_tokens(g, n * length // topics + 2 * length, vocab - 1, order_seed=70 + t).numpy()
        for t in range(topics)
    ]
    offsets = [0] * topics
    lengths = torch.randint(20, length + 1, (n,), generator=g).numpy()
    for i in range(n):
        t, k = int(y[i]), int(lengths[i])
        docs[i, :k] = streams[t][offsets[t] : offsets[t] + k]
        offsets[t] += k

    class BagOfWords(fnn.Module):
        @fnn.compact
        def __call__(self, tokens: Any) -> Any:
            mask = (tokens > 0)[..., None]
            h = fnn.Embed(vocab, 64, name="embedding")(tokens)
            h = (h * mask).sum(1) / mask.sum(1)
            h = fnn.relu(fnn.Dense(64)(h))
            return fnn.Dense(topics)(h)

    model = BagOfWords()
    params = model.init(jax.random.PRNGKey(seed), jnp.asarray(docs[:2]))["params"]
    labels = traverse_util.path_aware_map(lambda p, _: "embed" if p[0] == "embedding" else "dense", params)
    tx = optax.multi_transform(
        {"embed": optax.adagrad(0.1), "dense": optax.adamw(2e-3, weight_decay=1e-4)}, labels
    )
    opt_state = tx.init(params)

    @jax.jit
    def train_step(params: Any, opt_state: Any, xb: Any, yb: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            return optax.softmax_cross_entropy_with_integer_labels(model.apply({"params": p}, xb), yb).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    rng = np.random.default_rng(seed)
    hook = mldbg.jax.Hook(path)
    losses = []
    for step in range(steps):
        idx = rng.choice(3584, 64, replace=False)
        old = params
        params, opt_state, loss, grads = train_step(params, opt_state, docs[idx], y[idx])
        hook.record(step, params=old, grads=grads, loss=loss)
        losses.append(float(loss))
    hook.close()
    return losses


def optax_reduce_on_plateau_regression(
    path: str, steps: int = 500, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Flax Linen MLP (64-64, GELU) regressing a housing-price-like target, optimized by
    `optax.chain(optax.adam(3e-3), optax.contrib.reduce_on_plateau(patience=10, cooldown=5,
    factor=0.5, accumulation_size=20))`, the update given `value=loss`, as optax's "Reduce on
    plateau" example runs it; batch 128, a jitted step."""
    import flax.linen as fnn
    import jax
    import optax

    import mldbg.jax

    rng = np.random.default_rng(seed)
    n, d = 8000, 8
    x = rng.normal(size=(n, d)).astype("float32")
    y = (
        1.5 * x[:, 0] + np.sin(2 * x[:, 1]) + 0.5 * x[:, 2] * x[:, 3] - 0.4 * x[:, 4] ** 2
        + 0.3 * rng.normal(size=n)
    ).astype("float32")[:, None]  # fmt: skip

    class MLP(fnn.Module):
        @fnn.compact
        def __call__(self, x: Any) -> Any:
            x = fnn.gelu(fnn.Dense(64)(x))
            x = fnn.gelu(fnn.Dense(64)(x))
            return fnn.Dense(1)(x)

    model = MLP()
    params = model.init(jax.random.PRNGKey(seed), x[:2])["params"]
    tx = optax.chain(
        optax.adam(3e-3),
        optax.contrib.reduce_on_plateau(patience=10, cooldown=5, factor=0.5, accumulation_size=20),
    )
    opt_state = tx.init(params)

    @jax.jit
    def train_step(params: Any, opt_state: Any, xb: Any, yb: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            return ((model.apply({"params": p}, xb) - yb) ** 2).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params, value=loss)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    hook = mldbg.jax.Hook(path)
    losses = []
    for step in range(steps):
        idx = rng.choice(n, 128, replace=False)
        old = params
        params, opt_state, loss, grads = train_step(params, opt_state, x[idx], y[idx])
        hook.record(step, params=old, grads=grads, loss=loss)
        losses.append(float(loss))
    hook.close()
    return losses


def flax_gin_segment_sum_lion(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A GIN-style graph classifier in Flax Linen with the message passing written as
    `jax.ops.segment_sum` over an edge list (graphs of a batch as one disjoint union, node
    features one-hot degrees, three `(1 + eps) h + sum of neighbours` MLP layers, a sum readout),
    `optax.lion(1e-4, weight_decay=1e-2)` (Lion's lr a tenth of Adam's), the binary
    cross-entropy from `optax.sigmoid_binary_cross_entropy`; rings with random chords against
    random graphs of the same size, batch 32 graphs."""
    import flax.linen as fnn
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    rng = np.random.default_rng(seed)
    nodes, chords, max_degree = 12, 3, 8

    def graph(label: int) -> np.ndarray:
        if label == 0:
            ring = [(i, (i + 1) % nodes) for i in range(nodes)]
            extra = [tuple(rng.choice(nodes, 2, replace=False)) for _ in range(chords)]
            edges = ring + extra
        else:
            edges = [tuple(rng.choice(nodes, 2, replace=False)) for _ in range(nodes + chords)]
        e = np.array(edges)
        return np.concatenate([e, e[:, ::-1]])  # both directions

    def batch(size: int) -> tuple[np.ndarray, ...]:
        labels = rng.integers(0, 2, size)
        senders, receivers = [], []
        for i, lab in enumerate(labels):
            e = graph(int(lab)) + i * nodes
            senders.append(e[:, 0])
            receivers.append(e[:, 1])
        s, r = np.concatenate(senders), np.concatenate(receivers)
        degree = np.bincount(r, minlength=size * nodes).clip(0, max_degree - 1)
        feats = np.eye(max_degree, dtype="float32")[degree]
        return feats, s, r, labels.astype("float32")

    class GIN(fnn.Module):
        @fnn.compact
        def __call__(self, h: Any, senders: Any, receivers: Any, n_graphs: int) -> Any:
            for i in range(3):
                eps = self.param(f"eps_{i}", fnn.initializers.zeros, ())
                agg = jax.ops.segment_sum(h[senders], receivers, num_segments=h.shape[0])
                h = (1 + eps) * h + agg
                h = fnn.relu(fnn.Dense(32)(fnn.relu(fnn.Dense(32)(h))))
            pooled = h.reshape(n_graphs, nodes, -1).sum(1)
            return fnn.Dense(1)(fnn.relu(fnn.Dense(32)(pooled)))[:, 0]

    model = GIN()
    f, s, r, _ = batch(2)
    params = model.init(jax.random.PRNGKey(seed), f, s, r, 2)["params"]
    tx = optax.lion(1e-4, weight_decay=1e-2)
    opt_state = tx.init(params)

    @jax.jit
    def train_step(params: Any, opt_state: Any, f: Any, s: Any, r: Any, yb: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            logits = model.apply({"params": p}, f, s, r, 32)
            if bug == "log_zero_nan":  # the textbook formula on the probabilities
                prob = jax.nn.sigmoid(logits)
                return -(yb * jnp.log(prob) + (1 - yb) * jnp.log(1 - prob)).mean()
            return optax.sigmoid_binary_cross_entropy(logits, yb).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    hook = mldbg.jax.Hook(path)
    losses = []
    for step in range(steps):
        f, s, r, yb = batch(32)
        old = params
        params, opt_state, loss, grads = train_step(params, opt_state, f, s, r, yb)
        hook.record(step, params=old, grads=grads, loss=loss)
        losses.append(float(loss))
    hook.close()
    return losses


def linen_schedule_free_adamw(
    path: str, steps: int = 400, seed: int = 0, bug: str | None = None
) -> list[float]:
    """A Flax Linen MLP (3 x 128 SiLU) regressing a smooth surface, optimized by
    `optax.contrib.schedule_free_adamw(learning_rate=2e-3, warmup_steps=40, weight_decay=1e-4)`
    in a jitted step; evaluated every 100 steps on the averaged parameters
    (`optax.contrib.schedule_free_eval_params(opt_state, params)`); batch 128."""
    import flax.linen as fnn
    import jax
    import jax.numpy as jnp
    import optax

    import mldbg.jax

    rng = np.random.default_rng(seed)
    n, d = 8000, 6
    x = rng.uniform(-2, 2, size=(n, d)).astype("float32")
    y = np.sin(x[:, 0] * x[:, 1]) + np.cos(x[:, 2]) * x[:, 3] + 0.2 * x[:, 4] + 0.1 * rng.normal(size=n)
    y = y.astype("float32")[:, None]
    activation = fnn.sigmoid if bug == "deep_sigmoid" else fnn.silu
    depth = 8 if bug == "deep_sigmoid" else 3

    class MLP(fnn.Module):
        @fnn.compact
        def __call__(self, x: Any) -> Any:
            for _ in range(depth):
                x = activation(fnn.Dense(128)(x))
            return fnn.Dense(1)(x)

    model = MLP()
    params = model.init(jax.random.PRNGKey(seed), x[:2])["params"]
    tx = optax.contrib.schedule_free_adamw(learning_rate=2e-3, warmup_steps=40, weight_decay=1e-4)
    opt_state = tx.init(params)

    def loss_fn(p: Any, xb: Any, yb: Any) -> Any:
        return jnp.mean((model.apply({"params": p}, xb) - yb) ** 2)

    @jax.jit
    def train_step(params: Any, opt_state: Any, xb: Any, yb: Any) -> Any:
        loss, grads = jax.value_and_grad(loss_fn)(params, xb, yb)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    eval_loss = jax.jit(loss_fn)
    hook = mldbg.jax.Hook(path)
    losses = []
    for step in range(steps):
        idx = rng.choice(7000, 128, replace=False)
        old = params
        params, opt_state, loss, grads = train_step(params, opt_state, x[idx], y[idx])
        hook.record(step, params=old, grads=grads, loss=loss)
        losses.append(float(loss))
        if step % 100 == 99:
            eval_params = optax.contrib.schedule_free_eval_params(opt_state, params)
            hook.record(step // 100, mode="eval", loss=eval_loss(eval_params, x[7000:], y[7000:]))
    hook.close()
    return losses


# ============================================================================= Lightning


def lit_model_pruning_cnn(path: str, epochs: int = 5, seed: int = 0, bug: str | None = None) -> list[float]:
    """A CNN classifier as a LightningModule trained with Lightning's `ModelPruning` callback
    (`"l1_unstructured"`, global, an amount by epoch: 30% after epochs 1 and 3, made permanent at
    the end), Adam(1e-3), cross-entropy, a validation loop logging accuracy, batch 64."""
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelPruning

    g = _seed(seed)
    x, y = _images(g, 2304, size=16, proto_seed=5150)
    x = (x - 0.5) / 0.25

    class PrunedCNN(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            )  # fmt: skip
            self.classifier = nn.Sequential(
                nn.Flatten(), nn.Linear(64 * 16, 128), nn.ReLU(), nn.Linear(128, 10)
            )
            if bug == "frozen_by_mistake":  # left from the transfer-learning template this started as
                for p in self.features.parameters():
                    p.requires_grad = False

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.classifier(self.features(x))

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            loss = F.cross_entropy(self(xb), yb)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            xb, yb = batch
            self.log("val_acc", (self(xb).argmax(1) == yb).float().mean())

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    def compute_amount(epoch: int) -> float:
        return 0.3 if epoch in (1, 3) else 0.0

    train = DataLoader(TensorDataset(x[:2048], y[:2048]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(x[2048:], y[2048:]), batch_size=256)
    history = _pl_losses()
    pruning = ModelPruning("l1_unstructured", amount=compute_amount, use_global_unstructured=True, verbose=0)
    trainer = _pl_trainer(path, [pruning, history], max_epochs=epochs)
    trainer.fit(PrunedCNN(), train, val)
    return history.losses


def lit_lbfgs_automatic_optimization(
    path: str, epochs: int = 60, seed: int = 0, bug: str | None = None
) -> list[float]:
    """`torch.optim.LBFGS(lr=1, max_iter=20, history_size=10, line_search_fn="strong_wolfe")`
    returned by `configure_optimizers` of a LightningModule under automatic optimization
    (Lightning builds the closure that re-runs `training_step`), full batch (one batch an
    epoch): a tanh MLP (1-32-32-1) fitting a noisy chirp on 500 points, 60 epochs."""
    import lightning.pytorch as pl

    g = _seed(seed)
    x = torch.linspace(-2, 2, 500)[:, None]
    y = torch.sin(3 * x + x**2) + 0.05 * torch.randn(500, 1, generator=g)

    class CurveFit(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1)
            )

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            xb, yb = batch
            loss = F.mse_loss(self.net(xb), yb)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.LBFGS(
                self.parameters(), lr=1, max_iter=20, history_size=10, line_search_fn="strong_wolfe"
            )

    train = DataLoader(TensorDataset(x, y), batch_size=500)
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(CurveFit(), train)
    return history.losses


def lit_combined_loader_multitask(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Two tasks trained together from a `CombinedLoader({"cls": ..., "reg": ...},
    mode="max_size_cycle")`: a shared 3-layer ReLU trunk with a classification head (7 classes,
    cross-entropy) and a regression head (MSE), the sum of both losses in `training_step`,
    `self.log_dict`, the trunk initialised by the module's own `init_weights` (Kaiming normal),
    AdamW(1e-3, weight decay 1e-2) with a per-epoch `ExponentialLR(0.8)`."""
    import lightning.pytorch as pl
    from lightning.pytorch.utilities import CombinedLoader

    g = _seed(seed)
    d = 16
    w = torch.randn(d, 7, generator=g)
    x_cls = torch.randn(4096, d, generator=g)
    y_cls = (x_cls @ w + 0.5 * torch.randn(4096, 7, generator=g)).argmax(1)
    x_reg = torch.randn(2048, d, generator=g)
    y_reg = (torch.sin(x_reg[:, :4]).sum(1, keepdim=True) + 0.3 * x_reg[:, 4:6].prod(1, keepdim=True)
             + 0.1 * torch.randn(2048, 1, generator=g))  # fmt: skip

    class MultiTask(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.trunk = nn.Sequential(
                nn.Linear(d, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU()
            )
            self.cls_head = nn.Linear(64, 7)
            self.reg_head = nn.Linear(64, 1)
            self.trunk.apply(self.init_weights)

        @staticmethod
        def init_weights(m: nn.Module) -> None:
            if isinstance(m, nn.Linear):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.constant_(m.bias, -2.0 if bug == "dead_relu_init" else 0.0)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            (xc, yc), (xr, yr) = batch["cls"], batch["reg"]
            loss_cls = F.cross_entropy(self.cls_head(self.trunk(xc)), yc)
            loss_reg = F.mse_loss(self.reg_head(self.trunk(xr)), yr)
            loss = loss_cls + loss_reg
            self.log_dict({"loss_cls": loss_cls, "loss_reg": loss_reg, "train_loss": loss})
            return loss

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.AdamW(self.parameters(), lr=1e-3, weight_decay=1e-2)
            return [optimizer], [torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.8)]

    loaders = {
        "cls": DataLoader(TensorDataset(x_cls, y_cls), batch_size=64, shuffle=True),
        "reg": DataLoader(TensorDataset(x_reg, y_reg), batch_size=64, shuffle=True),
    }
    history = _pl_losses()
    trainer = _pl_trainer(path, [history], max_epochs=epochs)
    trainer.fit(MultiTask(), CombinedLoader(loaders, mode="max_size_cycle"))
    return history.losses


def lit_full_graph_gcn(path: str, epochs: int = 200, seed: int = 0, bug: str | None = None) -> list[float]:
    """Kipf and Welling's GCN as a LightningModule on one graph: the whole graph is the one batch
    of every epoch (a `DataLoader` over a single item), the symmetric-normalized adjacency with
    self-loops as a sparse tensor, two graph convolutions (hidden 16, dropout 0.5), the
    cross-entropy on the training nodes' mask and a validation step on the validation mask every
    10 epochs, Adam(lr 0.01, weight decay 5e-4), 200 epochs (the paper's settings); a planted
    partition graph of 600 nodes in 6 communities with noisy bag-of-words features."""
    import lightning.pytorch as pl

    g = _seed(seed)
    n, k, feats = 600, 6, 100
    community = torch.arange(n) % k
    same = community[:, None] == community[None, :]
    prob = torch.where(same, torch.tensor(0.04), torch.tensor(0.004))
    upper = torch.triu(torch.rand(n, n, generator=g) < prob, 1)
    adj = (upper | upper.T).float() + torch.eye(n)
    deg_inv_sqrt = adj.sum(1).pow(-0.5)
    a_hat = (deg_inv_sqrt[:, None] * adj * deg_inv_sqrt[None, :]).to_sparse()
    topic_words = torch.rand(k, feats, generator=g) < 0.1
    x = (
        (torch.rand(n, feats, generator=g) < 0.03)
        | (topic_words[community] & (torch.rand(n, feats, generator=g) < 0.3))
    ).float()
    x = x / x.sum(1, keepdim=True).clamp(min=1)
    perm = torch.randperm(n, generator=g)
    train_mask = torch.zeros(n, dtype=torch.bool)
    val_mask = torch.zeros(n, dtype=torch.bool)
    train_mask[perm[:120]] = True
    val_mask[perm[120:320]] = True

    class GraphConv(nn.Module):
        def __init__(self, inp: int, out: int) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.empty(inp, out))
            self.bias = nn.Parameter(torch.zeros(out))
            nn.init.xavier_uniform_(self.weight)

        def forward(self, h: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
            return torch.sparse.mm(a, h @ self.weight) + self.bias

    class GCN(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.conv2 = GraphConv(feats, 16), GraphConv(16, k)

        def forward(self, h: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
            h = F.dropout(h, 0.5, self.training)
            h = F.relu(self.conv1(h, a))
            h = F.dropout(h, 0.5, self.training)
            return self.conv2(h, a)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            out = self(x, a_hat)
            loss = F.cross_entropy(out[train_mask], community[train_mask])
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            out = self(x, a_hat)
            self.log("val_loss", F.cross_entropy(out[val_mask], community[val_mask]))

        def configure_optimizers(self) -> Any:
            return torch.optim.Adam(self.parameters(), lr=0.01, weight_decay=5e-4)

    whole_graph = DataLoader(TensorDataset(torch.zeros(1)), batch_size=1)
    history = _pl_losses()
    trainer = _pl_trainer(
        path, [history], max_epochs=epochs, check_val_every_n_epoch=10, num_sanity_val_steps=0
    )
    trainer.fit(GCN(), whole_graph, whole_graph)
    return history.losses


# ============================================================================= Keras 3 (TensorFlow backend)


def _reviews(rng: np.random.Generator, n: int, length: int, vocab: int = 600) -> tuple[list[str], np.ndarray]:
    """Synthetic two-class "reviews": Zipf-distributed filler words, 12% of the words drawn
    from the class's own 25 sentiment words (with a 25% chance of the other class's), and
    labels."""
    y = rng.integers(0, 2, n)
    ranks = np.arange(1, vocab + 1)
    zipf = (1 / ranks) / (1 / ranks).sum()
    sentiment = rng.choice(vocab, size=(2, 25), replace=False)
    texts = []
    for label in y:
        words = rng.choice(vocab, size=length, p=zipf)
        marks = rng.random(length) < 0.12
        side = np.where(rng.random(length) < 0.25, 1 - label, label)
        words[marks] = sentiment[side[marks], rng.integers(0, 25, int(marks.sum()))]
        texts.append(" ".join(f"w{w}" for w in words))
    return texts, y


def keras_dcgan_custom_train_step(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras example "DCGAN to generate face images": a `GAN(keras.Model)` with its own
    `compile(d_optimizer, g_optimizer, loss_fn)` and `train_step` (real and generated images
    labelled 0 and 1 with 5% uniform label noise, one `tf.GradientTape` step of the
    discriminator, then one of the generator on misleading labels, `Mean` trackers for
    `d_loss` and `g_loss`), `Adam(learning_rate=0.0001)` for each, `BinaryCrossentropy()`;
    strided-conv discriminator with LeakyReLU(0.2) and dropout, transposed-conv generator with
    a sigmoid output; 16x16 grey images, batch 64, 4 epochs; losses: the discriminator's."""
    import keras
    import tensorflow as tf
    from keras import layers, ops

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    g = _seed(seed)
    images, _ = _images(g, 2048, size=16, channels=1, proto_seed=3131)
    x = images.permute(0, 2, 3, 1).numpy()
    latent_dim = 32
    discriminator = keras.Sequential([
        keras.Input(shape=(16, 16, 1)),
        layers.Conv2D(32, kernel_size=4, strides=2, padding="same"), layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2D(64, kernel_size=4, strides=2, padding="same"), layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2D(64, kernel_size=4, strides=2, padding="same"), layers.LeakyReLU(negative_slope=0.2),
        layers.Flatten(), layers.Dropout(0.2), layers.Dense(1, activation="sigmoid"),
    ], name="discriminator")  # fmt: skip
    generator = keras.Sequential([
        keras.Input(shape=(latent_dim,)),
        layers.Dense(4 * 4 * 64), layers.Reshape((4, 4, 64)),
        layers.Conv2DTranspose(64, kernel_size=4, strides=2, padding="same"), layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2DTranspose(64, kernel_size=4, strides=2, padding="same"), layers.LeakyReLU(negative_slope=0.2),
        layers.Conv2D(1, kernel_size=5, padding="same", activation="sigmoid"),
    ], name="generator")  # fmt: skip

    class GAN(keras.Model):
        def __init__(self, discriminator: Any, generator: Any, latent_dim: int) -> None:
            super().__init__()
            self.discriminator, self.generator, self.latent_dim = discriminator, generator, latent_dim
            self.seed_generator = keras.random.SeedGenerator(1337)

        def compile(self, d_optimizer: Any, g_optimizer: Any, loss_fn: Any) -> None:
            super().compile()
            self.d_optimizer, self.g_optimizer, self.loss_fn = d_optimizer, g_optimizer, loss_fn
            self.d_loss_metric = keras.metrics.Mean(name="d_loss")
            self.g_loss_metric = keras.metrics.Mean(name="g_loss")

        @property
        def metrics(self) -> list[Any]:
            return [self.d_loss_metric, self.g_loss_metric]

        def train_step(self, real_images: Any) -> dict[str, Any]:
            batch_size = ops.shape(real_images)[0]
            noise = keras.random.normal(shape=(batch_size, self.latent_dim), seed=self.seed_generator)
            generated_images = self.generator(noise)
            combined_images = ops.concatenate([generated_images, real_images], axis=0)
            labels = ops.concatenate([ops.ones((batch_size, 1)), ops.zeros((batch_size, 1))], axis=0)
            labels += 0.05 * tf.random.uniform(tf.shape(labels))
            with tf.GradientTape() as tape:
                predictions = self.discriminator(combined_images)
                d_loss = self.loss_fn(labels, predictions)
            grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
            self.d_optimizer.apply_gradients(zip(grads, self.discriminator.trainable_weights, strict=True))
            noise = keras.random.normal(shape=(batch_size, self.latent_dim), seed=self.seed_generator)
            misleading_labels = ops.zeros((batch_size, 1))
            with tf.GradientTape() as tape:
                predictions = self.discriminator(self.generator(noise))
                g_loss = self.loss_fn(misleading_labels, predictions)
            grads = tape.gradient(g_loss, self.generator.trainable_weights)
            self.g_optimizer.apply_gradients(zip(grads, self.generator.trainable_weights, strict=True))
            self.d_loss_metric.update_state(d_loss)
            self.g_loss_metric.update_state(g_loss)
            return {"d_loss": self.d_loss_metric.result(), "g_loss": self.g_loss_metric.result()}

    gan = GAN(discriminator=discriminator, generator=generator, latent_dim=latent_dim)
    gan.compile(
        d_optimizer=keras.optimizers.Adam(learning_rate=0.0001),
        g_optimizer=keras.optimizers.Adam(learning_rate=0.0001),
        loss_fn=keras.losses.BinaryCrossentropy(),
    )
    history = _keras_losses("d_loss")
    gan.fit(x, batch_size=64, epochs=4, verbose=0, callbacks=[mldbg.keras.Hook(path), history])
    return history.losses


def keras_switch_transformer_text(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras example "Text classification with Switch Transformer": token and position
    embeddings, one Transformer block whose feed-forward is a `Switch` layer (8 experts instead of
    10, a `Router` with multiplicative jitter in training, top-1 routing, the expert capacity
    `tokens_per_batch // num_experts`, the load-balancing loss through `self.add_loss`),
    `GlobalAveragePooling1D`, dropout, a softmax head, `Adam(0.001)`,
    `sparse_categorical_crossentropy`; batch 50 (the router's fixed token count), 2 epochs."""
    import keras
    from keras import layers, ops

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    vocab_size, num_tokens_per_example, batch_size = 600, 40, 50
    embed_dim, num_heads, ff_dim, num_experts = 32, 2, 32, 8
    num_tokens_per_batch = batch_size * num_tokens_per_example
    texts, y = _reviews(rng, 2000, num_tokens_per_example, vocab_size)
    x = np.array([[int(w[1:]) for w in t.split()] for t in texts])

    def create_feedforward_network(ff_dim: int, embed_dim: int, name: str | None = None) -> Any:
        return keras.Sequential([layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)], name=name)

    def load_balanced_loss(router_probs: Any, expert_mask: Any) -> Any:
        num_experts = ops.shape(expert_mask)[-1]
        density = ops.mean(expert_mask, axis=0)
        density_proxy = ops.mean(router_probs, axis=0)
        return ops.mean(density_proxy * density) * ops.cast((num_experts**2), "float32")

    class Router(layers.Layer):
        def __init__(self, num_experts: int, expert_capacity: int) -> None:
            self.num_experts = num_experts
            self.route = layers.Dense(units=num_experts)
            self.expert_capacity = expert_capacity
            super().__init__()

        def call(self, inputs: Any, training: bool = False) -> Any:
            router_logits = self.route(inputs)
            if training:
                router_logits += keras.random.uniform(shape=router_logits.shape, minval=0.9, maxval=1.1)
            router_probs = keras.activations.softmax(router_logits, axis=-1)
            expert_gate, expert_index = ops.top_k(router_probs, k=1)
            expert_mask = ops.one_hot(expert_index, self.num_experts)
            self.add_loss(load_balanced_loss(router_probs, expert_mask))
            position_in_expert = ops.cast(ops.cumsum(expert_mask, axis=0) * expert_mask, "int32")
            expert_mask *= ops.cast(ops.less(position_in_expert, self.expert_capacity), "float32")
            expert_mask_flat = ops.sum(expert_mask, axis=-1)
            expert_gate *= expert_mask_flat
            combined_tensor = ops.expand_dims(
                expert_gate * expert_mask_flat * ops.squeeze(ops.one_hot(expert_index, self.num_experts), 1),
                -1,
            ) * ops.squeeze(ops.one_hot(position_in_expert, self.expert_capacity), 1)
            dispatch_tensor = ops.cast(combined_tensor, "float32")
            return dispatch_tensor, combined_tensor

    class Switch(layers.Layer):
        def __init__(self, num_experts: int, embed_dim: int, ff_dim: int, num_tokens_per_batch: int) -> None:
            self.num_experts, self.embed_dim = num_experts, embed_dim
            self.experts = [create_feedforward_network(ff_dim, embed_dim) for _ in range(num_experts)]
            self.expert_capacity = num_tokens_per_batch // self.num_experts
            self.router = Router(self.num_experts, self.expert_capacity)
            super().__init__()

        def call(self, inputs: Any) -> Any:
            batch = ops.shape(inputs)[0]
            tokens = ops.shape(inputs)[1]
            inputs = ops.reshape(inputs, [num_tokens_per_batch, self.embed_dim])
            dispatch_tensor, combine_tensor = self.router(inputs)
            expert_inputs = ops.einsum("ab,acd->cdb", inputs, dispatch_tensor)
            expert_inputs = ops.reshape(
                expert_inputs, [self.num_experts, self.expert_capacity, self.embed_dim]
            )
            expert_input_list = ops.unstack(expert_inputs, axis=0)
            expert_output_list = [
                self.experts[i](expert_input) for i, expert_input in enumerate(expert_input_list)
            ]
            expert_outputs = ops.stack(expert_output_list, axis=1)
            expert_outputs_combined = ops.einsum("abc,xba->xc", expert_outputs, combine_tensor)
            return ops.reshape(expert_outputs_combined, [batch, tokens, self.embed_dim])

    class TransformerBlock(layers.Layer):
        def __init__(self, embed_dim: int, num_heads: int, ffn: Any, dropout_rate: float = 0.1) -> None:
            super().__init__()
            self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
            self.ffn = ffn
            self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
            self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
            self.dropout1 = layers.Dropout(dropout_rate)
            self.dropout2 = layers.Dropout(dropout_rate)

        def call(self, inputs: Any, training: bool = False) -> Any:
            attn_output = self.dropout1(self.att(inputs, inputs), training=training)
            out1 = self.layernorm1(inputs + attn_output)
            ffn_output = self.dropout2(self.ffn(out1), training=training)
            return self.layernorm2(out1 + ffn_output)

    class TokenAndPositionEmbedding(layers.Layer):
        def __init__(self, maxlen: int, vocab_size: int, embed_dim: int) -> None:
            super().__init__()
            self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
            self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

        def call(self, x: Any) -> Any:
            positions = self.pos_emb(ops.arange(start=0, stop=ops.shape(x)[-1], step=1))
            return self.token_emb(x) + positions

    switch = Switch(num_experts, embed_dim, ff_dim, num_tokens_per_batch)
    inputs = layers.Input(shape=(num_tokens_per_example,), batch_size=batch_size)
    h = TokenAndPositionEmbedding(num_tokens_per_example, vocab_size, embed_dim)(inputs)
    h = TransformerBlock(embed_dim, num_heads, switch)(h)
    h = layers.GlobalAveragePooling1D()(h)
    h = layers.Dropout(0.1)(h)
    h = layers.Dense(ff_dim, activation="relu")(h)
    h = layers.Dropout(0.1)(h)
    outputs = layers.Dense(2, activation="softmax")(h)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(0.001), loss="sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    history = _keras_losses()
    model.fit(
        x[:1500], y[:1500], batch_size=batch_size, epochs=2, validation_data=(x[1500:], y[1500:]), verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_grn_vsn_tabular(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras example "Classification with Gated Residual and Variable Selection Networks":
    each feature encoded (numeric: a linear projection of `expand_dims`; categorical: an
    `Embedding` of `encoding_size`), a `VariableSelection` layer (one `GatedResidualNetwork` per
    feature, a GRN over their concatenation giving softmax weights), a sigmoid output,
    `Adam(learning_rate=0.001)`, `BinaryCrossentropy`, batch 128, 2 epochs with validation
    data; an income-like table of 4 numeric and 2 categorical features."""
    import keras
    from keras import layers, ops

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    n, encoding_size, dropout_rate = 4400, 16, 0.15
    age = rng.uniform(18, 80, n)
    hours = rng.normal(40, 10, n)
    education = rng.integers(1, 17, n)
    gain = rng.exponential(1.0, n) * (rng.random(n) < 0.1)
    occupation, marital = rng.integers(0, 12, n), rng.integers(0, 5, n)
    occ_effect, mar_effect = rng.normal(0, 0.8, 12), rng.normal(0, 0.8, 5)
    logit = (
        -1.0 + 0.04 * (age - 40) - 0.0006 * (age - 45) ** 2 * 10 + 0.03 * (hours - 40) + 0.25 * (education - 9)
        + 1.5 * gain + occ_effect[occupation] + mar_effect[marital]
    )  # fmt: skip
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype("float32")
    numeric = [(age - 45) / 15, (hours - 40) / 10, (education - 9) / 4, gain]
    categorical = [(occupation, 12), (marital, 5)]

    class GatedLinearUnit(layers.Layer):
        def __init__(self, units: int) -> None:
            super().__init__()
            self.linear = layers.Dense(units)
            self.sigmoid = layers.Dense(units, activation="sigmoid")

        def call(self, inputs: Any) -> Any:
            return self.linear(inputs) * self.sigmoid(inputs)

    class GatedResidualNetwork(layers.Layer):
        def __init__(self, units: int, dropout_rate: float) -> None:
            super().__init__()
            self.units = units
            self.elu_dense = layers.Dense(units, activation="elu")
            self.linear_dense = layers.Dense(units)
            self.dropout = layers.Dropout(dropout_rate)
            self.gated_linear_unit = GatedLinearUnit(units)
            self.layer_norm = layers.LayerNormalization()
            self.project = layers.Dense(units)

        def call(self, inputs: Any) -> Any:
            x = self.elu_dense(inputs)
            x = self.linear_dense(x)
            x = self.dropout(x)
            if inputs.shape[-1] != self.units:
                inputs = self.project(inputs)
            x = inputs + self.gated_linear_unit(x)
            return self.layer_norm(x)

    class VariableSelection(layers.Layer):
        def __init__(self, num_features: int, units: int, dropout_rate: float) -> None:
            super().__init__()
            self.grns = [GatedResidualNetwork(units, dropout_rate) for _ in range(num_features)]
            self.grn_concat = GatedResidualNetwork(units, dropout_rate)
            self.softmax = layers.Dense(units=num_features, activation="softmax")

        def call(self, inputs: list[Any]) -> Any:
            v = layers.concatenate(inputs)
            v = self.grn_concat(v)
            v = ops.expand_dims(self.softmax(v), axis=-1)
            x = ops.stack([self.grns[i](inp) for i, inp in enumerate(inputs)], axis=1)
            return ops.squeeze(ops.matmul(ops.transpose(v, axes=[0, 2, 1]), x), axis=1)

    num_inputs = [keras.Input(shape=(1,), name=f"num_{i}") for i in range(len(numeric))]
    cat_inputs = [keras.Input(shape=(), dtype="int32", name=f"cat_{i}") for i in range(len(categorical))]
    encoded = [layers.Dense(encoding_size)(inp) for inp in num_inputs]
    encoded += [
        layers.Embedding(card, encoding_size)(inp)
        for inp, (_, card) in zip(cat_inputs, categorical, strict=True)
    ]
    features = VariableSelection(len(encoded), encoding_size, dropout_rate)(encoded)
    outputs = layers.Dense(units=1, activation="sigmoid")(features)
    model = keras.Model(inputs=num_inputs + cat_inputs, outputs=outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=0.001), loss=keras.losses.BinaryCrossentropy(),
        metrics=[keras.metrics.BinaryAccuracy(name="accuracy")],
    )  # fmt: skip
    columns = [c[:, None].astype("float32") for c in numeric] + [c.astype("int32") for c, _ in categorical]
    train = [c[:4000] for c in columns]
    valid = [c[4000:] for c in columns]
    history = _keras_losses()
    model.fit(
        train, y[:4000], batch_size=128, epochs=2, validation_data=(valid, y[4000:]), verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


def keras_text_conv1d_from_scratch(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Keras example "Text classification from scratch": a `TextVectorization(max_tokens,
    output_mode="int", output_sequence_length)` layer adapted on the training texts and applied
    to the data, then `Embedding`, `Dropout(0.5)`, two `Conv1D(128, 7, strides=3, relu)`,
    `GlobalMaxPooling1D`, `Dense(128, relu)`, `Dropout(0.5)`, a sigmoid output,
    `loss="binary_crossentropy"`, `optimizer="adam"`, batch 32, 3 epochs with validation data."""
    import keras
    from keras import layers

    import mldbg.keras

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    texts, y = _reviews(rng, 3000, 120)
    max_features, embedding_dim, sequence_length = 2000, 64, 120
    vectorize_layer = layers.TextVectorization(
        max_tokens=max_features, output_mode="int", output_sequence_length=sequence_length
    )
    vectorize_layer.adapt(texts[:2600])
    x = np.asarray(vectorize_layer(texts))
    inputs = keras.Input(shape=(None,), dtype="int64")
    h = layers.Embedding(max_features, embedding_dim)(inputs)
    h = layers.Dropout(0.5)(h)
    h = layers.Conv1D(128, 7, padding="valid", activation="relu", strides=3)(h)
    h = layers.Conv1D(128, 7, padding="valid", activation="relu", strides=3)(h)
    h = layers.GlobalMaxPooling1D()(h)
    h = layers.Dense(128, activation="relu")(h)
    h = layers.Dropout(0.5)(h)
    predictions = layers.Dense(1, activation="sigmoid", name="predictions")(h)
    model = keras.Model(inputs, predictions)
    # "adam" is Adam(learning_rate=0.001); the buggy twin spells out a learning rate a hundred times that
    optimizer = keras.optimizers.Adam(learning_rate=0.1) if bug == "lr_x100" else "adam"
    model.compile(loss="binary_crossentropy", optimizer=optimizer, metrics=["accuracy"])
    history = _keras_losses()
    model.fit(
        x[:2600], y[:2600], batch_size=32, epochs=3, validation_data=(x[2600:], y[2600:]), verbose=0,
        callbacks=[mldbg.keras.Hook(path), history],
    )  # fmt: skip
    return history.losses


# ============================================================================= Hugging Face Trainer


def hf_llama_sft_neftune(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Supervised fine-tuning as an SFT script does it with the plain `Trainer`: prompt and
    response concatenated, the prompt's tokens and the padding set to -100 in `labels` (the loss
    on the response only), `neftune_noise_alpha=5` (NEFTune: uniform noise on the input
    embeddings in training); a tiny random `LlamaForCausalLM` (hidden 64, 2 layers, grouped-query
    attention 4/2); four "instructions" (copy, reverse, sort, add one) on 4 to 10 tokens of a
    Markov "language"; lr 1e-3,
    cosine with 3% warm-up, batch 16, 3 epochs."""
    from transformers import LlamaConfig, LlamaForCausalLM

    g = _seed(seed)
    n, length, pad, bos, eos, sep = 1280, 32, 0, 1, 2, 3
    tasks, first_token, vocab = 4, 8, 48
    stream = first_token + _markov_tokens(g, n * 10, vocab - first_token - 1, order_seed=1717)
    ids = torch.full((n, length), pad)
    labels = torch.full((n, length), -100)
    mask = torch.zeros(n, length, dtype=torch.long)
    for i in range(n):
        task = int(torch.randint(0, tasks, (1,), generator=g))
        k = int(torch.randint(4, 11, (1,), generator=g))
        seq = stream[10 * i : 10 * i + k]
        answer = [seq, seq.flip(0), seq.sort().values, seq + 1][task]
        prompt = torch.cat([torch.tensor([bos, 4 + task]), seq, torch.tensor([sep])])
        response = torch.cat([answer, torch.tensor([eos])])
        full = torch.cat([prompt, response])
        ids[i, : len(full)] = full
        mask[i, : len(full)] = 1
        labels[i, len(prompt) : len(full)] = response
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=length, pad_token_id=pad, bos_token_id=bos, eos_token_id=eos,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    train = _Examples(input_ids=ids[:1152], attention_mask=mask[:1152], labels=labels[:1152])
    val = _Examples(input_ids=ids[1152:], attention_mask=mask[1152:], labels=labels[1152:])
    return _hf_train(
        path, model, train, val, num_train_epochs=3, per_device_train_batch_size=16, learning_rate=1e-3,
        lr_scheduler_type="cosine", warmup_steps=0.03, neftune_noise_alpha=5.0, remove_unused_columns=False,
    )  # fmt: skip


def hf_resnet_plain_sgd_restarts(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Image classification with a tiny random `ResNetForImageClassification` (basic blocks,
    hidden sizes 16-32-64, one block a stage) and the Trainer's plain SGD (`optim="sgd"`, lr
    0.1, weight decay 1e-4), `lr_scheduler_type="cosine_with_restarts"` with two cycles
    (`lr_scheduler_kwargs`), 5% warm-up, batch 32, 3 epochs; 16x16 images normalized with the
    ImageNet mean and std."""
    from transformers import ResNetConfig, ResNetForImageClassification

    g = _seed(seed)
    x, y = _images(g, 1920, size=16, proto_seed=8080)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    pixel_values = (x - mean) / std
    config = ResNetConfig(
        num_channels=3, embedding_size=16, hidden_sizes=[16, 32, 64], depths=[1, 1, 1], layer_type="basic",
        num_labels=10, downsample_in_first_stage=False,
    )  # fmt: skip
    model = ResNetForImageClassification(config)
    train = _Examples(pixel_values=pixel_values[:1664], labels=y[:1664])
    val = _Examples(pixel_values=pixel_values[1664:], labels=y[1664:])
    return _hf_train(
        path, model, train, val, num_train_epochs=3, per_device_train_batch_size=32, learning_rate=0.1,
        weight_decay=1e-4, optim="sgd", lr_scheduler_type="cosine_with_restarts",
        lr_scheduler_kwargs={"num_cycles": 2}, warmup_steps=0.05, remove_unused_columns=False,
    )  # fmt: skip


def hf_vision_encoder_decoder_captioning(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """Image captioning with `VisionEncoderDecoderModel(encoder=ViTModel, decoder=GPT2LMHeadModel)`
    (tiny random configs, the decoder with `add_cross_attention=True`), `decoder_start_token_id`
    and `pad_token_id` set on the model's config, captions padded with -100 in `labels` (the model
    shifts them right itself); each caption names the object's class, its brightness and the
    background's; lr 5e-4, linear decay, 10% warm-up, batch 32, 4 epochs."""
    from transformers import GPT2Config, GPT2LMHeadModel, VisionEncoderDecoderModel, ViTConfig, ViTModel

    g = _seed(seed)
    x, y = _images(g, 1408, size=16, proto_seed=9393)
    pad, bos, eos = 0, 1, 2
    background = x[:, :, :2, :2].mean((1, 2, 3))
    brightness = x.amax((1, 2, 3))
    captions = torch.stack([
        3 + y, 13 + torch.bucketize(brightness, torch.tensor([0.6, 0.8])),
        16 + torch.bucketize(background, torch.tensor([0.1, 0.2, 0.3])), torch.full_like(y, eos),
    ], 1)  # fmt: skip
    labels = torch.full((len(y), 6), -100)
    labels[:, :4] = captions
    mean = torch.tensor([0.5, 0.5, 0.5]).view(1, 3, 1, 1)
    pixel_values = (x - mean) / 0.5
    encoder = ViTModel(ViTConfig(
        image_size=16, patch_size=4, num_channels=3, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128,
    ), add_pooling_layer=False)  # fmt: skip
    decoder = GPT2LMHeadModel(GPT2Config(
        vocab_size=24, n_positions=16, n_embd=64, n_layer=2, n_head=4, add_cross_attention=True, is_decoder=True,
        bos_token_id=bos, eos_token_id=eos, pad_token_id=pad,
    ))  # fmt: skip
    model = VisionEncoderDecoderModel(encoder=encoder, decoder=decoder)
    model.config.decoder_start_token_id = bos
    model.config.pad_token_id = pad
    train = _Examples(pixel_values=pixel_values[:1280], labels=labels[:1280])
    val = _Examples(pixel_values=pixel_values[1280:], labels=labels[1280:])
    return _hf_train(
        path, model, train, val, num_train_epochs=4, per_device_train_batch_size=32, learning_rate=5e-4,
        warmup_steps=0.1, remove_unused_columns=False,
    )  # fmt: skip


def hf_trainer_own_module_tabular(path: str, seed: int = 0, bug: str | None = None) -> list[float]:
    """The Trainer on a model of the user's own: a plain `nn.Module` (categorical embeddings of
    size min(16, (cardinality + 1) // 2), numeric features, a 128-64 ReLU MLP with dropout) whose
    `forward(x_cat, x_num, labels=None)` returns `{"loss": ..., "logits": ...}`,
    `label_names=["labels"]`, `lr_scheduler_type="inverse_sqrt"` after 50 warm-up steps, lr 2e-3,
    batch 64, 4 epochs; 5 classes of a covertype-like table."""
    g = _seed(seed)
    n, n_num = 5120, 6
    cardinalities = [7, 24, 40]
    x_num = torch.randn(n, n_num, generator=g)
    x_cat = torch.stack([torch.randint(0, c, (n,), generator=g) for c in cardinalities], 1)
    effects = [torch.randn(c, 5, generator=g) for c in cardinalities]
    logits = (
        sum(e[x_cat[:, j]] for j, e in enumerate(effects))
        + x_num[:, :5] * 1.2
        + 0.5 * torch.randn(n, 5, generator=g)
    )
    y = logits.argmax(1)

    class TabularModel(nn.Module):
        def __init__(self, cardinalities: list[int], n_num: int, n_classes: int) -> None:
            super().__init__()
            dims = [min(16, (c + 1) // 2) for c in cardinalities]
            self.embeddings = nn.ModuleList(
                [nn.Embedding(c, k) for c, k in zip(cardinalities, dims, strict=True)]
            )
            self.mlp = nn.Sequential(
                nn.Linear(sum(dims) + n_num, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 64), nn.ReLU(),
                nn.Linear(64, n_classes),
            )  # fmt: skip

        def forward(
            self, x_cat: torch.Tensor, x_num: torch.Tensor, labels: torch.Tensor | None = None
        ) -> dict[str, Any]:
            emb = [e(x_cat[:, j]) for j, e in enumerate(self.embeddings)]
            logits = self.mlp(torch.cat([*emb, x_num], 1))
            if bug == "softmax_before_ce":  # the model returns probabilities, and the loss reuses them
                logits = logits.softmax(-1)
            loss = F.cross_entropy(logits, labels) if labels is not None else None
            return {"loss": loss, "logits": logits}

    model = TabularModel(cardinalities, n_num, 5)
    train = _Examples(x_cat=x_cat[:4608], x_num=x_num[:4608], labels=y[:4608])
    val = _Examples(x_cat=x_cat[4608:], x_num=x_num[4608:], labels=y[4608:])
    return _hf_train(
        path, model, train, val, num_train_epochs=4, per_device_train_batch_size=64, learning_rate=2e-3,
        lr_scheduler_type="inverse_sqrt", warmup_steps=50, label_names=["labels"], remove_unused_columns=False,
    )  # fmt: skip


_timm_bce = healthy(
    "timm_bce_loss_resnet_mixup_cutmix", "timm BCE-loss training (ResNet)", timm_bce_loss_resnet
)
_dqn = healthy("pytorch_tutorial_dqn_soft_update_amsgrad", "PyTorch DQN tutorial", pytorch_tutorial_dqn)
PIPELINES: list[Any] = [
    healthy(
        "pytorch_tutorial_polynomial_sin_rmsprop_sum_mse",
        "PyTorch tutorial polynomial fit (RMSprop)",
        pytorch_tutorial_polynomial_rmsprop,
    ),
    _dqn,
    healthy(
        "pytorch_tutorial_char_rnn_name_generation",
        "PyTorch char-RNN generation tutorial",
        pytorch_tutorial_char_rnn_generation,
    ),
    _timm_bce,
    buggy(_timm_bce, "inputs_x255"),
    buggy(_dqn, "no_zero_grad"),
]

if installed("transformers", "accelerate"):
    _clm = healthy(
        "hf_run_clm_no_trainer_gpt2_group_texts", "HF run_clm_no_trainer (accelerate)", hf_run_clm_no_trainer
    )
    _hf_own = healthy(
        "hf_trainer_own_nn_module_tabular_inverse_sqrt",
        "HF Trainer on a plain nn.Module",
        hf_trainer_own_module_tabular,
    )
    PIPELINES += [
        _clm,
        healthy(
            "hf_trainer_llama_sft_masked_prompt_neftune",
            "HF Trainer Llama SFT (NEFTune)",
            hf_llama_sft_neftune,
        ),
        healthy(
            "hf_trainer_resnet_plain_sgd_cosine_restarts",
            "HF Trainer ResNet image classification",
            hf_resnet_plain_sgd_restarts,
        ),
        healthy(
            "hf_trainer_vision_encoder_decoder_captioning",
            "HF Trainer VisionEncoderDecoder captioning",
            hf_vision_encoder_decoder_captioning,
        ),
        _hf_own,
        buggy(_clm, "train_in_eval_mode"),
        buggy(_hf_own, "softmax_before_ce"),
    ]

if installed("lightning"):
    _lit_prune = healthy(
        "lightning_model_pruning_l1_cnn", "Lightning ModelPruning CNN", lit_model_pruning_cnn
    )
    _lit_multi = healthy(
        "lightning_combined_loader_two_task_trunk",
        "Lightning CombinedLoader multi-task",
        lit_combined_loader_multitask,
    )
    PIPELINES += [
        _lit_prune,
        healthy(
            "lightning_lbfgs_automatic_closure_curve_fit",
            "Lightning LBFGS (automatic optimization)",
            lit_lbfgs_automatic_optimization,
        ),
        _lit_multi,
        healthy("lightning_full_graph_gcn_masks", "Lightning full-graph GCN", lit_full_graph_gcn),
        buggy(_lit_prune, "frozen_by_mistake"),
        buggy(_lit_multi, "dead_relu_init"),
    ]

if installed("keras", "tensorflow"):
    _keras_text = healthy(
        "keras_text_vectorization_conv1d_from_scratch",
        "Keras text classification from scratch",
        keras_text_conv1d_from_scratch,
    )
    PIPELINES += [
        healthy(
            "keras_dcgan_custom_train_step", "Keras DCGAN (custom train_step)", keras_dcgan_custom_train_step
        ),
        healthy(
            "keras_switch_transformer_text_classification",
            "Keras Switch Transformer (MoE)",
            keras_switch_transformer_text,
        ),
        healthy("keras_grn_variable_selection_tabular", "Keras GRN/VSN tabular", keras_grn_vsn_tabular),
        _keras_text,
        buggy(_keras_text, "lr_x100"),
    ]

if installed("jax", "optax", "flax"):
    _flax_gin = healthy(
        "flax_gin_segment_sum_lion", "Flax GIN graph classification (Lion)", flax_gin_segment_sum_lion
    )
    _nnx_sf = healthy(
        "flax_linen_schedule_free_adamw_regression", "Flax schedule-free AdamW", linen_schedule_free_adamw
    )
    PIPELINES += [
        healthy(
            "flax_multi_transform_adagrad_embed_adamw_dense",
            "Flax optax.multi_transform text classifier",
            flax_multi_transform_bag_of_words,
        ),
        healthy(
            "optax_reduce_on_plateau_flax_regression",
            "Optax reduce_on_plateau regression",
            optax_reduce_on_plateau_regression,
        ),
        _flax_gin,
        _nnx_sf,
        buggy(_flax_gin, "log_zero_nan"),
        buggy(_nnx_sf, "deep_sigmoid"),
    ]

if installed("xgboost"):
    PIPELINES += [
        healthy(
            "xgboost_gblinear_coordinate_descent", "XGBoost linear booster", xgb_gblinear_coordinate_descent
        ),
        healthy(
            "xgboost_tweedie_lr_scheduler_lossguide_monotone",
            "XGBoost Tweedie (learning-rate schedule)",
            xgb_tweedie_lr_scheduler_lossguide,
        ),
    ]

if installed("xgboost", "pandas"):
    _xgb_imb = healthy(
        "xgboost_imbalanced_scale_pos_weight_aucpr",
        "XGBoost imbalanced binary",
        xgb_imbalanced_scale_pos_weight,
    )
    PIPELINES += [_xgb_imb, buggy(_xgb_imb, "shuffled_labels")]
