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
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mldbg.errors import CorruptRecord, InvalidConfig
from mldbg.store.reductions import reduction_code
from mldbg.store.statistics import CodeTable

# 2: scalar statistics in the reductions columns, parametric codes in the index metadata,
# vector statistics as `stats/<tensor>/<key>` records (mldbg.store.statistics)
# 3: checksums: a CRC-32 of each record's bytes (index column `crc`) and of the whole index file
# (`__metadata__["crc32"]`), verified on read; data file keys made unique and valid UTF-8
FORMAT_VERSION = 3
FIRST_CHECKSUMMED_VERSION = 3
# the index file's own checksum: the first metadata key, at a fixed place of the header, as
# 8 hex digits; it covers the whole file with those 8 digits read as "00000000"
_CRC_PREFIX = b'{"__metadata__":{"crc32":"'
_CRC_AT = 8 + len(_CRC_PREFIX)
_CRC_BLANK = b"00000000"

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
    "crc": np.uint32,  # format 3: CRC-32 of the record's bytes in the data file (0 without)
}
# one entry per record (the reductions columns and `shapes` have their own lengths)
_ROW_COLUMNS = ("name_id", "step", "mode", "mode_step", "dtype", "ndim", "shape_start", "offset", "nbytes")
_ITEMSIZE = np.asarray([np.dtype(_NUMPY[d]).itemsize for d in DTYPES], dtype=np.float64)
_MODE_CODES = (1, 4)  # TRAIN .. GLOBAL


def checksum(data: Any, value: int = 0) -> int:
    """CRC-32 (zlib's, the one of gzip, zip and PNG) of a bytes-like object or C-contiguous
    array, continuing from `value`."""
    return zlib.crc32(data, value)


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
    # the checksum of the value's bytes when `array` does not hold them (a reader that shows
    # another format's file in this one: the value stays where it is); None: from `array`
    crc: int | None = None


def encode_safetensors(
    tensors: Sequence[tuple[str, str, tuple[int, ...], Any]], metadata: dict[str, str]
) -> tuple[list[Any], list[int]]:
    """(key, dtype, shape, C-contiguous array) -> (parts to write, absolute offset of each).

    The parts are the header and the arrays themselves: the data is never copied. The header
    is formatted directly (this runs for every record, on the writer thread). Keys are made
    valid for any safetensors reader (`file_key`): unique, and valid UTF-8.
    """
    entries = ['"__metadata__":' + json.dumps(metadata, separators=(",", ":"))]
    starts = []
    pos = 0
    for key, (_, dt, shape, array) in zip(file_keys([t[0] for t in tensors]), tensors, strict=True):
        n = array.nbytes
        dims = ",".join(map(str, shape))
        entries.append(
            f'{_json_text(key)}:{{"dtype":"{dt}","shape":[{dims}],"data_offsets":[{pos},{pos + n}]}}'
        )
        starts.append(pos)
        pos += n
    head = ("{" + ",".join(entries) + "}").encode()
    head += b" " * (-len(head) % 8)
    base = 8 + len(head)
    parts = [struct.pack("<Q", len(head)), head, *(t[3] for t in tensors)]
    return parts, [base + s for s in starts]


def _json_text(key: str) -> str:
    """`json.dumps(key)`, without its call for the usual key (printable ASCII, no quote or
    backslash: the text as it is, quoted)."""
    if key.isascii() and key.isprintable() and '"' not in key and "\\" not in key:
        return f'"{key}"'
    return json.dumps(key)


def file_keys(keys: Sequence[str]) -> list[str]:
    """The data file's keys for record keys, valid for any safetensors reader (which refuses
    duplicate keys and invalid UTF-8): a lone surrogate (no UTF-8 for it) becomes its
    `\\udXXX` escape as text, and a key seen before in the file (the same tensor saved twice in
    one step) gets `#2`, `#3`... (the first number no other key has). The index locates records
    by offset, so these keys serve only other readers; mldbg reads the names as given."""
    out = []
    for key in keys:
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            key = key.encode("utf-8", "backslashreplace").decode("utf-8")
        out.append(key)
    if len(set(out)) == len(out):
        return out
    used, seen = set(out), set()
    for i, key in enumerate(out):
        if key in seen:
            n = 2
            while f"{key}#{n}" in used:
                n += 1
            out[i] = f"{key}#{n}"
            used.add(out[i])
        seen.add(key)
    return out


