"""The injected defects and their healthy twins, as tiny real PyTorch trainings
(`tests.tiny.train` keyword arguments), with the rules any of which must fire on each.

`benchmarks/rule_defects.py` prints the table (docs/rules.md), and
`tests/rules/test_default_hook.py` asserts it with the two-line hook.
"""

from __future__ import annotations

# name -> (train keyword arguments, rules any of which must fire; () means healthy: none may)
SCENARIOS: dict[str, tuple[dict, tuple[str, ...]]] = {
    "healthy MLP ReLU, SGD": ({}, ()),
    "healthy MLP tanh, SGD": ({"activation": "tanh"}, ()),
    "healthy MLP sigmoid, Adam": ({"activation": "sigmoid", "optimizer": "adam"}, ()),
    "healthy MLP sigmoid, SGD lr 1": ({"activation": "sigmoid", "lr": 1.0}, ()),
    "healthy MLP ReLU, Adam": ({"optimizer": "adam"}, ()),
    "healthy MLP ReLU, Adam, 300 steps": ({"optimizer": "adam", "steps": 300}, ()),
    "healthy MLP ReLU, SGD momentum, xavier": ({"momentum": 0.9, "lr": 0.02, "init": "xavier"}, ()),
    "healthy MLP 4 layers ReLU, kaiming": ({"depth": 4, "init": "kaiming", "lr": 0.05}, ()),
    "healthy CNN, SGD": ({"model": "cnn"}, ()),
    "healthy CNN, Adam": ({"model": "cnn", "optimizer": "adam"}, ()),
    "healthy CNN without BatchNorm": ({"model": "cnn", "batchnorm": False}, ()),
    "healthy CNN tanh, Adam": ({"model": "cnn", "activation": "tanh", "optimizer": "adam"}, ()),
    "healthy, fc1 frozen on purpose": ({"freeze": ("fc1",)}, ()),
    "healthy regression (MSE)": ({"task": "regression", "lr": 0.02}, ()),
    "healthy, 10 classes": ({"n_classes": 10, "optimizer": "adam", "n_train": 1024}, ()),
    "lr 1e12 (explodes)": ({"lr": 1e12}, ("exploding_tensor", "tensor_variance")),
    "bias init -10 (kills ReLUs)": ({"init": "negative_bias"}, ("dead_relu",)),
    "zero init": ({"init": "zero"}, ("poor_weight_initialization", "all_zero", "dead_relu")),
    "constant init": ({"init": "constant"}, ("poor_weight_initialization",)),
    "lr 1e-10": ({"lr": 1e-10}, ("weight_update_ratio", "loss_not_decreasing")),
    "optimizer frozen (lr 0)": ({"frozen_optimizer": True}, ("unchanged_tensor",)),
    "tanh, init std 10": ({"activation": "tanh", "init": "huge"}, ("tanh_saturation",)),
    "sigmoid, inputs x100": ({"activation": "sigmoid", "input_scale": 100.0}, ("sigmoid_saturation",)),
    "tanh, inputs x100": ({"activation": "tanh", "input_scale": 100.0}, ("tanh_saturation",)),
    "sigmoid, 8 layers": ({"activation": "sigmoid", "depth": 8}, ("vanishing_gradient",)),
    "inputs x100 + 50": ({"input_scale": 100.0, "input_shift": 50.0, "lr": 1e-5}, ("not_normalized_data",)),
    "CNN, inputs x255": (
        {"model": "cnn", "input_scale": 255.0, "input_shift": 128.0, "lr": 1e-4},
        ("not_normalized_data",),
    ),
    "97% of labels one class": ({"imbalance": 0.97}, ("class_imbalance",)),
    "classes 0 and 1 swapped in training labels": (
        {"swap_classes": (0, 1), "optimizer": "adam"},
        ("confusion", "overfit"),
    ),
    "random labels, Adam": (
        {"shuffle_labels": True, "optimizer": "adam", "steps": 300, "width": 64},
        ("overfit",),
    ),
    "16 training samples, Adam": ({"n_train": 16, "optimizer": "adam", "steps": 300}, ("overfit",)),
    "tiny init std 1e-5": ({"init": "tiny"}, ("poor_weight_initialization",)),
    # silent bugs and today's training (issue 17)
    "missing optimizer.zero_grad()": ({"missing_zero_grad": True}, ("gradient_not_reset",)),
    "one corrupted batch (inputs x30), Adam": ({"spike_at": 30, "optimizer": "adam"}, ("loss_spike",)),
    "one corrupted batch early (inputs x30), Adam": (
        {"spike_at": 15, "optimizer": "adam"},
        ("gradient_norm_spike", "loss_spike"),
    ),
    "optimizer maximizes the loss, Adam": ({"maximize": True, "optimizer": "adam"}, ("logit_growth",)),
    "head attached after the optimizer was built": ({"late_head": True}, ("unchanged_tensor",)),
    "optimizer stops stepping at step 15": ({"stop_updating_at": 15}, ("unchanged_tensor",)),
    "diverging: 10 classes, SGD lr 1 momentum 0.9": (
        {"n_classes": 10, "lr": 1.0, "momentum": 0.9},
        ("underfitting", "loss_not_decreasing"),
    ),
}


# rows whose defect alone shows as a suspicion, by design (`mldbg.diagnose(path).unconfirmed`,
# listed by `mldbg check` but not reported): one corrupted batch the training recovers from is
# a lone loss spike, below the reporting bar (`mldbg.rules.diagnosis.REPORT_CONFIDENCE`) until
# something else corroborates it
SUSPICIONS = {"one corrupted batch (inputs x30), Adam"}

# model rules outside the default set, run by name too (marked * in the table; they do not
# count against a healthy row)
EXTRA = ("confusion", "overtraining", "saturated_activation", "check_input_images", "label_confusion")
