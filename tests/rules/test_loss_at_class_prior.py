"""loss_at_class_prior: a classifier trained on labels shuffled apart from its inputs fires, with
the diagnosis `labels_misaligned`, whether its classes are balanced (the loss starts at their
entropy and stays) or not (it falls to it); its healthy twins stay quiet, and so does the
shuffled run still under way (it is judged once the run has finished). Real tiny trainings
recorded with the two lines of the README (`Hook(out_dir)`)."""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch import nn

import mldbg
import mldbg.torch
from mldbg.rules.runner import RuleRunner
from tests.rules.conftest import live_findings

RULE = ["loss_at_class_prior"]


def _prior(finding) -> float:
    """The class entropy a finding names (from the labels counted at statistics steps)."""
    return float(re.search(r"at its frequency is ([0-9.]+) nats", finding.message).group(1))


def classifier(
    out_dir,
    *,
    shuffle: bool,
    rates: list[float] | None = None,
    steps: int = 150,
    seed: int = 0,
    lr: float = 0.05,
    depth: int = 1,
) -> float:
    """A ReLU MLP on 16 features and 5 classes drawn from a fixed linear teacher (`rates`: the
    classes' shares, by the teacher's score's quantiles; balanced by default), SGD with
    momentum (`lr`; `depth` hidden layers), 10,000 samples in batches of 50 (200 steps an epoch: the run sees each sample
    once at most, too few times to memorize one); `shuffle`: the labels permuted apart from
    their rows. Returns the entropy of the labels' distribution."""
    torch.manual_seed(seed)
    n, d, k = 10_000, 16, 5
    x = torch.randn(n, d)
    score = x @ torch.randn(d)
    cuts = torch.tensor(rates or [1 / k] * k).cumsum(0)[:-1]
    y = torch.bucketize(score, torch.quantile(score, cuts))
    if shuffle:
        y = y[torch.randperm(n)]
    layers: list[nn.Module] = [nn.Linear(d, 64), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(64, 64), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(64, k))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    with mldbg.torch.Hook(str(out_dir)) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for step in range(steps):
            i = torch.arange(step * 50, step * 50 + 50) % n
            loss = loss_fn(model(x[i]), y[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
    p = torch.bincount(y, minlength=k).double() / n
    return float(-(p[p > 0] * p[p > 0].log()).sum())


def test_fires_on_shuffled_balanced_labels(tmp_path):
    h = classifier(tmp_path / "run", shuffle=True)
    found = mldbg.check(str(tmp_path / "run"), rules=RULE)
    assert len(found) == 1, found
    f = found[0]
    assert f.tensors[0] == "CrossEntropyLoss_output_0" and abs(_prior(f) - h) < 0.02 * h, f
    assert abs(h - math.log(5)) < 0.01  # balanced: the loss starts at the prior and stays
    assert [d.cause for d in mldbg.diagnose(str(tmp_path / "run"))] == ["labels_misaligned"]


def test_fires_on_shuffled_imbalanced_labels_whose_loss_falls_to_the_prior(tmp_path):
    h = classifier(tmp_path / "run", shuffle=True, rates=[0.6, 0.2, 0.1, 0.05, 0.05])
    found = mldbg.check(str(tmp_path / "run"), rules=RULE)
    assert found and abs(_prior(found[0]) - h) < 0.02 * h, found
    assert h < math.log(5) - 0.3  # far below the untrained model's log 5: the loss fell to it


def test_quiet_on_the_healthy_twins(tmp_path):
    for k, rates in enumerate((None, [0.6, 0.2, 0.1, 0.05, 0.05])):
        path = tmp_path / f"run{k}"
        classifier(path, shuffle=False, rates=rates)
        assert not mldbg.check(str(path), rules=RULE)


def test_judged_only_once_the_run_has_finished(tmp_path):
    classifier(tmp_path / "run", shuffle=True)
    assert not live_findings(tmp_path / "run", RULE, tmp_path)
    runner = RuleRunner(str(tmp_path / "run"), rules=RULE)
    assert not runner.run_available()
    assert runner.finish()


def test_too_short_a_run_is_not_judged(tmp_path):
    classifier(tmp_path / "run", shuffle=True, steps=60)
    assert not mldbg.check(str(tmp_path / "run"), rules=RULE)


@pytest.mark.parametrize("flat", [False, True])
def test_labels_per_position_are_not_judged(tmp_path, flat):
    """A sequence model's labels per position, (N, T) or flattened to (N x T) as a language
    model's loss takes its next tokens: a short healthy run ends near their frequencies'
    entropy too, so they are not judged; here the labels are even drawn apart from the inputs,
    and the rule says nothing."""
    torch.manual_seed(0)
    vocab, length = 12, 16
    model = nn.Sequential(nn.Embedding(vocab, 32), nn.Linear(32, vocab))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()
    path = str(tmp_path / "run")
    with mldbg.torch.Hook(path) as hook:
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for _ in range(100):
            x = torch.randint(0, vocab, (32, length))
            y = torch.randint(0, vocab, (32, length))  # unrelated to x
            logits = model(x)
            if flat:
                loss = loss_fn(logits.reshape(-1, vocab), y.reshape(-1))
            else:
                loss = loss_fn(logits.transpose(1, 2), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert mldbg.create_trial(path).tensor_names(collection="labels")
    assert not mldbg.check(path, rules=RULE)


def test_a_model_that_learns_nothing_for_another_reason_gets_that_diagnosis(tmp_path):
    """The loss at the class prior is what any training that learns nothing shows: with the
    learning rate 40x too high the MLP's ReLUs die and it predicts the class frequencies. The
    diagnosis names the learning rate, and takes `loss_at_class_prior` as one of its symptoms:
    no second diagnosis blames the labels."""
    classifier(tmp_path / "run", shuffle=False, lr=2.0, depth=2)
    diagnoses = mldbg.diagnose(str(tmp_path / "run"))
    assert "labels_misaligned" not in [g.cause for g in diagnoses], diagnoses
    assert any("loss_at_class_prior" in g.rules for g in diagnoses), diagnoses
