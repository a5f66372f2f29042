"""`ProfilerConfig`: what the profiler records. A plain value; JSON lives in `from_dict`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mldbg.errors import InvalidConfig, did_you_mean

Window = tuple[int, int]  # (start_step, num_steps)


@dataclass(frozen=True)
class ProfilerConfig:
    """Passed to a hook as `profiler_config=`.

    - `system_interval_ms`: sample CPU, memory, disk, network, I/O wait and GPUs this often
      (None or 0: no system metrics).
    - `step_phases`: time every step and its phases (data loading, forward, backward,
      optimizer step).
    - `torch_profiler`: `(start_step, num_steps)`: capture that window of global steps with
      `torch.profiler` and save it as a Chrome trace plus a table of top operators.
    - `python_profiler`: `(start_step, num_steps)`: profile that window with cProfile.
    - `flush_seconds`: how often buffered samples are written to the store (a small file per
      stream each time).
    - `node_metrics`: sample the node-wide metrics in this process. None: only the first
      process of each node (`LOCAL_RANK` unset or 0), so a node with eight workers is sampled
      once; every worker always samples its own process.
    """

    system_interval_ms: int | None = 500
    step_phases: bool = True
    torch_profiler: Window | None = None
    python_profiler: Window | None = None
    flush_seconds: float = 10.0
    node_metrics: bool | None = None

    def __post_init__(self) -> None:
        interval = self.system_interval_ms
        if interval is not None:
            try:
                interval = int(interval)
            except (TypeError, ValueError):
                raise InvalidConfig(
                    f"ProfilerConfig.system_interval_ms must be a number of milliseconds, got {interval!r}"
                ) from None
            if interval != 0 and interval < 20:
                raise InvalidConfig(
                    f"ProfilerConfig.system_interval_ms={interval} is too short: use 20 ms or more "
                    "(500 ms is the default), or None for no system metrics"
                )
            object.__setattr__(self, "system_interval_ms", interval or None)
        for attr in ("torch_profiler", "python_profiler"):
            object.__setattr__(self, attr, _window(attr, getattr(self, attr)))
        if float(self.flush_seconds) <= 0:
            raise InvalidConfig(f"ProfilerConfig.flush_seconds must be > 0, got {self.flush_seconds!r}")
        object.__setattr__(self, "flush_seconds", float(self.flush_seconds))
        object.__setattr__(self, "step_phases", bool(self.step_phases))

    @property
    def interval_seconds(self) -> float | None:
        return None if self.system_interval_ms is None else self.system_interval_ms / 1000.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "system_interval_ms": self.system_interval_ms,
            "step_phases": self.step_phases,
            "torch_profiler": list(self.torch_profiler) if self.torch_profiler else None,
            "python_profiler": list(self.python_profiler) if self.python_profiler else None,
            "flush_seconds": self.flush_seconds,
            "node_metrics": self.node_metrics,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProfilerConfig:
        allowed = set(cls.__dataclass_fields__)
        unknown = set(data) - allowed
        if unknown:
            raise InvalidConfig(
                f"ProfilerConfig: unknown setting(s) {sorted(unknown)}; allowed: {sorted(allowed)}"
                + did_you_mean(sorted(unknown)[0], allowed)
            )
        return cls(**dict(data))


def _window(attr: str, value: Any) -> Window | None:
    """(start_step, num_steps) from a tuple, a list, a dict or a "start,num" string."""
    if value is None or value is False:
        return None
    if isinstance(value, str):
        value = [v for v in value.replace(":", ",").split(",") if v.strip()]
    if isinstance(value, Mapping):
        value = (value.get("start_step", 0), value.get("num_steps", 1))
    if not isinstance(value, Sequence) or len(value) != 2:
        raise InvalidConfig(f"ProfilerConfig.{attr} must be (start_step, num_steps), got {value!r}")
    try:
        start, num = int(value[0]), int(value[1])
    except (TypeError, ValueError):
        raise InvalidConfig(
            f"ProfilerConfig.{attr} must be two integers (start_step, num_steps), got {value!r}"
        ) from None
    if start < 0 or num < 1:
        raise InvalidConfig(
            f"ProfilerConfig.{attr}: start_step must be >= 0 and num_steps >= 1, got {value!r}"
        )
    return (start, num)
