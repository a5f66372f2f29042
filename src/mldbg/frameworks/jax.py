"""JAX adapter: `mldbg.jax.Hook`, one call per step for pytrees (Flax, Optax, plain JAX).

    hook = mldbg.jax.Hook(out_dir)
    hook.record(step, params=params, grads=grads, loss=loss)   # in the loop, or inside jax.jit

Each `record` call is one step; `step` is the step count of `mode` (the schedule of
`SaveConfig` applies to it) and the global step counts calls. Names come from pytree paths:
`Dense_0/kernel`, its gradient `gradient/Dense_0/kernel`. Outside `jax.jit` nothing is
converted on steps that save nothing. Inside `jax.jit` (any argument traced) the hook asks
the host once per step whether it saves (an ordered `io_callback` returning one bool) and
ships the tensors to the host only on saving steps, under `lax.cond`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from mldbg.config import Mode
from mldbg.frameworks.base import Adapter
from mldbg.frameworks.host import array_source
from mldbg.frameworks.session import Worker

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


def host_source(value: Any) -> tuple[Any, int] | None:
    """A host copy of a leaf as a recorder source (JAX buffers may be donated: copy now)."""
    return array_source(np.array(value, copy=True))


class Hook(Adapter):
    """Records pytrees of a JAX training loop: `hook.record(step, params=..., grads=..., loss=...)`."""

    def _worker(self) -> Worker:
        return Worker(f"jax-{jax.__version__}", jax.process_index(), jax.process_count())

    def record(
        self,
        step: Any,
        params: Any = None,
        grads: Any = None,
        loss: Any = None,
        *,
        mode: Mode | str = Mode.TRAIN,
        **named: Any,
    ) -> None:
        """Record one step. `params` as used by this step's forward pass, `grads` of the loss.

        Other keywords: `opt_state`, `inputs`, `labels`, `predictions`, `outputs` and
        `relu_activations`/`tanh_activations`/`sigmoid_activations` (dicts by layer name, an
        activation as its output or as `(pre_activation, output)`); any other keyword is saved
        under its own name (scalars in `scalars`, other tensors by `include_regex`/`save_all`).
        """
        mode = Mode.parse(mode)
        traced = isinstance(step, jax.core.Tracer) or any(
            isinstance(leaf, jax.core.Tracer)
            for leaf in jax.tree_util.tree_leaves((params, grads, loss, named))
        )
        if traced:
            self._record_traced(step, mode, list(named_tensors(params, grads, loss, named)))
        elif self._open(mode, step):
            self._save(list(named_tensors(params, grads, loss, named)))
        else:
            self.recorder.end_step()

    def _open(self, mode: Mode, step: Any) -> bool:
        """Start step `step` of `mode` on the host; True when anything is saved at it."""
        rec = self.recorder
        if rec.in_step:
            rec.end_step()
        if rec.step > 0:  # a step's time: from one record call to the next
            self.timeline.step_end()
        self.timeline.step_begin(rec.step, int(mode))
        return rec.start_step(mode, mode_step=int(step))

    def _save(self, tensors: list[Named]) -> None:
        rec = self.recorder
        try:
            for name, natural, leaf in tensors:
                plan = rec.plan(name, natural)
                if plan is not None and not rec.has(name):
                    source = host_source(leaf)
                    if source is not None:
                        rec.save(name, source[0], plan, source[1])
        finally:
            rec.end_step()

    def _record_traced(self, step: Any, mode: Mode, tensors: list[Named]) -> None:
        cols = self.recorder.collections
        wanted = [t for t in tensors if any(c.name in cols.included for c in cols.members(t[0], t[1]))]
        meta = [(name, natural, None) for name, natural, _ in wanted]
        leaves = [jnp.asarray(leaf) for _, _, leaf in wanted]

        def open_host(s: Any) -> np.bool_:
            saving = self._open(mode, s)
            if not saving:
                self.recorder.end_step()
            return np.bool_(saving)

        def save_host(*values: Any) -> None:
            self._save([(n, c, v) for (n, c, _), v in zip(meta, values, strict=True)])

        saving = io_callback(open_host, jax.ShapeDtypeStruct((), jnp.bool_), step, ordered=True)
        jax.lax.cond(saving, lambda: io_callback(save_host, None, *leaves, ordered=True), lambda: None)

    def _release(self) -> None:
        jax.effects_barrier()  # every io_callback of a jitted step has run


__all__ = ["Hook", "path_name"]
