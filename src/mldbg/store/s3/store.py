"""`S3Store`: the `Store` interface over a bucket, composed of the parts of this package.

Writing: each write is one whole object (a PUT, or a multipart upload; both atomic: readers see
all or nothing), retried for `block_seconds`; then, or whenever older writes still wait, it goes
to the `Uploader`'s spill queue and `write` returns. Segment numbers the writer took while the
bucket was away are settled by `SegmentNumbering` before they are uploaded.

Reading: `list(prefix, start_after)` is one `ListObjectsV2 StartAfter` (new index files only),
`children` uses the `/` delimiter, single tensors are ranged GETs. Segment files never change
once written, so their bytes are kept in a block cache bounded by `cache_bytes`. This process
reads its own writes while they wait in the spill queue.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from mldbg.errors import StoreError
from mldbg.store import layout
from mldbg.store.base import Buffer, Store, check_key
from mldbg.store.cache import BlockCache
from mldbg.store.local import LOCK_MARK, LocalStore
from mldbg.store.s3.client import S3Client
from mldbg.store.s3.numbering import SegmentNumbering
from mldbg.store.s3.options import S3Options
from mldbg.store.s3.retry import is_transient
from mldbg.store.s3.spill import Entry, SpillQueue, read_entry
from mldbg.store.s3.uploader import Uploader

T = TypeVar("T")
WHOLE = -1  # cache block number of a whole object


class S3Store(Store):
    """A run below `s3://bucket/prefix`, with the settings of `options` (default: `S3Options()`,
    from the environment).

    A write or an existence check waits at most `block_seconds` for an unreachable bucket; then
    writes are spilled to local disk and uploaded later, in order (`spill=False`: they raise
    `StoreError` instead). Past `spill_max_bytes`, or on a disk that refuses them, writes raise
    `StoreFull` (dropped, counted in `dropped`). Reads retry for `retry_seconds`.
    """

    numbers_segments_itself = True
    _lock_lock = threading.Lock()  # the writer's claims (`lock_writer`)

    remote = True  # every request is a round trip: the recorder polls for a stop every 0.5 s

    def __init__(self, url: str, options: S3Options | None = None):
        self.options = options if options is not None else S3Options()
        self.client = S3Client(url, self.options)
        self.url, self.bucket, self.prefix = self.client.url, self.client.bucket, self.client.prefix
        self.cache = BlockCache(self.options.cache_bytes)
        self._misses = Misses(self.options.exists_ttl)
        upload_dir = self.options.upload_dir(self.bucket, self.prefix)
        self._local = LocalStore(upload_dir) if upload_dir is not None else None
        queue = None
        if self.options.spill or self._local is not None:
            queue = SpillQueue(self.options.spill_dir, f"{self.url}@{self.client.endpoint_url or 'aws'}")
        self.numbering = SegmentNumbering(
            self.client, queue, self._local, self.options.block_seconds, self._may_try, self._forget
        )
        self._writer_locks: builtins.list[str] = []  # `lock_writer`: removed by `close`
        self.uploader: Uploader | None = None  # None without a spill folder (spill=False)
        if queue is not None:
            self.uploader = Uploader(
                self.client, queue, self.options, mirror=self._local is not None, place=self.numbering.place
            )

    # statistics ----------------------------------------------------------------------------
    @property
    def requests(self) -> Counter[str]:
        """Requests sent, by S3 operation."""
        return self.client.requests

    @property
    def bytes_sent(self) -> int:
        return self.client.bytes_sent

    @property
    def bytes_received(self) -> int:
        return self.client.bytes_received

    @property
    def spilled(self) -> int:
        """Writes and deletes that went to the spill folder because the bucket was away."""
        return self.uploader.spilled if self.uploader is not None else 0

    @property
    def uploaded(self) -> int:
        return self.uploader.uploaded if self.uploader is not None else 0

    @property
    def dropped(self) -> int:
        """Writes dropped: the spill folder was at its bound or unwritable."""
        return self.uploader.drops.count if self.uploader is not None else 0

    @property
    def dropped_bytes(self) -> int:
        return self.uploader.drops.bytes if self.uploader is not None else 0

    @property
    def pending(self) -> int:
        """Writes and deletes waiting for the bucket."""
        return len(self.uploader.queue) if self.uploader is not None else 0

    @property
    def spill_dir(self) -> Path | None:
        """The directory of this store's spill queue (None while nothing is spilled)."""
        return self.uploader.queue.dir if self.uploader is not None else None

    # writing -------------------------------------------------------------------------------
    def write(self, key: str, parts: Sequence[Buffer]) -> None:
        """Raises `StoreFull` when the write had to be dropped (see the class docstring)."""
        k, parts, group = self.numbering.number(check_key(key), parts)
        self._forget(k)
        uploader = self.uploader
        if (local := self._local) is not None and uploader is not None:  # the local copy first
            local.write(k, parts)
            uploader.enqueue(k, lambda q: q.put_ref(k, local.root / k, group))
            return
        if uploader is not None and (group or len(uploader.queue) or not self._may_try()):
            uploader.enqueue(k, lambda q: q.put(k, parts, group), parts)  # older writes wait: keep the order
            return
        if uploader is None and not self._may_try():
            raise StoreError(f"cannot write {self.url}/{k}: {self.client.unreachable()}")
        try:
            self.client.retries.call(lambda: self.client.put(k, parts), self.options.block_seconds)
        except Exception as e:
            if uploader is not None and is_transient(e):
                uploader.enqueue(k, lambda q: q.put(k, parts), parts)
                return
            raise self.client.error("write", k, e) from e

    def delete(self, key: str) -> None:
        k = check_key(key)
        self._forget(k)
        uploader = self.uploader
        if self._local is not None and uploader is not None:
            self._local.delete(k)
            uploader.enqueue(k, lambda q: q.delete(k))
            return
        if uploader is not None and (len(uploader.queue) or not self._may_try()):
            uploader.enqueue(k, lambda q: q.delete(k))
            return
        if uploader is None and not self._may_try():
            raise StoreError(f"cannot delete {self.url}/{k}: {self.client.unreachable()}")
        try:
            self.client.retries.call(lambda: self.client.delete(k, fast=True), self.options.block_seconds)
        except Exception as e:
            if uploader is not None and is_transient(e):
                uploader.enqueue(k, lambda q: q.delete(k))
                return
            raise self.client.error("delete", k, e) from e

    def next_segment(self, worker: str) -> int:
        """After `worker`'s last segment in the bucket (or spilled here, by this process or a dead
        one). A writer may start while the bucket is away: see `numbering.py`."""
        if self.uploader is not None:
            self.uploader.adopt_orphans()
        return self.numbering.next_segment(worker)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every spilled write is in the bucket; False after `timeout` seconds without
        progress. Also picks up what earlier, crashed processes left spilled."""
        return self.uploader.drain(timeout) if self.uploader is not None else True

    def forget_reads(self) -> None:
        """Drop the cached blocks (see `LocalStore.forget_reads`)."""
        self.cache = BlockCache(self.options.cache_bytes)

    def lock_writer(self, worker: str) -> bool:
        """Claim `worker`'s folder for this process with a conditional put (`If-None-Match: *`)
        of `.mldbg-lock.<worker>` (host, pid, identity, time), removed by `close`: two writers
        starting at once cannot both get it. False when another writer holds it. A claim whose
        holder is proven dead (this host: its pid no longer has the identity written) or that
        is older than `LOCK_STALE_SECONDS` (another host: the live-writer check then decides)
        is taken over. A bucket that is away, or that does not know conditional puts, claims
        nothing: recording goes on as before."""
        from botocore.exceptions import ClientError

        from mldbg.store import process

        k = f"{LOCK_MARK}{check_key(worker)}"
        me = {"host": socket.gethostname(), "pid": os.getpid(), "process": process.identity(os.getpid()) or "",
              "at": time.time()}  # fmt: skip
        body = json.dumps(me).encode()
        if not self._may_try():
            return True
        full = self.client.key(k)
        try:
            self.client.fast.put_object(Bucket=self.bucket, Key=full, Body=body, IfNoneMatch="*")
        except ClientError as e:
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status not in (409, 412) and e.response.get("Error", {}).get("Code") != "PreconditionFailed":
                log.info("mldbg: no writer's claim in %s (%s): recording anyway", self.url, e)
                return True
            try:
                holder = json.loads(self.client.get(k, 0, None))
            except Exception:  # gone meanwhile, or not ours: unreadable proves nothing
                holder = {}
            if not _stale_claim(holder, me):
                return False
            self.client.fast.put_object(Bucket=self.bucket, Key=full, Body=body)  # taken over
        except Exception as e:  # the bucket away: recording goes on, as before
            log.info("mldbg: no writer's claim in %s (%s): recording anyway", self.url, e)
            return True
        with self._lock_lock:
            self._writer_locks.append(k)
        return True

    def unlock_writer(self, worker: str) -> None:
        """Remove the claim `lock_writer` put (a writer that was refused after all)."""
        k = f"{LOCK_MARK}{check_key(worker)}"
        with self._lock_lock:
            if k not in self._writer_locks:
                return
            self._writer_locks.remove(k)
        with contextlib.suppress(Exception):
            self.client.delete(k, fast=True)

    def close(self) -> None:
        """Upload what is spilled (see `drain`), then stop the uploader. What cannot be uploaded
        within `close_timeout` stays in the spill folder for a later process."""
        if self.uploader is not None:
            self.uploader.close()
        with self._lock_lock:
            claims, self._writer_locks = self._writer_locks, []
        for k in claims:
            with contextlib.suppress(Exception):
                self.client.delete(k, fast=True)

    # reading -------------------------------------------------------------------------------
    def read(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        k = check_key(key)
        entry = self._overlay(k)
        if entry is not None:
            return read_entry(entry, f"{self.url}/{k}", start, length)
        if length == 0:
            if not self.exists(k):
                raise FileNotFoundError(f"{self.url}/{k}")
            return b""
        if self.cache.max_bytes <= 0 or not immutable(k):
            return self._get(k, start, length)
        if length is None:  # index files: whole objects
            data = self.cache.get(k, WHOLE)
            if data is None:
                data = self._get(k, 0, None)
                if len(data) <= self.cache.max_bytes // 4:
                    self.cache.put(k, WHOLE, data)
            return data[start:]
        whole = self.cache.get(k, WHOLE, count=False)
        if whole is not None:
            return whole[start : start + length]
        return self._read_blocks(k, start, length)

    def _read_blocks(self, k: str, start: int, length: int) -> bytes:
        """A byte range through the block cache: missing blocks come in one ranged GET."""
        bs = self.options.block_bytes
        first, last = start // bs, (start + length - 1) // bs
        if (last - first + 1) * bs > self.cache.max_bytes // 4:
            return self._get(k, start, length)  # too big to cache
        blocks: list[bytes | None] = [self.cache.get(k, b) for b in range(first, last + 1)]
        missing = [first + i for i, b in enumerate(blocks) if b is None]
        if missing:
            lo, hi = missing[0], missing[-1]
            data = self._get(k, lo * bs, (hi - lo + 1) * bs)
            for b in range(lo, hi + 1):
                chunk = data[(b - lo) * bs : (b - lo + 1) * bs]
                blocks[b - first] = chunk
                self.cache.put(k, b, chunk)
        out = b"".join(b for b in blocks if b is not None)  # a short last block: the object ends
        return out[start - first * bs : start - first * bs + length]

    def _get(self, k: str, start: int, length: int | None) -> bytes:
        return self._reading("read", k, lambda: self.client.get(k, start, length))

    def list(self, prefix: str, start_after: str | None = None) -> builtins.list[str]:
        folder = self.client.folder(prefix)
        keys = set(self._reading("list", prefix, lambda: self.client.list_keys(folder, start_after)))
        keys = {k for k in keys if not k.rsplit("/", 1)[-1].startswith(LOCK_MARK)}  # writers' claims
        for e in self._pending(self.client.relative(folder) if folder else ""):
            if e.op == "delete":
                keys.discard(e.key)
            elif start_after is None or e.key > start_after:
                keys.add(e.key)
        return sorted(keys)

    def children(self, prefix: str) -> builtins.list[str]:
        folder = self.client.folder(prefix)
        names = set(self._reading("list", prefix, lambda: self.client.list_folders(folder)))
        rel_prefix = self.client.relative(folder) if folder else ""
        for e in self._pending(rel_prefix):
            rest = e.key[len(rel_prefix) :]
            if e.op == "put" and "/" in rest:
                names.add(rest.split("/", 1)[0])
        return sorted(n for n in names if n)

    def exists(self, key: str) -> bool:
        """A HEAD bounded by `block_seconds`. The training thread polls the stop request with it
        every 0.1 s, so a miss is remembered (`Misses`): the poll costs one request a second and
        no wait on the network; a stop request is seen within ~`exists_ttl`."""
        k = check_key(key)
        entry = self._overlay(k)
        if entry is not None:
            return entry.op == "put"
        remembered = self._misses.answer(k, self._head_now)
        if remembered is not None:
            return remembered
        found = self._head_now(k)
        if not found:
            self._misses.missed(k)
        return found

    def _head_now(self, k: str) -> bool:
        if not self._may_try():
            raise StoreError(f"cannot check {self.url}/{k}: {self.client.unreachable()}")
        try:
            return self.client.retries.call(lambda: self.client.head(k, fast=True) is not None, 0.0)
        except Exception as e:
            raise self.client.error("check", k, e) from e

    def size(self, key: str) -> int:
        k = check_key(key)
        entry = self._overlay(k)
        if entry is not None:
            return len(read_entry(entry, f"{self.url}/{k}", 0, None))
        head = self._reading("stat", k, lambda: self.client.head(k, fast=False))
        if head is None:
            raise FileNotFoundError(f"{self.url}/{k}")
        return int(head["ContentLength"])

    # helpers -------------------------------------------------------------------------------
    def _may_try(self) -> bool:
        """May a caller's request go to the bucket now? (see `Retries.may_try`)"""
        return self.client.retries.may_try(uploading=self.uploader is not None and self.uploader.uploading)

    def _reading(self, what: str, k: str, fn: Callable[[], T]) -> T:
        if not self._may_try():
            raise StoreError(f"cannot {what} {self.url}/{k}: {self.client.unreachable()}")
        try:
            return self.client.retries.call(fn, self.options.retry_seconds)
        except FileNotFoundError:
            raise
        except Exception as e:
            raise self.client.error(what, k, e) from e

    def _forget(self, k: str) -> None:
        """`k` is about to change: drop its cached bytes and a remembered miss."""
        self.cache.invalidate(k)
        self._misses.forget(k)

    def _overlay(self, k: str) -> Entry | None:
        """This process's newest spilled operation on `k`: it reads its own writes."""
        q = self.uploader.queue if self.uploader is not None else None
        return q.latest(k) if q is not None and len(q) else None

    def _pending(self, rel_prefix: str) -> builtins.list[Entry]:
        q = self.uploader.queue if self.uploader is not None else None
        return list(q.pending(rel_prefix)) if q is not None and len(q) else []


