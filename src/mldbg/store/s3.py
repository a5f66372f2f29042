"""A run in an S3-compatible bucket (AWS S3, MinIO, SeaweedFS, Ceph, R2 ...), through boto3.

Writing: each write is one whole object (a PUT, or a multipart upload above `multipart_bytes`;
both are atomic: readers see all or nothing). Throttling and network errors are retried
with exponential backoff. When the bucket stays unreachable for `block_seconds`, writes go to
a local spill queue (`mldbg.store.spill`) instead, and a background thread uploads it, in
order, when the bucket answers again: no record is lost and no caller waits longer than that
bound. The spill folder holds at most `spill_max_bytes`; beyond that (or on a full disk) writes
are dropped, counted and reported, so an outage never fills the disk nor stops training.
A writer may start while the bucket is away: `next_segment` then lets it number its segments
provisionally, and they are renumbered after the bucket's last one before any is uploaded.
With `upload_from=DIR` every write lands in DIR first and is uploaded in the background.

Reading: `list(prefix, start_after)` is one `ListObjectsV2 StartAfter` (new index files only),
`children` uses the `/` delimiter, single tensors are ranged GETs. Segment files never change
once written, so their bytes are kept in a block cache bounded by `cache_bytes`.

Configuration comes from the standard AWS chain (environment, ~/.aws/config, profiles, instance
roles); `MLDBG_S3_ENDPOINT` or `endpoint_url=` names a custom endpoint.
"""

from __future__ import annotations

import atexit
import bisect
import builtins
import collections
import io
import logging
import os
import random
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from mldbg.errors import InvalidConfig, StoreError, StoreFull
from mldbg.store import layout
from mldbg.store.base import Buffer, Store, check_key
from mldbg.store.cache import BlockCache
from mldbg.store.format import retarget_index
from mldbg.store.local import LocalStore
from mldbg.store.spill import Entry, SpillQueue, default_root

log = logging.getLogger("mldbg")
T = TypeVar("T")

ENV_ENDPOINT = "MLDBG_S3_ENDPOINT"
ENV_SPILL = "MLDBG_S3_SPILL"  # "0" turns the spill buffer off
ENV_SPILL_DIR = "MLDBG_S3_SPILL_DIR"
ENV_SPILL_MAX_MB = "MLDBG_S3_SPILL_MAX_MB"
DEFAULT_SPILL_MAX_BYTES = 4 << 30
ENV_UPLOAD_FROM = "MLDBG_S3_UPLOAD_FROM"
ENV_BLOCK_SECONDS = "MLDBG_S3_BLOCK_SECONDS"
ENV_CACHE_MB = "MLDBG_S3_CACHE_MB"

_THROTTLED = {
    "SlowDown", "Throttling", "ThrottlingException", "RequestThrottled", "RequestLimitExceeded",
    "TooManyRequests", "TooManyRequestsException", "BandwidthLimitExceeded", "RequestTimeout",
    "RequestTimeoutException", "InternalError", "ServiceUnavailable", "PriorRequestNotComplete",
}  # fmt: skip
_MISSING = {"NoSuchKey", "404", "NotFound"}
_WHOLE = -1  # cache block number of a whole object


def parse_url(url: str) -> tuple[str, str]:
    """`s3://bucket/some/prefix` -> ("bucket", "some/prefix")."""
    if not url.startswith("s3://"):
        raise InvalidConfig(f"{url!r} is not an S3 URL; write s3://bucket/prefix")
    bucket, _, prefix = url[len("s3://") :].partition("/")
    prefix = prefix.strip("/")
    if not bucket:
        raise InvalidConfig(f"{url!r} names no bucket; write s3://bucket/prefix")
    if prefix:
        try:
            check_key(prefix)
        except StoreError:
            raise InvalidConfig(f"{url!r}: the prefix must be a plain relative path") from None
    return bucket, prefix


