"""DeepSpeed ZeRO (stages 1, 2 and 3) under `mldbg.torch.Hook` (issue 31): the global statistics of
the gradients DeepSpeed updates the weights with, and of ZeRO-3's partitioned weights, from each
rank's partition, without gathering any tensor.

DeepSpeed's ZeRO optimizer is no `torch.optim` step over the model's parameters: it averages the
gradients across the data-parallel ranks and splits them (each rank keeps the fp32 gradient of
its own partition of the flattened parameters), then steps an inner `torch.optim` optimizer over
its flat fp32 partitions, one parameter group (ZeRO-3: one sub-group) at a time. So:

- gradients: recorded at that inner optimizer's step (the hook's global pre-step hook sees it),
  from the flat partition's `.grad`: averaged, unscaled and clipped, as it updates the weights.
  Each parameter's fragment in the partition is where DeepSpeed says (ZeRO-1/2: the parameter's
  `_hp_mapping`, a run of its flattened elements; ZeRO-3: `grad_position`, the run
  `rank * partition_numel` on of its `ds_process_group` rank). Their end-of-backward `.grad` (each
  rank's own, before DeepSpeed reduces it) is not recorded (`StepStatistics.gradients_elsewhere`).
- ZeRO-3 weights: outside DeepSpeed's gather a parameter is an empty placeholder; each rank holds
  the run of it in `param.ds_tensor`, read at the model's forward start (before DeepSpeed gathers).
  ZeRO-1/2 weights are whole on every rank: the hook records them as it does any parameter.

Each rank reduces its runs to the partial statistics of `torch_sharded_merge` and the ranks merge
them as FSDP2's pieces are merged (`ShardedStatistics.exchange_group`: one all_gather of 18 numbers
a tensor, at statistics steps only; the gradients' subsample for quantiles with one all_reduce):
every rank then holds the global values. A run is held by one rank: nothing is counted twice. The
keys that do not merge (`row_range` of a weight split inside its rows...) are left out, said once.

Found at a registered model's first forward: a parameter with `ds_id` (ZeRO-3, its optimizer
`_z3_optimizer`) or one that DeepSpeed's ZeRO-1/2 optimizer holds (found once among the live
objects). DeepSpeed's bf16 optimizer without ZeRO is not handled: a model that no ZeRO optimizer nor
`torch.optim` optimizer holds is said so in one warning. Tested on 2 CPU processes for stages 1-3
(`tests/frameworks/test_deepspeed_zero.py`); ZeRO-Offload, NVMe swapping and ZeRO++ are written
for (the same partitions and positions) but not run.
"""

from __future__ import annotations

import gc
import logging
import sys
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from mldbg.frameworks.torch_host import dtype_of
from mldbg.frameworks.torch_sharded import ShardedStatistics, _Piece
from mldbg.store import statistics as st

log = logging.getLogger("mldbg")

_ZERO12 = "deepspeed.runtime.zero.stage_1_and_2"


def initialized() -> bool:
    """Is DeepSpeed's communication initialized in this process (without importing it)?"""
    deepspeed = sys.modules.get("deepspeed")
    return deepspeed is not None and bool(getattr(getattr(deepspeed, "comm", None), "is_initialized", bool)())