def decode_header(blob: bytes, where: str) -> tuple[dict[str, Any], int]:
    """(header dict, offset where the data starts). Raises CorruptRecord naming `where`."""
    if len(blob) < 8:
        raise CorruptRecord(f"{where}: truncated ({len(blob)} bytes); not a complete safetensors file")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > 1 << 31 or 8 + n > len(blob):
        raise CorruptRecord(f"{where}: header of {n} bytes does not fit in {len(blob)} bytes (truncated?)")
    try:
        header = json.loads(blob[8 : 8 + n])
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise CorruptRecord(f"{where}: header is not valid JSON ({type(e).__name__}: {e})") from None
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
    format: int = FORMAT_VERSION  # the version that wrote it: 3 and up checksum every record

    def __len__(self) -> int:
        # `nbytes`: one per record, kept by every reader (a trial drops a segment's `step`
        # once its tensors hold their steps)
        return len(self.columns["nbytes"])


def encode_index(records: Sequence[Record], offsets: Sequence[int], worker: str, data_key: str) -> list[Any]:
    # the columns are built as lists and made arrays once (a NumPy item assignment per field
    # and record cost more than the rest); the statistics' codes are found once per set of keys
    # (a segment's records share a few: every weight has the same statistics)
    names: dict[str, int] = {}
    collections: dict[str, list[int]] = {}
    rows: dict[str, list[int]] = {k: [] for k in (*_ROW_COLUMNS, "crc")}
    name_id, step, mode, mode_step = rows["name_id"], rows["step"], rows["mode"], rows["mode_step"]
    dtype, ndim, shape_start, offset = rows["dtype"], rows["ndim"], rows["shape_start"], rows["offset"]
    nbytes, crc = rows["nbytes"], rows["crc"]
    shapes: list[int] = []
    red_row: list[int] = []
    red_code: list[int] = []
    red_value: list[float] = []
    codes = CodeTable()
    known: dict[tuple[str, ...], tuple[list[int], list[int]]] = {}  # keys -> (kept positions, codes)
    for i, (rec, off) in enumerate(zip(records, offsets, strict=True)):
        nid = names.get(rec.name)
        if nid is None:
            nid = names[rec.name] = len(names)
            for c in rec.collections:
                collections.setdefault(c, []).append(nid)
        name_id.append(nid)
        step.append(rec.step)
        mode.append(rec.mode)
        mode_step.append(rec.mode_step)
        dtype.append(DTYPE_CODE[rec.dtype])
        ndim.append(len(rec.shape))
        shape_start.append(len(shapes))
        shapes.extend(rec.shape)
        offset.append(off)
        if rec.array is not None:
            nbytes.append(rec.array.nbytes)
            # the bytes the data file holds
            crc.append(rec.crc if rec.crc is not None else checksum(np.ascontiguousarray(rec.array)))
        else:
            nbytes.append(0)
            crc.append(0)
        if rec.reductions:
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
        elif rec.statistics:
            keys = tuple(rec.statistics)
            found = known.get(keys)
            if found is None:  # the first code of each, in order (two keys may name one statistic)
                kept: list[int] = []
                kept_codes: list[int] = []
                for j, key in enumerate(keys):
                    code = codes.code(key)
                    if code not in kept_codes:
                        kept.append(j)
                        kept_codes.append(code)
                found = known[keys] = (kept, kept_codes)
            kept, kept_codes = found
            values = list(rec.statistics.values())
            red_row.extend([i] * len(kept))
            red_code.extend(kept_codes)
            red_value.extend([values[j] for j in kept] if len(kept) < len(values) else values)
    cols = {k: np.asarray(v, dtype=INDEX_COLUMNS[k]) for k, v in rows.items()}
    cols["shapes"] = np.asarray(shapes, dtype=np.int64)
    cols["red_row"] = np.asarray(red_row, dtype=np.int32)
    cols["red_code"] = np.asarray(red_code, dtype=np.uint8)
    cols["red_value"] = np.asarray(red_value, dtype=np.float64)
    meta: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "worker": worker,
        "data": data_key,
        "names": list(names),
        "collections": collections,
    }
    if codes.metadata():
        meta["statistics"] = codes.metadata()
    tensors = [(k, dtype_name(v), v.shape, np.ascontiguousarray(v)) for k, v in cols.items()]
    return _sealed(tensors, json.dumps(meta))


def _sealed(tensors: Sequence[tuple[str, str, tuple[int, ...], Any]], mldbg_meta: str) -> list[Any]:
    """An index file's parts with its checksum in place (see `_CRC_PREFIX`)."""
    parts, _ = encode_safetensors(tensors, {"crc32": _CRC_BLANK.decode(), "mldbg": mldbg_meta})
    head = parts[1]
    at = _CRC_AT - 8  # in the header, after its 8-byte length
    value = 0
    for part in parts:
        value = checksum(part, value)
    parts[1] = head[:at] + b"%08x" % value + head[at + 8 :]
    return parts


