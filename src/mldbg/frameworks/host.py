"""A host (NumPy) copy as the recorder takes it, shared by the adapters that have one already
(Keras, TensorFlow, JAX). PyTorch copies off the device itself: `torch_host`."""

from __future__ import annotations

from typing import Any

import numpy as np

from mldbg.store.format import dtype_name


def array_source(array: np.ndarray) -> tuple[Any, int] | None:
    """`array` as a recorder source and its size; None when the format has no dtype for it.

    bf16 (ml_dtypes) travels as its bits with the dtype name "BF16"; float8 and other odd
    floats are widened to float32. `array` must be a copy the training no longer writes to.
    """
    if array.dtype.name == "bfloat16":
        bits = array.view(np.uint16)
        return (lambda: (bits, "BF16")), array.nbytes
    if array.dtype.kind == "f" and array.dtype.itemsize not in (2, 4, 8):
        array = array.astype(np.float32)
    try:
        dtype_name(array)
    except TypeError:
        return None
    return array, array.nbytes
