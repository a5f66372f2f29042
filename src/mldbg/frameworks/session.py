"""What a hook composes around its Recorder: the store, the profiler and the live watcher.

The recorder only records into the store it is given. A hook's `Session` opens that store
(with the S3 options, such as `spill_max_bytes`, that only the store knows), hands it to the
Recorder, starts the profiler (`profiler_config=`) and the watcher child (`rules=`,
`actions=`), and closes them in order. Adapters build one and keep only the framework's
lifecycle for themselves.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mldbg.errors import InvalidConfig, did_you_mean
from mldbg.profiler.config import ProfilerConfig
from mldbg.profiler.timeline import NoTimeline, Timeline
from mldbg.record.recorder import Recorder
from mldbg.record.validation import check_out_dir
from mldbg.store import Store, open_store
from mldbg.store.s3.options import S3Options

if TYPE_CHECKING:  # both load only for a hook that uses them
    from mldbg.profiler.session import CaptureFactory, Profiler
    from mldbg.watch.inprocess import WatcherProcess

# every other keyword a hook is given is the store's (S3 options; the store refuses unknown ones)
# (the session itself says which worker records: rank, world size and framework come from it)
RECORDER_KEYWORDS = frozenset(inspect.signature(Recorder).parameters) - {
    "store",
    "rank",
    "world_size",
    "framework",
}
STORE_KEYWORDS = frozenset(f.name for f in dataclasses.fields(S3Options))


@dataclass(frozen=True)
class Worker:
    """Who records: the framework (name and version, written in the run's meta) and the rank."""

    framework: str
    rank: int = 0
    world_size: int = 1

    @classmethod
    def from_environment(cls, framework: str) -> Worker:
        """Rank and world size from `RANK` and `WORLD_SIZE`, as launchers such as torchrun set them."""
        return cls(framework, int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)))


class Session:
    """One hook's run: its store, Recorder, profiler (or none) and watcher (or none)."""

    def __init__(
        self,
        out_dir: str | os.PathLike[str] | Store,
        worker: Worker,
        *,
        profiler_config: ProfilerConfig | None = None,
        rules: Sequence[Any] | None = None,
        actions: Sequence[Any] | None = None,
        captures: Mapping[str, CaptureFactory] | None = None,
        **settings: Any,
    ):
        """`settings`: the Recorder's keywords (`overwrite` and `resume` among them: a run
        already in `out_dir` is refused without one), and the store's (S3) options."""
        _refuse_unknown(settings)
        settings = checked_settings(settings)
        if profiler_config is not None:
            profiler_config = _as_config("profiler_config", profiler_config, ProfilerConfig)
        recording = {k: v for k, v in settings.items() if k in RECORDER_KEYWORDS}
        store_options = {k: v for k, v in settings.items() if k not in RECORDER_KEYWORDS}
        check_out_dir(out_dir)
        self.store = open_store(out_dir, **store_options)
        try:  # refused (a run already there, a bad setting): the store lets go of what it holds
            self.recorder = Recorder(
                self.store,
                rank=worker.rank,
                world_size=worker.world_size,
                framework=worker.framework,
                **recording,
            )
        except BaseException:
            self.store.close()
            raise
        self.profiler: Profiler | None = None
        self.timeline: Timeline = NoTimeline()  # marked by the adapter, profiler or not
        if profiler_config is not None:
            from mldbg.profiler.session import Profiler

            self.profiler = Profiler(
                self.store, profiler_config, rank=worker.rank, framework=worker.framework, captures=captures
            )
            self.timeline = self.profiler.timeline
        self.watcher: WatcherProcess | None = None  # rules checked live by a child process
        if (rules is not None or actions) and worker.rank == 0:
            from mldbg.watch.inprocess import start_watcher

            self.watcher = start_watcher(self.store.url, rules, actions or ())

    def close(self) -> None:
        """Write everything and the end marker; then stop the profiler, and let the watcher
        make its final pass over the closed run. Safe to call twice."""
        try:
            self.recorder.close()
        finally:
            if self.profiler is not None:
                self.profiler.close()
            if self.watcher is not None:
                self.watcher.stop(timeout=10)
                self.watcher = None


