"""Helpers for the action tests: findings as the rules make them."""

from mldbg.rules.base import Finding


def finding(rule: str = "exploding_tensor", step: int = 3, message: str = "gradient/fc1.weight holds NaN"):
    return Finding(
        rule=rule,
        step=step,
        mode="TRAIN",
        message=message,
        tensors=["gradient/fc1.weight"],
        suggestion="Lower the learning rate or clip gradients.",
    )
