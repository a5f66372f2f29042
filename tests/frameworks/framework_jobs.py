"""Run a framework job script in its own process (Keras picks its backend at import) and
cache its output directory for the whole test session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
# tiny models: threads only contend on a shared 2-core machine
QUIET_ENV = {
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false",
    "CUDA_VISIBLE_DEVICES": "",
}


def run_job(
    script: str, out: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> dict[str, Any]:
    """Run `script OUT ARGS...`; warnings raised by mldbg's own code fail the job. `timeout`: 10
    minutes, for a loaded 2-core machine (TensorFlow's job took over 5 at load 14)."""
    out.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, **QUIET_ENV, **(env or {})}
    cmd = [sys.executable, "-W", "error:::mldbg", str(HERE / script), str(out), *args]
    proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"{script} {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    return json.loads((out / "manifest.json").read_text())
