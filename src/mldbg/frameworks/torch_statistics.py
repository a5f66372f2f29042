"""Statistics of PyTorch tensors computed where the tensors live (issue 14).

A hook collects what the rules need during a step into a `StatisticsBatch`, then calls
`finish()`, which enqueues all the work and returns at once; the callable it returns gives the
values (NumPy) later, on the writer's thread:

    batch = StatisticsBatch()
    batch.add("fc1.weight", p, ["l2", "mean_abs", "nan_count"])
    batch.add("relu1_output_0", out, ["unit_active"])
    batch.add_classes("labels", y, "predictions", logits)
    pending = batch.finish()            # no sync with the device
    ...
    values = pending()                  # {"fc1.weight": {"l2": ..., ...}, ...}

The definitions are those of `mldbg.store.statistics` (its NumPy reference is what the tests
compare with). How the work is done:
- Norm-like statistics of many tensors (`l1`, `mean_abs`, `l2`, `max_abs`, `max`,
  `delta_l2`) are one multi-tensor kernel per dtype for the whole list (`torch._foreach_norm`,
  `_foreach_max`, `_foreach_sub`/`_foreach_copy_`), not one per tensor; fp16/bf16 are read
  as they are and accumulated in float32 inside the kernel.
- The others (moments, counts, units, channels, classes...) are a few operations per tensor,
  enqueued without any host synchronization: no `.item()`, no data-dependent shapes
  (class counts go through `scatter_add_` into buckets sized from the shapes). Ask for them at
  the cadence the rules need (`docs/statistics.md` gives their cost).
- Every result of a device is stacked into ONE float64 tensor and copied with ONE
  non-blocking copy into pinned host memory, followed by a CUDA event; the returned callable
  waits on that event, so the training stream never waits for the host. Derived values
  (mean |x| = l1 / count, std = sqrt(variance), chunk combinations, quantile interpolation)
  are finished on the host in float64.
- On the CPU the tensors are reduced in place, never cloned first. fp16/bf16 and integer
  tensors are converted in chunks of `CHUNK` elements (a transient 1 MB, not a copy of the
  tensor); tensors whose l1 norm is finite skip the NaN/inf counting passes.

Memory: `delta_l2` keeps a copy of each tensor it follows (on its device) between calls, like
an optimizer state; `forget()` drops them. A CUDA fp16/bf16 tensor asked for moments is
converted to float32 on the device (transient).
"""

from __future__ import annotations

import functools
import logging
import math
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from mldbg.errors import InvalidConfig
from mldbg.frameworks.torch_sharded import ShardedStatistics, is_sharded
from mldbg.store import statistics as st
from mldbg.store.statistics import Statistic, Value

log = logging.getLogger("mldbg")

CHUNK = 1 << 18  # elements per conversion chunk for fp16/bf16/integer tensors on the CPU
HASH_CHUNK = 1 << 16  # elements per fingerprint chunk (int64 temporaries stay in cache)
GPU_HASH_CHUNK = 1 << 22  # on a GPU: fewer launches (a data-parallel job fingerprints every parameter)
_HALF = (torch.float16, torch.bfloat16)
_NATIVE_FLOAT = (torch.float32, torch.float64)
_NORM_ORDER: dict[str, float | str] = {
    "l1": 1.0, "l1_abs": 1.0, "sum_abs": 1.0, "mean_abs": 1.0,
    "l2": 2.0, "l2_abs": 2.0, "max_abs": math.inf, "max": "max",
}  # fmt: skip
_MOMENTS = {"mean", "sum", "std", "variance"}
SMALL_ELEMENTS = 4096  # CPU float tensors this small have their moments computed together (`_small_moments`)
_SMALL_MOMENTS = {"mean", "sum", "variance", "std", "zero_fraction"}
_ABS_MOMENTS = {"std_abs", "variance_abs"}


Results = dict[str, dict[str, Value]]
Fn = Callable[[list[float]], float]  # how the host finishes a scalar from its device values


@dataclass(frozen=True)
class _Plan:
    """What a list of kinds asks for, worked out once per list (hooks repeat theirs)."""

    stats: tuple[Statistic, ...]
    orders: dict[float | str, tuple[tuple[str, str], ...]]  # multi-tensor kernel -> (key, name)
    extremes: tuple[tuple[str, str], ...]  # min, max, max_abs: (key, name)
    vectors: bool
    delta: bool

    @classmethod
    def of(cls, kinds: tuple[str | Statistic, ...]) -> _Plan:
        stats = st.expand(kinds)
        orders: dict[float | str, tuple[tuple[str, str], ...]] = {}
        for s in stats:
            if s.name in _NORM_ORDER:
                orders[_NORM_ORDER[s.name]] = (*orders.get(_NORM_ORDER[s.name], ()), (s.key, s.name))
        extremes = tuple((s.key, s.name) for s in stats if s.name in ("min", "max", "max_abs"))
        vectors = any(s.is_vector for s in stats)
        return cls(stats, orders, extremes, vectors, any(s.name == "delta_l2" for s in stats))


@dataclass
class _Request:
    name: str
    tensor: torch.Tensor
    plan: _Plan
    unit_axis: int | None
    numel: int
    requires_grad: bool = False  # of the tensor handed over (a parameter), before detaching
    done: set[str] = field(default_factory=set)  # statistic keys already enqueued
    version: int | None = None  # its `_version` when handed over (None: not tracked)

    def changed(self) -> bool:
        """Whether the tensor was written in place since it was handed over (a model's scores
        masked by the script after its forward: `scores[i, seen] = -1e9` in a ranking loop):
        its statistics would be of values the model did not produce."""
        return self.version is not None and _version(self.tensor) != self.version

    @property
    def stats(self) -> tuple[Statistic, ...]:
        return self.plan.stats


def _version(tensor: torch.Tensor) -> int | None:
    """The tensor's version counter (bumped by each in-place write), None where it has none
    (an inference-mode tensor)."""
    try:
        return int(tensor._version)
    except RuntimeError:
        return None


@dataclass
class _ClassRequest:
    labels_name: str | None
    labels: torch.Tensor | None
    predictions_name: str | None
    predictions: torch.Tensor | None
    classes: int | None
    class_axis: int | None

    @property
    def device(self) -> torch.device:
        t = self.labels if self.labels is not None else self.predictions
        assert t is not None
        return t.device


