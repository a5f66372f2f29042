"""JAX adapter: `mldbg.jax.Hook`, one call per step for pytrees (Flax, Optax, plain JAX).

    hook = mldbg.jax.Hook(out_dir)
    hook.record(step, params=params, grads=grads, loss=loss)   # in the loop, or inside jax.jit

Each `record` call is one step; `step` is the step count of `mode` (the schedule of
`SaveConfig` applies to it) and the global step counts calls. Names come from pytree paths
(`jax_names`). Outside `jax.jit` nothing is converted on steps that save nothing. Inside
`jax.jit` (any argument traced) the hook asks the host once per step what it needs (an
ordered `io_callback` returning flags) and ships only that, under `lax.switch`.

With the two lines (no `save_config`, no `include_collections`) the hook also records the
statistics the default rules read, computed with `jax.numpy` on the device
(`jax_statistics`): every step of each mode's first `statistics_warmup` steps (20), then
every `statistics_every`-th (10). Outside `jit` the hook runs one jitted function per
statistics step; inside the user's jitted step `mldbg.jax.statistics(...)` computes them and
`hook.record(step, statistics=...)` takes them; `record` inside `jit` computes them in the
branch of its `lax.switch` that statistics steps take.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

from mldbg.config import Mode
from mldbg.frameworks import jax_statistics as jst
from mldbg.frameworks.base import Adapter
from mldbg.frameworks.host import array_source
from mldbg.frameworks.host_statistics import fixed_cadence_settings
from mldbg.frameworks.jax_names import Named, named_tensors, path_name
from mldbg.frameworks.jax_statistics import Statistics, statistics
from mldbg.frameworks.session import Worker
from mldbg.store.format import dtype_name


def host_source(value: Any) -> tuple[Any, int] | None:
    """A host copy of a leaf as a recorder source (JAX buffers may be donated: copy now). A
    0-d device array (the loss of every step) is read on the writer thread instead, after a
    transfer started now: the training thread does not wait for the step to finish."""
    if isinstance(value, jax.Array) and value.ndim == 0 and not isinstance(value, jax.core.Tracer):
        value.copy_to_host_async()
        return functools.partial(_read_later, value), value.dtype.itemsize
    return array_source(np.array(value, copy=True))


def _read_later(value: jax.Array) -> tuple[np.ndarray, str]:
    found = array_source(np.array(value, copy=True))
    if found is None:
        raise TypeError(f"dtype {value.dtype} cannot be stored")
    source = found[0]
    return source() if callable(source) else (source, dtype_name(source))


class Hook(Adapter):
    """Records pytrees of a JAX training loop: `hook.record(step, params=..., grads=..., loss=...)`.

    Besides the keywords of every hook (API.md): `statistics` (None: on for the two lines;
    True: added to any configuration; False: off), `statistics_warmup` (20) and
    `statistics_every` (10): the steps of each mode whose statistics are recorded."""

    def _worker(self) -> Worker:
        return Worker(f"jax-{jax.__version__}", jax.process_index(), jax.process_count())

    def _recording(self) -> dict[str, Any]:
        settings, (self._warmup, self._every) = fixed_cadence_settings(self._settings)
        return settings

    def _setup(self) -> None:
        self._snapshot: dict[str, Any] = {}  # parameters at the last statistics step, on the device

    def statistics_due(self, step: int, mode: Mode | str = Mode.TRAIN) -> bool:
        """Does step `step` of `mode` record statistics? (Every step of the first
        `statistics_warmup`, then every `statistics_every`-th.)"""
        if not (self.recorder.statistics and self.recorder.enabled):
            return False
        step = int(step)
        return step < self._warmup or step % self._every == 0

    def record(
        self,
        step: Any,
        params: Any = None,
        grads: Any = None,
        loss: Any = None,
        *,
        mode: Mode | str = Mode.TRAIN,
        statistics: jst.Statistics | None = None,
        **named: Any,
    ) -> None:
        """Record one step. `params` as used by this step's forward pass, `grads` of the loss.

        Other keywords: `opt_state`, `inputs`, `labels`, `predictions`, `outputs` and
        `relu_activations`/`tanh_activations`/`sigmoid_activations` (dicts by layer name, an
        activation as its output or as `(pre_activation, output)`); any other keyword is saved
        under its own name (scalars in `scalars`, other tensors by `include_regex`/`save_all`).
        `statistics`: what `mldbg.jax.statistics` returned for this step (from your jitted
        step); the hook then computes none of its own.
        """
        mode = Mode.parse(mode)
        traced = isinstance(step, jax.core.Tracer) or any(
            isinstance(leaf, jax.core.Tracer)
            for leaf in jax.tree_util.tree_leaves((params, grads, loss, named, statistics))
        )
        tensors = list(named_tensors(params, grads, loss, named))
        if statistics is not None:  # its loss and scalars, unless handed over here too
            have = {t[0] for t in tensors}
            tensors += [(n, c, statistics.raw[n]) for n, c in statistics.raw_natural if n not in have]
        if traced:
            self._record_traced(step, mode, tensors, statistics)
            return
        saving = self._open(mode, step)
        try:
            if saving:
                self._save(tensors)
            if self.statistics_due(self.recorder.mode_step, mode):
                self._statistics(tensors, mode, statistics)
        finally:
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
        for name, natural, leaf in tensors:
            plan = rec.plan(name, natural)
            if plan is not None and not rec.has(name):
                source = host_source(leaf)
                if source is not None:
                    rec.save(name, source[0], plan, source[1])

    def _statistics(self, tensors: list[Named], mode: Mode, given: jst.Statistics | None) -> None:
        """Compute (or take) this statistics step's values on the device; the host reads them
        on the writer thread (one small transfer, started now)."""
        parts: list[jst.Statistics] = []
        if given is not None:
            parts.append(given)
            if given.params:
                parts.append(jst.deltas(given.params, self._previous(given.params)))
                self._snapshot.update(given.params)
        else:
            entries = [
                jst.Entry(n, c, leaf)
                for n, c, leaf in tensors
                if not jst.one_number(jst.Entry(n, c, leaf)) and hasattr(leaf, "dtype")
            ]
            if not entries:
                return
            spec = tuple((e.name, e.natural) for e in entries)
            previous = {}
            if mode == Mode.TRAIN:
                previous = self._previous({e.name: e.leaf for e in entries if jst.is_param(e)})
            stats, snapshot = jst.eager_statistics([e.leaf for e in entries], previous, spec=spec, mode=mode)
            self._snapshot.update(snapshot)
            parts.append(stats)
        self._hand_over(parts)

    def _previous(self, current: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
        """Each parameter's value at the last statistics step, and whether there is one (where
        there is none, the parameter itself stands in: the same compiled function)."""
        out = {}
        for name, leaf in current.items():
            before = self._snapshot.get(name)
            ok = (
                before is not None
                and before.shape == leaf.shape
                and before.dtype == leaf.dtype
                and not before.is_deleted()  # kept from a `statistics()` outside jit, then donated
            )
            out[name] = (before, np.bool_(True)) if ok else (leaf, np.bool_(False))
        return out

    def _hand_over(self, parts: list[jst.Statistics]) -> None:
        described: dict[str, tuple[str, tuple[int, ...], tuple[str, ...]]] = {}
        for part in parts:
            if hasattr(part.packed, "copy_to_host_async"):
                part.packed.copy_to_host_async()
            for name, dtype, shape, natural in part.layout.tensors:
                if name not in described or not described[name][2]:
                    described[name] = (dtype, shape, natural)
        if not described:
            return
        nbytes = sum(4 * p.layout.words for p in parts)
        self.recorder.save_statistics(functools.partial(jst.merge, parts), described, nbytes)

    def _record_traced(
        self, step: Any, mode: Mode, tensors: list[Named], given: jst.Statistics | None
    ) -> None:
        """Inside `jax.jit`: the host opens the step and says what it needs (one ordered
        `io_callback` returning flags); only that is computed and shipped, under
        `lax.switch`: the one-number values (1), the other tensors of the saved collections
        (2), the packed statistics (4), computed in that branch of the traced step (no
        `delta_l2`: the previous parameters are not in the traced program)."""
        cols = self.recorder.collections
        wanted = [t for t in tensors if any(c.name in cols.included for c in cols.members(t[0], t[1]))]
        small = [t for t in wanted if np.ndim(t[2]) == 0]
        large = [t for t in wanted if np.ndim(t[2]) != 0]
        large_meta = [(n, c) for n, c, _ in large]
        measured = self.recorder.statistics and self.recorder.enabled
        entries = [jst.Entry(*t) for t in tensors if not jst.one_number(jst.Entry(*t))]
        layouts: list[jst.Layout] = [] if given is None else [given.layout]

        def open_host(s: Any) -> np.int32:
            saving = self._open(mode, s)
            flags = 1 if saving else 0
            if saving and any(self.recorder.plan(n, c) is not None for n, c in large_meta):
                flags |= 2
            if measured and self.statistics_due(self.recorder.mode_step, mode):
                flags |= 4
            if not flags:
                self.recorder.end_step()
            return np.int32(flags)

        def host(flags: int) -> Callable[..., None]:
            def run(*values: Any) -> None:
                it = iter(values)
                try:
                    if flags & 1:
                        self._save([(n, c, next(it)) for n, c, _ in small])
                    if flags & 2:
                        self._save([(n, c, next(it)) for n, c, _ in large])
                    if flags & 4:
                        self._hand_over([jst.Statistics(np.asarray(next(it)), layouts[-1], {}, (), {}, mode)])
                finally:
                    self.recorder.end_step()

            return run

        def branch(flags: int) -> Callable[[], None]:
            def run() -> None:
                leaves = []
                if flags & 1:
                    leaves += [jnp.asarray(t[2]) for t in small]
                if flags & 2:
                    leaves += [jnp.asarray(t[2]) for t in large]
                if flags & 4:
                    if given is not None:
                        leaves.append(given.packed)
                    else:  # traced here: computed only on the steps that record them
                        packed, layout = jst.build(entries, mode, None)
                        layouts.append(layout)
                        leaves.append(packed)
                io_callback(host(flags), None, *leaves, ordered=True)

            return run if flags else lambda: None

        flags = io_callback(open_host, jax.ShapeDtypeStruct((), jnp.int32), step, ordered=True)
        jax.lax.switch(flags, [branch(f if measured or f < 4 else 0) for f in range(8)])

    def _release(self) -> None:
        jax.effects_barrier()  # every io_callback of a jitted step has run


__all__ = ["Hook", "Statistics", "named_tensors", "path_name", "statistics"]
