"""One run per run directory: an earlier run found where a worker is about to record is
refused, replaced (`overwrite=True`) or continued (`resume=True`).

Several workers of one job write the same run at once, each its own `workers/<worker>/`, so
the check is per worker folder: a worker answers for its own folder, and worker 0 also for
the folders no worker of this job will write (an earlier run with more workers, or with
`include_workers="all"` where this job writes one). Workers of the same job never look at
each other's folders, so the order in which they start does not matter.

A folder a live process is recording is refused whatever the options: removing or continuing
a run that is still being written would mix the two runs. A writer of this host is proven
alive by its `meta.json`, as a stop proves the process it signals (`store.process`). A writer
on another host (a shared disk, a bucket) cannot be proven so; it is taken for alive when its
run has not ended (no END) and new index segments appear while the check watches the folder
for `LIVE_SECONDS` (a few of the default `flush_seconds`: a recording job writes a segment at
least that often while it saves anything). Only a folder with such a run pays that wait.

Replacing removes only what belongs to the run layout (FORMAT.md): a worker's markers and
segments, the profiler's files, the stop request and the watchers' places. Files of the
user's own in the same folder are left alone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from dataclasses import dataclass, field

import numpy as np

from mldbg.errors import CorruptRecord, InvalidConfig, StoreError
from mldbg.store import layout, markers, process
from mldbg.store.base import Store
from mldbg.store.format import decode_index
from mldbg.store.local import TMP_MARK, LocalStore
from mldbg.store.markers import End, WorkerMeta

log = logging.getLogger("mldbg")

LIVE_SECONDS = 1.5  # how long a writer on another host is watched for new segments (3 x flush_seconds)


@dataclass(frozen=True)
class ResumePoint:
    """Where a restarted worker goes on: its next global step and each mode's next step
    (mode codes as in the index: 1 TRAIN, 2 EVAL, 3 PREDICT, 4 GLOBAL)."""

    step: int
    mode_steps: dict[int, int] = field(default_factory=dict)


def claim(
    store: Store,
    worker: str,
    *,
    rank: int = 0,
    world_size: int = 1,
    include_workers: str = "one",
    overwrite: bool = False,
    resume: bool = False,
) -> ResumePoint | None:
    """Make `worker`'s place in `store` ready for a new run: refuse an earlier run (an
    `InvalidConfig` naming the place and the ways out), remove it (`overwrite`) or find
    where it stopped (`resume`; None when there is nothing to continue)."""
    if overwrite and resume:
        raise InvalidConfig(
            "overwrite=True replaces the earlier run, resume=True continues it: pass one of them, not both"
        )
    take_writer_lock(store, worker)
    try:
        return _claim(store, worker, rank, world_size, include_workers, overwrite, resume)
    except BaseException:
        unlock = getattr(store, "unlock_writer", None)
        if unlock is not None:
            unlock(worker)
        raise


def _claim(
    store: Store, worker: str, rank: int, world_size: int, include_workers: str, overwrite: bool, resume: bool
) -> ResumePoint | None:
    try:
        refuse_live(store, [worker], "overwrite=True or resume=True")
        earlier = earlier_workers(
            store, worker, rank=rank, world_size=world_size, include_workers=include_workers
        )
    except StoreError as e:  # a bucket away: training starts anyway (the store warns once)
        log.info("mldbg: cannot look for an earlier run in %s, recording anyway: %s", store.url, e)
        return None
    if not earlier:
        return None
    if overwrite:
        for w in earlier:
            remove_worker(store, w)
        if rank == 0:
            remove_run_files(store)
        return None
    if resume:
        return resume_point(store, worker)
    raise InvalidConfig(
        f"{store.url} already holds a run ({describe(store, earlier)}): record into a new directory, "
        "or pass overwrite=True to replace that run, or resume=True to continue its steps (a restarted job)"
    )


def take_writer_lock(store: Store, worker: str) -> None:
    """Take `worker`'s folder for this process before anything looks at it (a local disk: a
    lock held until the store closes, `LocalStore.lock_writer`; a bucket: a conditional put,
    `S3Store.lock_writer`): two writers starting within a
    few milliseconds (two jobs given one `out_dir`, every rank of a job without
    `torch.distributed`) otherwise both find the folder free and mix or lose each other's
    steps. The second one is refused."""
    lock = getattr(store, "lock_writer", None)
    if lock is None:
        return
    try:
        taken = lock(worker)
    except OSError as e:
        log.info("mldbg: cannot lock %s's folder in %s, recording anyway: %s", worker, store.url, e)
        return
    if not taken:
        # the process recording there, named with its pid and start when it is proven so
        refuse_live(store, [worker], "overwrite=True or resume=True")
        pid = "another process"
        with contextlib.suppress(Exception):  # the holder as its lock names it, when readable
            text = store.read(f".mldbg-lock.{worker}")[:4096].decode()
            holder = json.loads(text) if text.startswith("{") else {"pid": int(text.split()[0])}
            pid = f"pid {int(holder['pid'])} on {holder.get('host') or socket.gethostname()}"
        raise InvalidConfig(
            f"{store.url} is being recorded right now by another process ({pid}, {worker}: it holds the "
            f"lock .mldbg-lock.{worker}): a second run cannot write there, not even with overwrite=True or "
            f"resume=True; stop that process first (mldbg watch {store.url} --stop, or kill the process) or "
            "record into a new directory (each job, and each rank of a job without torch.distributed, its own)"
        )


def live_writer(
    store: Store, worker: str, *, here: str | None = None, window: float = LIVE_SECONDS
) -> WorkerMeta | None:
    """The live process (not this one) still recording `worker`'s folder, or None.

    On this host (`here`, by default this machine's name), proven as a stop action proves the
    process it signals: the pid in `meta.json` is alive with the identity written beside it
    and, on a local disk, holds that very file open. On another host: the worker has not ended
    and writes new index segments within `window` seconds (`growing`). A worker that wrote its
    end marker records no more."""
    if store.exists(layout.end_key(worker)):
        return None
    key = layout.meta_key(worker)
    try:
        meta = markers.load(store, key, WorkerMeta)
    except CorruptRecord:
        return None
    if meta is None or meta.pid is None:
        return None
    if meta.host != (socket.gethostname() if here is None else here):
        return meta if growing(store, worker, window) else None
    if meta.pid == os.getpid():
        return None
    if not process.is_process(meta.pid, meta.process) or process.holds(meta.pid, store, key) is False:
        return None
    return meta


def growing(store: Store, worker: str, window: float) -> bool:
    """Does a new index segment of `worker` appear within `window` seconds? Listed after the
    newest one seen (segment keys sort by number), so a long run costs no more to watch."""
    prefix = layout.index_prefix(worker)
    seen = [k for k in store.list(prefix) if layout.parse_segment_key(k)]
    newest = max(seen, default=None)
    deadline = time.monotonic() + window
    while True:
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        if any(layout.parse_segment_key(k) for k in store.list(prefix, start_after=newest)):
            return True
        if time.monotonic() >= deadline:
            return False


def refuse_live(
    store: Store, workers: list[str], options: str, *, here: str | None = None, window: float = LIVE_SECONDS
) -> None:
    """Raise `InvalidConfig` when a live process records one of `workers` (`live_writer`);
    `options` names the ways to replace or continue a run, which do not help here."""
    host = socket.gethostname() if here is None else here
    for worker in workers:
        meta = live_writer(store, worker, here=host, window=window)
        if meta is None:
            continue
        since = ""
        if meta.started is not None:
            since = f", recording since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(meta.started))}"
        remote = meta.host != host
        seen = f", writing new segments within the last {window:g}s" if remote else ""
        where = f" on {meta.host}" if remote else ""
        raise InvalidConfig(
            f"{store.url} is being recorded right now by another process (pid {meta.pid} on {meta.host}, "
            f"{worker}{since}{seen}): a second run cannot write there, not even with {options}; "
            f"stop that process first (mldbg watch {store.url} --stop, or kill {meta.pid}{where}) or record into a new directory"
        )


def holds_records(store: Store, worker: str) -> bool:
    """Did a run record in `worker`'s folder: a segment, or an end marker after a step? A hook
    that was opened and recorded nothing left nothing to mix with."""
    if store.exists(layout.end_key(worker)):  # a quick probe first: a bucket away fails fast
        try:
            end = markers.load(store, layout.end_key(worker), End)
        except CorruptRecord:
            return True
        if end is not None and end.last_step is not None and end.last_step >= 0:
            return True
    return any(layout.parse_segment_key(k) for k in store.list(layout.index_prefix(worker)))


def earlier_workers(
    store: Store, worker: str, *, rank: int = 0, world_size: int = 1, include_workers: str = "one"
) -> list[str]:
    """The worker folders holding an earlier run that `worker` answers for (see the module
    docstring)."""
    found = [worker] if holds_records(store, worker) else []
    if rank == 0:
        ours = {f"worker_{r}" for r in range(world_size)} if include_workers == "all" else {worker}
        found += [w for w in store.children(layout.WORKERS) if w not in ours and holds_records(store, w)]
    return found


def run_workers(store: Store) -> list[str]:
    """Every worker folder of `store` that holds records: empty when no run is there."""
    return [w for w in store.children(layout.WORKERS) if holds_records(store, w)]


def describe(store: Store, workers: list[str]) -> str:
    """What an earlier run left, in a few words: its workers and how far they got."""
    parts = []
    for w in workers[:4]:
        try:
            end = markers.load(store, layout.end_key(w), End)
        except CorruptRecord:
            end = None
        if end is None:
            parts.append(f"{w}: no end marker, still running or crashed")
        elif end.last_step is None or end.last_step < 0:
            parts.append(f"{w}: finished")
        else:
            parts.append(f"{w}: finished at step {end.last_step}")
    more = f", and {len(workers) - 4} more" if len(workers) > 4 else ""
    return "; ".join(parts) + more


def remove_worker(store: Store, worker: str) -> None:
    """Remove `worker`'s files of the run layout, and its profiler files."""
    for key in store.list(layout.worker_prefix(worker)):
        if layout.is_worker_file(key, worker):
            store.delete(key)
    profiler = f"{layout.PROFILER_WORKERS}{worker}/"
    for key in store.list(profiler):
        store.delete(key)
    _prune(store, layout.worker_prefix(worker))
    _prune(store, profiler)


def remove_run_files(store: Store) -> None:
    """Remove what belongs to the run as a whole: the stop request, the watchers' places and
    the profiler's node samples."""
    store.delete(layout.STOP_REQUEST)
    store.delete(layout.STOP_AT)
    for key in store.list(layout.WATCH):
        if key.endswith(".json"):
            store.delete(key)
    for key in store.list(layout.PROFILER_NODES):
        store.delete(key)
    _prune(store, layout.PROFILER_NODES)


def remove_run(store: Store) -> None:
    """Remove the whole run in `store` (every worker), as `mldbg run --overwrite` does before
    its script starts."""
    for w in store.children(layout.WORKERS):
        remove_worker(store, w)
    remove_run_files(store)


def resume_point(store: Store, worker: str) -> ResumePoint | None:
    """After the last step `worker` recorded (its end marker, or its last index records after
    a crash): where a restarted worker continues. None when it recorded nothing."""
    try:
        end = markers.load(store, layout.end_key(worker), End)
    except CorruptRecord as e:
        log.warning("mldbg: %s; resuming from the recorded steps", e)
        end = None
    last = end.last_step if end is not None else None
    mode_last: dict[int, int] = {}
    for key in store.list(layout.index_prefix(worker)):
        if layout.parse_segment_key(key) is None:
            continue
        try:
            columns = decode_index(store.read(key), f"{store.url}/{key}").columns
        except (CorruptRecord, FileNotFoundError) as e:
            log.warning("mldbg: resuming %s: skipping %s", store.url, e)
            continue
        steps, modes, mode_steps = columns["step"], columns["mode"], columns["mode_step"]
        if not len(steps):
            continue
        last = max(-1 if last is None else last, int(steps.max()))
        for mode in np.unique(modes).tolist():
            top = int(mode_steps[modes == mode].max())
            mode_last[mode] = max(mode_last.get(mode, -1), top)
    if last is None:
        return None
    return ResumePoint(last + 1, {mode: s + 1 for mode, s in mode_last.items()})


def _prune(store: Store, prefix: str) -> None:
    """On a local disk, remove the folders of `prefix` left empty (and the temporary files a
    crashed write left in the segment folders); a folder with a file of the user's stays."""
    if not isinstance(store, LocalStore):
        return
    top = store.root / prefix.rstrip("/")
    if not top.is_dir():
        return
    for dirpath, _dirnames, filenames in os.walk(top, topdown=False):
        if os.path.basename(dirpath) in ("data", "index"):
            for f in filenames:
                if TMP_MARK in f:
                    os.unlink(os.path.join(dirpath, f))
        with contextlib.suppress(OSError):  # not empty: something of the user's stays
            os.rmdir(dirpath)
