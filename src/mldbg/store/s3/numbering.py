"""Segment numbers, settled once the bucket answers.

A writer asks `next_segment(worker)` as it starts: after that worker's last segment in the bucket
(a resumed job appends). When the bucket does not answer within `block_seconds`, the writer
numbers from 1 anyway, as a *group* (`<worker>.<start>.<id>`) whose segments wait in the spill
queue. Before the first of them is uploaded, the group is *settled*: its numbers move past the
bucket's last segment, and each index is pointed at its data object's new key as it is uploaded
(`format.retarget_index`). So a hook starts while the bucket is away and still never overwrites
an earlier job's segments; a fresh run is simply numbered from 1.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence

from mldbg.errors import StoreError
from mldbg.store import layout
from mldbg.store.base import Buffer
from mldbg.store.format import retarget_index
from mldbg.store.local import LocalStore
from mldbg.store.s3.client import S3Client, byte_views
from mldbg.store.s3.retry import is_transient
from mldbg.store.s3.spill import Entry, SpillQueue

log = logging.getLogger("mldbg")


class SegmentNumbering:
    """The numbers of this process's segments, per worker.

    `queue` is the spill queue (None without one: then nothing is numbered provisionally);
    `local` the `upload_from` copy, whose own segments must not be overwritten either;
    `may_try` says whether a foreground request may reach the bucket now; `forget(key)` drops
    what the store remembers of a key that a renumbered segment takes over.
    """

    def __init__(
        self,
        client: S3Client,
        queue: SpillQueue | None,
        local: LocalStore | None,
        block_seconds: float,
        may_try: Callable[[], bool],
        forget: Callable[[str], None],
    ):
        self.client = client
        self.queue = queue
        self.local = local
        self.block_seconds = block_seconds
        self._may_try = may_try
        self._forget = forget
        self._groups: dict[str, str] = {}  # worker -> its provisional group in this process
        self._shifts: dict[str, int] = {}  # group -> how far its numbers move, once known
        self._lock = threading.Lock()

    def next_segment(self, worker: str) -> int:
        """After `worker`'s last segment in the bucket (or spilled here); provisional when the
        bucket does not answer. Only other errors (no such bucket, access denied) raise."""
        q = self.queue
        if q is not None and any(e.group and worker_of(e.key) == worker for e in q.entries()):
            return self._provisional(worker)  # numbered after those, once they are
        try:
            if not self._may_try():
                raise StoreError(self.client.unreachable())
            return self._last_segment(worker, True, self.block_seconds) + 1
        except Exception as e:
            if q is None or not (isinstance(e, StoreError) or is_transient(e)):
                raise self.client.error("list", layout.index_prefix(worker), e) from e
            return self._provisional(worker)

    def _provisional(self, worker: str) -> int:
        """Number from 1 (with upload_from: after the local copy's last segment); the group's id
        records where they started."""
        start = 1
        if self.local is not None:
            keys = self.local.list(layout.index_prefix(worker))
            start = layout.segment_seq(keys[-1]) + 1 if keys else 1
        self._groups[worker] = f"{worker}.{start}.{uuid.uuid4().hex[:12]}"
        log.debug("mldbg: %s unreachable; numbering %s's segments once it answers", self.client.url, worker)
        return start

    def _last_segment(self, worker: str, fast: bool, seconds: float) -> int:
        """The highest segment number of `worker` in the bucket or numbered in the queue."""
        folder = self.client.folder(layout.index_prefix(worker))

        def last_in_bucket() -> int:
            segments = (layout.parse_segment_key(k) for k in self.client.list_keys(folder, fast=fast))
            return max((seg[2] for seg in segments if seg is not None), default=0)

        last = self.client.retries.call(last_in_bucket, seconds)
        for e in self.queue.entries() if self.queue is not None else ():
            seg = layout.parse_segment_key(e.key)
            if e.op == "put" and e.group is None and seg is not None and seg[0] == worker:
                last = max(last, seg[2])
        return last

    def number(self, k: str, parts: Sequence[Buffer]) -> tuple[str, Sequence[Buffer], str | None]:
        """The final key and bytes of a write, or the group of a segment whose place is still
        unknown (it then waits in the queue, behind its group)."""
        seg = layout.parse_segment_key(k) if self._groups else None
        if seg is None or seg[0] not in self._groups:
            return k, parts, None
        group = self._groups[seg[0]]
        shift = self._shifts.get(group)
        if shift is None and self.queue is not None and not len(self.queue) and self._may_try():
            try:
                shift = self.settle(group, seg[0], True, self.block_seconds)
            except Exception as e:  # still away: it waits in the queue
                self.client.retries.failed(e)
        if shift is None:
            return k, parts, group
        worker, kind, seq = seg
        if not shift:
            return k, parts, None
        final = layout.segment_key(worker, kind, seq + shift)
        if kind == "index":
            blob = b"".join(byte_views(parts))
            parts = [retarget_index(blob, layout.data_key(worker, seq + shift), f"{self.client.url}/{k}")]
        return final, parts, None

    def place(self, entry: Entry) -> None:
        """Before the uploader sends `entry`: settle its group, if it has one."""
        if entry.group is None:
            return
        worker = worker_of(entry.key)
        if worker is None:
            assert self.queue is not None
            self.queue.rekey(entry, entry.key)
        else:
            self.settle(entry.group, worker, False, 0.0)

    def settle(self, group: str, worker: str, fast: bool, seconds: float) -> int:
        """Fix where `group`'s segments go (after the last one in the bucket) and renumber its
        spilled entries. Called before the first of them is uploaded."""
        with self._lock:
            shift = self._shifts.get(group)
            if shift is None:
                shift = max(0, self._last_segment(worker, fast, seconds) + 1 - group_start(group))
                self._shifts[group] = shift
                if shift:
                    log.info(
                        "mldbg: %s already holds segments of %s; the ones recorded while it was "
                        "unreachable are numbered after them (+%d)", self.client.url, worker, shift,
                    )  # fmt: skip
            # oldest first, so that a crash halfway leaves a gap at worst, never the order changed;
            # with upload_from the newest first: a local copy moves onto the name of a later one
            entries = self.queue.entries() if self.queue is not None else []
            for e in reversed(entries) if self.local is not None else entries:
                if e.group == group:
                    self._rekey(e, shift)
            return shift

    def _rekey(self, e: Entry, shift: int) -> None:
        q = self.queue
        assert q is not None
        seg = layout.parse_segment_key(e.key)
        if seg is None or not shift:
            q.rekey(e, e.key)
            return
        worker, kind, seq = seg
        old, final = e.key, layout.segment_key(worker, kind, seq + shift)
        data_key = layout.data_key(worker, seq + shift) if kind == "index" else None
        q.rekey(e, final, data_key)
        self._forget(final)
        if self.local is not None and data_key is not None:  # keep the local copy a valid run
            try:
                blob = (self.local.root / final).read_bytes()
                self.local.write(final, [retarget_index(blob, data_key, f"{self.local.url}/{old}")])
            except Exception as err:
                log.error("mldbg: cannot renumber the local copy %s/%s: %s", self.local.url, final, err)


def group_start(group: str) -> int:
    """The first provisional number of a group `<worker>.<start>.<id>`."""
    parts = group.rsplit(".", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else 1


def worker_of(key: str) -> str | None:
    seg = layout.parse_segment_key(key)
    return seg[0] if seg is not None else None
