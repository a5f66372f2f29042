"""The default rule set stays quiet on healthy trainings of several small models."""

from __future__ import annotations

import pytest

from tests.rules.conftest import HEALTHY, fired


@pytest.mark.parametrize("name", HEALTHY)
def test_default_set_is_quiet_on_healthy_training(name, default_findings):
    findings = default_findings(name)
    assert not findings, f"{name}: " + "\n".join(map(str, findings))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("lr_huge", "exploding_tensor"),
        ("negative_bias", "dead_relu"),
        ("zero_init", "poor_weight_initialization"),
        ("lr_tiny", "weight_update_ratio"),
        ("frozen_optimizer", "unchanged_tensor"),
        ("tanh_huge_init", "tanh_saturation"),
        ("sigmoid_inputs_x100", "sigmoid_saturation"),
        ("deep_sigmoid", "vanishing_gradient"),
        ("unnormalized", "not_normalized_data"),
        ("imbalanced", "class_imbalance"),
        ("tiny_train_set", "overfit"),
    ],
)
def test_default_set_reports_the_right_rule(name, expected, default_findings):
    assert expected in fired(default_findings(name)), [str(f) for f in default_findings(name)]
