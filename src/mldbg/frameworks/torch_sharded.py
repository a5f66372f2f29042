"""Statistics of sharded PyTorch tensors (DTensor: FSDP2's `fully_shard`, tensor parallelism),
right across the shards, without gathering any tensor (issue 31).

A sharded parameter or gradient is one global tensor of which each rank holds a piece
(`DTensor.to_local()`). Its statistics are those of the global tensor, the same values one
process holding the whole tensor would record (`mldbg.store.statistics`):

- every rank reduces its own piece to a fixed vector of partial statistics
  (`torch_sharded_merge.PARTIALS`) -- fixed, so that every rank sends the same number of values
  whatever statistics its own recorder asks for;
- the ranks exchange them with ONE `all_gather` of that small vector (18 numbers a tensor) per
  device mesh, and each rank merges them (`torch_sharded_merge`: the arithmetic, NumPy only;
  this module: the pieces, their placements and the exchange);
- per rank, the NaN and inf of its own piece stay known beside the merged counts: recorded as
  the `rank_nonfinite` vector (per global rank) at the steps where some piece holds one, so a
  finding can name the rank;
- the fixed subsample behind `quantile(q)` and `sample_change` of a GRADIENT (<= 4093 elements
  at fixed global positions, `statistics.subsample_index`) is filled by the rank that holds
  each position and summed with ONE `all_reduce` (every position has exactly one contributor:
  x + 0 is exact), so those are exact too;
- a piece replicated on a mesh dimension is counted once: only the rank of coordinate 0 along
  each replicated dimension contributes. A `Partial` placement (a summand, not a piece) is
  first reduced to a replica (`redistribute`, an all-reduce of that tensor: no FSDP2 or TP
  parameter or gradient is Partial, so it is a fallback).

When: the exchange is a collective, so every rank must take part at the same points. It runs on
every rank (recording or not) at the steps `due()` says, a function of the step numbers only
(the statistics cadence and the data-parallel fingerprint steps), in TRAIN steps: at the start of
a registered model's first forward of the step (its DTensor parameters) and just before the
optimizer step (their gradients). The recorder's statistics then look the merged values up
(`values`); what is not there (a tensor seen at another point, a key that does not merge) is left
out, with one log line per run.

Keys that do not merge: see `torch_sharded_merge`. A parameter replicated on every mesh dimension records its own replica's `fingerprint` (as a
data-parallel worker does), so `rank_divergence` compares replicated parameters across ranks; a
sharded one records the fingerprint of the global tensor, the same on every rank.
"""

from __future__ import annotations

import logging
import math
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from mldbg.config import Mode
from mldbg.frameworks.torch_sharded_merge import (
    INDEX,
    NEUTRAL,
    PARTIALS,
    Summary,
    by_rank,
    flat_positions,
    merge,
    positions,
    sample_change,
    statistic_value,
)
from mldbg.record.recorder import Recorder
from mldbg.store import statistics as st
from mldbg.store.statistics import Statistic, Value

log = logging.getLogger("mldbg")


def is_sharded(tensor: object) -> bool:
    """Is `tensor` a DTensor? (A plain tensor or parameter answers without importing DTensor.)"""
    kind = type(tensor)
    if kind is torch.Tensor or kind is torch.nn.Parameter or not isinstance(tensor, torch.Tensor):
        return False
    from torch.distributed.tensor import DTensor

    return isinstance(tensor, DTensor)


def input_replica(model: torch.nn.Module, params: Iterable[Any]) -> bool:
    """Does this rank feed `model` a copy of another rank's inputs by design? True on the ranks
    other than the first of a tensor-parallel group: this rank's coordinate is not 0 on a
    model-parallel dimension of its DTensor parameters' mesh. Without FSDP2 every dimension of
    that mesh is model-parallel; with FSDP2 its first dimensions are FSDP2's own (its ranks
    train on their own data) and the others are TP's. Those ranks leave their inputs'
    `sample_fingerprints` out: `duplicate_batches` compares the data-parallel ranks' batches,
    not the copies a TP group shares."""
    meshes = [p.device_mesh for p in params if is_sharded(p)]
    if not meshes:
        return False
    coordinate = meshes[0].get_coordinate()
    if coordinate is None:
        return False
    return any(c != 0 for c in coordinate[_data_parallel_dims(model) :])


