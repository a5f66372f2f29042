"""An smdebug / SageMaker Debugger output directory, seen as an mldbg run: `SmdebugStore`.

smdebug writes, per step and worker, one TFRecord event file and one JSON index file:

    <run>/events/<step:012d>/<step:012d>_<worker>.tfevents
    <run>/index/<step // 1000:09d>/<step:012d>_<worker>.json   {"meta": {"mode", "mode_step",
                                                                 "event_file_name"}, "tensor_payload", "shape_payload"}
    <run>/collections/<n:09d>/<worker>_collections.json
    <run>/training_job_end.ts                                   written when training ended

The store answers the keys of mldbg's format (FORMAT.md) from those files, so the Trial, the
rules, the reports and the dashboard read an smdebug run unchanged: each index file of a
worker is one segment (`workers/<worker>/index/<n>.safetensors`, n = 1, 2, ... over the worker's saved
steps in order: segments are numbered without gaps), whose index and data
files are built on demand from the step's event file; `meta.json` and `END` come from the run
(END once `training_job_end.ts` exists). smdebug's reductions (`smdebug/reductions/[abs_]<r>/<tensor>`)
become the saved reductions of `<tensor>`'s record at that step, a record with no raw value
where only reductions were saved (dtype float32 and the shape from `shape_payload`, else ()).

Nothing of the smdebug run is ever written: the store is read-only, except a watcher's own
place (`watch/`), which it keeps beside the run as it does for any run.
"""

from __future__ import annotations

import bisect
import builtins
import contextlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mldbg.errors import CorruptRecord, StoreError
from mldbg.store import Store, layout
from mldbg.store.base import Buffer
from mldbg.store.format import Record, checksum, encode_index, encode_safetensors
from mldbg.store.layout import WATCH
from mldbg.store.markers import End, WorkerMeta
from mldbg.store.reductions import CODES
from mldbg.trial.smdebug import proto, tfrecord

END_FILE = "training_job_end.ts"
REDUCTIONS_PREFIX = "smdebug/reductions/"
_MODES = {"TRAIN": 1, "EVAL": 2, "PREDICT": 3, "GLOBAL": 4}
_REDUCTIONS = {(name, is_abs) for name, is_abs in CODES.values()}
_INDEX_NAME = re.compile(r"^(\d+)_(.+)\.json$")
_SEGMENT = re.compile(r"^workers/([^/]+)/(index|data)/(\d{10})\.safetensors$")
_CACHED_SEGMENTS = 16
#: an event file up to this size is read whole (one read per step, every payload checksummed);
#: in a larger one each record is read apart, and a large tensor only as far as its header:
#: its bytes are read from the event file itself when asked for
WHOLE_FILE_BYTES = 4 << 20
HEAD_BYTES = 4096


@dataclass
class _Segment:
    """One step of one worker in mldbg's format: its index file, and its data file, which is
    the event file itself (raw tensor bytes at their place in it) followed by `side` (the
    values that were decoded: small ones, and those not stored as raw bytes)."""

    index: bytes
    event_key: str
    event_size: int  # 0 when every value is in `side`
    side: bytes


def is_smdebug_run(store: Store) -> bool:
    """True when `store` holds an smdebug output directory and no mldbg run: one listing."""
    try:
        top = store.children("")
    except (OSError, StoreError):  # unreachable or not a folder: the trial says why, as for any run
        return False
    return "workers" not in top and ("index" in top or "events" in top)


