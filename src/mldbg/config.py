"""What to save and when: modes, save schedules, reductions and collections.

These are plain values. JSON lives at the boundary (`from_dict`); the hot path only calls
`SaveConfig.should_save(mode, mode_step)`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mldbg.errors import InvalidConfig, did_you_mean
from mldbg.store.reductions import NORMS, STATISTICS


class Mode(enum.IntEnum):
    """The phase a step belongs to. Values match smdebug's `modes`."""

    TRAIN = 1
    EVAL = 2
    PREDICT = 3
    GLOBAL = 4

    @classmethod
    def parse(cls, value: Mode | str | int) -> Mode:
        if isinstance(value, Mode):
            return value
        try:
            if isinstance(value, str):
                return cls[value.strip().upper()]
            return cls(int(value))
        except (KeyError, ValueError):
            raise InvalidConfig(
                f"unknown mode {value!r}: use one of {', '.join(m.name for m in cls)}"
                + did_you_mean(value, [m.name for m in cls])
            ) from None


@dataclass(frozen=True)
class SaveConfig:
    """When to save: every `save_interval` steps of a mode, or exactly at `save_steps`.

    Steps here are the mode's own step count (the n-th training step, the n-th eval step),
    as in smdebug. `mode_save_configs` gives a mode its own schedule.
    """

    save_interval: int = 500
    save_steps: tuple[int, ...] | None = None
    start_step: int = 0
    end_step: int | None = None
    mode_save_configs: Mapping[Mode, SaveConfig] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "save_interval", _whole("save_interval", self.save_interval, 1))
        object.__setattr__(self, "start_step", _whole("start_step", self.start_step, 0))
        if self.end_step is not None:
            object.__setattr__(self, "end_step", _whole("end_step", self.end_step, 0))
        if self.save_steps is not None:
            steps = self.save_steps
            if isinstance(steps, (int, str)) or not hasattr(steps, "__iter__"):
                raise InvalidConfig(f"SaveConfig.save_steps must be a list of steps, got {steps!r}")
            object.__setattr__(self, "save_steps", tuple(sorted({_whole("save_steps", s, 0) for s in steps})))
        if self.mode_save_configs is not None:
            modes = {Mode.parse(k): _as_save_config(v) for k, v in self.mode_save_configs.items()}
            object.__setattr__(self, "mode_save_configs", modes)

    def for_mode(self, mode: Mode) -> SaveConfig:
        if self.mode_save_configs and mode in self.mode_save_configs:
            return self.mode_save_configs[mode]
        return self

    def should_save(self, mode: Mode, mode_step: int) -> bool:
        cfg = self.for_mode(mode)
        if mode_step < cfg.start_step or (cfg.end_step is not None and mode_step >= cfg.end_step):
            return False
        if cfg.save_steps is not None:
            return mode_step in cfg.save_steps
        return (mode_step - cfg.start_step) % cfg.save_interval == 0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SaveConfig:
        data = dict(data)
        modes = data.pop("mode_save_configs", None)
        _check_keys("SaveConfig", data, {"save_interval", "save_steps", "start_step", "end_step"})
        if modes is not None:
            data["mode_save_configs"] = {Mode.parse(k): cls.from_dict(v) for k, v in modes.items()}
        if isinstance(data.get("save_steps"), str):
            data["save_steps"] = [int(s) for s in data["save_steps"].split(",") if s.strip()]
        return cls(**data)


def _whole(key: str, value: Any, low: int) -> int:
    """A SaveConfig step setting as an int >= `low` (a whole float or numeric text is taken)."""
    try:
        number = int(value)
        whole = not isinstance(value, bool) and float(value) == number
    except (TypeError, ValueError):
        whole = False
    if not whole or number < low:
        raise InvalidConfig(f"SaveConfig.{key} must be a whole number >= {low}, got {value!r}")
    return number


def _as_save_config(value: SaveConfig | Mapping[str, Any]) -> SaveConfig:
    return value if isinstance(value, SaveConfig) else SaveConfig.from_dict(value)


# the names ReductionConfig accepts come from the store's one table of reductions
REDUCTIONS = STATISTICS


@dataclass(frozen=True)
class ReductionConfig:
    """Save reductions of a tensor instead of (or besides) the tensor itself.

    `abs_reductions` and `abs_norms` apply to |x|. With `save_raw_tensor=False` only the
    reductions (and the shape, if `save_shape`) are written.
    """

    reductions: tuple[str, ...] = ()
    abs_reductions: tuple[str, ...] = ()
    norms: tuple[str, ...] = ()
    abs_norms: tuple[str, ...] = ()
    save_raw_tensor: bool = False
    save_shape: bool = False

    def __post_init__(self) -> None:
        for attr, allowed in (
            ("reductions", REDUCTIONS),
            ("abs_reductions", REDUCTIONS),
            ("norms", NORMS),
            ("abs_norms", NORMS),
        ):
            values = getattr(self, attr)
            if isinstance(values, str):
                values = [v.strip() for v in values.split(",") if v.strip()]
            values = tuple(values)
            bad = [v for v in values if v not in allowed]
            if bad:
                raise InvalidConfig(
                    f"ReductionConfig.{attr}: unknown {bad}; choose from {', '.join(allowed)}"
                    + did_you_mean(bad[0], allowed)
                )
            object.__setattr__(self, attr, values)

    @property
    def requested(self) -> tuple[tuple[str, bool], ...]:
        """(reduction name, abs) pairs, in a stable order."""
        return tuple(
            [(r, False) for r in self.reductions + self.norms]
            + [(r, True) for r in self.abs_reductions + self.abs_norms]
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReductionConfig:
        _check_keys("ReductionConfig", data, set(cls.__dataclass_fields__))
        return cls(**data)


@dataclass(frozen=True)
class CollectionConfig:
    """A named group of tensors: by regex, with its own schedule and reductions if given."""

    name: str
    include_regex: tuple[str, ...] | None = None
    save_config: SaveConfig | None = None
    reduction_config: ReductionConfig | None = None
    patterns: tuple[re.Pattern[str], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise InvalidConfig(f"CollectionConfig needs a non-empty name, got {self.name!r}")
        regex = self.include_regex
        if isinstance(regex, str):
            regex = (regex,)
        if regex is not None:
            regex = tuple(regex)
            object.__setattr__(self, "include_regex", regex)
            object.__setattr__(self, "patterns", compile_patterns(regex, f"collection {self.name!r}"))
        if isinstance(self.save_config, Mapping):
            object.__setattr__(self, "save_config", SaveConfig.from_dict(self.save_config))
        if isinstance(self.reduction_config, Mapping):
            rc = ReductionConfig.from_dict(self.reduction_config)
            object.__setattr__(self, "reduction_config", rc)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CollectionConfig:
        _check_keys("CollectionConfig", data, {"name", "include_regex", "save_config", "reduction_config"})
        return cls(**data)


def compile_patterns(regexes: Iterable[str], where: str) -> tuple[re.Pattern[str], ...]:
    out = []
    for rx in regexes:
        try:
            out.append(re.compile(rx))
        except re.error as e:
            raise InvalidConfig(f"{where}: invalid regex {rx!r}: {e}") from None
    return tuple(out)


def _check_keys(what: str, data: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = set(data) - allowed
    if unknown:
        first = sorted(unknown)[0]
        raise InvalidConfig(
            f"{what}: unknown setting(s) {sorted(unknown)}; allowed: {sorted(allowed)}"
            + did_you_mean(first, allowed)
        )
