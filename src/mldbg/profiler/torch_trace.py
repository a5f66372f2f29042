"""torch.profiler over a window of steps: a Chrome trace (gzip; chrome://tracing and
ui.perfetto.dev open it) and a JSON table of the top operators.

Only `mldbg.torch.Hook` makes one (through `Profiler(framework="torch")`), so torch is
imported here only when a torch window was asked for.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from typing import Any

from mldbg.profiler import layout
from mldbg.profiler.windows import TOP
from mldbg.store.base import Store


class TorchCapture:
    kind = "torch"

    def __init__(self, store: Store, worker: str):
        self.store = store
        self.worker = worker
        self.prof: Any = None

    def start(self) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self.prof = profile(activities=activities, record_shapes=False, with_stack=False)
        self.prof.start()

    def stop(self, first: int, last: int) -> None:
        prof, self.prof = self.prof, None
        prof.stop()
        fd, path = tempfile.mkstemp(suffix=".json", prefix="mldbg-trace-")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path, "rb") as f:
                trace = gzip.compress(f.read(), compresslevel=5)
        finally:
            os.unlink(path)
        self.store.write(layout.window_key(self.worker, "torch", first, last, ".trace.json.gz"), [trace])
        rows = []
        for e in prof.key_averages():
            rows.append(
                {
                    "name": e.key,
                    "count": int(e.count),
                    "cpu_total_us": float(e.cpu_time_total),
                    "self_cpu_us": float(e.self_cpu_time_total),
                    "device_total_us": float(getattr(e, "device_time_total", 0.0) or 0.0),
                    "self_device_us": float(getattr(e, "self_device_time_total", 0.0) or 0.0),
                }
            )
        rows.sort(key=lambda r: -(r["self_cpu_us"] + r["self_device_us"]))
        summary = {"steps": [first, last], "operators": rows[:TOP]}
        self.store.write(
            layout.window_key(self.worker, "torch", first, last, ".ops.json"), [json.dumps(summary).encode()]
        )
