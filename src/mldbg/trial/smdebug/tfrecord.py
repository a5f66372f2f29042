"""TFRecord framing, as smdebug (and TensorFlow) write event files.

Each record is: the payload length (uint64, little-endian), the masked CRC-32C of those 8
bytes (uint32), the payload, the masked CRC-32C of the payload (uint32). smdebug writes the
payload CRC only when asked (`write_checksum`); otherwise it writes the masked CRC of the fixed
bytes `b"0x12345678"`, which is accepted as "no checksum". Damage raises `CorruptRecord`
naming the file and the byte where it was found.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from mldbg.errors import CorruptRecord

_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected


def _table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _table()


def crc32c(data: bytes | memoryview) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes | memoryview) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


#: the payload CRC smdebug writes when it does not checksum payloads
NO_CHECKSUM = masked_crc32c(b"0x12345678")


def payload_length(head: bytes, where: str, at: int = 0) -> int:
    """The payload length of the record whose first bytes are `head` (at byte `at` of its
    file), its checksum checked."""
    if len(head) < 12:
        raise CorruptRecord(f"{where}: truncated record header at byte {at} ({len(head)} bytes)")
    if struct.unpack_from("<I", head, 8)[0] != masked_crc32c(head[:8]):
        raise CorruptRecord(f"{where}: bad length checksum of the record at byte {at}; the file is damaged")
    return int(struct.unpack_from("<Q", head, 0)[0])


def records(blob: bytes, where: str, verify: bool = True) -> Iterator[tuple[int, memoryview]]:
    """(offset, payload) of every record in `blob`, in order. `verify`: also check the payload
    CRC where one was written (the length CRC is always checked: it is 8 bytes)."""
    view = memoryview(blob)
    pos, end = 0, len(blob)
    while pos < end:
        if end - pos < 12:
            raise CorruptRecord(f"{where}: truncated record header at byte {pos} ({end - pos} bytes left)")
        header = view[pos : pos + 8]
        (length,) = struct.unpack_from("<Q", blob, pos)
        (len_crc,) = struct.unpack_from("<I", blob, pos + 8)
        if len_crc != masked_crc32c(header):
            raise CorruptRecord(
                f"{where}: bad length checksum of the record at byte {pos}; the file is damaged"
            )
        start = pos + 12
        if start + length + 4 > end:
            raise CorruptRecord(
                f"{where}: the record at byte {pos} needs {length} bytes but the file ends at byte {end} (truncated)"
            )
        payload = view[start : start + length]
        (data_crc,) = struct.unpack_from("<I", blob, start + length)
        if verify and data_crc != NO_CHECKSUM and data_crc != masked_crc32c(payload):
            raise CorruptRecord(
                f"{where}: bad payload checksum of the record at byte {pos}; the file is damaged"
            )
        yield pos, payload
        pos = start + length + 4


def encode(payload: bytes, checksum: bool = True) -> bytes:
    """One framed record (tests write damaged and hand-made files with it)."""
    header = struct.pack("<Q", len(payload))
    footer = masked_crc32c(payload) if checksum else NO_CHECKSUM
    return header + struct.pack("<I", masked_crc32c(header)) + payload + struct.pack("<I", footer)