class StatisticsBatch:
    """Collects the statistics wanted in a step; `finish()` computes them all at once.

    Long-lived: one per hook. It keeps what carries over from step to step (the previous
    values behind `delta_l2`, pinned buffers, subsample indices); the requests themselves are
    cleared by each `finish()`."""

    def __init__(self, *, sync_free: bool | None = None) -> None:
        """`sync_free`: never read a value back while enqueuing (no data-dependent shortcut)
        and convert fp16/bf16 whole on the device. None: on CUDA devices only; True: on the
        CPU too, which is how the tests run the GPU code path on a machine without one."""
        self._sync_free = sync_free
        self._requests: list[_Request] = []
        self._classes: list[_ClassRequest] = []
        self._vectors: list[tuple[str, str, torch.Tensor]] = []  # `add_vector`
        self._previous: dict[str, torch.Tensor] = {}
        self._previous_samples: dict[str, tuple[int, torch.Tensor]] = {}  # sample_change: (numel, subsample)
        self._pool = _PinnedPool()
        self._index: dict[tuple[int, torch.device], torch.Tensor] = {}
        self._plans: dict[tuple[str | Statistic, ...], _Plan] = {}
        self._segments: dict[tuple[int, ...], torch.Tensor] = {}  # `_small_moments`' segment ids
        self._layouts: dict[
            tuple[int, ...], tuple[np.ndarray, np.ndarray, np.ndarray]
        ] = {}  # `_small_samples`
        # DTensors (FSDP2, tensor parallel): their global values, merged across the ranks by the
        # hook's `torch_sharded.ShardedStatistics`; without one they are left out, said once
        self.sharded: ShardedStatistics | None = None
        self._sharded_values: Results = {}
        self._sharded_told = False

    def add(
        self,
        name: str,
        tensor: torch.Tensor,
        kinds: Iterable[str | Statistic],
        *,
        unit_axis: int | None = None,
        requires_grad: bool | None = None,
        versioned: bool = False,
    ) -> None:
        """Ask for statistics (keys of `mldbg.store.statistics`) of `tensor`, named `name`.

        The tensor is read at `finish()`: hand over a tensor that is not modified in place
        before then (a parameter before the optimizer step, an activation...), or finish first.
        `versioned`: a tensor the user's script holds and may write in place before then (a
        model's outputs, masked after its forward by a ranking loop): left out at `finish()`
        if it was. `unit_axis` overrides the unit/channel axis convention (`feature_axis`);
        `requires_grad` the flag recorded for the `requires_grad` statistic (default: the
        tensor's own)."""
        if not isinstance(tensor, torch.Tensor):
            raise InvalidConfig(
                f"statistics of {name!r}: expected a torch.Tensor, got {type(tensor).__name__}"
            )
        if tensor.is_complex():
            raise InvalidConfig(f"statistics of {name!r}: complex tensors ({tensor.dtype}) are not supported")
        kinds = tuple(kinds)
        plan = self._plans.get(kinds)
        if plan is None:
            plan = self._plans[kinds] = _Plan.of(kinds)
        if is_sharded(tensor):
            self._add_sharded(
                name, tensor, plan, tensor.requires_grad if requires_grad is None else requires_grad
            )
            return
        if plan.vectors:
            st.feature_axis(tensor.dim(), unit_axis)  # refuses the batch axis now, not at finish()
        if plan.stats:
            self._requests.append(
                _Request(
                    name,
                    tensor.detach(),
                    plan,
                    unit_axis,
                    tensor.numel(),
                    tensor.requires_grad if requires_grad is None else requires_grad,
                    version=_version(tensor) if versioned else None,
                )
            )

    def _add_sharded(self, name: str, tensor: torch.Tensor, plan: _Plan, requires_grad: bool) -> None:
        if self.sharded is None:
            if not self._sharded_told:
                self._sharded_told = True
                log.warning(
                    "mldbg: %r is a sharded tensor (DTensor): its statistics are recorded by the "
                    "statistics of the two lines (statistics=True), not by reductions; left out",
                    name,
                )
            return
        values = self.sharded.values(name, tensor, plan.stats, requires_grad)
        if values:
            self._sharded_values.setdefault(name, {}).update(values)

    def add_values(self, name: str, values: dict[str, Value]) -> None:
        """Values known already (merged across the ranks where they were computed: a DeepSpeed
        ZeRO partition's, `torch_deepspeed`), shipped with the step's other statistics."""
        if values:
            self._sharded_values.setdefault(name, {}).update(values)

    def add_classes(
        self,
        labels_name: str | None,
        labels: torch.Tensor | None,
        predictions_name: str | None = None,
        predictions: torch.Tensor | None = None,
        *,
        classes: int | None = None,
        class_axis: int | None = None,
    ) -> None:
        """Class histograms of labels and predictions (argmax of logits, or ids), and their
        per-class correct counts and confusion matrix (see `mldbg.store.statistics`).

        Give `classes` for integer predictions on a GPU: otherwise the number of classes is
        read from the data, which waits for the device once."""
        if labels is None and predictions is None:
            return
        if labels is not None and predictions is not None and labels.device != predictions.device:
            raise InvalidConfig(
                f"class statistics of {labels_name!r} and {predictions_name!r}: on different devices "
                f"({labels.device}, {predictions.device})"
            )
        self._classes.append(
            _ClassRequest(
                labels_name,
                None if labels is None else labels.detach(),
                predictions_name,
                None if predictions is None else predictions.detach(),
                classes,
                class_axis,
            )
        )

    def add_vector(self, name: str, key: str, value: torch.Tensor) -> None:
        """A vector statistic computed already (`key` one of `statistics.VECTORS`), shipped
        with the others: `confusion_steps`, which the hook accumulates from step to step."""
        self._vectors.append((name, key, value))

    def forget(self, name: str | None = None) -> None:
        """Drop the previous value `delta_l2` and `sample_change` keep for `name` (for every
        tensor when None)."""
        if name is None:
            self._previous.clear()
            self._previous_samples.clear()
        else:
            self._previous.pop(name, None)
            self._previous_samples.pop(name, None)

    def finish(self) -> PendingStatistics:
        """Enqueue the work of every request and return without waiting for the device."""
        requests, classes, vectors = self._requests, self._classes, self._vectors
        self._requests, self._classes, self._vectors = [], [], []
        requests = [r for r in requests if not r.changed()]
        devices: dict[torch.device, tuple[list[_Request], list[_ClassRequest]]] = {}
        made: dict[torch.device, list[tuple[str, str, torch.Tensor]]] = {}
        for name, key, value in vectors:
            made.setdefault(value.device, []).append((name, key, value))
            devices.setdefault(value.device, ([], []))
        for r in requests:
            devices.setdefault(r.tensor.device, ([], []))[0].append(r)
        for c in classes:
            devices.setdefault(c.device, ([], []))[1].append(c)
        shipments = []
        if self._sharded_values:  # known already: merged across the ranks where they were handed over
            shipments.append(_Shipment(None, 0, None, None, [], [], self._sharded_values))
            self._sharded_values = {}
        with torch.no_grad():
            for device, (reqs, cls) in devices.items():
                out = _Results(device, read_now=not self.sync_free(device))
                self._compute(reqs, cls, out)
                for name, key, value in made.get(device, ()):
                    out.vector(name, key, value, st.VECTORS[key])
                shipments.append(out.ship(self._pool))
        return PendingStatistics(shipments)

    # the work of one device -----------------------------------------------------------------
    def _compute(self, requests: list[_Request], classes: list[_ClassRequest], out: _Results) -> None:
        work = []
        for r in requests:
            if r.tensor.numel() == 0:  # everything is known from the shape
                stand_in = np.zeros(tuple(r.tensor.shape), dtype=np.float32)
                for key, value in st.compute(stand_in, r.stats, unit_axis=r.unit_axis).items():
                    out.known(r.name, key, float(r.requires_grad) if key == "requires_grad" else value)
                if r.plan.delta:
                    self._previous.pop(r.name, None)
                self._previous_samples.pop(r.name, None)
            else:
                if r.tensor.dtype == torch.bool:
                    r.tensor = r.tensor.view(torch.uint8)
                for s in r.plan.stats:
                    if s.name == "requires_grad":  # the flag, known on the host
                        out.known(r.name, s.key, float(r.requires_grad))
                        r.done.add(s.key)
                    elif s.name in ("count", "samples"):
                        shape = r.tensor.shape
                        out.known(
                            r.name, s.key, float(r.numel if s.name == "count" else shape[0] if shape else 1)
                        )
                        r.done.add(s.key)
                work.append(r)
        gpu = self.sync_free(out.device)
        l1 = self._norms(work, out, gpu)
        self._deltas(work, out)
        self._extremes(work, out)
        if not gpu and out.device.type == "cpu":
            self._small_moments(work, out)
            self._small_samples(work, out)
        for r in work:
            if len(r.done) < len(r.plan.stats):
                _PerTensor(self, r, out, None if gpu else l1.get(id(r)), gpu).run()
        for c in classes:
            self._class_counts(c, out)

    def _small_moments(self, work: list[_Request], out: _Results) -> None:
        """On the CPU: the moments and zero fraction of every small float tensor (a BatchNorm's
        weight, a bias, their gradients) in a few operations over all of them at once, in
        float64, instead of five operations each (whose cost is their dispatch, not their
        arithmetic). A tensor whose sum is not finite is left to `_PerTensor`, and so is NaN
        and inf counting of the others: here their count is known to be 0."""
        small = _small_requests(work, SMALL_ELEMENTS, _SMALL_MOMENTS)
        if len(small) < 2:
            return
        lengths = tuple(r.numel for r in small)
        ids = self._segments.get(lengths)
        if ids is None:
            ids = self._segments[lengths] = torch.repeat_interleave(
                torch.arange(len(small)), torch.tensor(lengths)
            )
        flat = torch.cat([r.tensor.reshape(-1) for r in small]).to(torch.float64)
        sums = torch.zeros(len(small), dtype=torch.float64).index_add_(0, ids, flat)
        counts = torch.tensor(lengths, dtype=torch.float64)
        centered = flat - (sums / counts).index_select(0, ids)
        squares = torch.zeros(len(small), dtype=torch.float64).index_add_(0, ids, centered * centered)
        zeros = torch.zeros(len(small), dtype=torch.float64).index_add_(0, ids, (flat == 0).to(torch.float64))
        for r, total, m2, nz in zip(small, sums.tolist(), squares.tolist(), zeros.tolist(), strict=True):
            if not math.isfinite(total):
                continue
            n = r.numel
            values = {"mean": total / n, "sum": total, "variance": m2 / n, "std": math.sqrt(m2 / n),
                      "zero_fraction": nz / n, "nan_count": 0.0, "inf_count": 0.0}  # fmt: skip
            for s in r.plan.stats:
                if s.name in values and s.key not in r.done:
                    out.known(r.name, s.key, values[s.name])
                    r.done.add(s.key)

    def _small_samples(self, work: list[_Request], out: _Results) -> None:
        """On the CPU: the quantiles and the sample change of every float tensor no larger than
        the quantiles' subsample (so the sample is the whole tensor: a BatchNorm's or a bias's
        gradient), all at once: one float64 copy of them all, one sort of their rows (padded
        with NaN, which sorts last), then a few NumPy reads each."""
        small = _small_requests(work, st.QUANTILE_SAMPLE, ("quantile", "sample_change"))
        if len(small) < 2:
            return
        lengths = tuple(r.numel for r in small)
        layout = self._layouts.get(lengths)
        if layout is None:
            starts = np.cumsum((0, *lengths[:-1]))
            rows = np.repeat(np.arange(len(lengths)), lengths)
            layout = self._layouts[lengths] = (starts, rows, np.arange(sum(lengths)) - starts[rows])
        starts, rows, cols = layout
        flat = torch.cat([r.tensor.reshape(-1) for r in small]).to(torch.float64).numpy()
        grid: np.ndarray | None = None
        for i, r in enumerate(small):
            n, start = r.numel, int(starts[i])
            sample = flat[start : start + n]
            for s in r.plan.stats:
                if s.key in r.done:
                    continue
                if s.name == "quantile":
                    if grid is None:  # each row sorted, NaN last: the sample sorted, as the reference
                        grid = np.full((len(small), max(lengths)), np.nan)
                        grid[rows, cols] = flat
                        grid.sort(axis=1)
                    if math.isnan(grid[i, n - 1]):
                        value = math.nan
                    else:
                        lo, hi, t = st.quantile_position(n, s.params[0])
                        value = st.interpolate(float(grid[i, lo]), float(grid[i, hi]), t)
                    out.known(r.name, s.key, value)
                elif s.name == "sample_change":
                    previous = self.keep_sample(r.name, n, torch.from_numpy(sample.copy()))
                    if previous is None or previous.device.type != "cpu":
                        out.known(r.name, s.key, math.nan)
                    else:
                        with np.errstate(all="ignore"):  # NaN and inf give NaN, as the reference's
                            norm = math.sqrt(float(np.dot(sample, sample)))
                            diff = sample - previous.numpy()
                            change = math.sqrt(float(np.dot(diff, diff)))
                        out.known(r.name, s.key, _ratio([change, norm]))
                else:
                    continue
                r.done.add(s.key)

    def sync_free(self, device: torch.device) -> bool:
        return device.type == "cuda" if self._sync_free is None else self._sync_free

    def _norms(self, work: list[_Request], out: _Results, gpu: bool) -> dict[int, torch.Tensor]:
        """Norm-like statistics, one multi-tensor kernel per (dtype, order) for all tensors.
        Returns each request's l1 (the CPU uses it to skip counting NaN/inf in finite tensors)."""
        groups: dict[tuple[torch.dtype, float | str], list[_Request]] = {}
        for r in work:
            dt = r.tensor.dtype
            if not dt.is_floating_point or (dt in _HALF and not gpu):
                continue  # integers, and fp16/bf16 on the CPU: chunked, in _PerTensor
            for order in r.plan.orders:
                if order != math.inf or gpu:  # the CPU's inf-norm is 5x slower than aminmax
                    groups.setdefault((dt, order), []).append(r)
        l1: dict[int, torch.Tensor] = {}
        for (dt, order), rs in groups.items():
            tensors = [r.tensor for r in rs]
            values: Sequence[torch.Tensor]
            if order == "max":
                values = torch._foreach_max(tensors)
            elif order == 1.0 and not gpu:  # the CPU's l1 kernel is not vectorized: 1.4x slower
                values = [t.abs().sum() for t in tensors]
            else:
                assert isinstance(order, float)
                values = torch._foreach_norm(tensors, order, dtype=torch.float32 if dt in _HALF else None)
            entries = []
            for i, (r, v) in enumerate(zip(rs, values, strict=True)):
                if order == 1.0:
                    l1[id(r)] = v
                for key, name in r.plan.orders[order]:
                    entries.append((r.name, key, i, 1.0 / r.numel if name == "mean_abs" else 1.0))
                    r.done.add(key)
            out.block(torch.stack(values), entries)
        return l1

    def _extremes(self, work: list[_Request], out: _Results) -> None:
        """min, max and max |x| not done yet: one aminmax per tensor (one pass, no temporary)."""
        for r in work:
            want = [(key, name) for key, name in r.plan.extremes if key not in r.done]
            if not want:
                continue
            low, high = torch.aminmax(r.tensor)
            for key, name in want:
                if name == "max_abs":
                    out.scalar(r.name, key, (low, high), _max_abs)
                else:
                    out.scalar(r.name, key, (low if name == "min" else high,))
                r.done.add(key)

    def _deltas(self, work: list[_Request], out: _Results) -> None:
        """delta_l2 = |x - previous x|: one subtraction, one norm and one copy kernel per dtype."""
        groups: dict[torch.dtype, list[tuple[_Request, torch.Tensor]]] = {}
        for r in work:
            if not r.plan.delta:
                continue
            r.done.add("delta_l2")
            x = r.tensor
            prev = self._previous.get(r.name)
            if prev is None or prev.shape != x.shape or prev.dtype != x.dtype or prev.device != x.device:
                self._previous[r.name] = x.clone(memory_format=torch.contiguous_format)
                out.known(r.name, "delta_l2", math.nan)
            elif not x.dtype.is_floating_point:
                diff = x.to(torch.float64) - prev.to(torch.float64)
                out.scalar(r.name, "delta_l2", [torch.linalg.vector_norm(diff)])
                prev.copy_(x)
            else:
                groups.setdefault(x.dtype, []).append((r, prev))
        for dt, pairs in groups.items():
            xs = [r.tensor for r, _ in pairs]
            prevs = [p for _, p in pairs]
            if dt in _HALF:  # a difference rounded to fp16/bf16 would be off by 2^-9 relative
                diffs = torch._foreach_sub([x.float() for x in xs], [p.float() for p in prevs])
            else:
                diffs = torch._foreach_sub(xs, prevs)
            norms = torch._foreach_norm(diffs, 2.0)
            del diffs
            torch._foreach_copy_(prevs, xs)
            for (r, _), v in zip(pairs, norms, strict=True):
                out.scalar(r.name, "delta_l2", [v])

    def _class_counts(self, c: _ClassRequest, out: _Results) -> None:
        y, p, n_classes = _class_ids(c)
        if n_classes is None or n_classes > st.MAX_CLASSES:
            return
        if y is not None and c.labels_name is not None:
            out.vector(c.labels_name, "class_counts", _bucket_counts(y, n_classes), "I32")
        if p is not None and c.predictions_name is not None:
            out.vector(c.predictions_name, "class_counts", _bucket_counts(p, n_classes), "I32")
        if y is None or p is None or c.labels_name is None or y.numel() != p.numel():
            return
        out.vector(c.labels_name, "class_correct", _bucket_counts(y, n_classes, (y == p).long()), "I32")
        if n_classes <= st.MAX_CONFUSION_CLASSES:
            ok = (y >= 0) & (y < n_classes) & (p >= 0) & (p < n_classes)
            cells = torch.where(ok, y * n_classes + p, n_classes * n_classes)
            grid = torch.zeros(n_classes * n_classes + 1, dtype=torch.int64, device=y.device)
            grid.scatter_add_(0, cells, torch.ones_like(cells))
            out.vector(c.labels_name, "confusion", grid[:-1].reshape(n_classes, n_classes), "I32")

    def keep_sample(self, name: str, numel: int, sample: torch.Tensor) -> torch.Tensor | None:
        """Keep `sample` as `name`'s last subsample; return the one kept before, if it came
        from a tensor of as many elements."""
        previous = self._previous_samples.get(name)
        self._previous_samples[name] = (numel, sample)
        return previous[1] if previous is not None and previous[0] == numel else None

    def subsample(self, flat: torch.Tensor) -> torch.Tensor:
        """The fixed subsample behind `quantile(q)` (`statistics.subsample_index`)."""
        n = flat.numel()
        if n <= st.QUANTILE_SAMPLE:
            return flat
        key = (n, flat.device)
        index = self._index.get(key)
        if index is None:
            index = self._index[key] = torch.from_numpy(st.subsample_index(n)).to(flat.device)
        return flat.index_select(0, index)


