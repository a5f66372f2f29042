"""One process of `test_mxnet_engine_reads`: `python engine_reads_child.py STEPS`.

Trains the static_alloc hybridized CNN and copies its first convolution's weight to the host
with `host_copy` right after each forward is issued, while MXNet's engine may still be running
that forward, which reads the weight (with `asnumpy()` in its place this crashed every run of
300 steps inside `asnumpy()`, also with MXNet's default single CPU worker). An evaluation pass
every 20 steps, as in the hook's tests. Prints `done` and the copies' checksum."""

from __future__ import annotations

import faulthandler
import sys
import warnings

faulthandler.enable()
warnings.simplefilter("ignore")  # mxnet's own DeprecationWarnings

import numpy as np  # noqa: E402
from mxnet import autograd, gluon, nd  # noqa: E402
from test_mxnet_models import cnn, images  # noqa: E402

from mldbg.frameworks.mxnet import host_copy  # noqa: E402


def main(steps: int) -> None:
    x, y = images(steps * 16)
    net = cnn(dropout=0.2)
    net.hybridize(static_alloc=True, static_shape=True)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
    weight = net[0].weight
    total = 0.0
    for step in range(steps):
        batch = slice(step * 16, (step + 1) * 16)
        xb, yb = nd.array(x[batch]), nd.array(y[batch])
        with autograd.record():
            out = net(xb)
            total += float(np.abs(host_copy(weight.data())).sum())
            loss = loss_fn(out, yb)
        loss.backward()
        trainer.step(16)
        if (step + 1) % 20 == 0:
            net(nd.array(x[:16]))
    print("done", total)


if __name__ == "__main__":
    main(int(sys.argv[1]))
