"""The bucket as boto3 sees it: the objects below `s3://bucket/prefix`, by keys relative to the
prefix, one request per call (the callers retry through `client.retries`).

Endpoint, region and credentials come from the standard AWS chain (environment, ~/.aws/config,
profiles, instance roles); `MLDBG_S3_ENDPOINT` or `S3Options.endpoint_url` names a custom
endpoint, reached with path-style addressing, which every S3-compatible server accepts.
"""

from __future__ import annotations

import bisect
import collections
import io
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

from mldbg.errors import InvalidConfig, StoreError
from mldbg.store.base import Buffer, check_key
from mldbg.store.s3.options import ENV_ENDPOINT, S3Options
from mldbg.store.s3.retry import MISSING, Retries, error_code, http_status, is_transient


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


class S3Client:
    """Two boto3 clients, made on first use (importing boto3 takes ~0.3 s): a `patient` one for
    reads, listings and background uploads, and a `fast` one whose timeouts are `block_seconds`,
    for what a caller waits on (writes, deletes, existence checks). Counts the requests by S3
    operation and the payload bytes each way."""

    def __init__(self, url: str, options: S3Options):
        self.bucket, self.prefix = parse_url(url)
        self.url = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        self.endpoint_url = options.endpoint_url
        self.retries = Retries(self.url, options.probe_seconds)
        self.requests: collections.Counter[str] = collections.Counter()
        self.bytes_sent = 0
        self.bytes_received = 0
        self._options = options
        self._stats_lock = threading.Lock()
        self._clients: tuple[Any, Any] | None = None
        self._clients_lock = threading.Lock()
        try:
            from boto3.s3.transfer import TransferConfig
        except ImportError:
            raise ModuleNotFoundError(f"{self.url}: s3:// runs need boto3: pip install 'mldbg[s3]'") from None
        parts = options.multipart_bytes
        self._transfer = TransferConfig(
            multipart_threshold=parts, multipart_chunksize=parts, max_concurrency=4
        )

    # keys ------------------------------------------------------------------------------
    def key(self, k: str) -> str:
        """The bucket's key of the run's key `k`."""
        return f"{self.prefix}/{k}" if self.prefix else k

    def folder(self, prefix: str) -> str:
        """The bucket's key prefix of the run's folder `prefix` ("" for the whole run)."""
        if prefix.strip("/"):
            check_key(prefix.rstrip("/"))
            return self.key(prefix)
        return f"{self.prefix}/" if self.prefix else ""

    def relative(self, full: str) -> str:
        return full[len(self.prefix) + 1 :] if self.prefix else full

    # the boto3 clients -------------------------------------------------------------------
    @property
    def patient(self) -> Any:
        return (self._clients or self._make_clients())[0]

    @property
    def fast(self) -> Any:
        return (self._clients or self._make_clients())[1]

    def _make_clients(self) -> tuple[Any, Any]:
        import boto3
        from botocore.config import Config

        with self._clients_lock:
            if self._clients is not None:
                return self._clients
            session = boto3.session.Session(profile_name=self._options.profile)
            region = self._options.region or session.region_name or "us-east-1"
            short = max(0.1, self._options.block_seconds)
            made = []
            for read_timeout, connect_timeout in (
                (self._options.read_timeout, 3.0),
                (short, min(3.0, short)),
            ):
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
                client.meta.events.register("before-send.s3", self._count_request)
                client.meta.events.register("after-call.s3.GetObject", self._count_get)
                made.append(client)
            self._clients = (made[0], made[1])
            return self._clients

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

    # requests ----------------------------------------------------------------------------
    def put(self, k: str, parts: Sequence[Buffer]) -> None:
        """A caller's write: one PUT through the fast client, or a multipart upload of the parts
        as they are (no copy) above `multipart_bytes`."""
        views = byte_views(parts)
        if sum(len(v) for v in views) > self._options.multipart_bytes:
            self.patient.upload_fileobj(PartsReader(views), self.bucket, self.key(k), Config=self._transfer)
        else:
            self.fast.put_object(Bucket=self.bucket, Key=self.key(k), Body=b"".join(views))

    def put_bytes(self, k: str, body: bytes) -> None:
        self.patient.put_object(Bucket=self.bucket, Key=self.key(k), Body=body)

    def put_file(self, k: str, f: BinaryIO) -> None:
        """A background upload of an open file, multipart above `multipart_bytes`."""
        if os.fstat(f.fileno()).st_size > self._options.multipart_bytes:
            self.patient.upload_fileobj(f, self.bucket, self.key(k), Config=self._transfer)
        else:
            self.put_bytes(k, f.read())

    def delete(self, k: str, fast: bool) -> None:
        (self.fast if fast else self.patient).delete_object(Bucket=self.bucket, Key=self.key(k))

    def head(self, k: str, fast: bool) -> dict[str, Any] | None:
        """The object's metadata, None if it does not exist."""
        from botocore.exceptions import ClientError

        try:
            return (self.fast if fast else self.patient).head_object(Bucket=self.bucket, Key=self.key(k))
        except ClientError as e:
            if error_code(e) in MISSING or http_status(e) == 404:
                return None
            raise

    def get(self, k: str, start: int, length: int | None) -> bytes:
        """Bytes of `k` from `start` (a ranged GET); FileNotFoundError if it does not exist."""
        from botocore.exceptions import ClientError

        args: dict[str, Any] = {"Bucket": self.bucket, "Key": self.key(k)}
        if start or length is not None:
            args["Range"] = f"bytes={start}-" if length is None else f"bytes={start}-{start + length - 1}"
        try:
            r = self.patient.get_object(**args)
        except ClientError as e:
            if error_code(e) in MISSING:
                raise FileNotFoundError(f"{self.url}/{k}") from None
            if error_code(e) == "InvalidRange" or http_status(e) == 416:
                return b""  # starts past the end, as a short read of a local file
            raise
        body = r["Body"]
        try:
            return body.read()
        finally:
            body.close()

    def list_keys(self, folder: str, start_after: str | None = None, fast: bool = False) -> list[str]:
        """The run's keys below the bucket folder `folder`, after `start_after` only (a run key)."""
        args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": folder}
        if start_after:
            args["StartAfter"] = self.key(start_after)
        keys: list[str] = []
        for page in self._pages(args, fast):
            keys.extend(
                self.relative(o["Key"]) for o in page.get("Contents", ()) if not o["Key"].endswith("/")
            )
        return keys

    def list_folders(self, folder: str) -> list[str]:
        """Names of the sub-folders directly below the bucket folder `folder`."""
        names: list[str] = []
        for page in self._pages({"Bucket": self.bucket, "Prefix": folder, "Delimiter": "/"}, False):
            names.extend(p["Prefix"][len(folder) :].rstrip("/") for p in page.get("CommonPrefixes", ()))
        return names

    def _pages(self, args: dict[str, Any], fast: bool) -> Iterator[dict[str, Any]]:
        """ListObjectsV2, page after page."""
        client = self.fast if fast else self.patient
        while True:
            r = client.list_objects_v2(**args)
            yield r
            if not r.get("IsTruncated"):
                return
            args["ContinuationToken"] = r["NextContinuationToken"]

    # what went wrong ---------------------------------------------------------------------
    def unreachable(self) -> str:
        where = self.endpoint_url or "AWS"
        return f"the bucket is unreachable at {where} ({self.retries.last_error or 'no answer'}); retrying in the background"

    def error(self, what: str, k: str, e: BaseException) -> StoreError:
        """A `StoreError` naming the object and what to do about `e`."""
        from botocore.exceptions import ClientError, NoCredentialsError

        where = f"{self.url}/{k}"
        endpoint = self.endpoint_url or "AWS"
        code = error_code(e)
        if isinstance(e, NoCredentialsError):
            hint = "no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
        elif isinstance(e, ClientError) and code == "NoSuchBucket":
            hint = f"bucket {self.bucket!r} does not exist at {endpoint}: create it first"
        elif isinstance(e, ClientError) and (
            http_status(e) == 403 or code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch")
        ):
            hint = f"access denied by {endpoint} ({code}): check the credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID) and the bucket policy"
        elif is_transient(e):
            hint = f"{endpoint} did not answer ({type(e).__name__}: {e}); is it up? (set the endpoint with {ENV_ENDPOINT})"
        else:
            hint = f"{type(e).__name__}: {e}"
        return StoreError(f"cannot {what} {where}: {hint}")


def byte_views(parts: Sequence[Buffer]) -> list[memoryview]:
    """Flat byte views of the non-empty parts (arrays of any shape and dtype included)."""
    views = []
    for p in parts:
        v = memoryview(p)
        if v.nbytes:
            views.append(v if v.ndim == 1 and v.format == "B" else v.cast("B"))
    return views


class PartsReader(io.RawIOBase):
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