class _PerTensor:
    """The statistics of one tensor that no multi-tensor kernel covers."""

    def __init__(
        self, batch: StatisticsBatch, r: _Request, out: _Results, l1: torch.Tensor | None, gpu: bool
    ):
        self.batch, self.r, self.out, self.l1 = batch, r, out, l1
        self.x = r.tensor
        self.n = r.tensor.numel()
        self.gpu = gpu
        self.todo = {s.key: s for s in r.stats if s.key not in r.done}
        self.channels: dict[str, torch.Tensor] | None = None
        self.sorted: torch.Tensor | None = None  # the quantiles' sorted subsample (GPU)
        self.selected: tuple[np.ndarray, bool] | None = None  # the CPU's partitioned one, no NaN in it
        self.sample: torch.Tensor | None = None  # the fixed subsample in float64, a copy (`_sample`)

    def put(self, key: str, parts: Sequence[torch.Tensor], fn: Fn | None = None, scale: float = 1.0) -> None:
        self.out.scalar(self.r.name, key, parts, fn, scale)

    def run(self) -> None:
        names = {s.name for s in self.todo.values()}
        self._chunked(names)
        x, n = self.x, self.n
        for key, s in self.todo.items():
            name = s.name
            if name in ("nan_count", "inf_count"):
                self._nonfinite(key, name)
            elif name == "min_abs":
                self.put(key, [x.abs().amin()])
            elif name == "zero_fraction":
                self._zeros(key)
            elif name == "outside":
                self.put(key, [_outside_mask(x, *s.params).sum()], scale=1 / n)
            elif name == "equal":
                self._equal(key, s.params[0])
            elif name == "quantile":
                self._quantile(key, s.params[0])
            elif name == "sample_change":
                self._sample_change(key)
            elif name == "fingerprint":
                parts = list(_fingerprint_parts(x, GPU_HASH_CHUNK if self.gpu else HASH_CHUNK))
                self.put(key, parts, lambda v: float(sum(int(a) for a in v) % st.P))
            elif name in ("row_range", "col_range"):
                low, high = torch.aminmax(_rows(x), dim=1 if name == "row_range" else 0)  # one pass
                self.put(key, [(high.to(torch.float64) - low.to(torch.float64)).amax()])
            elif s.is_vector:
                self._vector(key, s)

    def _chunked(self, names: set[str]) -> None:
        """Moments, products and (integer or CPU fp16/bf16 tensors) norms: over float chunks,
        combined on the host."""
        want_moments = bool(names & _MOMENTS)
        want_abs = bool(names & _ABS_MOMENTS)
        want_prod = bool(names & {"prod", "prod_abs"})
        norms = {
            k: s for k, s in self.todo.items() if s.name in _NORM_ORDER and s.name not in ("max", "max_abs")
        }
        if not (want_moments or want_abs or want_prod or norms):
            return
        sizes: list[int] = []
        mom: list[torch.Tensor] = []
        mom_abs: list[torch.Tensor] = []
        prods: list[torch.Tensor] = []
        l1: list[torch.Tensor] = []
        l2: list[torch.Tensor] = []
        for chunk in _float_chunks(self.x, self.gpu):
            sizes.append(chunk.numel())
            if want_moments:
                mom.extend(_spread_mean(chunk, self.gpu))
            if want_abs:
                mom_abs.extend(_spread_mean(chunk.abs(), self.gpu))
            if want_prod:
                prods.append(torch.prod(chunk))
            if norms:
                l1.append(torch.linalg.vector_norm(chunk, 1))
                l2.append(torch.linalg.vector_norm(chunk, 2))
        if self.l1 is None and want_moments and len(sizes) == 1 and not self.gpu:
            self.l1 = mom[1]  # the mean: finite when no element is NaN or inf (`_nonfinite`)
        for key, s in list(self.todo.items()):
            name = s.name
            if name in _MOMENTS:
                self.put(key, mom, _moment(name, sizes, self.gpu))
            elif name in _ABS_MOMENTS:
                self.put(key, mom_abs, _moment(name[:-4], sizes, self.gpu))
            elif name == "prod":
                self.put(key, prods, math.prod)
            elif name == "prod_abs":
                self.put(key, prods, lambda v: abs(math.prod(v)))
            elif name in ("l1", "l1_abs", "sum_abs"):
                self.put(key, l1, sum)
            elif name == "mean_abs":
                self.put(key, l1, lambda v: sum(v) / self.n)
            elif name in ("l2", "l2_abs"):
                self.put(key, l2, lambda v: math.sqrt(sum(a * a for a in v)))
            else:
                continue
            del self.todo[key]

    def _zeros(self, key: str) -> None:
        """The share of elements that are 0. The CPU's count_nonzero branches per element (5 ns
        each on a ReLU output, half zeros); comparing and summing does not (1.3 ns)."""
        n = self.n
        if self.gpu:  # one kernel; n - nonzero on the host
            self.put(key, [torch.count_nonzero(self.x)], lambda v: (n - v[0]) / n)
        else:
            self.put(key, [(self.x == 0).sum(dtype=torch.int32 if n < 2**31 else torch.int64)], scale=1 / n)

    def _nonfinite(self, key: str, name: str) -> None:
        x = self.x
        finite = not x.dtype.is_floating_point
        if not finite and not self.gpu:  # on the CPU a sum is there at once: NaN or inf show in it
            if self.l1 is None:
                self.l1 = x.sum()
            finite = math.isfinite(float(self.l1))
        if finite:
            self.out.known(self.r.name, key, 0.0)
        else:
            test = torch.isnan(x) if name == "nan_count" else torch.isinf(x)
            self.put(key, [test.sum()])

    def _equal(self, key: str, value: float) -> None:
        x = self.x
        exact = _exactly(x.dtype, value)
        if exact is None:  # not representable in this dtype: no element can equal it
            self.out.known(self.r.name, key, 0.0)
        else:
            self.put(key, [(x == exact).sum()], scale=1 / self.n)

    def _sample(self) -> torch.Tensor:
        """The fixed subsample as float64, a copy: gathered once for the quantiles and the
        sample change of the tensor."""
        if self.sample is None:
            self.sample = self.batch.subsample(self.x.reshape(-1)).to(torch.float64, copy=True)
        return self.sample

    def _sample_change(self, key: str) -> None:
        """|s - s_prev| / |s| over the fixed subsample: one gather, two norms, a 32 KB copy kept."""
        sample = self._sample()
        previous = self.batch.keep_sample(self.r.name, self.n, sample)
        if previous is None or previous.device != sample.device:
            self.out.known(self.r.name, key, math.nan)
            return
        change = torch.linalg.vector_norm(sample - previous)
        self.put(key, [change, torch.linalg.vector_norm(sample)], _ratio)

    def _quantile(self, key: str, q: float) -> None:
        if not self.gpu and self.x.device.type == "cpu":
            self._host_quantile(key, q)
            return
        if self.sorted is None:  # one sort for every quantile of the tensor
            sample = self.batch.subsample(self.x.reshape(-1))
            self.sorted = torch.sort(sample).values.to(torch.float64)  # NaN sorts last
        s = self.sorted
        lo, hi, t = st.quantile_position(s.numel(), q)
        self.put(
            key,
            [s[lo], s[hi], s[-1]],
            lambda v: math.nan if math.isnan(v[2]) else st.interpolate(v[0], v[1], t),
        )

    def _host_quantile(self, key: str, q: float) -> None:
        """On the CPU: the order statistics every quantile of the tensor needs, by one partial
        selection (`np.partition`, ~8x cheaper than a sort of the 4093-element subsample),
        the same values as the sort's; NaN when the sample holds one (the sort puts NaN last)."""
        if self.selected is None:
            sample = self._sample().numpy()
            # a finite sum of |x| (the norms' l1, or the mean) says there is no NaN in it
            finite = self.l1 is not None and math.isfinite(float(self.l1))
            if not finite and np.isnan(sample).any():
                self.selected = (sample, False)
            else:
                m = sample.size
                qs = tuple(s.params[0] for s in self.todo.values() if s.name == "quantile")
                self.selected = (np.partition(sample, _kth(m, qs)), True)
        values, finite = self.selected
        if not finite:
            self.out.known(self.r.name, key, math.nan)
            return
        lo, hi, t = st.quantile_position(values.size, q)
        self.out.known(self.r.name, key, st.interpolate(float(values[lo]), float(values[hi]), t))

    def _vector(self, key: str, s: Statistic) -> None:
        x, name = self.x, s.name
        axis = st.feature_axis(x.dim(), self.r.unit_axis)
        others = [d for d in range(x.dim()) if d != axis] if axis is not None else list(range(x.dim()))
        spatial = [d for d in others if d != 0]
        if name == "unit_active":
            if x.dim() <= 1:
                value = (x > 0).sum().reshape(1)
            else:
                peak = x.amax(dim=spatial) if spatial else x
                value = (peak > 0).sum(dim=0)
        elif name == "unit_outside":
            mask = _outside_mask(x, *s.params)
            value = mask.sum().reshape(1) if axis is None else mask.sum(dim=others)
        elif name in ("channel_count", "channel_mean", "channel_std"):
            if self.channels is None:  # the three share their passes
                self.channels = _channels(x, axis, others, {s.name for s in self.todo.values()})
            value = self.channels[name]
        elif name == "sample_fingerprints":
            value = _row_fingerprints(x)
        else:  # pragma: no cover - expand() refuses class statistics here
            raise InvalidConfig(f"statistic {key!r} is not computed per tensor")
        self.out.vector(self.r.name, key, value, s.dtype)


