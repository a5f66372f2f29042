"""A job for the kill tests: `python kill_script.py OUT FLUSH_SECONDS`. It records steps of one
large and many small tensors and prints `<step> <time.time()>` as each step ends, until killed."""

import sys
import time

import numpy as np

import mldbg
from mldbg.record.recorder import Recorder


def main(out_dir: str, flush_seconds: float) -> None:
    rec = Recorder(
        out_dir,
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        flush_seconds=flush_seconds,
    )
    big = np.random.default_rng(0).standard_normal(16 * 1024).astype(np.float32)  # 64 KiB
    small = np.ones(64, np.float32)
    names = [f"small{i}" for i in range(200)]
    step = 0
    while True:
        rec.start_step()
        rec.save("big", big + step, rec.plan("big", ()))
        for name in names:
            rec.save(name, small * step, rec.plan(name, ()))
        rec.end_step()
        print(step, time.time(), flush=True)
        step += 1
        time.sleep(0.002)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
