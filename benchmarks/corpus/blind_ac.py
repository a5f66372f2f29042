"""The twenty-second blind held-out set (issue 26), part AC: third-party training scripts as users
copy them from the most-starred public repositories, official examples and tutorials, each shrunk
to tiny data generated in-process and a few hundred steps, keeping the script's own idioms (its
optimizer, schedule, clipping, logging, evaluation loop, and its loss computed the way it computes
it). Fixed seeds, one CPU thread. Plain PyTorch loops with the README's two lines
(`register_loss` where the script has a loss module) and trainings through tools with their one
callback.

karpathy: micrograd's demo notebook in torch (`make_moons`, `MLP(2, [16, 16, 1])` with uniform
init, the SVM max-margin loss `(1 - y * score).relu()` plus an L2 term, full batch, the update by
hand at a linearly decaying lr); min-char-rnn (one-hot vanilla RNN parameters as
`nn.Parameter`s, the softmax as `exp / sum(exp)`, the loss summed over 25 characters, gradients
clipped to [-5, 5] by value, Adagrad 0.1, the carried hidden state); nn-zero-to-hero's makemore
part 3 "torchified" (a 3-character context, five `Linear(bias=False)` / `BatchNorm1d` / `Tanh`
blocks with the 5/3 gain, the last BatchNorm's gamma scaled by 0.1, `p.grad = None`, the update
by hand with a step decay, `lossi` in log10, `split_loss` under `model.eval()`).

PyTorch tutorials: the chatbot tutorial (one embedding shared by a bidirectional GRU encoder and a
Luong dot-attention decoder returning softmax probabilities, `maskNLLLoss` as
`-log(gather(...))` over the unpadded positions, two Adam optimizers with the decoder at 5 times
the lr, clipping at 50); the "Word Embeddings" tutorial's N-gram language model (one trigram per
step, `log_softmax` with `NLLLoss`, plain SGD, `model.zero_grad()`); "What is torch.nn really?"
(784-float rows, `WrappedDataLoader` with `preprocess`, an `nn.Sequential` CNN with
`AdaptiveAvgPool2d` and a `Lambda` flatten, `loss_batch` / `fit`, SGD momentum, the validation
loss weighted by batch sizes); torchaudio's speech-commands tutorial (the M5 network on raw
waveforms, `F.log_softmax(dim=2)` with `F.nll_loss(output.squeeze(), target)`, Adam lr 0.01 with
weight decay, `StepLR(20, 0.1)`).

Public repositories: Spinning Up's reward-to-go policy gradient (`2_rtg_pg.py`: a Tanh MLP
policy, `Categorical(logits=...)`, one Adam step per batch of whole episodes on a hand-written
cart-pole; the returned losses are the surrogate, which rises as the returns do);
eriklindernoren/PyTorch-GAN's BEGAN (an autoencoder discriminator under L1 reconstruction, the
equilibrium variable `k` updated by `lambda_k * (gamma * L_real - L_fake)`, the convergence
measure `M` returned); ultralytics/yolov5's `classify/train.py` (Conv-BN-SiLU and C3 blocks,
`smart_optimizer`'s three Adam groups, a linear `LambdaLR` to `lrf`, `ModelEMA` with its tau
ramp, label smoothing 0.1, bf16 autocast on CPU with a `torch.amp.GradScaler`, `unscale_` then
norm clipping at 10, the EMA model validated); kuangliu/pytorch-cifar's `main.py` with
ShuffleNetV2 (channel split and shuffle, SGD 0.1 with weight decay 5e-4, `CosineAnnealingLR`,
`train` / `test` functions, the best checkpoint kept); harvardnlp's The Annotated Transformer's
copy task (`data_gen`, the padding and subsequent masks, `LabelSmoothing` with
`KLDivLoss(reduction="sum")`, `SimpleLossCompute` dividing by the token count, Adam 0.5 under the
Noam `rate` through `LambdaLR`, `run_epoch` in train and eval mode); the nn.Transformer language
translation example (`Seq2SeqTransformer` on sequence-first batches, `create_mask`,
`CrossEntropyLoss(ignore_index=PAD_IDX)`, Adam betas (0.9, 0.98) eps 1e-9, `train_epoch` /
`evaluate`); sgrvinod's Show, Attend and Tell (soft attention with the `f_beta` gate, an
`LSTMCell` over a batch sorted by caption length and shrunk per step, `pack_padded_sequence` on
scores and targets, the doubly stochastic attention regularization, `clip_gradient` by value,
encoder and decoder Adam, `adjust_learning_rate` after epochs without improvement); the Hugging
Face course's chapter 7 causal-LM loop from scratch (a tiny `GPT2LMHeadModel`,
`keytoken_weighted_loss` from `outputs.logits`, `get_grouped_params`, AdamW with
`get_scheduler("cosine")`, gradient accumulation with the course's `step % 4 == 0`, clipping at 1,
`evaluate()` on `outputs.loss` with the perplexity).

Through tools: Lightning (`mldbg.lightning.DebuggerCallback`): the README / Trainer docs'
`LightningTransformer` around `lightning.pytorch.demos.Transformer` (`log_softmax` output,
`F.nll_loss`, SGD 0.1, the default batch size of one; as in the example the decoder is fed the
target sequence under a causal mask, so the loss falls fast).

Ten buggy twins, one of each bug of `BUGS`, injected the way the mistake appears in that kind of
script: the translation example's Adam at `lr=0.05` typed for 0.0005 (lr_x100); the N-gram
tutorial's `model.zero_grad()` left out (no_zero_grad); Show, Attend and Tell's captions read in
another order than the images (shuffled_labels); "torch.nn really"'s rows taken from the user's
own image bytes without the `/ 255` (inputs_x255); ShuffleNetV2's `forward` returning softmax
probabilities "for the confidence in `test()`" to `CrossEntropyLoss` (softmax_before_ce); M5
under an init helper filling every bias, BatchNorm's too, with -1 (dead_relu_init); micrograd's
MLP made "deeper" as eight sigmoid layers (deep_sigmoid); the chatbot's shared embedding frozen
by a line from the pre-trained word-vectors variant after both optimizers were built
(frozen_by_mistake); the Annotated Transformer's `KLDivLoss` written out by hand as
`sum(p * (log p - log q))`, whose zero targets give `0 * log 0` (log_zero_nan); makemore's
`split_loss` leaving the model in eval mode (train_in_eval_mode).

Written without ever running mldbg's rules on them; health was checked from the losses alone.
A pipeline whose framework is not installed is left out of `PIPELINES`; every framework is
imported inside its pipeline. `SPLIT = BLIND21`.
"""

from __future__ import annotations

import copy
import math
import random
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from mldbg.torch import Hook

from . import BLIND21, buggy, healthy, installed

SPLIT = BLIND21

torch.set_num_threads(1)


def _seed(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 2101)


def _moons(g: torch.Generator, n: int, noise: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """scikit-learn's `make_moons`, written here."""
    half = n // 2
    t1 = torch.rand(half, generator=g) * math.pi
    t2 = torch.rand(n - half, generator=g) * math.pi
    outer = torch.stack([torch.cos(t1), torch.sin(t1)], 1)
    inner = torch.stack([1 - torch.cos(t2), 1 - torch.sin(t2) - 0.5], 1)
    x = torch.cat([outer, inner]) + noise * torch.randn(n, 2, generator=g)
    y = torch.cat([torch.zeros(half), torch.ones(n - half)])
    perm = torch.randperm(n, generator=g)
    return x[perm], y[perm]


# ============================================================================= karpathy


class _MicroMLP(nn.Module):
    """micrograd's `MLP(2, [16, 16, 1])`: each neuron's weights uniform in [-1, 1], biases 0,
    ReLU on every layer but the last."""

    def __init__(self, sizes: list[int], act: type[nn.Module] = nn.ReLU) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            lin = nn.Linear(a, b)
            nn.init.uniform_(lin.weight, -1.0, 1.0)
            nn.init.zeros_(lin.bias)
            layers.append(lin)
            if i < len(sizes) - 2:
                layers.append(act())
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)


def micrograd_moons_max_margin(
    path: str, steps: int = 150, seed: int = 0, bug: str | None = None
) -> list[float]:
    """micrograd's demo notebook ported to torch: `make_moons(n_samples=100, noise=0.1)` with
    labels as -1 / +1, `MLP(2, [16, 16, 1])`, the "svm max-margin loss"
    `(1 + -yi * scorei).relu()` averaged plus an L2 term `alpha * sum(p * p)` with alpha 1e-4,
    full batch, `model.zero_grad()`, then the update by hand with the learning rate
    `1.0 - 0.9 * k / steps`, the accuracy printed every so often."""
    g = _seed(seed)
    x, y01 = _moons(g, 100)
    y = y01 * 2 - 1
    if bug == "deep_sigmoid":  # bug: "a deeper net", eight sigmoid layers for the two ReLU ones
        model = _MicroMLP([2] + [16] * 8 + [1], act=nn.Sigmoid)
    else:
        model = _MicroMLP([2, 16, 16, 1])
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for k in range(steps):
        scores = model(x)
        data_loss = (1 + -y * scores).relu().mean()
        alpha = 1e-4
        reg_loss = alpha * sum((p * p).sum() for p in model.parameters())
        total_loss = data_loss + reg_loss
        acc = ((y > 0) == (scores > 0)).float().mean().item()
        model.zero_grad()
        total_loss.backward()
        learning_rate = 1.0 - 0.9 * k / steps
        with torch.no_grad():
            for p in model.parameters():
                p -= learning_rate * p.grad
        losses.append(total_loss.item())
        if k % 25 == 0:
            print(f"step {k} loss {total_loss.item()}, accuracy {acc * 100}%")
    hook.close()
    return losses


def _char_text(g: torch.Generator, n: int) -> str:
    """A small corpus of repeated "words" from a fixed vocabulary in a Markov order."""
    words = ["the", "cat", "sat", "on", "mat", "and", "dog", "ran", "to", "a", "red", "ball", "then", "slept"]
    nxt = {w: [words[(i + j) % len(words)] for j in (1, 3, 5)] for i, w in enumerate(words)}
    w = "the"
    out = []
    while sum(len(s) + 1 for s in out) < n:
        out.append(w)
        w = nxt[w][int(torch.randint(0, 3, (1,), generator=g))]
    return " ".join(out) + "\n"


