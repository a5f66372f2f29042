"""`torch_lm`: the language-model counts of a cross-entropy, against a plain NumPy reference,
for every layout the hook meets (flat logits, (B, V, T) logits, Hugging Face's older cut,
sequence-first ids, label smoothing, a loss divided for accumulation), and what fed the loss
(a softmax, a log-softmax twice, probabilities straight into nll_loss)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mldbg.frameworks.torch_lm import statistics, token_ids

V, B, T = 12, 5, 9


def _reference(logp: np.ndarray, tgt: np.ndarray, ids: np.ndarray, ignore: int = -100) -> dict[str, float]:
    """The counts of the module's table, batch-first (axis 1) and offset 0, by loops."""
    valid = tgt != ignore
    nll = np.where(valid, -np.take_along_axis(logp, np.where(valid, tgt, 0)[..., None], -1)[..., 0], 0.0)
    out = {"align_0": float(((tgt == ids) & valid).sum()), "eligible_0": float(valid.sum())}
    for k in (1, 2):
        out[f"align_{k}_1"] = float(((tgt[:, : T - k] == ids[:, k:]) & valid[:, : T - k]).sum())
        out[f"eligible_{k}_1"] = float(valid[:, : T - k].sum())
    out["last_loss_1"], out["last_1"] = float(nll[:, -1].sum()), float(valid[:, -1].sum())
    out["rest_loss_1"], out["rest_1"] = float(nll[:, :-1].sum()), float(valid[:, :-1].sum())
    out["loss_sum"] = float(nll.sum())
    return out


def _close(found: dict[str, torch.Tensor], expected: dict[str, float]) -> None:
    for key, value in expected.items():
        assert float(found[key]) == pytest.approx(value, rel=1e-5, abs=1e-4), key


@pytest.fixture
def batch():
    g = torch.Generator().manual_seed(0)
    stream = torch.randint(V, (B, T + 2), generator=g)
    logits = torch.randn(B, T, V, generator=g, requires_grad=True)
    return stream, logits


@pytest.mark.parametrize("shift", [0, 1, 2])
def test_flat_logits_against_the_reference(batch, shift):
    stream, logits = batch
    ids, y = stream[:, :T], stream[:, shift : shift + T].clone()
    y[1, -3:] = -100
    loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1)) / 4  # divided for accumulation
    found = statistics(loss, ids)
    logp = F.log_softmax(logits, -1).detach().numpy()
    _close(found, _reference(logp, y.numpy(), ids.numpy()))
    assert float(found["prob_rows"]) == 0 and float(found["prob_softmax"]) == 0


def test_b_v_t_logits_label_smoothing_and_the_older_cut(batch):
    stream, logits = batch
    ids, y = stream[:, :T], stream[:, 1 : T + 1]
    logp = F.log_softmax(logits, -1).detach().numpy()
    expected = _reference(logp, y.numpy(), ids.numpy())
    _close(statistics(F.cross_entropy(logits.transpose(1, 2), y, label_smoothing=0.1), ids), expected)
    # Hugging Face's older cut: logits[:, :-1] against labels[:, 1:] (labels = the ids)
    cut = F.cross_entropy(logits[:, :-1].reshape(-1, V), ids[:, 1:].reshape(-1))
    found = statistics(cut, ids)
    assert float(found["align_1_1"]) == float(found["eligible_1_1"]) == B * (T - 1)
    assert float(found["last_1"]) == 0  # no target at the last position


def test_sequence_first_ids_align_along_axis_0(batch):
    stream, logits = batch
    ids, y = stream[:, :T].t(), stream[:, 2 : T + 2].t()  # (T, B), shifted twice
    found = statistics(F.cross_entropy(logits.reshape(-1, V), y.reshape(-1)), ids)
    assert float(found["align_2_0"]) == float(found["eligible_2_0"]) == (T - 2) * B


def test_padding_counts(batch):
    stream, logits = batch
    ids, y = stream[:, :T].clone(), stream[:, 1 : T + 1].clone()
    y[y == 7] = 3  # id 7 is the padding: it occurs nowhere else
    y[0, 5:], y[2, 6:], y[3, 4:] = 7, 7, 7
    y[:, -1] = -100  # the ignored tail every row has (a shift's, as Hugging Face pads its labels)
    found = statistics(F.cross_entropy(logits.reshape(-1, V), y.reshape(-1)), ids)
    assert float(found["pad_id"]) == 7
    assert float(found["pad_rows"]) == 3
    assert float(found["pad_trailing"]) == float(found["pad_all"]) == (T - 6) + (T - 7) + (T - 5)
    # a row whose targets end before the others' ignores its padding: its run is content
    y[3, -3:] = -100
    found = statistics(F.cross_entropy(logits.reshape(-1, V), y.reshape(-1)), ids)
    assert float(found["pad_rows"]) == 2
    assert float(found["pad_trailing"]) == (T - 6) + (T - 7)
    assert float(found["pad_all"]) == (T - 6) + (T - 7) + (T - 7)
    logp = F.log_softmax(logits, -1).detach()
    mask = y == 7
    assert float(found["pad_loss"]) == pytest.approx(
        float(-logp[mask].gather(-1, y[mask][:, None]).sum()), rel=1e-5
    )


