"""The run's small JSON markers (FORMAT.md), each encoded and decoded in one place.

- `WorkerMeta`: `workers/<worker>/meta.json`, who writes a worker's records;
- `End`: `workers/<worker>/END`, the worker finished (or was stopped);
- `StopRequest`: `control/stop`, a watcher asks the training to stop;
- `StopAt`: `control/stop_at`, the step every worker of a distributed job stops at.

Writers and readers go through `save` and `load`, so a field is named once. A damaged marker
(not JSON, not an object, a field of the wrong type) raises `CorruptRecord` naming the file;
a number out of its range (a pid no process can have, a world size of 0, a count past 64 bits,
a time that is not finite) is damage too. A missing field takes its default and an unknown one
is ignored, as FORMAT.md's compatibility rule says. Each reader decides what a damaged marker means to it (skip, warn, stop anyway).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any, Protocol, TypeVar

from mldbg.errors import CorruptRecord
from mldbg.store.base import Store
from mldbg.store.format import FORMAT_VERSION


@dataclass(frozen=True)
class WorkerMeta:
    """Who writes a worker's records. `expected_workers` tells readers how many workers must
    end before the run is complete; `host`, `pid` and `process` let a stop action signal the
    process: `process` is the process's identity (`mldbg.store.process.identity`), which proves
    that a live pid is still the training's before a signal is sent."""

    worker: str = ""
    rank: int = 0
    world_size: int = 1
    expected_workers: int = 1
    framework: str = ""
    host: str = ""
    pid: int | None = None
    started: float | None = None  # unix time
    process: str = ""  # the process's identity (start time): "" when it could not be told
    format: int = FORMAT_VERSION

    def encode(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def decode(cls, blob: bytes, where: str) -> WorkerMeta:
        d = _object(blob, where)
        version = _get(d, "format", int, FORMAT_VERSION, where)
        if version > FORMAT_VERSION:
            raise CorruptRecord(
                f"{where}: written in format {version}, this mldbg reads up to {FORMAT_VERSION}: upgrade mldbg"
            )
        return cls(
            worker=_get(d, "worker", str, "", where),
            rank=_count(d, "rank", 0, 0, MAX_WORKERS - 1, where),
            world_size=_count(d, "world_size", 1, 1, MAX_WORKERS, where),
            expected_workers=_count(d, "expected_workers", 1, 1, MAX_WORKERS, where),
            framework=_get(d, "framework", str, "", where),
            host=_get(d, "host", str, "", where),
            pid=_count(d, "pid", None, 1, MAX_PID, where),
            started=_time(d, "started", where),
            process=_get(d, "process", str, "", where),
            format=version,
        )


@dataclass(frozen=True)
class End:
    """A worker's end marker, written after its last segment: readers know nothing follows."""

    last_step: int | None = None  # None: no step ended
    ended: float | None = None  # unix time
    stopped: bool = False  # a stop request ended the training
    # records that never reached the store (queue full, store refusing writes, disk full at
    # exit), and the steps they belonged to: how many, the first and the last
    lost_records: int = 0
    lost_steps: int = 0
    first_lost_step: int | None = None
    last_lost_step: int | None = None
    # the number of the worker's last segment (segments are numbered from 1 without gaps), so
    # a reader notices the newest ones missing; None where the store numbers them late (S3)
    last_segment: int | None = None

    def encode(self) -> bytes:
        d = asdict(self)
        if self.last_segment is None:
            del d["last_segment"]
        if not self.lost_records:  # a run that lost nothing keeps the three fields of old
            for key in ("lost_records", "lost_steps", "first_lost_step", "last_lost_step"):
                del d[key]
        return json.dumps(d).encode()

    @classmethod
    def decode(cls, blob: bytes, where: str) -> End:
        d = _object(blob, where)
        return cls(
            last_step=_get(d, "last_step", int, None, where),
            ended=_time(d, "ended", where),
            stopped=_get(d, "stopped", bool, False, where),
            lost_records=_get(d, "lost_records", int, 0, where),
            lost_steps=_get(d, "lost_steps", int, 0, where),
            first_lost_step=_get(d, "first_lost_step", int, None, where),
            last_lost_step=_get(d, "last_lost_step", int, None, where),
            last_segment=_get(d, "last_segment", int, None, where),
        )


@dataclass(frozen=True)
class StopRequest:
    """A watcher's request that the training stop. `requested` (unix time) tells a request for
    this run from one an earlier run in the same place left behind."""

    reason: str = ""
    rule: str = ""
    step: int | None = None
    requested: float | None = None
    by: str = ""
    findings: tuple[dict[str, Any], ...] = ()

    def encode(self) -> bytes:
        return json.dumps({**asdict(self), "findings": list(self.findings)}).encode()

    @classmethod
    def decode(cls, blob: bytes, where: str) -> StopRequest:
        d = _object(blob, where)
        findings = _get(d, "findings", list, [], where)
        if not all(isinstance(f, dict) for f in findings):
            raise CorruptRecord(f"{where}: 'findings' must be a list of objects")
        return cls(
            reason=_get(d, "reason", str, "", where),
            rule=_get(d, "rule", str, "", where),
            step=_get(d, "step", int, None, where),
            requested=_time(d, "requested", where),
            by=_get(d, "by", str, "", where),
            findings=tuple(findings),
        )


@dataclass(frozen=True)
class StopAt:
    """The step every worker stops after, picked by worker 0 for the request whose
    `requested` time is `request`."""

    step: int
    request: float | None = None
    worker: int = 0

    def encode(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def decode(cls, blob: bytes, where: str) -> StopAt:
        d = _object(blob, where)
        if "step" not in d:
            raise CorruptRecord(f"{where}: no 'step'")
        return cls(
            step=_get(d, "step", int, 0, where),
            request=_time(d, "request", where),
            worker=_get(d, "worker", int, 0, where),
        )


class Marker(Protocol):
    def encode(self) -> bytes: ...


M = TypeVar("M", WorkerMeta, End, StopRequest, StopAt)
MAX_WORKERS = 1 << 20  # ranks, world sizes: more is damage, not a job
MAX_PID = (1 << 31) - 1  # what os.kill takes
_INT64 = 1 << 63


def save(store: Store, key: str, marker: Marker) -> None:
    """Write `marker` at `key` (one atomic write, as every file of a run)."""
    store.write(key, [marker.encode()])


def load(store: Store, key: str, kind: type[M]) -> M | None:
    """The marker of type `kind` at `key`; None when there is none. Raises CorruptRecord,
    naming the file, when it is damaged."""
    where = f"{store.url}/{key}"
    try:
        blob = store.read(key)
    except FileNotFoundError:
        return None
    except OSError as e:  # a folder where the file should be, an unreadable file
        raise CorruptRecord(f"{where}: cannot be read ({e.strerror or e})") from None
    return kind.decode(blob, where)


def _object(blob: bytes, where: str) -> dict[str, Any]:
    try:
        data = json.loads(blob)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # RecursionError: deep nesting
        raise CorruptRecord(f"{where}: not valid JSON ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict):
        raise CorruptRecord(f"{where}: not a JSON object")
    return data


def _get(d: dict[str, Any], key: str, kind: type, default: Any, where: str) -> Any:
    value = d.get(key)
    if value is None:
        return default
    # Python counts a bool as an int; a JSON true is no count
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise CorruptRecord(f"{where}: {key!r} should be {kind.__name__}, got {_short(value)}")
    if isinstance(value, int) and not -_INT64 <= value < _INT64:
        raise CorruptRecord(f"{where}: {key!r} is out of range ({_short(value)})")
    return value


def _count(d: dict[str, Any], key: str, default: Any, low: int, high: int, where: str) -> Any:
    value = _get(d, key, int, default, where)
    if value is not None and not low <= value <= high:
        raise CorruptRecord(f"{where}: {key!r} should be in {low}..{high}, got {_short(value)}")
    return value


def _time(d: dict[str, Any], key: str, where: str) -> float | None:
    value = d.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CorruptRecord(f"{where}: {key!r} should be a unix time, got {_short(value)}")
    if isinstance(value, int) and not -_INT64 <= value < _INT64 or not math.isfinite(value):
        raise CorruptRecord(f"{where}: {key!r} is not a unix time ({_short(value)})")
    return float(value)


def _short(value: Any) -> str:
    """A value for a one-line message: a damaged file may hold a megabyte in one field."""
    text = (
        repr(value)
        if not isinstance(value, int) or abs(value) < 1 << 64
        else f"an integer of {value.bit_length()} bits"
    )
    return text if len(text) <= 80 else text[:77] + "..."