def reseal_index(blob: bytes) -> bytes:
    """An index file (format 3 and up) with its checksum computed anew for its bytes as they
    are: for tools and tests that write an index by hand, as a newer writer would."""
    if blob[8:_CRC_AT] != _CRC_PREFIX:
        raise CorruptRecord("not a checksummed mldbg index file: its header does not begin with its checksum")
    return bytes(blob[:_CRC_AT]) + _file_checksum(blob) + bytes(blob[_CRC_AT + 8 :])


def _file_checksum(blob: bytes) -> bytes:
    """An index file's checksum as written: 8 hex digits, of the file with them read as zeros."""
    view = memoryview(blob)
    return b"%08x" % checksum(view[_CRC_AT + 8 :], checksum(_CRC_BLANK, checksum(view[:_CRC_AT])))


def _verify(blob: bytes, where: str) -> bool:
    """Check an index file's own checksum; False when it has none (format 2 and older)."""
    if blob[8:_CRC_AT] != _CRC_PREFIX:
        return False
    saved, computed = blob[_CRC_AT : _CRC_AT + 8], _file_checksum(blob)
    if saved != computed:
        raise CorruptRecord(
            f"{where}: checksum mismatch (saved {saved.decode('ascii', 'replace')!r}, computed "
            f"{computed.decode()!r}): the file changed after it was written"
        )
    return True


def retarget_index(blob: bytes, data_key: str, where: str) -> bytes:
    """The same index pointing into `data_key`: for segments numbered only once the bucket answers
    (`S3Store.next_segment`). Column offsets are relative to the data section, so only the
    header changes (and the checksum, verified first, is computed anew)."""
    seg = decode_index(blob, where)
    header, _ = decode_header(blob, where)
    meta = json.loads(header["__metadata__"]["mldbg"])
    meta["data"] = data_key
    tensors = []
    for name in INDEX_COLUMNS:
        if name in seg.columns:
            col = seg.columns[name]
            tensors.append((name, dtype_name(col), col.shape, col))
    if seg.format < FIRST_CHECKSUMMED_VERSION:  # an older writer's file keeps its format
        parts, _ = encode_safetensors(tensors, {"mldbg": json.dumps(meta)})
    else:
        parts = _sealed(tensors, json.dumps(meta))
    return b"".join(memoryview(p).cast("B") for p in parts)


def decode_index(blob: bytes, key: str) -> SegmentIndex:
    """An index file, checked: its checksum (format 3 and up), then every field and column a
    reader uses, so that a damaged file raises CorruptRecord naming `key` here and nowhere else."""
    checked = _verify(blob, key)
    header, base = decode_header(blob, key)
    try:
        return _decode_index(blob, key, header, base, checked)
    except CorruptRecord:
        raise
    except (KeyError, TypeError, ValueError, IndexError, OverflowError, RecursionError) as e:
        # InvalidConfig (a ValueError) too: a bad statistics code table
        raise CorruptRecord(f"{key}: not an mldbg index file ({type(e).__name__}: {e})") from None


