"""The Recorder: step and mode bookkeeping, what to save, and the hand-over to the writer.

Framework adapters call `start_step(mode)`, `plan(name, collections)`, `save(...)` and
`end_step()`; they never decide policy themselves. Everything here sees NumPy and names.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mldbg.config import CollectionConfig, Mode, ReductionConfig, SaveConfig
from mldbg.errors import InvalidConfig, StoreFull, TrainingStopped
from mldbg.record.collections import Collections
from mldbg.record.end import StepsEnd
from mldbg.record.stop import StopRequests
from mldbg.record.validation import check_name, check_out_dir
from mldbg.record.writer import Pending, PendingStatistics, StatisticsValues, TensorInfo, Writer
from mldbg.store import Store, layout, markers, open_store, process
from mldbg.store.claim import claim
from mldbg.store.markers import End, WorkerMeta
from mldbg.store.statistics import STATS_PREFIX

log = logging.getLogger("mldbg")

STOP_CHECK_SECONDS = 0.1  # on a local store: a stop lands at most this long (and a step) late


@dataclass(frozen=True)
class Plan:
    """How one tensor is saved at this step."""

    raw: bool
    reductions: tuple[tuple[str, bool], ...]
    collections: tuple[str, ...]


class Recorder:
    """Records one worker's tensors into a store.

    A step is opened with `start_step(mode)` and closed with `end_step()`; global steps count
    across modes and each mode has its own `mode_step`. Tensors saved during a step are
    handed to the writer as one batch when the step ends. Whoever makes a Recorder closes it
    (a hook does, also at interpreter exit).
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str],
        *,
        save_config: SaveConfig | None = None,
        include_collections: Sequence[str] | None = None,
        include_regex: Sequence[str] | str | None = None,
        reduction_config: ReductionConfig | None = None,
        save_all: bool = False,
        collection_configs: Iterable[CollectionConfig] | None = None,
        include_workers: str = "one",
        rank: int = 0,
        world_size: int = 1,
        framework: str = "",
        extra_collections: Sequence[str] = (),
        flush_seconds: float = 0.5,
        max_queue_bytes: int = 512 << 20,
        when_full: str = "block",
        block_seconds: float = 60.0,
        stop_check_seconds: float | None = None,
        statistics: bool = False,
        overwrite: bool = False,
        resume: bool = False,
    ):
        """`store`: what the records go into; a path or URL is opened with the store's defaults
        (a hook opens the store itself, with its S3 options, and hands it over).

        `statistics`: the adapter records the statistics of `mldbg.store.statistics.DEFAULTS`
        every step (`save_statistics`); the loss (`losses`) and the scalars the user saves
        (`scalars`: a loss scale, a learning rate) are then saved every step too, unless a
        `CollectionConfig` gives them a schedule. Raw tensors keep to `save_config`.

        A run already in this worker's place is refused (`InvalidConfig`), unless `overwrite`
        (remove it first) or `resume` (continue its global and mode steps after the last one
        it recorded; its end marker is removed until this run closes): `mldbg.store.claim`."""
        if include_workers not in ("one", "all"):
            raise InvalidConfig(f"include_workers must be 'one' or 'all', got {include_workers!r}")
        self.save_config = save_config or SaveConfig()
        self.reduction_config = reduction_config
        self.collections = Collections(
            include_collections, include_regex, save_all, collection_configs, extra_collections
        )
        self.statistics = statistics
        for one_number in ("losses", "scalars"):  # one number a step: the rules see them all
            found = self.collections.all[one_number]
            if statistics and found.save_config is None:
                found.save_config = SaveConfig(save_interval=1)
        self.rank = rank
        self.worker = f"worker_{rank}"
        self.enabled = include_workers == "all" or rank == 0
        check_out_dir(store)
        self.store = open_store(store)
        self.mode = Mode.GLOBAL
        self.step = 0  # the global step of the open (or next) step
        self.mode_steps: dict[Mode, int] = {m: 0 for m in Mode}
        self.in_step = False
        self.saving = False  # does anything save at the open step?
        self._batch: dict[str, Pending] = {}
        # plan() answers for the tensors of a step, kept while the active collections stay the same
        self._plans: dict[tuple[str, tuple[str, ...]], Plan | None] = {}
        self._plans_for: frozenset[str] | None = None
        self._groups: dict[int, bool] = {}  # saves_any() by the id of the adapter's tuple
        self._statistics: list[PendingStatistics] = []
        self._infos: dict[tuple[str, tuple[str, tuple[int, ...], tuple[str, ...]]], TensorInfo] = {}
        # called when a step is about to end, while it is still open (an adapter hands over its
        # statistics there, for the steps that end without a framework event of their own)
        self.before_step_end: list[Callable[[], None]] = []
        self._early: list[tuple[str, np.ndarray, tuple[str, ...]]] = []
        self._last: tuple[int, Mode, int] | None = None  # (step, mode, mode_step) last ended
        self._closed = False
        self._warned_unmatched = False
        # a stop request is looked for at a step end at most every 0.1 s on a local disk (one
        # `stat()`, ~30-50 us: ~0.15% of a 26 ms step if done at every step), every half second
        # on a remote store; 0: at every step end
        if stop_check_seconds is None:
            stop_check_seconds = 0.5 if self.store.remote else STOP_CHECK_SECONDS
        self._stops = StopRequests(self.store, rank, world_size, stop_check_seconds, started=time.time())
        self.stopped = False
        self.writer: Writer | None = None
        self._holding: int | None = None  # meta.json kept open: proves to a stopper which process we are
        # the start markers (meta.json written, an old END removed), bounded by block_seconds
        self._markers_lock = threading.Lock()
        self._markers_thread: threading.Thread | None = None
        self._markers_done = False
        self._end: End | None = None  # the END close() wrote, rewritten if a late start removed it
        if self.enabled:
            where = claim(
                self.store, self.worker, rank=rank, world_size=world_size,
                include_workers=include_workers, overwrite=overwrite, resume=resume,
            )  # fmt: skip
            if where is not None:  # a restarted job: its steps go on
                self.step = where.step
                for code, mode_step in where.mode_steps.items():
                    self.mode_steps[Mode(code)] = mode_step
            self.writer = Writer(
                self.store,
                self.worker,
                flush_seconds=flush_seconds,
                max_queue_bytes=max_queue_bytes,
                when_full=when_full,
                block_seconds=block_seconds,
            )
            meta = WorkerMeta(
                worker=self.worker,
                rank=rank,
                world_size=world_size,
                expected_workers=world_size if include_workers == "all" else 1,
                framework=framework,
                host=socket.gethostname(),
                pid=os.getpid(),
                started=time.time(),
                process=process.identity(os.getpid()) or "",
            )
            self._start_markers(meta, block_seconds)

    # steps ------------------------------------------------------------------------------
    def start_step(self, mode: Mode = Mode.TRAIN, mode_step: int | None = None) -> bool:
        """Open a step in `mode`; True when anything is saved at it.

        `mode_step` sets the mode's step count, for frameworks whose loop numbers its own
        steps (JAX); by default it counts on from the last step of that mode.
        """
        if self.in_step:
            self.end_step()
        if mode_step is not None:
            self.mode_steps[mode] = int(mode_step)
        self.mode = mode
        self.in_step = True
        self.saving = self.enabled and self.collections.update_active(
            self.save_config, mode, self.mode_steps[mode]
        )
        if self._early:
            early, self._early = self._early, []
            for name, array, collections in early:
                self._save_user(name, array, collections)
        return self.saving

    def end_step(self) -> None:
        """Close the open step: its records go to the writer; a stop request raises here."""
        if not self.in_step:
            return
        for callback in self.before_step_end:
            callback()
        self.in_step = False
        if self._batch or self._statistics:
            self._submit()
        if not self._warned_unmatched and self.saving:
            self._warned_unmatched = True
            self.collections.warn_unmatched()
        self._last = (self.step, self.mode, self.mode_steps[self.mode])
        self.step += 1
        self.mode_steps[self.mode] += 1
        self.saving = False
        self._check_stop()

    @property
    def mode_step(self) -> int:
        return self.mode_steps[self.mode]

    # saving -----------------------------------------------------------------------------
    def include_every_step(self, name: str) -> None:
        """Save collection `name` at every step from now on, where the hook chose the
        collections (statistics mode without `include_collections`): a few numbers a step
        an adapter found for the rules (a mixture of experts' tokens per expert, `router`)."""
        if self.statistics and self.collections.defaults:
            self.collections.include(name, SaveConfig(save_interval=1))

    def plan(self, name: str, natural: tuple[str, ...]) -> Plan | None:
        """Is tensor `name` (of the natural collections `natural`) saved now, and how?"""
        if not self.saving:
            return None
        active = self.collections.active
        if active is not self._plans_for:  # a new step's schedule: plans hold while it is the same
            if active != self._plans_for:
                self._plans.clear()
                self._groups.clear()
            self._plans_for = active
        key = (name, natural)
        if key in self._plans:
            return self._plans[key]
        plan = self._plans[key] = self._make_plan(name, natural, active)
        return plan

    def saves_any(self, tensors: tuple[tuple[str, tuple[str, ...]], ...]) -> bool:
        """Does any of `tensors` ((name, natural collections), a tuple the adapter keeps, such
        as a model's parameters) save at the open step? Answered once per schedule, so an
        adapter skips its loop over them on the many steps that save only the loss."""
        if not self.saving:
            return False
        if self.collections.active is self._plans_for and id(tensors) in self._groups:
            return self._groups[id(tensors)]
        found = any(self.plan(name, natural) is not None for name, natural in tensors)
        self._groups[id(tensors)] = found
        return found

    def _make_plan(self, name: str, natural: tuple[str, ...], active: frozenset[str]) -> Plan | None:
        check_name(name)  # once per name and schedule: plans are kept
        members = self.collections.members(name, natural)
        for c in members:  # collection names are printed and stored like tensor names
            check_name(c.name, "collection")
        reduction: ReductionConfig | None = None
        saved = False
        for c in members:
            if c.name in active:
                saved = True
                reduction = reduction or c.reduction_config
        if not saved:
            return None
        reduction = reduction or self.reduction_config
        if reduction is None:
            return Plan(True, (), tuple(c.name for c in members))
        return Plan(reduction.save_raw_tensor, reduction.requested, tuple(c.name for c in members))

    def has(self, name: str) -> bool:
        """Was `name` already saved in the open step?"""
        return name in self._batch

    def save(self, name: str, source: Any, plan: Plan, nbytes: int | None = None) -> None:
        """Hand over a host copy (an ndarray, or a callable giving (ndarray, dtype name))."""
        if nbytes is None:
            nbytes = int(getattr(source, "nbytes", 0))
        self._batch[name] = Pending(
            name, self.step, int(self.mode), self.mode_step, source, nbytes,
            plan.raw, plan.reductions, plan.collections,
        )  # fmt: skip

    def save_statistics(
        self,
        values: Callable[[], StatisticsValues],
        tensors: Mapping[str, tuple[str, tuple[int, ...], tuple[str, ...]]],
        nbytes: int,
    ) -> None:
        """Hand over the statistics of the open step: `values()` gives {tensor: {key: value}}
        later, on the writer thread (a device copy in flight); `tensors` says of each tensor
        its dtype (safetensors name), shape and natural collections, for the record of a tensor
        known only by its statistics; `nbytes` is about what the values take in memory.

        Scalar statistics land on the step's record of their tensor (one record per tensor,
        step and worker); vector statistics become records `stats/<tensor>/<key>`."""
        if not self.enabled or self._closed or not self.in_step:
            return
        infos = {}
        for name, described in tensors.items():
            info = self._infos.get((name, described))
            if info is None:  # the same tensors come back every step: made once
                dtype, shape, natural = described
                members = tuple(c.name for c in self.collections.members(name, natural))
                info = self._infos[(name, described)] = TensorInfo(dtype, tuple(shape), members)
            infos[name] = info
        self._statistics.append(
            PendingStatistics(self.step, int(self.mode), self.mode_step, values, infos, nbytes)
        )

    def save_scalar(self, name: str, value: float, collections: tuple[str, ...] = ("scalars",)) -> None:
        """Save a Python number at the open step, or at the last step when none is open."""
        self.save_tensor(name, np.asarray(value, dtype=np.float64), collections)

    def save_tensor(self, name: str, value: Any, collections: tuple[str, ...] = ()) -> None:
        """Save a user's value at the open step (or the one that just ended, or the first).

        It follows the schedule of its collections, or the hook's own `save_config` when none
        of them is included: asking for a tensor by name is asking for it to be saved.
        """
        if not self.enabled or self._closed:
            return
        check_name(name)
        for c in collections:
            check_name(c, "collection")
        if name.startswith(STATS_PREFIX):
            raise InvalidConfig(
                f"tensor name {name!r}: names beginning with {STATS_PREFIX!r} hold statistics; rename it"
            )
        array = np.array(value, copy=True)
        if self.in_step:
            self._save_user(name, array, collections)
        elif self._last is None:
            self._early.append((name, array, collections))  # saved with the first step
        else:
            step, mode, mode_step = self._last
            now = (self.step, self.mode, self.mode_steps[mode], self.saving)
            self.step, self.mode, self.mode_steps[mode] = step, mode, mode_step
            self.saving = self.collections.update_active(self.save_config, mode, mode_step)
            try:
                self._save_user(name, array, collections)
                self._submit()
            finally:
                self.step, self.mode, self.mode_steps[mode], self.saving = now

    def _save_user(self, name: str, array: np.ndarray, collections: tuple[str, ...]) -> None:
        plan = self.plan(name, tuple(collections))
        if plan is None and self.enabled and self.save_config.should_save(self.mode, self.mode_step):
            members = self.collections.members(name, tuple(collections))
            plan = Plan(True, (), tuple(c.name for c in members))
        if plan is not None:
            self.save(name, array, plan)

    def _submit(self) -> None:
        batch: list[Pending | PendingStatistics] = [*self._batch.values(), *self._statistics]
        self._batch, self._statistics = {}, []
        if self.writer is not None:
            self.writer.submit(batch)

    # stop requests and closing ----------------------------------------------------------
    def _check_stop(self) -> None:
        reason = self._stops.check(self.step - 1)
        if reason is not None:
            self.stopped = True
            self.close()
            raise TrainingStopped(f"mldbg stopped the training at step {self.step - 1}: {reason}")

    def flush(self) -> None:
        if self._batch or self._statistics:
            self._submit()
        if self.writer is not None:
            self.writer.flush()

    def _start_markers(self, meta: WorkerMeta, within: float) -> None:
        """Write `meta.json`, keep it open (the proof of which process records), remove an END
        left by the run this one resumes, and clear stale stop requests, in a thread bounded by
        `within` (block_seconds): a store that does not answer (a hung mount) holds the hook's
        construction that long at most, with one line; the markers are written when the store
        answers. An error of the store within the bound is raised, as before."""
        failed: list[Exception] = []
        waiting = [True]  # the constructor still waits for the thread

        def write() -> None:
            holding = None
            try:
                markers.save(self.store, layout.meta_key(self.worker), meta)
                holding = process.hold(self.store, layout.meta_key(self.worker))
                self.store.delete(layout.end_key(self.worker))
            except StoreFull as e:  # a bucket away and no room to buffer: the store said so
                log.error("mldbg: %s", e)
            except Exception as e:  # raised by the constructor if it still waits, else said
                with self._markers_lock:
                    if waiting[0]:
                        failed.append(e)
                    else:
                        log.error(
                            "mldbg: cannot write %s to %s: %s",
                            layout.meta_key(self.worker),
                            self.store.url,
                            e,
                        )
            try:
                self._stops.clear_stale()
            except Exception as e:  # pragma: no cover - clear_stale catches the store's errors
                log.debug("mldbg: stale stop requests not cleared: %s", e)
            with self._markers_lock:
                self._markers_done = True
                late_end = self._end if self._closed else None
                if self._closed:
                    process.release(holding)
                else:
                    self._holding = holding
            if late_end is not None and not failed:  # close() wrote END before the removal above
                try:
                    markers.save(self.store, layout.end_key(self.worker), late_end)
                except Exception as e:
                    log.error("mldbg: cannot write the end marker of %s: %s", self.store.url, e)

        thread = threading.Thread(target=write, name="mldbg-start-markers", daemon=True)
        self._markers_thread = thread
        thread.start()
        thread.join(within)
        with self._markers_lock:
            waiting[0] = False
        if thread.is_alive():
            log.warning(
                "mldbg: the store %s did not answer within %gs (block_seconds) writing %s (a hung "
                "network file system or bucket?): training goes on; it is written when the store answers",
                self.store.url, within, layout.meta_key(self.worker),
            )  # fmt: skip
        elif failed:
            raise failed[0]

    def _save_end(self, end: End, within: float) -> None:
        """Write the END marker; a store that does not answer in `within` seconds (a hung
        mount) is given up on with one line rather than holding the training's exit."""
        failed: list[str] = []

        def save() -> None:
            try:
                markers.save(self.store, layout.end_key(self.worker), end)
            except Exception as e:
                failed.append(str(e))

        writing = threading.Thread(target=save, name="mldbg-end-marker", daemon=True)
        writing.start()
        writing.join(within)
        if writing.is_alive():
            failed.append(f"the store did not answer within {within:g}s (block_seconds)")
        if failed:
            log.error("mldbg: cannot write the end marker of %s: %s", self.store.url, failed[0])

    def close(self) -> None:
        """Write everything, then the end marker. Safe to call twice."""
        if self._closed:
            return
        last = self.step if self.in_step else self.step - 1  # an open step was recorded too
        begun = {m: n + (self.in_step and m == self.mode) for m, n in self.mode_steps.items()}
        if self.in_step:
            for callback in self.before_step_end:
                callback()
        self.in_step = False
        if self._batch or self._statistics:
            self._submit()
        self._closed = True
        if self.writer is not None:
            self.writer.close()
            lost = self.writer.lost
            end = StepsEnd(
                mode_steps={m.name.lower(): n for m, n in begun.items() if n and m != Mode.GLOBAL},
                last_step=last,
                ended=time.time(),
                stopped=self.stopped,
                lost_records=lost.records,
                lost_steps=lost.steps,
                first_lost_step=lost.first_step,
                last_lost_step=lost.last_step,
                last_segment=self.writer.last_segment,
            )
            with self._markers_lock:  # a start still hanging rewrites END after its removal
                self._end = end
            self._save_end(end, self.writer.block_seconds)
            with self._markers_lock:
                process.release(self._holding)
                self._holding = None
            self.store.close()  # a remote store uploads what it buffered (S3Store spill queue)
