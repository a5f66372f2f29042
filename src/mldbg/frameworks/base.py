"""What every framework hook shares, written once: the documented settings, the session the
hook records into, `from_json`, `save_scalar` / `save_tensor`, `close` (safe to call twice,
also run at interpreter exit), the context manager and the profiler's step timeline.

An adapter subclasses `Adapter`, and its framework's own callback class where there is one
(`class Hook(Adapter, keras.callbacks.Callback)`), and keeps only the framework's lifecycle:

- `_worker()`: the framework's name and version, this process's rank and the world size;
- `_setup()`: its own state, before the run opens;
- `_to_numpy(value)`: a framework value as NumPy, for `save_scalar` and `save_tensor`;
- `_release()`: undo what it attached to the framework, before the run closes.

Marks on `self.timeline` cost one empty call when no `profiler_config` was given, so adapters
make them unconditionally.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np

from mldbg.closing import close_at_exit, still_open
from mldbg.config import CollectionConfig, ReductionConfig, SaveConfig
from mldbg.frameworks.session import Session, Worker, check_options
from mldbg.profiler.config import ProfilerConfig
from mldbg.profiler.timeline import Timeline
from mldbg.record.recorder import Recorder
from mldbg.record.validation import check_out_dir
from mldbg.store import Store

if TYPE_CHECKING:
    from mldbg.profiler.session import CaptureFactory, Profiler


log = logging.getLogger("mldbg")


class Adapter:
    """The surface of every `Hook`: see the module docstring for what an adapter adds."""

    captures: ClassVar[Mapping[str, CaptureFactory]] = {}  # profiling windows the framework offers
    session: Session | None = None  # None until the run opens (an XGBoost hook's copy opens late)
    out_dir: str | None = None  # the run's location once it is open
    _superseded = False  # closed because a newer hook of this process opened the same run
    recorder: Recorder
    timeline: Timeline

    def __init__(
        self,
        out_dir: str | os.PathLike[str] | Store,
        save_config: SaveConfig | None = None,
        include_collections: Sequence[str] | None = None,
        include_regex: Sequence[str] | str | None = None,
        reduction_config: ReductionConfig | None = None,
        save_all: bool = False,
        include_workers: str = "one",
        collection_configs: Sequence[CollectionConfig] | None = None,
        profiler_config: ProfilerConfig | None = None,
        rules: Sequence[Any] | None = None,
        actions: Sequence[Any] | None = None,
        overwrite: bool = False,
        resume: bool = False,
        **options: Any,
    ):
        """`rules`, `actions`: checked live by a watcher child process. `overwrite`: replace a
        run already in `out_dir`; `resume`: continue its steps (a restarted job); without
        either, a directory that holds a run is refused. `options`: the writer's
        (`flush_seconds`, `max_queue_bytes`, `when_full`, `stop_check_seconds`) and the S3
        store's (`spill_max_bytes`, ...)."""
        super().__init__()  # the framework's callback class, where there is one
        self._settings: dict[str, Any] = self.check_options(dict(
            save_config=save_config, include_collections=include_collections, include_regex=include_regex,
            reduction_config=reduction_config, save_all=save_all, include_workers=include_workers,
            collection_configs=collection_configs, profiler_config=profiler_config, rules=rules,
            actions=actions, overwrite=overwrite, resume=resume, **options,
        ))  # fmt: skip
        self._closed = False
        self._setup()
        self._open_run(out_dir)

    #: the adapter's own keywords besides those of every hook (the torch hook's statistics cadence)
    own_options: ClassVar[tuple[str, ...]] = ("statistics_warmup", "statistics_every")

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """`options` for this hook, checked now without opening a run: a trainer's callback
        builds its hook only when the fit starts, and a misspelled option should not wait."""
        every = set(inspect.signature(Adapter.__init__).parameters) - {"self", "out_dir", "options"}
        return check_options(options, every | set(cls.own_options))

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> Self:
        """A hook from a JSON (or YAML) config file, as `MLDBG_CONFIG` names one."""
        from mldbg.config_file import hook_kwargs_from_json

        return cls(**hook_kwargs_from_json(path))

    # what an adapter provides ----------------------------------------------------------
    def _worker(self) -> Worker:
        """The framework (name-version), this process's rank and the world size."""
        raise NotImplementedError(f"{type(self).__name__} must say which framework and worker it records")

    def _setup(self) -> None:
        """The adapter's own state, made before the run opens."""

    def _to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def _release(self) -> None:
        """Undo what the adapter attached to the framework; the run closes right after."""

    # the run ---------------------------------------------------------------------------
    def _recording(self) -> dict[str, Any]:
        """The settings the session records with (an adapter may add its defaults)."""
        return self._settings

    def _open_run(self, out_dir: str | os.PathLike[str] | Store) -> None:
        check_out_dir(out_dir)  # before anything reads it as a path
        self._close_earlier(out_dir)
        self.session = Session(out_dir, self._worker(), captures=self.captures, **self._recording())
        self.recorder = self.session.recorder
        self.timeline = self.session.timeline
        self.out_dir = self.session.store.url
        close_at_exit(self)

    def _close_earlier(self, out_dir: str | os.PathLike[str] | Store) -> None:
        """An open hook of this process writing the same run (a notebook cell that builds the
        hook ran again) is closed first: two hooks never write one worker's records."""
        where = _location(out_dir)
        for other in still_open():
            if (
                isinstance(other, Adapter)
                and other is not self
                and not other._closed
                and other.out_dir == where
            ):
                log.warning(
                    "mldbg: an earlier hook of this process still records into %s; closing it first "
                    "(one hook per run: close hooks, or build them in a `with` block)",
                    where,
                )
                other._superseded = True
                other.close()

    @property
    def profiler(self) -> Profiler | None:
        """With a `profiler_config`: the system sampler, step phases and windows."""
        return None if self.session is None else self.session.profiler

    # user values -----------------------------------------------------------------------
    def save_scalar(self, name: str, value: Any) -> None:
        """Record a number (or a one-element tensor) in `scalars` at the current step."""
        self.recorder.save_scalar(name, float(self._to_numpy(value).item()))

    def save_tensor(self, name: str, value: Any, collections: Sequence[str] = ()) -> None:
        """Record your own value; it follows the schedule of `collections` (else the hook's)."""
        self.recorder.save_tensor(name, self._to_numpy(value), tuple(collections))

    # closing ---------------------------------------------------------------------------
    def close(self) -> None:
        """Flush everything and write the end marker, then stop the profiler and let the
        watcher make its final pass. Also runs at interpreter exit; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._release()
        if self.session is not None:
            self.session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _location(out_dir: str | os.PathLike[str] | Store) -> str:
    """The URL a run's store will have (`Store.url`), without opening it."""
    if isinstance(out_dir, Store):
        return out_dir.url
    url = os.fspath(out_dir)
    if "://" in url and not url.startswith("file://"):
        return url.rstrip("/")
    return str(Path(url.removeprefix("file://")).expanduser().absolute())
