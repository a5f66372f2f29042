"""The hook's host copies never race MXNet's engine (`mldbg.frameworks.mxnet.host_copy`).

`asnumpy()` waits only for an array's pending writes. The forward the hook has just seen
issued may still be reading the array on an engine worker, and on CPU builds with oneDNN such
a read sets the array's oneDNN memory descriptor in place, so a copy made alongside it can read
freed memory: the segmentation fault inside `asnumpy()` of issue 20, seen in CI with the hook
copying a parameter at a statistics step."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mxnet as mx
import numpy as np
from mxnet import nd

from mldbg.frameworks.mxnet import host_copy

CHILD = Path(__file__).with_name("engine_reads_child.py")
STEPS, WORKERS = 300, ("4", "1", "4")  # MXNET_CPU_WORKER_NTHREADS of each run (1: the default)


def test_a_weight_copied_while_the_forward_reads_it_never_crashes() -> None:
    """Right after each hybridized forward is issued, with MXNet's default single engine worker
    and with four: with `asnumpy()` alone every such run crashed."""
    for workers in WORKERS:
        env = {**os.environ, "MXNET_CPU_WORKER_NTHREADS": workers, "OMP_NUM_THREADS": "2"}
        child = subprocess.run(
            [sys.executable, "-X", "faulthandler", str(CHILD), str(STEPS)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert child.returncode == 0, (
            f"{workers} engine workers: exit {child.returncode} (-11: segmentation fault)\n"
            f"{child.stderr[-3000:]}"
        )
        assert child.stdout.split()[0] == "done"


def test_a_host_copy_waits_for_pending_writes_and_equals_asnumpy() -> None:
    a = nd.arange(12).reshape((3, 4))
    b = a * 2 + 1  # issued to the engine, maybe not run yet
    copy = host_copy(b)
    np.testing.assert_array_equal(copy, np.arange(12).reshape(3, 4) * 2 + 1)
    assert copy.dtype == np.float32
    mx.nd.waitall()
    b += 1  # the copy is the host's own
    assert copy[0, 0] == 1.0