def _data_parallel_dims(model: torch.nn.Module) -> int:
    """How many leading dimensions of the parameters' mesh are FSDP2's (0 without FSDP2)."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # pragma: no cover - a torch without FSDP2
        return 0
    fsdp = [m for m in model.modules() if isinstance(m, FSDPModule)]
    for m in fsdp:
        try:  # FSDP2's mesh (private: FSDPState's parameter groups; 1-D, or 2-D for HSDP)
            groups = m._get_fsdp_state()._fsdp_param_groups
        except AttributeError:
            break
        if groups:
            return int(groups[0].mesh_info.mesh.ndim)
    return 99 if fsdp else 0  # unknown: every rank keeps its inputs (FSDP2's ranks have their own data)


@dataclass
class _Piece:
    """One rank's view of one sharded tensor: its local piece and where it lies."""

    name: str
    original: Any  # the DTensor handed over (the key of its summary)
    tensor: Any  # the same, a Partial placement reduced to a replica
    local: torch.Tensor
    mesh: Any
    owner: bool  # counts for the global tensor (coordinate 0 on every replicated mesh dimension)
    replicated: bool  # replicated on every mesh dimension (its fingerprint is the replica's own)
    box: tuple[tuple[int, ...], tuple[int, ...]] | None  # (global offset, local shape); None: not a box
    whole_rows: bool  # each row (slice of axis 0) lies on one rank
    subsample: bool
    # the global shape, where `tensor` does not carry it (a DeepSpeed ZeRO-3 placeholder)
    shape: tuple[int, ...] | None = None
    # a piece that is one run of the flattened global tensor: (first element, elements), the
    # positions of the subsample (a DeepSpeed ZeRO partition, `torch_deepspeed`)
    flat: tuple[int, int] | None = None

    def global_shape(self) -> tuple[int, ...]:
        return self.shape if self.shape is not None else tuple(self.tensor.shape)


