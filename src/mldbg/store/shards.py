"""Raw sharded tensors (issue 31): where each rank's piece of a sharded tensor lies in the
global tensor, and the global tensor put back together from the pieces. NumPy only.

A sharded tensor asked for raw (a DTensor: FSDP2, tensor parallelism) is saved by every rank as
its own piece, under the tensor's name (a per-rank view: `trial.tensor(name).value(step,
worker=...)`), with beside it the record `stats/<tensor>/shard_layout` of the same step: the
piece's layout, an int64 vector (`encode`):

    [VERSION, ndim, *global_shape, combine, partials, partial_id, then per dimension of the
     tensor: the number of runs R (-1: positions unknown) and R pairs (start, length)]

- the runs: the global indices along each dimension that the piece holds, as runs of consecutive
  indices (one run for `Shard(dim)`, as many as the interleaving for FSDP2 + TP's
  `_StridedShard`); the piece is the cartesian product of those index sets;
- `combine`, `partials`, `partial_id`: a `Partial` placement holds a summand, not a piece:
  the pieces with the same runs combine (`COMBINE`: sum, mean, max, min) across the `partials`
  ranks of the Partial mesh dimensions, `partial_id` telling which one this is (0 and 1 without).

Pieces with the same runs and partial id are replicas (a `Replicate` mesh dimension): read once,
the first worker's by name. `assemble` checks that the pieces cover the global tensor exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mldbg.errors import TensorUnavailableForStep

VERSION = 1
LAYOUT_KEY = "shard_layout"
COMBINE = ("piece", "sum", "avg", "max", "min")  # code -> how pieces of one box combine


class Unassembled(TensorUnavailableForStep):
    """The saved pieces of a sharded tensor do not make the whole tensor (the global value is
    not available at that step; each piece still is, by worker)."""


def layout_name(tensor: str) -> str:
    """`stats/<tensor>/shard_layout`: the record of a piece's layout (hidden from tensor lists)."""
    return f"stats/{tensor}/{LAYOUT_KEY}"


def runs(indices: np.ndarray) -> list[tuple[int, int]]:
    """Sorted or not, global indices as runs (start, length) of consecutive ones, in order."""
    indices = np.asarray(indices, dtype=np.int64).reshape(-1)
    if indices.size == 0:
        return []
    breaks = np.nonzero(np.diff(indices) != 1)[0] + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [indices.size]))
    return [(int(indices[s]), int(e - s)) for s, e in zip(starts, ends, strict=True)]


def encode(
    global_shape: Sequence[int],
    indices: Sequence[np.ndarray] | None,
    combine: str = "piece",
    partials: int = 1,
    partial_id: int = 0,
) -> np.ndarray:
    """The layout vector of one piece: `indices`, per dimension the global indices it holds
    (None: unknown positions)."""
    out = [VERSION, len(global_shape), *map(int, global_shape), COMBINE.index(combine), partials, partial_id]
    for d in range(len(global_shape)):
        if indices is None:
            out.append(-1)
            continue
        found = runs(indices[d])
        out.append(len(found))
        for start, length in found:
            out += [start, length]
    return np.asarray(out, dtype=np.int64)


def decode(
    layout: np.ndarray,
) -> tuple[tuple[int, ...], str, int, int, list[np.ndarray] | None]:
    """(global shape, combine, partials, partial id, per dimension the global indices or None)."""
    v = [int(x) for x in np.asarray(layout).reshape(-1)]
    if not v or v[0] != VERSION:
        raise Unassembled(f"unknown shard layout version {v[:1]}")
    ndim = v[1]
    shape = tuple(v[2 : 2 + ndim])
    at = 2 + ndim
    combine, partials, partial_id = COMBINE[v[at]], v[at + 1], v[at + 2]
    at += 3
    indices: list[np.ndarray] | None = []
    for _ in range(ndim):
        count = v[at]
        at += 1
        if count < 0:
            indices = None
            continue
        parts = [np.arange(v[at + 2 * i], v[at + 2 * i] + v[at + 2 * i + 1]) for i in range(count)]
        at += 2 * count
        if indices is not None:
            indices.append(np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64))
    return shape, combine, partials, partial_id, indices


def assemble(name: str, pieces: Sequence[tuple[str, np.ndarray, np.ndarray]]) -> np.ndarray:
    """The global tensor from the pieces (worker, layout vector, piece), in the workers' order.
    Raises Unassembled, naming what is missing, when they do not cover it exactly."""
    if not pieces:
        raise Unassembled(f"sharded tensor {name!r}: no piece saved")
    decoded = [(w, decode(layout), np.asarray(piece)) for w, layout, piece in pieces]
    shape = decoded[0][1][0]
    boxes: dict[tuple, dict[int, np.ndarray]] = {}  # runs -> partial id -> the first replica's piece
    combine, partials = "piece", 1
    for worker, (gshape, comb, parts, pid, indices), piece in decoded:
        if gshape != shape:
            raise Unassembled(f"sharded tensor {name!r}: workers disagree on its shape ({gshape} vs {shape})")
        if indices is None:
            raise Unassembled(
                f"sharded tensor {name!r}: the positions of {worker}'s piece are not known (a placement "
                "mldbg does not map); read each piece with value(step, worker=...)"
            )
        if tuple(len(i) for i in indices) != piece.shape:
            raise Unassembled(
                f"sharded tensor {name!r}: {worker}'s piece {piece.shape} does not match its layout"
            )
        combine, partials = comb, parts
        key = tuple(tuple(int(x) for x in i) for i in indices)
        boxes.setdefault(key, {}).setdefault(pid, piece)
    dtype = np.result_type(*(p for by_id in boxes.values() for p in by_id.values()))
    out = np.zeros(shape, dtype=dtype)
    covered = 0
    for key, by_id in boxes.items():
        if len(by_id) < partials:
            raise Unassembled(
                f"sharded tensor {name!r}: {partials - len(by_id)} of the {partials} partial values of a "
                "piece were not saved (a worker not recorded?)"
            )
        stack = [by_id[i] for i in sorted(by_id)]
        if combine == "piece" or len(stack) == 1:
            value = stack[0]
        elif combine == "sum":
            value = np.sum(stack, axis=0, dtype=dtype)
        elif combine == "avg":
            value = (np.sum(stack, axis=0, dtype=np.float64) / len(stack)).astype(dtype)
        elif combine == "max":
            value = np.max(stack, axis=0)
        else:
            value = np.min(stack, axis=0)
        out[np.ix_(*(np.asarray(i, dtype=np.int64) for i in key))] = value
        covered += math.prod(len(i) for i in key)
    if covered != math.prod(shape):
        raise Unassembled(
            f"sharded tensor {name!r}: the saved pieces cover {covered} of its {math.prod(shape)} elements "
            "(a worker not recorded, or a step one of them did not save); value(step, worker=...) reads one piece"
        )
    return out
