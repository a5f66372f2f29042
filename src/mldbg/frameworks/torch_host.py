"""Host copies of PyTorch tensors, made without blocking training.

The training thread only starts the copy (off the GPU: a non-blocking copy into pinned
memory); the conversion to NumPy runs later, on the writer thread. bf16 has no NumPy dtype:
its bits travel as uint16 with the dtype name "BF16" (readers return float32, exactly).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from mldbg.store.format import dtype_name

_BF16 = torch.bfloat16


def host_copy(t: torch.Tensor) -> Callable[[], tuple[np.ndarray, str]]:
    """Copy a tensor off its device now; convert to NumPy later, on the writer thread."""
    t = t.detach()
    if t.is_cuda:
        buf = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
        buf.copy_(t, non_blocking=True)
        event = torch.cuda.Event()
        event.record()

        def ready() -> tuple[np.ndarray, str]:
            event.synchronize()
            return _to_numpy(buf)

        return ready
    copy = t.clone()
    return lambda: _to_numpy(copy)


_DTYPES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL",
}  # fmt: skip


def dtype_of(t: torch.Tensor) -> str:
    """The safetensors dtype name a host copy of `t` would be stored as."""
    return _DTYPES.get(t.dtype, "F32")


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def to_numpy(value: torch.Tensor) -> np.ndarray:
    """A user's tensor as NumPy now (bf16 as float32), for `save_scalar` and `save_tensor`."""
    value = value.detach().cpu()
    return (value.float() if value.dtype == _BF16 else value).numpy()


def _to_numpy(t: torch.Tensor) -> tuple[np.ndarray, str]:
    if t.dtype == _BF16:
        return t.view(torch.int16).numpy().view(np.uint16), "BF16"
    array = t.numpy()
    return array, dtype_name(array)
