"""torch.profiler over a window of steps: a Chrome trace (gzip; chrome://tracing and
ui.perfetto.dev open it) and a JSON table of the top operators.

`mldbg.torch.Hook` hands it to its `Profiler` (`captures={"torch": TorchCapture}`), whose
framework-neutral windows start and stop it: the profiler itself never imports torch.
"""

from __future__ import annotations

import gzip
import os
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

from mldbg.profiler.windows import TOP, StoreCapture


class TorchCapture(StoreCapture):
    """torch.profiler over one window, on the training thread (it profiles the thread that starts it)."""

    kind = "torch"

    def start(self) -> None:
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
        self.write(first, last, ".trace.json.gz", trace)
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
        self.write_summary(first, last, ".ops.json", operators=rows[:TOP])
