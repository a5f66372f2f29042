"""Inside a Keras model: tensor names, host copies, and taps on layers and methods.

Shared by the Keras callback (`mldbg.frameworks.keras`) and the custom-loop TensorFlow hook
(`mldbg.frameworks.tensorflow`). A tap wraps a method through an instance attribute for the
lifetime of an `ExitStack`, so the model is left exactly as it was afterwards.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import keras
import numpy as np

from mldbg.frameworks.host import array_source

try:  # Keras runs a layer on placeholders (KerasTensors, a scratch graph, meta tensors) under it
    from keras.src.backend.common.symbolic_scope import in_symbolic_scope
except ImportError:  # pragma: no cover - a Keras 3 without it

    def in_symbolic_scope() -> bool:
        return False


ACTIVATIONS = {"relu": "relu_activations", "tanh": "tanh_activations", "sigmoid": "sigmoid_activations"}
Put = Callable[[str, Any, tuple[str, ...]], None]


def host_array(value: Any) -> np.ndarray:
    """A host copy of a tensor that the training no longer writes to."""
    if isinstance(value, keras.Variable):
        value = value.value
    if type(value).__module__.startswith("tensorflow") and hasattr(value, "numpy"):
        return np.asarray(value.numpy())  # a snapshot already (and tf.Variable's __array__ predates NumPy 2)
    # torch shares memory with live tensors; JAX buffers may be donated: copy
    return np.array(keras.ops.convert_to_numpy(value), copy=True)


def host_source(value: Any) -> tuple[Any, int] | None:
    """A host copy of a tensor as a recorder source and its size; None when not storable."""
    return array_source(host_array(value))


def activation_kind(layer: Any) -> tuple[str | None, bool]:
    """(activation collection, is the layer itself the activation?) of a Keras layer."""
    if isinstance(layer, keras.layers.ReLU):
        return "relu_activations", True
    kind = ACTIVATIONS.get(getattr(getattr(layer, "activation", None), "__name__", ""))
    return kind, kind is not None and isinstance(layer, keras.layers.Activation)


def named_layers(layer: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every sub-layer, named by its path under the model (`block/dense`)."""
    for sub in layer._flatten_layers(include_self=False, recursive=False):
        if not isinstance(sub, keras.layers.InputLayer):
            yield f"{prefix}{sub.name}", sub
            yield from named_layers(sub, f"{prefix}{sub.name}/")


# layers that pass their input on at its scale: shapes, crops, flips, noise, dropout
_SCALE_KEEPING = frozenset(
    {"Reshape", "Flatten", "Permute", "Resizing", "CenterCrop", "Masking", "RandomFlip", "RandomRotation",
     "RandomTranslation", "RandomZoom", "RandomCrop", "Dropout", "GaussianNoise", "GaussianDropout",
     "AlphaDropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "Cropping1D",
     "Cropping2D", "Cropping3D", "ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D"}
)  # fmt: skip


def input_rescaling(model: Any) -> tuple[float, float] | None:
    """(scale, offset): what a model's first learned layer sees of its input, `input * scale
    + offset`, from the layers before it. The `Rescaling` layers there (keras.io's image
    examples feed raw pixels to `Rescaling(1 / 255)`), composed in order, up to the first
    layer with weights or of another kind; (1, 0) when only layers that keep the scale
    (`_SCALE_KEEPING`: reshapes, crops, random flips, dropout) come before the first layer
    with weights (Keras casts an integer input to the model's float dtype: pixels reach it as
    they are). None when a layer of another kind comes first (a `Lambda` may divide; a
    `Normalization` standardizes by the statistics it holds), or a `Rescaling` scales per
    channel (a list)."""
    scale, offset, seen = 1.0, 0.0, False
    for _, layer in named_layers(model):
        if list(layer._flatten_layers(include_self=False, recursive=False)):
            continue  # a block holding layers: its layers follow
        if isinstance(layer, keras.layers.Normalization):
            return None  # standardized by statistics it holds (`not_normalized_data` reads them)
        if isinstance(layer, keras.layers.Rescaling):
            s, o = np.asarray(layer.scale, dtype=np.float64), np.asarray(layer.offset, dtype=np.float64)
            if s.size != 1 or o.size != 1:
                return None
            scale, offset, seen = scale * float(s), offset * float(s) + float(o), True
        elif layer.weights or type(layer).__name__ not in _SCALE_KEEPING:
            return (scale, offset) if seen or layer.weights else None
    return (scale, offset) if seen else None


