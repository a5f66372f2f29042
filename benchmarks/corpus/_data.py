"""Synthetic data the corpus trains on, generated in-process from a seed (no downloads)."""

from __future__ import annotations

import numpy as np
import torch

WORDS = [
    "the",
    "of",
    "and",
    "to",
    "a",
    "in",
    "is",
    "it",
    "that",
    "was",
    "he",
    "for",
    "on",
    "are",
    "with",
    "as",
    "his",
    "they",
    "be",
    "at",
    "one",
    "have",
    "this",
    "from",
    "or",
    "had",
    "by",
    "word",
    "but",
    "what",
    "some",
    "we",
    "can",
    "out",
    "other",
    "were",
    "all",
    "there",
    "when",
    "up",
    "use",
    "your",
    "how",
    "said",
    "an",
    "each",
    "she",
    "which",
    "do",
    "their",
    "time",
    "if",
    "will",
    "way",
    "about",
    "many",
    "then",
    "them",
    "write",
    "would",
    "like",
    "so",
    "these",
    "her",
    "long",
    "make",
    "thing",
    "see",
    "him",
    "two",
    "has",
    "look",
    "more",
    "day",
    "could",
    "go",
    "come",
    "did",
    "number",
    "sound",
    "no",
    "most",
    "people",
    "my",
    "over",
    "know",
    "water",
    "than",
    "call",
    "first",
    "who",
    "may",
    "down",
    "side",
    "been",
    "now",
    "find",
]


def word_stream(seed: int, n_words: int, vocab: int = 120) -> np.ndarray:
    """Word ids of a text-like stream: Zipf unigram frequencies, and a bigram structure (the
    next word follows from the previous one 60% of the time), with sentence ends (id 0)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab) ** 1.1
    p /= p.sum()
    nxt = rng.permutation(vocab - 1) + 1
    out = np.empty(n_words, dtype=np.int64)
    w = 1
    for i in range(n_words):
        r = rng.random()
        if r < 0.08:
            w = 0
        elif r < 0.68 and w != 0:
            w = int(nxt[w - 1])
        else:
            w = int(rng.choice(vocab - 1, p=p)) + 1
        out[i] = w
    return out


def text(seed: int, n_chars: int) -> str:
    """English-looking text: the word stream spelled with WORDS, sentences with capitals and
    full stops."""
    ids = word_stream(seed, n_chars // 3, vocab=len(WORDS) + 1)
    parts: list[str] = []
    start = True
    for w in ids:
        if w == 0:
            if parts:
                parts[-1] += "."
            start = True
            continue
        word = WORDS[w - 1]
        parts.append(word.capitalize() if start else word)
        start = False
    return " ".join(parts)[:n_chars]


def sentences(seed: int, n: int, vocab: int, min_len: int = 4, max_len: int = 16) -> list[list[int]]:
    """`n` sentences of ids 3..vocab-1 (0 pad, 1 start, 2 end are reserved) from the word stream."""
    rng = np.random.default_rng(seed + 1)
    stream = word_stream(seed, n * max_len, vocab=vocab - 2)
    stream = stream[stream > 0] + 2
    out, i = [], 0
    for _ in range(n):
        k = int(rng.integers(min_len, max_len + 1))
        out.append([int(t) for t in stream[i : i + k]])
        i += k
    return out


def teacher_classes(
    g: torch.Generator, n: int, d: int, classes: int, priors: list[float] | None = None, noise: float = 0.3
) -> tuple[torch.Tensor, torch.Tensor]:
    """Standardized features and labels from a random two-layer teacher; `priors` skews the
    classes by shifting the teacher's logits (a learnable imbalanced problem)."""
    x = torch.randn(n, d, generator=g)
    w1 = torch.randn(d, 32, generator=g) / d**0.5
    w2 = torch.randn(32, classes, generator=g) * 2
    logits = torch.tanh(x @ w1) @ w2 + noise * torch.randn(n, classes, generator=g)
    if priors is not None:
        logits = logits + torch.log(torch.tensor(priors)) * 3
    return x, logits.argmax(1)


def shapes(
    g: torch.Generator, n: int, classes: int = 4, size: int = 12, channels: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Images of `classes` shapes (bars, crosses, boxes, diagonals...) at random offsets, with
    pixel noise, normalized to zero mean and unit variance."""
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    masks = [
        (yy - size // 2).abs() < 2,
        (xx - size // 2).abs() < 2,
        ((yy - size // 2).abs() < 2) | ((xx - size // 2).abs() < 2),
        (yy - xx).abs() < 2,
        (yy + xx - size + 1).abs() < 2,
        ((yy - size // 2).abs() < 4) & ((xx - size // 2).abs() < 4),
    ][:classes]
    y = torch.randint(0, classes, (n,), generator=g)
    base = torch.stack([m.float() for m in masks])[y]  # (n, size, size)
    dy = torch.randint(-2, 3, (n,), generator=g)
    dx = torch.randint(-2, 3, (n,), generator=g)
    imgs = torch.stack(
        [torch.roll(b, (int(a), int(c)), (0, 1)) for b, a, c in zip(base, dy, dx, strict=True)]
    )
    imgs = imgs.unsqueeze(1).repeat(1, channels, 1, 1)
    imgs = imgs * (0.5 + torch.rand(n, channels, 1, 1, generator=g)) + 0.3 * torch.randn(
        imgs.shape, generator=g
    )
    return (imgs - 0.25) / 0.45, y


def block_graph(
    g: torch.Generator, blocks: int, size: int, p_in: float, p_out: float, features: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A stochastic block graph: node features (noisy community signal), an edge index (2, E)
    with both directions, and node labels (the community)."""
    n = blocks * size
    y = torch.arange(n) // size
    same = y[:, None] == y[None, :]
    prob = torch.where(same, torch.tensor(p_in), torch.tensor(p_out))
    a = torch.rand(n, n, generator=g) < prob
    a = torch.triu(a, 1)
    a = a | a.T
    edge_index = a.nonzero().T.contiguous()
    centers = torch.randn(blocks, features, generator=g)
    x = 0.4 * centers[y] + torch.randn(n, features, generator=g)
    return x, edge_index, y