def check_options(options: Mapping[str, Any], adapter_keywords: Iterable[str]) -> dict[str, Any]:
    """A hook's options checked without opening its run (a trainer's callback builds its hook
    only when the fit starts): every name known, each value as `checked_settings` wants it."""
    known = set(adapter_keywords) | RECORDER_KEYWORDS | STORE_KEYWORDS
    for name in options:
        if name not in known:
            raise InvalidConfig(
                f"unknown hook option {name!r}{_option_hint(name, known)} (the options: "
                f"{', '.join(sorted(known - STORE_KEYWORDS))}; an s3:// run's: {', '.join(sorted(STORE_KEYWORDS))})"
            )
    return checked_settings(options)


def checked_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The hook's settings with their types checked where a wrong one would fail only later (at
    the first step) or silently: a `save_config`, `reduction_config` or `collection_configs`
    entry may be given as a mapping (as in a JSON config) and is built, and checked, here;
    `overwrite`, `resume`, `save_all` are True or False."""
    from mldbg.config import CollectionConfig, ReductionConfig, SaveConfig

    out = dict(settings)
    for key, cls in (
        ("save_config", SaveConfig),
        ("reduction_config", ReductionConfig),
        ("profiler_config", ProfilerConfig),
    ):
        if out.get(key) is not None:
            out[key] = _as_config(key, out[key], cls)
    configs = out.get("collection_configs")
    if configs is not None:
        if isinstance(configs, (str, bytes, Mapping, CollectionConfig)) or not hasattr(configs, "__iter__"):
            raise InvalidConfig(
                f"collection_configs must be a list of mldbg.CollectionConfig(name, include_regex=...), got {configs!r}"
            )
        out["collection_configs"] = [_as_config("collection_configs", c, CollectionConfig) for c in configs]
    if out.get("rules") is not None:
        from mldbg.watch.inprocess import checked_rules

        out["rules"] = checked_rules(out["rules"])
    for key in ("overwrite", "resume", "save_all"):
        if key in out and not isinstance(out[key], bool):
            raise InvalidConfig(f"hook option {key}={out[key]!r} must be True or False")
    return out


def _as_config(key: str, value: Any, cls: type[Any]) -> Any:
    """`value` as a `cls`: itself, or built from a mapping of its settings (checked there)."""
    if isinstance(value, cls):
        return value
    if isinstance(value, Mapping):
        return cls.from_dict(value)
    raise InvalidConfig(
        f"hook option {key}={value!r} must be a mldbg.{cls.__name__}(...) (or a mapping of its settings), "
        f"not a {type(value).__name__}"
    )


def _refuse_unknown(settings: Mapping[str, Any]) -> None:
    """A misspelled hook keyword is named, with the closest real one."""
    known = RECORDER_KEYWORDS | STORE_KEYWORDS
    for name in settings:
        if name not in known:
            hint = _option_hint(name, known)
            raise InvalidConfig(
                f"unknown hook option {name!r}{hint} (the writer's: {', '.join(sorted(RECORDER_KEYWORDS))}; "
                f"an s3:// run's: {', '.join(sorted(STORE_KEYWORDS))})"
            )


def _option_hint(name: str, known: Iterable[str]) -> str:
    """The closest hook option to `name`; a setting of `SaveConfig` closer than any option
    (`save_interval`, as smdebug users may pass it) is shown where it goes."""
    from mldbg.config import SaveConfig

    def best(options: Iterable[str]) -> tuple[float, str]:
        return max(((difflib.SequenceMatcher(None, name, o).ratio(), o) for o in options), default=(0.0, ""))

    field_score, field = best(f.name for f in dataclasses.fields(SaveConfig))
    if field_score >= 0.8 and field_score > best(known)[0]:
        return f"; {field} is a setting of the save schedule: save_config=mldbg.SaveConfig({field}=...)"
    return did_you_mean(name, sorted(known))
