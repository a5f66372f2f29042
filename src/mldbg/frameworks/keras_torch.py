"""Keras on the PyTorch backend: the default statistics computed by the PyTorch hook's own
batched device code (`torch_statistics.StatisticsBatch`) on the backend's tensors, where they
live; only the packed results reach the host (`keras_statistics.DeviceStatistics`)."""

from __future__ import annotations

from typing import Any

import torch

from mldbg.frameworks.host_statistics import Part
from mldbg.frameworks.torch_statistics import StatisticsBatch
from mldbg.store.format import dtype_name

_DTYPES = {torch.bfloat16: "F32"}  # reduced as its float32 values, as the host path does


class TorchStatistics:
    """`DeviceStatistics` over `StatisticsBatch`: one per hook (it keeps the previous values
    behind `delta_l2` and `sample_change` on the device)."""

    def __init__(self) -> None:
        self._batch = StatisticsBatch()
        self._added: dict[str, torch.Tensor] = {}
        self._info: dict[str, tuple[str, tuple[int, ...], tuple[str, ...]]] = {}

    def accepts(self, value: Any) -> bool:
        return isinstance(value, torch.Tensor) and not value.is_complex()

    def add(
        self,
        name: str,
        value: Any,
        kinds: tuple[str, ...],
        natural: tuple[str, ...],
        unit_axis: int | None = None,
        requires_grad: bool | None = None,
    ) -> None:
        if name in self._added:
            return
        t = value.detach()
        if t.dtype == torch.bfloat16:
            t = t.float()
        else:  # a parameter changes in place in the optimizer step: keep its value now
            t = t.clone() if value.requires_grad or isinstance(value, torch.nn.Parameter) else t
        axis = unit_axis if t.dim() > 2 else None
        self._batch.add(name, t, kinds, unit_axis=axis, requires_grad=requires_grad)
        self._added[name] = t
        self._info[name] = (
            _DTYPES.get(value.dtype) or dtype_name(t[:0].cpu().numpy()),
            tuple(t.shape),
            natural,
        )

    def add_classes(self, labels_name: str, preds_name: str) -> bool:
        labels, preds = self._added.get(labels_name), self._added.get(preds_name)
        if labels is None or preds is None or labels.device != preds.device:
            return False
        self._batch.add_classes(labels_name, labels, preds_name, preds)
        return True

    def pending(self) -> bool:
        return bool(self._added)

    def finish(self) -> Part:
        info, nbytes = self._info, 8 * sum(len(v) for v in self._info.values())
        self._added, self._info = {}, {}
        return self._batch.finish(), info, nbytes


__all__ = ["TorchStatistics"]
