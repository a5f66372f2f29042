"""Columnar chunks of samples: the unit the profiler writes through the store.

A stream (a node's system samples, a worker's steps) is a folder of chunks. Each chunk is a
small safetensors file whose tensors are columns (`time`, `cpu` as samples x cores, ...),
written atomically every `flush_seconds`; a reader lists the chunks newer than the last one
it read, so following a live run costs what is new.
"""

from __future__ import annotations

import json
import logging
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mldbg.profiler import layout
from mldbg.store.base import Store
from mldbg.store.format import decode_header, dtype_name, numpy_dtype

log = logging.getLogger("mldbg")

META_KEY = "mldbg_profiler"


class ChunkWriter:
    """Buffers rows of one stream and writes them as one chunk per `flush()`.

    `columns` maps a column name to its NumPy dtype; a row gives every column a scalar or,
    for 2-D columns (per core, per GPU), a sequence of fixed length. Store errors never
    propagate: the rows are kept (up to `max_rows`, oldest dropped) and written next time.
    """

    def __init__(
        self,
        store: Store,
        prefix: str,
        columns: Mapping[str, Any],
        meta: Mapping[str, Any] | None = None,
        max_rows: int = 100_000,
    ):
        self.store = store
        self.prefix = prefix
        self.columns = {k: np.dtype(v) for k, v in columns.items()}
        self.meta = dict(meta or {})
        self.max_rows = max_rows
        self.rows: list[Sequence[Any]] = []
        self.dropped = 0
        self.written = 0
        self._error = ""
        keys = store.list(prefix)
        self.seq = int(keys[-1].rsplit("/", 1)[1].split(".")[0]) + 1 if keys else 1

    def append(self, row: Sequence[Any]) -> None:
        """One row: values in the order of `columns`."""
        self.rows.append(row)
        if len(self.rows) > self.max_rows:
            del self.rows[0]
            self.dropped += 1

    def add(self, **values: Any) -> None:
        """One row by column name (NaN for a missing float column)."""
        self.append([values.get(k, np.nan) for k in self.columns])

    def flush(self) -> bool:
        """Write the buffered rows as one chunk. False when the store refused (kept for later)."""
        if not self.rows:
            return True
        rows = self.rows
        try:
            parts = encode_chunk(self.columns, rows, self.meta)
            self.store.write(layout.chunk_key(self.prefix, self.seq), parts)
        except Exception as e:
            msg = f"{type(e).__name__}: {e}"
            if msg != self._error:
                log.error(
                    "mldbg: cannot write profiler samples to %s/%s, will retry: %s",
                    self.store.url,
                    self.prefix,
                    msg,
                )
            self._error = msg
            return False
        self.rows = []
        self.seq += 1
        self.written += len(rows)
        self._error = ""
        return True


def encode_chunk(
    columns: Mapping[str, np.dtype[Any]], rows: Sequence[Sequence[Any]], meta: Mapping[str, Any]
) -> list[bytes]:
    """Rows -> the parts of one safetensors file of columns (written here, not with the
    tensor writer's encoder: chunks are small and their format is the profiler's own)."""
    header: dict[str, Any] = {"__metadata__": {META_KEY: json.dumps({**meta, "rows": len(rows)})}}
    blobs = []
    pos = 0
    for i, (name, dt) in enumerate(columns.items()):
        arr = np.asarray([r[i] for r in rows], dtype=dt)
        if arr.ndim == 2 and arr.shape[1] == 0:
            arr = arr.reshape(len(rows), 0)
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {
            "dtype": dtype_name(arr),
            "shape": list(arr.shape),
            "data_offsets": [pos, pos + len(raw)],
        }
        blobs.append(raw)
        pos += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return [struct.pack("<Q", len(head)), head, *blobs]


def decode_chunk(blob: bytes, where: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(columns, chunk metadata) of one chunk. Raises CorruptRecord naming `where`."""
    header, base = decode_header(blob, where)
    meta_raw = header.get("__metadata__", {}).get(META_KEY, "{}")
    try:
        meta = json.loads(meta_raw)
    except ValueError:
        meta = {}
    cols: dict[str, np.ndarray] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        dt = numpy_dtype(entry["dtype"])
        arr = np.frombuffer(blob, dtype=dt, count=(end - start) // dt.itemsize, offset=base + start)
        cols[name] = arr.reshape(entry["shape"])
    return cols, meta


class StreamReader:
    """Follows one stream (folder of chunks): `refresh()` reads only new chunks."""

    def __init__(self, store: Store, prefix: str):
        self.store = store
        self.prefix = prefix
        self.last_key: str | None = None
        self.parts: list[dict[str, np.ndarray]] = []
        self.meta: dict[str, Any] = {}
        self.corrupt: list[str] = []
        self._cache: dict[str, np.ndarray] | None = None

    def refresh(self) -> int:
        new = 0
        for key in self.store.list(self.prefix, self.last_key):
            if not key.endswith(".safetensors"):
                continue
            self.last_key = key
            try:
                cols, meta = decode_chunk(self.store.read(key), f"{self.store.url}/{key}")
            except FileNotFoundError:
                continue
            except Exception as e:  # a damaged chunk must not hide the others
                self.corrupt.append(f"{key}: {e}")
                log.warning("mldbg: skipping damaged profiler chunk %s/%s: %s", self.store.url, key, e)
                continue
            self.parts.append(cols)
            self.meta.update(meta)
            new += 1
        if new:
            self._cache = None
        return new

    def columns(self) -> dict[str, np.ndarray]:
        """Every chunk read so far, concatenated per column."""
        if self._cache is None:
            names: list[str] = []
            for p in self.parts:
                names.extend(n for n in p if n not in names)
            out = {}
            for n in names:
                pieces = [p[n] for p in self.parts if n in p]
                widths = {x.shape[1:] for x in pieces}
                if len(widths) > 1:  # e.g. a GPU that vanished: keep the common leading columns
                    w = min(x.shape[1] for x in pieces)
                    pieces = [x[:, :w] for x in pieces]
                out[n] = np.concatenate(pieces) if pieces else np.empty(0)
            self._cache = out
        return self._cache