@dataclass
class ShardedStatistics:
    """Partial statistics of the DTensors of a hook's models, merged across ranks (see the
    module's docstring). One per hook, on every rank of the job, recording or not.

    `recorder`: the hook's (its step, mode and mode step, on every rank); `due(mode, mode_step)`:
    the statistics cadence (`torch_defaults.Cadence.due`), the same function on every rank."""

    recorder: Any
    due_statistics: Any  # (Mode, int) -> bool
    replicated_job: bool  # world size > 1: the fingerprint steps are due too
    # id of the DTensor -> (step, a weak reference to it, its summary): the open step's only, and
    # never keeping a gradient alive after the script drops it
    _summaries: dict[int, tuple[int, Any, Summary]] = field(default_factory=dict)
    _previous: dict[str, torch.Tensor] = field(default_factory=dict)  # delta_l2: the last local piece
    _previous_samples: dict[str, np.ndarray] = field(default_factory=dict)  # sample_change
    _has_dtensors: dict[int, bool] = field(default_factory=dict)
    _told: set[str] = field(default_factory=set)

    def due(self) -> tuple[bool, bool]:
        """(any exchange at the open step, is it a statistics step)."""
        rec = self.recorder
        if not rec.in_step or rec.mode != Mode.TRAIN:
            return False, False
        full = bool(self.due_statistics(rec.mode, rec.mode_step))
        return full or (self.replicated_job and st.fingerprint_step(rec.mode_step)), full

    def parameters(self, params: Sequence[tuple[str, Any, Any]]) -> None:
        """A registered model's forward begins: the partials of its DTensor parameters."""
        if not self._any(params):
            return
        due, full = self.due()
        if due:
            self._exchange([(name, p) for name, p, _ in params if is_sharded(p)], full, False)

    def gradients(self, models: Iterable[Any]) -> None:
        """Before the optimizer step: the partials of the DTensor gradients of `models` (at
        statistics steps only: a fingerprint step compares parameters, not gradients)."""
        _, full = self.due()
        if not full:
            return
        pieces = []
        for m in models:
            if self._any(m.params):
                for name, p, _ in m.params:
                    if p.requires_grad and p.grad is not None and is_sharded(p.grad):
                        pieces.append((m.grad_name(name), p.grad))
        if pieces:
            self._exchange(pieces, full, full)

    def _any(self, params: Sequence[tuple[str, Any, Any]]) -> bool:
        found = self._has_dtensors.get(id(params))
        if found is None:
            found = self._has_dtensors[id(params)] = any(is_sharded(p) for _, p, _ in params)
        return found

    # the values the statistics batch asks for -----------------------------------------------
    def values(
        self, name: str, tensor: Any, stats: Sequence[Statistic], requires_grad: bool
    ) -> dict[str, Value]:
        """The global values of `stats` of DTensor `tensor` at the open step, the keys that
        merge (see the module's docstring); the others are left out, said once a run."""
        found = self._summaries.get(id(tensor))
        if found is None or found[0] != self.recorder.step or found[1]() is not tensor:
            self._tell(
                "missing",
                f"mldbg: statistics of sharded tensor {name!r} (DTensor) are recorded only at the "
                "statistics steps, for parameters and gradients of registered models; left out",
                logging.WARNING,
            )
            return {}
        return self.summary_values(name, found[2], stats, requires_grad)

    def summary_values(
        self, name: str, summary: Summary, stats: Sequence[Statistic], requires_grad: bool
    ) -> dict[str, Value]:
        """The values of `stats` from a merged summary (the keys that merge; the others left
        out, said once a run)."""
        out: dict[str, Value] = {}
        left: list[str] = []
        if summary.by_rank is not None and any(s.name in ("nan_count", "inf_count") for s in stats):
            out["rank_nonfinite"] = summary.by_rank  # which rank's piece holds them
        for s in stats:
            value = statistic_value(s, summary, requires_grad)
            if value is None:
                left.append(s.key)
            else:
                out[s.key] = value
        if left:
            self._tell(
                "unmerged:" + ",".join(left),
                f"mldbg: statistics {', '.join(left)} of sharded tensors (DTensor) cannot be merged "
                f"exactly across shards; left out (first: {name!r}; docs/frameworks.md, 'Sharded training')",
            )
        return out

    def _tell(self, key: str, message: str, level: int = logging.INFO) -> None:
        """Once a run. Keys that do not merge are said at INFO: the two lines' defaults ask for
        some (docs/frameworks.md lists them), no reason to warn on every healthy run."""
        if key not in self._told:
            self._told.add(key)
            log.log(level, message)

    # the exchange -------------------------------------------------------------------------------
    def _exchange(self, named: list[tuple[str, Any]], full: bool, subsample: bool) -> None:
        step = self.recorder.step
        self._summaries = {k: v for k, v in self._summaries.items() if v[0] == step}
        pieces = [_piece(name, t, subsample) for name, t in named]
        by_mesh: dict[int, list[_Piece]] = {}
        meshes: dict[int, Any] = {}
        for p in pieces:  # in the parameters' order: the same on every rank
            key = id(p.mesh)
            meshes.setdefault(key, p.mesh)
            by_mesh.setdefault(key, []).append(p)
        with torch.no_grad():
            for key, group in by_mesh.items():
                if meshes[key].get_coordinate() is None:
                    continue  # not a rank of that mesh
                for p, summary in zip(group, self._exchange_mesh(meshes[key], group, full), strict=True):
                    self._summaries[id(p.original)] = (step, weakref.ref(p.original), summary)

    def _exchange_mesh(self, mesh: Any, pieces: list[_Piece], full: bool) -> list[Summary]:
        return self.exchange_group(_group(mesh), pieces, full)

    def exchange_group(self, group: Any, pieces: list[_Piece], full: bool) -> list[Summary]:
        """The merged summaries of `pieces` (the same tensors, in the same order, on every rank
        of `group`: None, the default group), with one all_gather of their partials (and one
        all_reduce of the subsamples that some piece wants)."""
        device = pieces[0].local.device
        mine = torch.stack([self._partials(p, full) for p in pieces])  # (tensors, partials)
        size = dist.get_world_size(group)
        if size > 1:
            gathered = [torch.empty_like(mine) for _ in range(size)]
            dist.all_gather(gathered, mine, group=group)
            every = torch.stack(gathered).cpu().numpy()  # (ranks, tensors, partials): one copy
        else:
            every = mine.cpu().numpy()[None]
        rank = dist.get_rank(group) if size > 1 else 0
        samples = self._samples(pieces, device, group, size)
        ranks = _global_ranks(group, size)
        out = []
        for i, p in enumerate(pieces):
            local_fingerprint = float(every[rank, i, INDEX["fingerprint"]]) if p.owner else 0.0
            if p.replicated and not p.owner:
                local_fingerprint = _fingerprint(p.local)  # this replica's own, as a data-parallel worker's
            summary = Summary(
                p.global_shape(), merge(every[:, i, :]), local_fingerprint, p.replicated, p.whole_rows
            )
            summary.world = _world()
            summary.by_rank = by_rank(every[:, i, INDEX["local_nonfinite"]], ranks, _world())
            if samples is not None and p.subsample:
                summary.sample = samples[i]
                if full:
                    summary.sample_change = sample_change(summary.sample, self._previous_samples.get(p.name))
                    self._previous_samples[p.name] = summary.sample
            out.append(summary)
        return out

    def _partials(self, p: _Piece, full: bool) -> torch.Tensor:
        """The partial statistics of this rank's piece (neutral values where it does not count),
        as one float64 tensor on the piece's device: enqueued, never read back here."""
        x = p.local.detach()
        previous = self._previous.get(p.name) if full else None
        if full and not p.name.startswith("gradient/"):
            self._previous[p.name] = x.clone()  # delta_l2 at the next statistics step
        if not p.owner or x.numel() == 0:
            neutral = torch.tensor(
                [NEUTRAL.get(name, 0.0) for name in PARTIALS], dtype=torch.float64, device=x.device
            )
            if x.numel() and x.is_floating_point():  # a replica's own NaN and inf (the per-rank view)
                neutral[INDEX["local_nonfinite"]] = (~torch.isfinite(x)).sum().to(torch.float64)
            return neutral
        f = x.reshape(-1).to(torch.float64)
        n = f.numel()
        total = f.sum()
        a = f.abs()
        total_abs = a.sum()
        centered = f - total / n
        centered_abs = a - total_abs / n
        if previous is None or previous.shape != x.shape:
            delta = torch.tensor(math.nan, dtype=torch.float64, device=x.device)  # no change known yet
        else:
            d = f - previous.reshape(-1).to(torch.float64)
            delta = (d * d).sum()
        row_range = torch.tensor(-math.inf, dtype=torch.float64, device=x.device)
        if p.whole_rows and x.dim() >= 1 and x.shape[0] > 0 and n // x.shape[0] > 0:
            rows = f.reshape(x.shape[0], -1)
            row_range = (rows.amax(dim=1) - rows.amin(dim=1)).max()
        return torch.stack([
            torch.tensor(float(n), dtype=torch.float64, device=x.device),
            total, (centered * centered).sum(), (f * f).sum(), total_abs, (centered_abs * centered_abs).sum(),
            f.min(), f.max(), a.min(), a.max(), f.prod(),
            torch.isnan(f).sum().to(torch.float64), torch.isinf(f).sum().to(torch.float64),
            (f == 0).sum().to(torch.float64), _fingerprint_tensor(x), delta, row_range,
            (~torch.isfinite(f)).sum().to(torch.float64),
        ])  # fmt: skip

    def _samples(
        self, pieces: list[_Piece], device: torch.device, group: Any, size: int
    ) -> list[np.ndarray] | None:
        """The global subsample of every piece that wants one (zeros elsewhere), summed across
        the ranks in one all-reduce: each position comes from the one rank that holds it."""
        wanted = [p for p in pieces if p.subsample]
        if not wanted:
            return None
        parts = []
        for p in pieces:
            if not p.subsample:
                parts.append(torch.zeros(0, dtype=torch.float64, device=device))
                continue
            n = math.prod(p.global_shape())
            buf = torch.zeros(min(n, st.QUANTILE_SAMPLE), dtype=torch.float64, device=device)
            if p.flat is not None:
                if p.owner and p.local.numel():
                    where, local = flat_positions(n, p.flat)
                    if where.size:
                        values = p.local.detach().reshape(-1)[torch.as_tensor(local, device=device)]
                        buf[torch.as_tensor(where, device=device)] = values.to(torch.float64)
            elif p.owner and p.box is not None and p.local.numel():
                where, local = positions(tuple(p.tensor.shape), p.box)
                if where.size:
                    values = p.local.detach().reshape(-1)[torch.as_tensor(local, device=device)]
                    buf[torch.as_tensor(where, device=device)] = values.to(torch.float64)
            elif p.box is None:
                buf.fill_(math.nan)  # positions unknown (a strided shard): no quantiles
            parts.append(buf)
        flat = torch.cat(parts)
        if size > 1:
            dist.all_reduce(flat, group=group)
        host = flat.cpu().numpy()
        out, start = [], 0
        for part in parts:
            out.append(host[start : start + part.numel()].copy())
            start += part.numel()
        return out


