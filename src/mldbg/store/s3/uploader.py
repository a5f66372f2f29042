"""The uploader: writes that wait for the bucket, sent in order by a background thread.

While the bucket is unreachable (and always with `upload_from`) the store appends its writes and
deletes to the spill queue (`spill.py`) and returns; this thread replays the queue oldest first,
with backoff while the bucket stays away, so nothing newer reaches the bucket before anything
older. The queue holds at most `spill_max_bytes`: a write past that bound, or one the disk refuses,
is dropped (`StoreFull`), counted and reported, so an outage never fills the disk nor stops
training. The run's small markers (meta.json, END, control/, watch/) are always kept. What is not
uploaded at close stays on disk for the next process writing the run (`SpillQueue` adopts it).
"""

from __future__ import annotations

import atexit
import logging
import random
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import NoReturn

from mldbg.errors import StoreFull
from mldbg.store.base import Buffer
from mldbg.store.format import retarget_index
from mldbg.store.s3.client import S3Client, byte_views
from mldbg.store.s3.options import ENV_SPILL_MAX_MB, S3Options
from mldbg.store.s3.spill import Entry, SpillQueue

log = logging.getLogger("mldbg")
FIRST_DELAY = 0.1


class DroppedWrites:
    """Writes that could not be kept: counted, and warned about at most every `warn_every`
    seconds (then once more at close, with the total)."""

    def __init__(self, warn_every: float):
        self.warn_every = warn_every
        self.count = 0
        self.bytes = 0
        self._last_warning = -1e9
        self._reported = 0  # the count at the last close
        self._lock = threading.Lock()

    def add(self, size: int) -> bool:
        """Count one; True when a warning is due."""
        now = time.monotonic()
        with self._lock:
            self.count += 1
            self.bytes += size
            due = now - self._last_warning >= self.warn_every
            if due:
                self._last_warning = now
            return due

    def unreported(self) -> bool:
        """Were writes dropped since the last call? (for the report at close)"""
        with self._lock:
            new, self._reported = self.count > self._reported, self.count
            return new