class SmdebugStore(Store):
    """A read-only Store that shows the smdebug run in `inner` in mldbg's format."""

    def __init__(self, inner: Store):
        self.inner = inner
        self.url = inner.url
        self.remote = inner.remote
        self._lock = threading.Lock()
        # (worker, step) -> the smdebug index key, refreshed by each listing
        self._index_keys: dict[tuple[str, int], str] = {}
        self._steps: dict[str, list[int]] = {}  # worker -> its steps in order: segment n is steps[n - 1]
        self._segments: OrderedDict[tuple[str, int], _Segment] = OrderedDict()
        self._collections: dict[str, _Collections] = {}

    # the run's smdebug files --------------------------------------------------------------
    def _scan(self) -> dict[str, list[int]]:
        """worker -> its steps with an index file, sorted (one listing of index/, and of
        events/ while training runs: a step shows once its event file is there too, as smdebug
        writes the index last, so a live reader never meets a step it cannot read yet)."""
        ended = self.inner.exists(END_FILE)  # before listing: nothing comes after it
        events = None if ended else {k.rsplit("/", 1)[-1] for k in self.inner.list("events/")}
        found: dict[str, list[int]] = {}
        for key in self.inner.list("index/"):
            name = key.rsplit("/", 1)[-1]
            m = _INDEX_NAME.match(name)
            if m is None or (events is not None and name[: -len(".json")] + ".tfevents" not in events):
                continue
            step, worker = int(m.group(1)), m.group(2)
            self._index_keys[(worker, step)] = key
            found.setdefault(worker, []).append(step)
        steps = {w: sorted(s) for w, s in found.items()}
        self._steps = steps
        return steps

    def _seq(self, worker: str, step: int) -> int:
        """The segment number of `worker`'s `step` (its place among the saved steps, from 1)."""
        steps = self._steps.get(worker, [])
        i = bisect.bisect_left(steps, step)
        if i == len(steps) or steps[i] != step:
            steps = self._scan().get(worker, [])
            i = bisect.bisect_left(steps, step)
        return i + 1

    def _step(self, worker: str, seq: int) -> int:
        """The step of `worker`'s segment number `seq`; -1 when there is none (yet)."""
        steps = self._steps.get(worker, [])
        if not 1 <= seq <= len(steps):
            steps = self._scan().get(worker, [])
        return steps[seq - 1] if 1 <= seq <= len(steps) else -1

    def _collections_of(self, worker: str) -> _Collections:
        """The collections smdebug recorded (the worker's collections file, else worker_0's,
        else any): each holds its `tensor_names` and the tensors its `include_regex` finds
        anywhere in their name, as smdebug's trial counts them."""
        cached = self._collections.get(worker)
        if cached is not None:
            return cached
        keys = [k for k in self.inner.list("collections/") if k.endswith("_collections.json")]
        own = [k for k in keys if k.rsplit("/", 1)[-1] == f"{worker}_collections.json"]
        chosen = (own or [k for k in keys if k.endswith("/worker_0_collections.json")] or keys)[-1:]
        found = _Collections()
        for key in chosen:
            where = f"{self.url}/{key}"
            try:
                doc = json.loads(self.inner.read(key))
                for name, coll in doc["collections"].items():
                    found.add(str(name), coll.get("tensor_names") or [], coll.get("include_regex") or [])
            except FileNotFoundError:
                pass
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise CorruptRecord(
                    f"{where}: not an smdebug collections file ({type(e).__name__}: {e})"
                ) from None
        if chosen:  # a run still starting may not have written it yet: look again later
            self._collections[worker] = found
        return found

    def _segment(self, worker: str, step: int) -> _Segment:
        """`worker`'s step `step` in mldbg's format."""
        with self._lock:
            found = self._segments.get((worker, step))
            if found is not None:
                self._segments.move_to_end((worker, step))
                return found
        key = self._index_keys.get((worker, step))
        if key is None:
            self._scan()
            key = self._index_keys.get((worker, step))
            if key is None:
                raise FileNotFoundError(f"{self.url}: no smdebug index for step {step} of {worker}")
        built = self._build(worker, step, key)
        with self._lock:
            self._segments[(worker, step)] = built
            while len(self._segments) > _CACHED_SEGMENTS:
                self._segments.popitem(last=False)
        return built

    def _build(self, worker: str, step: int, index_key: str) -> _Segment:
        where = f"{self.url}/{index_key}"
        try:
            doc = json.loads(self.inner.read(index_key))
            meta = doc["meta"]
            mode = _MODES[str(meta["mode"]).strip()]
            mode_step = int(meta["mode_step"])
            event_key = str(meta.get("event_file_name") or "")
            shapes = {
                str(s["tensorname"]): tuple(int(d) for d in s["shape"])
                for s in doc.get("shape_payload") or []
            }
            payload = [
                (str(t["tensorname"]), int(t["start_idx"]), int(t["length"]))
                for t in doc.get("tensor_payload") or []
            ]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptRecord(f"{where}: not an smdebug index file ({type(e).__name__}: {e})") from None
        values: list[tuple[proto.TensorValue, tuple[int, int] | None]] = []
        event_size = 0
        if payload:
            event_where = f"{self.url}/{event_key}"
            try:
                event_size = self.inner.size(event_key)
                if event_size <= WHOLE_FILE_BYTES:
                    blob = self.inner.read(event_key)
                    event_size = 0  # every value decoded: all of them in the side part
                    for _, record in tfrecord.records(blob, event_where):
                        values.extend((v, None) for v in proto.decode_event(record, event_where).values)
                else:
                    for tag, start, length in payload:
                        values.append(self._located(event_key, event_where, event_size, tag, start, length))
            except FileNotFoundError:
                raise CorruptRecord(
                    f"{event_where}: missing, but its index {index_key} refers to it"
                ) from None
            for v, _ in values:
                if not v.plugins:
                    continue  # located from its header: the index says its mode
                mode_of = _MODES.get(_mode_name(v.plugins.get("mode")), mode)
                if mode_of != mode or int(v.plugins.get("mode_step", mode_step)) != mode_step:
                    raise CorruptRecord(
                        f"{event_where}: tensor {v.tag!r} is of mode {mode_of} step "
                        f"{v.plugins.get('mode_step')}, its index {index_key} says {mode} step {mode_step}"
                    )
        return self._encode(worker, step, mode, mode_step, values, shapes, event_key, event_size)

    def _located(
        self, key: str, where: str, size: int, tag: str, start: int, length: int
    ) -> tuple[proto.TensorValue, tuple[int, int] | None]:
        """One record of a large event file: decoded whole when small, else located from its
        first bytes ((absolute offset, length) of its raw bytes, which stay in the file)."""
        if start < 0 or length < 16 or start + length > size:
            raise CorruptRecord(
                f"{where}: the record of {tag!r} at bytes {start}..{start + length} does not fit in "
                f"the file's {size} bytes (truncated?)"
            )
        if length > HEAD_BYTES:
            head = self.inner.read(key, start, HEAD_BYTES)
            payload_length = tfrecord.payload_length(head, where, start)
            if payload_length != length - 16:
                raise CorruptRecord(
                    f"{where}: the record at byte {start} is {payload_length + 16} bytes, its index says {length}"
                )
            found = proto.locate_tensor(memoryview(head)[12:], payload_length)
            if found is not None and found.dtype:
                count = int(np.prod(found.shape)) if found.shape else 1
                if found.content_length == count * proto.DTYPES_BY_NAME[found.dtype].itemsize:
                    value = proto.TensorValue(found.tag, found.dtype, found.shape, None)
                    return value, (start + 12 + found.content_offset, found.content_length)
        blob = self.inner.read(key, start, length)
        records = [record for _, record in tfrecord.records(blob, f"{where} (at byte {start})")]
        decoded = [v for record in records for v in proto.decode_event(record, where).values]
        if len(decoded) != 1:
            raise CorruptRecord(f"{where}: the record at byte {start} holds {len(decoded)} tensors, not one")
        return decoded[0], None

    def _encode(
        self,
        worker: str,
        step: int,
        mode: int,
        mode_step: int,
        values: list[tuple[proto.TensorValue, tuple[int, int] | None]],
        shapes: dict[str, tuple[int, ...]],
        event_key: str,
        event_size: int,
    ) -> _Segment:
        collections = self._collections_of(worker)
        records: dict[str, Record] = {}
        located: dict[str, tuple[int, int]] = {}
        reductions: list[tuple[str, str, bool, float]] = []
        for v, at in values:
            if v.tag.startswith(REDUCTIONS_PREFIX) and v.array is not None:
                parsed = _reduction(v.tag)
                if parsed is not None and v.array.size == 1:
                    reductions.append((*parsed, float(v.array.reshape(-1)[0])))
                    continue
            if at is None and v.array is None:
                continue  # strings and complex numbers: mldbg's format has no such dtype
            array = np.ascontiguousarray(v.array) if at is None else _sized(at[1])
            if at is None:
                located.pop(v.tag, None)
            else:
                located[v.tag] = at
            records[v.tag] = Record(
                name=v.tag, step=step, mode=mode, mode_step=mode_step, array=array,
                dtype=v.dtype, shape=v.shape, collections=collections.of(v.tag),
                crc=None if at is None else self._checksum(event_key, *at),
            )  # fmt: skip
        for tensor, name, is_abs, value in reductions:
            rec = records.get(tensor)
            if rec is None:
                rec = records[tensor] = Record(
                    name=tensor, step=step, mode=mode, mode_step=mode_step, array=None, dtype="F32",
                    shape=shapes.get(tensor, ()), collections=collections.of(tensor),
                )  # fmt: skip
            rec.reductions[(name, is_abs)] = value
        ordered = list(records.values())
        side = [r for r in ordered if r.array is not None and r.name not in located]
        parts, starts = encode_safetensors(
            [(f"{step}/{r.name}", r.dtype, r.shape, r.array) for r in side],
            {"mldbg_format": "2", "worker": worker, "smdebug": "converted on read"},
        )
        offsets = {r.name: event_size + at for r, at in zip(side, starts, strict=True)}
        offsets.update({name: at[0] for name, at in located.items()})
        index = encode_index(
            ordered,
            [offsets.get(r.name, -1) for r in ordered],
            worker,
            layout.data_key(worker, self._seq(worker, step)),
        )
        return _Segment(_join(index), event_key, event_size, _join(parts))

    def _checksum(self, key: str, start: int, length: int) -> int:
        """The CRC-32 of a value that stays in the event file, read in 4 MiB pieces (the index
        of format 3 holds one for every value, and readers verify it)."""
        crc, at, end = 0, start, start + length
        while at < end:
            piece = self.inner.read(key, at, min(4 << 20, end - at))
            if not piece:
                break  # truncated: the read of the value says so
            crc, at = checksum(piece, crc), at + len(piece)
        return crc

    # the Store interface, read side -------------------------------------------------------
    def children(self, prefix: str) -> builtins.list[str]:
        p = prefix.strip("/")
        if p == layout.WORKERS.strip("/"):
            return sorted(self._scan())
        if p.startswith(layout.WORKERS):
            worker = p[len(layout.WORKERS) :]
            return ["index"] if worker in self._scan() else []
        if p == "":
            return sorted({"workers", *(c for c in self.inner.children("") if c == "watch")})
        return self.inner.children(prefix) if p.startswith(WATCH.rstrip("/")) else []

    def list(self, prefix: str, start_after: str | None = None) -> builtins.list[str]:
        p = prefix.strip("/") + "/"
        if p.startswith(WATCH) or p == "/":
            keys = self.inner.list(prefix, start_after) if p.startswith(WATCH) else []
            return keys
        keys = []
        for worker, steps in self._scan().items():
            for seq in range(1, len(steps) + 1):
                keys.append(layout.index_key(worker, seq))
                keys.append(layout.data_key(worker, seq))
            keys.append(layout.meta_key(worker))
            if self.inner.exists(END_FILE):
                keys.append(layout.end_key(worker))
        keys = sorted(k for k in keys if k.startswith(p))
        return [k for k in keys if start_after is None or k > start_after]

    def read(self, key: str, start: int = 0, length: int | None = None) -> bytes:
        m = _SEGMENT.match(key)
        if m is not None and m.group(2) == "data":
            # the event file itself, then the decoded values: a value is one ranged read
            seg = self._segment(m.group(1), self._step(m.group(1), int(m.group(3))))
            end = seg.event_size + len(seg.side) if length is None else start + length
            head = b""
            if start < seg.event_size:
                head = self.inner.read(seg.event_key, start, min(end, seg.event_size) - start)
            tail = seg.side[max(start - seg.event_size, 0) : max(end - seg.event_size, 0)]
            return head + tail
        blob = self._blob(key)
        end = len(blob) if length is None else start + length
        return blob[start:end]

    def _blob(self, key: str) -> bytes:
        if key.startswith(WATCH):
            return self.inner.read(key)
        m = _SEGMENT.match(key)
        if m is not None:
            return self._segment(m.group(1), self._step(m.group(1), int(m.group(3)))).index
        for worker in self._workers_named(key):
            if key == layout.meta_key(worker):
                return WorkerMeta(worker=worker, framework="smdebug").encode()
            if key == layout.end_key(worker):
                return self._end(worker)
        raise FileNotFoundError(f"{self.url}/{key}: not part of an smdebug run")

    def _workers_named(self, key: str) -> builtins.list[str]:
        parts = key.split("/")
        return [parts[1]] if len(parts) == 3 and parts[0] + "/" == layout.WORKERS else []

    def _end(self, worker: str) -> bytes:
        if not self.inner.exists(END_FILE):
            raise FileNotFoundError(f"{self.url}/{END_FILE}: training has not ended")
        steps = self._scan().get(worker, [])
        ended = None
        with contextlib.suppress(ValueError, UnicodeDecodeError):  # smdebug writes the end time
            text = self.inner.read(END_FILE).decode().strip()
            ended = float(text) if text else None
        return End(last_step=steps[-1] if steps else None, ended=ended).encode()

    def exists(self, key: str) -> bool:
        try:
            if key.startswith(WATCH):
                return self.inner.exists(key)
            self._check(key)
        except FileNotFoundError:
            return False
        return True

    def _check(self, key: str) -> None:
        m = _SEGMENT.match(key)
        if m is not None:
            if (m.group(1), self._step(m.group(1), int(m.group(3)))) not in self._index_keys:
                raise FileNotFoundError(key)
            return
        self._blob(key)

    # writes: only a watcher's place ---------------------------------------------------------
    def write(self, key: str, parts: Sequence[Buffer]) -> None:
        if key.startswith(WATCH):
            self.inner.write(key, parts)
            return
        raise StoreError(
            f"{self.url}: an smdebug run is read-only for mldbg ({key} not written); "
            "record new runs with an mldbg hook"
        )

    def delete(self, key: str) -> None:
        if key.startswith(WATCH):
            self.inner.delete(key)
            return
        raise StoreError(f"{self.url}: an smdebug run is read-only for mldbg ({key} not removed)")

    def next_segment(self, worker: str) -> int:
        raise StoreError(
            f"{self.url}: an smdebug run is read-only for mldbg; record new runs with an mldbg hook"
        )

    def close(self) -> None:
        self.inner.close()

    def __repr__(self) -> str:
        return f"SmdebugStore({self.url!r})"


