"""How the JAX hook names the leaves of a step's pytrees, and in which collections they are.

Names come from pytree paths: `Dense_0/kernel`, its gradient `gradient/Dense_0/kernel`,
`model_input_0`, `labels_0`, `model_output_0`, `<layer>_input_0` / `<layer>_output_0` of an
activation given as `(pre_activation, output)`, `optimizer/<path>` of an Optax state.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import jax
import numpy as np

BIAS_KEYS = ("bias", "b", "beta")
ACTIVATIONS = ("relu_activations", "tanh_activations", "sigmoid_activations")
Named = tuple[str, tuple[str, ...], Any]  # (name, natural collections, leaf)


def path_name(path: Sequence[Any]) -> str:
    """`a/b/0/kernel` from a pytree key path; Flax NNX's trailing `.value` is dropped."""
    parts = []
    for k in path:
        for attr in ("key", "name", "idx"):
            if hasattr(k, attr):
                parts.append(str(getattr(k, attr)))
                break
        else:
            parts.append(str(k))
    if len(parts) > 1 and parts[-1] == "value":
        parts.pop()
    return "/".join(parts)


def _leaves(tree: Any) -> list[tuple[str, Any]]:
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [(path_name(p), leaf) for p, leaf in flat if leaf is not None]


def _params_tree(tree: Any) -> Any:
    # Flax Linen variables {"params": {...}}: name by the layers, not by "params/"
    if isinstance(tree, dict) and list(tree) == ["params"]:
        return tree["params"]
    return tree


def _numbered(prefix: str, tree: Any, natural: tuple[str, ...]) -> Iterator[Named]:
    """A leaf or a sequence of leaves: `prefix_0`, `prefix_1`; any other tree: `prefix/<path>`."""
    if _is_leaf(tree) or isinstance(tree, (list, tuple)):
        for i, leaf in enumerate(jax.tree_util.tree_leaves(tree)):
            yield f"{prefix}_{i}", natural, leaf
    else:
        for path, leaf in _leaves(tree):
            yield f"{prefix}/{path}", natural, leaf


def named_tensors(params: Any, grads: Any, loss: Any, named: dict[str, Any]) -> Iterator[Named]:
    """Every tensor of one `record` call with its name and natural collections."""
    for path, leaf in _leaves(_params_tree(params)):
        yield path, ("biases",) if path.rsplit("/", 1)[-1] in BIAS_KEYS else ("weights",), leaf
    for path, leaf in _leaves(_params_tree(grads)):
        yield f"gradient/{path}", ("gradients",), leaf
    if loss is not None:
        yield from [("loss", ("losses",), loss)] if _is_leaf(loss) else _numbered("loss", loss, ("losses",))
    for key, tree in named.items():
        if tree is None:
            continue
        if key == "opt_state":
            yield from ((f"optimizer/{p}", ("optimizer_variables",), leaf) for p, leaf in _leaves(tree))
        elif key == "inputs":
            yield from _numbered("model_input", tree, ("inputs",))
        elif key == "labels":
            yield from _numbered("labels", tree, ("labels",))
        elif key == "predictions":
            yield from _numbered("model_output", tree, ("outputs", "predictions"))
        elif key == "outputs" or key in ACTIVATIONS:
            yield from _layer_tensors(key, tree)
        elif _is_leaf(tree):
            yield key, ("scalars",) if np.ndim(tree) == 0 else (), tree
        else:
            yield from ((f"{key}/{p}", (), leaf) for p, leaf in _leaves(tree))


def _layer_tensors(key: str, layers: dict[str, Any]) -> Iterator[Named]:
    """`outputs={"Dense_0": y}`; `relu_activations={"Dense_0": (pre_activation, y)}`."""
    natural = ("outputs",) if key == "outputs" else (key,)
    for layer, value in layers.items():
        if key != "outputs" and isinstance(value, (tuple, list)) and len(value) == 2:
            yield f"{layer}_input_0", natural, value[0]
            yield f"{layer}_output_0", natural, value[1]
        else:
            for i, leaf in enumerate(jax.tree_util.tree_leaves(value)):
                yield f"{layer}_output_{i}", natural, leaf


def _is_leaf(x: Any) -> bool:
    return jax.tree_util.treedef_is_leaf(jax.tree_util.tree_structure(x))


__all__ = ["ACTIVATIONS", "BIAS_KEYS", "Named", "named_tensors", "path_name"]