class DeepSpeedZero:
    """The ZeRO-managed parameters of a hook's models, and their statistics (see the module's
    docstring). One per hook, on every rank, made at the first model found managed (`attach`)."""

    def __init__(self, sharded: ShardedStatistics, stats: Any):
        self.sharded = sharded
        self.stats = stats  # the hook's StepStatistics (ReplicaStatistics on a rank it leaves out)
        # id(parameter) -> (weight name, gradient name, natural collections)
        self._names: dict[int, tuple[str, str, tuple[str, ...]]] = {}
        self._zero3: dict[int, Any] = {}  # id(parameter) -> its ZeRO-3 parameter, for the weights
        self.gradients: set[int] = set()  # the parameters whose gradients are recorded here
        self._optimizers: list[Any] = []  # the ZeRO optimizers (DeepSpeedZeroOptimizer, _Stage3)

    @classmethod
    def attach(
        cls, current: DeepSpeedZero | None, m: Any, sharded: Any, stats: Any, saves_raw: bool = False
    ) -> DeepSpeedZero | None:
        """At model `m`'s first forward: its ZeRO-managed parameters, if any, on this hook's
        `DeepSpeedZero` (made now if None). Warns once where DeepSpeed runs but neither ZeRO's
        optimizer nor a `torch.optim` optimizer holds the model's parameters; says (a warning
        where the configuration saves tensors raw) that their gradients and ZeRO-3's weights
        are not saved raw."""
        if not initialized():
            return current
        params = [(name, p, natural) for name, p, natural in m.params if isinstance(p, torch.Tensor)]
        zero3 = {id(p): getattr(p, "_z3_optimizer", None) for _, p, _ in params if hasattr(p, "ds_id")}
        zero12 = _zero12_optimizers({id(p) for _, p, _ in params}) if not zero3 else []
        optimizers = [o for o in zero3.values() if o is not None] + zero12
        if not optimizers:
            from mldbg.frameworks.torch_steps import optimizer_exists

            if not optimizer_exists({id(p) for _, p, _ in params}):
                log.warning(
                    "mldbg: DeepSpeed without a ZeRO optimizer that mldbg knows (stages 1-3): the "
                    "gradients recorded are each rank's own, before DeepSpeed reduces them "
                    "(docs/frameworks.md, 'Sharded training')"
                )
            return current
        if sharded is None or stats is None:
            log.warning(
                "mldbg: DeepSpeed ZeRO: its reduced gradients and ZeRO-3's partitioned weights are "
                "recorded by the statistics (the two lines, or statistics=True); tensors saved raw "
                "are each rank's own gradient and ZeRO-3's empty placeholders"
            )
            return current
        if current is None:
            log.log(
                logging.WARNING if saves_raw else logging.INFO,
                "mldbg: DeepSpeed ZeRO: the gradients of its parameters (and ZeRO-3's weights) are "
                "not saved raw, no rank holds them whole; their statistics are the global tensors' "
                "(docs/frameworks.md, 'Sharded training')",
            )
        self = current if current is not None else cls(sharded, stats)
        for o in optimizers:
            if all(o is not known for known in self._optimizers):
                self._optimizers.append(o)
        for name, p, natural in params:
            if id(p) in zero3 or any(_holds(o, p) for o in zero12):
                self._names[id(p)] = (name, m.grad_name(name), natural)
                self.gradients.add(id(p))
                stats.gradients_elsewhere.add(id(p))
                if id(p) in zero3:
                    self._zero3[id(p)] = p
        return self

    def partitioned(self, p: Any) -> bool:
        """Is `p` a ZeRO-3 parameter (outside DeepSpeed's gather, an empty placeholder)? It is
        not saved raw: no rank holds it whole (its statistics are merged from the partitions)."""
        return id(p) in self._zero3

    # ZeRO-3's weights: at a registered model's forward start ---------------------------------
    def parameters(self, params: Sequence[tuple[str, Any, Any]]) -> None:
        """The global statistics of the model's ZeRO-3 weights, from each rank's `ds_tensor`."""
        if not self._zero3:
            return
        due, _ = self.sharded.due()
        if not due:
            return
        pieces: list[tuple[_Piece, Any, Any]] = []
        for name, p, _ in params:
            if id(p) in self._zero3:
                group = getattr(p, "ds_process_group", None)
                start, count = _zero3_run(p, int(p.ds_tensor.numel()), group)
                local = p.ds_tensor.detach().reshape(-1).narrow(0, 0, count)
                pieces.append((_run_piece(name, p, local, tuple(p.ds_shape), start, False), group, p))
        self._merge_and_hand(pieces, gradients=False)

    # the reduced gradients: at the inner optimizer's step ------------------------------------
    def optimizer_step(self, optimizer: Any) -> None:
        """A `torch.optim` optimizer is about to step: if it is the inner optimizer of a ZeRO
        optimizer of ours, the global statistics of the gradients of the partitions it steps."""
        zero = next((o for o in self._optimizers if optimizer is _inner(o) or optimizer is _backup(o)), None)
        if zero is None:
            return
        _, full = self.sharded.due()
        if not full:
            return
        pieces: list[tuple[_Piece, Any, Any]] = []
        for group in optimizer.param_groups:
            for flat in group["params"]:
                if flat.grad is not None:
                    pieces.extend(self._gradient_pieces(zero, flat, flat.grad.detach().reshape(-1)))
        self._merge_and_hand(pieces, gradients=True)

    def _gradient_pieces(
        self, zero: Any, flat: torch.Tensor, grad: torch.Tensor
    ) -> list[tuple[_Piece, Any, Any]]:
        """This rank's run of each of our parameters in the flat fp32 partition `flat`, of
        gradient `grad` (flattened)."""
        out = []
        if hasattr(zero, "fp32_partitioned_groups_flat"):  # ZeRO-3
            i = next((k for k, t in enumerate(zero.fp32_partitioned_groups_flat) if t is flat), None)
            for p in zero.fp16_groups[i] if i is not None else ():
                names = self._names.get(id(p))
                if names is None or not p.requires_grad:
                    continue
                _, offset, numel = zero.grad_position[zero.get_param_id(p)]
                group = getattr(p, "ds_process_group", None)
                start, count = _zero3_run(p, int(numel), group)
                local = grad.narrow(0, int(offset), count)
                out.append((_run_piece(names[1], p, local, tuple(p.ds_shape), start, True), group, p))
            return out
        i = next((k for k, t in enumerate(zero.single_partition_of_fp32_groups) if t is flat), None)
        for p in zero.bit16_groups[i] if i is not None else ():
            names = self._names.get(id(p))
            if names is None or not p.requires_grad:
                continue
            mapping = getattr(p, "_hp_mapping", None)
            if mapping is None:  # no element of it in this rank's partition
                local, start = grad.narrow(0, 0, 0), 0
            else:
                hp, lp = mapping.hp_fragment_address, mapping.lp_fragment_address
                local, start = grad.narrow(0, int(hp.start), int(hp.numel)), int(lp.start)
            group = zero.real_dp_process_group[i]
            out.append((_run_piece(names[1], p, local, tuple(p.shape), start, True), group, p))
        return out

    def _merge_and_hand(self, pieces: list[tuple[_Piece, Any, Any]], gradients: bool) -> None:
        """Merge the pieces across the ranks of their process groups (in the same order on every
        rank) and hand the values this rank records to the statistics."""
        if not pieces:
            return
        by_group: dict[int, list[tuple[_Piece, Any, Any]]] = {}
        for item in pieces:
            by_group.setdefault(id(item[1]), []).append(item)
        _, full = self.sharded.due()
        fingerprints = self.stats.fingerprints_due()
        full_here = self.stats.due()
        with torch.no_grad():
            for group_items in by_group.values():
                group = group_items[0][1]
                summaries = self.sharded.exchange_group(group, [piece for piece, _, _ in group_items], full)
                for (piece, _, p), summary in zip(group_items, summaries, strict=True):
                    name, _, natural = self._names[id(p)]
                    kind = "gradients" if gradients else natural[0]
                    kinds = st.DEFAULTS[kind] if full_here else ()
                    if fingerprints and not gradients:
                        kinds = kinds + st.REPLICA_DEFAULTS.get(kind, ())
                    if not kinds:
                        continue
                    values = self.sharded.summary_values(
                        piece.name, summary, st.expand(kinds), True if gradients else p.requires_grad
                    )
                    described = (
                        dtype_of(piece.local),
                        piece.global_shape(),
                        ("gradients",) if gradients else natural,
                    )
                    self.stats.add_known(piece.name, values, described)


