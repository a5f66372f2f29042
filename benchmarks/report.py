"""Shared bits of the benchmark scripts: the machine description, result files, tables.

Every script writes `benchmarks/results/<name>.json` (the numbers) and
`benchmarks/results/<name>.md` (its section of BENCHMARKS.md); `run_all.py` splices the
sections into BENCHMARKS.md between `<!-- bench:<name> -->` markers.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
BENCH_VENV = Path(os.environ.get("MLDBG_BENCH_VENV", ROOT / ".bench-venvs" / "smdebug"))


def machine() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(next(line.split()[1] for line in f if line.startswith("MemTotal")))
        mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        pass
    versions = [f"Python {platform.python_version()}"]
    for mod in ("torch", "numpy", "mldbg"):
        with contextlib.suppress(Exception):
            versions.append(f"{mod} {__import__(mod).__version__}")
    return {
        "cpu": f"{cpu}, {os.cpu_count()} cores{mem}, {platform.system()} {platform.release()}",
        "versions": ", ".join(versions),
        "load": load,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def command() -> str:
    """The command that produced a result, as a user would type it from the repo root."""
    script = Path(sys.argv[0]).resolve()
    with contextlib.suppress(ValueError):
        script = script.relative_to(ROOT)
    return shlex.join(["python", str(script), *sys.argv[1:]])


def save(name: str, result: dict, markdown: str) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1))
    (RESULTS / f"{name}.md").write_text(markdown.rstrip() + "\n")


def publish(name: str, result: dict, markdown: str, save_it: bool = True) -> None:
    """Print a figure's markdown and, unless `--no-save`, keep it under benchmarks/results/."""
    print(markdown)
    if save_it:
        save(name, result, markdown)


def header(result: dict) -> str:
    m = result["machine"]
    return (
        f"Machine: {m['cpu']}; {m['versions']}; load average at start {m['load']} ({m['date']}).\n"
        f"Command: `{result['command']}`\n"
    )


def table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def med(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def spread(xs: Sequence[float]) -> str:
    """min-max across rounds: the noise a reader should see next to a median."""
    return f"{min(xs):.3f}-{max(xs):.3f}" if xs else "-"


def rss_kb(field: str = "VmRSS") -> int:
    try:
        with open("/proc/self/status") as f:
            return int(next(line.split()[1] for line in f if line.startswith(field + ":")))
    except (OSError, StopIteration):
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def tree_size(path: str | os.PathLike[str]) -> tuple[int, int]:
    """(bytes, files) below `path`."""
    total = files = 0
    for dirpath, _, names in os.walk(path):
        for n in names:
            try:
                total += os.path.getsize(os.path.join(dirpath, n))
                files += 1
            except OSError:
                pass
    return total, files