class Uploader:
    """The spill queue of one store and the thread that uploads it.

    `mirror`: the queue points at an `upload_from` copy (not an outage: nothing to warn about);
    `place(entry)` is called before each upload (it settles provisional segment numbers).
    """

    def __init__(
        self,
        client: S3Client,
        queue: SpillQueue,
        options: S3Options,
        mirror: bool,
        place: Callable[[Entry], None],
    ):
        self.client = client
        self.queue = queue
        self.mirror = mirror
        self.spill_max_bytes = options.spill_max_bytes
        self.max_backoff = options.max_backoff
        self.close_timeout = options.close_timeout
        self.drops = DroppedWrites(options.drop_warning_seconds)
        self.spilled = 0  # writes and deletes queued because the bucket was away
        self.uploaded = 0
        self._place = place
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._warned = False  # about this outage (again after the queue emptied)
        self._last_progress = 0.0
        self._exit_hook = False

    @property
    def uploading(self) -> bool:
        """The thread runs and has work: it probes the bucket, nobody else needs to."""
        return self._thread is not None and len(self.queue) > 0

    # queueing ----------------------------------------------------------------------------
    def enqueue(
        self, k: str, append: Callable[[SpillQueue], Entry], parts: Sequence[Buffer] | None = None
    ) -> None:
        """Queue one operation (`append` it); drop it (`StoreFull`) past `spill_max_bytes` or
        when the disk refuses. The run's markers are tiny and always kept."""
        q = self.queue
        size = sum(v.nbytes for v in byte_views(parts)) if parts is not None else 0
        if parts is not None and not always_kept(k) and q.bytes + size > self.spill_max_bytes:
            self._drop(
                k, size, f"its spill folder {q.dir or q.run_dir} is at its bound of "
                f"{human_size(self.spill_max_bytes)} ({human_size(q.bytes)} waiting; raise it with "
                f"spill_max_bytes= or {ENV_SPILL_MAX_MB})",
            )  # fmt: skip
        try:
            append(q)
        except OSError as e:
            self._drop(k, size, f"its spill folder {q.dir or q.run_dir} cannot be written ({e})")
        with self._cond:
            if not self.mirror:
                self.spilled += 1
                retries = self.client.retries
                if retries.failing and not self._warned:  # (not when it only waits behind adopted ones)
                    self._warned = True
                    log.warning(
                        "mldbg: %s is unreachable at %s (%s); recording goes on: writes are kept in %s "
                        "(at most %s) and uploaded in order when it answers again",
                        self.client.url, self.client.endpoint_url or "AWS", retries.last_error or "no answer",
                        q.dir, human_size(self.spill_max_bytes),
                    )  # fmt: skip
            self._start()
            self._cond.notify_all()

    def _drop(self, k: str, size: int, why: str) -> NoReturn:
        url = self.client.url
        if self.drops.add(size):
            log.warning(
                "mldbg: %s is unreachable and %s: dropping new writes (%d so far, %s, the last %s). "
                "Writes buffered before stay and are uploaded when it answers; training goes on.",
                url, why, self.drops.count, human_size(self.drops.bytes), k,
            )  # fmt: skip
        raise StoreFull(f"dropped the write of {url}/{k}: {url} is unreachable and {why}")

    def adopt_orphans(self) -> None:
        """Take over what dead processes left spilled for this run: it goes first, and counts
        when segments are numbered."""
        q = self.queue
        if not len(q) and q.orphans():
            with self._cond:
                q.open()
                if len(q):
                    self._start()
                    self._cond.notify_all()

    # the thread --------------------------------------------------------------------------
    def _start(self) -> None:
        """Called holding `_cond`."""
        self._stopping = False
        if not self._exit_hook:
            self._exit_hook = True
            atexit.register(_close_at_exit, weakref.ref(self))
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"mldbg-s3-upload-{self.client.bucket}", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        q = self.queue
        delay = FIRST_DELAY
        while True:
            with self._cond:
                while not len(q) and not self._stopping:
                    self._cond.wait()
                if not len(q):
                    self._thread = None
                    return
            entry = q.head()
            assert entry is not None
            try:
                self._place(entry)
                self._upload(entry)
            except Exception as e:
                self.client.retries.failed(e)
                with self._cond:
                    self._cond.wait(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, self.max_backoff)
                continue
            q.done(entry)
            delay = FIRST_DELAY
            with self._cond:
                was_down = self.client.retries.answered()
                if not len(q):
                    self._warned = False
                self.uploaded += 1
                self._last_progress = time.monotonic()
                if was_down and not self.mirror:
                    log.warning(
                        "mldbg: %s answers again; uploading %d buffered writes", self.client.url, len(q)
                    )
                self._cond.notify_all()

    def _upload(self, e: Entry) -> None:
        if e.op == "delete":
            self.client.delete(e.key, fast=False)
            return
        assert e.path is not None
        try:
            f = open(e.path, "rb")  # noqa: SIM115
        except FileNotFoundError:
            if e.owned:
                log.error(
                    "mldbg: buffered copy of %s/%s is gone (%s); skipped", self.client.url, e.key, e.path
                )
            return  # upload_from: deleted locally since; the queued delete follows
        with f:
            if e.retarget is not None:  # an index renumbered after it was spilled
                self.client.put_bytes(
                    e.key, retarget_index(f.read(), e.retarget, f"{self.client.url}/{e.key}")
                )
            else:
                self.client.put_file(e.key, f)

    # waiting for it ----------------------------------------------------------------------
    def drain(self, timeout: float | None = None) -> bool:
        """Wait until everything queued is in the bucket; False after `timeout` seconds without
        progress. Also picks up what earlier, crashed processes left spilled."""
        q = self.queue
        if not len(q):
            q.open()  # adopts the queues of dead processes
        start = time.monotonic()
        with self._cond:
            while len(q):
                self._start()
                idle = time.monotonic() - max(start, self._last_progress)
                if timeout is not None and idle >= timeout:
                    return False
                self._cond.wait(0.1 if timeout is None else min(0.1, timeout - idle))
        return True

    def close(self) -> None:
        """Report dropped writes, upload what is queued (see `drain`), stop the thread. What
        cannot be uploaded within `close_timeout` stays in the spill folder for a later process."""
        q, url = self.queue, self.client.url
        if self.drops.unreported():
            log.warning(
                "mldbg: %d writes to %s (%s) were dropped while it was unreachable: the spill folder "
                "was full or unwritable", self.drops.count, url, human_size(self.drops.bytes),
            )  # fmt: skip
        if q.dir is None and not len(q):
            return
        if not self.drain(self.close_timeout):
            log.error(
                "mldbg: %d writes to %s are not uploaded yet (%s); they are kept in %s and uploaded "
                "by the next process writing this run, or by S3Store(%r).drain()",
                len(q), url, self.client.retries.last_error, q.dir, url,
            )  # fmt: skip
            return
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(5.0)
        q.close()


def always_kept(key: str) -> bool:
    """The run's small markers: spilled even past `spill_max_bytes`."""
    return key.startswith(("control/", "watch/")) or key.rsplit("/", 1)[-1] in ("meta.json", "END")


def human_size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"


def _close_at_exit(ref: weakref.ref[Uploader]) -> None:
    uploader = ref()
    if uploader is not None:
        try:
            uploader.close()
        except Exception as e:  # at exit, say what happened; never raise
            log.error("mldbg: closing %s at exit failed: %s", uploader.client.url, e)