def _global_ranks(group: Any, size: int) -> list[int]:
    """The global rank of each rank of `group` (the default group: the same numbers)."""
    if size <= 1:
        return [dist.get_rank() if dist.is_available() and dist.is_initialized() else 0]
    if group is None:
        return list(range(size))
    return [dist.get_global_rank(group, i) for i in range(size)]


def _world() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _fingerprint_tensor(x: torch.Tensor) -> torch.Tensor:
    """The `fingerprint` of a local piece, as a 0-d float64 tensor on its device (exact: < 2^31)."""
    from mldbg.frameworks.torch_statistics import _fingerprint_parts

    local = x.view(torch.uint8) if x.dtype == torch.bool else x
    parts = list(_fingerprint_parts(local.contiguous()))
    return torch.stack(parts).sum().remainder(st.P).to(torch.float64)


def _fingerprint(x: torch.Tensor) -> float:
    return 0.0 if x.numel() == 0 else float(_fingerprint_tensor(x.detach()))


def _piece(name: str, tensor: Any, subsample: bool) -> _Piece:
    from torch.distributed.tensor import Partial, Replicate, Shard
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    original = tensor
    if any(isinstance(p, Partial) for p in tensor.placements):  # a summand: reduce it to a replica
        tensor = tensor.redistribute(
            tensor.device_mesh, [Replicate() if isinstance(p, Partial) else p for p in tensor.placements]
        )
    mesh, placements = tensor.device_mesh, tuple(tensor.placements)
    local = tensor.to_local()
    coordinate = mesh.get_coordinate()
    owner = coordinate is not None and all(
        c == 0 for c, p in zip(coordinate, placements, strict=True) if isinstance(p, Replicate)
    )
    replicated = all(isinstance(p, Replicate) for p in placements)
    # positions are known from the placements alone, the same on every rank (a `_StridedShard`,
    # FSDP2 + TP on one mesh, interleaves its pieces: no subsample, no row ranges)
    positional = all(isinstance(p, (Shard, Replicate)) for p in placements)
    box = None
    if coordinate is not None and positional:
        shape, offset = compute_local_shape_and_global_offset(tuple(tensor.shape), mesh, placements)
        if tuple(shape) == tuple(local.shape):
            box = (tuple(offset), tuple(shape))
    whole_rows = positional and not any(
        isinstance(p, Shard) and p.dim % max(1, tensor.dim()) != 0 for p in placements
    )
    subsample = subsample and positional
    return _Piece(name, original, tensor, local, mesh, owner, replicated, box, whole_rows, subsample)