class Misses:
    """Keys a HEAD found missing, and when. For `ttl` seconds a remembered miss is the answer;
    then the same answer again while a background HEAD asks anew."""

    def __init__(self, ttl: float):
        self.ttl = ttl
        self._absent: dict[str, float] = {}  # key -> when a HEAD last found it missing
        self._checking: set[str] = set()  # keys with a background HEAD under way

    def answer(self, k: str, head: Callable[[str], bool]) -> bool | None:
        """False for a remembered miss (re-checked with `head` in the background once it is
        `ttl` old); None when nothing is remembered."""
        missed = self._absent.get(k)
        if missed is None:
            return None
        if time.monotonic() - missed >= self.ttl and k not in self._checking:
            self._checking.add(k)
            threading.Thread(
                target=self._recheck, args=(k, head), name="mldbg-s3-exists", daemon=True
            ).start()
        return False

    def missed(self, k: str) -> None:
        self._absent[k] = time.monotonic()

    def forget(self, k: str) -> None:
        self._absent.pop(k, None)

    def _recheck(self, k: str, head: Callable[[str], bool]) -> None:
        try:
            if head(k):
                self._absent.pop(k, None)
            else:
                self._absent[k] = time.monotonic()
        except Exception:
            self._absent[k] = time.monotonic()  # unreachable: ask again in `ttl`
        finally:
            self._checking.discard(k)


LOCK_STALE_SECONDS = 60.0  # a claim of another host older than this: the live-writer check decides
log = logging.getLogger("mldbg")


def _stale_claim(holder: object, me: dict[str, object]) -> bool:
    """May `me` take over the claim `holder` (its JSON) left? See `S3Store.lock_writer`."""
    from mldbg.store import process

    if not isinstance(holder, dict):
        return True
    pid, at = holder.get("pid"), holder.get("at")
    if holder.get("host") == me["host"] and isinstance(pid, int) and not isinstance(pid, bool):
        if pid == me["pid"]:
            return True  # this process's own claim
        return not process.is_process(
            pid, holder.get("process") if isinstance(holder.get("process"), str) else None
        )
    if not isinstance(at, (int, float)) or isinstance(at, bool):
        return True
    return time.time() - at > LOCK_STALE_SECONDS


def immutable(key: str) -> bool:
    """Segment files (index and data) are written once and never change: safe to cache."""
    return key.startswith(layout.WORKERS) and ("/index/" in key or "/data/" in key)