class S3Store(Store):
    """A run below `s3://bucket/prefix`.

    `block_seconds` bounds how long a write (or an existence check such as the stop-request
    poll) waits for an unreachable bucket; then writes are spilled to `spill_dir` (default
    `~/.cache/mldbg/s3-spill`) and uploaded later, in order. `spill=False` makes such writes
    raise `StoreError` instead. At most `spill_max_bytes` (4 GiB) are spilled; writes beyond
    that, or that the disk refuses, raise `StoreFull` (dropped, counted in `dropped`).
    Reads retry for `retry_seconds`.
    """

    remote = True  # every request is a round trip: the recorder polls for a stop every 0.5 s

    def __init__(
        self,
        url: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        profile: str | None = None,
        spill: bool | None = None,
        spill_dir: str | os.PathLike[str] | None = None,
        spill_max_bytes: int | None = None,
        upload_from: str | os.PathLike[str] | None = None,
        block_seconds: float | None = None,
        retry_seconds: float = 10.0,
        cache_bytes: int | None = None,
        block_bytes: int = 1 << 20,
        multipart_bytes: int = 16 << 20,
        close_timeout: float = 60.0,
        read_timeout: float = 30.0,
        exists_ttl: float = 1.0,
        client: Any = None,
    ):
        self.bucket, self.prefix = parse_url(url)
        self.url = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        self.endpoint_url = endpoint_url or os.environ.get(ENV_ENDPOINT) or None
        self.block_seconds = float(
            block_seconds if block_seconds is not None else os.environ.get(ENV_BLOCK_SECONDS, 5.0)
        )
        self.retry_seconds = retry_seconds
        self.block_bytes = block_bytes
        self.multipart_bytes = multipart_bytes
        self.close_timeout = close_timeout
        self.exists_ttl = exists_ttl
        self._absent: dict[str, float] = {}  # key -> when a HEAD last found it missing
        self._checking: set[str] = set()  # keys with a background HEAD under way
        self.probe_seconds = 1.0  # while unreachable, one foreground attempt per interval at most
        self.max_backoff = 2.0
        # statistics: requests by S3 operation, payload bytes each way, spilled writes
        self.requests: collections.Counter[str] = collections.Counter()
        self.bytes_sent = 0
        self.bytes_received = 0
        self.spilled = 0
        self.uploaded = 0
        self.dropped = 0  # writes dropped: the spill folder was at its bound or unwritable
        self.dropped_bytes = 0
        self._stats_lock = threading.Lock()
        self.drop_warning_seconds = 30.0  # at most one warning about dropped writes this often
        self._last_drop_warning = -1e9
        self._dropped_reported = 0  # by close()
        if spill_max_bytes is None:
            mb = os.environ.get(ENV_SPILL_MAX_MB, "").strip()
            try:
                spill_max_bytes = int(float(mb) * (1 << 20)) if mb else DEFAULT_SPILL_MAX_BYTES
            except ValueError:
                raise InvalidConfig(f"{ENV_SPILL_MAX_MB}={mb!r} is not a number of MiB") from None
        if spill_max_bytes < 0:
            raise InvalidConfig(f"{self.url}: spill_max_bytes must be >= 0, got {spill_max_bytes}")
        self.spill_max_bytes = int(spill_max_bytes)
        # segments numbered before the bucket could be listed (see next_segment)
        self._groups: dict[str, str] = {}  # worker -> its provisional group in this process
        self._shifts: dict[str, int] = {}  # group -> how far its numbers move, once known
        self._numbering = threading.Lock()

        if cache_bytes is None:
            cache_bytes = int(float(os.environ.get(ENV_CACHE_MB, 256)) * (1 << 20))
        self.cache = BlockCache(cache_bytes)
        self._region, self._profile, self._read_timeout = region, profile, read_timeout
        self._clients: tuple[Any, Any] | None = None  # made on first use: boto3 takes ~0.3 s
        if client is not None:
            self._register_counters(client)
            self._clients = (client, client)
        self._clients_lock = threading.Lock()
        try:
            from boto3.s3.transfer import TransferConfig
        except ImportError:
            raise ModuleNotFoundError(f"{self.url}: s3:// runs need boto3: pip install 'mldbg[s3]'") from None
        self._transfer = TransferConfig(
            multipart_threshold=multipart_bytes, multipart_chunksize=multipart_bytes, max_concurrency=4
        )

        if upload_from is None and os.environ.get(ENV_UPLOAD_FROM):
            upload_from = Path(os.environ[ENV_UPLOAD_FROM]) / self.bucket / self.prefix
        self._local = LocalStore(upload_from) if upload_from is not None else None
        if spill is None:
            spill = os.environ.get(ENV_SPILL, "1").strip().lower() not in ("0", "false", "no", "off")
        self._queue: SpillQueue | None = None
        if spill or self._local is not None:
            root = spill_dir or os.environ.get(ENV_SPILL_DIR) or default_root()
            self._queue = SpillQueue(root, f"{self.url}@{self.endpoint_url or 'aws'}")
        self._cond = threading.Condition()
        self._uploader: threading.Thread | None = None
        self._stopping = False
        self._down = False  # the last request failed to connect
        self._failing = False  # the last request failed (no answer, throttled, a server error)
        self._warned = False  # about this outage (again after the queue emptied)
        self._next_probe = 0.0
        self._last_error = ""
        self._last_progress = 0.0
        self._exit_hook = False

    @property
    def spill_dir(self) -> Path | None:
        """The directory of this store's spill queue (None before anything was spilled)."""
        return self._queue.dir if self._queue is not None else None

    @property
    def pending(self) -> int:
        """Writes and deletes waiting for the bucket."""
        return len(self._queue) if self._queue is not None else 0

    # clients ----------------------------------------------------------------------------
    @property
    def _client(self) -> Any:
        """For reads, listings and background uploads: a generous read timeout."""
        return (self._clients or self._make_clients())[0]

    @property
    def _fast(self) -> Any:
        """For what a caller waits on (writes, deletes, existence checks): `block_seconds`."""
        return (self._clients or self._make_clients())[1]

    def _make_clients(self) -> tuple[Any, Any]:
        import boto3
        from botocore.config import Config

        with self._clients_lock:
            if self._clients is not None:
                return self._clients
            session = boto3.session.Session(profile_name=self._profile)
            region = self._region or session.region_name or "us-east-1"
            short = max(0.1, self.block_seconds)
            made = []
            for read_timeout, connect_timeout in ((self._read_timeout, 3.0), (short, min(3.0, short))):
                config = Config(
                    connect_timeout=connect_timeout,
                    read_timeout=read_timeout,
                    retries={"total_max_attempts": 1},  # we retry ourselves, within our own bounds
                    max_pool_connections=16,
                    user_agent_extra="mldbg",
                    s3={"addressing_style": "path"} if self.endpoint_url else None,
                )
                client = session.client(
                    "s3", endpoint_url=self.endpoint_url, region_name=region, config=config
                )
                self._register_counters(client)
                made.append(client)
            self._clients = (made[0], made[1])
            return self._clients

    def _register_counters(self, client: Any) -> None:
        client.meta.events.register("before-send.s3", self._count_request)
        client.meta.events.register("after-call.s3.GetObject", self._count_get)

    def _count_request(self, request: Any, event_name: str = "", **_: Any) -> None:
        op = event_name.rsplit(".", 1)[-1]
        with self._stats_lock:
            self.requests[op] += 1
            if op in ("PutObject", "UploadPart"):
                h = request.headers
                self.bytes_sent += int(h.get("X-Amz-Decoded-Content-Length") or h.get("Content-Length") or 0)

    def _count_get(self, parsed: Any = None, **_: Any) -> None:
        if isinstance(parsed, dict):
            with self._stats_lock:
                self.bytes_received += int(parsed.get("ContentLength") or 0)

    # keys ------------------------------------------------------------------------------
    def _full(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _full_prefix(self, prefix: str) -> str:
        if prefix.strip("/"):
            check_key(prefix.rstrip("/"))
            return self._full(prefix)
        return f"{self.prefix}/" if self.prefix else ""

    def _rel(self, full: str) -> str:
        return full[len(self.prefix) + 1 :] if self.prefix else full

    # writing ---------------------------------------------------------------------------
    def write(self, key: str, parts: Sequence[Buffer]) -> None:
        """Raises `StoreFull` when the write had to be dropped (see the class docstring)."""
        k, parts, group = self._number(check_key(key), parts)
        self.cache.invalidate(k)
        self._absent.pop(k, None)
        if (local := self._local) is not None:  # upload_from: the local copy first, the bucket later
            local.write(k, parts)
            self._enqueue(k, lambda q: q.put_ref(k, local.root / k, group))
            return
        if self._queue is not None and (group or len(self._queue) or not self._may_try()):
            self._enqueue(k, lambda q: q.put(k, parts, group), parts)  # older writes wait: keep the order
            return
        if self._queue is None and not self._may_try():
            raise StoreError(f"cannot write {self.url}/{k}: {self._unreachable()}")
        try:
            self._retry(lambda: self._put(k, parts), self.block_seconds)
        except Exception as e:
            if self._queue is not None and _transient(e):
                self._enqueue(k, lambda q: q.put(k, parts), parts)
                return
            raise self._error("write", k, e) from e

    def _put(self, k: str, parts: Sequence[Buffer]) -> None:
        views = _byte_views(parts)
        if sum(len(v) for v in views) > self.multipart_bytes:
            self._client.upload_fileobj(
                _PartsReader(views), self.bucket, self._full(k), Config=self._transfer
            )
        else:
            self._fast.put_object(Bucket=self.bucket, Key=self._full(k), Body=b"".join(views))

    def delete(self, key: str) -> None:
        k = check_key(key)
        self.cache.invalidate(k)
        self._absent.pop(k, None)
        if self._local is not None:
            self._local.delete(k)
            self._enqueue(k, lambda q: q.delete(k))
            return
        if self._queue is not None and (len(self._queue) or not self._may_try()):
            self._enqueue(k, lambda q: q.delete(k))
            return
        if self._queue is None and not self._may_try():
            raise StoreError(f"cannot delete {self.url}/{k}: {self._unreachable()}")
        try:
            self._retry(
                lambda: self._fast.delete_object(Bucket=self.bucket, Key=self._full(k)), self.block_seconds
            )
        except Exception as e:
            if self._queue is not None and _transient(e):
                self._enqueue(k, lambda q: q.delete(k))
                return
            raise self._error("delete", k, e) from e

    def _enqueue(
        self, k: str, append: Callable[[SpillQueue], Entry], parts: Sequence[Buffer] | None = None
    ) -> None:
        """Spill one operation; drop it (`StoreFull`) past `spill_max_bytes` or when the disk
        refuses. The run's markers (meta.json, END, control/, watch/) are tiny and always kept."""
        q = self._queue
        assert q is not None
        size = sum(v.nbytes for v in _byte_views(parts)) if parts is not None else 0
        if parts is not None and not _always_kept(k) and q.bytes + size > self.spill_max_bytes:
            self._drop(
                k, size, f"its spill folder {q.dir or q.run_dir} is at its bound of "
                f"{_size(self.spill_max_bytes)} ({_size(q.bytes)} waiting; raise it with spill_max_bytes= "
                f"or {ENV_SPILL_MAX_MB})",
            )  # fmt: skip
        try:
            append(q)
        except OSError as e:
            self._drop(k, size, f"its spill folder {q.dir or q.run_dir} cannot be written ({e})")
        with self._cond:
            if self._local is None:
                self.spilled += 1
                if self._failing and not self._warned:  # (not when it only waits behind adopted ones)
                    self._warned = True
                    log.warning(
                        "mldbg: %s is unreachable at %s (%s); recording goes on: writes are kept in %s "
                        "(at most %s) and uploaded in order when it answers again",
                        self.url, self.endpoint_url or "AWS", self._last_error or "no answer", q.dir,
                        _size(self.spill_max_bytes),
                    )  # fmt: skip
            self._start_uploader()
            self._cond.notify_all()

    def _drop(self, k: str, size: int, why: str) -> NoReturn:
        """Count a write that cannot be kept, warn (at most every `drop_warning_seconds`), raise."""
        now = time.monotonic()
        with self._stats_lock:
            self.dropped += 1
            self.dropped_bytes += size
            warn = now - self._last_drop_warning >= self.drop_warning_seconds
            if warn:
                self._last_drop_warning = now
            count, total = self.dropped, self.dropped_bytes
        if warn:
            log.warning(
                "mldbg: %s is unreachable and %s: dropping new writes (%d so far, %s, the last %s). "
                "Writes buffered before stay and are uploaded when it answers; training goes on.",
                self.url, why, count, _size(total), k,
            )  # fmt: skip
        raise StoreFull(f"dropped the write of {self.url}/{k}: {self.url} is unreachable and {why}")

    # numbering segments while the bucket is away ---------------------------------------------
    def next_segment(self, worker: str) -> int:
        """After `worker`'s last segment in the bucket (or spilled here). When the bucket does not
        answer within `block_seconds`, the writer numbers from 1 anyway and this store moves those
        numbers past the bucket's last segment once it answers, before any of them is uploaded:
        a hook starts while the bucket is away and still never overwrites an earlier run's
        segments. Only other errors (no such bucket, access denied) raise."""
        q = self._queue
        if q is not None and not len(q) and q.orphans():
            with self._cond:  # a dead process's spill of this run goes first, and counts
                q.open()
                if len(q):
                    self._start_uploader()
                    self._cond.notify_all()
        if q is not None and any(e.group and _worker_of(e.key) == worker for e in q.entries()):
            return self._defer(worker)  # numbered after those, once they are
        try:
            if not self._may_try():
                raise StoreError(self._unreachable())
            return self._last_segment(worker, self._fast, self.block_seconds) + 1
        except Exception as e:
            if q is None or not (isinstance(e, StoreError) or _transient(e)):
                raise self._error("list", layout.index_prefix(worker), e) from e
            return self._defer(worker)

    def _defer(self, worker: str) -> int:
        """Number provisionally from 1 (with upload_from: after the local copy's last segment,
        which must not be overwritten either); the group's id records where they started."""
        start = 1
        if self._local is not None:
            keys = self._local.list(layout.index_prefix(worker))
            start = layout.segment_seq(keys[-1]) + 1 if keys else 1
        self._groups[worker] = f"{worker}.{start}.{uuid.uuid4().hex[:12]}"
        log.debug("mldbg: %s unreachable; numbering %s's segments once it answers", self.url, worker)
        return start

    def _last_segment(self, worker: str, client: Any, seconds: float) -> int:
        """The highest segment number of `worker` in the bucket or numbered in the queue."""
        full = self._full(layout.index_prefix(worker))

        def last_in_bucket() -> int:
            last = 0
            args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full}
            while True:
                r = client.list_objects_v2(**args)
                for o in r.get("Contents", ()):
                    seg = layout.parse_segment_key(self._rel(o["Key"]))
                    if seg is not None:
                        last = max(last, seg[2])
                if not r.get("IsTruncated"):
                    return last
                args["ContinuationToken"] = r["NextContinuationToken"]

        last = self._retry(last_in_bucket, seconds)
        for e in self._queue.entries() if self._queue is not None else ():
            seg = layout.parse_segment_key(e.key)
            if e.op == "put" and e.group is None and seg is not None and seg[0] == worker:
                last = max(last, seg[2])
        return last

    def _number(self, k: str, parts: Sequence[Buffer]) -> tuple[str, Sequence[Buffer], str | None]:
        """The final key and bytes of a segment numbered provisionally, or its group while its
        place is unknown (it then waits in the queue)."""
        seg = layout.parse_segment_key(k) if self._groups else None
        if seg is None or seg[0] not in self._groups:
            return k, parts, None
        group = self._groups[seg[0]]
        shift = self._shifts.get(group)
        if shift is None and self._queue is not None and not len(self._queue) and self._may_try():
            try:
                shift = self._settle(group, seg[0], self._fast, self.block_seconds)
            except Exception as e:  # still away: it waits in the queue
                self._note_failure(e)
        if shift is None:
            return k, parts, group
        worker, kind, seq = seg
        if not shift:
            return k, parts, None
        final = layout.segment_key(worker, kind, seq + shift)
        if kind == "index":
            blob = b"".join(_byte_views(parts))
            parts = [retarget_index(blob, layout.data_key(worker, seq + shift), f"{self.url}/{k}")]
        return final, parts, None

    def _settle(self, group: str, worker: str, client: Any, seconds: float) -> int:
        """Fix where `group`'s segments go (after the last one in the bucket) and renumber its
        spilled entries. Called before the first of them is uploaded."""
        with self._numbering:
            shift = self._shifts.get(group)
            if shift is None:
                shift = max(0, self._last_segment(worker, client, seconds) + 1 - _group_start(group))
                self._shifts[group] = shift
                if shift:
                    log.info(
                        "mldbg: %s already holds segments of %s; the ones recorded while it was "
                        "unreachable are numbered after them (+%d)", self.url, worker, shift,
                    )  # fmt: skip
            # oldest first, so that a crash halfway leaves a gap at worst, never the order changed;
            # with upload_from the newest first: a local copy moves onto the name of a later one
            entries = self._queue.entries() if self._queue is not None else []
            for e in reversed(entries) if self._local is not None else entries:
                if e.group == group:
                    self._rekey(e, shift)
            return shift

    def _rekey(self, e: Entry, shift: int) -> None:
        q = self._queue
        assert q is not None
        seg = layout.parse_segment_key(e.key)
        if seg is None or not shift:
            q.rekey(e, e.key)
            return
        worker, kind, seq = seg
        old, final = e.key, layout.segment_key(worker, kind, seq + shift)
        data_key = layout.data_key(worker, seq + shift) if kind == "index" else None
        q.rekey(e, final, data_key)
        self.cache.invalidate(final)
        self._absent.pop(final, None)
        if self._local is not None and data_key is not None:  # keep the local copy a valid run
            try:
                blob = (self._local.root / final).read_bytes()
                self._local.write(final, [retarget_index(blob, data_key, f"{self._local.url}/{old}")])
            except Exception as err:
                log.error("mldbg: cannot renumber the local copy %s/%s: %s", self._local.url, final, err)

    def _start_uploader(self) -> None:
        """Called holding `_cond`."""
        self._stopping = False
        if not self._exit_hook:
            self._exit_hook = True
            atexit.register(_close_at_exit, weakref.ref(self))
        if self._uploader is None:
            self._uploader = threading.Thread(
                target=self._upload_loop, name=f"mldbg-s3-upload-{self.bucket}", daemon=True
            )
            self._uploader.start()

    def _upload_loop(self) -> None:
        q = self._queue
        assert q is not None
        delay = 0.1
        while True:
            with self._cond:
                while not len(q) and not self._stopping:
                    self._cond.wait()
                if not len(q):
                    self._uploader = None
                    return
            entry = q.head()
            assert entry is not None
            try:
                if entry.group is not None:
                    worker = _worker_of(entry.key)
                    if worker is None:
                        q.rekey(entry, entry.key)
                    else:
                        self._settle(entry.group, worker, self._client, 0.0)
                self._apply(entry)
            except Exception as e:
                self._note_failure(e)
                with self._cond:
                    self._cond.wait(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, self.max_backoff)
                continue
            q.done(entry)
            delay = 0.1
            with self._cond:
                was_down, self._down, self._failing = self._down, False, False
                if not len(q):
                    self._warned = False
                self.uploaded += 1
                self._last_progress = time.monotonic()
                if was_down and self._local is None:
                    log.warning("mldbg: %s answers again; uploading %d buffered writes", self.url, len(q))
                self._cond.notify_all()

    def _apply(self, e: Entry) -> None:
        full = self._full(e.key)
        if e.op == "delete":
            self._client.delete_object(Bucket=self.bucket, Key=full)
            return
        assert e.path is not None
        try:
            f = open(e.path, "rb")  # noqa: SIM115
        except FileNotFoundError:
            if e.owned:
                log.error("mldbg: buffered copy of %s/%s is gone (%s); skipped", self.url, e.key, e.path)
            return  # upload_from: deleted locally since; the queued delete follows
        with f:
            if e.retarget is not None:  # an index renumbered after it was spilled
                body = retarget_index(f.read(), e.retarget, f"{self.url}/{e.key}")
                self._client.put_object(Bucket=self.bucket, Key=full, Body=body)
            elif os.fstat(f.fileno()).st_size > self.multipart_bytes:
                self._client.upload_fileobj(f, self.bucket, full, Config=self._transfer)
            else:
                self._client.put_object(Bucket=self.bucket, Key=full, Body=f.read())

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every buffered write is in the bucket; False after `timeout` seconds
        without progress. Also picks up what earlier, crashed processes left buffered."""
        q = self._queue
        if q is None:
            return True
        if not len(q):
            q.open()  # adopts the queues of dead processes
        start = time.monotonic()
        with self._cond:
            while len(q):
                self._start_uploader()
                idle = time.monotonic() - max(start, self._last_progress)
                if timeout is not None and idle >= timeout:
                    return False
                self._cond.wait(0.1 if timeout is None else min(0.1, timeout - idle))
        return True

    def close(self) -> None:
        """Upload what is buffered (see `drain`), then stop the uploader. What cannot be uploaded
        within `close_timeout` stays in the spill directory for a later process."""
        q = self._queue
        if self.dropped > self._dropped_reported:
            self._dropped_reported = self.dropped
            log.warning(
                "mldbg: %d writes to %s (%s) were dropped while it was unreachable: the spill folder "
                "was full or unwritable", self.dropped, self.url, _size(self.dropped_bytes),
            )  # fmt: skip
        if q is None or (q.dir is None and not len(q)):
            return
        if not self.drain(self.close_timeout):
            log.error(
                "mldbg: %d writes to %s are not uploaded yet (%s); they are kept in %s and uploaded "
                "by the next process writing this run, or by S3Store(%r).drain()",
                len(q), self.url, self._last_error, q.dir, self.url,
            )  # fmt: skip
            return
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._uploader
        if thread is not None:
            thread.join(5.0)
        q.close()

    # reading ---------------------------------------------------------------------------
    def read(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        k = check_key(key)
        entry = self._overlay(k)
        if entry is not None:
            return _read_entry(entry, f"{self.url}/{k}", start, length)
        if length == 0:
            if not self.exists(k):
                raise FileNotFoundError(f"{self.url}/{k}")
            return b""
        if self.cache.max_bytes <= 0 or not _immutable(k):
            return self._get(k, start, length)
        if length is None:  # index files: whole objects
            data = self.cache.get(k, _WHOLE)
            if data is None:
                data = self._get(k, 0, None)
                if len(data) <= self.cache.max_bytes // 4:
                    self.cache.put(k, _WHOLE, data)
            return data[start:]
        whole = self.cache.get(k, _WHOLE, count=False)
        if whole is not None:
            return whole[start : start + length]
        return self._read_blocks(k, start, length)

    def _read_blocks(self, k: str, start: int, length: int) -> bytes:
        """A byte range through the block cache: missing blocks come in one ranged GET."""
        bs = self.block_bytes
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
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": self._full(k)}
        if start or length is not None:
            args["Range"] = f"bytes={start}-" if length is None else f"bytes={start}-{start + length - 1}"

        def get() -> bytes:
            from botocore.exceptions import ClientError

            try:
                r = self._client.get_object(**args)
            except ClientError as e:
                if _code(e) in _MISSING:
                    raise FileNotFoundError(f"{self.url}/{k}") from None
                if _code(e) == "InvalidRange" or _status(e) == 416:
                    return b""  # starts past the end, as a short read of a local file
                raise
            body = r["Body"]
            try:
                return body.read()
            finally:
                body.close()

        return self._reading("read", k, get)

    def list(self, prefix: str, start_after: str | None = None) -> builtins.list[str]:
        full = self._full_prefix(prefix)

        def list_all() -> builtins.list[str]:
            keys: builtins.list[str] = []
            args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full}
            if start_after:
                args["StartAfter"] = self._full(start_after)
            while True:
                r = self._client.list_objects_v2(**args)
                keys.extend(o["Key"] for o in r.get("Contents", ()) if not o["Key"].endswith("/"))
                if not r.get("IsTruncated"):
                    return keys
                args["ContinuationToken"] = r["NextContinuationToken"]

        keys = {self._rel(k) for k in self._reading("list", prefix, list_all)}
        rel_prefix = self._rel(full) if full else ""
        for e in self._pending(rel_prefix):
            if e.op == "delete":
                keys.discard(e.key)
            elif start_after is None or e.key > start_after:
                keys.add(e.key)
        return sorted(keys)

    def children(self, prefix: str) -> builtins.list[str]:
        full = self._full_prefix(prefix)

        def list_dirs() -> builtins.list[str]:
            names: builtins.list[str] = []
            args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": full, "Delimiter": "/"}
            while True:
                r = self._client.list_objects_v2(**args)
                names.extend(p["Prefix"][len(full) :].rstrip("/") for p in r.get("CommonPrefixes", ()))
                if not r.get("IsTruncated"):
                    return names
                args["ContinuationToken"] = r["NextContinuationToken"]

        names = set(self._reading("list", prefix, list_dirs))
        rel_prefix = self._rel(full) if full else ""
        for e in self._pending(rel_prefix):
            rest = e.key[len(rel_prefix) :]
            if e.op == "put" and "/" in rest:
                names.add(rest.split("/", 1)[0])
        return sorted(n for n in names if n)

    def exists(self, key: str) -> bool:
        """A HEAD bounded by `block_seconds`. The training thread polls the stop request with it
        every 0.1 s, so a miss is remembered: for `exists_ttl` seconds the answer is that miss,
        then the same answer again while a background HEAD checks anew. The poll costs one
        request a second and no wait on the network; a stop request is seen within ~`exists_ttl`."""
        k = check_key(key)
        entry = self._overlay(k)
        if entry is not None:
            return entry.op == "put"
        missed = self._absent.get(k)
        if missed is not None:
            if time.monotonic() - missed >= self.exists_ttl and k not in self._checking:
                self._checking.add(k)
                threading.Thread(target=self._recheck, args=(k,), name="mldbg-s3-exists", daemon=True).start()
            return False
        found = self._head_now(k)
        if not found:
            self._absent[k] = time.monotonic()
        return found

    def _head_now(self, k: str) -> bool:
        if not self._may_try():
            raise StoreError(f"cannot check {self.url}/{k}: {self._unreachable()}")
        try:
            return self._retry(lambda: self._head(self._fast, k) is not None, 0.0)
        except Exception as e:
            raise self._error("check", k, e) from e

    def _recheck(self, k: str) -> None:
        try:
            if self._head_now(k):
                self._absent.pop(k, None)
            else:
                self._absent[k] = time.monotonic()
        except Exception:
            self._absent[k] = time.monotonic()  # unreachable: ask again in `exists_ttl`
        finally:
            self._checking.discard(k)

    def size(self, key: str) -> int:
        k = check_key(key)
        entry = self._overlay(k)
        if entry is not None:
            return len(_read_entry(entry, f"{self.url}/{k}", 0, None))
        head = self._reading("stat", k, lambda: self._head(self._client, k))
        if head is None:
            raise FileNotFoundError(f"{self.url}/{k}")
        return int(head["ContentLength"])

    def _head(self, client: Any, k: str) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError

        try:
            return client.head_object(Bucket=self.bucket, Key=self._full(k))
        except ClientError as e:
            if _code(e) in _MISSING or _status(e) == 404:
                return None
            raise

    def _overlay(self, k: str) -> Entry | None:
        """This process's newest buffered operation on `k`: it reads its own writes."""
        return self._queue.latest(k) if self._queue is not None and len(self._queue) else None

    def _pending(self, rel_prefix: str) -> builtins.list[Entry]:
        if self._queue is None or not len(self._queue):
            return []
        return list(self._queue.pending(rel_prefix))

    # retries and errors ------------------------------------------------------------------
    def _may_try(self) -> bool:
        """While the bucket is unreachable, the uploader probes it; others fail fast, except one
        attempt per `probe_seconds` when there is no uploader."""
        if not self._down:
            return True
        if self._uploader is not None and self.pending:
            return False
        now = time.monotonic()
        if now >= self._next_probe:
            self._next_probe = now + self.probe_seconds
            return True
        return False

    def _note_failure(self, e: BaseException) -> None:
        msg = f"{type(e).__name__}: {e}"
        self._failing = True
        if _connection_error(e):
            self._down = True
            self._next_probe = time.monotonic() + self.probe_seconds
        if msg != self._last_error:
            self._last_error = msg
            if not _transient(e):
                log.error("mldbg: %s: %s (will keep retrying)", self.url, msg)

    def _retry(self, fn: Callable[[], T], seconds: float) -> T:
        """Call `fn` until it succeeds, a non-transient error, or `seconds` have passed."""
        deadline = time.monotonic() + seconds
        delay = 0.05
        while True:
            try:
                out = fn()
            except Exception as e:
                if not _transient(e):
                    raise
                self._note_failure(e)
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, 2.0)
                continue
            self._down = self._failing = False
            return out

    def _reading(self, what: str, k: str, fn: Callable[[], T]) -> T:
        if not self._may_try():
            raise StoreError(f"cannot {what} {self.url}/{k}: {self._unreachable()}")
        try:
            return self._retry(fn, self.retry_seconds)
        except FileNotFoundError:
            raise
        except Exception as e:
            raise self._error(what, k, e) from e

    def _unreachable(self) -> str:
        where = self.endpoint_url or "AWS"
        return f"the bucket is unreachable at {where} ({self._last_error or 'no answer'}); retrying in the background"

    def _error(self, what: str, k: str, e: BaseException) -> StoreError:
        from botocore.exceptions import ClientError, NoCredentialsError

        where = f"{self.url}/{k}"
        endpoint = self.endpoint_url or "AWS"
        if isinstance(e, NoCredentialsError):
            hint = "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
        elif isinstance(e, ClientError) and _code(e) == "NoSuchBucket":
            hint = f"bucket {self.bucket!r} does not exist at {endpoint}: create it first"
        elif isinstance(e, ClientError) and (
            _status(e) == 403 or _code(e) in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch")
        ):
            hint = f"access denied by {endpoint} ({_code(e)}): check the credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID) and the bucket policy"
        elif _transient(e):
            hint = f"{endpoint} did not answer ({type(e).__name__}: {e}); is it up? (set the endpoint with {ENV_ENDPOINT})"
        else:
            hint = f"{type(e).__name__}: {e}"
        return StoreError(f"cannot {what} {where}: {hint}")