class _Collections:
    """smdebug's collections: names listed, and regexes (`re.search`, as smdebug matches)."""

    def __init__(self) -> None:
        self._names: dict[str, set[str]] = {}
        self._regexes: dict[str, list[re.Pattern[str]]] = {}
        self._of: dict[str, tuple[str, ...]] = {}

    def add(self, name: str, tensors: Sequence[str], regexes: Sequence[str]) -> None:
        self._names[name] = {str(t) for t in tensors}
        compiled = []
        for r in regexes:
            with contextlib.suppress(re.error, TypeError):  # smdebug could not have matched it either
                compiled.append(re.compile(r))
        self._regexes[name] = compiled

    def of(self, tensor: str) -> tuple[str, ...]:
        found = self._of.get(tensor)
        if found is None:
            found = self._of[tensor] = tuple(
                c
                for c in self._names
                if tensor in self._names[c] or any(r.search(tensor) for r in self._regexes[c])
            )
        return found


def _mode_name(content: Any) -> str:
    """smdebug's "mode" plugin content: the ModeKeys value as a number ("1") or a name."""
    if content is None:
        return ""
    text = str(content).strip()
    if text.isdigit():
        return {1: "TRAIN", 2: "EVAL", 3: "PREDICT", 4: "GLOBAL"}.get(int(text), "")
    return text.rsplit(".", 1)[-1]


def _reduction(tag: str) -> tuple[str, str, bool] | None:
    """`smdebug/reductions/[abs_]<reduction>/<tensor>` -> (tensor, reduction, abs)."""
    rest = tag[len(REDUCTIONS_PREFIX) :]
    head, _, tensor = rest.partition("/")
    is_abs = head.startswith("abs_")
    name = head[4:] if is_abs else head
    if not tensor or (name, is_abs) not in _REDUCTIONS:
        return None
    return tensor, name, is_abs


def _sized(nbytes: int) -> np.ndarray:
    """A stand-in of `nbytes` bytes that holds none (stride 0): the index is told the size of
    a value that stays in the event file."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, dtype=np.uint8), shape=(nbytes,), strides=(0,))


def _join(parts: Sequence[Any]) -> bytes:
    return b"".join(p.tobytes() if isinstance(p, np.ndarray) else bytes(p) for p in parts)