def _group(mesh: Any) -> Any:
    """The process group spanning every rank of `mesh`."""
    if mesh.ndim == 1:
        return mesh.get_group()
    if mesh.size() == dist.get_world_size():
        return None  # the default group
    return mesh._flatten().get_group()


# raw pieces (`mldbg.store.shards`) ------------------------------------------------------------
def piece_and_layout(tensor: Any) -> tuple[torch.Tensor, np.ndarray]:
    """(this rank's piece of DTensor `tensor`, its layout vector): where the piece lies in the
    global tensor, from the placements alone (no collective). Positions mldbg cannot map (a
    placement of a later torch) give a layout of unknown positions: the piece is still saved."""
    from torch.distributed.tensor import Partial

    from mldbg.store.shards import encode

    mesh, placements = tensor.device_mesh, tuple(tensor.placements)
    local = tensor.to_local()
    shape = tuple(tensor.shape)
    coordinate = mesh.get_coordinate()
    combine, partials, partial_id = "piece", 1, 0
    for dim, p in enumerate(placements):
        if isinstance(p, Partial):
            combine = {"sum": "sum", "avg": "avg", "max": "max", "min": "min"}.get(str(p.reduce_op), "")
            partial_id = partial_id * mesh.size(dim) + (coordinate[dim] if coordinate else 0)
            partials *= mesh.size(dim)
    indices = None if not combine or coordinate is None else _indices(shape, mesh, placements, coordinate)
    if indices is not None and tuple(len(i) for i in indices) != tuple(local.shape):
        indices = None
    return local, encode(shape, indices, combine or "piece", partials, partial_id)


