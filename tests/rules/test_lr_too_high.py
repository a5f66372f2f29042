"""A learning rate 100x too high (`mldbg demo`'s broken twin: Adam at lr 5.0 on digits) kills
the ReLUs with its first update; what follows is that update's doing. No finding may then say
"raise the learning rate" (`weight_update_ratio` on the dead layers' tiny updates), report a
frozen layer nobody froze (`frozen_layer_updated` on their zero gradients, which Adam's
moments still move), or blame the default initialization (`all_zero`, `poor_weight_initialization`,
the init advice of `dead_relu` and `vanishing_gradient`)."""

from __future__ import annotations

import pytest

import mldbg

pytest.importorskip("sklearn")
# the model and data rules that read the weights, gradients and activations of this run
RULES = [
    "weight_update_ratio", "frozen_layer_updated", "all_zero", "poor_weight_initialization", "dead_relu",
    "vanishing_gradient", "unchanged_tensor", "tensor_variance",
]  # fmt: skip


def test_a_learning_rate_far_too_high_is_not_blamed_on_the_init_or_a_freeze(tmp_path):
    from mldbg.frameworks.torch_demo import train_digits

    train_digits(tmp_path / "run", lr=5.0, epochs=5, live_rules=False)
    found = mldbg.check(str(tmp_path / "run"), rules=RULES)
    rules = {f.rule for f in found}
    assert "dead_relu" in rules, [str(f) for f in found]  # the symptom is still reported
    assert not rules & {"frozen_layer_updated", "all_zero", "poor_weight_initialization"}, [
        str(f) for f in found
    ]
    for f in found:
        text = (f.message + " " + f.suggestion).lower()
        assert "raise the learning rate" not in text, str(f)
        assert "init" not in f.suggestion.lower() or "not the initialization" in f.suggestion.lower(), str(f)
    dead = next(f for f in found if f.rule == "dead_relu")
    assert "learning rate is far too high" in dead.message and dead.suggestion.startswith(
        "Lower the learning rate"
    )


def test_the_healthy_twin_is_quiet(tmp_path):
    from mldbg.frameworks.torch_demo import train_digits

    train_digits(tmp_path / "run", lr=3e-3, epochs=2, live_rules=False)
    assert not mldbg.check(str(tmp_path / "run"), rules=[*RULES, "gradient_norm_spike", "gradient_not_reset"])
