"""ProfilerConfig: defaults of API.md, validation with useful messages, JSON boundary."""

import subprocess
import sys

import pytest

import mldbg
from mldbg.errors import InvalidConfig
from mldbg.profiler import ProfilerConfig


def test_defaults_and_public_name():
    cfg = mldbg.ProfilerConfig()
    assert cfg is not None and type(cfg) is ProfilerConfig
    assert (cfg.system_interval_ms, cfg.step_phases, cfg.torch_profiler, cfg.python_profiler) == (
        500,
        True,
        None,
        None,
    )
    assert cfg.interval_seconds == 0.5


def test_windows_are_start_and_count():
    cfg = ProfilerConfig(torch_profiler=[10, 5], python_profiler={"start_step": 3, "num_steps": 2})
    assert cfg.torch_profiler == (10, 5) and cfg.python_profiler == (3, 2)
    assert ProfilerConfig(torch_profiler="7,2").torch_profiler == (7, 2)
    assert ProfilerConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"system_interval_ms": 5}, "too short"),
        ({"system_interval_ms": "fast"}, "milliseconds"),
        ({"torch_profiler": (3,)}, "start_step, num_steps"),
        ({"python_profiler": (-1, 2)}, ">= 0"),
        ({"torch_profiler": (0, 0)}, "num_steps >= 1"),
        ({"flush_seconds": 0}, "flush_seconds"),
    ],
)
def test_bad_settings_name_the_setting(kwargs, words):
    with pytest.raises(InvalidConfig, match=words):
        ProfilerConfig(**kwargs)


def test_from_dict_rejects_unknown_keys():
    with pytest.raises(InvalidConfig, match="unknown setting"):
        ProfilerConfig.from_dict({"interval": 100})


def test_no_system_metrics():
    assert ProfilerConfig(system_interval_ms=None).interval_seconds is None
    assert ProfilerConfig(system_interval_ms=0).system_interval_ms is None


def test_import_is_light():
    """Importing the profiler (or its config) loads neither psutil, NVML nor torch."""
    code = (
        "import sys, mldbg, mldbg.profiler; mldbg.ProfilerConfig(torch_profiler=(1, 2));"
        "import mldbg.profiler.read, mldbg.profiler.timeline;"
        "bad = [m for m in ('psutil', 'pynvml', 'torch') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