class _PartsReader(io.RawIOBase):
    """A seekable file over a list of buffers, for multipart uploads without a copy."""

    def __init__(self, views: list[memoryview]):
        self._views = views
        self._starts = []
        pos = 0
        for v in self._views:
            self._starts.append(pos)
            pos += len(v)
        self._size = pos
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        out = memoryview(buffer).cast("B")
        n = 0
        while n < len(out) and self._pos < self._size:
            i = bisect.bisect_right(self._starts, self._pos) - 1
            v = self._views[i]
            off = self._pos - self._starts[i]
            take = min(len(v) - off, len(out) - n)
            out[n : n + take] = v[off : off + take]
            n += take
            self._pos += take
        return n


def _byte_views(parts: Sequence[Buffer]) -> list[memoryview]:
    """Flat byte views of the non-empty parts (arrays of any shape and dtype included)."""
    views = []
    for p in parts:
        v = memoryview(p)
        if v.nbytes:
            views.append(v if v.ndim == 1 and v.format == "B" else v.cast("B"))
    return views


def _immutable(key: str) -> bool:
    """Segment files (index and data) are written once and never change: safe to cache."""
    return key.startswith(layout.WORKERS) and ("/index/" in key or "/data/" in key)


def _read_entry(entry: Entry, where: str, start: int, length: int | None) -> bytes:
    if entry.op == "delete" or entry.path is None:
        raise FileNotFoundError(where)
    with open(entry.path, "rb") as f:
        if entry.retarget is not None:
            data = retarget_index(f.read(), entry.retarget, where)
            return data[start:] if length is None else data[start : start + length]
        f.seek(start)
        return f.read() if length is None else f.read(length)


