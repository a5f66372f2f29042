"""The writer's guarantees under stress (RELIABILITY.md): a full disk, a stalled store, kills.

    python benchmarks/writer_reliability.py full-disk [--steps 600]     (root: mounts a tmpfs)
    python benchmarks/writer_reliability.py memory [--steps 200]
    python benchmarks/writer_reliability.py kills [--kills 20] [--flush 0.25]

`full-disk`: a tiny PyTorch training recorded on an 8 MiB tmpfs with `max_queue_bytes` 24 MiB
(the adversarial run of issue 16); the disk fills at once (a filler file), a third of the way
in the filler is removed (and the run may fill the disk again). Prints the slowest step, the
steps recorded (after the space came back too) and lost. `memory`: peak RSS growth (VmHWM) of a process recording on a store that
never answers, for scalars under a 1 MiB bound and 2,000 1-KiB tensors a step under the 512 MiB
default. `kills`: SIGKILLs at random moments of tests/record/kill_script.py; the age of the
oldest step lost (it must stay under `flush_seconds`) and the temp files left, then cleaned.
Each prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def full_disk(steps: int) -> dict:
    import torch
    from torch import nn

    import mldbg
    import mldbg.torch

    with tempfile.TemporaryDirectory() as d:
        mnt = Path(d) / "disk"
        mnt.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], check=True)
        try:
            filler = mnt / "filler"
            filler.write_bytes(b"\0" * (15 << 19))  # 7.5 MiB
            torch.manual_seed(0)
            model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 10))
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            loss_fn = nn.CrossEntropyLoss()
            hook = mldbg.torch.Hook(
                mnt / "run", save_config=mldbg.SaveConfig(save_interval=1), max_queue_bytes=24 << 20
            )
            hook.register_module(model)
            hook.register_loss(loss_fn)
            slowest, t_all = 0.0, time.perf_counter()
            for step in range(steps):
                if step == steps // 3:
                    filler.unlink()  # space comes back
                t0 = time.perf_counter()
                opt.zero_grad()
                loss_fn(model(torch.randn(32, 32)), torch.randint(0, 10, (32,))).backward()
                opt.step()
                if step >= 10:  # after the warm-up of the first steps
                    slowest = max(slowest, time.perf_counter() - t0)
            writer = hook.recorder.writer
            hook.close()
            trial = mldbg.create_trial(mnt / "run")
            saved = trial.steps()
            return {
                "steps": steps,
                "slowest_step_ms": round(slowest * 1e3, 1),
                "train_s": round(time.perf_counter() - t_all, 2),
                "blocked_s": round(writer.blocked_seconds, 3),
                "saved_steps": len(saved),
                "last_saved": saved[-1] if saved else None,
                "lost_records": trial.lost_records,
                "lost": trial.lost(),
                "freed_at_step": steps // 3,
                "saved_after_space_came_back": len([s for s in saved if s >= steps // 3]),
            }
        finally:
            subprocess.run(["umount", "-l", str(mnt)], check=False)


def _memory_worker(kind: str, steps: int) -> dict:
    import warnings

    import mldbg
    from mldbg.record.recorder import Recorder
    from mldbg.store import LocalStore

    class Stalled(LocalStore):
        def write(self, key, parts):
            if "/data/" in key or "/index/" in key:
                threading.Event().wait()  # never answers
            super().write(key, parts)

    def hwm() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return 0

    bound = 1 << 20 if kind == "scalars" else 512 << 20
    names = [f"t{j}" for j in range(2000)]
    arrays = [np.ones(256, np.float32) for _ in range(2)]
    rec = Recorder(
        Stalled(tempfile.mkdtemp()),
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        max_queue_bytes=bound,
        when_full="drop",
    )
    base = hwm()
    warnings.simplefilter("ignore")
    for i in range(steps):
        rec.start_step()
        if kind == "scalars":
            rec.save_scalar("loss", float(i))
            rec.save_scalar("lr", 0.1)
        else:
            for name in names:
                rec.save(name, arrays[i % 2] * 1, rec.plan(name, ()))
        rec.end_step()
    return {
        "kind": kind,
        "bound_mib": bound >> 20,
        "steps": steps,
        "peak_growth_mib": round((hwm() - base) / 2**20, 1),
        "dropped": rec.writer.dropped if rec.writer else 0,
    }


def memory(steps: int) -> list[dict]:
    out = []
    for kind, n in (("scalars", steps * 200), ("small_tensors", steps)):
        res = subprocess.run(
            [sys.executable, __file__, "_memory", kind, str(n)], capture_output=True, text=True, check=True
        )
        out.append(json.loads(res.stdout.strip().splitlines()[-1]))
    return out


def kills(n: int, flush: float) -> dict:
    import mldbg
    from mldbg.store import LocalStore

    rng = random.Random(16)
    script = ROOT / "tests" / "record" / "kill_script.py"
    ages, temp_left, temp_cleaned = [], 0, 0
    with tempfile.TemporaryDirectory() as d:
        for k in range(n):
            out = Path(d) / f"run{k}"
            proc = subprocess.Popen(
                [sys.executable, str(script), str(out), str(flush)], stdout=subprocess.PIPE, text=True
            )
            assert proc.stdout is not None
            lines = [proc.stdout.readline()]
            time.sleep(rng.uniform(0.3, 1.5))
            killed = time.time()
            os.kill(proc.pid, signal.SIGKILL)
            lines += proc.stdout.read().splitlines()
            proc.wait()
            ends = {int(s): float(t) for s, t in (ln.split() for ln in lines if ln.strip())}
            saved = set(mldbg.create_trial(out).steps())
            ages.append(
                max((killed - t for s, t in ends.items() if s not in saved and t < killed), default=0.0)
            )
            left = [p for p in out.rglob("*") if ".tmp-" in p.name]
            temp_left += len(left)
            temp_cleaned += len(LocalStore(out).clean_temp("workers/worker_0/"))
    return {
        "kills": n,
        "flush_seconds": flush,
        "oldest_lost_step_s": round(max(ages), 3),
        "median_lost_age_s": round(sorted(ages)[len(ages) // 2], 3),
        "temp_files_left": temp_left,
        "temp_files_cleaned": temp_cleaned,
    }


def main() -> None:
    if sys.argv[1:2] == ["_memory"]:
        print(json.dumps(_memory_worker(sys.argv[2], int(sys.argv[3]))))
        return
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["full-disk", "memory", "kills"])
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--flush", type=float, default=0.25)
    a = p.parse_args()
    if a.what == "full-disk":
        print(json.dumps(full_disk(a.steps or 600)))
    elif a.what == "memory":
        print(json.dumps(memory(a.steps or 200)))
    else:
        print(json.dumps(kills(a.kills, a.flush)))


if __name__ == "__main__":
    main()