def _run_piece(
    name: str, p: Any, local: torch.Tensor, shape: tuple[int, ...], start: int, subsample: bool
) -> _Piece:
    """A rank's run `local` of the flattened tensor `name` of global `shape`, from element `start`."""
    return _Piece(
        name, p, p, local, None, owner=True, replicated=False, box=None, whole_rows=False,
        subsample=subsample, shape=shape, flat=(start, int(local.numel())),
    )  # fmt: skip


def _zero3_run(p: Any, partition: int, group: Any) -> tuple[int, int]:
    """(first element, elements) of this rank's run of ZeRO-3 parameter `p`: partitions of
    `partition` elements in rank order of its process group, the last one padded."""
    rank = dist.get_rank(group=group) if dist.is_initialized() else 0
    start = rank * partition
    return start, max(0, min(partition, int(p.ds_numel) - start))


def _inner(zero: Any) -> Any:
    return getattr(zero, "optimizer", None)


def _backup(zero: Any) -> Any:
    return getattr(zero, "backup_optimizer", None)  # ZeRO-3 with part of the optimizer offloaded


def _holds(zero: Any, p: Any) -> bool:
    return any(q is p for group in getattr(zero, "bit16_groups", ()) for q in group)


def _zero12_optimizers(ids: set[int]) -> list[Any]:
    """The live ZeRO-1/2 optimizers (`DeepSpeedZeroOptimizer`) that hold some of `ids` (a
    parameter does not point to it: found once among the live objects, as `optimizer_exists`)."""
    module = sys.modules.get(_ZERO12)
    kind = getattr(module, "DeepSpeedZeroOptimizer", None)
    if kind is None:
        return []
    return [
        o for o in gc.get_objects()
        if issubclass(type(o), kind) and any(id(p) in ids for group in getattr(o, "bit16_groups", ()) for p in group)
    ]  # fmt: skip


def is_engine(module: Any) -> bool:
    """Is `module` a DeepSpeed engine (`deepspeed.initialize`'s), which wraps the model as
    `.module`? The hook then records the model it wraps, under the model's own names."""
    engine = sys.modules.get("deepspeed.runtime.engine")
    kind = getattr(engine, "DeepSpeedEngine", None)
    return kind is not None and isinstance(module, kind)
