"""What every framework hook owns besides its framework glue.

A `RecordingSession` holds the Recorder, the optional profiler (`profiler_config=`) and the
optional live watcher (`rules=`, `actions=`), and closes them in the right order. Adapters
build one and keep only the framework's lifecycle for themselves.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from mldbg.record.recorder import Recorder
from mldbg.store.base import Store


class RecordingSession:
    def __init__(
        self,
        out_dir: str | os.PathLike[str] | Store,
        *,
        framework: str,
        rank: int = 0,
        world_size: int = 1,
        profiler_config: Any = None,
        rules: Sequence[Any] | None = None,
        actions: Sequence[Any] | None = None,
        **recorder_settings: Any,
    ):
        self.recorder = Recorder(
            out_dir, rank=rank, world_size=world_size, framework=framework, **recorder_settings
        )
        self.profiler: Any = None  # mldbg.profiler.session.Profiler
        self.timeline: Any = None  # its step timeline, marked by the adapter
        if profiler_config is not None:
            from mldbg.profiler.session import Profiler

            self.profiler = Profiler(self.recorder.store, profiler_config, rank=rank, framework=framework)
            self.timeline = self.profiler.timeline
        self.watcher: Any = None  # rules checked live by a child process, from one line
        if (rules is not None or actions) and rank == 0:
            from mldbg.watch.inprocess import start_watcher

            self.watcher = start_watcher(self.recorder.store.url, rules, actions or ())

    def close(self) -> None:
        """Write everything and the end marker; then stop the profiler, and let the watcher
        make its final pass over the closed run."""
        try:
            self.recorder.close()
        finally:
            if self.profiler is not None:
                self.profiler.close()
            if self.watcher is not None:
                self.watcher.stop(timeout=10)
                self.watcher = None
