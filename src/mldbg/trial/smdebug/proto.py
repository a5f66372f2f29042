"""The few protobuf messages of an smdebug event file, decoded from the wire format by hand
(no tensorflow, no protobuf runtime).

    Event        { double wall_time = 1; int64 step = 2; Summary summary = 5; ... }
    Summary      { repeated Value value = 1; }
    Value        { string tag = 1; SummaryMetadata metadata = 9; TensorProto tensor = 8; ... }
    SummaryMetadata { repeated PluginData plugin_data = 1; }   (smdebug's own, repeated)
    PluginData   { string plugin_name = 1; string content = 2; }   ("mode", "mode_step")
    TensorProto  { DataType dtype = 1; TensorShapeProto tensor_shape = 2;
                   bytes tensor_content = 4; repeated float float_val = 5; double_val = 6;
                   int32 int_val = 7; bytes string_val = 8; int64 int64_val = 10;
                   bool bool_val = 11; int32 half_val = 13; uint32 uint32_val = 16;
                   uint64 uint64_val = 17; }
    TensorShapeProto { repeated Dim dim = 2; }   Dim { int64 size = 1; }

Fields not listed are skipped, as protobuf readers do.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from mldbg.errors import CorruptRecord

# TensorFlow's DataType -> (safetensors dtype name of mldbg's format, NumPy dtype)
DTYPES: dict[int, tuple[str, np.dtype]] = {
    1: ("F32", np.dtype("<f4")),
    2: ("F64", np.dtype("<f8")),
    3: ("I32", np.dtype("<i4")),
    4: ("U8", np.dtype("u1")),
    5: ("I16", np.dtype("<i2")),
    6: ("I8", np.dtype("i1")),
    9: ("I64", np.dtype("<i8")),
    10: ("BOOL", np.dtype("bool")),
    14: ("BF16", np.dtype("<u2")),
    17: ("U16", np.dtype("<u2")),
    19: ("F16", np.dtype("<f2")),
    22: ("U32", np.dtype("<u4")),
    23: ("U64", np.dtype("<u8")),
}
DTYPES_BY_NAME = {name: dt for name, dt in DTYPES.values()}
DT_STRING = 7


class _Malformed(Exception):
    pass


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise _Malformed("varint runs past the end")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise _Malformed("varint longer than 10 bytes")


def _fields(buf: memoryview) -> list[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) of a message: ints for varints and fixed, views for
    length-delimited fields."""
    out: list[tuple[int, int, int | memoryview]] = []
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | memoryview
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            if pos + 8 > end:
                raise _Malformed("fixed64 runs past the end")
            value = int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            if pos + n > end:
                raise _Malformed(f"field {number} of {n} bytes runs past the end")
            value = buf[pos : pos + n]
            pos += n
        elif wire == 5:
            if pos + 4 > end:
                raise _Malformed("fixed32 runs past the end")
            value = int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise _Malformed(f"unsupported wire type {wire} (field {number})")
        out.append((number, wire, value))
    return out


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _varints(value: int | memoryview) -> list[int]:
    """A repeated varint field: one value, or a packed run of them."""
    if isinstance(value, int):
        return [value]
    out, pos = [], 0
    while pos < len(value):
        v, pos = _varint(value, pos)
        out.append(v)
    return out


@dataclass
class TensorValue:
    """One `Summary.Value` holding a tensor."""

    tag: str
    dtype: str  # mldbg's dtype name; "" for a type mldbg does not store (strings, complex)
    shape: tuple[int, ...]
    array: np.ndarray | None  # None for a type mldbg does not store
    plugins: dict[str, str] = field(default_factory=dict)


@dataclass
class Event:
    step: int
    wall_time: float
    values: list[TensorValue]


def decode_event(payload: memoryview, where: str) -> Event:
    """One Event. Raises CorruptRecord naming `where` when the bytes are not one."""
    try:
        return _event(payload)
    except (_Malformed, UnicodeDecodeError, ValueError) as e:
        raise CorruptRecord(f"{where}: not a valid smdebug event ({e})") from None


