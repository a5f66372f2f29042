"""One process of `test_mxnet_stress`: `python stress_child.py OUT_DIR ROUNDS STEPS`.

Trains ROUNDS hooked static_alloc hybridized CNNs (the two lines: statistics on, host copies
at every forward), each a fresh net dropped afterwards as cyclic garbage, and builds and drops
a small hybridized block at every step, with the garbage collector's threshold low so
collections run often, on whichever thread allocates (the writer thread too), and, while a
hook is open, a thread named as mldbg's threads collects every few milliseconds, so the case
is met in every run. Counts, by thread, the MXNet frees (`MXNDArrayFree`, `MXFreeCachedOp`,
`NNSymbolFree`) and prints them as JSON with the handles the hooks deferred. A segmentation
fault ends the process with -11 and faulthandler's tracebacks on stderr."""

from __future__ import annotations

import collections
import faulthandler
import gc
import json
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

faulthandler.enable()
warnings.simplefilter("ignore")  # mxnet's own DeprecationWarnings, the hybridized warning

import mxnet as mx  # noqa: E402
from mxnet import autograd, gluon, nd  # noqa: E402
from mxnet.base import _LIB  # noqa: E402
from test_mxnet_models import cnn, images  # noqa: E402

import mldbg.mxnet  # noqa: E402

FREES = ("MXNDArrayFree", "MXFreeCachedOp", "NNSymbolFree")
freed: collections.Counter[str] = collections.Counter()


def counting(name: str) -> None:
    original = getattr(_LIB, name)

    def free(handle: Any) -> Any:
        thread = threading.current_thread().name
        freed[
            "mldbg" if thread.startswith("mldbg-") else "training" if thread == "MainThread" else "other"
        ] += 1
        return original(handle)

    setattr(_LIB, name, free)


def throwaway(x: Any) -> None:
    """A hybridized block built and dropped inside the loop, as some training code does: cyclic
    garbage holding NDArrays and a static_alloc CachedOp, young, so an early collection frees it."""
    block = gluon.nn.Dense(4, in_units=64)
    block.initialize()
    block.hybridize(static_alloc=True, static_shape=True)
    block(nd.array(x.reshape(len(x), -1))).wait_to_read()


def collecting(done: threading.Event, hooked: threading.Event, lock: threading.Lock) -> None:
    """Collections on a thread named as mldbg's are, every few milliseconds while a hook is
    open: what the writer thread does now and then, when its allocations make one due."""
    while not done.wait(0.002):
        with lock:
            if hooked.is_set():
                gc.collect(1)


def main(out_dir: Path, rounds: int, steps: int) -> None:
    for name in FREES:
        counting(name)
    gc.set_threshold(50, 2, 2)
    done, hooked, lock = threading.Event(), threading.Event(), threading.Lock()
    collector = threading.Thread(
        target=collecting, args=(done, hooked, lock), name="mldbg-stress-collector", daemon=True
    )
    collector.start()
    deferred = 0
    x, y = images(steps * 16)
    for r in range(rounds):
        net = cnn(dropout=0.2)
        net.hybridize(static_alloc=True, static_shape=True)
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        with mldbg.mxnet.Hook(out_dir / str(r)) as hook:
            hooked.set()
            hook.register_block(net)
            hook.register_loss(loss_fn)
            for step in range(steps):
                batch = slice(step * 16, (step + 1) * 16)
                with autograd.record():
                    loss = loss_fn(net(nd.array(x[batch])), nd.array(y[batch]))
                loss.backward()
                trainer.step(16)
                throwaway(x[batch])
            with lock:  # the hook closes: the collector waits for the next one
                hooked.clear()
        deferred += getattr(getattr(hook, "_frees", None), "deferred", 0)
        del net, loss_fn, trainer, loss  # cyclic garbage now: freed by a later collection
    done.set()
    collector.join()
    mx.nd.waitall()
    print(json.dumps({"freed": dict(freed), "deferred": deferred}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