class _MinCharRNN(nn.Module):
    """min-char-rnn.py's parameters: Wxh, Whh, Why ~ randn * 0.01, bh and by zeros."""

    def __init__(self, vocab_size: int, hidden_size: int) -> None:
        super().__init__()
        self.Wxh = nn.Parameter(torch.randn(hidden_size, vocab_size) * 0.01)
        self.Whh = nn.Parameter(torch.randn(hidden_size, hidden_size) * 0.01)
        self.Why = nn.Parameter(torch.randn(vocab_size, hidden_size) * 0.01)
        self.bh = nn.Parameter(torch.zeros(hidden_size, 1))
        self.by = nn.Parameter(torch.zeros(vocab_size, 1))

    def forward(
        self, inputs: list[int], targets: list[int], hprev: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        hs = hprev
        loss = torch.zeros(())
        for t in range(len(inputs)):
            xs = torch.zeros(self.Wxh.shape[1], 1)
            xs[inputs[t]] = 1
            hs = torch.tanh(self.Wxh @ xs + self.Whh @ hs + self.bh)
            ys = self.Why @ hs + self.by
            ps = torch.exp(ys) / torch.sum(torch.exp(ys))
            loss = loss + -torch.log(ps[targets[t], 0])
        return loss, hs


def min_char_rnn_adagrad(path: str, iters: int = 400, seed: int = 0, bug: str | None = None) -> list[float]:
    """karpathy's min-char-rnn.py ported to torch: a vanilla RNN over one-hot characters,
    `seq_length = 25`, the loss summed over the 25 characters, the softmax written as
    `exp(ys) / sum(exp(ys))`, the hidden state carried from chunk to chunk (detached), every
    gradient clipped to [-5, 5] and Adagrad at `learning_rate = 1e-1`; the printed figure is the
    smoothed loss `smooth_loss * 0.999 + loss * 0.001`."""
    g = _seed(seed)
    data = _char_text(g, 4000)
    chars = sorted(set(data))
    char_to_ix = {ch: i for i, ch in enumerate(chars)}
    hidden_size, seq_length = 48, 25
    model = _MinCharRNN(len(chars), hidden_size)
    optimizer = torch.optim.Adagrad(model.parameters(), lr=1e-1)
    hook = Hook(path)
    hook.register_module(model)
    smooth_loss = -math.log(1.0 / len(chars)) * seq_length
    p = 0
    hprev = torch.zeros(hidden_size, 1)
    losses: list[float] = []
    for n in range(iters):
        if p + seq_length + 1 >= len(data):
            hprev = torch.zeros(hidden_size, 1)
            p = 0
        inputs = [char_to_ix[ch] for ch in data[p : p + seq_length]]
        targets = [char_to_ix[ch] for ch in data[p + 1 : p + seq_length + 1]]
        loss, hprev = model(inputs, targets, hprev)
        hprev = hprev.detach()
        optimizer.zero_grad()
        loss.backward()
        for param in model.parameters():
            param.grad.clamp_(-5, 5)  # np.clip(dparam, -5, 5, out=dparam)
        optimizer.step()
        smooth_loss = smooth_loss * 0.999 + loss.item() * 0.001
        if n % 100 == 0:
            print(f"iter {n}, loss: {smooth_loss:f}")
        losses.append(loss.item())
        p += seq_length
    hook.close()
    return losses


def _names(g: torch.Generator, n: int) -> list[str]:
    """Name-like words: syllables from a fixed set in a biased order."""
    onsets = ["a", "e", "ja", "ma", "li", "ro", "ka", "el", "so", "na", "ri", "ty", "be", "da"]
    ends = ["n", "a", "lyn", "ie", "ah", "o", "ra", "iel", "on", "y"]
    out = []
    for _ in range(n):
        k = int(torch.randint(1, 3, (1,), generator=g))
        w = "".join(onsets[int(torch.randint(0, len(onsets), (1,), generator=g))] for _ in range(k))
        out.append(w + ends[int(torch.randint(0, len(ends), (1,), generator=g))])
    return out


def makemore_batchnorm_tanh_mlp(
    path: str, steps: int = 600, seed: int = 0, bug: str | None = None
) -> list[float]:
    """nn-zero-to-hero's makemore part 3, "torchified": a context of 3 characters embedded in 10
    dimensions, five `Linear(bias=False)` + `BatchNorm1d` + `Tanh` blocks of 64 units and a
    final `Linear` + `BatchNorm1d`, the Kaiming gain 5/3 on the tanh layers, the last BatchNorm's
    gamma scaled by 0.1 "to be less confident", minibatches of 32, `F.cross_entropy`,
    `p.grad = None`, the update by hand at 0.1 then 0.01 for the last quarter, `lossi` kept as
    `log10` of the loss, a `split_loss('val')` under `model.eval()` every 150 steps."""
    g = _seed(seed)
    words = _names(g, 800)
    chars = sorted(set("".join(words)))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi["."] = 0
    vocab_size, block_size = len(stoi), 3

    def build_dataset(ws: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        xs, ys = [], []
        for w in ws:
            context = [0] * block_size
            for ch in w + ".":
                ix = stoi[ch]
                xs.append(context)
                ys.append(ix)
                context = context[1:] + [ix]
        return torch.tensor(xs), torch.tensor(ys)

    Xtr, Ytr = build_dataset(words[:700])
    Xdev, Ydev = build_dataset(words[700:])
    n_embd, n_hidden = 10, 64
    layers: list[nn.Module] = [nn.Embedding(vocab_size, n_embd), nn.Flatten()]
    fan_in = n_embd * block_size
    for _ in range(5):
        layers += [nn.Linear(fan_in, n_hidden, bias=False), nn.BatchNorm1d(n_hidden), nn.Tanh()]
        fan_in = n_hidden
    layers += [nn.Linear(n_hidden, vocab_size, bias=False), nn.BatchNorm1d(vocab_size)]
    model = nn.Sequential(*layers)
    with torch.no_grad():
        for layer in model:
            if isinstance(layer, nn.Linear):
                layer.weight *= 5 / 3 / math.sqrt(layer.in_features) / layer.weight.std()
        model[-1].weight *= 0.1
    hook = Hook(path)
    hook.register_module(model)

    @torch.no_grad()
    def split_loss(split: str) -> float:
        model.eval()
        x, y = {"train": (Xtr, Ytr), "val": (Xdev, Ydev)}[split]
        loss = F.cross_entropy(model(x), y)
        print(split, loss.item())
        if bug != "train_in_eval_mode":  # bug: the notebook cell's eval never undone
            model.train()
        return loss.item()

    losses: list[float] = []
    lossi: list[float] = []
    for i in range(steps):
        ix = torch.randint(0, Xtr.shape[0], (32,), generator=g)
        Xb, Yb = Xtr[ix], Ytr[ix]
        logits = model(Xb)
        loss = F.cross_entropy(logits, Yb)
        for p in model.parameters():
            p.grad = None
        loss.backward()
        lr = 0.1 if i < steps * 3 // 4 else 0.01
        with torch.no_grad():
            for p in model.parameters():
                p += -lr * p.grad
        lossi.append(loss.log10().item())
        losses.append(loss.item())
        if i % 150 == 149:
            split_loss("val")
    hook.close()
    return losses


# ============================================================================= PyTorch tutorials


def _qa_pairs(g: torch.Generator, n: int, vocab: int) -> list[tuple[list[int], list[int]]]:
    """Question/answer pairs of word ids (4 .. vocab): the answer is the question's words mapped
    through a fixed permutation and reversed, lengths 3 to 7."""
    perm = torch.randperm(vocab - 3, generator=g) + 3
    pairs = []
    for _ in range(n):
        length = int(torch.randint(3, 8, (1,), generator=g))
        q = (torch.randint(3, vocab, (length,), generator=g)).tolist()
        a = [int(perm[w - 3]) for w in reversed(q)]
        pairs.append((q, a))
    return pairs


class _EncoderRNN(nn.Module):
    def __init__(self, hidden_size: int, embedding: nn.Embedding, n_layers: int = 1) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = embedding
        self.gru = nn.GRU(hidden_size, hidden_size, n_layers, bidirectional=True)

    def forward(
        self, input_seq: torch.Tensor, input_lengths: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        embedded = self.embedding(input_seq)
        packed = nn.utils.rnn.pack_padded_sequence(embedded, input_lengths)
        outputs, hidden = self.gru(packed)
        outputs, _ = nn.utils.rnn.pad_packed_sequence(outputs)
        outputs = outputs[:, :, : self.hidden_size] + outputs[:, :, self.hidden_size :]
        return outputs, hidden


class _LuongAttnDecoderRNN(nn.Module):
    """The chatbot tutorial's decoder: Luong "dot" attention, `concat` layer with tanh, the
    output through `F.softmax`."""

    def __init__(
        self, embedding: nn.Embedding, hidden_size: int, output_size: int, dropout: float = 0.1
    ) -> None:
        super().__init__()
        self.embedding = embedding
        self.embedding_dropout = nn.Dropout(dropout)
        self.gru = nn.GRU(hidden_size, hidden_size, 1)
        self.concat = nn.Linear(hidden_size * 2, hidden_size)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(
        self, input_step: torch.Tensor, last_hidden: torch.Tensor, encoder_outputs: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        embedded = self.embedding_dropout(self.embedding(input_step))
        rnn_output, hidden = self.gru(embedded, last_hidden)
        attn_energies = torch.sum(rnn_output * encoder_outputs, dim=2).t()
        attn_weights = F.softmax(attn_energies, dim=1).unsqueeze(1)
        context = attn_weights.bmm(encoder_outputs.transpose(0, 1)).squeeze(1)
        concat_output = torch.tanh(self.concat(torch.cat((rnn_output.squeeze(0), context), 1)))
        output = F.softmax(self.out(concat_output), dim=1)
        return output, hidden


def pytorch_chatbot_luong_mask_nll(
    path: str, n_iteration: int = 250, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The PyTorch chatbot tutorial: one `nn.Embedding` shared by a bidirectional GRU encoder
    (directions summed) and a Luong dot-attention GRU decoder whose output is a softmax, the
    tutorial's `maskNLLLoss` (`-torch.log(torch.gather(...))` over the unpadded positions),
    `teacher_forcing_ratio = 1.0`, two Adam optimizers (the decoder's at
    `learning_rate * decoder_learning_ratio`, 0.001 here for 0.0001), `clip = 50.0` on both models, batches of
    length-sorted pairs, `print_loss_total` averaged every 50 iterations."""
    g = _seed(seed)
    PAD_token, SOS_token, EOS_token = 0, 1, 2
    voc_words = 40
    pairs = _qa_pairs(g, 2000, voc_words)
    hidden_size, batch_size = 64, 32
    clip, teacher_forcing_ratio, learning_rate, decoder_learning_ratio = 50.0, 1.0, 0.001, 5.0
    embedding = nn.Embedding(voc_words, hidden_size)
    encoder = _EncoderRNN(hidden_size, embedding)
    decoder = _LuongAttnDecoderRNN(embedding, hidden_size, voc_words)
    encoder.train()
    decoder.train()
    encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=learning_rate)
    decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=learning_rate * decoder_learning_ratio)
    if bug == "frozen_by_mistake":  # bug: a line from the pre-trained word-vectors variant
        embedding.weight.requires_grad = False
    hook = Hook(path)
    hook.register_module(encoder)
    hook.register_module(decoder)

    def batch2TrainData(pair_batch: list[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, ...]:
        pair_batch.sort(key=lambda x: len(x[0]), reverse=True)
        inp = [torch.tensor(q + [EOS_token]) for q, _ in pair_batch]
        out = [torch.tensor(a + [EOS_token]) for _, a in pair_batch]
        lengths = torch.tensor([len(s) for s in inp])
        inp_pad = nn.utils.rnn.pad_sequence(inp, padding_value=PAD_token)
        out_pad = nn.utils.rnn.pad_sequence(out, padding_value=PAD_token)
        mask = out_pad != PAD_token
        return inp_pad, lengths, out_pad, mask, torch.tensor(max(len(s) for s in out))

    def maskNLLLoss(inp: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, int]:
        nTotal = mask.sum()
        crossEntropy = -torch.log(torch.gather(inp, 1, target.view(-1, 1)).squeeze(1))
        loss = crossEntropy.masked_select(mask).mean()
        return loss, int(nTotal.item())

    losses: list[float] = []
    print_loss_total = 0.0
    rng = random.Random(seed)
    for iteration in range(1, n_iteration + 1):
        input_variable, lengths, target_variable, mask, max_target_len = batch2TrainData(
            [rng.choice(pairs) for _ in range(batch_size)]
        )
        encoder_optimizer.zero_grad()
        decoder_optimizer.zero_grad()
        loss = torch.zeros(())
        print_losses, n_totals = [], 0
        encoder_outputs, encoder_hidden = encoder(input_variable, lengths)
        decoder_input = torch.LongTensor([[SOS_token for _ in range(batch_size)]])
        decoder_hidden = encoder_hidden[:1]
        use_teacher_forcing = rng.random() < teacher_forcing_ratio
        for t in range(int(max_target_len)):
            decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden, encoder_outputs)
            if use_teacher_forcing:
                decoder_input = target_variable[t].view(1, -1)
            else:
                decoder_input = decoder_output.argmax(1).view(1, -1)
            mask_loss, nTotal = maskNLLLoss(decoder_output, target_variable[t], mask[t])
            loss = loss + mask_loss
            print_losses.append(mask_loss.item() * nTotal)
            n_totals += nTotal
        loss.backward()
        nn.utils.clip_grad_norm_(encoder.parameters(), clip)
        nn.utils.clip_grad_norm_(decoder.parameters(), clip)
        encoder_optimizer.step()
        decoder_optimizer.step()
        batch_loss = sum(print_losses) / n_totals
        losses.append(batch_loss)
        print_loss_total += batch_loss
        if iteration % 50 == 0:
            print(f"Iteration: {iteration}; Average loss: {print_loss_total / 50:.4f}")
            print_loss_total = 0.0
    hook.close()
    return losses


class _NGramLanguageModeler(nn.Module):
    def __init__(self, vocab_size: int, embedding_dim: int, context_size: int) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, embedding_dim)
        self.linear1 = nn.Linear(context_size * embedding_dim, 128)
        self.linear2 = nn.Linear(128, vocab_size)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        embeds = self.embeddings(inputs).view((1, -1))
        out = F.relu(self.linear1(embeds))
        out = self.linear2(out)
        log_probs = F.log_softmax(out, dim=1)
        return log_probs


def word_embeddings_tutorial_ngram(
    path: str, epochs: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The "Word Embeddings: Encoding Lexical Semantics" tutorial's N-gram language model:
    `CONTEXT_SIZE = 2`, `EMBEDDING_DIM = 10`, one trigram per step (batch of one), the context
    words' embeddings concatenated into a 128-unit ReLU layer, `F.log_softmax` and
    `nn.NLLLoss`, `model.zero_grad()` before each step, plain SGD at 0.001 (scaled here to 0.05
    for the shorter text), the total loss printed per epoch."""
    g = _seed(seed)
    test_sentence = _char_text(g, 900).split()
    CONTEXT_SIZE, EMBEDDING_DIM = 2, 10
    ngrams = [
        ([test_sentence[i - j - 1] for j in range(CONTEXT_SIZE)], test_sentence[i])
        for i in range(CONTEXT_SIZE, len(test_sentence))
    ]
    vocab = set(test_sentence)
    word_to_ix = {word: i for i, word in enumerate(sorted(vocab))}
    loss_function = nn.NLLLoss()
    model = _NGramLanguageModeler(len(vocab), EMBEDDING_DIM, CONTEXT_SIZE)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(loss_function)
    losses: list[float] = []
    for _epoch in range(epochs):
        total_loss = 0.0
        for context, target in ngrams:
            context_idxs = torch.tensor([word_to_ix[w] for w in context], dtype=torch.long)
            if bug != "no_zero_grad":  # bug: the `model.zero_grad()` line left out
                model.zero_grad()
            log_probs = model(context_idxs)
            loss = loss_function(log_probs, torch.tensor([word_to_ix[target]], dtype=torch.long))
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
            losses.append(loss.item())
        print(total_loss)
    hook.close()
    return losses


def _digits_u8(g: torch.Generator, n: int, size: int = 28) -> tuple[torch.Tensor, torch.Tensor]:
    """MNIST-like uint8 digits: ten smooth random prototypes, shifted by up to 2 pixels, noised."""
    protos = torch.rand(10, 1, 7, 7, generator=g)
    protos = F.interpolate(protos, size=(size, size), mode="bilinear", align_corners=False)
    protos = (protos - 0.45).clamp(min=0) * 3.0
    y = torch.randint(0, 10, (n,), generator=g)
    x = protos[y]
    shifts = torch.randint(-2, 3, (n, 2), generator=g).tolist()
    x = torch.stack(
        [torch.roll(xi, shifts=(dx, dy), dims=(1, 2)) for xi, (dx, dy) in zip(x, shifts, strict=True)]
    )
    x = (x + 0.15 * torch.randn(x.shape, generator=g)).clamp(0, 1)
    return (x * 255).round().to(torch.uint8), y


class _Lambda(nn.Module):
    def __init__(self, func: Any) -> None:
        super().__init__()
        self.func = func

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.func(x)


def what_is_torch_nn_really_fit(
    path: str, epochs: int = 4, seed: int = 0, bug: str | None = None
) -> list[float]:
    """ "What is torch.nn really?": the MNIST rows as 784 floats in [0, 1], `TensorDataset`s and
    `get_data` returning a shuffled train loader and a validation loader of twice the batch,
    `WrappedDataLoader` applying `preprocess` (`x.view(-1, 1, 28, 28)`), the `nn.Sequential` CNN
    of three stride-2 convolutions (16, 16, 10), ReLU, `AdaptiveAvgPool2d(1)` and a `Lambda`
    flatten, `loss_func = F.cross_entropy`, the `loss_batch` / `fit` functions with the
    validation loss weighted by batch sizes each epoch, SGD lr 0.1 momentum 0.9, batch 64."""
    g = _seed(seed)
    xb8, y = _digits_u8(g, 3000)
    x = xb8.float().view(-1, 784)
    if bug != "inputs_x255":  # bug: the user's own PNG bytes cast to float, the `/ 255` left out
        x = x / 255.0
    x_train, y_train, x_valid, y_valid = x[:2500], y[:2500], x[2500:], y[2500:]
    bs, lr = 64, 0.1

    def get_data(train_ds: TensorDataset, valid_ds: TensorDataset) -> tuple[DataLoader, DataLoader]:
        return (
            DataLoader(train_ds, batch_size=bs, shuffle=True, generator=g),
            DataLoader(valid_ds, batch_size=bs * 2),
        )

    def preprocess(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.view(-1, 1, 28, 28), y

    class WrappedDataLoader:
        def __init__(self, dl: DataLoader, func: Any) -> None:
            self.dl = dl
            self.func = func

        def __len__(self) -> int:
            return len(self.dl)

        def __iter__(self) -> Any:
            for b in self.dl:
                yield self.func(*b)

    train_dl, valid_dl = get_data(TensorDataset(x_train, y_train), TensorDataset(x_valid, y_valid))
    train_dl, valid_dl = WrappedDataLoader(train_dl, preprocess), WrappedDataLoader(valid_dl, preprocess)
    model = nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        _Lambda(lambda x: x.view(x.size(0), -1)),
    )
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_func = F.cross_entropy
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []

    def loss_batch(
        model: nn.Module, loss_func: Any, xb: torch.Tensor, yb: torch.Tensor, opt: Any = None
    ) -> tuple[float, int]:
        loss = loss_func(model(xb), yb)
        if opt is not None:
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        return loss.item(), len(xb)

    for epoch in range(epochs):
        model.train()
        for xb, yb in train_dl:
            loss_batch(model, loss_func, xb, yb, opt)
        model.eval()
        with torch.no_grad():
            vl, nums = zip(*[loss_batch(model, loss_func, xb, yb) for xb, yb in valid_dl], strict=True)
        val_loss = np.sum(np.multiply(vl, nums)) / np.sum(nums)
        print(epoch, val_loss)
    hook.close()
    return losses


def _speech_commands(
    g: torch.Generator, n: int, length: int, n_classes: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """One-second "words" at 2 kHz: each class a pair of formant-like tones with a rising or
    falling glide and an envelope, a random onset, noise, some clips shorter and zero-padded."""
    y = torch.randint(0, n_classes, (n,), generator=g)
    t = torch.arange(length) / 2000.0
    f1 = 120 + 40 * torch.arange(n_classes)
    f2 = 500 - 25 * torch.arange(n_classes)
    glide = torch.tensor([(-1) ** k * 60.0 for k in range(n_classes)])
    onset = torch.rand(n, 1, generator=g) * 0.3
    dur = 0.35 + 0.25 * torch.rand(n, 1, generator=g)
    tt = (t[None] - onset).clamp(min=0)
    env = ((t[None] > onset) & (t[None] < onset + dur)).float() * torch.sin(math.pi * (tt / dur).clamp(0, 1))
    fa = f1[y][:, None] * (1 + 0.08 * torch.randn(n, 1, generator=g)) + glide[y][:, None] * tt
    fb = f2[y][:, None] * (1 + 0.05 * torch.randn(n, 1, generator=g))
    wav = env * (torch.sin(2 * math.pi * fa * tt) + 0.5 * torch.sin(2 * math.pi * fb * tt))
    wav = wav + 0.35 * torch.randn(n, length, generator=g)
    short = torch.rand(n, generator=g) < 0.2
    wav[short, int(0.8 * length) :] = 0.0  # pad_sequence's zeros in the collate
    return wav[:, None], y


class _M5(nn.Module):
    def __init__(self, n_input: int = 1, n_output: int = 8, stride: int = 16, n_channel: int = 32) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(n_input, n_channel, kernel_size=80, stride=stride)
        self.bn1 = nn.BatchNorm1d(n_channel)
        self.pool1 = nn.MaxPool1d(4)
        self.conv2 = nn.Conv1d(n_channel, n_channel, kernel_size=3)
        self.bn2 = nn.BatchNorm1d(n_channel)
        self.pool2 = nn.MaxPool1d(4)
        self.conv3 = nn.Conv1d(n_channel, 2 * n_channel, kernel_size=3)
        self.bn3 = nn.BatchNorm1d(2 * n_channel)
        self.pool3 = nn.MaxPool1d(2)
        self.fc1 = nn.Linear(2 * n_channel, n_output)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool1(F.relu(self.bn1(self.conv1(x))))
        x = self.pool2(F.relu(self.bn2(self.conv2(x))))
        x = self.pool3(F.relu(self.bn3(self.conv3(x))))
        x = F.avg_pool1d(x, x.shape[-1])
        x = x.permute(0, 2, 1)
        x = self.fc1(x)
        return F.log_softmax(x, dim=2)


def torchaudio_speech_commands_m5(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """torchaudio's "Speech Command Classification" tutorial: the M5 network on raw waveforms
    (an 80-sample stride-16 first convolution, BatchNorm, max pooling, global average pooling,
    `F.log_softmax(dim=2)`), `F.nll_loss(output.squeeze(), target)`, Adam lr 0.01 with weight
    decay 1e-4, `StepLR(step_size=20, gamma=0.1)` per epoch, a `test` accuracy pass per epoch."""
    g = _seed(seed)
    n_classes = 8
    x, y = _speech_commands(g, 1500, 2000, n_classes)
    model = _M5(n_output=n_classes)
    if bug == "dead_relu_init":  # bug: an init helper filling every bias, BatchNorm's too, with -1

        def weights_init(m: nn.Module) -> None:
            if isinstance(m, (nn.Conv1d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight)
            if getattr(m, "bias", None) is not None:
                nn.init.constant_(m.bias, -1.0)

        model.apply(weights_init)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.0001)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.1)
    train_loader = DataLoader(TensorDataset(x[:1300], y[:1300]), batch_size=64, shuffle=True, generator=g)
    test_loader = DataLoader(TensorDataset(x[1300:], y[1300:]), batch_size=64)
    hook = Hook(path)
    hook.register_module(model)
    losses: list[float] = []
    for epoch in range(1, epochs + 1):
        model.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            output = model(data)
            loss = F.nll_loss(output.squeeze(), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if batch_idx % 10 == 0:
                print(f"Train Epoch: {epoch} [{batch_idx * len(data)}]\tLoss: {loss.item():.6f}")
        model.eval()
        correct = 0
        with torch.no_grad():
            for data, target in test_loader:
                pred = model(data).argmax(dim=-1).squeeze()
                correct += int(pred.eq(target).sum())
        print(f"Test Epoch: {epoch}\tAccuracy: {correct}/{len(test_loader.dataset)}")
        scheduler.step()
    hook.close()
    return losses


# ============================================================================= public repositories


class _CartPole:
    """gym's CartPole-v1 dynamics (Euler, 0.02 s), written here: +1 per step, done past 12
    degrees or 2.4 units, or after `max_steps`."""

    def __init__(self, rng: np.random.Generator, max_steps: int = 200) -> None:
        self.rng = rng
        self.max_steps = max_steps

    def reset(self) -> np.ndarray:
        self.s = self.rng.uniform(-0.05, 0.05, 4)
        self.t = 0
        return self.s.astype(np.float32)

    def step(self, a: int) -> tuple[np.ndarray, float, bool]:
        x, x_dot, th, th_dot = self.s
        force = 10.0 if a == 1 else -10.0
        costh, sinth = math.cos(th), math.sin(th)
        temp = (force + 0.05 * th_dot**2 * sinth) / 1.1
        thacc = (9.8 * sinth - costh * temp) / (0.5 * (4.0 / 3.0 - 0.1 * costh**2 / 1.1))
        xacc = temp - 0.05 * thacc * costh / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * xacc
        th, th_dot = th + 0.02 * th_dot, th_dot + 0.02 * thacc
        self.s = np.array([x, x_dot, th, th_dot])
        self.t += 1
        done = bool(abs(x) > 2.4 or abs(th) > 12 * 2 * math.pi / 360 or self.t >= self.max_steps)
        return self.s.astype(np.float32), 1.0, done


def spinningup_reward_to_go_pg(
    path: str, epochs: int = 40, seed: int = 0, bug: str | None = None
) -> list[float]:
    """Spinning Up's `2_rtg_pg.py`: `mlp(sizes=[obs_dim] + [32] + [n_acts])` with Tanh, the policy
    a `Categorical(logits=...)`, a batch of whole episodes until `batch_size` steps, the weights
    the reward-to-go of each step, `compute_loss = -(logp * weights).mean()`, one Adam step
    (lr 1e-2) per epoch, the mean return and episode length printed per epoch. The losses are
    the policy-gradient surrogate, which is not a loss that goes down."""
    _seed(seed)
    env = _CartPole(np.random.default_rng(seed))
    obs_dim, n_acts, batch_size = 4, 2, 1000
    logits_net = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh(), nn.Linear(32, n_acts))
    optimizer = torch.optim.Adam(logits_net.parameters(), lr=1e-2)
    hook = Hook(path)
    hook.register_module(logits_net)

    def get_policy(obs: torch.Tensor) -> torch.distributions.Categorical:
        return torch.distributions.Categorical(logits=logits_net(obs))

    def get_action(obs: torch.Tensor) -> int:
        return int(get_policy(obs).sample().item())

    def compute_loss(obs: torch.Tensor, act: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        logp = get_policy(obs).log_prob(act)
        return -(logp * weights).mean()

    def reward_to_go(rews: list[float]) -> np.ndarray:
        n = len(rews)
        rtgs = np.zeros_like(rews)
        for i in reversed(range(n)):
            rtgs[i] = rews[i] + (rtgs[i + 1] if i + 1 < n else 0)
        return rtgs

    losses: list[float] = []
    for i in range(epochs):
        batch_obs: list[np.ndarray] = []
        batch_acts: list[int] = []
        batch_weights: list[float] = []
        batch_rets, batch_lens = [], []
        obs, done, ep_rews = env.reset(), False, []
        while True:
            batch_obs.append(obs.copy())
            with torch.no_grad():
                act = get_action(torch.as_tensor(obs, dtype=torch.float32))
            obs, rew, done = env.step(act)
            batch_acts.append(act)
            ep_rews.append(rew)
            if done:
                ep_ret, ep_len = sum(ep_rews), len(ep_rews)
                batch_rets.append(ep_ret)
                batch_lens.append(ep_len)
                batch_weights += list(reward_to_go(ep_rews))
                obs, done, ep_rews = env.reset(), False, []
                if len(batch_obs) > batch_size:
                    break
        optimizer.zero_grad()
        batch_loss = compute_loss(
            obs=torch.as_tensor(np.array(batch_obs), dtype=torch.float32),
            act=torch.as_tensor(batch_acts, dtype=torch.int32),
            weights=torch.as_tensor(batch_weights, dtype=torch.float32),
        )
        batch_loss.backward()
        optimizer.step()
        losses.append(batch_loss.item())
        print(
            f"epoch: {i:3d} \t loss: {batch_loss.item():.3f} \t return: {np.mean(batch_rets):.3f} \t ep_len: {np.mean(batch_lens):.3f}"
        )
    hook.close()
    return losses


def _blobs_rgb(g: torch.Generator, n: int, size: int = 16) -> torch.Tensor:
    """RGB images in [-1, 1] of one or two soft coloured discs on a dark gradient."""
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    cx = torch.rand(n, 2, 1, 1, generator=g) * (size - 6) + 3
    cy = torch.rand(n, 2, 1, 1, generator=g) * (size - 6) + 3
    r = torch.rand(n, 2, 1, 1, generator=g) * 2 + 2
    disc = torch.sigmoid(2.0 * (r - ((xx - cx) ** 2 + (yy - cy) ** 2).sqrt()))
    disc[:, 1] *= (torch.rand(n, 1, 1, generator=g) < 0.5).float()
    col = torch.rand(n, 2, 3, generator=g)
    img = torch.einsum("nkhw,nkc->nchw", disc, col) + 0.1 * (yy / size)
    return img.clamp(0, 1) * 2 - 1


class _BeganGenerator(nn.Module):
    def __init__(self, latent_dim: int = 32, size: int = 16, channels: int = 3) -> None:
        super().__init__()
        self.init_size = size // 4
        self.l1 = nn.Sequential(nn.Linear(latent_dim, 64 * self.init_size**2))
        self.conv_blocks = nn.Sequential(
            nn.BatchNorm2d(64),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(64, 64, 3, stride=1, padding=1),
            nn.BatchNorm2d(64, 0.8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(64, 32, 3, stride=1, padding=1),
            nn.BatchNorm2d(32, 0.8),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(32, channels, 3, stride=1, padding=1),
            nn.Tanh(),
        )

    def forward(self, noise: torch.Tensor) -> torch.Tensor:
        out = self.l1(noise).view(noise.shape[0], 64, self.init_size, self.init_size)
        return self.conv_blocks(out)


class _BeganDiscriminator(nn.Module):
    """BEGAN's discriminator: an autoencoder (a strided convolution down, a 32-d code, up)."""

    def __init__(self, size: int = 16, channels: int = 3) -> None:
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(channels, 32, 3, 2, 1), nn.ReLU())
        self.down_size = size // 2
        down_dim = 32 * self.down_size**2
        self.fc = nn.Sequential(
            nn.Linear(down_dim, 32),
            nn.BatchNorm1d(32, 0.8),
            nn.ReLU(inplace=True),
            nn.Linear(32, down_dim),
            nn.BatchNorm1d(down_dim),
            nn.ReLU(inplace=True),
        )
        self.up = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(32, channels, 3, 1, 1))

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        out = self.down(img)
        out = self.fc(out.view(out.size(0), -1))
        return self.up(out.view(out.size(0), 32, self.down_size, self.down_size))


def pytorch_gan_began_equilibrium(
    path: str, n_steps: int = 300, seed: int = 0, bug: str | None = None
) -> list[float]:
    """eriklindernoren/PyTorch-GAN's `began.py`: an autoencoder discriminator scoring images by
    their L1 reconstruction error, `d_loss = d_loss_real - k * d_loss_fake`, the equilibrium
    term `diff = gamma * d_loss_real - d_loss_fake` updating `k = clip(k + lambda_k * diff, 0, 1)`
    with `gamma = 0.75`, `lambda_k = 0.001`, the convergence measure
    `M = d_loss_real + |diff|` logged (the returned losses), Adam lr 2e-4 betas (0.5, 0.999)
    for both, `weights_init_normal`, batches of 32."""
    g = _seed(seed)
    data = _blobs_rgb(g, 2048)
    latent_dim = 32
    generator, discriminator = _BeganGenerator(latent_dim), _BeganDiscriminator()

    def weights_init_normal(m: nn.Module) -> None:
        classname = m.__class__.__name__
        if classname.find("Conv") != -1:
            nn.init.normal_(m.weight.data, 0.0, 0.02)
        elif classname.find("BatchNorm2d") != -1:
            nn.init.normal_(m.weight.data, 1.0, 0.02)
            nn.init.constant_(m.bias.data, 0.0)

    generator.apply(weights_init_normal)
    discriminator.apply(weights_init_normal)
    optimizer_G = torch.optim.Adam(generator.parameters(), lr=0.0002, betas=(0.5, 0.999))
    optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=0.0002, betas=(0.5, 0.999))
    hook = Hook(path)
    hook.register_module(generator)
    hook.register_module(discriminator)
    gamma, lambda_k, k = 0.75, 0.001, 0.0
    dataloader = DataLoader(TensorDataset(data), batch_size=32, shuffle=True, drop_last=True, generator=g)
    losses: list[float] = []
    batches_done = 0
    while batches_done < n_steps:
        for (imgs,) in dataloader:
            optimizer_G.zero_grad()
            z = torch.randn(imgs.shape[0], latent_dim)
            gen_imgs = generator(z)
            g_loss = torch.mean(torch.abs(discriminator(gen_imgs) - gen_imgs))
            g_loss.backward()
            optimizer_G.step()

            optimizer_D.zero_grad()
            d_real = discriminator(imgs)
            d_fake = discriminator(gen_imgs.detach())
            d_loss_real = torch.mean(torch.abs(d_real - imgs))
            d_loss_fake = torch.mean(torch.abs(d_fake - gen_imgs.detach()))
            d_loss = d_loss_real - k * d_loss_fake
            d_loss.backward()
            optimizer_D.step()

            diff = torch.mean(gamma * d_loss_real - d_loss_fake)
            k = k + lambda_k * diff.item()
            k = min(max(k, 0), 1)
            M = (d_loss_real + torch.abs(diff)).item()
            losses.append(M)
            if batches_done % 50 == 0:
                print(
                    f"[Batch {batches_done}] [D loss: {d_loss.item():f}] [G loss: {g_loss.item():f}] -- M: {M}, k: {k}"
                )
            batches_done += 1
            if batches_done >= n_steps:
                break
    hook.close()
    return losses


def _shapes_rgb(
    g: torch.Generator, n: int, n_classes: int, size: int = 16, noise: float = 0.08
) -> tuple[torch.Tensor, torch.Tensor]:
    """RGB images in [0, 1]: each class a coarse 4 x 4 random pattern upsampled, in a random
    colour over a random background, shifted by up to 2 pixels, noised."""
    protos = (torch.rand(n_classes, 1, 4, 4, generator=g) > 0.5).float()
    protos = F.interpolate(protos, size=(size, size), mode="bilinear", align_corners=False)
    y = torch.randint(0, n_classes, (n,), generator=g)
    shape = protos[y]
    fg = torch.rand(n, 3, 1, 1, generator=g) * 0.6 + 0.4
    bg = torch.rand(n, 3, 1, 1, generator=g) * 0.3
    x = shape * fg + (1 - shape) * bg
    shifts = torch.randint(-2, 3, (n, 2), generator=g)
    x = torch.stack([torch.roll(xi, (int(s[0]), int(s[1])), (1, 2)) for xi, s in zip(x, shifts, strict=True)])
    return (x + noise * torch.randn(x.shape, generator=g)).clamp(0, 1), y


class _YoloConv(nn.Module):
    """YOLOv5's `Conv`: Conv2d without bias, BatchNorm2d, SiLU."""

    def __init__(self, c1: int, c2: int, k: int = 1, s: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))


class _YoloBottleneck(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.cv1 = _YoloConv(c, c, 1)
        self.cv2 = _YoloConv(c, c, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.cv2(self.cv1(x))


class _YoloC3(nn.Module):
    def __init__(self, c1: int, c2: int) -> None:
        super().__init__()
        c_ = c2 // 2
        self.cv1 = _YoloConv(c1, c_)
        self.cv2 = _YoloConv(c1, c_)
        self.cv3 = _YoloConv(2 * c_, c2)
        self.m = _YoloBottleneck(c_)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class _YoloClassify(nn.Module):
    """A YOLOv5n-cls in miniature: Conv / C3 stages and the `Classify` head (a 1x1 `Conv` to
    128 channels, global average pooling, dropout, `Linear`)."""

    def __init__(self, nc: int) -> None:
        super().__init__()
        self.model = nn.Sequential(
            _YoloConv(3, 16, 3, 1),
            _YoloConv(16, 32, 3, 2),
            _YoloC3(32, 32),
            _YoloConv(32, 64, 3, 2),
            _YoloC3(64, 64),
        )
        self.conv = _YoloConv(64, 128)
        self.drop = nn.Dropout(p=0.0)
        self.linear = nn.Linear(128, nc)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.drop(F.adaptive_avg_pool2d(self.conv(self.model(x)), 1).flatten(1)))


class _ModelEMA:
    """YOLOv5's `ModelEMA`: `d = decay * (1 - exp(-updates / tau))`, floating-point state only."""

    def __init__(self, model: nn.Module, decay: float = 0.9999, tau: int = 2000) -> None:
        self.ema = copy.deepcopy(model).eval()
        self.updates = 0
        self.decay = lambda x: decay * (1 - math.exp(-x / tau))
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model: nn.Module) -> None:
        self.updates += 1
        d = self.decay(self.updates)
        msd = model.state_dict()
        with torch.no_grad():
            for k, v in self.ema.state_dict().items():
                if v.dtype.is_floating_point:
                    v *= d
                    v += (1 - d) * msd[k].detach()


def yolov5_classify_train(path: str, epochs: int = 8, seed: int = 0, bug: str | None = None) -> list[float]:
    """ultralytics/yolov5's `classify/train.py`: `smart_optimizer` (Adam on the biases, the
    weights with decay 5e-5 and the BatchNorm weights without, betas (0.9, 0.999)),
    `lr0 = 0.001`, the linear `lf = (1 - x / epochs) * (1 - lrf) + lrf` through `LambdaLR`,
    `ModelEMA`, `smartCrossEntropyLoss(label_smoothing=0.1)`, the forward under `autocast`
    (bf16 on this CPU) with a `GradScaler`, `scaler.unscale_` then `clip_grad_norm_(max_norm=10)`,
    `scaler.step`, `optimizer.zero_grad()`, `ema.update(model)`, the running mean `tloss`, and a
    validation of `ema.ema` each epoch. ImageNet-normalized RGB images, batches of 64."""
    g = _seed(seed)
    nc = 12
    x, y = _shapes_rgb(g, 2200, nc, noise=0.25)
    mean, std = (
        torch.tensor([0.485, 0.456, 0.406])[:, None, None],
        torch.tensor([0.229, 0.224, 0.225])[:, None, None],
    )
    x = (x - mean) / std
    trainloader = DataLoader(TensorDataset(x[:2000], y[:2000]), batch_size=64, shuffle=True, generator=g)
    testloader = DataLoader(TensorDataset(x[2000:], y[2000:]), batch_size=128)
    model = _YoloClassify(nc)
    lr0, momentum, decay, lrf = 0.001, 0.9, 5e-5, 0.01
    gw: list[list[nn.Parameter]] = [[], [], []]
    bn = tuple(v for k, v in nn.__dict__.items() if "Norm" in k)
    for v in model.modules():
        for p_name, p in v.named_parameters(recurse=False):
            if p_name == "bias":
                gw[2].append(p)
            elif p_name == "weight" and isinstance(v, bn):
                gw[1].append(p)
            else:
                gw[0].append(p)
    optimizer = torch.optim.Adam(gw[2], lr=lr0, betas=(momentum, 0.999))
    optimizer.add_param_group({"params": gw[0], "weight_decay": decay})
    optimizer.add_param_group({"params": gw[1], "weight_decay": 0.0})
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_lambda=lambda e: (1 - e / epochs) * (1 - lrf) + lrf
    )
    ema = _ModelEMA(model, tau=100)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    scaler = torch.amp.GradScaler("cpu")
    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []
    for epoch in range(epochs):
        tloss = 0.0
        model.train()
        for i, (images, labels) in enumerate(trainloader):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = criterion(model(images), labels)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=10.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
            ema.update(model)
            tloss = (tloss * i + loss.item()) / (i + 1)
            losses.append(loss.item())
        correct = 0
        with torch.no_grad():
            for images, labels in testloader:
                correct += int((ema.ema(images).argmax(1) == labels).sum())
        print(f"{epoch + 1}/{epochs} loss {tloss:.3g} top1 {correct / 200:.3f}")
        scheduler.step()
    hook.close()
    return losses


class _ShuffleBlock(nn.Module):
    def __init__(self, groups: int = 2) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.size()
        g = self.groups
        return x.view(n, g, c // g, h, w).permute(0, 2, 1, 3, 4).reshape(n, c, h, w)


class _ShuffleBasicBlock(nn.Module):
    def __init__(self, in_channels: int, split_ratio: float = 0.5) -> None:
        super().__init__()
        self.c = int(in_channels * split_ratio)
        c = in_channels - self.c
        self.conv1 = nn.Conv2d(c, c, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, kernel_size=3, stride=1, padding=1, groups=c, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.conv3 = nn.Conv2d(c, c, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(c)
        self.shuffle = _ShuffleBlock()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x[:, : self.c], x[:, self.c :]
        out = F.relu(self.bn1(self.conv1(x2)))
        out = self.bn2(self.conv2(out))
        out = F.relu(self.bn3(self.conv3(out)))
        return self.shuffle(torch.cat([x1, out], 1))


class _ShuffleDownBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        mid = out_channels // 2
        self.conv1 = nn.Conv2d(in_channels, in_channels, 3, 2, 1, groups=in_channels, bias=False)
        self.bn1 = nn.BatchNorm2d(in_channels)
        self.conv2 = nn.Conv2d(in_channels, mid, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(in_channels, mid, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(mid)
        self.conv4 = nn.Conv2d(mid, mid, 3, 2, 1, groups=mid, bias=False)
        self.bn4 = nn.BatchNorm2d(mid)
        self.conv5 = nn.Conv2d(mid, mid, 1, bias=False)
        self.bn5 = nn.BatchNorm2d(mid)
        self.shuffle = _ShuffleBlock()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out1 = F.relu(self.bn2(self.conv2(self.bn1(self.conv1(x)))))
        out2 = F.relu(self.bn3(self.conv3(x)))
        out2 = F.relu(self.bn5(self.conv5(self.bn4(self.conv4(out2)))))
        return self.shuffle(torch.cat([out1, out2], 1))


class _ShuffleNetV2(nn.Module):
    """kuangliu/pytorch-cifar's `ShuffleNetV2`, with fewer and narrower stages."""

    def __init__(self, num_classes: int, softmax_out: bool = False) -> None:
        super().__init__()
        out_channels, num_blocks = (48, 96, 192, 256), (1, 2, 1)
        self.conv1 = nn.Conv2d(3, 24, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(24)
        self.in_channels = 24
        self.layer1 = self._make_layer(out_channels[0], num_blocks[0])
        self.layer2 = self._make_layer(out_channels[1], num_blocks[1])
        self.layer3 = self._make_layer(out_channels[2], num_blocks[2])
        self.conv2 = nn.Conv2d(out_channels[2], out_channels[3], kernel_size=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels[3])
        self.linear = nn.Linear(out_channels[3], num_classes)
        self.softmax_out = softmax_out

    def _make_layer(self, out_channels: int, num_blocks: int) -> nn.Sequential:
        layers: list[nn.Module] = [_ShuffleDownBlock(self.in_channels, out_channels)]
        layers += [_ShuffleBasicBlock(out_channels) for _ in range(num_blocks)]
        self.in_channels = out_channels
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = F.avg_pool2d(out, out.shape[-1])
        out = self.linear(out.view(out.size(0), -1))
        if self.softmax_out:  # bug: probabilities "for the confidence in test()", into CrossEntropyLoss
            out = F.softmax(out, dim=1)
        return out


def kuangliu_cifar_shufflenetv2(
    path: str, epochs: int = 6, seed: int = 0, bug: str | None = None
) -> list[float]:
    """kuangliu/pytorch-cifar's `main.py` with `ShuffleNetV2`: `transforms.RandomCrop(32,
    padding=4)` and `RandomHorizontalFlip` written by hand (16 px, padding 2), the CIFAR-10 mean
    and std, `nn.CrossEntropyLoss`, SGD lr 0.1 momentum 0.9 weight decay 5e-4,
    `CosineAnnealingLR(T_max=epochs)`, `train(epoch)` / `test(epoch)` with `progress_bar`-style
    running loss and accuracy, the best accuracy's `state_dict` kept as a checkpoint."""
    g = _seed(seed)
    x, y = _shapes_rgb(g, 2300, 10)
    mean = torch.tensor([0.4914, 0.4822, 0.4465])[:, None, None]
    std = torch.tensor([0.2023, 0.1994, 0.2010])[:, None, None]
    x = (x - mean) / std
    trainloader = DataLoader(TensorDataset(x[:2048], y[:2048]), batch_size=64, shuffle=True, generator=g)
    testloader = DataLoader(TensorDataset(x[2048:], y[2048:]), batch_size=100)
    net = _ShuffleNetV2(10, softmax_out=bug == "softmax_before_ce")
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
    hook = Hook(path)
    hook.register_module(net)
    hook.register_loss(criterion)
    losses: list[float] = []
    best_acc = 0.0
    checkpoint: dict[str, Any] = {}

    def augment(inputs: torch.Tensor) -> torch.Tensor:
        padded = F.pad(inputs, (2, 2, 2, 2))
        i, j = (int(v) for v in torch.randint(0, 5, (2,), generator=g))
        out = padded[:, :, i : i + 16, j : j + 16]
        flip = torch.rand(len(out), generator=g) < 0.5
        out[flip] = out[flip].flip(3)
        return out

    def train(epoch: int) -> None:
        net.train()
        train_loss, correct, total, n_batches = 0.0, 0, 0, 0
        for inputs, targets in trainloader:
            inputs = augment(inputs)
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            train_loss += loss.item()
            n_batches += 1
            losses.append(loss.item())
            total += targets.size(0)
            correct += int(outputs.argmax(1).eq(targets).sum())
        print(f"Epoch {epoch} Loss: {train_loss / n_batches:.3f} | Acc: {100.0 * correct / total:.3f}%")

    def test(epoch: int) -> None:
        nonlocal best_acc
        net.eval()
        correct = 0
        with torch.no_grad():
            for inputs, targets in testloader:
                correct += int(net(inputs).argmax(1).eq(targets).sum())
        acc = 100.0 * correct / 252
        if acc > best_acc:
            checkpoint.update(net=copy.deepcopy(net.state_dict()), acc=acc, epoch=epoch)
            best_acc = acc
        print(f"test acc {acc:.2f}")

    for epoch in range(epochs):
        train(epoch)
        test(epoch)
        scheduler.step()
    hook.close()
    return losses


# ============================================================================= Transformers


class _PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, dropout: float, max_len: int = 64, batch_first: bool = True) -> None:
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.batch_first = batch_first
        self.register_buffer("pe", pe)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.batch_first:
            return self.dropout(x + self.pe[: x.size(1)].unsqueeze(0))
        return self.dropout(x + self.pe[: x.size(0)].unsqueeze(1))


class _Embeddings(nn.Module):
    def __init__(self, d_model: int, vocab: int) -> None:
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lut(x) * math.sqrt(self.d_model)


class _Generator(nn.Module):
    def __init__(self, d_model: int, vocab: int) -> None:
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.proj(x), dim=-1)


class _EncoderDecoder(nn.Module):
    """The Annotated Transformer's `EncoderDecoder` (`make_model`): pre-norm sublayers, torch's
    layers standing in for its hand-written attention."""

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        N: int = 2,
        d_model: int = 64,
        d_ff: int = 128,
        h: int = 4,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()

        def layer(cls: Any) -> Any:
            return cls(d_model, h, d_ff, dropout, batch_first=True, norm_first=True)

        self.encoder = nn.TransformerEncoder(
            layer(nn.TransformerEncoderLayer), N, norm=nn.LayerNorm(d_model), enable_nested_tensor=False
        )
        self.decoder = nn.TransformerDecoder(layer(nn.TransformerDecoderLayer), N, norm=nn.LayerNorm(d_model))
        self.src_embed = nn.Sequential(_Embeddings(d_model, src_vocab), _PositionalEncoding(d_model, dropout))
        self.tgt_embed = nn.Sequential(_Embeddings(d_model, tgt_vocab), _PositionalEncoding(d_model, dropout))
        self.generator = _Generator(d_model, tgt_vocab)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.src_embed(src), src_key_padding_mask=~src_mask[:, 0])

    def decode(
        self, memory: torch.Tensor, src_mask: torch.Tensor, tgt: torch.Tensor, tgt_mask: torch.Tensor
    ) -> torch.Tensor:
        return self.decoder(
            self.tgt_embed(tgt), memory, tgt_mask=~tgt_mask[0], memory_key_padding_mask=~src_mask[:, 0]
        )

    def forward(
        self, src: torch.Tensor, tgt: torch.Tensor, src_mask: torch.Tensor, tgt_mask: torch.Tensor
    ) -> torch.Tensor:
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)


class _LabelSmoothing(nn.Module):
    """The Annotated Transformer's `LabelSmoothing`: a smoothed target distribution, zero on the
    padding column and on padded rows, and `nn.KLDivLoss(reduction="sum")` against it."""

    def __init__(self, size: int, padding_idx: int, smoothing: float = 0.0, by_hand: bool = False) -> None:
        super().__init__()
        self.criterion = nn.KLDivLoss(reduction="sum")
        self.padding_idx = padding_idx
        self.confidence = 1.0 - smoothing
        self.smoothing = smoothing
        self.size = size
        self.by_hand = by_hand

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        true_dist = x.data.clone()
        true_dist.fill_(self.smoothing / (self.size - 2))
        true_dist.scatter_(1, target.data.unsqueeze(1), self.confidence)
        true_dist[:, self.padding_idx] = 0
        mask = torch.nonzero(target.data == self.padding_idx)
        if mask.dim() > 0:
            true_dist.index_fill_(0, mask.squeeze(), 0.0)
        if self.by_hand:  # bug: the KL "written out" as sum p * (log p - log q); 0 * log 0 is nan
            return (true_dist * (true_dist.log() - x)).sum()
        return self.criterion(x, true_dist.clone().detach())


def annotated_transformer_copy_task(
    path: str, epochs: int = 20, seed: int = 0, bug: str | None = None
) -> list[float]:
    """harvardnlp's The Annotated Transformer, "A First Example": the copy task (`data_gen`:
    random symbols 1..10 with the first set to 1, `Batch` building the padding and subsequent
    masks), `make_model(V, V, N=2)`, `LabelSmoothing(size=V, padding_idx=0, smoothing=0.0)`,
    `SimpleLossCompute` (the generator, the criterion divided by the number of tokens, the loss
    times `norm` reported), Adam lr 0.5 betas (0.9, 0.98) eps 1e-9 under `LambdaLR` on the
    `rate` (Noam) function with 400 warm-up steps, `run_epoch` in train then eval mode each epoch
    with `optimizer.zero_grad(set_to_none=True)` and `scheduler.step()` after each step."""
    g = _seed(seed)
    V, d_model, pad = 11, 64, 0
    criterion = _LabelSmoothing(size=V, padding_idx=pad, smoothing=0.0, by_hand=bug == "log_zero_nan")
    model = _EncoderDecoder(V, V, N=2, d_model=d_model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.5, betas=(0.9, 0.98), eps=1e-9)

    def rate(step: int, model_size: int, factor: float, warmup: int) -> float:
        step = max(step, 1)
        return factor * (model_size ** (-0.5) * min(step ** (-0.5), step * warmup ** (-1.5)))

    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_lambda=lambda step: rate(step, d_model, 1.0, 400)
    )

    def data_gen(batch_size: int, nbatches: int) -> Any:
        for _ in range(nbatches):
            data = torch.randint(1, V, size=(batch_size, 10), generator=g)
            data[:, 0] = 1
            src = data.clone()
            tgt = data.clone()
            tgt_in, tgt_y = tgt[:, :-1], tgt[:, 1:]
            src_mask = (src != pad).unsqueeze(-2)
            tgt_mask = (tgt_in != pad).unsqueeze(-2) & torch.tril(
                torch.ones(1, tgt_in.size(-1), tgt_in.size(-1), dtype=torch.bool)
            )
            yield src, tgt_in, tgt_y, src_mask, tgt_mask, int((tgt_y != pad).sum())

    hook = Hook(path)
    hook.register_module(model)
    hook.register_loss(criterion)
    losses: list[float] = []

    def run_epoch(train: bool) -> float:
        total_tokens, total_loss = 0, 0.0
        for src, tgt_in, tgt_y, src_mask, tgt_mask, ntokens in data_gen(80, 20 if train else 5):
            out = model(src, tgt_in, src_mask, tgt_mask)
            x = model.generator(out)
            sloss = criterion(x.contiguous().view(-1, x.size(-1)), tgt_y.contiguous().view(-1)) / ntokens
            if train:
                sloss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                lr_scheduler.step()
                losses.append(sloss.item())
            total_loss += sloss.item() * ntokens
            total_tokens += ntokens
        return total_loss / total_tokens

    for epoch in range(epochs):
        model.train()
        train_loss = run_epoch(True)
        model.eval()
        with torch.no_grad():
            eval_loss = run_epoch(False)
        print(f"epoch {epoch} train {train_loss:.4f} eval {eval_loss:.4f}")
    hook.close()
    return losses


class _Seq2SeqTransformer(nn.Module):
    """The nn.Transformer translation example's `Seq2SeqTransformer` (sequence-first tensors)."""

    def __init__(
        self,
        num_encoder_layers: int,
        num_decoder_layers: int,
        emb_size: int,
        nhead: int,
        src_vocab_size: int,
        tgt_vocab_size: int,
        dim_feedforward: int = 128,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        self.transformer = nn.Transformer(
            d_model=emb_size, nhead=nhead, num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers, dim_feedforward=dim_feedforward, dropout=dropout,
        )  # fmt: skip
        self.generator = nn.Linear(emb_size, tgt_vocab_size)
        self.src_tok_emb = _Embeddings(emb_size, src_vocab_size)
        self.tgt_tok_emb = _Embeddings(emb_size, tgt_vocab_size)
        self.positional_encoding = _PositionalEncoding(emb_size, dropout=dropout, batch_first=False)

    def forward(
        self,
        src: torch.Tensor,
        trg: torch.Tensor,
        src_mask: torch.Tensor,
        tgt_mask: torch.Tensor,
        src_padding_mask: torch.Tensor,
        tgt_padding_mask: torch.Tensor,
        memory_key_padding_mask: torch.Tensor,
    ) -> torch.Tensor:
        src_emb = self.positional_encoding(self.src_tok_emb(src))
        tgt_emb = self.positional_encoding(self.tgt_tok_emb(trg))
        outs = self.transformer(
            src_emb,
            tgt_emb,
            src_mask,
            tgt_mask,
            None,
            src_padding_mask,
            tgt_padding_mask,
            memory_key_padding_mask,
        )
        return self.generator(outs)


def pytorch_transformer_translation(
    path: str, epochs: int = 8, seed: int = 0, bug: str | None = None
) -> list[float]:
    """pytorch/examples' / the tutorial's "Language Translation with nn.Transformer":
    `Seq2SeqTransformer` (token embeddings times sqrt(emb), sinusoidal positions, `nn.Transformer`,
    a `Linear` generator), Xavier init of every matrix, `create_mask` (square subsequent mask,
    padding masks), `CrossEntropyLoss(ignore_index=PAD_IDX)` on `logits.reshape(-1, ...)`, Adam
    lr 1e-4 betas (0.9, 0.98) eps 1e-9 (5e-4 here for the tiny model), `train_epoch` and
    `evaluate` each epoch, `collate_fn` adding BOS / EOS and padding, sequence-first batches of
    32. The "sentence pairs" are a word-for-word lexicon with adjective-noun inversion."""
    g = _seed(seed)
    PAD_IDX, BOS_IDX, EOS_IDX = 1, 2, 3
    n_src, n_tgt = 30, 30
    lex = (torch.randperm(n_src - 4, generator=g) + 4).tolist()
    src_sents, tgt_sents = [], []
    for _ in range(2200):
        length = int(torch.randint(4, 11, (1,), generator=g))
        s = (torch.randint(4, n_src, (length,), generator=g)).tolist()
        t = [lex[w - 4] for w in s]
        for i in range(0, length - 1, 2):
            if s[i] < 12:  # "adjectives" go after their noun
                t[i], t[i + 1] = t[i + 1], t[i]
        src_sents.append(s)
        tgt_sents.append(t)

    def collate_fn(batch: list[tuple[list[int], list[int]]]) -> tuple[torch.Tensor, torch.Tensor]:
        src_batch = [torch.tensor([BOS_IDX] + s + [EOS_IDX]) for s, _ in batch]
        tgt_batch = [torch.tensor([BOS_IDX] + t + [EOS_IDX]) for _, t in batch]
        return (
            nn.utils.rnn.pad_sequence(src_batch, padding_value=PAD_IDX),
            nn.utils.rnn.pad_sequence(tgt_batch, padding_value=PAD_IDX),
        )

    def create_mask(src: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor, ...]:
        src_seq_len, tgt_seq_len = src.shape[0], tgt.shape[0]
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt_seq_len)
        src_mask = torch.zeros((src_seq_len, src_seq_len)).type(torch.bool)
        return src_mask, tgt_mask, (src == PAD_IDX).transpose(0, 1), (tgt == PAD_IDX).transpose(0, 1)

    pairs = list(zip(src_sents, tgt_sents, strict=True))
    train_dataloader = DataLoader(
        pairs[:2000], batch_size=32, shuffle=True, collate_fn=collate_fn, generator=g
    )
    val_dataloader = DataLoader(pairs[2000:], batch_size=32, collate_fn=collate_fn)
    transformer = _Seq2SeqTransformer(2, 2, 64, 4, n_src, n_tgt)
    for p in transformer.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD_IDX)
    lr = 5e-2 if bug == "lr_x100" else 5e-4  # bug: `lr=0.05` in the config for 0.0005
    optimizer = torch.optim.Adam(transformer.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    hook = Hook(path)
    hook.register_module(transformer)
    hook.register_loss(loss_fn)
    losses: list[float] = []

    def train_epoch() -> float:
        transformer.train()
        total = 0.0
        for src, tgt in train_dataloader:
            tgt_input = tgt[:-1, :]
            src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
            logits = transformer(
                src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, src_padding_mask
            )
            optimizer.zero_grad()
            tgt_out = tgt[1:, :]
            loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
            loss.backward()
            optimizer.step()
            total += loss.item()
            losses.append(loss.item())
        return total / len(train_dataloader)

    def evaluate() -> float:
        transformer.eval()
        total = 0.0
        with torch.no_grad():
            for src, tgt in val_dataloader:
                tgt_input = tgt[:-1, :]
                src_mask, tgt_mask, src_padding_mask, tgt_padding_mask = create_mask(src, tgt_input)
                logits = transformer(
                    src, tgt_input, src_mask, tgt_mask, src_padding_mask, tgt_padding_mask, src_padding_mask
                )
                total += loss_fn(logits.reshape(-1, logits.shape[-1]), tgt[1:, :].reshape(-1)).item()
        return total / len(val_dataloader)

    for epoch in range(1, epochs + 1):
        train_loss = train_epoch()
        val_loss = evaluate()
        print(f"Epoch: {epoch}, Train loss: {train_loss:.3f}, Val loss: {val_loss:.3f}")
    hook.close()
    return losses


def hf_course_codeparrot_keytoken_loss(
    path: str, steps: int = 240, seed: int = 0, bug: str | None = None
) -> list[float]:
    """The Hugging Face course, chapter 7 "Training a causal language model from scratch", its
    custom loop: a small `GPT2LMHeadModel` built from a `GPT2Config`, `keytoken_weighted_loss`
    (the per-token cross-entropy from `outputs.logits` shifted by one, averaged per sample and
    weighted by `1 + alpha * ` the count of key tokens in the sample), `get_grouped_params` (no
    weight decay on biases and LayerNorm weights), AdamW lr 5e-4, `get_scheduler("cosine")` with
    warm-up, `gradient_accumulation_steps = 4` with the loss divided by it, clipping at 1.0, and
    `evaluate()` (the mean of `outputs.loss` over the validation set and its perplexity) every
    60 steps. The "code" is a token stream with key tokens (`plt`, `pd`, `sk`, `np`)."""
    from transformers import GPT2Config, GPT2LMHeadModel, get_scheduler

    g = _seed(seed)
    vocab, context_length = 64, 32
    keytoken_ids = [4, 5, 6, 7]
    stream = torch.empty(0, dtype=torch.long)
    while stream.numel() < 40000:
        # "statements": a key token starts some of them, then a call chain of ids it determines
        head = int(torch.randint(0, 6, (1,), generator=g))
        body = torch.randint(8, vocab, (1,), generator=g)
        stmt = [keytoken_ids[head]] if head < 4 else [int(body)]
        for _ in range(int(torch.randint(3, 7, (1,), generator=g))):
            stmt.append(8 + (stmt[-1] * 7 + 3) % (vocab - 8))
        stream = torch.cat([stream, torch.tensor(stmt + [1])])
    blocks = stream[: (stream.numel() // context_length) * context_length].view(-1, context_length)
    train_blocks, valid_blocks = blocks[:-64], blocks[-64:]
    config = GPT2Config(
        vocab_size=vocab,
        n_ctx=context_length,
        n_positions=context_length,
        n_embd=64,
        n_layer=2,
        n_head=4,
        bos_token_id=0,
        eos_token_id=1,
    )
    model = GPT2LMHeadModel(config)

    def keytoken_weighted_loss(
        inputs: torch.Tensor, logits: torch.Tensor, keytoken_ids: list[int], alpha: float = 1.0
    ) -> torch.Tensor:
        shift_labels = inputs[..., 1:].contiguous()
        shift_logits = logits[..., :-1, :].contiguous()
        loss_fct = nn.CrossEntropyLoss(reduction="none")
        loss = loss_fct(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))
        loss_per_sample = loss.view(shift_logits.size(0), shift_logits.size(1)).mean(axis=1)
        weights = torch.stack([(inputs == kt).float() for kt in keytoken_ids]).sum(axis=[0, 2])
        weights = alpha * (1.0 + weights)
        return (loss_per_sample * weights).mean()

    def get_grouped_params(
        model: nn.Module,
        no_decay: tuple[str, ...] = ("bias", "ln_f.weight", "ln_1.weight", "ln_2.weight"),
        weight_decay: float = 0.1,
    ) -> list[dict[str, Any]]:
        params_with_wd, params_without_wd = [], []
        for n, p in model.named_parameters():
            if any(nd in n for nd in no_decay):
                params_without_wd.append(p)
            else:
                params_with_wd.append(p)
        return [
            {"params": params_with_wd, "weight_decay": weight_decay},
            {"params": params_without_wd, "weight_decay": 0.0},
        ]

    def evaluate() -> tuple[float, float]:
        model.eval()
        losses_ = []
        with torch.no_grad():
            for batch in valid_blocks.split(32):
                outputs = model(batch, labels=batch)
                losses_.append(outputs.loss.item())
        loss = float(np.mean(losses_))
        model.train()
        return loss, math.exp(loss)

    gradient_accumulation_steps = 4
    optimizer = torch.optim.AdamW(get_grouped_params(model), lr=5e-4)
    lr_scheduler = get_scheduler(
        name="cosine",
        optimizer=optimizer,
        num_warmup_steps=20,
        num_training_steps=steps // gradient_accumulation_steps,
    )
    hook = Hook(path)
    hook.register_module(model)
    model.train()
    losses: list[float] = []
    order = torch.randperm(len(train_blocks), generator=g)
    for step in range(steps):
        batch = train_blocks[order[(step * 16) % (len(order) - 16) :][:16]]
        logits = model(batch).logits
        loss = keytoken_weighted_loss(batch, logits, keytoken_ids)
        losses.append(loss.item())
        if step % 40 == 0:
            print({"steps": step, "loss/train": loss.item() * gradient_accumulation_steps})
        loss = loss / gradient_accumulation_steps
        loss.backward()
        if step % gradient_accumulation_steps == 0:
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
        if step % 60 == 59:
            eval_loss, perplexity = evaluate()
            print({"loss/eval": eval_loss, "perplexity": perplexity})
    hook.close()
    return losses


def _caption_scenes(
    g: torch.Generator, n: int, n_colours: int = 6
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """16 x 32 RGB scenes of two to four coloured squares left to right; the caption is
    `<start>`, their colour words in order, `<end>`, padded (ids: 0 pad, 1 start, 2 end)."""
    palette = torch.rand(n_colours, 3, generator=g) * 0.8 + 0.2
    imgs = torch.zeros(n, 3, 16, 32)
    caps = torch.zeros(n, 7, dtype=torch.long)
    lens = torch.zeros(n, dtype=torch.long)
    for i in range(n):
        k = int(torch.randint(2, 5, (1,), generator=g))
        cols = torch.randint(0, n_colours, (k,), generator=g)
        for j in range(k):
            x0 = j * 8 + int(torch.randint(0, 3, (1,), generator=g))
            y0 = int(torch.randint(2, 9, (1,), generator=g))
            imgs[i, :, y0 : y0 + 5, x0 : x0 + 5] = palette[cols[j]][:, None, None]
        caps[i, : k + 2] = torch.cat([torch.tensor([1]), cols + 3, torch.tensor([2])])
        lens[i] = k + 2
    imgs = imgs + 0.05 * torch.randn(imgs.shape, generator=g)
    return imgs, caps, lens


class _SATEncoder(nn.Module):
    def __init__(self, encoded_image_size: int = 4) -> None:
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
        )
        self.adaptive_pool = nn.AdaptiveAvgPool2d((encoded_image_size, 2 * encoded_image_size))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.adaptive_pool(self.cnn(images)).permute(0, 2, 3, 1)


class _SATAttention(nn.Module):
    def __init__(self, encoder_dim: int, decoder_dim: int, attention_dim: int) -> None:
        super().__init__()
        self.encoder_att = nn.Linear(encoder_dim, attention_dim)
        self.decoder_att = nn.Linear(decoder_dim, attention_dim)
        self.full_att = nn.Linear(attention_dim, 1)
        self.relu = nn.ReLU()
        self.softmax = nn.Softmax(dim=1)

    def forward(
        self, encoder_out: torch.Tensor, decoder_hidden: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        att1 = self.encoder_att(encoder_out)
        att2 = self.decoder_att(decoder_hidden)
        att = self.full_att(self.relu(att1 + att2.unsqueeze(1))).squeeze(2)
        alpha = self.softmax(att)
        return (encoder_out * alpha.unsqueeze(2)).sum(dim=1), alpha


class _DecoderWithAttention(nn.Module):
    def __init__(
        self,
        attention_dim: int,
        embed_dim: int,
        decoder_dim: int,
        vocab_size: int,
        encoder_dim: int = 64,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.attention = _SATAttention(encoder_dim, decoder_dim, attention_dim)
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.dropout = nn.Dropout(p=dropout)
        self.decode_step = nn.LSTMCell(embed_dim + encoder_dim, decoder_dim, bias=True)
        self.init_h = nn.Linear(encoder_dim, decoder_dim)
        self.init_c = nn.Linear(encoder_dim, decoder_dim)
        self.f_beta = nn.Linear(decoder_dim, encoder_dim)
        self.sigmoid = nn.Sigmoid()
        self.fc = nn.Linear(decoder_dim, vocab_size)
        self.embedding.weight.data.uniform_(-0.1, 0.1)
        self.fc.bias.data.fill_(0)
        self.fc.weight.data.uniform_(-0.1, 0.1)

    def forward(
        self, encoder_out: torch.Tensor, encoded_captions: torch.Tensor, caption_lengths: torch.Tensor
    ) -> tuple[Any, ...]:
        batch_size = encoder_out.size(0)
        encoder_out = encoder_out.view(batch_size, -1, encoder_out.size(-1))
        num_pixels = encoder_out.size(1)
        caption_lengths, sort_ind = caption_lengths.sort(dim=0, descending=True)
        encoder_out = encoder_out[sort_ind]
        encoded_captions = encoded_captions[sort_ind]
        embeddings = self.embedding(encoded_captions)
        mean_encoder_out = encoder_out.mean(dim=1)
        h, c = self.init_h(mean_encoder_out), self.init_c(mean_encoder_out)
        decode_lengths = (caption_lengths - 1).tolist()
        predictions = torch.zeros(batch_size, max(decode_lengths), self.vocab_size)
        alphas = torch.zeros(batch_size, max(decode_lengths), num_pixels)
        for t in range(max(decode_lengths)):
            batch_size_t = sum([length > t for length in decode_lengths])
            attention_weighted_encoding, alpha = self.attention(encoder_out[:batch_size_t], h[:batch_size_t])
            gate = self.sigmoid(self.f_beta(h[:batch_size_t]))
            attention_weighted_encoding = gate * attention_weighted_encoding
            h, c = self.decode_step(
                torch.cat([embeddings[:batch_size_t, t, :], attention_weighted_encoding], dim=1),
                (h[:batch_size_t], c[:batch_size_t]),
            )
            preds = self.fc(self.dropout(h))
            predictions[:batch_size_t, t, :] = preds
            alphas[:batch_size_t, t, :] = alpha
        return predictions, encoded_captions, decode_lengths, alphas, sort_ind


def show_attend_tell_captioning(
    path: str, epochs: int = 5, seed: int = 0, bug: str | None = None
) -> list[float]:
    """sgrvinod's a-PyTorch-Tutorial-to-Image-Captioning (`train.py`): an encoder CNN giving a
    grid of features, `DecoderWithAttention` (soft additive attention, the `f_beta` sigmoid gate,
    an `LSTMCell`, `init_h` / `init_c` from the mean feature, dropout 0.5, the batch sorted by
    caption length and shrunk per time step), `pack_padded_sequence(...).data` on scores and
    targets, `CrossEntropyLoss` plus the doubly stochastic attention regularization
    `alpha_c * ((1 - alphas.sum(dim=1)) ** 2).mean()`, `clip_gradient` by value at 5 over each
    optimizer's groups, Adam for the decoder (and the encoder, `fine_tune_encoder=True`), top-5
    accuracy, a validation pass each epoch, `adjust_learning_rate(0.8)` after epochs without
    improvement."""
    g = _seed(seed)
    imgs, caps, caplens = _caption_scenes(g, 1700)
    if bug == "shuffled_labels":  # bug: the captions' JSON read in another order than the images' HDF5
        order = torch.randperm(len(caps), generator=g)
        caps, caplens = caps[order], caplens[order]
    vocab_size, alpha_c, grad_clip = 9, 1.0, 5.0
    encoder = _SATEncoder()
    decoder = _DecoderWithAttention(attention_dim=64, embed_dim=32, decoder_dim=64, vocab_size=vocab_size)
    decoder_optimizer = torch.optim.Adam(
        params=filter(lambda p: p.requires_grad, decoder.parameters()), lr=4e-3
    )
    encoder_optimizer = torch.optim.Adam(
        params=filter(lambda p: p.requires_grad, encoder.parameters()), lr=1e-3
    )
    criterion = nn.CrossEntropyLoss()
    train_loader = DataLoader(
        TensorDataset(imgs[:1500], caps[:1500], caplens[:1500]), batch_size=32, shuffle=True, generator=g
    )
    val_loader = DataLoader(TensorDataset(imgs[1500:], caps[1500:], caplens[1500:]), batch_size=64)
    hook = Hook(path)
    hook.register_module(encoder)
    hook.register_module(decoder)
    hook.register_loss(criterion)

    def clip_gradient(optimizer: torch.optim.Optimizer, grad_clip: float) -> None:
        for group in optimizer.param_groups:
            for param in group["params"]:
                if param.grad is not None:
                    param.grad.data.clamp_(-grad_clip, grad_clip)

    def adjust_learning_rate(optimizer: torch.optim.Optimizer, shrink_factor: float) -> None:
        for param_group in optimizer.param_groups:
            param_group["lr"] = param_group["lr"] * shrink_factor

    def accuracy(scores: torch.Tensor, targets: torch.Tensor, k: int) -> float:
        _, ind = scores.topk(k, 1, True, True)
        return float(ind.eq(targets.view(-1, 1).expand_as(ind)).float().sum()) * (100.0 / targets.size(0))

    def step(
        imgs: torch.Tensor, caps: torch.Tensor, caplens: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        scores, caps_sorted, decode_lengths, alphas, _ = decoder(encoder(imgs), caps, caplens)
        targets = caps_sorted[:, 1:]
        scores = nn.utils.rnn.pack_padded_sequence(scores, decode_lengths, batch_first=True).data
        targets = nn.utils.rnn.pack_padded_sequence(targets, decode_lengths, batch_first=True).data
        loss = criterion(scores, targets)
        loss = loss + alpha_c * ((1.0 - alphas.sum(dim=1)) ** 2).mean()
        return loss, scores, targets

    losses: list[float] = []
    best_loss, epochs_since_improvement = float("inf"), 0
    for epoch in range(epochs):
        if epochs_since_improvement > 0 and epochs_since_improvement % 2 == 0:
            adjust_learning_rate(decoder_optimizer, 0.8)
            adjust_learning_rate(encoder_optimizer, 0.8)
        decoder.train()
        encoder.train()
        for i, (img, cap, caplen) in enumerate(train_loader):
            loss, scores, targets = step(img, cap, caplen)
            decoder_optimizer.zero_grad()
            encoder_optimizer.zero_grad()
            loss.backward()
            clip_gradient(decoder_optimizer, grad_clip)
            clip_gradient(encoder_optimizer, grad_clip)
            decoder_optimizer.step()
            encoder_optimizer.step()
            losses.append(loss.item())
            if i % 20 == 0:
                print(
                    f"Epoch: [{epoch}][{i}/{len(train_loader)}] Loss {loss.item():.4f} Top-5 {accuracy(scores, targets, 5):.3f}"
                )
        decoder.eval()
        encoder.eval()
        with torch.no_grad():
            val = float(np.mean([step(*b)[0].item() for b in val_loader]))
        print(f"* LOSS - {val:.3f}")
        if val < best_loss:
            best_loss, epochs_since_improvement = val, 0
        else:
            epochs_since_improvement += 1
    hook.close()
    return losses


# ============================================================================= through tools


def lightning_readme_demo_transformer(path: str, max_steps: int = 300, seed: int = 0) -> list[float]:
    """The Lightning README / Trainer docs example: `LightningTransformer` around
    `lightning.pytorch.demos.Transformer` (an `nn.Transformer` whose forward returns
    `log_softmax`), `training_step` computing `F.nll_loss(output, target.view(-1))`, plain SGD at
    lr 0.1 from `configure_optimizers`, a `DataLoader(dataset)` of the default batch size one,
    35-token windows and their next-token targets (a word stream standing in for WikiText-2),
    `L.Trainer(max_steps=...)` with `mldbg.lightning.DebuggerCallback`. As in the example, the
    decoder is fed the target sequence under a causal mask."""
    import lightning.pytorch as pl
    from lightning.pytorch.demos import Transformer

    from mldbg.lightning import DebuggerCallback

    g = _seed(seed)
    words = _char_text(g, 30000).split()
    vocab = {w: i for i, w in enumerate(sorted(set(words)))}
    ids = torch.tensor([vocab[w] for w in words])
    block_size = 35
    n = (len(ids) - 1) // block_size
    inputs = ids[: n * block_size].view(n, block_size)
    targets = ids[1 : n * block_size + 1].view(n, block_size)

    class LightningTransformer(pl.LightningModule):
        def __init__(self, vocab_size: int) -> None:
            super().__init__()
            self.model = Transformer(vocab_size=vocab_size)

        def forward(self, inputs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return self.model(inputs, target)

        def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
            inputs, target = batch
            output = self(inputs, target)
            loss = F.nll_loss(output, target.view(-1))
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.model.parameters(), lr=0.1)

    class LossHistory(pl.Callback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, batch: Any, idx: int) -> None:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            if loss is not None:
                self.losses.append(float(loss))

    dataloader = DataLoader(TensorDataset(inputs, targets), shuffle=True, generator=g)
    model = LightningTransformer(vocab_size=len(vocab))
    history = LossHistory()
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        default_root_dir=path, logger=False, max_steps=max_steps, callbacks=[DebuggerCallback(path), history],
    )  # fmt: skip
    trainer.fit(model=model, train_dataloaders=dataloader)
    return history.losses


_micrograd = healthy("micrograd_moons_svm_max_margin", "micrograd demo MLP", micrograd_moons_max_margin)
_makemore = healthy(
    "makemore_part3_batchnorm_tanh_mlp", "makemore BatchNorm-tanh MLP", makemore_batchnorm_tanh_mlp
)
_chatbot = healthy(
    "pytorch_chatbot_luong_attention_masknll", "PyTorch chatbot tutorial", pytorch_chatbot_luong_mask_nll
)
_ngram = healthy("word_embeddings_tutorial_ngram_lm", "N-gram LM tutorial", word_embeddings_tutorial_ngram)
_nn_really = healthy(
    "what_is_torch_nn_really_fit_loss_batch", "torch.nn-really tutorial CNN", what_is_torch_nn_really_fit
)
_m5 = healthy(
    "torchaudio_speech_commands_m5_raw_wave", "torchaudio M5 speech commands", torchaudio_speech_commands_m5
)
_shufflenet = healthy(
    "kuangliu_cifar_shufflenetv2_cosine", "pytorch-cifar ShuffleNetV2", kuangliu_cifar_shufflenetv2
)
_annotated = healthy(
    "annotated_transformer_copy_task_noam", "Annotated Transformer copy task", annotated_transformer_copy_task
)
_translation = healthy(
    "pytorch_nn_transformer_translation",
    "nn.Transformer translation example",
    pytorch_transformer_translation,
)
_sat = healthy(
    "show_attend_tell_doubly_stochastic", "Show, Attend and Tell captioning", show_attend_tell_captioning
)

PIPELINES: list[Any] = [
    _micrograd,
    healthy("min_char_rnn_adagrad_clip5", "min-char-rnn", min_char_rnn_adagrad),
    _makemore,
    _chatbot,
    _ngram,
    _nn_really,
    _m5,
    healthy("spinningup_rtg_policy_gradient_cartpole", "Spinning Up reward-to-go PG", spinningup_reward_to_go_pg),
    healthy("pytorch_gan_began_equilibrium_k", "PyTorch-GAN BEGAN", pytorch_gan_began_equilibrium),
    healthy("yolov5_classify_ema_gradscaler_bf16", "YOLOv5 classify train.py", yolov5_classify_train),
    _shufflenet,
    _annotated,
    _translation,
    _sat,
    buggy(_translation, "lr_x100"),
    buggy(_ngram, "no_zero_grad"),
    buggy(_sat, "shuffled_labels"),
    buggy(_nn_really, "inputs_x255"),
    buggy(_shufflenet, "softmax_before_ce"),
    buggy(_m5, "dead_relu_init"),
    buggy(_micrograd, "deep_sigmoid"),
    buggy(_chatbot, "frozen_by_mistake"),
    buggy(_annotated, "log_zero_nan"),
    buggy(_makemore, "train_in_eval_mode"),
]  # fmt: skip

if installed("transformers"):
    PIPELINES += [
        healthy(
            "hf_course_codeparrot_keytoken_weighted_loss", "HF course causal LM custom loop",
            hf_course_codeparrot_keytoken_loss,
        )
    ]  # fmt: skip

if installed("lightning"):
    PIPELINES += [
        healthy(
            "lightning_readme_demo_transformer_nll", "Lightning README demo Transformer",
            lightning_readme_demo_transformer,
        )
    ]  # fmt: skip
