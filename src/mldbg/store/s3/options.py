"""Every setting of the S3 store in one object, `S3Options`.

A setting left out comes from the environment (`MLDBG_S3_*`) when the options are made, else from
its default: `S3Options()` is what `S3Store(url)` uses, and its repr shows what it got.
`open_store(url, **settings)` (and so a hook's `spill_max_bytes=`) builds one with
`S3Options.from_keywords`, which refuses unknown names.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mldbg.errors import InvalidConfig

ENV_ENDPOINT = "MLDBG_S3_ENDPOINT"
ENV_BLOCK_SECONDS = "MLDBG_S3_BLOCK_SECONDS"
ENV_SPILL = "MLDBG_S3_SPILL"  # "0" turns the spill folder off
ENV_SPILL_DIR = "MLDBG_S3_SPILL_DIR"
ENV_SPILL_MAX_MB = "MLDBG_S3_SPILL_MAX_MB"
ENV_UPLOAD_FROM = "MLDBG_S3_UPLOAD_FROM"
ENV_CACHE_MB = "MLDBG_S3_CACHE_MB"

DEFAULT_BLOCK_SECONDS = 5.0
DEFAULT_SPILL_MAX_BYTES = 4 << 30
DEFAULT_CACHE_BYTES = 256 << 20
MiB = 1 << 20


def default_spill_dir() -> Path:
    """`~/.cache/mldbg/s3-spill` (or below `XDG_CACHE_HOME`)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "mldbg" / "s3-spill"


def _env_number(name: str, unit: str) -> float | None:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise InvalidConfig(f"{name}={text!r} is not a number of {unit}") from None


def _env_block_seconds() -> float:
    seconds = _env_number(ENV_BLOCK_SECONDS, "seconds")
    return DEFAULT_BLOCK_SECONDS if seconds is None else seconds


def _env_spill() -> bool:
    return os.environ.get(ENV_SPILL, "1").strip().lower() not in ("0", "false", "no", "off")


def _env_spill_dir() -> str | os.PathLike[str]:
    return os.environ.get(ENV_SPILL_DIR) or default_spill_dir()


def _env_spill_max_bytes() -> int:
    mb = _env_number(ENV_SPILL_MAX_MB, "MiB")
    return DEFAULT_SPILL_MAX_BYTES if mb is None else int(mb * MiB)


def _env_cache_bytes() -> int:
    mb = _env_number(ENV_CACHE_MB, "MiB")
    return DEFAULT_CACHE_BYTES if mb is None else int(mb * MiB)


@dataclass(frozen=True)
class S3Options:
    """How an `S3Store` reaches its bucket, waits for it, spills while it is away, and caches.

    The environment variable of a setting, where it has one, is named in its comment.
    """

    # where the bucket is (None: the standard AWS chain)
    endpoint_url: str | None = None  # MLDBG_S3_ENDPOINT; then path-style addressing
    region: str | None = None
    profile: str | None = None
    # waiting and retrying
    block_seconds: float = field(default_factory=_env_block_seconds)  # MLDBG_S3_BLOCK_SECONDS
    #   the longest a write or an existence check waits on an unreachable bucket (then it spills)
    retry_seconds: float = 10.0  # retries of a read before StoreError
    read_timeout: float = 30.0  # socket timeout of reads, listings and background uploads
    probe_seconds: float = 1.0  # while away and nothing uploads: one attempt per interval at most
    max_backoff: float = 2.0  # longest pause of the uploader between attempts
    exists_ttl: float = 1.0  # a missing key (the stop request) is asked for again this often
    # the spill folder, while the bucket is away
    spill: bool = field(default_factory=_env_spill)  # MLDBG_S3_SPILL=0 turns it off
    spill_dir: str | os.PathLike[str] = field(default_factory=_env_spill_dir)  # MLDBG_S3_SPILL_DIR
    spill_max_bytes: int = field(default_factory=_env_spill_max_bytes)  # MLDBG_S3_SPILL_MAX_MB
    #   bound of a run's spill folder: writes past it are dropped and counted
    drop_warning_seconds: float = 30.0  # at most one warning about dropped writes this often
    upload_from: str | os.PathLike[str] | None = None  # MLDBG_S3_UPLOAD_FROM=ROOT: ROOT/bucket/prefix
    #   write every object to this directory first, upload it in the background
    close_timeout: float = 60.0  # at close, give up after this long without progress (it stays spilled)
    # objects and the read cache
    multipart_bytes: int = 16 << 20  # larger objects go up in parts of this size
    cache_bytes: int = field(default_factory=_env_cache_bytes)  # MLDBG_S3_CACHE_MB
    block_bytes: int = 1 << 20  # read-cache block: a ranged read fetches whole blocks

    def __post_init__(self) -> None:
        if self.endpoint_url is None:
            object.__setattr__(self, "endpoint_url", os.environ.get(ENV_ENDPOINT) or None)
        if self.spill_max_bytes < 0:
            raise InvalidConfig(f"spill_max_bytes must be >= 0, got {self.spill_max_bytes}")

    @classmethod
    def from_keywords(cls, **settings: Any) -> S3Options:
        """Options from keyword settings, as `open_store(url, spill_max_bytes=...)` passes them
        through; a None leaves that setting to the environment or its default."""
        names = [f.name for f in dataclasses.fields(cls)]
        for name in settings:
            if name not in names:
                raise InvalidConfig(f"{name!r} is not an S3 setting; the settings are: {', '.join(names)}")
        return cls(**{name: value for name, value in settings.items() if value is not None})

    def upload_dir(self, bucket: str, prefix: str) -> Path | None:
        """Where `upload_from` puts the run: that directory, or `MLDBG_S3_UPLOAD_FROM/bucket/prefix`."""
        if self.upload_from is not None:
            return Path(self.upload_from)
        root = os.environ.get(ENV_UPLOAD_FROM)
        return Path(root) / bucket / prefix if root else None