def _always_kept(key: str) -> bool:
    """The run's small markers: spilled even past `spill_max_bytes`."""
    return key.startswith(("control/", "watch/")) or key.rsplit("/", 1)[-1] in ("meta.json", "END")


def _group_start(group: str) -> int:
    """The first provisional number of a group `<worker>.<start>.<id>`."""
    parts = group.rsplit(".", 2)
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else 1


def _worker_of(key: str) -> str | None:
    seg = layout.parse_segment_key(key)
    return seg[0] if seg is not None else None


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"


def _code(e: Any) -> str:
    return str(getattr(e, "response", {}).get("Error", {}).get("Code", ""))


def _status(e: Any) -> int:
    return int(getattr(e, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def _connection_error(e: BaseException) -> bool:
    """No answer at all (refused, timed out, reset): the bucket is unreachable."""
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import HTTPClientError

    cause = getattr(e, "last_exception", None)
    if cause is not None and cause is not e:
        return _connection_error(cause)
    return isinstance(e, (HTTPClientError, BotoConnectionError)) or (
        isinstance(e, OSError) and not isinstance(e, FileNotFoundError)
    )


def _transient(e: BaseException) -> bool:
    """Worth retrying: no answer, throttling, a server-side error."""
    from botocore.exceptions import ClientError, IncompleteReadError, ResponseStreamingError

    if isinstance(e, ClientError):
        status = _status(e)
        return _code(e) in _THROTTLED or status >= 500 or status in (408, 429)
    if isinstance(e, (ResponseStreamingError, IncompleteReadError)):
        return True
    return _connection_error(e)


def _close_at_exit(ref: weakref.ref[S3Store]) -> None:
    store = ref()
    if store is not None:
        try:
            store.close()
        except Exception as e:  # at exit, say what happened; never raise
            log.error("mldbg: closing %s at exit failed: %s", store.url, e)