def _bad(key: str, what: str) -> CorruptRecord:
    return CorruptRecord(f"{key}: {what}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _name_ids(ids: Any, n: int) -> bool:
    """A list of ints (JSON's: not bools) in 0..n-1 (100,000 of them in a run of many names:
    a type test each, then one min and max)."""
    return (
        isinstance(ids, list)
        and set(map(type, ids)) <= {int}  # one pass in C (100,000 names: a test each)
        and (not ids or (min(ids) >= 0 and max(ids) < n))
    )


def _decode_index(blob: bytes, key: str, header: dict[str, Any], base: int, checked: bool) -> SegmentIndex:
    outer = header.get("__metadata__")
    if not isinstance(outer, dict) or not isinstance(outer.get("mldbg"), str):
        raise _bad(key, "no mldbg metadata: not an mldbg index file")
    meta = json.loads(outer["mldbg"])
    if not isinstance(meta, dict):
        raise _bad(key, "the mldbg metadata is not a JSON object")
    version = meta.get("format")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise _bad(key, f"format {version!r} is not a format version")
    if version > FORMAT_VERSION:
        raise CorruptRecord(
            f"{key}: written in format {version}, this mldbg reads up to {FORMAT_VERSION}: upgrade mldbg"
        )
    if version >= FIRST_CHECKSUMMED_VERSION and not checked:
        raise _bad(key, f"format {version} index without its checksum (the header is damaged)")
    worker, data_key, names = meta.get("worker"), meta.get("data"), meta.get("names")
    if not isinstance(worker, str) or not isinstance(data_key, str) or not data_key:
        raise _bad(key, "'worker' and 'data' must be strings")
    if not isinstance(names, list) or not set(map(type, names)) <= {str}:  # one pass in C
        raise _bad(key, "'names' must be a list of strings")
    collections = meta.get("collections", {})
    if not isinstance(collections, dict) or not all(
        _name_ids(ids, len(names)) for ids in collections.values()
    ):
        raise _bad(key, "'collections' must map names to lists of name ids")
    statistics = meta.get("statistics")
    if statistics is not None and (
        not isinstance(statistics, dict)
        or not all(isinstance(k, str) and k.isdigit() and isinstance(v, str) for k, v in statistics.items())
    ):
        raise _bad(key, "'statistics' must map codes to statistic keys")
    try:
        codes = CodeTable.from_metadata(statistics)
    except InvalidConfig as e:
        raise _bad(key, f"bad statistics code table ({e})") from None
    wanted = dict(INDEX_COLUMNS)
    if version < FIRST_CHECKSUMMED_VERSION:
        del wanted["crc"]
    columns = {name: _column(blob, key, header, base, name, dt) for name, dt in wanted.items()}
    _check_columns(key, columns, len(names))
    return SegmentIndex(
        key=key,
        worker=worker,
        data_key=data_key,
        names=names,
        collections={str(k): v for k, v in collections.items()},
        columns=columns,
        codes=codes,
        format=version,
    )


def _column(blob: bytes, key: str, header: dict[str, Any], base: int, name: str, dt: type) -> np.ndarray:
    entry = header.get(name)
    if not isinstance(entry, dict):
        raise _bad(key, f"no column {name!r}")
    offsets, shape = entry.get("data_offsets"), entry.get("shape")
    itemsize = np.dtype(dt).itemsize
    if (
        entry.get("dtype") != dtype_name(np.empty(0, dt))
        or not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(_is_int(o) for o in offsets)
        or not isinstance(shape, list)
        or len(shape) != 1
        or not _is_int(shape[0])
    ):
        raise _bad(key, f"column {name!r} is not described as a 1-d {entry.get('dtype')} array")
    start, end = offsets
    if not 0 <= start <= end or end - start != shape[0] * itemsize:
        raise _bad(key, f"column {name!r}: offsets {offsets} do not hold {shape[0]} values")
    if base + end > len(blob):
        raise _bad(key, f"column {name!r} ends past the end of the file (truncated)")
    return np.frombuffer(blob, dtype=dt, count=shape[0], offset=base + start)


def _check_columns(key: str, c: dict[str, np.ndarray], n_names: int) -> None:
    """The values a reader indexes with, checked at once for every row (NumPy, no loop over rows)."""
    n = len(c["step"])
    if any(len(c[col]) != n for col in (*_ROW_COLUMNS, "crc") if col in c):
        raise _bad(key, f"index columns have different lengths {sorted({len(v) for v in c.values()})}")
    if not len(c["red_row"]) == len(c["red_code"]) == len(c["red_value"]):
        raise _bad(key, "the reductions columns have different lengths")
    if not n:
        if len(c["red_row"]):
            raise _bad(key, "reductions of records that are not there")
        return
    ids, shapes, start, ndim = c["name_id"], c["shapes"], c["shape_start"], c["ndim"]
    offset, nbytes, dtype = c["offset"], c["nbytes"], c["dtype"]
    problems = []
    if ids.min() < 0 or ids.max() >= n_names:
        problems.append(f"name ids outside the {n_names} names")
    if c["mode"].min() < _MODE_CODES[0] or c["mode"].max() > _MODE_CODES[1]:
        problems.append("unknown modes")
    if dtype.max() >= len(DTYPES):
        problems.append("unknown dtype codes")
    if len(shapes) and shapes.min() < 0:
        problems.append("negative dimensions")
    if start.min() < 0 or start.max() > len(shapes) or np.any(start + ndim > len(shapes)):
        problems.append("shapes outside the shapes column")
    if offset.min() < -1 or nbytes.min() < 0 or np.any(nbytes[offset == -1] != 0):
        problems.append(
            "offsets or lengths that point nowhere (an offset is -1 only for a record without raw bytes)"
        )
    if len(c["red_row"]) and (c["red_row"].min() < 0 or c["red_row"].max() >= n):
        problems.append("reductions of rows that are not there")
    if problems:
        raise _bad(key, "; ".join(problems))
    elements = np.ones(n, dtype=np.float64)  # exact: a tensor has fewer than 2^53 bytes
    for d in range(int(ndim.max())):
        on = ndim > d
        elements[on] *= shapes[start[on] + d]
    wrong = (offset >= 0) & (elements * _ITEMSIZE[dtype] != nbytes)
    if wrong.any():
        row = int(np.flatnonzero(wrong)[0])
        raise _bad(key, f"row {row}: {int(nbytes[row])} bytes do not hold its dtype and shape")
