"""What a hook or recorder is handed from outside, checked at the boundary: the run's place
(`out_dir`) and the names of the tensors saved. A bad one is an `InvalidConfig` naming the
value and what to do, raised where the user passed it, not an OSError or a damaged file later."""

from __future__ import annotations

import os
import re
from typing import Any

from mldbg.errors import InvalidConfig
from mldbg.store.base import Store

MAX_NAME_BYTES = 1024  # a tensor name, UTF-8: far above any framework's qualified names
MAX_PATH_BYTES = 4095  # PATH_MAX (4096) less the NUL of the C string
MAX_COMPONENT_BYTES = 255  # NAME_MAX: one folder name
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def shown(value: Any, limit: int = 60) -> str:
    """`repr(value)`, cut short for a message when it is long."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, str | bytes) else len(text)
    return f"{text[:limit]}... ({size} characters)"


def check_out_dir(out_dir: Any) -> None:
    """Refuse an `out_dir` that cannot hold a run: not a str or path (bytes included), empty
    (it would record into the current directory), with a NUL or a character the file system
    cannot encode, too long for the file system, or an existing file."""
    if isinstance(out_dir, Store):
        return
    try:
        path = os.fspath(out_dir)
    except TypeError:
        path = None
    if not isinstance(path, str):
        raise InvalidConfig(
            f"out_dir {shown(out_dir)}: a {type(out_dir).__name__}, not a folder; "
            "pass a str or pathlib.Path (decode bytes first), an s3:// URL or a Store"
        )
    if not path.strip():
        raise InvalidConfig(
            f"out_dir {shown(path)} is empty: it would record into the current directory; "
            "name a folder such as './mldbg_run'"
        )
    if "\0" in path:
        raise InvalidConfig(f"out_dir {shown(path)} holds a NUL character; remove it")
    try:
        encoded = os.fsencode(path)
    except UnicodeError:
        raise InvalidConfig(
            f"out_dir {shown(path)} holds characters the file system cannot encode "
            "(a lone surrogate); use a valid UTF-8 name"
        ) from None
    if path.startswith(("s3://", "memory://")):
        if len(encoded) > MAX_NAME_BYTES:
            raise InvalidConfig(
                f"out_dir {shown(path)}: {len(encoded)} bytes, more than a key may hold; shorten it"
            )
        return
    if path.startswith("file://"):
        encoded = encoded[len(b"file://") :]
    if len(encoded) > MAX_PATH_BYTES or any(len(p) > MAX_COMPONENT_BYTES for p in encoded.split(b"/")):
        raise InvalidConfig(
            f"out_dir {shown(path)}: {len(encoded)} bytes, longer than the file system allows "
            f"({MAX_PATH_BYTES} in all, {MAX_COMPONENT_BYTES} a folder name); use a shorter path"
        )
    # the nearest part of the path that exists must be a folder: a file, a device (/dev/null)
    # or a FIFO there, or under it, cannot hold a run
    here = os.path.abspath(encoded)
    while not os.path.lexists(here) and os.path.dirname(here) != here:
        here = os.path.dirname(here)
    if not os.path.isdir(here):
        kind = "a file" if os.path.isfile(here) else "a device, FIFO or socket"
        where = "" if here == os.path.abspath(encoded) else f" under {shown(os.fsdecode(here))},"
        raise InvalidConfig(
            f"out_dir {shown(path)} is{where} {kind}, not a folder; name a folder for the run"
        )


def check_name(name: Any, what: str = "tensor") -> str:
    """Refuse a tensor or scalar name that is not a str, is empty or huge, holds a control
    character or a lone surrogate, or reads as a path out of its place (`..`, a leading `/`).
    Returns the name."""
    if not isinstance(name, str):
        raise InvalidConfig(f"{what} name {shown(name)}: a {type(name).__name__}; pass a str")
    if not name:
        raise InvalidConfig(f"{what} name is empty; give it a name")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidConfig(
            f"{what} name {shown(name)} holds a lone surrogate (not valid UTF-8, so no safetensors "
            "reader could open the file); use valid text"
        ) from None
    if size > MAX_NAME_BYTES:
        raise InvalidConfig(
            f"{what} name {shown(name)}: {size} bytes, more than {MAX_NAME_BYTES}; shorten it"
        )
    if _CONTROL.search(name):
        raise InvalidConfig(
            f"{what} name {shown(name)} holds a control character (NUL, newline...); remove it"
        )
    if name.startswith("/") or any(part in (".", "..") for part in name.split("/")):
        raise InvalidConfig(
            f"{what} name {shown(name)} reads as a path ('..', '.' or a leading '/'); use plain names "
            "such as 'fc1.weight' or 'group/loss'"
        )
    return name