def _event(buf: memoryview) -> Event:
    step, wall, values = 0, 0.0, []
    for number, wire, value in _fields(buf):
        if number == 1 and wire == 1:
            wall = struct.unpack("<d", int(value).to_bytes(8, "little"))[0]
        elif number == 2 and wire == 0:
            step = _signed64(int(value))
        elif number == 5 and wire == 2:
            assert isinstance(value, memoryview)
            for n, w, v in _fields(value):
                if n == 1 and w == 2:
                    assert isinstance(v, memoryview)
                    decoded = _value(v)
                    if decoded is not None:
                        values.append(decoded)
    return Event(step, wall, values)


def _value(buf: memoryview) -> TensorValue | None:
    tag, tensor, plugins = "", None, {}
    for number, wire, value in _fields(buf):
        if wire != 2:
            continue
        assert isinstance(value, memoryview)
        if number == 1:
            tag = bytes(value).decode()
        elif number == 8:
            tensor = value
        elif number == 9:
            for n, w, v in _fields(value):
                if n == 1 and w == 2:
                    assert isinstance(v, memoryview)
                    name = content = ""
                    for pn, pw, pv in _fields(v):
                        if pw == 2 and pn in (1, 2):
                            assert isinstance(pv, memoryview)
                            if pn == 1:
                                name = bytes(pv).decode()
                            else:
                                content = bytes(pv).decode()
                    plugins[name] = content
    if tensor is None:
        return None  # a scalar, image or histogram summary: not a tensor smdebug saved
    dtype, shape, array = _tensor(tensor, tag)
    return TensorValue(tag, dtype, shape, array, plugins)


def _tensor(buf: memoryview, tag: str) -> tuple[str, tuple[int, ...], np.ndarray | None]:
    dt = 0
    shape: list[int] = []
    content: bytes | None = None
    repeated: dict[int, list[int | memoryview]] = {}
    for number, wire, value in _fields(buf):
        if number == 1 and wire == 0:
            dt = int(value)
        elif number == 2 and wire == 2:
            assert isinstance(value, memoryview)
            shape.extend(_shape(value))
        elif number == 4 and wire == 2:
            content = bytes(value)
        elif number in (5, 6, 7, 10, 11, 13, 16, 17):
            repeated.setdefault(number, []).append(value)
    if dt not in DTYPES:
        return "", tuple(shape), None
    name, np_dtype = DTYPES[dt]
    count = int(np.prod(shape)) if shape else 1
    if content is not None:
        if len(content) != count * np_dtype.itemsize:
            raise _Malformed(f"tensor {tag!r}: {len(content)} bytes for shape {tuple(shape)} of {name}")
        array = np.frombuffer(content, dtype=np_dtype).reshape(shape).copy()
    else:
        flat = _typed_values(dt, repeated)
        if len(flat) == 0:
            flat = np.zeros(1, dtype=np_dtype)  # all-default values are not written at all
        if len(flat) not in (1, count):
            raise _Malformed(f"tensor {tag!r}: {len(flat)} values for shape {tuple(shape)}")
        array = np.broadcast_to(flat.astype(np_dtype), (count,)).reshape(shape).copy()
    return name, tuple(shape), array


def _typed_values(dt: int, repeated: dict[int, list[int | memoryview]]) -> np.ndarray:
    def raw(number: int, fmt: str) -> np.ndarray:
        # packed (one length-delimited run) or one fixed-width value per field
        parts = []
        for v in repeated.get(number, []):
            if isinstance(v, memoryview):
                parts.append(np.frombuffer(bytes(v), dtype=fmt))
            else:
                parts.append(np.frombuffer(v.to_bytes(np.dtype(fmt).itemsize, "little"), dtype=fmt))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=fmt)

    def ints(number: int) -> list[int]:
        return [x for v in repeated.get(number, []) for x in _varints(v)]

    if dt == 1:
        return raw(5, "<f4")
    if dt == 2:
        return raw(6, "<f8")
    if dt in (3, 4, 5, 6):
        return np.asarray([_signed64(x) for x in ints(7)], dtype=np.int64)
    if dt == 9:
        return np.asarray([_signed64(x) for x in ints(10)], dtype=np.int64)
    if dt == 10:
        return np.asarray(ints(11), dtype=bool)
    if dt in (14, 19):
        return np.asarray(ints(13), dtype=np.uint16).view("<f2" if dt == 19 else "<u2")
    if dt == 22:
        return np.asarray(ints(16), dtype=np.uint32)
    if dt == 23:
        return np.asarray(ints(17), dtype=np.uint64)
    return np.asarray(ints(7), dtype=np.int64)  # U16 travels in int_val


