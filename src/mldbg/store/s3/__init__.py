"""A run in an S3-compatible bucket (AWS S3, MinIO, SeaweedFS, Ceph, R2 ...), through boto3.

`S3Store(url, S3Options(...))` is the `Store`; `open_store("s3://...", **settings)` builds one.
The package, one concept a module:

- `options.py`   `S3Options`: every setting in one frozen object, with its environment variable
- `client.py`    `S3Client`: the boto3 clients (endpoint and credentials from the AWS chain),
                 keys below the prefix, one request per call, request and byte counts
- `retry.py`     `Retries`: what is worth retrying, backoff within a deadline, and whether the
                 bucket answers (so that only one thread waits on a dead endpoint)
- `spill.py`     `SpillQueue`: the on-disk, ordered queue of writes waiting for the bucket
- `uploader.py`  `Uploader`: the thread that uploads that queue in order; its bound, the drops
- `numbering.py` `SegmentNumbering`: segment numbers taken while the bucket was away, settled
                 after the bucket's last segment before any of them is uploaded
- `store.py`     `S3Store`: the `Store` interface over these, with the read cache

Importing this package does not import boto3; the first `S3Store` does.
"""

from mldbg.store.s3.client import parse_url
from mldbg.store.s3.options import DEFAULT_SPILL_MAX_BYTES, S3Options
from mldbg.store.s3.store import S3Store

__all__ = ["DEFAULT_SPILL_MAX_BYTES", "S3Options", "S3Store", "parse_url"]
