"""The on-disk format (see FORMAT.md): safetensors files, one data file and one index file
per flushed segment.

A segment holds many records (one tensor of one step). The data file is a plain safetensors
file any safetensors reader opens. The index file is a small safetensors file of columns
(NumPy arrays) that locate every record in the data file, so a reader finds a tensor with one
small read per segment and one ranged read per value, never scanning data.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mldbg.errors import CorruptRecord
from mldbg.store.reductions import reduction_code
from mldbg.store.statistics import CodeTable

# 2: scalar statistics in the reductions columns, parametric codes in the index metadata,
# vector statistics as `stats/<tensor>/<key>` records (mldbg.store.statistics)
FORMAT_VERSION = 2

# safetensors dtype names <-> NumPy. BF16 has no NumPy type: stored as its bits, read as float32.
DTYPES: tuple[str, ...] = (
    "F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "U16", "U32", "U64", "BOOL",
)  # fmt: skip
_NUMPY = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
    "U16": np.uint16, "U32": np.uint32, "U64": np.uint64, "BOOL": np.bool_,
}  # fmt: skip
_FROM_NUMPY = {np.dtype(v): k for k, v in _NUMPY.items() if k != "BF16"}
DTYPE_CODE = {name: i for i, name in enumerate(DTYPES)}

INDEX_COLUMNS = {
    "name_id": np.int32,
    "step": np.int64,
    "mode": np.uint8,
    "mode_step": np.int64,
    "dtype": np.uint8,
    "ndim": np.uint8,
    "shape_start": np.int64,
    "offset": np.int64,  # absolute offset in the data file, -1 when only reductions were saved
    "nbytes": np.int64,
    "shapes": np.int64,  # all shapes, concatenated
    "red_row": np.int32,  # sparse reductions: (row, code, value)
    "red_code": np.uint8,
    "red_value": np.float64,
}


def dtype_name(array: np.ndarray) -> str:
    try:
        return _FROM_NUMPY[array.dtype]
    except KeyError:
        raise TypeError(f"dtype {array.dtype} cannot be stored; convert to a numeric type") from None


def numpy_dtype(name: str) -> np.dtype[Any]:
    return np.dtype(_NUMPY[name])


def to_numpy_value(raw: np.ndarray, name: str) -> np.ndarray:
    """Decoded raw array -> the value handed to users (bfloat16 widens exactly to float32)."""
    if name == "BF16":
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return raw


@dataclass
class Record:
    """One tensor of one step, as handed to the writer."""

    name: str
    step: int
    mode: int
    mode_step: int
    array: np.ndarray | None  # None: only reductions (and shape) are saved
    dtype: str
    shape: tuple[int, ...]
    reductions: dict[tuple[str, bool], float] = field(default_factory=dict)
    collections: tuple[str, ...] = ()
    # scalar statistics by key (`mldbg.store.statistics`); a key also in `reductions` is stored once
    statistics: dict[str, float] = field(default_factory=dict)


def encode_safetensors(
    tensors: Sequence[tuple[str, str, tuple[int, ...], Any]], metadata: dict[str, str]
) -> tuple[list[Any], list[int]]:
    """(key, dtype, shape, C-contiguous array) -> (parts to write, absolute offset of each).

    The parts are the header and the arrays themselves: the data is never copied. The header
    is formatted directly (this runs for every record, on the writer thread).
    """
    entries = ['"__metadata__":' + json.dumps(metadata, separators=(",", ":"))]
    starts = []
    pos = 0
    for key, dt, shape, array in tensors:
        n = array.nbytes
        dims = ",".join(map(str, shape))
        entries.append(
            f'{json.dumps(key)}:{{"dtype":"{dt}","shape":[{dims}],"data_offsets":[{pos},{pos + n}]}}'
        )
        starts.append(pos)
        pos += n
    head = ("{" + ",".join(entries) + "}").encode()
    head += b" " * (-len(head) % 8)
    base = 8 + len(head)
    parts = [struct.pack("<Q", len(head)), head, *(t[3] for t in tensors)]
    return parts, [base + s for s in starts]


def decode_header(blob: bytes, where: str) -> tuple[dict[str, Any], int]:
    """(header dict, offset where the data starts). Raises CorruptRecord naming `where`."""
    if len(blob) < 8:
        raise CorruptRecord(f"{where}: truncated ({len(blob)} bytes); not a complete safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > 1 << 31 or 8 + n > len(blob):
        raise CorruptRecord(f"{where}: header of {n} bytes does not fit in {len(blob)} bytes (truncated?)")
    try:
        header = json.loads(blob[8 : 8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CorruptRecord(f"{where}: header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise CorruptRecord(f"{where}: header is not a JSON object")
    return header, 8 + n


@dataclass
class SegmentIndex:
    """The decoded index of one segment: columns plus the names and collections tables."""

    key: str
    worker: str
    data_key: str
    names: list[str]
    collections: dict[str, list[int]]
    columns: dict[str, np.ndarray]
    codes: CodeTable = field(default_factory=CodeTable)  # what its statistics codes mean

    def __len__(self) -> int:
        return len(self.columns["step"])


def encode_index(records: Sequence[Record], offsets: Sequence[int], worker: str, data_key: str) -> list[Any]:
    names: dict[str, int] = {}
    collections: dict[str, list[int]] = {}
    n = len(records)
    cols = {
        k: np.empty(n, dtype=v)
        for k, v in INDEX_COLUMNS.items()
        if k not in ("shapes", "red_row", "red_code", "red_value")
    }
    shapes: list[int] = []
    red_row: list[int] = []
    red_code: list[int] = []
    red_value: list[float] = []
    codes = CodeTable()
    for i, (rec, off) in enumerate(zip(records, offsets, strict=True)):
        nid = names.get(rec.name)
        if nid is None:
            nid = names[rec.name] = len(names)
            for c in rec.collections:
                collections.setdefault(c, []).append(nid)
        cols["name_id"][i] = nid
        cols["step"][i] = rec.step
        cols["mode"][i] = rec.mode
        cols["mode_step"][i] = rec.mode_step
        cols["dtype"][i] = DTYPE_CODE[rec.dtype]
        cols["ndim"][i] = len(rec.shape)
        cols["shape_start"][i] = len(shapes)
        shapes.extend(rec.shape)
        cols["offset"][i] = off
        cols["nbytes"][i] = rec.array.nbytes if rec.array is not None else 0
        written: set[int] = set()
        for (rname, is_abs), value in rec.reductions.items():
            code = reduction_code(rname, is_abs)
            written.add(code)
            red_row.append(i)
            red_code.append(code)
            red_value.append(value)
        for key, value in rec.statistics.items():
            code = codes.code(key)
            if code not in written:
                written.add(code)
                red_row.append(i)
                red_code.append(code)
                red_value.append(value)
    cols["shapes"] = np.asarray(shapes, dtype=np.int64)
    cols["red_row"] = np.asarray(red_row, dtype=np.int32)
    cols["red_code"] = np.asarray(red_code, dtype=np.uint8)
    cols["red_value"] = np.asarray(red_value, dtype=np.float64)
    meta = {
        "format": FORMAT_VERSION,
        "worker": worker,
        "data": data_key,
        "names": list(names),
        "collections": collections,
    }
    if codes.metadata():
        meta["statistics"] = codes.metadata()
    tensors = [(k, dtype_name(v), v.shape, np.ascontiguousarray(v)) for k, v in cols.items()]
    parts, _ = encode_safetensors(tensors, {"mldbg": json.dumps(meta)})
    return parts


def retarget_index(blob: bytes, data_key: str, where: str) -> bytes:
    """The same index pointing into `data_key`: for segments numbered only once the bucket answers
    (`S3Store.next_segment`). Column offsets are relative to the data section, so only the
    header changes."""
    header, base = decode_header(blob, where)
    try:
        meta = json.loads(header["__metadata__"]["mldbg"])
        meta["data"] = data_key
        header["__metadata__"]["mldbg"] = json.dumps(meta)
    except (KeyError, TypeError, ValueError) as e:
        raise CorruptRecord(f"{where}: not an mldbg index file ({type(e).__name__}: {e})") from None
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + blob[base:]


def decode_index(blob: bytes, key: str) -> SegmentIndex:
    header, base = decode_header(blob, key)
    try:
        meta = json.loads(header["__metadata__"]["mldbg"])
        if int(meta["format"]) > FORMAT_VERSION:
            raise CorruptRecord(
                f"{key}: written in format {meta['format']}, this mldbg reads up to "
                f"{FORMAT_VERSION}: upgrade mldbg"
            )
        columns = {}
        for name, dt in INDEX_COLUMNS.items():
            entry = header[name]
            start, end = entry["data_offsets"]
            if base + end > len(blob):
                raise CorruptRecord(f"{key}: column {name!r} ends past the end of the file (truncated)")
            columns[name] = np.frombuffer(
                blob, dtype=dt, count=(end - start) // np.dtype(dt).itemsize, offset=base + start
            )
        lengths = {len(columns[c]) for c in ("name_id", "step", "mode", "offset", "nbytes")}
        if len(lengths) != 1:
            raise CorruptRecord(f"{key}: index columns have different lengths {sorted(lengths)}")
        return SegmentIndex(
            key=key,
            worker=str(meta["worker"]),
            data_key=str(meta["data"]),
            names=list(meta["names"]),
            collections={str(k): list(v) for k, v in meta["collections"].items()},
            columns=columns,
            codes=CodeTable.from_metadata(meta.get("statistics")),
        )
    except CorruptRecord:
        raise
    except (KeyError, TypeError, ValueError) as e:  # InvalidConfig: a bad code table
        raise CorruptRecord(f"{key}: not an mldbg index file ({type(e).__name__}: {e})") from None