# the math --------------------------------------------------------------------------------------
def _small_requests(work: list[_Request], limit: int, names: Collection[str]) -> list[_Request]:
    """The requests of native float tensors of at most `limit` elements that still need one
    of the statistics `names`: those computed together, all at once."""
    return [
        r for r in work
        if r.numel <= limit and r.tensor.dtype in _NATIVE_FLOAT
        and any(s.name in names and s.key not in r.done for s in r.plan.stats)
    ]  # fmt: skip


@functools.lru_cache(maxsize=1024)
def _kth(m: int, qs: tuple[float, ...]) -> list[int]:
    """The order statistics of a sample of `m` that the quantiles `qs` need."""
    return sorted({i for q in qs for i in st.quantile_position(m, q)[:2]})


def _ratio(v: list[float]) -> float:
    return v[0] / v[1] if v[1] > 0 else math.nan


def _max_abs(v: list[float]) -> float:
    """max |x| from (min, max); NaN when they are."""
    return math.nan if math.isnan(v[0]) or math.isnan(v[1]) else max(-v[0], v[1])


def _spread_mean(chunk: torch.Tensor, gpu: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(spread, mean) of a float chunk: on a GPU the spread is the variance (Welford, one kernel);
    on the CPU, where Welford is 20x slower than a sum, it is the l2 norm of the centered chunk
    (two passes, as NumPy does)."""
    if gpu:
        var, mean = torch.var_mean(chunk, correction=0)
        return var, mean
    mean = chunk.mean()
    return torch.linalg.vector_norm(chunk - mean), mean


def _moment(name: str, sizes: list[int], variances: bool) -> Callable[[list[float]], float]:
    """Combine per-chunk (spread, mean) pairs (Chan et al.) into one moment; a spread is a
    variance when `variances`, else the l2 norm of the centered chunk."""

    def combine(v: list[float]) -> float:
        spread, mean = v[0::2], v[1::2]
        var = spread if variances else [s * s / k for s, k in zip(spread, sizes, strict=True)]
        n = sum(sizes)
        mu = sum(m * k for m, k in zip(mean, sizes, strict=True)) / n if len(sizes) > 1 else mean[0]
        if name == "mean":
            return mu
        if name == "sum":
            return mu * n
        if len(sizes) == 1:
            m2 = var[0]
        else:
            between = sum(k * (m - mu) * (m - mu) for k, m in zip(sizes, mean, strict=True))
            m2 = (sum(k * s for k, s in zip(sizes, var, strict=True)) + between) / n
        return m2 if name == "variance" else math.sqrt(m2) if m2 == m2 else math.nan

    return combine


def _float_chunks(x: torch.Tensor, whole: bool) -> Iterator[torch.Tensor]:
    """The tensor as float32/float64 pieces: itself when it already is float32/float64; else
    converted (fp16/bf16 to float32, integers to float64), whole on a GPU, by chunks on the CPU."""
    if x.dtype in _NATIVE_FLOAT:
        yield x
        return
    target = torch.float32 if x.dtype in _HALF else torch.float64
    if whole:
        yield x.to(target)
        return
    flat = x.reshape(-1)
    for start in range(0, flat.numel(), CHUNK):
        yield flat[start : start + CHUNK].to(target)


@functools.lru_cache(maxsize=256)
def _bound(dtype: torch.dtype, value: float, down: bool) -> float:
    """The float of `dtype` nearest `value` on the side that keeps a comparison exact: for
    `x <= value` the largest one <= value (down), for `x >= value` the smallest one >= value."""
    t = torch.tensor(value, dtype=torch.float64).to(dtype)
    if (float(t) > value) if down else (float(t) < value):
        t = torch.nextafter(t, torch.tensor(-math.inf if down else math.inf, dtype=dtype))
    return float(t)


def _at_most(x: torch.Tensor, value: float) -> torch.Tensor:
    """x <= value, exactly, whatever the dtype of x (value is a real number, not cast first)."""
    if x.dtype.is_floating_point:
        return x <= _bound(x.dtype, value, True)
    info = torch.iinfo(x.dtype)
    if value < info.min or value >= info.max:
        return torch.full_like(x, value >= info.max, dtype=torch.bool)
    return x <= math.floor(value)


def _at_least(x: torch.Tensor, value: float) -> torch.Tensor:
    if x.dtype.is_floating_point:
        return x >= _bound(x.dtype, value, False)
    info = torch.iinfo(x.dtype)
    if value > info.max or value <= info.min:
        return torch.full_like(x, value <= info.min, dtype=torch.bool)
    return x >= math.ceil(value)


def _outside_mask(x: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    return _at_most(x, lo) | _at_least(x, hi)


def _exactly(dtype: torch.dtype, value: float) -> float | int | None:
    """`value` as `dtype` represents it, or None when it does not exactly."""
    if not dtype.is_floating_point:
        if value != math.floor(value):
            return None
        info = torch.iinfo(dtype)
        return int(value) if info.min <= value <= info.max else None
    t = torch.tensor(value, dtype=torch.float64).to(dtype)
    return value if float(t) == value else None


def _channels(
    x: torch.Tensor, axis: int | None, others: list[int], wanted: set[str]
) -> dict[str, torch.Tensor]:
    """Per channel: count, mean and population std of the finite elements (two passes)."""
    f = x if x.dtype in _NATIVE_FLOAT else x.to(torch.float32 if x.dtype in _HALF else torch.float64)
    finite = torch.isfinite(f)
    count = (finite.sum(dim=others) if others else finite.long()).reshape(-1)
    out = {"channel_count": count}
    if wanted <= {"channel_count"}:
        return out
    v = torch.where(finite, f, 0)
    total = v.sum(dim=others) if others else v
    mean = out["channel_mean"] = total.reshape(-1).to(torch.float64) / count
    if "channel_std" in wanted:
        shape = [1] * x.dim()
        if axis is not None:
            shape[axis] = -1
        centered = torch.where(finite, f - mean.to(f.dtype).reshape(shape), 0)
        sq = (centered * centered).sum(dim=others) if others else centered * centered
        out["channel_std"] = torch.sqrt(sq.reshape(-1).to(torch.float64) / count)
    return out


def _words(flat: torch.Tensor) -> list[tuple[torch.Tensor, int, int]]:
    """Each element's bit pattern as unsigned 32-bit words in int64, with their (A, B)."""
    size = flat.element_size()
    if size == 1:
        return [(flat.view(torch.uint8).to(torch.int64), st.A, st.B)]
    if size == 2:
        return [(flat.view(torch.int16).to(torch.int64).bitwise_and_(0xFFFF), st.A, st.B)]
    if size == 4:
        return [(flat.view(torch.int32).to(torch.int64).bitwise_and_(0xFFFFFFFF), st.A, st.B)]
    v = flat.view(torch.int64)
    return [
        (v.bitwise_and(0xFFFFFFFF), st.A, st.B),
        (v.bitwise_right_shift(32).bitwise_and_(0xFFFFFFFF), st.A_HI, st.B_HI),
    ]


def _fold(w: torch.Tensor) -> torch.Tensor:
    """w -> (w mod 2^31) + (w div 2^31): the same value modulo P = 2^31 - 1, in place."""
    high = w.bitwise_right_shift(31)
    return w.bitwise_and_(st.P).add_(high)


def _mixed(flat: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
    """Per element, a value congruent to ((A w + B) mod P)^2 summed over its words, < 2^33;
    with `positions` (C j mod P for each position j of a sample, `_positions`; `flat` holds
    whole samples of that many elements), ((A w + B + C j) mod P)^2
    (`statistics.sample_fingerprint`)."""
    total: torch.Tensor | None = None
    for w, a, b in _words(flat):
        w = w.mul_(a).add_(b)  # < 2^63 - 2^33: w < 2^32, a < 0.72 x 2^31, b < 2^31
        if positions is not None and positions.numel():
            w.view(-1, positions.numel()).add_(positions)  # < 2^31 more
        w = _fold(_fold(w))  # < 2^31 + 3
        w = _fold(_fold(w.mul_(w)))  # squared < 2^63, folded back < 2^31 + 3
        total = w if total is None else total.add_(w)
    assert total is not None
    return total


def _fingerprint_parts(x: torch.Tensor, chunk: int = HASH_CHUNK) -> Iterator[torch.Tensor]:
    flat = x.reshape(-1)
    for start in range(0, flat.numel(), chunk):
        yield _mixed(flat[start : start + chunk]).sum().remainder_(st.P)


def _rows(x: torch.Tensor) -> torch.Tensor:
    """The tensor as (slices of axis 0, their elements); a 0-d tensor is one row."""
    return x.reshape(1, 1) if x.dim() == 0 else x.reshape(x.shape[0], math.prod(x.shape[1:]))


def _positions(length: int, device: torch.device) -> torch.Tensor:
    """C * j mod P for each position j of a sample of `length` elements (int64)."""
    return torch.arange(length, dtype=torch.int64, device=device).mul_(st.C).remainder_(st.P)


def _row_fingerprints(x: torch.Tensor) -> torch.Tensor:
    """`sample_fingerprints`: per sample, the hash of its elements and their positions."""
    rows = _rows(x)
    per = max(1, HASH_CHUNK // max(1, rows.shape[1]))
    pos = _positions(rows.shape[1], x.device)
    parts = [
        _mixed(rows[i : i + per].reshape(-1), pos).reshape(-1, rows.shape[1]).sum(dim=1).remainder_(st.P)
        for i in range(0, rows.shape[0], per)
    ]
    return torch.cat(parts)


def _class_ids(c: _ClassRequest) -> tuple[torch.Tensor | None, torch.Tensor | None, int | None]:
    """Device twin of `statistics.class_ids`: flat label and predicted ids, number of classes."""
    labels, preds = c.labels, c.predictions
    n_classes = c.classes
    y = p = None
    if preds is not None:
        if not preds.dtype.is_floating_point:
            p = preds.reshape(-1).long()
        else:
            ax = st.class_axis(
                tuple(preds.shape), None if labels is None else tuple(labels.shape), c.class_axis
            )
            if ax is not None:
                p = preds.argmax(dim=ax).reshape(-1)
                n_classes = n_classes if n_classes is not None else preds.shape[ax]
            else:
                scores = preds.reshape(-1)
                finite = torch.isfinite(scores)
                low = torch.where(finite, scores, math.inf).amin() if scores.numel() else None
                high = torch.where(finite, scores, -math.inf).amax() if scores.numel() else None
                if low is None or high is None:
                    p = scores.long()
                else:
                    probabilities = finite.any() & (low >= 0) & (high <= 1)
                    threshold = torch.where(probabilities, 0.5, 0.0)
                    p = (scores > threshold).long()
                n_classes = n_classes if n_classes is not None else 2
    if labels is not None:
        ax = None
        if preds is not None and labels.dtype.is_floating_point and labels.shape == preds.shape:
            ax = st.class_axis(tuple(labels.shape), None, c.class_axis)
        if ax is not None:
            y = labels.argmax(dim=ax).reshape(-1)
        elif labels.dtype.is_floating_point:
            v = labels.reshape(-1).to(torch.float64)
            ok = torch.isfinite(v) & (v == torch.floor(v)) & (v.abs() < 2.0**62)
            y = torch.where(ok, torch.where(ok, v, 0).long(), -1)
        else:
            y = labels.reshape(-1).long()
    if n_classes is None:  # integer ids everywhere: the largest id seen (waits for a GPU once)
        seen = [a.max() for a in (y, p) if a is not None and a.numel()]
        n_classes = max(int(torch.stack(seen).max()) + 1, 1) if seen else None
    return y, p, n_classes


def confusion_grid(
    labels: torch.Tensor, predictions: torch.Tensor, class_axis: int | None = None
) -> torch.Tensor | None:
    """One step's confusion matrix (C, C) of labels and predictions (argmax of scores along
    their class axis; binary scores at 0.5 or 0), int64 where they live, with no wait for the
    device; None for integer predictions (their number of classes would need one), more than
    `statistics.MAX_CONFUSION_CLASSES` classes, or shapes that do not pair."""
    if not predictions.dtype.is_floating_point or labels.device != predictions.device:
        return None
    ax = st.class_axis(tuple(predictions.shape), tuple(labels.shape), class_axis)
    if ax is not None and predictions.shape[ax] > st.MAX_CONFUSION_CLASSES:
        return None  # a language model's vocabulary: no argmax over it at every step
    c = _ClassRequest(None, labels.detach(), None, predictions.detach(), None, class_axis)
    with torch.no_grad():
        y, p, n = _class_ids(c)
        if y is None or p is None or n is None or n > st.MAX_CONFUSION_CLASSES or y.numel() != p.numel():
            return None
        ok = (y >= 0) & (y < n) & (p >= 0) & (p < n)
        cells = torch.where(ok, y * n + p, n * n)
        grid = torch.zeros(n * n + 1, dtype=torch.int64, device=y.device)
        grid.scatter_add_(0, cells, torch.ones_like(cells))
        return grid[:-1].reshape(n, n)


def _bucket_counts(ids: torch.Tensor, n_classes: int, weights: torch.Tensor | None = None) -> torch.Tensor:
    """Counts per id in [0, C), the rest in bucket C: a fixed shape, so no sync."""
    bucket = torch.where((ids >= 0) & (ids < n_classes), ids, n_classes)
    counts = torch.zeros(n_classes + 1, dtype=torch.int64, device=ids.device)
    return counts.scatter_add_(0, bucket, torch.ones_like(bucket) if weights is None else weights)


# shipping the results --------------------------------------------------------------------------
_NUMPY = {"I32": np.int32, "F64": np.float64}


class _Results:
    """What one device computed: device tensors to ship in one copy, and values known on the
    host. A scalar is `fn` of some device values, each found as (block, index): a block is a
    1-D tensor (a multi-tensor kernel's stacked outputs, a vector) or, keyed by dtype, the
    stack of the loose 0-d results of that dtype."""

    def __init__(self, device: torch.device, read_now: bool = False):
        """`read_now`: a scalar's parts are read at once (the CPU, where reading waits for
        nothing: one `tolist()` of each part instead of stacking hundreds of 0-d tensors)."""
        self.device = device
        self.read_now = read_now
        self.loose: dict[torch.dtype, list[torch.Tensor]] = {}
        self.blocks: list[torch.Tensor] = []
        self.scalars: list[tuple[str, str, list[tuple[Any, int]], Fn | None, float]] = []
        self.vectors: list[tuple[str, str, int, tuple[int, ...], str]] = []
        self.host: Results = {}

    def known(self, name: str, key: str, value: Value) -> None:
        self.host.setdefault(name, {})[key] = value

    def scalar(
        self, name: str, key: str, parts: Sequence[torch.Tensor], fn: Fn | None = None, scale: float = 1.0
    ) -> None:
        """A scalar the host computes from 0-d device tensors `parts`: `fn(values)`, or without
        `fn` the one value times `scale`."""
        if self.read_now:
            values = [t.item() for t in parts]
            self.host.setdefault(name, {})[key] = float(fn(values) if fn is not None else values[0] * scale)
            return
        where = []
        for t in parts:
            bucket = self.loose.setdefault(t.dtype, [])
            where.append((t.dtype, len(bucket)))
            bucket.append(t if t.dim() == 0 else t.reshape(()))
        self.scalars.append((name, key, where, fn, scale))

    def block(self, values: torch.Tensor, entries: Iterable[tuple[str, str, int, float]]) -> None:
        """Scalars that are elements of one 1-D device tensor: (name, key, index, scale)."""
        b = len(self.blocks)
        self.blocks.append(values)
        self.scalars.extend((name, key, [(b, i)], None, scale) for name, key, i, scale in entries)

    def vector(self, name: str, key: str, value: torch.Tensor, dtype: str) -> None:
        self.vectors.append((name, key, len(self.blocks), tuple(value.shape), dtype))
        self.blocks.append(value.reshape(-1))

    def ship(self, pool: _PinnedPool) -> _Shipment:
        """Everything into one float64 tensor, one copy to pinned host memory, one event."""
        by_dtype: dict[torch.dtype, list[tuple[Any, torch.Tensor]]] = {}
        for dt, parts in self.loose.items():
            by_dtype.setdefault(dt, []).append((dt, torch.stack(parts)))
        for b, values in enumerate(self.blocks):
            by_dtype.setdefault(values.dtype, []).append((b, values))
        base: dict[Any, int] = {}
        pieces: list[torch.Tensor] = []
        offset = 0
        for items in by_dtype.values():
            for where, values in items:
                base[where] = offset
                offset += values.numel()
            joined = torch.cat([v for _, v in items]) if len(items) > 1 else items[0][1]
            pieces.append(joined.to(torch.float64))
        scalars = [(n, k, [base[b] + i for b, i in where], fn, sc) for n, k, where, fn, sc in self.scalars]
        vectors = [(name, key, base[b], shape, dtype) for name, key, b, shape, dtype in self.vectors]
        if not pieces:
            return _Shipment(None, 0, None, None, scalars, vectors, self.host)
        flat = torch.cat(pieces) if len(pieces) > 1 else pieces[0]
        if self.device.type != "cuda":
            return _Shipment(flat, offset, None, None, scalars, vectors, self.host)
        host = pool.take(offset)
        with torch.cuda.device(self.device):
            host[:offset].copy_(flat, non_blocking=True)
            event = torch.cuda.Event()
            event.record()
        return _Shipment(host, offset, event, pool, scalars, vectors, self.host)


@dataclass
class _Shipment:
    buffer: torch.Tensor | None
    size: int
    event: Any  # torch.cuda.Event | None
    pool: _PinnedPool | None
    scalars: list[tuple[str, str, list[int], Fn | None, float]]
    vectors: list[tuple[str, str, int, tuple[int, ...], str]]
    host: Results

    def read(self) -> Results:
        out: Results = {name: dict(values) for name, values in self.host.items()}
        if self.buffer is None:
            return out
        if self.event is not None:
            self.event.synchronize()
        values = self.buffer[: self.size].numpy().copy()
        if self.pool is not None:
            self.pool.give(self.buffer)
        numbers = values.tolist()
        for name, key, where, fn, scale in self.scalars:
            v = fn([numbers[i] for i in where]) if fn is not None else numbers[where[0]] * scale
            out.setdefault(name, {})[key] = float(v)
        for name, key, start, shape, dtype in self.vectors:
            size = math.prod(shape)
            out.setdefault(name, {})[key] = values[start : start + size].reshape(shape).astype(_NUMPY[dtype])
        return out


class PendingStatistics:
    """The statistics of one `finish()`, ready once the device has computed them. Calling it
    waits for that (a CUDA event, not the whole device) and returns {name: {key: value}}."""

    def __init__(self, shipments: list[_Shipment]):
        self._shipments = shipments
        self._result: Results | None = None
        self._lock = threading.Lock()

    def __call__(self) -> Results:
        with self._lock:
            if self._result is None:
                result: Results = {}
                for s in self._shipments:
                    for name, values in s.read().items():
                        result.setdefault(name, {}).update(values)
                self._result, self._shipments = result, []
            return self._result


class _PinnedPool:
    """Reusable pinned host buffers for the device-to-host copies: a buffer goes back to the
    pool once its values are read, so a step never overwrites values not yet read."""

    def __init__(self) -> None:
        self._free: list[torch.Tensor] = []
        self._lock = threading.Lock()

    def take(self, size: int) -> torch.Tensor:
        with self._lock:
            for i, buf in enumerate(self._free):
                if buf.numel() >= size:
                    return self._free.pop(i)
        capacity = 1 << max(10, (size - 1).bit_length())
        return torch.empty(capacity, dtype=torch.float64, pin_memory=True)

    def give(self, buf: torch.Tensor) -> None:
        with self._lock:
            if len(self._free) < 8:
                self._free.append(buf)