@pytest.mark.parametrize(
    ("head", "rows", "kind"),
    [
        (lambda z, y: F.cross_entropy(z.softmax(-1), y), 1.0, 1),
        (lambda z, y: F.nll_loss(z.softmax(-1), y), 1.0, 2),
        (lambda z, y: F.cross_entropy(F.log_softmax(z, -1), y), 0.0, 0),
        (lambda z, y: F.nll_loss(z.softmax(-1).log(), y), 0.0, 0),
        (lambda z, y: F.cross_entropy(z, y), 0.0, 0),
    ],
    ids=["softmax_ce", "softmax_nll", "log_softmax_twice", "log_of_softmax", "logits"],
)
def test_what_fed_the_loss(batch, head, rows, kind):
    stream, logits = batch
    z, y = logits.reshape(-1, V), stream[:, 1 : T + 1].reshape(-1)
    found = statistics(head(z, y), None)
    assert float(found["prob_rows"]) == rows * float(found["prob_total"])
    assert float(found["prob_softmax"]) == kind


def test_no_cross_entropy_no_counts(batch):
    _, logits = batch
    assert statistics(logits.pow(2).mean(), None) is None  # not a cross-entropy
    # class probabilities as targets (soft labels), computed as a written cross-entropy is
    # (`-(target * log_softmax).sum(1)`): only a row with a majority class names a label (its
    # class); the others are no targets; its log-probabilities are no probabilities
    target = logits.reshape(-1, V).softmax(-1).detach()
    soft = F.cross_entropy(logits.reshape(-1, V), target)
    assert statistics(soft, None) == {"prob_rows": 0, "prob_total": B * T, "prob_softmax": 0}
    found = statistics(soft, batch[0][:, :T])
    assert found is not None and found["eligible_0"] == (target.max(1).values > 0.5).sum() < B * T / 4


def test_token_ids_of_a_call():
    ids = torch.zeros(2, 3, dtype=torch.long)
    assert token_ids((ids, torch.randn(2, 3)), {}) is ids
    # integer sequences after a floating first argument: a decoder's targets (teacher forcing)
    assert token_ids((torch.randn(2, 3), ids), {}) is None
    assert token_ids((), {"input_ids": ids, "labels": ids + 1}) is ids
    assert token_ids((torch.zeros(2, 3, 4, dtype=torch.long),), {}) is None


def test_padding_masked_by_the_script_or_by_a_class_weight_is_not_counted(batch):
    """`reduction="none"` then a mask of the script's own: no padding counts at all; a class
    weight of 0 on the pad id: its targets are not valid targets."""
    stream, logits = batch
    ids, y = stream[:, :T].clone(), stream[:, 1 : T + 1].clone()
    y[y == 7] = 3
    y[0, 5:], y[2, 6:] = 7, 7
    mask = (y != 7).float()
    per_token = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1), reduction="none")
    found = statistics((per_token * mask.reshape(-1)).sum() / mask.sum(), ids)
    assert "pad_rows" not in found and "align_1_1" in found
    weight = torch.ones(V)
    weight[7] = 0
    found = statistics(F.cross_entropy(logits.reshape(-1, V), y.reshape(-1), weight=weight), ids)
    assert float(found["valid"]) == B * T - 4 - 3
    assert float(found["pad_id"]) != 7  # (another id may end two rows in a run by chance)


def test_an_encoder_decoder_has_no_token_ids_to_align_with():
    from types import SimpleNamespace

    ids = torch.zeros(2, 3, dtype=torch.long)
    seq2seq = SimpleNamespace(config=SimpleNamespace(is_encoder_decoder=True))
    assert token_ids((), {"input_ids": ids}, seq2seq) is None
    assert token_ids((), {"input_ids": ids, "decoder_input_ids": ids}) is None
    assert (
        token_ids((), {"input_ids": ids}, SimpleNamespace(config=SimpleNamespace(is_encoder_decoder=False)))
        is ids
    )


def test_a_sum_of_cross_entropies_is_not_read(batch):
    """Two heads (next token, and the token after it: multi-token prediction): which targets
    belong to which head is not known, so nothing is aligned."""
    stream, logits = batch
    ids = stream[:, :T]
    y1, y2 = stream[:, 1 : T + 1], stream[:, 2 : T + 2]
    two = F.cross_entropy(logits.reshape(-1, V), y2.reshape(-1)) + F.cross_entropy(
        logits.reshape(-1, V), y1.reshape(-1)
    )
    assert statistics(two, ids) is None