def _indices(
    shape: tuple[int, ...], mesh: Any, placements: tuple[Any, ...], coordinate: list[int]
) -> list[np.ndarray] | None:
    """Per dimension, the global indices this rank's piece holds: the placements applied left
    to right (as `torch.distributed.tensor._utils.compute_local_shape_and_global_offset` does),
    a `_StridedShard`'s interleaved indices included. None where a placement is not mapped."""
    from torch.distributed.tensor import Partial, Replicate, Shard, placement_types

    strided: Any = getattr(placement_types, "_StridedShard", None)  # private: FSDP2 + TP on one mesh
    out = [np.arange(n, dtype=np.int64) for n in shape]
    try:
        for mesh_dim, p in enumerate(placements):
            if isinstance(p, (Replicate, Partial)):
                continue
            if strided is not None and isinstance(p, strided):
                mode: Any = placement_types._StridedShardOffsetMode.ALL  # every index, not the first
                size, offsets = p.local_shard_size_and_offset(
                    len(out[p.dim]), mesh.size(mesh_dim), coordinate[mesh_dim], mode
                )
                out[p.dim] = out[p.dim][np.asarray(offsets if size else [], dtype=np.int64)]
            elif isinstance(p, Shard):
                size, offset = Shard.local_shard_size_and_offset(
                    len(out[p.dim]), mesh.size(mesh_dim), coordinate[mesh_dim]
                )
                out[p.dim] = out[p.dim][int(offset) : int(offset) + int(size)]
            else:
                return None
    except Exception:  # a torch whose private placement API differs: positions unknown
        return None
    return out


class _PieceRecorder(Recorder):
    def _check_stop(self) -> None:
        return  # the main recorder's to act on


class PieceRecorder:
    """Under include_workers="one", a rank other than 0 of a job whose sharded tensors are saved
    raw: worker 0's pieces alone are not the tensor, so this rank saves its own pieces of the
    DTensors (nothing else) as its own worker of the run, on the main recorder's steps and
    schedule. The side recorder (`make()`) is made at the first piece saved, so a job without
    DTensors writes nothing here; its stop requests are the main recorder's to act on."""

    def __init__(self, main: Any, settings: dict[str, Any], rank: int, world_size: int, framework: str):
        self.main = main
        self._settings = settings  # the collections and schedule of the user's hook
        self._worker = (rank, world_size, framework)
        self.recorder: Any = None
        self._has_dtensors: dict[int, bool] = {}
        main.before_step_end.append(self._main_step_end)

    def any(self, params: Sequence[tuple[str, Any, Any]]) -> bool:
        found = self._has_dtensors.get(id(params))
        if found is None:
            found = self._has_dtensors[id(params)] = any(is_sharded(p) for _, p, _ in params)
        return found

    def open(self) -> Any:
        """The side recorder in the main recorder's open step, if it saves anything then."""
        main = self.main
        if not main.in_step:
            return None
        if self.recorder is None:
            rank, world_size, framework = self._worker
            self.recorder = _PieceRecorder(
                main.store, include_workers="all", rank=rank, world_size=world_size, framework=framework,
                **self._settings,
            )  # fmt: skip
        side = self.recorder
        if not (side.in_step and side.step == main.step):
            if side.in_step:
                side.end_step()
            side.step = main.step
            side.start_step(main.mode, mode_step=main.mode_step)
        return side if side.saving else None

    def _main_step_end(self) -> None:
        if self.recorder is not None and self.recorder.in_step:
            self.recorder.end_step()

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()