@dataclass
class TensorHead:
    """Where the raw bytes of a tensor lie in its record, read from the record's first bytes:
    enough to index a large tensor without reading it."""

    tag: str
    dtype: str  # mldbg's dtype name; "" for a type mldbg does not store
    shape: tuple[int, ...]
    content_offset: int  # of `tensor_content` in the payload
    content_length: int


def locate_tensor(head: memoryview, payload_length: int) -> TensorHead | None:
    """The tag, dtype, shape and the place of `tensor_content` of an Event whose payload
    begins with `head` (its first bytes; `payload_length` in all). None when the head is too
    short to tell, or the value has no `tensor_content` (then decode the whole record).
    Protobuf writers put fields in number order, so the tag, dtype and shape come first."""
    try:
        return _locate(head, payload_length)
    except (_Malformed, UnicodeDecodeError, ValueError):
        return None


def _locate(buf: memoryview, payload_length: int) -> TensorHead | None:
    pos, end = 0, payload_length
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire != 2:
            pos = _skip(buf, pos, wire)
            continue
        n, pos = _varint(buf, pos)
        if number != 5:
            pos += n
            continue
        return _locate_summary(buf, pos, pos + n)
    return None


def _locate_summary(buf: memoryview, pos: int, end: int) -> TensorHead | None:
    key, pos = _varint(buf, pos)
    if key != (1 << 3 | 2):
        return None
    n, pos = _varint(buf, pos)
    end = min(end, pos + n)  # the first Value
    tag, dt = "", 0
    shape: tuple[int, ...] = ()
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire != 2:
            pos = _skip(buf, pos, wire)
            continue
        n, pos = _varint(buf, pos)
        if number == 1:
            if pos + n > len(buf):
                return None
            tag = bytes(buf[pos : pos + n]).decode()
            pos += n
        elif number == 8:
            tensor_end = pos + n
            while pos < tensor_end:
                key, pos = _varint(buf, pos)
                tnum, twire = key >> 3, key & 7
                if twire != 2:
                    value = 0
                    if twire == 0:
                        value, pos = _varint(buf, pos)
                    else:
                        pos = _skip(buf, pos, twire)
                    if tnum == 1:
                        dt = value
                    continue
                m, pos = _varint(buf, pos)
                if tnum == 2:
                    if pos + m > len(buf):
                        return None
                    shape = _shape(buf[pos : pos + m])
                elif tnum == 4:
                    name = DTYPES[dt][0] if dt in DTYPES else ""
                    return TensorHead(tag, name, shape, pos, m)
                pos += m
            return None
        else:
            pos += n
    return None


def _shape(buf: memoryview) -> tuple[int, ...]:
    """A TensorShapeProto: the size of each Dim (0 when not written)."""
    dims = []
    for n, w, v in _fields(buf):
        if n == 2 and w == 2:
            assert isinstance(v, memoryview)
            size = 0
            for dn, dw, dv in _fields(v):
                if dn == 1 and dw == 0:
                    size = _signed64(int(dv))
            dims.append(size)
    return tuple(dims)


def _skip(buf: memoryview, pos: int, wire: int) -> int:
    if wire == 0:
        return _varint(buf, pos)[1]
    if wire == 1:
        return pos + 8
    if wire == 5:
        return pos + 4
    raise _Malformed(f"unsupported wire type {wire}")