def variable_name(variable: Any, model_name: str) -> str:
    """`dense/kernel`: the variable's path without the model's own name."""
    path = getattr(variable, "path", None) or variable.name
    return path[len(model_name) + 1 :] if path.startswith(model_name + "/") else path


@contextlib.contextmanager
def patched(obj: Any, attr: str, value: Any) -> Iterator[None]:
    """Set an instance attribute for a while, bypassing Keras' attribute tracking."""
    had, old = attr in obj.__dict__, obj.__dict__.get(attr)
    object.__setattr__(obj, attr, value)
    try:
        yield
    finally:
        if had:
            object.__setattr__(obj, attr, old)
        else:
            object.__delattr__(obj, attr)


_WARNED: set[str] = set()


def _warn_once(where: str, error: Exception) -> None:
    if where not in _WARNED:
        _WARNED.add(where)
        first = str(error).splitlines()[0] if str(error) else ""
        warnings.warn(
            f"mldbg: what {where} computes is not recorded ({type(error).__name__}: {first}); "
            "the training is unchanged",
            UserWarning,
            stacklevel=3,
        )


def tap(stack: contextlib.ExitStack, obj: Any, attr: str, seen: Callable[..., None]) -> None:
    """While `stack` is open, `obj.attr(*args)` also calls `seen(args, out)`, except inside
    Keras' symbolic scope: there Keras only infers shapes (`compute_output_spec`, as when a
    subclassed model or a layer builds itself on its first call inside the traced step), on
    placeholders of a scratch graph (TensorFlow), abstract values (JAX) or meta or filler
    tensors (PyTorch) that the step can neither read nor record. An error in `seen` is a
    warning (once per class and method), never the training's. An attribute the
    class defines as a property (a Keras LSTM's `activation` is its cell's, read-only) is left
    alone: setting it would raise, or change the model through its setter."""
    if isinstance(inspect.getattr_static(type(obj), attr, None), property):
        return
    original = getattr(obj, attr)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        if not in_symbolic_scope():
            try:
                seen(args, out)
            except Exception as error:  # the recording must never break the training
                _warn_once(f"{type(obj).__name__}.{attr}", error)
        return out

    stack.enter_context(patched(obj, attr, wrapper))


def put_each(put: Put, prefix: str, tree: Any, natural: tuple[str, ...]) -> None:
    for i, t in enumerate(keras.tree.flatten(tree)):
        put(f"{prefix}_{i}", t, natural)


def tap_layers(stack: contextlib.ExitStack, model: Any, put: Put) -> None:
    """Layer outputs `<layer>_output_0`; for an activation layer also `<layer>_input_0`, and for
    a layer with a fused activation `<layer>/activation_input_0` and `_output_0` (pre- and
    post-activation), in `relu_activations`, `tanh_activations` or `sigmoid_activations`."""
    for name, layer in named_layers(model):
        kind, is_act = activation_kind(layer)

        def seen_call(args: Any, out: Any, name: str = name, kind: Any = kind, is_act: bool = is_act) -> None:
            if is_act and args:
                put(f"{name}_input_0", args[0], (kind,))
            put_each(put, f"{name}_output", out, ("outputs", kind) if is_act else ("outputs",))

        def seen_activation(args: Any, out: Any, name: str = name, kind: Any = kind) -> None:
            put(f"{name}/activation_input_0", args[0], (kind,))
            put(f"{name}/activation_output_0", out, (kind,))

        tap(stack, layer, "call", seen_call)
        if kind is not None and not is_act:
            tap(stack, layer, "activation", seen_activation)
