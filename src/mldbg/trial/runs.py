"""Which runs a sweep (or a dashboard) holds: explicit paths and URLs, glob patterns, and parent folders.

A run is a folder (or prefix) with a `workers/` folder inside (FORMAT.md), or an smdebug
output directory (`index/` and `events/` inside). A parent folder,
or an `s3://bucket/prefix/` holding many runs, stands for the runs directly below it; they are
found with the Store interface (`children`), so every store works the same.
"""

from __future__ import annotations

import fnmatch
import glob
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from mldbg.errors import InvalidConfig, StoreError
from mldbg.store import open_store
from mldbg.store.layout import WORKERS

RunsSpec = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]
_GLOB = frozenset("*?[")
_RUN_MARK = WORKERS.rstrip("/")
_SMDEBUG_MARKS = frozenset(("index", "events"))  # an smdebug output directory (mldbg.trial.smdebug)


def _is_run(children: list[str]) -> bool:
    return _RUN_MARK in children or set(children) >= _SMDEBUG_MARKS


def find_runs(runs: RunsSpec) -> tuple[list[str], dict[str, str]]:
    """The runs that `runs` names, in order and without duplicates, and the inputs that named
    none (input -> why).

    Each input is a run (a path or URL, kept as given even if nothing is there yet, so that
    reading it reports it), a glob pattern (`sweep/lr_*`; for an `s3://` URL in its last part
    only), or a parent folder or prefix whose sub-folders holding a run are taken, one level down.
    """
    items = [runs] if isinstance(runs, (str, os.PathLike)) else list(runs)
    found: dict[str, None] = {}
    unmatched: dict[str, str] = {}
    for item in items:
        text = os.fspath(item)
        if not text:
            raise InvalidConfig("an empty run path was given: name a run, a folder of runs or a pattern")
        for name in _expand(text, unmatched):
            found.setdefault(name, None)
    return list(found), unmatched


def _expand(text: str, unmatched: dict[str, str]) -> list[str]:
    if _is_glob(text):
        matches = _glob(text)
        if not matches:
            unmatched[text] = f"the pattern {text!r} matched no folder"
        return [run for m in matches for run in _runs_at(m) or [m]]
    runs = _runs_at(text)
    if runs is not None:
        return runs
    return [text]  # not a run, nothing below: the check reports it as missing


def _is_glob(text: str) -> bool:
    last = text.rstrip("/").rsplit("/", 1)[-1] if "://" in text else text
    return any(c in _GLOB for c in last)


def _glob(pattern: str) -> list[str]:
    if "://" not in pattern:
        return sorted(p for p in glob.glob(os.path.expanduser(pattern)) if os.path.isdir(p))
    parent, _, last = pattern.rstrip("/").rpartition("/")
    if any(c in _GLOB for c in parent.split("://", 1)[1]):
        raise InvalidConfig(
            f"{pattern!r}: in a URL only the last part may be a pattern (s3://bucket/sweep/lr_*)"
        )
    store = open_store(parent)
    try:
        return [f"{parent}/{c}" for c in store.children("") if fnmatch.fnmatchcase(c, last)]
    finally:
        store.close()


def _runs_at(location: str) -> list[str] | None:
    """[location] if it is a run, the runs one level below it, or None if neither."""
    store = open_store(location)
    try:
        try:
            children = store.children("")
        except (OSError, StoreError):  # a file, an unreadable folder: its check says why
            return None
        if _is_run(children):
            return [location]

        def holds_run(child: str) -> bool:
            try:
                return _is_run(store.children(child + "/"))
            except (OSError, StoreError):  # unreadable, or a name no run can have
                return False

        with ThreadPoolExecutor(16 if store.remote else 1) as pool:  # one listing per child
            is_run = list(pool.map(holds_run, children))
    finally:
        store.close()
    base = location.rstrip("/") if "://" in location else location
    runs = [
        f"{base}/{c}" if "://" in location else os.path.join(base, c)
        for c, r in zip(children, is_run, strict=True)
        if r
    ]
    return runs or None
